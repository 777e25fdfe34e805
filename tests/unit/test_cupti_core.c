// SPDX-License-Identifier: BSD-2-Clause
/*
 * The CUPTI core against a fake libcupti. Each case runs in its own child process: the core is
 * a process-wide singleton, and once the fake has loaded the real libcupti for its record
 * iterator, a later core__init would find that one already in the process.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abi.h"
#include "check.h"
#include "core.h"
#include "core_priv.h"
#include "fake_cupti.h"
#include "nvtx_open.h"
#include "profd.pb-c.h"
#include "uplink.h"

#define MS 1000000ull
#define SEC 1000000000ull

static struct evq *q;
static struct core_info info;
static _Atomic uint64_t test_now = 10 * SEC;

static uint64_t test_clock(void)
{
	return atomic_load(&test_now);
}

static void init_core(void)
{
	q = evq__new(4096);
	CHECK(q != NULL);
	core__test_set_clock(test_clock);
	CHECK_EQ_I(core__init(q, &info), 0);
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_READY);
}

static void enable_core(void)
{
	init_core();
	CHECK_EQ_I(core__enable(&info), 0);
	CHECK(core__enabled());
}

/* ---- loading ------------------------------------------------------------------------------- */

static void case_no_cupti(void)
{
	uint64_t until = 1;

	setenv("PROFD_CUPTI_PATH", "/nonexistent/libcupti.so.13", 1);
	q = evq__new(16);
	CHECK_EQ_I(core__init(q, &info), -ENOENT);
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_NO_CUPTI);
	CHECK(strstr(info.detail, "PROFD_CUPTI_PATH") != NULL);
	CHECK_STREQ(info.cupti_path, "");
	CHECK_EQ_I(core__enable(&info), -ENOENT);
	CHECK(!core__enabled());
	core__flush(true, &until);
	CHECK_EQ_U(until, 0);
	core__disable();
}

static void case_too_old(void)
{
	fake_cupti_set_version(16);
	q = evq__new(16);
	CHECK_EQ_I(core__init(q, &info), -ENOSYS);
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_CUPTI_TOO_OLD);
	CHECK_EQ_U(info.cupti_version, 16);
	CHECK(strstr(info.detail, "16") != NULL);
	CHECK_EQ_I(core__enable(&info), -ENOENT);
	CHECK_EQ_U(fake_cupti_call_count("cuptiSubscribe_v2"), 0);
}

static void case_init(void)
{
	setenv("PROFD_CUPTI_LAUNCH_RATE", "250", 1);
	init_core();
	CHECK_EQ_U(info.cupti_version, CUPTI_API_VERSION);
	CHECK(strstr(info.cupti_path, "libcupti_fake.so") != NULL);
	CHECK(info.library_path[0] != 0);
	CHECK_EQ_U(info.launch_rate_limit, 250);
	CHECK_EQ_I(info.clock, PROFD__GPU_CLOCK__GPU_CLOCK_UNSPECIFIED);
	/* core__init never subscribes. */
	CHECK(!fake_cupti_subscribed());
	CHECK(!core__enabled());
}

/* A libcupti already in the process wins over PROFD_CUPTI_PATH (the fake loads the real one). */
static void case_loaded_wins(void)
{
	CHECK(fake_cupti_real_iterator());
	q = evq__new(16);
	CHECK_EQ_I(core__init(q, &info), 0);
	CHECK(strstr(info.cupti_path, "libcupti.so") != NULL);
	CHECK(strstr(info.cupti_path, "fake") == NULL);
	CHECK(info.cupti_version >= 130000);
}

static void case_bad_env(void)
{
	setenv("PROFD_CUPTI_LAUNCH_RATE", "12x", 1);
	init_core();
	CHECK_EQ_U(info.launch_rate_limit, 1000);
}

/* ---- enable -------------------------------------------------------------------------------- */

static const struct {
	CUpti_CallbackDomain d;
	CUpti_CallbackId id;
} launch_cbids[] = {
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync},
};

static const CUpti_ActivityKind kinds_on[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_MARKER,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
    CUPTI_ACTIVITY_KIND_MEMORY2,
};

