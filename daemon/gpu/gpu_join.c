// SPDX-License-Identifier: BSD-2-Clause
/*
 * The join of launch stacks and GPU records by (pid, correlation id), what a joined record is
 * charged to, and the CPU samples held for their labels (gpu_labels.c). Both sides of the join
 * may come first: the launch through the BPF ring buffer (drained every 100 ms), the records in
 * the library's batches (seconds late). A launch stays until its TTL, not until its first
 * record, because a graph launch has many kernels.
 *
 * Everything here is bounded per process and by the module's memory budget, and no message
 * costs work in proportion to what is kept: the join's deadlines run in arrival order, and each
 * pid has its own lists.
 */
#include "gpu_priv.h"
#include "satmath.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define STANDIN_NAME "[launch stack unknown]"
/* Records of one correlation id waiting for their launch (graphs have many). */
#define MAX_WAIT_PER_CORR 4096
/*
 * Records of one process waiting for their launch: more go to the stand-in stack at once (and
 * of one user, fewer: gpu_rate.c).
 */
#define MAX_WAIT_PER_PROC 16384
/* CPU samples of one process held for their labels: more are stored at once. */
#define MAX_HELD_PER_PROC 65536
/* Stacks up to this many frames are built on the stack; longer ones in heap memory. */
#define STACK_BUF 512

static uint64_t jkey(uint32_t pid, uint32_t corr)
{
	return (uint64_t)pid << 32 | corr;
}

/* --- charging ----------------------------------------------------------------------------- */

static const char *copy_name(enum gpu_copy_kind k)
{
	switch (k) {
	case GPU_COPY_HTOD:
		return "[memcpy HtoD]";
	case GPU_COPY_DTOH:
		return "[memcpy DtoH]";
	case GPU_COPY_DTOD:
		return "[memcpy DtoD]";
	case GPU_COPY_HTOH:
		return "[memcpy HtoH]";
	case GPU_COPY_PTOP:
		return "[memcpy PtoP]";
	case GPU_COPY_MEMSET:
		return "[memset]";
	default:
		return "[memcpy]";
	}
}

