// SPDX-License-Identifier: BSD-2-Clause
/*
 * The aggregation store: interning, time buckets, filters, eviction, compaction on the tick,
 * metadata, value columns, holders of stack ids across compaction.
 */
#include "check.h"
#include "store.h"
#include "store_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#define SEC 1000000000ull

struct qrow {
	uint32_t pid, tid, stack;
	uint64_t v;
};

struct qres {
	struct qrow rows[4096];
	size_t n;
	uint64_t total;
	int stop_after; /* > 0: return -ECANCELED once that many rows were seen */
};

static int collect(uint32_t pid, uint32_t tid, uint32_t stack,
		   const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct qres *r = ctx;

	if (r->n < sizeof(r->rows) / sizeof(r->rows[0]))
		r->rows[r->n] = (struct qrow){pid, tid, stack, values[STORE_VALUE_CPU_SAMPLES]};
	r->n++;
	r->total += values[STORE_VALUE_CPU_SAMPLES];
	if (r->stop_after && (int)r->n >= r->stop_after)
		return -ECANCELED;
	return 0;
}

static int run_query(struct store *s, const struct store_query *q, struct qres *r)
{
	memset(r, 0, sizeof(*r));
	return store__query(s, q, collect, r);
}

/* Value of a key in a result, or UINT64_MAX when the key is absent. */
static uint64_t value_of(const struct qres *r, uint32_t pid, uint32_t tid, uint32_t stack)
{
	for (size_t k = 0; k < r->n; k++)
		if (r->rows[k].pid == pid && r->rows[k].tid == tid && r->rows[k].stack == stack)
			return r->rows[k].v;
	return UINT64_MAX;
}

static struct store_query range(uint64_t start, uint64_t end)
{
	return (struct store_query){.start_ns = start, .end_ns = end};
}

static uint32_t frame(struct store *s, const char *name, uint64_t addr)
{
	struct frame_key k = {
	    .kind = FRAME_KIND_NATIVE, .name = name, .module = "/bin/app", .address = addr};

	return store__intern_frame(s, &k);
}

/* What the daemon's periodic tick does to a store no one else holds ids of. */
static void tick(struct store *s)
{
	if (store__compact_due(s))
		CHECK_EQ_I(store__compact(s), 0);
}

/* Over the cap by no more than the next compaction reclaims (what add promises). */
static bool within_cap(const struct store *s)
{
	return s->bytes <= s->cap + store_reclaimable(s);
}

/* A one-frame stack named name. */
static uint32_t stack1(struct store *s, const char *name, uint64_t addr)
{
	uint32_t f = frame(s, name, addr);

	return f ? store__intern_stack(s, &f, 1) : 0;
}

static void test_intern(void)
{
	struct store *s = store__new(NULL);
	char name_copy[16], mod_copy[16];
	struct frame_key a = {.kind = FRAME_KIND_NATIVE,
			      .name = "main",
			      .module = "/bin/app",
			      .address = 0x1000,
			      .file = "app.c",
			      .line = 12,
			      .build_id = "abcd"};
	struct frame_key b = a, c = a, d = a;
	const struct store_frame *f;
	uint32_t fa, fb, fc, fd, fe, st1, st2, st3, st4, bad[2];
	const uint32_t *frames;
	size_t n;

	CHECK(s != NULL);
	/* Same contents through other pointers: the same frame. */
	strcpy(name_copy, "main");
	strcpy(mod_copy, "/bin/app");
	b.name = name_copy;
	b.module = mod_copy;
	c.address = 0x1004;
	d.module = NULL;
	fa = store__intern_frame(s, &a);
	fb = store__intern_frame(s, &b);
	fc = store__intern_frame(s, &c);
	fd = store__intern_frame(s, &d);
	CHECK_EQ_U(fa, 1);
	CHECK_EQ_U(fb, 1);
	CHECK_EQ_U(fc, 2);
	CHECK_EQ_U(fd, 3);
	d.kind = FRAME_KIND_KERNEL;
	fe = store__intern_frame(s, &d);
	CHECK_EQ_U(fe, 4);
	CHECK_EQ_U(store__intern_frame(s, &a), 1);

	f = store__frame(s, fc);
	CHECK(f != NULL);
	CHECK_EQ_U(f->kind, FRAME_KIND_NATIVE);
	CHECK_STREQ(f->name, "main");
	CHECK_STREQ(f->module, "/bin/app");
	CHECK_EQ_U(f->address, 0x1004);
	CHECK_STREQ(f->file, "app.c");
	CHECK_EQ_U(f->line, 12);
	CHECK_STREQ(f->build_id, "abcd");
	/* Interned strings are shared. */
	CHECK(store__frame(s, fa)->name == store__frame(s, fc)->name);
	CHECK(store__frame(s, fd)->module == NULL);
	CHECK(store__frame(s, 0) == NULL);
	CHECK(store__frame(s, 5) == NULL);

	a.name = NULL;
	CHECK_EQ_U(store__intern_frame(s, &a), 0);

	{
		uint32_t s1[] = {fa, fc}, s2[] = {fc, fa}, s3[] = {fa, fc, fd};

		st1 = store__intern_stack(s, s1, 2);
		st2 = store__intern_stack(s, s2, 2);
		st3 = store__intern_stack(s, s3, 3);
		st4 = store__intern_stack(s, s1, 2);
	}
	CHECK_EQ_U(st1, 1);
	CHECK_EQ_U(st2, 2);
	CHECK_EQ_U(st3, 3);
	CHECK_EQ_U(st4, 1);
	CHECK(store__stack(s, st3, &frames, &n));
	CHECK_EQ_U(n, 3);
	CHECK_EQ_U(frames[0], fa);
	CHECK_EQ_U(frames[1], fc);
	CHECK_EQ_U(frames[2], fd);
	CHECK(!store__stack(s, 4, &frames, &n));
	bad[0] = fa;
	bad[1] = 99;
	CHECK_EQ_U(store__intern_stack(s, bad, 2), 0);

	{
		struct store_stats st;

		store__stats(s, &st);
		CHECK_EQ_U(st.frames, 4);
		CHECK_EQ_U(st.stacks, 3);
		CHECK_EQ_U(st.generation, 0);
		CHECK(st.bytes > 0);
		CHECK(st.interned_bytes > 0 && st.interned_bytes < st.bytes);
	}
	/* Bad arguments to add. */
	CHECK_EQ_I(store__add(s, 1, 1, 1, 0, STORE_VALUE_CPU_SAMPLES, 1), -EINVAL);
	CHECK_EQ_I(store__add(s, 1, 1, 1, 4, STORE_VALUE_CPU_SAMPLES, 1), -EINVAL);
	CHECK_EQ_I(store__add(s, 1, 1, 1, 1, STORE_VALUE__COUNT, 1), -EINVAL);
	store__free(s);
	store__free(NULL);
}

static void test_ranges(void)
{
	struct store *s = store__new(&(struct store_opts){.bucket_ns = SEC});
	struct store_query q;
	struct store_stats st;
	struct qres *r = calloc(1, sizeof(*r));
	uint32_t sa = stack1(s, "a", 1), sb = stack1(s, "b", 2);

	CHECK_EQ_U(store__bucket_ns(s), SEC);
	/* Bucket 0, bucket 1 at both edges, bucket 2 at its start, bucket 10. */
	CHECK_EQ_I(store__add(s, SEC / 2, 10, 11, sa, STORE_VALUE_CPU_SAMPLES, 1), 0);
	CHECK_EQ_I(store__add(s, SEC / 2 + 1, 10, 11, sa, STORE_VALUE_CPU_SAMPLES, 2), 0);
	CHECK_EQ_I(store__add(s, SEC, 10, 11, sa, STORE_VALUE_CPU_SAMPLES, 4), 0);
	CHECK_EQ_I(store__add(s, 2 * SEC - 1, 10, 11, sb, STORE_VALUE_CPU_SAMPLES, 8), 0);
	CHECK_EQ_I(store__add(s, 2 * SEC, 10, 12, sa, STORE_VALUE_CPU_SAMPLES, 16), 0);
	CHECK_EQ_I(store__add(s, 10 * SEC + 5, 20, 21, sb, STORE_VALUE_CPU_SAMPLES, 32), 0);

	store__stats(s, &st);
	CHECK_EQ_U(st.buckets, 4);
	CHECK_EQ_U(st.samples, 63);
	CHECK_EQ_U(st.oldest_ns, 0);
	CHECK_EQ_U(st.newest_ns, 10 * SEC + 5);

	q = range(0, UINT64_MAX);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 4);
	CHECK_EQ_U(r->total, 63);
	CHECK_EQ_U(value_of(r, 10, 11, sa), 7);
	CHECK_EQ_U(value_of(r, 10, 11, sb), 8);
	CHECK_EQ_U(value_of(r, 10, 12, sa), 16);
	CHECK_EQ_U(value_of(r, 20, 21, sb), 32);

	q = range(0, SEC);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 1);
	CHECK_EQ_U(value_of(r, 10, 11, sa), 3);

	q = range(SEC, 2 * SEC);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 2);
	CHECK_EQ_U(value_of(r, 10, 11, sa), 4);
	CHECK_EQ_U(value_of(r, 10, 11, sb), 8);

	/*
	 * Whole buckets overlapping the range: bucket 0 holds 1 ns, so it counts; bucket 2 starts
	 * at the exclusive end, so it does not, until the end moves 1 ns past its start.
	 */
	q = range(1, 2 * SEC);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, 15);
	q = range(1, 2 * SEC + 1);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, 31);
	q = range(SEC + 1, SEC + 2); /* a window inside one bucket finds that bucket */
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, 12);
	q = range(3 * SEC, 10 * SEC);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 0);
	q = range(5 * SEC, 5 * SEC);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 0);
	q = range(10 * SEC, UINT64_MAX);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, 32);

	/* A callback's error stops the walk and comes back. */
	q = range(0, UINT64_MAX);
	memset(r, 0, sizeof(*r));
	r->stop_after = 2;
	CHECK_EQ_I(store__query(s, &q, collect, r), -ECANCELED);
	CHECK_EQ_U(r->n, 2);
	store__free(s);
	free(r);
}

