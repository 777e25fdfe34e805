// SPDX-License-Identifier: BSD-2-Clause
/*
 * The GPU correlation module with a real store: the launch/record join in both orders, graph
 * launches, TTL expiry, weights, the stand-in stack, copies, held CPU samples with their NVTX
 * and GPU-idle labels, traces, the GC holder across compaction, the timeline's bound and record
 * validation. Every expected value is exact. The ingest's part (what goes to the timeline, the
 * store or gpu__hold) is played by the t_* helpers below, as the daemon's ingest.c does it.
 */
#include "check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>
#include <time.h>

#include "demangle.h"
#include "dump.h"
#include "gpu.h"
#include "gpu_priv.h" /* sizes of the module's state, for the exact memory accounting checks */
#include "log.h"
#include "route.h"
#include "store.h"
#include "timeline.h"

#define PID 100
#define TID 101
#define TID2 102
#define UID 1000
#define OTHER_PID 200
#define TTL 1000000ull /* 1 ms */
#define HOLD 500000ull /* 0.5 ms */
#define LIB "/opt/profd/lib/libprofd_cupti.so"

/* --- fixture ------------------------------------------------------------------------------ */

static int probe_attached, probe_detached, probe_result;
static uint32_t probe_pid;
static char probe_path[256];
static bool cover_all = true;

static int fake_attach(void *ctx, uint32_t pid, const char *path)
{
	probe_attached++;
	probe_pid = pid;
	snprintf(probe_path, sizeof(probe_path), "%s", path);
	return probe_result;
}

static void fake_detach(void *ctx, uint32_t pid)
{
	probe_detached++;
}

static bool fake_covers(void *ctx, uint32_t pid)
{
	return cover_all || pid == PID;
}

struct fx {
	struct store *s;
	struct gpu *g;
	struct timeline *tl;
};

/* The fixture in use, for the t_* helpers that stand in for the ingest. */
static struct fx *cur;

static uint32_t owner_of(uint32_t pid)
{
	struct store_process_info pi;

	return store__process(cur->s, pid, &pi) ? pi.uid : STORE_UID_UNKNOWN;
}

/* The daemon's routing (route.h) over the fixture's store and timeline and the module g. */
static struct route t_route(struct gpu *g)
{
	return (struct route){.store = cur->s, .gpu = g, .timeline = cur->tl};
}

static int t_cpu_sample(struct gpu *g, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t stack)
{
	struct route r = t_route(g);

	return route__sample(&r, ts, pid, tid, owner_of(pid), stack);
}

/* An off-CPU wait [start, end). */
static int t_wait(struct gpu *g, uint64_t start, uint64_t end, uint32_t pid, uint32_t tid,
		  uint32_t stack)
{
	struct route r = t_route(g);

	return route__wait(&r, start, end, pid, tid, owner_of(pid), stack);
}

/* A USDT launch (corr > 0). */
static int t_launch(struct gpu *g, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t stack,
		    uint32_t corr)
{
	struct route r = t_route(g);

	return route__launch(&r, ts, pid, tid, owner_of(pid), stack, corr);
}

/* A libcuda uprobe launch. */
static int t_uprobe_launch(struct gpu *g, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t stack)
{
	struct route r = t_route(g);

	return route__launch(&r, ts, pid, tid, owner_of(pid), stack, 0);
}

/* A trace dump as the daemon's handler builds it: the timeline plus the open NVTX ranges. */
static int t_trace(struct gpu *g, const struct store_query *q, const struct trace_meta *meta,
		   Profd__Trace **out)
{
	struct tl_event *open = NULL;
	size_t nopen = 0;
	int err = gpu__open_ranges(g, &open, &nopen);

	if (!err)
		err = dump__trace(cur->s, cur->tl, open, nopen, q, meta, out);
	free(open);
	return err;
}

static void fx_init_ttl(struct fx *f, size_t ring_bytes, uint64_t ttl)
{
	struct gpu_opts o = {
	    .join_ttl_ns = ttl,
	    .hold_ns = HOLD,
	    .attach_probe = fake_attach,
	    .detach_probe = fake_detach,
	    .covers = fake_covers,
	};

	probe_attached = probe_detached = probe_result = 0;
	cover_all = true;
	f->s = store__new(&(struct store_opts){0});
	f->tl = timeline__new(&(struct timeline_opts){.bytes = ring_bytes});
	o.store = f->s;
	o.timeline = f->tl;
	f->g = gpu__new(&o);
	cur = f;
	CHECK(f->s && f->g && f->tl);
	store__set_process(f->s, PID, UID, "trainer");
	store__set_thread(f->s, PID, TID, "main");
	store__set_thread(f->s, PID, TID2, "loader");
}

static void fx_init(struct fx *f, size_t ring_bytes)
{
	fx_init_ttl(f, ring_bytes, TTL);
}

static void fx_fini(struct fx *f)
{
	gpu__free(f->g);
	timeline__free(f->tl);
	store__free(f->s);
}

static uint32_t frame(struct fx *f, enum frame_kind kind, const char *name)
{
	struct frame_key k = {.kind = kind, .name = name};

	return store__intern_frame(f->s, &k);
}

/* A native stack from names given root first. */
static uint32_t stack_of(struct fx *f, const char *root, const char *mid, const char *leaf)
{
	uint32_t ids[3];
	size_t n = 0;

	if (leaf)
		ids[n++] = frame(f, FRAME_KIND_NATIVE, leaf);
	if (mid)
		ids[n++] = frame(f, FRAME_KIND_NATIVE, mid);
	ids[n++] = frame(f, FRAME_KIND_NATIVE, root);
	return store__intern_stack(f->s, ids, n);
}

static int attach(struct fx *f, uint32_t pid, Profd__GpuState state, bool *enable)
{
	Profd__GpuAttach a = PROFD__GPU_ATTACH__INIT;

	a.state = state;
	a.library_path = LIB;
	a.has_clock = true;
	a.clock = PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK;
	a.has_cupti_version = true;
	a.cupti_version = 130001;
	return gpu__attach(f->g, pid, UID, 0, &a, enable);
}

/* A batch under construction. */
struct batch {
	Profd__GpuBatch b;
	char *strs[16];
	Profd__GpuKernel k[16], *kp[16];
	Profd__GpuCopy c[8], *cp[8];
	Profd__GpuApiCall a[8], *ap[8];
	Profd__GpuNvtxRange n[8], *np[8];
	Profd__GpuMemory m[16], *mp[16];
};

static void batch_init(struct batch *b)
{
	memset(b, 0, sizeof(*b));
	profd__gpu_batch__init(&b->b);
	b->b.strings = b->strs;
	b->b.kernels = b->kp;
	b->b.copies = b->cp;
	b->b.api_calls = b->ap;
	b->b.nvtx = b->np;
	b->b.memory = b->mp;
}

static void add_string(struct batch *b, const char *s)
{
	b->strs[b->b.n_strings++] = (char *)s;
}

static void add_kernel(struct batch *b, uint64_t start, uint64_t end, uint32_t corr, uint32_t name,
		       uint32_t weight)
{
	Profd__GpuKernel *k = &b->k[b->b.n_kernels];

	profd__gpu_kernel__init(k);
	k->start_ns = start;
	k->end_ns = end;
	k->correlation_id = corr;
	k->has_name = name != 0;
	k->name = name;
	k->has_weight = true;
	k->weight = weight;
	k->has_stream = true;
	k->stream = 7;
	b->kp[b->b.n_kernels++] = k;
}

static void add_copy(struct batch *b, uint64_t start, uint64_t end, uint32_t corr,
		     Profd__GpuCopyKind kind, uint64_t bytes)
{
	Profd__GpuCopy *c = &b->c[b->b.n_copies];

	profd__gpu_copy__init(c);
	c->start_ns = start;
	c->end_ns = end;
	c->correlation_id = corr;
	c->kind = kind;
	c->has_bytes = true;
	c->bytes = bytes;
	b->cp[b->b.n_copies++] = c;
}

static void add_nvtx(struct batch *b, uint64_t start, uint64_t end, uint32_t tid, uint32_t name,
		     uint32_t depth, bool open)
{
	Profd__GpuNvtxRange *n = &b->n[b->b.n_nvtx];

	profd__gpu_nvtx_range__init(n);
	n->start_ns = start;
	n->end_ns = end;
	n->tid = tid;
	n->name = name;
	n->has_depth = true;
	n->depth = depth;
	n->has_open = open;
	n->open = open;
	b->np[b->b.n_nvtx++] = n;
}

static void add_api(struct batch *b, uint64_t start, uint64_t end, uint32_t tid, uint32_t corr,
		    uint32_t name)
{
	Profd__GpuApiCall *a = &b->a[b->b.n_api_calls];

	profd__gpu_api_call__init(a);
	a->start_ns = start;
	a->end_ns = end;
	a->tid = tid;
	a->correlation_id = corr;
	a->has_name = true;
	a->name = name;
	b->ap[b->b.n_api_calls++] = a;
}

/* An allocation (release false) or release of bytes at addr on device, at ts. */
static Profd__GpuMemory *add_memory(struct batch *b, uint64_t ts, uint32_t corr, bool release,
				    uint64_t addr, uint64_t bytes, uint32_t device)
{
	Profd__GpuMemory *m = &b->m[b->b.n_memory];

	profd__gpu_memory__init(m);
	m->ts_ns = ts;
	m->correlation_id = corr;
	m->release = release;
	m->address = addr;
	m->bytes = bytes;
	m->has_device = true;
	m->device = device;
	b->mp[b->b.n_memory++] = m;
	return m;
}

static void complete_until(struct batch *b, uint64_t ts)
{
	b->b.has_complete_until_ns = true;
	b->b.complete_until_ns = ts;
}

static int send(struct fx *f, struct batch *b)
{
	bool enable = false;
	int err = gpu__batch(f->g, PID, &b->b, &enable);

	CHECK(enable);
	return err;
}

/* --- reading the store -------------------------------------------------------------------- */

/* Names root first, ';' between, GPU frames marked [g], NVTX frames [n], others [?]. */
static void stack_str(struct store *s, uint32_t stack, char *buf, size_t len)
{
	const uint32_t *fr;
	size_t n, off = 0;

	buf[0] = '\0';
	if (!store__stack(s, stack, &fr, &n))
		return;
	for (size_t i = n; i-- > 0;) {
		const struct store_frame *sf = store__frame(s, fr[i]);
		const char *tag = sf->kind == FRAME_KIND_GPU	   ? "[g]"
				  : sf->kind == FRAME_KIND_NVTX	   ? "[n]"
				  : sf->kind == FRAME_KIND_UNKNOWN ? "[?]"
								   : "";

		off +=
		    (size_t)snprintf(buf + off, len - off, "%s%s%s", off ? ";" : "", sf->name, tag);
		if (off >= len)
			return;
	}
}

struct row {
	uint32_t pid, tid;
	char stack[512];
	uint64_t v[STORE_VALUE__COUNT];
};

struct rows {
	struct row r[128];
	size_t n;
	struct store *s;
};

static int collect(uint32_t pid, uint32_t tid, uint32_t stack,
		   const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct rows *rs = ctx;
	struct row *r;

	if (rs->n == sizeof(rs->r) / sizeof(rs->r[0]))
		return -ENOSPC;
	r = &rs->r[rs->n++];
	r->pid = pid;
	r->tid = tid;
	stack_str(rs->s, stack, r->stack, sizeof(r->stack));
	memcpy(r->v, values, sizeof(r->v));
	return 0;
}

