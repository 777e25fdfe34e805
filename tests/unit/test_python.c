// SPDX-License-Identifier: BSD-2-Clause
/*
 * CPython support against real interpreters: pyenv's 3.8 to 3.13 (shared libpython), Debian's
 * static python3.11 and the 3.14 interpreters PROFD_TEST_PYTHON314 names (':'-separated paths,
 * e.g. the launchers scripts/fetch-python writes). For each: detection and
 * the sampler's offsets (the test walks the live frames the way the BPF program does), the
 * symbols of known code objects at every instruction, the line decoders against CPython's own
 * tables, the cache's validation with an injected reader. A version whose interpreter is
 * missing is skipped with a message; the test skips (77) only when none is present, and then
 * only if nothing failed before and CI is not "true" (CHECK_SKIP).
 */
#define _GNU_SOURCE
#include "check.h"
#include "grow.h"
#include "python.h"
#include "python_lines.h"
#include "python_offsets.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PY_FIXTURE_DIR
#error "PY_FIXTURE_DIR must name tests/fixtures/python"
#endif

/* --- helpers -------------------------------------------------------------------------------- */

static int peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = {.iov_base = buf, .iov_len = len};
	struct iovec r = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};

	return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

static uint64_t peek_u64(pid_t pid, uint64_t addr)
{
	uint64_t v = 0;

	if (peek(pid, addr, &v, sizeof(v)))
		return 0;
	return v;
}

struct child {
	pid_t pid;
	FILE *out;
};

/* Start argv with its stdout on a pipe. Returns 0 or a negative errno. */
static int spawn(char *const argv[], struct child *c)
{
	int fds[2];

	if (pipe(fds))
		return -errno;
	c->pid = fork();
	if (c->pid < 0)
		return -errno;
	if (c->pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	c->out = fdopen(fds[0], "r");
	return c->out ? 0 : -errno;
}

static void reap(struct child *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	if (c->out)
		fclose(c->out);
	c->pid = 0;
	c->out = NULL;
}

struct interp {
	char label[32];
	char path[PATH_MAX];
	unsigned int minor;
};

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static const char *pyenv_root(void)
{
	const char *r = getenv("PYENV_ROOT");

	return r && r[0] ? r : "/root/.pyenv";
}

/* The first pyenv interpreter of 3.minor, or false. */
static bool find_pyenv(unsigned int major, unsigned int minor, struct interp *it)
{
	char pat[PATH_MAX];
	glob_t g;
	bool ok = false;

	snprintf(pat, sizeof(pat), "%s/versions/%u.%u.*/bin/python%u.%u", pyenv_root(), major,
		 minor, major, minor);
	if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
		snprintf(it->path, sizeof(it->path), "%s", g.gl_pathv[0]);
		snprintf(it->label, sizeof(it->label), "pyenv %u.%u", major, minor);
		it->minor = minor;
		ok = true;
	}
	globfree(&g);
	return ok;
}

/* --- the target's report -------------------------------------------------------------------- */

struct at {
	char kind;
	int64_t value;
	int line;
};

struct code_exp {
	uint64_t id;
	int first;
	char name[256];
	char file[PATH_MAX];
	struct at *ats;
	size_t n, cap;
};

#define MAX_CODES 8
#define MAX_STACK 4

struct report {
	uint64_t runtime, thread;
	struct code_exp codes[MAX_CODES];
	size_t ncodes;
	char stack_name[MAX_STACK][64];
	int stack_line[MAX_STACK];
	size_t nstack;
};

static void report_free(struct report *r)
{
	size_t i;

	for (i = 0; i < r->ncodes; i++)
		free(r->codes[i].ats);
}

/* Read the target's lines up to READY. Returns 0 or -EINVAL. */
static int read_report(FILE *f, struct report *r)
{
	char *line = NULL, *tok[6], *save, *s;
	size_t cap = 0, nt;
	struct code_exp *c;
	int err = -EINVAL;

	memset(r, 0, sizeof(*r));
	while (getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = '\0';
		if (strcmp(line, "READY") == 0) {
			err = 0;
			break;
		}
		nt = 0;
		for (s = strtok_r(line, "\t", &save); s && nt < 6; s = strtok_r(NULL, "\t", &save))
			tok[nt++] = s;
		if (nt == 2 && strcmp(tok[0], "RUNTIME") == 0) {
			r->runtime = strtoull(tok[1], NULL, 10);
		} else if (nt == 2 && strcmp(tok[0], "THREAD") == 0) {
			r->thread = strtoull(tok[1], NULL, 10);
		} else if (nt == 5 && strcmp(tok[0], "CODE") == 0 && r->ncodes < MAX_CODES) {
			c = &r->codes[r->ncodes++];
			c->id = strtoull(tok[1], NULL, 10);
			c->first = atoi(tok[2]);
			snprintf(c->name, sizeof(c->name), "%s", tok[3]);
			snprintf(c->file, sizeof(c->file), "%s", tok[4]);
		} else if (nt == 4 && strcmp(tok[0], "AT") == 0 && r->ncodes) {
			c = &r->codes[r->ncodes - 1];
			if (GROW(c->ats, c->cap, c->n + 1))
				break;
			c->ats[c->n].kind = tok[1][0];
			c->ats[c->n].value = strtoll(tok[2], NULL, 10);
			c->ats[c->n].line = atoi(tok[3]);
			c->n++;
		} else if (nt == 3 && strcmp(tok[0], "STACK") == 0 && r->nstack < MAX_STACK) {
			snprintf(r->stack_name[r->nstack], sizeof(r->stack_name[0]), "%s", tok[1]);
			r->stack_line[r->nstack++] = atoi(tok[2]);
		}
	}
	free(line);
	return err;
}

