// SPDX-License-Identifier: BSD-2-Clause
/*
 * The aggregation store: interned strings, frames and stacks, their reference counts, and the
 * compaction that drops what nothing refers to (see store_priv.h for the whole layout).
 */
#include "store_priv.h"

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

static int strtab_grow(struct store *s)
{
	uint32_t nslots = s->strmask + 1, mask = 2 * nslots - 1;
	struct str **nt = store_mem_zalloc(s, 2 * nslots * sizeof(*nt));

	if (!nt)
		return -ENOMEM;
	for (uint32_t i = 0; i < nslots; i++) {
		struct str *st = s->strtab[i];
		uint32_t j;

		if (!st)
			continue;
		for (j = st->hash & mask; nt[j]; j = (j + 1) & mask)
			;
		nt[j] = st;
	}
	store_mem_free(s, s->strtab, nslots * sizeof(*nt));
	s->strtab = nt;
	s->strmask = mask;
	return 0;
}

/* Returns the interned copy of p (NULL for NULL) or NULL with *err set. */
static struct str *str_intern(struct store *s, const char *p, int *err)
{
	size_t len;
	uint32_t h, i;
	struct str *st;

	if (!p)
		return NULL;
	len = store_clip_len(p, MAX_STRING);
	h = str_hash(p, len);
	for (i = h & s->strmask; (st = s->strtab[i]); i = (i + 1) & s->strmask)
		if (st->hash == h && st->len == len && !memcmp(st->s, p, len))
			return st;
	if ((s->nstr + 1) * 4 > (s->strmask + 1) * 3) {
		if (strtab_grow(s)) {
			*err = -ENOMEM;
			return NULL;
		}
		for (i = h & s->strmask; s->strtab[i]; i = (i + 1) & s->strmask)
			;
	}
	st = store_mem_alloc(s, sizeof(*st) + len + 1);
	if (!st) {
		*err = -ENOMEM;
		return NULL;
	}
	st->refs = 0;
	st->hash = h;
	st->len = (uint32_t)len;
	memcpy(st->s, p, len);
	st->s[len] = '\0';
	s->strtab[i] = st;
	s->nstr++;
	s->str_bytes += str_cost(st->len);
	s->dead_bytes += str_cost(st->len);
	return st;
}

static void str_ref(struct store *s, const char *p)
{
	struct str *st = str_of(p);

	if (st && st->refs++ == 0)
		s->dead_bytes -= str_cost(st->len);
}

static void str_unref(struct store *s, const char *p)
{
	struct str *st = str_of(p);

	if (st && --st->refs == 0)
		s->dead_bytes += str_cost(st->len);
}

/* --- frames --------------------------------------------------------------------------------- */

#define FRAME_COST (sizeof(struct frame_rec) + 2 * sizeof(uint32_t))

static uint32_t frame_probe(const struct store *s, uint32_t h, enum frame_kind kind,
			    const char *name, const char *module, uint64_t address,
			    const char *file, uint32_t line, const char *build_id, uint32_t *slot)
{
	uint32_t i, id;

	for (i = h & s->framemask; (id = s->frametab[i]); i = (i + 1) & s->framemask) {
		const struct frame_rec *fr = &s->frames[id - 1];

		if (fr->hash == h && fr->f.kind == kind && fr->f.address == address &&
		    fr->f.line == line && fr->f.name == name && fr->f.module == module &&
		    fr->f.file == file && fr->f.build_id == build_id)
			return id;
	}
	*slot = i;
	return 0;
}

static int frametab_rebuild(struct store *s, uint32_t want)
{
	uint32_t *tab, mask;

	if (store_idtab_alloc(s, &tab, &mask, want))
		return -ENOMEM;
	for (uint32_t id = 1; id <= s->nframes; id++)
		store_idtab_insert(tab, mask, s->frames[id - 1].hash, id);
	store_mem_free(s, s->frametab, (s->framemask + 1) * sizeof(uint32_t));
	s->frametab = tab;
	s->framemask = mask;
	return 0;
}