static struct rows *query(struct fx *f)
{
	static struct rows rs;
	struct store_query q = {.end_ns = UINT64_MAX};

	memset(&rs, 0, sizeof(rs));
	rs.s = f->s;
	CHECK_EQ_I(store__query(f->s, &q, collect, &rs), 0);
	return &rs;
}

/* Sum of a column over rows whose stack is `stack` (NULL: all rows); tid 0: any thread. */
static uint64_t val(struct fx *f, const char *stack, uint32_t tid, enum store_value col)
{
	struct rows *rs = query(f);
	uint64_t v = 0;

	for (size_t i = 0; i < rs->n; i++)
		if ((!stack || !strcmp(rs->r[i].stack, stack)) && (!tid || rs->r[i].tid == tid))
			v += rs->r[i].v[col];
	return v;
}

static void dump_rows(struct fx *f)
{
	struct rows *rs = query(f);

	if (!getenv("TEST_VERBOSE"))
		return;
	for (size_t i = 0; i < rs->n; i++)
		fprintf(stderr,
			"  %u/%u %s: cpu %llu idle %llu gpu %llu k %llu cns %llu cb %llu up %llu\n",
			rs->r[i].pid, rs->r[i].tid, rs->r[i].stack,
			(unsigned long long)rs->r[i].v[0], (unsigned long long)rs->r[i].v[1],
			(unsigned long long)rs->r[i].v[2], (unsigned long long)rs->r[i].v[3],
			(unsigned long long)rs->r[i].v[4], (unsigned long long)rs->r[i].v[5],
			(unsigned long long)rs->r[i].v[6]);
}

static struct gpu_stats stats(struct fx *f)
{
	struct gpu_stats st;

	gpu__stats(f->g, &st);
	return st;
}

/* --- tests -------------------------------------------------------------------------------- */

static void test_attach(void)
{
	Profd__GpuAttach a = PROFD__GPU_ATTACH__INIT;
	struct gpu_proc_status st[4];
	struct batch b;
	bool enable = true;
	struct fx f;

	fx_init(&f, 0);
	/* No batch before the attach. */
	batch_init(&b);
	CHECK_EQ_I(gpu__batch(f.g, PID, &b.b, &enable), -EINVAL);
	CHECK(!enable);

	a.state = PROFD__GPU_STATE__GPU_STATE_READY;
	a.library_path = "relative/libprofd_cupti.so";
	CHECK_EQ_I(gpu__attach(f.g, PID, UID, 0, &a, &enable), -EINVAL);
	a.library_path = NULL; /* READY needs the path for the probe */
	CHECK_EQ_I(gpu__attach(f.g, PID, UID, 0, &a, &enable), -EINVAL);
	a.state = 99;
	a.library_path = LIB;
	CHECK_EQ_I(gpu__attach(f.g, PID, UID, 0, &a, &enable), -EINVAL);
	CHECK_EQ_I(probe_attached, 0);
	CHECK_EQ_U(stats(&f).processes, 0);

	/* A library that could not subscribe: known, not collecting, no probe. */
	a.state = PROFD__GPU_STATE__GPU_STATE_SUBSCRIBER_TAKEN;
	a.library_path = NULL;
	a.detail = "cuptiSubscribe: taken by\n\"kineto\"";
	CHECK_EQ_I(gpu__attach(f.g, OTHER_PID, UID, 0, &a, &enable), 0);
	CHECK(!enable);
	CHECK_EQ_I(probe_attached, 0);

	CHECK_EQ_I(attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable), 0);
	CHECK(enable);
	CHECK_EQ_I(probe_attached, 1);
	CHECK_EQ_U(probe_pid, PID);
	CHECK_STREQ(probe_path, LIB);
	CHECK_EQ_U(stats(&f).processes, 2);

	CHECK_EQ_U(gpu__status(f.g, st, 4), 2);
	for (int i = 0; i < 2; i++) {
		if (st[i].pid == PID) {
			CHECK_EQ_I(st[i].state, PROFD__GPU_STATE__GPU_STATE_READY);
			CHECK(st[i].enabled);
			CHECK_EQ_U(st[i].cupti_version, 130001);
			CHECK_EQ_I(st[i].clock, PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK);
		} else {
			CHECK_EQ_U(st[i].pid, OTHER_PID);
			CHECK_EQ_I(st[i].state, PROFD__GPU_STATE__GPU_STATE_SUBSCRIBER_TAKEN);
			CHECK(!st[i].enabled);
			/* One line: the newline is gone. */
			CHECK_STREQ(st[i].detail, "cuptiSubscribe: taken by \"kineto\"");
		}
	}
	CHECK_EQ_U(gpu__status(f.g, st, 1), 2); /* how many there are, one filled */

	/* Saying again how it stands keeps the string table and the probe. */
	batch_init(&b);
	add_string(&b, "k");
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_I(attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable), 0);
	CHECK_EQ_I(probe_attached, 1);
	CHECK_EQ_I(probe_detached, 0);
	batch_init(&b);
	add_kernel(&b, 1000, 2000, 1, 1, 1);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).bad_records, 0);
	CHECK_EQ_U(stats(&f).records, 1);
	batch_init(&b);

	/* Not covered by the session: attached, told to stay idle. */
	cover_all = false;
	CHECK_EQ_I(attach(&f, OTHER_PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable), 0);
	CHECK(!enable);

	gpu__detach(f.g, PID);
	CHECK_EQ_I(probe_detached, 1);
	CHECK_EQ_U(stats(&f).processes, 1);
	CHECK_EQ_I(gpu__batch(f.g, PID, &b.b, &enable), -EINVAL);
	fx_fini(&f);
}

static void test_join_orders(void)
{
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t st1, st2;

	fx_init(&f, 0);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st1 = stack_of(&f, "main", "train", "launch_a");
	st2 = stack_of(&f, "main", "train", "launch_b");

	/* Launch first. */
	CHECK_EQ_I(t_launch(f.g, 1000, PID, TID, st1, 7), 0);
	batch_init(&b);
	add_string(&b, "_Z4gemmPfi");	      /* 1 */
	add_string(&b, "not_mangled_kernel"); /* 2 */
	add_string(&b, "_Zbroken");	      /* 3: fails to demangle, stays as is */
	add_kernel(&b, 2000, 3000, 7, 1, 1);
	/* Record first: its launch comes after the batch. */
	add_kernel(&b, 4000, 4500, 8, 2, 1);
	add_kernel(&b, 5000, 5100, 9, 3, 1);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).joined, 1);
	CHECK_EQ_I(t_launch(f.g, 3500, PID, TID2, st2, 8), 0);
	CHECK_EQ_I(t_launch(f.g, 4900, PID, TID2, st2, 9), 0);
	dump_rows(&f);

	CHECK_EQ_U(val(&f, "main;train;launch_a;gemm(float*, int)[g]", TID, STORE_VALUE_GPU_NS),
		   1000);
	CHECK_EQ_U(
	    val(&f, "main;train;launch_a;gemm(float*, int)[g]", TID, STORE_VALUE_GPU_KERNELS), 1);
	CHECK_EQ_U(val(&f, "main;train;launch_b;not_mangled_kernel[g]", TID2, STORE_VALUE_GPU_NS),
		   500);
	CHECK_EQ_U(val(&f, "main;train;launch_b;_Zbroken[g]", TID2, STORE_VALUE_GPU_NS), 100);
	CHECK_EQ_U(val(&f, NULL, 0, STORE_VALUE_GPU_NS), 1600);
	CHECK_EQ_U(val(&f, NULL, 0, STORE_VALUE_CPU_SAMPLES), 0);
	CHECK_EQ_U(stats(&f).launches, 3);
	CHECK_EQ_U(stats(&f).records, 3);
	CHECK_EQ_U(stats(&f).joined, 3);
	CHECK_EQ_U(stats(&f).unmatched, 0);

	/* Launches with records are not "expired" when their time is up. */
	gpu__tick(f.g, 10 * TTL);
	CHECK_EQ_U(stats(&f).launches_expired, 0);
	fx_fini(&f);
}

static void test_graph_ttl_weights(void)
{
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t st;

	fx_init(&f, 0);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", "step", "graph_launch");

	/* A graph: one launch, three kernels with its correlation id, in two batches. */
	t_launch(f.g, 1000, PID, TID, st, 50);
	batch_init(&b);
	add_string(&b, "k1");
	add_string(&b, "k2");
	add_kernel(&b, 2000, 2100, 50, 1, 1);
	add_kernel(&b, 2100, 2300, 50, 2, 1);
	CHECK_EQ_I(send(&f, &b), 0);
	batch_init(&b);
	add_kernel(&b, 2300, 2600, 50, 1, 1);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(val(&f, "main;step;graph_launch;k1[g]", TID, STORE_VALUE_GPU_NS), 400);
	CHECK_EQ_U(val(&f, "main;step;graph_launch;k1[g]", TID, STORE_VALUE_GPU_KERNELS), 2);
	CHECK_EQ_U(val(&f, "main;step;graph_launch;k2[g]", TID, STORE_VALUE_GPU_NS), 200);
	CHECK_EQ_U(stats(&f).joined, 3);

	/* A launch whose records never come expires at its TTL, not before. */
	t_launch(f.g, 10000, PID, TID, st, 51);
	gpu__tick(f.g, 10000 + TTL - 1);
	CHECK_EQ_U(stats(&f).launches_expired, 0);
	gpu__tick(f.g, 10000 + TTL);
	CHECK_EQ_U(stats(&f).launches_expired, 1);
	/* The graph's launch went at its TTL too: a kernel now finds no launch. */
	batch_init(&b);
	add_kernel(&b, 20000, 20100, 50, 1, 1);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).joined, 3);

	/* Weights: 3 kernels of 1000 ns with weights 2, 0, 1. */
	t_launch(f.g, 30000, PID, TID2, st, 60);
	t_launch(f.g, 30001, PID, TID2, st, 62);
	batch_init(&b);
	add_string(&b, "w");
	add_kernel(&b, 31000, 32000, 60, 3, 2);
	add_kernel(&b, 32000, 33000, 61, 3, 0);
	add_kernel(&b, 33000, 34000, 62, 3, 1);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(val(&f, "main;step;graph_launch;w[g]", TID2, STORE_VALUE_GPU_NS), 3000);
	CHECK_EQ_U(val(&f, "main;step;graph_launch;w[g]", TID2, STORE_VALUE_GPU_KERNELS), 3);
	CHECK_EQ_U(stats(&f).unprobed, 1);

	/* The stand-in: the kernel of corr 50 above (weight 1) and one with weight 3. */
	batch_init(&b);
	add_kernel(&b, 40000, 40500, 70, 3, 3);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).unmatched, 0);
	gpu__tick(f.g, 40500 + 2 * TTL);
	dump_rows(&f);
	CHECK_EQ_U(stats(&f).unmatched, 2);
	CHECK_EQ_U(val(&f, "[launch stack unknown][?];k1[g]", 0, STORE_VALUE_GPU_NS), 100);
	CHECK_EQ_U(val(&f, "[launch stack unknown][?];w[g]", 0, STORE_VALUE_GPU_NS), 1500);
	CHECK_EQ_U(val(&f, "[launch stack unknown][?];w[g]", 0, STORE_VALUE_GPU_KERNELS), 3);
	CHECK_EQ_U(stats(&f).records, 8);
	fx_fini(&f);
}

