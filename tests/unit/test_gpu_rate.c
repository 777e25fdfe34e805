// SPDX-License-Identifier: BSD-2-Clause
/*
 * What an uplink may cost (daemon/gpu/gpu_rate.c): records and bytes a second per uplink and
 * per user, refused batches counted and the strings still numbered, and each user's records
 * waiting for their launch bounded across its processes.
 */
#include "check.h"
#include "gpu.h"
#include "gpu_priv.h"
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC 1000000000ull
#define NOW (100 * SEC)
#define ALICE 1001
#define BOB 1002
#define LIB "/opt/profd/lib/libprofd_cupti.so"

static bool covers(void *ctx, uint32_t pid)
{
	(void)ctx;
	(void)pid;
	return true;
}

struct fx {
	struct store *s;
	struct gpu *g;
};

static void fx_init(struct fx *f, uint32_t rate)
{
	f->s = store__new(&(struct store_opts){0});
	f->g = gpu__new(&(struct gpu_opts){.store = f->s, .covers = covers, .uplink_rate = rate});
	CHECK(f->s && f->g);
	gpu__clock(f->g, NOW);
}

static void fx_fini(struct fx *f)
{
	gpu__free(f->g);
	store__free(f->s);
}

static void attach(struct fx *f, uint32_t pid, uint32_t uid)
{
	Profd__GpuAttach a = PROFD__GPU_ATTACH__INIT;
	bool enable;

	a.state = PROFD__GPU_STATE__GPU_STATE_READY;
	a.library_path = LIB;
	CHECK_EQ_I(gpu__attach(f->g, pid, uid, 0, &a, &enable), 0);
}

/* A batch of n kernels named by string 1 (sent with it when name is set), correlation ids
 * from corr0 on (0: none), ending at now. */
struct batch {
	Profd__GpuBatch b;
	char *strs[1];
	Profd__GpuKernel *k;
	Profd__GpuKernel **kp;
};

static void batch_make(struct batch *b, size_t n, uint64_t now, uint32_t corr0, const char *name)
{
	memset(b, 0, sizeof(*b));
	profd__gpu_batch__init(&b->b);
	b->k = calloc(n, sizeof(*b->k));
	b->kp = calloc(n, sizeof(*b->kp));
	CHECK(b->k && b->kp);
	if (name) {
		b->strs[0] = (char *)name;
		b->b.strings = b->strs;
		b->b.n_strings = 1;
	}
	for (size_t i = 0; i < n; i++) {
		profd__gpu_kernel__init(&b->k[i]);
		b->k[i].start_ns = now - 1000;
		b->k[i].end_ns = now - 10;
		b->k[i].correlation_id = corr0 ? corr0 + (uint32_t)i : 0;
		b->k[i].has_name = true;
		b->k[i].name = 1;
		b->kp[i] = &b->k[i];
	}
	b->b.kernels = b->kp;
	b->b.n_kernels = n;
}

static void batch_free(struct batch *b)
{
	free(b->k);
	free(b->kp);
}

static int send(struct fx *f, uint32_t pid, size_t n, uint32_t corr0, const char *name)
{
	struct batch b;
	bool enable;
	int err;

	batch_make(&b, n, NOW, corr0, name);
	err = gpu__batch(f->g, pid, &b.b, &enable);
	batch_free(&b);
	return err;
}

static struct gpu_stats stats(struct fx *f)
{
	struct gpu_stats st;

	gpu__stats(f->g, &st);
	return st;
}