uint32_t store__intern_frame(struct store *s, const struct frame_key *key)
{
	struct str *name, *module = NULL, *file = NULL, *build_id = NULL;
	struct frame_rec *fr;
	uint32_t h, id, slot = 0;
	int err = 0;

	if (!s || !key || !key->name || (unsigned int)key->kind > FRAME_KIND_NVTX) {
		errno = EINVAL;
		return 0;
	}
	name = str_intern(s, key->name, &err);
	if (!err)
		module = str_intern(s, key->module, &err);
	if (!err)
		file = str_intern(s, key->file, &err);
	if (!err)
		build_id = str_intern(s, key->build_id, &err);
	if (err)
		goto nomem;
	h = frame_hash(key->kind, name, module, key->address, file, key->line, build_id);
	id = frame_probe(s, h, key->kind, name->s, module ? module->s : NULL, key->address,
			 file ? file->s : NULL, key->line, build_id ? build_id->s : NULL, &slot);
	if (id)
		return id;
	if (s->nframes == UINT32_MAX - 1)
		goto nomem;
	if (s->nframes == s->frames_cap) {
		uint32_t ncap = s->frames_cap ? s->frames_cap * 2 : 64;
		void *nf = store_mem_realloc(s, s->frames, s->frames_cap * sizeof(*fr),
					     ncap * sizeof(*fr));

		if (!nf)
			goto nomem;
		s->frames = nf;
		s->frames_cap = ncap;
	}
	if ((s->nframes + 1) * 4 > (s->framemask + 1) * 3) {
		if (frametab_rebuild(s, 2 * (s->framemask + 1)))
			goto nomem;
		frame_probe(s, h, key->kind, name->s, module ? module->s : NULL, key->address,
			    file ? file->s : NULL, key->line, build_id ? build_id->s : NULL, &slot);
	}
	fr = &s->frames[s->nframes];
	fr->f.kind = key->kind;
	fr->f.name = name->s;
	fr->f.module = module ? module->s : NULL;
	fr->f.address = key->address;
	fr->f.file = file ? file->s : NULL;
	fr->f.line = key->line;
	fr->f.build_id = build_id ? build_id->s : NULL;
	fr->hash = h;
	fr->refs = 0;
	id = ++s->nframes;
	s->frametab[slot] = id;
	s->dead_bytes += FRAME_COST;
	return id;
nomem:
	errno = ENOMEM;
	return 0;
}

const struct store_frame *store__frame(const struct store *s, uint32_t frame_id)
{
	if (!s || !frame_id || frame_id > s->nframes)
		return NULL;
	return &s->frames[frame_id - 1].f;
}

static void frame_ref(struct store *s, uint32_t id)
{
	struct frame_rec *fr = &s->frames[id - 1];

	if (fr->refs++ == 0) {
		s->dead_bytes -= FRAME_COST;
		str_ref(s, fr->f.name);
		str_ref(s, fr->f.module);
		str_ref(s, fr->f.file);
		str_ref(s, fr->f.build_id);
	}
}

static void frame_unref(struct store *s, uint32_t id)
{
	struct frame_rec *fr = &s->frames[id - 1];

	if (--fr->refs == 0) {
		s->dead_bytes += FRAME_COST;
		str_unref(s, fr->f.name);
		str_unref(s, fr->f.module);
		str_unref(s, fr->f.file);
		str_unref(s, fr->f.build_id);
	}
}

/* --- stacks --------------------------------------------------------------------------------- */

static uint64_t stack_cost(uint32_t n)
{
	return sizeof(struct stack_rec) + 2 * sizeof(uint32_t) + (uint64_t)n * sizeof(uint32_t);
}

static int stacktab_rebuild(struct store *s, uint32_t want)
{
	uint32_t *tab, mask;

	if (store_idtab_alloc(s, &tab, &mask, want))
		return -ENOMEM;
	for (uint32_t id = 1; id <= s->nstacks; id++)
		store_idtab_insert(tab, mask, s->stacks[id - 1].hash, id);
	store_mem_free(s, s->stacktab, (s->stackmask + 1) * sizeof(uint32_t));
	s->stacktab = tab;
	s->stackmask = mask;
	return 0;
}

static uint32_t stack_probe(const struct store *s, uint32_t h, const uint32_t *frames, size_t n,
			    uint32_t *slot)
{
	uint32_t i, id;

	for (i = h & s->stackmask; (id = s->stacktab[i]); i = (i + 1) & s->stackmask) {
		const struct stack_rec *sr = &s->stacks[id - 1];

		if (sr->hash == h && sr->n == n &&
		    !memcmp(&s->pool[sr->off], frames, n * sizeof(uint32_t)))
			return id;
	}
	*slot = i;
	return 0;
}

