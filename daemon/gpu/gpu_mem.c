// SPDX-License-Identifier: BSD-2-Clause
/*
 * GPU memory by stack: the allocations of each process, by address, from their allocation
 * record until their release record (or the process's end), with the stack the join gave
 * them. What is live at a moment is what a dump's gpu_memory_live column shows for a window
 * ending then; released allocations are kept a while (a bounded history, per process) so a
 * window that ended in the past sees what was live then.
 *
 * A release is matched by address and device to the allocation live at that address; one that
 * matches nothing (the allocation was made before the library collected, or was not tracked)
 * is counted and changes nothing, so no value ever goes below zero.
 *
 * Kept per pid apart from the library's connection: a process's allocations end when it
 * does, and that end is history a window may still cover.
 */
#include "gpu_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Allocations one process may have live, and released ones kept for past windows. */
#define MAX_LIVE_PER_PROC 65536
#define MAX_FREED_PER_PROC 65536

/* One allocation. stack 0: not joined yet (the join charges it within its TTL). */
struct gpu_alloc {
	uint64_t addr;
	uint64_t bytes;
	uint64_t ts;	  /* allocated */
	uint64_t free_ts; /* released; 0 while live */
	uint32_t device;
	uint32_t tid;
	uint32_t stack;
};

/* One process's allocations. */
struct gpu_mem {
	uint32_t uid;
	struct ptrmap live; /* address -> struct gpu_alloc */
	uint64_t live_bytes;
	uint64_t untracked;
	/* Released allocations, oldest first, in a ring of freed_cap. */
	struct gpu_alloc *freed;
	size_t freed_cap, freed_head, nfreed;
	bool ended; /* the process ended: nothing is live, the history ages out */
};

static struct gpu_mem *mem_of(const struct gpu *g, uint32_t pid)
{
	return ptrmap_get(&g->mem, pid);
}

static struct gpu_mem *mem_get(struct gpu *g, uint32_t pid, uint32_t uid)
{
	struct gpu_mem *m = mem_of(g, pid);

	if (m) {
		/*
		 * A new process of a reused pid: the old one's history goes, so it is never
		 * shown as the new one's (whose owner may be another user).
		 */
		if (m->ended) {
			m->ended = false;
			m->uid = uid;
			m->nfreed = m->freed_head = 0;
			m->untracked = 0;
		}
		return m;
	}
	if (gpu_charge(g, sizeof(*m)))
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m || ptrmap_put(&g->mem, pid, m)) {
		free(m);
		gpu_uncharge(g, sizeof(*m));
		return NULL;
	}
	m->uid = uid;
	return m;
}

static struct gpu_alloc *freed_at(const struct gpu_mem *m, size_t i)
{
	return &m->freed[(m->freed_head + i) % m->freed_cap];
}

/* Move a live allocation into the history, released at ts. */
static void retire(struct gpu *g, struct gpu_mem *m, struct gpu_alloc *a, uint64_t ts)
{
	size_t cap = m->freed_cap;

	m->live_bytes -= a->bytes < m->live_bytes ? a->bytes : m->live_bytes;
	a->free_ts = ts > a->ts ? ts : a->ts;
	if (m->nfreed == m->freed_cap && m->freed_cap < MAX_FREED_PER_PROC) {
		/* Grow the ring, unrolled so it starts at 0 again. */
		struct gpu_alloc *old = m->freed;
		size_t n = m->nfreed, oldcap = m->freed_cap;

		m->freed = NULL;
		cap = 0;
		if (!gpu_grow(g, (void **)&m->freed, &cap, n + 1, sizeof(*old))) {
			for (size_t i = 0; i < n; i++)
				m->freed[i] = old[(m->freed_head + i) % oldcap];
			gpu_free_array(g, old, oldcap, sizeof(*old));
			m->freed_cap = cap;
			m->freed_head = 0;
		} else {
			m->freed = old;
		}
	}
	if (!m->freed_cap) {
		m->untracked++;
	} else {
		if (m->nfreed == m->freed_cap) {
			/* Full: the oldest release is forgotten. */
			m->freed_head = (m->freed_head + 1) % m->freed_cap;
			m->nfreed--;
			m->untracked++;
		}
		*freed_at(m, m->nfreed++) = *a;
	}
	free(a);
	gpu_uncharge(g, sizeof(*a));
}

int gpu_mem_alloc(struct gpu *g, uint32_t pid, uint32_t uid, uint32_t device, uint64_t addr,
		  uint64_t bytes, uint64_t ts)
{
	struct gpu_mem *m = mem_get(g, pid, uid);
	struct gpu_alloc *a, *old;

	g->st.mem_records++;
	if (!m) {
		g->st.refused++;
		return 0;
	}
	old = ptrmap_get(&m->live, addr);
	if (old) {
		/* Its release was lost: the address is in use again, so it ended by now. */
		ptrmap_del(&m->live, addr);
		retire(g, m, old, ts);
	}
	if (m->live.n >= MAX_LIVE_PER_PROC || gpu_charge(g, sizeof(*a))) {
		m->untracked++;
		return 0;
	}
	a = calloc(1, sizeof(*a));
	if (!a || ptrmap_put(&m->live, addr, a)) {
		free(a);
		gpu_uncharge(g, sizeof(*a));
		return -ENOMEM;
	}
	*a = (struct gpu_alloc){.addr = addr, .bytes = bytes, .ts = ts, .device = device};
	m->live_bytes += bytes;
	return 0;
}

