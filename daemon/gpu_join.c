// SPDX-License-Identifier: BSD-2-Clause
/*
 * The join of launch stacks and GPU records by (pid, correlation id), what a joined record is
 * charged to, and the labels of CPU samples: the NVTX ranges of their thread and whether the
 * process's GPU was idle. Both sides of the join may come first: the launch through the BPF ring
 * buffer (drained every 100 ms), the records in the library's batches (seconds late). A launch
 * stays until its TTL, not until its first record, because a graph launch has many kernels.
 */
#include "gpu_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define STANDIN_NAME "[launch stack unknown]"
/* NVTX frames added to one stack, innermost dropped first beyond this. */
#define MAX_NVTX_DEPTH 32
/* Ranges kept per process: the older half goes when full. */
#define MAX_NVTX_CLOSED 16384
#define MAX_NVTX_OPEN 1024
#define MAX_BUSY 65536
/* Records of one correlation id waiting for their launch (graphs have many). */
#define MAX_WAIT_PER_CORR 4096
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

/* --- NVTX --------------------------------------------------------------------------------- */

static bool range_active(const struct nvtx_range *r, uint32_t tid, uint64_t ts)
{
	return r->tid == tid && r->start <= ts && (ts < r->end || (r->open && ts <= r->end));
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

/*
 * The NVTX frames of (pid, tid) at ts, innermost first (so appended to a leaf-first stack they
 * put the outermost range at the root end). Returns how many were written to ids.
 */
static size_t nvtx_frames(struct gpu *g, uint32_t pid, uint32_t tid, uint64_t ts, uint32_t *ids)
{
	const struct nvtx_range *act[MAX_NVTX_DEPTH];
	struct gpu_proc *p = gpu_proc(g, pid);
	size_t n = 0, out = 0;

	if (!p || !tid)
		return 0;
	for (size_t i = 0; i < p->nopen; i++)
		if (range_active(&p->open[i], tid, ts) && n < MAX_NVTX_DEPTH)
			act[n++] = &p->open[i];
	for (size_t i = p->nnvtx; i-- > 0;)
		if (range_active(&p->nvtx[i], tid, ts) && n < MAX_NVTX_DEPTH)
			act[n++] = &p->nvtx[i];
	if (n > 1)
		if (n) /* qsort(NULL, 0) is undefined */
			qsort(act, n, sizeof(act[0]), range_cmp);
	for (size_t i = 0; i < n; i++) {
		struct frame_key k = {.kind = FRAME_KIND_NVTX, .name = act[i]->name};
		uint32_t id = store__intern_frame(g->store, &k);

		if (id)
			ids[out++] = id;
	}
	return out;
}

static void nvtx_drop_front(struct nvtx_range *a, size_t *n, size_t k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k; i++)
		free(a[i].name);
	memmove(a, a + k, (*n - k) * sizeof(*a));
	*n -= k;
}

static int nvtx_push(struct nvtx_range **a, size_t *n, size_t *cap, size_t max,
		     const struct nvtx_range *r)
{
	if (*n == max)
		nvtx_drop_front(*a, n, max / 2);
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct nvtx_range *na = realloc(*a, ncap * sizeof(*na));

		if (!na)
			return -ENOMEM;
		*a = na;
		*cap = ncap;
	}
	(*a)[(*n)++] = *r;
	return 0;
}

void gpu_nvtx_add(struct gpu *g, struct gpu_proc *p, const Profd__GpuNvtxRange *m, const char *name)
{
	struct nvtx_range r = {
	    .start = m->start_ns,
	    .end = m->end_ns,
	    .tid = m->tid,
	    .depth = m->has_depth ? m->depth : 0,
	    .open = m->has_open && m->open,
	};
	int err;

	/* A later version of a range that was open replaces it. */
	for (size_t i = 0; i < p->nopen; i++) {
		struct nvtx_range *o = &p->open[i];

		if (o->tid == r.tid && o->start == r.start && o->depth == r.depth) {
			free(o->name);
			*o = p->open[--p->nopen];
			break;
		}
	}
	r.name = strdup(name);
	if (!r.name)
		return;
	if (r.open)
		err = nvtx_push(&p->open, &p->nopen, &p->open_cap, MAX_NVTX_OPEN, &r);
	else
		err = nvtx_push(&p->nvtx, &p->nnvtx, &p->nvtx_cap, MAX_NVTX_CLOSED, &r);
	if (err)
		free(r.name);
}

void gpu_proc_free_labels(struct gpu_proc *p)
{
	nvtx_drop_front(p->nvtx, &p->nnvtx, p->nnvtx);
	nvtx_drop_front(p->open, &p->nopen, p->nopen);
	free(p->nvtx);
	free(p->open);
	free(p->busy);
	p->nvtx = p->open = NULL;
	p->busy = NULL;
	p->nvtx_cap = p->open_cap = p->nbusy = p->busy_cap = 0;
}

