// SPDX-License-Identifier: BSD-2-Clause
/*
 * Ingest against hand-made ring buffer records: every malformed shape is counted and dropped,
 * valid samples of this very process are symbolized (leaf first, callers looked up at addr - 1)
 * and stored, synthetic frames mark empty and truncated stacks, exec and exit records update
 * the process table. Launch records are validated like samples, dropped without a GPU module,
 * and with one USDT launch stacks go to gpu__launch (a test double here) and uprobe launches to
 * the store. CPU samples go to the store unless gpu__holds names their process; then to
 * gpu__hold. Every sample and launch also goes to the timeline.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi.h"
#include "check.h"
#include "gpu.h"
#include "ingest.h"
#include "procfs.h"
#include "python.h"
#include "store.h"
#include "symbolize.h"
#include "timeutil.h"

__attribute__((noinline)) int leaf_fn(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

__attribute__((noinline)) int caller_fn(int x)
{
	__asm__ volatile("" ::: "memory");
	return leaf_fn(x) * 2;
}

/* The GPU module's entry points the ingest calls, recorded instead of run. */
enum gpu_call_kind { CALL_HOLD = 1, CALL_LAUNCH, CALL_EXITED, CALL_WAIT };

struct gpu_call {
	enum gpu_call_kind kind;
	struct gpu *g;
	uint64_t ts;
	uint32_t pid, tid, stack, corr;
};

static struct gpu_call calls[16];
static int ncalls;

static void record_call(enum gpu_call_kind kind, struct gpu *g, uint64_t ts, uint32_t pid,
			uint32_t tid, uint32_t stack, uint32_t corr)
{
	if (ncalls < (int)(sizeof(calls) / sizeof(calls[0])))
		calls[ncalls] = (struct gpu_call){kind, g, ts, pid, tid, stack, corr};
	ncalls++;
}

/* The pid whose samples the double holds; 0: none. */
static uint32_t held_pid;

bool gpu__holds(const struct gpu *g, uint32_t pid)
{
	return g && pid == held_pid;
}

int gpu__hold(struct gpu *g, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack)
{
	record_call(CALL_HOLD, g, ts_ns, pid, tid, stack, 0);
	return 0;
}

/* A wait's length goes where a launch's correlation id does. */
int gpu__hold_wait(struct gpu *g, uint64_t start_ns, uint64_t end_ns, uint32_t pid, uint32_t tid,
		   uint32_t stack)
{
	record_call(CALL_WAIT, g, start_ns, pid, tid, stack, (uint32_t)(end_ns - start_ns));
	return 0;
}

int gpu__launch(struct gpu *g, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack,
		uint32_t corr_id)
{
	record_call(CALL_LAUNCH, g, ts_ns, pid, tid, stack, corr_id);
	return 0;
}

void gpu__process_exited(struct gpu *g, uint32_t pid)
{
	record_call(CALL_EXITED, g, 0, pid, 0, 0, 0);
}

/* The life pid had when the GPU module was told of its reuse (the old one, if in time). */
static struct store *reused_store;
static uint32_t reused_pid, reused_life, reused_calls;

void gpu__process_reused(struct gpu *g, uint32_t pid)
{
	struct store_process_info pi;

	(void)g;
	reused_pid = pid;
	reused_life = store__process(reused_store, pid, &pi) ? pi.life : 0;
	reused_calls++;
}

/* Compaction (route.c) is not the ingest's: the double keeps no ids. */
void gpu__gc_mark(struct gpu *g, struct store_gc *gc)
{
	(void)g;
	(void)gc;
}

void gpu__gc_remap(struct gpu *g, const struct store_gc *gc)
{
	(void)g;
	(void)gc;
}

struct collect {
	uint32_t stack;
	uint64_t count;
	int keys;
};

static int collect_cb(uint32_t pid, uint32_t tid, uint32_t stack,
		      const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct collect *c = ctx;

	c->stack = stack;
	c->count += values[STORE_VALUE_CPU_SAMPLES];
	c->keys++;
	return 0;
}

static struct profd_sample_rec rec;

static void fill(uint32_t pid, uint16_t nk, uint16_t nu)
{
	memset(&rec, 0, sizeof(rec));
	rec.hdr.type = PROFD_REC_SAMPLE;
	rec.hdr.size = PROFD_SAMPLE_HDR_SIZE + 8 * (nk + nu);
	rec.ts_ns = mono_ns();
	rec.pid = pid;
	rec.tid = pid;
	rec.uid = getuid();
	rec.nr_kernel = nk;
	rec.nr_user = nu;
	memcpy(rec.comm, "test_ingest", 12);
}

/*
 * The frame names of the only stack in the store for pid (and tid, unless 0), leaf first, joined
 * by ';'; "" unless exactly one stack matches.
 */