void gpu_mem_release(struct gpu *g, uint32_t pid, uint32_t device, uint64_t addr, uint64_t ts)
{
	struct gpu_mem *m = mem_of(g, pid);
	struct gpu_alloc *a = m ? ptrmap_get(&m->live, addr) : NULL;

	g->st.mem_records++;
	/* Another device's address, or a release older than the allocation: not this one. */
	if (!a || a->device != device || ts < a->ts) {
		g->st.mem_unmatched++;
		return;
	}
	ptrmap_del(&m->live, addr);
	retire(g, m, a, ts);
}

void gpu_mem_joined(struct gpu *g, uint32_t pid, uint64_t addr, uint64_t ts, uint32_t tid,
		    uint32_t stack)
{
	struct gpu_mem *m = mem_of(g, pid);
	struct gpu_alloc *a = m ? ptrmap_get(&m->live, addr) : NULL;

	if (a && a->ts == ts) {
		a->tid = tid;
		a->stack = stack;
		return;
	}
	/* Released before its launch stack came: newest first, it is near the end. */
	for (size_t i = m ? m->nfreed : 0; i-- > 0;) {
		a = freed_at(m, i);
		if (a->addr == addr && a->ts == ts && !a->stack) {
			a->tid = tid;
			a->stack = stack;
			return;
		}
	}
}

void gpu_mem_end(struct gpu *g, uint32_t pid, uint64_t ts)
{
	struct gpu_mem *m = mem_of(g, pid);

	if (!m)
		return;
	for (size_t i = 0; m->live.mask && i <= m->live.mask; i++) {
		struct gpu_alloc *a = m->live.vals[i];

		if (!a)
			continue;
		ptrmap_del_slot(&m->live, i);
		i--; /* the slot may hold a moved entry now */
		retire(g, m, a, ts);
	}
	m->ended = true;
}

static void mem_free(struct gpu *g, struct gpu_mem *m)
{
	for (size_t i = 0; m->live.mask && i <= m->live.mask; i++) {
		if (m->live.vals[i]) {
			free(m->live.vals[i]);
			gpu_uncharge(g, sizeof(struct gpu_alloc));
		}
	}
	ptrmap_fini(&m->live);
	gpu_free_array(g, m->freed, m->freed_cap, sizeof(*m->freed));
	free(m);
	gpu_uncharge(g, sizeof(*m));
}

void gpu_mem_prune(struct gpu *g, uint64_t before)
{
	for (size_t i = 0; g->mem.mask && i <= g->mem.mask; i++) {
		struct gpu_mem *m = g->mem.vals[i];

		if (!m)
			continue;
		while (m->nfreed && freed_at(m, 0)->free_ts < before) {
			m->freed_head = (m->freed_head + 1) % m->freed_cap;
			m->nfreed--;
		}
		if (m->ended && !m->nfreed && !m->live.n) {
			ptrmap_del_slot(&g->mem, i);
			i--;
			mem_free(g, m);
		}
	}
}

void gpu_mem_free_all(struct gpu *g)
{
	for (size_t i = 0; g->mem.mask && i <= g->mem.mask; i++)
		if (g->mem.vals[i])
			mem_free(g, g->mem.vals[i]);
	ptrmap_fini(&g->mem);
}

static void gc_one(struct gpu_alloc *a, struct store_gc *mark, const struct store_gc *remap)
{
	if (!a->stack)
		return;
	if (mark)
		store_gc__keep(mark, a->stack);
	else
		a->stack = store_gc__map(remap, a->stack);
}

void gpu_mem_gc(struct gpu *g, struct store_gc *mark, const struct store_gc *remap)
{
	for (size_t i = 0; g->mem.mask && i <= g->mem.mask; i++) {
		struct gpu_mem *m = g->mem.vals[i];

		if (!m)
			continue;
		for (size_t j = 0; m->live.mask && j <= m->live.mask; j++)
			if (m->live.vals[j])
				gc_one(m->live.vals[j], mark, remap);
		for (size_t j = 0; j < m->nfreed; j++)
			gc_one(freed_at(m, j), mark, remap);
	}
}

void gpu_mem_status(const struct gpu *g, uint32_t pid, struct gpu_proc_status *s)
{
	const struct gpu_mem *m = mem_of(g, pid);

	if (!m)
		return;
	s->memory_live = m->live.n;
	s->memory_live_bytes = m->live_bytes;
	s->memory_untracked = m->untracked;
}

int gpu__live_each(const struct gpu *g, uint64_t at_ns, gpu_live_cb cb, void *ctx)
{
	int err;

	for (size_t i = 0; g && g->mem.mask && i <= g->mem.mask; i++) {
		const struct gpu_mem *m = g->mem.vals[i];
		uint32_t pid = (uint32_t)g->mem.keys[i];

		if (!m)
			continue;
		/* Not joined yet (stack 0): its stack is not known, it is left out until it is. */
		for (size_t j = 0; m->live.mask && j <= m->live.mask; j++) {
			const struct gpu_alloc *a = m->live.vals[j];

			if (a && a->stack && a->ts < at_ns) {
				err = cb(pid, m->uid, a->tid, a->stack, a->bytes, ctx);
				if (err)
					return err;
			}
		}
		for (size_t j = 0; j < m->nfreed; j++) {
			const struct gpu_alloc *a = freed_at(m, j);

			if (a->stack && a->ts < at_ns && a->free_ts >= at_ns) {
				err = cb(pid, m->uid, a->tid, a->stack, a->bytes, ctx);
				if (err)
					return err;
			}
		}
	}
	return 0;
}