static void test_copies_uprobe(void)
{
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t st;

	fx_init(&f, 0);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", "to_device", NULL);
	t_launch(f.g, 1000, PID, TID, st, 5);
	t_launch(f.g, 1000, PID, TID, st, 6);
	batch_init(&b);
	add_copy(&b, 2000, 2500, 5, PROFD__GPU_COPY_KIND__GPU_COPY_HTOD, 4096);
	add_copy(&b, 3000, 3100, 6, PROFD__GPU_COPY_KIND__GPU_COPY_MEMSET, 100);
	b.c[1].has_weight = true;
	b.c[1].weight = 4;
	add_copy(&b, 3000, 3100, 6, 42, 100); /* no such kind */
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(val(&f, "main;to_device;[memcpy HtoD][g]", TID, STORE_VALUE_COPY_NS), 500);
	CHECK_EQ_U(val(&f, "main;to_device;[memcpy HtoD][g]", TID, STORE_VALUE_COPY_BYTES), 4096);
	CHECK_EQ_U(val(&f, "main;to_device;[memset][g]", TID, STORE_VALUE_COPY_NS), 400);
	CHECK_EQ_U(val(&f, "main;to_device;[memset][g]", TID, STORE_VALUE_COPY_BYTES), 400);
	CHECK_EQ_U(val(&f, NULL, 0, STORE_VALUE_GPU_NS), 0);
	CHECK_EQ_U(stats(&f).bad_records, 1);

	/* A process without the library: launches counted per stack, no time. */
	CHECK_EQ_I(t_uprobe_launch(f.g, 5000, OTHER_PID, 201, st), 0);
	CHECK_EQ_I(t_uprobe_launch(f.g, 5001, OTHER_PID, 201, st), 0);
	CHECK_EQ_U(val(&f, "main;to_device", 201, STORE_VALUE_UPROBE_LAUNCHES), 2);
	fx_fini(&f);
}

static void test_held_idle(void)
{
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t st, other;

	fx_init(&f, 0);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", "work", NULL);
	other = stack_of(&f, "other_main", NULL, NULL);

	/* A process without a library: straight to the store, no idle value. */
	CHECK_EQ_I(t_cpu_sample(f.g, 1000, OTHER_PID, 201, other), 0);
	CHECK_EQ_U(val(&f, "other_main", 201, STORE_VALUE_CPU_SAMPLES), 1);

	/* Held until the library says everything before them has arrived. */
	t_cpu_sample(f.g, 5000, PID, TID, st);	/* before the kernels: idle */
	t_cpu_sample(f.g, 15000, PID, TID, st); /* inside [10000, 20000) */
	t_cpu_sample(f.g, 20000, PID, TID, st); /* at the end of the union: idle */
	t_cpu_sample(f.g, 21500, PID, TID, st); /* inside [21000, 22000) */
	t_cpu_sample(f.g, 40000, PID, TID, st); /* after complete_until: held on */
	CHECK_EQ_U(stats(&f).held, 5);
	CHECK_EQ_U(val(&f, "main;work", 0, STORE_VALUE_CPU_SAMPLES), 0);

	batch_init(&b);
	add_string(&b, "k");
	/* Two overlapping kernels make one busy span; a third after a gap. */
	add_kernel(&b, 10000, 16000, 1, 1, 0);
	add_kernel(&b, 12000, 20000, 2, 1, 0);
	add_kernel(&b, 21000, 22000, 3, 1, 0);
	complete_until(&b, 30000);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).held, 1);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_CPU_SAMPLES), 4);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_GPU_IDLE_SAMPLES), 2);
	CHECK_EQ_U(stats(&f).unprobed, 3);

	/* No word from the library: released after hold_ns. */
	gpu__tick(f.g, 40000 + HOLD - 1);
	CHECK_EQ_U(stats(&f).held, 1);
	gpu__tick(f.g, 40000 + HOLD);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_CPU_SAMPLES), 5);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_GPU_IDLE_SAMPLES), 3);

	/* Detach releases what is held at once. */
	t_cpu_sample(f.g, 900000, PID, TID, st);
	CHECK_EQ_U(stats(&f).held, 1);
	gpu__detach(f.g, PID);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_CPU_SAMPLES), 6);
	/* Not attached any more: at once, no idle value. */
	t_cpu_sample(f.g, 900001, PID, TID, st);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_CPU_SAMPLES), 7);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_GPU_IDLE_SAMPLES), 4);
	fx_fini(&f);
}

/*
 * Off-CPU waits: their time goes to the store at once, the part of it in which no kernel ran
 * once the library's records up to the wait's end are in.
 */
static void test_held_wait_idle(void)
{
	const uint64_t S = 1000000000ull;
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t st, other;

	fx_init(&f, 0);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", "wait", NULL);
	other = stack_of(&f, "other_main", NULL, NULL);

	/* A process without a library: off-CPU time, nothing held, no idle part. */
	CHECK_EQ_I(t_wait(f.g, 1000, 9000, OTHER_PID, 201, other), 0);
	CHECK_EQ_U(val(&f, "other_main", 201, STORE_VALUE_OFFCPU_NS), 8000);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(val(&f, NULL, 0, STORE_VALUE_GPU_IDLE_OFFCPU_NS), 0);

	/* [5000, 25000) against kernels over [10000, 20000) and [21000, 22000). */
	CHECK_EQ_I(t_wait(f.g, 5000, 25000, PID, TID, st), 0);
	CHECK_EQ_U(val(&f, "main;wait", TID, STORE_VALUE_OFFCPU_NS), 20000);
	CHECK_EQ_U(stats(&f).held, 1);
	/* One that ends after what the library will say is complete: held on. */
	CHECK_EQ_I(t_wait(f.g, 28000, 40000, PID, TID, st), 0);
	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, 10000, 16000, 1, 1, 0);
	add_kernel(&b, 12000, 20000, 2, 1, 0);
	add_kernel(&b, 21000, 22000, 3, 1, 0);
	complete_until(&b, 30000);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).held, 1);
	/* 5000 before the first kernel, 1000 between, 3000 after. */
	CHECK_EQ_U(val(&f, "main;wait", TID, STORE_VALUE_GPU_IDLE_OFFCPU_NS), 9000);
	/* The wait's stack, not a labelled copy, and the CPU columns untouched. */
	CHECK_EQ_U(val(&f, "main;wait", TID, STORE_VALUE_CPU_SAMPLES), 0);
	CHECK_EQ_U(val(&f, "main;wait", TID, STORE_VALUE_GPU_IDLE_SAMPLES), 0);
	/* No word from the library: hold_ns after its end, with what is known (no kernel). */
	gpu__tick(f.g, 40000 + HOLD - 1);
	CHECK_EQ_U(stats(&f).held, 1);
	gpu__tick(f.g, 40000 + HOLD);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(val(&f, "main;wait", TID, STORE_VALUE_GPU_IDLE_OFFCPU_NS), 9000 + 12000);

	/* A launch before the wait's end with no record yet: its kernel may run in the wait. */
	t_launch(f.g, 45000, PID, TID, st, 7);
	CHECK_EQ_I(t_wait(f.g, 44000, 50000, PID, TID, st), 0);
	batch_init(&b);
	complete_until(&b, 60000);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).held, 1);
	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, 46000, 48000, 7, 1, 1);
	complete_until(&b, 60000);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(val(&f, "main;wait", TID, STORE_VALUE_GPU_IDLE_OFFCPU_NS), 21000 + 4000);

	/*
	 * Seconds long, over bucket bounds (each second gets its part): kernels from 10.5 s to
	 * 11.5 s, so the wait from 10 s to 13 s is idle 0.5 s in its first second, 0.5 s in its
	 * second and all of its third.
	 */
	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, 10 * S + S / 2, 11 * S + S / 2, 8, 1, 0);
	complete_until(&b, 14 * S);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_I(t_wait(f.g, 10 * S, 13 * S, PID, TID + 1, st), 0);
	gpu__tick(f.g, 13 * S);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(val(&f, "main;wait", TID + 1, STORE_VALUE_OFFCPU_NS), 3 * S);
	CHECK_EQ_U(val(&f, "main;wait", TID + 1, STORE_VALUE_GPU_IDLE_OFFCPU_NS), 2 * S);
	/*
	 * Busy intervals dropped by age leave what came before them unknown, never idle: after
	 * the kernel of 10.5-11.5 s is pruned (minutes later), a wait from 9 s to 12 s counts
	 * only what follows the dropped kernel's end as idle.
	 */
	gpu__tick(f.g, 400 * S);
	batch_init(&b);
	complete_until(&b, 401 * S);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_I(t_wait(f.g, 9 * S, 12 * S, PID, TID + 2, st), 0);
	gpu__tick(f.g, 401 * S);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(val(&f, "main;wait", TID + 2, STORE_VALUE_GPU_IDLE_OFFCPU_NS), S / 2);
	fx_fini(&f);
}

static void test_nvtx(void)
{
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t st, lst;

	fx_init(&f, 0);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", "work", NULL);
	lst = stack_of(&f, "main", "launch", NULL);

	t_cpu_sample(f.g, 3000, PID, TID, st);	/* epoch, step */
	t_cpu_sample(f.g, 3000, PID, TID2, st); /* another thread: none */
	t_cpu_sample(f.g, 60000, PID, TID, st); /* epoch only */
	t_cpu_sample(f.g, 65000, PID, TID, st); /* epoch, load (open) */
	t_cpu_sample(f.g, 75000, PID, TID, st); /* epoch, load (closed later) */
	t_launch(f.g, 4000, PID, TID, lst, 9);

	batch_init(&b);
	add_string(&b, "epoch"); /* 1 */
	add_string(&b, "step");	 /* 2 */
	add_string(&b, "load");	 /* 3 */
	add_string(&b, "kern");	 /* 4 */
	add_nvtx(&b, 2000, 50000, TID, 2, 1, false);
	add_nvtx(&b, 1000, 70000, TID, 1, 0, true);
	add_nvtx(&b, 62000, 70000, TID, 3, 1, true);
	add_nvtx(&b, 4000, 4000, TID, 2, 2, false); /* a mark: no label */
	add_kernel(&b, 5000, 6000, 9, 4, 1);
	complete_until(&b, 70000);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).held, 1);

	batch_init(&b);
	add_nvtx(&b, 1000, 100000, TID, 1, 0, false);
	add_nvtx(&b, 62000, 80000, TID, 3, 1, false);
	complete_until(&b, 100000);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).held, 0);
	dump_rows(&f);

	CHECK_EQ_U(val(&f, "epoch[n];step[n];main;work", TID, STORE_VALUE_CPU_SAMPLES), 1);
	CHECK_EQ_U(val(&f, "main;work", TID2, STORE_VALUE_CPU_SAMPLES), 1);
	CHECK_EQ_U(val(&f, "epoch[n];main;work", TID, STORE_VALUE_CPU_SAMPLES), 1);
	CHECK_EQ_U(val(&f, "epoch[n];load[n];main;work", TID, STORE_VALUE_CPU_SAMPLES), 2);
	CHECK_EQ_U(val(&f, "epoch[n];step[n];main;launch;kern[g]", TID, STORE_VALUE_GPU_NS), 1000);
	CHECK_EQ_U(val(&f, NULL, 0, STORE_VALUE_CPU_SAMPLES), 5);
	/* The kernel ran during none of the samples. */
	CHECK_EQ_U(val(&f, NULL, 0, STORE_VALUE_GPU_IDLE_SAMPLES), 5);
	fx_fini(&f);
}

