// SPDX-License-Identifier: BSD-2-Clause
/*
 * `profctl report`: busy time as the union of kernel intervals (overlaps once, clipped to the
 * window), top kernels and launch sites by GPU time, and the CPU stacks sampled while the GPU
 * was idle, with exact numbers.
 *
 * Trace window [T, T + 10 ms), pid 100, in ms after T:
 *   GPU 0: [1, 3) [2, 4) [4, 4.5) (overlap and touch: [1, 4.5)), [-1, 0.5) (clipped to
 *          [0, 0.5)), [9.5, 11) (clipped to [9.5, 10)), [12, 13) (outside): busy 4.5 ms
 *   GPU 1: [3.5, 6): busy 2.5 ms
 *   both: [0, 0.5) [1, 6) [9.5, 10): busy 6 ms, 60%.
 * Profile, root first:
 *   main;train_step;cudaLaunchKernel(libcudart);sgemm   3 ms, 3 kernels
 *   main;eval_step;cudaLaunchKernel(libcudart);sgemm    1 ms, 1 kernel
 *   main;train_step;cudaLaunchKernel(libcudart);relu    0.5 ms, 2 kernels
 *   main;launch_native;cudaLaunchKernel(libcudart);gemv 0.5 ms, 1 kernel
 *   [nvtx epoch];main;load_batch;read                   cpu 6, idle 4
 *   [nvtx step];main;load_batch;read                    cpu 2, idle 2
 *   main;train_step                                     cpu 10, idle 1
 */
#include "check.h"
#include "profile.h"
#include "profile_fixture.h"
#include "report.h"

#include <errno.h>

#define T 5000000000ull
#define MS(x) ((uint64_t)(T + (x)*1000000.0))

static void build(struct fixture *fx, struct trace_fixture *tx)
{
	fx_init_gpu(fx, 10000000);
	fx_proc(fx, 100, "python3");
	uint32_t mn = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	uint32_t train = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_PYTHON, "train_step", NULL, 0,
				       "/src/train.py", 42);
	uint32_t eval = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_PYTHON, "eval_step", NULL, 0,
				      "/src/eval.py", 7);
	uint32_t load = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_PYTHON, "load_batch", NULL, 0,
				      "/src/data.py", 10);
	uint32_t rd = fx_frame(fx, PROFD__FRAME_KIND__FRAME_KERNEL, "read");
	uint32_t nat = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "launch_native");
	uint32_t cl = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "cudaLaunchKernel",
				    "/usr/lib/libcudart.so.13", 0x1234, NULL, 0);
	uint32_t sgemm = fx_frame(fx, PROFD__FRAME_KIND__FRAME_GPU, "sgemm");
	uint32_t relu = fx_frame(fx, PROFD__FRAME_KIND__FRAME_GPU, "relu");
	uint32_t gemv = fx_frame(fx, PROFD__FRAME_KIND__FRAME_GPU, "gemv");
	uint32_t epoch = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NVTX, "epoch");
	uint32_t step = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NVTX, "step");

#define GPU(ns, k) (uint64_t[]){0, 0, ns, k, 0, 0, 0}
#define CPU(c, i)                                                                                  \
	(uint64_t[])                                                                               \
	{                                                                                          \
		c, i, 0, 0, 0, 0, 0                                                                \
	}
	fx_sample_values(fx, fx_stack(fx, 4, (uint32_t[]){mn, train, cl, sgemm}), 100, 100,
			 FX_GPU_COLUMNS, GPU(3000000, 3));
	fx_sample_values(fx, fx_stack(fx, 4, (uint32_t[]){mn, eval, cl, sgemm}), 100, 100,
			 FX_GPU_COLUMNS, GPU(1000000, 1));
	fx_sample_values(fx, fx_stack(fx, 4, (uint32_t[]){mn, train, cl, relu}), 100, 100,
			 FX_GPU_COLUMNS, GPU(500000, 2));
	fx_sample_values(fx, fx_stack(fx, 4, (uint32_t[]){mn, nat, cl, gemv}), 100, 100,
			 FX_GPU_COLUMNS, GPU(500000, 1));
	fx_sample_values(fx, fx_stack(fx, 4, (uint32_t[]){epoch, mn, load, rd}), 100, 101,
			 FX_GPU_COLUMNS, CPU(6, 4));
	fx_sample_values(fx, fx_stack(fx, 4, (uint32_t[]){step, mn, load, rd}), 100, 101,
			 FX_GPU_COLUMNS, CPU(2, 2));
	fx_sample_values(fx, fx_stack(fx, 2, (uint32_t[]){mn, train}), 100, 100, FX_GPU_COLUMNS,
			 CPU(10, 1));