/* offsetof(PyCodeObject, co_code_adaptive), printed from each version's headers. */
static uint32_t code_adaptive(unsigned int minor)
{
	switch (minor) {
	case 11:
		return 184;
	case 12:
		return 192;
	case 13:
		return 200;
	case 14:
		return 208;
	default:
		return 0;
	}
}

static uint32_t encode_lasti(unsigned int minor, const struct at *a)
{
	if (a->kind == 'A')
		return code_adaptive(minor) + (uint32_t)a->value;
	return (uint32_t)a->value;
}

/* --- the sampler's walk, done from user space ----------------------------------------------- */

/*
 * Walk the frames of the thread whose PyThreadState.thread_id is thread, with only what cfg
 * says, exactly as bpf/sample.bpf.c is meant to. Returns the number of frames or -1.
 */
static int walk_stack(pid_t pid, const struct profd_py_proc *cfg, uint64_t thread,
		      struct profd_py_frame *out, int max)
{
	uint64_t interp, ts = 0, frame, code, ip;
	uint8_t buf[256];
	int i, j, n = 0;

	if (cfg->fr_size > sizeof(buf))
		return -1;
	interp = peek_u64(pid, cfg->runtime_addr + cfg->rt_interp_head);
	for (i = 0; interp && i < 16 && !ts; i++) {
		uint64_t t = peek_u64(pid, interp + cfg->interp_threads_head);

		for (j = 0; t && j < 256; j++) {
			if (peek_u64(pid, t + cfg->ts_thread_id) == thread) {
				ts = t;
				break;
			}
			t = peek_u64(pid, t + cfg->ts_next);
		}
		interp = peek_u64(pid, interp + cfg->interp_next);
	}
	if (!ts)
		return -1;
	frame = peek_u64(pid, ts + cfg->ts_frame);
	if (cfg->cframe_current != PROFD_PY_NO_FIELD && frame)
		frame = peek_u64(pid, frame + cfg->cframe_current);
	while (frame && n < max) {
		if (peek(pid, frame, buf, cfg->fr_size))
			return -1;
		memcpy(&code, buf + cfg->fr_code, 8);
		code &= ~(uint64_t)cfg->code_tag_mask;
		out[n].code = code;
		out[n].flags = 0;
		if (cfg->lasti_kind == PROFD_PY_LASTI_INT) {
			memcpy(&out[n].lasti, buf + cfg->fr_lasti, 4);
		} else {
			memcpy(&ip, buf + cfg->fr_lasti, 8);
			out[n].lasti = (uint32_t)(ip - code);
		}
		if (cfg->fr_is_entry != PROFD_PY_NO_FIELD && buf[cfg->fr_is_entry])
			out[n].flags |= PROFD_PYF_ENTRY;
		if (cfg->boundary_owner && cfg->fr_owner != PROFD_PY_NO_FIELD &&
		    buf[cfg->fr_owner] >= cfg->boundary_owner)
			out[n].flags |= PROFD_PYF_BOUNDARY;
		memcpy(&frame, buf + cfg->fr_back, 8);
		n++;
	}
	return n;
}

/* --- a reader that can lie, for the cache ---------------------------------------------------- */

struct fake_mem {
	unsigned int reads;
	bool on;
	bool gone; /* every read fails as for a process that exited */
	uint64_t addr;
	uint8_t bytes[8];
	size_t len;
};

static int fake_read(void *ctx, uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct fake_mem *f = ctx;
	size_t i;

	f->reads++;
	if (f->gone)
		return -ESRCH;
	if (peek((pid_t)pid, addr, buf, len))
		return -EFAULT;
	if (!f->on)
		return 0;
	for (i = 0; i < f->len; i++) {
		if (f->addr + i >= addr && f->addr + i < addr + len)
			((uint8_t *)buf)[f->addr + i - addr] = f->bytes[i];
	}
	return 0;
}

/* --- per interpreter -------------------------------------------------------------------------- */

static void test_lines(const struct interp *it)
{
	char script[PATH_MAX], *argv[3];
	char *line = NULL, *tok[4], *save, *s;
	size_t cap = 0, nt, checked = 0, mismatches = 0, ncode = 0, i;
	uint8_t *tab = NULL;
	size_t tlen = 0;
	int fmt = -1, first = 0, want, got;
	struct child c = {0};

	snprintf(script, sizeof(script), "%s/unit_lines.py", PY_FIXTURE_DIR);
	argv[0] = (char *)it->path;
	argv[1] = script;
	argv[2] = NULL;
	if (spawn(argv, &c)) {
		CHECK(!"spawn unit_lines.py");
		return;
	}
	while (getline(&line, &cap, c.out) > 0) {
		line[strcspn(line, "\n")] = '\0';
		nt = 0;
		for (s = strtok_r(line, "\t", &save); s && nt < 4; s = strtok_r(NULL, "\t", &save))
			tok[nt++] = s;
		if ((nt == 4 || nt == 3) && strcmp(tok[0], "CODE") == 0) {
			fmt = atoi(tok[1]);
			first = atoi(tok[2]);
			free(tab);
			tlen = nt == 4 ? strlen(tok[3]) / 2 : 0;
			tab = malloc(tlen + 1);
			for (i = 0; i < tlen; i++) {
				unsigned int b;

				sscanf(tok[3] + 2 * i, "%2x", &b);
				tab[i] = (uint8_t)b;
			}
			ncode++;
		} else if (nt == 3 && strcmp(tok[0], "AT") == 0 && tab) {
			want = atoi(tok[2]);
			got = py_line_at((enum py_line_format)fmt, tab, tlen, first,
					 strtoull(tok[1], NULL, 10));
			if (got < 0)
				got = -1;
			checked++;
			if (got != want) {
				if (mismatches < 5)
					fprintf(
					    stderr,
					    "%s: format %d first %d addr %s: line %d, want %d\n",
					    it->label, fmt, first, tok[1], got, want);
				mismatches++;
			}
		}
	}
	free(line);
	free(tab);
	reap(&c);
	fprintf(stderr, "%s: line tables: %zu code objects, %zu instructions, %zu mismatches\n",
		it->label, ncode, checked, mismatches);
	CHECK(ncode > 100);
	CHECK(checked > 10000);
	CHECK_EQ_U(mismatches, 0);
}

