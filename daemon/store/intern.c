// SPDX-License-Identifier: BSD-2-Clause
/*
 * The store's interned strings, frames and stacks, their reference counts, and the compaction
 * that drops what nothing refers to (intern.h describes the layout).
 */
#include "hash.h"
#include "intern.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Longer strings are cut (on a UTF-8 boundary): symbol names come from arbitrary binaries. */
#define MAX_STRING 4096
/* A stack deeper than this is refused; the sampler's own limit is far below. */
#define MAX_STACK_DEPTH 4096

struct str {
	uint32_t refs; /* live frames naming it */
	uint32_t hash;
	uint32_t len;
	char s[];
};

struct frame_rec {
	struct store_frame f; /* first: store__frame() hands out its address */
	uint32_t hash;
	uint32_t refs; /* live stacks holding it, with multiplicity */
};

struct stack_rec {
	uint32_t off; /* into stack_pool */
	uint32_t n;
	uint32_t hash;
	uint32_t refs; /* bucket entries naming it */
};

/* --- hashing -------------------------------------------------------------------------------- */

static uint32_t str_hash(const char *p, size_t n)
{
	return (uint32_t)hash_mix64(hash_bytes(p, n));
}

static uint32_t stack_hash(const uint32_t *frames, size_t n)
{
	uint64_t h = n;

	for (size_t i = 0; i < n; i++)
		h = (h ^ frames[i]) * 0x9e3779b97f4a7c15ull + (h >> 29);
	return (uint32_t)hash_mix64(h);
}

static uint32_t str_hash_of(const struct str *st)
{
	return st ? st->hash : 0x5bd1e995u;
}

static uint32_t frame_hash(enum frame_kind kind, const struct str *name, const struct str *module,
			   uint64_t address, const struct str *file, uint32_t line,
			   const struct str *build_id)
{
	uint64_t h = hash_mix64(address ^ ((uint64_t)kind << 56) ^ ((uint64_t)line << 24));

	h = hash_mix64(h ^ str_hash_of(name));
	h = hash_mix64(h ^ ((uint64_t)str_hash_of(module) << 32) ^ str_hash_of(file));
	h = hash_mix64(h ^ str_hash_of(build_id));
	return (uint32_t)h;
}

static inline struct str *str_of(const char *p)
{
	return p ? (struct str *)(void *)(p - offsetof(struct str, s)) : NULL;
}

/* --- strings -------------------------------------------------------------------------------- */

static uint64_t str_cost(uint32_t len)
{
	/* The allocation plus its share of a table kept at most 3/4 full. */
	return store_mem_cost(sizeof(struct str) + len + 1) + 2 * sizeof(struct str *);
}

size_t store_clip_len(const char *p, size_t max)
{
	size_t n = strnlen(p, max + 1);

	if (n <= max)
		return n;
	n = max;
	/* Do not end inside a UTF-8 sequence. */
	while (n > 0 && ((unsigned char)p[n] & 0xc0) == 0x80)
		n--;
	return n;
}