static void stack_names(struct store *s, uint32_t pid, uint32_t tid, char *out, size_t len,
			uint64_t *count)
{
	struct store_query q = {.end_ns = UINT64_MAX, .pids = &pid, .npids = 1, .tid = tid};
	struct collect c = {0};
	const uint32_t *frames;
	size_t n;

	out[0] = '\0';
	*count = 0;
	store__query(s, &q, collect_cb, &c);
	if (c.keys != 1 || !store__stack(s, c.stack, &frames, &n))
		return;
	*count = c.count;
	for (size_t i = 0; i < n; i++) {
		const struct store_frame *f = store__frame(s, frames[i]);
		size_t l = strlen(out);

		snprintf(out + l, len - l, "%s%s", i ? ";" : "", f ? f->name : "?");
	}
}

/* The frame names of stack id `stack`, leaf first, joined by ';'. */
static void names_of(struct store *s, uint32_t stack, char *out, size_t len)
{
	const uint32_t *frames;
	size_t n;

	out[0] = '\0';
	if (!store__stack(s, stack, &frames, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		const struct store_frame *f = store__frame(s, frames[i]);
		size_t l = strlen(out);

		snprintf(out + l, len - l, "%s%s", i ? ";" : "", f ? f->name : "?");
	}
}

/* Whether the store holds anything for (pid, tid). */
static int keys_of(struct store *s, uint32_t pid, uint32_t tid)
{
	struct store_query q = {.end_ns = UINT64_MAX, .pids = &pid, .npids = 1, .tid = tid};
	struct collect c = {0};

	store__query(s, &q, collect_cb, &c);
	return c.keys;
}

struct value_q {
	uint32_t stack;
	enum store_value col;
	uint64_t v;
};

static int value_cb(uint32_t pid, uint32_t tid, uint32_t stack,
		    const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct value_q *q = ctx;

	if (stack == q->stack)
		q->v += values[q->col];
	return 0;
}

/* The store's total of column col for (pid, tid, stack). */
static uint64_t value_of(struct store *s, uint32_t pid, uint32_t tid, uint32_t stack,
			 enum store_value col)
{
	struct store_query q = {.end_ns = UINT64_MAX, .pids = &pid, .npids = 1, .tid = tid};
	struct value_q v = {.stack = stack, .col = col};

	store__query(s, &q, value_cb, &v);
	return v.v;
}

/* A launch record of this process: leaf_fn called from caller_fn, on thread tid. */
static void fill_launch(uint32_t pid, uint32_t tid, uint32_t corr, uint32_t flags)
{
	fill(pid, 0, 2);
	rec.hdr.type = PROFD_REC_LAUNCH;
	rec.tid = tid;
	rec.corr_id = corr;
	rec.flags = flags;
	rec.ips[0] = (uint64_t)(uintptr_t)&leaf_fn + 1;
	rec.ips[1] = (uint64_t)(uintptr_t)&caller_fn + 5;
}

/* Launch records: validation, the no-GPU drop, and the calls into the GPU module. */
static void test_launch(void)
{
	struct store *store = store__new(&(struct store_opts){0});
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){.no_kernel = true});
	struct gpu *fake = (struct gpu *)&ncalls; /* never dereferenced: only compared */
	struct timeline *tl = timeline__new(&(struct timeline_opts){.bytes = 1 << 20});
	uint32_t me = (uint32_t)getpid();
	const struct tl_event *ev;
	struct tl_event evbuf;
	struct ingest *plain, *in;
	struct profd_task_rec task;
	struct ingest_stats st;
	uint32_t launch_stack;
	char names[512];
	uint64_t ts;

	CHECK(store && sym && tl);
	plain = ingest__new(&(struct ingest_opts){.store = store, .sym = sym});
	in = ingest__new(
	    &(struct ingest_opts){.store = store, .sym = sym, .gpu = fake, .timeline = tl});
	CHECK(plain && in);
	if (!plain || !in)
		goto out;

	/* Malformed: a kernel stack, a USDT launch without an id, a uprobe launch with one. */
	fill_launch(me, me + 10, 7, 0);
	rec.nr_kernel = 1;
	rec.nr_user = 1;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	fill_launch(me, me + 10, 0, 0);
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	fill_launch(me, me + 10, 7, PROFD_SAMPLE_UPROBE);
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	fill_launch(me, me + 10, 7, 0);
	rec.nr_user = 3; /* frames beyond the record */
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	ingest__stats(in, &st);
	CHECK_EQ_U(st.malformed, 4);
	CHECK_EQ_U(st.launches, 0);
	CHECK_EQ_I(ncalls, 0);

	/* No GPU module: counted, dropped, nothing stored. */
	fill_launch(me, me + 10, 7, 0);
	CHECK_EQ_I(ingest__record(plain, &rec, rec.hdr.size), 0);
	ingest__stats(plain, &st);
	CHECK_EQ_U(st.launches_dropped, 1);
	CHECK_EQ_U(st.launches, 0);
	CHECK_EQ_U(st.malformed, 0);
	CHECK_EQ_U(st.samples, 0);
	CHECK_EQ_I(keys_of(store, me, me + 10), 0);
	CHECK_EQ_I(ncalls, 0);

	/* A USDT launch: its stack symbolized like a sample's, then gpu__launch. */
	fill_launch(me, me + 10, 4242, 0);
	ts = rec.ts_ns;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	CHECK_EQ_I(ncalls, 1);
	CHECK_EQ_I(calls[0].kind, CALL_LAUNCH);
	CHECK(calls[0].g == fake);
	CHECK_EQ_U(calls[0].ts, ts);
	CHECK_EQ_U(calls[0].pid, me);
	CHECK_EQ_U(calls[0].tid, me + 10);
	CHECK_EQ_U(calls[0].corr, 4242);
	launch_stack = calls[0].stack;
	names_of(store, launch_stack, names, sizeof(names));
	CHECK_STREQ(names, "leaf_fn;caller_fn");
	CHECK_EQ_I(keys_of(store, me, me + 10), 0); /* the GPU module stores, not the ingest */
	CHECK_STREQ(store__thread_name(store, me, me + 10), "test_ingest");
	/* ... and the timeline has the launch, filed under the process's owner. */
	CHECK_EQ_U(timeline__count(tl), 1);
	ev = timeline__get(tl, 0, &evbuf) ? &evbuf : NULL;
	CHECK(ev != NULL);
	if (!ev)
		goto out;
	CHECK_EQ_I(ev->type, TL_LAUNCH);
	CHECK_EQ_U(ev->corr, 4242);
	CHECK_EQ_U(ev->stack, launch_stack);
	CHECK_EQ_U(ev->start, ts);
	CHECK_EQ_U(ev->uid, getuid());

	/* A uprobe launch: counted in the store by the ingest itself, with the same stack. */
	fill_launch(me, me + 11, 0, PROFD_SAMPLE_UPROBE);
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	CHECK_EQ_I(ncalls, 1);
	CHECK_EQ_I(keys_of(store, me, me + 11), 1);
	CHECK_EQ_U(value_of(store, me, me + 11, launch_stack, STORE_VALUE_UPROBE_LAUNCHES), 1);
	CHECK_EQ_U(value_of(store, me, me + 11, launch_stack, STORE_VALUE_CPU_SAMPLES), 0);

	/* A CPU sample of the same code, its process not held: the same stack, to the store. */
	fill(me, 0, 2);
	rec.tid = me + 12;
	rec.ips[0] = (uint64_t)(uintptr_t)&leaf_fn + 1;
	rec.ips[1] = (uint64_t)(uintptr_t)&caller_fn + 5;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	CHECK_EQ_I(ncalls, 1);
	CHECK_EQ_U(value_of(store, me, me + 12, launch_stack, STORE_VALUE_CPU_SAMPLES), 1);

	/* Once the GPU module holds the process's samples: to gpu__hold, not to the store. */
	held_pid = me;
	rec.ts_ns = ts = mono_ns();
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	held_pid = 0;
	CHECK_EQ_I(ncalls, 2);
	CHECK_EQ_I(calls[1].kind, CALL_HOLD);
	CHECK(calls[1].g == fake);
	CHECK_EQ_U(calls[1].ts, ts);
	CHECK_EQ_U(calls[1].pid, me);
	CHECK_EQ_U(calls[1].tid, me + 12);
	CHECK_EQ_U(calls[1].stack, launch_stack);
	CHECK_EQ_U(value_of(store, me, me + 12, launch_stack, STORE_VALUE_CPU_SAMPLES), 1);
	/* Every one of them is on the timeline, held or not. */
	CHECK_EQ_U(timeline__count(tl), 4);
	/* Launches come first (their ring), then the samples, each in arrival order. */
	ev = timeline__get(tl, 3, &evbuf) ? &evbuf : NULL;
	CHECK(ev != NULL);
	if (ev) {
		CHECK_EQ_I(ev->type, TL_SAMPLE);
		CHECK_EQ_U(ev->tid, me + 12);
		CHECK_EQ_U(ev->start, ts);
	}

	/* A user stack the kernel could not read: the launch still goes, as [no stack]. */
	fill_launch(me, me + 13, 9, PROFD_SAMPLE_USTACK_ERR);
	rec.nr_user = 0;
	rec.hdr.size = PROFD_SAMPLE_HDR_SIZE;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	CHECK_EQ_I(ncalls, 3);
	CHECK_EQ_I(calls[2].kind, CALL_LAUNCH);
	CHECK_EQ_U(calls[2].corr, 9);
	names_of(store, calls[2].stack, names, sizeof(names));
	CHECK_STREQ(names, "[no stack]");

	/* The process exits: the GPU module hears of it. */
	memset(&task, 0, sizeof(task));
	task.hdr.type = PROFD_REC_EXIT;
	task.hdr.size = sizeof(task);
	task.pid = me;
	CHECK_EQ_I(ingest__record(in, &task, sizeof(task)), 0);
	CHECK_EQ_I(ncalls, 4);
	CHECK_EQ_I(calls[3].kind, CALL_EXITED);
	CHECK_EQ_U(calls[3].pid, me);

	ingest__stats(in, &st);
	CHECK_EQ_U(st.launches, 3);
	CHECK_EQ_U(st.uprobe_launches, 1);
	CHECK_EQ_U(st.launches_dropped, 0);
	CHECK_EQ_U(st.samples, 2);
	CHECK_EQ_U(st.malformed, 4);
	CHECK_EQ_U(st.store_errors, 0);