static const char *mem_name(enum gpu_mem_kind k)
{
	switch (k) {
	case GPU_MEM_MANAGED:
		return "[gpu memory managed]";
	case GPU_MEM_POOL:
		return "[gpu memory pool]";
	default:
		return "[gpu memory]";
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
	uint32_t nv[MAX_NVTX_DEPTH], leaf, standin, id;
	size_t nnv = 0;
	uint64_t dur = r->end - r->start;
	enum store_value c1, c2;
	uint64_t v1, v2;

	k.name = r->mem	      ? mem_name(r->mem)
		 : r->is_copy ? copy_name(r->kind)
		 : r->leaf    ? r->leaf->s
			      : "[unknown kernel]";
	leaf = store__intern_frame(g->store, &k);
	if (!leaf)
		return;
	if (stack) {
		nnv = gpu_nvtx_frames(g, gpu_proc(g, pid), tid, launch_ts, nv);
		id = build_stack(g, leaf, stack, nv, nnv);
	} else {
		k = (struct frame_key){.kind = FRAME_KIND_UNKNOWN, .name = STANDIN_NAME};
		standin = store__intern_frame(g->store, &k);
		id = standin ? build_stack(g, leaf, 0, &standin, 1) : 0;
		tid = 0;
	}
	if (!id)
		return;
	if (r->mem) {
		/* The allocation's bytes, and its stack for what is live at a window's end. */
		gpu_mem_joined(g, pid, r->address, r->start, tid, id);
		store__add(g->store, r->start, pid, tid, id, STORE_VALUE_GPU_MEM_BYTES, r->bytes);
		return;
	}
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
	/* Adding never renumbers (compaction runs on the daemon's tick): id stays valid. */
	if (v1)
		store__add(g->store, r->start, pid, tid, id, c1, v1);
	if (v2)
		store__add(g->store, r->start, pid, tid, id, c2, v2);
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
		if (pj) {
			struct gpu_proc *p = gpu_proc(g, pid);

			pj->uid = p ? p->uid : UINT32_MAX;
		}
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
		gpu_uid_waits(g, pj->uid, 0, j->nwait);
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
	gpu_uid_waits(g, pj->uid, 0, nwait);
	return 0;
}

int gpu_join_record(struct gpu *g, uint32_t pid, struct wait_rec *r, uint32_t corr)
{
	struct join *j = corr ? ptrmap_get(&g->joins, jkey(pid, corr)) : NULL;
	struct pjoins *pj = pj_of(g, pid);
	struct gpu_proc *p = gpu_proc(g, pid);
	uint32_t uid;
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
	uid = pj ? pj->uid : p ? p->uid : UINT32_MAX;
	if ((pj && pj->nwait >= MAX_WAIT_PER_PROC) || !gpu_uid_may_wait(g, uid)) {
		g->st.refused++;
		g->st.waits_refused++;
		if (p)
			p->waits_refused++;
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
	gpu_uid_waits(g, pj->uid, 1, 0);
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

void gpu_join_gc(struct gpu *g, struct store_gc *mark, const struct store_gc *remap)
{
	for (struct join *j = g->jl.head; j; j = j->next[JL_EXPIRY]) {
		if (!j->stack)
			continue;
		if (mark)
			store_gc__keep(mark, j->stack);
		else
			j->stack = store_gc__map(remap, j->stack);
	}
}

/* --- held CPU samples --------------------------------------------------------------------- */

struct idle_ctx {
	struct gpu *g;
	struct gpu_proc *p;
};

static uint64_t idle_part(void *ctx, uint64_t a, uint64_t b)
{
	struct idle_ctx *c = ctx;

	return gpu_idle_ns(c->g, c->p, a, b);
}

/*
 * Label and store one sample; or store the part of a wait the GPU was idle (the wait's off-CPU
 * time went to the store when it came).
 */
static int release_one(struct gpu *g, struct gpu_proc *p, const struct held *h)
{
	uint32_t nv[MAX_NVTX_DEPTH];
	size_t nnv;
	bool idle;
	uint32_t id;
	int err;

	if (h->end > h->ts) {
		struct idle_ctx c = {g, p};

		return store__add_span(g->store, h->ts, h->end, p->pid, h->tid, h->stack,
				       STORE_VALUE_GPU_IDLE_OFFCPU_NS, idle_part, &c);
	}
	nnv = gpu_nvtx_frames(g, p, h->tid, h->ts, nv);
	idle = !gpu_busy_at(g, p, h->ts);
	id = nnv ? build_stack(g, 0, h->stack, nv, nnv) : h->stack;
	if (!id)
		id = h->stack;
	err = store__add(g->store, h->ts, p->pid, h->tid, id, STORE_VALUE_CPU_SAMPLES, 1);
	if (!err && idle)
		err = store__add(g->store, h->ts, p->pid, h->tid, id, STORE_VALUE_GPU_IDLE_SAMPLES,
				 1);
	return err;
}

int gpu_hold(struct gpu *g, struct gpu_proc *p, uint64_t ts, uint64_t end, uint32_t tid,
	     uint32_t stack)
{
	struct held h = {.ts = ts, .end = end > ts ? end : ts, .tid = tid, .stack = stack};
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
	 * A launch with no record yet is a kernel that may be running: samples after it, and
	 * waits that end after it, wait for its record (or hold_ns), or they would count as
	 * GPU-idle while it runs.
	 */
	uint64_t unrec = all || !p->nheld ? UINT64_MAX : gpu_join_oldest_launch(g, p->pid, true);
	size_t k = 0, n = p->nheld;

	/*
	 * In place: entry i is read from the array each time (the GC callback renumbers it there
	 * while a store__add compacts); the stale copies between k and i are harmless to it.
	 */
	for (size_t i = 0; i < n; i++) {
		uint64_t ts = p->held[i].end;
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
