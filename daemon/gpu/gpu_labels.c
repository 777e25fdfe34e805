// SPDX-License-Identifier: BSD-2-Clause
/*
 * The labels of CPU samples and joined records: the NVTX ranges of their thread and whether the
 * process's GPU was idle (its kernel busy intervals). Bounded per process and by the module's
 * memory budget; labels are looked up by binary search, so no message costs work in proportion
 * to what is kept.
 */
#include "gpu_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Closed NVTX ranges kept per process: the older half (by end) goes when full. */
#define MAX_NVTX_CLOSED 16384
/* Open NVTX ranges per process: more are refused. */
#define MAX_NVTX_OPEN 1024
/*
 * Ranges of one thread and depth are disjoint when they are push/pop ranges, so the one before
 * ts is the only candidate; start/end ranges may overlap, and this many before ts are tried.
 */
#define NVTX_SCAN 8
/* Busy intervals per process: the older half goes when full. */
#define MAX_BUSY 65536
/*
 * Busy intervals are kept this long at least: an off-CPU wait is reported when it ends, and the
 * part of it the GPU was idle needs the intervals back to its start. A longer wait (or one
 * older than MAX_BUSY intervals) counts as idle only after the oldest one kept.
 */
#define BUSY_KEEP_NS (120ull * 1000000000)

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* --- NVTX --------------------------------------------------------------------------------- */

/* Order of (tid, depth, start) keys. */
static int nv_key_cmp(const struct nvtx_range *r, uint32_t tid, uint32_t depth, uint64_t start)
{
	if (r->tid != tid)
		return r->tid < tid ? -1 : 1;
	if (r->depth != depth)
		return r->depth < depth ? -1 : 1;
	if (r->start != start)
		return r->start < start ? -1 : 1;
	return 0;
}

static int nv_cmp(const void *a, const void *b)
{
	const struct nvtx_range *y = b;

	return nv_key_cmp(a, y->tid, y->depth, y->start);
}