/* Cache hits cost one read; a changed first line or type is seen; eviction works. */
static void test_cache(const struct interp *it, pid_t pid, const struct report *r)
{
	struct fake_mem fm = {0};
	struct python_opts opts = {.read_mem = fake_read, .read_ctx = &fm, .max_code_per_pid = 2};
	const struct code_exp *c0 = &r->codes[0];
	struct profd_py_frame fr = {.code = c0->id, .lasti = encode_lasti(it->minor, &c0->ats[0])};
	struct py_frame_sym sym = {0};
	struct profd_py_proc cfg;
	struct python *py = python__new(&opts);
	struct py_layout l;
	uint32_t first;
	size_t i;

	if (!CHECK(py != NULL))
		return;
	CHECK_EQ_I(python__detect(py, (uint32_t)pid, &cfg), PYTHON_SUPPORTED);
	CHECK_EQ_I(python__symbolize(py, (uint32_t)pid, &fr, &sym), 0);
	CHECK_EQ_U(sym.line, c0->ats[0].line);
	fm.reads = 0;
	CHECK_EQ_I(python__symbolize(py, (uint32_t)pid, &fr, &sym), 0);
	CHECK_EQ_U(fm.reads, 1); /* a hit: the validating read only */
	CHECK_STREQ(sym.qualname, c0->name);

	/* Another code object at the same address (its first line differs): reloaded. */
	if (it->minor <= 12) {
		CHECK_EQ_I(py_layout_static(0x0300 | it->minor, &l), 0);
	} else {
		uint8_t dbg[PY_DEBUG_OFFSETS_MAX];
		uint32_t hex;
		bool ft;

		CHECK_EQ_I(peek(pid, cfg.runtime_addr, dbg, sizeof(dbg)), 0);
		CHECK_EQ_I(py_layout_from_debug(dbg, sizeof(dbg), &hex, &ft, &l), 0);
	}
	first = (uint32_t)c0->first + 100;
	fm.addr = c0->id + l.co_firstlineno;
	memcpy(fm.bytes, &first, 4);
	fm.len = 4;
	fm.on = true;
	fm.reads = 0;
	CHECK_EQ_I(python__symbolize(py, (uint32_t)pid, &fr, &sym), 0);
	CHECK(fm.reads > 1);
	CHECK_EQ_U(sym.first_line, first);
	CHECK_EQ_U(sym.line, c0->ats[0].line + 100);

	/* Not a code object any more (type pointer changed): -ENOENT, entry dropped. */
	fm.addr = c0->id + l.ob_type;
	memset(fm.bytes, 0x5a, 8);
	fm.len = 8;
	CHECK_EQ_I(python__symbolize(py, (uint32_t)pid, &fr, &sym), -ENOENT);
	fm.on = false;
	fm.reads = 0;
	CHECK_EQ_I(python__symbolize(py, (uint32_t)pid, &fr, &sym), 0);
	CHECK(fm.reads > 1);
	CHECK_EQ_U(sym.first_line, c0->first);
	CHECK_EQ_U(sym.line, c0->ats[0].line);

	/* Two entries at most: three other code objects push the first one out. */
	for (i = 1; i < 4 && i < r->ncodes; i++) {
		struct profd_py_frame f2 = {.code = r->codes[i].id,
					    .lasti = encode_lasti(it->minor, &r->codes[i].ats[0])};

		CHECK_EQ_I(python__symbolize(py, (uint32_t)pid, &f2, &sym), 0);
		CHECK_STREQ(sym.qualname, r->codes[i].name);
	}
	fm.reads = 0;
	CHECK_EQ_I(python__symbolize(py, (uint32_t)pid, &fr, &sym), 0);
	CHECK(fm.reads > 1);
	CHECK_STREQ(sym.qualname, c0->name);

	/*
	 * The process exited before its last samples were handled: what the cache holds is named
	 * as it was, with its line; what it never read is -ENODATA, and nothing is dropped.
	 */
	fm.gone = true;
	CHECK_EQ_I(python__symbolize(py, (uint32_t)pid, &fr, &sym), 0);
	CHECK_STREQ(sym.qualname, c0->name);
	CHECK_EQ_U(sym.line, c0->ats[0].line);
	if (r->ncodes > 3) {
		struct profd_py_frame f1 = {.code = r->codes[1].id,
					    .lasti = encode_lasti(it->minor, &r->codes[1].ats[0])};

		/* Two entries: codes[1] was pushed out by codes[3] and the first one. */
		CHECK_EQ_I(python__symbolize(py, (uint32_t)pid, &f1, &sym), -ENODATA);
	}
	CHECK_EQ_I(python__symbolize(py, (uint32_t)pid, &fr, &sym), 0);
	CHECK_STREQ(sym.qualname, c0->name);
	python__free(py);
}

/*
 * READY is printed just before time.sleep(): wait until the main thread is inside the sleep's
 * system call (select, nanosleep, clock_nanosleep, pselect6 on x86_64), so its stack is known.
 */
static bool wait_sleeping(pid_t pid)
{
	char path[64], buf[64];
	long nr;
	int i;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	for (i = 0; i < 500; i++) {
		f = fopen(path, "r");
		nr = -1;
		if (f) {
			if (fgets(buf, sizeof(buf), f))
				nr = strtol(buf, NULL, 10);
			fclose(f);
		}
		if (nr == 23 || nr == 35 || nr == 230 || nr == 270)
			return true;
		usleep(10 * 1000);
	}
	return false;
}