uint32_t store__intern_stack(struct store *s, const uint32_t *frames, size_t n)
{
	struct stack_rec *sr;
	uint32_t h, id, slot = 0;

	if (!s || (n && !frames) || n > MAX_STACK_DEPTH) {
		errno = EINVAL;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (!frames[i] || frames[i] > s->nframes) {
			errno = EINVAL;
			return 0;
		}
	}
	h = stack_hash(frames, n);
	id = stack_probe(s, h, frames, n, &slot);
	if (id)
		return id;
	if (s->nstacks == UINT32_MAX - 1 || (uint64_t)s->pool_n + n > UINT32_MAX)
		goto nomem;
	if (s->nstacks == s->stacks_cap) {
		uint32_t ncap = s->stacks_cap ? s->stacks_cap * 2 : 64;
		void *ns = store_mem_realloc(s, s->stacks, s->stacks_cap * sizeof(*sr),
					     ncap * sizeof(*sr));

		if (!ns)
			goto nomem;
		s->stacks = ns;
		s->stacks_cap = ncap;
	}
	if (s->pool_n + n > s->pool_cap) {
		uint64_t ncap = s->pool_cap ? s->pool_cap : 256;
		void *np;

		while (ncap < s->pool_n + n)
			ncap *= 2;
		if (ncap > UINT32_MAX)
			ncap = UINT32_MAX;
		np = store_mem_realloc(s, s->pool, s->pool_cap * sizeof(uint32_t),
				       ncap * sizeof(uint32_t));
		if (!np)
			goto nomem;
		s->pool = np;
		s->pool_cap = (uint32_t)ncap;
	}
	if ((s->nstacks + 1) * 4 > (s->stackmask + 1) * 3) {
		if (stacktab_rebuild(s, 2 * (s->stackmask + 1)))
			goto nomem;
		stack_probe(s, h, frames, n, &slot);
	}
	sr = &s->stacks[s->nstacks];
	sr->off = s->pool_n;
	sr->n = (uint32_t)n;
	sr->hash = h;
	sr->refs = 0;
	if (n)
		memcpy(&s->pool[s->pool_n], frames, n * sizeof(uint32_t));
	s->pool_n += (uint32_t)n;
	id = ++s->nstacks;
	s->stacktab[slot] = id;
	s->dead_bytes += stack_cost(sr->n);
	return id;
nomem:
	errno = ENOMEM;
	return 0;
}

bool store__stack(const struct store *s, uint32_t stack_id, const uint32_t **frames, size_t *n)
{
	const struct stack_rec *sr;

	if (!s || !stack_id || stack_id > s->nstacks)
		return false;
	sr = &s->stacks[stack_id - 1];
	*frames = &s->pool[sr->off];
	*n = sr->n;
	return true;
}

void store_stack_ref(struct store *s, uint32_t id)
{
	struct stack_rec *sr = &s->stacks[id - 1];

	if (sr->refs++ == 0) {
		s->dead_bytes -= stack_cost(sr->n);
		for (uint32_t i = 0; i < sr->n; i++)
			frame_ref(s, s->pool[sr->off + i]);
	}
}

void store_stack_unref(struct store *s, uint32_t id)
{
	struct stack_rec *sr = &s->stacks[id - 1];

	if (--sr->refs == 0) {
		s->dead_bytes += stack_cost(sr->n);
		for (uint32_t i = 0; i < sr->n; i++)
			frame_unref(s, s->pool[sr->off + i]);
	}
}

/* --- GC holder ----------------------------------------------------------------------------- */

void store__set_gc_holder(struct store *s, store_gc_fn cb, void *ctx)
{
	if (!s)
		return;
	s->gc_cb = cb;
	s->gc_ctx = cb ? ctx : NULL;
}

void store__gc_keep_stack(struct store *s, uint32_t stack)
{
	uint64_t bit;

	if (!s || !s->gc_marking || !stack || stack > s->nstacks)
		return;
	bit = 1ull << (stack % 64);
	if (s->gc_keep[stack / 64] & bit)
		return;
	/* A reference for the compaction's duration: frames and strings stay with the stack. */
	s->gc_keep[stack / 64] |= bit;
	store_stack_ref(s, stack);
}

uint32_t store__gc_remap_stack(const struct store *s, uint32_t stack)
{
	if (!s || !s->gc_remapping || !stack || stack > s->gc_nold)
		return 0;
	return s->gc_smap ? s->gc_smap[stack] : stack;
}

/* Asks the holder which stacks it keeps (keep: a zeroed bit per stack id). */
static void gc_mark(struct store *s, uint64_t *keep)
{
	s->gc_nold = s->nstacks;
	if (!s->gc_cb)
		return;
	s->gc_keep = keep;
	s->gc_marking = true;
	s->gc_cb(s, STORE_GC_MARK, s->gc_ctx);
	s->gc_marking = false;
	s->gc_keep = NULL;
}

