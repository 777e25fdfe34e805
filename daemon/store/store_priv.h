/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The aggregation store's private half, shared only by its own files:
 *   store.c         buckets, adding, eviction, queries, life cycle
 *   intern.c  interned strings, frames and stacks, their reference counts, compaction
 *   meta.c    process and thread metadata
 *
 * Interned data: strings (one allocation each, found through an open-addressing table of
 * pointers), frames and stacks (dense arrays indexed by id - 1, found through open-addressing
 * tables of ids). Stack frame ids live in one pool, appended in stack id order. Their record
 * types are private to intern.c.
 *
 * Values: an array of buckets in time order, each an array of (column, pid, tid, stack, value)
 * entries plus a hash table over them while the bucket may still receive many samples. An entry
 * holds one column's value, so CPU-only data pays for one value, not for every column; a query
 * merges the columns of a (pid, tid, stack) back into one row. Buckets more than two behind the
 * newest are sealed: the table is freed and the entries shrunk to fit, because a late sample for
 * them is rare and rebuilding the table then is cheap.
 *
 * Reference counts say what is still needed: a stack counts the bucket entries naming it, a
 * frame the referenced stacks holding it, a string the referenced frames naming it. What drops
 * to zero is "dead": its approximate size is summed so that compaction runs when reclaiming pays.
 * A GC holder (the GPU module) keeps stack ids outside the buckets: compaction asks it which to
 * keep, holds a reference on each for its duration, and tells it the new ids. What only the
 * holder keeps stays counted as dead afterwards; `dead_floor` remembers that amount so it does
 * not trigger compaction again and again.
 *
 * Memory: every allocation goes through store_mem_alloc/_realloc/_free which charge an estimate
 * of what malloc really hands out (header and 16-byte rounding), so `bytes` follows the heap.
 */
#ifndef PROFD_STORE_PRIV_H
#define PROFD_STORE_PRIV_H

#include "hash.h"
#include "ptrmap.h"
#include "satmath.h"
#include "store.h"

#include <errno.h>
#include <stdlib.h>

struct str;
struct frame_rec;
struct stack_rec;

/*
 * Pids and tids stay below 2^22 on Linux (PID_MAX_LIMIT in include/linux/threads.h: 4M on 64-bit),
 * so an entry keeps its column in the top bits of the pid word and stays 24 bytes; the store
 * refuses larger ids.
 */
#define STORE_PID_BITS 22
#define STORE_PID_LIMIT (1u << STORE_PID_BITS)
_Static_assert(STORE_VALUE__COUNT <= (1u << (32 - STORE_PID_BITS)), "column does not fit");

struct entry {
	uint32_t pidcol; /* pid | column << STORE_PID_BITS: the column is part of the key */
	uint32_t tid;
	uint32_t stack;
	uint32_t uid; /* the process's uid when the entry was made: a reused pid keeps apart */
	uint64_t v;
};
_Static_assert(sizeof(struct entry) == 24, "an entry is the unit of the store's memory");

static inline uint32_t entry_pidcol(uint32_t pid, enum store_value col)
{
	return pid | (uint32_t)col << STORE_PID_BITS;
}

static inline uint32_t entry_pid(const struct entry *e)
{
	return e->pidcol & (STORE_PID_LIMIT - 1);
}

static inline enum store_value entry_col(const struct entry *e)
{
	return (enum store_value)(e->pidcol >> STORE_PID_BITS);
}

struct bucket {
	uint64_t idx; /* start_ns / bucket_ns */
	struct entry *e;
	uint32_t n;
	uint32_t cap;
	uint32_t *tab; /* entry index + 1, 0 empty; NULL when sealed */
	uint32_t mask;
};

struct store {
	size_t cap;
	uint64_t bucket_ns;
	uint64_t bytes;
	uint64_t dead_bytes; /* estimate of what compaction would reclaim */
	uint64_t dead_floor; /* dead_bytes the last compaction left (held by the GC holder) */

	struct str **strtab; /* NULL: empty */
	uint32_t strmask;
	uint32_t nstr;
	uint64_t str_bytes;

	struct frame_rec *frames;
	uint32_t nframes;
	uint32_t frames_cap;
	uint32_t *frametab;
	uint32_t framemask;

	struct stack_rec *stacks;
	uint32_t nstacks;
	uint32_t stacks_cap;
	uint32_t *stacktab;
	uint32_t stackmask;
	uint32_t *pool;
	uint32_t pool_n;
	uint32_t pool_cap;

	struct bucket *b;
	uint32_t nb;
	uint32_t bcap;
	bool reopened; /* a sealed bucket got its table back */
	bool has_evicted;
	uint64_t evicted_upto;	/* highest evicted bucket idx, when has_evicted */
	uint64_t max_idx_plus1; /* newest bucket idx ever created + 1 */
	uint64_t newest_ns;

	struct ptrmap procs;   /* pid -> struct proc */
	struct ptrmap threads; /* pid << 32 | tid -> struct thread */