static void check_stack(const struct interp *it, pid_t pid, struct python *py,
			const struct profd_py_proc *cfg, const struct report *r)
{
	struct profd_py_frame fr[PROFD_MAX_PY_FRAMES];
	struct py_frame_sym sym;
	int n, i, err, user = 0, skipped = 0, gone = 0;

	CHECK(wait_sleeping(pid));
	n = walk_stack(pid, cfg, r->thread, fr, PROFD_MAX_PY_FRAMES);
	CHECK(n > 0);
	for (i = 0; i < n; i++) {
		err = python__symbolize(py, (uint32_t)pid, &fr[i], &sym);
		if (err == -ENOENT) {
			gone++;
			continue;
		}
		if (!CHECK_EQ_I(err, 0))
			continue;
		if (sym.skip) {
			skipped++;
			continue;
		}
		if ((size_t)user < r->nstack) {
			CHECK_STREQ(sym.qualname, r->stack_name[user]);
			CHECK_EQ_U(sym.line, r->stack_line[user]);
		}
		user++;
	}
	CHECK_EQ_U(user, r->nstack);
	/* 3.12 ends in a <shim> frame, 3.13+ in an entry frame whose executable is None. */
	CHECK_EQ_I(skipped, it->minor == 12 ? 1 : 0);
	CHECK_EQ_I(gone, it->minor >= 13 ? 1 : 0);
	if (n > 0 && it->minor >= 12)
		CHECK(fr[n - 1].flags & PROFD_PYF_BOUNDARY);
	if (n > 0 && it->minor == 11)
		CHECK(fr[n - 1].flags & PROFD_PYF_ENTRY);
	fprintf(stderr, "%s: stack: %d frames, %d user, %d skipped, %d not code\n", it->label, n,
		user, skipped, gone);
}

static void test_interp(const struct interp *it)
{
	char script[PATH_MAX], *argv[3];
	struct profd_py_frame fr;
	struct py_frame_sym sym = {0};
	struct profd_py_proc cfg, cfg2;
	struct report r;
	struct child c = {0};
	struct python *py;
	size_t i, j, bad = 0, checked = 0;
	int err;

	fprintf(stderr, "== %s: %s\n", it->label, it->path);
	test_lines(it);

	snprintf(script, sizeof(script), "%s/unit_target.py", PY_FIXTURE_DIR);
	argv[0] = (char *)it->path;
	argv[1] = script;
	argv[2] = NULL;
	if (spawn(argv, &c)) {
		CHECK(!"spawn unit_target.py");
		return;
	}
	err = read_report(c.out, &r);
	CHECK_EQ_I(err, 0);
	CHECK_EQ_U(r.ncodes, 6);
	py = python__new(NULL);
	CHECK(py != NULL);
	if (err || !py || r.ncodes != 6)
		goto out;

	err = python__detect(py, (uint32_t)c.pid, &cfg);
	CHECK_EQ_I(err, PYTHON_SUPPORTED);
	if (err != PYTHON_SUPPORTED)
		goto out;
	CHECK_EQ_U(cfg.version, 0x0300 | it->minor);
	CHECK_EQ_U(python__version(py, (uint32_t)c.pid), 0x0300 | it->minor);
	CHECK(r.runtime != 0);
	CHECK_EQ_U(cfg.runtime_addr, r.runtime);
	CHECK_EQ_U(cfg.lasti_kind, it->minor >= 11 ? PROFD_PY_LASTI_PTR : PROFD_PY_LASTI_INT);
	CHECK_EQ_U(cfg.boundary_owner, it->minor >= 12 ? 3 : 0);
	CHECK_EQ_U(cfg.code_tag_mask, it->minor >= 14 ? 1 : 0);
	CHECK_EQ_U(cfg.cframe_current == PROFD_PY_NO_FIELD, it->minor < 11 || it->minor > 12);
	CHECK_EQ_U(cfg.fr_is_entry == PROFD_PY_NO_FIELD, it->minor != 11);
	/* A second call answers from memory, with the same result. */
	CHECK_EQ_I(python__detect(py, (uint32_t)c.pid, &cfg2), PYTHON_SUPPORTED);
	CHECK(memcmp(&cfg, &cfg2, sizeof(cfg)) == 0);

	for (i = 0; i < r.ncodes; i++) {
		const struct code_exp *ce = &r.codes[i];

		CHECK(ce->n > 0);
		for (j = 0; j < ce->n; j++) {
			fr.code = ce->id;
			fr.lasti = encode_lasti(it->minor, &ce->ats[j]);
			fr.flags = 0;
			err = python__symbolize(py, (uint32_t)c.pid, &fr, &sym);
			checked++;
			if (err || strcmp(sym.qualname, ce->name) ||
			    strcmp(sym.filename, ce->file) ||
			    sym.line != (uint32_t)ce->ats[j].line ||
			    sym.first_line != (uint32_t)ce->first || sym.skip) {
				if (bad < 5)
					fprintf(stderr,
						"%s: %s lasti %u: err %d line %u (want %d) name %s "
						"file %s\n",
						it->label, ce->name, fr.lasti, err,
						err ? 0 : sym.line, ce->ats[j].line,
						err ? "-" : sym.qualname, err ? "-" : sym.filename);
				bad++;
			}
		}
		/* Before the first instruction: CPython reports the first line. */
		fr.lasti = it->minor >= 11 ? code_adaptive(it->minor) - 2 : UINT32_MAX;
		CHECK_EQ_I(python__symbolize(py, (uint32_t)c.pid, &fr, &sym), 0);
		CHECK_EQ_U(sym.line, ce->first);
	}
	fprintf(stderr, "%s: %zu (code, lasti) pairs symbolized, %zu wrong\n", it->label, checked,
		bad);
	CHECK(checked > 50);
	CHECK_EQ_U(bad, 0);
	CHECK_STREQ(r.codes[1].name, it->minor >= 11 ? "outer.<locals>.nested" : "nested");
	CHECK_STREQ(r.codes[3].name, it->minor >= 11 ? "grüße_λ" : "grüße_λ");
	CHECK_STREQ(r.codes[4].name, "wide_\xf0\xa0\x80\x8b");

	/* Not code objects: _PyRuntime itself, NULL, an unmapped page. */
	fr.lasti = 0;
	fr.code = r.runtime;
	CHECK_EQ_I(python__symbolize(py, (uint32_t)c.pid, &fr, &sym), -ENOENT);
	fr.code = 0;
	CHECK_EQ_I(python__symbolize(py, (uint32_t)c.pid, &fr, &sym), -ENOENT);
	fr.code = 0x10;
	CHECK_EQ_I(python__symbolize(py, (uint32_t)c.pid, &fr, &sym), -ENOENT);

	check_stack(it, c.pid, py, &cfg, &r);

	/* Forget, then everything again from scratch. */
	python__forget_pid(py, (uint32_t)c.pid);
	CHECK_EQ_U(python__version(py, (uint32_t)c.pid), 0);
	fr.code = r.codes[2].id;
	fr.lasti = encode_lasti(it->minor, &r.codes[2].ats[r.codes[2].n - 1]);
	CHECK_EQ_I(python__symbolize(py, (uint32_t)c.pid, &fr, &sym), 0); /* detects itself */
	CHECK_STREQ(sym.qualname, "gen");
	CHECK_EQ_U(sym.line, r.codes[2].ats[r.codes[2].n - 1].line);
	CHECK_EQ_I(python__detect(py, (uint32_t)c.pid, &cfg2), PYTHON_SUPPORTED);
	CHECK(memcmp(&cfg, &cfg2, sizeof(cfg)) == 0);

	test_cache(it, c.pid, &r);
out:
	python__free(py);
	report_free(&r);
	reap(&c);
}