/* Index of the first range of a[0, n) whose key is after (tid, depth, start). */
static size_t nv_upper(const struct nvtx_range *a, size_t n, uint32_t tid, uint32_t depth,
		       uint64_t start)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (nv_key_cmp(&a[mid], tid, depth, start) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Index of the range with exactly this key in a sorted a[0, n), or n. */
static size_t nv_find(const struct nvtx_range *a, size_t n, uint32_t tid, uint32_t depth,
		      uint64_t start)
{
	size_t i = nv_upper(a, n, tid, depth, start);

	return i > 0 && !nv_key_cmp(&a[i - 1], tid, depth, start) ? i - 1 : n;
}

/*
 * Sort the out-of-order tail of the closed ranges into the sorted part: the tail is sorted
 * alone, then merged from the back, so one lookup after a batch costs O(n + k log k), never a
 * memmove per range.
 */
static void nvtx_sort(struct gpu_proc *p)
{
	size_t s = p->nvtx_sorted, k = p->nnvtx - s, i, j, o;
	struct nvtx_range *tail;

	if (!k)
		return;
	qsort(p->nvtx + s, k, sizeof(*p->nvtx), nv_cmp);
	tail = malloc(k * sizeof(*tail));
	if (!tail) {
		qsort(p->nvtx, p->nnvtx, sizeof(*p->nvtx), nv_cmp);
		p->nvtx_sorted = p->nnvtx;
		return;
	}
	memcpy(tail, p->nvtx + s, k * sizeof(*tail));
	i = s;
	j = k;
	o = p->nnvtx;
	while (j > 0) {
		if (i > 0 && nv_cmp(&p->nvtx[i - 1], &tail[j - 1]) > 0)
			p->nvtx[--o] = p->nvtx[--i];
		else
			p->nvtx[--o] = tail[--j];
	}
	free(tail);
	p->nvtx_sorted = p->nnvtx;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Drop the closed ranges that ended before lim; the order stays. */
static void nvtx_filter(struct gpu *g, struct gpu_proc *p, uint64_t lim)
{
	size_t k = 0, sorted = 0;

	for (size_t i = 0; i < p->nnvtx; i++) {
		if (p->nvtx[i].end < lim) {
			gname_unref(g, p->nvtx[i].name);
			continue;
		}
		if (i < p->nvtx_sorted)
			sorted++;
		p->nvtx[k++] = p->nvtx[i];
	}
	p->nnvtx = k;
	p->nvtx_sorted = sorted;
}

/* Full: drop the older half by end (what a late launch is least likely to ask for). */
static void nvtx_drop_older_half(struct gpu *g, struct gpu_proc *p)
{
	uint64_t *ends = malloc(p->nnvtx * sizeof(*ends)), cut;

	if (!ends) {
		nvtx_filter(g, p, UINT64_MAX);
		return;
	}
	for (size_t i = 0; i < p->nnvtx; i++)
		ends[i] = p->nvtx[i].end;
	qsort(ends, p->nnvtx, sizeof(*ends), u64_cmp);
	cut = ends[p->nnvtx / 2];
	free(ends);
	/* Strictly older than the median, or everything up to it when many end together. */
	nvtx_filter(g, p, cut);
	if (p->nnvtx >= MAX_NVTX_CLOSED)
		nvtx_filter(g, p, cut + 1);
}

static void open_remove(struct gpu *g, struct gpu_proc *p, size_t i)
{
	gname_unref(g, p->open[i].name);
	memmove(p->open + i, p->open + i + 1, (p->nopen - i - 1) * sizeof(*p->open));
	p->nopen--;
}

int gpu_nvtx_add(struct gpu *g, struct gpu_proc *p, const struct nvtx_range *range,
		 struct gname *name)
{
	struct nvtx_range r = *range;
	size_t i = nv_find(p->open, p->nopen, r.tid, r.depth, r.start);
	int err;

	if (r.open) {
		if (r.depth >= MAX_NVTX_DEPTH)
			return 0; /* labels nothing */
		if (i < p->nopen) {
			/* Sent again while open: it reaches further now. */
			p->open[i].end = r.end;
			gname_unref(g, p->open[i].name);
			p->open[i].name = gname_ref(name);
			return 0;
		}
		if (p->nopen >= MAX_NVTX_OPEN)
			return -ENOSPC;
		err = gpu_grow(g, (void **)&p->open, &p->open_cap, p->nopen + 1, sizeof(r));
		if (err)
			return err;
		i = nv_upper(p->open, p->nopen, r.tid, r.depth, r.start);
		memmove(p->open + i + 1, p->open + i, (p->nopen - i) * sizeof(r));
		r.name = gname_ref(name);
		p->open[i] = r;
		p->nopen++;
		return 0;
	}
	/* The closed version replaces the open one, a mark (start == end) included. */
	if (i < p->nopen)
		open_remove(g, p, i);
	if (r.start == r.end || r.depth >= MAX_NVTX_DEPTH)
		return 0;
	if (p->nnvtx >= MAX_NVTX_CLOSED)
		nvtx_drop_older_half(g, p);
	err = gpu_grow(g, (void **)&p->nvtx, &p->nvtx_cap, p->nnvtx + 1, sizeof(r));
	if (err)
		return err;
	r.name = gname_ref(name);
	/* In order (the usual case) the sorted part grows; otherwise it waits in the tail. */
	if (p->nvtx_sorted == p->nnvtx && (!p->nnvtx || nv_cmp(&p->nvtx[p->nnvtx - 1], &r) <= 0))
		p->nvtx_sorted++;
	p->nvtx[p->nnvtx++] = r;
	return 0;
}

static bool range_active(const struct nvtx_range *r, uint64_t ts)
{
	return r->start <= ts && (ts < r->end || (r->open && ts <= r->end));
}

static int range_cmp(const void *a, const void *b)
{
	const struct nvtx_range *x = *(const struct nvtx_range *const *)a;
	const struct nvtx_range *y = *(const struct nvtx_range *const *)b;

	/* Innermost first: deeper, then later start. */
	if (x->depth != y->depth)
		return x->depth > y->depth ? -1 : 1;
	if (x->start != y->start)
		return x->start > y->start ? -1 : 1;
	return 0;
}

/* The deepest level of tid in a sorted a[0, n); -1 for none. */
static long nv_max_depth(const struct nvtx_range *a, size_t n, uint32_t tid)
{
	size_t i = nv_upper(a, n, tid, UINT32_MAX, UINT64_MAX);

	return i > 0 && a[i - 1].tid == tid ? (long)a[i - 1].depth : -1;
}

/* Add the ranges of (tid, depth) in a sorted a[0, n) active at ts. */
static void nv_collect(const struct nvtx_range *a, size_t n, uint32_t tid, uint32_t depth,
		       uint64_t ts, const struct nvtx_range **act, size_t *nact)
{
	size_t i = nv_upper(a, n, tid, depth, ts);

	for (size_t k = 0; k < NVTX_SCAN && i > 0 && *nact < MAX_NVTX_DEPTH; k++) {
		const struct nvtx_range *r = &a[--i];

		if (r->tid != tid || r->depth != depth)
			break;
		if (range_active(r, ts))
			act[(*nact)++] = r;
	}
}

size_t gpu_nvtx_frames(struct gpu *g, struct gpu_proc *p, uint32_t tid, uint64_t ts, uint32_t *ids)
{
	const struct nvtx_range *act[MAX_NVTX_DEPTH];
	size_t n = 0, out = 0;
	long maxd;

	if (!p || !tid)
		return 0;
	nvtx_sort(p);
	maxd = nv_max_depth(p->nvtx, p->nnvtx, tid);
	if (nv_max_depth(p->open, p->nopen, tid) > maxd)
		maxd = nv_max_depth(p->open, p->nopen, tid);
	/* Outermost levels first: past MAX_NVTX_DEPTH ranges the innermost go. */
	for (long d = 0; d <= maxd && n < MAX_NVTX_DEPTH; d++) {
		nv_collect(p->nvtx, p->nnvtx, tid, (uint32_t)d, ts, act, &n);
		nv_collect(p->open, p->nopen, tid, (uint32_t)d, ts, act, &n);
	}
	if (n > 1)
		qsort(act, n, sizeof(act[0]), range_cmp);
	for (size_t i = 0; i < n; i++) {
		struct frame_key k = {.kind = FRAME_KIND_NVTX,
				      .name = act[i]->name ? act[i]->name->s : "[unnamed]"};
		uint32_t id = store__intern_frame(g->store, &k);

		if (id)
			ids[out++] = id;
	}
	return out;
}

/* --- GPU busy intervals ------------------------------------------------------------------- */

static int busy_cmp(const void *a, const void *b)
{
	const struct busy *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Sort the out-of-order tail in and merge what overlaps: sorted and disjoint after. */
static void busy_normalize(struct gpu_proc *p)
{
	size_t s = p->busy_sorted, k = p->nbusy - s, i, j, o;
	struct busy *tail;

	if (!k)
		return;
	qsort(p->busy + s, k, sizeof(*p->busy), busy_cmp);
	tail = malloc(k * sizeof(*tail));
	if (tail) {
		memcpy(tail, p->busy + s, k * sizeof(*tail));
		i = s;
		j = k;
		o = p->nbusy;
		while (j > 0) {
			if (i > 0 && p->busy[i - 1].start > tail[j - 1].start)
				p->busy[--o] = p->busy[--i];
			else
				p->busy[--o] = tail[--j];
		}
		free(tail);
	} else {
		qsort(p->busy, p->nbusy, sizeof(*p->busy), busy_cmp);
	}
	for (i = 0, o = 0; i < p->nbusy; i++) {
		if (o && p->busy[i].start <= p->busy[o - 1].end) {
			if (p->busy[i].end > p->busy[o - 1].end)
				p->busy[o - 1].end = p->busy[i].end;
		} else {
			p->busy[o++] = p->busy[i];
		}
	}
	p->nbusy = p->busy_sorted = o;
}

int gpu_busy_add(struct gpu *g, struct gpu_proc *p, uint64_t start, uint64_t end)
{
	int err;

	if (end <= start)
		return 0;
	if (p->nbusy && p->busy_sorted == p->nbusy && start >= p->busy[p->nbusy - 1].start &&
	    start <= p->busy[p->nbusy - 1].end) {
		/* The usual case: it overlaps or touches the newest one. */
		if (end > p->busy[p->nbusy - 1].end)
			p->busy[p->nbusy - 1].end = end;
		return 0;
	}
	if (p->nbusy >= MAX_BUSY) {
		busy_normalize(p);
		if (p->nbusy >= MAX_BUSY) {
			if (p->busy[MAX_BUSY / 2 - 1].end > p->busy_from)
				p->busy_from = p->busy[MAX_BUSY / 2 - 1].end;
			memmove(p->busy, p->busy + MAX_BUSY / 2,
				(p->nbusy - MAX_BUSY / 2) * sizeof(*p->busy));
			p->nbusy -= MAX_BUSY / 2;
			p->busy_sorted = p->nbusy;
		}
	}
	err = gpu_grow(g, (void **)&p->busy, &p->busy_cap, p->nbusy + 1, sizeof(*p->busy));
	if (err)
		return err;
	if (p->busy_sorted == p->nbusy && (!p->nbusy || start > p->busy[p->nbusy - 1].end))
		p->busy_sorted++;
	p->busy[p->nbusy++] = (struct busy){start, end};
	return 0;
}

/*
 * Index of the first busy interval of p that ends after t (p->nbusy if none), sorting the late
 * ones in first. Sorted by start and disjoint, the intervals are sorted by end too.
 */
static size_t busy_ending_after(struct gpu_proc *p, uint64_t t)
{
	size_t lo = 0, hi;

	busy_normalize(p);
	hi = p->nbusy;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->busy[mid].end <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool gpu_busy_at(struct gpu *g, struct gpu_proc *p, uint64_t ts)
{
	size_t i = busy_ending_after(p, ts);

	(void)g;
	return i < p->nbusy && p->busy[i].start <= ts;
}

uint64_t gpu_idle_ns(struct gpu *g, struct gpu_proc *p, uint64_t a, uint64_t b)
{
	uint64_t idle = 0, t;

	(void)g;
	if (a < p->busy_from)
		a = p->busy_from;
	if (a >= b)
		return 0;
	t = a;
	for (size_t i = busy_ending_after(p, a); i < p->nbusy && p->busy[i].start < b; i++) {
		if (p->busy[i].start > t)
			idle += p->busy[i].start - t;
		if (p->busy[i].end > t)
			t = p->busy[i].end;
		if (t >= b)
			return idle;
	}
	return idle + (b - t);
}

void gpu_prune(struct gpu *g, struct gpu_proc *p, uint64_t now)
{
	/*
	 * A record may still join its launch for a TTL and is labelled with the ranges at its
	 * launch, held samples wait up to hold_ns: keep what either can still ask for.
	 */
	uint64_t keep = 2 * g->o.hold_ns > g->o.join_ttl_ns ? 2 * g->o.hold_ns : g->o.join_ttl_ns;
	uint64_t lim = now > keep ? now - keep : 0;
	uint64_t blim = now > BUSY_KEEP_NS ? now - BUSY_KEEP_NS : 0;
	size_t k = 0;

	lim = min_u64(lim, gpu_join_oldest_launch(g, p->pid, false));
	for (size_t i = 0; i < p->nheld; i++)
		lim = min_u64(lim, p->held[i].ts);
	blim = min_u64(blim, lim);
	if (!lim)
		return;
	nvtx_filter(g, p, lim);
	/* An open range's end moves with every batch; a library that died leaves it behind. */
	for (size_t i = 0; i < p->nopen; i++) {
		if (p->open[i].end < lim)
			gname_unref(g, p->open[i].name);
		else
			p->open[k++] = p->open[i];
	}
	p->nopen = k;
	busy_normalize(p);
	for (k = 0; k < p->nbusy && p->busy[k].end < blim; k++)
		;
	if (k) {
		if (p->busy[k - 1].end > p->busy_from)
			p->busy_from = p->busy[k - 1].end;
		memmove(p->busy, p->busy + k, (p->nbusy - k) * sizeof(*p->busy));
		p->nbusy -= k;
		p->busy_sorted = p->nbusy;
	}
}

void gpu_proc_free_labels(struct gpu *g, struct gpu_proc *p)
{
	for (size_t i = 0; i < p->nnvtx; i++)
		gname_unref(g, p->nvtx[i].name);
	for (size_t i = 0; i < p->nopen; i++)
		gname_unref(g, p->open[i].name);
	gpu_free_array(g, p->nvtx, p->nvtx_cap, sizeof(*p->nvtx));
	gpu_free_array(g, p->open, p->open_cap, sizeof(*p->open));
	gpu_free_array(g, p->busy, p->busy_cap, sizeof(*p->busy));
	p->nvtx = p->open = NULL;
	p->busy = NULL;
	p->nnvtx = p->nvtx_sorted = p->nvtx_cap = p->nopen = p->open_cap = 0;
	p->nbusy = p->busy_sorted = p->busy_cap = 0;
	p->busy_from = 0;
}
