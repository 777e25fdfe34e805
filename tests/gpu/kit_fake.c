// SPDX-License-Identifier: BSD-2-Clause
/*
 * CUDA's part in the device kit's dry run: over the fake libcupti (tests/fixtures/cupti_fake),
 * the kit's fake backend (fakegpu.py, through ctypes) fires launch callbacks and hands over
 * activity records built with the real CUDA 13 structs, so the probe and the checks' analysis
 * read exactly what they would read from real CUPTI.
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

#define EXPORT __attribute__((visibility("default")))
#define PENDING_MAX 4096

/* Records waiting for kit_fake_deliver, each in a union big enough for any of them. */
static union rec {
	CUpti_ActivityKernel10 k;
	CUpti_ActivityMemset4 ms;
	CUpti_ActivityMarker2 mk;
	CUpti_ActivityMemory4 mem;
} pending[PENDING_MAX];
static size_t pending_size[PENDING_MAX];
static size_t nr_pending;
static size_t lost;

static union rec *slot(size_t size)
{
	if (nr_pending == PENDING_MAX) {
		lost++;
		return NULL;
	}
	pending_size[nr_pending] = size;
	memset(&pending[nr_pending], 0, sizeof(pending[0]));
	return &pending[nr_pending++];
}

EXPORT void kit_fake_callback(int domain, unsigned cbid, int site, uint32_t corr)
{
	fake_cupti_invoke_callback((CUpti_CallbackDomain)domain, cbid,
				   site ? CUPTI_API_EXIT : CUPTI_API_ENTER, corr, "fake");
}

/* name must stay valid until delivered: the fake backend keeps its strings alive. */
EXPORT void kit_fake_kernel(uint32_t corr, uint64_t start, uint64_t end, uint32_t graph_id,
			    uint64_t graph_node, const char *name)
{
	union rec *r = slot(sizeof(CUpti_ActivityKernel10));

	if (!r)
		return;
	r->k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	r->k.start = start;
	r->k.end = end;
	r->k.streamId = 7;
	r->k.gridX = r->k.gridY = r->k.gridZ = 1;
	r->k.blockX = r->k.blockY = r->k.blockZ = 1;
	r->k.correlationId = corr;
	r->k.graphId = graph_id;
	r->k.graphNodeId = graph_node;
	r->k.name = name;
}

EXPORT void kit_fake_memset(uint32_t corr, uint64_t start, uint64_t end, uint64_t bytes)
{
	union rec *r = slot(sizeof(CUpti_ActivityMemset4));

	if (!r)
		return;
	r->ms.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	r->ms.start = start;
	r->ms.end = end;
	r->ms.bytes = bytes;
	r->ms.correlationId = corr;
}

EXPORT void kit_fake_marker(uint32_t flags, uint32_t id, uint32_t tid, uint64_t ts,
			    const char *name)
{
	union rec *r = slot(sizeof(CUpti_ActivityMarker2));

	if (!r)
		return;
	r->mk.kind = CUPTI_ACTIVITY_KIND_MARKER;
	r->mk.flags = flags;
	r->mk.id = id;
	r->mk.timestamp = ts;
	r->mk.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	r->mk.objectId.pt.processId = (uint32_t)getpid();
	r->mk.objectId.pt.threadId = tid;
	r->mk.name = name;
}

/* A MEMORY2 record (op 1 allocation, 2 release), as CUDA 13's CUPTI reports cudaMalloc's. */
EXPORT void kit_fake_memory(int op, uint32_t corr, uint64_t addr, uint64_t bytes, uint64_t ts,
			    uint32_t stream)
{
	union rec *r = slot(sizeof(CUpti_ActivityMemory4));

	if (!r)
		return;
	fake_cupti_memory_record(&r->mem, (CUpti_ActivityMemoryOperationType)op,
				 CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, corr, addr, bytes, ts, 0,
				 stream, false);
}

/*
 * Hand the pending records over in as many buffers as they fill, as CUPTI completes them.
 * Returns the records delivered, or -1 when the client gave no buffer (its pool empty, or no
 * client): those left are reported dropped.
 */
EXPORT int kit_fake_deliver(void)
{
	size_t i = 0;
	int n = 0;

	while (i < nr_pending) {
		uint8_t *buf = NULL;
		size_t size = 0, len = 0;

		fake_cupti_request_buffer(&buf, &size);
		if (!buf || size < pending_size[i]) {
			fake_cupti_set_dropped(nr_pending - i);
			nr_pending = 0;
			return -1;
		}
		for (; i < nr_pending && len + pending_size[i] <= size; i++, n++) {
			memcpy(buf + len, &pending[i], pending_size[i]);
			len += pending_size[i];
		}
		fake_cupti_complete_buffer(buf, size, len);
	}
	nr_pending = 0;
	return n;
}

/* CUPTI sessions so far and kernel-kind disables: what a disable/enable of the library did. */
EXPORT void kit_fake_cupti_counts(unsigned *sessions, unsigned *kernel_disables)
{
	const struct fake_call *calls;
	size_t i, n = fake_cupti_calls(&calls);

	*sessions = fake_cupti_sessions();
	*kernel_disables = 0;
	for (i = 0; i < n; i++)
		if (!strcmp(calls[i].fn, "cuptiActivityDisable") &&
		    calls[i].a == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			(*kernel_disables)++;
}

EXPORT int kit_fake_kind_enabled(int kind)
{
	return fake_cupti_kind_enabled((CUpti_ActivityKind)kind);
}

/* ---- another in-process CUPTI client (Kineto, as the review's item 1 describes it) ---------- */

static void CUPTIAPI foreign_request(uint8_t **buf, size_t *size, size_t *max)
{
	static uint8_t mem[1 << 16] __attribute__((aligned(8)));

	*buf = mem;
	*size = sizeof(mem);
	*max = 0;
}

static void CUPTIAPI foreign_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
				      size_t valid)
{
	(void)ctx, (void)stream, (void)buf, (void)size, (void)valid;
}

static uint64_t CUPTIAPI foreign_clock(void)
{
#if defined(__x86_64__)
	/* A TSC-scale clock: the raw cycle counter, as Kineto's rdtsc callback reads. */
	return __builtin_ia32_rdtsc();
#else
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

static void CUPTIAPI foreign_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
				      const void *data)
{
	(void)ud, (void)d, (void)id, (void)data;
}

/*
 * What Kineto does at a profile's start: subscribe (the slot may be taken: it goes on
 * regardless), then take the clock and the buffers.
 */
EXPORT void kit_fake_foreign_client(void)
{
	static CUpti_SubscriberHandle h;

	if (!h)
		cuptiSubscribe(&h, foreign_callback, NULL);
	cuptiActivityRegisterTimestampCallback(foreign_clock);
	cuptiActivityRegisterCallbacks(foreign_request, foreign_complete);
}