/* --- the GIL -----------------------------------------------------------------------------------
 */

/* The thread state whose thread_id is thread, as the sampler finds it; 0 if none. */
static uint64_t find_tstate(pid_t pid, const struct profd_py_proc *cfg, uint64_t thread)
{
	uint64_t interp = peek_u64(pid, cfg->runtime_addr + cfg->rt_interp_head), t;
	int i, j;

	for (i = 0; interp && i < 16; i++) {
		t = peek_u64(pid, interp + cfg->interp_threads_head);
		for (j = 0; t && j < 256; j++) {
			if (peek_u64(pid, t + cfg->ts_thread_id) == thread)
				return t;
			t = peek_u64(pid, t + cfg->ts_next);
		}
		interp = peek_u64(pid, interp + cfg->interp_next);
	}
	return 0;
}

/* The GIL (last_holder, locked) of thread state ts as bpf/python.bpf.h reads it. */
static int read_gil(pid_t pid, const struct profd_py_proc *cfg, uint64_t ts, uint64_t *holder,
		    int32_t *locked)
{
	uint64_t gil = 0, w[2];

	if (cfg->gil_kind == PROFD_PY_GIL_RUNTIME)
		gil = cfg->runtime_addr + cfg->gil_off;
	else if (cfg->gil_kind == PROFD_PY_GIL_INTERP)
		gil = peek_u64(pid, peek_u64(pid, ts + cfg->ts_interp) + cfg->gil_off);
	if (!gil || peek(pid, gil + cfg->gil_holder, w, sizeof(w)))
		return -EFAULT;
	*holder = w[0];
	*locked = (int32_t)w[1];
	return 0;
}

static bool read_ident(FILE *f, const char *what, uint64_t *id)
{
	char word[32];
	unsigned long long v;

	if (fscanf(f, "%31s %llu", word, &v) != 2 || strcmp(word, what))
		return false;
	*id = v;
	return true;
}

/*
 * The GIL offsets against a live interpreter whose holder is known: a thread burning pure
 * Python holds it (48 reads of 50 at least say so), then, once it stopped, the GIL is free and the
 * main thread, waiting in sigwait(), was the last to hold it.
 */
static void test_gil(const struct interp *it)
{
	char script[PATH_MAX], *argv[3], word[32];
	uint64_t burner = 0, main_id = 0, ts_burner, ts_main, holder = 0;
	struct profd_py_proc cfg;
	struct child c = {0};
	struct python *py = NULL;
	unsigned int held = 0, i;
	int32_t locked = -2;

	snprintf(script, sizeof(script), "%s/gil_target.py", PY_FIXTURE_DIR);
	argv[0] = (char *)it->path;
	argv[1] = script;
	argv[2] = NULL;
	if (spawn(argv, &c)) {
		CHECK(!"spawn gil_target.py");
		return;
	}
	CHECK(read_ident(c.out, "burner", &burner));
	CHECK(read_ident(c.out, "main", &main_id));
	py = python__new(NULL);
	CHECK(py != NULL);
	if (!py || !burner || !main_id)
		goto out;
	CHECK_EQ_I(python__detect(py, (uint32_t)c.pid, &cfg), PYTHON_SUPPORTED);
	CHECK_EQ_U(cfg.gil_kind, it->minor <= 11 ? PROFD_PY_GIL_RUNTIME : PROFD_PY_GIL_INTERP);
	CHECK_EQ_U(cfg.gil_holder, 8);
	ts_burner = find_tstate(c.pid, &cfg, burner);
	ts_main = find_tstate(c.pid, &cfg, main_id);
	CHECK(ts_burner != 0);
	CHECK(ts_main != 0 && ts_main != ts_burner);
	if (it->minor >= 12) {
		/* The main interpreter's ceval.gil points into the interpreter itself (its _gil).
		 */
		uint64_t interp = peek_u64(c.pid, ts_main + cfg.ts_interp);
		uint64_t gil = peek_u64(c.pid, interp + cfg.gil_off);

		CHECK(interp && gil > interp && gil - interp < (1u << 20));
		CHECK_EQ_U(interp, peek_u64(c.pid, cfg.runtime_addr + cfg.rt_interp_head));
	}
	usleep(50000); /* main prints its ident holding the GIL, then waits without it */
	for (i = 0; i < 50; i++) {
		if (read_gil(c.pid, &cfg, ts_burner, &holder, &locked) == 0 && locked == 1 &&
		    holder == ts_burner)
			held++;
		usleep(2000);
	}
	fprintf(stderr, "%s: GIL held by the burner in %u of 50 reads (locked %d)\n", it->label,
		held, locked);
	CHECK(held >= 48);
	kill(c.pid, SIGUSR1);
	CHECK(fscanf(c.out, "%31s", word) == 1 && !strcmp(word, "idle"));
	usleep(50000); /* from the print to sigwait() */
	CHECK_EQ_I(read_gil(c.pid, &cfg, ts_main, &holder, &locked), 0);
	CHECK_EQ_I(locked, 0);
	CHECK_EQ_U(holder, ts_main);
out:
	python__free(py);
	reap(&c);
}