static int strtab_grow(struct intern *in)
{
	uint32_t nslots = in->strmask + 1, mask;
	struct str **nt;

	if (nslots >= STORE_IDTAB_MAX_SLOTS)
		return -ENOMEM;
	mask = 2 * nslots - 1;
	nt = store_mem_zalloc(in->bytes, (size_t)2 * nslots * sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	for (uint32_t i = 0; i < nslots; i++) {
		struct str *st = in->strtab[i];
		uint32_t j;

		if (!st)
			continue;
		for (j = st->hash & mask; nt[j]; j = (j + 1) & mask)
			;
		nt[j] = st;
	}
	store_mem_free(in->bytes, in->strtab, nslots * sizeof(*nt));
	in->strtab = nt;
	in->strmask = mask;
	return 0;
}

/* Returns the interned copy of p (NULL for NULL) or NULL with *err set. */
static struct str *str_intern(struct intern *in, const char *p, int *err)
{
	size_t len;
	uint32_t h, i;
	struct str *st;

	if (!p)
		return NULL;
	len = store_clip_len(p, MAX_STRING);
	h = str_hash(p, len);
	for (i = h & in->strmask; (st = in->strtab[i]); i = (i + 1) & in->strmask)
		if (st->hash == h && st->len == len && !memcmp(st->s, p, len))
			return st;
	if (((uint64_t)in->nstr + 1) * 4 > ((uint64_t)in->strmask + 1) * 3) {
		if (strtab_grow(in)) {
			*err = -ENOMEM;
			return NULL;
		}
		for (i = h & in->strmask; in->strtab[i]; i = (i + 1) & in->strmask)
			;
	}
	st = store_mem_alloc(in->bytes, sizeof(*st) + len + 1);
	if (!st) {
		*err = -ENOMEM;
		return NULL;
	}
	st->refs = 0;
	st->hash = h;
	st->len = (uint32_t)len;
	memcpy(st->s, p, len);
	st->s[len] = '\0';
	in->strtab[i] = st;
	in->nstr++;
	in->str_bytes += str_cost(st->len);
	in->dead_bytes += str_cost(st->len);
	return st;
}

static void str_ref(struct intern *in, const char *p)
{
	struct str *st = str_of(p);

	if (st && st->refs++ == 0)
		in->dead_bytes -= str_cost(st->len);
}

static void str_unref(struct intern *in, const char *p)
{
	struct str *st = str_of(p);

	if (st && --st->refs == 0)
		in->dead_bytes += str_cost(st->len);
}

/* --- frames --------------------------------------------------------------------------------- */

#define FRAME_COST (sizeof(struct frame_rec) + 2 * sizeof(uint32_t))

static uint32_t frame_probe(const struct intern *in, uint32_t h, enum frame_kind kind,
			    const char *name, const char *module, uint64_t address,
			    const char *file, uint32_t line, const char *build_id, uint32_t *slot)
{
	uint32_t i, id;

	for (i = h & in->framemask; (id = in->frametab[i]); i = (i + 1) & in->framemask) {
		const struct frame_rec *fr = &in->frames[id - 1];

		if (fr->hash == h && fr->f.kind == kind && fr->f.address == address &&
		    fr->f.line == line && fr->f.name == name && fr->f.module == module &&
		    fr->f.file == file && fr->f.build_id == build_id)
			return id;
	}
	*slot = i;
	return 0;
}

static int frametab_rebuild(struct intern *in, uint64_t want)
{
	uint32_t *tab, mask;

	if (store_idtab_alloc(in->bytes, &tab, &mask, want))
		return -ENOMEM;
	for (uint32_t id = 1; id <= in->nframes; id++)
		store_idtab_insert(tab, mask, in->frames[id - 1].hash, id);
	store_mem_free(in->bytes, in->frametab, (in->framemask + 1) * sizeof(uint32_t));
	in->frametab = tab;
	in->framemask = mask;
	return 0;
}

uint32_t intern_frame(struct intern *in, const struct frame_key *key)
{
	struct str *name, *module = NULL, *file = NULL, *build_id = NULL;
	struct frame_rec *fr;
	uint32_t h, id, slot = 0;
	int err = 0;

	if (!key || !key->name || (unsigned int)key->kind > FRAME_KIND_STATE) {
		errno = EINVAL;
		return 0;
	}
	name = str_intern(in, key->name, &err);
	if (!err)
		module = str_intern(in, key->module, &err);
	if (!err)
		file = str_intern(in, key->file, &err);
	if (!err)
		build_id = str_intern(in, key->build_id, &err);
	if (err)
		goto nomem;
	h = frame_hash(key->kind, name, module, key->address, file, key->line, build_id);
	id = frame_probe(in, h, key->kind, name->s, module ? module->s : NULL, key->address,
			 file ? file->s : NULL, key->line, build_id ? build_id->s : NULL, &slot);
	if (id)
		return id;
	if (store_mem_grow(in->bytes, (void **)&in->frames, &in->frames_cap,
			   (size_t)in->nframes + 1, 64, sizeof(*fr), UINT32_MAX - 1))
		goto nomem;
	if (((uint64_t)in->nframes + 1) * 4 > ((uint64_t)in->framemask + 1) * 3) {
		if (frametab_rebuild(in, 2 * ((uint64_t)in->framemask + 1)))
			goto nomem;
		frame_probe(in, h, key->kind, name->s, module ? module->s : NULL, key->address,
			    file ? file->s : NULL, key->line, build_id ? build_id->s : NULL, &slot);
	}
	fr = &in->frames[in->nframes];
	fr->f.kind = key->kind;
	fr->f.name = name->s;
	fr->f.module = module ? module->s : NULL;
	fr->f.address = key->address;
	fr->f.file = file ? file->s : NULL;
	fr->f.line = key->line;
	fr->f.build_id = build_id ? build_id->s : NULL;
	fr->hash = h;
	fr->refs = 0;
	id = ++in->nframes;
	in->frametab[slot] = id;
	in->dead_bytes += FRAME_COST;
	return id;
nomem:
	errno = ENOMEM;
	return 0;
}

const struct store_frame *intern_frame_get(const struct intern *in, uint32_t id)
{
	if (!id || id > in->nframes)
		return NULL;
	return &in->frames[id - 1].f;
}

static void frame_ref(struct intern *in, uint32_t id)
{
	struct frame_rec *fr = &in->frames[id - 1];

	if (fr->refs++ == 0) {
		in->dead_bytes -= FRAME_COST;
		str_ref(in, fr->f.name);
		str_ref(in, fr->f.module);
		str_ref(in, fr->f.file);
		str_ref(in, fr->f.build_id);
	}
}

static void frame_unref(struct intern *in, uint32_t id)
{
	struct frame_rec *fr = &in->frames[id - 1];

	if (--fr->refs == 0) {
		in->dead_bytes += FRAME_COST;
		str_unref(in, fr->f.name);
		str_unref(in, fr->f.module);
		str_unref(in, fr->f.file);
		str_unref(in, fr->f.build_id);
	}
}

/* --- stacks --------------------------------------------------------------------------------- */

static uint64_t stack_cost(uint32_t n)
{
	return sizeof(struct stack_rec) + 2 * sizeof(uint32_t) + (uint64_t)n * sizeof(uint32_t);
}

static int stacktab_rebuild(struct intern *in, uint64_t want)
{
	uint32_t *tab, mask;

	if (store_idtab_alloc(in->bytes, &tab, &mask, want))
		return -ENOMEM;
	for (uint32_t id = 1; id <= in->nstacks; id++)
		store_idtab_insert(tab, mask, in->stacks[id - 1].hash, id);
	store_mem_free(in->bytes, in->stacktab, (in->stackmask + 1) * sizeof(uint32_t));
	in->stacktab = tab;
	in->stackmask = mask;
	return 0;
}

static uint32_t stack_probe(const struct intern *in, uint32_t h, const uint32_t *frames, size_t n,
			    uint32_t *slot)
{
	uint32_t i, id;

	for (i = h & in->stackmask; (id = in->stacktab[i]); i = (i + 1) & in->stackmask) {
		const struct stack_rec *sr = &in->stacks[id - 1];

		if (sr->hash == h && sr->n == n &&
		    !memcmp(&in->pool[sr->off], frames, n * sizeof(uint32_t)))
			return id;
	}
	*slot = i;
	return 0;
}

uint32_t intern_stack(struct intern *in, const uint32_t *frames, size_t n)
{
	struct stack_rec *sr;
	uint32_t h, id, slot = 0;

	if ((n && !frames) || n > MAX_STACK_DEPTH) {
		errno = EINVAL;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (!frames[i] || frames[i] > in->nframes) {
			errno = EINVAL;
			return 0;
		}
	}
	h = stack_hash(frames, n);
	id = stack_probe(in, h, frames, n, &slot);
	if (id)
		return id;
	/* Ids and pool offsets are uint32: the growths refuse what would not fit. */
	if (store_mem_grow(in->bytes, (void **)&in->stacks, &in->stacks_cap,
			   (size_t)in->nstacks + 1, 64, sizeof(*sr), UINT32_MAX - 1) ||
	    store_mem_grow(in->bytes, (void **)&in->pool, &in->pool_cap, (size_t)in->pool_n + n,
			   256, sizeof(uint32_t), UINT32_MAX))
		goto nomem;
	if (((uint64_t)in->nstacks + 1) * 4 > ((uint64_t)in->stackmask + 1) * 3) {
		if (stacktab_rebuild(in, 2 * ((uint64_t)in->stackmask + 1)))
			goto nomem;
		stack_probe(in, h, frames, n, &slot);
	}
	sr = &in->stacks[in->nstacks];
	sr->off = in->pool_n;
	sr->n = (uint32_t)n;
	sr->hash = h;
	sr->refs = 0;
	if (n)
		memcpy(&in->pool[in->pool_n], frames, n * sizeof(uint32_t));
	in->pool_n += (uint32_t)n;
	id = ++in->nstacks;
	in->stacktab[slot] = id;
	in->dead_bytes += stack_cost(sr->n);
	return id;
nomem:
	errno = ENOMEM;
	return 0;
}

bool intern_stack_get(const struct intern *in, uint32_t id, const uint32_t **frames, size_t *n)
{
	const struct stack_rec *sr;

	if (!id || id > in->nstacks)
		return false;
	sr = &in->stacks[id - 1];
	*frames = &in->pool[sr->off];
	*n = sr->n;
	return true;
}

void intern_stack_ref(struct intern *in, uint32_t id)
{
	struct stack_rec *sr = &in->stacks[id - 1];

	if (sr->refs++ == 0) {
		in->dead_bytes -= stack_cost(sr->n);
		for (uint32_t i = 0; i < sr->n; i++)
			frame_ref(in, in->pool[sr->off + i]);
	}
}

void intern_stack_unref(struct intern *in, uint32_t id)
{
	struct stack_rec *sr = &in->stacks[id - 1];

	if (--sr->refs == 0) {
		in->dead_bytes += stack_cost(sr->n);
		for (uint32_t i = 0; i < sr->n; i++)
			frame_unref(in, in->pool[sr->off + i]);
	}
}

/* --- compaction ----------------------------------------------------------------------------- */

/*
 * The keep bits and the maps are plain heap, not charged: they live for one compaction and are
 * not part of what the store keeps.
 */
int intern_gc_init(struct intern_gc *gc, const struct intern *in)
{
	memset(gc, 0, sizeof(*gc));
	gc->nkeep = in->nstacks;
	gc->keep = calloc(gc->nkeep / 64 + 1, sizeof(*gc->keep));
	return gc->keep ? 0 : -ENOMEM;
}

void intern_gc_keep(struct intern *in, struct intern_gc *gc, uint32_t stack)
{
	uint64_t bit = 1ull << (stack % 64);

	if (gc->released || !stack || stack > gc->nkeep || (gc->keep[stack / 64] & bit))
		return;
	/* A reference for the compaction's duration: frames and strings stay with the stack. */
	gc->keep[stack / 64] |= bit;
	intern_stack_ref(in, stack);
}

void intern_gc_release(struct intern *in, struct intern_gc *gc, bool renumbered)
{
	if (gc->released)
		return;
	gc->released = true;
	for (uint32_t id = 1; id <= gc->nkeep; id++)
		if (gc->keep[id / 64] & (1ull << (id % 64)))
			intern_stack_unref(in, renumbered ? gc->smap[id] : id);
}

void intern_gc_fini(struct intern_gc *gc)
{
	free(gc->keep);
	free(gc->smap);
	free(gc->fmap);
	memset(gc, 0, sizeof(*gc));
}

/* What a compaction prepares before it changes anything: survivor counts and their tables. */
struct gc_tabs {
	uint32_t ns, nf, nstr;
	struct str **strtab;
	uint32_t strmask;
	uint32_t *ftab, fmask;
	uint32_t *stab, smask;
};

/* Number the referenced stacks and frames densely in id order; count the referenced strings. */
static void gc_number(const struct intern *in, struct intern_gc *gc, struct gc_tabs *t)
{
	for (uint32_t id = 1; id <= in->nstacks; id++)
		if (in->stacks[id - 1].refs)
			gc->smap[id] = ++t->ns;
	for (uint32_t id = 1; id <= in->nframes; id++)
		if (in->frames[id - 1].refs)
			gc->fmap[id] = ++t->nf;
	for (uint32_t i = 0; i <= in->strmask; i++)
		if (in->strtab[i] && in->strtab[i]->refs)
			t->nstr++;
}

static void gc_free_tabs(struct intern *in, struct gc_tabs *t)
{
	store_mem_free(in->bytes, t->strtab, ((size_t)t->strmask + 1) * sizeof(*t->strtab));
	store_mem_free(in->bytes, t->ftab, ((size_t)t->fmask + 1) * sizeof(uint32_t));
	store_mem_free(in->bytes, t->stab, ((size_t)t->smask + 1) * sizeof(uint32_t));
}

/* The survivors' tables, allocated before the first change. Returns 0 or -ENOMEM (none kept). */
static int gc_alloc_tabs(struct intern *in, struct gc_tabs *t)
{
	uint64_t nslots = 16;

	/* No more strings than the table in use holds: no overflow. */
	while (nslots * 3 < (uint64_t)t->nstr * 4 + 4)
		nslots *= 2;
	t->strmask = (uint32_t)(nslots - 1);
	t->strtab = store_mem_zalloc(in->bytes, nslots * sizeof(*t->strtab));
	if (t->strtab && !store_idtab_alloc(in->bytes, &t->ftab, &t->fmask, t->nf) &&
	    !store_idtab_alloc(in->bytes, &t->stab, &t->smask, t->ns))
		return 0;
	gc_free_tabs(in, t);
	return -ENOMEM;
}

/* Free the dead strings, move the living to the new table: they keep their address, so frames
 * need no fix-up. */
static void compact_strings(struct intern *in, struct gc_tabs *t)
{
	for (uint32_t i = 0; i <= in->strmask; i++) {
		struct str *st = in->strtab[i];
		uint32_t j;

		if (!st)
			continue;
		if (!st->refs) {
			in->str_bytes -= str_cost(st->len);
			store_mem_free(in->bytes, st, sizeof(*st) + st->len + 1);
			continue;
		}
		for (j = st->hash & t->strmask; t->strtab[j]; j = (j + 1) & t->strmask)
			;
		t->strtab[j] = st;
	}
	store_mem_free(in->bytes, in->strtab, ((size_t)in->strmask + 1) * sizeof(*in->strtab));
	in->strtab = t->strtab;
	in->strmask = t->strmask;
	in->nstr = t->nstr;
	t->strtab = NULL;
}

/* Frames move down in id order; their hash does not depend on ids. */
static void compact_frames(struct intern *in, const struct intern_gc *gc, struct gc_tabs *t)
{
	for (uint32_t id = 1; id <= in->nframes; id++) {
		uint32_t to = gc->fmap[id];

		if (!to)
			continue;
		in->frames[to - 1] = in->frames[id - 1];
		store_idtab_insert(t->ftab, t->fmask, in->frames[to - 1].hash, to);
	}
	in->nframes = t->nf;
	store_mem_free(in->bytes, in->frametab, ((size_t)in->framemask + 1) * sizeof(uint32_t));
	in->frametab = t->ftab;
	in->framemask = t->fmask;
	t->ftab = NULL;
}

/* Stacks and the pool move down in order (writes never pass reads); their frame ids change, and
 * with them their hash. */
static void compact_stacks(struct intern *in, const struct intern_gc *gc, struct gc_tabs *t)
{
	uint32_t pos = 0;

	for (uint32_t id = 1; id <= in->nstacks; id++) {
		struct stack_rec sr = in->stacks[id - 1];
		uint32_t to = gc->smap[id];

		if (!to)
			continue;
		for (uint32_t k = 0; k < sr.n; k++)
			in->pool[pos + k] = gc->fmap[in->pool[sr.off + k]];
		sr.off = pos;
		sr.hash = stack_hash(&in->pool[pos], sr.n);
		pos += sr.n;
		in->stacks[to - 1] = sr;
		store_idtab_insert(t->stab, t->smask, sr.hash, to);
	}
	in->nstacks = t->ns;
	in->pool_n = pos;
	store_mem_free(in->bytes, in->stacktab, ((size_t)in->stackmask + 1) * sizeof(uint32_t));
	in->stacktab = t->stab;
	in->stackmask = t->smask;
	t->stab = NULL;
}

/* Give back most of an array a compaction emptied; a failed shrink keeps the larger block. */
static void shrink(uint64_t *bytes, void **arr, uint32_t *cap, uint32_t n, uint32_t slack,
		   size_t elem)
{
	uint32_t ncap;
	void *p;

	if (*cap <= slack || n >= *cap / 2)
		return;
	ncap = n + n / 4 + slack; /* n < 2^31: no overflow */
	p = store_mem_realloc(bytes, *arr, (size_t)*cap * elem, (size_t)ncap * elem);
	if (p) {
		*arr = p;
		*cap = ncap;
	}
}

int intern_gc_compact(struct intern *in, struct intern_gc *gc)
{
	struct gc_tabs t = {0};

	gc->nstacks = in->nstacks;
	gc->nframes = in->nframes;
	gc->smap = calloc((size_t)in->nstacks + 1, sizeof(*gc->smap));
	gc->fmap = calloc((size_t)in->nframes + 1, sizeof(*gc->fmap));
	if (!gc->smap || !gc->fmap)
		return -ENOMEM;
	gc_number(in, gc, &t);
	if (t.ns == in->nstacks && t.nf == in->nframes && t.nstr == in->nstr) {
		/* Nothing is dead after all: say so, or the estimate would ask for this again. */
		in->dead_bytes = 0;
		return 0;
	}
	if (gc_alloc_tabs(in, &t))
		return -ENOMEM;
	/* From here on nothing fails. */
	compact_strings(in, &t);
	compact_frames(in, gc, &t);
	compact_stacks(in, gc, &t);
	shrink(in->bytes, (void **)&in->frames, &in->frames_cap, in->nframes, 64,
	       sizeof(struct frame_rec));
	shrink(in->bytes, (void **)&in->stacks, &in->stacks_cap, in->nstacks, 64,
	       sizeof(struct stack_rec));
	shrink(in->bytes, (void **)&in->pool, &in->pool_cap, in->pool_n, 256, sizeof(uint32_t));
	in->dead_bytes = 0;
	return 1;
}

uint64_t intern_bytes(const struct intern *in)
{
	return store_mem_cost((size_t)in->frames_cap * sizeof(struct frame_rec)) +
	       store_mem_cost(((size_t)in->framemask + 1) * sizeof(uint32_t)) +
	       store_mem_cost((size_t)in->stacks_cap * sizeof(struct stack_rec)) +
	       store_mem_cost(((size_t)in->stackmask + 1) * sizeof(uint32_t)) +
	       store_mem_cost((size_t)in->pool_cap * sizeof(uint32_t)) +
	       store_mem_cost(((size_t)in->strmask + 1) * sizeof(struct str *)) + in->str_bytes -
	       (uint64_t)in->nstr * 2 * sizeof(struct str *);
}

/* --- life cycle ----------------------------------------------------------------------------- */

int intern_init(struct intern *in, uint64_t *bytes)
{
	memset(in, 0, sizeof(*in));
	in->bytes = bytes;
	in->strmask = 15;
	in->strtab = store_mem_zalloc(bytes, 16 * sizeof(*in->strtab));
	if (!in->strtab || store_idtab_alloc(bytes, &in->frametab, &in->framemask, 0) ||
	    store_idtab_alloc(bytes, &in->stacktab, &in->stackmask, 0))
		return -ENOMEM;
	return 0;
}

/* The owner is going away: plain frees, nothing left to charge. */
void intern_fini(struct intern *in)
{
	if (in->strtab)
		for (uint32_t i = 0; i <= in->strmask; i++)
			free(in->strtab[i]);
	free(in->strtab);
	free(in->frames);
	free(in->frametab);
	free(in->stacks);
	free(in->stacktab);
	free(in->pool);
	memset(in, 0, sizeof(*in));
}