static void case_enable(void)
{
	int ts_idx, first_enable;
	size_t i, n;

	enable_core();
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_READY);
	CHECK_EQ_I(info.clock, PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK);
	CHECK(fake_cupti_subscribed());
	CHECK_STREQ(fake_cupti_subscriber_name(), "profd");
	CHECK_EQ_U(fake_cupti_call_count("cuptiSubscribe"), 0); /* _v2 was there */
	CHECK_EQ_U(fake_cupti_thread_id_type(), CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	CHECK(fake_cupti_timestamp_callback_set());

	/* The clock is CUPTI's from the first kind enabled on: the callback must come first. */
	ts_idx = fake_cupti_call_index("cuptiActivityRegisterTimestampCallback", false, 0);
	first_enable = fake_cupti_call_index("cuptiActivityEnable", false, 0);
	CHECK(ts_idx >= 0);
	CHECK(first_enable > ts_idx);
	CHECK(fake_cupti_call_index("cuptiActivityRegisterCallbacks", false, 0) < first_enable);
	CHECK_EQ_I(fake_cupti_call_index("cuptiActivityEnable", false, 0),
		   fake_cupti_call_index("cuptiActivityEnable", true,
					 CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));

	for (i = 0; i < sizeof(kinds_on) / sizeof(kinds_on[0]); i++)
		CHECK(fake_cupti_kind_enabled(kinds_on[i]));
	CHECK_EQ_U(fake_cupti_call_count("cuptiActivityEnable"), 6);
	CHECK(!fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_RUNTIME));
	CHECK(!fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_DRIVER));
	CHECK(!fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_KERNEL));

	for (i = 0; i < sizeof(launch_cbids) / sizeof(launch_cbids[0]); i++) {
		CHECK(fake_cupti_callback_enabled(launch_cbids[i].d, launch_cbids[i].id));
		CHECK(fake_cupti_api_enabled(launch_cbids[i].d, launch_cbids[i].id));
	}
	/* Synchronisations: API records, no callback. Everything else: neither. */
	CHECK(fake_cupti_api_enabled(CUPTI_CB_DOMAIN_RUNTIME_API,
				     CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020));
	CHECK(!fake_cupti_callback_enabled(CUPTI_CB_DOMAIN_RUNTIME_API,
					   CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020));
	CHECK(fake_cupti_api_enabled(CUPTI_CB_DOMAIN_DRIVER_API,
				     CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize));
	/* Releases: API records, no callback (a release needs no stack). */
	CHECK(fake_cupti_api_enabled(CUPTI_CB_DOMAIN_RUNTIME_API,
				     CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020));
	CHECK(!fake_cupti_callback_enabled(CUPTI_CB_DOMAIN_RUNTIME_API,
					   CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020));
	CHECK(!fake_cupti_callback_enabled(CUPTI_CB_DOMAIN_DRIVER_API,
					   CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync));
	CHECK(!fake_cupti_api_enabled(CUPTI_CB_DOMAIN_RUNTIME_API,
				      CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020));
	CHECK(!fake_cupti_callback_enabled(CUPTI_CB_DOMAIN_RUNTIME_API,
					   CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020));
	/* One call per probed API of the table, no domain-wide enable. */
	for (i = n = 0; i < traced_apis_nr; i++)
		n += traced_apis[i].probe;
	CHECK(n >= sizeof(launch_cbids) / sizeof(launch_cbids[0]));
	CHECK_EQ_U(fake_cupti_call_count("cuptiEnableCallback"), n);
	CHECK_EQ_U(fake_cupti_call_count("cuptiEnableDomain"), 0);

	/*
	 * Enable twice is a no-op; disable undoes everything and flushes, but keeps the
	 * subscription (one CUPTI session for the life of the process).
	 */
	CHECK_EQ_I(core__enable(&info), 0);
	CHECK_EQ_U(fake_cupti_call_count("cuptiSubscribe_v2"), 1);
	core__disable();
	CHECK(!core__enabled());
	CHECK(fake_cupti_subscribed());
	CHECK(!fake_cupti_callback_enabled(CUPTI_CB_DOMAIN_DRIVER_API,
					   CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
	for (i = 0; i < sizeof(kinds_on) / sizeof(kinds_on[0]); i++)
		CHECK(!fake_cupti_kind_enabled(kinds_on[i]));
	CHECK(!fake_cupti_api_enabled(CUPTI_CB_DOMAIN_RUNTIME_API,
				      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
	CHECK(
	    fake_cupti_call_index("cuptiActivityFlushAll", true, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) >
	    fake_cupti_call_index("cuptiActivityDisable", false, 0));
	core__disable();
	CHECK_EQ_U(fake_cupti_call_count("cuptiUnsubscribe"), 0);

	/* And it comes back, in the same session. */
	CHECK_EQ_I(core__enable(&info), 0);
	CHECK(fake_cupti_subscribed());
	CHECK_EQ_U(fake_cupti_call_count("cuptiSubscribe_v2"), 1);
	CHECK_EQ_U(fake_cupti_sessions(), 1);
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	CHECK(fake_cupti_callback_enabled(CUPTI_CB_DOMAIN_DRIVER_API,
					  CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
}

static void case_subscriber_taken(void)
{
	const struct fake_call *calls;
	size_t n, i;

	fake_cupti_set_result("cuptiSubscribe_v2", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
	fake_cupti_set_old_subscriber("CUPTI for torch.profiler");
	init_core();
	CHECK_EQ_I(core__enable(&info), -EBUSY);
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_SUBSCRIBER_TAKEN);
	CHECK(strstr(info.detail, "CUPTI for torch.profiler") != NULL);
	CHECK(!core__enabled());
	/* Nothing but the version and the subscribe attempt: the slot's owner is left alone. */
	n = fake_cupti_calls(&calls);
	CHECK_EQ_U(n, 2);
	for (i = 0; i < n; i++)
		CHECK(!strcmp(calls[i].fn, "cuptiGetVersion") ||
		      !strcmp(calls[i].fn, "cuptiSubscribe_v2"));
	core__disable();
	CHECK_EQ_U(fake_cupti_call_count("cuptiUnsubscribe"), 0);
}

static void case_kernel_kind_fails(void)
{
	fake_cupti_set_result("cuptiActivityEnable", CUPTI_ERROR_NOT_COMPATIBLE);
	init_core();
	CHECK_EQ_I(core__enable(&info), -EIO);
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_ERROR);
	CHECK(strstr(info.detail, "CONCURRENT_KERNEL") != NULL);
	CHECK(!fake_cupti_subscribed());
	CHECK(!core__enabled());
}

/* ---- launch callbacks ---------------------------------------------------------------------- */

#define RT CUPTI_CB_DOMAIN_RUNTIME_API
#define DRV CUPTI_CB_DOMAIN_DRIVER_API
#define RT_LAUNCH CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000
#define DRV_LAUNCH CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel

static void launch(CUpti_CallbackDomain d, CUpti_CallbackId id, uint32_t corr)
{
	fake_cupti_invoke_callback(d, id, CUPTI_API_ENTER, corr, "k");
	fake_cupti_invoke_callback(d, id, CUPTI_API_EXIT, corr, "k");
}

/* A runtime launch with the driver launch CUPTI reports inside it. */
static void nested_launch(uint32_t corr)
{
	fake_cupti_invoke_callback(RT, RT_LAUNCH, CUPTI_API_ENTER, corr, "k");
	fake_cupti_invoke_callback(DRV, DRV_LAUNCH, CUPTI_API_ENTER, corr, "k");
	fake_cupti_invoke_callback(DRV, DRV_LAUNCH, CUPTI_API_EXIT, corr, "k");
	fake_cupti_invoke_callback(RT, RT_LAUNCH, CUPTI_API_EXIT, corr, "k");
}

static uint64_t fired(void)
{
	return atomic_load(&core_stats.probes_fired);
}

static void case_launch_unlimited(void)
{
	setenv("PROFD_CUPTI_LAUNCH_RATE", "0", 1);
	enable_core();
	CHECK_EQ_U(info.launch_rate_limit, 0);

	/* Semaphore 0: no tracer attached, the probe is not fired, weights are still kept. */
	CHECK_EQ_U(profd_cuda_launch_semaphore, 0);
	nested_launch(10);
	launch(DRV, DRV_LAUNCH, 11);
	CHECK_EQ_U(fired(), 0);
	CHECK_EQ_U(launch_weight(10), 1);
	CHECK_EQ_U(launch_weight(11), 1);

	profd_cuda_launch_semaphore = 1;
	nested_launch(12); /* one probe: the driver call inside is not the outermost */
	CHECK_EQ_U(fired(), 1);
	launch(DRV, DRV_LAUNCH, 13); /* a driver launch on its own is */
	CHECK_EQ_U(fired(), 2);
	launch(RT, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 14);
	CHECK_EQ_U(fired(), 3);
	/* An allocation is probed, for its memory record's stack. */
	launch(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 15);
	CHECK_EQ_U(fired(), 4);
	/* Not probed (no callback enabled): never reaches the core. */
	launch(RT, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 16);
	CHECK_EQ_U(fired(), 4);
	CHECK_EQ_U(launch_weight(12), 1);
	CHECK_EQ_U(launch_weight(13), 1);
	CHECK_EQ_U(launch_weight(14), 1);
	/* Unseen ids, and a slot's owner from 65536 ids earlier, read as weight 1. */
	CHECK_EQ_U(launch_weight(99), 1);
	CHECK_EQ_U(launch_weight(12 + 65536), 1);
}

struct thread_arg {
	uint32_t corr;
};

static void *other_thread(void *p)
{
	struct thread_arg *a = p;

	launch(RT, RT_LAUNCH, a->corr);
	return NULL;
}

/*
 * Rate 10/s: a token every 100 ms, a bucket of one token. The weights are exact because the
 * test owns the clock.
 */
static void rate_limited_launches(void)
{
	struct thread_arg a = {.corr = 30};
	pthread_t t;

	atomic_store(&test_now, 20 * SEC);
	launch(RT, RT_LAUNCH, 20); /* first launch of the thread: probed */
	atomic_store(&test_now, 20 * SEC + 10 * MS);
	launch(RT, RT_LAUNCH, 21); /* 10 ms of credit: skipped */
	atomic_store(&test_now, 20 * SEC + 20 * MS);
	nested_launch(22); /* skipped; its driver half changes nothing */
	atomic_store(&test_now, 20 * SEC + 100 * MS);
	launch(DRV, DRV_LAUNCH, 23); /* 100 ms: probed, stands for itself and 21, 22 */
	/* Another thread has its own bucket. */
	CHECK_EQ_I(pthread_create(&t, NULL, other_thread, &a), 0);
	pthread_join(t, NULL);
	atomic_store(&test_now, 20 * SEC + 150 * MS);
	launch(RT, RT_LAUNCH, 24); /* 50 ms: skipped */
	atomic_store(&test_now, 25 * SEC);
	launch(RT, RT_LAUNCH, 26); /* long idle: the bucket holds one token, not fifty */
	launch(RT, RT_LAUNCH, 27); /* same instant: skipped */
}

static void case_launch_rate(void)
{
	setenv("PROFD_CUPTI_LAUNCH_RATE", "10", 1);
	enable_core();
	profd_cuda_launch_semaphore = 1;
	rate_limited_launches();
	CHECK_EQ_U(launch_weight(20), 1);
	CHECK_EQ_U(launch_weight(21), 0);
	CHECK_EQ_U(launch_weight(22), 0);
	CHECK_EQ_U(launch_weight(23), 3);
	CHECK_EQ_U(launch_weight(30), 1);
	CHECK_EQ_U(launch_weight(24), 0);
	CHECK_EQ_U(launch_weight(26), 2);
	CHECK_EQ_U(launch_weight(27), 0);
	CHECK_EQ_U(fired(), 4);
}

/*
 * Allocations take tokens from the launch bucket but are not launches: a skipped launch's
 * weight goes to the next launch, not to an allocation probed in between, and a skipped
 * allocation adds no weight to anything.
 */
static void case_alloc_rate(void)
{
	const CUpti_CallbackId alloc = CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020;

	setenv("PROFD_CUPTI_LAUNCH_RATE", "10", 1);
	enable_core();
	profd_cuda_launch_semaphore = 1;
	atomic_store(&test_now, 50 * SEC);
	launch(RT, RT_LAUNCH, 50); /* probed */
	launch(RT, RT_LAUNCH, 51); /* skipped */
	launch(RT, alloc, 52);	   /* no token: skipped, no weight */
	CHECK_EQ_U(fired(), 1);
	atomic_store(&test_now, 50 * SEC + 100 * MS);
	launch(RT, alloc, 53); /* probed, but stands for no launch */
	CHECK_EQ_U(fired(), 2);
	atomic_store(&test_now, 50 * SEC + 200 * MS);
	launch(RT, RT_LAUNCH, 54); /* probed: itself and 51 */
	CHECK_EQ_U(fired(), 3);
	CHECK_EQ_U(launch_weight(50), 1);
	CHECK_EQ_U(launch_weight(51), 0);
	CHECK_EQ_U(launch_weight(54), 2);
}

/*
 * The process's bucket: 4 x 10/s with a burst of 4. Five threads each launching once at one
 * instant: four get a probe, the fifth is skipped (weight 0) though its own bucket is full, and
 * its next probed launch stands for both.
 */
static void case_launch_process_rate(void)
{
	struct thread_arg a[5];
	pthread_t t[5];

	setenv("PROFD_CUPTI_LAUNCH_RATE", "10", 1);
	enable_core();
	profd_cuda_launch_semaphore = 1;
	atomic_store(&test_now, 40 * SEC);
	for (int i = 0; i < 5; i++) {
		a[i].corr = 40 + (uint32_t)i;
		CHECK_EQ_I(pthread_create(&t[i], NULL, other_thread, &a[i]), 0);
		pthread_join(t[i], NULL);
	}
	CHECK_EQ_U(fired(), 4);
	for (int i = 0; i < 4; i++)
		CHECK_EQ_U(launch_weight(40 + (uint32_t)i), 1);
	CHECK_EQ_U(launch_weight(44), 0);
	/* This thread has its own full bucket, but the process's is still empty. */
	launch(RT, RT_LAUNCH, 50);
	CHECK_EQ_U(launch_weight(50), 0);
	CHECK_EQ_U(fired(), 4);
	/* 25 ms later one process token is back (40/s), and the thread has its own. */
	atomic_store(&test_now, 40 * SEC + 25 * MS);
	launch(RT, RT_LAUNCH, 51);
	CHECK_EQ_U(launch_weight(51), 2);
	CHECK_EQ_U(fired(), 5);
}

/* A call in flight across disable and enable must not leave its thread's depth stuck. */
static void case_launch_generation(void)
{
	setenv("PROFD_CUPTI_LAUNCH_RATE", "0", 1);
	enable_core();
	profd_cuda_launch_semaphore = 1;
	fake_cupti_invoke_callback(RT, RT_LAUNCH, CUPTI_API_ENTER, 40, "k");
	CHECK_EQ_U(fired(), 1);
	core__disable();
	CHECK_EQ_I(core__enable(&info), 0);
	launch(RT, RT_LAUNCH, 41);
	CHECK_EQ_U(fired(), 2);
}

/* ---- activity buffers ---------------------------------------------------------------------- */

struct buf {
	uint8_t *p;
	size_t size, len;
};

static void put(struct buf *b, const void *rec, size_t n)
{
	CHECK(b->len + n <= b->size);
	if (b->len + n > b->size)
		return;
	memcpy(b->p + b->len, rec, n);
	b->len += n;
}

static void get_buf(struct buf *b)
{
	fake_cupti_request_buffer(&b->p, &b->size);
	CHECK(b->p != NULL);
	b->len = 0;
}

static void put_kernel(struct buf *b, uint32_t corr, uint64_t start, uint64_t end, const char *name,
		       uint32_t graph)
{
	CUpti_ActivityKernel10 k;

	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = start;
	k.end = end;
	k.deviceId = 1;
	k.contextId = 1;
	k.streamId = 7;
	k.gridX = 4;
	k.gridY = 2;
	k.gridZ = 3;
	k.blockX = 128;
	k.blockY = 2;
	k.blockZ = 1;
	k.correlationId = corr;
	k.name = name;
	k.graphId = graph;
	put(b, &k, sizeof(k));
}

static void put_memcpy(struct buf *b, uint32_t corr, uint64_t start, uint64_t end, uint8_t kind,
		       uint64_t bytes)
{
	CUpti_ActivityMemcpy6 m;

	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = kind;
	m.bytes = bytes;
	m.start = start;
	m.end = end;
	m.deviceId = 2;
	m.streamId = 9;
	m.correlationId = corr;
	put(b, &m, sizeof(m));
}

static void put_memset(struct buf *b, uint32_t corr, uint64_t start, uint64_t end, uint64_t bytes)
{
	CUpti_ActivityMemset4 m;

	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	m.bytes = bytes;
	m.start = start;
	m.end = end;
	m.deviceId = 3;
	m.streamId = 11;
	m.correlationId = corr;
	put(b, &m, sizeof(m));
}

static void put_marker(struct buf *b, uint32_t flags, uint32_t id, uint32_t tid, uint64_t ts,
		       const char *name, const char *domain)
{
	CUpti_ActivityMarker2 m;

	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MARKER;
	m.flags = flags;
	m.timestamp = ts;
	m.id = id;
	m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	m.objectId.pt.processId = 1234;
	m.objectId.pt.threadId = tid;
	m.name = name;
	m.domain = domain;
	put(b, &m, sizeof(m));
}

static void put_api(struct buf *b, CUpti_ActivityKind kind, CUpti_CallbackId cbid, uint32_t corr,
		    uint32_t tid, uint64_t start, uint64_t end)
{
	CUpti_ActivityAPI a;

	memset(&a, 0, sizeof(a));
	a.kind = kind;
	a.cbid = cbid;
	a.start = start;
	a.end = end;
	a.processId = 1234;
	a.threadId = tid;
	a.correlationId = corr;
	put(b, &a, sizeof(a));
}

static void put_overhead(struct buf *b)
{
	CUpti_ActivityOverhead3 o;

	memset(&o, 0, sizeof(o));
	o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
	o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
	put(b, &o, sizeof(o));
}

static void check_kernel(const struct ev *e, uint32_t corr, uint64_t start, uint64_t end,
			 const char *name, uint32_t graph, uint32_t weight)
{
	CHECK_EQ_U(e->type, EV_KERNEL);
	CHECK_EQ_U(e->corr, corr);
	CHECK_EQ_U(e->start_ns, start);
	CHECK_EQ_U(e->end_ns, end);
	CHECK_EQ_U(e->device, 1);
	CHECK_EQ_U(e->stream, 7);
	CHECK_EQ_U(e->graph_id, graph);
	CHECK_EQ_U(e->grid, 24);
	CHECK_EQ_U(e->block, 256);
	CHECK_EQ_U(e->weight, weight);
	CHECK_STREQ(e->name, name);
}

static void check_nvtx(const struct ev *e, uint64_t start, uint64_t end, uint32_t tid,
		       uint32_t depth, const char *name, const char *domain)
{
	CHECK_EQ_U(e->type, EV_NVTX);
	CHECK_EQ_U(e->start_ns, start);
	CHECK_EQ_U(e->end_ns, end);
	CHECK_EQ_U(e->tid, tid);
	CHECK_EQ_U(e->depth, depth);
	CHECK_STREQ(e->name, name);
	if (domain)
		CHECK_STREQ(e->domain, domain);
	else
		CHECK(e->domain == NULL);
}

static void check_api(const struct ev *e, uint32_t corr, uint32_t tid, uint64_t start, uint64_t end,
		      const char *name)
{
	CHECK_EQ_U(e->type, EV_API);
	CHECK_EQ_U(e->corr, corr);
	CHECK_EQ_U(e->tid, tid);
	CHECK_EQ_U(e->start_ns, start);
	CHECK_EQ_U(e->end_ns, end);
	CHECK_STREQ(e->name, name);
}

/* Callback clock: timestamps are CLOCK_MONOTONIC already. */
static void put_memory(struct buf *b, CUpti_ActivityMemoryOperationType op,
		       CUpti_ActivityMemoryKind mkind, uint32_t corr, uint64_t addr, uint64_t bytes,
		       uint64_t ts, uint32_t stream, bool pool)
{
	CUpti_ActivityMemory4 m;

	fake_cupti_memory_record(&m, op, mkind, corr, addr, bytes, ts, 3, stream, pool);
	put(b, &m, sizeof(m));
}

static void check_memory(const struct ev *e, uint32_t corr, uint64_t addr, uint64_t bytes,
			 uint64_t ts, uint32_t stream, uint8_t flags)
{
	CHECK_EQ_U(e->type, EV_MEM);
	CHECK_EQ_U(e->corr, corr);
	CHECK_EQ_U(e->addr, addr);
	CHECK_EQ_U(e->bytes, bytes);
	CHECK_EQ_U(e->start_ns, ts);
	CHECK_EQ_U(e->end_ns, ts);
	CHECK_EQ_U(e->device, 3);
	CHECK_EQ_U(e->stream, stream);
	CHECK_EQ_U(e->mem_flags, flags);
}

/*
 * MEMORY2 records: device, managed and pool allocations and their releases become events; host
 * memory does not. An allocation never holds the flush's watermark back: its record labels no
 * sample.
 */
static void case_decode_memory(void)
{
	const CUpti_ActivityMemoryOperationType A = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
	const CUpti_ActivityMemoryOperationType R = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
	const CUpti_ActivityMemoryKind DEV = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	struct ev ev[8];
	struct buf b;
	size_t n;

	setenv("PROFD_CUPTI_LAUNCH_RATE", "0", 1);
	enable_core();
	CHECK(fake_cupti_real_iterator());
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2));
	atomic_store(&test_now, 60 * SEC);
	launch(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 60);
	CHECK_EQ_U(launch_oldest_ns(60 * SEC, 10 * SEC), UINT64_MAX);
	launch(RT, RT_LAUNCH, 66);
	CHECK_EQ_U(launch_oldest_ns(60 * SEC, 10 * SEC), 60 * SEC);

	get_buf(&b);
	put_memory(&b, A, DEV, 60, 0x7f0000000000, 1 << 20, 1000, 0, false);
	put_memory(&b, A, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 61, 0x7f0000100000, 4096, 1100, 0,
		   false);
	put_memory(&b, A, DEV, 62, 0x7f0000200000, 512, 1200, 5, true);
	put_memory(&b, A, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 63, 0x10000, 64, 1300, 0, false);
	put_memory(&b, R, DEV, 64, 0x7f0000000000, 1 << 20, 1400, 0, false);
	put_memory(&b, R, DEV, 65, 0x7f0000200000, 512, 1500, 5, true);
	fake_cupti_complete_buffer(b.p, b.size, b.len);

	n = evq__drain(q, ev, 8);
	CHECK_EQ_U(n, 5);
	if (n != 5)
		return;
	check_memory(&ev[0], 60, 0x7f0000000000, 1 << 20, 1000, 0, 0);
	check_memory(&ev[1], 61, 0x7f0000100000, 4096, 1100, 0, EV_MEM_MANAGED);
	check_memory(&ev[2], 62, 0x7f0000200000, 512, 1200, 5, EV_MEM_POOL);
	check_memory(&ev[3], 64, 0x7f0000000000, 1 << 20, 1400, 0, EV_MEM_RELEASE);
	check_memory(&ev[4], 65, 0x7f0000200000, 512, 1500, 5, EV_MEM_RELEASE | EV_MEM_POOL);
	/* Memory records do not end a launch's wait. */
	CHECK_EQ_U(launch_oldest_ns(60 * SEC, 10 * SEC), 60 * SEC);
}

static void case_decode_callback_clock(void)
{
	char kname[] = "_Z6kernelPf"; /* CUPTI's strings die with the buffer: interned copies */
	struct ev ev[32], open[4];
	struct buf b;
	int64_t off;
	size_t n;

	setenv("PROFD_CUPTI_LAUNCH_RATE", "10", 1);
	enable_core();
	CHECK(fake_cupti_real_iterator());
	CHECK_EQ_I(info.clock, PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK);
	rate_limited_launches();
	off = core__test_offset();
	CHECK(off > (int64_t)(1000 * SEC)); /* CLOCK_REALTIME - the test's clock */

	get_buf(&b);
	CHECK_EQ_U(b.size, 1u << 20);
	put_kernel(&b, 20, 1000, 2000, kname, 0);
	put_kernel(&b, 23, 2100, 2600, "_Z5graphv", 9);
	put_memcpy(&b, 21, 3000, 3500, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 4096);
	put_memset(&b, 22, 3600, 3700, 512);
	put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_START, 1, 77, 4000, "outer", NULL);
	put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_START, 2, 77, 4100, "inner", "dom");
	put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 0, 77, 4150, "mark", NULL);
	put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_END, 2, 77, 4200, NULL, "dom");
	put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_END, 1, 77, 4300, NULL, NULL);
	put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_START, 3, 78, 4400, "open", NULL);
	/* A start/end range whose END (thread 79) arrives before its START (thread 80). */
	put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_END, 5, 79, 4500, NULL, NULL);
	put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_START, 5, 80, 4450, "cross", NULL);
	put_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, RT_LAUNCH, 20, 77, 900, 1000);
	put_api(&b, CUPTI_ACTIVITY_KIND_DRIVER, DRV_LAUNCH, 20, 77, 920, 990); /* inside it */
	put_api(&b, CUPTI_ACTIVITY_KIND_DRIVER, DRV_LAUNCH, 24, 77, 5000, 5100);
	put_overhead(&b);
	/* Still on CUPTI's default clock (a late attach): recognised and converted. */
	put_kernel(&b, 25, (uint64_t)off + 7000, (uint64_t)off + 8000, kname, 0);
	put_kernel(&b, 27, 0, 0, kname, 0);
	fake_cupti_complete_buffer(b.p, b.size, b.len);
	kname[1] = 'X'; /* CUPTI reuses the memory: the events must hold copies */

	n = evq__drain(q, ev, 32);
	CHECK_EQ_U(n, 11);
	if (n != 11)
		return;
	check_kernel(&ev[0], 20, 1000, 2000, "_Z6kernelPf", 0, 1);
	check_kernel(&ev[1], 23, 2100, 2600, "_Z5graphv", 9, 3);
	CHECK_EQ_U(ev[2].type, EV_COPY);
	CHECK_EQ_U(ev[2].copy_kind, PROFD__GPU_COPY_KIND__GPU_COPY_HTOD);
	CHECK_EQ_U(ev[2].corr, 21);
	CHECK_EQ_U(ev[2].start_ns, 3000);
	CHECK_EQ_U(ev[2].end_ns, 3500);
	CHECK_EQ_U(ev[2].bytes, 4096);
	CHECK_EQ_U(ev[2].device, 2);
	CHECK_EQ_U(ev[2].stream, 9);
	CHECK_EQ_U(ev[2].weight, 0);
	CHECK_EQ_U(ev[3].type, EV_COPY);
	CHECK_EQ_U(ev[3].copy_kind, PROFD__GPU_COPY_KIND__GPU_COPY_MEMSET);
	CHECK_EQ_U(ev[3].corr, 22);
	CHECK_EQ_U(ev[3].start_ns, 3600);
	CHECK_EQ_U(ev[3].end_ns, 3700);
	CHECK_EQ_U(ev[3].bytes, 512);
	CHECK_EQ_U(ev[3].device, 3);
	CHECK_EQ_U(ev[3].stream, 11);
	CHECK_EQ_U(ev[3].weight, 0);
	check_nvtx(&ev[4], 4150, 4150, 77, 2, "mark", NULL);
	check_nvtx(&ev[5], 4100, 4200, 77, 1, "inner", "dom");
	check_nvtx(&ev[6], 4000, 4300, 77, 0, "outer", NULL);
	check_nvtx(&ev[7], 4450, 4500, 80, 0, "cross", NULL);
	check_api(&ev[8], 20, 77, 900, 1000, "cudaLaunchKernel");
	check_api(&ev[9], 24, 77, 5000, 5100, "cuLaunchKernel");
	check_kernel(&ev[10], 25, 7000, 8000, "_Z6kernelPf", 0, 1);
	/* 27 (no timestamps, a CUPTI bug) is not sent: counted as such. */
	CHECK_EQ_U(atomic_load(&core_stats.zero_time), 1);
	CHECK_EQ_U(atomic_load(&core_stats.overhead), 1);
	CHECK_EQ_U(evq__take_dropped(q), 0);

	n = core__open_ranges(open, 4, 9999);
	CHECK_EQ_U(n, 1);
	check_nvtx(&open[0], 4400, 9999, 78, 0, "open", NULL);
	core__disable();
	CHECK_EQ_U(core__open_ranges(open, 4, 9999), 0);
}