static void test_filters(void)
{
	struct store *s = store__new(NULL);
	struct qres *r = calloc(1, sizeof(*r));
	uint32_t sa = stack1(s, "a", 1), sb = stack1(s, "b", 2);
	uint32_t pids[] = {300, 100};
	struct store_query q = range(0, UINT64_MAX);

	CHECK_EQ_I(store__set_process(s, 100, 1000, "alice"), 0);
	CHECK_EQ_I(store__set_process(s, 200, 0, "root"), 0);
	/* pid 300 has no metadata: unknown uid. */
	CHECK_EQ_I(store__add(s, 1, 100, 100, sa, STORE_VALUE_CPU_SAMPLES, 1), 0);
	CHECK_EQ_I(store__add(s, 2, 100, 101, sb, STORE_VALUE_CPU_SAMPLES, 2), 0);
	CHECK_EQ_I(store__add(s, 3, 200, 200, sa, STORE_VALUE_CPU_SAMPLES, 4), 0);
	CHECK_EQ_I(store__add(s, 4, 300, 300, sa, STORE_VALUE_CPU_SAMPLES, 8), 0);
	CHECK_EQ_I(store__add(s, 5, 300, 301, sb, STORE_VALUE_CPU_SAMPLES, 16), 0);

	q.pids = pids;
	q.npids = 2;
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 4);
	CHECK_EQ_U(r->total, 27);
	CHECK_EQ_U(value_of(r, 200, 200, sa), UINT64_MAX);

	q.tid = 301;
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 1);
	CHECK_EQ_U(value_of(r, 300, 301, sb), 16);

	q = range(0, UINT64_MAX);
	q.tid = 101;
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, 2);

	q = range(0, UINT64_MAX);
	q.filter_uid = true;
	q.uid = 1000;
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 2);
	CHECK_EQ_U(r->total, 3);
	q.uid = 0;
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 1);
	CHECK_EQ_U(value_of(r, 200, 200, sa), 4);
	q.uid = 4242;
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 0);
	/* uid and pid together. */
	q.uid = 1000;
	q.pids = pids;
	q.npids = 2;
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, 3);
	store__free(s);
	free(r);
}

static void test_out_of_order(void)
{
	struct store *s = store__new(&(struct store_opts){.bucket_ns = SEC});
	struct qres *r = calloc(1, sizeof(*r));
	uint32_t sa = stack1(s, "a", 1);
	struct store_query q;
	struct store_stats st;

	CHECK_EQ_I(store__add(s, 5 * SEC, 1, 1, sa, STORE_VALUE_CPU_SAMPLES, 1), 0);
	CHECK_EQ_I(store__add(s, 3 * SEC + 7, 1, 1, sa, STORE_VALUE_CPU_SAMPLES, 2), 0);
	CHECK_EQ_I(store__add(s, 9 * SEC, 1, 1, sa, STORE_VALUE_CPU_SAMPLES, 4), 0);
	CHECK_EQ_I(store__add(s, 4 * SEC + 1, 1, 1, sa, STORE_VALUE_CPU_SAMPLES, 8), 0);
	CHECK_EQ_I(store__add(s, 5 * SEC + 9, 1, 1, sa, STORE_VALUE_CPU_SAMPLES, 16), 0);
	/* Far behind the newest: bucket 1 is sealed territory, and bucket 3 gets more. */
	CHECK_EQ_I(store__add(s, 1 * SEC, 1, 1, sa, STORE_VALUE_CPU_SAMPLES, 32), 0);
	CHECK_EQ_I(store__add(s, 3 * SEC, 1, 2, sa, STORE_VALUE_CPU_SAMPLES, 64), 0);
	CHECK_EQ_I(store__add(s, 10 * SEC, 1, 1, sa, STORE_VALUE_CPU_SAMPLES, 128), 0);
	CHECK_EQ_I(store__add(s, 3 * SEC + 1, 1, 2, sa, STORE_VALUE_CPU_SAMPLES, 256), 0);

	store__stats(s, &st);
	CHECK_EQ_U(st.buckets, 6);
	CHECK_EQ_U(st.oldest_ns, 1 * SEC);
	CHECK_EQ_U(st.newest_ns, 10 * SEC);
	static const struct {
		uint64_t sec;
		uint64_t total;
	} want[] = {{0, 0}, {1, 32}, {2, 0}, {3, 322}, {4, 8}, {5, 17}, {9, 4}, {10, 128}};
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		q = range(want[k].sec * SEC, (want[k].sec + 1) * SEC);
		CHECK_EQ_I(run_query(s, &q, r), 0);
		CHECK_EQ_U(r->total, want[k].total);
	}
	q = range(3 * SEC, 4 * SEC);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 2);
	CHECK_EQ_U(value_of(r, 1, 1, sa), 2);
	CHECK_EQ_U(value_of(r, 1, 2, sa), 320);
	store__free(s);
	free(r);
}

/* Adds `per` samples to bucket `sec`, spread over a few keys. */
static int fill_bucket(struct store *s, uint64_t sec, uint32_t st, unsigned int per)
{
	for (unsigned int k = 0; k < per; k++) {
		int err = store__add(s, sec * SEC + k, 1 + k % 3, 1 + k % 5, st,
				     STORE_VALUE_CPU_SAMPLES, 1);

		if (err)
			return err;
	}
	return 0;
}

static void test_eviction(void)
{
	const size_t cap = 48 * 1024;
	struct store *s = store__new(&(struct store_opts){.mem_cap = cap, .bucket_ns = SEC});
	struct qres *r = calloc(1, sizeof(*r));
	struct store_stats st;
	struct store_query q;
	uint32_t sts[40];
	const unsigned int per = 60, nbuckets = 200;
	uint64_t over_cap = 0;

	for (unsigned int k = 0; k < 40; k++) {
		char name[32];

		snprintf(name, sizeof(name), "fn%u", k);
		sts[k] = stack1(s, name, k);
	}
	for (unsigned int sec = 0; sec < nbuckets; sec++) {
		/* Each bucket uses 8 stacks x 15 (pid, tid) = 60 distinct entries. */
		for (unsigned int k = 0; k < per; k++) {
			CHECK_EQ_I(store__add(s, sec * SEC + k, 1 + k % 3, 1 + k % 5,
					      sts[(sec + k / 15) % 40], STORE_VALUE_CPU_SAMPLES,
					      1 + k % 2),
				   0);
			store__stats(s, &st);
			if (st.bytes > cap)
				over_cap++;
		}
	}
	CHECK_EQ_U(over_cap, 0);
	store__stats(s, &st);
	CHECK(st.evicted_buckets > 0);
	CHECK(st.buckets > 2);
	/* Oldest first: what is left is the newest, contiguous run of buckets. */
	CHECK_EQ_U(st.evicted_buckets + st.buckets, nbuckets);
	CHECK_EQ_U(st.oldest_ns, (nbuckets - st.buckets) * SEC);
	/* Each bucket holds 30 x 1 + 30 x 2 = 90 samples. */
	CHECK_EQ_U(st.samples, (uint64_t)nbuckets * 90);
	CHECK_EQ_U(st.evicted_samples, st.evicted_buckets * 90);
	q = range(0, UINT64_MAX);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, st.samples - st.evicted_samples);
	/* The newest bucket is whole. */
	q = range((nbuckets - 1) * SEC, nbuckets * SEC);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, 90);
	CHECK_EQ_U(r->n, 60);

	/* A late sample for an evicted bucket counts as evicted at once. */
	CHECK_EQ_I(store__add(s, 0, 1, 1, sts[0], STORE_VALUE_CPU_SAMPLES, 5), 0);
	{
		struct store_stats st2;

		store__stats(s, &st2);
		CHECK_EQ_U(st2.samples, st.samples + 5);
		CHECK_EQ_U(st2.evicted_samples, st.evicted_samples + 5);
		CHECK_EQ_U(st2.buckets, st.buckets);
	}
	store__free(s);
	free(r);
}

static bool names_are(struct store *s, uint32_t stack, const char *leaf, const char *root)
{
	const uint32_t *fr;
	size_t n;

	if (!store__stack(s, stack, &fr, &n) || n != 2)
		return false;
	return !strcmp(store__frame(s, fr[0])->name, leaf) &&
	       !strcmp(store__frame(s, fr[1])->name, root);
}