/* An interpreter that must be reported unsupported, with its version. */
static void test_unsupported(const char *path, uint16_t version)
{
	char *argv[] = {(char *)path, "-c",
			"import sys; print('READY'); sys.stdout.flush(); "
			"import time; time.sleep(3600)",
			NULL};
	struct profd_py_proc cfg;
	struct python *py = python__new(NULL);
	struct child c = {0};
	char line[64] = "";

	if (!py || spawn(argv, &c)) {
		CHECK(!"spawn");
		goto out;
	}
	if (!fgets(line, sizeof(line), c.out))
		line[0] = '\0';
	CHECK_STREQ(line, "READY\n");
	memset(&cfg, 0xff, sizeof(cfg));
	CHECK_EQ_I(python__detect(py, (uint32_t)c.pid, &cfg), PYTHON_UNSUPPORTED);
	CHECK_EQ_U(cfg.runtime_addr, 0);
	CHECK_EQ_U(python__version(py, (uint32_t)c.pid), version);
	fprintf(stderr, "%s: unsupported, version %#x\n", path, version);
out:
	reap(&c);
	python__free(py);
}

static void test_not_python(void)
{
	char *argv[] = {"/bin/sleep", "3600", NULL};
	struct profd_py_proc cfg;
	struct py_frame_sym sym;
	struct profd_py_frame fr = {.code = 0x1000};
	struct python *py = python__new(NULL);
	struct child c = {0};

	if (!CHECK(py != NULL))
		return;
	CHECK_EQ_I(python__detect(py, (uint32_t)getpid(), &cfg), PYTHON_NOT_PYTHON);
	CHECK_EQ_I(python__symbolize(py, (uint32_t)getpid(), &fr, &sym), -EOPNOTSUPP);
	if (spawn(argv, &c) == 0) {
		usleep(100 * 1000); /* past exec */
		CHECK_EQ_I(python__detect(py, (uint32_t)c.pid, &cfg), PYTHON_NOT_PYTHON);
		CHECK_EQ_U(python__version(py, (uint32_t)c.pid), 0);
		reap(&c);
		python__forget_pid(py, (uint32_t)c.pid);
		CHECK_EQ_I(python__detect(py, (uint32_t)c.pid, &cfg), -ESRCH);
	}
	python__free(py);
}

/* --- pure tests of the decoders and the _Py_DebugOffsets parser ------------------------------- */