/* No timestamp callback: records are on CUPTI's clock, offset measured against it. */
#define FAKE_OFF (1700000000ull * SEC + 123456789ull)

static uint64_t fake_realtime(void)
{
	return atomic_load(&test_now) + FAKE_OFF;
}

static uint64_t fake_realtime2(void)
{
	return atomic_load(&test_now) + FAKE_OFF + 5000;
}

static void decode_offset(bool honor)
{
	struct ev ev[8];
	struct buf b;
	uint64_t until;
	size_t n;

	fake_cupti_set_clock(fake_realtime, honor);
	enable_core();
	CHECK(fake_cupti_real_iterator());
	CHECK_EQ_I(info.clock, PROFD__GPU_CLOCK__GPU_CLOCK_OFFSET);
	CHECK_EQ_I(core__test_offset(), (int64_t)FAKE_OFF);

	get_buf(&b);
	put_kernel(&b, 50, FAKE_OFF + 1000, FAKE_OFF + 2000, "k", 0);
	put_memcpy(&b, 51, FAKE_OFF + 3000, FAKE_OFF + 3100, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 8);
	put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 0, 5, FAKE_OFF + 4000, "m", NULL);
	put_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME,
		CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 52, 5, FAKE_OFF + 5000,
		FAKE_OFF + 6000);
	fake_cupti_complete_buffer(b.p, b.size, b.len);
	n = evq__drain(q, ev, 8);
	CHECK_EQ_U(n, 4);
	if (n != 4)
		return;
	check_kernel(&ev[0], 50, 1000, 2000, "k", 0, 1);
	CHECK_EQ_U(ev[1].start_ns, 3000);
	CHECK_EQ_U(ev[1].end_ns, 3100);
	CHECK_EQ_U(ev[1].copy_kind, PROFD__GPU_COPY_KIND__GPU_COPY_DTOH);
	check_nvtx(&ev[2], 4000, 4000, 5, 0, "m", NULL);
	check_api(&ev[3], 52, 5, 5000, 6000, "cudaDeviceSynchronize");

	/* The offset is measured again every 10 s of flushing (NTP slews CLOCK_REALTIME). */
	fake_cupti_set_clock(fake_realtime2, honor);
	atomic_fetch_add(&test_now, 9 * SEC);
	core__flush(false, &until);
	CHECK_EQ_I(core__test_offset(), (int64_t)FAKE_OFF);
	atomic_fetch_add(&test_now, 1 * SEC);
	core__flush(false, &until);
	CHECK_EQ_I(core__test_offset(), (int64_t)FAKE_OFF + 5000);
}

