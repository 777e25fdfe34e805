// SPDX-License-Identifier: BSD-2-Clause
/*
 * The aggregation store.
 *
 * Interned data: strings (one allocation each, found through an open-addressing table of
 * pointers), frames and stacks (dense arrays indexed by id - 1, found through open-addressing
 * tables of ids). Stack frame ids live in one pool, appended in stack id order.
 *
 * Values: an array of buckets in time order, each an array of (pid, tid, stack, values) entries
 * plus a hash table over them while the bucket may still receive many samples. Buckets more than
 * two behind the newest are sealed: the table is freed and the entries shrunk to fit, because a
 * late sample for them is rare and rebuilding the table then is cheap.
 *
 * Reference counts say what is still needed: a stack counts the bucket entries naming it, a
 * frame the referenced stacks holding it, a string the referenced frames naming it. What drops
 * to zero is "dead": its approximate size is summed so that compaction runs when reclaiming pays.
 *
 * Memory: every allocation goes through s_alloc/s_realloc/s_free which charge an estimate of
 * what malloc really hands out (header and 16-byte rounding), so `bytes` follows the heap.
 */
#include "store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CAP (256ull << 20)
#define DEFAULT_BUCKET_NS 1000000000ull
/* Longer strings are cut (on a UTF-8 boundary): symbol names come from arbitrary binaries. */
#define MAX_STRING 4096
#define MAX_COMM 255
/* A stack deeper than this is refused; the sampler's own limit is far below. */
#define MAX_STACK_DEPTH 4096
/* Buckets this close to the newest keep their hash table. */
#define OPEN_BUCKETS 2

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

struct entry {
	uint32_t pid;
	uint32_t tid;
	uint32_t stack;
	uint32_t pad;
	uint64_t v[STORE_VALUE__COUNT];
};

struct bucket {
	uint64_t idx; /* start_ns / bucket_ns */
	struct entry *e;
	uint32_t n;
	uint32_t cap;
	uint32_t *tab; /* entry index + 1, 0 empty; NULL when sealed */
	uint32_t mask;
};

/* uint64 key -> pointer, linear probing with backward-shift deletion (no tombstones). */
struct pslot {
	uint64_t key;
	void *val; /* NULL: empty */
};

struct pmap {
	struct pslot *slots;
	uint32_t mask;
	uint32_t n;
};

struct proc {
	uint32_t pid;
	uint32_t uid;
	uint64_t ref_idx; /* newest bucket idx + 1 naming it; 0: none */
	bool exited;
	char *comm;
};

struct thread {
	uint32_t pid;
	uint32_t tid;
	uint64_t ref_idx;
	char *comm;
};

struct store {
	size_t cap;
	uint64_t bucket_ns;
	uint64_t bytes;
	uint64_t dead_bytes; /* estimate of what compaction would reclaim */

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

	struct pmap procs;
	struct pmap threads;

	uint64_t samples;
	uint64_t evicted_samples;
	uint64_t evicted_buckets;
	uint64_t generation;
	uint64_t compactions;
};

/* --- memory accounting ---------------------------------------------------------------------- */

/* What malloc uses for a request of n bytes: an 8-byte header, 16-byte granules, pages when
 * large enough to be mapped on its own. */
static uint64_t acost(size_t n)
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

static void *s_alloc(struct store *s, size_t n)
{
	void *p = malloc(n);

	if (p)
		s->bytes += acost(n);
	return p;
}

static void *s_zalloc(struct store *s, size_t n)
{
	void *p = calloc(1, n);

	if (p)
		s->bytes += acost(n);
	return p;
}

static void *s_realloc(struct store *s, void *p, size_t old, size_t n)
{
	void *q = realloc(p, n);

	if (q || !n) {
		s->bytes -= acost(old);
		s->bytes += acost(n);
	}
	return q;
}

static void s_free(struct store *s, void *p, size_t n)
{
	if (!p)
		return;
	s->bytes -= acost(n);
	free(p);
}

