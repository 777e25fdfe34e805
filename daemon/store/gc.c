// SPDX-License-Identifier: BSD-2-Clause
/*
 * The store's compaction as explicit steps: plan, holders keep their ids, commit (drop what
 * nothing references, renumber the rest and the buckets' entries), holders map their ids. The
 * daemon runs it from its periodic tick, never from inside store__add, so a stack id never moves
 * between two adds (see store_priv.h).
 */
#include "store_priv.h"

#include <errno.h>
#include <stdlib.h>

struct store_gc {
	struct store *s;
	struct intern_gc in;
	bool done;	 /* committed (whatever the outcome): the keep references are dropped */
	bool renumbered; /* the commit changed ids: map through in.smap */
};

/*
 * Only under the cap's pressure, as eviction would otherwise have to make room: when the dead
 * data is a real share of the cap (each run then frees at least cap/8 for O(cap) work), or when
 * no bucket is left to evict and dead data is all there is to reclaim.
 */
bool store__compact_due(const struct store *s)
{
	uint64_t r;

	if (!s || s->gc_planned || s->bytes <= s->cap)
		return false;
	r = store_reclaimable(s);
	return r >= s->cap / 8 || (!s->nb && r);
}

struct store_gc *store__gc_plan(struct store *s)
{
	struct store_gc *gc;

	if (!s) {
		errno = EINVAL;
		return NULL;
	}
	if (s->gc_planned) {
		errno = EBUSY;
		return NULL;
	}
	gc = calloc(1, sizeof(*gc));
	if (!gc || intern_gc_init(&gc->in, &s->in)) {
		free(gc);
		errno = ENOMEM;
		return NULL;
	}
	gc->s = s;
	s->gc_planned = true;
	return gc;
}

void store_gc__keep(struct store_gc *gc, uint32_t stack)
{
	if (gc && !gc->done)
		intern_gc_keep(&gc->s->in, &gc->in, stack);
}

int store__gc_commit(struct store *s, struct store_gc *gc)
{
	int ret;

	if (!s || !gc || gc->s != s || gc->done)
		return -EINVAL;
	ret = intern_gc_compact(&s->in, &gc->in);
	if (ret > 0) {
		store_buckets_remap(s, gc->in.smap);
		s->generation++;
		s->compactions++;
		gc->renumbered = true;
	}
	/*
	 * What only holders keep is dead again after this, and stays so until they let go or a
	 * bucket names it: dead_floor keeps it from making compaction look due on every tick.
	 */
	intern_gc_release(&s->in, &gc->in, gc->renumbered);
	gc->done = true;
	s->gc_planned = false;
	if (ret < 0)
		return ret;
	s->dead_floor = s->in.dead_bytes;
	/* The dead-bytes estimate may have promised more than the compaction freed. */
	if (s->bytes > s->cap)
		store_enforce_cap(s);
	return 0;
}

uint32_t store_gc__map(const struct store_gc *gc, uint32_t old)
{
	if (!gc || !old)
		return 0;
	if (!gc->renumbered)
		return old <= gc->s->in.nstacks ? old : 0;
	return old <= gc->in.nstacks ? gc->in.smap[old] : 0;
}

void store_gc__free(struct store_gc *gc)
{
	if (!gc)
		return;
	if (!gc->done) {
		/* Abandoned: the holders' references go, and nothing moved. */
		intern_gc_release(&gc->s->in, &gc->in, false);
		gc->s->gc_planned = false;
	}
	intern_gc_fini(&gc->in);
	free(gc);
}

int store__compact(struct store *s)
{
	struct store_gc *gc;
	int err;

	if (!s)
		return -EINVAL;
	gc = store__gc_plan(s);
	if (!gc)
		return -errno;
	err = store__gc_commit(s, gc);
	store_gc__free(gc);
	return err;
}