static void test_compact_explicit(void)
{
	struct store *s = store__new(NULL);
	struct qres *r = calloc(1, sizeof(*r));
	struct store_query q = range(0, UINT64_MAX);
	struct store_stats st;
	uint32_t fa = frame(s, "a", 1), fb = frame(s, "b", 2), fc = frame(s, "c", 3);
	uint32_t s1[] = {fa, fb}, s2[] = {fb, fc}, s3[] = {fc, fb};
	uint32_t st1 = store__intern_stack(s, s1, 2), st2 = store__intern_stack(s, s2, 2);
	uint32_t st3 = store__intern_stack(s, s3, 2);

	CHECK_EQ_U(st3, 3);
	/* Only stacks 2 and 3 are used: stack 1 and frame "a" are garbage. */
	CHECK_EQ_I(store__add(s, 10, 7, 7, st2, STORE_VALUE_CPU_SAMPLES, 3), 0);
	CHECK_EQ_I(store__add(s, 11, 7, 7, st3, STORE_VALUE_CPU_SAMPLES, 4), 0);
	CHECK_EQ_I(store__compact(s), 0);
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 1);
	CHECK_EQ_U(st.compactions, 1);
	CHECK_EQ_U(st.frames, 2);
	CHECK_EQ_U(st.stacks, 2);
	CHECK(store__frame(s, 3) == NULL);
	CHECK_STREQ(store__frame(s, 1)->name, "b");
	CHECK_STREQ(store__frame(s, 2)->name, "c");
	CHECK(names_are(s, 1, "b", "c"));
	CHECK(names_are(s, 2, "c", "b"));
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 2);
	CHECK_EQ_U(value_of(r, 7, 7, 1), 3);
	CHECK_EQ_U(value_of(r, 7, 7, 2), 4);
	/* Tables were rebuilt: interning finds the survivors and adds after them. */
	CHECK_EQ_U(frame(s, "b", 2), 1);
	CHECK_EQ_U(store__intern_stack(s, (uint32_t[]){1, 2}, 2), 1);
	CHECK_EQ_U(store__intern_stack(s, (uint32_t[]){2, 1}, 2), 2);
	CHECK_EQ_U(frame(s, "a", 1), 3);
	CHECK_EQ_U(store__intern_stack(s, (uint32_t[]){3, 1}, 2), 3);
	/* The open bucket's table was rebuilt too: same key, same entry. */
	CHECK_EQ_I(store__add(s, 12, 7, 7, 1, STORE_VALUE_CPU_SAMPLES, 10), 0);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->n, 2);
	CHECK_EQ_U(value_of(r, 7, 7, 1), 13);
	/* Nothing to drop but new stack 3 and frame 3: compaction with only live data is a no-op
	 * once they are used. */
	CHECK_EQ_I(store__add(s, 13, 7, 7, 3, STORE_VALUE_CPU_SAMPLES, 1), 0);
	CHECK_EQ_I(store__compact(s), 0);
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 1);
	(void)st1;
	store__free(s);
	free(r);
}

/* Old stacks with long names die by eviction; the tick compacts them away. */
static void test_compact_auto(void)
{
	const size_t cap = 256 * 1024;
	struct store *s = store__new(&(struct store_opts){.mem_cap = cap, .bucket_ns = SEC});
	struct qres *r = calloc(1, sizeof(*r));
	struct store_query q = range(0, UINT64_MAX);
	struct store_stats st;
	char name[600];
	uint64_t gen = 0, sec = 0, frames_before;
	bool moved = false;

	/* 100 old stacks of 2 frames with 500-byte names: ~100 KiB of strings. */
	for (unsigned int k = 0; k < 100; k++) {
		uint32_t f[2];

		memset(name, 'x', 500);
		snprintf(name + 500, 100, "old%u", k);
		f[0] = frame(s, name, k);
		snprintf(name + 500, 100, "oldroot%u", k);
		f[1] = frame(s, name, 1000 + k);
		CHECK_EQ_I(store__add(s, sec * SEC, 1, 1, store__intern_stack(s, f, 2),
				      STORE_VALUE_CPU_SAMPLES, 1),
			   0);
		sec++;
	}
	store__stats(s, &st);
	frames_before = st.frames;
	CHECK_EQ_U(frames_before, 200);
	CHECK_EQ_U(st.generation, 0);
	/* New data: short names, re-interned whenever the generation changes. */
	for (unsigned int round = 0; round < 3000 && !moved; round++, sec++) {
		for (unsigned int k = 0; k < 20; k++) {
			char leaf[32];
			uint32_t f[2], stk;

			snprintf(leaf, sizeof(leaf), "new%u", k);
			f[0] = frame(s, leaf, 5000 + k);
			f[1] = frame(s, "newroot", 9000);
			stk = store__intern_stack(s, f, 2);
			CHECK_EQ_I(
			    store__add(s, sec * SEC + k, 2, 2, stk, STORE_VALUE_CPU_SAMPLES, 1), 0);
			CHECK(within_cap(s));
			tick(s);
			CHECK(within_cap(s));
			store__stats(s, &st);
			if (st.generation != gen) {
				gen = st.generation;
				moved = true;
				break;
			}
		}
	}
	CHECK(moved);
	store__stats(s, &st);
	CHECK(st.generation >= 1);
	CHECK(st.compactions >= 1);
	CHECK(st.frames < frames_before);
	CHECK(st.evicted_buckets >= 1);
	/* Queries name the right frames after renumbering. */
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK(r->n > 0);
	CHECK_EQ_U(r->total, st.samples - st.evicted_samples);
	{
		size_t bad = 0;

		for (size_t k = 0; k < r->n && k < 4096; k++) {
			const uint32_t *fr;
			size_t n;

			if (!store__stack(s, r->rows[k].stack, &fr, &n) || n != 2)
				bad++;
			else if (r->rows[k].pid == 2 &&
				 (strncmp(store__frame(s, fr[0])->name, "new", 3) ||
				  strcmp(store__frame(s, fr[1])->name, "newroot")))
				bad++;
			else if (r->rows[k].pid == 1 &&
				 strncmp(store__frame(s, fr[0])->name, "xxxxxxxx", 8))
				bad++;
		}
		CHECK_EQ_U(bad, 0);
	}
	/* Re-interning a live frame gives its new id. */
	{
		uint32_t f0 = frame(s, "new0", 5000), froot = frame(s, "newroot", 9000);

		CHECK(f0 != 0 && f0 <= st.frames);
		CHECK(froot != 0 && froot <= st.frames);
		CHECK_STREQ(store__frame(s, f0)->name, "new0");
	}
	store__free(s);
	free(r);
}

/*
 * A long stream of ever new stacks and processes never lets memory pass the cap after a tick, nor
 * by more than the next compaction reclaims between ticks.
 */
static void test_bounded(void)
{
	const size_t cap = 1 << 20;
	struct store *s = store__new(&(struct store_opts){.mem_cap = cap, .bucket_ns = SEC / 10});
	struct store_stats st;
	uint64_t over = 0, max_bytes = 0, gen = 0;
	uint32_t rng = 12345, stk = 0;
	struct qres *r = calloc(1, sizeof(*r));
	struct store_query q = range(0, UINT64_MAX);

	for (uint64_t k = 0; k < 200000; k++) {
		uint32_t pid = 1000 + (uint32_t)(k / 500);
		char name[48];
		uint32_t f[3];
		int err;

		rng = rng * 1103515245u + 12345u;
		if (k % 4 == 0 || !stk) {
			snprintf(name, sizeof(name), "func_%" PRIu64, k);
			f[0] = frame(s, name, k);
			f[1] = frame(s, "common", 1);
			f[2] = frame(s, "main", 2);
			stk = store__intern_stack(s, f, 3);
			CHECK(stk != 0);
		}
		if (k % 500 == 0) {
			snprintf(name, sizeof(name), "proc%u", pid);
			store__set_process(s, pid, 1000, name);
			store__set_thread(s, pid, pid, name);
			if (pid > 1000)
				store__process_exited(s, pid - 1);
		}
		err = store__add(s, k * 1000000, pid, pid, stk, STORE_VALUE_CPU_SAMPLES, 1);
		CHECK_EQ_I(err, 0);
		if (!within_cap(s))
			over++;
		tick(s);
		if (!within_cap(s))
			over++;
		store__stats(s, &st);
		if (st.bytes > max_bytes)
			max_bytes = st.bytes;
		if (st.generation != gen) {
			gen = st.generation;
			stk = 0;
		}
	}
	CHECK_EQ_U(over, 0);
	CHECK(max_bytes <= cap + cap / 4);
	store__stats(s, &st);
	CHECK(st.evicted_buckets > 0);
	CHECK(st.compactions > 0);
	/* Metadata of exited processes went with their buckets. */
	CHECK(st.processes < 400);
	CHECK(st.threads < 400);
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, st.samples - st.evicted_samples);
	fprintf(stderr,
		"bounded: cap %zu max %" PRIu64 " buckets %" PRIu64 " compactions %" PRIu64
		" processes %" PRIu64 " evicted %" PRIu64 "\n",
		cap, max_bytes, st.buckets, st.compactions, st.processes, st.evicted_buckets);
	store__free(s);
	free(r);
}

