// SPDX-License-Identifier: BSD-2-Clause
/*
 * Symbolizer tests. Live processes: the PIE fixture (and its stripped copies) runs as a child and
 * reports the runtime addresses of its functions; we resolve them and compare names, modules and
 * ELF addresses with what libelf reads from the files. Fake /proc trees: bad maps lines, corrupt
 * and truncated ELF files, a library placed at a chosen base, a fake kallsyms.
 */
#define _GNU_SOURCE /* memfd_create */
#include "check.h"

#include "log.h"
#include "perf_map.h"
#include "procfs.h"
#include "symbolize.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FIX(name) SYMFIX_DIR "/" name

/* --- what libelf says about the fixtures ------------------------------------------------------ */

/* Set when a part could not run: the test then ends in CHECK_SKIP, never a pass. */
static const char *skipped;

static Elf *open_elf(const char *path, int *fd)
{
	elf_version(EV_CURRENT);
	*fd = open(path, O_RDONLY);
	if (*fd < 0)
		return NULL;
	return elf_begin(*fd, ELF_C_READ, NULL);
}

/* st_value (and st_size) of a symbol in .symtab, 0 if absent. */
static uint64_t sym_get(const char *path, const char *name, uint64_t *size)
{
	Elf_Scn *scn = NULL;
	uint64_t v = 0;
	GElf_Shdr sh;
	GElf_Sym sym;
	Elf_Data *d;
	Elf *e;
	int fd;

	e = open_elf(path, &fd);
	while (e && (scn = elf_nextscn(e, scn)) && !v) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			const char *n;

			if (!gelf_getsym(d, (int)i, &sym))
				break;
			n = elf_strptr(e, sh.sh_link, sym.st_name);
			if (n && !strcmp(n, name)) {
				v = sym.st_value;
				if (size)
					*size = sym.st_size;
			}
		}
	}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	return v;
}

static uint64_t sym_value(const char *path, const char *name)
{
	return sym_get(path, name, NULL);
}

static uint64_t sym_size(const char *path, const char *name)
{
	uint64_t size = 0;

	sym_get(path, name, &size);
	return size;
}

static void build_id_hex(const char *path, char *hex)
{
	size_t off, next, no, dof;
	Elf_Scn *scn = NULL;
	GElf_Nhdr nh;
	GElf_Shdr sh;
	Elf_Data *d;
	Elf *e;
	int fd;

	hex[0] = '\0';
	e = open_elf(path, &fd);
	while (e && (scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		for (off = 0; d && (next = gelf_getnote(d, off, &nh, &no, &dof)) > 0; off = next) {
			if (nh.n_type != NT_GNU_BUILD_ID)
				continue;
			for (size_t i = 0; i < nh.n_descsz; i++)
				sprintf(hex + 2 * i, "%02x", ((unsigned char *)d->d_buf)[dof + i]);
		}
	}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
}

/* The executable PT_LOAD of a file. */
static void exec_load(const char *path, uint64_t *off, uint64_t *vaddr)
{
	size_t n = 0;
	GElf_Phdr ph;
	Elf *e;
	int fd;

	*off = *vaddr = 0;
	e = open_elf(path, &fd);
	if (e && !elf_getphdrnum(e, &n)) {
		for (size_t i = 0; i < n; i++) {
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    (ph.p_flags & PF_X)) {
				*off = ph.p_offset;
				*vaddr = ph.p_vaddr;
			}
		}
	}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
}

/* --- the fixture process ---------------------------------------------------------------------- */

struct child {
	pid_t pid;
	uint64_t main_alpha, main_local, cxx, jit, lib_alpha, lib_beta, lib_local, lib_sized;
	uint64_t lib_versioned;
};

static int child_start(const char *exe, struct child *c)
{
	struct {
		const char *key;
		uint64_t *val;
	} keys[] = {
	    {"main_alpha", &c->main_alpha},
	    {"main_local", &c->main_local},
	    {"cxx", &c->cxx},
	    {"jit", &c->jit},
	    {"lib_alpha", &c->lib_alpha},
	    {"lib_beta", &c->lib_beta},
	    {"lib_local", &c->lib_local},
	    {"lib_sized", &c->lib_sized},
	    {"lib_versioned", &c->lib_versioned},
	};
	char line[256], key[64];
	unsigned long long v;
	int pfd[2];
	FILE *f;

	memset(c, 0, sizeof(*c));
	if (pipe(pfd))
		return -errno;
	c->pid = fork();
	if (c->pid < 0)
		return -errno;
	if (c->pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execl(exe, exe, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strcmp(line, "ready\n"))
			break;
		if (sscanf(line, "%63s %llx", key, &v) != 2)
			continue;
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (!strcmp(key, keys[i].key))
				*keys[i].val = v;
	}
	if (f)
		fclose(f);
	return c->main_alpha && c->lib_alpha && c->jit ? 0 : -EIO;
}

