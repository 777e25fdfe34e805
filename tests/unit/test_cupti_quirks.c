// SPDX-License-Identifier: BSD-2-Clause
/*
 * What real CUPTI does that the core must live with, modelled by the fake libcupti: another
 * client of the process (Kineto, for torch.profiler) taking the activity API, the wrong graph
 * correlation ids of every session after the first, kernel records without timestamps, and
 * buffers CUPTI keeps while any record in them is incomplete. Each case runs in its own child
 * process, as in test_cupti_core.c: the core is a process-wide singleton.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core.h"
#include "core_priv.h"
#include "fake_cupti.h"
#include "profd.pb-c.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define RT CUPTI_CB_DOMAIN_RUNTIME_API
#define RT_LAUNCH CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000
#define RT_GRAPH CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000
/* Interval of the flushes here: the uplink's default. */
#define FLUSH_NS (100 * MS)

static struct evq *q;
static struct core_info info;
static _Atomic uint64_t test_now = 10 * SEC;

static uint64_t test_clock(void)
{
	return atomic_load(&test_now);
}

static void advance(uint64_t ns)
{
	atomic_fetch_add(&test_now, ns);
}

static void enable_core(void)
{
	q = evq__new(1 << 16);
	CHECK(q != NULL);
	core__test_set_clock(test_clock);
	fake_cupti_set_record_clock(test_clock);
	CHECK_EQ_I(core__init(q, &info), 0);
	CHECK_EQ_I(core__enable(&info), 0);
	CHECK(core__enabled());
}

static void launch(CUpti_CallbackId id, uint32_t corr)
{
	fake_cupti_invoke_callback(RT, id, CUPTI_API_ENTER, corr, "k");
	fake_cupti_invoke_callback(RT, id, CUPTI_API_EXIT, corr, "k");
}

/* A kernel record of thread `thread`, complete when it ends. */
static void emit_kernel(unsigned thread, uint32_t corr, uint64_t start, uint64_t end,
			uint32_t graph)
{
	CUpti_ActivityKernel10 k;

	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = start;
	k.end = end;
	k.deviceId = 1;
	k.streamId = 7;
	k.gridX = k.gridY = k.gridZ = 1;
	k.blockX = k.blockY = k.blockZ = 1;
	k.correlationId = corr;
	k.name = "k";
	k.graphId = graph;
	CHECK_EQ_I(fake_cupti_emit(thread, &k, sizeof(k), end), 0);
}

static void flush(void)
{
	uint64_t until;

	core__flush(false, &until);
}

static size_t drain_kernels(uint32_t *corrs, size_t max)
{
	struct ev evs[256];
	size_t n, k = 0;

	while ((n = evq__drain(q, evs, 256)) > 0)
		for (size_t i = 0; i < n; i++)
			if (evs[i].type == EV_KERNEL && k < max)
				corrs[k++] = evs[i].corr;
	return k;
}

/* ---- another client: torch.profiler's Kineto ----------------------------------------------- */

/*
 * Kineto starts while we collect: its subscribe fails, its callbacks, its rdtsc clock and its
 * kinds take over. The next flush sees CUPTI's clock off CLOCK_MONOTONIC and stops for good:
 * our probes off, nothing of Kineto's touched, its results whole.
 */
