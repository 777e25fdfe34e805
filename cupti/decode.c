// SPDX-License-Identifier: BSD-2-Clause
/*
 * Activity records to struct ev. The record layouts are those of the libcupti loaded at run
 * time, which may be older or newer than our headers: we walk with cuptiActivityGetNextRecord
 * (it knows the sizes) and read each record through the oldest struct version that has the
 * fields we use, whose offsets every later version keeps.
 */
#include <stddef.h>
#include <string.h>

#include "core_priv.h"
#include "profd.pb-c.h"

/* After cupti.h, which it needs; recent cupti_activity.h includes it already. */
#include <cupti_activity_deprecated.h>

/* The assumption above, checked against the versions our headers still describe. */
#define SAME_OFF(a, b, f) _Static_assert(offsetof(a, f) == offsetof(b, f), #a "." #f)
SAME_OFF(CUpti_ActivityKernel5, CUpti_ActivityKernel10, start);
SAME_OFF(CUpti_ActivityKernel5, CUpti_ActivityKernel10, end);
SAME_OFF(CUpti_ActivityKernel5, CUpti_ActivityKernel10, deviceId);
SAME_OFF(CUpti_ActivityKernel5, CUpti_ActivityKernel10, streamId);
SAME_OFF(CUpti_ActivityKernel5, CUpti_ActivityKernel10, gridX);
SAME_OFF(CUpti_ActivityKernel5, CUpti_ActivityKernel10, blockZ);
SAME_OFF(CUpti_ActivityKernel5, CUpti_ActivityKernel10, correlationId);
SAME_OFF(CUpti_ActivityKernel5, CUpti_ActivityKernel10, name);
SAME_OFF(CUpti_ActivityKernel5, CUpti_ActivityKernel10, graphId);
SAME_OFF(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, copyKind);
SAME_OFF(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, bytes);
SAME_OFF(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, start);
SAME_OFF(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, end);
SAME_OFF(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, deviceId);
SAME_OFF(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, streamId);
SAME_OFF(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, correlationId);
SAME_OFF(CUpti_ActivityMemset, CUpti_ActivityMemset4, bytes);
SAME_OFF(CUpti_ActivityMemset, CUpti_ActivityMemset4, start);
SAME_OFF(CUpti_ActivityMemset, CUpti_ActivityMemset4, end);
SAME_OFF(CUpti_ActivityMemset, CUpti_ActivityMemset4, deviceId);
SAME_OFF(CUpti_ActivityMemset, CUpti_ActivityMemset4, streamId);
SAME_OFF(CUpti_ActivityMemset, CUpti_ActivityMemset4, correlationId);
SAME_OFF(CUpti_ActivityMarker, CUpti_ActivityMarker2, flags);
SAME_OFF(CUpti_ActivityMarker, CUpti_ActivityMarker2, timestamp);
SAME_OFF(CUpti_ActivityMarker, CUpti_ActivityMarker2, id);
SAME_OFF(CUpti_ActivityMarker, CUpti_ActivityMarker2, objectId);
SAME_OFF(CUpti_ActivityMarker, CUpti_ActivityMarker2, name);
/* MEMORY2 records: Memory2 is the oldest layout of that kind (cupti_activity_deprecated.h). */
SAME_OFF(CUpti_ActivityMemory2, CUpti_ActivityMemory4, memoryOperationType);
SAME_OFF(CUpti_ActivityMemory2, CUpti_ActivityMemory4, memoryKind);
SAME_OFF(CUpti_ActivityMemory2, CUpti_ActivityMemory4, correlationId);
SAME_OFF(CUpti_ActivityMemory2, CUpti_ActivityMemory4, address);
SAME_OFF(CUpti_ActivityMemory2, CUpti_ActivityMemory4, bytes);
SAME_OFF(CUpti_ActivityMemory2, CUpti_ActivityMemory4, timestamp);
SAME_OFF(CUpti_ActivityMemory2, CUpti_ActivityMemory4, deviceId);
SAME_OFF(CUpti_ActivityMemory2, CUpti_ActivityMemory4, streamId);
SAME_OFF(CUpti_ActivityMemory2, CUpti_ActivityMemory4, isAsync);
SAME_OFF(CUpti_ActivityMemory2, CUpti_ActivityMemory4, memoryPoolConfig.memoryPoolType);