/*
 * Tells the holder the new ids (smap NULL: unchanged), then drops the references the marks took:
 * what only the holder keeps is dead again, and stays so (dead_floor) until it lets go or a bucket
 * names it.
 */
static void gc_remap(struct store *s, const uint64_t *keep, const uint32_t *smap)
{
	if (!s->gc_cb)
		return;
	s->gc_smap = smap;
	s->gc_remapping = true;
	s->gc_cb(s, STORE_GC_REMAP, s->gc_ctx);
	s->gc_remapping = false;
	s->gc_smap = NULL;
	for (uint32_t id = 1; id <= s->gc_nold; id++)
		if (keep[id / 64] & (1ull << (id % 64)))
			store_stack_unref(s, smap ? smap[id] : id);
}

/* --- compaction ----------------------------------------------------------------------------- */

int store__compact(struct store *s)
{
	uint32_t *smap = NULL, *fmap = NULL, *ftab = NULL, *stab = NULL, fmask, smask;
	struct str **strtab = NULL;
	uint32_t nf = 0, ns = 0, nstr = 0, strmask = 15, pos = 0;
	uint64_t *keep = NULL;
	bool renumbered = false;
	int err = -ENOMEM;

	if (!s)
		return -EINVAL;
	if (s->gc_marking || s->gc_remapping)
		return -EBUSY; /* the holder's callback must not compact */
	/* Everything that can fail is allocated before the first change. */
	smap = calloc(s->nstacks + 1, sizeof(*smap));
	fmap = calloc(s->nframes + 1, sizeof(*fmap));
	keep = calloc(s->nstacks / 64 + 1, sizeof(*keep));
	if (!smap || !fmap || !keep)
		goto out_free;
	gc_mark(s, keep);
	for (uint32_t id = 1; id <= s->nstacks; id++)
		if (s->stacks[id - 1].refs)
			smap[id] = ++ns;
	for (uint32_t id = 1; id <= s->nframes; id++)
		if (s->frames[id - 1].refs)
			fmap[id] = ++nf;
	for (uint32_t i = 0; i <= s->strmask; i++)
		if (s->strtab[i] && s->strtab[i]->refs)
			nstr++;
	if (ns == s->nstacks && nf == s->nframes && nstr == s->nstr) {
		/* Nothing is dead after all: say so, or the cap loop would compact forever. */
		s->dead_bytes = 0;
		err = 0;
		goto out;
	}
	/* From here on nothing fails: the holder is told the new ids below. */
	while ((strmask + 1) * 3 < nstr * 4 + 4)
		strmask = 2 * strmask + 1;
	strtab = store_mem_zalloc(s, (strmask + 1) * sizeof(*strtab));
	if (!strtab || store_idtab_alloc(s, &ftab, &fmask, nf) ||
	    store_idtab_alloc(s, &stab, &smask, ns))
		goto out_tabs;

	/* Strings: survivors keep their address, so frames need no fix-up. */
	for (uint32_t i = 0; i <= s->strmask; i++) {
		struct str *st = s->strtab[i];
		uint32_t j;

		if (!st)
			continue;
		if (!st->refs) {
			s->str_bytes -= str_cost(st->len);
			store_mem_free(s, st, sizeof(*st) + st->len + 1);
			continue;
		}
		for (j = st->hash & strmask; strtab[j]; j = (j + 1) & strmask)
			;
		strtab[j] = st;
	}
	store_mem_free(s, s->strtab, (s->strmask + 1) * sizeof(*strtab));
	s->strtab = strtab;
	s->strmask = strmask;
	s->nstr = nstr;

	/* Frames move down in id order; their hash does not depend on ids. */
	for (uint32_t id = 1; id <= s->nframes; id++) {
		if (!fmap[id])
			continue;
		s->frames[fmap[id] - 1] = s->frames[id - 1];
		store_idtab_insert(ftab, fmask, s->frames[fmap[id] - 1].hash, fmap[id]);
	}
	s->nframes = nf;
	store_mem_free(s, s->frametab, (s->framemask + 1) * sizeof(uint32_t));
	s->frametab = ftab;
	s->framemask = fmask;

	/* Stacks and the pool move down in order (writes never pass reads); hashes change. */
	for (uint32_t id = 1; id <= s->nstacks; id++) {
		struct stack_rec sr = s->stacks[id - 1];

		if (!smap[id])
			continue;
		for (uint32_t k = 0; k < sr.n; k++)
			s->pool[pos + k] = fmap[s->pool[sr.off + k]];
		sr.off = pos;
		sr.hash = stack_hash(&s->pool[pos], sr.n);
		pos += sr.n;
		s->stacks[smap[id] - 1] = sr;
		store_idtab_insert(stab, smask, sr.hash, smap[id]);
	}
	s->nstacks = ns;
	s->pool_n = pos;
	store_mem_free(s, s->stacktab, (s->stackmask + 1) * sizeof(uint32_t));
	s->stacktab = stab;
	s->stackmask = smask;

	/* Entries name stacks by id; open buckets hash on it. */
	for (uint32_t k = 0; k < s->nb; k++) {
		struct bucket *b = &s->b[k];

		for (uint32_t j = 0; j < b->n; j++)
			b->e[j].stack = smap[b->e[j].stack];
		if (b->tab) {
			memset(b->tab, 0, (b->mask + 1) * sizeof(uint32_t));
			for (uint32_t j = 0; j < b->n; j++)
				store_idtab_insert(
				    b->tab, b->mask,
				    store_entry_hash(b->e[j].pidcol, b->e[j].tid, b->e[j].stack),
				    j + 1);
		}
	}

	/* Give memory back; a failed shrink only keeps the larger block. */
	if (s->frames_cap > 64 && nf < s->frames_cap / 2) {
		uint32_t ncap = nf + nf / 4 + 64;
		void *p = store_mem_realloc(s, s->frames, s->frames_cap * sizeof(struct frame_rec),
					    ncap * sizeof(struct frame_rec));

		if (p) {
			s->frames = p;
			s->frames_cap = ncap;
		}
	}
	if (s->stacks_cap > 64 && ns < s->stacks_cap / 2) {
		uint32_t ncap = ns + ns / 4 + 64;
		void *p = store_mem_realloc(s, s->stacks, s->stacks_cap * sizeof(struct stack_rec),
					    ncap * sizeof(struct stack_rec));

		if (p) {
			s->stacks = p;
			s->stacks_cap = ncap;
		}
	}
	if (s->pool_cap > 256 && pos < s->pool_cap / 2) {
		uint32_t ncap = pos + pos / 4 + 256;
		void *p = store_mem_realloc(s, s->pool, s->pool_cap * sizeof(uint32_t),
					    ncap * sizeof(uint32_t));

		if (p) {
			s->pool = p;
			s->pool_cap = ncap;
		}
	}
	s->dead_bytes = 0;
	s->generation++;
	s->compactions++;
	renumbered = true;
	err = 0;
	goto out;
out_tabs:
	if (strtab)
		store_mem_free(s, strtab, (strmask + 1) * sizeof(*strtab));
	if (ftab)
		store_mem_free(s, ftab, (fmask + 1) * sizeof(uint32_t));
	if (stab)
		store_mem_free(s, stab, (smask + 1) * sizeof(uint32_t));
out:
	/* After a failure, or with nothing dropped, ids are unchanged. */
	gc_remap(s, keep, renumbered ? smap : NULL);
	if (!err)
		s->dead_floor = s->dead_bytes;
out_free:
	free(smap);
	free(fmap);
	free(keep);
	return err;
}

