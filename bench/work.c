// SPDX-License-Identifier: BSD-2-Clause
/*
 * Benchmark workload: a fixed amount of CPU work (not a fixed time) with the same call chain and
 * 75/25 split as the test fixture: main;run;work_a;spin_a and main;run;work_b;spin_b, split by
 * iteration counts. Prints its wall time in seconds. Usage: work ROUNDS (about 4-5 ms each)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

/*
 * The counter lives on the stack (volatile) so that the compiler gives these leaf functions a
 * frame: a leaf that touches no stack gets no frame pointer even with -fno-omit-frame-pointer,
 * and a frame-pointer unwinder then skips its caller (work_a/work_b) in every sample.
 */
__attribute__((noinline)) void spin_a(long n)
{
	for (volatile long i = 0; i < n; i++)
		sink += i;
}

__attribute__((noinline)) void spin_b(long n)
{
	for (volatile long i = 0; i < n; i++)
		sink += i;
}

__attribute__((noinline)) void work_a(void)
{
	spin_a(3000000);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void work_b(void)
{
	spin_b(1000000);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void run(long rounds)
{
	for (long r = 0; r < rounds; r++) {
		work_a();
		work_b();
	}
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	long rounds = 300;
	struct timespec t0, t1;
	char *end;

	if (argc > 2)
		goto usage;
	if (argc == 2) {
		errno = 0;
		rounds = strtol(argv[1], &end, 10);
		if (errno || end == argv[1] || *end || rounds < 1 || rounds > 1000000)
			goto usage;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	run(rounds);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%.6f\n", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
usage:
	fprintf(stderr, "usage: work ROUNDS (1..1000000)\n");
	return 2;
}