static void case_other_client_clock(void)
{
	uint32_t corrs[16];
	size_t calls;
	const struct fake_call *log;

	enable_core();
	launch(RT_LAUNCH, 1);
	emit_kernel(0, 1, test_now + 1 * MS, test_now + 2 * MS, 0);
	advance(FLUSH_NS);
	flush();
	CHECK_EQ_U(drain_kernels(corrs, 16), 1);
	/* Ours holds this one, incomplete, when Kineto comes. */
	launch(RT_LAUNCH, 2);
	emit_kernel(0, 2, test_now + 1 * MS, test_now + 400 * MS, 0);

	CHECK_EQ_I(fake_cupti_other_start(true), CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
	launch(RT_LAUNCH, 3);
	emit_kernel(1, 3, test_now + 1 * MS, test_now + 2 * MS, 0); /* into Kineto's buffer */
	advance(FLUSH_NS);
	flush();
	CHECK(!core__enabled());
	CHECK(core__taken(&info));
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN);
	CHECK(strstr(info.detail, "timestamp callback") != NULL);
	CHECK(!core__taken(&info)); /* told once */
	/* Our probes are off; Kineto's callbacks, clock and kinds are as it set them. */
	CHECK(!fake_cupti_callback_enabled(RT, RT_LAUNCH));
	CHECK(fake_cupti_other_owns_callbacks());
	CHECK(fake_cupti_other_owns_clock());
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_RUNTIME));
	CHECK(fake_cupti_subscribed());

	/* From now on the core makes no CUPTI call: flush, disable and enable leave it alone. */
	calls = fake_cupti_calls(&log);
	advance(FLUSH_NS);
	flush();
	core__disable();
	CHECK_EQ_I(core__enable(&info), -EBUSY);
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN);
	CHECK_EQ_U(fake_cupti_calls(&log), calls);

	/*
	 * Kineto stops: its flush hands it our buffer (it leaves unknown buffers alone) and its
	 * own, whose record it keeps. Nothing more reaches us.
	 */
	advance(SEC);
	fake_cupti_other_stop();
	CHECK_EQ_U(fake_cupti_other_unknown_buffers(), 1);
	CHECK_EQ_U(fake_cupti_other_records(), 1);
	CHECK(fake_cupti_attr_changed_late()); /* what Kineto's stop does, as modelled */
	CHECK_EQ_U(drain_kernels(corrs, 16), 0);
	CHECK_EQ_U(atomic_load(&core_stats.foreign_bufs), 0);
}

/*
 * Kineto starts while the daemon has us disabled (its subscribe fails on our kept session):
 * enabling again must not take CUPTI back from under it.
 */
static void case_other_client_while_idle(void)
{
	size_t kinds;

	enable_core();
	core__disable();
	fake_cupti_other_start(true);
	kinds = fake_cupti_call_count("cuptiActivityEnable");
	CHECK_EQ_I(core__enable(&info), -EBUSY);
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN);
	CHECK(!core__enabled());
	CHECK(fake_cupti_other_owns_callbacks());
	CHECK(fake_cupti_other_owns_clock());
	CHECK_EQ_U(fake_cupti_call_count("cuptiActivityEnable"), kinds);
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	/* Said in the enable's reply already: not a second time. */
	CHECK(!core__taken(&info));
}

/*
 * Kineto without its clock, started while we were idle: nothing tells us, and our enable takes
 * the callbacks. The buffer it had out then comes to us: left alone (its owner frees it), never
 * decoded, never handed out again.
 */
static void case_other_buffers_to_us(void)
{
	uint32_t corrs[4];

	enable_core();
	core__disable();
	fake_cupti_other_start(false);
	emit_kernel(2, 50, test_now + 1 * MS, test_now + 2 * MS, 0); /* into Kineto's buffer */
	CHECK_EQ_I(core__enable(&info), 0);
	advance(FLUSH_NS);
	flush();
	CHECK_EQ_U(atomic_load(&core_stats.foreign_bufs), 1);
	CHECK_EQ_U(drain_kernels(corrs, 4), 0);
	CHECK_EQ_U(fake_cupti_other_records(), 0);
	/* Ours work as before. */
	launch(RT_LAUNCH, 51);
	emit_kernel(2, 51, test_now + 1 * MS, test_now + 2 * MS, 0);
	advance(FLUSH_NS);
	flush();
	CHECK_EQ_U(drain_kernels(corrs, 4), 1);
	CHECK_EQ_U(corrs[0], 51);
	fake_cupti_other_stop();
	CHECK_EQ_U(fake_cupti_other_unknown_buffers(), 0);
}

/* Kineto starts, then the daemon disables us before a flush noticed: its kinds stay on. */
static void case_other_client_then_disable(void)
{
	enable_core();
	fake_cupti_other_start(true);
	core__disable();
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_MEMCPY));
	CHECK(core__taken(&info));
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN);
}

