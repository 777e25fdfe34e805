// SPDX-License-Identifier: BSD-2-Clause
/*
 * The GPU correlation module with a real store: the launch/record join in both orders, graph
 * launches, TTL expiry, weights, the stand-in stack, copies, held CPU samples with their NVTX
 * and GPU-idle labels, traces, the GC holder across compaction, the ring's bound and record
 * validation. Every expected value is exact.
 */
#include "check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "log.h"
#include "store.h"

#define PID 100
#define TID 101
#define TID2 102
#define UID 1000
#define OTHER_PID 200
#define TTL 1000000ull	/* 1 ms */
#define HOLD 500000ull	/* 0.5 ms */
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
};

static void fx_init(struct fx *f, size_t ring_bytes)
{
	struct gpu_opts o = {
		.join_ttl_ns = TTL,
		.hold_ns = HOLD,
		.ring_bytes = ring_bytes,
		.attach_probe = fake_attach,
		.detach_probe = fake_detach,
		.covers = fake_covers,
	};

	probe_attached = probe_detached = probe_result = 0;
	cover_all = true;
	f->s = store__new(&(struct store_opts){ 0 });
	o.store = f->s;
	f->g = gpu__new(&o);
	CHECK(f->s && f->g);
	store__set_process(f->s, PID, UID, "trainer");
	store__set_thread(f->s, PID, TID, "main");
	store__set_thread(f->s, PID, TID2, "loader");
}

static void fx_fini(struct fx *f)
{
	gpu__free(f->g);
	store__free(f->s);
}

static uint32_t frame(struct fx *f, enum frame_kind kind, const char *name)
{
	struct frame_key k = { .kind = kind, .name = name };

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
	return gpu__attach(f->g, pid, UID, &a, enable);
}

/* A batch under construction. */
struct batch {
	Profd__GpuBatch b;
	char *strs[16];
	Profd__GpuKernel k[16], *kp[16];
	Profd__GpuCopy c[8], *cp[8];
	Profd__GpuApiCall a[8], *ap[8];
	Profd__GpuNvtxRange n[8], *np[8];
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
}

static void add_string(struct batch *b, const char *s)
{
	b->strs[b->b.n_strings++] = (char *)s;
}

