// SPDX-License-Identifier: BSD-2-Clause
/*
 * The launch probes against the real kernel (root): the sampler's BPF object, attached through
 * the sampler API to a fixture process, read back from the ring buffer.
 *
 *   test_launch_bpf usdt FIXTURE          USDT profd:cuda_launch in the fixture's own probe site:
 *                                         the exact correlation ids, the launching thread, the
 *                                         noinline chain, the semaphore, the target filter.
 *   test_launch_bpf uprobe FIXTURE [LIB]  uprobes on a libcuda (the CUDA toolkit's stub unless
 *                                         LIB): flagged records with the chain, none for a pid
 *                                         with the CUPTI library marked or outside the targets.
 *
 * Both check the per-process rate limit, and usdt the paths a hostile process may send: only a
 * file it maps, under that exact name, with at most 16 probe sites (PROFD_MANY_NOTES: a library
 * with 20), is attached to; a FIFO must not hang the caller.
 *
 * The uprobe stacks expect the direct caller of the probed function: at a function's entry the
 * frame pointer still names the caller's frame, and kernels from 6.11 read the return address
 * from the stack for a uprobe on a `push %rbp`; older kernels lose that one frame.
 *
 * Exit 77 (skip) when not root or when no stub libcuda exists; with CI=true a skip fails.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abi.h"
#include "check.h"
#include "log.h"
#include "sampler.h"
#include "symbolize.h"

#define MAX_RECS 64

static struct profd_sample_rec recs[MAX_RECS];
static int nrecs;
static uint32_t fixture_pid;
/* Warnings logged about launch probes that could not be attached. */
static int nrefused;

static void count_warnings(enum log_level level, const char *msg, void *ctx)
{
	if (level <= LOG_LVL_WARN && strstr(msg, "no launch probe in"))
		nrefused++;
	log_sink_stderr(level, msg, ctx);
}

/* Keep the launch records of the fixture; CPU samples (a few at 1 Hz) are not under test. */
static int on_record(void *ctx, const void *data, size_t size)
{
	const struct profd_rec_hdr *h = data;
	const struct profd_sample_rec *r = data;

	if (size < PROFD_SAMPLE_HDR_SIZE || h->type != PROFD_REC_LAUNCH || r->pid != fixture_pid)
		return 0;
	if (nrecs < MAX_RECS)
		memcpy(&recs[nrecs], data, size < sizeof(recs[0]) ? size : sizeof(recs[0]));
	nrecs++;
	return 0;
}

/* The fixture, driven through its stdin and stdout. */
struct fixture {
	pid_t pid;
	FILE *in;
	FILE *out;
};