/* One uplink: two seconds' worth at once, then refused until time gives tokens back. */
static void test_uplink_rate(void)
{
	struct fx f;
	struct gpu_proc_status ps;

	fx_init(&f, 1000);
	CHECK_EQ_U(gpu__uplink_rate(f.g), 1000);
	attach(&f, 10, ALICE);
	CHECK_EQ_I(send(&f, 10, 1500, 0, "k"), 0);
	CHECK_EQ_U(stats(&f).records, 1500);
	/* 1500 of the 2000 a burst holds are gone: 600 more are over. */
	CHECK_EQ_I(send(&f, 10, 600, 0, NULL), -EBUSY);
	CHECK_EQ_U(stats(&f).records, 1500);
	CHECK_EQ_U(stats(&f).records_refused, 600);
	CHECK_EQ_U(stats(&f).batches_refused, 1);
	CHECK(stats(&f).bytes_refused > 600 * 4);
	CHECK_EQ_I(send(&f, 10, 400, 0, NULL), 0);
	CHECK_EQ_U(stats(&f).records, 1900);
	CHECK_EQ_U(gpu__status(f.g, &ps, 1), 1);
	CHECK_EQ_U(ps.records_refused, 600);
	CHECK_EQ_U(ps.bytes_refused, stats(&f).bytes_refused);
	/* A second later 1000 tokens came back: 1100 in the bucket. */
	gpu__clock(f.g, NOW + SEC);
	CHECK_EQ_I(send(&f, 10, 1200, 0, NULL), -EBUSY);
	CHECK_EQ_I(send(&f, 10, 1100, 0, NULL), 0);
	CHECK_EQ_U(stats(&f).records_refused, 1800);
	/*
	 * A batch larger than the burst passes when the bucket is full, and the uplink then waits
	 * until the rate has paid for what went past the burst: 5000 records at 1000 a second
	 * with 2000 saved up, 3 s.
	 */
	gpu__clock(f.g, NOW + 4 * SEC);
	CHECK_EQ_I(send(&f, 10, 5000, 0, NULL), 0);
	gpu__clock(f.g, NOW + 6 * SEC);
	CHECK_EQ_I(send(&f, 10, 1, 0, NULL), -EBUSY);
	gpu__clock(f.g, NOW + 7 * SEC + SEC / 2);
	CHECK_EQ_I(send(&f, 10, 1, 0, NULL), 0);
	fx_fini(&f);
}

/* A refused batch's strings still take their indices: later names resolve as the library sent. */
static void test_refused_keeps_strings(void)
{
	struct fx f;
	struct batch b;
	bool enable;

	fx_init(&f, 1000);
	attach(&f, 10, ALICE);
	CHECK_EQ_I(send(&f, 10, 2000, 0, "first"), 0);
	CHECK_EQ_I(send(&f, 10, 10, 0, "second"), -EBUSY);
	gpu__clock(f.g, NOW + 3 * SEC);
	/* Index 2 is "second"; a bad index would be a bad record. */
	batch_make(&b, 5, NOW + 3 * SEC, 0, NULL);
	for (size_t i = 0; i < 5; i++)
		b.k[i].name = 2;
	CHECK_EQ_I(gpu__batch(f.g, 10, &b.b, &enable), 0);
	batch_free(&b);
	CHECK_EQ_U(stats(&f).bad_records, 0);
	CHECK_EQ_U(stats(&f).records, 2005);
	fx_fini(&f);
}

/* A user's uplinks share twice one uplink's rate; another user's uplink is not touched. */
static void test_uid_rate(void)
{
	struct fx f;

	fx_init(&f, 1000);
	for (uint32_t pid = 10; pid < 14; pid++)
		attach(&f, pid, ALICE);
	attach(&f, 20, BOB);
	/* Each of Alice's uplinks is within its own rate; together they pass hers (4000). */
	CHECK_EQ_I(send(&f, 10, 1900, 0, "k"), 0);
	CHECK_EQ_I(send(&f, 11, 1900, 0, "k"), 0);
	CHECK_EQ_I(send(&f, 12, 1900, 0, "k"), -EBUSY);
	CHECK_EQ_I(send(&f, 13, 1900, 0, "k"), -EBUSY);
	CHECK_EQ_U(stats(&f).records_refused, 3800);
	CHECK_EQ_I(send(&f, 20, 1900, 0, "k"), 0);
	CHECK_EQ_U(stats(&f).records, 3 * 1900);
	fx_fini(&f);
}

/*
 * Records waiting for a launch that never comes: one user's processes together keep at most
 * 32768, the rest go to the stand-in at once and are counted; another user still gets to wait.
 */