out:
	ingest__free(in);
	timeline__free(tl);
	ingest__free(plain);
	symbolizer__free(sym);
	store__free(store);
}

/*
 * JIT code whose perf map is written after the code first ran (and was sampled): the address,
 * unnamed at first (one frame for the whole mapping, whatever the address in it), gets its
 * name from the map within a second or so, not never.
 */
static void test_late_perf_map(void)
{
	struct store *store = store__new(&(struct store_opts){0});
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){.no_kernel = true});
	struct ingest *in = NULL;
	uint32_t me = (uint32_t)getpid();
	char perf[64], names[256], want[64];
	uint64_t count;
	void *jit = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	FILE *f;

	CHECK(store && sym && jit != MAP_FAILED);
	if (!store || !sym || jit == MAP_FAILED)
		goto out;
	in = ingest__new(&(struct ingest_opts){.store = store, .sym = sym});
	CHECK(in != NULL);
	if (!in)
		goto out;
	snprintf(perf, sizeof(perf), "/tmp/perf-%u.map", me);
	unlink(perf);

	/* Unnamed, two addresses of one mapping are one frame: the mapping's. */
	fill(me, 0, 1);
	rec.tid = me + 50;
	rec.ips[0] = (uint64_t)(uintptr_t)jit + 0x10;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	rec.ips[0] = (uint64_t)(uintptr_t)jit + 0x7f0;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	stack_names(store, me, me + 50, names, sizeof(names), &count);
	snprintf(want, sizeof(want), "[jit] ([anon]@0x%llx)", (unsigned long long)(uintptr_t)jit);
	CHECK_STREQ(names, want);
	CHECK_EQ_U(count, 2);

	f = fopen(perf, "w");
	CHECK(f != NULL);
	if (!f)
		goto out;
	fprintf(f, "%llx 40 jit_written_late\n", (unsigned long long)(uintptr_t)jit);
	fclose(f);
	/* A second later the cached miss is due for another look, and the map answers. */
	nanosleep(&(struct timespec){.tv_sec = 1, .tv_nsec = 100 * 1000 * 1000}, NULL);
	fill(me, 0, 1);
	rec.tid = me + 51;
	rec.ips[0] = (uint64_t)(uintptr_t)jit + 0x10;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	stack_names(store, me, me + 51, names, sizeof(names), &count);
	CHECK_STREQ(names, "jit_written_late");
	unlink(perf);