static void test_processes(void)
{
	const size_t cap = 64 * 1024;
	struct store *s = store__new(&(struct store_opts){.mem_cap = cap, .bucket_ns = SEC});
	struct qres *r = calloc(1, sizeof(*r));
	struct store_query q = range(0, UINT64_MAX);
	struct store_process_info pi;
	struct store_stats st;
	uint32_t sa = stack1(s, "a", 1);

	CHECK(!store__process(s, 42, &pi));
	CHECK(store__thread_name(s, 42, 43) == NULL);
	CHECK_EQ_I(store__set_process(s, 42, 1000, "worker"), 0);
	CHECK_EQ_I(store__set_thread(s, 42, 43, "worker-io"), 0);
	CHECK_EQ_I(store__set_process(s, 50, 1000, "live"), 0);
	/* fill_bucket's processes are the same user's: eviction is oldest first (fair.c). */
	for (uint32_t pid = 1; pid <= 3; pid++)
		CHECK_EQ_I(store__set_process(s, pid, 1000, "filler"), 0);
	CHECK_EQ_I(store__add(s, 0, 42, 43, sa, STORE_VALUE_CPU_SAMPLES, 5), 0);
	CHECK_EQ_I(store__add(s, SEC, 50, 50, sa, STORE_VALUE_CPU_SAMPLES, 1), 0);
	store__process_exited(s, 42);
	store__process_exited(s, 7); /* unknown: ignored */

	CHECK(store__process(s, 42, &pi));
	CHECK_EQ_U(pi.pid, 42);
	CHECK_EQ_U(pi.uid, 1000);
	CHECK_STREQ(pi.comm, "worker");
	CHECK(pi.exited);
	CHECK_STREQ(store__thread_name(s, 42, 43), "worker-io");
	q.filter_uid = true;
	q.uid = 1000;
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(value_of(r, 42, 43, sa), 5);

	/* Renaming: the comm changes in place. */
	CHECK_EQ_I(store__set_thread(s, 42, 43, "worker-io2"), 0);
	CHECK_STREQ(store__thread_name(s, 42, 43), "worker-io2");

	/* Push bucket 0 out: the exited process and its thread go, the live one stays. */
	for (uint64_t sec = 2; sec < 400; sec++) {
		CHECK_EQ_I(fill_bucket(s, sec, sa, 10), 0);
		store__stats(s, &st);
		if (st.oldest_ns > 0)
			break;
	}
	store__stats(s, &st);
	CHECK(st.oldest_ns > 0);
	CHECK(!store__process(s, 42, &pi));
	CHECK(store__thread_name(s, 42, 43) == NULL);
	CHECK(store__process(s, 50, &pi));
	CHECK(!pi.exited);
	store__free(s);
	free(r);
}

/*
 * A pid reused by another user: the old process's samples stay its owner's, the new process's
 * are the new owner's, even inside one time bucket. Access control depends on it.
 */
static void test_pid_reuse(void)
{
	struct store *s = store__new(NULL);
	struct qres *r = calloc(1, sizeof(*r));
	uint32_t sa = stack1(s, "a", 1);
	struct store_query q = range(0, UINT64_MAX);

	CHECK_EQ_I(store__set_process(s, 100, 0, "rootjob"), 0);
	CHECK_EQ_I(store__add(s, 10, 100, 100, sa, STORE_VALUE_CPU_SAMPLES, 5), 0);
	store__process_exited(s, 100);
	CHECK_EQ_I(store__set_process(s, 100, 1000, "userjob"), 0);
	CHECK_EQ_I(store__add(s, 20, 100, 100, sa, STORE_VALUE_CPU_SAMPLES, 7), 0);

	q.filter_uid = true;
	q.uid = 1000;
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, 7);
	q.uid = 0;
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, 5);
	/* Root sees both under the one pid. */
	q.filter_uid = false;
	CHECK_EQ_I(run_query(s, &q, r), 0);
	CHECK_EQ_U(r->total, 12);
	CHECK_EQ_U(r->n, 1);
	store__free(s);
	free(r);
}

/* A query row with its life. */
struct lrow {
	uint32_t pid, life, tid, stack;
	uint64_t v;
};

struct lres {
	struct lrow rows[16];
	size_t n;
};

static int collect_life(uint32_t pid, uint32_t life, uint32_t tid, uint32_t stack,
			const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct lres *r = ctx;

	if (r->n < sizeof(r->rows) / sizeof(r->rows[0]))
		r->rows[r->n++] =
		    (struct lrow){pid, life, tid, stack, values[STORE_VALUE_CPU_SAMPLES]};
	return 0;
}

/* The row of stack in r, NULL when absent. */
static const struct lrow *lrow_of(const struct lres *r, uint32_t stack)
{
	for (size_t k = 0; k < r->n; k++)
		if (r->rows[k].stack == stack)
			return &r->rows[k];
	return NULL;
}

/* The name and owner of the life a row belongs to: "" and STORE_UID_UNKNOWN when unknown. */
static void check_life(struct store *s, const struct lrow *row, const char *comm, uint32_t uid)
{
	struct store_process_info pi = {0};

	CHECK(row != NULL);
	if (!row)
		return;
	CHECK(store__process_life(s, row->pid, row->life, &pi));
	CHECK_STREQ(pi.comm ? pi.comm : "", comm);
	CHECK_EQ_U(pi.uid, uid);
}

/*
 * Processes are keyed by their life: a pid reused by another process (another start time)
 * keeps the old process's data under the old name, owner and threads, in one bucket too, and
 * an exec (the same start) keeps the life. Before lives, the old data showed the new name.
 */
static void test_process_lives(void)
{
	struct store *s = store__new(&(struct store_opts){.mem_cap = 64 * 1024, .bucket_ns = SEC});
	struct lres r = {0};
	struct store_query q = range(0, UINT64_MAX);
	uint32_t sa = stack1(s, "oldproc_secret_fn", 1), sb = stack1(s, "newproc_fn", 2);
	struct store_process_info pi;
	struct store_stats st;
	uint32_t life1;

	CHECK_EQ_I(store__process_began(s, 0, 1), -EINVAL);
	CHECK_EQ_I(store__process_began(s, 100, 5000), 0);
	CHECK_EQ_I(store__set_process(s, 100, 1000, "alicejob"), 0);
	CHECK_EQ_I(store__set_thread(s, 100, 101, "alice-worker"), 0);
	CHECK_EQ_I(store__add(s, 10, 100, 101, sa, STORE_VALUE_CPU_SAMPLES, 5), 0);
	/* An exec: same start, same life, new name. */
	CHECK_EQ_I(store__process_began(s, 100, 5000), 0);
	CHECK_EQ_I(store__process_began(s, 100, 0), 0);
	CHECK(store__process(s, 100, &pi));
	life1 = pi.life;
	CHECK_EQ_U(pi.start, 5000);
	store__process_exited(s, 100);

	/* Reused: another process, another owner, the same tid too, in the same bucket. */
	CHECK_EQ_I(store__process_began(s, 100, 7000), 0);
	CHECK(store__process(s, 100, &pi));
	CHECK(pi.life != life1);
	CHECK(!pi.exited);
	CHECK_STREQ(pi.comm, "");
	CHECK_EQ_I(store__set_process(s, 100, 1001, "bobjob"), 0);
	CHECK_EQ_I(store__set_thread(s, 100, 101, "bob-worker"), 0);
	CHECK_EQ_I(store__add(s, 20, 100, 101, sb, STORE_VALUE_CPU_SAMPLES, 7), 0);

	CHECK_EQ_I(store__query_lives(s, &q, collect_life, &r), 0);
	CHECK_EQ_U(r.n, 2);
	check_life(s, lrow_of(&r, sa), "alicejob", 1000);
	check_life(s, lrow_of(&r, sb), "bobjob", 1001);
	CHECK(lrow_of(&r, sa) && lrow_of(&r, sa)->v == 5 && lrow_of(&r, sa)->tid == 101);
	CHECK(store__process_life(s, 100, life1, &pi) && pi.exited);
	CHECK_STREQ(store__thread_name_life(s, 100, life1, 101), "alice-worker");
	CHECK_STREQ(store__thread_name(s, 100, 101), "bob-worker");
	CHECK(store__process_owned(s, 100, 1000));
	CHECK(store__process_owned(s, 100, 1001));
	CHECK(!store__process_owned(s, 100, 1002));
	store__stats(s, &st);
	CHECK_EQ_U(st.processes, 2);

	/* One name per life when processes of a name are summed. */
	q.merge_processes = true;
	memset(&r, 0, sizeof(r));
	CHECK_EQ_I(store__query_lives(s, &q, collect_life, &r), 0);
	CHECK_EQ_U(r.n, 2);
	check_life(s, lrow_of(&r, sa), "alicejob", 1000);
	check_life(s, lrow_of(&r, sb), "bobjob", 1001);

	/* Alice's own filter finds her old life's data only. */
	q.merge_processes = false;
	q.filter_uid = true;
	q.uid = 1000;
	memset(&r, 0, sizeof(r));
	CHECK_EQ_I(store__query_lives(s, &q, collect_life, &r), 0);
	CHECK_EQ_U(r.n, 1);
	check_life(s, lrow_of(&r, sa), "alicejob", 1000);

	/*
	 * Bucket 0 evicted: the old life goes with it, the newest stays. The fair share (fair.c)
	 * takes the entries of the uid over its share first, so fill_bucket's processes are
	 * alice's until her old entry is gone, then bob's until his goes and the bucket with it.
	 */
	for (uint64_t sec = 2, owner = 1000; sec < 800; sec++) {
		for (uint32_t pid = 1; pid <= 3; pid++)
			CHECK_EQ_I(store__set_process(s, pid, (uint32_t)owner, "filler"), 0);
		CHECK_EQ_I(fill_bucket(s, sec, sa, 10), 0);
		store__stats(s, &st);
		if (st.oldest_ns > 0)
			break;
		if (sec == 300)
			owner = 1001;
	}
	CHECK(!store__process_life(s, 100, life1, &pi));
	CHECK(store__thread_name_life(s, 100, life1, 101) == NULL);
	CHECK(store__process(s, 100, &pi));
	CHECK_STREQ(pi.comm, "bobjob");
	CHECK(!store__process_owned(s, 100, 1000));
	store__free(s);
}