/*
 * Kineto without its TSC clock: only the records stop coming. Two forced flushes in a row that
 * give us nothing while launches wait: taken.
 */
static void case_other_client_records(void)
{
	uint64_t t0;
	uint32_t corr = 1;

	enable_core();
	CHECK_EQ_I(fake_cupti_other_start(false), CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
	CHECK(!fake_cupti_other_owns_clock());
	t0 = test_now;
	while (core__enabled() && test_now - t0 < 30 * SEC) {
		launch(RT_LAUNCH, corr);
		emit_kernel(0, corr, test_now + 1 * MS, test_now + 2 * MS, 0);
		corr++;
		advance(FLUSH_NS);
		flush();
	}
	CHECK(!core__enabled());
	/* Two bounds of 5 s, and the flush interval. */
	CHECK(test_now - t0 <= 2 * 5 * SEC + 2 * FLUSH_NS);
	CHECK(core__taken(&info));
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN);
	CHECK(strstr(info.detail, "no records") != NULL);
	CHECK(fake_cupti_other_owns_callbacks());
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	CHECK(fake_cupti_other_records() > 0);
}

/*
 * No false alarm: a kernel that runs for 30 s (its record incomplete all along), and a launch
 * that failed (no record ever), with nothing else going on.
 */
static void case_quiet_not_taken(void)
{
	uint64_t t0, forced, zero;

	enable_core();
	launch(RT_LAUNCH, 1);
	emit_kernel(0, 1, test_now + 1 * MS, test_now + 30 * SEC, 0);
	fake_cupti_set_callback_result(1); /* cudaErrorInvalidValue */
	launch(RT_LAUNCH, 2);
	fake_cupti_set_callback_result(0);
	t0 = test_now;
	while (test_now - t0 < 40 * SEC) {
		advance(FLUSH_NS);
		flush();
	}
	CHECK(core__enabled());
	CHECK(!core__taken(&info));
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_READY);
	core__take_counts(&zero, &forced);
	CHECK(forced >= 1);
	/* And the library still collects. */
	launch(RT_LAUNCH, 3);
	emit_kernel(0, 3, test_now + 1 * MS, test_now + 2 * MS, 0);
	advance(FLUSH_NS);
	flush();
	{
		uint32_t corrs[4];

		CHECK_EQ_U(drain_kernels(corrs, 4), 1);
		CHECK_EQ_U(corrs[0], 3);
	}
}

/* A failed launch is not outstanding: the watermark does not wait for it. */
static void case_failed_launch(void)
{
	enable_core();
	fake_cupti_set_callback_result(2); /* cudaErrorMemoryAllocation */
	launch(RT_LAUNCH, 7);
	CHECK_EQ_U(launch_oldest_ns(test_now, 10 * SEC), UINT64_MAX);
	fake_cupti_set_callback_result(0);
	launch(RT_LAUNCH, 8);
	CHECK(launch_oldest_ns(test_now, 10 * SEC) != UINT64_MAX);
}

/* ---- zero timestamps ----------------------------------------------------------------------- */

static void case_zero_time(void)
{
	uint64_t zero, forced;
	uint32_t corrs[4];

	enable_core();
	launch(RT_LAUNCH, 11);
	launch(RT_LAUNCH, 12);
	emit_kernel(0, 11, 0, 0, 0);
	emit_kernel(0, 12, test_now + 1 * MS, test_now + 2 * MS, 0);
	advance(FLUSH_NS);
	flush();
	CHECK_EQ_U(drain_kernels(corrs, 4), 1);
	CHECK_EQ_U(corrs[0], 12);
	core__take_counts(&zero, &forced);
	CHECK_EQ_U(zero, 1);
	core__take_counts(&zero, &forced);
	CHECK_EQ_U(zero, 0);
	/* The record came: its launch waits no more. */
	CHECK_EQ_U(launch_oldest_ns(test_now, 10 * SEC), UINT64_MAX);
}

/* ---- one session --------------------------------------------------------------------------- */