out:
	ingest__free(in);
	symbolizer__free(sym);
	store__free(store);
	if (jit != MAP_FAILED)
		munmap(jit, 4096);
}

/*
 * A process's owner is read from /proc (root while it is not dumpable), but an exited process
 * that is not reaped yet has root's /proc files too: its late samples keep the owner their
 * records carry.
 */
static void test_zombie_owner(void)
{
	struct store *store = store__new(&(struct store_opts){0});
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){.no_kernel = true});
	struct ingest *in = ingest__new(&(struct ingest_opts){.store = store, .sym = sym});
	struct store_process_info pi;
	pid_t zombie, live;
	char state = 0;

	CHECK(store && sym && in);
	zombie = fork();
	if (zombie == 0)
		_exit(0);
	live = fork();
	if (live == 0) {
		pause();
		_exit(0);
	}
	CHECK(zombie > 0 && live > 0);
	if (!in || zombie <= 0 || live <= 0)
		goto out;
	for (int i = 0; i < 200 && state != 'Z'; i++) {
		usleep(5000);
		if (procfs_read_state("/proc", (uint32_t)zombie, &state))
			state = 0;
	}
	CHECK(state == 'Z');
	/*
	 * Samples that name another uid than the live child's /proc owner (ours): the zombie keeps
	 * the record's, the live process is its /proc owner's.
	 */
	fill((uint32_t)zombie, 0, 0);
	rec.uid = getuid() == 0 ? 1000 : getuid();
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	CHECK(store__process(store, (uint32_t)zombie, &pi));
	CHECK_EQ_U(pi.uid, getuid() == 0 ? 1000 : getuid());
	fill((uint32_t)live, 0, 0);
	rec.uid = 1000;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	CHECK(store__process(store, (uint32_t)live, &pi));
	CHECK_EQ_U(pi.uid, getuid());
out:
	if (live > 0) {
		kill(live, SIGKILL);
		waitpid(live, NULL, 0);
	}
	if (zombie > 0)
		waitpid(zombie, NULL, 0);
	ingest__free(in);
	symbolizer__free(sym);
	store__free(store);
}

/* Wait until child is a zombie (it was killed); true when it is. */
static bool wait_zombie(pid_t child)
{
	char state = 0;

	for (int i = 0; i < 400 && state != 'Z'; i++) {
		usleep(5000);
		if (procfs_read_state("/proc", (uint32_t)child, &state))
			state = 0;
	}
	return state == 'Z';
}

