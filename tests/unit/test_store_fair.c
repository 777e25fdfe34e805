// SPDX-License-Identifier: BSD-2-Clause
/*
 * The store's fairness between users under its cap (daemon/store/fair.c): one user flooding the
 * store loses its own oldest data, another user's history stays whole; users of about equal
 * weight share the oldest-first order.
 */
#include "check.h"
#include "store.h"
#include "store_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#define SEC 1000000000ull
#define ALICE 1001
#define BOB 1002

struct sums {
	uint64_t by_pid[16];
};

static int sum_cb(uint32_t pid, uint32_t tid, uint32_t stack,
		  const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct sums *r = ctx;

	(void)tid;
	(void)stack;
	if (pid < 16)
		r->by_pid[pid] += values[STORE_VALUE_CPU_SAMPLES];
	return 0;
}

static void sums_of(struct store *s, struct sums *r)
{
	struct store_query q = {.start_ns = 0, .end_ns = UINT64_MAX};

	memset(r, 0, sizeof(*r));
	CHECK_EQ_I(store__query(s, &q, sum_cb, r), 0);
}

static uint32_t stack_named(struct store *s, const char *name)
{
	struct frame_key k = {.kind = FRAME_KIND_NATIVE, .name = name, .module = "/bin/app"};
	uint32_t f = store__intern_frame(s, &k);

	return f ? store__intern_stack(s, &f, 1) : 0;
}

/*
 * Bob's history (pid 2), then Alice's flood (pids 3-10) of ever new stacks, many times the cap:
 * every one of Bob's samples survives, Alice's oldest go, and the store keeps its cap.
 */
static void test_flood_spares_others(void)
{
	const size_t cap = 256 * 1024;
	struct store *s = store__new(&(struct store_opts){.mem_cap = cap, .bucket_ns = SEC});
	uint32_t bob_stacks[8];
	struct store_stats st;
	struct sums r;
	uint64_t bob = 0, alice = 0;

	CHECK(s != NULL);
	CHECK_EQ_I(store__set_process(s, 2, BOB, "bob"), 0);
	for (uint32_t pid = 3; pid <= 10; pid++)
		CHECK_EQ_I(store__set_process(s, pid, ALICE, "alice"), 0);
	for (int k = 0; k < 8; k++) {
		char name[32];

		snprintf(name, sizeof(name), "bob_fn%d", k);
		bob_stacks[k] = stack_named(s, name);
		CHECK(bob_stacks[k] != 0);
	}
	/* 20 s of Bob: 8 stacks x 2 threads, 3 samples each a second. */
	for (uint64_t sec = 0; sec < 20; sec++)
		for (int k = 0; k < 16; k++) {
			CHECK_EQ_I(store__add(s, sec * SEC + (uint64_t)k, 2, 2 + (uint32_t)(k & 1),
					      bob_stacks[k / 2], STORE_VALUE_CPU_SAMPLES, 3),
				   0);
			bob += 3;
		}
	/* 40 s of Alice afterwards, each sample a new stack: the store must evict many times. */
	for (uint64_t sec = 20; sec < 60; sec++) {
		for (int k = 0; k < 400; k++) {
			char name[48];
			uint32_t id;

			snprintf(name, sizeof(name), "alice_%llu_%d", (unsigned long long)sec, k);
			id = stack_named(s, name);
			CHECK(id != 0);
			CHECK_EQ_I(store__add(s, sec * SEC + (uint64_t)k, 3 + (uint32_t)(k % 8),
					      3 + (uint32_t)(k % 8), id, STORE_VALUE_CPU_SAMPLES,
					      1),
				   0);
			alice++;
			/* What the daemon's tick does: compact when due. */
			if (store__compact_due(s))
				CHECK_EQ_I(store__compact(s), 0);
			CHECK(s->bytes <= s->cap + store_reclaimable(s));
		}
	}
	store__stats(s, &st);
	sums_of(s, &r);
	fprintf(stderr, "bob %llu of %llu kept, alice %llu of %llu, %llu over share\n",
		(unsigned long long)r.by_pid[2], (unsigned long long)bob,
		(unsigned long long)(st.samples - st.evicted_samples - r.by_pid[2]),
		(unsigned long long)alice, (unsigned long long)st.evicted_over_share);
	/* The flood did press the store: Alice lost data, all of it by the share rule. */
	CHECK(st.evicted_samples > alice / 2);
	CHECK(st.evicted_over_share > 0);
	CHECK_EQ_U(r.by_pid[2], bob);
	/* The newest second of Alice is there. */
	{
		struct store_query q = {.start_ns = 59 * SEC, .end_ns = 60 * SEC};
		uint64_t newest = 0;

		memset(&r, 0, sizeof(r));
		CHECK_EQ_I(store__query(s, &q, sum_cb, &r), 0);
		for (uint32_t pid = 3; pid <= 10; pid++)
			newest += r.by_pid[pid];
		CHECK_EQ_U(newest, 400);
	}
	store__free(s);
}

/*
 * Alice's flood on a few stacks only: evicting her entries frees no interned data, only the
 * entries themselves, from sealed buckets as well as open ones. Bob's history stays whole, and
 * the store keeps its cap without the next compaction's help.
 */
