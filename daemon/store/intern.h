/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The store's interned data, private to the store's folder: strings (one allocation each, found
 * through an open-addressing table of pointers), frames and stacks (dense arrays indexed by
 * id - 1, found through open-addressing tables of ids). Stack frame ids live in one pool,
 * appended in stack id order. The record types are private to intern.c.
 *
 * Reference counts say what is still needed: a stack counts the references its users took (one
 * per bucket entry naming it, one per holder during a compaction), a frame the referenced stacks
 * holding it, a string the referenced frames naming it. What drops to zero is "dead": its
 * approximate size is summed in dead_bytes, which is what a compaction would reclaim.
 *
 * Compaction drops the dead and renumbers the rest densely, keeping their order. It only runs
 * when asked (intern_gc_*): interning and reference counting never move an id.
 *
 * Every allocation is charged to the counter `bytes` points to (the owning store's).
 */
#ifndef PROFD_STORE_INTERN_H
#define PROFD_STORE_INTERN_H

#include "store.h"
#include "store_mem.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct str;
struct frame_rec;
struct stack_rec;

struct intern {
	uint64_t *bytes;     /* the owner's byte counter, charged with every allocation */
	uint64_t dead_bytes; /* estimate of what a compaction would reclaim */

	struct str **strtab; /* NULL: not initialised */
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
};

/*
 * Allocate the empty string, frame and stack tables, charged to *bytes (which must outlive in).
 * Returns 0 or -ENOMEM (intern_fini cleans up).
 */
int intern_init(struct intern *in, uint64_t *bytes);
/* Free every interned object and table; safe on a half-initialised one. */
void intern_fini(struct intern *in);
/* Length of p cut to at most max bytes, on a UTF-8 boundary. */
size_t store_clip_len(const char *p, size_t max);

/* Intern a frame / a stack (frame ids, leaf first): see store__intern_frame/_stack. */
uint32_t intern_frame(struct intern *in, const struct frame_key *key);
uint32_t intern_stack(struct intern *in, const uint32_t *frames, size_t n);
/* Lookups: NULL / false for an unknown id. Memory stays owned by in. */
const struct store_frame *intern_frame_get(const struct intern *in, uint32_t id);
bool intern_stack_get(const struct intern *in, uint32_t id, const uint32_t **frames, size_t *n);

/* A user starts / stops naming stack id (valid): counts propagate to frames and strings. */
void intern_stack_ref(struct intern *in, uint32_t id);
void intern_stack_unref(struct intern *in, uint32_t id);
/* Bytes held by frames, stacks and strings (part of *in->bytes). */
uint64_t intern_bytes(const struct intern *in);

/*
 * One compaction. Planned by intern_gc_init; holders keep stacks with intern_gc_keep, which takes
 * a reference on each for the compaction's duration; intern_gc_compact renumbers; intern_gc_release
 * drops the holders' references (once, compacted or not); intern_gc_fini frees.
 */
struct intern_gc {
	uint64_t *keep;	  /* a bit per stack id planned (1..nkeep) a holder keeps */
	uint32_t nkeep;	  /* stack ids when planned: later ones cannot be kept */
	bool released;	  /* the keep references are dropped */
	uint32_t *smap;	  /* after compacting: old stack id -> new id, 0 dropped; [0] unused */
	uint32_t *fmap;	  /* the same for frames */
	uint32_t nstacks; /* stack ids before compacting: smap's last index */
	uint32_t nframes;
};

/* Returns 0 or -ENOMEM. */
int intern_gc_init(struct intern_gc *gc, const struct intern *in);
/* Keep stack (and its frames and strings) through the compaction; bad or repeated ids ignored. */
void intern_gc_keep(struct intern *in, struct intern_gc *gc, uint32_t stack);
/*
 * Drop what nothing references and renumber the rest densely in id order; fills gc's maps.
 * Returns 1 when ids changed, 0 when nothing was dead (ids unchanged), -ENOMEM (nothing changed).
 */
int intern_gc_compact(struct intern *in, struct intern_gc *gc);
/* Drop the keep references, through smap when renumbered. What only holders kept is dead again. */
void intern_gc_release(struct intern *in, struct intern_gc *gc, bool renumbered);
void intern_gc_fini(struct intern_gc *gc);

#endif