/*
 * The processes the ingest, the Python module and the symbolizer hold now, in c; the bytes of
 * the Python module's and the symbolizer's, in b.
 */
static void held(struct ingest *in, struct python *py, struct symbolizer *sym, uint64_t c[3],
		 uint64_t b[2])
{
	struct mem_usage m, syms;

	ingest__memory(in, &m);
	c[0] = m.count;
	python__memory(py, &m);
	c[1] = m.count;
	b[0] = m.bytes;
	symbolizer__memory(sym, &syms, &m);
	c[2] = m.count;
	b[1] = m.bytes;
}

/*
 * The last thread of a process is sampled after its exit record: such samples must not bring
 * back what the exit dropped (the pid table's entry, the Python module's and the symbolizer's
 * state), whether the process was seen before its exit or not, gone or a zombie by then, with
 * user frames or without. They are still kept, under the exited process. A live process at a
 * pid whose exit was recorded is a new one (the pid reused), known again until its own exit.
 */
static void test_late_samples(void)
{
	struct store *store = store__new(&(struct store_opts){0});
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){.no_kernel = true});
	struct python *py = python__new(NULL);
	struct ingest *in =
	    ingest__new(&(struct ingest_opts){.store = store, .sym = sym, .py = py});
	struct profd_task_rec task;
	struct store_process_info pi;
	uint64_t c0[3], c[3], b0[2], b[2];
	pid_t child;

	CHECK(store && sym && py && in);
	if (!in)
		goto out;
	held(in, py, sym, c0, b0);
	for (int round = 0; round < 8; round++) {
		bool seen = round & 1, zombie = round & 2, user = round & 4;
		uint32_t pid;

		child = fork();
		if (child == 0) {
			pause();
			_exit(0);
		}
		CHECK(child > 0);
		if (child <= 0)
			break;
		pid = (uint32_t)child;
		if (seen) {
			fill(pid, 0, 0);
			CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
			held(in, py, sym, c, b);
			CHECK_EQ_U(c[0], c0[0] + 1);
			CHECK_EQ_U(c[1], c0[1] + 1); /* looked at for CPython (not one) */
			CHECK(b[0] > b0[0]);
		}
		kill(child, SIGKILL);
		if (zombie)
			CHECK(wait_zombie(child));
		else
			waitpid(child, NULL, 0);
		memset(&task, 0, sizeof(task));
		task.hdr.type = PROFD_REC_EXIT;
		task.hdr.size = sizeof(task);
		task.ts_ns = mono_ns();
		task.pid = pid;
		task.uid = getuid();
		memcpy(task.comm, "late", 5);
		CHECK_EQ_I(ingest__record(in, &task, sizeof(task)), 0);
		held(in, py, sym, c, b);
		CHECK_EQ_U(c[0], c0[0]);
		for (int k = 0; k < 3; k++) {
			if (user) {
				fill(pid, 0, 2);
				rec.ips[0] = (uint64_t)(uintptr_t)&leaf_fn + 1;
				rec.ips[1] = (uint64_t)(uintptr_t)&caller_fn + 5;
			} else {
				fill(pid, 0, 0);
			}
			CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
		}
		held(in, py, sym, c, b);
		if (c[0] != c0[0] || c[1] != c0[1] || c[2] != c0[2])
			fprintf(stderr, "round %d (seen %d, zombie %d, user frames %d):\n", round,
				seen, zombie, user);
		CHECK_EQ_U(c[0], c0[0]);
		CHECK_EQ_U(c[1], c0[1]);
		CHECK_EQ_U(c[2], c0[2]);
		CHECK(keys_of(store, pid, 0) > 0);
		CHECK(store__process(store, pid, &pi) && pi.exited);
		if (zombie)
			waitpid(child, NULL, 0);
		if (round != 7)
			continue;
		/* A second after its exit: a new process's sample, the pid known until its exit. */
		task.ts_ns = mono_ns() - 1000000000ull;
		CHECK_EQ_I(ingest__record(in, &task, sizeof(task)), 0);
		held(in, py, sym, c, b);
		CHECK_EQ_U(c[0], c0[0]);
		fill(pid, 0, 0);
		CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
		held(in, py, sym, c, b);
		CHECK_EQ_U(c[0], c0[0] + 1);
		task.ts_ns = mono_ns();
		CHECK_EQ_I(ingest__record(in, &task, sizeof(task)), 0);
		held(in, py, sym, c, b);
		CHECK_EQ_U(c[0], c0[0]);
	}

	/* Recorded as exited while it lives: the pid is another process's now. */
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	CHECK(child > 0);
	if (child <= 0)
		goto out;
	memset(&task, 0, sizeof(task));
	task.hdr.type = PROFD_REC_EXIT;
	task.hdr.size = sizeof(task);
	task.ts_ns = mono_ns();
	task.pid = (uint32_t)child;
	CHECK_EQ_I(ingest__record(in, &task, sizeof(task)), 0);
	fill((uint32_t)child, 0, 0);
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	held(in, py, sym, c, b);
	CHECK_EQ_U(c[0], c0[0] + 1);
	CHECK(store__process(store, (uint32_t)child, &pi) && !pi.exited);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	task.ts_ns = mono_ns();
	CHECK_EQ_I(ingest__record(in, &task, sizeof(task)), 0);
	held(in, py, sym, c, b);
	CHECK_EQ_U(c[0], c0[0]);
	CHECK_EQ_U(c[1], c0[1]);
	/* Every byte counted in was counted out. */
	CHECK_EQ_U(b[0], b0[0]);
	CHECK_EQ_U(b[1], b0[1]);