/* --- GPU busy intervals ------------------------------------------------------------------- */

/* Index of the first interval starting after ts. */
static size_t busy_upper(const struct gpu_proc *p, uint64_t ts)
{
	size_t lo = 0, hi = p->nbusy;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->busy[mid].start <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void gpu_busy_add(struct gpu_proc *p, uint64_t start, uint64_t end)
{
	size_t i, j;

	if (end <= start)
		return;
	i = busy_upper(p, start);
	if (i > 0 && p->busy[i - 1].end >= start) {
		/* Overlaps or touches the previous one: extend it, then swallow what follows. */
		i--;
		if (end > p->busy[i].end)
			p->busy[i].end = end;
	} else {
		if (p->nbusy == MAX_BUSY) {
			memmove(p->busy, p->busy + MAX_BUSY / 2, (MAX_BUSY / 2) * sizeof(*p->busy));
			p->nbusy -= MAX_BUSY / 2;
			i = i > MAX_BUSY / 2 ? i - MAX_BUSY / 2 : 0;
		}
		if (p->nbusy == p->busy_cap) {
			size_t ncap = p->busy_cap ? p->busy_cap * 2 : 64;
			struct busy *nb = realloc(p->busy, ncap * sizeof(*nb));

			if (!nb)
				return;
			p->busy = nb;
			p->busy_cap = ncap;
		}
		if (p->nbusy > i)
			memmove(p->busy + i + 1, p->busy + i, (p->nbusy - i) * sizeof(*p->busy));
		p->busy[i] = (struct busy){start, end};
		p->nbusy++;
	}
	for (j = i + 1; j < p->nbusy && p->busy[j].start <= p->busy[i].end; j++)
		if (p->busy[j].end > p->busy[i].end)
			p->busy[i].end = p->busy[j].end;
	if (j > i + 1) {
		memmove(p->busy + i + 1, p->busy + j, (p->nbusy - j) * sizeof(*p->busy));
		p->nbusy -= j - i - 1;
	}
}

static bool busy_at(const struct gpu_proc *p, uint64_t ts)
{
	size_t i = busy_upper(p, ts);

	return i > 0 && ts < p->busy[i - 1].end;
}

void gpu_prune(struct gpu *g, struct gpu_proc *p, uint64_t now)
{
	uint64_t lim = now > 2 * g->o.hold_ns ? now - 2 * g->o.hold_ns : 0;
	size_t k = 0;

	for (size_t i = 0; i < p->nheld; i++)
		if (p->held[i].ts < lim)
			lim = p->held[i].ts;
	if (!lim)
		return;
	for (size_t i = 0; i < p->nnvtx; i++) {
		if (p->nvtx[i].end < lim)
			free(p->nvtx[i].name);
		else
			p->nvtx[k++] = p->nvtx[i];
	}
	p->nnvtx = k;
	for (k = 0; k < p->nbusy && p->busy[k].end < lim; k++)
		;
	if (k) {
		memmove(p->busy, p->busy + k, (p->nbusy - k) * sizeof(*p->busy));
		p->nbusy -= k;
	}
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
	struct frame_key k = {.kind = FRAME_KIND_GPU};
	uint32_t nv[MAX_NVTX_DEPTH], leaf, standin;
	size_t nnv = 0;
	uint64_t dur = r->end - r->start;
	enum store_value c1, c2;
	uint64_t v1, v2;

	k.name = r->is_copy ? copy_name(r->kind) : r->leaf;
	leaf = store__intern_frame(g->store, &k);
	if (!leaf)
		return;
	if (stack) {
		nnv = nvtx_frames(g, pid, tid, launch_ts, nv);
		g->scratch_stack = build_stack(g, leaf, stack, nv, nnv);
	} else {
		k = (struct frame_key){.kind = FRAME_KIND_UNKNOWN, .name = STANDIN_NAME};
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

/* --- the join table ----------------------------------------------------------------------- */

static struct join *join_new(struct gpu *g, uint32_t pid, uint32_t corr, uint64_t deadline)
{
	struct join *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->pid = pid;
	j->corr = corr;
	j->deadline = deadline;
	if (ptrmap_put(&g->joins, jkey(pid, corr), j)) {
		free(j);
		return NULL;
	}
	j->prev = g->jtail;
	if (g->jtail)
		g->jtail->next = j;
	else
		g->jhead = j;
	g->jtail = j;
	return j;
}

static void join_del(struct gpu *g, struct join *j)
{
	ptrmap_del(&g->joins, jkey(j->pid, j->corr));
	if (j->prev)
		j->prev->next = j->next;
	else
		g->jhead = j->next;
	if (j->next)
		j->next->prev = j->prev;
	else
		g->jtail = j->prev;
	for (uint32_t i = 0; i < j->nwait; i++)
		free(j->wait[i].leaf);
	free(j->wait);
	free(j);
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

int gpu_join_launch(struct gpu *g, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t stack,
		    uint32_t corr)
{
	struct join *j = ptrmap_get(&g->joins, jkey(pid, corr));

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
		j = join_new(g, pid, corr, ts + g->o.join_ttl_ns);
		if (!j)
			return -ENOMEM;
		g->npending++;
	} else {
		g->npending++;
	}
	j->tid = tid;
	j->stack = stack;
	j->launch_ts = ts;
	j->deadline = ts + g->o.join_ttl_ns;
	/* Records that came first. j->stack is read again each time: charging may renumber it. */
	for (uint32_t i = 0; i < j->nwait; i++) {
		charge(g, pid, j->tid, j->stack, j->launch_ts, &j->wait[i]);
		free(j->wait[i].leaf);
		g->st.joined++;
		j->nrecs++;
		g->npending--;
	}
	free(j->wait);
	j->wait = NULL;
	j->nwait = j->wait_cap = 0;
	return 0;
}

int gpu_join_record(struct gpu *g, uint32_t pid, struct wait_rec *r, uint32_t corr)
{
	struct join *j = corr ? ptrmap_get(&g->joins, jkey(pid, corr)) : NULL;

	if (j && j->stack) {
		charge(g, pid, j->tid, j->stack, j->launch_ts, r);
		g->st.joined++;
		j->nrecs++;
		goto out;
	}
	if (!corr || g->npending >= g->o.max_pending || (j && j->nwait >= MAX_WAIT_PER_CORR))
		goto standin;
	if (!j) {
		j = join_new(g, pid, corr, r->end + g->o.join_ttl_ns);
		if (!j)
			goto standin;
	}
	if (j->nwait == j->wait_cap) {
		uint32_t ncap = j->wait_cap ? j->wait_cap * 2 : 4;
		struct wait_rec *nw = realloc(j->wait, ncap * sizeof(*nw));

		if (!nw) {
			if (!j->nwait)
				join_del(g, j);
			goto standin;
		}
		j->wait = nw;
		j->wait_cap = ncap;
	}
	j->wait[j->nwait++] = *r;
	g->npending++;
	return 0;
standin:
	charge(g, pid, 0, 0, 0, r);
	g->st.unmatched++;
out:
	free(r->leaf);
	r->leaf = NULL;
	return 0;
}

void gpu_join_expire(struct gpu *g, uint64_t now, uint32_t only_pid)
{
	struct join *j = g->jhead, *next;

	while (j) {
		next = j->next;
		if (only_pid) {
			if (j->pid == only_pid)
				join_expire(g, j);
		} else if (j->deadline <= now) {
			join_expire(g, j);
		} else {
			/* Roughly in deadline order: the rest waits for a later tick. */
			break;
		}
		j = next;
	}
}

void gpu_join_free_all(struct gpu *g)
{
	while (g->jhead)
		join_del(g, g->jhead);
	g->npending = 0;
}

void gpu_join_gc(struct gpu *g, enum store_gc_phase phase)
{
	for (struct join *j = g->jhead; j; j = j->next) {
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
	size_t nnv = nvtx_frames(g, p->pid, h->tid, h->ts, nv);
	bool idle = !busy_at(p, h->ts);
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
	struct held h = {.ts = ts, .tid = tid, .stack = stack};

	if (g->nheld >= g->o.max_pending)
		return release_one(g, p, &h); /* with what is known now */
	if (p->nheld == p->held_cap) {
		size_t ncap = p->held_cap ? p->held_cap * 2 : 256;
		struct held *nh = realloc(p->held, ncap * sizeof(*nh));

		if (!nh)
			return release_one(g, p, &h);
		p->held = nh;
		p->held_cap = ncap;
	}
	p->held[p->nheld++] = h;
	g->nheld++;
	return 0;
}

void gpu_release(struct gpu *g, struct gpu_proc *p, uint64_t now, bool all)
{
	size_t k = 0, n = p->nheld;

	/*
	 * In place: entry i is read from the array each time (the GC callback renumbers it there
	 * while a store__add compacts); the stale copies between k and i are harmless to it.
	 */
	for (size_t i = 0; i < n; i++) {
		uint64_t ts = p->held[i].ts;
		bool due = all || p->complete_until_ns >= ts || (now && now >= ts + g->o.hold_ns);

		if (!due) {
			p->held[k++] = p->held[i];
			continue;
		}
		release_one(g, p, &p->held[i]);
		g->nheld--;
	}
	p->nheld = k;
}
