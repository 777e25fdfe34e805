// SPDX-License-Identifier: BSD-2-Clause
/*
 * The aggregation store: time buckets of (column, pid, tid, stack, value) entries, adding,
 * eviction under the memory cap, and the store's life cycle. Interning lives in intern.c,
 * compaction in gc.c, process and thread metadata in meta.c, each uid's share in fair.c, queries
 * in query.c; store_priv.h describes the whole layout.
 */
#include "store_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CAP (256ull << 20)
#define DEFAULT_BUCKET_NS 1000000000ull
/* Buckets this close to the newest keep their hash table. */
#define OPEN_BUCKETS 2

/* --- buckets -------------------------------------------------------------------------------- */

static int bucket_build_tab(struct store *s, struct bucket *b, uint64_t want)
{
	uint32_t *tab, mask;

	if (store_idtab_alloc(&s->bytes, &tab, &mask, want))
		return -ENOMEM;
	for (uint32_t k = 0; k < b->n; k++) {
		const struct entry *e = &b->e[k];

		store_idtab_insert(tab, mask, store_entry_hash(e->pidcol, e->tidlife, e->stack),
				   k + 1);
	}
	store_mem_free(&s->bytes, b->tab, b->tab ? (b->mask + 1) * sizeof(uint32_t) : 0);
	b->tab = tab;
	b->mask = mask;
	return 0;
}

/* Free b's table and shrink its entries to fit; a sealed bucket that lost entries shrinks. */
static void bucket_seal(struct store *s, struct bucket *b)
{
	if (b->tab) {
		store_mem_free(&s->bytes, b->tab, (b->mask + 1) * sizeof(uint32_t));
		b->tab = NULL;
		b->mask = 0;
	}
	if (b->n && b->n < b->cap) {
		void *ne = store_mem_realloc(&s->bytes, b->e, b->cap * sizeof(struct entry),
					     b->n * sizeof(struct entry));

		if (ne) {
			b->e = ne;
			b->cap = b->n;
		}
	}
}

static void bucket_release(struct store *s, struct bucket *b)
{
	store_mem_free(&s->bytes, b->tab, (b->mask + 1) * sizeof(uint32_t));
	store_mem_free(&s->bytes, b->e, b->cap * sizeof(struct entry));
}

