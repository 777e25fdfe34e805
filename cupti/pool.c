// SPDX-License-Identifier: BSD-2-Clause
/*
 * The activity buffer pool: the buffers CUPTI asks for (buf_requested, on whichever thread
 * needs one) and hands back full or flushed (buf_completed, on CUPTI's worker, a CUDA thread or
 * the uplink inside cuptiActivityFlushAll). Each buffer of the pool remembers when it was
 * handed out, so the flush can bound how long CUPTI keeps records from us (core.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "core_priv.h"

#define POOL_MAX 256
/*
 * Declining a buffer request (*buffer = NULL) is documented in cupti_activity.h
 * (CUpti_BuffersCallbackRequestFunc: "CUPTI may drop activity records"); CUPTI before API
 * version 27 (CUDA 12.9) crashes on it (Kineto's CuptiActivityApi.cpp works around the same),
 * so older ones get a discard buffer whose records are only counted.
 */
#define CUPTI_DECLINE_MIN_VERSION 27
#define DISCARD_SIZE (64u << 10)
#define DISCARD_SLOTS 64

/* Set by pool_config before the first registration; read by the callbacks afterwards. */
static struct {
	unsigned target, cap;
	size_t buf_size;
	uint32_t version;
} cfg = {.buf_size = POOL_BUF_DEFAULT};

/* buf_completed calls in progress: their records are not all queued yet. */
static atomic_int decoding;
/* Pool buffers handed back to us, ever. */
static atomic_uint_least64_t returned;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *pool_free[POOL_MAX];
static unsigned pool_nr_free;
/*
 * Every buffer of the pool, for the membership check of buf_completed: written once per slot
 * before pool_nr is published, read without the lock.
 */
static uint8_t *_Atomic pool_all[POOL_MAX];
static atomic_uint pool_nr;
/* core_mono_ns() + 1 when pool_all[i] was handed to CUPTI; 0 while it is ours. */
static _Atomic uint64_t pool_out_at[POOL_MAX];
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

/* Fill the pool up to cfg.target buffers. The buffers live as long as the process. */
int pool_fill(void)
{
	unsigned n;
	int err = 0;

	pthread_mutex_lock(&pool_lock);
	n = atomic_load_explicit(&pool_nr, memory_order_relaxed);
	while (n < cfg.target) {
		uint8_t *b = aligned_alloc(8, cfg.buf_size);

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

/* The pool's index of buf, or -1 when it is none of the pool's. */
static int pool_index(const uint8_t *buf)
{
	unsigned i, n = atomic_load_explicit(&pool_nr, memory_order_acquire);

	for (i = 0; i < n; i++)
		if (atomic_load_explicit(&pool_all[i], memory_order_relaxed) == buf)
			return (int)i;
	return -1;
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

void CUPTIAPI pool_buf_requested(uint8_t **buf, size_t *size, size_t *max_records)
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
		int i = pool_index(b);

		if (i >= 0)
			atomic_store_explicit(&pool_out_at[i], core_mono_ns() + 1,
					      memory_order_relaxed);
		*buf = b;
		*size = cfg.buf_size;
		errno = saved_errno;
		return;
	}
	atomic_store_explicit(&pool_dry, true, memory_order_relaxed);
	core_log_once(CLOG_POOL_EMPTY,
		      "activity buffer pool empty (%u x %zu %s), records dropped; "
		      "PROFD_CUPTI_BUFFERS sets the count",
		      atomic_load_explicit(&pool_nr, memory_order_relaxed),
		      cfg.buf_size & ((1u << 20) - 1) ? cfg.buf_size >> 10 : cfg.buf_size >> 20,
		      cfg.buf_size & ((1u << 20) - 1) ? "KiB" : "MiB");
	if (cfg.version >= CUPTI_DECLINE_MIN_VERSION) {
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

void CUPTIAPI pool_buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
				 size_t valid)
{
	int saved_errno = errno;
	size_t dropped = 0;
	int idx = -1;

	if (atomic_load_explicit(&core_forked, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&decoding, 1, memory_order_acq_rel);
	if (!buf) {
		/* nothing */
	} else if (size == cfg.buf_size && (idx = pool_index(buf)) >= 0) {
		decode_buffer(buf, valid);
		atomic_store_explicit(&pool_out_at[idx], 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&returned, 1, memory_order_relaxed);
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
void pool_grow(void)
{
	unsigned target;

	if (!atomic_exchange_explicit(&pool_dry, false, memory_order_relaxed))
		return;
	if (cfg.target >= cfg.cap)
		return;
	target = cfg.target * 2;
	cfg.target = target > cfg.cap ? cfg.cap : target;
	pool_fill();
}

void pool_config(unsigned target, unsigned cap, size_t buf_size, uint32_t version)
{
	/* The size of the buffers already made stays: membership checks compare it. */
	if (!atomic_load(&pool_nr))
		cfg.buf_size = buf_size;
	if (target > cfg.target)
		cfg.target = target;
	cfg.cap = cap > cfg.target ? cap : cfg.target;
	cfg.version = version;
}

uint64_t pool_oldest_out_ns(void)
{
	unsigned i, n = atomic_load_explicit(&pool_nr, memory_order_acquire);
	uint64_t oldest = UINT64_MAX;

	for (i = 0; i < n; i++) {
		uint64_t t = atomic_load_explicit(&pool_out_at[i], memory_order_relaxed);

		if (t && t - 1 < oldest)
			oldest = t - 1;
	}
	return oldest;
}

uint64_t pool_returned(void)
{
	return atomic_load_explicit(&returned, memory_order_relaxed);
}

bool pool_decoding(void)
{
	return atomic_load_explicit(&decoding, memory_order_acquire) != 0;
}

unsigned pool_size(void)
{
	return atomic_load(&pool_nr);
}
