/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the files of the CUPTI core share: the CUPTI function table, the clock conversion, the
 * launch callback's state, the record decoder, the NVTX pairing table. Nothing here leaves the
 * library (-fvisibility=hidden); the unit tests link these sources directly and use the
 * core__test_* hooks.
 */
#ifndef PROFD_CUPTI_CORE_PRIV_H
#define PROFD_CUPTI_CORE_PRIV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

#include "events.h"

/*
 * The oldest CUPTI this library drives: API version 17 is CUDA 11.6 (cupti_version.h), the
 * first with cuptiActivityRegisterTimestampCallback and cudaLaunchKernelExC.
 */
#define CUPTI_MIN_API_VERSION 17

/* CUPTI entry points, resolved with dlsym. The optional ones may be NULL. */
struct cupti_fns {
	CUptiResult (*GetVersion)(uint32_t *);
	CUptiResult (*Subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
	CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle);
	CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
				      CUpti_CallbackId);
	CUptiResult (*ActivityEnable)(CUpti_ActivityKind);
	CUptiResult (*ActivityDisable)(CUpti_ActivityKind);
	CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
						 CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*ActivityGetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t *);
	CUptiResult (*ActivityFlushAll)(uint32_t);
	CUptiResult (*GetTimestamp)(uint64_t *);
	CUptiResult (*SetThreadIdType)(CUpti_ActivityThreadIdType);
	/* optional */
	CUptiResult (*Subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
				    CUpti_SubscriberParams *);
	CUptiResult (*ActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc);
	CUptiResult (*ActivityEnableRuntimeApi)(CUpti_CallbackId, uint8_t);
	CUptiResult (*ActivityEnableDriverApi)(CUpti_CallbackId, uint8_t);
	CUptiResult (*GetResultString)(CUptiResult, const char **);
	CUptiResult (*ActivitySetAttribute)(CUpti_ActivityAttribute, size_t *, void *);
	CUptiResult (*ActivityFlushPeriod)(uint32_t);
};

/* ---- loader.c ------------------------------------------------------------------------------ */

/*
 * Find libcupti: the one already in the process, else $PROFD_CUPTI_PATH when set, else (only
 * when allow_system) the system's. Returns a dlopen handle (never closed: CUPTI cannot be
 * unloaded) or NULL with a one-line reason in why. Sets path to the file's name ("" if
 * unknown). Without allow_system and with nothing loaded or configured, NULL with why "".
 */
void *cupti_find(bool allow_system, char *path, size_t path_len, char *why, size_t why_len);
/* Tests: the names tried for the system's libcupti (NULL restores the defaults). */
void cupti_test_set_system_name(const char *name);
/* A CUPTI result as text, for details and logs. */
const char *cupti_result_str(const struct cupti_fns *f, CUptiResult r);

/* ---- core.c -------------------------------------------------------------------------------- */

/* Log conditions, each logged at most once per process. */
enum core_log_id {
	CLOG_NO_CUPTI,
	CLOG_TOO_OLD,
	CLOG_TAKEN,
	CLOG_ENABLE_ERR,
	CLOG_CLOCK,
	CLOG_KIND,
	CLOG_CALLBACK,
	CLOG_API,
	CLOG_POOL_EMPTY,
	CLOG_FLUSH,
	CLOG_NVTX_FULL,
	CLOG_ENV,
	CLOG_ACTIVITY_TAKEN,
	CLOG_ZERO_TIME,
	CLOG_FORCED,
	CLOG_ATTR,
	CLOG_NR,
};
/*
 * Record one line for stderr (prefixed "profd_cupti: "), the first time the condition occurs.
 * Any thread, never blocks, keeps errno: the uplink thread does the writing (uplink__log).
 */
void core_log_once(enum core_log_id id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The CLOCK_MONOTONIC reader every part of the core uses (a test may replace it). */
extern uint64_t (*core_mono_ns)(void);
/* The launch rate limit's clock (coarse; the tests set both with core__test_set_clock). */
extern uint64_t (*core_bucket_ns)(void);

/* CUPTI timestamp to CLOCK_MONOTONIC ns per the clock mode chosen at enable; 0 stays 0. */
uint64_t core_ts(uint64_t cupti_ns);

extern struct cupti_fns core_fns;
extern struct evq *core_evq;
/*
 * Set in a forked child: every callback (buffers, launches, NVTX pairing) returns at once
 * without a lock, since threads of the parent may have held any of them at the fork.
 */
extern atomic_bool core_forked;

/* ---- launch.c ------------------------------------------------------------------------------ */

/* The USDT semaphore (sys/sdt.h naming): nonzero while a tracer is attached to the probe. */
extern volatile unsigned short profd_cuda_launch_semaphore;

/* One traced API: its callback id, name, and what the core does with it. */
struct traced_api {
	CUpti_CallbackDomain domain;
	CUpti_CallbackId cbid;
	const char *name;
	bool probe; /* launch callback: fire the USDT probe, rate-limit, weight */
};
extern const struct traced_api traced_apis[];
extern const size_t traced_apis_nr;
/* The traced API's name, or NULL when the core does not trace that cbid. */
const char *traced_api_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

/* The subscriber callback. */
void CUPTIAPI launch_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			      const void *cbdata);
/*
 * Start a new generation: thread states from before are reset on their next launch, the
 * outstanding launches are forgotten. Called with the callbacks off.
 */