/* Life numbers come round: the oldest life of a number is dropped, the count stays bounded. */
static void test_process_lives_wrap(void)
{
	struct store *s = store__new(NULL);
	struct store_process_info pi;
	struct store_stats st;

	for (uint64_t k = 1; k <= STORE_LIFE_MAX + 5; k++) {
		CHECK_EQ_I(store__process_began(s, 77, k), 0);
		CHECK_EQ_I(store__set_process(s, 77, (uint32_t)k, "churn"), 0);
		/* Each life holds data, so none is swept. */
		CHECK_EQ_I(store__add(s, k, 77, 77, stack1(s, "f", 1), STORE_VALUE_CPU_SAMPLES, 1),
			   0);
	}
	store__stats(s, &st);
	CHECK_EQ_U(st.processes, STORE_LIFE_MAX);
	CHECK(store__process(s, 77, &pi));
	CHECK_EQ_U(pi.life, 5);
	CHECK_EQ_U(pi.uid, STORE_LIFE_MAX + 5);
	CHECK(store__process_life(s, 77, 6, &pi));
	CHECK_EQ_U(pi.uid, 6);
	store__free(s);
}

/* All columns of a query row. */
struct vrow {
	uint32_t pid, tid, stack;
	uint64_t v[STORE_VALUE__COUNT];
};

struct vres {
	struct vrow rows[64];
	size_t n;
	size_t calls;
};

static int collect_all(uint32_t pid, uint32_t tid, uint32_t stack,
		       const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct vres *r = ctx;

	r->calls++;
	if (r->n < sizeof(r->rows) / sizeof(r->rows[0])) {
		r->rows[r->n] = (struct vrow){pid, tid, stack, {0}};
		memcpy(r->rows[r->n].v, values, sizeof(r->rows[r->n].v));
		r->n++;
	}
	return 0;
}

static const struct vrow *vrow_of(const struct vres *r, uint32_t pid, uint32_t tid, uint32_t stack)
{
	for (size_t k = 0; k < r->n; k++)
		if (r->rows[k].pid == pid && r->rows[k].tid == tid && r->rows[k].stack == stack)
			return &r->rows[k];
	return NULL;
}

static void check_vals(const struct vrow *row, const uint64_t want[STORE_VALUE__COUNT])
{
	CHECK(row != NULL);
	if (!row)
		return;
	for (int c = 0; c < STORE_VALUE__COUNT; c++)
		CHECK_EQ_U(row->v[c], want[c]);
}

static void test_value_types(void)
{
	static const char *const want[STORE_VALUE__COUNT][2] = {
	    {"samples", "count"},
	    {"gpu_idle_samples", "count"},
	    {"gpu_time", "nanoseconds"},
	    {"gpu_kernels", "count"},
	    {"copy_time", "nanoseconds"},
	    {"copy_bytes", "bytes"},
	    {"uprobe_launches", "count"},
	    {"off_cpu", "nanoseconds"},
	    {"gpu_idle_off_cpu", "nanoseconds"},
	    {"gpu_memory", "bytes"},
	    {"gpu_memory_live", "bytes"},
	};
	const char *type, *unit;

	CHECK_EQ_U(STORE_VALUE__COUNT, 11);
	for (int c = 0; c < STORE_VALUE__COUNT; c++) {
		store_value_type(c, &type, &unit);
		CHECK_STREQ(type, want[c][0]);
		CHECK_STREQ(unit, want[c][1]);
	}
	store_value_type(STORE_VALUE__COUNT, &type, &unit);
	CHECK_STREQ(type, "");
	CHECK_STREQ(unit, "");
}

/* Each column is its own entry; a query sums them per (pid, tid, stack) into one row. */
static void test_columns(void)
{
	struct store *s = store__new(&(struct store_opts){.bucket_ns = SEC});
	struct vres *r = calloc(1, sizeof(*r));
	struct store_query q = range(0, UINT64_MAX);
	struct store_stats st;
	const uint32_t big = (1u << 22) - 1;
	uint32_t st1 = stack1(s, "launch", 0x10), st2 = stack1(s, "other", 0x20);
	uint64_t bytes_before;

	/* One entry per column: a CPU-only store pays for one value per entry. */
	CHECK_EQ_U(sizeof(struct entry), 24);
	CHECK_EQ_I(store__add(s, 10, 7, 8, st1, STORE_VALUE_CPU_SAMPLES, 3), 0);
	CHECK_EQ_I(store__add(s, 11, 7, 8, st1, STORE_VALUE_GPU_NS, 1000), 0);
	CHECK_EQ_I(store__add(s, 12, 7, 8, st1, STORE_VALUE_GPU_KERNELS, 2), 0);
	CHECK_EQ_I(store__add(s, 13, 7, 8, st1, STORE_VALUE_CPU_SAMPLES, 2), 0);
	CHECK_EQ_I(store__add(s, SEC + 1, 7, 8, st1, STORE_VALUE_GPU_NS, 500), 0);
	CHECK_EQ_I(store__add(s, SEC + 2, 7, 8, st1, STORE_VALUE_GPU_IDLE_SAMPLES, 1), 0);
	CHECK_EQ_I(store__add(s, 14, 7, 9, st1, STORE_VALUE_COPY_BYTES, 4096), 0);
	CHECK_EQ_I(store__add(s, 15, 7, 9, st1, STORE_VALUE_COPY_NS, 70), 0);
	CHECK_EQ_I(store__add(s, 16, 7, 8, st2, STORE_VALUE_UPROBE_LAUNCHES, 1), 0);
	/* The largest pid and tid Linux hands out, with the highest column: no bit bleeds. */
	CHECK_EQ_I(store__add(s, 17, big, big, st2, STORE_VALUE_UPROBE_LAUNCHES, 9), 0);
	CHECK_EQ_I(store__add(s, 18, big, big, st2, STORE_VALUE_CPU_SAMPLES, 4), 0);
	/* Ids past PID_MAX_LIMIT, or a column that does not exist, are refused. */
	CHECK_EQ_I(store__add(s, 19, 1u << 22, 1, st1, STORE_VALUE_CPU_SAMPLES, 1), -EINVAL);
	CHECK_EQ_I(store__add(s, 19, 1, 1u << 22, st1, STORE_VALUE_CPU_SAMPLES, 1), -EINVAL);
	CHECK_EQ_I(store__add(s, 19, UINT32_MAX, 1, st1, STORE_VALUE_CPU_SAMPLES, 1), -EINVAL);
	CHECK_EQ_I(store__add(s, 19, 1, 1, st1, STORE_VALUE__COUNT, 1), -EINVAL);
	CHECK_EQ_I(store__add(s, 19, 1, 1, st1, (enum store_value) - 1, 1), -EINVAL);

	CHECK_EQ_I(store__query(s, &q, collect_all, r), 0);
	CHECK_EQ_U(r->calls, 4);
	check_vals(vrow_of(r, 7, 8, st1), (uint64_t[]){5, 1, 1500, 2, 0, 0, 0, 0, 0, 0, 0});
	check_vals(vrow_of(r, 7, 9, st1), (uint64_t[]){0, 0, 0, 0, 70, 4096, 0, 0, 0, 0, 0});
	check_vals(vrow_of(r, 7, 8, st2), (uint64_t[]){0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0});
	check_vals(vrow_of(r, big, big, st2), (uint64_t[]){4, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0});

	/* Filters see the pid, not the pid word with its column. */
	memset(r, 0, sizeof(*r));
	q.pids = &big;
	q.npids = 1;
	CHECK_EQ_I(store__query(s, &q, collect_all, r), 0);
	CHECK_EQ_U(r->calls, 1);
	check_vals(vrow_of(r, big, big, st2), (uint64_t[]){4, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0});
	memset(r, 0, sizeof(*r));
	q.pids = NULL;
	q.npids = 0;
	q.tid = 9;
	CHECK_EQ_I(store__query(s, &q, collect_all, r), 0);
	CHECK_EQ_U(r->calls, 1);
	check_vals(vrow_of(r, 7, 9, st1), (uint64_t[]){0, 0, 0, 0, 70, 4096, 0, 0, 0, 0, 0});
	/* The second bucket alone. */
	memset(r, 0, sizeof(*r));
	q = range(SEC, 2 * SEC);
	CHECK_EQ_I(store__query(s, &q, collect_all, r), 0);
	CHECK_EQ_U(r->calls, 1);
	check_vals(vrow_of(r, 7, 8, st1), (uint64_t[]){0, 1, 500, 0, 0, 0, 0, 0, 0, 0, 0});

	/* samples counts CPU samples only. */
	store__stats(s, &st);
	CHECK_EQ_U(st.samples, 9);
	/* Adding to an existing (key, column) costs nothing; a new column of a key costs an entry.
	 */
	bytes_before = st.bytes;
	CHECK_EQ_I(store__add(s, 20, 7, 8, st1, STORE_VALUE_GPU_NS, 1), 0);
	store__stats(s, &st);
	CHECK_EQ_U(st.bytes, bytes_before);
	store__free(s);
	free(r);
}

struct sums {
	size_t calls;
	uint64_t v[STORE_VALUE__COUNT];
	unsigned int bad;
};

