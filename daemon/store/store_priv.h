/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The aggregation store's private half, shared only by its own files:
 *   store.c   buckets, adding, eviction, life cycle
 *   query.c   queries: a time range summed per (process life, thread, stack)
 *   intern.c  interned strings, frames and stacks, their reference counts, compaction
 *             (struct intern, intern.h: its own data, charged to the store's byte counter)
 *   gc.c      compaction as plan, keep, commit, run from the daemon's tick
 *   meta.c    process and thread metadata
 *   fair.c    each uid's share of the entries, which steers eviction
 *   store_mem.h  the charged allocator and id tables
 *
 * Values: an array of buckets in time order, each an array of (column, pid, life, tid, stack,
 * value) entries (life: which process of the pid, meta.c) plus a hash table over them while the
 * bucket may still receive many samples. An entry holds one column's value, so CPU-only data pays
 * for one value, not for every column; a query merges the columns of a (pid, tid, stack) back into
 * one row. Buckets more than two behind the newest are sealed: the table is freed and the entries
 * shrunk to fit, because a late sample for them is rare and rebuilding the table then is cheap.
 *
 * Each bucket entry holds a reference on its stack (intern.h): eviction drops them, and what
 * nothing references any more is dead, reclaimed by the next compaction. Compaction never runs
 * inside store__add, so a stack id never moves between two adds: the daemon's periodic tick asks
 * store__compact_due, plans, lets holders of ids outside the buckets (the GPU module) keep theirs,
 * commits (renumbering the buckets' entries), and the holders map their ids. What only holders
 * keep stays counted as dead afterwards; `dead_floor` remembers that amount so it does not make
 * compaction look due again and again.
 *
 * The cap: store__add evicts the oldest buckets while the store is over its cap, but dead interned
 * data the next compaction will reclaim does not count when it is a real share of the cap (see
 * over_cap in store.c): that compaction is at most a tick away, and evicting live buckets for it
 * would lose data for nothing. So between ticks the store may be over its cap by at most what the
 * next compaction reclaims; a commit evicts whatever the estimate promised and did not free.
 *
 * Fairness between users (fair.c): each uid with entries in the buckets is entitled to an equal
 * share of them. When the cap makes the store evict and one uid holds more than its share by a
 * margin, that uid's oldest entries go first, so one user's flood costs that user's history, not
 * everyone's; otherwise the oldest bucket goes.
 *
 * Memory: every allocation is charged to `bytes` (store_mem.h), so it follows the heap.
 */
#ifndef PROFD_STORE_PRIV_H
#define PROFD_STORE_PRIV_H

#include "hash.h"
#include "intern.h"
#include "ptrmap.h"
#include "satmath.h"
#include "store.h"
#include "store_mem.h"

#include <errno.h>
#include <stdlib.h>

/*
 * Pids and tids stay below 2^22 on Linux (PID_MAX_LIMIT in include/linux/threads.h: 4M on 64-bit),
 * so an entry keeps its column in the top bits of the pid word and stays 24 bytes; the store
 * refuses larger ids.
 */
#define STORE_PID_BITS 22
#define STORE_PID_LIMIT (1u << STORE_PID_BITS)
_Static_assert(STORE_VALUE__COUNT <= (1u << (32 - STORE_PID_BITS)), "column does not fit");

struct entry {
	uint32_t pidcol;  /* pid | column << STORE_PID_BITS: the column is part of the key */
	uint32_t tidlife; /* tid | life << STORE_PID_BITS: the pid's life is part of the key */
	uint32_t stack;
	uint32_t uid; /* the process's uid when the entry was made: a reused pid keeps apart */
	uint64_t v;
};
_Static_assert(sizeof(struct entry) == 24, "an entry is the unit of the store's memory");
_Static_assert(STORE_LIFE_MAX < (1u << (32 - STORE_PID_BITS)), "life does not fit");

static inline uint32_t entry_tidlife(uint32_t tid, uint32_t life)
{
	return tid | life << STORE_PID_BITS;
}

static inline uint32_t entry_tid(const struct entry *e)
{
	return e->tidlife & (STORE_PID_LIMIT - 1);
}

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
	uint64_t dead_floor; /* in.dead_bytes the last compaction left (kept by holders) */
	bool gc_planned;     /* a store_gc is out: no other until it is committed or freed */

	struct intern in;

	struct bucket *b;
	uint32_t nb;
	uint32_t bcap;
	bool reopened; /* a sealed bucket got its table back */
	bool has_evicted;
	uint64_t evicted_upto;	/* highest evicted bucket idx, when has_evicted */
	uint64_t max_idx_plus1; /* newest bucket idx ever created + 1 */
	uint64_t newest_ns;

	struct ptrmap uids; /* uid -> struct store_uid (fair.c): owners of bucket entries */
	uint64_t nentries;  /* entries in the buckets (not the journal) */
	uint64_t evicted_over_share; /* entries evicted from a uid over its share */

	struct ptrmap procs;   /* pid -> struct proc of its newest life (meta.c) */
	struct ptrmap threads; /* pid << 32 | life << STORE_PID_BITS | tid -> struct thread */
	uint64_t lives;	       /* process records kept, every life of every pid */

	/* The export journal (store__journal_*): values since the last drain, when enabled. */
	struct bucket journal;
	bool journal_on;
	uint64_t journal_lost; /* values that found no memory in the journal */

	uint64_t samples;
	uint64_t evicted_samples;
	uint64_t evicted_buckets;
	uint64_t generation;
	uint64_t compactions;
};

/* Dead interned bytes the next compaction would reclaim: what holders keep does not count. */
static inline uint64_t store_reclaimable(const struct store *s)
{
	return s->in.dead_bytes > s->dead_floor ? s->in.dead_bytes - s->dead_floor : 0;
}

/* --- hashing ------------------------------------------------------------------------------- */

/* pid is an entry's pid word (with its column) or a plain pid; both hash alike. */
static inline uint32_t store_entry_hash(uint32_t pid, uint32_t tid, uint32_t stack)
{
	return (uint32_t)hash_mix64(((uint64_t)pid << 32 | tid) ^
				    ((uint64_t)stack * 0x9e3779b97f4a7c15ull));
}

/* --- store.c -------------------------------------------------------------------------- */

/*
 * Evict the oldest buckets while the store is over its cap, dead data the next compaction
 * reclaims aside; sweeps the metadata they took with them. Never renumbers.
 */
void store_enforce_cap(struct store *s);
/* Rename every entry's stack through smap (old id -> new id, all of them kept) and rehash the
 * open buckets. */
void store_buckets_remap(struct store *s, const uint32_t *smap);
/* Index of the first bucket with idx >= want (nb when none). */
uint32_t store_bucket_lower(const struct store *s, uint64_t want);

/* --- fair.c --------------------------------------------------------------------------- */

/* An entry of uid was made in a bucket / left one. Returns 0 or -ENOMEM. */
int store_fair_add(struct store *s, uint32_t uid);
void store_fair_remove(struct store *s, uint32_t uid);
/*
 * The uid whose entries eviction takes first: the one holding the most, when that is over its
 * share (see fair.c). Returns false when none is over: the oldest bucket goes.
 */
bool store_fair_victim(const struct store *s, uint32_t *uid);
void store_fair_free(struct store *s);

/* --- meta.c --------------------------------------------------------------------------- */

/* Allocate the empty process and thread maps. Returns 0 or -ENOMEM (store__free cleans). */
int store_meta_init(struct store *s);
/* Free every process and thread record and both maps; safe on a half-initialised store. */
void store_meta_free(struct store *s);
/* A new entry for (pid, life, tid) went into bucket idx: keep their metadata at least that long. */
void store_meta_note(struct store *s, uint32_t pid, uint32_t life, uint32_t tid, uint64_t idx);
/* The owner of pid's newest life (STORE_UID_UNKNOWN: none) and that life (0: none) in *life. */
uint32_t store_meta_owner(const struct store *s, uint32_t pid, uint32_t *life);
/* Drop metadata no remaining bucket refers to (exited processes; any thread). */
void store_meta_sweep(struct store *s);

#endif