static uint32_t mul3(uint32_t a, uint32_t b, uint32_t c)
{
	uint64_t v = (uint64_t)a * b;

	v = v > UINT32_MAX ? UINT32_MAX : v * c;
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static void push(const struct ev *e)
{
	if (core_evq)
		evq__push(core_evq, e);
}

/*
 * start = end = 0: CUPTI from 12.6 Update 2 to 13.0.x may write no timestamps into kernel
 * records when a timestamp callback is registered (fixed in 13.1, its release notes). The
 * record came, so its launch is not outstanding; its time is lost, which is counted on its own
 * (not as a malformed record, and not sent for the daemon to refuse).
 */
static bool zero_time(uint64_t start, uint64_t end, uint32_t corr)
{
	if (start || end)
		return false;
	atomic_fetch_add_explicit(&core_stats.zero_time, 1, memory_order_relaxed);
	core_log_once(CLOG_ZERO_TIME, "activity records with no timestamps (start = end = 0, a "
				      "CUPTI bug before 13.1): their GPU time is lost");
	launch_done(corr);
	return true;
}

static void do_kernel(const CUpti_ActivityKernel5 *k)
{
	if (zero_time(k->start, k->end, k->correlationId))
		return;
	struct ev e = {
	    .type = EV_KERNEL,
	    .corr = k->correlationId,
	    .start_ns = core_ts(k->start),
	    .end_ns = core_ts(k->end),
	    .device = k->deviceId,
	    .stream = k->streamId,
	    .graph_id = k->graphId,
	    .grid = mul3((uint32_t)k->gridX, (uint32_t)k->gridY, (uint32_t)k->gridZ),
	    .block = mul3((uint32_t)k->blockX, (uint32_t)k->blockY, (uint32_t)k->blockZ),
	    .weight = launch_weight(k->correlationId),
	    .name = names__intern(k->name),
	};

	push(&e);
	/* After the push: the flush's watermark never passes a record not yet queued. */
	launch_done(k->correlationId);
}

static uint8_t copy_kind(uint8_t k)
{
	switch (k) {
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
		return PROFD__GPU_COPY_KIND__GPU_COPY_HTOD;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
		return PROFD__GPU_COPY_KIND__GPU_COPY_DTOH;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
		return PROFD__GPU_COPY_KIND__GPU_COPY_DTOD;
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
		return PROFD__GPU_COPY_KIND__GPU_COPY_HTOH;
	case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
		return PROFD__GPU_COPY_KIND__GPU_COPY_PTOP;
	default:
		return PROFD__GPU_COPY_KIND__GPU_COPY_UNKNOWN;
	}
}

static void do_memcpy(const CUpti_ActivityMemcpy6 *m)
{
	if (zero_time(m->start, m->end, m->correlationId))
		return;
	struct ev e = {
	    .type = EV_COPY,
	    .copy_kind = copy_kind(m->copyKind),
	    .corr = m->correlationId,
	    .start_ns = core_ts(m->start),
	    .end_ns = core_ts(m->end),
	    .bytes = m->bytes,
	    .device = m->deviceId,
	    .stream = m->streamId,
	    .weight = launch_weight(m->correlationId),
	};

	push(&e);
	launch_done(m->correlationId);
}

static void do_memset(const CUpti_ActivityMemset4 *m)
{
	if (zero_time(m->start, m->end, m->correlationId))
		return;
	struct ev e = {
	    .type = EV_COPY,
	    .copy_kind = PROFD__GPU_COPY_KIND__GPU_COPY_MEMSET,
	    .corr = m->correlationId,
	    .start_ns = core_ts(m->start),
	    .end_ns = core_ts(m->end),
	    .bytes = m->bytes,
	    .device = m->deviceId,
	    .stream = m->streamId,
	    .weight = launch_weight(m->correlationId),
	};

	push(&e);
	launch_done(m->correlationId);
}

/*
 * Device and managed memory only: pinned and pageable host memory is not what a GPU runs out
 * of. The stream id of a synchronous operation is CUPTI_INVALID_STREAM_ID; left out.
 */
static void do_memory(const CUpti_ActivityMemory2 *m)
{
	struct ev e = {
	    .type = EV_MEM,
	    .corr = m->correlationId,
	    .start_ns = core_ts(m->timestamp),
	    .bytes = m->bytes,
	    .addr = m->address,
	    .device = m->deviceId,
	    .stream = m->isAsync ? m->streamId : 0,
	};

	switch (m->memoryKind) {
	case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
	case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
		break;
	case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
		e.mem_flags |= EV_MEM_MANAGED;
		break;
	default:
		return;
	}
	if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
		e.mem_flags |= EV_MEM_RELEASE;
	else if (m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
		return;
	if (m->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID)
		e.mem_flags |= EV_MEM_POOL;
	e.end_ns = e.start_ns;
	push(&e);
}

static void do_api(const CUpti_ActivityAPI *a, CUpti_CallbackDomain domain)
{
	struct ev e = {
	    .type = EV_API,
	    .corr = a->correlationId,
	    .start_ns = core_ts(a->start),
	    .end_ns = core_ts(a->end),
	    .tid = a->threadId,
	    .name = names__intern(traced_api_name(domain, a->cbid)),
	};

	push(&e);
}

/*
 * The runtime call's correlation ids in this buffer. A runtime launch runs a driver launch
 * inside it with the same correlation id; both are traced (a library may call the driver
 * directly), but one call should appear once, as the outer runtime call. The two records of a
 * thread share its buffer, so looking within the buffer catches nearly all.
 */
#define CORR_SET_SLOTS 2048

struct corr_set {
	uint32_t slot[CORR_SET_SLOTS]; /* corr + 1; 0 is empty */
	size_t nr;
};

static void corr_add(struct corr_set *s, uint32_t corr)
{
	uint32_t h = (corr * 2654435761u) & (CORR_SET_SLOTS - 1);

	if (s->nr >= CORR_SET_SLOTS / 2)
		return;
	while (s->slot[h] && s->slot[h] != corr + 1)
		h = (h + 1) & (CORR_SET_SLOTS - 1);
	if (!s->slot[h]) {
		s->slot[h] = corr + 1;
		s->nr++;
	}
}

static bool corr_has(const struct corr_set *s, uint32_t corr)
{
	uint32_t h = (corr * 2654435761u) & (CORR_SET_SLOTS - 1);

	while (s->slot[h]) {
		if (s->slot[h] == corr + 1)
			return true;
		h = (h + 1) & (CORR_SET_SLOTS - 1);
	}
	return false;
}

size_t count_records(uint8_t *buf, size_t valid)
{
	CUpti_Activity *r = NULL;
	size_t n = 0;

	while (core_fns.ActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS)
		n++;
	return n;
}

size_t decode_buffer(uint8_t *buf, size_t valid)
{
	struct corr_set runtime;
	CUpti_Activity *r = NULL;
	size_t n = 0;

	memset(&runtime, 0, sizeof(runtime));
	while (core_fns.ActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS)
		if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME)
			corr_add(&runtime, ((const CUpti_ActivityAPI *)r)->correlationId);

	r = NULL;
	while (core_fns.ActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
		n++;
		switch (r->kind) {
		case CUPTI_ACTIVITY_KIND_KERNEL:
		case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
			do_kernel((const CUpti_ActivityKernel5 *)r);
			break;
		case CUPTI_ACTIVITY_KIND_MEMCPY:
			do_memcpy((const CUpti_ActivityMemcpy6 *)r);
			break;
		case CUPTI_ACTIVITY_KIND_MEMSET:
			do_memset((const CUpti_ActivityMemset4 *)r);
			break;
		case CUPTI_ACTIVITY_KIND_MEMORY2:
			do_memory((const CUpti_ActivityMemory2 *)r);
			break;
		case CUPTI_ACTIVITY_KIND_MARKER: {
			const CUpti_ActivityMarker2 *m = (const CUpti_ActivityMarker2 *)r;

			nvtx_pair_marker(m, core_ts(m->timestamp));
			break;
		}
		case CUPTI_ACTIVITY_KIND_RUNTIME:
			do_api((const CUpti_ActivityAPI *)r, CUPTI_CB_DOMAIN_RUNTIME_API);
			break;
		case CUPTI_ACTIVITY_KIND_DRIVER:
			if (!corr_has(&runtime, ((const CUpti_ActivityAPI *)r)->correlationId))
				do_api((const CUpti_ActivityAPI *)r, CUPTI_CB_DOMAIN_DRIVER_API);
			break;
		case CUPTI_ACTIVITY_KIND_OVERHEAD:
			atomic_fetch_add_explicit(&core_stats.overhead, 1, memory_order_relaxed);
			break;
		default:
			break;
		}
	}
	return n;
}