static const Profd__TraceKernel *kernel_by_corr(const Profd__Trace *t, uint32_t corr)
{
	for (size_t i = 0; i < t->n_kernels; i++)
		if (t->kernels[i]->correlation_id == corr)
			return t->kernels[i];
	return NULL;
}

static void test_trace(void)
{
	struct store_query q = {.end_ns = UINT64_MAX};
	struct trace_meta meta = {.frequency_hz = 99, .realtime_offset_ns = 5};
	Profd__Trace *t = NULL;
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t st, lst;

	fx_init(&f, 0);
	CHECK_EQ_I(t_trace(f.g, &q, &meta, &t), -ENODATA);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", "work", NULL);
	lst = stack_of(&f, "main", "launch", NULL);

	/* Out of order on purpose: the trace sorts each list by time. */
	t_cpu_sample(f.g, 9000, PID, TID, st);
	t_cpu_sample(f.g, 3000, PID, TID, st);
	t_launch(f.g, 2500, PID, TID, lst, 11);
	t_launch(f.g, 2000, PID, TID, lst, 10);
	batch_init(&b);
	add_string(&b, "_Z3addv");
	add_string(&b, "cudaLaunchKernel");
	add_string(&b, "fwd");
	add_kernel(&b, 4000, 5000, 11, 1, 1);
	add_kernel(&b, 3000, 3500, 10, 1, 1);
	add_copy(&b, 6000, 6500, 12, PROFD__GPU_COPY_KIND__GPU_COPY_DTOH, 64);
	add_api(&b, 2000, 2600, TID, 10, 2);
	add_nvtx(&b, 1000, 8000, TID, 3, 0, false);
	add_nvtx(&b, 8500, 9500, TID2, 3, 0, true);
	complete_until(&b, 9500);
	CHECK_EQ_I(send(&f, &b), 0);
	/* Waits: one of 2 ms is on the timeline, one of 0.5 ms is not. */
	CHECK_EQ_I(t_wait(f.g, 9600, 9600 + 2000000, PID, TID2, st), 0);
	CHECK_EQ_I(t_wait(f.g, 9700, 9700 + 500000, PID, TID, st), 0);

	CHECK_EQ_I(t_trace(f.g, &q, &meta, &t), 0);
	CHECK(t != NULL);
	if (!t) {
		fx_fini(&f);
		return;
	}
	CHECK_EQ_U(t->n_samples, 2);
	CHECK_EQ_U(t->n_launches, 2);
	CHECK_EQ_U(t->n_kernels, 2);
	CHECK_EQ_U(t->n_copies, 1);
	CHECK_EQ_U(t->n_api_calls, 1);
	CHECK_EQ_U(t->n_nvtx, 2); /* the closed one and the one still open */
	CHECK_EQ_U(t->n_waits, 1);
	if (t->n_waits == 1) {
		CHECK_EQ_U(t->waits[0]->start_ns, 9600);
		CHECK_EQ_U(t->waits[0]->end_ns, 9600 + 2000000);
		CHECK_EQ_U(t->waits[0]->tid, TID2);
		CHECK(t->waits[0]->stack < t->n_stacks);
	}
	CHECK_EQ_U(t->samples[0]->ts_ns, 3000);
	CHECK_EQ_U(t->samples[1]->ts_ns, 9000);
	CHECK_EQ_U(t->launches[0]->ts_ns, 2000);
	CHECK_EQ_U(t->kernels[0]->start_ns, 3000);
	/* Flows: every launch has its kernel, by correlation id. */
	for (size_t i = 0; i < t->n_launches; i++) {
		const Profd__TraceKernel *k = kernel_by_corr(t, t->launches[i]->correlation_id);

		CHECK(k != NULL);
		if (k)
			CHECK(k->start_ns >= t->launches[i]->ts_ns);
		CHECK(t->launches[i]->stack < t->n_stacks);
	}
	CHECK_STREQ(t->strings[t->kernels[0]->name], "add()");
	CHECK_STREQ(t->strings[t->api_calls[0]->name], "cudaLaunchKernel");
	CHECK_STREQ(t->strings[t->nvtx[0]->name], "fwd");
	CHECK_EQ_U(t->nvtx[1]->tid, TID2);
	CHECK_EQ_U(t->nvtx[1]->end_ns, 9500);
	CHECK_EQ_I(t->copies[0]->kind, PROFD__GPU_COPY_KIND__GPU_COPY_DTOH);
	CHECK_EQ_U(t->copies[0]->bytes, 64);
	CHECK_EQ_U(t->kernels[0]->stream, 7);
	/* The sample's stack: leaf first, through the tables. */
	{
		const Profd__Stack *s = t->stacks[t->samples[0]->stack];

		CHECK_EQ_U(s->n_frames, 2);
		if (s->n_frames == 2) {
			CHECK_STREQ(t->strings[t->frames[s->frames[0]]->name], "work");
			CHECK_STREQ(t->strings[t->frames[s->frames[1]]->name], "main");
		}
	}
	CHECK_EQ_U(t->n_processes, 1);
	if (t->n_processes == 1) {
		CHECK_EQ_U(t->processes[0]->pid, PID);
		CHECK_STREQ(t->strings[t->processes[0]->name], "trainer");
		CHECK_EQ_U(t->processes[0]->uid, UID);
	}
	CHECK_EQ_U(t->n_threads, 2);
	for (size_t i = 0; i < t->n_threads; i++)
		CHECK_STREQ(t->strings[t->threads[i]->name],
			    t->threads[i]->tid == TID ? "main" : "loader");
	CHECK_EQ_U(t->oldest_ns, 1000);
	CHECK_EQ_U(t->frequency_hz, 99);
	CHECK_EQ_I(t->realtime_offset_ns, 5);
	CHECK_EQ_U(t->events_overwritten, 0);
	dump__trace_free(t);

	/* A window: only what overlaps [3000, 4000). */
	q.start_ns = 3000;
	q.end_ns = 4000;
	CHECK_EQ_I(t_trace(f.g, &q, &meta, &t), 0);
	if (t) {
		CHECK_EQ_U(t->n_samples, 1);
		CHECK_EQ_U(t->n_launches, 0);
		CHECK_EQ_U(t->n_kernels, 1);
		CHECK_EQ_U(t->n_nvtx, 1);
		CHECK_EQ_U(t->n_copies, 0);
		CHECK_EQ_U(t->start_ns, 3000);
		CHECK_EQ_U(t->end_ns, 4000);
		dump__trace_free(t);
	}
	/* Another uid sees nothing; another pid neither. */
	q = (struct store_query){.end_ns = UINT64_MAX, .filter_uid = true, .uid = UID + 1};
	CHECK_EQ_I(t_trace(f.g, &q, &meta, &t), -ENODATA);
	q = (struct store_query){.end_ns = UINT64_MAX, .pids = (uint32_t[]){OTHER_PID}, .npids = 1};
	CHECK_EQ_I(t_trace(f.g, &q, &meta, &t), -ENODATA);
	q = (struct store_query){.end_ns = UINT64_MAX, .filter_uid = true, .uid = UID};
	CHECK_EQ_I(t_trace(f.g, &q, &meta, &t), 0);
	if (t) {
		CHECK_EQ_U(t->only_uid, UID);
		CHECK_EQ_U(t->n_kernels, 2);
		dump__trace_free(t);
	}
	fx_fini(&f);
}

/* The store's compaction as the daemon's tick runs it, due or not: the module keeps its ids. */
static void compact(struct fx *f)
{
	struct route r = t_route(f->g);

	CHECK_EQ_I(route__compact_now(&r), 1);
}

static void test_gc(void)
{
	struct store_query q = {.end_ns = UINT64_MAX, .pids = (uint32_t[]){OTHER_PID}, .npids = 1};
	Profd__Trace *t = NULL;
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t dead, st, held_st, ring_st, before_gen;
	struct store_stats ss;

	fx_init(&f, 0);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	/* Interned first and referenced by nothing: compaction drops it and renumbers the rest. */
	dead = stack_of(&f, "dead_root", "dead", NULL);
	st = stack_of(&f, "main", "pending_launch", NULL);
	held_st = stack_of(&f, "main", "held_sample", NULL);
	ring_st = stack_of(&f, "main", "ring_sample", NULL);
	CHECK(dead < st && st < held_st && held_st < ring_st);
	t_launch(f.g, 1000, PID, TID, st, 3);
	t_cpu_sample(f.g, 2000, PID, TID, held_st);
	/* Another process's sample goes to the store and the timeline at once. */
	CHECK_EQ_I(t_cpu_sample(f.g, 2500, OTHER_PID, 201, ring_st), 0);
	store__stats(f.s, &ss);
	before_gen = (uint32_t)ss.generation;
	compact(&f);
	store__stats(f.s, &ss);
	CHECK(ss.generation != before_gen);
	CHECK_EQ_U(ss.stacks, 3);
	/* The timeline's copy of the sample names the moved stack. */
	CHECK_EQ_I(t_trace(f.g, &q, NULL, &t), 0);
	CHECK(t && t->n_samples == 1);
	if (t && t->n_samples == 1) {
		const Profd__Stack *s = t->stacks[t->samples[0]->stack];

		CHECK_EQ_U(s->n_frames, 2);
		if (s->n_frames == 2)
			CHECK_STREQ(t->strings[t->frames[s->frames[0]]->name], "ring_sample");
	}
	dump__trace_free(t);

	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, 3000, 3700, 3, 1, 1);
	complete_until(&b, 5000);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(val(&f, "main;pending_launch;k[g]", TID, STORE_VALUE_GPU_NS), 700);
	CHECK_EQ_U(val(&f, "main;held_sample", TID, STORE_VALUE_CPU_SAMPLES), 1);
	CHECK_EQ_U(val(&f, "dead_root;dead", 0, STORE_VALUE_CPU_SAMPLES), 0);
	fx_fini(&f);
}

static void test_ring_bad(void)
{
	struct store_query q = {.end_ns = UINT64_MAX};
	Profd__Trace *t = NULL;
	struct timeline_stats ts;
	struct gpu_stats gs;
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t st;
	const uint64_t n = 5000;

	fx_init(&f, 64 << 10);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", NULL, NULL);
	for (uint64_t i = 1; i <= n; i++)
		CHECK_EQ_I(t_cpu_sample(f.g, i * 10, OTHER_PID, 201, st), 0);
	timeline__stats(f.tl, &ts);
	CHECK(ts.overwritten > 0);
	CHECK(ts.events * 24 <= 64 << 10);	 /* a CPU sample takes 24 bytes */
	CHECK(ts.events * 24 > (64 << 10) - 24); /* and nothing else: the ring is full */
	CHECK_EQ_U(ts.events + ts.overwritten, n);
	CHECK_EQ_I(t_trace(f.g, &q, NULL, &t), 0);
	if (t) {
		CHECK_EQ_U(t->n_samples, ts.events);
		/* The oldest went first. */
		CHECK_EQ_U(t->samples[0]->ts_ns, (ts.overwritten + 1) * 10);
		CHECK_EQ_U(t->samples[t->n_samples - 1]->ts_ns, n * 10);
		CHECK_EQ_U(t->events_overwritten, ts.overwritten);
		dump__trace_free(t);
	}
	/* The store got every sample: the ring's bound is the ring's alone. */
	CHECK_EQ_U(val(&f, "main", 201, STORE_VALUE_CPU_SAMPLES), n);

	/* Bad records: counted, skipped, charged nowhere. */
	t_launch(f.g, 100, PID, TID, st, 1);
	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, 2000, 1000, 1, 1, 1);			/* ends before it starts */
	add_kernel(&b, 1000, 2000, 1, 9, 1);			/* no string 9 */
	add_kernel(&b, 0, 2000, 1, 1, 1);			/* no start */
	add_kernel(&b, 1000, 1000 + 7200000000000ull, 1, 1, 1); /* two hours */
	add_nvtx(&b, 10, 5, TID, 1, 0, false);
	add_api(&b, 10, 20, TID, 1, 77);
	CHECK_EQ_I(send(&f, &b), 0);
	gs = stats(&f);
	CHECK_EQ_U(gs.bad_records, 6);
	CHECK_EQ_U(gs.records, 0);
	CHECK_EQ_U(val(&f, NULL, 0, STORE_VALUE_GPU_NS), 0);

	/* Lost records the library reports. */
	batch_init(&b);
	b.b.has_dropped = true;
	b.b.dropped = 12;
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).dropped, 12);
	fx_fini(&f);
}