uint32_t store_bucket_lower(const struct store *s, uint64_t want)
{
	uint32_t lo = 0, hi = s->nb;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (s->b[mid].idx < want)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void seal_old(struct store *s)
{
	if (s->reopened) {
		for (uint32_t k = 0; k + OPEN_BUCKETS < s->nb; k++)
			bucket_seal(s, &s->b[k]);
		s->reopened = false;
	} else if (s->nb > OPEN_BUCKETS) {
		bucket_seal(s, &s->b[s->nb - OPEN_BUCKETS - 1]);
	}
}

/* Returns the bucket for idx, creating it in order; NULL on -ENOMEM. */
static struct bucket *bucket_for(struct store *s, uint64_t idx)
{
	struct bucket *b;
	uint32_t pos;

	if (s->nb && s->b[s->nb - 1].idx == idx)
		return &s->b[s->nb - 1];
	pos = (s->nb && idx > s->b[s->nb - 1].idx) ? s->nb : store_bucket_lower(s, idx);
	if (pos < s->nb && s->b[pos].idx == idx)
		return &s->b[pos];
	if (store_mem_grow(&s->bytes, (void **)&s->b, &s->bcap, (size_t)s->nb + 1, 64, sizeof(*b),
			   UINT32_MAX))
		return NULL;
	memmove(&s->b[pos + 1], &s->b[pos], (s->nb - pos) * sizeof(*b));
	b = &s->b[pos];
	memset(b, 0, sizeof(*b));
	b->idx = idx;
	s->nb++;
	if (idx + 1 > s->max_idx_plus1)
		s->max_idx_plus1 = idx + 1;
	if (pos == s->nb - 1) {
		/* Size like the previous bucket: spares the doublings and rehashes of each one. */
		uint32_t prev = pos ? s->b[pos - 1].n : 0;
		uint64_t hint = prev + (uint64_t)prev / 4;

		if (prev > 8 && hint < UINT32_MAX) {
			b->e = store_mem_alloc(&s->bytes, hint * sizeof(struct entry));
			if (b->e)
				b->cap = (uint32_t)hint;
			if (b->e && store_idtab_alloc(&s->bytes, &b->tab, &b->mask, hint))
				b->tab = NULL;
		}
		seal_old(s);
	} else {
		s->reopened = true; /* buckets before pos moved away from the newest */
	}
	return b;
}

/*
 * Returns the entry for the key in b (new ones zeroed, *created set), NULL on -ENOMEM. pidcol is
 * the entry's pid word (pid and column), tidlife its tid word (tid and life).
 */
static struct entry *bucket_entry(struct store *s, struct bucket *b, uint32_t pidcol,
				  uint32_t tidlife, uint32_t stack, uint32_t uid, bool *created)
{
	uint32_t h = store_entry_hash(pidcol, tidlife, stack), i, k;
	struct entry *e;

	if (!b->tab) {
		if (bucket_build_tab(s, b, (uint64_t)b->n + 1))
			return NULL;
		if (b->n)
			s->reopened = true;
	}
	for (i = h & b->mask; (k = b->tab[i]); i = (i + 1) & b->mask) {
		e = &b->e[k - 1];
		if (e->stack == stack && e->tidlife == tidlife && e->pidcol == pidcol &&
		    e->uid == uid)
			return e;
	}
	if (store_mem_grow(&s->bytes, (void **)&b->e, &b->cap, (size_t)b->n + 1, 8, sizeof(*e),
			   UINT32_MAX - 1))
		return NULL;
	if (((uint64_t)b->n + 1) * 4 > ((uint64_t)b->mask + 1) * 3) {
		if (bucket_build_tab(s, b, 2 * ((uint64_t)b->mask + 1)))
			return NULL;
		for (i = h & b->mask; b->tab[i]; i = (i + 1) & b->mask)
			;
	}
	e = &b->e[b->n];
	memset(e, 0, sizeof(*e));
	e->pidcol = pidcol;
	e->tidlife = tidlife;
	e->stack = stack;
	e->uid = uid;
	b->tab[i] = ++b->n;
	*created = true;
	return e;
}

/* --- the export journal ---------------------------------------------------------------------- */

/* Sum value into the journal; a stack it names holds a reference there until the drain. */
static void journal_add(struct store *s, uint32_t pid, uint32_t tid, uint32_t stack,
			enum store_value col, uint64_t value)
{
	bool created = false;
	struct entry *e;

	e = bucket_entry(s, &s->journal, entry_pidcol(pid, col), tid, stack, 0, &created);
	if (!e) {
		s->journal_lost = sat_add(s->journal_lost, 1);
		return;
	}
	e->v = sat_add(e->v, value);
	if (created)
		intern_stack_ref(&s->in, stack);
}

static void journal_clear(struct store *s)
{
	for (uint32_t k = 0; k < s->journal.n; k++)
		intern_stack_unref(&s->in, s->journal.e[k].stack);
	bucket_release(s, &s->journal);
	memset(&s->journal, 0, sizeof(s->journal));
}

void store__journal_enable(struct store *s, bool on)
{
	if (!s)
		return;
	if (!on)
		journal_clear(s);
	s->journal_on = on;
}

int store__journal_each(const struct store *s, store_journal_cb cb, void *ctx)
{
	int err = 0;

	if (!s)
		return -EINVAL;
	for (uint32_t k = 0; k < s->journal.n && !err; k++) {
		const struct entry *e = &s->journal.e[k];

		err = cb(entry_pid(e), entry_tid(e), e->stack, entry_col(e), e->v, ctx);
	}
	return err;
}

int store__journal_drain(struct store *s, store_journal_cb cb, void *ctx, uint64_t *lost)
{
	int err = 0;

	if (!s)
		return -EINVAL;
	for (uint32_t k = 0; k < s->journal.n && !err; k++) {
		const struct entry *e = &s->journal.e[k];

		err = cb(entry_pid(e), entry_tid(e), e->stack, entry_col(e), e->v, ctx);
	}
	if (lost)
		*lost = s->journal_lost;
	s->journal_lost = 0;
	journal_clear(s);
	return err;
}

/* --- eviction and adding -------------------------------------------------------------------- */

static void evict_oldest(struct store *s)
{
	struct bucket *b = &s->b[0];

	for (uint32_t k = 0; k < b->n; k++) {
		if (entry_col(&b->e[k]) == STORE_VALUE_CPU_SAMPLES)
			s->evicted_samples += b->e[k].v;
		intern_stack_unref(&s->in, b->e[k].stack);
		store_fair_remove(s, b->e[k].uid);
	}
	if (!s->has_evicted || b->idx > s->evicted_upto)
		s->evicted_upto = b->idx;
	s->has_evicted = true;
	bucket_release(s, b);
	s->nb--;
	memmove(&s->b[0], &s->b[1], s->nb * sizeof(*b));
	s->evicted_buckets++;
}

/*
 * Evict uid's entries from the oldest bucket holding any (fair.c chose it); the bucket stays for
 * the others' entries, sealed so that its memory shrinks to them. Returns false when no bucket
 * holds any (the counts drifted after an allocation failure): the caller evicts the oldest.
 */
static bool evict_uid_oldest(struct store *s, uint32_t uid)
{
	for (uint32_t pos = 0; pos < s->nb; pos++) {
		struct bucket *b = &s->b[pos];
		uint32_t k = 0;

		for (uint32_t j = 0; j < b->n; j++) {
			const struct entry *e = &b->e[j];

			if (e->uid != uid) {
				b->e[k++] = *e;
				continue;
			}
			if (entry_col(e) == STORE_VALUE_CPU_SAMPLES)
				s->evicted_samples += e->v;
			intern_stack_unref(&s->in, e->stack);
			store_fair_remove(s, uid);
			s->evicted_over_share++;
		}
		if (k == b->n)
			continue;
		b->n = k;
		if (!k) {
			bucket_release(s, b);
			s->nb--;
			memmove(&s->b[pos], &s->b[pos + 1], (s->nb - pos) * sizeof(*b));
		} else {
			/* Its table indexed entries that moved: a later add rebuilds it. */
			bucket_seal(s, b);
		}
		return true;
	}
	return false;
}

/*
 * Whether add must evict. Dead interned data does not count when the next compaction on the
 * tick would reclaim it and bring the store back under the cap, and when it is a real share of
 * the cap (that also bounds the compaction's cost: each run frees at least cap/8 for O(cap)
 * work): evicting live buckets for it would lose data for nothing.
 */
static bool over_cap(const struct store *s)
{
	uint64_t r = store_reclaimable(s);

	if (s->bytes <= s->cap)
		return false;
	return r < s->cap / 8 || s->bytes - r > s->cap;
}

void store_enforce_cap(struct store *s)
{
	bool evicted = false;

	/* Eviction kills stacks, which raises what the next compaction reclaims. */
	while (s->nb && over_cap(s)) {
		uint32_t uid;

		if (!store_fair_victim(s, &uid) || !evict_uid_oldest(s, uid))
			evict_oldest(s);
		evicted = true;
	}
	/* With no bucket left, only a compaction brings the rest back (store__compact_due). */
	if (evicted)
		store_meta_sweep(s);
}

int store__add(struct store *s, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack,
	       enum store_value col, uint64_t value)
{
	uint64_t idx;
	struct bucket *b;
	struct entry *e;
	bool created = false;
	uint32_t uid, life;

	if (!s || (unsigned int)col >= STORE_VALUE__COUNT || !stack || stack > s->in.nstacks ||
	    pid >= STORE_PID_LIMIT || tid >= STORE_PID_LIMIT)
		return -EINVAL;
	/*
	 * Which process held the pid at this moment and who owned it, kept with the data: when
	 * the pid is reused, old samples stay the old process's and its owner's. No owner known:
	 * nobody's but root's.
	 */
	uid = store_meta_owner(s, pid, &life);
	idx = ts_ns / s->bucket_ns;
	if (s->journal_on)
		journal_add(s, pid, tid, stack, col, value);
	if (col == STORE_VALUE_CPU_SAMPLES)
		s->samples += value;
	if (s->has_evicted && idx <= s->evicted_upto) {
		/* Its bucket is gone: late data is evicted data. */
		if (col == STORE_VALUE_CPU_SAMPLES)
			s->evicted_samples += value;
		return 0;
	}
	b = bucket_for(s, idx);
	if (!b)
		goto nomem;
	e = bucket_entry(s, b, entry_pidcol(pid, col), entry_tidlife(tid, life), stack, uid,
			 &created);
	if (!e) {
		if (!b->n) {
			/* Do not leave an empty bucket behind. */
			uint32_t pos = (uint32_t)(b - s->b);

			bucket_release(s, b);
			s->nb--;
			memmove(&s->b[pos], &s->b[pos + 1], (s->nb - pos) * sizeof(*b));
		}
		goto nomem;
	}
	e->v = sat_add(e->v, value);
	if (ts_ns > s->newest_ns)
		s->newest_ns = ts_ns;
	if (created) {
		intern_stack_ref(&s->in, stack);
		store_meta_note(s, pid, life, tid, idx);
		/* Out of memory, the entry goes uncounted: the counts only steer eviction. */
		(void)store_fair_add(s, uid);
	}
	if (s->bytes > s->cap)
		store_enforce_cap(s);
	return 0;
nomem:
	if (col == STORE_VALUE_CPU_SAMPLES)
		s->samples -= value;
	return -ENOMEM;
}

/* --- interning: intern.c's, on the store's own data ------------------------------------------- */

uint32_t store__intern_frame(struct store *s, const struct frame_key *key)
{
	if (!s) {
		errno = EINVAL;
		return 0;
	}
	return intern_frame(&s->in, key);
}

uint32_t store__intern_stack(struct store *s, const uint32_t *frames, size_t n)
{
	if (!s) {
		errno = EINVAL;
		return 0;
	}
	return intern_stack(&s->in, frames, n);
}

const struct store_frame *store__frame(const struct store *s, uint32_t frame_id)
{
	return s ? intern_frame_get(&s->in, frame_id) : NULL;
}

bool store__stack(const struct store *s, uint32_t stack_id, const uint32_t **frames, size_t *n)
{
	return s && intern_stack_get(&s->in, stack_id, frames, n);
}

/* --- renumbering ---------------------------------------------------------------------------- */

/* Entries name stacks by id; an open bucket hashes on it. */
static void bucket_remap(struct bucket *b, const uint32_t *smap)
{
	for (uint32_t j = 0; j < b->n; j++)
		b->e[j].stack = smap[b->e[j].stack];
	if (!b->tab)
		return;
	memset(b->tab, 0, ((size_t)b->mask + 1) * sizeof(uint32_t));
	for (uint32_t j = 0; j < b->n; j++)
		store_idtab_insert(b->tab, b->mask,
				   store_entry_hash(b->e[j].pidcol, b->e[j].tidlife, b->e[j].stack),
				   j + 1);
}

void store_buckets_remap(struct store *s, const uint32_t *smap)
{
	for (uint32_t k = 0; k < s->nb; k++)
		bucket_remap(&s->b[k], smap);
	bucket_remap(&s->journal, smap);
}

/* --- life cycle ----------------------------------------------------------------------------- */

void store_value_type(enum store_value col, const char **type, const char **unit)
{
	static const char *const names[STORE_VALUE__COUNT][2] = {
	    [STORE_VALUE_CPU_SAMPLES] = {"samples", "count"},
	    [STORE_VALUE_GPU_IDLE_SAMPLES] = {"gpu_idle_samples", "count"},
	    [STORE_VALUE_GPU_NS] = {"gpu_time", "nanoseconds"},
	    [STORE_VALUE_GPU_KERNELS] = {"gpu_kernels", "count"},
	    [STORE_VALUE_COPY_NS] = {"copy_time", "nanoseconds"},
	    [STORE_VALUE_COPY_BYTES] = {"copy_bytes", "bytes"},
	    [STORE_VALUE_UPROBE_LAUNCHES] = {"uprobe_launches", "count"},
	    [STORE_VALUE_OFFCPU_NS] = {"off_cpu", "nanoseconds"},
	    [STORE_VALUE_GPU_IDLE_OFFCPU_NS] = {"gpu_idle_off_cpu", "nanoseconds"},
	    [STORE_VALUE_GPU_MEM_BYTES] = {"gpu_memory", "bytes"},
	    [STORE_VALUE_GPU_MEM_LIVE] = {"gpu_memory_live", "bytes"},
	};

	if ((unsigned int)col >= STORE_VALUE__COUNT) {
		/* Not a column: empty names rather than NULLs a caller might print. */
		*type = "";
		*unit = "";
		return;
	}
	*type = names[col][0];
	*unit = names[col][1];
}

struct store *store__new(const struct store_opts *opts)
{
	struct store *s = calloc(1, sizeof(*s));

	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->bytes = store_mem_cost(sizeof(*s));
	s->cap = opts && opts->mem_cap ? opts->mem_cap : DEFAULT_CAP;
	s->bucket_ns = opts && opts->bucket_ns ? opts->bucket_ns : DEFAULT_BUCKET_NS;
	if (intern_init(&s->in, &s->bytes) || store_meta_init(s)) {
		store__free(s);
		errno = ENOMEM;
		return NULL;
	}
	return s;
}

void store__free(struct store *s)
{
	if (!s)
		return;
	for (uint32_t k = 0; k < s->nb; k++)
		bucket_release(s, &s->b[k]);
	bucket_release(s, &s->journal);
	free(s->b);
	store_fair_free(s);
	intern_fini(&s->in);
	store_meta_free(s);
	free(s);
}

void store__stats(const struct store *s, struct store_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!s)
		return;
	out->samples = s->samples;
	out->evicted_samples = s->evicted_samples;
	out->evicted_buckets = s->evicted_buckets;
	out->bytes = s->bytes;
	out->cap = s->cap;
	out->frames = s->in.nframes;
	out->stacks = s->in.nstacks;
	out->processes = s->lives;
	out->threads = s->threads.n;
	out->buckets = s->nb;
	out->oldest_ns = s->nb ? s->b[0].idx * s->bucket_ns : 0;
	out->newest_ns = s->nb ? s->newest_ns : 0;
	out->generation = s->generation;
	out->compactions = s->compactions;
	out->interned_bytes = intern_bytes(&s->in);
	out->evicted_over_share = s->evicted_over_share;
}

uint64_t store__generation(const struct store *s)
{
	return s ? s->generation : 0;
}

uint64_t store__bucket_ns(const struct store *s)
{
	return s ? s->bucket_ns : DEFAULT_BUCKET_NS;
}

int store__add_span(struct store *s, uint64_t start, uint64_t end, uint32_t pid, uint32_t tid,
		    uint32_t stack, enum store_value col,
		    uint64_t (*part)(void *ctx, uint64_t a, uint64_t b), void *ctx)
{
	uint64_t bw = store__bucket_ns(s), t = start;
	int err = 0;

	/* The oldest part goes first. */
	for (int i = 0; t < end && !err; i++) {
		uint64_t next = bw ? (t / bw + 1) * bw : end, v;

		if (next >= end || i == 4095)
			next = end;
		v = part ? part(ctx, t, next) : next - t;
		if (v)
			err = store__add(s, t, pid, tid, stack, col, v);
		t = next;
	}
	return err;
}