static void case_decode_offset_refused(void)
{
	fake_cupti_set_result("cuptiActivityRegisterTimestampCallback", CUPTI_ERROR_NOT_COMPATIBLE);
	decode_offset(true);
	CHECK(!fake_cupti_timestamp_callback_set());
}

static void case_decode_offset_ignored(void)
{
	/* Registered, but CUPTI's clock does not follow it. */
	decode_offset(false);
	CHECK(fake_cupti_timestamp_callback_set());
}

/* ---- pool, drops, flush -------------------------------------------------------------------- */

/* Pool empty: the request is declined (CUPTI 13 is well past v27), counted, never a buffer. */
static void case_pool(void)
{
	struct buf a, b, c, e, f;
	uint8_t *p;
	size_t size;
	struct ev ev[4];
	uint64_t until;

	setenv("PROFD_CUPTI_BUFFERS", "2", 1);
	enable_core();
	CHECK(fake_cupti_real_iterator());
	CHECK_EQ_U(core__test_pool_size(), 2);
	get_buf(&a);
	get_buf(&b);
	CHECK(a.p != b.p);
	CHECK_EQ_U(a.size, 1u << 20);
	CHECK_EQ_U(b.size, 1u << 20);
	fake_cupti_request_buffer(&p, &size);
	CHECK(p == NULL);
	CHECK_EQ_U(size, 0);
	fake_cupti_request_buffer(&p, &size);
	CHECK(p == NULL);
	CHECK_EQ_U(atomic_load(&core_stats.declined_bufs), 2);
	CHECK_EQ_U(atomic_load(&core_stats.discard_bufs), 0);

	/* CUPTI's own drops are counted. A completed buffer goes back to the pool. */
	fake_cupti_set_dropped(5);
	put_kernel(&a, 63, 1, 2, "k", 0);
	fake_cupti_complete_buffer(a.p, a.size, a.len);
	CHECK_EQ_U(evq__drain(q, ev, 4), 1);
	CHECK_EQ_U(evq__take_dropped(q), 5);
	get_buf(&c);
	CHECK(c.p == a.p);

	/* The pool ran dry: the next flush (the uplink's thread) doubles it. */
	core__flush(false, &until);
	CHECK_EQ_U(core__test_pool_size(), 4);
	get_buf(&e);
	get_buf(&f);
	CHECK(e.p != a.p && e.p != b.p && f.p != e.p && f.p != a.p && f.p != b.p);
	core__flush(false, &until);
	CHECK_EQ_U(core__test_pool_size(), 4); /* not dry since: stays */
}