static void test_exit(void)
{
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t st;

	fx_init(&f, 0);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", NULL, NULL);
	t_launch(f.g, 1000, PID, TID, st, 1);
	t_cpu_sample(f.g, 1500, PID, TID, st);
	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, 2000, 2200, 2, 1, 1); /* its launch never comes */
	CHECK_EQ_I(send(&f, &b), 0);
	gpu__process_exited(f.g, PID);
	CHECK_EQ_U(stats(&f).processes, 1);
	gpu__tick(f.g, 1600); /* long before any TTL or hold */
	CHECK_EQ_U(stats(&f).processes, 0);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(stats(&f).launches_expired, 1);
	CHECK_EQ_U(stats(&f).unmatched, 1);
	CHECK_EQ_I(probe_detached, 1);
	CHECK_EQ_U(val(&f, "[launch stack unknown][?];k[g]", 0, STORE_VALUE_GPU_NS), 200);
	CHECK_EQ_U(val(&f, "main", TID, STORE_VALUE_CPU_SAMPLES), 1);
	/* Its connection closing later changes nothing. */
	gpu__detach(f.g, PID);
	CHECK_EQ_I(probe_detached, 1);
	fx_fini(&f);
}

/* The CPU samples of pid's life `life` in the store. */
static int life_cpu_cb(uint32_t pid, uint32_t life, uint32_t tid, uint32_t stack,
		       const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	uint64_t *by_life = ctx;

	(void)pid;
	(void)tid;
	(void)stack;
	if (life < 4)
		by_life[life] += values[STORE_VALUE_CPU_SAMPLES] + values[STORE_VALUE_GPU_NS];
	return 0;
}

/*
 * The pid is reused before the tick settled the old process: what the module held of it goes
 * to the store at once, filed under the old process, not the new one that gets the pid next.
 */
static void test_reused(void)
{
	struct store_query q = {.end_ns = UINT64_MAX};
	uint64_t by_life[4] = {0};
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t st;

	fx_init(&f, 0);
	CHECK_EQ_I(store__process_began(f.s, PID, 100), 0);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", NULL, NULL);
	t_launch(f.g, 1000, PID, TID, st, 1);
	t_cpu_sample(f.g, 1500, PID, TID, st);
	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, 2000, 2200, 2, 1, 1); /* its launch never comes */
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).held, 1);
	CHECK(store__process_is_new(f.s, PID, 200));
	CHECK(!store__process_is_new(f.s, PID, 100));
	gpu__process_reused(f.g, PID);
	CHECK_EQ_I(store__process_began(f.s, PID, 200), 0);
	CHECK_EQ_I(store__set_process(f.s, PID, UID + 1, "next"), 0);
	CHECK_EQ_U(stats(&f).processes, 0);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(stats(&f).launches_expired, 1);
	CHECK_EQ_I(probe_detached, 1);
	CHECK_EQ_I(store__query_lives(f.s, &q, life_cpu_cb, by_life), 0);
	CHECK_EQ_U(by_life[1], 1 + 200); /* the held sample and the kernel: the old process's */
	CHECK_EQ_U(by_life[2], 0);
	/* Nothing of it is left to reach the new process later. */
	gpu__tick(f.g, 10000000000ull);
	memset(by_life, 0, sizeof(by_life));
	CHECK_EQ_I(store__query_lives(f.s, &q, life_cpu_cb, by_life), 0);
	CHECK_EQ_U(by_life[2], 0);
	fx_fini(&f);
}

/* --- review fixes ------------------------------------------------------------------------- */

#define NOW (100ull * 1000000000ull)
#define SEC 1000000000ull

/* A batch of many kernels, on the heap. */
struct bigbatch {
	Profd__GpuBatch b;
	Profd__GpuKernel *k;
	Profd__GpuKernel **kp;
};

static void big_init(struct bigbatch *bb, size_t n)
{
	profd__gpu_batch__init(&bb->b);
	bb->k = calloc(n, sizeof(*bb->k));
	bb->kp = calloc(n, sizeof(*bb->kp));
	CHECK(bb->k && bb->kp);
	bb->b.kernels = bb->kp;
}

static void big_kernel(struct bigbatch *bb, uint64_t start, uint64_t end, uint32_t corr,
		       uint32_t name, uint32_t weight)
{
	Profd__GpuKernel *k = &bb->k[bb->b.n_kernels];

	profd__gpu_kernel__init(k);
	k->start_ns = start;
	k->end_ns = end;
	k->correlation_id = corr;
	k->has_name = name != 0;
	k->name = name;
	k->has_weight = true;
	k->weight = weight;
	bb->kp[bb->b.n_kernels++] = k;
}

static void big_free(struct bigbatch *bb)
{
	free(bb->k);
	free(bb->kp);
}

/* "_Z1f1a" and n levels of a function type naming the previous level twice: 2n back-refs. */
static void make_bomb(char *b, size_t len, int n)
{
	size_t off = (size_t)snprintf(b, len, "_Z1f1a");

	for (int i = 0; i < n; i++) {
		char s[8];

		if (i == 0)
			snprintf(s, sizeof(s), "S_");
		else if (i - 1 < 10)
			snprintf(s, sizeof(s), "S%c_", '0' + (i - 1));
		else
			snprintf(s, sizeof(s), "S%c_", 'A' + (i - 11));
		off += (size_t)snprintf(b + off, len - off, "Fv%s%sE", s, s);
	}
}

/* A mangled name of one identifier of n 'a's: "_Z<n>aaa...". */
static char *long_name(int n)
{
	char *s = malloc((size_t)n + 16);
	int off = sprintf(s, "_Z%d", n);

	memset(s + off, 'a', (size_t)n);
	s[off + n] = '\0';
	return s;
}

static void test_demangle_bounds(void)
{
	char b[256], *d, *n;

	/* 24 back-references: demangled, and the output stays bounded (about 80 KB). */
	make_bomb(b, sizeof(b), 12);
	CHECK_EQ_U(strlen(b), 112);
	d = demangle(b);
	CHECK(d != NULL);
	if (d)
		CHECK_EQ_U(strlen(d), 81820);
	free(d);
	/* 26 and 28: refused before __cxa_demangle doubles the output twice more. */
	make_bomb(b, sizeof(b), 13);
	errno = 0;
	d = demangle(b);
	CHECK(d == NULL);
	CHECK_EQ_I(errno, E2BIG);
	free(d);
	make_bomb(b, sizeof(b), 14);
	d = demangle(b);
	CHECK(d == NULL);
	free(d);
	/* Length: 1024 bytes demangle, 1025 do not. */
	n = long_name(1018);
	CHECK_EQ_U(strlen(n), 1024);
	d = demangle(n);
	CHECK(d != NULL);
	if (d)
		CHECK_EQ_U(strlen(d), 1018);
	free(d);
	free(n);
	n = long_name(1019);
	CHECK_EQ_U(strlen(n), 1025);
	errno = 0;
	d = demangle(n);
	CHECK(d == NULL);
	CHECK_EQ_I(errno, E2BIG);
	free(d);
	free(n);
	d = demangle("_Z4gemmPfi");
	CHECK(d && !strcmp(d, "gemm(float*, int)"));
	free(d);
}

/* The leaf frame of the row whose GPU time is ns. */
struct leaf_find {
	struct store *s;
	uint64_t ns;
	size_t len;
	char name[2048];
};

static int leaf_cb(uint32_t pid, uint32_t tid, uint32_t stack, const uint64_t v[STORE_VALUE__COUNT],
		   void *ctx)
{
	struct leaf_find *lf = ctx;
	const uint32_t *fr;
	size_t n;

	if (v[STORE_VALUE_GPU_NS] != lf->ns || !store__stack(lf->s, stack, &fr, &n) || !n)
		return 0;
	lf->len = strlen(store__frame(lf->s, fr[0])->name);
	snprintf(lf->name, sizeof(lf->name), "%s", store__frame(lf->s, fr[0])->name);
	return 0;
}

static size_t leaf_len(struct fx *f, uint64_t gpu_ns, struct leaf_find *lf)
{
	struct store_query q = {.end_ns = UINT64_MAX};

	memset(lf, 0, sizeof(*lf));
	lf->s = f->s;
	lf->ns = gpu_ns;
	CHECK_EQ_I(store__query(f->s, &q, leaf_cb, lf), 0);
	return lf->len;
}

static void test_kernel_leaf(void)
{
	struct store_query q = {.end_ns = UINT64_MAX};
	static struct leaf_find lf;
	Profd__Trace *t = NULL;
	char bomb12[256], bomb14[256];
	struct batch b;
	struct fx f;
	bool enable;
	uint32_t st;

	fx_init(&f, 64 << 10);
	gpu__tick(f.g, NOW);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", "launch", NULL);
	make_bomb(bomb12, sizeof(bomb12), 12);
	make_bomb(bomb14, sizeof(bomb14), 14);
	t_launch(f.g, NOW + 1, PID, TID, st, 1);
	t_launch(f.g, NOW + 2, PID, TID, st, 2);
	batch_init(&b);
	add_string(&b, bomb12);
	add_string(&b, bomb14);
	add_kernel(&b, NOW + 10, NOW + 11, 1, 1, 1);
	add_kernel(&b, NOW + 20, NOW + 22, 2, 2, 1);
	CHECK_EQ_I(send(&f, &b), 0);
	/* Demangles to 81820 bytes; the leaf keeps 1024. */
	CHECK_EQ_U(leaf_len(&f, 1, &lf), 1024);
	CHECK(!strncmp(lf.name, "f(a, void (a, a), void (void (a, a)", 35));
	/* Too many back-references: shown as sent. */
	CHECK_EQ_U(leaf_len(&f, 2, &lf), strlen(bomb14));
	CHECK_STREQ(lf.name, bomb14);
	/* In the ring a name takes at most a 64th of it: 1024 bytes, 33 of them overhead. */
	CHECK_EQ_I(t_trace(f.g, &q, NULL, &t), 0);
	if (t) {
		const Profd__TraceKernel *k = kernel_by_corr(t, 1);
		const char *name = k ? t->strings[k->name] : "";

		CHECK_EQ_U(strlen(name), 991);
		CHECK(!strcmp(name + 988, "..."));
		dump__trace_free(t);
	}
	fx_fini(&f);
}