static void test_decoders(void)
{
	/* 3.8: line 10; +6 bytes +1 line; +4 bytes -2 lines (a loop back) */
	static const uint8_t lnotab[] = {6, 1, 4, 0xfe};
	/* 3.10: [0,4) line 5; [4,6) no line; [6,10) line 5+2; empty range moving the line +1 */
	static const uint8_t lt310[] = {4, 0, 2, 0x80, 4, 2, 0, 1, 2, 0};
	/* 3.11: 2 units short form (line 20); 1 unit one-line +1; long form +3 (2 units);
	 * none (1 unit); no-column -2 (1 unit). */
	static const uint8_t loc[] = {
	    0x80 | (0 << 3) | 1,  0x05,		 /* short, 2 units, same line */
	    0x80 | (11 << 3) | 0, 1,	2,	 /* one line +1, 1 unit */
	    0x80 | (14 << 3) | 1, 6,	0, 1, 2, /* long: +3, end line, cols; 2 units */
	    0x80 | (15 << 3) | 0,		 /* none, 1 unit */
	    0x80 | (13 << 3) | 0, 5,		 /* no columns: -2 */
	};
	static const uint8_t bad_varint[] = {0x80 | (13 << 3) | 0, 0x40};

	CHECK_EQ_I(py_line_at(PY_LINES_LNOTAB, lnotab, sizeof(lnotab), 10, 0), 10);
	CHECK_EQ_I(py_line_at(PY_LINES_LNOTAB, lnotab, sizeof(lnotab), 10, 5), 10);
	CHECK_EQ_I(py_line_at(PY_LINES_LNOTAB, lnotab, sizeof(lnotab), 10, 6), 11);
	CHECK_EQ_I(py_line_at(PY_LINES_LNOTAB, lnotab, sizeof(lnotab), 10, 10), 9);
	CHECK_EQ_I(py_line_at(PY_LINES_LNOTAB, lnotab, sizeof(lnotab), 10, 500), 9);

	CHECK_EQ_I(py_line_at(PY_LINES_LINETABLE, lt310, sizeof(lt310), 5, 0), 5);
	CHECK_EQ_I(py_line_at(PY_LINES_LINETABLE, lt310, sizeof(lt310), 5, 3), 5);
	CHECK_EQ_I(py_line_at(PY_LINES_LINETABLE, lt310, sizeof(lt310), 5, 4), -ENOENT);
	CHECK_EQ_I(py_line_at(PY_LINES_LINETABLE, lt310, sizeof(lt310), 5, 6), 7);
	CHECK_EQ_I(py_line_at(PY_LINES_LINETABLE, lt310, sizeof(lt310), 5, 10), 8);
	CHECK_EQ_I(py_line_at(PY_LINES_LINETABLE, lt310, sizeof(lt310), 5, 12), -ENOENT);

	CHECK_EQ_I(py_line_at(PY_LINES_LOCATIONS, loc, sizeof(loc), 20, 0), 20);
	CHECK_EQ_I(py_line_at(PY_LINES_LOCATIONS, loc, sizeof(loc), 20, 1), 20);
	CHECK_EQ_I(py_line_at(PY_LINES_LOCATIONS, loc, sizeof(loc), 20, 2), 21);
	CHECK_EQ_I(py_line_at(PY_LINES_LOCATIONS, loc, sizeof(loc), 20, 3), 24);
	CHECK_EQ_I(py_line_at(PY_LINES_LOCATIONS, loc, sizeof(loc), 20, 4), 24);
	CHECK_EQ_I(py_line_at(PY_LINES_LOCATIONS, loc, sizeof(loc), 20, 5), -ENOENT);
	CHECK_EQ_I(py_line_at(PY_LINES_LOCATIONS, loc, sizeof(loc), 20, 6), 22);
	CHECK_EQ_I(py_line_at(PY_LINES_LOCATIONS, loc, sizeof(loc), 20, 7), -ENOENT);
	CHECK_EQ_I(py_line_at(PY_LINES_LOCATIONS, bad_varint, sizeof(bad_varint), 20, 0), -ENOENT);
	CHECK_EQ_I(py_line_at(PY_LINES_LOCATIONS, NULL, 0, 20, 0), -ENOENT);
	/* Deltas from a hostile table cannot overflow the line: out of range is "no line". */
	{
		static const uint8_t up[] = {0, 127, 0, 127};
		static const uint8_t up310[] = {2, 127, 2, 127};

		CHECK_EQ_I(py_line_at(PY_LINES_LNOTAB, up, sizeof(up), INT_MAX - 10, 0), -ENOENT);
		CHECK_EQ_I(py_line_at(PY_LINES_LINETABLE, up310, sizeof(up310), INT_MAX - 10, 3),
			   -ENOENT);
		CHECK_EQ_I(py_line_at(PY_LINES_LNOTAB, up, sizeof(up), 1, 0), 255);
	}
}

/* A 3.14 _Py_DebugOffsets as its header lays it out, with the values of a GIL build. */
static void fill_314(uint64_t *v)
{
	memset(v, 0, PY_DEBUG_OFFSETS_MAX);
	memcpy(v, "xdebugpy", 8);
	v[1] = 0x030e00f0; /* 3.14.0 final */
	v[2] = 0;
	v[3] = 300000, v[5] = 632;			 /* runtime: size, interpreters_head */
	v[6] = 200000, v[8] = 7264, v[9] = 7344;	 /* interp: size, next, threads.head */
	v[15] = 7400, v[16] = 7480;			 /* interp: ceval.gil, _gil */
	v[18] = 7480 + 16, v[19] = 7480 + 8;		 /* _gil.locked, _gil.last_holder */
	v[22] = 400, v[24] = 8, v[26] = 72, v[27] = 152; /* tstate: size, next, frame, id */
	v[25] = 16;					 /* tstate: interp */
	v[31] = 88, v[32] = 8, v[33] = 0, v[34] = 56, v[36] = 74; /* frame */
	v[39] = 216, v[40] = 112, v[41] = 120, v[42] = 128, v[43] = 136, v[44] = 68;
	v[48] = 208;			    /* co_code_adaptive */
	v[50] = 16, v[51] = 8;		    /* PyObject */
	v[75] = 16, v[76] = 32;		    /* bytes */
	v[78] = 32, v[79] = 16, v[80] = 40; /* str */
}

