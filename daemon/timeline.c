// SPDX-License-Identifier: BSD-2-Clause
/*
 * The timeline's ring (see timeline.h): a circular array of events that grows up to what the
 * byte bound allows, and an open-addressing table of refcounted names.
 */
#include "timeline.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

#define DEFAULT_BYTES (32u << 20)

/* A name shared by events; events point at s. */
struct tname {
	uint64_t hash;
	uint32_t refs;
	char s[];
};

struct timeline {
	struct tl_event *ev;
	size_t cap;  /* slots allocated (grows up to max) */
	size_t max;  /* slots allowed */
	size_t head; /* oldest */
	size_t n;
	size_t limit; /* bytes: slots + names */
	size_t name_bytes;
	struct tname **names; /* open addressing by string */
	size_t name_mask, nnames;
	uint64_t overwritten;
};

static size_t tname_cost(size_t len)
{
	return sizeof(struct tname) + len + 1 + 2 * sizeof(void *);
}

static struct tname *tname_of(const char *s)
{
	return (struct tname *)(s - offsetof(struct tname, s));
}

struct timeline *timeline__new(const struct timeline_opts *opts)
{
	struct timeline *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->limit = opts && opts->bytes ? opts->bytes : DEFAULT_BYTES;
	t->max = t->limit / sizeof(struct tl_event);
	if (t->max < 16)
		t->max = 16;
	return t;
}

static void name_unref(struct timeline *t, const char *name)
{
	struct tname *s;
	size_t i, j;

	if (!name)
		return;
	s = tname_of(name);
	if (--s->refs)
		return;
	for (i = s->hash & t->name_mask; t->names[i] != s; i = (i + 1) & t->name_mask)
		;
	/* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
	for (j = (i + 1) & t->name_mask; t->names[j]; j = (j + 1) & t->name_mask) {
		size_t home = t->names[j]->hash & t->name_mask;

		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			t->names[i] = t->names[j];
			i = j;
		}
	}
	t->names[i] = NULL;
	t->nnames--;
	t->name_bytes -= tname_cost(strlen(s->s));
	free(s);
}

static int names_grow(struct timeline *t)
{
	size_t nslots = t->name_mask ? 2 * (t->name_mask + 1) : 64, i;
	struct tname **ns = calloc(nslots, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (size_t j = 0; t->name_mask && j <= t->name_mask; j++) {
		if (!t->names[j])
			continue;
		for (i = t->names[j]->hash & (nslots - 1); ns[i]; i = (i + 1) & (nslots - 1))
			;
		ns[i] = t->names[j];
	}
	free(t->names);
	t->names = ns;
	t->name_mask = nslots - 1;
	return 0;
}

/* A reference to the interned copy of name; NULL on allocation failure. */
static const char *name_get(struct timeline *t, const char *name)
{
	size_t len = strlen(name), i;
	uint64_t h = hash_bytes(name, len);
	struct tname *s;

	if (t->name_mask) {
		for (i = h & t->name_mask; t->names[i]; i = (i + 1) & t->name_mask) {
			if (t->names[i]->hash == h && !strcmp(t->names[i]->s, name)) {
				t->names[i]->refs++;
				return t->names[i]->s;
			}
		}
	}
	if ((!t->name_mask || (t->nnames + 1) * 2 > t->name_mask + 1) && names_grow(t))
		return NULL;
	s = malloc(sizeof(*s) + len + 1);
	if (!s)
		return NULL;
	s->hash = h;
	s->refs = 1;
	memcpy(s->s, name, len + 1);
	for (i = h & t->name_mask; t->names[i]; i = (i + 1) & t->name_mask)
		;
	t->names[i] = s;
	t->nnames++;
	t->name_bytes += tname_cost(len);
	return s->s;
}

static void drop_oldest(struct timeline *t)
{
	struct tl_event *e = &t->ev[t->head];

	name_unref(t, e->name);
	e->name = NULL;
	t->head = (t->head + 1) % t->cap;
	t->n--;
	t->overwritten++;
}

void timeline__free(struct timeline *t)
{
	if (!t)
		return;
	while (t->n)
		drop_oldest(t);
	free(t->ev);
	free(t->names);
	free(t);
}

/* Double the slots (up to max), unrolling the ring so the oldest event is at 0. */
static int slots_grow(struct timeline *t)
{
	size_t ncap = t->cap ? t->cap * 2 : 1024;
	struct tl_event *ne;

	if (ncap > t->max)
		ncap = t->max;
	ne = calloc(ncap, sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++)
		ne[i] = t->ev[(t->head + i) % t->cap];
	free(t->ev);
	t->ev = ne;
	t->cap = ncap;
	t->head = 0;
	return 0;
}

int timeline__push(struct timeline *t, const struct tl_event *e)
{
	const char *name = e->name, *kept = NULL;
	size_t need = name ? tname_cost(strlen(name)) : 0;
	struct tl_event *slot;
	char cut[4096];

	/*
	 * One name never takes more than a 64th of the ring: a huge one would otherwise push out
	 * every other event. Cut names end with "...".
	 */
	if (name && need > t->limit / 64) {
		size_t room = t->limit / 64, over = tname_cost(0) + 3;
		size_t max = room > over ? room - over : 0;

		if (max > sizeof(cut) - 4)
			max = sizeof(cut) - 4;
		while (max > 0 && ((unsigned char)name[max] & 0xc0) == 0x80)
			max--; /* not inside a UTF-8 sequence */
		memcpy(cut, name, max);
		memcpy(cut + max, "...", 4);
		name = cut;
		need = tname_cost(max + 3);
	}
	/* Room in bytes: slots in use plus names; one event always fits. */
	while (t->n && (t->n + 1) * sizeof(*e) + t->name_bytes + need > t->limit)
		drop_oldest(t);
	if (t->n == t->cap && t->cap < t->max && slots_grow(t))
		return -ENOMEM;
	if (t->n == t->cap)
		drop_oldest(t);
	if (name) {
		kept = name_get(t, name);
		if (!kept)
			return -ENOMEM;
	}
	slot = &t->ev[(t->head + t->n) % t->cap];
	*slot = *e;
	slot->name = kept;
	t->n++;
	return 0;
}

size_t timeline__count(const struct timeline *t)
{
	return t ? t->n : 0;
}

const struct tl_event *timeline__event(const struct timeline *t, size_t i)
{
	if (!t || i >= t->n)
		return NULL;
	return &t->ev[(t->head + i) % t->cap];
}

void timeline__stats(const struct timeline *t, struct timeline_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!t)
		return;
	out->events = t->n;
	out->overwritten = t->overwritten;
	out->bytes = t->n * sizeof(struct tl_event) + t->name_bytes;
}

/* Every stack id the events hold: kept in mark, or (mark NULL) renumbered through remap. */
static void timeline_gc(struct timeline *t, struct store_gc *mark, const struct store_gc *remap)
{
	for (size_t i = 0; t && i < t->n; i++) {
		struct tl_event *e = &t->ev[(t->head + i) % t->cap];

		if (!e->stack)
			continue;
		if (mark)
			store_gc__keep(mark, e->stack);
		else
			e->stack = store_gc__map(remap, e->stack);
	}
}

void timeline__gc_mark(struct timeline *t, struct store_gc *gc)
{
	if (gc)
		timeline_gc(t, gc, NULL);
}

void timeline__gc_remap(struct timeline *t, const struct store_gc *gc)
{
	if (gc)
		timeline_gc(t, NULL, gc);
}