/* --- hashing -------------------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static uint32_t hash_bytes(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return (uint32_t)mix64(h);
}

static inline uint32_t entry_hash(uint32_t pid, uint32_t tid, uint32_t stack)
{
	return (uint32_t)mix64(((uint64_t)pid << 32 | tid) ^
			       ((uint64_t)stack * 0x9e3779b97f4a7c15ull));
}

static uint32_t stack_hash(const uint32_t *frames, size_t n)
{
	uint64_t h = n;

	for (size_t i = 0; i < n; i++)
		h = (h ^ frames[i]) * 0x9e3779b97f4a7c15ull + (h >> 29);
	return (uint32_t)mix64(h);
}

static uint32_t str_hash_of(const struct str *st)
{
	return st ? st->hash : 0x5bd1e995u;
}

static uint32_t frame_hash(enum frame_kind kind, const struct str *name, const struct str *module,
			   uint64_t address, const struct str *file, uint32_t line,
			   const struct str *build_id)
{
	uint64_t h = mix64(address ^ ((uint64_t)kind << 56) ^ ((uint64_t)line << 24));

	h = mix64(h ^ str_hash_of(name));
	h = mix64(h ^ ((uint64_t)str_hash_of(module) << 32) ^ str_hash_of(file));
	h = mix64(h ^ str_hash_of(build_id));
	return (uint32_t)h;
}

static inline struct str *str_of(const char *p)
{
	return p ? (struct str *)(void *)(p - offsetof(struct str, s)) : NULL;
}

/* --- pointer map ---------------------------------------------------------------------------- */

static int pmap_init(struct store *s, struct pmap *m, uint32_t nslots)
{
	m->slots = s_zalloc(s, nslots * sizeof(*m->slots));
	if (!m->slots)
		return -ENOMEM;
	m->mask = nslots - 1;
	m->n = 0;
	return 0;
}

static void pmap_fini(struct store *s, struct pmap *m)
{
	s_free(s, m->slots, (m->mask + 1) * sizeof(*m->slots));
	m->slots = NULL;
}

static void *pmap_get(const struct pmap *m, uint64_t key)
{
	uint32_t i = (uint32_t)mix64(key) & m->mask;

	for (;; i = (i + 1) & m->mask) {
		if (!m->slots[i].val)
			return NULL;
		if (m->slots[i].key == key)
			return m->slots[i].val;
	}
}

static void pmap_put_slot(struct pslot *slots, uint32_t mask, uint64_t key, void *val)
{
	uint32_t i = (uint32_t)mix64(key) & mask;

	while (slots[i].val)
		i = (i + 1) & mask;
	slots[i].key = key;
	slots[i].val = val;
}