static void test_debug_offsets(void)
{
	uint64_t v[PY_DEBUG_OFFSETS_MAX / 8];
	struct py_layout l;
	struct profd_py_proc cfg;
	uint32_t hex = 0;
	bool ft = true;

	fill_314(v);
	CHECK_EQ_I(py_layout_from_debug(v, sizeof(v), &hex, &ft, &l), 0);
	CHECK_EQ_U(hex, 0x030e00f0);
	CHECK(!ft);
	CHECK_EQ_U(l.version, 0x030e);
	CHECK_EQ_U(l.rt_interp_head, 632);
	CHECK_EQ_U(l.interp_threads_head, 7344);
	CHECK_EQ_U(l.ts_frame, 72);
	CHECK_EQ_U(l.ts_thread_id, 152);
	CHECK_EQ_U(l.fr_owner, 74);
	CHECK_EQ_U(l.fr_lasti, 56);
	CHECK_EQ_U(l.co_code_adaptive, 208);
	CHECK_EQ_U(l.co_qualname, 128);
	CHECK_EQ_U(l.str_ascii_data, 40);
	CHECK_EQ_U(l.str_compact_data, 56);
	CHECK_EQ_U(l.code_tag_mask, 1);
	py_layout_to_cfg(&l, 0x1000, &cfg);
	CHECK_EQ_U(cfg.fr_size, 75);
	CHECK_EQ_U(cfg.boundary_owner, 3);
	CHECK_EQ_U(cfg.cframe_current, PROFD_PY_NO_FIELD);

	CHECK_EQ_U(cfg.gil_kind, PROFD_PY_GIL_INTERP);
	CHECK_EQ_U(cfg.gil_off, 7400);
	CHECK_EQ_U(cfg.ts_interp, 16);
	CHECK_EQ_U(cfg.gil_holder, 8);
	/* A GIL that makes no sense is not read; the frames still are. */
	v[18] = 7480 + 24;
	CHECK_EQ_I(py_layout_from_debug(v, sizeof(v), &hex, &ft, &l), 0);
	CHECK_EQ_U(l.gil_kind, PROFD_PY_GIL_UNKNOWN);
	fill_314(v);
	v[19] = 7000; /* last_holder before the GIL's start */
	CHECK_EQ_I(py_layout_from_debug(v, sizeof(v), &hex, &ft, &l), 0);
	CHECK_EQ_U(l.gil_kind, PROFD_PY_GIL_UNKNOWN);
	fill_314(v);
	v[15] = 300000; /* ceval.gil beyond the interpreter */
	CHECK_EQ_I(py_layout_from_debug(v, sizeof(v), &hex, &ft, &l), 0);
	CHECK_EQ_U(l.gil_kind, PROFD_PY_GIL_UNKNOWN);
	fill_314(v);

	v[2] = 1; /* free-threaded */
	CHECK_EQ_I(py_layout_from_debug(v, sizeof(v), &hex, &ft, &l), -ENOTSUP);
	CHECK(ft);
	fill_314(v);
	v[51] = 24; /* PyObject anchor off: the layout guess is wrong */
	CHECK_EQ_I(py_layout_from_debug(v, sizeof(v), &hex, &ft, &l), -EINVAL);
	fill_314(v);
	v[36] = 4000; /* owner beyond the frame */
	CHECK_EQ_I(py_layout_from_debug(v, sizeof(v), &hex, &ft, &l), -EINVAL);
	fill_314(v);
	v[1] = 0x030f00a1; /* 3.15: unknown layout */
	CHECK_EQ_I(py_layout_from_debug(v, sizeof(v), &hex, &ft, &l), -ENOTSUP);
	fill_314(v);
	memcpy(v, "xdebugpz", 8);
	CHECK_EQ_I(py_layout_from_debug(v, sizeof(v), &hex, &ft, &l), -EPROTO);
	CHECK_EQ_I(py_layout_static(0x0307, &l), -ENOTSUP);
	CHECK_EQ_I(py_layout_static(0x0308, &l), 0);
	py_layout_to_cfg(&l, 0, &cfg);
	CHECK_EQ_U(cfg.fr_size, 108); /* f_lasti (int) at 104 is the last field read */

	/*
	 * A 3.13+ layout comes from the target's memory: fields beyond what the daemon reads of a
	 * code object, a frame or a string header are refused, including offsets near 0xffff whose
	 * end would wrap in 16 bits.
	 */
	for (uint16_t minor = 8; minor <= 12; minor++) {
		CHECK_EQ_I(py_layout_static(0x0300 | minor, &l), 0);
		CHECK(py_layout_plausible(&l));
		CHECK_EQ_U(l.gil_kind, minor <= 11 ? PROFD_PY_GIL_RUNTIME : PROFD_PY_GIL_INTERP);
		CHECK_EQ_U(l.gil_holder, 8);
	}
	fill_314(v);
	CHECK_EQ_I(py_layout_from_debug(v, sizeof(v), &hex, &ft, &l), 0);
	CHECK(py_layout_plausible(&l));
	{
		struct py_layout bad = l;

		bad.co_filename = 65530;
		CHECK(!py_layout_plausible(&bad));
		bad = l;
		bad.fr_back = 124; /* 8 bytes at 124 end past the 128 the sampler reads */
		CHECK(!py_layout_plausible(&bad));
		bad = l;
		bad.str_length = bad.str_compact_data; /* the length beyond the header read */
		CHECK(!py_layout_plausible(&bad));
	}
}

int main(void)
{
	struct interp its[16];
	size_t n = 0, i;
	unsigned int minor;
	const char *p314 = getenv("PROFD_TEST_PYTHON314");
	char legacy[PATH_MAX];

	test_decoders();
	test_debug_offsets();
	test_not_python();

	for (minor = 8; minor <= 13; minor++) {
		if (find_pyenv(3, minor, &its[n]))
			n++;
		else
			fprintf(stderr, "SKIP: no pyenv CPython 3.%u\n", minor);
	}
	if (access("/usr/bin/python3.11", X_OK) == 0) {
		snprintf(its[n].path, sizeof(its[n].path), "/usr/bin/python3.11");
		snprintf(its[n].label, sizeof(its[n].label), "system 3.11");
		its[n++].minor = 11;
	} else {
		fprintf(stderr, "SKIP: no /usr/bin/python3.11\n");
	}
	if (p314 && p314[0]) {
		/* One or more interpreters (static, shared libpython), ':'-separated. */
		char list[4 * PATH_MAX], *save, *s;

		snprintf(list, sizeof(list), "%s", p314);
		for (s = strtok_r(list, ":", &save); s && n < 16; s = strtok_r(NULL, ":", &save)) {
			snprintf(its[n].path, sizeof(its[n].path), "%s", s);
			snprintf(its[n].label, sizeof(its[n].label), "3.14 %s", base_name(s));
			its[n++].minor = 14;
		}
	} else {
		fprintf(stderr, "SKIP: PROFD_TEST_PYTHON314 not set\n");
	}
	if (!n)
		return CHECK_SKIP("no CPython interpreter found");
	for (i = 0; i < n; i++) {
		test_interp(&its[i]);
		test_gil(&its[i]);
	}

	/* Too old: found and named, not read. */
	for (minor = 6; minor <= 7; minor++) {
		struct interp old;

		if (find_pyenv(3, minor, &old))
			test_unsupported(old.path, 0x0300 | minor);
		else
			fprintf(stderr, "SKIP: no pyenv CPython 3.%u\n", minor);
	}
	snprintf(legacy, sizeof(legacy), "%s/versions/2.7.18/bin/python2.7", pyenv_root());
	if (access(legacy, X_OK) == 0)
		test_unsupported(legacy, 0x0207);
	return CHECK_DONE();
}
