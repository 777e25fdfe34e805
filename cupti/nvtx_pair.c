// SPDX-License-Identifier: BSD-2-Clause
/*
 * NVTX ranges from Marker2 records. CUPTI reports a range as two records, START and END,
 * sharing an id (for push/pop and for start/end ranges alike); an instant mark is one
 * INSTANTANEOUS record. We pair them into one event with the depth the range had on its thread.
 * An END can arrive before its START when a start/end range crosses threads (each thread has
 * its own activity buffer), so a lone END waits in the table too.
 */
#include <pthread.h>
#include <string.h>

#include "core_priv.h"
#include "nvtx_open.h"

#define NVTX_SLOTS 1024

struct range {
	uint32_t id;
	uint32_t tid;
	uint32_t depth;
	bool end_only; /* END seen, START not yet: end_ns is set, the rest is not */
	uint64_t start_ns;
	uint64_t end_ns;
	const char *name;
	const char *domain;
};

static pthread_mutex_t nvtx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct range ranges[NVTX_SLOTS];
static size_t nr_ranges;

static struct range *find(uint32_t id, bool end_only)
{
	size_t i;

	for (i = 0; i < nr_ranges; i++)
		if (ranges[i].id == id && ranges[i].end_only == end_only)
			return &ranges[i];
	return NULL;
}

/* Ranges open on tid now: the depth of the next range to start there. */
static uint32_t open_on(uint32_t tid)
{
	uint32_t n = 0;
	size_t i;

	for (i = 0; i < nr_ranges; i++)
		n += !ranges[i].end_only && ranges[i].tid == tid;
	return n;
}

static void drop(struct range *r)
{
	*r = ranges[--nr_ranges];
}

/* A free slot; when full, a lone END makes room (its START most likely predates us). */
static struct range *slot(void)
{
	size_t i;

	if (nr_ranges < NVTX_SLOTS)
		return &ranges[nr_ranges++];
	for (i = 0; i < nr_ranges; i++) {
		if (ranges[i].end_only) {
			memmove(&ranges[i], &ranges[i + 1],
				(nr_ranges - i - 1) * sizeof(ranges[0]));
			return &ranges[nr_ranges - 1];
		}
	}
	return NULL;
}

static void emit(const struct range *r, uint64_t end_ns)
{
	struct ev e = {
	    .type = EV_NVTX,
	    .start_ns = r->start_ns,
	    .end_ns = end_ns,
	    .tid = r->tid,
	    .depth = r->depth,
	    .name = r->name,
	    .domain = r->domain,
	};

	if (core_evq)
		evq__push(core_evq, &e);
}

static void lost(void)
{
	core_log_once(CLOG_NVTX_FULL, "more than %d NVTX ranges open, dropping new ones",
		      NVTX_SLOTS);
	if (core_evq)
		evq__add_dropped(core_evq, 1);
}

void nvtx_pair_marker(const CUpti_ActivityMarker2 *m, uint64_t ts_ns)
{
	uint32_t tid = 0;
	struct range *r, cur;

	if (m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
	    m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS)
		tid = m->objectId.pt.threadId;

	pthread_mutex_lock(&nvtx_lock);
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
		cur = (struct range){
		    .tid = tid,
		    .depth = open_on(tid),
		    .start_ns = ts_ns,
		    .name = names__intern(m->name),
		    .domain = names__intern(m->domain),
		};
		emit(&cur, ts_ns);
	} else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
		cur = (struct range){
		    .id = m->id,
		    .tid = tid,
		    .depth = open_on(tid),
		    .start_ns = ts_ns,
		    .name = names__intern(m->name),
		    .domain = names__intern(m->domain),
		};
		r = find(m->id, true);
		if (r) {
			emit(&cur, r->end_ns);
			drop(r);
		} else if ((r = slot())) {
			*r = cur;
		} else {
			lost();
		}
	} else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
		r = find(m->id, false);
		if (r) {
			emit(r, ts_ns);
			drop(r);
		} else if ((r = slot())) {
			*r = (struct range){.id = m->id, .end_only = true, .end_ns = ts_ns};
		} else {
			lost();
		}
	}
	pthread_mutex_unlock(&nvtx_lock);
}

void nvtx_pair_reset(void)
{
	pthread_mutex_lock(&nvtx_lock);
	nr_ranges = 0;
	pthread_mutex_unlock(&nvtx_lock);
}

size_t core__open_ranges(struct ev *out, size_t max, uint64_t now_ns)
{
	size_t i, n = 0;

	pthread_mutex_lock(&nvtx_lock);
	for (i = 0; i < nr_ranges && n < max; i++) {
		const struct range *r = &ranges[i];

		if (r->end_only)
			continue;
		out[n++] = (struct ev){
		    .type = EV_NVTX,
		    .start_ns = r->start_ns,
		    .end_ns = now_ns > r->start_ns ? now_ns : r->start_ns,
		    .tid = r->tid,
		    .depth = r->depth,
		    .name = r->name,
		    .domain = r->domain,
		};
	}
	pthread_mutex_unlock(&nvtx_lock);
	return n;
}
