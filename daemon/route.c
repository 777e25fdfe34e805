// SPDX-License-Identifier: BSD-2-Clause
/* Routing of samples and launches, and the store's compaction with every holder of ids. */
#include "route.h"

#include <errno.h>

/*
 * Waits shorter than this stay out of the trace ring: a thread waking 10,000 times a second
 * would push the GPU's kernels out of it, and a trace viewer shows such waits as gaps anyway.
 */
#define TRACE_WAIT_MIN_NS 1000000ull

static int push(const struct route *r, enum tl_type type, uint64_t ts, uint64_t end, uint32_t pid,
		uint32_t tid, uint32_t uid, uint32_t stack, uint32_t corr)
{
	struct tl_event e = {
	    .type = type,
	    .pid = pid,
	    .tid = tid,
	    .uid = uid,
	    .stack = stack,
	    .corr = corr,
	    .start = ts,
	    .end = end,
	};

	return r->timeline ? timeline__push(r->timeline, &e) : 0;
}

int route__sample(const struct route *r, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t uid,
		  uint32_t stack)
{
	int err = push(r, TL_SAMPLE, ts, ts, pid, tid, uid, stack, 0);

	if (err)
		return err;
	if (gpu__holds(r->gpu, pid))
		return gpu__hold(r->gpu, ts, pid, tid, stack);
	return store__add(r->store, ts, pid, tid, stack, STORE_VALUE_CPU_SAMPLES, 1);
}

int route__wait(const struct route *r, uint64_t start, uint64_t end, uint32_t pid, uint32_t tid,
		uint32_t uid, uint32_t stack)
{
	int err = 0;

	if (end <= start)
		return 0;
	if (end - start >= TRACE_WAIT_MIN_NS)
		err = push(r, TL_OFFCPU, start, end, pid, tid, uid, stack, 0);
	if (!err)
		err = store__add_span(r->store, start, end, pid, tid, stack, STORE_VALUE_OFFCPU_NS,
				      NULL, NULL);
	if (!err && gpu__holds(r->gpu, pid))
		err = gpu__hold_wait(r->gpu, start, end, pid, tid, stack);
	return err;
}

int route__launch(const struct route *r, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t uid,
		  uint32_t stack, uint32_t corr)
{
	int err;

	if (corr && !r->gpu)
		return -EINVAL;
	err = push(r, TL_LAUNCH, ts, ts, pid, tid, uid, stack, corr);
	if (err)
		return err;
	if (!corr)
		return store__add(r->store, ts, pid, tid, stack, STORE_VALUE_UPROBE_LAUNCHES, 1);
	return gpu__launch(r->gpu, ts, pid, tid, stack, corr);
}

int route__compact(const struct route *r)
{
	return store__compact_due(r->store) ? route__compact_now(r) : 0;
}

int route__compact_now(const struct route *r)
{
	struct store_gc *gc = store__gc_plan(r->store);
	int err;

	if (!gc)
		return -errno;
	gpu__gc_mark(r->gpu, gc);
	timeline__gc_mark(r->timeline, gc);
	err = store__gc_commit(r->store, gc);
	if (!err) {
		gpu__gc_remap(r->gpu, gc);
		timeline__gc_remap(r->timeline, gc);
	}
	store_gc__free(gc);
	return err ? err : 1;
}