/* The key must not be present. Returns 0 or -ENOMEM. */
static int pmap_put(struct store *s, struct pmap *m, uint64_t key, void *val)
{
	uint32_t nslots = m->mask + 1;

	if ((m->n + 1) * 4 > nslots * 3) {
		struct pslot *ns = s_zalloc(s, 2 * nslots * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		for (uint32_t i = 0; i < nslots; i++)
			if (m->slots[i].val)
				pmap_put_slot(ns, 2 * nslots - 1, m->slots[i].key, m->slots[i].val);
		s_free(s, m->slots, nslots * sizeof(*ns));
		m->slots = ns;
		m->mask = 2 * nslots - 1;
	}
	pmap_put_slot(m->slots, m->mask, key, val);
	m->n++;
	return 0;
}

/* Remove the entry in slot i, shifting later members of its cluster back. */
static void pmap_del_slot(struct pmap *m, uint32_t i)
{
	uint32_t j = i;

	m->slots[i].val = NULL;
	m->n--;
	for (;;) {
		uint32_t home;

		j = (j + 1) & m->mask;
		if (!m->slots[j].val)
			return;
		home = (uint32_t)mix64(m->slots[j].key) & m->mask;
		/* Move j into the hole unless its home lies cyclically in (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			m->slots[i] = m->slots[j];
			m->slots[j].val = NULL;
			i = j;
		}
	}
}

/* --- strings -------------------------------------------------------------------------------- */

static uint64_t str_cost(uint32_t len)
{
	/* The allocation plus its share of a table kept at most 3/4 full. */
	return acost(sizeof(struct str) + len + 1) + 2 * sizeof(struct str *);
}

static size_t clip_len(const char *p, size_t max)
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
	struct str **nt = s_zalloc(s, 2 * nslots * sizeof(*nt));

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
	s_free(s, s->strtab, nslots * sizeof(*nt));
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
	len = clip_len(p, MAX_STRING);
	h = hash_bytes(p, len);
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
	st = s_alloc(s, sizeof(*st) + len + 1);
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

static int idtab_alloc(struct store *s, uint32_t **tab, uint32_t *mask, uint32_t n)
{
	uint32_t nslots = 16;

	while (nslots * 3 < n * 4 + 4)
		nslots *= 2;
	*tab = s_zalloc(s, nslots * sizeof(uint32_t));
	if (!*tab)
		return -ENOMEM;
	*mask = nslots - 1;
	return 0;
}

static void idtab_insert(uint32_t *tab, uint32_t mask, uint32_t h, uint32_t id)
{
	uint32_t i;

	for (i = h & mask; tab[i]; i = (i + 1) & mask)
		;
	tab[i] = id;
}

static int frametab_rebuild(struct store *s, uint32_t want)
{
	uint32_t *tab, mask;

	if (idtab_alloc(s, &tab, &mask, want))
		return -ENOMEM;
	for (uint32_t id = 1; id <= s->nframes; id++)
		idtab_insert(tab, mask, s->frames[id - 1].hash, id);
	s_free(s, s->frametab, (s->framemask + 1) * sizeof(uint32_t));
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

	if (!s || !key || !key->name || (unsigned int)key->kind > FRAME_KIND_GPU) {
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
		void *nf = s_realloc(s, s->frames, s->frames_cap * sizeof(*fr), ncap * sizeof(*fr));

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

	if (idtab_alloc(s, &tab, &mask, want))
		return -ENOMEM;
	for (uint32_t id = 1; id <= s->nstacks; id++)
		idtab_insert(tab, mask, s->stacks[id - 1].hash, id);
	s_free(s, s->stacktab, (s->stackmask + 1) * sizeof(uint32_t));
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
		void *ns = s_realloc(s, s->stacks, s->stacks_cap * sizeof(*sr), ncap * sizeof(*sr));

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
		np = s_realloc(s, s->pool, s->pool_cap * sizeof(uint32_t), ncap * sizeof(uint32_t));
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

static void stack_ref(struct store *s, uint32_t id)
{
	struct stack_rec *sr = &s->stacks[id - 1];

	if (sr->refs++ == 0) {
		s->dead_bytes -= stack_cost(sr->n);
		for (uint32_t i = 0; i < sr->n; i++)
			frame_ref(s, s->pool[sr->off + i]);
	}
}

static void stack_unref(struct store *s, uint32_t id)
{
	struct stack_rec *sr = &s->stacks[id - 1];

	if (--sr->refs == 0) {
		s->dead_bytes += stack_cost(sr->n);
		for (uint32_t i = 0; i < sr->n; i++)
			frame_unref(s, s->pool[sr->off + i]);
	}
}

/* --- buckets -------------------------------------------------------------------------------- */

static int bucket_build_tab(struct store *s, struct bucket *b, uint32_t want)
{
	uint32_t *tab, mask;

	if (idtab_alloc(s, &tab, &mask, want))
		return -ENOMEM;
	for (uint32_t k = 0; k < b->n; k++) {
		const struct entry *e = &b->e[k];

		idtab_insert(tab, mask, entry_hash(e->pid, e->tid, e->stack), k + 1);
	}
	s_free(s, b->tab, b->tab ? (b->mask + 1) * sizeof(uint32_t) : 0);
	b->tab = tab;
	b->mask = mask;
	return 0;
}

static void bucket_seal(struct store *s, struct bucket *b)
{
	if (!b->tab)
		return;
	s_free(s, b->tab, (b->mask + 1) * sizeof(uint32_t));
	b->tab = NULL;
	b->mask = 0;
	if (b->n && b->n < b->cap) {
		void *ne =
		    s_realloc(s, b->e, b->cap * sizeof(struct entry), b->n * sizeof(struct entry));

		if (ne) {
			b->e = ne;
			b->cap = b->n;
		}
	}
}

static void bucket_release(struct store *s, struct bucket *b)
{
	s_free(s, b->tab, (b->mask + 1) * sizeof(uint32_t));
	s_free(s, b->e, b->cap * sizeof(struct entry));
}

/* Index of the first bucket with idx >= want (nb when none). */
static uint32_t bucket_lower(const struct store *s, uint64_t want)
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
	pos = (s->nb && idx > s->b[s->nb - 1].idx) ? s->nb : bucket_lower(s, idx);
	if (pos < s->nb && s->b[pos].idx == idx)
		return &s->b[pos];
	if (s->nb == s->bcap) {
		uint32_t ncap = s->bcap ? s->bcap * 2 : 64;
		void *nbk = s_realloc(s, s->b, s->bcap * sizeof(*b), ncap * sizeof(*b));

		if (!nbk)
			return NULL;
		s->b = nbk;
		s->bcap = ncap;
	}
	memmove(&s->b[pos + 1], &s->b[pos], (s->nb - pos) * sizeof(*b));
	b = &s->b[pos];
	memset(b, 0, sizeof(*b));
	b->idx = idx;
	s->nb++;
	if (idx + 1 > s->max_idx_plus1)
		s->max_idx_plus1 = idx + 1;
	if (pos == s->nb - 1) {
		/* Size like the previous bucket: spares the doublings and rehashes of each one. */
		uint32_t hint = pos ? s->b[pos - 1].n : 0;

		if (hint > 8) {
			hint += hint / 4;
			b->e = s_alloc(s, hint * sizeof(struct entry));
			if (b->e)
				b->cap = hint;
			if (b->e && idtab_alloc(s, &b->tab, &b->mask, hint))
				b->tab = NULL;
		}
		seal_old(s);
	} else {
		s->reopened = true; /* buckets before pos moved away from the newest */
	}
	return b;
}

/* Returns the entry for the key in b (new ones zeroed, *created set), NULL on -ENOMEM. */
static struct entry *bucket_entry(struct store *s, struct bucket *b, uint32_t pid, uint32_t tid,
				  uint32_t stack, bool *created)
{
	uint32_t h = entry_hash(pid, tid, stack), i, k;
	struct entry *e;

	if (!b->tab) {
		if (bucket_build_tab(s, b, b->n + 1))
			return NULL;
		if (b->n)
			s->reopened = true;
	}
	for (i = h & b->mask; (k = b->tab[i]); i = (i + 1) & b->mask) {
		e = &b->e[k - 1];
		if (e->stack == stack && e->tid == tid && e->pid == pid)
			return e;
	}
	if (b->n == b->cap) {
		uint32_t ncap = b->cap ? b->cap * 2 : 8;
		void *ne = s_realloc(s, b->e, b->cap * sizeof(*e), ncap * sizeof(*e));

		if (!ne)
			return NULL;
		b->e = ne;
		b->cap = ncap;
	}
	if ((b->n + 1) * 4 > (b->mask + 1) * 3) {
		if (bucket_build_tab(s, b, 2 * (b->mask + 1)))
			return NULL;
		for (i = h & b->mask; b->tab[i]; i = (i + 1) & b->mask)
			;
	}
	e = &b->e[b->n];
	memset(e, 0, sizeof(*e));
	e->pid = pid;
	e->tid = tid;
	e->stack = stack;
	b->tab[i] = ++b->n;
	*created = true;
	return e;
}

/* --- processes and threads ------------------------------------------------------------------ */

static inline uint64_t thread_key(uint32_t pid, uint32_t tid)
{
	return (uint64_t)pid << 32 | tid;
}

static int set_comm(struct store *s, char **dst, const char *comm)
{
	size_t len;
	char *p;

	if (!comm)
		comm = "";
	len = clip_len(comm, MAX_COMM);
	if (*dst && strlen(*dst) == len && !memcmp(*dst, comm, len))
		return 0;
	p = s_alloc(s, len + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, comm, len);
	p[len] = '\0';
	if (*dst)
		s_free(s, *dst, strlen(*dst) + 1);
	*dst = p;
	return 0;
}

int store__set_process(struct store *s, uint32_t pid, uint32_t uid, const char *comm)
{
	struct proc *p;
	int err;

	if (!s)
		return -EINVAL;
	p = pmap_get(&s->procs, pid);
	if (!p) {
		p = s_zalloc(s, sizeof(*p));
		if (!p)
			return -ENOMEM;
		p->pid = pid;
		err = pmap_put(s, &s->procs, pid, p);
		if (err) {
			s_free(s, p, sizeof(*p));
			return err;
		}
	}
	/* A reused pid or an exec: the record describes the newest process. */
	p->uid = uid;
	p->exited = false;
	if (p->ref_idx < s->max_idx_plus1)
		p->ref_idx = s->max_idx_plus1;
	return set_comm(s, &p->comm, comm);
}

int store__set_thread(struct store *s, uint32_t pid, uint32_t tid, const char *comm)
{
	struct thread *t;
	int err;

	if (!s)
		return -EINVAL;
	t = pmap_get(&s->threads, thread_key(pid, tid));
	if (!t) {
		t = s_zalloc(s, sizeof(*t));
		if (!t)
			return -ENOMEM;
		t->pid = pid;
		t->tid = tid;
		err = pmap_put(s, &s->threads, thread_key(pid, tid), t);
		if (err) {
			s_free(s, t, sizeof(*t));
			return err;
		}
	}
	if (t->ref_idx < s->max_idx_plus1)
		t->ref_idx = s->max_idx_plus1;
	return set_comm(s, &t->comm, comm);
}

void store__process_exited(struct store *s, uint32_t pid)
{
	struct proc *p = s ? pmap_get(&s->procs, pid) : NULL;

	if (p)
		p->exited = true;
}

bool store__process(const struct store *s, uint32_t pid, struct store_process_info *out)
{
	const struct proc *p = s ? pmap_get(&s->procs, pid) : NULL;

	if (!p)
		return false;
	out->pid = p->pid;
	out->uid = p->uid;
	out->comm = p->comm ? p->comm : "";
	out->exited = p->exited;
	return true;
}

const char *store__thread_name(const struct store *s, uint32_t pid, uint32_t tid)
{
	const struct thread *t = s ? pmap_get(&s->threads, thread_key(pid, tid)) : NULL;

	return t ? t->comm : NULL;
}

static void proc_release(struct store *s, struct proc *p)
{
	if (p->comm)
		s_free(s, p->comm, strlen(p->comm) + 1);
	s_free(s, p, sizeof(*p));
}

static void thread_release(struct store *s, struct thread *t)
{
	if (t->comm)
		s_free(s, t->comm, strlen(t->comm) + 1);
	s_free(s, t, sizeof(*t));
}

/* Drop metadata no remaining bucket refers to (exited processes; any thread). */
static void sweep_meta(struct store *s)
{
	uint64_t oldest_plus1 = s->nb ? s->b[0].idx + 1 : UINT64_MAX;
	uint32_t i;

	for (i = 0; i <= s->procs.mask;) {
		struct proc *p = s->procs.slots[i].val;

		if (p && p->exited && p->ref_idx < oldest_plus1) {
			pmap_del_slot(&s->procs, i);
			proc_release(s, p);
			continue; /* the slot may hold a shifted entry now */
		}
		i++;
	}
	for (i = 0; i <= s->threads.mask;) {
		struct thread *t = s->threads.slots[i].val;

		if (t && t->ref_idx < oldest_plus1) {
			pmap_del_slot(&s->threads, i);
			thread_release(s, t);
			continue;
		}
		i++;
	}
}

/* --- eviction and compaction ---------------------------------------------------------------- */

static void evict_oldest(struct store *s)
{
	struct bucket *b = &s->b[0];

	for (uint32_t k = 0; k < b->n; k++) {
		s->evicted_samples += b->e[k].v[STORE_VALUE_CPU_SAMPLES];
		stack_unref(s, b->e[k].stack);
	}
	if (!s->has_evicted || b->idx > s->evicted_upto)
		s->evicted_upto = b->idx;
	s->has_evicted = true;
	bucket_release(s, b);
	s->nb--;
	memmove(&s->b[0], &s->b[1], s->nb * sizeof(*b));
	s->evicted_buckets++;
}

int store__compact(struct store *s)
{
	uint32_t *smap = NULL, *fmap = NULL, *ftab = NULL, *stab = NULL, fmask, smask;
	struct str **strtab = NULL;
	uint32_t nf = 0, ns = 0, nstr = 0, strmask = 15, pos = 0;
	int err = -ENOMEM;

	if (!s)
		return -EINVAL;
	/* Everything that can fail is allocated before the first change. */
	smap = calloc(s->nstacks + 1, sizeof(*smap));
	fmap = calloc(s->nframes + 1, sizeof(*fmap));
	if (!smap || !fmap)
		goto out;
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
		err = 0;
		goto out;
	}
	while ((strmask + 1) * 3 < nstr * 4 + 4)
		strmask = 2 * strmask + 1;
	strtab = s_zalloc(s, (strmask + 1) * sizeof(*strtab));
	if (!strtab || idtab_alloc(s, &ftab, &fmask, nf) || idtab_alloc(s, &stab, &smask, ns))
		goto out_tabs;

	/* Strings: survivors keep their address, so frames need no fix-up. */
	for (uint32_t i = 0; i <= s->strmask; i++) {
		struct str *st = s->strtab[i];
		uint32_t j;

		if (!st)
			continue;
		if (!st->refs) {
			s->str_bytes -= str_cost(st->len);
			s_free(s, st, sizeof(*st) + st->len + 1);
			continue;
		}
		for (j = st->hash & strmask; strtab[j]; j = (j + 1) & strmask)
			;
		strtab[j] = st;
	}
	s_free(s, s->strtab, (s->strmask + 1) * sizeof(*strtab));
	s->strtab = strtab;
	s->strmask = strmask;
	s->nstr = nstr;

	/* Frames move down in id order; their hash does not depend on ids. */
	for (uint32_t id = 1; id <= s->nframes; id++) {
		if (!fmap[id])
			continue;
		s->frames[fmap[id] - 1] = s->frames[id - 1];
		idtab_insert(ftab, fmask, s->frames[fmap[id] - 1].hash, fmap[id]);
	}
	s->nframes = nf;
	s_free(s, s->frametab, (s->framemask + 1) * sizeof(uint32_t));
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
		idtab_insert(stab, smask, sr.hash, smap[id]);
	}
	s->nstacks = ns;
	s->pool_n = pos;
	s_free(s, s->stacktab, (s->stackmask + 1) * sizeof(uint32_t));
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
				idtab_insert(b->tab, b->mask,
					     entry_hash(b->e[j].pid, b->e[j].tid, b->e[j].stack),
					     j + 1);
		}
	}

	/* Give memory back; a failed shrink only keeps the larger block. */
	if (s->frames_cap > 64 && nf < s->frames_cap / 2) {
		uint32_t ncap = nf + nf / 4 + 64;
		void *p = s_realloc(s, s->frames, s->frames_cap * sizeof(struct frame_rec),
				    ncap * sizeof(struct frame_rec));

		if (p) {
			s->frames = p;
			s->frames_cap = ncap;
		}
	}
	if (s->stacks_cap > 64 && ns < s->stacks_cap / 2) {
		uint32_t ncap = ns + ns / 4 + 64;
		void *p = s_realloc(s, s->stacks, s->stacks_cap * sizeof(struct stack_rec),
				    ncap * sizeof(struct stack_rec));

		if (p) {
			s->stacks = p;
			s->stacks_cap = ncap;
		}
	}
	if (s->pool_cap > 256 && pos < s->pool_cap / 2) {
		uint32_t ncap = pos + pos / 4 + 256;
		void *p =
		    s_realloc(s, s->pool, s->pool_cap * sizeof(uint32_t), ncap * sizeof(uint32_t));

		if (p) {
			s->pool = p;
			s->pool_cap = ncap;
		}
	}
	s->dead_bytes = 0;
	s->generation++;
	s->compactions++;
	err = 0;
	goto out;
out_tabs:
	if (strtab)
		s_free(s, strtab, (strmask + 1) * sizeof(*strtab));
	if (ftab)
		s_free(s, ftab, (fmask + 1) * sizeof(uint32_t));
	if (stab)
		s_free(s, stab, (smask + 1) * sizeof(uint32_t));
out:
	free(smap);
	free(fmap);
	return err;
}