#undef GPU
#undef CPU

	tx_init(tx, fx, T, MS(10));
	tx_kernel(tx, MS(1), MS(3), 100, 1, "sgemm", 0, 7);
	tx_kernel(tx, MS(2), MS(4), 100, 2, "sgemm", 0, 8);
	tx_kernel(tx, MS(4), MS(4.5), 100, 3, "relu", 0, 7);
	tx_kernel(tx, MS(-1), MS(0.5), 100, 4, "sgemm", 0, 7);
	tx_kernel(tx, MS(9.5), MS(11), 100, 5, "gemv", 0, 7);
	tx_kernel(tx, MS(12), MS(13), 100, 6, "gemv", 0, 7);
	tx_kernel(tx, MS(3.5), MS(6), 100, 7, "sgemm", 1, 0);
}

static void test_union(void)
{
	struct report_span s[8];

	/* Overlapping, nested, touching and disjoint, given out of order. */
	s[0] = (struct report_span){50, 60};
	s[1] = (struct report_span){10, 30};
	s[2] = (struct report_span){20, 25};
	s[3] = (struct report_span){25, 40};
	s[4] = (struct report_span){40, 45};
	s[5] = (struct report_span){55, 70};
	CHECK_EQ_U(report_union_ns(s, 6, 0, 100), 35 + 20);
	/* Clipped to the window at both ends. */
	s[0] = (struct report_span){0, 15};
	s[1] = (struct report_span){12, 18};
	s[2] = (struct report_span){90, 120};
	CHECK_EQ_U(report_union_ns(s, 3, 10, 100), 8 + 10);
	/* Zero-length and outside intervals add nothing; nothing at all is 0. */
	s[0] = (struct report_span){30, 30};
	s[1] = (struct report_span){200, 300};
	s[2] = (struct report_span){1, 5};
	CHECK_EQ_U(report_union_ns(s, 3, 10, 100), 0);
	CHECK_EQ_U(report_union_ns(s, 0, 10, 100), 0);
	/* One interval inside another that starts first. */
	s[0] = (struct report_span){10, 100};
	s[1] = (struct report_span){20, 30};
	CHECK_EQ_U(report_union_ns(s, 2, 0, 1000), 90);
}

static void test_numbers(void)
{
	struct fixture fx;
	struct trace_fixture tx;
	struct report r;

	build(&fx, &tx);
	CHECK_EQ_I(report_build(&r, &fx.p, &tx.t), 0);
	CHECK(r.has_trace && r.has_gpu_time && r.has_idle && !r.ring_cut);
	CHECK_EQ_U(r.window_start_ns, T);
	CHECK_EQ_U(r.window_end_ns, T + 10000000);
	CHECK_EQ_U(r.busy_ns, 6000000);
	CHECK_EQ_U(r.kernels_seen, 6);
	CHECK_EQ_U(r.n_devices, 2);
	if (r.n_devices == 2) {
		CHECK_EQ_U(r.devices[0].device, 0);
		CHECK_EQ_U(r.devices[0].busy_ns, 4500000);
		CHECK_EQ_U(r.devices[0].kernels, 5);
		CHECK_EQ_U(r.devices[1].device, 1);
		CHECK_EQ_U(r.devices[1].busy_ns, 2500000);
		CHECK_EQ_U(r.devices[1].kernels, 1);
	}
	CHECK_EQ_U(r.gpu_ns_total, 5000000);
	CHECK_EQ_U(r.n_kernels, 3);
	if (r.n_kernels == 3) {
		CHECK_STREQ(r.kernels[0].name, "sgemm");
		CHECK_EQ_U(r.kernels[0].value, 4000000);
		CHECK_EQ_U(r.kernels[0].count, 4);
		/* Equal time: more kernels first. */
		CHECK_STREQ(r.kernels[1].name, "relu");
		CHECK_STREQ(r.kernels[2].name, "gemv");
	}
	CHECK_EQ_U(r.n_sites, 3);
	if (r.n_sites == 3) {
		CHECK_STREQ(r.sites[0].name, "train_step (train.py:42)");
		CHECK_EQ_U(r.sites[0].value, 3500000);
		CHECK_EQ_U(r.sites[0].count, 5);
		CHECK_STREQ(r.sites[1].name, "eval_step (eval.py:7)");
		/* No Python frame: the first native frame outside libcudart. */
		CHECK_STREQ(r.sites[2].name, "launch_native");
	}
	CHECK_EQ_U(r.cpu_samples, 18);
	CHECK_EQ_U(r.idle_samples, 7);
	CHECK_EQ_U(r.n_idle, 2);
	if (r.n_idle == 2) {
		/* The two NVTX-labelled stacks are one stack without their labels. */
		CHECK_STREQ(r.idle[0].name, "read_[k] <- load_batch (data.py:10) <- main");
		CHECK_EQ_U(r.idle[0].value, 6);
		CHECK_STREQ(r.idle[1].name, "train_step (train.py:42) <- main");
		CHECK_EQ_U(r.idle[1].value, 1);
	}
	report_release(&r);
}