out:
	ingest__free(in);
	python__free(py);
	symbolizer__free(sym);
	store__free(store);
}

/* What the unwinder was told (ingest_opts.unwind_note). */
static uint32_t note_pid, note_why, notes;

static void on_note(void *ctx, uint32_t pid, uint32_t why)
{
	note_pid = pid;
	note_why = why;
	notes++;
}

/*
 * How a user stack's walk ended decides its root: only a walk that reached the bottom stands
 * alone; the others get [truncated]. Walks that lacked what the unwinder provides tell it, and
 * so do exits.
 */
static void test_unwind_ends(void)
{
	static const struct {
		uint32_t end;
		bool marked, noted;
	} cases[] = {
	    {PROFD_UNWIND_BOTTOM, false, false},    {PROFD_UNWIND_FP_FALLBACK, true, true},
	    {PROFD_UNWIND_NO_MAPPING, true, true},  {PROFD_UNWIND_NO_TABLE, true, true},
	    {PROFD_UNWIND_READ_FAULT, true, false}, {PROFD_UNWIND_INVALID, true, false},
	    {PROFD_UNWIND_TRUNCATED, true, false},  {PROFD_UNWIND_BAD_FRAME, true, false},
	};
	struct store *store = store__new(&(struct store_opts){0});
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){.no_kernel = true});
	struct ingest *in = NULL;
	uint32_t me = (uint32_t)getpid();
	struct profd_task_rec task;
	char names[512];
	uint64_t count;

	CHECK(store && sym);
	if (!store || !sym)
		goto out;
	in = ingest__new(&(struct ingest_opts){.store = store, .sym = sym, .unwind_note = on_note});
	CHECK(in != NULL);
	if (!in)
		goto out;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		notes = 0;
		fill(me, 0, 2);
		rec.tid = me + 100 + (uint32_t)i;
		rec.flags = cases[i].end << PROFD_SAMPLE_UNWIND_SHIFT;
		rec.ips[0] = (uint64_t)(uintptr_t)&leaf_fn;
		rec.ips[1] = (uint64_t)(uintptr_t)&caller_fn + 5;
		CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
		stack_names(store, me, rec.tid, names, sizeof(names), &count);
		CHECK_STREQ(names, cases[i].marked ? "leaf_fn;caller_fn;[truncated]"
						   : "leaf_fn;caller_fn");
		CHECK_EQ_U(notes, cases[i].noted ? 1 : 0);
		if (cases[i].noted) {
			CHECK_EQ_U(note_pid, me);
			CHECK_EQ_U(note_why, cases[i].end);
		}
	}
	/* The process exits: the unwinder forgets it (why: none). */
	notes = 0;
	memset(&task, 0, sizeof(task));
	task.hdr.type = PROFD_REC_EXIT;
	task.hdr.size = sizeof(task);
	task.ts_ns = mono_ns();
	task.pid = me;
	CHECK_EQ_I(ingest__record(in, &task, sizeof(task)), 0);
	CHECK_EQ_U(notes, 1);
	CHECK_EQ_U(note_why, PROFD_UNWIND_NONE);
out:
	ingest__free(in);
	symbolizer__free(sym);
	store__free(store);
}

/* PROC/PID/stat of a fake process that started at start (clock ticks). */
static void fake_stat(const char *root, uint32_t pid, uint64_t start)
{
	check_fake_proc_file(root, pid, "stat",
			     "%u (job) S 1 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %" PRIu64
			     " 1000 200\n",
			     pid, start);
}

static void task_rec(struct ingest *in, uint16_t type, uint32_t pid, uint32_t uid, const char *comm)
{
	struct profd_task_rec task = {.hdr = {.type = type, .size = sizeof(task)}};

	task.ts_ns = mono_ns();
	task.pid = pid;
	task.uid = uid;
	snprintf(task.comm, sizeof(task.comm), "%s", comm);
	CHECK_EQ_I(ingest__record(in, &task, sizeof(task)), 0);
}

struct life_rows {
	uint32_t life[8];
	size_t n;
	uint64_t total;
};

static int life_cb(uint32_t pid, uint32_t life, uint32_t tid, uint32_t stack,
		   const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct life_rows *r = ctx;

	if (r->n < 8)
		r->life[r->n++] = life;
	r->total += values[STORE_VALUE_CPU_SAMPLES];
	return 0;
}

/* The name of the life of the index-th row of pid's data; "?" when none. */
static const char *life_name(struct store *s, uint32_t pid, const struct life_rows *r, size_t i)
{
	struct store_process_info pi;

	return i < r->n && store__process_life(s, pid, r->life[i], &pi) ? pi.comm : "?";
}

