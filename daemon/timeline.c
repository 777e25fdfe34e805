// SPDX-License-Identifier: BSD-2-Clause
/*
 * The timeline's rings (see timeline.h): two circular arrays that grow up to what the byte bound
 * allows, one of compact CPU samples and one of every other event, and an open-addressing table
 * of refcounted names.
 */
#include "timeline.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

#define DEFAULT_BYTES (8u << 20)

/* A name shared by events; events point at s. */
struct tname {
	uint64_t hash;
	uint32_t refs;
	char s[];
};

/* A CPU sample as the ring keeps it: a third of a struct tl_event. */
struct tl_sample {
	uint64_t ts;
	uint32_t pid;
	uint32_t tid;
	uint32_t uid;
	uint32_t stack;
};

/* A circular array of fixed-size items that grows by doubling up to max. */
struct ring {
	char *p;
	size_t item;
	size_t cap;  /* slots allocated */
	size_t max;  /* slots allowed */
	size_t head; /* oldest */
	size_t n;
};

struct timeline {
	struct ring ev;	 /* struct tl_event: everything but plain CPU samples */
	struct ring smp; /* struct tl_sample */
	size_t limit;	 /* bytes: slots in use + names */
	size_t name_bytes;
	struct tname **names; /* open addressing by string */
	size_t name_mask, nnames;
	uint64_t overwritten;
};

static void *ring_at(const struct ring *r, size_t i)
{
	return r->p + ((r->head + i) % r->cap) * r->item;
}

/* Double the slots (up to max), unrolling the ring so the oldest item is at 0. */
static int ring_grow(struct ring *r)
{
	size_t ncap = r->cap ? r->cap * 2 : 1024;
	char *np;

	if (ncap > r->max)
		ncap = r->max;
	np = calloc(ncap, r->item);
	if (!np)
		return -ENOMEM;
	for (size_t i = 0; i < r->n; i++)
		memcpy(np + i * r->item, ring_at(r, i), r->item);
	free(r->p);
	r->p = np;
	r->cap = ncap;
	r->head = 0;
	return 0;
}

static size_t used_bytes(const struct timeline *t)
{
	return t->ev.n * t->ev.item + t->smp.n * t->smp.item + t->name_bytes;
}

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
	t->ev.item = sizeof(struct tl_event);
	t->smp.item = sizeof(struct tl_sample);
	/* Either kind alone may fill the bytes. */
	t->ev.max = t->limit / t->ev.item;
	t->smp.max = t->limit / t->smp.item;
	if (t->ev.max < 16)
		t->ev.max = 16;
	if (t->smp.max < 16)
		t->smp.max = 16;
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

static void drop_oldest_event(struct timeline *t)
{
	struct tl_event *e = ring_at(&t->ev, 0);

	name_unref(t, e->name);
	e->name = NULL;
	t->ev.head = (t->ev.head + 1) % t->ev.cap;
	t->ev.n--;
	t->overwritten++;
}

static void drop_oldest_sample(struct timeline *t)
{
	t->smp.head = (t->smp.head + 1) % t->smp.cap;
	t->smp.n--;
	t->overwritten++;
}

/* The older of the two rings' oldest: the ring stays a window of recent time. */
static void drop_oldest(struct timeline *t)
{
	if (!t->smp.n || (t->ev.n && ((const struct tl_event *)ring_at(&t->ev, 0))->start <=
					 ((const struct tl_sample *)ring_at(&t->smp, 0))->ts))
		drop_oldest_event(t);
	else
		drop_oldest_sample(t);
}

void timeline__free(struct timeline *t)
{
	if (!t)
		return;
	while (t->ev.n)
		drop_oldest_event(t);
	free(t->ev.p);
	free(t->smp.p);
	free(t->names);
	free(t);
}

/* Room for one more item in r, after need more bytes: the oldest go first. */
static int make_room(struct timeline *t, struct ring *r, size_t need)
{
	while (t->ev.n + t->smp.n && used_bytes(t) + need > t->limit)
		drop_oldest(t);
	if (r->n == r->cap && r->cap < r->max && ring_grow(r))
		return -ENOMEM;
	if (r->n == r->cap)
		r == &t->ev ? drop_oldest_event(t) : drop_oldest_sample(t);
	return 0;
}

static int push_sample(struct timeline *t, const struct tl_event *e)
{
	struct tl_sample *slot;

	if (make_room(t, &t->smp, t->smp.item))
		return -ENOMEM;
	slot = ring_at(&t->smp, t->smp.n);
	*slot = (struct tl_sample){
	    .ts = e->start, .pid = e->pid, .tid = e->tid, .uid = e->uid, .stack = e->stack};
	t->smp.n++;
	return 0;
}

int timeline__push(struct timeline *t, const struct tl_event *e)
{
	const char *name = e->name, *kept = NULL;
	size_t need = name ? tname_cost(strlen(name)) : 0;
	struct tl_event *slot;
	char cut[4096];

	/* A plain CPU sample (all it has is in struct tl_sample) takes the compact ring. */
	if (e->type == TL_SAMPLE && !name && e->end == e->start && !e->corr)
		return push_sample(t, e);
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
	if (make_room(t, &t->ev, t->ev.item + need))
		return -ENOMEM;
	if (name) {
		kept = name_get(t, name);
		if (!kept)
			return -ENOMEM;
	}
	slot = ring_at(&t->ev, t->ev.n);
	*slot = *e;
	slot->name = kept;
	t->ev.n++;
	return 0;
}

size_t timeline__count(const struct timeline *t)
{
	return t ? t->ev.n + t->smp.n : 0;
}

bool timeline__get(const struct timeline *t, size_t i, struct tl_event *out)
{
	const struct tl_sample *s;

	if (!t || i >= t->ev.n + t->smp.n)
		return false;
	if (i < t->ev.n) {
		*out = *(const struct tl_event *)ring_at(&t->ev, i);
		return true;
	}
	s = ring_at(&t->smp, i - t->ev.n);
	*out = (struct tl_event){.type = TL_SAMPLE,
				 .pid = s->pid,
				 .tid = s->tid,
				 .uid = s->uid,
				 .stack = s->stack,
				 .start = s->ts,
				 .end = s->ts};
	return true;
}

void timeline__stats(const struct timeline *t, struct timeline_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!t)
		return;
	out->events = t->ev.n + t->smp.n;
	out->overwritten = t->overwritten;
	out->bytes = used_bytes(t);
}

/* Every stack id the events hold: kept in mark, or (mark NULL) renumbered through remap. */
static void gc_stack(uint32_t *stack, struct store_gc *mark, const struct store_gc *remap)
{
	if (!*stack)
		return;
	if (mark)
		store_gc__keep(mark, *stack);
	else
		*stack = store_gc__map(remap, *stack);
}

static void timeline_gc(struct timeline *t, struct store_gc *mark, const struct store_gc *remap)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->ev.n; i++)
		gc_stack(&((struct tl_event *)ring_at(&t->ev, i))->stack, mark, remap);
	for (size_t i = 0; i < t->smp.n; i++)
		gc_stack(&((struct tl_sample *)ring_at(&t->smp, i))->stack, mark, remap);
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