static void add_kernel(struct batch *b, uint64_t start, uint64_t end, uint32_t corr,
		       uint32_t name, uint32_t weight)
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
		const char *tag = sf->kind == FRAME_KIND_GPU ? "[g]" :
				  sf->kind == FRAME_KIND_NVTX ? "[n]" :
				  sf->kind == FRAME_KIND_UNKNOWN ? "[?]" : "";

		off += (size_t)snprintf(buf + off, len - off, "%s%s%s", off ? ";" : "", sf->name,
					tag);
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
	struct store_query q = { .end_ns = UINT64_MAX };

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
		fprintf(stderr, "  %u/%u %s: cpu %llu idle %llu gpu %llu k %llu cns %llu cb %llu up %llu\n",
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
	Profd__GpuProcessStatus *st[4];
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
	CHECK_EQ_I(gpu__attach(f.g, PID, UID, &a, &enable), -EINVAL);
	a.library_path = NULL; /* READY needs the path for the probe */
	CHECK_EQ_I(gpu__attach(f.g, PID, UID, &a, &enable), -EINVAL);
	a.state = 99;
	a.library_path = LIB;
	CHECK_EQ_I(gpu__attach(f.g, PID, UID, &a, &enable), -EINVAL);
	CHECK_EQ_I(probe_attached, 0);
	CHECK_EQ_U(stats(&f).processes, 0);

	/* A library that could not subscribe: known, not collecting, no probe. */
	a.state = PROFD__GPU_STATE__GPU_STATE_SUBSCRIBER_TAKEN;
	a.library_path = NULL;
	a.detail = "cuptiSubscribe: taken by\n\"kineto\"";
	CHECK_EQ_I(gpu__attach(f.g, OTHER_PID, UID, &a, &enable), 0);
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
		if (st[i]->pid == PID) {
			CHECK_EQ_I(st[i]->state, PROFD__GPU_STATE__GPU_STATE_READY);
			CHECK(st[i]->enabled);
			CHECK_EQ_U(st[i]->cupti_version, 130001);
			CHECK_EQ_I(st[i]->clock, PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK);
		} else {
			CHECK_EQ_U(st[i]->pid, OTHER_PID);
			CHECK_EQ_I(st[i]->state, PROFD__GPU_STATE__GPU_STATE_SUBSCRIBER_TAKEN);
			CHECK(!st[i]->enabled);
			/* One line: the newline is gone. */
			CHECK_STREQ(st[i]->detail, "cuptiSubscribe: taken by \"kineto\"");
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
	CHECK_EQ_I(gpu__launch(f.g, 1000, PID, TID, st1, 7), 0);
	batch_init(&b);
	add_string(&b, "_Z4gemmPfi");	   /* 1 */
	add_string(&b, "not_mangled_kernel"); /* 2 */
	add_string(&b, "_Zbroken");	   /* 3: fails to demangle, stays as is */
	add_kernel(&b, 2000, 3000, 7, 1, 1);
	/* Record first: its launch comes after the batch. */
	add_kernel(&b, 4000, 4500, 8, 2, 1);
	add_kernel(&b, 5000, 5100, 9, 3, 1);
	CHECK_EQ_I(send(&f, &b), 0);
	CHECK_EQ_U(stats(&f).joined, 1);
	CHECK_EQ_I(gpu__launch(f.g, 3500, PID, TID2, st2, 8), 0);
	CHECK_EQ_I(gpu__launch(f.g, 4900, PID, TID2, st2, 9), 0);
	dump_rows(&f);

	CHECK_EQ_U(val(&f, "main;train;launch_a;gemm(float*, int)[g]", TID, STORE_VALUE_GPU_NS),
		   1000);
	CHECK_EQ_U(val(&f, "main;train;launch_a;gemm(float*, int)[g]", TID,
		       STORE_VALUE_GPU_KERNELS), 1);
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
	gpu__launch(f.g, 1000, PID, TID, st, 50);
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
	gpu__launch(f.g, 10000, PID, TID, st, 51);
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
	gpu__launch(f.g, 30000, PID, TID2, st, 60);
	gpu__launch(f.g, 30001, PID, TID2, st, 62);
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
	gpu__launch(f.g, 1000, PID, TID, st, 5);
	gpu__launch(f.g, 1000, PID, TID, st, 6);
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
	CHECK_EQ_I(gpu__uprobe_launch(f.g, 5000, OTHER_PID, 201, st), 0);
	CHECK_EQ_I(gpu__uprobe_launch(f.g, 5001, OTHER_PID, 201, st), 0);
	CHECK_EQ_U(val(&f, "main;to_device", 201, STORE_VALUE_UPROBE_LAUNCHES), 2);
	CHECK_EQ_U(stats(&f).uprobe_launches, 2);
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
	CHECK_EQ_I(gpu__cpu_sample(f.g, 1000, OTHER_PID, 201, other), 0);
	CHECK_EQ_U(val(&f, "other_main", 201, STORE_VALUE_CPU_SAMPLES), 1);

	/* Held until the library says everything before them has arrived. */
	gpu__cpu_sample(f.g, 5000, PID, TID, st);   /* before the kernels: idle */
	gpu__cpu_sample(f.g, 15000, PID, TID, st);  /* inside [10000, 20000) */
	gpu__cpu_sample(f.g, 20000, PID, TID, st);  /* at the end of the union: idle */
	gpu__cpu_sample(f.g, 21500, PID, TID, st);  /* inside [21000, 22000) */
	gpu__cpu_sample(f.g, 40000, PID, TID, st);  /* after complete_until: held on */
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
	gpu__cpu_sample(f.g, 900000, PID, TID, st);
	CHECK_EQ_U(stats(&f).held, 1);
	gpu__detach(f.g, PID);
	CHECK_EQ_U(stats(&f).held, 0);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_CPU_SAMPLES), 6);
	/* Not attached any more: at once, no idle value. */
	gpu__cpu_sample(f.g, 900001, PID, TID, st);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_CPU_SAMPLES), 7);
	CHECK_EQ_U(val(&f, "main;work", TID, STORE_VALUE_GPU_IDLE_SAMPLES), 4);
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

	gpu__cpu_sample(f.g, 3000, PID, TID, st);   /* epoch, step */
	gpu__cpu_sample(f.g, 3000, PID, TID2, st);  /* another thread: none */
	gpu__cpu_sample(f.g, 60000, PID, TID, st);  /* epoch only */
	gpu__cpu_sample(f.g, 65000, PID, TID, st);  /* epoch, load (open) */
	gpu__cpu_sample(f.g, 75000, PID, TID, st);  /* epoch, load (closed later) */
	gpu__launch(f.g, 4000, PID, TID, lst, 9);

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
	CHECK_EQ_U(val(&f, "epoch[n];step[n];main;launch;kern[g]", TID, STORE_VALUE_GPU_NS),
		   1000);
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
	struct store_query q = { .end_ns = UINT64_MAX };
	struct gpu_trace_meta meta = { .frequency_hz = 99, .realtime_offset_ns = 5 };
	Profd__Trace *t = NULL;
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t st, lst;

	fx_init(&f, 0);
	CHECK_EQ_I(gpu__trace(f.g, &q, &meta, &t), -ENODATA);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	st = stack_of(&f, "main", "work", NULL);
	lst = stack_of(&f, "main", "launch", NULL);

	/* Out of order on purpose: the trace sorts each list by time. */
	gpu__cpu_sample(f.g, 9000, PID, TID, st);
	gpu__cpu_sample(f.g, 3000, PID, TID, st);
	gpu__launch(f.g, 2500, PID, TID, lst, 11);
	gpu__launch(f.g, 2000, PID, TID, lst, 10);
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

	CHECK_EQ_I(gpu__trace(f.g, &q, &meta, &t), 0);
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
	gpu__trace_free(t);

	/* A window: only what overlaps [3000, 4000). */
	q.start_ns = 3000;
	q.end_ns = 4000;
	CHECK_EQ_I(gpu__trace(f.g, &q, &meta, &t), 0);
	if (t) {
		CHECK_EQ_U(t->n_samples, 1);
		CHECK_EQ_U(t->n_launches, 0);
		CHECK_EQ_U(t->n_kernels, 1);
		CHECK_EQ_U(t->n_nvtx, 1);
		CHECK_EQ_U(t->n_copies, 0);
		CHECK_EQ_U(t->start_ns, 3000);
		CHECK_EQ_U(t->end_ns, 4000);
		gpu__trace_free(t);
	}
	/* Another uid sees nothing; another pid neither. */
	q = (struct store_query){ .end_ns = UINT64_MAX, .filter_uid = true, .uid = UID + 1 };
	CHECK_EQ_I(gpu__trace(f.g, &q, &meta, &t), -ENODATA);
	q = (struct store_query){ .end_ns = UINT64_MAX, .pids = (uint32_t[]){ OTHER_PID },
				  .npids = 1 };
	CHECK_EQ_I(gpu__trace(f.g, &q, &meta, &t), -ENODATA);
	q = (struct store_query){ .end_ns = UINT64_MAX, .filter_uid = true, .uid = UID };
	CHECK_EQ_I(gpu__trace(f.g, &q, &meta, &t), 0);
	if (t) {
		CHECK_EQ_U(t->only_uid, UID);
		CHECK_EQ_U(t->n_kernels, 2);
		gpu__trace_free(t);
	}
	fx_fini(&f);
}