static char *print(const struct report *r, size_t top, bool json)
{
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (json)
		report_print_json(r, top, f);
	else
		report_print(r, top, f);
	fclose(f);
	return buf;
}

static void test_text(void)
{
	struct fixture fx;
	struct trace_fixture tx;
	struct report r;
	char *out;

	build(&fx, &tx);
	CHECK_EQ_I(report_build(&r, &fx.p, &tx.t), 0);
	out = print(&r, 2, false);
	CHECK_STREQ(out ? out : "",
		    "Window: 10.00 ms of the daemon's trace ring\n"
		    "GPU busy: 60.0% (6.00 ms with a kernel running, 6 kernels)\n"
		    "  pid 100 GPU 0: 45.0% (4.50 ms, 5 kernels)\n"
		    "  pid 100 GPU 1: 25.0% (2.50 ms, 1 kernels)\n"
		    "\n"
		    "Top kernels by GPU time (5.00 ms in all):\n"
		    "      GPU time       %   Kernels  Kernel\n"
		    "       4.00 ms   80.0%         4  sgemm\n"
		    "      500.0 us   10.0%         2  relu\n"
		    "  (1 more)\n"
		    "\n"
		    "Top launch sites by GPU time:\n"
		    "      GPU time       %   Kernels  Launch site\n"
		    "       3.50 ms   70.0%         5  train_step (train.py:42)\n"
		    "       1.00 ms   20.0%         1  eval_step (eval.py:7)\n"
		    "  (1 more)\n"
		    "\n"
		    "Top CPU stacks while the GPU was idle (7 of 18 CPU samples, 38.9%):\n"
		    "       Samples       %  Stack (leaf first)\n"
		    "             6   85.7%  read_[k] <- load_batch (data.py:10) <- main\n"
		    "             1   14.3%  train_step (train.py:42) <- main\n");
	free(out);
	out = print(&r, 1, true);
	CHECK_STREQ(
	    out ? out : "",
	    "{\n"
	    "  \"window\": {\"start_ns\": 5000000000, \"end_ns\": 5010000000, "
	    "\"realtime_offset_ns\": 0, \"ring_cut\": false},\n"
	    "  \"gpu_busy\": {\"busy_ns\": 6000000, \"percent\": 60.00, \"kernels\": 6, "
	    "\"devices\": [{\"pid\": 100, \"device\": 0, \"busy_ns\": 4500000, \"percent\": "
	    "45.00, \"kernels\": 5}, {\"pid\": 100, \"device\": 1, \"busy_ns\": 2500000, "
	    "\"percent\": 25.00, \"kernels\": 1}]},\n"
	    "  \"gpu_time_ns\": 5000000,\n"
	    "  \"kernels\": [\n    {\"name\": \"sgemm\", \"gpu_time_ns\": 4000000, "
	    "\"kernels\": 4, \"percent\": 80.00}\n  ],\n"
	    "  \"launch_sites\": [\n    {\"name\": \"train_step (train.py:42)\", "
	    "\"gpu_time_ns\": 3500000, \"kernels\": 5, \"percent\": 70.00}\n  ],\n"
	    "  \"cpu_samples\": 18,\n  \"idle_samples\": 7,\n"
	    "  \"idle_stacks\": [\n    {\"name\": \"read_[k] <- load_batch (data.py:10) <- "
	    "main\", \"samples\": 6, \"percent\": 85.71}\n  ],\n"
	    "  \"has_gpu_time\": true,\n  \"has_gpu_idle\": true\n}\n");
	free(out);
	report_release(&r);
}

