// SPDX-License-Identifier: BSD-2-Clause
/*
 * The CUPTI core: the function table, the subscriber slot, the clock, the activity buffer
 * pool. The launch callback lives in launch.c, the record decoder in decode.c, NVTX pairing in
 * nvtx_pair.c. All entry points of core.h run on the uplink thread; the buffer callbacks run
 * on whichever thread CUPTI picks (its worker, a CUDA thread whose buffer filled, or the
 * uplink inside cuptiActivityFlushAll).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "core_priv.h"
#include "uplink.h"
#include "profd.pb-c.h"
#include "timeutil.h"

#define POOL_BUF_SIZE (1u << 20)
#define POOL_DEFAULT 8
#define POOL_MAX 256
/* The pool grows (doubling, from the uplink thread) up to this when it ran dry. */
#define POOL_GROW_MAX 64
/*
 * Declining a buffer request (*buffer = NULL) is documented in cupti_activity.h
 * (CUpti_BuffersCallbackRequestFunc: "CUPTI may drop activity records"); CUPTI before API
 * version 27 (CUDA 12.9) crashes on it (Kineto's CuptiActivityApi.cpp works around the same),
 * so older ones get a discard buffer whose records are only counted.
 */
#define CUPTI_DECLINE_MIN_VERSION 27
#define DISCARD_SIZE (64u << 10)
#define DISCARD_SLOTS 64
#define RATE_DEFAULT 1000
#define RATE_MAX 10000000
/* A callback clock further than this from CLOCK_MONOTONIC did not take effect. */
#define CLOCK_CHECK_NS (50 * NSEC_PER_MSEC)
#define OFFSET_READS 16
#define OFFSET_REFRESH_NS (10 * NSEC_PER_SEC)
/* A launch whose record is missing for this long is taken as lost (failed, or dropped). */
#define LAUNCH_MAX_AGE_NS (10 * NSEC_PER_SEC)

enum clock_mode { CLK_NONE, CLK_CALLBACK, CLK_OFFSET };

struct cupti_fns core_fns;
struct evq *core_evq;
uint64_t (*core_mono_ns)(void) = mono_ns;
atomic_bool core_forked;

/*
 * The launch rate limit's clock: CLOCK_MONOTONIC_COARSE, read from the vDSO without touching
 * the TSC (a few ns instead of about 26 on a VM). Its tick (1-4 ms) only makes the bucket refill
 * in steps; the rate over a second stays the same.
 */
static uint64_t coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t (*core_bucket_ns)(void) = coarse_ns;

static struct {
	bool loaded;
	bool deferred; /* no CUPTI at init: load the system's at the first enable */
	bool enabled;
	void *handle;
	uint32_t version;
	uint32_t rate;
	unsigned pool_target, pool_cap;
	char path[256];
	CUpti_SubscriberHandle sub;
	uint64_t offset_at; /* core_mono_ns() of the last offset measurement */
	uint64_t until;	    /* the last watermark core__flush gave */
	/* what enable switched on, for disable */
	CUpti_ActivityKind kinds[8];
	size_t nr_kinds;
	bool api_on;
	bool cb_on;
} core;

static _Atomic int clock_mode = CLK_NONE;
/* CUPTI's REALTIME-like clock minus CLOCK_MONOTONIC; records in that clock subtract it. */
static _Atomic int64_t clock_offset;
/* buf_completed calls in progress: their records are not all queued yet. */
static atomic_int decoding;

/* ---- logging ------------------------------------------------------------------------------- */

static atomic_uint log_seen;

void core_log_once(enum core_log_id id, const char *fmt, ...)
{
	int saved_errno = errno;
	char line[256];
	va_list ap;

	if (atomic_fetch_or_explicit(&log_seen, 1u << id, memory_order_relaxed) & (1u << id))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* Recorded, not written: the uplink thread writes it (never an application thread). */
	uplink__log("%s", line);
	errno = saved_errno;
}

/* ---- buffer pool --------------------------------------------------------------------------- */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *pool_free[POOL_MAX];
static unsigned pool_nr_free;
/*
 * Every buffer of the pool, for the membership check of buf_completed: written once per slot
 * before pool_nr is published, read without the lock.
 */
