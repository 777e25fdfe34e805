// SPDX-License-Identifier: BSD-2-Clause
/*
 * NVTX ranges from Marker2 records. CUPTI reports a range as two records, START and END,
 * sharing an id (for push/pop and for start/end ranges alike); an instant mark is one
 * INSTANTANEOUS record. We pair them into one event with the depth the range had on its thread.
 * An END can arrive before its START when a start/end range crosses threads (each thread has
 * its own activity buffer), so a lone END waits in the table too.
 *
 * Entries expire: a range the application never ends (a leaked push, an exception between
 * push and pop) would otherwise sit in the table for the life of the process, reported open
 * in every batch, and enough of them would fill it for good. A lone END waits a minute for its
 * START; an open range is dropped after an hour, or after a minute when the table is full and
 * a new range needs its slot.
 */
#include <pthread.h>
#include <string.h>

#include "core_priv.h"
#include "nvtx_open.h"
#include "timeutil.h"

#define NVTX_SLOTS 1024
#define NVTX_OPEN_TTL_NS (3600 * NSEC_PER_SEC)
#define NVTX_END_TTL_NS (60 * NSEC_PER_SEC)
/* When full, an open range at least this old gives its slot to a new one. */
#define NVTX_EVICT_AGE_NS (60 * NSEC_PER_SEC)

struct range {
	uint32_t id;
	uint32_t tid;
	uint32_t depth;
	bool end_only; /* END seen, START not yet: end_ns is set, the rest is not */
	uint64_t start_ns;
	uint64_t end_ns;
	uint64_t added_ns; /* core_mono_ns() when it entered the table */
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

static bool expired(const struct range *r, uint64_t now)
{
	uint64_t ttl = r->end_only ? NVTX_END_TTL_NS : NVTX_OPEN_TTL_NS;

	return now > r->added_ns && now - r->added_ns >= ttl;
}

/* Drop the entries past their TTL. Called locked. */
static void expire(uint64_t now)
{
	size_t i = 0;

	while (i < nr_ranges) {
		if (expired(&ranges[i], now))
			drop(&ranges[i]); /* the last one moved here: look at i again */
		else
			i++;
	}
}

/*
 * A free slot. When full: expired entries go, then a lone END (its START most likely predates
 * us), then the oldest open range if it is old enough; else NULL (the new range is lost).
 */
static struct range *slot(uint64_t now)
{
	struct range *oldest = NULL;
	size_t i;

	if (nr_ranges == NVTX_SLOTS)
		expire(now);
	if (nr_ranges < NVTX_SLOTS)
		return &ranges[nr_ranges++];
	for (i = 0; i < nr_ranges; i++) {
		if (ranges[i].end_only)
			return &ranges[i];
		if (!oldest || ranges[i].added_ns < oldest->added_ns)
			oldest = &ranges[i];
	}
	if (oldest && now > oldest->added_ns && now - oldest->added_ns >= NVTX_EVICT_AGE_NS)
		return oldest;
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
	uint64_t now = core_mono_ns();
	uint32_t tid = 0;
	struct range *r, cur;

	if (atomic_load_explicit(&core_forked, memory_order_relaxed))
		return;
	if (m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
	    m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS)
		tid = m->objectId.pt.threadId;

	pthread_mutex_lock(&nvtx_lock);
	/* A walk of the table, as open_on and find are: an END past its TTL pairs no more. */
	expire(now);
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
		    .added_ns = now,
		    .name = names__intern(m->name),
		    .domain = names__intern(m->domain),
		};
		r = find(m->id, true);
		if (r) {
			emit(&cur, r->end_ns);
			drop(r);
		} else if ((r = slot(now))) {
			*r = cur;
		} else {
			lost();
		}
	} else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
		r = find(m->id, false);
		if (r) {
			emit(r, ts_ns);
			drop(r);
		} else if ((r = slot(now))) {
			*r = (struct range){
			    .id = m->id, .end_only = true, .end_ns = ts_ns, .added_ns = now};
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
	expire(core_mono_ns());
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