/* An older daemon: only CPU samples, no trace. Says what it cannot know. */
static void test_old_daemon(void)
{
	struct fixture fx;
	struct report r;
	char *out;

	fx_init_samples(&fx, 0);
	uint32_t a = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "a");
	fx_sample(&fx, fx_stack(&fx, 1, (uint32_t[]){a}), 1, 4);
	CHECK_EQ_I(report_build(&r, &fx.p, NULL), 0);
	out = print(&r, 10, false);
	CHECK_STREQ(out ? out : "",
		    "GPU busy: unknown (the daemon sent no trace)\n"
		    "\n"
		    "Top kernels by GPU time: none (the profile has no gpu_time column)\n"
		    "\n"
		    "Top launch sites by GPU time: none recorded\n"
		    "\n"
		    "Top CPU stacks while the GPU was idle: none (the profile has no "
		    "gpu_idle_samples column)\n");
	free(out);
	report_release(&r);
}

/*
 * Off-CPU time: wall-clock by the state frame at each stack's root (CPU samples x period +
 * off_cpu), waits by stack without their state frame, in text and JSON.
 */
#define NS_MS(x) ((uint64_t)(x)*1000000ull)

static void test_off_cpu(void)
{
	struct fixture fx;
	struct report r;
	char *out;

	fx_init_samples(&fx, NS_MS(10));
	fx_value_type(&fx, "off_cpu", "nanoseconds");
	uint32_t m = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	uint32_t w = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "wait_here");
	uint32_t run = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_STATE, "[running]");
	uint32_t fu = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_STATE, "[off-cpu: futex]");
	uint32_t sr = fx_stack(&fx, 2, (uint32_t[]){run, m});
	uint32_t sw = fx_stack(&fx, 3, (uint32_t[]){fu, m, w});

	fx_sample_values(&fx, sr, 1, 1, 2, (const uint64_t[]){10, 0}); /* 100 ms running */
	fx_sample_values(&fx, sw, 1, 1, 2, (const uint64_t[]){0, NS_MS(300)});
	CHECK_EQ_I(report_build(&r, &fx.p, NULL), 0);
	CHECK(r.has_off_cpu);
	CHECK_EQ_U(r.wall_ns, NS_MS(400));
	CHECK_EQ_U(r.off_cpu_ns, NS_MS(300));
	CHECK_EQ_U(r.n_states, 2);
	if (r.n_states == 2) {
		CHECK_STREQ(r.states[0].name, "[off-cpu: futex]");
		CHECK_EQ_U(r.states[0].value, NS_MS(300));
		CHECK_STREQ(r.states[1].name, "[running]");
		CHECK_EQ_U(r.states[1].value, NS_MS(100));
	}
	CHECK_EQ_U(r.n_waits, 1);
	if (r.n_waits == 1)
		CHECK_STREQ(r.waits[0].name, "wait_here <- main");
	out = print(&r, 10, false);
	CHECK(out && strstr(out, "Time by thread state (wall-clock: CPU samples x period + "
				 "off-CPU), 400.00 ms in all:\n"
				 "          Time       %  State\n"
				 "     300.00 ms   75.0%  [off-cpu: futex]\n"
				 "     100.00 ms   25.0%  [running]\n"));
	CHECK(out && strstr(out, "     300.00 ms  100.0%  wait_here <- main\n"));
	free(out);
	out = print(&r, 10, true);
	CHECK(out && strstr(out, "\"wall_ns\": 400000000,\n  \"off_cpu_ns\": 300000000,\n"));
	CHECK(out && strstr(out, "{\"name\": \"[running]\", \"ns\": 100000000, "
				 "\"percent\": 25.00}"));
	free(out);
	report_release(&r);
}

/*
 * Off-CPU time and GPU data: where the threads were while the GPU was idle, by state and by
 * state and stack (gpu_idle_samples x period + gpu_idle_off_cpu); the busy parts left out.
 */