static uint8_t *_Atomic pool_all[POOL_MAX];
static atomic_uint pool_nr;
/* A request found the pool empty: the uplink grows it at its next flush. */
static atomic_bool pool_dry;

/*
 * Discard buffers for CUPTI before v27. Each is with at most one holder at a time (CUPTI fills
 * per-thread buffers concurrently, and zeroes a buffer when it hands it to a thread), so a
 * requesting thread never shares one with another: taken by CAS on busy, given back by
 * buf_completed. Allocated on first use, kept for the life of the process.
 */
static uint8_t *_Atomic discard_buf[DISCARD_SLOTS];
static atomic_uchar discard_busy[DISCARD_SLOTS];

/* Fill the pool up to core.pool_target buffers. The buffers live as long as the process. */
static int pool_fill(void)
{
	unsigned n;
	int err = 0;

	pthread_mutex_lock(&pool_lock);
	n = atomic_load_explicit(&pool_nr, memory_order_relaxed);
	while (n < core.pool_target) {
		uint8_t *b = aligned_alloc(8, POOL_BUF_SIZE);

		if (!b) {
			err = -ENOMEM;
			break;
		}
		atomic_store_explicit(&pool_all[n], b, memory_order_relaxed);
		atomic_store_explicit(&pool_nr, ++n, memory_order_release);
		pool_free[pool_nr_free++] = b;
	}
	pthread_mutex_unlock(&pool_lock);
	return n ? 0 : err;
}

static bool pool_owns(const uint8_t *buf)
{
	unsigned i, n = atomic_load_explicit(&pool_nr, memory_order_acquire);

	for (i = 0; i < n; i++)
		if (atomic_load_explicit(&pool_all[i], memory_order_relaxed) == buf)
			return true;
	return false;
}

static uint8_t *discard_take(void)
{
	unsigned i;

	for (i = 0; i < DISCARD_SLOTS; i++) {
		unsigned char idle = 0;
		uint8_t *b;

		if (atomic_load_explicit(&discard_busy[i], memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&discard_busy[i], &idle, 1))
			continue;
		b = atomic_load(&discard_buf[i]);
		if (!b) {
			b = aligned_alloc(8, DISCARD_SIZE);
			if (!b) {
				atomic_store(&discard_busy[i], 0);
				return NULL;
			}
			atomic_store(&discard_buf[i], b);
		}
		return b;
	}
	return NULL;
}

/* Give a discard buffer back. Returns false when buf is none of them. */
static bool discard_give(const uint8_t *buf)
{
	unsigned i;

	for (i = 0; i < DISCARD_SLOTS; i++) {
		if (atomic_load(&discard_buf[i]) == buf) {
			atomic_store(&discard_busy[i], 0);
			return true;
		}
	}
	return false;
}