/*
 * A reused pid: the process that held it before keeps its samples under its own name, found
 * by its start time in /proc, whether the fork and exit records came or were lost; an exec
 * keeps the process. Before processes were keyed by their life, the first one's samples took the
 * last one's name.
 */
static void test_pid_reuse(void)
{
	char root[] = "/tmp/test_ingest_XXXXXX", cmd[64];
	struct store *store = store__new(&(struct store_opts){0});
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){.no_kernel = true});
	const uint32_t pid = 123457;
	struct store_query q = {.end_ns = UINT64_MAX, .pids = &pid, .npids = 1};
	struct ingest *in = NULL;
	struct life_rows r = {0};

	CHECK(store && sym && mkdtemp(root));
	/* The GPU double: told of each reuse while the store still has the old process. */
	in = ingest__new(&(struct ingest_opts){
	    .store = store, .sym = sym, .proc_root = root, .gpu = (struct gpu *)&ncalls});
	CHECK(in != NULL);
	if (!in)
		goto out;
	reused_store = store;
	reused_calls = 0;
	held_pid = 0;
	fake_stat(root, pid, 1000);
	task_rec(in, PROFD_REC_FORK, pid, 1000, "shell");
	task_rec(in, PROFD_REC_EXEC, pid, 1000, "alicejob"); /* same start: same process */
	fill(pid, 0, 0);
	memcpy(rec.comm, "alicejob", 9);
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	task_rec(in, PROFD_REC_EXIT, pid, 1000, "alicejob");

	/* Another process on the pid, its fork seen. */
	fake_stat(root, pid, 2000);
	task_rec(in, PROFD_REC_FORK, pid, 1001, "bobjob");
	CHECK_EQ_U(reused_calls, 1);
	CHECK_EQ_U(reused_pid, pid);
	CHECK_EQ_U(reused_life, 1);
	fill(pid, 0, 0);
	memcpy(rec.comm, "bobjob", 7);
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	task_rec(in, PROFD_REC_EXIT, pid, 1001, "bobjob");

	/* And a third whose fork record was lost: its first sample finds the new start. */
	fake_stat(root, pid, 3000);
	fill(pid, 0, 0);
	memcpy(rec.comm, "caroljob", 9);
	for (int i = 0; i < 3; i++)
		CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	CHECK_EQ_U(reused_calls, 2);
	CHECK_EQ_U(reused_life, 2);

	/*
	 * And a fourth whose predecessor's exit was lost too: the start in /proc, compared once a
	 * second while samples come, says it is another process.
	 */
	fake_stat(root, pid, 4000);
	usleep(1100 * 1000);
	memcpy(rec.comm, "davejob", 8);
	rec.ts_ns = mono_ns();
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	CHECK_EQ_U(reused_calls, 3);
	CHECK_EQ_U(reused_life, 3);

	CHECK_EQ_I(store__query_lives(store, &q, life_cb, &r), 0);
	CHECK_EQ_U(r.n, 4);
	CHECK_EQ_U(r.total, 7);
	CHECK_STREQ(life_name(store, pid, &r, 0), "alicejob");
	CHECK_STREQ(life_name(store, pid, &r, 1), "bobjob");
	CHECK_STREQ(life_name(store, pid, &r, 2), "caroljob");
	CHECK_STREQ(life_name(store, pid, &r, 3), "davejob");
	ncalls = 0; /* the exits told to the double: the other tests count from zero */
out:
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	CHECK_EQ_I(system(cmd), 0);
	ingest__free(in);
	symbolizer__free(sym);
	store__free(store);
}

