// SPDX-License-Identifier: BSD-2-Clause
/*
 * The aggregation store's queries: a time range of the buckets summed per (process life, thread,
 * stack), filtered by pid and owner, optionally merged across processes of one name (see
 * store_priv.h for the layout they read).
 */
#include "store_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* --- query ---------------------------------------------------------------------------------- */

/*
 * A row keeps the CPU column inline, like an entry, and the other columns in a side array only
 * when the key has any: CPU-only data, the common case, aggregates through 24-byte rows.
 */
struct agg_row {
	uint32_t pid;
	uint32_t tidlife; /* as an entry's: tid | life << STORE_PID_BITS */
	uint32_t stack;
	uint32_t more; /* index + 1 into agg.more; 0: only CPU samples so far */
	uint64_t cpu;
};

struct agg {
	struct agg_row *rows; /* in first-seen order: the output order */
	uint64_t *more;	      /* STORE_VALUE__COUNT - 1 values (columns 1..) per row that has any */
	uint32_t n;
	uint32_t cap;
	uint32_t nmore;
	uint32_t more_cap;
	uint32_t *tab;
	uint32_t mask;
};

static int agg_grow_tab(struct agg *a)
{
	uint32_t nslots, *tab;

	if (a->mask >= STORE_IDTAB_MAX_SLOTS - 1)
		return -ENOMEM;
	nslots = (a->mask + 1) * 2;
	tab = calloc(nslots, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	for (uint32_t k = 0; k < a->n; k++)
		store_idtab_insert(
		    tab, nslots - 1,
		    store_entry_hash(a->rows[k].pid, a->rows[k].tidlife, a->rows[k].stack), k + 1);
	free(a->tab);
	a->tab = tab;
	a->mask = nslots - 1;
	return 0;
}

#define AGG_MORE (STORE_VALUE__COUNT - 1)

/* Adds v to column col (not CPU samples) of row r, giving it side values first if needed. */
static int agg_add_more(struct agg *a, struct agg_row *r, enum store_value col, uint64_t v)
{
	if (!r->more) {
		/* Indexes are stored + 1 in a uint32: at most UINT32_MAX - 1 of them. */
		if (a->nmore == a->more_cap &&
		    (a->nmore == UINT32_MAX - 1 ||
		     grow_array32((void **)&a->more, &a->more_cap,
				  a->nmore < 256 ? 256 : (size_t)a->nmore + 1,
				  AGG_MORE * sizeof(uint64_t))))
			return -ENOMEM;
		memset(&a->more[(size_t)a->nmore * AGG_MORE], 0, AGG_MORE * sizeof(uint64_t));
		r->more = ++a->nmore;
	}
	a->more[(size_t)(r->more - 1) * AGG_MORE + col - 1] =
	    sat_add(a->more[(size_t)(r->more - 1) * AGG_MORE + col - 1], v);
	return 0;
}

/* Sums v into column col of the row of (pid, tidlife, stack): the columns of a key meet here. */
static int agg_add(struct agg *a, uint32_t pid, uint32_t tidlife, uint32_t stack,
		   enum store_value col, uint64_t v)
{
	uint32_t h = store_entry_hash(pid, tidlife, stack), i, k;
	struct agg_row *r;

	for (i = h & a->mask; (k = a->tab[i]); i = (i + 1) & a->mask) {
		r = &a->rows[k - 1];
		if (r->stack == stack && r->tidlife == tidlife && r->pid == pid) {
			if (col == STORE_VALUE_CPU_SAMPLES) {
				r->cpu = sat_add(r->cpu, v);
				return 0;
			}
			return agg_add_more(a, r, col, v);
		}
	}
	if (a->n == a->cap && (a->n == UINT32_MAX - 1 || GROW32(a->rows, a->cap, (size_t)a->n + 1)))
		return -ENOMEM;
	if (((uint64_t)a->n + 1) * 2 > (uint64_t)a->mask + 1) {
		if (agg_grow_tab(a))
			return -ENOMEM;
		for (i = h & a->mask; a->tab[i]; i = (i + 1) & a->mask)
			;
	}
	r = &a->rows[a->n];
	r->pid = pid;
	r->tidlife = tidlife;
	r->stack = stack;
	r->more = 0;
	r->cpu = 0;
	a->tab[i] = ++a->n;
	if (col == STORE_VALUE_CPU_SAMPLES) {
		r->cpu = v;
		return 0;
	}
	return agg_add_more(a, r, col, v);
}

/*
 * merge_processes: each process's stand-in, the first process met of its name. Processes go by
 * their pid word, pid | life << STORE_PID_BITS (one pid's lives may have different names):
 * word -> stand-in + 1 in by_pid; names in an open-addressing table of (hash, stand-in).
 */
struct groups {
	struct ptrmap by_pid;
	struct group_slot {
		uint64_t hash;
		const char *name; /* the store's, valid for the query */
		uint32_t pid;	  /* stand-in; slot used when name is set */
	} * tab;
	uint32_t mask, n;
	uint32_t last_pid, last_rep; /* entries of one process come in runs */
	bool have_last;
};

static const char *comm_of(const struct store *s, uint32_t pidlife)
{
	struct store_process_info pi;

	return store__process_life(s, pidlife & (STORE_PID_LIMIT - 1), pidlife >> STORE_PID_BITS,
				   &pi)
		   ? pi.comm
		   : "";
}

static int groups_grow(struct groups *g)
{
	uint32_t nslots = g->mask ? 2 * (g->mask + 1) : 64;
	struct group_slot *tab = calloc(nslots, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (uint32_t j = 0; g->mask && j <= g->mask; j++) {
		uint32_t i;

		if (!g->tab[j].name)
			continue;
		for (i = (uint32_t)g->tab[j].hash & (nslots - 1); tab[i].name;
		     i = (i + 1) & (nslots - 1))
			;
		tab[i] = g->tab[j];
	}
	free(g->tab);
	g->tab = tab;
	g->mask = nslots - 1;
	return 0;
}

/* The stand-in of the name of pid (a pid word) into *rep. Returns 0 or -ENOMEM. */
static int group_of(const struct store *s, struct groups *g, uint32_t pid, uint32_t *rep)
{
	const char *name;
	uint64_t h;
	uintptr_t v;
	uint32_t i;

	if (g->have_last && g->last_pid == pid) {
		*rep = g->last_rep;
		return 0;
	}
	v = (uintptr_t)ptrmap_get(&g->by_pid, pid);
	if (v) {
		*rep = (uint32_t)(v - 1);
	} else {
		name = comm_of(s, pid);
		h = hash_bytes(name, strlen(name));
		if ((g->n + 1) * 2 > g->mask + 1 && groups_grow(g))
			return -ENOMEM;
		for (i = (uint32_t)h & g->mask; g->tab[i].name; i = (i + 1) & g->mask)
			if (g->tab[i].hash == h && !strcmp(g->tab[i].name, name))
				break;
		if (!g->tab[i].name) {
			g->tab[i] = (struct group_slot){.hash = h, .name = name, .pid = pid};
			g->n++;
		}
		*rep = g->tab[i].pid;
		if (ptrmap_put(&g->by_pid, pid, (void *)(uintptr_t)(*rep + 1ull)))
			return -ENOMEM;
	}
	g->last_pid = pid;
	g->last_rep = *rep;
	g->have_last = true;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool pid_listed(const uint32_t *sorted, size_t n, uint32_t pid)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (sorted[mid] < pid)
			lo = mid + 1;
		else if (sorted[mid] > pid)
			hi = mid;
		else
			return true;
	}
	return false;
}

int store__query_lives(struct store *s, const struct store_query *q, store_life_cb cb, void *ctx)
{
	struct agg a = {0};
	struct groups g = {0};
	uint32_t *pids = NULL, first, last;
	uint64_t first_idx, nentries = 0;
	int err = 0;

	if (!s || !q || !cb || (q->npids && !q->pids))
		return -EINVAL;
	if (q->start_ns >= q->end_ns || !s->nb)
		return 0;
	/*
	 * Buckets overlapping [start, end): [idx * w, (idx + 1) * w) meets the range. A window
	 * shorter than a bucket still finds the bucket it falls in.
	 */
	first_idx = q->start_ns / s->bucket_ns;
	first = store_bucket_lower(s, first_idx);
	last = first;
	while (last < s->nb && s->b[last].idx <= (q->end_ns - 1) / s->bucket_ns) {
		nentries += s->b[last].n;
		last++;
	}
	if (first == last)
		return 0;
	if (q->npids) {
		pids = malloc(q->npids * sizeof(*pids));
		if (!pids)
			return -ENOMEM;
		memcpy(pids, q->pids, q->npids * sizeof(*pids));
		qsort(pids, q->npids, sizeof(*pids), cmp_u32);
	}
	a.cap = 1024;
	a.mask = 2047;
	while (a.mask + 1 < 2 * nentries && a.mask < (1u << 16) - 1)
		a.mask = a.mask * 2 + 1;
	a.rows = malloc(a.cap * sizeof(*a.rows));
	a.tab = calloc(a.mask + 1, sizeof(*a.tab));
	if (!a.rows || !a.tab) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t k = first; k < last; k++) {
		const struct bucket *b = &s->b[k];

		for (uint32_t j = 0; j < b->n; j++) {
			const struct entry *e = &b->e[j];

			if (q->tid && entry_tid(e) != q->tid)
				continue;
			if (pids && !pid_listed(pids, q->npids, entry_pid(e)))
				continue;
			if (q->filter_uid && e->uid != q->uid)
				continue;
			if (q->merge_processes) {
				uint32_t rep;

				err = group_of(s, &g,
					       entry_pid(e) | (e->tidlife & ~(STORE_PID_LIMIT - 1)),
					       &rep);
				if (!err)
					err = agg_add(&a, rep & (STORE_PID_LIMIT - 1),
						      rep & ~(STORE_PID_LIMIT - 1), e->stack,
						      entry_col(e), e->v);
			} else {
				err = agg_add(&a, entry_pid(e), e->tidlife, e->stack, entry_col(e),
					      e->v);
			}
			if (err)
				goto out;
		}
	}
	for (uint32_t k = 0; k < a.n; k++) {
		const struct agg_row *r = &a.rows[k];
		uint64_t v[STORE_VALUE__COUNT] = {r->cpu};

		if (r->more)
			memcpy(&v[1], &a.more[(size_t)(r->more - 1) * AGG_MORE],
			       AGG_MORE * sizeof(uint64_t));
		err = cb(r->pid, r->tidlife >> STORE_PID_BITS, r->tidlife & (STORE_PID_LIMIT - 1),
			 r->stack, v, ctx);
		if (err < 0)
			goto out;
	}
	err = 0;
out:
	free(a.rows);
	free(a.more);
	free(a.tab);
	free(g.tab);
	ptrmap_fini(&g.by_pid);
	free(pids);
	return err;
}

struct query_shim {
	store_query_cb cb;
	void *ctx;
};

static int query_shim(uint32_t pid, uint32_t life, uint32_t tid, uint32_t stack,
		      const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	const struct query_shim *sh = ctx;

	(void)life;
	return sh->cb(pid, tid, stack, values, sh->ctx);
}

int store__query(struct store *s, const struct store_query *q, store_query_cb cb, void *ctx)
{
	struct query_shim sh = {cb, ctx};

	if (!cb)
		return -EINVAL;
	return store__query_lives(s, q, query_shim, &sh);
}