static int fixture_start(struct fixture *f, const char *path, const char *lib)
{
	int to[2], from[2];

	if (pipe(to) || pipe(from))
		return -errno;
	f->pid = fork();
	if (f->pid < 0)
		return -errno;
	if (f->pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[1]);
		close(from[0]);
		execl(path, path, lib, (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	f->in = fdopen(to[1], "w");
	f->out = fdopen(from[0], "r");
	return f->in && f->out ? 0 : -ENOMEM;
}

/* Send one command; the answer's first line goes to buf. Returns 0 or -EIO. */
static int ask(struct fixture *f, const char *cmd, char *buf, size_t len)
{
	if (fprintf(f->in, "%s\n", cmd) < 0 || fflush(f->in))
		return -EIO;
	if (!fgets(buf, (int)len, f->out))
		return -EIO;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static long ask_num(struct fixture *f, const char *cmd)
{
	char buf[64];

	if (ask(f, cmd, buf, sizeof(buf)))
		return -1;
	return strtol(buf, NULL, 10);
}

static void fixture_stop(struct fixture *f)
{
	char buf[64];

	if (f->pid <= 0)
		return;
	if (ask(f, "q", buf, sizeof(buf)))
		kill(f->pid, SIGKILL);
	fclose(f->in);
	fclose(f->out);
	waitpid(f->pid, NULL, 0);
}

/* Run cmd in the fixture, then collect what its probes left in the ring buffer. */
static int run_and_drain(struct sampler *s, struct fixture *f, const char *cmd)
{
	char buf[64];

	nrecs = 0;
	CHECK_EQ_I(ask(f, cmd, buf, sizeof(buf)), 0);
	CHECK(!strncmp(buf, "done", 4));
	/* The programs ran in the fixture before it answered: everything is committed. */
	CHECK(sampler__drain(s) >= 0);
	return nrecs;
}

/* Names of the first n user frames of r, leaf first, joined by ';' (callers at addr - 1). */
static void user_names(struct symbolizer *sym, const struct profd_sample_rec *r, unsigned int n,
		       char *out, size_t len)
{
	out[0] = '\0';
	for (unsigned int i = 0; i < n && i < r->nr_user; i++) {
		struct sym_result res;
		size_t l = strlen(out);
		const char *name = "?";

		if (symbolizer__user(sym, r->pid, r->ips[r->nr_kernel + i] - (i > 0), &res) == 0 &&
		    res.name)
			name = res.name;
		snprintf(out + l, len - l, "%s%s", i ? ";" : "", name);
	}
}

static struct sampler *open_sampler_limited(uint32_t target, uint32_t rate, uint32_t burst)
{
	struct sampler_opts o = {
	    .pids = &target,
	    .npids = 1,
	    .frequency_hz = 1,
	    .ringbuf_size = 1 << 20,
	    .on_record = on_record,
	    .launch_rate = rate,
	    .launch_burst = burst,
	};

	return sampler__new(&o);
}

static struct sampler *open_sampler(uint32_t target)
{
	return open_sampler_limited(target, 0, 0);
}

static uint64_t limited(struct sampler *s)
{
	uint64_t c[PROFD_CNT__MAX];

	CHECK_EQ_I(sampler__counters(s, c), 0);
	return c[PROFD_CNT_LAUNCH_LIMITED];
}

/* Check the common shape of launch record i: ids, type, no kernel stack, the thread's name. */
static void check_rec(int i, uint32_t tid, uint32_t corr, uint32_t flags)
{
	const struct profd_sample_rec *r = &recs[i];

	CHECK_EQ_U(r->hdr.type, PROFD_REC_LAUNCH);
	CHECK_EQ_U(r->pid, fixture_pid);
	CHECK_EQ_U(r->tid, tid);
	CHECK_EQ_U(r->corr_id, corr);
	CHECK_EQ_U(r->flags & ~PROFD_SAMPLE_UNWIND_MASK, flags);
	/* No unwinder describes the process here: the frame-pointer walk, and the record says so.
	 */
	CHECK_EQ_U((r->flags & PROFD_SAMPLE_UNWIND_MASK) >> PROFD_SAMPLE_UNWIND_SHIFT,
		   PROFD_UNWIND_FP_FALLBACK);
	CHECK_EQ_U(r->nr_kernel, 0);
	CHECK(r->nr_user >= 4);
	CHECK_EQ_U(r->uid, getuid());
	CHECK_EQ_U(r->hdr.size, PROFD_SAMPLE_HDR_SIZE + 8u * r->nr_user);
	CHECK_STREQ(r->comm, "launcher");
	CHECK(r->ts_ns > 0);
	if (i > 0)
		CHECK(r->ts_ns > recs[i - 1].ts_ns);
}

/* A file the fixture maps, by the name its maps give (the first whose name contains part). */
static int mapped_path(uint32_t pid, const char *part, char *out, size_t len)
{
	char path[64], line[4352];
	int err = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (err && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');

		line[strcspn(line, "\n")] = '\0';
		if (p && strstr(p, part) && strlen(p) < len) {
			strcpy(out, p);
			err = 0;
		}
	}
	fclose(f);
	return err;
}

/*
 * Paths a process may send that must attach nothing, each refused at once, logged once for
 * the pid; nothing attached, so the probe's semaphore stays down.
 */
static void test_hostile_paths(struct sampler *s, struct fixture *f, const char *fixture_path)
{
	char dir[] = "/tmp/test_launch_bpf_XXXXXX", path[2 * PATH_MAX], other[2 * PATH_MAX + 8],
	     buf[64];
	const char *many = getenv("PROFD_MANY_NOTES");

	CHECK(many != NULL);
	CHECK(mkdtemp(dir) != NULL);
	nrefused = 0;
	log_set_sink(count_warnings, NULL);

	/* A FIFO: opening it by name blocks until a writer comes. The alarm fails a hang. */
	snprintf(path, sizeof(path), "%s/fifo", dir);
	CHECK_EQ_I(mkfifo(path, 0600), 0);
	alarm(20);
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, path), -ENOENT);
	alarm(0);
	CHECK_EQ_I(nrefused, 1);
	/* Refused again, not logged again. */
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, path), -ENOENT);
	CHECK_EQ_I(nrefused, 1);
	unlink(path);

	/* The very library, by any name but its mapping's: a symlink, a "..", a device. */
	snprintf(path, sizeof(path), "%s/link", dir);
	CHECK_EQ_I(symlink(fixture_path, path), 0);
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, path), -ENOENT);
	unlink(path);
	snprintf(path, sizeof(path), "%s/../%s", dir, fixture_path);
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, path), -ENOENT);
	snprintf(path, sizeof(path), "/proc/%u/exe", fixture_pid);
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, path), -ENOENT);
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, "/dev/zero"), -ENOENT);
	/* A file the process maps, without the probe. */
	CHECK_EQ_I(mapped_path(fixture_pid, "libc", other, sizeof(other)), 0);
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, other), -ENOENT);
	/* A library with 20 probe sites: each would cost a uprobe and a spec. */
	if (many && realpath(many, path)) {
		snprintf(other, sizeof(other), "l %s", path);
		CHECK_EQ_I(ask(f, other, buf, sizeof(buf)), 0);
		CHECK_STREQ(buf, "done");
		CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, path), -EINVAL);
	}
	CHECK_EQ_I(nrefused, 1);
	CHECK_EQ_I(ask_num(f, "s"), 0);
	CHECK_EQ_I(run_and_drain(s, f, "f 1 2"), 0);

	/* A detach forgets the pid: its next failure is logged again. */
	sampler__detach_launch_probe(s, fixture_pid);
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, "/dev/zero"), -ENOENT);
	CHECK_EQ_I(nrefused, 2);

	log_set_sink(NULL, NULL);
	rmdir(dir);
}