static void test_join_deadlines(void)
{
	uint64_t T = NOW + TTL;
	struct batch b;
	struct fx f;
	bool enable;
	uint32_t st;

	fx_init(&f, 0);
	gpu__tick(f.g, NOW);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", NULL, NULL);
	/* A record that claims to end 50 s ahead waits from its arrival like any other. */
	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, NOW + 50 * SEC - 100, NOW + 50 * SEC, 1, 1, 1);
	add_kernel(&b, NOW - 1000, NOW - 500, 2, 1, 1);
	CHECK_EQ_I(send(&f, &b), 0);
	gpu__tick(f.g, NOW + TTL - 1);
	CHECK_EQ_U(stats(&f).unmatched, 0);
	gpu__tick(f.g, NOW + TTL);
	CHECK_EQ_U(stats(&f).unmatched, 2);

	/* A refreshed launch goes to the tail: the one behind it still expires on time. */
	t_launch(f.g, T, PID, TID, st, 10);
	t_launch(f.g, T + 10, PID, TID, st, 11);
	t_launch(f.g, T + TTL / 2, PID, TID, st, 10); /* the first is settled: expired */
	CHECK_EQ_U(stats(&f).launches_expired, 1);
	gpu__tick(f.g, T + 10 + TTL);
	CHECK_EQ_U(stats(&f).launches_expired, 2);

	/* An exited process's joins go at once, another pid's stay. */
	t_launch(f.g, T + 20 + TTL, OTHER_PID, 201, st, 20);
	t_launch(f.g, T + 20 + TTL, PID, TID, st, 21);
	gpu__process_exited(f.g, PID);
	gpu__tick(f.g, T + 30 + TTL);
	CHECK_EQ_U(stats(&f).launches_expired, 4);
	gpu__tick(f.g, T + 20 + 2 * TTL);
	CHECK_EQ_U(stats(&f).launches_expired, 5);
	CHECK_EQ_U(stats(&f).bytes, 0);
	fx_fini(&f);
}

static void test_shared_names(void)
{
	struct bigbatch bb;
	struct batch b;
	struct fx f;
	bool enable;
	char *name = long_name(1000);
	uint64_t b0, b1;

	fx_init(&f, 0);
	gpu__tick(f.g, NOW);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	batch_init(&b);
	add_string(&b, name);
	CHECK_EQ_I(send(&f, &b), 0);
	b0 = stats(&f).bytes;
	CHECK_EQ_U(b0, sizeof(struct gpu_proc) + 4 * sizeof(struct gstr) + sizeof(struct gname) +
			   strlen(name) + 1);
	/* 1000 records of one name wait: the name is kept once, demangled once. */
	big_init(&bb, 1000);
	for (uint32_t i = 1; i <= 1000; i++)
		big_kernel(&bb, NOW - 1000, NOW - 500, i, 1, 1);
	CHECK_EQ_I(gpu__batch(f.g, PID, &bb.b, &enable), 0);
	big_free(&bb);
	b1 = stats(&f).bytes;
	CHECK_EQ_U(b1 - b0, sizeof(struct pjoins) +
				1000 * (sizeof(struct join) + 4 * sizeof(struct wait_rec)) +
				4 * sizeof(struct busy) + sizeof(struct gname) + 1000 + 1);
	gpu__tick(f.g, NOW + TTL);
	CHECK_EQ_U(stats(&f).unmatched, 1000);
	CHECK_EQ_U(stats(&f).bytes, b0 + 4 * sizeof(struct busy) + sizeof(struct gname) + 1001);
	CHECK_EQ_U(val(&f, NULL, 0, STORE_VALUE_GPU_KERNELS), 1000);
	free(name);
	fx_fini(&f);
}

static void test_budget_caps(void)
{
	struct bigbatch bb;
	struct batch b;
	struct fx f;
	bool enable;

	fx_init(&f, 0);
	gpu__tick(f.g, NOW);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	batch_init(&b);
	add_string(&b, "r");
	CHECK_EQ_I(send(&f, &b), 0);
	/* Room for 16 closed ranges and not a byte more. */
	f.g->o.max_bytes = stats(&f).bytes + 16 * sizeof(struct nvtx_range);
	for (int k = 0; k < 3; k++) {
		batch_init(&b);
		for (int i = 0; i < 8; i++) {
			uint64_t s = NOW + (uint64_t)(k * 8 + i) * 100;

			add_nvtx(&b, s, s + 50, TID, 1, 0, false);
		}
		CHECK_EQ_I(send(&f, &b), 0);
	}
	CHECK_EQ_U(gpu_proc(f.g, PID)->nnvtx, 16);
	CHECK_EQ_U(stats(&f).refused, 8);
	CHECK_EQ_U(stats(&f).bytes, f.g->o.max_bytes);
	/* A record that would wait is charged to the stand-in at once. */
	batch_init(&b);
	add_kernel(&b, NOW + 10, NOW + 20, 5, 1, 1);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).refused, 10); /* its busy interval, its wait */
	CHECK_EQ_U(stats(&f).unmatched, 1);
	CHECK_EQ_U(val(&f, "[launch stack unknown][?];r[g]", 0, STORE_VALUE_GPU_NS), 10);

	/* One process's waiting records: 16384 at most. */
	f.g->o.max_bytes = SIZE_MAX / 2;
	big_init(&bb, 16385);
	for (uint32_t i = 1; i <= 16385; i++)
		big_kernel(&bb, NOW + 10, NOW + 20, 100 + i, 1, 1);
	CHECK_EQ_I(gpu__batch(f.g, PID, &bb.b, &enable), 0);
	big_free(&bb);
	CHECK_EQ_U(stats(&f).refused, 11);
	CHECK_EQ_U(stats(&f).unmatched, 2);
	fx_fini(&f);
}

/*
 * Records without timestamps (start = end = 0, a CUPTI bug): their own count, in the module's
 * stats and the process's status, never bad records; the libraries' counts of the same add up.
 */
static void test_zero_time(void)
{
	struct gpu_proc_status st[2];
	Profd__GpuAttach a = PROFD__GPU_ATTACH__INIT;
	struct batch b;
	struct fx f;
	bool enable;

	fx_init(&f, 0);
	gpu__tick(f.g, NOW);
	a.state = PROFD__GPU_STATE__GPU_STATE_READY;
	a.library_path = "/usr/lib/libprofd_cupti.so";
	a.has_max_delay_ms = true;
	a.max_delay_ms = 5000;
	CHECK_EQ_I(gpu__attach(f.g, PID, UID, 0, &a, &enable), 0);
	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, 0, 0, 1, 1, 1);
	add_copy(&b, 0, 0, 2, PROFD__GPU_COPY_KIND__GPU_COPY_HTOD, 8);
	add_kernel(&b, NOW, NOW + 10, 3, 1, 1);
	b.b.has_zero_time_records = true;
	b.b.zero_time_records = 5;
	b.b.has_forced_flushes = true;
	b.b.forced_flushes = 2;
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).bad_records, 0);
	CHECK_EQ_U(stats(&f).records, 1);
	CHECK_EQ_U(stats(&f).zero_time_records, 7);
	CHECK_EQ_U(stats(&f).forced_flushes, 2);
	CHECK_EQ_U(gpu__status(f.g, st, 2), 1);
	CHECK_EQ_U(st[0].zero_time_records, 7);
	CHECK_EQ_U(st[0].forced_flushes, 2);
	CHECK_EQ_U(st[0].max_delay_ms, 5000);
	/* Counts as absurd as a drop count are malformed. */
	batch_init(&b);
	b.b.has_zero_time_records = true;
	b.b.zero_time_records = (1ull << 32) + 1;
	CHECK_EQ_I(gpu__batch(f.g, PID, &b.b, &enable), -EINVAL);
	CHECK_EQ_U(stats(&f).zero_time_records, 7);
	/* The library reports another client took CUPTI's activity API: a state of its own. */
	a.state = PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN;
	a.detail = "another CUPTI client in the process replaced the timestamp callback";
	CHECK_EQ_I(gpu__attach(f.g, PID, UID, 0, &a, &enable), 0);
	CHECK(!enable);
	CHECK_EQ_U(gpu__status(f.g, st, 2), 1);
	CHECK_EQ_I(st[0].state, GPU_STATE_ACTIVITY_TAKEN);
	CHECK(!st[0].enabled);
	a.state = (Profd__GpuState)(PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN + 1);
	CHECK_EQ_I(gpu__attach(f.g, PID, UID, 0, &a, &enable), -EINVAL);
	fx_fini(&f);
}

static void test_record_times(void)
{
	const uint64_t back = TTL + HOLD;
	struct batch b;
	struct fx f;
	bool enable;
	uint64_t events;

	fx_init(&f, 0);
	gpu__tick(f.g, NOW);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, NOW - back, NOW - back + 10, 1, 1, 0);
	add_kernel(&b, NOW - back - 1, NOW - back + 10, 2, 1, 0);
	add_kernel(&b, NOW + 60 * SEC - 10, NOW + 60 * SEC, 3, 1, 0);
	add_kernel(&b, NOW + 60 * SEC - 10, NOW + 60 * SEC + 1, 4, 1, 0);
	add_kernel(&b, 1ull << 62, (1ull << 62) + 10, 5, 1, 0);
	add_nvtx(&b, 1ull << 62, (1ull << 62) + 10, TID, 1, 0, false);
	add_copy(&b, NOW, NOW + 10, 6, PROFD__GPU_COPY_KIND__GPU_COPY_HTOD, (1ull << 44) + 1);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).bad_records, 5);
	CHECK_EQ_U(stats(&f).records, 2);
	CHECK_EQ_U(gpu_proc(f.g, PID)->nnvtx, 0);

	/* Malformed: the batch is refused whole, nothing of it kept. */
	events = timeline__count(f.tl);
	batch_init(&b);
	add_kernel(&b, NOW, NOW + 10, 7, 1, 65537);
	add_kernel(&b, NOW, NOW + 10, 8, 1, 1);
	CHECK_EQ_I(gpu__batch(f.g, PID, &b.b, &enable), -EINVAL);
	batch_init(&b);
	add_copy(&b, NOW, NOW + 10, 9, PROFD__GPU_COPY_KIND__GPU_COPY_HTOD, 1);
	b.c[0].has_weight = true;
	b.c[0].weight = 1u << 31;
	CHECK_EQ_I(gpu__batch(f.g, PID, &b.b, &enable), -EINVAL);
	batch_init(&b);
	b.b.has_dropped = true;
	b.b.dropped = (1ull << 32) + 1;
	CHECK_EQ_I(gpu__batch(f.g, PID, &b.b, &enable), -EINVAL);
	CHECK_EQ_U(stats(&f).records, 2);
	CHECK_EQ_U(stats(&f).dropped, 0);
	CHECK_EQ_U(timeline__count(f.tl), events);
	/* The bounds themselves are fine. */
	batch_init(&b);
	add_kernel(&b, NOW, NOW + 10, 7, 1, 65536);
	b.b.has_dropped = true;
	b.b.dropped = 1ull << 32;
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).records, 3);
	CHECK_EQ_U(stats(&f).dropped, 1ull << 32);
	fx_fini(&f);
}