/* CUPTI before v27 crashes on a declined request: discard buffers, never one for two holders. */
static void case_pool_old_cupti(void)
{
	struct buf a, b, d1, d2, d3;

	fake_cupti_set_version(26);
	setenv("PROFD_CUPTI_BUFFERS", "2", 1);
	enable_core();
	CHECK(fake_cupti_real_iterator());
	get_buf(&a);
	get_buf(&b);
	get_buf(&d1);
	get_buf(&d2);
	CHECK(d1.p != a.p && d1.p != b.p);
	CHECK(d1.p != d2.p);
	CHECK_EQ_U(d1.size, 64u << 10);
	CHECK_EQ_U(d2.size, 64u << 10);
	CHECK_EQ_U(atomic_load(&core_stats.discard_bufs), 2);
	put_kernel(&d1, 60, 1, 2, "k", 0);
	put_kernel(&d1, 61, 1, 2, "k", 0);
	put_kernel(&d1, 62, 1, 2, "k", 0);
	fake_cupti_complete_buffer(d1.p, d1.size, d1.len);
	CHECK_EQ_U(evq__len(q), 0);
	CHECK_EQ_U(evq__take_dropped(q), 3);
	/* Given back: d1 is free again, d2 still out. */
	get_buf(&d3);
	CHECK(d3.p == d1.p);
	CHECK_EQ_U(atomic_load(&core_stats.declined_bufs), 0);
}