uint64_t store_interned_bytes(const struct store *s)
{
	return store_mem_cost(s->frames_cap * sizeof(struct frame_rec)) +
	       store_mem_cost((s->framemask + 1) * sizeof(uint32_t)) +
	       store_mem_cost(s->stacks_cap * sizeof(struct stack_rec)) +
	       store_mem_cost((s->stackmask + 1) * sizeof(uint32_t)) +
	       store_mem_cost(s->pool_cap * sizeof(uint32_t)) +
	       store_mem_cost((s->strmask + 1) * sizeof(struct str *)) + s->str_bytes -
	       (uint64_t)s->nstr * 2 * sizeof(struct str *);
}

/* --- life cycle ----------------------------------------------------------------------------- */

int store_intern_init(struct store *s)
{
	s->strmask = 15;
	s->strtab = store_mem_zalloc(s, 16 * sizeof(*s->strtab));
	if (!s->strtab || store_idtab_alloc(s, &s->frametab, &s->framemask, 0) ||
	    store_idtab_alloc(s, &s->stacktab, &s->stackmask, 0))
		return -ENOMEM;
	return 0;
}

void store_intern_free(struct store *s)
{
	if (s->strtab)
		for (uint32_t i = 0; i <= s->strmask; i++)
			free(s->strtab[i]);
	free(s->strtab);
	free(s->frames);
	free(s->frametab);
	free(s->stacks);
	free(s->stacktab);
	free(s->pool);
}