/*
 * Disable and enable again keep the one CUPTI session: CUPTI before 13.1u1 gives graph launches
 * wrong correlation ids in later ones, and the graph's kernels would then never find their
 * launch (here: the launch stays outstanding).
 */
static void case_one_session(void)
{
	uint32_t corrs[8];

	fake_cupti_set_graph_corr_bug(true);
	enable_core();
	core__disable();
	CHECK(!core__enabled());
	/* Disabled: kinds and probes gated off, the subscription kept. */
	CHECK(!fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	CHECK(!fake_cupti_callback_enabled(RT, RT_LAUNCH));
	CHECK(fake_cupti_subscribed());
	CHECK_EQ_I(core__enable(&info), 0);
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	CHECK(fake_cupti_callback_enabled(RT, RT_GRAPH));
	CHECK_EQ_U(fake_cupti_sessions(), 1);
	CHECK_EQ_U(fake_cupti_call_count("cuptiUnsubscribe"), 0);

	launch(RT_GRAPH, 40);
	for (int i = 0; i < 3; i++)
		emit_kernel(0, 40, test_now + (uint64_t)(i + 1) * MS,
			    test_now + (uint64_t)(i + 2) * MS, 9);
	advance(FLUSH_NS);
	flush();
	CHECK_EQ_U(drain_kernels(corrs, 8), 3);
	CHECK_EQ_U(corrs[0], 40);
	CHECK_EQ_U(launch_oldest_ns(test_now, 10 * SEC), UINT64_MAX);
}

/* ---- the delay bound ----------------------------------------------------------------------- */

/*
 * One thread keeps the GPU busy: a 50 ms kernel every 50 ms, each starting when the one before
 * ends and the newest always still running, so its buffer always holds an incomplete record and
 * an unforced flush never returns it (1 MiB holds minutes of these). Returns the largest delay from
 * a kernel's end to its record in the queue, and how many of n came.
 */
static uint64_t busy_thread(unsigned n, size_t *got)
{
	static uint64_t end_of[4096];
	uint64_t worst = 0, gpu = test_now + 10 * MS;
	uint32_t corrs[256];

	*got = 0;
	for (unsigned i = 1; i <= n && i < 4096; i++) {
		uint64_t start = gpu;

		launch(RT_LAUNCH, i);
		gpu = start + 50 * MS;
		end_of[i] = gpu;
		emit_kernel(0, i, start, gpu, 0);
		advance(50 * MS);
		if (i % 2)
			continue;
		flush();
		for (size_t k = 0, m = drain_kernels(corrs, 256); k < m; k++) {
			uint64_t d = test_now - end_of[corrs[k]];

			if (corrs[k] < 4096 && d > worst)
				worst = d;
			(*got)++;
		}
	}
	return worst;
}

static void case_delay_bound(void)
{
	uint64_t worst, zero, forced;
	size_t got;

	enable_core();
	CHECK_EQ_U(info.max_delay_ms, 5000);
	worst = busy_thread(800, &got); /* 40 s */
	core__take_counts(&zero, &forced);
	if (getenv("TEST_VERBOSE"))
		fprintf(stderr,
			"delay bound 5 s: worst delay %.3f s, %zu of 800 records, %" PRIu64
			" forced flushes\n",
			(double)worst / SEC, got, forced);
	/* The bound, plus the flush that notices, plus a kernel. */
	CHECK(worst <= 5 * SEC + FLUSH_NS + 50 * MS);
	/* Each forced flush loses the record in flight; the last 5 s may still wait. */
	CHECK(got >= 800 - 8 - 100);
	CHECK(forced >= 6 && forced <= 9);
	CHECK(core__enabled());
}

/* The model itself: without the bound, the busy thread's records never come. */
static void case_delay_unbounded(void)
{
	size_t got;

	setenv("PROFD_CUPTI_MAX_DELAY_MS", "0", 1);
	enable_core();
	CHECK_EQ_U(info.max_delay_ms, 0);
	busy_thread(800, &got);
	CHECK_EQ_U(got, 0);
	CHECK_EQ_U(fake_cupti_held_buffers(), 1);
}

/* The knobs: smaller buffers, a shorter bound, global buffers, CUPTI's flush period. */
static void case_knobs(void)
{
	uint8_t *b;
	size_t size, got;
	int attr, reg;

	setenv("PROFD_CUPTI_BUFFER_KB", "64", 1);
	setenv("PROFD_CUPTI_MAX_DELAY_MS", "1000", 1);
	setenv("PROFD_CUPTI_PER_THREAD_BUFFERS", "0", 1);
	setenv("PROFD_CUPTI_FLUSH_PERIOD_MS", "250", 1);
	enable_core();
	CHECK_EQ_U(info.max_delay_ms, 1000);
	CHECK_EQ_U(fake_cupti_per_thread(), 0);
	attr = fake_cupti_call_index("cuptiActivitySetAttribute", true,
				     CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER);
	reg = fake_cupti_call_index("cuptiActivityRegisterCallbacks", false, 0);
	CHECK(attr >= 0 && attr < reg);
	CHECK(reg < fake_cupti_call_index("cuptiActivityEnable", false, 0));
	CHECK_EQ_U(fake_cupti_flush_period(), 250);
	fake_cupti_request_buffer(&b, &size);
	CHECK_EQ_U(size, 64 << 10);
	fake_cupti_complete_buffer(b, size, 0);
	/* Never again in the session: a change there is undefined. */
	core__disable();
	CHECK_EQ_I(core__enable(&info), 0);
	CHECK_EQ_U(fake_cupti_call_count("cuptiActivitySetAttribute"), 1);
	CHECK(!fake_cupti_attr_changed_late());
	/* The shorter bound holds. */
	CHECK(busy_thread(200, &got) <= 1 * SEC + FLUSH_NS + 50 * MS);
	CHECK(got >= 200 - 10 - 20);
}

static void case_knobs_bad(void)
{
	setenv("PROFD_CUPTI_BUFFER_KB", "1", 1);
	setenv("PROFD_CUPTI_MAX_DELAY_MS", "5s", 1);
	setenv("PROFD_CUPTI_PER_THREAD_BUFFERS", "2", 1);
	enable_core();
	CHECK_EQ_U(info.max_delay_ms, 5000);
	CHECK_EQ_U(fake_cupti_call_count("cuptiActivitySetAttribute"), 0);
	CHECK_EQ_U(fake_cupti_per_thread(), 1);
	{
		uint8_t *b;
		size_t size;

		fake_cupti_request_buffer(&b, &size);
		CHECK_EQ_U(size, 1 << 20);
		fake_cupti_complete_buffer(b, size, 0);
	}
}

/* -------------------------------------------------------------------------------------------- */

/* Each case in a child: the library keeps its state in globals. */
static void child_setup(void)
{
	setenv("PROFD_CUPTI_PATH", FAKE_CUPTI_PATH, 1);
}

#define RUN(fn) CHECK_EQ_I(check_run_forked(#fn, child_setup, fn), 0)

int main(void)
{
	unsetenv("PROFD_CUPTI_LAUNCH_RATE");
	unsetenv("PROFD_CUPTI_BUFFERS");
	unsetenv("PROFD_CUPTI_BUFFER_KB");
	unsetenv("PROFD_CUPTI_MAX_DELAY_MS");
	unsetenv("PROFD_CUPTI_PER_THREAD_BUFFERS");
	unsetenv("PROFD_CUPTI_FLUSH_PERIOD_MS");
	RUN(case_other_client_clock);
	RUN(case_other_client_while_idle);
	RUN(case_other_client_then_disable);
	RUN(case_other_buffers_to_us);
	RUN(case_other_client_records);
	RUN(case_quiet_not_taken);
	RUN(case_failed_launch);
	RUN(case_zero_time);
	RUN(case_one_session);
	RUN(case_delay_bound);
	RUN(case_delay_unbounded);
	RUN(case_knobs);
	RUN(case_knobs_bad);
	return CHECK_DONE();
}