static int sum_all(uint32_t pid, uint32_t tid, uint32_t stack,
		   const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct sums *sm = ctx;

	sm->calls++;
	for (int c = 0; c < STORE_VALUE__COUNT; c++)
		sm->v[c] += values[c];
	/* Each key got CPU tid % 3 (0 leaves the column empty), GPU time tid * 10 when tid is even.
	 */
	if (values[STORE_VALUE_CPU_SAMPLES] != tid % 3 ||
	    values[STORE_VALUE_GPU_NS] != (tid % 2 ? 0 : tid * 10ull) ||
	    values[STORE_VALUE_COPY_NS] != 0)
		sm->bad++;
	return 0;
}

/* Many keys with and without side columns: every row gets exactly its own values. */
static void test_columns_many(void)
{
	struct store *s = store__new(&(struct store_opts){.bucket_ns = SEC});
	struct store_query q = range(0, UINT64_MAX);
	struct sums sm = {0};
	uint32_t stk = stack1(s, "f", 1);
	uint64_t cpu = 0, gpu = 0;

	for (uint32_t tid = 1; tid <= 3000; tid++) {
		if (tid % 2 == 0) {
			CHECK_EQ_I(store__add(s, tid, 1, tid, stk, STORE_VALUE_GPU_NS, tid * 10ull),
				   0);
			gpu += tid * 10ull;
		}
		if (tid % 3) {
			/* In a later bucket: the rows meet across buckets. */
			CHECK_EQ_I(
			    store__add(s, SEC + tid, 1, tid, stk, STORE_VALUE_CPU_SAMPLES, tid % 3),
			    0);
			cpu += tid % 3;
		}
	}
	CHECK_EQ_I(store__query(s, &q, sum_all, &sm), 0);
	/* Keys with neither column: tid % 6 == 3. */
	CHECK_EQ_U(sm.calls, 3000 - 500);
	CHECK_EQ_U(sm.bad, 0);
	CHECK_EQ_U(sm.v[STORE_VALUE_CPU_SAMPLES], cpu);
	CHECK_EQ_U(sm.v[STORE_VALUE_GPU_NS], gpu);
	store__free(s);
}

static int last_values(uint32_t pid, uint32_t tid, uint32_t stack,
		       const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	memcpy(ctx, values, STORE_VALUE__COUNT * sizeof(uint64_t));
	return 0;
}

/* Values saturate instead of wrapping, in an entry and across buckets in a query. */
static void test_saturate(void)
{
	struct store *s = store__new(&(struct store_opts){.bucket_ns = SEC});
	struct store_query q = range(0, UINT64_MAX);
	uint64_t v[STORE_VALUE__COUNT] = {0};
	uint32_t stk = stack1(s, "k", 1);

	CHECK_EQ_I(store__add(s, 1, 1, 1, stk, STORE_VALUE_GPU_NS, UINT64_MAX - 5), 0);
	CHECK_EQ_I(store__add(s, 2, 1, 1, stk, STORE_VALUE_GPU_NS, 10), 0);
	CHECK_EQ_I(store__add(s, 1, 1, 1, stk, STORE_VALUE_CPU_SAMPLES, UINT64_MAX - 1), 0);
	CHECK_EQ_I(store__add(s, SEC + 1, 1, 1, stk, STORE_VALUE_CPU_SAMPLES, 7), 0);
	CHECK_EQ_I(store__add(s, SEC + 1, 1, 1, stk, STORE_VALUE_COPY_BYTES, 3), 0);
	CHECK_EQ_I(store__query(s, &q, last_values, v), 0);
	CHECK_EQ_U(v[STORE_VALUE_GPU_NS], UINT64_MAX);
	CHECK_EQ_U(v[STORE_VALUE_CPU_SAMPLES], UINT64_MAX);
	CHECK_EQ_U(v[STORE_VALUE_COPY_BYTES], 3);
	store__free(s);
}

/* Evicting a bucket counts only its CPU samples as evicted samples. */
static void test_columns_evicted(void)
{
	struct store *s = store__new(&(struct store_opts){.mem_cap = 64 * 1024, .bucket_ns = SEC});
	struct store_stats st;
	uint32_t stk = stack1(s, "f", 1);
	uint64_t sec = 0;

	CHECK_EQ_I(store__add(s, 0, 5, 5, stk, STORE_VALUE_CPU_SAMPLES, 2), 0);
	CHECK_EQ_I(store__add(s, 1, 5, 5, stk, STORE_VALUE_GPU_NS, 1000000), 0);
	/* Fill later buckets until the first one is evicted. */
	do {
		sec++;
		for (uint32_t tid = 1; tid <= 50; tid++)
			CHECK_EQ_I(store__add(s, sec * SEC, 6, tid, stk, STORE_VALUE_GPU_NS, 1), 0);
		store__stats(s, &st);
	} while (!st.evicted_buckets && sec < 1000);
	/* The first bucket is gone (the cap may take the next one with it). */
	CHECK(st.evicted_buckets >= 1);
	CHECK(st.oldest_ns >= SEC);
	CHECK_EQ_U(st.samples, 2);
	CHECK_EQ_U(st.evicted_samples, 2);
	/* Late data of any column for an evicted bucket is dropped; only CPU samples count. */
	CHECK_EQ_I(store__add(s, 2, 5, 5, stk, STORE_VALUE_GPU_NS, 7), 0);
	CHECK_EQ_I(store__add(s, 3, 5, 5, stk, STORE_VALUE_CPU_SAMPLES, 1), 0);
	store__stats(s, &st);
	CHECK_EQ_U(st.samples, 3);
	CHECK_EQ_U(st.evicted_samples, 3);
	store__free(s);
}

/* A holder of stack ids outside the buckets, as the GPU module is. */
struct holder {
	uint32_t ids[64];
	size_t n;
	unsigned int marks, remaps;
	unsigned int max_marks; /* > 0: past this many, let go of everything (a runaway) */
	bool runaway;
};

static void holder_mark(struct holder *h, struct store_gc *gc)
{
	h->marks++;
	if (h->max_marks && h->marks > h->max_marks) {
		/* Compacting without end: stop holding so that the test ends and fails. */
		h->runaway = true;
		h->n = 0;
	}
	for (size_t k = 0; k < h->n; k++) {
		store_gc__keep(gc, h->ids[k]);
		/* Twice is the same as once. */
		store_gc__keep(gc, h->ids[k]);
	}
	/* Bad ids are ignored. */
	store_gc__keep(gc, 0);
	store_gc__keep(gc, 100000);
}

/* The daemon's tick sequence with one holder, due or not. Returns what the commit returned. */
static int compact_held(struct store *s, struct holder *h)
{
	struct store_gc *gc = store__gc_plan(s);
	int err;

	if (!gc)
		return -errno;
	holder_mark(h, gc);
	err = store__gc_commit(s, gc);
	if (!err) {
		h->remaps++;
		for (size_t k = 0; k < h->n; k++)
			h->ids[k] = store_gc__map(gc, h->ids[k]);
	}
	store_gc__free(gc);
	return err;
}

static void tick_held(struct store *s, struct holder *h)
{
	if (store__compact_due(s))
		CHECK_EQ_I(compact_held(s, h), 0);
}

static void test_gc_holder(void)
{
	struct store *s = store__new(NULL);
	struct vres *r = calloc(1, sizeof(*r));
	struct store_query q = range(0, UINT64_MAX);
	struct holder h = {0};
	struct store_stats st;
	uint32_t fd = frame(s, "dropped", 1), fa = frame(s, "used", 2), fb = frame(s, "root", 3);
	uint32_t fc = frame(s, "held", 4), fe = frame(s, "dropped2", 5);
	uint32_t drop1 = store__intern_stack(s, &fd, 1);
	uint32_t used = store__intern_stack(s, (uint32_t[]){fa, fb}, 2);
	uint32_t held = store__intern_stack(s, (uint32_t[]){fc, fb}, 2);
	uint32_t drop2 = store__intern_stack(s, &fe, 1);
	uint32_t unheld_later;

	CHECK_EQ_U(drop1, 1);
	CHECK_EQ_U(used, 2);
	CHECK_EQ_U(held, 3);
	CHECK_EQ_U(drop2, 4);
	CHECK_EQ_I(store__add(s, 10, 7, 7, used, STORE_VALUE_CPU_SAMPLES, 3), 0);
	h.ids[h.n++] = held;

	CHECK_EQ_I(compact_held(s, &h), 0);
	CHECK_EQ_U(h.marks, 1);
	CHECK_EQ_U(h.remaps, 1);
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 1);
	CHECK_EQ_U(st.stacks, 2);
	CHECK_EQ_U(st.frames, 3); /* used, root, held */
	/* The used stack moved from 2 to 1, the held one from 3 to 2, with its frames. */
	CHECK_EQ_U(h.ids[0], 2);
	CHECK(names_are(s, 1, "used", "root"));
	CHECK(names_are(s, 2, "held", "root"));
	CHECK_EQ_I(store__query(s, &q, collect_all, r), 0);
	CHECK_EQ_U(r->calls, 1);
	check_vals(vrow_of(r, 7, 7, 1), (uint64_t[]){3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
	/* Interning finds the held stack under its new id. */
	CHECK_EQ_U(
	    store__intern_stack(s, (uint32_t[]){frame(s, "held", 4), frame(s, "root", 3)}, 2), 2);

	/* Still held and nothing else dead: the holder is asked, nothing moves. */
	CHECK_EQ_I(compact_held(s, &h), 0);
	CHECK_EQ_U(h.marks, 2);
	CHECK_EQ_U(h.remaps, 2);
	CHECK_EQ_U(h.ids[0], 2);
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 1);
	CHECK_EQ_U(st.stacks, 2);
	/* What only the holder keeps does not make compaction look due. */
	CHECK_EQ_U(store_reclaimable(s), 0);

	/* A bucket names the held stack too: it stays when the holder lets go. */
	CHECK_EQ_I(store__add(s, 11, 7, 7, h.ids[0], STORE_VALUE_GPU_NS, 40), 0);
	unheld_later = store__intern_stack(s, (uint32_t[]){frame(s, "late", 6)}, 1);
	CHECK_EQ_U(unheld_later, 3);
	h.ids[0] = unheld_later;
	CHECK_EQ_I(compact_held(s, &h), 0);
	CHECK_EQ_U(h.ids[0], 3);
	store__stats(s, &st);
	CHECK_EQ_U(st.stacks, 3);
	/* Let go: the stack only the holder kept is dropped at the next compaction. */
	h.n = 0;
	CHECK_EQ_I(compact_held(s, &h), 0);
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 2);
	CHECK_EQ_U(st.stacks, 2);
	CHECK_EQ_U(st.frames, 3);
	CHECK(store__frame(s, 4) == NULL);
	memset(r, 0, sizeof(*r));
	CHECK_EQ_I(store__query(s, &q, collect_all, r), 0);
	CHECK_EQ_U(r->calls, 2);
	check_vals(vrow_of(r, 7, 7, 2), (uint64_t[]){0, 0, 40, 0, 0, 0, 0, 0, 0, 0, 0});
	store__free(s);
	free(r);
}

