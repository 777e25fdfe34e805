// SPDX-License-Identifier: BSD-2-Clause
/*
 * Store and dump benchmark: one synthetic hour of system-wide sampling at 99 Hz on 2 CPUs
 * (712,800 samples) with a realistic mix: 200 processes of 1-8 threads with skewed activity,
 * 5,000 distinct stacks of depth 8-40 built from shared library/kernel frames and per-process
 * frames, timestamps slightly out of order as per-CPU ring buffers deliver them.
 *
 * Reports ns per store__add (with and without interning the stack, as ingest does per sample),
 * query, dump and pack times (median of runs), accounted and real heap memory. A baseline from
 * the same run: one pass over the raw samples summing values into a flat array indexed by stack,
 * the least any aggregation must do.
 *
 * Usage: bench_store [seconds_of_data] [runs]
 */
#include "dump.h"
#include "store.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NPROC 200
#define NSTACK 5000
#define NSHARED 2000
#define PER_PROC_FRAMES 60
#define HZ 99
#define NCPU 2

struct sample {
	uint64_t ts;
	uint32_t pid;
	uint32_t tid;
	uint32_t stack; /* index into the synthetic stacks */
};

struct syn_stack {
	uint32_t n;
	uint32_t proc;
	uint64_t frames[40]; /* synthetic frame numbers */
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Index drawn from weights 1/(i+1) (Zipf, s = 1) over a cumulative table. */
static uint32_t zipf_pick(const double *cum, uint32_t n)
{
	double x = (double)(rnd() >> 11) / 9007199254740992.0 * cum[n - 1];
	uint32_t lo = 0, hi = n - 1;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (cum[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int count_row(uint32_t pid, uint32_t tid, uint32_t stack,
		     const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	(*(uint64_t *)ctx)++;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

static void frame_key_of(uint64_t fno, struct frame_key *k, char *name, size_t namelen)
{
	static const char *const shared_mods[] = {
	    "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
	    "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", "[kernel.kallsyms]"};
	static char mod[64];

	memset(k, 0, sizeof(*k));
	if (fno < NSHARED) {
		snprintf(name, namelen, "shared_function_with_a_longish_name_%" PRIu64, fno);
		k->kind = fno % 4 == 3 ? FRAME_KIND_KERNEL : FRAME_KIND_NATIVE;
		k->module = shared_mods[fno % 4];
		k->build_id = fno % 4 == 3 ? NULL : "4f1c0a3b9e2d7c6a5b4f3e2d1c0b9a8f7e6d5c4b";
	} else {
		uint64_t proc = (fno - NSHARED) / PER_PROC_FRAMES;

		snprintf(name, namelen, "app%" PRIu64 "::module::Class::method_%" PRIu64, proc,
			 fno);
		snprintf(mod, sizeof(mod), "/opt/app%" PRIu64 "/bin/app", proc);
		k->kind = FRAME_KIND_NATIVE;
		k->module = mod;
	}
	k->name = name;
	k->address = 0x1000 + fno * 16;
}

int main(int argc, char **argv)
{
	uint64_t seconds = argc > 1 ? strtoull(argv[1], NULL, 10) : 3600;
	int runs = argc > 2 ? (int)strtoul(argv[2], NULL, 10) : 5;
	size_t nsamples = seconds * HZ * NCPU;
	struct syn_stack *stacks = calloc(NSTACK, sizeof(*stacks));
	struct sample *samples = malloc(nsamples * sizeof(*samples));
	uint32_t nthreads[NPROC], *stack_ids = calloc(NSTACK, sizeof(uint32_t));
	uint32_t *proc_first = calloc(NPROC + 1, sizeof(uint32_t));
	double proc_cum[NPROC], *stack_cum = malloc(NSTACK * sizeof(double));
	uint64_t *t_query = calloc(runs, 8), *t_dump = calloc(runs, 8), *t_pack = calloc(runs, 8);
	uint64_t *t_base = calloc(runs, 8), t0, t_add, t_add_intern;
	struct store_stats st;
	struct store *s;
	struct mallinfo2 mi0, mi1;
	size_t packed = 0;
	char name[160];

	if (!stacks || !samples || !stack_ids || !stack_cum || !proc_first || runs < 1 ||
	    seconds < 1)
		return 1;

	/* Processes own contiguous stack ranges, sized by activity. */
	for (uint32_t p = 0; p < NPROC; p++) {
		proc_cum[p] = (p ? proc_cum[p - 1] : 0) + 1.0 / (p + 1);
		nthreads[p] = 1 + (uint32_t)(rnd() % 8);
	}
	for (uint32_t p = 0, next = 0; p < NPROC; p++) {
		uint32_t share = (uint32_t)(NSTACK * (1.0 / (p + 1)) / proc_cum[NPROC - 1]);

		if (share < 5)
			share = 5;
		proc_first[p] = next < NSTACK ? next : NSTACK - 5;
		next += share;
	}
	proc_first[NPROC] = NSTACK;
	for (uint32_t p = 0; p < NPROC; p++)
		if (proc_first[p + 1] <= proc_first[p])
			proc_first[p + 1] =
			    proc_first[p] + 1 <= NSTACK ? proc_first[p] + 1 : NSTACK;
	for (uint32_t i = 0; i < NSTACK; i++) {
		uint32_t p = 0;

		while (p + 1 < NPROC && proc_first[p + 1] <= i)
			p++;
		stacks[i].proc = p;
		stacks[i].n = 8 + (uint32_t)(rnd() % 33);
		for (uint32_t j = 0; j < stacks[i].n; j++) {
			/* Leaf half in the process's own code, root half in shared code. */
			if (j < stacks[i].n / 2)
				stacks[i].frames[j] =
				    NSHARED + p * PER_PROC_FRAMES + rnd() % PER_PROC_FRAMES;
			else
				stacks[i].frames[j] = rnd() % NSHARED;
		}
		stack_cum[i] =
		    (i > proc_first[p] ? stack_cum[i - 1] : 0) + 1.0 / (i - proc_first[p] + 1);
	}
	for (size_t k = 0; k < nsamples; k++) {
		uint32_t p = zipf_pick(proc_cum, NPROC), first = proc_first[p];
		uint32_t n = proc_first[p + 1] - first;
		/* Per-CPU delivery: a few ms of disorder. */
		uint64_t ts = (uint64_t)k * 1000000000ull / (HZ * NCPU) + 1000000000ull;

		if (k % NCPU)
			ts -= rnd() % 3000000;
		samples[k].ts = ts;
		samples[k].pid = 1000 + p;
		samples[k].tid = 1000 + p + (uint32_t)(rnd() % nthreads[p]) * 100000;
		samples[k].stack = first + zipf_pick(stack_cum + first, n);
	}

	mi0 = mallinfo2();
	s = store__new(NULL);
	for (uint32_t p = 0; p < NPROC; p++) {
		snprintf(name, sizeof(name), "proc%u", p);
		store__set_process(s, 1000 + p, p % 3 ? 1000 : 0, name);
		for (uint32_t t = 0; t < nthreads[p]; t++) {
			snprintf(name, sizeof(name), "proc%u-t%u", p, t);
			store__set_thread(s, 1000 + p, 1000 + p + t * 100000, name);
		}
	}
	/* Intern once per stack like a warm ingest cache, then add. */
	for (uint32_t i = 0; i < NSTACK; i++) {
		uint32_t f[40];

		for (uint32_t j = 0; j < stacks[i].n; j++) {
			struct frame_key k;

			frame_key_of(stacks[i].frames[j], &k, name, sizeof(name));
			f[j] = store__intern_frame(s, &k);
		}
		stack_ids[i] = store__intern_stack(s, f, stacks[i].n);
	}
	t0 = now_ns();
	for (size_t k = 0; k < nsamples; k++)
		store__add(s, samples[k].ts, samples[k].pid, samples[k].tid,
			   stack_ids[samples[k].stack], STORE_VALUE_CPU_SAMPLES, 1);
	t_add = now_ns() - t0;
	mi1 = mallinfo2();
	store__stats(s, &st);

	for (int r = 0; r < runs; r++) {
		struct store_query q = {.start_ns = 0, .end_ns = UINT64_MAX};
		Profd__Profile *p = NULL;
		uint64_t sum = 0, *flat = calloc(NSTACK + 1, 8);
		uint8_t *buf;
		int err;

		t0 = now_ns();
		for (size_t k = 0; k < nsamples; k++)
			flat[stack_ids[samples[k].stack]]++;
		t_base[r] = now_ns() - t0;
		for (size_t k = 0; k <= NSTACK; k++)
			sum += flat[k];
		free(flat);
		if (sum != nsamples)
			return 2;

		t0 = now_ns();
		err = dump__build(s, &q, NULL, &p);
		t_dump[r] = now_ns() - t0;
		if (err)
			return 3;
		t0 = now_ns();
		packed = profd__profile__get_packed_size(p);
		buf = malloc(packed);
		profd__profile__pack(p, buf);
		t_pack[r] = now_ns() - t0;
		free(buf);
		if (r == 0)
			printf(
			    "profile: %zu samples, %zu stacks, %zu frames, %zu strings, %zu bytes "
			    "packed\n",
			    p->n_samples, p->n_stacks, p->n_frames, p->n_strings, packed);
		dump__free(p);
	}
	for (int r = 0; r < runs; r++) {
		struct store_query q = {.start_ns = 0, .end_ns = UINT64_MAX};
		uint64_t cnt = 0;

		t0 = now_ns();
		store__query(s, &q, count_row, &cnt);
		t_query[r] = now_ns() - t0;
	}
	store__free(s);

	/* The ingest path: intern the stack from its frame ids each sample, then add. */
	s = store__new(NULL);
	{
		uint32_t(*fids)[40] = malloc(NSTACK * sizeof(*fids));

		for (uint32_t i = 0; i < NSTACK; i++)
			for (uint32_t j = 0; j < stacks[i].n; j++) {
				struct frame_key k;

				frame_key_of(stacks[i].frames[j], &k, name, sizeof(name));
				fids[i][j] = store__intern_frame(s, &k);
			}
		t0 = now_ns();
		for (size_t k = 0; k < nsamples; k++) {
			uint32_t i = samples[k].stack;
			uint32_t id = store__intern_stack(s, fids[i], stacks[i].n);

			store__add(s, samples[k].ts, samples[k].pid, samples[k].tid, id,
				   STORE_VALUE_CPU_SAMPLES, 1);
		}
		t_add_intern = now_ns() - t0;
		free(fids);
	}
	store__free(s);

	printf("data: %" PRIu64 " s, %zu samples, %d processes, %" PRIu64 " stacks, %" PRIu64
	       " frames, %" PRIu64 " buckets\n",
	       seconds, nsamples, NPROC, st.stacks, st.frames, st.buckets);
	printf("store__add: %.1f ns/sample; intern_stack + add: %.1f ns/sample\n",
	       (double)t_add / nsamples, (double)t_add_intern / nsamples);
	printf("memory: accounted %.1f MiB, heap in use %.1f MiB (ratio %.2f)\n",
	       st.bytes / 1048576.0,
	       (mi1.uordblks + mi1.hblkhd - mi0.uordblks - mi0.hblkhd) / 1048576.0,
	       (double)st.bytes / (double)(mi1.uordblks + mi1.hblkhd - mi0.uordblks - mi0.hblkhd));
	printf("median of %d: baseline flat pass %.2f ms, query %.2f ms (%.1fx baseline), "
	       "dump__build %.2f ms, pack %.2f ms, dump+pack %.2f ms\n",
	       runs, median(t_base, runs) / 1e6, median(t_query, runs) / 1e6,
	       (double)median(t_query, runs) / median(t_base, runs), median(t_dump, runs) / 1e6,
	       median(t_pack, runs) / 1e6, (median(t_dump, runs) + median(t_pack, runs)) / 1e6);
	free(stacks);
	free(samples);
	free(stack_ids);
	free(stack_cum);
	free(proc_first);
	free(t_query);
	free(t_dump);
	free(t_pack);
	free(t_base);
	return 0;
}