void launch_reset(uint32_t rate_per_sec);
/* The weight the probe gave this correlation id; 1 when no launch callback saw it. */
uint32_t launch_weight(uint32_t corr);
/* A kernel, copy or memset record of corr was decoded: its launch is no longer outstanding. */
void launch_done(uint32_t corr);
/*
 * The API-enter time (CLOCK_MONOTONIC ns, rounded down to the microsecond) of the oldest
 * traced launch whose record has not been decoded, ignoring launches more than max_age_ns
 * before now_ns (their records were dropped, or the launch failed). UINT64_MAX when none.
 */
uint64_t launch_oldest_ns(uint64_t now_ns, uint64_t max_age_ns);
/* As launch_oldest_ns, the newest such launch; 0 when none. */
uint64_t launch_newest_ns(uint64_t now_ns, uint64_t max_age_ns);

/* Counters, relaxed atomics. */
struct core_stats {
	atomic_uint_least64_t probes_fired;  /* USDT probe executed (semaphore set) */
	atomic_uint_least64_t overhead;	     /* CUPTI overhead records seen */
	atomic_uint_least64_t discard_bufs;  /* discard buffers handed out (CUPTI before v27) */
	atomic_uint_least64_t declined_bufs; /* requests answered with NULL (pool empty) */
	atomic_uint_least64_t foreign_bufs;  /* completed buffers not from our pool: ignored */
	/* kernel, copy and memset records with start = end = 0 (CUPTI 12.6u2 to 13.0.x): not sent
	 */
	atomic_uint_least64_t zero_time;
	atomic_uint_least64_t forced_flushes; /* flushes forced by the delay bound */
};
extern struct core_stats core_stats;

/* ---- pool.c -------------------------------------------------------------------------------- */

#define POOL_BUF_DEFAULT (1u << 20)

/*
 * Buffers of buf_size bytes (kept from the first call on: buffers already made keep theirs),
 * target of them to start with, doubling up to cap when the pool ran dry; CUPTI's API version
 * decides what an empty pool answers. Uplink thread, before the callbacks are registered.
 */
void pool_config(unsigned target, unsigned cap, size_t buf_size, uint32_t cupti_version);
/* Fill the pool up to its target. Returns 0, or -ENOMEM when it has no buffer at all. */
int pool_fill(void);
/* The pool ran dry since the last call: double it, up to its cap. Uplink thread. */
void pool_grow(void);
/* The CUPTI buffer callbacks. */
void CUPTIAPI pool_buf_requested(uint8_t **buf, size_t *size, size_t *max_records);
void CUPTIAPI pool_buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
				 size_t valid);
/* core_mono_ns() when the buffer CUPTI has held longest was handed out; UINT64_MAX: none out. */
uint64_t pool_oldest_out_ns(void);
/* Pool buffers CUPTI handed back to us, ever. */
uint64_t pool_returned(void);
/* Whether a completion is being decoded on some thread (its records are not all queued). */
bool pool_decoding(void);
/* Buffers in the pool, handed out or not. */
unsigned pool_size(void);

/* ---- decode.c ------------------------------------------------------------------------------ */

/* Decode a completed buffer's valid bytes into events on core_evq. Returns records seen. */
size_t decode_buffer(uint8_t *buf, size_t valid);
/* Count the records in a buffer without decoding them. */
size_t count_records(uint8_t *buf, size_t valid);

/* ---- nvtx_pair.c --------------------------------------------------------------------------- */

/* Feed one Marker2 record (already converted timestamp). Pushes paired ranges and marks. */
void nvtx_pair_marker(const CUpti_ActivityMarker2 *m, uint64_t ts_ns);
/* Forget every open range (disable). */
void nvtx_pair_reset(void);

/* ---- test hooks ---------------------------------------------------------------------------- */

/* Replace the CLOCK_MONOTONIC reader (NULL restores it). */
void core__test_set_clock(uint64_t (*mono)(void));
/* Buffers in the pool (handed out or not). */
unsigned core__test_pool_size(void);
/* The clock offset in use (CLOCK_REALTIME - CLOCK_MONOTONIC as CUPTI reports it). */
int64_t core__test_offset(void);

#endif
