/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The timeline: bounded rings of raw events for trace dumps, written by ingest (CPU samples,
 * launch stacks) and the GPU module (kernels, copies, CUDA API calls, NVTX ranges), read by the
 * trace dump, and off-CPU waits of 1 ms or more (route.c). Later sources append new event
 * types.
 *
 * CPU samples, the bulk of it, are kept in a compact ring of their own (24 bytes each against
 * 72 for a struct tl_event); every other event in the second ring. Each ring is in arrival
 * order; readers that need time order sort.
 *
 * Bounded in bytes: the slots of both rings plus the names. The oldest events (by start time,
 * whichever ring holds them) are overwritten first and counted. Names are interned and
 * refcounted, so a kernel launched a million times costs its name once, and a single name never
 * takes more than a 64th of the ring.
 *
 * Events hold store stack ids (samples, launches): the store's compaction asks the timeline which
 * ids it keeps and tells it their new numbers (timeline__gc_mark, timeline__gc_remap).
 *
 * Time: CLOCK_MONOTONIC ns. Not thread-safe: the daemon's loop thread owns it.
 */
#ifndef PROFD_TIMELINE_H
#define PROFD_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

enum tl_type {
	TL_SAMPLE = 1, /* a CPU sample: start = end = ts; stack */
	TL_LAUNCH,     /* a launch stack (USDT corr > 0, or a libcuda uprobe: corr 0) */
	TL_KERNEL,     /* [start, end), corr, device, stream, grid, block, name */
	TL_COPY,       /* memcpy / memset: kind, bytes, device, stream */
	TL_API,	       /* a CUDA API call of a thread: name */
	TL_NVTX,       /* a closed NVTX range of a thread: depth, name */
	TL_OFFCPU,     /* a wait off the CPU [start, end) of a thread: the stack it waited in */
};
#define TL_NTYPES 7

struct tl_event {
	uint8_t type; /* enum tl_type */
	uint8_t kind; /* copies: the wire's copy kind */
	uint8_t has_device;
	uint8_t has_stream;
	uint32_t pid;
	uint32_t tid; /* 0: a device-side record of the process */
	uint32_t uid; /* the process's owner when the event was taken (trace uid filters) */
	uint32_t corr;
	uint32_t stack; /* samples, launches: a store stack id */
	uint32_t device;
	uint32_t stream;
	uint32_t depth;
	uint64_t start; /* ts of samples and launches */
	uint64_t end;
	union {
		uint64_t bytes; /* copies */
		struct {
			uint32_t grid, block; /* kernels; 0 when not reported */
		};
	};
	/*
	 * Kernels, API calls, NVTX: on push, copied (NULL: none); on events read back, owned by
	 * the timeline and valid while the event is.
	 */
	const char *name;
};

struct timeline_opts {
	size_t bytes; /* slots + names; 0: 8 MiB */
};

struct timeline_stats {
	uint64_t events;      /* in the ring now */
	uint64_t overwritten; /* dropped, oldest first, since start */
	uint64_t bytes;	      /* slots in use + names */
};

struct timeline;

/* Returns a new, empty timeline or NULL with errno set. */
struct timeline *timeline__new(const struct timeline_opts *opts);
void timeline__free(struct timeline *t);

/*
 * Append e (its name copied, cut with "..." past a 64th of the ring), overwriting the oldest
 * events as needed. Returns 0 or -ENOMEM (nothing appended).
 */
int timeline__push(struct timeline *t, const struct tl_event *e);

/*
 * Events now in the timeline: indices 0 .. count - 1 give first the events of the second ring,
 * then the CPU samples, each in arrival order. timeline__get copies event i into *out (its name
 * stays valid until the next push) and returns false past the end.
 */
size_t timeline__count(const struct timeline *t);
bool timeline__get(const struct timeline *t, size_t i, struct tl_event *out);

void timeline__stats(const struct timeline *t, struct timeline_stats *out);

/*
 * The store's compaction (store.h): keep the stack ids the events hold in the plan before
 * store__gc_commit, then, after a successful commit, replace each with its new id. NULL t or gc:
 * no-op.
 */
void timeline__gc_mark(struct timeline *t, struct store_gc *gc);
void timeline__gc_remap(struct timeline *t, const struct store_gc *gc);

#endif