static uint64_t interned_bytes(const struct store *s)
{
	return acost(s->frames_cap * sizeof(struct frame_rec)) +
	       acost((s->framemask + 1) * sizeof(uint32_t)) +
	       acost(s->stacks_cap * sizeof(struct stack_rec)) +
	       acost((s->stackmask + 1) * sizeof(uint32_t)) +
	       acost(s->pool_cap * sizeof(uint32_t)) +
	       acost((s->strmask + 1) * sizeof(struct str *)) + s->str_bytes -
	       (uint64_t)s->nstr * 2 * sizeof(struct str *);
}

/*
 * Get back under the cap. Compaction loses nothing, so it comes first when it reclaims a real
 * share of the cap (that also bounds its cost: each run frees at least cap/8 for O(cap) work);
 * then the oldest buckets go; with no bucket left everything interned is dead.
 */
static void enforce_cap(struct store *s)
{
	bool evicted = false, compact_failed = false, swept = false;

	while (s->bytes > s->cap) {
		if (s->dead_bytes >= s->cap / 8 && !compact_failed) {
			/* Resets dead_bytes: runs again only after evictions kill more. */
			if (store__compact(s))
				compact_failed = true;
			continue;
		}
		if (s->nb) {
			evict_oldest(s);
			evicted = true;
			continue;
		}
		if (evicted && !swept) {
			sweep_meta(s);
			swept = true;
			continue;
		}
		/* No bucket left: every interned object is dead. */
		if (s->dead_bytes && !compact_failed) {
			if (store__compact(s))
				compact_failed = true;
			continue;
		}
		break;
	}
	if (evicted && !swept)
		sweep_meta(s);
}