/* Buffers CUPTI hands us that we never gave it (another client's) are not adopted. */
static void case_foreign_buffers(void)
{
	uint8_t *small = aligned_alloc(8, 4096), *big = aligned_alloc(8, 1u << 20), *p;
	struct buf a, b, k;
	size_t size;

	setenv("PROFD_CUPTI_BUFFERS", "2", 1);
	enable_core();
	CHECK(fake_cupti_real_iterator());
	if (!CHECK(small && big))
		return;
	/* Records in them are the other client's: not decoded either. */
	k = (struct buf){.p = big, .size = 1u << 20};
	put_kernel(&k, 90, 1, 2, "k", 0);
	fake_cupti_complete_buffer(small, 4096, 0);
	fake_cupti_complete_buffer(big, 1u << 20, k.len);
	CHECK_EQ_U(atomic_load(&core_stats.foreign_bufs), 2);
	CHECK_EQ_U(evq__len(q), 0);
	get_buf(&a);
	get_buf(&b);
	CHECK(a.p != small && a.p != big && b.p != small && b.p != big);
	fake_cupti_request_buffer(&p, &size);
	CHECK(p == NULL);
	/* A pool buffer reported with another size is not ours to trust either. */
	fake_cupti_complete_buffer(a.p, 4096, 0);
	CHECK_EQ_U(atomic_load(&core_stats.foreign_bufs), 3);
	fake_cupti_request_buffer(&p, &size);
	CHECK(p == NULL);
	CHECK_EQ_U(core__test_pool_size(), 2);
}

static struct buf flush_buf;

static void on_flush(uint32_t flag)
{
	if (!(flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED))
		return;
	put_kernel(&flush_buf, 70, 100, 200, "k", 0);
	fake_cupti_complete_buffer(flush_buf.p, flush_buf.size, flush_buf.len);
}

