// SPDX-License-Identifier: BSD-2-Clause
/*
 * The CUPTI core: the function table, the subscriber slot, the clock, the delay bound of the
 * flush, another client taking the activity API. The buffer pool lives in pool.c, the launch
 * callback in launch.c, the record decoder in decode.c, NVTX pairing in nvtx_pair.c. All entry
 * points of core.h run on the uplink thread; the buffer callbacks run on whichever thread CUPTI
 * picks (its worker, a CUDA thread whose buffer filled, or the uplink inside
 * cuptiActivityFlushAll).
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

#define POOL_DEFAULT 8
#define POOL_MAX 256
/* The pool grows (doubling, from the uplink thread) up to this when it ran dry. */
#define POOL_GROW_MAX 64
#define RATE_DEFAULT 1000
#define RATE_MAX 10000000
/* A callback clock further than this from CLOCK_MONOTONIC did not take effect. */
#define CLOCK_CHECK_NS (50 * NSEC_PER_MSEC)
#define OFFSET_READS 16
#define OFFSET_REFRESH_NS (10 * NSEC_PER_SEC)
/* A launch whose record is missing for this long is taken as lost (failed, or dropped). */
#define LAUNCH_MAX_AGE_NS (10 * NSEC_PER_SEC)
/*
 * The delay bound: a buffer CUPTI holds, or a launch whose record is missing, for longer than
 * this gets a forced flush. Well inside the daemon's acceptance window (join TTL 30 s + hold
 * 3 s, daemon/gpu/gpu.c) with the flush interval and a long kernel on top.
 */
#define MAX_DELAY_DEFAULT_MS 5000
#define MAX_DELAY_MAX_MS 20000
/* Forced flushes in a row that gave us nothing while launches waited: the records go elsewhere. */
#define TAKEN_MISSES 2
#define BUF_KB_MIN 16
#define BUF_KB_MAX (16u << 10)
#define PER_THREAD_UNSET 2

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
	uint32_t pool_count; /* PROFD_CUPTI_BUFFERS */
	uint32_t buf_kb;     /* PROFD_CUPTI_BUFFER_KB */
	uint32_t max_delay_ms;
	uint32_t per_thread; /* PROFD_CUPTI_PER_THREAD_BUFFERS: 0, 1 or PER_THREAD_UNSET */
	uint32_t flush_period_ms;
	bool registered; /* buffer callbacks registered once in this session */
	bool taken;	 /* another client took the activity API: stopped for good */
	bool taken_told; /* core__taken reported it */
	char taken_why[160];
	uint64_t forced_at;	/* core_mono_ns() of the last forced flush */
	uint64_t returned_seen; /* pool_returned() at the last flush */
	unsigned misses;	/* forced flushes in a row that gave us nothing */
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
	SYM(ActivitySetAttribute, "cuptiActivitySetAttribute", false),
	SYM(ActivityFlushPeriod, "cuptiActivityFlushPeriod", false),
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
	info->max_delay_ms = core.max_delay_ms;
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
	core.pool_count = POOL_DEFAULT;
	env_u32("PROFD_CUPTI_BUFFERS", 2, POOL_MAX, &core.pool_count);
	core.buf_kb = POOL_BUF_DEFAULT >> 10;
	env_u32("PROFD_CUPTI_BUFFER_KB", BUF_KB_MIN, BUF_KB_MAX, &core.buf_kb);
	core.max_delay_ms = MAX_DELAY_DEFAULT_MS;
	env_u32("PROFD_CUPTI_MAX_DELAY_MS", 0, MAX_DELAY_MAX_MS, &core.max_delay_ms);
	core.per_thread = PER_THREAD_UNSET;
	env_u32("PROFD_CUPTI_PER_THREAD_BUFFERS", 0, 1, &core.per_thread);
	core.flush_period_ms = 0;
	env_u32("PROFD_CUPTI_FLUSH_PERIOD_MS", 0, 60000, &core.flush_period_ms);
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

/* ---- another client, the delay bound ------------------------------------------------------- */

/*
 * The per-thread buffer attribute, when PROFD_CUPTI_PER_THREAD_BUFFERS asks for one: the header
 * wants it set before the buffer callbacks are registered and before any kind is enabled, and
 * calls a change later in the session undefined, so only before our first registration.
 */
static void set_attributes(void)
{
	uint8_t v = (uint8_t)core.per_thread;
	size_t len = sizeof(v);
	CUptiResult r;

	if (core.per_thread == PER_THREAD_UNSET || !core_fns.ActivitySetAttribute)
		return;
	r = core_fns.ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &len, &v);
	if (r != CUPTI_SUCCESS)
		core_log_once(CLOG_ATTR,
			      "cuptiActivitySetAttribute(PER_THREAD_ACTIVITY_BUFFER, %u): %s", v,
			      cupti_result_str(&core_fns, r));
}