static void test_out_of_order_labels(void)
{
	struct batch b;
	struct fx f;
	bool enable;
	uint32_t st;

	fx_init(&f, 0);
	gpu__tick(f.g, NOW);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", "work", NULL);
	for (uint64_t ts = 150; ts <= 550; ts += 100)
		t_cpu_sample(f.g, NOW + ts, PID, TID, st);
	batch_init(&b);
	add_string(&b, "k");
	add_string(&b, "late");
	add_string(&b, "early");
	add_string(&b, "inner");
	/* Newest first; two of them overlap. */
	add_kernel(&b, NOW + 500, NOW + 600, 1, 1, 0);
	add_kernel(&b, NOW + 300, NOW + 400, 2, 1, 0);
	add_kernel(&b, NOW + 100, NOW + 200, 3, 1, 0);
	add_kernel(&b, NOW + 180, NOW + 260, 4, 1, 0);
	add_nvtx(&b, NOW + 400, NOW + 600, TID, 2, 0, false);
	add_nvtx(&b, NOW + 1, NOW + 300, TID, 3, 0, false);
	add_nvtx(&b, NOW + 200, NOW + 280, TID, 4, 1, false);
	complete_until(&b, NOW + 1000);
	CHECK_EQ_I(send(&f, &b), 0);
	dump_rows(&f);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(val(&f, "early[n];main;work", TID, STORE_VALUE_CPU_SAMPLES), 1);
	CHECK_EQ_U(val(&f, "early[n];inner[n];main;work", TID, STORE_VALUE_CPU_SAMPLES), 1);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_CPU_SAMPLES), 1);
	CHECK_EQ_U(val(&f, "late[n];main;work", TID, STORE_VALUE_CPU_SAMPLES), 2);
	/* Only 450 fell between kernels. */
	CHECK_EQ_U(val(&f, "late[n];main;work", TID, STORE_VALUE_GPU_IDLE_SAMPLES), 1);
	CHECK_EQ_U(val(&f, NULL, 0, STORE_VALUE_GPU_IDLE_SAMPLES), 1);
	fx_fini(&f);
}

static double secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds to send n kernels (weight 0) in batches of 16, in ascending or descending order. */
static double time_busy(size_t n, bool descending)
{
	struct batch b;
	struct fx f;
	bool enable;
	double t;

	fx_init(&f, 1 << 20);
	gpu__tick(f.g, NOW);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	batch_init(&b);
	add_string(&b, "k");
	CHECK_EQ_I(send(&f, &b), 0);
	t = secs();
	for (size_t i = 0; i < n; i += 16) {
		batch_init(&b);
		for (size_t j = i; j < i + 16 && j < n; j++) {
			uint64_t k = descending ? n - j : j;

			add_kernel(&b, NOW + 10 * k, NOW + 10 * k + 5, 1, 1, 0);
		}
		gpu__batch(f.g, PID, &b.b, &enable);
	}
	t = secs() - t;
	fx_fini(&f);
	return t;
}

/* Seconds to charge n kernels of one thread that has nranges NVTX ranges. */
static double time_nvtx(size_t n, size_t nranges)
{
	struct bigbatch bb;
	struct batch b;
	struct fx f;
	bool enable;
	uint32_t st;
	double t;

	fx_init(&f, 1 << 20);
	gpu__tick(f.g, NOW);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", NULL, NULL);
	batch_init(&b);
	add_string(&b, "k");
	add_string(&b, "r");
	CHECK_EQ_I(send(&f, &b), 0);
	for (size_t i = 0; i < nranges; i += 8) {
		batch_init(&b);
		for (size_t j = i; j < i + 8 && j < nranges; j++)
			add_nvtx(&b, NOW + 100 * j, NOW + 100 * j + 50, TID, 2, 0, false);
		CHECK_EQ_I(send(&f, &b), 0);
	}
	big_init(&bb, n);
	for (size_t i = 0; i < n; i++) {
		t_launch(f.g, NOW + 100 * i + 10, PID, TID, st, (uint32_t)i + 1);
		big_kernel(&bb, NOW + 100 * i + 20, NOW + 100 * i + 30, (uint32_t)i + 1, 1, 1);
	}
	t = secs();
	CHECK_EQ_I(gpu__batch(f.g, PID, &bb.b, &enable), 0);
	t = secs() - t;
	big_free(&bb);
	CHECK_EQ_U(stats(&f).joined, n);
	if (nranges)
		CHECK_EQ_U(val(&f, "r[n];main;k[g]", TID, STORE_VALUE_GPU_NS),
			   10 * (n < nranges ? n : nranges));
	fx_fini(&f);
	return t;
}

/*
 * No message costs work in proportion to what is kept: kernels in descending order cost what
 * ascending ones do, and 16384 NVTX ranges on the thread do not slow charging down much
 * (linear scans made both 10 to 100 times slower). Ratios of the same run, best of three.
 */
static void test_many_labels_fast(void)
{
	double asc = 1e9, desc = 1e9, none = 1e9, many = 1e9;

	for (int i = 0; i < 3; i++) {
		double a = time_busy(65536, false), d = time_busy(65536, true);
		double n0 = time_nvtx(16384, 0), n1 = time_nvtx(16384, 16384);

		asc = a < asc ? a : asc;
		desc = d < desc ? d : desc;
		none = n0 < none ? n0 : none;
		many = n1 < many ? n1 : many;
	}
	if (getenv("TEST_VERBOSE"))
		fprintf(stderr, "busy asc %.3f desc %.3f, nvtx none %.3f many %.3f\n", asc, desc,
			none, many);
	CHECK(desc < 3 * asc);
	CHECK(many < 3 * none);
}

static void test_idle_running_kernel(void)
{
	struct batch b;
	struct fx f;
	bool enable;
	uint32_t st, lst;

	fx_init(&f, 0);
	gpu__tick(f.g, NOW);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", "work", NULL);
	lst = stack_of(&f, "main", "launch", NULL);
	/* A kernel launched before the sample has no record yet: it may be running. */
	t_launch(f.g, NOW + 100, PID, TID, lst, 1);
	t_cpu_sample(f.g, NOW + 200, PID, TID, st);
	batch_init(&b);
	add_string(&b, "k");
	complete_until(&b, NOW + 300);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).held, 1);
	/* Its record: it ran during the sample. */
	batch_init(&b);
	add_kernel(&b, NOW + 150, NOW + 400, 1, 1, 1);
	complete_until(&b, NOW + 500);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_CPU_SAMPLES), 1);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_GPU_IDLE_SAMPLES), 0);
	/* A launch whose record never comes holds samples for hold_ns only. */
	t_launch(f.g, NOW + 1000, PID, TID, lst, 2);
	t_cpu_sample(f.g, NOW + 1100, PID, TID, st);
	t_cpu_sample(f.g, NOW + 900, PID, TID, st); /* before it: released */
	batch_init(&b);
	complete_until(&b, NOW + 2000);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).held, 1);
	gpu__tick(f.g, NOW + 1100 + HOLD - 1);
	CHECK_EQ_U(stats(&f).held, 1);
	gpu__tick(f.g, NOW + 1100 + HOLD);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_CPU_SAMPLES), 3);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_GPU_IDLE_SAMPLES), 2);
	fx_fini(&f);
}

static void test_nvtx_kept_for_joins(void)
{
	const uint64_t ttl = 20 * HOLD;
	struct batch b;
	struct fx f;
	bool enable;
	uint32_t lst;

	fx_init_ttl(&f, 0, ttl);
	gpu__tick(f.g, NOW);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	lst = stack_of(&f, "main", "launch", NULL);
	batch_init(&b);
	add_string(&b, "fwd");
	add_string(&b, "k");
	add_nvtx(&b, NOW + 10, NOW + 100, TID, 1, 0, false);
	CHECK_EQ_I(send(&f, &b), 0);
	t_launch(f.g, NOW + 50, PID, TID, lst, 3);
	/* Past twice the hold, within the TTL: the launch's range is still there. */
	gpu__tick(f.g, NOW + 100 + 2 * HOLD + 1);
	CHECK_EQ_U(gpu_proc(f.g, PID)->nnvtx, 1);
	batch_init(&b);
	add_kernel(&b, NOW + 60, NOW + 70, 3, 2, 1);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(val(&f, "fwd[n];main;launch;k[g]", TID, STORE_VALUE_GPU_NS), 10);
	/* Once the launch went and the TTL passed, the range goes. */
	gpu__tick(f.g, NOW + 100 + ttl + 1);
	CHECK_EQ_U(gpu_proc(f.g, PID)->nnvtx, 0);
	fx_fini(&f);
}

static int info_lines;

static void count_info(enum log_level level, const char *msg, void *ctx)
{
	if (level <= LOG_LVL_INFO && strstr(msg, "gpu: pid 100:"))
		info_lines++;
}

static void test_attach_rules(void)
{
	struct store_query q = {.end_ns = UINT64_MAX, .filter_uid = true, .uid = UID};
	Profd__Trace *t = NULL;
	struct batch b;
	struct fx f;
	bool enable;
	uint32_t st;
	enum log_level lvl = log_get_level();

	fx_init(&f, 0);
	gpu__tick(f.g, NOW);
	cover_all = false;
	/* Not covered: no probe, nothing held. */
	CHECK_EQ_I(attach(&f, OTHER_PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable), 0);
	CHECK(!enable);
	CHECK_EQ_I(probe_attached, 0);
	st = stack_of(&f, "main", NULL, NULL);
	t_cpu_sample(f.g, NOW + 1, OTHER_PID, 201, st);
	CHECK_EQ_U(stats(&f).held, 0);

	/* The probe goes on once, whatever the library says after. */
	CHECK_EQ_I(attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable), 0);
	CHECK(enable);
	CHECK_EQ_I(attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_ERROR, &enable), 0);
	CHECK(!enable);
	CHECK_EQ_I(attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable), 0);
	CHECK(enable);
	CHECK_EQ_I(probe_attached, 1);
	CHECK_EQ_I(probe_detached, 0);
	/* Saying it again is not news: debug lines only. */
	log_set_sink(count_info, NULL);
	log_set_level(LOG_LVL_INFO);
	info_lines = 0;
	for (int i = 0; i < 3; i++)
		attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	CHECK_EQ_I(info_lines, 0);
	log_set_sink(log_sink_stderr, NULL);
	log_set_level(lvl);

	/* The owner never changes: another uid's attach is refused, events stay UID's. */
	{
		Profd__GpuAttach a = PROFD__GPU_ATTACH__INIT;

		a.state = PROFD__GPU_STATE__GPU_STATE_READY;
		a.library_path = LIB;
		CHECK_EQ_I(gpu__attach(f.g, PID, UID + 1, 0, &a, &enable), -EPERM);
		CHECK(!enable);
		/* A process its connection does not own: recorded, never enabled or probed. */
		cover_all = true;
		CHECK_EQ_I(gpu__attach(f.g, 300, UID + 1, GPU_ATTACH_UID_MISMATCH, &a, &enable), 0);
		CHECK(!enable);
		CHECK_EQ_I(probe_attached, 1);
		batch_init(&b);
		CHECK_EQ_I(gpu__batch(f.g, 300, &b.b, &enable), -EPERM);
		t_cpu_sample(f.g, NOW + 1, 300, 301, st);
		CHECK_EQ_U(stats(&f).held, 0);
	}
	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, NOW + 10, NOW + 20, 1, 1, 0);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_I(t_trace(f.g, &q, NULL, &t), 0);
	if (t) {
		CHECK_EQ_U(t->n_kernels, 1);
		dump__trace_free(t);
	}
	fx_fini(&f);
}