static void test_uid_waits(void)
{
	struct fx f;
	struct gpu_proc_status ps[8];
	uint64_t waits = 0;
	size_t n;

	fx_init(&f, 100000000);
	for (uint32_t pid = 10; pid < 14; pid++) {
		attach(&f, pid, ALICE);
		/* 40000 a process: 160000 in all. */
		for (uint32_t k = 0; k < 4; k++)
			CHECK_EQ_I(send(&f, pid, 10000, 1 + k * 10000, k ? NULL : "k"), 0);
	}
	CHECK_EQ_U(stats(&f).waits_refused, 160000 - 32768);
	CHECK_EQ_U(stats(&f).unmatched, 160000 - 32768);
	n = gpu__status(f.g, ps, 8);
	CHECK_EQ_U(n, 4);
	for (size_t i = 0; i < n; i++)
		waits += ps[i].waits_refused;
	CHECK_EQ_U(waits, 160000 - 32768);
	attach(&f, 20, BOB);
	CHECK_EQ_I(send(&f, 20, 100, 1, "k"), 0);
	CHECK_EQ_U(stats(&f).waits_refused, 160000 - 32768);
	/* When they expire, Alice may wait again. */
	gpu__tick(f.g, NOW + 40 * SEC);
	gpu__clock(f.g, NOW + 40 * SEC);
	{
		struct batch b;
		bool enable;

		batch_make(&b, 100, NOW + 40 * SEC, 50001, NULL);
		CHECK_EQ_I(gpu__batch(f.g, 10, &b.b, &enable), 0);
		batch_free(&b);
	}
	CHECK_EQ_U(stats(&f).waits_refused, 160000 - 32768);
	fx_fini(&f);
}

/* The string tables of one user's connections: 16 MiB together, another user's untouched. */
static void test_uid_strings(void)
{
	enum { N = 1100, LEN = 4000, PER_CONN = (4 << 20) / (LEN + 1) };
	/* What one string counts against its user (gpu_batch.c proc_add_string). */
	const size_t cost = LEN + 1 + sizeof(struct gname) + sizeof(struct gstr);
	size_t left = (16u << 20) / cost; /* strings the user's bound takes */
	char *big = malloc(LEN + 1);
	char **strs = calloc(N, sizeof(*strs));
	Profd__GpuBatch b = PROFD__GPU_BATCH__INIT;
	uint64_t before;
	struct fx f;
	bool enable;

	CHECK(big && strs);
	memset(big, 'k', LEN);
	big[LEN] = '\0';
	for (size_t i = 0; i < N; i++)
		strs[i] = big;
	b.strings = strs;
	b.n_strings = N;
	fx_init(&f, 100000000);
	/* Each connection takes its own 4 MiB of names until Alice's bound runs out. */
	for (uint32_t pid = 10; pid < 15; pid++) {
		size_t kept = left < PER_CONN ? left : PER_CONN;

		attach(&f, pid, ALICE);
		before = f.g->strings_refused;
		CHECK_EQ_I(gpu__batch(f.g, pid, &b, &enable), 0);
		CHECK_EQ_U(f.g->strings_refused - before, N - kept);
		left -= kept;
	}
	CHECK_EQ_U(left, 0);
	/* Bob's table is his own. */
	attach(&f, 20, BOB);
	before = f.g->strings_refused;
	CHECK_EQ_I(gpu__batch(f.g, 20, &b, &enable), 0);
	CHECK_EQ_U(f.g->strings_refused - before, N - PER_CONN);
	/* Alice's first connection gone, its table's room is hers again. */
	gpu__detach(f.g, 10);
	gpu__process_exited(f.g, 10);
	gpu__tick(f.g, NOW + 1);
	attach(&f, 15, ALICE);
	before = f.g->strings_refused;
	CHECK_EQ_I(gpu__batch(f.g, 15, &b, &enable), 0);
	CHECK_EQ_U(f.g->strings_refused - before, N - PER_CONN);
	fx_fini(&f);
	free(strs);
	free(big);
}

int main(void)
{
	test_uid_strings();
	test_uplink_rate();
	test_refused_keeps_strings();
	test_uid_rate();
	test_uid_waits();
	return CHECK_DONE();
}