static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	int saved_errno = errno;
	uint8_t *b = NULL;

	*buf = NULL;
	*size = 0;
	*max_records = 0;
	if (atomic_load_explicit(&core_forked, memory_order_relaxed))
		return;
	pthread_mutex_lock(&pool_lock);
	if (pool_nr_free)
		b = pool_free[--pool_nr_free];
	pthread_mutex_unlock(&pool_lock);
	if (b) {
		*buf = b;
		*size = POOL_BUF_SIZE;
		errno = saved_errno;
		return;
	}
	atomic_store_explicit(&pool_dry, true, memory_order_relaxed);
	core_log_once(CLOG_POOL_EMPTY,
		      "activity buffer pool empty (%u x 1 MiB), records dropped; "
		      "PROFD_CUPTI_BUFFERS sets the count",
		      atomic_load_explicit(&pool_nr, memory_order_relaxed));
	if (core.version >= CUPTI_DECLINE_MIN_VERSION) {
		/* Declined: CUPTI drops the records and counts them (buf_completed reads that). */
		atomic_fetch_add_explicit(&core_stats.declined_bufs, 1, memory_order_relaxed);
		errno = saved_errno;
		return;
	}
	b = discard_take();
	if (b) {
		atomic_fetch_add_explicit(&core_stats.discard_bufs, 1, memory_order_relaxed);
		*buf = b;
		*size = DISCARD_SIZE;
	} else {
		/* Every discard buffer is out: nothing safe is left to give. */
		atomic_fetch_add_explicit(&core_stats.declined_bufs, 1, memory_order_relaxed);
	}
	errno = saved_errno;
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
				   size_t valid)
{
	int saved_errno = errno;
	size_t dropped = 0;

	if (atomic_load_explicit(&core_forked, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&decoding, 1, memory_order_acq_rel);
	if (!buf) {
		/* nothing */
	} else if (size == POOL_BUF_SIZE && pool_owns(buf)) {
		decode_buffer(buf, valid);
		pthread_mutex_lock(&pool_lock);
		if (pool_nr_free < POOL_MAX)
			pool_free[pool_nr_free++] = buf;
		pthread_mutex_unlock(&pool_lock);
	} else if (size == DISCARD_SIZE && discard_give(buf)) {
		if (core_evq)
			evq__add_dropped(core_evq, count_records(buf, valid));
	} else {
		/*
		 * Not ours: another client's buffer still out when we registered our callbacks.
		 * Its size and owner are unknown to us; it is never handed out again.
		 */
		atomic_fetch_add_explicit(&core_stats.foreign_bufs, 1, memory_order_relaxed);
	}
	if (core_fns.ActivityGetNumDroppedRecords &&
	    core_fns.ActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS &&
	    dropped && core_evq)
		evq__add_dropped(core_evq, dropped);
	atomic_fetch_sub_explicit(&decoding, 1, memory_order_acq_rel);
	errno = saved_errno;
}

/* The pool ran dry since the last flush: double it, up to its cap. Uplink thread. */
static void pool_grow(void)
{
	unsigned target;

	if (!atomic_exchange_explicit(&pool_dry, false, memory_order_relaxed))
		return;
	if (core.pool_target >= core.pool_cap)
		return;
	target = core.pool_target * 2;
	core.pool_target = target > core.pool_cap ? core.pool_cap : target;
	pool_fill();
}

/* ---- clock --------------------------------------------------------------------------------- */

static uint64_t CUPTIAPI ts_callback(void)
{
	return core_mono_ns();
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static uint64_t cupti_now(void)
{
	uint64_t t = 0;

	if (core_fns.GetTimestamp(&t) != CUPTI_SUCCESS)
		return 0;
	return t;
}

/*
 * other - CLOCK_MONOTONIC from the tightest of OFFSET_READS bracketed reads (the bracket
 * bounds the error by half its width). Returns 0 when the other clock cannot be read.
 */
static int64_t measure_offset(uint64_t (*other)(void))
{
	uint64_t best = UINT64_MAX;
	int64_t off = 0;
	int i;

	for (i = 0; i < OFFSET_READS; i++) {
		uint64_t m1 = core_mono_ns();
		uint64_t o = other();
		uint64_t m2 = core_mono_ns();

		if (!o)
			return 0;
		if (m2 - m1 < best) {
			best = m2 - m1;
			off = (int64_t)(o - (m1 + (m2 - m1) / 2));
		}
	}
	return off;
}

/*
 * In CALLBACK mode the offset is CLOCK_REALTIME's: a record still stamped on CUPTI's default
 * clock (late attach with older libcupti keeps contexts on it) is recognised by its size,
 * since a REALTIME value is decades of ns while CLOCK_MONOTONIC counts from boot.
 */
static void offset_refresh(void)
{
	int mode = atomic_load_explicit(&clock_mode, memory_order_relaxed);
	int64_t off = measure_offset(mode == CLK_OFFSET ? cupti_now : realtime_ns);

	if (off)
		atomic_store_explicit(&clock_offset, off, memory_order_relaxed);
	core.offset_at = core_mono_ns();
}

uint64_t core_ts(uint64_t ts)
{
	int mode = atomic_load_explicit(&clock_mode, memory_order_relaxed);
	int64_t off = atomic_load_explicit(&clock_offset, memory_order_relaxed);

	if (!ts)
		return 0;
	if (mode == CLK_CALLBACK && (off <= 0 || ts < (uint64_t)off / 2))
		return ts;
	if (off <= 0)
		return ts;
	return ts > (uint64_t)off ? ts - (uint64_t)off : 0;
}

/* Register the CLOCK_MONOTONIC callback and check that CUPTI uses it. Returns the mode. */
static int clock_setup(void)
{
	CUptiResult r;
	uint64_t t, m;

	if (!core_fns.ActivityRegisterTimestampCallback) {
		core_log_once(CLOG_CLOCK, "no cuptiActivityRegisterTimestampCallback, "
					  "converting timestamps with a measured offset");
		return CLK_OFFSET;
	}
	r = core_fns.ActivityRegisterTimestampCallback(ts_callback);
	if (r != CUPTI_SUCCESS) {
		core_log_once(CLOG_CLOCK,
			      "cuptiActivityRegisterTimestampCallback: %s, "
			      "converting timestamps with a measured offset",
			      cupti_result_str(&core_fns, r));
		return CLK_OFFSET;
	}
	t = cupti_now();
	m = core_mono_ns();
	if (t && (t > m ? t - m : m - t) < CLOCK_CHECK_NS)
		return CLK_CALLBACK;
	core_log_once(CLOG_CLOCK, "CUPTI ignores the timestamp callback, "
				  "converting timestamps with a measured offset");
	return CLK_OFFSET;
}

/* ---- init ---------------------------------------------------------------------------------- */

/* clang-format off */
#define SYM(field, name, required)                                                               \
	{ offsetof(struct cupti_fns, field), name, required }

static const struct {
	size_t off;
	const char *name;
	bool required;
} syms[] = {
	SYM(GetVersion, "cuptiGetVersion", true),
	SYM(Subscribe, "cuptiSubscribe", true),
	SYM(Unsubscribe, "cuptiUnsubscribe", true),
	SYM(EnableCallback, "cuptiEnableCallback", true),
	SYM(ActivityEnable, "cuptiActivityEnable", true),
	SYM(ActivityDisable, "cuptiActivityDisable", true),
	SYM(ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks", true),
	SYM(ActivityGetNextRecord, "cuptiActivityGetNextRecord", true),
	SYM(ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords", true),
	SYM(ActivityFlushAll, "cuptiActivityFlushAll", true),
	SYM(GetTimestamp, "cuptiGetTimestamp", true),
	SYM(SetThreadIdType, "cuptiSetThreadIdType", true),
	SYM(Subscribe_v2, "cuptiSubscribe_v2", false),
	SYM(ActivityRegisterTimestampCallback, "cuptiActivityRegisterTimestampCallback", false),
	SYM(ActivityEnableRuntimeApi, "cuptiActivityEnableRuntimeApi", false),
	SYM(ActivityEnableDriverApi, "cuptiActivityEnableDriverApi", false),
	SYM(GetResultString, "cuptiGetResultString", false),
};
/* clang-format on */

/* A whole decimal number in [min, max] from the environment; anything else keeps *val. */
static void env_u32(const char *name, uint32_t min, uint32_t max, uint32_t *val)
{
	const char *s = getenv(name), *p;
	uint64_t v = 0;

	if (!s || !s[0])
		return;
	for (p = s; *p >= '0' && *p <= '9' && v <= max; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	if (!*p && p - s <= 10 && v >= min && v <= max) {
		*val = (uint32_t)v;
		return;
	}
	core_log_once(CLOG_ENV, "%s=%s: not a number in [%u, %u], using %u", name, s, min, max,
		      *val);
}

static void set_state(struct core_info *info, int state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_state(struct core_info *info, int state, const char *fmt, ...)
{
	va_list ap;

	info->state = state;
	if (!fmt) {
		info->detail[0] = 0;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(info->detail, sizeof(info->detail), fmt, ap);
	va_end(ap);
}

static void fill_info(struct core_info *info)
{
	Dl_info di;

	info->cupti_version = core.loaded ? core.version : 0;
	snprintf(info->cupti_path, sizeof(info->cupti_path), "%s", core.loaded ? core.path : "");
	info->library_path[0] = 0;
	if (dladdr((void *)core__init, &di) && di.dli_fname) {
		/*
		 * dladdr gives the name as it was passed to dlopen, relative if
		 * CUDA_INJECTION64_PATH was; the daemon attaches by absolute path, and the working
		 * directory is the one the name was opened from only now, at initialization.
		 */
		char *abs = realpath(di.dli_fname, NULL);

		snprintf(info->library_path, sizeof(info->library_path), "%s",
			 abs ? abs : di.dli_fname);
		free(abs);
	}
	info->launch_rate_limit = core.rate;
}

/*
 * Load CUPTI and resolve its function table. Returns 0, or a negative errno with info's state
 * and detail saying why (nothing logged here: core__init runs inside cuInit). Without
 * allow_system and nothing loaded or configured: -EAGAIN, the load is deferred.
 */
static int load_cupti(bool allow_system, struct core_info *info)
{
	char why[160];
	void *h;
	size_t i;
	CUptiResult r;

	h = cupti_find(allow_system, core.path, sizeof(core.path), why, sizeof(why));
	if (!h && !allow_system && !why[0])
		return -EAGAIN;
	if (!h) {
		set_state(info, PROFD__GPU_STATE__GPU_STATE_NO_CUPTI, "%s", why);
		return -ENOENT;
	}
	snprintf(info->cupti_path, sizeof(info->cupti_path), "%s", core.path);
	memset(&core_fns, 0, sizeof(core_fns));
	for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *p = dlsym(h, syms[i].name);

		if (!p && syms[i].required) {
			set_state(info, PROFD__GPU_STATE__GPU_STATE_CUPTI_TOO_OLD, "%s lacks %s",
				  core.path, syms[i].name);
			memset(&core_fns, 0, sizeof(core_fns));
			return -ENOSYS;
		}
		memcpy((char *)&core_fns + syms[i].off, &p, sizeof(p));
	}
	r = core_fns.GetVersion(&core.version);
	info->cupti_version = core.version;
	if (r != CUPTI_SUCCESS || core.version < CUPTI_MIN_API_VERSION) {
		if (r != CUPTI_SUCCESS)
			set_state(info, PROFD__GPU_STATE__GPU_STATE_CUPTI_TOO_OLD,
				  "%s: cuptiGetVersion: %s", core.path,
				  cupti_result_str(&core_fns, r));
		else
			set_state(info, PROFD__GPU_STATE__GPU_STATE_CUPTI_TOO_OLD,
				  "%s: CUPTI API version %u, need %u (CUDA 11.6)", core.path,
				  core.version, CUPTI_MIN_API_VERSION);
		memset(&core_fns, 0, sizeof(core_fns));
		return -ENOSYS;
	}
	core.handle = h;
	core.loaded = true;
	set_state(info, PROFD__GPU_STATE__GPU_STATE_READY, NULL);
	return 0;
}

int core__init(struct evq *q, struct core_info *info)
{
	int err;

	core_evq = q;
	if (core.loaded || core.deferred) {
		fill_info(info);
		set_state(info, PROFD__GPU_STATE__GPU_STATE_READY, NULL);
		return 0;
	}
	memset(info, 0, sizeof(*info));
	core.rate = RATE_DEFAULT;
	env_u32("PROFD_CUPTI_LAUNCH_RATE", 0, RATE_MAX, &core.rate);
	core.pool_target = POOL_DEFAULT;
	env_u32("PROFD_CUPTI_BUFFERS", 2, POOL_MAX, &core.pool_target);
	core.pool_cap = core.pool_target > POOL_GROW_MAX ? core.pool_target : POOL_GROW_MAX;
	fill_info(info);

	err = load_cupti(false, info);
	if (err == -EAGAIN) {
		/*
		 * READY: collection works when asked for, as far as we know. No path, no version:
		 * the daemon gets both in a new GpuAttach after the first enable loads it.
		 */
		core.deferred = true;
		set_state(info, PROFD__GPU_STATE__GPU_STATE_READY, NULL);
		return 0;
	}
	return err;
}

/* ---- enable / disable ---------------------------------------------------------------------- */

static const CUpti_ActivityKind wanted_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, /* the one kind we cannot do without */
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_MARKER,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
    CUPTI_ACTIVITY_KIND_MEMORY2, /* allocations and releases, for memory by stack */
};

static void undo(void)
{
	size_t i;

	while (core.nr_kinds)
		core_fns.ActivityDisable(core.kinds[--core.nr_kinds]);
	for (i = 0; i < traced_apis_nr; i++) {
		const struct traced_api *a = &traced_apis[i];

		if (core.api_on && a->domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
		    core_fns.ActivityEnableRuntimeApi)
			core_fns.ActivityEnableRuntimeApi(a->cbid, 0);
		if (core.api_on && a->domain == CUPTI_CB_DOMAIN_DRIVER_API &&
		    core_fns.ActivityEnableDriverApi)
			core_fns.ActivityEnableDriverApi(a->cbid, 0);
		if (core.cb_on && a->probe)
			core_fns.EnableCallback(0, core.sub, a->domain, a->cbid);
	}
	core.api_on = core.cb_on = false;
}

static int subscribe(struct core_info *info)
{
	char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
	CUpti_SubscriberParams p;
	CUptiResult r;

	if (core_fns.Subscribe_v2) {
		memset(&p, 0, sizeof(p));
		p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
		p.subscriberName = "profd";
		p.oldSubscriberName = old;
		p.oldSubscriberSize = sizeof(old);
		r = core_fns.Subscribe_v2(&core.sub, launch_callback, NULL, &p);
	} else {
		r = core_fns.Subscribe(&core.sub, launch_callback, NULL);
	}
	if (r == CUPTI_SUCCESS)
		return 0;
	old[sizeof(old) - 1] = 0;
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		set_state(info, PROFD__GPU_STATE__GPU_STATE_SUBSCRIBER_TAKEN,
			  "the CUPTI subscriber slot is held by %s", old[0] ? old : "another tool");
		core_log_once(CLOG_TAKEN, "%s; GPU activity is not collected", info->detail);
		return -EBUSY;
	}
	set_state(info, PROFD__GPU_STATE__GPU_STATE_ERROR, "cuptiSubscribe: %s",
		  cupti_result_str(&core_fns, r));
	core_log_once(CLOG_ENABLE_ERR, "%s", info->detail);
	return -EIO;
}

static int fail(struct core_info *info, const char *call, CUptiResult r)
{
	undo();
	core_fns.Unsubscribe(core.sub);
	core.sub = NULL;
	set_state(info, PROFD__GPU_STATE__GPU_STATE_ERROR, "%s: %s", call,
		  cupti_result_str(&core_fns, r));
	core_log_once(CLOG_ENABLE_ERR, "%s", info->detail);
	return -EIO;
}

int core__enable(struct core_info *info)
{
	CUptiResult r;
	size_t i;
	int err, mode;

	if (!core.loaded && core.deferred) {
		/* The first enable of a process that had no CUPTI loaded: the system's now. */
		core.deferred = false;
		err = load_cupti(true, info);
		if (err) {
			core_log_once(CLOG_NO_CUPTI, "%s; GPU activity is not collected",
				      info->detail);
			return err;
		}
		fill_info(info);
	}
	if (!core.loaded)
		return -ENOENT; /* info still says why, from core__init */
	if (core.enabled)
		return 0;
	err = subscribe(info);
	if (err)
		return err;
	/* CUPTI takes the clock of the records from the first kind enabled on. */
	mode = clock_setup();
	atomic_store_explicit(&clock_mode, mode, memory_order_relaxed);
	offset_refresh();
	info->clock = mode == CLK_CALLBACK ? PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK
					   : PROFD__GPU_CLOCK__GPU_CLOCK_OFFSET;

	r = core_fns.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	if (r != CUPTI_SUCCESS)
		return fail(info, "cuptiSetThreadIdType", r);
	if (pool_fill()) {
		undo();
		core_fns.Unsubscribe(core.sub);
		core.sub = NULL;
		set_state(info, PROFD__GPU_STATE__GPU_STATE_ERROR, "no memory for buffers");
		return -ENOMEM;
	}
	r = core_fns.ActivityRegisterCallbacks(buf_requested, buf_completed);
	if (r != CUPTI_SUCCESS)
		return fail(info, "cuptiActivityRegisterCallbacks", r);
	launch_reset(core.rate);

	for (i = 0; i < sizeof(wanted_kinds) / sizeof(wanted_kinds[0]); i++) {
		r = core_fns.ActivityEnable(wanted_kinds[i]);
		if (r == CUPTI_SUCCESS) {
			core.kinds[core.nr_kinds++] = wanted_kinds[i];
			continue;
		}
		if (i == 0)
			return fail(info, "cuptiActivityEnable(CONCURRENT_KERNEL)", r);
		core_log_once(CLOG_KIND, "cuptiActivityEnable(%d): %s", (int)wanted_kinds[i],
			      cupti_result_str(&core_fns, r));
	}
	/* API records only for the calls we trace: all of RUNTIME/DRIVER would cost too much. */
	core.api_on = core_fns.ActivityEnableRuntimeApi && core_fns.ActivityEnableDriverApi;
	for (i = 0; core.api_on && i < traced_apis_nr; i++) {
		const struct traced_api *a = &traced_apis[i];

		r = a->domain == CUPTI_CB_DOMAIN_RUNTIME_API
			? core_fns.ActivityEnableRuntimeApi(a->cbid, 1)
			: core_fns.ActivityEnableDriverApi(a->cbid, 1);
		if (r != CUPTI_SUCCESS)
			core_log_once(CLOG_API, "API activity for %s: %s", a->name,
				      cupti_result_str(&core_fns, r));
	}
	core.cb_on = true;
	for (i = 0; i < traced_apis_nr; i++) {
		const struct traced_api *a = &traced_apis[i];

		if (!a->probe)
			continue;
		/* An older CUPTI rejects ids it does not know (__cudaLaunchKernel before 13). */
		r = core_fns.EnableCallback(1, core.sub, a->domain, a->cbid);
		if (r != CUPTI_SUCCESS)
			core_log_once(CLOG_CALLBACK, "callback for %s: %s", a->name,
				      cupti_result_str(&core_fns, r));
	}
	core.enabled = true;
	set_state(info, PROFD__GPU_STATE__GPU_STATE_READY, NULL);
	return 0;
}

void core__disable(void)
{
	if (!core.enabled)
		return;
	core.enabled = false;
	undo();
	core_fns.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	core_fns.Unsubscribe(core.sub);
	core.sub = NULL;
	nvtx_pair_reset();
	/* The clock mode stays: CUPTI may still hand back buffers stamped under it. */
}

bool core__enabled(void)
{
	return core.enabled;
}

void core__flush(bool forced, uint64_t *complete_until_ns)
{
	uint64_t now, oldest, until;
	CUptiResult r;

	*complete_until_ns = 0;
	if (!core.enabled)
		return;
	now = core_mono_ns();
	if (now - core.offset_at >= OFFSET_REFRESH_NS)
		offset_refresh();
	pool_grow();
	/*
	 * Unforced: CUPTI returns every buffer whose records are all complete, full or not. A
	 * forced flush returns the others too, and their walk stops at the first incomplete
	 * record, losing it and the rest: only for disable and exit.
	 */
	r = core_fns.ActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
	if (r != CUPTI_SUCCESS) {
		core_log_once(CLOG_FLUSH, "cuptiActivityFlushAll: %s",
			      cupti_result_str(&core_fns, r));
		return;
	}
	/*
	 * A buffer CUPTI handed over on another thread is still being decoded: its records are
	 * not all queued, and may be older than anything we could vouch for now.
	 */
	if (atomic_load_explicit(&decoding, memory_order_acquire)) {
		*complete_until_ns = core.until;
		return;
	}
	/* A record still in CUPTI's hands belongs to a launch after the oldest outstanding. */
	oldest = launch_oldest_ns(now, LAUNCH_MAX_AGE_NS);
	until = oldest < now ? oldest : now;
	if (until < core.until)
		until = core.until;
	core.until = until;
	*complete_until_ns = until;
}

void core__forked_child(void)
{
	atomic_store(&core_forked, true);
}

/* ---- test hooks ---------------------------------------------------------------------------- */

void core__test_set_clock(uint64_t (*mono)(void))
{
	core_mono_ns = mono ? mono : mono_ns;
	core_bucket_ns = mono ? mono : coarse_ns;
}

unsigned core__test_pool_size(void)
{
	return atomic_load(&pool_nr);
}

int64_t core__test_offset(void)
{
	return atomic_load_explicit(&clock_offset, memory_order_relaxed);
}