/*
 * One plan step by step: a held id survives and maps to its new id; adding and interning between
 * plan and commit; one plan at a time; an abandoned plan or one that drops nothing moves nothing.
 */
static void test_gc_plan(void)
{
	struct store *s = store__new(NULL);
	struct store_stats st;
	uint32_t fa = frame(s, "a", 1), fb = frame(s, "b", 2), fh = frame(s, "held", 3);
	uint32_t dropped = store__intern_stack(s, &fa, 1);
	uint32_t used = store__intern_stack(s, &fb, 1);
	uint32_t held = store__intern_stack(s, (uint32_t[]){fh, fb}, 2);
	uint32_t late, lonely, spare;
	uint64_t dead;
	struct store_gc *gc, *gc2;

	CHECK_EQ_U(held, 3);
	CHECK_EQ_I(store__add(s, 10, 7, 7, used, STORE_VALUE_CPU_SAMPLES, 1), 0);
	gc = store__gc_plan(s);
	CHECK(gc != NULL);
	if (!gc) {
		store__free(s);
		return;
	}
	/* One plan at a time, and no compaction beside it. */
	errno = 0;
	CHECK(store__gc_plan(s) == NULL);
	CHECK_EQ_I(errno, EBUSY);
	CHECK_EQ_I(store__compact(s), -EBUSY);
	CHECK(!store__compact_due(s));
	store_gc__keep(gc, held);
	store_gc__keep(gc, held);
	/* Adding and interning go on: a bucket names the late stack, nothing the lonely one, and
	 * the plan does not cover ids interned after it. */
	late = store__intern_stack(s, (uint32_t[]){fa, fb}, 2);
	lonely = store__intern_stack(s, &fh, 1);
	CHECK_EQ_U(late, 4);
	CHECK_EQ_U(lonely, 5);
	store_gc__keep(gc, lonely);
	CHECK_EQ_I(store__add(s, 11, 7, 7, late, STORE_VALUE_CPU_SAMPLES, 1), 0);
	CHECK_EQ_I(store__gc_commit(NULL, gc), -EINVAL);
	CHECK_EQ_I(store__gc_commit(s, gc), 0);
	/* Spent. */
	CHECK_EQ_I(store__gc_commit(s, gc), -EINVAL);
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 1);
	CHECK_EQ_U(st.stacks, 3);
	CHECK_EQ_U(store_gc__map(gc, dropped), 0);
	CHECK_EQ_U(store_gc__map(gc, used), 1);
	CHECK_EQ_U(store_gc__map(gc, held), 2);
	CHECK_EQ_U(store_gc__map(gc, late), 3);
	CHECK_EQ_U(store_gc__map(gc, lonely), 0);
	CHECK_EQ_U(store_gc__map(gc, 0), 0);
	CHECK_EQ_U(store_gc__map(gc, 100000), 0);
	CHECK(names_are(s, 2, "held", "b"));
	store_gc__free(gc);
	/* The next plan is allowed; what only the holder kept goes without it. */
	CHECK_EQ_I(store__compact(s), 0);
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 2);
	CHECK_EQ_U(st.stacks, 2);

	/* An abandoned plan lets go of its keeps and moves nothing. */
	spare = stack1(s, "spare", 9);
	CHECK(spare != 0);
	dead = s->in.dead_bytes;
	gc = store__gc_plan(s);
	CHECK(gc != NULL);
	store_gc__keep(gc, spare);
	CHECK(s->in.dead_bytes < dead);
	store_gc__free(gc);
	CHECK_EQ_U(s->in.dead_bytes, dead);
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 2);

	/* A commit with nothing to drop changes no id: the map is the identity. */
	gc2 = store__gc_plan(s);
	CHECK(gc2 != NULL);
	store_gc__keep(gc2, spare);
	CHECK_EQ_I(store__gc_commit(s, gc2), 0);
	CHECK_EQ_U(store_gc__map(gc2, spare), spare);
	CHECK_EQ_U(store_gc__map(gc2, 1), 1);
	store_gc__free(gc2);
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 2);
	CHECK_EQ_U(st.compactions, 2);
	store_gc__free(NULL);
	store__free(s);
}

/*
 * Adding evicts but never renumbers: an id stays valid across any number of adds. Dead interned
 * data waiting for the tick is no reason to evict live buckets; the tick then reclaims it.
 */
static void test_add_keeps_ids(void)
{
	const size_t cap = 256 * 1024;
	struct store *s = store__new(&(struct store_opts){.mem_cap = cap, .bucket_ns = SEC});
	struct store_stats st;
	char name[600];
	uint32_t f, kept, stk;
	uint64_t sec = 0, evicted;
	unsigned int due = 0;

	f = frame(s, "kept", 1);
	kept = store__intern_stack(s, &f, 1);
	/* Ever new stacks with long names: eviction kills them, nothing compacts. */
	for (unsigned int round = 0; round < 600; round++, sec++) {
		memset(name, 'x', 500);
		snprintf(name + 500, 100, "new%u", round);
		f = frame(s, name, 1000 + round);
		stk = store__intern_stack(s, &f, 1);
		CHECK(stk != 0);
		CHECK_EQ_I(store__add(s, sec * SEC, 2, 2, stk, STORE_VALUE_CPU_SAMPLES, 1), 0);
		CHECK_EQ_I(store__add(s, sec * SEC, 2, 2, kept, STORE_VALUE_CPU_SAMPLES, 1), 0);
		CHECK(within_cap(s));
		due += store__compact_due(s);
	}
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 0);
	CHECK_EQ_U(st.compactions, 0);
	CHECK(st.evicted_buckets > 0);
	CHECK(due > 0);
	CHECK(store__stack(s, kept, &(const uint32_t *){NULL}, &(size_t){0}));
	CHECK_STREQ(store__frame(s, 1)->name, "kept");
	/* The tick reclaims the dead and brings the store back under its cap. */
	tick(s);
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 1);
	CHECK(st.bytes <= cap);
	CHECK(!store__compact_due(s));

	/* Dead data alone over the cap: add evicts nothing, the tick reclaims it. */
	evicted = st.evicted_buckets;
	for (unsigned int k = 0; st.bytes <= cap + cap / 4 && k < 2000; k++) {
		memset(name, 'd', 500);
		snprintf(name + 500, 100, "dead%u", k);
		f = frame(s, name, 5000 + k);
		CHECK(store__intern_stack(s, &f, 1) != 0);
		store__stats(s, &st);
	}
	CHECK(st.bytes > cap);
	CHECK_EQ_I(store__add(s, sec * SEC, 2, 2, 1, STORE_VALUE_CPU_SAMPLES, 1), 0);
	store__stats(s, &st);
	CHECK_EQ_U(st.evicted_buckets, evicted);
	CHECK_EQ_U(st.generation, 1);
	CHECK(store__compact_due(s));
	tick(s);
	store__stats(s, &st);
	CHECK_EQ_U(st.generation, 2);
	CHECK_EQ_U(st.evicted_buckets, evicted);
	CHECK(st.bytes <= cap);
	store__free(s);
}

/*
 * Compaction on the tick with a holder that keeps a large share of the cap dead: the held stacks
 * follow every renumbering, and what they keep does not make compaction due on every tick.
 */