static void test_gpu_idle_wall(void)
{
	struct fixture fx;
	struct report r;
	char *out;

	fx_init_samples(&fx, NS_MS(10));
	fx_value_type(&fx, "gpu_idle_samples", "count");
	fx_value_type(&fx, "off_cpu", "nanoseconds");
	fx_value_type(&fx, "gpu_idle_off_cpu", "nanoseconds");
	uint32_t m = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	uint32_t g = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_PYTHON, "get");
	uint32_t s = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "sync");
	uint32_t run = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_STATE, "[running]");
	uint32_t fu = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_STATE, "[off-cpu: futex]");
	uint32_t cs = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_STATE, "[off-cpu: CUDA sync]");
	uint32_t sr = fx_stack(&fx, 2, (uint32_t[]){run, m});
	uint32_t k1 = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_KERNEL, "futex_wait");
	uint32_t k2 = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_KERNEL, "do_syscall_64");
	/* Of the kernel frames only the innermost is named: the caller's lines matter more. */
	uint32_t sq = fx_stack(&fx, 5, (uint32_t[]){fu, m, g, k2, k1});
	uint32_t ss = fx_stack(&fx, 3, (uint32_t[]){cs, m, s});

	/* 100 ms running, 40 of them with the GPU idle. */
	fx_sample_values(&fx, sr, 1, 1, 4, (const uint64_t[]){10, 4, 0, 0});
	/* 300 ms in get, 250 of them with the GPU idle. */
	fx_sample_values(&fx, sq, 1, 1, 4, (const uint64_t[]){0, 0, NS_MS(300), NS_MS(250)});
	/* 200 ms in a CUDA sync, the kernels running all along. */
	fx_sample_values(&fx, ss, 1, 1, 4, (const uint64_t[]){0, 0, NS_MS(200), 0});
	CHECK_EQ_I(report_build(&r, &fx.p, NULL), 0);
	CHECK(r.has_idle_wall);
	CHECK_EQ_U(r.idle_wall_ns, NS_MS(290));
	CHECK_EQ_U(r.n_idle_states, 2);
	if (r.n_idle_states == 2) {
		CHECK_STREQ(r.idle_states[0].name, "[off-cpu: futex]");
		CHECK_EQ_U(r.idle_states[0].value, NS_MS(250));
		CHECK_STREQ(r.idle_states[1].name, "[running]");
		CHECK_EQ_U(r.idle_states[1].value, NS_MS(40));
	}
	CHECK_EQ_U(r.n_idle_wall, 2);
	if (r.n_idle_wall == 2)
		CHECK_STREQ(r.idle_wall[0].name, "[off-cpu: futex] futex_wait_[k] <- get <- main");
	out = print(&r, 10, false);
	CHECK(out &&
	      strstr(out, "While the GPU was idle: top stacks (wall-clock), 290.00 ms in "
			  "all:\n"
			  "          Time       %  State and stack (leaf first)\n"
			  "     250.00 ms   86.2%  [off-cpu: futex] futex_wait_[k] <- get <- "
			  "main\n"
			  "      40.00 ms   13.8%  [running] main\n"));
	CHECK(out && !strstr(out, "CUDA sync] sync"));
	free(out);
	out = print(&r, 10, true);
	CHECK(out && strstr(out, "\"gpu_idle_wall_ns\": 290000000,\n"));
	CHECK(out && strstr(out, "\"gpu_idle_stacks_wall\": [\n    {\"name\": \"[off-cpu: futex] "
				 "futex_wait_[k] <- get <- main\", \"ns\": 250000000, \"percent\": "
				 "86.21}"));
	free(out);
	report_release(&r);

	/* Without the gpu_idle_off_cpu column (an older daemon): no such lists. */
	fx_init_samples(&fx, NS_MS(10));
	fx_value_type(&fx, "gpu_idle_samples", "count");
	fx_value_type(&fx, "off_cpu", "nanoseconds");
	sr = fx_stack(&fx, 1, (uint32_t[]){fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "m")});
	fx_sample_values(&fx, sr, 1, 1, 3, (const uint64_t[]){10, 4, NS_MS(5)});
	CHECK_EQ_I(report_build(&r, &fx.p, NULL), 0);
	CHECK(r.has_off_cpu && !r.has_idle_wall);
	out = print(&r, 10, false);
	CHECK(out && !strstr(out, "While the GPU was idle"));
	free(out);
	report_release(&r);
}

/* The ring had lost the start of the window: the window starts at its oldest event. */
static void test_ring_cut(void)
{
	struct fixture fx;
	struct trace_fixture tx;
	struct report r;

	build(&fx, &tx);
	tx.t.has_oldest_ns = 1;
	tx.t.oldest_ns = MS(2);
	CHECK_EQ_I(report_build(&r, NULL, &tx.t), 0);
	CHECK(r.ring_cut);
	CHECK_EQ_U(r.window_start_ns, MS(2));
	/* [2, 6) and [9.5, 10) */
	CHECK_EQ_U(r.busy_ns, 4500000);
	CHECK_EQ_U(r.kernels_seen, 5);
	report_release(&r);
}

int main(void)
{
	test_union();
	test_numbers();
	test_text();
	test_old_daemon();
	test_ring_cut();
	test_off_cpu();
	test_gpu_idle_wall();
	return CHECK_DONE();
}