int store__add(struct store *s, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack,
	       enum store_value col, uint64_t value)
{
	uint64_t idx;
	struct bucket *b;
	struct entry *e;
	bool created = false;

	if (!s || (unsigned int)col >= STORE_VALUE__COUNT || !stack || stack > s->nstacks)
		return -EINVAL;
	idx = ts_ns / s->bucket_ns;
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
	e = bucket_entry(s, b, pid, tid, stack, &created);
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
	e->v[col] += value;
	if (ts_ns > s->newest_ns)
		s->newest_ns = ts_ns;
	if (created) {
		struct proc *p = pmap_get(&s->procs, pid);
		struct thread *t = pmap_get(&s->threads, thread_key(pid, tid));

		stack_ref(s, stack);
		if (p && p->ref_idx < idx + 1)
			p->ref_idx = idx + 1;
		if (t && t->ref_idx < idx + 1)
			t->ref_idx = idx + 1;
	}
	if (s->bytes > s->cap)
		enforce_cap(s);
	return 0;
nomem:
	if (col == STORE_VALUE_CPU_SAMPLES)
		s->samples -= value;
	return -ENOMEM;
}

/* --- query ---------------------------------------------------------------------------------- */

struct agg_row {
	uint32_t pid;
	uint32_t tid;
	uint32_t stack;
	uint32_t pad;
	uint64_t v[STORE_VALUE__COUNT];
};

