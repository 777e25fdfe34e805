/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Where a symbolized CPU sample or launch goes, and who keeps which stack ids through the store's
 * compaction. Ingest calls it for each record, the daemon's tick for compaction; the GPU tests
 * drive the GPU module through it as the daemon does.
 *
 *   CPU sample:    the timeline; then gpu__hold when gpu__holds(pid), else the store's
 *                  STORE_VALUE_CPU_SAMPLES.
 *   USDT launch:   the timeline, then gpu__launch (joined with its kernel later).
 *   uprobe launch: the timeline, then the store's STORE_VALUE_UPROBE_LAUNCHES.
 *   off-CPU wait:  the timeline when 1 ms or longer; the store's STORE_VALUE_OFFCPU_NS over the
 *                  buckets it spans; then, when gpu__holds(pid), gpu__hold_wait for the part
 *                  the GPU was idle.
 *
 * Not thread-safe: the daemon's loop thread owns every part.
 */
#ifndef PROFD_ROUTE_H
#define PROFD_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu.h"
#include "store.h"
#include "timeline.h"

struct route {
	struct store *store;	   /* required */
	struct gpu *gpu;	   /* NULL: no GPU correlation (launches must not be routed) */
	struct timeline *timeline; /* NULL: nothing kept for traces */
};

/* uid: the process's owner, which the timeline files the event under. Returns 0 or -errno. */
int route__sample(const struct route *r, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t uid,
		  uint32_t stack);
/* A wait [start, end) off the CPU, by the stack the thread left with. Returns 0 or -errno. */
int route__wait(const struct route *r, uint64_t start, uint64_t end, uint32_t pid, uint32_t tid,
		uint32_t uid, uint32_t stack);
/* corr: CUPTI's correlation id (> 0) of a USDT launch, 0 for a libcuda uprobe launch. */
int route__launch(const struct route *r, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t uid,
		  uint32_t stack, uint32_t corr);

/*
 * Compact the store when it is due: plan, let the GPU module and the timeline keep the stack ids
 * they hold, commit, and renumber theirs. Here rather than inside store__add, so no id moves
 * while a caller holds it between two adds. Returns 1 when it compacted, 0 when not due, or
 * -errno (the store is left as it was; the next call tries again).
 */
int route__compact(const struct route *r);
/* The same, due or not. */
int route__compact_now(const struct route *r);

#endif
