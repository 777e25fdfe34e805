// SPDX-License-Identifier: BSD-2-Clause
/*
 * Micro-benchmark of the symbolizer's hot path: a "stack" of 30 user addresses (this program and
 * libc) resolved over and over for our own pid, maps and ELF images cached. Baseline in the same
 * run: the same stack after symbolizer__forget_pid() each round (maps re-read, images cached).
 *
 *   bench_symbolize [ROUNDS]      prints ns per frame, median of 7 runs, and the ratio.
 */
#include "parse.h"
#include "symbolize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FRAMES 30
#define RUNS 7

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double run(struct symbolizer *s, const uint64_t *stack, uint64_t rounds, bool forget)
{
	uint32_t pid = (uint32_t)getpid();
	uint64_t t[RUNS], t0, named = 0;
	struct sym_result r;

	for (int k = 0; k < RUNS; k++) {
		t0 = now_ns();
		for (uint64_t i = 0; i < rounds; i++) {
			if (forget)
				symbolizer__forget_pid(s, pid);
			for (int f = 0; f < FRAMES; f++)
				if (!symbolizer__user(s, pid, stack[f], &r) && r.name)
					named++;
		}
		t[k] = now_ns() - t0;
	}
	qsort(t, RUNS, sizeof(t[0]), cmp_u64);
	if (!named)
		fprintf(stderr, "warning: nothing resolved\n");
	return (double)t[RUNS / 2] / (double)(rounds * FRAMES);
}

int main(int argc, char **argv)
{
	/* Code in libc and in this program: two ELF images, like a real stack. */
	void *fns[] = {
	    (void *)printf,   (void *)malloc,  (void *)free,	(void *)strlen,
	    (void *)memcpy,   (void *)qsort,   (void *)fopen,	(void *)fclose,
	    (void *)getpid,   (void *)read,    (void *)write,	(void *)strtoull,
	    (void *)snprintf, (void *)calloc,  (void *)realloc, (void *)main,
	    (void *)run,      (void *)cmp_u64, (void *)now_ns,	(void *)clock_gettime,
	};
	struct symbolizer_opts o = {.no_kernel = true};
	uint64_t rounds = 20000;
	uint64_t stack[FRAMES];
	struct symbolizer *s;
	double hot, cold;

	if (argc > 1 && parse_u64(argv[1], 100, 100000000, &rounds)) {
		fprintf(stderr, "usage: %s [ROUNDS (100..1e8)]\n", argv[0]);
		return 2;
	}
	for (int f = 0; f < FRAMES; f++)
		stack[f] = (uint64_t)(uintptr_t)fns[f % 20] + (uint64_t)(f / 20) * 3;
	s = symbolizer__new(&o);
	if (!s) {
		perror("symbolizer__new");
		return 1;
	}
	hot = run(s, stack, rounds, false);
	cold = run(s, stack, rounds / 100 ? rounds / 100 : 1, true);
	printf("hot path:            %.1f ns/frame (%.2f us per %d-frame stack)\n", hot,
	       hot * FRAMES / 1000.0, FRAMES);
	printf("maps re-read (base): %.1f ns/frame\n", cold);
	printf("ratio base/hot:      %.1fx\n", cold / hot);
	symbolizer__free(s);
	return 0;
}