static void test_lower(void)
{
	struct store_query q = {.end_ns = UINT64_MAX, .filter_uid = true, .uid = UID};
	Profd__Trace *t = NULL;
	struct batch b;
	struct fx f;
	bool enable;
	uint32_t st;

	fx_init(&f, 0);
	gpu__tick(f.g, NOW);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	store__set_process(f.s, OTHER_PID, UID + 1, "other");
	st = stack_of(&f, "main", "work", NULL);
	t_cpu_sample(f.g, NOW - 50, OTHER_PID, 201, st); /* another user's, older */
	batch_init(&b);
	add_string(&b, "r");
	add_nvtx(&b, NOW + 100, NOW + 500, TID, 1, 0, true);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(gpu_proc(f.g, PID)->nopen, 1);
	/* It closed at once after all: the mark replaces the open version. */
	batch_init(&b);
	add_nvtx(&b, NOW + 100, NOW + 100, TID, 1, 0, false);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(gpu_proc(f.g, PID)->nopen, 0);
	t_cpu_sample(f.g, NOW + 300, PID, TID, st);
	batch_init(&b);
	complete_until(&b, NOW + 600);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_CPU_SAMPLES), 1);
	/* The trace's start is the caller's oldest event, not another user's. */
	CHECK_EQ_I(t_trace(f.g, &q, NULL, &t), 0);
	if (t) {
		CHECK_EQ_U(t->start_ns, NOW + 100);
		CHECK_EQ_U(t->oldest_ns, NOW + 100);
		dump__trace_free(t);
	}
	fx_fini(&f);
}

/* --- GPU memory ---------------------------------------------------------------------------- */

/* What gpu__live_each reports at a time: bytes per stack (root first, as val names them). */
struct live {
	struct store *s;
	char stack[8][256];
	uint64_t bytes[8];
	uint32_t tid[8];
	size_t n;
};

static int live_cb(uint32_t pid, uint32_t uid, uint32_t tid, uint32_t stack, uint64_t bytes,
		   void *ctx)
{
	struct live *l = ctx;
	char s[256];

	CHECK_EQ_U(pid, PID);
	CHECK_EQ_U(uid, UID);
	stack_str(l->s, stack, s, sizeof(s));
	for (size_t i = 0; i < l->n; i++) {
		if (!strcmp(l->stack[i], s)) {
			l->bytes[i] += bytes;
			return 0;
		}
	}
	if (l->n == 8)
		return -ENOSPC;
	snprintf(l->stack[l->n], sizeof(l->stack[0]), "%s", s);
	l->tid[l->n] = tid;
	l->bytes[l->n++] = bytes;
	return 0;
}

/* The bytes live at `at` under stack (NULL: all of them). */
static uint64_t live_at(struct fx *f, uint64_t at, const char *stack)
{
	struct live l = {.s = f->s};
	uint64_t v = 0;

	CHECK_EQ_I(gpu__live_each(f->g, at, live_cb, &l), 0);
	for (size_t i = 0; i < l.n; i++)
		if (!stack || !strcmp(l.stack[i], stack))
			v += l.bytes[i];
	return v;
}

static struct gpu_proc_status mem_status(struct fx *f)
{
	struct gpu_proc_status st[2] = {0};

	CHECK_EQ_U(gpu__status(f->g, st, 2), 1);
	return st[0];
}

#define W "main;alloc_weights;[gpu memory][g]"
#define WM "main;alloc_weights;[gpu memory managed][g]"
#define BP "main;alloc_buffers;[gpu memory pool][g]"
#define MIB (1ull << 20)

/*
 * Allocations joined to the stacks that made them, in both orders; bytes allocated by stack;
 * what is live at a time, before and after releases, across a compaction and after the exit;
 * releases that match nothing change nothing.
 */
static void test_memory(void)
{
	struct fx f;
	struct batch b;
	struct gpu_proc_status ps;
	Profd__GpuMemory *m;
	uint32_t sa, sb;
	bool enable;

	fx_init_ttl(&f, 0, 1000000000ull);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	sa = stack_of(&f, "main", "alloc_weights", NULL);
	sb = stack_of(&f, "main", "alloc_buffers", NULL);
	t_launch(f.g, 1000, PID, TID, sa, 10);
	t_launch(f.g, 1100, PID, TID2, sb, 11);
	t_launch(f.g, 1200, PID, TID, sa, 12);
	batch_init(&b);
	add_memory(&b, 1500, 10, false, 0xa0000, MIB, 0);
	m = add_memory(&b, 1600, 11, false, 0xb0000, 4096, 0);
	m->has_pool = m->pool = true;
	m = add_memory(&b, 1700, 12, false, 0xc0000, 8192, 0);
	m->has_managed = m->managed = true;
	/* Made before the library collected: nothing to end, nothing goes below zero. */
	add_memory(&b, 1800, 20, true, 0xd0000, 65536, 0);
	/* The address of a live allocation, on another device: not its release. */
	add_memory(&b, 1850, 21, true, 0xa0000, MIB, 1);
	add_memory(&b, 2000, 22, true, 0xc0000, 8192, 0);
	/* Malformed: no address; an allocation of nothing. */
	add_memory(&b, 2010, 23, false, 0, 64, 0);
	add_memory(&b, 2020, 24, false, 0xe0000, 0, 0);
	/* Its launch stack comes later. */
	add_memory(&b, 2100, 13, false, 0xf0000, 2 * MIB, 0);
	CHECK_EQ_I(send(&f, &b), 0);

	CHECK_EQ_U(val(&f, W, TID, STORE_VALUE_GPU_MEM_BYTES), MIB);
	CHECK_EQ_U(val(&f, WM, TID, STORE_VALUE_GPU_MEM_BYTES), 8192);
	CHECK_EQ_U(val(&f, BP, TID2, STORE_VALUE_GPU_MEM_BYTES), 4096);
	CHECK_EQ_U(val(&f, NULL, 0, STORE_VALUE_GPU_MEM_BYTES), MIB + 8192 + 4096);
	/* The live column is the dump's to fill, never the store's. */
	CHECK_EQ_U(val(&f, NULL, 0, STORE_VALUE_GPU_MEM_LIVE), 0);
	CHECK_EQ_U(stats(&f).mem_records, 7);
	CHECK_EQ_U(stats(&f).mem_unmatched, 2);
	CHECK_EQ_U(stats(&f).bad_records, 2);

	/* Live at a time: allocated before it, not released before it. */
	CHECK_EQ_U(live_at(&f, 1500, NULL), 0);
	CHECK_EQ_U(live_at(&f, 1501, NULL), MIB);
	CHECK_EQ_U(live_at(&f, 1900, WM), 8192);
	CHECK_EQ_U(live_at(&f, 1900, NULL), MIB + 4096 + 8192);
	CHECK_EQ_U(live_at(&f, 2000, WM), 8192); /* released at 2000, not before it */
	CHECK_EQ_U(live_at(&f, 2001, WM), 0);
	/* Not joined yet: left out until its stack is known. */
	CHECK_EQ_U(live_at(&f, UINT64_MAX, NULL), MIB + 4096);
	ps = mem_status(&f);
	CHECK_EQ_U(ps.memory_live, 3);
	CHECK_EQ_U(ps.memory_live_bytes, MIB + 4096 + 2 * MIB);
	CHECK_EQ_U(ps.memory_untracked, 0);

	t_launch(f.g, 2050, PID, TID, sb, 13);
	CHECK_EQ_U(live_at(&f, UINT64_MAX, "main;alloc_buffers;[gpu memory][g]"), 2 * MIB);
	CHECK_EQ_U(val(&f, "main;alloc_buffers;[gpu memory][g]", TID, STORE_VALUE_GPU_MEM_BYTES),
		   2 * MIB);

	/* The allocations keep their stacks through a compaction. */
	compact(&f);
	CHECK_EQ_U(live_at(&f, UINT64_MAX, W), MIB);
	CHECK_EQ_U(live_at(&f, UINT64_MAX, BP), 4096);
	CHECK_EQ_U(live_at(&f, 1900, WM), 8192);

	/* A release of the same address again matches nothing: released once. */
	batch_init(&b);
	add_memory(&b, 3000, 25, true, 0xa0000, MIB, 0);
	add_memory(&b, 3100, 26, true, 0xa0000, MIB, 0);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).mem_unmatched, 3);
	CHECK_EQ_U(live_at(&f, UINT64_MAX, W), 0);
	CHECK_EQ_U(live_at(&f, 2999, W), MIB);

	/* The process ends: nothing is live after it, what was live before still shows. */
	gpu__clock(f.g, 5000);
	gpu__process_exited(f.g, PID);
	CHECK_EQ_U(live_at(&f, UINT64_MAX, NULL), 0);
	CHECK_EQ_U(live_at(&f, 4999, NULL), 4096 + 2 * MIB);
	/* A new process of the same pid: the old one's history is not shown as its own. */
	CHECK_EQ_I(gpu_mem_alloc(f.g, PID, UID, 0, 0x1000, 64, 6000), 0);
	CHECK_EQ_U(live_at(&f, 4999, NULL), 0);
	fx_fini(&f);
}

/* Live allocations per process are bounded: what is over it is counted, not tracked. */
static void test_memory_bound(void)
{
	struct fx f;
	bool enable;

	fx_init(&f, 0);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	for (uint64_t i = 0; i < 65536 + 10; i++)
		CHECK_EQ_I(gpu_mem_alloc(f.g, PID, UID, 0, 0x100000 + i * 256, 256, 1000 + i), 0);
	CHECK_EQ_U(mem_status(&f).memory_live, 65536);
	CHECK_EQ_U(mem_status(&f).memory_live_bytes, 65536ull * 256);
	CHECK_EQ_U(mem_status(&f).memory_untracked, 10);
	/* A release of an untracked one matches nothing; of a tracked one, frees a place. */
	gpu_mem_release(f.g, PID, 0, 0x100000 + 65536ull * 256, 200000);
	CHECK_EQ_U(stats(&f).mem_unmatched, 1);
	gpu_mem_release(f.g, PID, 0, 0x100000, 200000);
	CHECK_EQ_U(mem_status(&f).memory_live, 65535);
	CHECK_EQ_I(gpu_mem_alloc(f.g, PID, UID, 0, 0x100000, 512, 200001), 0);
	CHECK_EQ_U(mem_status(&f).memory_live, 65536);
	CHECK_EQ_U(mem_status(&f).memory_untracked, 10);
	fx_fini(&f);
}

int main(void)
{
	log_set_level(getenv("TEST_VERBOSE") ? LOG_LVL_DEBUG : LOG_LVL_ERROR);
	test_attach();
	test_join_orders();
	test_graph_ttl_weights();
	test_copies_uprobe();
	test_held_idle();
	test_held_wait_idle();
	test_nvtx();
	test_trace();
	test_gc();
	test_ring_bad();
	test_exit();
	test_reused();
	test_demangle_bounds();
	test_kernel_leaf();
	test_join_deadlines();
	test_shared_names();
	test_budget_caps();
	test_record_times();
	test_zero_time();
	test_out_of_order_labels();
	test_many_labels_fast();
	test_idle_running_kernel();
	test_nvtx_kept_for_joins();
	test_attach_rules();
	test_lower();
	test_memory();
	test_memory_bound();
	return CHECK_DONE();
}