int main(void)
{
	struct store *store = store__new(&(struct store_opts){0});
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){.no_kernel = true});
	struct ingest *in;
	struct ingest_stats st;
	struct store_process_info pi;
	uint32_t me = (uint32_t)getpid();
	uint64_t count;
	char names[512];
	struct profd_task_rec task;

	CHECK(store && sym);
	in = ingest__new(&(struct ingest_opts){.store = store, .sym = sym});
	CHECK(in != NULL);
	if (!in)
		return CHECK_DONE();
	test_zombie_owner();
	test_unwind_ends();
	test_pid_reuse();

	/* Malformed records: each counted, none stored. */
	fill(me, 0, 1);
	CHECK_EQ_I(ingest__record(in, &rec, 4), 0); /* shorter than a header */
	fill(me, 0, 1);
	rec.hdr.size = 4096;
	CHECK_EQ_I(ingest__record(in, &rec, PROFD_SAMPLE_HDR_SIZE + 8), 0); /* size lies */
	fill(me, 0, 1);
	rec.hdr.type = 99;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0); /* unknown type */
	fill(me, 200, 0);
	rec.hdr.size = sizeof(rec);
	CHECK_EQ_I(ingest__record(in, &rec, sizeof(rec)), 0); /* too many kernel frames */
	fill(me, 0, 3);
	rec.hdr.size = PROFD_SAMPLE_HDR_SIZE + 8;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0); /* frames beyond the record */
	fill(0, 0, 1);
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0); /* pid 0 */
	fill(me, 0, 1);
	rec.ts_ns = mono_ns() + 3600 * NSEC_PER_SEC;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0); /* stamped an hour ahead */
	fill(me, 0, 0);
	task.hdr.type = PROFD_REC_EXIT;
	task.hdr.size = 8;
	CHECK_EQ_I(ingest__record(in, &task, 8), 0); /* task record cut short */
	ingest__stats(in, &st);
	CHECK_EQ_U(st.malformed, 8);
	CHECK_EQ_U(st.samples, 0);

	/*
	 * A valid sample of this process: leaf inside leaf_fn, caller's return address just past
	 * the call in caller_fn. The caller is looked up at addr - 1, so even a return address
	 * equal to the end of a function would resolve to that function.
	 */
	fill(me, 0, 2);
	rec.ips[0] = (uint64_t)(uintptr_t)&leaf_fn + 1;
	rec.ips[1] = (uint64_t)(uintptr_t)&caller_fn + 5;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	stack_names(store, me, 0, names, sizeof(names), &count);
	CHECK_STREQ(names, "leaf_fn;caller_fn");
	CHECK_EQ_U(count, 2);
	ingest__stats(in, &st);
	CHECK_EQ_U(st.samples, 2);
	CHECK_EQ_U(st.addr_cache_misses, 2);
	CHECK_EQ_U(st.addr_cache_hits, 2); /* the second sample hit the address cache */
	CHECK(store__process(store, me, &pi));
	CHECK_EQ_U(pi.uid, getuid());
	CHECK(!pi.exited);
	CHECK_STREQ(store__thread_name(store, me, me), "test_ingest");

	/* A kernel thread with no stack at all still counts, as [no stack]. */
	fill(2, 0, 0);
	rec.flags = PROFD_SAMPLE_KERNEL_THREAD;
	memcpy(rec.comm, "kthreadd\0", 9);
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	stack_names(store, 2, 0, names, sizeof(names), &count);
	CHECK_STREQ(names, "[no stack]");
	CHECK_EQ_U(count, 1);

	/* A process sampled in the kernel with no user stack (exiting) gets a root that says so. */
	fill(me, 1, 0);
	rec.tid = me + 4;
	rec.ips[0] = 0xffffffff81000000ull;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	stack_names(store, me, me + 4, names, sizeof(names), &count);
	CHECK_STREQ(names, "[unknown];[no user stack]");

	/* A truncated user stack ends (at its root) with [truncated]. */
	fill(me, 0, 1);
	rec.tid = me + 1;
	rec.flags = PROFD_SAMPLE_USTACK_TRUNC;
	rec.ips[0] = (uint64_t)(uintptr_t)&leaf_fn;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	stack_names(store, me, me + 1, names, sizeof(names), &count);
	CHECK_STREQ(names, "leaf_fn;[truncated]");

	/* An address no mapping covers: [unknown], kept, not dropped. */
	fill(me, 0, 1);
	rec.tid = me + 2;
	rec.ips[0] = 0x10;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	ingest__stats(in, &st);
	CHECK_EQ_U(st.samples, 6);

	/*
	 * A caller outside every mapping is a broken frame-pointer chain: the stack is cut there,
	 * and the valid-looking frame after it is not trusted either.
	 */
	fill(me, 0, 3);
	rec.tid = me + 3;
	rec.ips[0] = (uint64_t)(uintptr_t)&leaf_fn + 1;
	rec.ips[1] = 0x10;
	rec.ips[2] = (uint64_t)(uintptr_t)&caller_fn + 5;
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	stack_names(store, me, me + 3, names, sizeof(names), &count);
	CHECK_STREQ(names, "leaf_fn");
	ingest__stats(in, &st);
	CHECK_EQ_U(st.unwind_cut, 1);

	/* exec renames the process; exit marks it exited but keeps its data. */
	memset(&task, 0, sizeof(task));
	task.hdr.type = PROFD_REC_EXEC;
	task.hdr.size = sizeof(task);
	task.pid = me;
	task.uid = getuid();
	memcpy(task.comm, "newimage", 9);
	CHECK_EQ_I(ingest__record(in, &task, sizeof(task)), 0);
	CHECK(store__process(store, me, &pi));
	CHECK_STREQ(pi.comm, "newimage");
	task.hdr.type = PROFD_REC_EXIT;
	CHECK_EQ_I(ingest__record(in, &task, sizeof(task)), 0);
	CHECK(store__process(store, me, &pi));
	CHECK(pi.exited);
	ingest__stats(in, &st);
	CHECK_EQ_U(st.execs, 1);
	CHECK_EQ_U(st.samples, 7);
	CHECK_EQ_U(st.exits, 1);
	CHECK_EQ_U(st.malformed, 8);

	ingest__free(in);
	symbolizer__free(sym);
	store__free(store);
	CHECK_EQ_I(ncalls, 0); /* without a GPU module nothing goes there */

	test_launch();
	test_late_perf_map();
	test_late_samples();
	return CHECK_DONE();
}