/* The periodic flush is unforced, and its watermark stops at the oldest launch still out. */
static void case_flush(void)
{
	uint64_t until = 1;
	struct ev ev[4];
	struct buf b;

	setenv("PROFD_CUPTI_LAUNCH_RATE", "0", 1);
	/* The watermark alone: the delay bound's forced flushes are test_cupti_quirks'. */
	setenv("PROFD_CUPTI_MAX_DELAY_MS", "0", 1);
	enable_core();
	CHECK(fake_cupti_real_iterator());
	atomic_store(&test_now, 11 * SEC);
	launch(RT, RT_LAUNCH, 100);
	nested_launch(101); /* its driver half does not count twice */
	atomic_store(&test_now, 11 * SEC + 5 * MS);
	launch(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 102);
	atomic_store(&test_now, 12 * SEC);
	core__flush(false, &until);
	CHECK_EQ_U(fake_cupti_call_count("cuptiActivityFlushAll"), 1);
	CHECK(fake_cupti_call_index("cuptiActivityFlushAll", true, 0) >= 0);
	CHECK_EQ_U(until, 11 * SEC);

	/* 100 and 101 decoded: the copy launched 5 ms later is the oldest left. */
	get_buf(&b);
	put_kernel(&b, 100, 11 * SEC + 1000, 11 * SEC + 2000, "k", 0);
	put_kernel(&b, 101, 11 * SEC + 3000, 11 * SEC + 4000, "k", 0);
	fake_cupti_complete_buffer(b.p, b.size, b.len);
	atomic_store(&test_now, 13 * SEC);
	core__flush(false, &until);
	CHECK_EQ_U(until, 11 * SEC + 5 * MS);
	get_buf(&b);
	put_memcpy(&b, 102, 11 * SEC + 6 * MS, 11 * SEC + 7 * MS, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
		   64);
	fake_cupti_complete_buffer(b.p, b.size, b.len);
	CHECK_EQ_U(evq__drain(q, ev, 4), 3);
	atomic_store(&test_now, 14 * SEC);
	core__flush(false, &until);
	CHECK_EQ_U(until, 14 * SEC);

	/* A launch whose record never comes holds the watermark for 10 s, then is taken as lost. */
	atomic_store(&test_now, 15 * SEC + 1234567);
	launch(DRV, DRV_LAUNCH, 103);
	atomic_store(&test_now, 25 * SEC);
	core__flush(false, &until);
	CHECK_EQ_U(until, 15 * SEC + 1234000); /* microseconds */
	atomic_store(&test_now, 25 * SEC + 1234001);
	core__flush(false, &until);
	CHECK_EQ_U(until, 25 * SEC + 1234001);
	/* Never backwards (a clock that steps back, say). */
	atomic_store(&test_now, 20 * SEC);
	core__flush(false, &until);
	CHECK_EQ_U(until, 25 * SEC + 1234001);
	CHECK_EQ_I(
	    fake_cupti_call_index("cuptiActivityFlushAll", true, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
	    -1);

	/* Forced (process exit) returns what is partly filled. */
	get_buf(&flush_buf);
	fake_cupti_on_flush(on_flush);
	atomic_store(&test_now, 42 * SEC);
	core__flush(true, &until);
	CHECK_EQ_U(until, 42 * SEC);
	CHECK_EQ_U(evq__drain(q, ev, 4), 1);
	CHECK_EQ_U(ev[0].corr, 70);
	fake_cupti_on_flush(NULL);
	/* A failed flush promises nothing. */
	fake_cupti_set_result("cuptiActivityFlushAll", CUPTI_ERROR_UNKNOWN);
	core__flush(false, &until);
	CHECK_EQ_U(until, 0);
	/* Disabled: no CUPTI call, nothing promised. */
	fake_cupti_set_result("cuptiActivityFlushAll", CUPTI_SUCCESS);
	core__disable();
	until = 1;
	size_t before = fake_cupti_call_count("cuptiActivityFlushAll");
	core__flush(false, &until);
	CHECK_EQ_U(until, 0);
	CHECK_EQ_U(fake_cupti_call_count("cuptiActivityFlushAll"), before);
	/* Enabling again forgets the launches of the earlier session. */
	atomic_store(&test_now, 50 * SEC);
	launch(RT, RT_LAUNCH, 104); /* callbacks off: not seen */
	CHECK_EQ_I(core__enable(&info), 0);
	atomic_store(&test_now, 51 * SEC);
	core__flush(false, &until);
	CHECK_EQ_U(until, 51 * SEC);
}

static struct buf held_buf;

static void *complete_held(void *arg)
{
	fake_cupti_complete_buffer(held_buf.p, held_buf.size, held_buf.len);
	return NULL;
}

/* A buffer being decoded on another thread while the flush returns: the watermark waits. */
static void case_flush_decoding(void)
{
	uint64_t until;
	pthread_t t;
	struct ev ev[4];

	enable_core();
	CHECK(fake_cupti_real_iterator());
	atomic_store(&test_now, 20 * SEC);
	core__flush(false, &until);
	CHECK_EQ_U(until, 20 * SEC);
	get_buf(&held_buf);
	put_kernel(&held_buf, 110, 20 * SEC + 1000, 20 * SEC + 2000, "k", 0);
	fake_cupti_hold_iterator(true);
	CHECK_EQ_I(pthread_create(&t, NULL, complete_held, NULL), 0);
	for (int i = 0; i < 5000 && fake_cupti_iterator_waiting() == 0; i++)
		usleep(1000);
	CHECK_EQ_I(fake_cupti_iterator_waiting(), 1);
	atomic_store(&test_now, 21 * SEC);
	core__flush(false, &until);
	CHECK_EQ_U(until, 20 * SEC);
	fake_cupti_hold_iterator(false);
	pthread_join(t, NULL);
	CHECK_EQ_U(evq__drain(q, ev, 4), 1);
	atomic_store(&test_now, 22 * SEC);
	core__flush(false, &until);
	CHECK_EQ_U(until, 22 * SEC);
}

/* ---- logging ------------------------------------------------------------------------------- */

/*
 * A condition logged on an application thread (here: the pool runs dry in a buffer request)
 * writes nothing there, keeps errno, and survives a stderr that is a closed pipe; the line
 * comes out whole when the uplink thread (here: the test) writes the recorded lines.
 */
static void case_log_not_on_app_thread(void)
{
	int closed[2], open_[2];
	char buf[512] = {0};
	uint8_t *p;
	size_t size;
	ssize_t n;

	setenv("PROFD_CUPTI_BUFFERS", "2", 1);
	signal(SIGPIPE, SIG_DFL);
	enable_core();
	CHECK_EQ_I(pipe(closed), 0);
	close(closed[0]);
	CHECK_EQ_I(dup2(closed[1], STDERR_FILENO), STDERR_FILENO);
	fake_cupti_request_buffer(&p, &size);
	fake_cupti_request_buffer(&p, &size);
	errno = EDOM;
	fake_cupti_request_buffer(&p, &size); /* pool empty: logged */
	CHECK_EQ_I(errno, EDOM);
	CHECK(p == NULL);

	CHECK_EQ_I(pipe2(open_, O_NONBLOCK), 0);
	CHECK_EQ_I(dup2(open_[1], STDERR_FILENO), STDERR_FILENO);
	n = read(open_[0], buf, sizeof(buf) - 1);
	CHECK_EQ_I(n, -1);
	uplink__write_logs();
	n = read(open_[0], buf, sizeof(buf) - 1);
	CHECK_STREQ(buf, "profd_cupti: activity buffer pool empty (2 x 1 MiB), records dropped; "
			 "PROFD_CUPTI_BUFFERS sets the count\n");
	/* Once per process. */
	fake_cupti_request_buffer(&p, &size);
	uplink__write_logs();
	CHECK_EQ_I(read(open_[0], buf, sizeof(buf) - 1), -1);
	/* The writer (blocking every signal in production) does not die on a closed pipe. */
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	core_log_once(CLOG_FLUSH, "x");
	CHECK_EQ_I(dup2(closed[1], STDERR_FILENO), STDERR_FILENO);
	uplink__write_logs();
}

/* ---- fork ---------------------------------------------------------------------------------- */

/* In a forked child every callback returns at once: no lock, no buffer, no event. */
static void case_fork_child(void)
{
	struct buf a;
	uint8_t *p = (uint8_t *)1;
	size_t size = 1;
	uint64_t f;

	setenv("PROFD_CUPTI_LAUNCH_RATE", "0", 1);
	enable_core();
	CHECK(fake_cupti_real_iterator());
	profd_cuda_launch_semaphore = 1;
	get_buf(&a);
	put_kernel(&a, 120, 1000, 2000, "k", 0);
	uplink__forked_child();
	CHECK(atomic_load(&core_forked));
	fake_cupti_request_buffer(&p, &size);
	CHECK(p == NULL);
	CHECK_EQ_U(size, 0);
	fake_cupti_complete_buffer(a.p, a.size, a.len);
	CHECK_EQ_U(evq__len(q), 0);
	f = fired();
	atomic_store(&test_now, 30 * SEC);
	launch(RT, RT_LAUNCH, 121);
	CHECK_EQ_U(fired(), f);
	CHECK_EQ_U(launch_oldest_ns(30 * SEC, 10 * SEC), UINT64_MAX);
}

/* ---- NVTX table ---------------------------------------------------------------------------- */

static void put_start(struct buf *b, uint32_t id, uint64_t ts)
{
	put_marker(b, CUPTI_ACTIVITY_FLAG_MARKER_START, id, 77, ts, "r", NULL);
}

/* Leaked ranges expire, and a full table makes room for new ranges after a minute. */
static void case_nvtx_ttl(void)
{
	static struct ev open[1100];
	struct buf b;
	uint64_t drops = 0;

	enable_core();
	CHECK(fake_cupti_real_iterator());
	/* 1024 ranges that never end (the table's size), a lone END, at 10 s. */
	for (uint32_t i = 0; i < 1024; i += 512) {
		get_buf(&b);
		for (uint32_t j = i; j < i + 512; j++)
			put_start(&b, 1000 + j, 5000 + j);
		fake_cupti_complete_buffer(b.p, b.size, b.len);
	}
	CHECK_EQ_U(core__open_ranges(open, 1100, 9000), 1024);
	drops += evq__take_dropped(q);
	CHECK_EQ_U(drops, 0);
	/* Full, nothing old enough: lost. */
	atomic_store(&test_now, 69 * SEC);
	get_buf(&b);
	put_start(&b, 5000, 6000);
	fake_cupti_complete_buffer(b.p, b.size, b.len);
	CHECK_EQ_U(evq__take_dropped(q), 1);
	/* A minute later the oldest leaked range gives its slot to the new one. */
	atomic_store(&test_now, 70 * SEC);
	get_buf(&b);
	put_start(&b, 5001, 7000);
	fake_cupti_complete_buffer(b.p, b.size, b.len);
	CHECK_EQ_U(evq__take_dropped(q), 0);
	CHECK_EQ_U(core__open_ranges(open, 1100, 9000), 1024);
	/* And it pairs. */
	get_buf(&b);
	put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_END, 5001, 77, 7500, NULL, NULL);
	fake_cupti_complete_buffer(b.p, b.size, b.len);
	{
		struct ev e;

		CHECK_EQ_U(evq__drain(q, &e, 1), 1);
		CHECK_EQ_U(e.start_ns, 7000);
		CHECK_EQ_U(e.end_ns, 7500);
	}
	CHECK_EQ_U(core__open_ranges(open, 1100, 9000), 1023);
	/* An hour after they began, the leaked ones are gone. */
	atomic_store(&test_now, 10 * SEC + 3600 * SEC);
	CHECK_EQ_U(core__open_ranges(open, 1100, 9000), 0);
	/* A lone END waits a minute for its START. */
	get_buf(&b);
	put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_END, 6000, 77, 8000, NULL, NULL);
	fake_cupti_complete_buffer(b.p, b.size, b.len);
	atomic_fetch_add(&test_now, 61 * SEC);
	get_buf(&b);
	put_start(&b, 6000, 7900);
	fake_cupti_complete_buffer(b.p, b.size, b.len);
	CHECK_EQ_U(evq__len(q), 0);
	CHECK_EQ_U(core__open_ranges(open, 1100, 9000), 1);
}