/*
 * Another CUPTI client of the process (Kineto when torch.profiler starts: its subscribe fails,
 * yet it registers its own buffer callbacks and an rdtsc clock and enables its kinds, and at its
 * end disables them and resets the per-thread attribute) took the activity API. We stop for
 * the life of the process rather than take it back:
 * - CUPTI can tell neither who holds the callbacks, the clock or the kinds, nor when the other
 *   client is done (Kineto leaves its callbacks and its clock registered after it stops), and
 *   torch.profiler's schedules start it again and again;
 * - taking them back while it runs would take its records and change its clock under it: the
 *   application's own profile would lose its GPU events;
 * - after its end the session runs on with the per-thread attribute changed mid-session, which
 *   the header calls undefined.
 * Only our own launch callbacks go off (the probe would report launches whose records never
 * come); kinds, buffer callbacks and the clock are the other client's and stay as it set them.
 * Our buffers that CUPTI hands to it are lost to us (it ignores buffers it does not know); its
 * buffers that reach us are ignored (pool_buf_completed). The subscription stays.
 */
static void take_over(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void take_over(const char *fmt, ...)
{
	va_list ap;
	size_t i;

	va_start(ap, fmt);
	vsnprintf(core.taken_why, sizeof(core.taken_why), fmt, ap);
	va_end(ap);
	core.taken = true;
	core.enabled = false;
	for (i = 0; core.cb_on && i < traced_apis_nr; i++)
		if (traced_apis[i].probe)
			core_fns.EnableCallback(0, core.sub, traced_apis[i].domain,
						traced_apis[i].cbid);
	core.cb_on = core.api_on = false;
	core.nr_kinds = 0;
	nvtx_pair_reset();
	core_log_once(CLOG_ACTIVITY_TAKEN,
		      "%s; GPU activity is no longer collected in this process", core.taken_why);
}

/* CUPTI's clock is no longer our callback's: another client registered its own. */
static bool clock_taken(uint64_t now)
{
	uint64_t t;
	int64_t d;

	if (atomic_load_explicit(&clock_mode, memory_order_relaxed) != CLK_CALLBACK)
		return false;
	t = cupti_now();
	d = (int64_t)(t - now);
	/* Unreadable: nothing to tell from. */
	if (!t || (d < 0 ? -d : d) < (int64_t)CLOCK_CHECK_NS)
		return false;
	take_over("another CUPTI client in the process replaced the timestamp callback "
		  "(CUPTI's clock reads %+.3f s from CLOCK_MONOTONIC)",
		  (double)d / NSEC_PER_SEC);
	return true;
}

/*
 * After an unforced flush: force one when a buffer CUPTI holds, or a launch whose record is
 * missing, waited past the bound (at most one per bound). A forced flush hands back every
 * buffer that holds a record, complete or not; when two in a row give us nothing while
 * launches made since the previous one still wait, the records go to another client's
 * callbacks or their kinds were switched off: taken. Returns true when taken.
 */
static bool bound_delay(uint64_t now)
{
	uint64_t delay = (uint64_t)core.max_delay_ms * NSEC_PER_MSEC;
	uint64_t buf, oldest, newest, before, prev;

	if (pool_returned() != core.returned_seen)
		core.misses = 0;
	if (!delay || now - core.forced_at < delay)
		goto out;
	buf = pool_oldest_out_ns();
	oldest = launch_oldest_ns(now, LAUNCH_MAX_AGE_NS);
	if (!(buf != UINT64_MAX && now - buf >= delay) &&
	    !(oldest != UINT64_MAX && now - oldest >= delay))
		goto out;
	newest = launch_newest_ns(now, LAUNCH_MAX_AGE_NS);
	before = pool_returned();
	prev = core.forced_at;
	core.forced_at = now;
	core_log_once(CLOG_FORCED,
		      "records waited in CUPTI past %u ms (PROFD_CUPTI_MAX_DELAY_MS): forcing "
		      "flushes, which lose the records still in flight",
		      core.max_delay_ms);
	if (core_fns.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS)
		goto out;
	atomic_fetch_add_explicit(&core_stats.forced_flushes, 1, memory_order_relaxed);
	if (pool_returned() != before || oldest == UINT64_MAX || now - oldest < delay ||
	    newest <= prev)
		core.misses = 0;
	else if (++core.misses >= TAKEN_MISSES) {
		take_over("another CUPTI client in the process took the activity buffers or "
			  "switched the kinds off (no records for launches of the last %.1f s)",
			  (double)(now - oldest) / NSEC_PER_SEC);
		return true;
	}
out:
	core.returned_seen = pool_returned();
	return false;
}

bool core__taken(struct core_info *info)
{
	if (!core.taken || core.taken_told)
		return false;
	core.taken_told = true;
	set_state(info, PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN, "%s", core.taken_why);
	return true;
}

void core__take_counts(uint64_t *zero_time_records, uint64_t *forced_flushes)
{
	*zero_time_records =
	    atomic_exchange_explicit(&core_stats.zero_time, 0, memory_order_relaxed);
	*forced_flushes =
	    atomic_exchange_explicit(&core_stats.forced_flushes, 0, memory_order_relaxed);
}

/* ---- enable / disable ---------------------------------------------------------------------- */

/* The list is shared with the device kit's probe (wanted_kinds.def). */
#define KIND(k) CUPTI_ACTIVITY_KIND_##k,
static const CUpti_ActivityKind wanted_kinds[] = {
#include "wanted_kinds.def"
};
#undef KIND

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

/*
 * A failed enable gives the subscriber slot back for other tools: nothing of ours works, and
 * holding it would only keep them out. The next enable is then a new session.
 */
static int fail(struct core_info *info, const char *call, CUptiResult r)
{
	undo();
	core_fns.Unsubscribe(core.sub);
	core.sub = NULL;
	core.registered = false;
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
	/*
	 * While we were disabled, another client (its subscribe failing on our kept subscription)
	 * may have registered its own clock: enabling would take CUPTI from under it.
	 */
	if (core.registered && !core.taken)
		clock_taken(core_mono_ns());
	if (core.taken) {
		/* The activity API is the other client's now (core__taken): left alone. */
		core.taken_told = true;
		set_state(info, PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN, "%s", core.taken_why);
		return -EBUSY;
	}
	/*
	 * One CUPTI session for the life of the process: CUPTI before 13.1 Update 1 gives
	 * cudaGraphLaunch and its kernels wrong correlation ids in every session after the first
	 * (its release notes), so disable only gates kinds and callbacks and keeps the
	 * subscription.
	 */
	if (!core.sub) {
		err = subscribe(info);
		if (err)
			return err;
	}
	/* CUPTI takes the clock of the records from the first kind enabled on. */
	mode = clock_setup();
	atomic_store_explicit(&clock_mode, mode, memory_order_relaxed);
	offset_refresh();
	info->clock = mode == CLK_CALLBACK ? PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK
					   : PROFD__GPU_CLOCK__GPU_CLOCK_OFFSET;

	r = core_fns.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	if (r != CUPTI_SUCCESS)
		return fail(info, "cuptiSetThreadIdType", r);
	pool_config(core.pool_count,
		    core.pool_count > POOL_GROW_MAX ? core.pool_count : POOL_GROW_MAX,
		    (size_t)core.buf_kb << 10, core.version);
	if (pool_fill()) {
		undo();
		core_fns.Unsubscribe(core.sub);
		core.sub = NULL;
		core.registered = false;
		set_state(info, PROFD__GPU_STATE__GPU_STATE_ERROR, "no memory for buffers");
		return -ENOMEM;
	}
	if (!core.registered)
		set_attributes();
	r = core_fns.ActivityRegisterCallbacks(pool_buf_requested, pool_buf_completed);
	if (r != CUPTI_SUCCESS)
		return fail(info, "cuptiActivityRegisterCallbacks", r);
	core.registered = true;
	if (core.flush_period_ms && core_fns.ActivityFlushPeriod) {
		/* CUPTI's worker then returns full buffers at this period (not partial ones). */
		r = core_fns.ActivityFlushPeriod(core.flush_period_ms);
		if (r != CUPTI_SUCCESS)
			core_log_once(CLOG_ATTR, "cuptiActivityFlushPeriod(%u): %s",
				      core.flush_period_ms, cupti_result_str(&core_fns, r));
	}
	launch_reset(core.rate);
	core.forced_at = core_mono_ns();
	core.returned_seen = pool_returned();
	core.misses = 0;

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
	/* The kinds may be another client's by now: then they stay as it set them. */
	if (clock_taken(core_mono_ns()))
		return;
	core.enabled = false;
	undo();
	core_fns.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
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
	if (clock_taken(now))
		return;
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
	if (!forced && bound_delay(now))
		return;
	/*
	 * A buffer CUPTI handed over on another thread is still being decoded: its records are
	 * not all queued, and may be older than anything we could vouch for now.
	 */
	if (pool_decoding()) {
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
	return pool_size();
}

int64_t core__test_offset(void)
{
	return atomic_load_explicit(&clock_offset, memory_order_relaxed);
}