/*
 * The rate limit: a burst of 3, then one a second. Ten launches at once send three records,
 * the first three, and count seven as limited.
 */
static void test_usdt_limit(struct fixture *f, const char *fixture_path, long tid)
{
	struct sampler *s = open_sampler_limited(fixture_pid, 1, 3);

	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, fixture_path), 0);
	CHECK_EQ_U(limited(s), 0);
	CHECK_EQ_I(run_and_drain(s, f, "f 500 10"), 3);
	for (int i = 0; i < nrecs && i < 3; i++)
		check_rec(i, (uint32_t)tid, 500 + i, 0);
	CHECK_EQ_U(limited(s), 7);
	sampler__free(s);
}

static int test_usdt(const char *fixture_path)
{
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){.no_kernel = true});
	struct fixture f = {0};
	struct sampler *s = NULL;
	char names[512];
	long tid;

	CHECK_EQ_I(fixture_start(&f, fixture_path, NULL), 0);
	fixture_pid = (uint32_t)f.pid;
	tid = ask_num(&f, "t");
	CHECK(tid > 0 && tid != f.pid);
	CHECK_EQ_I(ask_num(&f, "s"), 0);

	s = open_sampler(fixture_pid);
	CHECK(s != NULL);
	if (!s || !sym)
		goto out;

	/* Nothing attached: the probe site is skipped, nothing arrives. */
	CHECK_EQ_I(run_and_drain(s, &f, "f 1 3"), 0);
	test_hostile_paths(s, &f, fixture_path);

	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, fixture_path), 0);
	CHECK_EQ_I(ask_num(&f, "s"), 1);
	/* Again: nothing changes, the semaphore is not raised twice. */
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, fixture_path), 0);
	CHECK_EQ_I(ask_num(&f, "s"), 1);
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, "relative/path"), -EINVAL);

	CHECK_EQ_I(run_and_drain(s, &f, "f 100 5"), 5);
	CHECK_EQ_U(limited(s), 0);
	for (int i = 0; i < nrecs && i < 5; i++) {
		check_rec(i, (uint32_t)tid, 100 + i, 0);
		user_names(sym, &recs[i], 4, names, sizeof(names));
		CHECK_STREQ(names, "fire_probe;launch_inner;launch_middle;launch_outer");
	}

	/* Detached: the semaphore drops and the site is skipped again. */
	sampler__detach_launch_probe(s, fixture_pid);
	CHECK_EQ_I(ask_num(&f, "s"), 0);
	CHECK_EQ_I(run_and_drain(s, &f, "f 200 3"), 0);
	sampler__detach_launch_probe(s, fixture_pid); /* not attached: nothing happens */

	/* Attached again after a detach: works as the first time. */
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, fixture_path), 0);
	CHECK_EQ_I(run_and_drain(s, &f, "f 250 2"), 2);
	if (nrecs == 2) {
		check_rec(0, (uint32_t)tid, 250, 0);
		check_rec(1, (uint32_t)tid, 251, 0);
	}
	/* Freeing the sampler takes its probes away. */
	sampler__free(s);
	CHECK_EQ_I(ask_num(&f, "s"), 0);

	/* A sampler whose targets exclude the fixture: the probe is attached, nothing is sent. */
	s = open_sampler((uint32_t)getpid());
	if (!CHECK(s != NULL))
		goto out;
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, fixture_path), 0);
	CHECK_EQ_I(ask_num(&f, "s"), 1);
	CHECK_EQ_I(run_and_drain(s, &f, "f 300 2"), 0);
	sampler__free(s);
	s = NULL;

	test_usdt_limit(&f, fixture_path, tid);