	uint64_t samples;
	uint64_t evicted_samples;
	uint64_t evicted_buckets;
	uint64_t generation;
	uint64_t compactions;

	/* The GC holder, and the state of the compaction that calls it. */
	store_gc_fn gc_cb;
	void *gc_ctx;
	bool gc_marking;	 /* in the STORE_GC_MARK call */
	bool gc_remapping;	 /* in the STORE_GC_REMAP call */
	uint64_t *gc_keep;	 /* MARK: bit per stack id the holder keeps */
	uint32_t gc_nold;	 /* stack ids before the compaction */
	const uint32_t *gc_smap; /* REMAP: old id -> new id (0 dropped); NULL: ids unchanged */
};

/* --- memory accounting ---------------------------------------------------------------------- */

/* What malloc uses for a request of n bytes: an 8-byte header, 16-byte granules, pages when
 * large enough to be mapped on its own. */
static inline uint64_t store_mem_cost(size_t n)
{
	if (!n)
		return 0;
	if (n >= 128 * 1024)
		return (n + 4096 + 4095) & ~(uint64_t)4095;
	n += 8;
	if (n < 32)
		n = 32;
	return (n + 15) & ~(uint64_t)15;
}

/* malloc / calloc / realloc / free charged to s->bytes; NULL on failure, charging nothing. */
static inline void *store_mem_alloc(struct store *s, size_t n)
{
	void *p = malloc(n);

	if (p)
		s->bytes += store_mem_cost(n);
	return p;
}

static inline void *store_mem_zalloc(struct store *s, size_t n)
{
	void *p = calloc(1, n);

	if (p)
		s->bytes += store_mem_cost(n);
	return p;
}

static inline void *store_mem_realloc(struct store *s, void *p, size_t old, size_t n)
{
	void *q = realloc(p, n);

	if (q || !n) {
		s->bytes -= store_mem_cost(old);
		s->bytes += store_mem_cost(n);
	}
	return q;
}

/* n is the size p was allocated with; p may be NULL. */
static inline void store_mem_free(struct store *s, void *p, size_t n)
{
	if (!p)
		return;
	s->bytes -= store_mem_cost(n);
	free(p);
}

/* --- hashing and id tables ------------------------------------------------------------------ */

/* pid is an entry's pid word (with its column) or a plain pid; both hash alike. */
static inline uint32_t store_entry_hash(uint32_t pid, uint32_t tid, uint32_t stack)
{
	return (uint32_t)hash_mix64(((uint64_t)pid << 32 | tid) ^
				    ((uint64_t)stack * 0x9e3779b97f4a7c15ull));
}

/*
 * An id table: open addressing over uint32 ids (0 empty), kept at most 3/4 full by its users.
 * Allocates one with room for n ids into *tab and *mask; returns 0 or -ENOMEM.
 */
static inline int store_idtab_alloc(struct store *s, uint32_t **tab, uint32_t *mask, uint32_t n)
{
	uint32_t nslots = 16;

	while (nslots * 3 < n * 4 + 4)
		nslots *= 2;
	*tab = store_mem_zalloc(s, nslots * sizeof(uint32_t));
	if (!*tab)
		return -ENOMEM;
	*mask = nslots - 1;
	return 0;
}

/* Put id in the first free slot from h on; the table must have one. */
static inline void store_idtab_insert(uint32_t *tab, uint32_t mask, uint32_t h, uint32_t id)
{
	uint32_t i;

	for (i = h & mask; tab[i]; i = (i + 1) & mask)
		;
	tab[i] = id;
}

/* --- intern.c ------------------------------------------------------------------------- */

/* Allocate the empty string, frame and stack tables. Returns 0 or -ENOMEM (store__free cleans). */
int store_intern_init(struct store *s);
/* Free every interned object and table; safe on a half-initialised store. */
void store_intern_free(struct store *s);
/* Length of p cut to at most max bytes, on a UTF-8 boundary. */
size_t store_clip_len(const char *p, size_t max);
/* A bucket entry starts / stops naming stack id: counts propagate to frames and strings. */
void store_stack_ref(struct store *s, uint32_t id);
void store_stack_unref(struct store *s, uint32_t id);
/* Bytes held by frames, stacks and strings (part of s->bytes). */
uint64_t store_interned_bytes(const struct store *s);

/* --- meta.c --------------------------------------------------------------------------- */

/* Allocate the empty process and thread maps. Returns 0 or -ENOMEM (store__free cleans). */
int store_meta_init(struct store *s);
/* Free every process and thread record and both maps; safe on a half-initialised store. */
void store_meta_free(struct store *s);
/* A new entry for (pid, tid) went into bucket idx: keep their metadata at least that long. */
void store_meta_note(struct store *s, uint32_t pid, uint32_t tid, uint64_t idx);
/* Drop metadata no remaining bucket refers to (exited processes; any thread). */
void store_meta_sweep(struct store *s);

#endif