static void test_flood_same_stacks(void)
{
	const size_t cap = 256 * 1024;
	struct store *s = store__new(&(struct store_opts){.mem_cap = cap, .bucket_ns = SEC});
	uint32_t st[4], bob_st;
	struct store_stats stats;
	struct sums r;
	uint64_t bob = 0;

	CHECK(s != NULL);
	CHECK_EQ_I(store__set_process(s, 2, BOB, "bob"), 0);
	for (uint32_t pid = 3; pid <= 10; pid++)
		CHECK_EQ_I(store__set_process(s, pid, ALICE, "alice"), 0);
	bob_st = stack_named(s, "bob_fn");
	for (int k = 0; k < 4; k++) {
		char name[32];

		snprintf(name, sizeof(name), "alice_fn%d", k);
		st[k] = stack_named(s, name);
	}
	/*
	 * Bob all along, 8 entries a second; Alice from the 10th second, 1600 entries a second
	 * (38 KiB) for 50 s, 7 times the cap: her oldest buckets hold Bob's entries too, sealed.
	 */
	for (uint64_t sec = 0; sec < 60; sec++) {
		for (uint32_t tid = 2; tid < 10; tid++) {
			CHECK_EQ_I(
			    store__add(s, sec * SEC, 2, tid, bob_st, STORE_VALUE_CPU_SAMPLES, 1),
			    0);
			bob++;
		}
		for (uint32_t k = 0; sec >= 10 && k < 1600; k++) {
			CHECK_EQ_I(store__add(s, sec * SEC + k, 3 + k % 8, 100 + k / 32, st[k % 4],
					      STORE_VALUE_CPU_SAMPLES, 1),
				   0);
			CHECK(s->bytes <= s->cap);
		}
	}
	store__stats(s, &stats);
	sums_of(s, &r);
	CHECK(stats.evicted_over_share > 0);
	CHECK_EQ_U(r.by_pid[2], bob);
	store__free(s);
}

/*
 * Two users of equal weight: neither is over its share, so the oldest buckets go as they
 * always did, both users' data in them, and what is left is a contiguous newest run.
 */
static void test_equal_users_oldest_first(void)
{
	const size_t cap = 48 * 1024;
	struct store *s = store__new(&(struct store_opts){.mem_cap = cap, .bucket_ns = SEC});
	uint32_t stacks[20];
	struct store_stats st;
	const unsigned int nbuckets = 200;

	CHECK(s != NULL);
	CHECK_EQ_I(store__set_process(s, 2, BOB, "bob"), 0);
	CHECK_EQ_I(store__set_process(s, 3, ALICE, "alice"), 0);
	for (int k = 0; k < 20; k++) {
		char name[32];

		snprintf(name, sizeof(name), "fn%d", k);
		stacks[k] = stack_named(s, name);
	}
	for (unsigned int sec = 0; sec < nbuckets; sec++)
		for (unsigned int k = 0; k < 40; k++)
			CHECK_EQ_I(store__add(s, sec * SEC + k, 2 + k % 2, 1 + k % 4,
					      stacks[(sec + k / 2) % 20], STORE_VALUE_CPU_SAMPLES,
					      1),
				   0);
	store__stats(s, &st);
	CHECK(st.evicted_buckets > 0);
	CHECK_EQ_U(st.evicted_over_share, 0);
	CHECK_EQ_U(st.evicted_buckets + st.buckets, nbuckets);
	CHECK_EQ_U(st.oldest_ns, (nbuckets - st.buckets) * SEC);
	store__free(s);
}

/* A user's entries are counted while the buckets hold them, and no longer. */
static void test_counts_follow_entries(void)
{
	const size_t cap = 1 << 20;
	struct store *s = store__new(&(struct store_opts){.mem_cap = cap, .bucket_ns = SEC});
	uint32_t a, b;

	CHECK(s != NULL);
	CHECK_EQ_I(store__set_process(s, 2, BOB, "bob"), 0);
	CHECK_EQ_I(store__set_process(s, 3, ALICE, "alice"), 0);
	a = stack_named(s, "a");
	b = stack_named(s, "b");
	/* The same key twice is one entry; another column is another. */
	CHECK_EQ_I(store__add(s, 1, 2, 2, a, STORE_VALUE_CPU_SAMPLES, 1), 0);
	CHECK_EQ_I(store__add(s, 2, 2, 2, a, STORE_VALUE_CPU_SAMPLES, 1), 0);
	CHECK_EQ_I(store__add(s, 3, 2, 2, a, STORE_VALUE_OFFCPU_NS, 5), 0);
	CHECK_EQ_I(store__add(s, 4, 3, 3, b, STORE_VALUE_CPU_SAMPLES, 1), 0);
	CHECK_EQ_U(s->nentries, 3);
	CHECK_EQ_U(s->uids.n, 2);
	/* The journal is not the buckets. */
	store__journal_enable(s, true);
	CHECK_EQ_I(store__add(s, SEC + 1, 3, 3, b, STORE_VALUE_CPU_SAMPLES, 1), 0);
	CHECK_EQ_U(s->nentries, 4);
	store__journal_enable(s, false);
	store__free(s);
}

int main(void)
{
	test_counts_follow_entries();
	test_equal_users_oldest_first();
	test_flood_spares_others();
	test_flood_same_stacks();
	return CHECK_DONE();
}