out:
	sampler__free(s);
	fixture_stop(&f);
	symbolizer__free(sym);
	return CHECK_DONE();
}

/* The CUDA toolkit's stub libcuda: every entry point, no driver behind it. */
static const char *find_stub(char *buf, size_t len)
{
	static const char *const rel[] = {"lib64/stubs/libcuda.so",
					  "targets/x86_64-linux/lib/stubs/libcuda.so",
					  "targets/sbsa-linux/lib/stubs/libcuda.so"};
	const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};

	for (size_t r = 0; r < sizeof(roots) / sizeof(roots[0]); r++) {
		if (!roots[r] || !roots[r][0])
			continue;
		for (size_t k = 0; k < sizeof(rel) / sizeof(rel[0]); k++) {
			snprintf(buf, len, "%s/%s", roots[r], rel[k]);
			if (access(buf, R_OK) == 0)
				return buf;
		}
	}
	return NULL;
}

typedef int (*cu_graph_launch_fn)(void *exec, void *stream);

static int test_uprobe(const char *fixture_path, const char *lib)
{
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){.no_kernel = true});
	struct fixture f = {0};
	struct sampler *s = NULL;
	cu_graph_launch_fn own_launch;
	char names[512], buf[64];
	void *own = NULL;
	long tid;

	CHECK_EQ_I(fixture_start(&f, fixture_path, lib), 0);
	fixture_pid = (uint32_t)f.pid;
	tid = ask_num(&f, "t");
	CHECK(tid > 0 && tid != f.pid);

	s = open_sampler(fixture_pid);
	CHECK(s != NULL);
	if (!s || !sym)
		goto out;
	CHECK_EQ_I(sampler__attach_libcuda(s, "/nonexistent/libcuda.so.1"), -ENOENT);
	CHECK_EQ_I(sampler__attach_libcuda(s, lib), 0);

	CHECK_EQ_I(run_and_drain(s, &f, "c 3"), 3);
	for (int i = 0; i < nrecs && i < 3; i++) {
		check_rec(i, (uint32_t)tid, 0, PROFD_SAMPLE_UPROBE);
		user_names(sym, &recs[i], 4, names, sizeof(names));
		CHECK_STREQ(names, "cuLaunchKernel;cuda_inner;cuda_middle;cuda_outer");
	}
	CHECK_EQ_I(run_and_drain(s, &f, "g 2"), 2);
	for (int i = 0; i < nrecs && i < 2; i++) {
		check_rec(i, (uint32_t)tid, 0, PROFD_SAMPLE_UPROBE);
		user_names(sym, &recs[i], 3, names, sizeof(names));
		CHECK_STREQ(names, "cuGraphLaunch;graph_inner;graph_outer");
	}

	/* This process calls libcuda too, but is not a target: nothing. */
	own = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	own_launch = own ? (cu_graph_launch_fn)dlsym(own, "cuGraphLaunch") : NULL;
	if (CHECK(own_launch != NULL)) {
		uint32_t keep = fixture_pid;

		fixture_pid = (uint32_t)getpid();
		nrecs = 0;
		own_launch(NULL, NULL);
		CHECK(sampler__drain(s) >= 0);
		CHECK_EQ_I(nrecs, 0);
		fixture_pid = keep;
	}

	/* The CUPTI library's probe attached for the pid: the uprobes leave it to the USDT. */
	CHECK_EQ_I(sampler__attach_launch_probe(s, fixture_pid, fixture_path), 0);
	CHECK_EQ_I(run_and_drain(s, &f, "c 2"), 0);
	sampler__detach_launch_probe(s, fixture_pid);
	CHECK_EQ_I(run_and_drain(s, &f, "c 1"), 1);

	/* Replacing the probes: the old ones go, nothing fires twice. */
	CHECK_EQ_I(sampler__attach_libcuda(s, lib), 0);
	CHECK_EQ_I(run_and_drain(s, &f, "c 1"), 1);
	if (nrecs == 1)
		check_rec(0, (uint32_t)tid, 0, PROFD_SAMPLE_UPROBE);

	/* The stub's calls all fail; the probes do not change that. */
	CHECK_EQ_I(ask(&f, "c 1", buf, sizeof(buf)), 0);
	CHECK(strcmp(buf, "done 0") != 0);

	/* No target list: one uprobe for every process, this one included. */
	sampler__free(s);
	s = sampler__new(&(struct sampler_opts){
	    .frequency_hz = 1, .ringbuf_size = 1 << 20, .on_record = on_record});
	if (!CHECK(s != NULL))
		goto out;
	CHECK_EQ_I(sampler__attach_libcuda(s, lib), 0);
	CHECK_EQ_I(run_and_drain(s, &f, "c 2"), 2);
	if (nrecs == 2)
		check_rec(1, (uint32_t)tid, 0, PROFD_SAMPLE_UPROBE);
	if (own_launch) {
		uint32_t keep = fixture_pid;

		fixture_pid = (uint32_t)getpid();
		nrecs = 0;
		own_launch(NULL, NULL);
		CHECK(sampler__drain(s) >= 0);
		CHECK_EQ_I(nrecs, 1);
		CHECK_EQ_U(recs[0].tid, (uint32_t)gettid());
		CHECK_EQ_U(recs[0].flags & ~PROFD_SAMPLE_UNWIND_MASK, PROFD_SAMPLE_UPROBE);
		fixture_pid = keep;
	}

	/*
	 * The rate limit, per process: a burst of 2 then one a second. Five launches of the
	 * fixture send two records; this process has a bucket of its own.
	 */
	sampler__free(s);
	s = sampler__new(&(struct sampler_opts){.frequency_hz = 1,
						.ringbuf_size = 1 << 20,
						.on_record = on_record,
						.launch_rate = 1,
						.launch_burst = 2});
	if (!CHECK(s != NULL))
		goto out;
	CHECK_EQ_I(sampler__attach_libcuda(s, lib), 0);
	CHECK_EQ_I(run_and_drain(s, &f, "c 5"), 2);
	for (int i = 0; i < nrecs && i < 2; i++)
		check_rec(i, (uint32_t)tid, 0, PROFD_SAMPLE_UPROBE);
	CHECK_EQ_U(limited(s), 3);
	if (own_launch) {
		uint32_t keep = fixture_pid;

		fixture_pid = (uint32_t)getpid();
		nrecs = 0;
		own_launch(NULL, NULL);
		CHECK(sampler__drain(s) >= 0);
		CHECK_EQ_I(nrecs, 1);
		fixture_pid = keep;
	}
	CHECK_EQ_U(limited(s), 3);
out:
	sampler__free(s);
	if (own)
		dlclose(own);
	fixture_stop(&f);
	symbolizer__free(sym);
	return CHECK_DONE();
}

int main(int argc, char **argv)
{
	char stub[PATH_MAX], fixture[PATH_MAX];
	const char *lib;

	if (argc < 3 || (strcmp(argv[1], "usdt") && strcmp(argv[1], "uprobe"))) {
		fprintf(stderr, "usage: %s usdt|uprobe FIXTURE [LIBCUDA]\n", argv[0]);
		return 2;
	}
	if (geteuid() != 0)
		return CHECK_SKIP("needs root for BPF and uprobes");
	if (getenv("TEST_VERBOSE"))
		log_set_level(LOG_LVL_DEBUG);
	/* Probes are attached by absolute path, as the daemon gets it from the library. */
	if (!realpath(argv[2], fixture)) {
		fprintf(stderr, "%s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	if (!strcmp(argv[1], "usdt"))
		return test_usdt(fixture);
	lib = argc > 3 ? argv[3] : find_stub(stub, sizeof(stub));
	if (!lib)
		return CHECK_SKIP("no stub libcuda.so from the CUDA toolkit (set CUDA_HOME)");
	return test_uprobe(fixture, lib);
}