static void test_gc(void)
{
	struct fx f;
	struct batch b;
	bool enable;
	uint32_t dead, st, held_st, before_gen;
	struct store_stats ss;

	fx_init(&f, 0);
	attach(&f, PID, PROFD__GPU_STATE__GPU_STATE_READY, &enable);
	/* Interned first and referenced by nothing: compaction drops it and renumbers the rest. */
	dead = stack_of(&f, "dead_root", "dead", NULL);
	st = stack_of(&f, "main", "pending_launch", NULL);
	held_st = stack_of(&f, "main", "held_sample", NULL);
	CHECK(dead < st && st < held_st);
	gpu__launch(f.g, 1000, PID, TID, st, 3);
	gpu__cpu_sample(f.g, 2000, PID, TID, held_st);
	store__stats(f.s, &ss);
	before_gen = (uint32_t)ss.generation;
	CHECK_EQ_I(store__compact(f.s), 0);
	store__stats(f.s, &ss);
	CHECK(ss.generation != before_gen);
	CHECK_EQ_U(ss.stacks, 2);

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
	struct store_query q = { .end_ns = UINT64_MAX };
	Profd__Trace *t = NULL;
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
		CHECK_EQ_I(gpu__cpu_sample(f.g, i * 10, OTHER_PID, 201, st), 0);
	gs = stats(&f);
	CHECK(gs.ring_overwritten > 0);
	CHECK(gs.ring_events * 32 <= 64 << 10); /* an event takes at least 32 bytes */
	CHECK_EQ_U(gs.ring_events + gs.ring_overwritten, n);
	CHECK_EQ_I(gpu__trace(f.g, &q, NULL, &t), 0);
	if (t) {
		CHECK_EQ_U(t->n_samples, gs.ring_events);
		/* The oldest went first. */
		CHECK_EQ_U(t->samples[0]->ts_ns, (gs.ring_overwritten + 1) * 10);
		CHECK_EQ_U(t->samples[t->n_samples - 1]->ts_ns, n * 10);
		CHECK_EQ_U(t->events_overwritten, gs.ring_overwritten);
		gpu__trace_free(t);
	}
	/* The store got every sample: the ring's bound is the ring's alone. */
	CHECK_EQ_U(val(&f, "main", 201, STORE_VALUE_CPU_SAMPLES), n);

	/* Bad records: counted, skipped, charged nowhere. */
	gpu__launch(f.g, 100, PID, TID, st, 1);
	batch_init(&b);
	add_string(&b, "k");
	add_kernel(&b, 2000, 1000, 1, 1, 1);		    /* ends before it starts */
	add_kernel(&b, 1000, 2000, 1, 9, 1);		    /* no string 9 */
	add_kernel(&b, 0, 2000, 1, 1, 1);		    /* no start */
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
	gpu__launch(f.g, 1000, PID, TID, st, 1);
	gpu__cpu_sample(f.g, 1500, PID, TID, st);
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

int main(void)
{
	log_set_level(getenv("TEST_VERBOSE") ? LOG_LVL_DEBUG : LOG_LVL_ERROR);
	test_attach();
	test_join_orders();
	test_graph_ttl_weights();
	test_copies_uprobe();
	test_held_idle();
	test_nvtx();
	test_trace();
	test_gc();
	test_ring_bad();
	test_exit();
	return CHECK_DONE();
}
