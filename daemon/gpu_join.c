// SPDX-License-Identifier: BSD-2-Clause
/*
 * The join of launch stacks and GPU records by (pid, correlation id), what a joined record is
 * charged to, and the labels of CPU samples: the NVTX ranges of their thread and whether the
 * process's GPU was idle. Both sides of the join may come first: the launch through the BPF ring
 * buffer (drained every 100 ms), the records in the library's batches (seconds late). A launch
 * stays until its TTL, not until its first record, because a graph launch has many kernels.
 *
 * Everything here is bounded per process and by the module's memory budget, and no message
 * costs work in proportion to what is kept: labels are looked up by binary search, the join's
 * deadlines run in arrival order, and each pid has its own lists.
 */
#include "gpu_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define STANDIN_NAME "[launch stack unknown]"
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
/* Records of one correlation id waiting for their launch (graphs have many). */
#define MAX_WAIT_PER_CORR 4096
/* Records of one process waiting for their launch: more go to the stand-in stack at once. */
#define MAX_WAIT_PER_PROC 65536
/* CPU samples of one process held for their labels: more are stored at once. */
#define MAX_HELD_PER_PROC 65536
/* Stacks up to this many frames are built on the stack; longer ones in heap memory. */
#define STACK_BUF 512

static uint64_t jkey(uint32_t pid, uint32_t corr)
{
	return (uint64_t)pid << 32 | corr;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

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

int gpu_nvtx_add(struct gpu *g, struct gpu_proc *p, const Profd__GpuNvtxRange *m,
		 struct gname *name)
{
	struct nvtx_range r = {
		.start = m->start_ns,
		.end = m->end_ns,
		.tid = m->tid,
		.depth = m->has_depth ? m->depth : 0,
		.open = m->has_open && m->open,
	};
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
	if (p->nvtx_sorted == p->nnvtx &&
	    (!p->nnvtx || nv_cmp(&p->nvtx[p->nnvtx - 1], &r) <= 0))
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

size_t gpu_nvtx_frames(struct gpu *g, struct gpu_proc *p, uint32_t tid, uint64_t ts,
		       uint32_t *ids)
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
		struct frame_key k = { .kind = FRAME_KIND_NVTX,
				       .name = act[i]->name ? act[i]->name->s : "[unnamed]" };
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
	p->busy[p->nbusy++] = (struct busy){ start, end };
	return 0;
}

bool gpu_busy_at(struct gpu *g, struct gpu_proc *p, uint64_t ts)
{
	size_t lo = 0, hi;

	busy_normalize(p);
	hi = p->nbusy;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->busy[mid].start <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && ts < p->busy[lo - 1].end;
}

void gpu_prune(struct gpu *g, struct gpu_proc *p, uint64_t now)
{
	/*
	 * A record may still join its launch for a TTL and is labelled with the ranges at its
	 * launch, held samples wait up to hold_ns: keep what either can still ask for.
	 */
	uint64_t keep = 2 * g->o.hold_ns > g->o.join_ttl_ns ? 2 * g->o.hold_ns : g->o.join_ttl_ns;
	uint64_t lim = now > keep ? now - keep : 0;
	size_t k = 0;

	lim = min_u64(lim, gpu_join_oldest_launch(g, p->pid, false));
	for (size_t i = 0; i < p->nheld; i++)
		lim = min_u64(lim, p->held[i].ts);
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
	for (k = 0; k < p->nbusy && p->busy[k].end < lim; k++)
		;
	if (k) {
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
}

/* --- charging ----------------------------------------------------------------------------- */

static const char *copy_name(Profd__GpuCopyKind k)
{
	switch (k) {
	case PROFD__GPU_COPY_KIND__GPU_COPY_HTOD:
		return "[memcpy HtoD]";
	case PROFD__GPU_COPY_KIND__GPU_COPY_DTOH:
		return "[memcpy DtoH]";
	case PROFD__GPU_COPY_KIND__GPU_COPY_DTOD:
		return "[memcpy DtoD]";
	case PROFD__GPU_COPY_KIND__GPU_COPY_HTOH:
		return "[memcpy HtoH]";
	case PROFD__GPU_COPY_KIND__GPU_COPY_PTOP:
		return "[memcpy PtoP]";
	case PROFD__GPU_COPY_KIND__GPU_COPY_MEMSET:
		return "[memset]";
	default:
		return "[memcpy]";
	}
}

/*
 * Intern extra + base stack (+ nvtx at the root end) as one stack: extra is the leaf frame or
 * none. Returns the stack id or 0.
 */
static uint32_t build_stack(struct gpu *g, uint32_t leaf, uint32_t base, const uint32_t *nv,
			    size_t nnv)
{
	uint32_t buf[STACK_BUF], *f = buf;
	const uint32_t *bf = NULL;
	size_t bn = 0, n = 0;
	uint32_t id;

	if (base && !store__stack(g->store, base, &bf, &bn))
		return 0;
	if (bn + nnv + 1 > STACK_BUF) {
		f = malloc((bn + nnv + 1) * sizeof(*f));
		if (!f)
			return 0;
	}
	if (leaf)
		f[n++] = leaf;
	if (bn)
		memcpy(f + n, bf, bn * sizeof(*f));
	n += bn;
	if (nnv)
		memcpy(f + n, nv, nnv * sizeof(*f));
	n += nnv;
	id = store__intern_stack(g->store, f, n);
	if (f != buf)
		free(f);
	return id;
}

/*
 * Charge one record to its launch (stack > 0) or to the stand-in stack. tid is the launching
 * thread (0 for the stand-in).
 */
static void charge(struct gpu *g, uint32_t pid, uint32_t tid, uint32_t stack, uint64_t launch_ts,
		   const struct wait_rec *r)
{
	struct frame_key k = { .kind = FRAME_KIND_GPU };
	uint32_t nv[MAX_NVTX_DEPTH], leaf, standin;
	size_t nnv = 0;
	uint64_t dur = r->end - r->start;
	enum store_value c1, c2;
	uint64_t v1, v2;

	k.name = r->is_copy ? copy_name(r->kind) : r->leaf ? r->leaf->s : "[unknown kernel]";
	leaf = store__intern_frame(g->store, &k);
	if (!leaf)
		return;
	if (stack) {
		nnv = gpu_nvtx_frames(g, gpu_proc(g, pid), tid, launch_ts, nv);
		g->scratch_stack = build_stack(g, leaf, stack, nv, nnv);
	} else {
		k = (struct frame_key){ .kind = FRAME_KIND_UNKNOWN, .name = STANDIN_NAME };
		standin = store__intern_frame(g->store, &k);
		g->scratch_stack = standin ? build_stack(g, leaf, 0, &standin, 1) : 0;
		tid = 0;
	}
	if (!g->scratch_stack)
		return;
	if (r->is_copy) {
		c1 = STORE_VALUE_COPY_NS;
		c2 = STORE_VALUE_COPY_BYTES;
		v2 = sat_mul(r->bytes, r->weight);
	} else {
		c1 = STORE_VALUE_GPU_NS;
		c2 = STORE_VALUE_GPU_KERNELS;
		v2 = r->weight;
	}
	v1 = sat_mul(dur, r->weight);
	/* Each add may renumber stacks: scratch_stack follows. */
	if (v1)
		store__add(g->store, r->start, pid, tid, g->scratch_stack, c1, v1);
	if (v2 && g->scratch_stack)
		store__add(g->store, r->start, pid, tid, g->scratch_stack, c2, v2);
	g->scratch_stack = 0;
}

/* --- the join lists ----------------------------------------------------------------------- */

static void jl_append(struct jlist *l, struct join *j, int k)
{
	j->prev[k] = l->tail;
	j->next[k] = NULL;
	if (l->tail)
		l->tail->next[k] = j;
	else
		l->head = j;
	l->tail = j;
	j->on |= 1u << k;
}

static void jl_remove(struct jlist *l, struct join *j, int k)
{
	if (!(j->on & (1u << k)))
		return;
	if (j->prev[k])
		j->prev[k]->next[k] = j->next[k];
	else
		l->head = j->next[k];
	if (j->next[k])
		j->next[k]->prev[k] = j->prev[k];
	else
		l->tail = j->prev[k];
	j->prev[k] = j->next[k] = NULL;
	j->on &= ~(1u << k);
}

/* To the tail of list k (appended when not on it). */
static void jl_touch(struct jlist *l, struct join *j, int k)
{
	jl_remove(l, j, k);
	jl_append(l, j, k);
}

static struct pjoins *pj_of(const struct gpu *g, uint32_t pid)
{
	return ptrmap_get(&g->pjoins, pid);
}

static struct join *join_new(struct gpu *g, uint32_t pid, uint32_t corr, uint64_t deadline)
{
	struct pjoins *pj = pj_of(g, pid);
	bool new_pj = false;
	struct join *j;

	if (!pj) {
		if (gpu_charge(g, sizeof(*pj))) {
			errno = ENOSPC;
			return NULL;
		}
		pj = calloc(1, sizeof(*pj));
		if (!pj || ptrmap_put(&g->pjoins, pid, pj)) {
			free(pj);
			gpu_uncharge(g, sizeof(*pj));
			errno = ENOMEM;
			return NULL;
		}
		new_pj = true;
	}
	if (gpu_charge(g, sizeof(*j))) {
		errno = ENOSPC;
		goto fail;
	}
	j = calloc(1, sizeof(*j));
	if (!j || ptrmap_put(&g->joins, jkey(pid, corr), j)) {
		free(j);
		gpu_uncharge(g, sizeof(*j));
		errno = ENOMEM;
		goto fail;
	}
	j->pid = pid;
	j->corr = corr;
	j->deadline = deadline;
	jl_append(&g->jl, j, JL_EXPIRY);
	jl_append(&pj->l[JL_PID], j, JL_PID);
	return j;
fail:
	if (new_pj) {
		ptrmap_del(&g->pjoins, pid);
		free(pj);
		gpu_uncharge(g, sizeof(*pj));
	}
	return NULL;
}

static void wait_free(struct gpu *g, struct join *j)
{
	for (uint32_t i = 0; i < j->nwait; i++)
		gname_unref(g, j->wait[i].leaf);
	gpu_free_array(g, j->wait, j->wait_cap, sizeof(*j->wait));
	j->wait = NULL;
	j->nwait = j->wait_cap = 0;
}

static void join_del(struct gpu *g, struct join *j)
{
	struct pjoins *pj = pj_of(g, j->pid);

	ptrmap_del(&g->joins, jkey(j->pid, j->corr));
	jl_remove(&g->jl, j, JL_EXPIRY);
	if (pj) {
		for (int k = JL_PID; k < JL__COUNT; k++)
			jl_remove(&pj->l[k], j, k);
		pj->nwait -= j->nwait < pj->nwait ? j->nwait : pj->nwait;
		if (!pj->l[JL_PID].head) {
			ptrmap_del(&g->pjoins, j->pid);
			free(pj);
			gpu_uncharge(g, sizeof(*pj));
		}
	}
	wait_free(g, j);
	free(j);
	gpu_uncharge(g, sizeof(*j));
}

/* Settle an entry whose time is up: its waiting records go to the stand-in stack. */
static void join_expire(struct gpu *g, struct join *j)
{
	if (j->stack) {
		if (!j->nrecs)
			g->st.launches_expired++;
		g->npending--;
	}
	for (uint32_t i = 0; i < j->nwait; i++) {
		charge(g, j->pid, 0, 0, 0, &j->wait[i]);
		g->st.unmatched++;
		g->npending--;
	}
	join_del(g, j);
}

/* The launch's first record came: the launch no longer holds samples back. */
static void join_recorded(struct gpu *g, struct join *j)
{
	struct pjoins *pj;

	if (j->nrecs++)
		return;
	pj = pj_of(g, j->pid);
	if (pj)
		jl_remove(&pj->l[JL_UNREC], j, JL_UNREC);
}

int gpu_join_launch(struct gpu *g, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t stack,
		    uint32_t corr)
{
	struct join *j = ptrmap_get(&g->joins, jkey(pid, corr));
	/* Our own clock, or the probe's (the kernel's, trusted) when the tick is behind it. */
	uint64_t arrival = ts > g->now ? ts : g->now;
	struct pjoins *pj;
	uint32_t nwait;

	if (j && j->stack) {
		/* The id came round again: the old launch is settled. */
		if (!j->nrecs)
			g->st.launches_expired++;
		j->nrecs = 0;
	} else if (!j) {
		if (g->npending >= g->o.max_pending) {
			g->st.launches_expired++;
			return 0;
		}
		j = join_new(g, pid, corr, 0);
		if (!j) {
			if (errno != ENOSPC)
				return -ENOMEM;
			g->st.refused++;
			return 0;
		}
		g->npending++;
	} else {
		g->npending++;
	}
	pj = pj_of(g, pid);
	j->tid = tid;
	j->stack = stack;
	j->launch_ts = ts;
	/* From its arrival, and to the tail: the expiry order stays the deadline order. */
	j->deadline = arrival + g->o.join_ttl_ns;
	jl_touch(&g->jl, j, JL_EXPIRY);
	jl_touch(&pj->l[JL_LAUNCH], j, JL_LAUNCH);
	jl_touch(&pj->l[JL_UNREC], j, JL_UNREC);
	/* Records that came first. j->stack is read again each time: charging may renumber it. */
	nwait = j->nwait;
	for (uint32_t i = 0; i < nwait; i++) {
		charge(g, pid, j->tid, j->stack, j->launch_ts, &j->wait[i]);
		g->st.joined++;
		join_recorded(g, j);
		g->npending--;
	}
	wait_free(g, j);
	pj->nwait -= nwait < pj->nwait ? nwait : pj->nwait;
	return 0;
}

int gpu_join_record(struct gpu *g, uint32_t pid, struct wait_rec *r, uint32_t corr)
{
	struct join *j = corr ? ptrmap_get(&g->joins, jkey(pid, corr)) : NULL;
	struct pjoins *pj = pj_of(g, pid);
	size_t cap;
	int err;

	if (j && j->stack) {
		charge(g, pid, j->tid, j->stack, j->launch_ts, r);
		g->st.joined++;
		join_recorded(g, j);
		goto out;
	}
	if (!corr || g->npending >= g->o.max_pending || (j && j->nwait >= MAX_WAIT_PER_CORR))
		goto standin;
	if (pj && pj->nwait >= MAX_WAIT_PER_PROC) {
		g->st.refused++;
		goto standin;
	}
	if (!j) {
		/* From its arrival: the record's own times are the library's word. */
		j = join_new(g, pid, corr, g->now + g->o.join_ttl_ns);
		if (!j) {
			if (errno == ENOSPC)
				g->st.refused++;
			goto standin;
		}
		pj = pj_of(g, pid);
	}
	cap = j->wait_cap;
	err = gpu_grow(g, (void **)&j->wait, &cap, (size_t)j->nwait + 1, sizeof(*j->wait));
	if (err) {
		if (err == -ENOSPC)
			g->st.refused++;
		if (!j->nwait)
			join_del(g, j);
		goto standin;
	}
	j->wait_cap = (uint32_t)cap;
	j->wait[j->nwait++] = *r; /* takes the leaf's reference */
	r->leaf = NULL;
	pj->nwait++;
	g->npending++;
	return 0;
standin:
	charge(g, pid, 0, 0, 0, r);
	g->st.unmatched++;
out:
	gname_unref(g, r->leaf);
	r->leaf = NULL;
	return 0;
}

void gpu_join_expire(struct gpu *g, uint64_t now)
{
	/* In deadline order: the first one not due ends the walk. */
	while (g->jl.head && g->jl.head->deadline <= now)
		join_expire(g, g->jl.head);
}

void gpu_join_expire_pid(struct gpu *g, uint32_t pid)
{
	struct pjoins *pj;

	/* The list goes with its last join: look it up again each time. */
	while ((pj = pj_of(g, pid)) && pj->l[JL_PID].head)
		join_expire(g, pj->l[JL_PID].head);
}

uint64_t gpu_join_oldest_launch(const struct gpu *g, uint32_t pid, bool unrecorded)
{
	const struct pjoins *pj = pj_of(g, pid);
	const struct join *j;

	if (!pj)
		return UINT64_MAX;
	/* Launches come in time order (one ring buffer), so the first to arrive is the oldest. */
	j = pj->l[unrecorded ? JL_UNREC : JL_LAUNCH].head;
	return j ? j->launch_ts : UINT64_MAX;
}

void gpu_join_free_all(struct gpu *g)
{
	while (g->jl.head)
		join_del(g, g->jl.head);
	g->npending = 0;
}

void gpu_join_gc(struct gpu *g, enum store_gc_phase phase)
{
	for (struct join *j = g->jl.head; j; j = j->next[JL_EXPIRY]) {
		if (!j->stack)
			continue;
		if (phase == STORE_GC_MARK)
			store__gc_keep_stack(g->store, j->stack);
		else
			j->stack = store__gc_remap_stack(g->store, j->stack);
	}
}

/* --- held CPU samples --------------------------------------------------------------------- */

/* Label and store one sample. */
static int release_one(struct gpu *g, struct gpu_proc *p, const struct held *h)
{
	uint32_t nv[MAX_NVTX_DEPTH];
	size_t nnv = gpu_nvtx_frames(g, p, h->tid, h->ts, nv);
	bool idle = !gpu_busy_at(g, p, h->ts);
	int err;

	g->scratch_stack = nnv ? build_stack(g, 0, h->stack, nv, nnv) : h->stack;
	if (!g->scratch_stack)
		g->scratch_stack = h->stack;
	err = store__add(g->store, h->ts, p->pid, h->tid, g->scratch_stack, STORE_VALUE_CPU_SAMPLES,
			 1);
	if (!err && idle && g->scratch_stack)
		err = store__add(g->store, h->ts, p->pid, h->tid, g->scratch_stack,
				 STORE_VALUE_GPU_IDLE_SAMPLES, 1);
	g->scratch_stack = 0;
	return err;
}

int gpu_hold(struct gpu *g, struct gpu_proc *p, uint64_t ts, uint32_t tid, uint32_t stack)
{
	struct held h = { .ts = ts, .tid = tid, .stack = stack };
	int err;

	if (g->nheld >= g->o.max_pending || p->nheld >= MAX_HELD_PER_PROC) {
		g->st.refused++;
		return release_one(g, p, &h); /* with what is known now */
	}
	err = gpu_grow(g, (void **)&p->held, &p->held_cap, p->nheld + 1, sizeof(h));
	if (err) {
		if (err == -ENOSPC)
			g->st.refused++;
		return release_one(g, p, &h);
	}
	p->held[p->nheld++] = h;
	g->nheld++;
	return 0;
}

void gpu_release(struct gpu *g, struct gpu_proc *p, uint64_t now, bool all)
{
	/*
	 * A launch with no record yet is a kernel that may be running: samples after it wait for
	 * its record (or hold_ns), or they would count as GPU-idle while it runs.
	 */
	uint64_t unrec = all || !p->nheld ? UINT64_MAX : gpu_join_oldest_launch(g, p->pid, true);
	size_t k = 0, n = p->nheld;

	/*
	 * In place: entry i is read from the array each time (the GC callback renumbers it there
	 * while a store__add compacts); the stale copies between k and i are harmless to it.
	 */
	for (size_t i = 0; i < n; i++) {
		uint64_t ts = p->held[i].ts;
		bool due = all || (p->complete_until_ns >= ts && unrec > ts) ||
			   (now && now >= ts + g->o.hold_ns);

		if (!due) {
			p->held[k++] = p->held[i];
			continue;
		}
		release_one(g, p, &p->held[i]);
		g->nheld--;
	}
	p->nheld = k;
}