struct agg {
	struct agg_row *rows; /* in first-seen order: the output order */
	uint32_t n;
	uint32_t cap;
	uint32_t *tab;
	uint32_t mask;
};

static int agg_grow_tab(struct agg *a)
{
	uint32_t nslots = (a->mask + 1) * 2;
	uint32_t *tab = calloc(nslots, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (uint32_t k = 0; k < a->n; k++)
		idtab_insert(tab, nslots - 1,
			     entry_hash(a->rows[k].pid, a->rows[k].tid, a->rows[k].stack), k + 1);
	free(a->tab);
	a->tab = tab;
	a->mask = nslots - 1;
	return 0;
}

static int agg_add(struct agg *a, const struct entry *e)
{
	uint32_t h = entry_hash(e->pid, e->tid, e->stack), i, k;
	struct agg_row *r;

	for (i = h & a->mask; (k = a->tab[i]); i = (i + 1) & a->mask) {
		r = &a->rows[k - 1];
		if (r->stack == e->stack && r->tid == e->tid && r->pid == e->pid) {
			for (int c = 0; c < STORE_VALUE__COUNT; c++)
				r->v[c] += e->v[c];
			return 0;
		}
	}
	if (a->n == a->cap) {
		uint32_t ncap = a->cap * 2;
		void *nr = realloc(a->rows, (size_t)ncap * sizeof(*r));

		if (!nr)
			return -ENOMEM;
		a->rows = nr;
		a->cap = ncap;
	}
	if ((a->n + 1) * 2 > a->mask + 1) {
		if (agg_grow_tab(a))
			return -ENOMEM;
		for (i = h & a->mask; a->tab[i]; i = (i + 1) & a->mask)
			;
	}
	r = &a->rows[a->n];
	r->pid = e->pid;
	r->tid = e->tid;
	r->stack = e->stack;
	r->pad = 0;
	memcpy(r->v, e->v, sizeof(r->v));
	a->tab[i] = ++a->n;
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

int store__query(struct store *s, const struct store_query *q, store_query_cb cb, void *ctx)
{
	struct agg a = {0};
	uint32_t *pids = NULL, first, last, memo_pid = 0;
	uint64_t first_idx, nentries = 0;
	bool memo_valid = false, memo_ok = false;
	int err = 0;

	if (!s || !q || !cb || (q->npids && !q->pids))
		return -EINVAL;
	if (q->start_ns >= q->end_ns || !s->nb)
		return 0;
	/* Buckets whose start lies in [start, end): idx * w >= start and idx * w < end. */
	first_idx = q->start_ns / s->bucket_ns + (q->start_ns % s->bucket_ns != 0);
	first = bucket_lower(s, first_idx);
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

			if (q->tid && e->tid != q->tid)
				continue;
			if (pids && !pid_listed(pids, q->npids, e->pid))
				continue;
			if (q->filter_uid) {
				if (!memo_valid || memo_pid != e->pid) {
					const struct proc *p = pmap_get(&s->procs, e->pid);

					memo_pid = e->pid;
					memo_valid = true;
					memo_ok = p && p->uid == q->uid;
				}
				if (!memo_ok)
					continue;
			}
			err = agg_add(&a, e);
			if (err)
				goto out;
		}
	}
	for (uint32_t k = 0; k < a.n; k++) {
		err = cb(a.rows[k].pid, a.rows[k].tid, a.rows[k].stack, a.rows[k].v, ctx);
		if (err < 0)
			goto out;
	}
	err = 0;
out:
	free(a.rows);
	free(a.tab);
	free(pids);
	return err;
}