static void child_stop(struct child *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		c->pid = 0;
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static char exe_path[PATH_MAX], lib_path[PATH_MAX], tmpdir[] = "/tmp/profd-sym-XXXXXX";

static const char *tmp(const char *name)
{
	static char bufs[4][PATH_MAX];
	static int i;

	i = (i + 1) % 4;
	snprintf(bufs[i], PATH_MAX, "%s/%s", tmpdir, name);
	return bufs[i];
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");

	CHECK(f != NULL);
	if (!f)
		return;
	CHECK_EQ_U(fwrite(data, 1, len, f), len);
	fclose(f);
}

static char *read_all(const char *path, size_t *len)
{
	char *buf = NULL;

	if (procfs_read_file(path, 64u << 20, &buf, len))
		return NULL;
	return buf;
}

/* Log capture, to check what the symbolizer says about the files it loads. */
static char logbuf[16384];

static void log_capture(enum log_level level, const char *msg, void *ctx)
{
	size_t n = strlen(logbuf);

	snprintf(logbuf + n, sizeof(logbuf) - n, "%s\n", msg);
}

#define EXPECT_SYM(s, pid, addr, want_name, want_module, want_address)                             \
	do {                                                                                       \
		struct sym_result r_;                                                              \
		CHECK_EQ_I(symbolizer__user(s, pid, addr, &r_), 0);                                \
		if (want_name)                                                                     \
			CHECK_STREQ(r_.name, (const char *)(want_name));                           \
		else                                                                               \
			CHECK(r_.name == NULL);                                                    \
		CHECK_STREQ(r_.module, want_module);                                               \
		CHECK_EQ_U(r_.address, want_address);                                              \
	} while (0)

/* --- perf maps: the streaming scan and its budget --------------------------------------------- */

static int memfd_with(const char *text, size_t len)
{
	int fd = memfd_create("perfmap", 0);

	if (fd < 0)
		return -1;
	if (write(fd, text, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET)) {
		close(fd);
		return -1;
	}
	return fd;
}

static const char *find_name(struct sym_table *t, uint64_t addr)
{
	struct sym_entry *e = sym_table__find(t, addr);

	return e ? sym_table__name(t, e) : NULL;
}

static void test_perf_map_scan(void)
{
	static const char text[] = "1000 10 first\n"
				   "garbage\n"
				   "2000 0 zero_size\n"
				   "zz 10 bad_hex\n"
				   "3000 10   \n"
				   "ffffffffffffffff 10 wraps\n"
				   "0x4000 0x20 hexed\r\n"
				   "1000 10 first_again\n"
				   "5000 8 no_newline_at_end";
	struct perf_map_scan_stats st;
	struct sym_table t = {0};
	uint64_t wanted[] = {0x4010, 0x9000};
	char *big, *p;
	int fd;

	/* Everything fits: the later line for a start wins, bad lines are counted. */
	fd = memfd_with(text, sizeof(text) - 1);
	CHECK(fd >= 0);
	CHECK_EQ_I(
	    perf_map__scan(fd, &(struct perf_map_scan_opts){.budget = 1 << 20, .max_read = 1 << 20},
			   &t, &st),
	    0);
	CHECK_EQ_U(st.lines, 4);
	CHECK_EQ_U(st.bad_lines, 5);
	CHECK_EQ_U(st.kept, 3);
	CHECK_EQ_U(st.dropped, 0);
	CHECK(!st.sparse && !st.truncated);
	CHECK_STREQ(find_name(&t, 0x1008), "first_again");
	CHECK_STREQ(find_name(&t, 0x401f), "hexed");
	CHECK_STREQ(find_name(&t, 0x5007), "no_newline_at_end");
	CHECK(find_name(&t, 0x2000) == NULL);
	sym_table__fini(&t);

	/* A budget of one entry: past it only the entry covering a wanted address stays. */
	CHECK_EQ_I(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ_I(
	    perf_map__scan(fd,
			   &(struct perf_map_scan_opts){.wanted = wanted,
							.n_wanted = 2,
							.budget = sizeof(struct sym_entry) + 8,
							.max_read = 1 << 20},
			   &t, &st),
	    0);
	CHECK(st.sparse);
	CHECK_EQ_U(st.kept, 1);
	CHECK_EQ_U(st.dropped, 3);
	CHECK_STREQ(find_name(&t, 0x4010), "hexed");
	CHECK(find_name(&t, 0x1000) == NULL);
	CHECK(perf_map__table_bytes(&t) <= sizeof(struct sym_entry) + 8);
	sym_table__fini(&t);

	/* max_read cuts the file: the line it cuts is not parsed. */
	CHECK_EQ_I(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ_I(perf_map__scan(fd,
				  &(struct perf_map_scan_opts){.budget = 1 << 20, .max_read = 18},
				  &t, &st),
		   0);
	CHECK(st.truncated);
	CHECK_EQ_U(st.bytes_read, 18);
	CHECK_EQ_U(st.kept, 1);
	sym_table__fini(&t);
	close(fd);

	/* An endless line is skipped, not buffered: the entry after it is read. */
	big = malloc(300000);
	CHECK(big != NULL);
	if (!big)
		return;
	p = big + sprintf(big, "6000 10 ");
	memset(p, 'x', 200000);
	p += 200000;
	p += sprintf(p, "\n7000 10 after_long\n");
	fd = memfd_with(big, (size_t)(p - big));
	free(big);
	CHECK(fd >= 0);
	CHECK_EQ_I(
	    perf_map__scan(fd, &(struct perf_map_scan_opts){.budget = 1 << 20, .max_read = 1 << 20},
			   &t, &st),
	    0);
	CHECK_EQ_U(st.bad_lines, 1);
	CHECK_EQ_U(st.kept, 1);
	CHECK_STREQ(find_name(&t, 0x7004), "after_long");
	sym_table__fini(&t);
	close(fd);
}

/*
 * A perf map far over the budget (a user can write one of any size): read off the caller's
 * thread, only the entries samples hit are kept, and they name their frames.
 */
static void test_perf_map_budget(void)
{
	struct symbolizer_opts o = {
	    .no_kernel = true, .debug_root = tmp("empty"), .max_perf_map_bytes = 1 << 20};
	struct symbolizer_stats st;
	struct sym_result r;
	struct symbolizer *s;
	char perf[64];
	struct child c;
	FILE *f;

	if (child_start(exe_path, &c)) {
		CHECK(!"fixture did not start");
		child_stop(&c);
		return;
	}
	snprintf(perf, sizeof(perf), "/tmp/perf-%d.map", c.pid);
	f = fopen(perf, "w");
	CHECK(f != NULL);
	if (!f)
		goto out;
	/* 8 MiB of entries elsewhere, the real ones in the middle. */
	for (int i = 0; i < 200000; i++) {
		if (i == 100000) {
			fprintf(f, "%llx 40 jit_real_one\n", (unsigned long long)c.jit);
			fprintf(f, "%llx 40 jit_real_two\n", (unsigned long long)c.jit + 0x40);
		}
		fprintf(f, "%llx 20 filler_entry_with_a_long_name_%08d\n",
			0x100000000000ull + (unsigned long long)i * 0x20, i);
	}
	fclose(f);
	s = symbolizer__new(&o);
	CHECK(s != NULL);
	if (!s)
		goto out;
	/* The first miss queues the read; the name comes once it is done. */
	CHECK_EQ_I(symbolizer__user(s, c.pid, c.jit + 0x10, &r), 0);
	CHECK(r.name == NULL);
	symbolizer__settle(s);
	EXPECT_SYM(s, c.pid, c.jit + 0x10, "jit_real_one", perf, c.jit + 0x10);
	symbolizer__stats(s, &st);
	CHECK_EQ_U(st.perf_map_sparse, 1);
	CHECK(st.perf_map_dropped >= 200000);
	CHECK(st.perf_map_bytes > 0 && st.perf_map_bytes <= 256 << 10);
	CHECK_EQ_U(st.perf_map_scans, 1);

	/* Another address: found by the next scan, and the first one's entry stays. */
	CHECK_EQ_I(symbolizer__user(s, c.pid, c.jit + 0x50, &r), 0);
	symbolizer__settle(s);
	EXPECT_SYM(s, c.pid, c.jit + 0x50, "jit_real_two", perf, c.jit + 0x50);
	EXPECT_SYM(s, c.pid, c.jit + 0x10, "jit_real_one", perf, c.jit + 0x10);
	/* An address the file does not have: one scan, then no more for this version. */
	CHECK_EQ_I(symbolizer__user(s, c.pid, c.jit + 0x900, &r), 0);
	symbolizer__settle(s);
	symbolizer__stats(s, &st);
	CHECK_EQ_U(st.perf_map_scans, 3);
	CHECK_EQ_I(symbolizer__user(s, c.pid, c.jit + 0x900, &r), 0);
	CHECK(r.name == NULL);
	symbolizer__settle(s);
	symbolizer__stats(s, &st);
	CHECK_EQ_U(st.perf_map_scans, 3);

	/* Forgetting the process returns its bytes. */
	symbolizer__forget_pid(s, c.pid);
	symbolizer__stats(s, &st);
	CHECK_EQ_U(st.perf_map_bytes, 0);
	CHECK_EQ_U(st.perf_map_sparse, 0);
	symbolizer__free(s);
out:
	unlink(perf);
	child_stop(&c);
}

/* --- live process: full symbols --------------------------------------------------------------- */

static void test_live(void)
{
	struct symbolizer_opts o = {.no_kernel = true, .debug_root = tmp("empty")};
	uint64_t v_alpha = sym_value(exe_path, "fix_main_alpha");
	uint64_t v_local = sym_value(exe_path, "fix_main_local");
	uint64_t v_cxx = sym_value(exe_path, "_ZN5fixns5twiceIiEET_S1_");
	uint64_t l_alpha = sym_value(lib_path, "fixlib_alpha");
	uint64_t l_local = sym_value(lib_path, "fixlib_local");
	uint64_t l_sized = sym_value(lib_path, "fixlib_sized");
	uint64_t l_vers = sym_value(lib_path, "fixlib_versioned@@FIX_2");
	char bid[130], perf[64], line[256];
	struct sym_result r;
	struct symbolizer *s;
	struct child c;
	FILE *f;

	CHECK(v_alpha && v_local && v_cxx && l_alpha && l_local && l_sized && l_vers);
	if (child_start(exe_path, &c)) {
		CHECK(!"fixture did not start");
		child_stop(&c);
		return;
	}
	s = symbolizer__new(&o);
	CHECK(s != NULL);
	if (!s)
		goto out;
	CHECK(!symbolizer__has_kernel(s));

	EXPECT_SYM(s, c.pid, c.main_alpha, "fix_main_alpha", exe_path, v_alpha);
	EXPECT_SYM(s, c.pid, c.main_alpha + 3, "fix_main_alpha", exe_path, v_alpha + 3);
	EXPECT_SYM(s, c.pid, c.main_local, "fix_main_local", exe_path, v_local);
	EXPECT_SYM(s, c.pid, c.cxx, "int fixns::twice<int>(int)", exe_path, v_cxx);
	EXPECT_SYM(s, c.pid, c.lib_alpha, "fixlib_alpha", lib_path, l_alpha);
	EXPECT_SYM(s, c.pid, c.lib_alpha + 4, "fixlib_alpha", lib_path, l_alpha + 4);
	EXPECT_SYM(s, c.pid, c.lib_local + 1, "fixlib_local", lib_path, l_local + 1);
	EXPECT_SYM(s, c.pid, c.lib_sized, "fixlib_sized", lib_path, l_sized);
	/* A versioned definition is named without its version. */
	EXPECT_SYM(s, c.pid, c.lib_versioned + 1, "fixlib_versioned", lib_path, l_vers + 1);
	/* Past the 1-byte symbol, before the next: a gap. */
	EXPECT_SYM(s, c.pid, c.lib_sized + 8, NULL, lib_path, l_sized + 8);
	/* No mapping at all. */
	EXPECT_SYM(s, c.pid, 0x10, NULL, "[unknown]", 0x10);

	build_id_hex(exe_path, bid);
	CHECK_EQ_U(strlen(bid), 40);
	CHECK_EQ_I(symbolizer__user(s, c.pid, c.main_alpha, &r), 0);
	CHECK_STREQ(r.build_id, bid);

	/* JIT code through a perf map, garbage lines skipped. */
	snprintf(perf, sizeof(perf), "/tmp/perf-%d.map", c.pid);
	EXPECT_SYM(s, c.pid, c.jit + 0x10, NULL, "[anon]", c.jit + 0x10);
	f = fopen(perf, "w");
	CHECK(f != NULL);
	if (f) {
		fprintf(f, "%llx 40 jit_func_one\n", (unsigned long long)c.jit);
		fprintf(f, "garbage\n\nzz 10 bad_start\n%llx 0 zero_size\n",
			(unsigned long long)c.jit + 0x800);
		fprintf(f, "0x%llx 0x40 _ZN3foo3barEv\n", (unsigned long long)c.jit + 0x40);
		fprintf(f, "ffffffffffffffff 10 wraps\n%llx 10\n", (unsigned long long)c.jit);
		fclose(f);
	}
	/* The earlier miss stat'ed no file less than 100 ms ago: give the re-check its time. */
	sleep_ms(150);
	EXPECT_SYM(s, c.pid, c.jit + 0x10, "jit_func_one", perf, c.jit + 0x10);
	EXPECT_SYM(s, c.pid, c.jit + 0x7f, "foo::bar()", perf, c.jit + 0x7f);
	EXPECT_SYM(s, c.pid, c.jit + 0x800, NULL, "[anon]", c.jit + 0x800);
	/* The JIT appends; a miss after the interval reloads it. */
	f = fopen(perf, "a");
	if (f) {
		snprintf(line, sizeof(line), "%llx 20 jit_late\n",
			 (unsigned long long)c.jit + 0x100);
		fputs(line, f);
		fclose(f);
	}
	sleep_ms(150);
	EXPECT_SYM(s, c.pid, c.jit + 0x110, "jit_late", perf, c.jit + 0x110);
	EXPECT_SYM(s, c.pid, c.jit, "jit_func_one", perf, c.jit);
	unlink(perf);

	/*
	 * A perf map that is a link to another file (one only root may read, say) is not followed:
	 * its lines that parse as symbols must not come back as frame names.
	 */
	f = fopen(tmp("secret"), "w");
	CHECK(f != NULL);
	if (f) {
		fprintf(f, "%llx 40 secret_line\n", (unsigned long long)c.jit);
		fclose(f);
	}
	CHECK_EQ_I(chmod(tmp("secret"), 0600), 0);
	CHECK_EQ_I(symlink(tmp("secret"), perf), 0);
	symbolizer__forget_pid(s, c.pid);
	EXPECT_SYM(s, c.pid, c.jit + 0x10, NULL, "[anon]", c.jit + 0x10);
	sleep_ms(150);
	EXPECT_SYM(s, c.pid, c.jit + 0x10, NULL, "[anon]", c.jit + 0x10);
	unlink(perf);
	/* The same file, no longer behind a link, is read: the refusal was the link's. */
	CHECK_EQ_I(rename(tmp("secret"), perf), 0);
	sleep_ms(150);
	EXPECT_SYM(s, c.pid, c.jit + 0x10, "secret_line", perf, c.jit + 0x10);
	unlink(perf);

	/* Forget and resolve again: maps and images come back. */
	symbolizer__forget_pid(s, c.pid);
	EXPECT_SYM(s, c.pid, c.lib_beta, "fixlib_beta", lib_path,
		   sym_value(lib_path, "fixlib_beta"));
	EXPECT_SYM(s, c.pid, c.main_alpha, "fix_main_alpha", exe_path, v_alpha);

out:
	child_stop(&c);
	symbolizer__free(s);
}

/* Exit handling needs the pid after the child is gone: a separate test keeps it. */
static void test_exited(void)
{
	struct symbolizer_opts o = {.no_kernel = true, .debug_root = tmp("empty")};
	uint64_t v_alpha = sym_value(exe_path, "fix_main_alpha");
	struct symbolizer *s = symbolizer__new(&o);
	struct sym_result r;
	struct child c;
	pid_t pid;

	CHECK(s != NULL);
	if (!s || child_start(exe_path, &c)) {
		CHECK(!"fixture did not start");
		symbolizer__free(s);
		return;
	}
	pid = c.pid;
	EXPECT_SYM(s, pid, c.main_alpha, "fix_main_alpha", exe_path, v_alpha);
	child_stop(&c);
	/* Still cached: samples of a process are often handled after it exited. */
	EXPECT_SYM(s, pid, c.main_alpha, "fix_main_alpha", exe_path, v_alpha);
	sleep_ms(150);
	CHECK_EQ_I(symbolizer__user(s, pid, 0x10, &r), -ESRCH);
	symbolizer__forget_pid(s, pid);
	CHECK_EQ_I(symbolizer__user(s, pid, c.main_alpha, &r), -ESRCH);
	/* Forgetting twice or forgetting unknown pids is harmless. */
	symbolizer__forget_pid(s, pid);
	symbolizer__forget_pid(s, 1u << 30);
	symbolizer__free(s);
}

/* --- stripped binaries: debuglink, build-id, CRC mismatch ------------------------------------- */

static void test_debug_files(void)
{
	struct symbolizer_opts o = {.no_kernel = true, .debug_root = tmp("empty")};
	uint64_t v_alpha = sym_value(exe_path, "fix_main_alpha");
	uint64_t v_local = sym_value(exe_path, "fix_main_local");
	char dl[PATH_MAX], bidexe[PATH_MAX], bid[130], dir[PATH_MAX], link[PATH_MAX], want[600];
	char copy[PATH_MAX];
	struct symbolizer *s;
	struct child c;
	size_t len;
	char *data;

	CHECK(realpath(FIX("symfix_dl"), dl) != NULL);
	CHECK(realpath(FIX("symfix_bid"), bidexe) != NULL);

	/* .gnu_debuglink to symfix.debug in the same directory. */
	logbuf[0] = '\0';
	s = symbolizer__new(&o);
	if (s && !child_start(dl, &c)) {
		EXPECT_SYM(s, c.pid, c.main_alpha + 2, "fix_main_alpha", dl, v_alpha + 2);
		EXPECT_SYM(s, c.pid, c.main_local, "fix_main_local", dl, v_local);
		snprintf(want, sizeof(want), "symbolize: %s: no .symtab, using .symtab of ", dl);
		CHECK(strstr(logbuf, want) != NULL);
	} else {
		CHECK(!"debuglink fixture");
	}
	child_stop(&c);
	symbolizer__free(s);

	/* Build-id only: nothing without a debug root, names with one. */
	s = symbolizer__new(&o);
	if (s && !child_start(bidexe, &c)) {
		EXPECT_SYM(s, c.pid, c.main_alpha, NULL, bidexe, v_alpha);
		snprintf(want, sizeof(want), "symbolize: %s: no symbols", bidexe);
		CHECK(strstr(logbuf, want) != NULL);
		symbolizer__free(s);

		build_id_hex(bidexe, bid);
		CHECK_EQ_U(strlen(bid), 40);
		snprintf(dir, sizeof(dir), "%s/.build-id/%.2s", tmp("dbg"), bid);
		CHECK(!mkdir(tmp("dbg"), 0755) && !mkdir(tmp("dbg/.build-id"), 0755) &&
		      !mkdir(dir, 0755));
		snprintf(link, sizeof(link), "%s/%s.debug", dir, bid + 2);
		CHECK(!symlink(FIX("symfix.debug"), link));
		o.debug_root = tmp("dbg");
		s = symbolizer__new(&o);
		EXPECT_SYM(s, c.pid, c.main_alpha, "fix_main_alpha", bidexe, v_alpha);
		EXPECT_SYM(s, c.pid, c.main_local + 1, "fix_main_local", bidexe, v_local + 1);
		o.debug_root = tmp("empty");
	} else {
		CHECK(!"build-id fixture");
	}
	child_stop(&c);
	symbolizer__free(s);

	/* The cache is keyed by build-id: once the full file is loaded its stripped twin shares it.
	 */
	s = symbolizer__new(&o);
	if (s && !child_start(exe_path, &c)) {
		EXPECT_SYM(s, c.pid, c.main_alpha, "fix_main_alpha", exe_path, v_alpha);
		child_stop(&c);
		if (!child_start(bidexe, &c))
			EXPECT_SYM(s, c.pid, c.main_alpha, "fix_main_alpha", bidexe, v_alpha);
	}
	child_stop(&c);
	symbolizer__free(s);

	/* A debug file whose CRC does not match the link is refused. */
	snprintf(copy, sizeof(copy), "%s", tmp("crc"));
	CHECK(!mkdir(copy, 0755));
	data = read_all(dl, &len);
	CHECK(data != NULL);
	if (data) {
		write_file(tmp("crc/symfix_dl"), data, len);
		chmod(tmp("crc/symfix_dl"), 0755);
		free(data);
	}
	data = read_all(FIX("symfix.debug"), &len);
	if (data) {
		data[len / 2] ^= 0x5a; /* same size, other bytes */
		write_file(tmp("crc/symfix.debug"), data, len);
		free(data);
	}
	logbuf[0] = '\0';
	log_set_level(LOG_LVL_DEBUG);
	s = symbolizer__new(&o);
	if (s && !child_start(tmp("crc/symfix_dl"), &c)) {
		CHECK(realpath(tmp("crc/symfix_dl"), copy) != NULL);
		EXPECT_SYM(s, c.pid, c.main_alpha, NULL, copy, v_alpha);
		CHECK(strstr(logbuf, "debug link CRC mismatch") != NULL);
	} else {
		CHECK(!"crc fixture");
	}
	log_set_level(LOG_LVL_INFO);
	child_stop(&c);
	symbolizer__free(s);
}

/* --- the LRU bound ---------------------------------------------------------------------------- */

static void test_lru(void)
{
	struct symbolizer_opts o = {
	    .no_kernel = true, .debug_root = tmp("empty"), .max_elf_files = 1};
	uint64_t v_alpha = sym_value(exe_path, "fix_main_alpha");
	uint64_t l_alpha = sym_value(lib_path, "fixlib_alpha");
	struct symbolizer *s = symbolizer__new(&o);
	struct child c;

	if (!s || child_start(exe_path, &c)) {
		CHECK(!"lru fixture");
		symbolizer__free(s);
		return;
	}
	/* One slot, two files: every lookup evicts the other and reloads. */
	for (int i = 0; i < 3; i++) {
		EXPECT_SYM(s, c.pid, c.main_alpha, "fix_main_alpha", exe_path, v_alpha);
		EXPECT_SYM(s, c.pid, c.lib_alpha, "fixlib_alpha", lib_path, l_alpha);
	}
	symbolizer__free(s);

	/* The same with a byte bound instead: one byte keeps only the newest symbol table. */
	o.max_elf_files = 0;
	o.max_sym_bytes = 1;
	s = symbolizer__new(&o);
	CHECK(s != NULL);
	logbuf[0] = '\0';
	log_set_level(LOG_LVL_DEBUG); /* main() already routes log lines into logbuf */
	for (int i = 0; s && i < 3; i++) {
		EXPECT_SYM(s, c.pid, c.main_alpha, "fix_main_alpha", exe_path, v_alpha);
		EXPECT_SYM(s, c.pid, c.lib_alpha, "fixlib_alpha", lib_path, l_alpha);
	}
	log_set_level(LOG_LVL_INFO);
	/* Each of the six lookups loaded its file and pushed the other one out. */
	{
		int evictions = 0;

		for (const char *p = logbuf; (p = strstr(p, "evicted from the ELF cache")); p++)
			evictions++;
		CHECK(evictions >= 5);
	}
	child_stop(&c);
	symbolizer__free(s);
}

/* --- big files, indexed off the caller's thread ------------------------------------------------
 */

/*
 * Every file counts as big (elf_sync_max 1): the first lookup in a file queues its index and
 * answers at once without a name (module and offset only), the lookups after the worker is done
 * name it. A symbolizer freed with loads queued drops them.
 */
static void test_async_index(void)
{
	struct symbolizer_opts o = {
	    .no_kernel = true, .debug_root = tmp("empty"), .elf_sync_max = 1};
	uint64_t v_alpha = sym_value(exe_path, "fix_main_alpha");
	uint64_t v_cxx = sym_value(exe_path, "_ZN5fixns5twiceIiEET_S1_");
	uint64_t l_alpha = sym_value(lib_path, "fixlib_alpha");
	struct symbolizer_stats st;
	struct symbolizer *s = symbolizer__new(&o);
	struct sym_result r;
	struct child c;

	if (!CHECK(s != NULL) || child_start(exe_path, &c)) {
		CHECK(!"async fixture");
		symbolizer__free(s);
		return;
	}
	CHECK_EQ_I(symbolizer__user(s, c.pid, c.main_alpha, &r), 0);
	CHECK(r.name == NULL);
	CHECK_STREQ(r.module, exe_path);
	CHECK(r.build_id == NULL);
	symbolizer__settle(s);
	EXPECT_SYM(s, c.pid, c.main_alpha, "fix_main_alpha", exe_path, v_alpha);
	EXPECT_SYM(s, c.pid, c.cxx, "int fixns::twice<int>(int)", exe_path, v_cxx);
	CHECK_EQ_I(symbolizer__user(s, c.pid, c.lib_alpha, &r), 0);
	CHECK(r.name == NULL);
	symbolizer__settle(s);
	EXPECT_SYM(s, c.pid, c.lib_alpha, "fixlib_alpha", lib_path, l_alpha);
	symbolizer__stats(s, &st);
	CHECK_EQ_U(st.elf_files, 2);
	CHECK(st.elf_bytes > 0);
	child_stop(&c);
	symbolizer__free(s);

	/* Freed with loads queued: nothing leaks, nothing waits for long. */
	s = symbolizer__new(&o);
	if (CHECK(s != NULL) && !child_start(exe_path, &c)) {
		CHECK_EQ_I(symbolizer__user(s, c.pid, c.main_alpha, &r), 0);
		CHECK_EQ_I(symbolizer__user(s, c.pid, c.lib_alpha, &r), 0);
		child_stop(&c);
	}
	symbolizer__free(s);
}

/* --- re-reading maps on a miss ---------------------------------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * An address no mapping covers re-reads maps at most every 100 ms, and each re-read that does
 * not find it doubles the wait (up to 1.6 s); one that finds a mapping brings it back to 100 ms.
 */
static void test_reread_backoff(void)
{
	struct symbolizer_opts o = {.no_kernel = true, .debug_root = tmp("empty")};
	char dirp[PATH_MAX], mapsp[PATH_MAX];
	static const char one[] = "10000-20000 r-xp 00000000 fd:01 1234 /bin/one\n";
	static const char two[] = "10000-20000 r-xp 00000000 fd:01 1234 /bin/one\n"
				  "30000-40000 r-xp 00000000 fd:01 1235 /bin/two\n";
	struct symbolizer *s;
	struct sym_result r;
	uint64_t t;

	snprintf(dirp, sizeof(dirp), "%s/4242", tmp("proc2"));
	mkdir(tmp("proc2"), 0755);
	mkdir(dirp, 0755);
	snprintf(mapsp, sizeof(mapsp), "%s/maps", dirp);
	write_file(mapsp, one, sizeof(one) - 1);
	o.proc_root = tmp("proc2");
	s = symbolizer__new(&o);
	if (!CHECK(s != NULL))
		return;
	/* Read at first sight; the garbage address is not re-read for it yet. */
	EXPECT_SYM(s, 4242, 0x10100, NULL, "/bin/one", 0x100);
	EXPECT_SYM(s, 4242, 0x50000, NULL, "[unknown]", 0x50000);
	sleep_ms(120);
	/* Re-read: still not there, the next wait is 200 ms. */
	EXPECT_SYM(s, 4242, 0x50000, NULL, "[unknown]", 0x50000);
	t = now_ms();
	write_file(mapsp, two, sizeof(two) - 1);
	sleep_ms(120);
	CHECK_EQ_I(symbolizer__user(s, 4242, 0x30100, &r), 0);
	/* Only when the machine kept to the sleep: past 200 ms a re-read is due. */
	if (now_ms() - t < 190)
		CHECK_STREQ(r.module, "[unknown]");
	sleep_ms(100);
	EXPECT_SYM(s, 4242, 0x30100, NULL, "/bin/two", 0x100);
	symbolizer__free(s);
}

/* --- the vdso --------------------------------------------------------------------------------- */

static void test_vdso(void)
{
	struct symbolizer_opts o = {.no_kernel = true, .debug_root = tmp("empty")};
	unsigned long base = getauxval(AT_SYSINFO_EHDR);
	uint64_t want = 0, size = 0;
	struct proc_map *maps = NULL;
	struct symbolizer *s;
	Elf_Scn *scn = NULL;
	size_t n = 0, i;
	GElf_Shdr sh;
	GElf_Sym sym;
	Elf_Data *d;
	char *copy;
	Elf *e;

	if (!base || procfs_read_maps("/proc", (uint32_t)getpid(), false, &maps, &n)) {
		skipped = "no vdso mapping found: the vDSO part did not run";
		return;
	}
	for (i = 0; i < n; i++)
		if (maps[i].start == base)
			size = maps[i].end - maps[i].start;
	procfs_free_maps(maps, n);
	CHECK(size > 0);
	copy = malloc(size);
	memcpy(copy, (void *)base, size);
	elf_version(EV_CURRENT);
	e = elf_memory(copy, size);
	while (e && (scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM)
			continue;
		d = elf_getdata(scn, NULL);
		for (i = 0; d && gelf_getsym(d, (int)i, &sym); i++) {
			const char *nm = elf_strptr(e, sh.sh_link, sym.st_name);

			if (nm && !strcmp(nm, "__vdso_clock_gettime"))
				want = sym.st_value;
		}
	}
	if (e)
		elf_end(e);
	free(copy);
	CHECK(want != 0);
	s = symbolizer__new(&o);
	/* The vdso is linked at 0: its ELF address is the offset in the mapping. */
	EXPECT_SYM(s, (uint32_t)getpid(), base + want + 1, "__vdso_clock_gettime", "[vdso]",
		   want + 1);
	symbolizer__free(s);
}

/* --- fake /proc: bad maps, corrupt ELF, chosen load base, kallsyms ---------------------------- */

#define FAKE_PID 4000001u

struct fake_file {
	const char *name; /* under root/bin */
	uint64_t start;
	const void *data;
	size_t len;
	uint64_t inode;
};

static uint64_t inode_of(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (uint64_t)st.st_ino;
}

static void test_fake_proc(void)
{
	static const char kallsyms[] = "ffffffff81000000 T _stext\n"
				       "ffffffff81000100 t helper_fn\n"
				       "ffffffff81000200 D some_data\n"
				       "garbage\n"
				       "\n"
				       "ffffffff8100030 T\n"
				       "ffffffff81000300 W weak_fn\n"
				       "1ffffffff81000400 T too_long_address\n"
				       "ffffffff81000400 TT bad_type\n"
				       "ffffffffa0000000 t mod_fn\t[ext4]\n"
				       "ffffffffa0000080 T mod_bad\t[ext4\n"
				       "ffffffffa0000100 T mod_fn2\t[ext4]\n"
				       "ffffffffa0001000 t other_fn\t[nf_tables]\n"
				       "ffffffff81000000 T _text";
	char proc[PATH_MAX], root[PATH_MAX], path[PATH_MAX], maps[16384], *lib, *stripped;
	uint64_t l_alpha = sym_value(lib_path, "fixlib_alpha");
	uint64_t l_local = sym_value(lib_path, "fixlib_local");
	uint64_t off, vaddr, base = 0x7f0000000000ull, map_off;
	unsigned char garbage[4096];
	size_t lib_len, st_len, mlen = 0;
	struct fake_file files[48];
	struct symbolizer *s;
	struct sym_result r;
	int nf = 0;

	snprintf(proc, sizeof(proc), "%s", tmp("proc"));
	snprintf(root, sizeof(root), "%s/%u/root", proc, FAKE_PID);
	snprintf(path, sizeof(path), "%s/%u", proc, FAKE_PID);
	CHECK(!mkdir(proc, 0755) && !mkdir(path, 0755) && !mkdir(root, 0755));
	snprintf(path, sizeof(path), "%s/bin", root);
	CHECK(!mkdir(path, 0755));
	lib = read_all(lib_path, &lib_len);
	stripped = read_all(FIX("libsymfix_stripped.so"), &st_len);
	CHECK(lib != NULL && stripped != NULL);
	if (!lib || !stripped)
		goto out_free;

	srand(12345);
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (unsigned char)rand();
	/* Whole library, stripped library, garbage, truncations, then copies with flipped bytes. */
	files[nf++] = (struct fake_file){"lib.so", 0, lib, lib_len};
	files[nf++] = (struct fake_file){"stripped.so", 0, stripped, st_len};
	files[nf++] = (struct fake_file){"garbage", 0, garbage, sizeof(garbage)};
	files[nf++] = (struct fake_file){"empty", 0, garbage, 0};
	{
		static const size_t cuts[] = {4, 16, 52, 64, 100, 400, 1500, 4100, 8192, 12000};
		static char names[10][16];

		for (int i = 0; i < 10; i++) {
			snprintf(names[i], sizeof(names[i]), "trunc%d", i);
			files[nf++] = (struct fake_file){names[i], 0, lib,
							 cuts[i] < lib_len ? cuts[i] : lib_len};
		}
	}
	char *flipped[24] = {0};
	for (int i = 0; i < 24; i++) {
		static char names[24][16];

		flipped[i] = malloc(lib_len);
		memcpy(flipped[i], lib, lib_len);
		/* Headers and tables are where corruption hurts: flip there and at random. */
		for (int k = 0; k < 8; k++) {
			size_t at = k < 4 ? (size_t)rand() % 128 : (size_t)rand() % lib_len;

			flipped[i][at] ^= (char)(1 + rand() % 255);
		}
		snprintf(names[i], sizeof(names[i]), "flip%d", i);
		files[nf++] = (struct fake_file){names[i], 0, flipped[i], lib_len};
	}

	/* The library's text at a base of our choosing, so its bias is neither 0 nor obvious. */
	exec_load(lib_path, &off, &vaddr);
	map_off = off & ~0xfffull;
	mlen += (size_t)snprintf(maps + mlen, sizeof(maps) - mlen,
				 "garbage line\n"
				 "1000-0500 r-xp 00000000 00:00 0\n"
				 "1000-2000 r-xq 00000000 00:00 0\n"
				 "1000-2000 r-xp 0000000g 00:00 0\n"
				 "10000000000000000-20000 r-xp 00000000 00:00 0\n"
				 "3000-4000 r-xp 00000000 00:00\n"
				 "3000-4000 r-xp 00000000 00:00 12x /bin/x\n"
				 "3000-4000 r-\n");
	for (int i = 0; i < nf; i++) {
		snprintf(path, sizeof(path), "%s/bin/%s", root, files[i].name);
		write_file(path, files[i].data, files[i].len);
		files[i].inode = inode_of(path);
		files[i].start = base + (uint64_t)i * 0x100000;
		mlen += (size_t)snprintf(maps + mlen, sizeof(maps) - mlen,
					 "%llx-%llx r-xp %08llx fd:01 %llu /bin/%s\n",
					 (unsigned long long)files[i].start,
					 (unsigned long long)files[i].start + 0x10000,
					 (unsigned long long)(i < 2 ? map_off : 0),
					 (unsigned long long)files[i].inode, files[i].name);
	}
	mlen += (size_t)snprintf(maps + mlen, sizeof(maps) - mlen,
				 "7f1000000000-7f1000001000 r-xp 00000000 00:00 0 \n"
				 "7f1000002000-7f1000003000 r-xp 00000000 fd:01 77 /bin/gone file "
				 "(deleted)\n"
				 "7f1000004000-7f1000005000 r-xp 00000000 00:00 0 [vsyscall]\n"
				 "7f1000006000-7f1000007000 rw-p 00000000 00:00 0 [heap]\n"
				 "7f1000000000-7f1000009000 r-xp 00000000 00:00 0 overlapping\n");
	snprintf(path, sizeof(path), "%s/%u/maps", proc, FAKE_PID);
	write_file(path, maps, mlen);
	snprintf(path, sizeof(path), "%s/kallsyms", proc);
	write_file(path, kallsyms, sizeof(kallsyms) - 1);

	logbuf[0] = '\0';
	struct symbolizer_opts o = {.proc_root = proc, .debug_root = tmp("empty")};
	s = symbolizer__new(&o);
	CHECK(s != NULL);
	if (!s)
		goto out_free;

		/* addr = start + (file offset - mapping offset); file offset = vaddr - p_vaddr +
		 * p_offset */
#define LIB_ADDR(f, v) ((f).start + ((v)-vaddr + off) - map_off)
	/*
	 * .dynsym only: exported names resolve, the local function's address does not. First, as
	 * an image of the same build-id with full symbols would be shared with it.
	 */
	EXPECT_SYM(s, FAKE_PID, LIB_ADDR(files[1], l_alpha), "fixlib_alpha", "/bin/stripped.so",
		   l_alpha);
	EXPECT_SYM(s, FAKE_PID, LIB_ADDR(files[1], l_local), NULL, "/bin/stripped.so", l_local);
	/*
	 * Inside the static function no symbol names, the CFI gives its start: every address in
	 * it is one frame (fixlib_local is 13 bytes at -O1).
	 */
	CHECK(sym_size(lib_path, "fixlib_local") > 8);
	EXPECT_SYM(s, FAKE_PID, LIB_ADDR(files[1], l_local) + 3, NULL, "/bin/stripped.so", l_local);
	EXPECT_SYM(s, FAKE_PID, LIB_ADDR(files[1], l_local) + 8, NULL, "/bin/stripped.so", l_local);
	CHECK(strstr(logbuf, "symbolize: /bin/stripped.so: no .symtab, using .dynsym") != NULL);
	/* The same build-id with only .dynsym cached does not stop the full file's .symtab. */
	EXPECT_SYM(s, FAKE_PID, LIB_ADDR(files[0], l_alpha) + 2, "fixlib_alpha", "/bin/lib.so",
		   l_alpha + 2);
	EXPECT_SYM(s, FAKE_PID, LIB_ADDR(files[0], l_local), "fixlib_local", "/bin/lib.so",
		   l_local);
	/* Not ELF at all, or cut short: no name, the module and the file offset. */
	EXPECT_SYM(s, FAKE_PID, files[2].start + 0x123, NULL, "/bin/garbage", 0x123);
	EXPECT_SYM(s, FAKE_PID, files[3].start + 0x123, NULL, "/bin/empty", 0x123);
	for (int i = 4; i < 8; i++) {
		snprintf(path, sizeof(path), "/bin/%s", files[i].name);
		EXPECT_SYM(s, FAKE_PID, files[i].start + 0x1180, NULL, path, 0x1180);
	}
	/* Longer truncations and flipped bytes: whatever comes out, the module is right. */
	for (int i = 4; i < nf; i++) {
		for (uint64_t a = 0; a < 0x3000; a += 0x97) {
			CHECK_EQ_I(symbolizer__user(s, FAKE_PID, files[i].start + a, &r), 0);
			snprintf(path, sizeof(path), "/bin/%s", files[i].name);
			CHECK_STREQ(r.module, path);
		}
	}
	EXPECT_SYM(s, FAKE_PID, 0x7f1000000010ull, NULL, "[anon]", 0x7f1000000010ull);
	EXPECT_SYM(s, FAKE_PID, 0x7f1000002010ull, NULL, "/bin/gone file", 0x10);
	EXPECT_SYM(s, FAKE_PID, 0x7f1000004010ull, NULL, "[vsyscall]", 0x7f1000004010ull);
	EXPECT_SYM(s, FAKE_PID, 0x7f1000006010ull, NULL, "[unknown]", 0x7f1000006010ull);
	EXPECT_SYM(s, FAKE_PID, 0x1500, NULL, "[unknown]", 0x1500);
	/* No such process in the fake tree. */
	CHECK_EQ_I(symbolizer__user(s, FAKE_PID + 1, 0x1000, &r), -ESRCH);

	/* kallsyms: text symbols only, modules from the last column, bad lines skipped. */
	CHECK(symbolizer__has_kernel(s));
	CHECK_EQ_I(symbolizer__kernel(s, 0xffffffff81000150ull, &r), 0);
	CHECK_STREQ(r.name, "helper_fn");
	CHECK_STREQ(r.module, "[kernel.kallsyms]");
	CHECK_EQ_U(r.address, 0xffffffff81000150ull);
	CHECK_EQ_I(symbolizer__kernel(s, 0xffffffff81000250ull, &r), 0);
	CHECK_STREQ(r.name, "helper_fn");
	CHECK_EQ_I(symbolizer__kernel(s, 0xffffffff81000000ull, &r), 0);
	CHECK_STREQ(r.name, "_stext");
	CHECK_EQ_I(symbolizer__kernel(s, 0xffffffff81000480ull, &r), 0);
	CHECK_STREQ(r.name, "weak_fn");
	CHECK_EQ_I(symbolizer__kernel(s, 0xffffffffa00000c0ull, &r), 0);
	CHECK_STREQ(r.name, "mod_fn");
	CHECK_STREQ(r.module, "ext4");
	CHECK_EQ_I(symbolizer__kernel(s, 0xffffffffa0000100ull, &r), 0);
	CHECK_STREQ(r.name, "mod_fn2");
	CHECK_STREQ(r.module, "ext4");
	CHECK_EQ_I(symbolizer__kernel(s, 0xffffffffa0001001ull, &r), 0);
	CHECK_STREQ(r.name, "other_fn");
	CHECK_STREQ(r.module, "nf_tables");
	CHECK_EQ_I(symbolizer__kernel(s, 0xffffffff80000000ull, &r), 0);
	CHECK(r.name == NULL);
	CHECK_STREQ(r.module, "[kernel.kallsyms]");
	symbolizer__free(s);

	/*
	 * A module loaded after start: when /proc/modules changes, kallsyms is read again and the
	 * generation moves, so callers drop what they cached.
	 */
	{
		static const char ks2[] = "ffffffff81000000 T _stext\n"
					  "ffffffffa0000000 t mod_fn\t[ext4]\n"
					  "ffffffffa0002000 t late_fn\t[late]\n";
		struct symbolizer_opts o2 = o;
		uint64_t gen;

		snprintf(path, sizeof(path), "%s/modules", proc);
		write_file(path, "ext4 1000 0 - Live 0xffffffffa0000000\n", 38);
		o2.kernel_recheck_ns = 1; /* look at /proc/modules on every lookup */
		s = symbolizer__new(&o2);
		CHECK(s != NULL);
		gen = symbolizer__kernel_generation(s);
		CHECK_EQ_I(symbolizer__kernel(s, 0xffffffffa0002010ull, &r), 0);
		CHECK_STREQ(r.name, "other_fn"); /* the nearest symbol before it, for now */
		CHECK_EQ_U(symbolizer__kernel_generation(s), gen);
		snprintf(path, sizeof(path), "%s/kallsyms", proc);
		write_file(path, ks2, sizeof(ks2) - 1);
		snprintf(path, sizeof(path), "%s/modules", proc);
		write_file(path, "late 100 0 - Live 0xffffffffa0002000\n", 37);
		CHECK_EQ_I(symbolizer__kernel(s, 0xffffffffa0002010ull, &r), 0);
		CHECK_STREQ(r.name, "late_fn");
		CHECK_STREQ(r.module, "late");
		CHECK_EQ_U(symbolizer__kernel_generation(s), gen + 1);
		symbolizer__free(s);
		snprintf(path, sizeof(path), "%s/kallsyms", proc);
		write_file(path, kallsyms, sizeof(kallsyms) - 1);
	}

	/* kptr_restrict: every address zero means no kernel symbols. */
	snprintf(path, sizeof(path), "%s/kallsyms", proc);
	write_file(path, "0000000000000000 T _stext\n0000000000000000 t helper_fn\n", 52);
	s = symbolizer__new(&o);
	CHECK(s != NULL);
	CHECK(!symbolizer__has_kernel(s));
	CHECK_EQ_I(symbolizer__kernel(s, 0xffffffff81000150ull, &r), 0);
	CHECK(r.name == NULL);
	symbolizer__free(s);
out_free:
	for (int i = 0; i < 24; i++)
		free(flipped[i]);
	free(lib);
	free(stripped);
}

/* --- maps lines ------------------------------------------------------------------------------- */

static void test_maps_lines(void)
{
	char l1[] =
	    "7f0000001000-7f0000002000 r-xp 00001000 fd:01 1234   /usr/lib/a b.so (deleted)";
	char l2[] = "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  "
		    "[vsyscall]";
	char l3[] = "1000-2000 rw-s 00000000 00:00 0";
	char bad1[] = "1000-2000 rwxp 00000000 00:00 -1";
	char bad2[] = "1000-2000 rwxp 00000000 00:00 99999999999999999999999";
	char bad3[] = "-2000 rwxp 00000000 00:00 0";
	char buf[128];
	struct proc_map m;

	CHECK_EQ_I(procfs_parse_maps_line(l1, &m), 0);
	CHECK_EQ_U(m.start, 0x7f0000001000ull);
	CHECK_EQ_U(m.end, 0x7f0000002000ull);
	CHECK_EQ_U(m.offset, 0x1000);
	CHECK_EQ_U(m.dev_major, 0xfd);
	CHECK_EQ_U(m.dev_minor, 1);
	CHECK_EQ_U(m.inode, 1234);
	CHECK(m.executable && m.readable && !m.writable && !m.shared && m.deleted);
	CHECK_STREQ(m.path, "/usr/lib/a b.so");
	CHECK_EQ_I(procfs_parse_maps_line(l2, &m), 0);
	CHECK_STREQ(m.path, "[vsyscall]");
	CHECK(m.executable && !m.readable);
	CHECK_EQ_I(procfs_parse_maps_line(l3, &m), 0);
	CHECK_STREQ(m.path, "");
	CHECK(m.shared && m.writable && !m.executable);
	CHECK_EQ_I(procfs_parse_maps_line(bad1, &m), -EINVAL);
	CHECK_EQ_I(procfs_parse_maps_line(bad2, &m), -EINVAL);
	CHECK_EQ_I(procfs_parse_maps_line(bad3, &m), -EINVAL);
	/* Random bytes never crash the parser. */
	srand(777);
	for (int i = 0; i < 20000; i++) {
		size_t n = (size_t)rand() % (sizeof(buf) - 1);

		for (size_t k = 0; k < n; k++)
			buf[k] = "0123456789abcdef-: rwxps/()[]"[rand() % 29];
		buf[n] = '\0';
		procfs_parse_maps_line(buf, &m);
	}
}

/* --- real kernel ------------------------------------------------------------------------------ */

static void test_kernel(void)
{
	struct symbolizer_opts o = {.no_kernel = false};
	unsigned long long addr = 0, a;
	char line[512], name[256], type;
	struct sym_result r;
	struct symbolizer *s;
	FILE *f = fopen("/proc/kallsyms", "r");

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &a, &type, name) == 3 &&
		    !strcmp(name, "schedule") && (type == 'T' || type == 't') &&
		    !strchr(line, '[')) {
			addr = a;
			break;
		}
	}
	if (f)
		fclose(f);
	if (!addr) {
		skipped = "kallsyms hides addresses (not root?): the kernel part did not run";
		return;
	}
	s = symbolizer__new(&o);
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK(symbolizer__has_kernel(s));
	CHECK_EQ_I(symbolizer__kernel(s, addr, &r), 0);
	CHECK_STREQ(r.name, "schedule");
	CHECK_STREQ(r.module, "[kernel.kallsyms]");
	CHECK_EQ_U(r.address, addr);
	CHECK_EQ_I(symbolizer__kernel(s, addr + 4, &r), 0);
	CHECK_STREQ(r.name, "schedule");
	symbolizer__free(s);
}

int main(void)
{
	char cmd[PATH_MAX + 16];

	if (!realpath(FIX("symfix"), exe_path) || !realpath(FIX("libsymfix.so"), lib_path)) {
		fprintf(stderr, "fixtures missing\n");
		return 1;
	}
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	mkdir(tmp("empty"), 0755);
	log_set_sink(log_capture, NULL);

	test_maps_lines();
	test_live();
	test_perf_map_scan();
	test_perf_map_budget();
	test_exited();
	test_debug_files();
	test_lru();
	test_async_index();
	test_reread_backoff();
	test_vdso();
	test_fake_proc();
	test_kernel();

	log_set_sink(NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return skipped ? CHECK_SKIP(skipped) : CHECK_DONE();
}