static void test_gc_holder_auto(void)
{
	const size_t cap = 256 * 1024;
	struct store *s = store__new(&(struct store_opts){.mem_cap = cap, .bucket_ns = SEC});
	struct holder h = {.max_marks = 1000};
	struct store_stats st;
	char name[600];
	uint64_t gen = 0, sec = 0, renumberings = 0, max_bytes = 0;
	unsigned int over = 0;

	/* 40 held stacks of two frames with 500-byte names: ~45 KiB, more than cap / 8. */
	for (unsigned int k = 0; k < 40; k++) {
		uint32_t f[2];

		memset(name, 'h', 500);
		snprintf(name + 500, 100, "held%u", k);
		f[0] = frame(s, name, k);
		snprintf(name + 500, 100, "heldroot%u", k);
		f[1] = frame(s, name, 100 + k);
		h.ids[h.n++] = store__intern_stack(s, f, 2);
	}
	/* Ever new stacks with long names: eviction kills them, compaction reclaims them. */
	for (unsigned int round = 0; round < 4000; round++, sec++) {
		uint32_t f[2], stk;

		memset(name, 'x', 500);
		snprintf(name + 500, 100, "new%u", round);
		f[0] = frame(s, name, 1000 + round);
		f[1] = frame(s, "root", 1);
		stk = store__intern_stack(s, f, 2);
		CHECK(stk != 0);
		CHECK_EQ_I(store__add(s, sec * SEC, 2, 2, stk, STORE_VALUE_CPU_SAMPLES, 1), 0);
		if (!within_cap(s))
			over++;
		tick_held(s, &h);
		/*
		 * A commit evicts what the compaction did not free, which kills stacks only the
		 * next compaction reclaims: over the cap after a tick, but by no more than that.
		 */
		if (!within_cap(s))
			over++;
		store__stats(s, &st);
		if (st.bytes > max_bytes)
			max_bytes = st.bytes;
		if (st.generation != gen) {
			gen = st.generation;
			renumberings++;
		}
	}
	store__stats(s, &st);
	CHECK(!h.runaway);
	CHECK_EQ_U(over, 0);
	CHECK(max_bytes <= cap + cap / 4);
	CHECK(renumberings >= 3);
	/* Each compaction reclaims at least cap/8 of what eviction killed: not one per add. */
	CHECK(st.compactions > 0);
	CHECK(st.compactions < 4000 / 20);
	for (unsigned int k = 0; k < 40; k++) {
		const uint32_t *fr;
		size_t n;
		char want[16];

		snprintf(want, sizeof(want), "held%u", k);
		CHECK(h.ids[k] != 0);
		CHECK(store__stack(s, h.ids[k], &fr, &n));
		if (store__stack(s, h.ids[k], &fr, &n) && n == 2)
			CHECK_STREQ(store__frame(s, fr[0])->name + 500, want);
	}
	store__free(s);
}

/* Parents the daemon saw (forks, execs) or reads from /proc (the callback). */
static uint32_t parent_of_stub(void *ctx, uint32_t pid)
{
	(*(int *)ctx)++;
	return pid == 40 ? 30 : 0;
}

static void test_descendants(void)
{
	struct store *s = store__new(NULL);
	struct store_process_info pi;
	uint32_t *out = NULL;
	size_t n = 0;
	int calls = 0;

	for (uint32_t pid = 10; pid <= 50; pid += 10)
		CHECK_EQ_I(store__set_process(s, pid, 0, "p"), 0);
	CHECK_EQ_I(store__set_process(s, 11, 0, "p"), 0);
	CHECK_EQ_I(store__set_parent(s, 20, 10), 0);
	CHECK_EQ_I(store__set_parent(s, 30, 20), 0);
	CHECK_EQ_I(store__set_parent(s, 50, 11), 0);
	CHECK_EQ_I(store__set_parent(s, 99, 10), -ENOENT);
	CHECK(store__process(s, 30, &pi));
	CHECK_EQ_U(pi.ppid, 20);
	/* An exec keeps the parent. */
	CHECK_EQ_I(store__set_process(s, 30, 0, "new image"), 0);
	CHECK(store__process(s, 30, &pi));
	CHECK_EQ_U(pi.ppid, 20);

	CHECK_EQ_I(store__descendants(s, (uint32_t[]){10}, 1, parent_of_stub, &calls, &out, &n), 0);
	/* 10 itself, 20, 30 (grandchild), 40 (its parent from the callback); not 11 or 50. */
	CHECK_EQ_U(n, 4);
	CHECK(out[0] == 10 && out[1] == 20 && out[2] == 30 && out[3] == 40);
	/* The callback is asked once per process without a known parent (10, 11, 40). */
	CHECK_EQ_I(calls, 3);
	free(out);
	CHECK_EQ_I(store__descendants(s, (uint32_t[]){11, 77}, 2, NULL, NULL, &out, &n), 0);
	CHECK_EQ_U(n, 3);
	CHECK(out[0] == 11 && out[1] == 50 && out[2] == 77);
	free(out);
	store__free(s);
}

struct jrow {
	uint32_t pid, tid, stack;
	enum store_value col;
	uint64_t v;
};

struct jres {
	struct jrow rows[16];
	size_t n;
};

static int journal_collect(uint32_t pid, uint32_t tid, uint32_t stack, enum store_value col,
			   uint64_t value, void *ctx)
{
	struct jres *r = ctx;

	if (r->n == 16)
		return -E2BIG;
	r->rows[r->n++] = (struct jrow){pid, tid, stack, col, value};
	return 0;
}

static uint64_t jvalue(const struct jres *r, uint32_t pid, uint32_t stack, enum store_value col)
{
	for (size_t k = 0; k < r->n; k++)
		if (r->rows[k].pid == pid && r->rows[k].stack == stack && r->rows[k].col == col)
			return r->rows[k].v;
	return UINT64_MAX;
}

/*
 * The export journal: every value once, in the drain after it was added, whatever its time; late
 * values whose bucket was evicted too; stack ids renumbered with the compaction.
 */
static void test_journal(void)
{
	struct store *s = store__new(&(struct store_opts){.bucket_ns = 1000});
	struct jres r = {0};
	uint64_t lost = 99;
	uint32_t dead = stack1(s, "dead", 1), a = stack1(s, "a", 2), b = stack1(s, "b", 3);
	const uint32_t *fr;
	size_t n;

	/* Off: nothing is kept. */
	CHECK_EQ_I(store__add(s, 10, 1, 1, a, STORE_VALUE_CPU_SAMPLES, 5), 0);
	CHECK_EQ_I(store__journal_drain(s, journal_collect, &r, &lost), 0);
	CHECK_EQ_U(r.n, 0);
	CHECK_EQ_U(lost, 0);

	store__journal_enable(s, true);
	CHECK_EQ_I(store__add(s, 10, 1, 1, a, STORE_VALUE_CPU_SAMPLES, 2), 0);
	CHECK_EQ_I(store__add(s, 5000, 1, 1, a, STORE_VALUE_CPU_SAMPLES, 3), 0);
	CHECK_EQ_I(store__add(s, 20, 2, 2, b, STORE_VALUE_GPU_NS, 700), 0);
	CHECK_EQ_I(store__add_span(s, 0, 2500, 2, 2, b, STORE_VALUE_OFFCPU_NS, NULL, NULL), 0);
	CHECK_EQ_I(store__journal_drain(s, journal_collect, &r, NULL), 0);
	CHECK_EQ_U(r.n, 3);
	CHECK_EQ_U(jvalue(&r, 1, a, STORE_VALUE_CPU_SAMPLES), 5);
	CHECK_EQ_U(jvalue(&r, 2, b, STORE_VALUE_GPU_NS), 700);
	CHECK_EQ_U(jvalue(&r, 2, b, STORE_VALUE_OFFCPU_NS), 2500);
	/* Drained: the next drain has only what came after. */
	r.n = 0;
	CHECK_EQ_I(store__journal_drain(s, journal_collect, &r, NULL), 0);
	CHECK_EQ_U(r.n, 0);

	/* Late data for an evicted bucket is evicted from the buckets, not from the journal. */
	s->has_evicted = true;
	s->evicted_upto = 3;
	CHECK_EQ_I(store__add(s, 100, 3, 3, a, STORE_VALUE_CPU_SAMPLES, 4), 0);
	CHECK_EQ_I(store__journal_drain(s, journal_collect, &r, NULL), 0);
	CHECK_EQ_U(jvalue(&r, 3, a, STORE_VALUE_CPU_SAMPLES), 4);

	/* Compaction renumbers the journal's stacks: "dead" goes, b becomes id 2... */
	CHECK_EQ_I(store__add(s, 6000, 4, 4, b, STORE_VALUE_CPU_SAMPLES, 9), 0);
	r.n = 0;
	(void)dead;
	CHECK_EQ_I(store__compact(s), 0);
	CHECK_EQ_I(store__journal_drain(s, journal_collect, &r, NULL), 0);
	CHECK_EQ_U(r.n, 1);
	CHECK(store__stack(s, r.rows[0].stack, &fr, &n) && n == 1);
	CHECK_STREQ(store__frame(s, fr[0])->name, "b");
	CHECK_EQ_U(r.rows[0].v, 9);

	/* Off drops what it holds and releases its stack references. */
	CHECK_EQ_I(store__add(s, 6001, 4, 4, r.rows[0].stack, STORE_VALUE_CPU_SAMPLES, 1), 0);
	store__journal_enable(s, false);
	r.n = 0;
	CHECK_EQ_I(store__journal_drain(s, journal_collect, &r, NULL), 0);
	CHECK_EQ_U(r.n, 0);
	store__free(s);
}

int main(void)
{
	test_journal();
	test_descendants();
	test_intern();
	test_ranges();
	test_filters();
	test_pid_reuse();
	test_process_lives();
	test_process_lives_wrap();
	test_out_of_order();
	test_eviction();
	test_compact_explicit();
	test_compact_auto();
	test_bounded();
	test_processes();
	test_value_types();
	test_columns();
	test_columns_many();
	test_columns_evicted();
	test_saturate();
	test_gc_holder();
	test_gc_plan();
	test_add_keeps_ids();
	test_gc_holder_auto();
	return CHECK_DONE();
}