/* --- life cycle ----------------------------------------------------------------------------- */

struct store *store__new(const struct store_opts *opts)
{
	struct store *s = calloc(1, sizeof(*s));

	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->bytes = acost(sizeof(*s));
	s->cap = opts && opts->mem_cap ? opts->mem_cap : DEFAULT_CAP;
	s->bucket_ns = opts && opts->bucket_ns ? opts->bucket_ns : DEFAULT_BUCKET_NS;
	s->strmask = 15;
	s->strtab = s_zalloc(s, 16 * sizeof(*s->strtab));
	if (!s->strtab || idtab_alloc(s, &s->frametab, &s->framemask, 0) ||
	    idtab_alloc(s, &s->stacktab, &s->stackmask, 0) || pmap_init(s, &s->procs, 16) ||
	    pmap_init(s, &s->threads, 16)) {
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
	free(s->b);
	if (s->strtab)
		for (uint32_t i = 0; i <= s->strmask; i++)
			free(s->strtab[i]);
	free(s->strtab);
	free(s->frames);
	free(s->frametab);
	free(s->stacks);
	free(s->stacktab);
	free(s->pool);
	if (s->procs.slots)
		for (uint32_t i = 0; i <= s->procs.mask; i++)
			if (s->procs.slots[i].val)
				proc_release(s, s->procs.slots[i].val);
	if (s->threads.slots)
		for (uint32_t i = 0; i <= s->threads.mask; i++)
			if (s->threads.slots[i].val)
				thread_release(s, s->threads.slots[i].val);
	pmap_fini(s, &s->procs);
	pmap_fini(s, &s->threads);
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
	out->frames = s->nframes;
	out->stacks = s->nstacks;
	out->processes = s->procs.n;
	out->threads = s->threads.n;
	out->buckets = s->nb;
	out->oldest_ns = s->nb ? s->b[0].idx * s->bucket_ns : 0;
	out->newest_ns = s->nb ? s->newest_ns : 0;
	out->generation = s->generation;
	out->compactions = s->compactions;
	out->interned_bytes = interned_bytes(s);
}

uint64_t store__bucket_ns(const struct store *s)
{
	return s ? s->bucket_ns : DEFAULT_BUCKET_NS;
}