/* ---- loading the system's CUPTI ------------------------------------------------------------ */

/* A real libcupti in the process (the test links the fake, which stays out of this). */
static bool cupti_mapped(void)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return true;
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, "/libcupti.so") != NULL;
	fclose(f);
	return found;
}

/*
 * Nothing loaded, nothing configured: init loads nothing and says READY without a path; the
 * first enable loads the system's (here the fake, standing in for it).
 */
static void case_deferred_load(void)
{
	struct core_info before;

	unsetenv("PROFD_CUPTI_PATH");
	cupti_test_set_system_name(FAKE_CUPTI_PATH);
	q = evq__new(16);
	core__test_set_clock(test_clock);
	CHECK_EQ_I(core__init(q, &info), 0);
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_READY);
	CHECK_STREQ(info.cupti_path, "");
	CHECK_EQ_U(info.cupti_version, 0);
	CHECK(info.library_path[0] != 0);
	CHECK_EQ_U(fake_cupti_call_count("cuptiGetVersion"), 0);
	before = info;
	CHECK_EQ_I(core__enable(&info), 0);
	CHECK(core__enabled());
	CHECK(strstr(info.cupti_path, "libcupti_fake.so") != NULL);
	CHECK_EQ_U(info.cupti_version, CUPTI_API_VERSION);
	CHECK(memcmp(&before, &info, sizeof(info)) != 0);
	CHECK(fake_cupti_subscribed());
}

static void case_deferred_load_fails(void)
{
	char buf[512] = {0};
	int p[2];

	unsetenv("PROFD_CUPTI_PATH");
	cupti_test_set_system_name("/nonexistent/libcupti.so.13");
	q = evq__new(16);
	CHECK_EQ_I(core__init(q, &info), 0);
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_READY);
	CHECK(!cupti_mapped());
	CHECK_EQ_I(core__enable(&info), -ENOENT);
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_NO_CUPTI);
	CHECK(strstr(info.detail, "/nonexistent/libcupti.so.13") != NULL);
	CHECK_EQ_I(core__enable(&info), -ENOENT);
	CHECK_EQ_I(pipe2(p, O_NONBLOCK), 0);
	dup2(p[1], STDERR_FILENO);
	uplink__write_logs();
	CHECK(read(p[0], buf, sizeof(buf) - 1) > 0);
	CHECK(strncmp(buf, "profd_cupti: no libcupti", 24) == 0);
	CHECK(strstr(buf, "; GPU activity is not collected\n") != NULL);
	/* Once. */
	CHECK(strchr(buf, '\n') == buf + strlen(buf) - 1);
}

/* ---- the launch path's TLS ----------------------------------------------------------------- */

/*
 * Every thread-local of the library uses the initial-exec model: the object is marked
 * DF_STATIC_TLS and does not import __tls_get_addr (which the launch callback would call).
 */
static void case_tls_model(void)
{
	struct stat st;
	uint8_t *data;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	bool static_tls = false, tls_get_addr = false, has_tls = false;
	int fd;

	fd = open(PROFD_CUPTI_SO, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK_EQ_I(fstat(fd, &st), 0);
	data = malloc((size_t)st.st_size);
	CHECK(data && read(fd, data, (size_t)st.st_size) == st.st_size);
	close(fd);
	eh = (const Elf64_Ehdr *)data;
	sh = (const Elf64_Shdr *)(data + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type == SHT_DYNAMIC) {
			const Elf64_Dyn *d = (const Elf64_Dyn *)(data + sh[i].sh_offset);

			for (; d->d_tag != DT_NULL; d++)
				if (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_STATIC_TLS))
					static_tls = true;
		}
		if (sh[i].sh_type == SHT_DYNSYM) {
			const Elf64_Sym *sym = (const Elf64_Sym *)(data + sh[i].sh_offset);
			const char *str = (const char *)(data + sh[sh[i].sh_link].sh_offset);
			size_t n = sh[i].sh_size / sizeof(*sym);

			for (size_t j = 0; j < n; j++)
				if (!strcmp(str + sym[j].st_name, "__tls_get_addr"))
					tls_get_addr = true;
		}
		if (sh[i].sh_flags & SHF_TLS)
			has_tls = true;
	}
	CHECK(has_tls);
	CHECK(static_tls);
	CHECK(!tls_get_addr);
	free(data);
}

/* ---- the USDT probe site ------------------------------------------------------------------- */

/*
 * Find the stapsdt note of profd:cuda_launch in an ELF file and check that it names a
 * semaphore: the probe is compiled in and gated. Returns the number of such notes.
 */
static int usdt_notes(const char *path)
{
	static const char owner[8] = "stapsdt";
	struct stat st;
	uint8_t *data, *p, *end;
	int fd, found = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	if (fd < 0)
		return 0;
	CHECK_EQ_I(fstat(fd, &st), 0);
	data = malloc((size_t)st.st_size);
	CHECK(data && read(fd, data, (size_t)st.st_size) == st.st_size);
	close(fd);
	end = data + st.st_size;
	for (p = data + 12; p + 8 + 24 < end; p++) {
		uint32_t namesz, descsz, type;
		const char *prov, *name;
		uint64_t sem;

		p = memmem(p, (size_t)(end - p), owner, sizeof(owner));
		if (!p || p + 8 + 24 >= end)
			break;
		memcpy(&namesz, p - 12, 4);
		memcpy(&descsz, p - 8, 4);
		memcpy(&type, p - 4, 4);
		if (namesz != 8 || type != 3 || p + 8 + descsz > end)
			continue;
		memcpy(&sem, p + 8 + 16, 8);
		prov = (const char *)p + 8 + 24;
		name = prov + strnlen(prov, descsz - 24) + 1;
		if (strcmp(prov, PROFD_USDT_PROVIDER) || strcmp(name, PROFD_USDT_LAUNCH))
			continue;
		CHECK(sem != 0);
		found++;
	}
	free(data);
	return found;
}

static void case_usdt(void)
{
	CHECK_EQ_I(usdt_notes("/proc/self/exe"), 1);
	CHECK_EQ_I(usdt_notes(PROFD_CUPTI_SO), 1);
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
	RUN(case_no_cupti);
	RUN(case_too_old);
	RUN(case_init);
	RUN(case_loaded_wins);
	RUN(case_bad_env);
	RUN(case_enable);
	RUN(case_subscriber_taken);
	RUN(case_kernel_kind_fails);
	RUN(case_launch_unlimited);
	RUN(case_launch_rate);
	RUN(case_alloc_rate);
	RUN(case_launch_process_rate);
	RUN(case_launch_generation);
	RUN(case_decode_callback_clock);
	RUN(case_decode_memory);
	RUN(case_decode_offset_refused);
	RUN(case_decode_offset_ignored);
	RUN(case_pool);
	RUN(case_pool_old_cupti);
	RUN(case_foreign_buffers);
	RUN(case_flush);
	RUN(case_flush_decoding);
	RUN(case_log_not_on_app_thread);
	RUN(case_fork_child);
	RUN(case_nvtx_ttl);
	RUN(case_deferred_load);
	RUN(case_deferred_load_fails);
	RUN(case_tls_model);
	RUN(case_usdt);
	return CHECK_DONE();
}
