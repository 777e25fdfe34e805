// SPDX-License-Identifier: BSD-2-Clause
/*
 * CPU cost of one CUDA kernel launch as libprofd_cupti.so adds it, without a GPU: the program
 * plays CUDA's part over the fake libcupti (the launch callback at API enter and exit of
 * __cudaLaunchKernel), from a chain of a few frames so that the probe's stack capture has
 * something to walk. It measures the callback pair only: no driver, no real CUPTI, no GPU.
 *
 * Usage: bench_launch [--inject LIBPROFD_CUPTI] [--wait-enabled] [--depth N] ITERS REPS
 *
 * Without --inject the library is not loaded and the fake invokes nothing (the cost of CUDA
 * without a profiler, as far as this program can play it). With it, the library is loaded as
 * CUDA loads it; --wait-enabled then waits until a daemon has enabled collection. --depth N
 * puts N more frames between the loop and the launch (default 0), for a stack as deep as a
 * framework's: the probe's stack capture walks every frame.
 *
 * The program talks with its caller in lines: it prints "pid PID" and waits for a line on
 * stdin before loading the library (so that a daemon for this pid can be started first and the
 * library finds it at its first connect); prints "ready" and waits for another line (so that
 * the caller can read the daemon's counters right before the timed part); then makes one
 * untimed warm-up of ITERS/10 launches and REPS timed repetitions of ITERS launches each, one
 * line per repetition:
 *   rep I THREAD_CPU_NS_PER_LAUNCH WALL_NS_PER_LAUNCH
 * then "clock NS": the thread CPU time of one clock_gettime(CLOCK_MONOTONIC) here (the token
 * bucket reads that clock at every launch), and "done N" at the end (N: the launches made, warm-up
 * included). Environment as for CUDA with the library: PROFD_CUPTI_PATH (the fake libcupti,
 * which this program also links), PROFD_SOCKET, PROFD_CUPTI_LAUNCH_RATE.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "fake_cupti.h"

#define ENABLE_TIMEOUT_NS 30000000000ull

static uint32_t next_corr = 1;

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What CUDA does around a launch: the subscriber's callback at enter, then at exit. */
__attribute__((noinline)) void launch_kernel(const char *symbol)
{
	uint32_t corr = next_corr++;

	fake_cupti_invoke_callback(CUPTI_CB_DOMAIN_RUNTIME_API,
				   CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
				   CUPTI_API_ENTER, corr, symbol);
	fake_cupti_invoke_callback(CUPTI_CB_DOMAIN_RUNTIME_API,
				   CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
				   CUPTI_API_EXIT, corr, symbol);
	__asm__ volatile("" ::: "memory");
}

/* A model's layers above the launch; the barriers keep each a real frame (no tail calls). */
__attribute__((noinline)) void layer_forward(void)
{
	launch_kernel("_Z6matmulPfS_i");
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void block_forward(void)
{
	layer_forward();
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void model_forward(void)
{
	block_forward();
	__asm__ volatile("" ::: "memory");
}

static unsigned depth;

__attribute__((noinline)) void nest(unsigned d)
{
	if (d)
		nest(d - 1);
	else
		model_forward();
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void run_launches(uint64_t n)
{
	uint64_t i;

	for (i = 0; i < n; i++)
		nest(depth);
	__asm__ volatile("" ::: "memory");
}

/* ns of thread CPU per clock_gettime(CLOCK_MONOTONIC), as a yardstick for the launch figures. */
static double clock_cost(uint64_t n)
{
	uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), i;
	volatile uint64_t sink = 0;

	for (i = 0; i < n; i++)
		sink += clock_ns(CLOCK_MONOTONIC);
	(void)sink;
	return (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / n;
}

static int inject(const char *path, int wait_enabled)
{
	int (*init)(void);
	uint64_t t0;
	void *lib;

	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "bench_launch: %s\n", dlerror());
		return -1;
	}
	init = (int (*)(void))dlsym(lib, "InitializeInjection");
	if (!init || init() != 1) {
		fprintf(stderr, "bench_launch: InitializeInjection failed\n");
		return -1;
	}
	if (!wait_enabled)
		return 0;
	/* The daemon enables collection once it has attached the launch probe. */
	t0 = clock_ns(CLOCK_MONOTONIC);
	while (!fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {
		if (clock_ns(CLOCK_MONOTONIC) - t0 > ENABLE_TIMEOUT_NS) {
			fprintf(stderr, "bench_launch: collection was never enabled\n");
			return -1;
		}
		usleep(10000);
	}
	return 0;
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s[0] || s[0] == '-')
		return -1;
	*v = strtoull(s, &end, 10);
	return *end || !*v ? -1 : 0;
}

int main(int argc, char **argv)
{
	const char *lib = NULL;
	const char *depth_arg = "0";
	uint64_t iters, reps, r;
	char *end;
	int wait_enabled = 0, i;
	char line[16];

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--inject") && i + 1 < argc)
			lib = argv[++i];
		else if (!strcmp(argv[i], "--wait-enabled"))
			wait_enabled = 1;
		else if (!strcmp(argv[i], "--depth") && i + 1 < argc)
			depth_arg = argv[++i];
		else
			break;
	}
	depth = (unsigned)strtoul(depth_arg, &end, 10);
	if (argc - i != 2 || parse_u64(argv[i], &iters) || parse_u64(argv[i + 1], &reps) ||
	    (wait_enabled && !lib) || depth_arg[0] < '0' || depth_arg[0] > '9' || *end ||
	    depth > 1000) {
		fprintf(stderr, "usage: bench_launch [--inject LIBPROFD_CUPTI] [--wait-enabled] "
				"[--depth N] ITERS REPS\n");
		return 2;
	}
	printf("pid %d\n", getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	if (lib && inject(lib, wait_enabled))
		return 1;
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;

	run_launches(iters / 10 ? iters / 10 : 1);
	for (r = 0; r < reps; r++) {
		uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), w0 = clock_ns(CLOCK_MONOTONIC);
		uint64_t c1, w1;

		run_launches(iters);
		w1 = clock_ns(CLOCK_MONOTONIC);
		c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		printf("rep %llu %.2f %.2f\n", (unsigned long long)r, (double)(c1 - c0) / iters,
		       (double)(w1 - w0) / iters);
	}
	printf("clock %.2f\n", clock_cost(iters / 4 ? iters / 4 : 1));
	printf("done %llu\n", (unsigned long long)((iters / 10 ? iters / 10 : 1) + iters * reps));
	fflush(stdout);
	return 0;
}
