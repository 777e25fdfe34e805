// SPDX-License-Identifier: BSD-2-Clause
/*
 * Store query -> Profile, and the frame/stack/string tables shared with the GPU module's Trace.
 * Two passes: the first walks the query result and numbers what it references (stacks, frames,
 * strings, processes, threads) in first-seen order, so the tables are dense and the output is
 * deterministic for a given store; the second fills the messages. All the Profile's memory is
 * one block sized after the first pass, with the Profile at its start, so dump__free() is a
 * single free() and building costs one large allocation. A Trace's tables are one block too,
 * opened by its strings array.
 */
#include "dump.h"
#include "grow.h"
#include "hash.h"

#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

/* Growable array of fixed-size items, scratch memory of one build. */
struct vec {
	void *p;
	size_t n;
	size_t cap;
};

static void *vec_push(struct vec *v, size_t item)
{
	if (grow_array(&v->p, &v->cap, v->n + 1, item))
		return NULL;
	return (char *)v->p + item * v->n++;
}

/* uint64 key -> dense index, insert-only, for processes and threads. */
struct idxmap {
	uint64_t *keys;
	uint32_t *vals; /* index + 1; 0: empty */
	uint32_t mask;
	uint32_t n;
};

static int idxmap_init(struct idxmap *m, uint32_t nslots)
{
	m->keys = malloc(nslots * sizeof(*m->keys));
	m->vals = calloc(nslots, sizeof(*m->vals));
	m->mask = nslots - 1;
	m->n = 0;
	return m->keys && m->vals ? 0 : -ENOMEM;
}

static void idxmap_fini(struct idxmap *m)
{
	free(m->keys);
	free(m->vals);
}

/* Sets *created when the key is new (its index is then the count before the call). Returns the
 * index, or -ENOMEM. */
static int64_t idxmap_get_or_add(struct idxmap *m, uint64_t key, bool *created)
{
	uint32_t i;

	for (i = (uint32_t)hash_mix64(key) & m->mask; m->vals[i]; i = (i + 1) & m->mask)
		if (m->keys[i] == key)
			return m->vals[i] - 1;
	if ((m->n + 1) * 2 > m->mask + 1) {
		struct idxmap g;

		if (idxmap_init(&g, 2 * (m->mask + 1))) {
			idxmap_fini(&g);
			return -ENOMEM;
		}
		for (uint32_t j = 0; j <= m->mask; j++) {
			uint32_t k;

			if (!m->vals[j])
				continue;
			for (k = (uint32_t)hash_mix64(m->keys[j]) & g.mask; g.vals[k];
			     k = (k + 1) & g.mask)
				;
			g.keys[k] = m->keys[j];
			g.vals[k] = m->vals[j];
		}
		g.n = m->n;
		idxmap_fini(m);
		*m = g;
		for (i = (uint32_t)hash_mix64(key) & m->mask; m->vals[i]; i = (i + 1) & m->mask)
			;
	}
	m->keys[i] = key;
	m->vals[i] = ++m->n;
	*created = true;
	return m->n - 1;
}

/*
 * Strings by content. The texts stay owned by the store (or are literals) until laid out, except
 * those the caller of dump_tables__string passed: those are copied into `owned`.
 */
struct strset {
	struct vec strs;  /* const char * */
	size_t bytes;	  /* sum of lengths + NULs */
	struct vec owned; /* char *: copies to free */
	uint32_t *tab;	  /* index + 1 */
	uint32_t *hashes;
	uint32_t mask;
};

static uint32_t str_hash(const char *p)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *p; p++) {
		h ^= (unsigned char)*p;
		h *= 0x100000001b3ull;
	}
	return (uint32_t)hash_mix64(h);
}

static int strset_grow(struct strset *ss)
{
	uint32_t nslots = ss->mask ? 2 * (ss->mask + 1) : 4096;
	uint32_t *tab = calloc(nslots, sizeof(*tab));
	uint32_t *hashes = realloc(ss->hashes, nslots / 2 * sizeof(*hashes));

	if (!tab || !hashes) {
		free(tab);
		if (hashes)
			ss->hashes = hashes;
		return -ENOMEM;
	}
	ss->hashes = hashes;
	for (uint32_t k = 0; k < ss->strs.n; k++) {
		uint32_t i;

		for (i = hashes[k] & (nslots - 1); tab[i]; i = (i + 1) & (nslots - 1))
			;
		tab[i] = k + 1;
	}
	free(ss->tab);
	ss->tab = tab;
	ss->mask = nslots - 1;
	return 0;
}

/* Returns the index of p (NULL means ""), copying a new p when `copy`, or -ENOMEM. */
static int64_t strset_index(struct strset *ss, const char *p, bool copy)
{
	const char **strs = ss->strs.p;
	const char **slot;
	char **own;
	uint32_t h, i, k;

	if (!p)
		p = "";
	h = str_hash(p);
	for (i = h & ss->mask; (k = ss->tab[i]); i = (i + 1) & ss->mask)
		if (ss->hashes[k - 1] == h && !strcmp(strs[k - 1], p))
			return k - 1;
	if ((ss->strs.n + 1) * 2 > ss->mask + 1) {
		if (strset_grow(ss))
			return -ENOMEM;
		for (i = h & ss->mask; ss->tab[i]; i = (i + 1) & ss->mask)
			;
	}
	if (copy) {
		own = vec_push(&ss->owned, sizeof(*own));
		if (!own)
			return -ENOMEM;
		*own = strdup(p);
		if (!*own) {
			ss->owned.n--;
			return -ENOMEM;
		}
		p = *own;
	}
	slot = vec_push(&ss->strs, sizeof(*slot));
	if (!slot)
		return -ENOMEM; /* a copy stays in `owned` until the set is freed */
	*slot = p;
	ss->hashes[ss->strs.n - 1] = h;
	ss->tab[i] = (uint32_t)ss->strs.n;
	ss->bytes += strlen(p) + 1;
	return (int64_t)ss->strs.n - 1;
}

static void strset_fini(struct strset *ss)
{
	char **own = ss->owned.p;

	for (size_t k = 0; k < ss->owned.n; k++)
		free(own[k]);
	free(ss->owned.p);
	free(ss->strs.p);
	free(ss->tab);
	free(ss->hashes);
}

/* --- frame, stack and string tables -------------------------------------------------------- */

struct dump_tables {
	struct store *s;
	bool hide_kernel_addresses;
	struct vec stacks;   /* uint32_t store stack id, by dense index */
	struct vec frames;   /* uint32_t store frame id, by dense index */
	uint32_t *stack_map; /* store stack id -> dense index + 1 */
	uint32_t *frame_map; /* store frame id -> dense index + 1 */
	uint64_t nstack_ids; /* the maps cover ids 1..n */
	uint64_t nframe_ids;
	uint64_t stack_frames; /* sum of the depths of the numbered stacks */
	struct strset strs;
};

/* Zero-extends a map to cover ids 1..n. Returns 0 or -ENOMEM. */
static int map_resize(uint32_t **map, uint64_t *have, uint64_t n)
{
	uint32_t *m;

	if (n <= *have)
		return 0;
	m = realloc(*map, (n + 1) * sizeof(*m));
	if (!m)
		return -ENOMEM;
	memset(&m[*have + 1], 0, (n - *have) * sizeof(*m));
	*map = m;
	*have = n;
	return 0;
}

/* The store interned more since the maps were sized: cover its ids now. Returns 0 or -ENOMEM. */
static int tables_fit(struct dump_tables *t)
{
	struct store_stats st;

	store__stats(t->s, &st);
	if (map_resize(&t->stack_map, &t->nstack_ids, st.stacks) ||
	    map_resize(&t->frame_map, &t->nframe_ids, st.frames))
		return -ENOMEM;
	return 0;
}

struct dump_tables *dump_tables__new(struct store *s, bool hide_kernel_addresses)
{
	struct dump_tables *t;

	if (!s) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		goto nomem;
	t->s = s;
	t->hide_kernel_addresses = hide_kernel_addresses;
	t->stack_map = calloc(1, sizeof(uint32_t));
	t->frame_map = calloc(1, sizeof(uint32_t));
	if (!t->stack_map || !t->frame_map || tables_fit(t) || strset_grow(&t->strs) ||
	    strset_index(&t->strs, "", false) < 0)
		goto nomem;
	return t;
nomem:
	dump_tables__free(t);
	errno = ENOMEM;
	return NULL;
}

void dump_tables__free(struct dump_tables *t)
{
	if (!t)
		return;
	free(t->stacks.p);
	free(t->frames.p);
	free(t->stack_map);
	free(t->frame_map);
	strset_fini(&t->strs);
	free(t);
}

/* Numbers frame `id` and its strings. Returns 0, -EINVAL for an unknown id, or -ENOMEM. */
static int tables_frame(struct dump_tables *t, uint32_t id)
{
	const struct store_frame *f;
	uint32_t *slot;

	if (id > t->nframe_ids && tables_fit(t))
		return -ENOMEM;
	f = store__frame(t->s, id);
	if (!f || id > t->nframe_ids)
		return -EINVAL;
	if (t->frame_map[id])
		return 0;
	if (strset_index(&t->strs, f->name, false) < 0 ||
	    (f->module && strset_index(&t->strs, f->module, false) < 0) ||
	    (f->file && strset_index(&t->strs, f->file, false) < 0) ||
	    (f->build_id && strset_index(&t->strs, f->build_id, false) < 0))
		return -ENOMEM;
	slot = vec_push(&t->frames, sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	*slot = id;
	t->frame_map[id] = (uint32_t)t->frames.n;
	return 0;
}

int dump_tables__stack(struct dump_tables *t, uint32_t stack_id, uint32_t *idx)
{
	const uint32_t *fr;
	uint32_t *slot;
	size_t n;
	int err;

	if (!t || !idx || !stack_id)
		return -EINVAL;
	if (stack_id <= t->nstack_ids && t->stack_map[stack_id]) {
		/* The common case: a stack seen before. */
		*idx = t->stack_map[stack_id] - 1;
		return 0;
	}
	if (stack_id > t->nstack_ids && tables_fit(t))
		return -ENOMEM;
	if (stack_id > t->nstack_ids || !store__stack(t->s, stack_id, &fr, &n))
		return -EINVAL;
	/* A failure part way leaves extra frames numbered: harmless, they are valid. */
	for (size_t j = 0; j < n; j++) {
		err = tables_frame(t, fr[j]);
		if (err)
			return err;
	}
	slot = vec_push(&t->stacks, sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	*slot = stack_id;
	t->stack_map[stack_id] = (uint32_t)t->stacks.n;
	t->stack_frames += n;
	*idx = t->stack_map[stack_id] - 1;
	return 0;
}

int dump_tables__string(struct dump_tables *t, const char *s, uint32_t *idx)
{
	int64_t i;

	if (!t || !idx)
		return -EINVAL;
	i = strset_index(&t->strs, s, true);
	if (i < 0)
		return (int)i;
	*idx = (uint32_t)i;
	return 0;
}

/* Index of a string numbered before layout (it cannot fail then). */
static uint32_t sidx(struct dump_tables *t, const char *p)
{
	return (uint32_t)strset_index(&t->strs, p, false);
}

/* Carves aligned pieces out of the one block. */
struct carver {
	char *p;
	size_t off;
};

static void *carve(struct carver *c, size_t n, size_t align)
{
	void *r;

	c->off = (c->off + align - 1) & ~(align - 1);
	r = c->p ? c->p + c->off : NULL;
	c->off += n;
	return r;
}

static Profd__FrameKind proto_kind(enum frame_kind k)
{
	switch (k) {
	case FRAME_KIND_KERNEL:
		return PROFD__FRAME_KIND__FRAME_KERNEL;
	case FRAME_KIND_NATIVE:
		return PROFD__FRAME_KIND__FRAME_NATIVE;
	case FRAME_KIND_PYTHON:
		return PROFD__FRAME_KIND__FRAME_PYTHON;
	case FRAME_KIND_GPU:
		return PROFD__FRAME_KIND__FRAME_GPU;
	case FRAME_KIND_NVTX:
		return PROFD__FRAME_KIND__FRAME_NVTX;
	case FRAME_KIND_STATE:
		return PROFD__FRAME_KIND__FRAME_STATE;
	default:
		return PROFD__FRAME_KIND__FRAME_UNKNOWN;
	}
}

/* The laid-out tables, for the message that carries them. */
struct tables_out {
	char **strings;
	size_t n_strings;
	Profd__Frame **frames;
	size_t n_frames;
	Profd__Stack **stacks;
	size_t n_stacks;
};

/*
 * Lays out the tables from c (the strings array first); with c->p NULL only measures. Both runs
 * take the same pieces in the same order.
 */
static void tables_lay_out(struct dump_tables *t, struct carver *c, struct tables_out *o)
{
	size_t nstr = t->strs.strs.n, nfr = t->frames.n, nst = t->stacks.n;
	char **strings = carve(c, nstr * sizeof(char *), alignof(char *));
	char *text = carve(c, t->strs.bytes, 1);
	Profd__Frame **frame_ptrs = carve(c, nfr * sizeof(void *), alignof(void *));
	Profd__Frame *frames = carve(c, nfr * sizeof(*frames), alignof(Profd__Frame));
	Profd__Stack **stack_ptrs = carve(c, nst * sizeof(void *), alignof(void *));
	Profd__Stack *stacks = carve(c, nst * sizeof(*stacks), alignof(Profd__Stack));
	uint32_t *stack_frames = carve(c, t->stack_frames * sizeof(uint32_t), alignof(uint32_t));
	const char **src = t->strs.strs.p;

	if (!c->p)
		return;
	for (size_t k = 0; k < nstr; k++) {
		size_t len = strlen(src[k]) + 1;

		memcpy(text, src[k], len);
		strings[k] = text;
		text += len;
	}
	o->n_strings = nstr;
	o->strings = strings;

	for (size_t k = 0; k < nfr; k++) {
		const struct store_frame *f = store__frame(t->s, ((uint32_t *)t->frames.p)[k]);
		Profd__Frame *pf = &frames[k];

		profd__frame__init(pf);
		pf->kind = proto_kind(f->kind);
		pf->name = sidx(t, f->name);
		/*
		 * Named kernel frames are kept per function, without an address; and kernel
		 * addresses would defeat KASLR for callers who are not root.
		 */
		pf->has_address =
		    f->address != 0 && !(t->hide_kernel_addresses && f->kind == FRAME_KIND_KERNEL);
		pf->address = pf->has_address ? f->address : 0;
		if (f->module) {
			pf->has_module = 1;
			pf->module = sidx(t, f->module);
		}
		if (f->file) {
			pf->has_file = 1;
			pf->file = sidx(t, f->file);
		}
		if (f->line) {
			pf->has_line = 1;
			pf->line = f->line;
		}
		if (f->build_id) {
			pf->has_build_id = 1;
			pf->build_id = sidx(t, f->build_id);
		}
		frame_ptrs[k] = pf;
	}
	o->n_frames = nfr;
	o->frames = frame_ptrs;

	for (size_t k = 0; k < nst; k++) {
		const uint32_t *fr;
		size_t n;

		store__stack(t->s, ((uint32_t *)t->stacks.p)[k], &fr, &n);
		profd__stack__init(&stacks[k]);
		for (size_t j = 0; j < n; j++)
			stack_frames[j] = t->frame_map[fr[j]] - 1;
		stacks[k].n_frames = n;
		stacks[k].frames = stack_frames;
		stack_frames += n;
		stack_ptrs[k] = &stacks[k];
	}
	o->n_stacks = nst;
	o->stacks = stack_ptrs;
}

int dump_tables__finish_trace(struct dump_tables *t, Profd__Trace *tr)
{
	struct tables_out o = {0};
	struct carver c = {0};

	if (!t || !tr)
		return -EINVAL;
	tables_lay_out(t, &c, &o);
	c.p = malloc(c.off);
	if (!c.p)
		return -ENOMEM;
	c.off = 0;
	tables_lay_out(t, &c, &o);
	/* The block opens with the strings array (never empty: "" is entry 0). */
	tr->n_strings = o.n_strings;
	tr->strings = o.strings;
	tr->n_frames = o.n_frames;
	tr->frames = o.frames;
	tr->n_stacks = o.n_stacks;
	tr->stacks = o.stacks;
	return 0;
}

void dump_tables__free_trace(Profd__Trace *tr)
{
	if (!tr)
		return;
	free(tr->strings);
	tr->n_strings = 0;
	tr->strings = NULL;
	tr->n_frames = 0;
	tr->frames = NULL;
	tr->n_stacks = 0;
	tr->stacks = NULL;
}

/* --- profile -------------------------------------------------------------------------------- */

struct row {
	uint32_t pid;
	uint32_t tid;
	uint32_t stack; /* dense index */
	uint32_t proc;	/* dense index of its process (a life of pid) */
	uint64_t v[STORE_VALUE__COUNT];
};

/*
 * A process is a life of its pid (store.h): proc keys are life << 32 | pid; a thread is keyed by
 * its process's dense index and its tid.
 */
#define PROC_KEY(pid, life) ((uint64_t)(life) << 32 | (pid))
#define PROC_KEY_PID(key) ((uint32_t)(key))
#define PROC_KEY_LIFE(key) ((uint32_t)((key) >> 32))
#define THREAD_KEY(proc, tid) ((uint64_t)(proc) << 32 | (tid))
#define THREAD_KEY_PROC(key) ((uint32_t)((key) >> 32))
#define THREAD_KEY_TID(key) ((uint32_t)(key))

struct build {
	struct store *s;
	struct dump_tables *t;
	struct vec rows;	/* struct row */
	struct idxmap procs;	/* PROC_KEY -> dense index */
	struct idxmap threads;	/* THREAD_KEY -> dense index */
	struct vec proc_keys;	/* uint64_t PROC_KEY: the Profile's processes */
	struct vec thread_keys; /* uint64_t THREAD_KEY */
	bool merge;		/* q->merge_processes: rows by (process name, stack), no threads */
	bool *reused;		/* per process: its pid names another process of the profile too */
};

/* One row of (pid's life, tid, stack); life 0: the newest life the store knows of pid. */
static int collect_life_row(uint32_t pid, uint32_t life, uint32_t tid, uint32_t stack,
			    const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct build *bd = ctx;
	struct store_process_info pi;
	struct row *r;
	bool created = false, any = false;
	int64_t proc;
	uint32_t idx;
	int err;

	/* Nothing to show (a column added zero): no sample, so no stack or thread either. */
	for (int c = 0; c < STORE_VALUE__COUNT; c++)
		any |= values[c] != 0;
	if (!any)
		return 0;
	err = dump_tables__stack(bd->t, stack, &idx);
	if (err)
		return err;
	if (!life && store__process(bd->s, pid, &pi))
		life = pi.life;
	proc = idxmap_get_or_add(&bd->procs, PROC_KEY(pid, life), &created);
	if (proc < 0)
		return -ENOMEM;
	if (created) {
		uint64_t *p = vec_push(&bd->proc_keys, sizeof(*p));

		if (!p)
			return -ENOMEM;
		*p = PROC_KEY(pid, life);
	}
	r = vec_push(&bd->rows, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->pid = pid;
	r->tid = tid;
	r->stack = idx;
	r->proc = (uint32_t)proc;
	memcpy(r->v, values, sizeof(r->v));
	if (bd->merge)
		return 0;
	created = false;
	if (idxmap_get_or_add(&bd->threads, THREAD_KEY(proc, tid), &created) < 0)
		return -ENOMEM;
	if (created) {
		uint64_t *k = vec_push(&bd->thread_keys, sizeof(*k));

		if (!k)
			return -ENOMEM;
		*k = THREAD_KEY(proc, tid);
	}
	return 0;
}

/* A row of pid's newest life: what sources without lives (GPU memory, live stacks) add. */
static int collect_row(uint32_t pid, uint32_t tid, uint32_t stack,
		       const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	return collect_life_row(pid, 0, tid, stack, values, ctx);
}

/* Number the value type names first, so they come right after "" whatever the data. */
static int number_value_types(struct build *bd)
{
	for (int c = 0; c < STORE_VALUE__COUNT; c++) {
		const char *type, *unit;

		store_value_type(c, &type, &unit);
		if (strset_index(&bd->t->strs, type, false) < 0 ||
		    strset_index(&bd->t->strs, unit, false) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Number the process and thread names, after the frames' strings. */
static int number_names(struct build *bd)
{
	for (size_t k = 0; k < bd->proc_keys.n; k++) {
		uint64_t key = ((uint64_t *)bd->proc_keys.p)[k];
		struct store_process_info pi = {0};
		const char *name = "";

		if (store__process_life(bd->s, PROC_KEY_PID(key), PROC_KEY_LIFE(key), &pi))
			name = pi.comm;
		if (strset_index(&bd->t->strs, name, false) < 0)
			return -ENOMEM;
		if (pi.exe && strset_index(&bd->t->strs, pi.exe, false) < 0)
			return -ENOMEM;
	}
	for (size_t k = 0; k < bd->thread_keys.n; k++) {
		uint64_t key = ((uint64_t *)bd->thread_keys.p)[k];
		uint64_t proc = ((uint64_t *)bd->proc_keys.p)[THREAD_KEY_PROC(key)];
		const char *name = store__thread_name_life(
		    bd->s, PROC_KEY_PID(proc), PROC_KEY_LIFE(proc), THREAD_KEY_TID(key));

		if (strset_index(&bd->t->strs, name, false) < 0)
			return -ENOMEM;
	}
	return 0;
}

/*
 * With c->p NULL only measures; with a block of the measured size, fills it. Both runs take
 * the same pieces in the same order.
 */
static Profd__Profile *lay_out(struct build *bd, struct carver *c, const struct dump_meta *meta)
{
	size_t nrow = bd->rows.n, nproc = bd->proc_keys.n, nthr = bd->thread_keys.n;
	struct tables_out o = {0};
	Profd__Profile *p = carve(c, sizeof(*p), alignof(Profd__Profile));
	Profd__ValueType **vt_ptrs = carve(c, STORE_VALUE__COUNT * sizeof(void *), alignof(void *));
	Profd__ValueType *vts =
	    carve(c, STORE_VALUE__COUNT * sizeof(*vts), alignof(Profd__ValueType));
	Profd__Sample **sample_ptrs = carve(c, nrow * sizeof(void *), alignof(void *));
	Profd__Sample *samples = carve(c, nrow * sizeof(*samples), alignof(Profd__Sample));
	uint64_t *values =
	    carve(c, nrow * STORE_VALUE__COUNT * sizeof(uint64_t), alignof(uint64_t));
	Profd__Process **proc_ptrs = carve(c, nproc * sizeof(void *), alignof(void *));
	Profd__Process *procs = carve(c, nproc * sizeof(*procs), alignof(Profd__Process));
	Profd__Thread **thr_ptrs = carve(c, nthr * sizeof(void *), alignof(void *));
	Profd__Thread *thrs = carve(c, nthr * sizeof(*thrs), alignof(Profd__Thread));
	const struct row *rows = bd->rows.p;
	struct dump_tables *t = bd->t;

	tables_lay_out(t, c, &o);
	if (!c->p)
		return NULL;
	profd__profile__init(p);
	p->n_strings = o.n_strings;
	p->strings = o.strings;
	p->n_frames = o.n_frames;
	p->frames = o.frames;
	p->n_stacks = o.n_stacks;
	p->stacks = o.stacks;

	for (int k = 0; k < STORE_VALUE__COUNT; k++) {
		const char *type, *unit;

		store_value_type(k, &type, &unit);
		profd__value_type__init(&vts[k]);
		vts[k].type = sidx(t, type);
		vts[k].unit = sidx(t, unit);
		vt_ptrs[k] = &vts[k];
	}
	p->n_value_types = STORE_VALUE__COUNT;
	p->value_types = vt_ptrs;

	for (size_t k = 0; k < nrow; k++) {
		Profd__Sample *ps = &samples[k];

		profd__sample__init(ps);
		ps->stack = rows[k].stack;
		ps->pid = rows[k].pid;
		ps->tid = rows[k].tid;
		if (bd->reused[rows[k].proc]) {
			ps->has_process = 1;
			ps->process = rows[k].proc + 1;
		}
		ps->n_values = STORE_VALUE__COUNT;
		ps->values = &values[k * STORE_VALUE__COUNT];
		memcpy(ps->values, rows[k].v, sizeof(rows[k].v));
		sample_ptrs[k] = ps;
	}
	p->n_samples = nrow;
	p->samples = sample_ptrs;

	for (size_t k = 0; k < nproc; k++) {
		struct store_process_info pi;
		Profd__Process *pp = &procs[k];

		uint64_t key = ((uint64_t *)bd->proc_keys.p)[k];

		profd__process__init(pp);
		pp->pid = PROC_KEY_PID(key);
		if (store__process_life(bd->s, pp->pid, PROC_KEY_LIFE(key), &pi)) {
			pp->name = sidx(t, pi.comm);
			pp->has_start_time = pi.start != 0;
			pp->start_time = pi.start;
			pp->has_uid = 1;
			pp->uid = pi.uid;
			pp->has_exited = 1;
			pp->exited = pi.exited;
			if (pi.exe) {
				pp->has_exe = 1;
				pp->exe = sidx(t, pi.exe);
			}
		}
		proc_ptrs[k] = pp;
	}
	p->n_processes = nproc;
	p->processes = proc_ptrs;

	for (size_t k = 0; k < nthr; k++) {
		uint64_t key = ((uint64_t *)bd->thread_keys.p)[k];
		Profd__Thread *pt = &thrs[k];

		uint64_t proc = ((uint64_t *)bd->proc_keys.p)[THREAD_KEY_PROC(key)];

		profd__thread__init(pt);
		pt->pid = PROC_KEY_PID(proc);
		pt->tid = THREAD_KEY_TID(key);
		pt->name =
		    sidx(t, store__thread_name_life(bd->s, pt->pid, PROC_KEY_LIFE(proc), pt->tid));
		if (bd->reused[THREAD_KEY_PROC(key)]) {
			pt->has_process = 1;
			pt->process = THREAD_KEY_PROC(key) + 1;
		}
		thr_ptrs[k] = pt;
	}
	p->n_threads = nthr;
	p->threads = thr_ptrs;

	p->has_start_ns = 1;
	p->start_ns = meta ? meta->start_ns : 0;
	p->has_end_ns = 1;
	p->end_ns = meta ? meta->end_ns : 0;
	if (meta) {
		p->has_realtime_offset_ns = 1;
		p->realtime_offset_ns = meta->realtime_offset_ns;
		if (meta->frequency_hz) {
			p->has_frequency_hz = 1;
			p->frequency_hz = meta->frequency_hz;
			p->has_period_ns = 1;
			p->period_ns = 1000000000ull / meta->frequency_hz;
		}
		p->has_samples_lost = meta->has_samples_lost;
		p->samples_lost = meta->samples_lost;
	}
	p->has_merged_processes = bd->merge;
	p->merged_processes = bd->merge;
	return p;
}

/* The tables and maps a build needs (nprocs: the processes' map's first size). */
static int build_init(struct build *bd, const struct dump_meta *meta, size_t nprocs)
{
	bd->t = dump_tables__new(bd->s, meta && meta->hide_kernel_addresses);
	if (!bd->t || idxmap_init(&bd->procs, nprocs) || idxmap_init(&bd->threads, 1024))
		return -ENOMEM;
	return number_value_types(bd);
}

/*
 * Number the collected names, then lay the profile out twice: once to size the one block it
 * lives in, once to fill it. Returns the profile or NULL (out of memory).
 */
/*
 * Mark the processes whose pid another process of the profile has too: only their samples and
 * threads need to say which process they are of (Sample.process, Thread.process); the others
 * are found by pid, as from a daemon without lives, and the dump stays as small. Returns 0 or
 * -ENOMEM.
 */
static int mark_reused(struct build *bd)
{
	const uint64_t *keys = bd->proc_keys.p;
	size_t n = bd->proc_keys.n;
	uint32_t *first = malloc((n ? n : 1) * sizeof(*first)); /* dense pid -> its first process */
	struct idxmap pids = {0};
	int err = -ENOMEM;

	free(bd->reused);
	bd->reused = calloc(n ? n : 1, sizeof(*bd->reused));
	if (!first || !bd->reused || idxmap_init(&pids, 64))
		goto out;
	for (size_t k = 0; k < n; k++) {
		bool created = false;
		int64_t d = idxmap_get_or_add(&pids, PROC_KEY_PID(keys[k]), &created);

		if (d < 0)
			goto out;
		if (created) {
			first[d] = (uint32_t)k;
		} else {
			bd->reused[k] = true;
			bd->reused[first[d]] = true;
		}
	}
	err = 0;
out:
	idxmap_fini(&pids);
	free(first);
	return err;
}

static Profd__Profile *build_carve(struct build *bd, const struct dump_meta *meta)
{
	struct carver c = {0};

	if (mark_reused(bd))
		return NULL;
	lay_out(bd, &c, meta);
	c.p = malloc(c.off);
	if (!c.p)
		return NULL;
	c.off = 0;
	return lay_out(bd, &c, meta);
}

static void build_fini(struct build *bd)
{
	dump_tables__free(bd->t);
	free(bd->rows.p);
	idxmap_fini(&bd->procs);
	idxmap_fini(&bd->threads);
	free(bd->proc_keys.p);
	free(bd->reused);
	free(bd->thread_keys.p);
}

int dump__build(struct store *s, const struct store_query *q, const struct dump_meta *meta,
		Profd__Profile **out)
{
	struct build bd = {.s = s, .merge = q && q->merge_processes};
	int err;

	if (!s || !q || !out)
		return -EINVAL;
	*out = NULL;
	err = build_init(&bd, meta, 256);
	if (err)
		goto out;
	err = store__query_lives(s, q, collect_life_row, &bd);
	if (!err && meta && meta->extra)
		err = meta->extra(meta->extra_ctx, q, meta->end_ns, collect_row, &bd);
	if (err)
		goto out;
	if (!bd.rows.n) {
		err = -ENODATA;
		goto out;
	}
	err = number_names(&bd);
	if (err)
		goto out;
	*out = build_carve(&bd, meta);
	err = *out ? 0 : -ENOMEM;
out:
	build_fini(&bd);
	return err;
}

int dump__threads(struct store *s, const struct dump_thread *th, size_t n,
		  const struct dump_meta *meta, Profd__Profile **out)
{
	struct build bd = {.s = s};
	uint64_t values[STORE_VALUE__COUNT] = {0};
	Profd__Profile *p;
	int err;

	if (!s || (n && !th) || !out)
		return -EINVAL;
	*out = NULL;
	if (!n)
		return -ENODATA;
	err = build_init(&bd, meta, 4);
	if (err)
		goto out;
	/* A thread is one sample of its stack, the moment it was read. */
	values[STORE_VALUE_CPU_SAMPLES] = 1;
	for (size_t k = 0; k < n && !err; k++)
		err = collect_row(th[k].pid, th[k].tid, th[k].stack, values, &bd);
	if (!err)
		err = number_names(&bd);
	if (err)
		goto out;
	p = build_carve(&bd, meta);
	if (!p) {
		err = -ENOMEM;
		goto out;
	}
	/* Threads are numbered in the order given, each once: thread k is th[k]. */
	for (size_t k = 0; k < p->n_threads && k < n; k++) {
		Profd__Thread *pt = p->threads[k];

		if (th[k].pid != pt->pid || th[k].tid != pt->tid)
			continue; /* the caller passed a thread twice: no state for the rest */
		pt->has_state = 1;
		pt->state = (Profd__ThreadState)th[k].state;
		pt->has_on_cpu = 1;
		pt->on_cpu = th[k].on_cpu;
		if (th[k].gil) {
			pt->has_gil = 1;
			pt->gil = (Profd__GilState)th[k].gil;
		}
	}
	*out = p;
	err = 0;
out:
	build_fini(&bd);
	return err;
}

/* --- rows given one by one (the fleet export's journal) ----------------------------------------
 */

struct dump_rows {
	struct build bd;
	struct dump_meta meta;
};

struct dump_rows *dump_rows__new(struct store *s, const struct dump_meta *meta)
{
	struct dump_rows *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->bd.s = s;
	if (meta)
		r->meta = *meta;
	if (build_init(&r->bd, meta, 64)) {
		dump_rows__free(r);
		errno = ENOMEM;
		return NULL;
	}
	return r;
}

int dump_rows__add(struct dump_rows *r, uint32_t pid, uint32_t tid, uint32_t stack,
		   const uint64_t values[STORE_VALUE__COUNT])
{
	return r ? collect_row(pid, tid, stack, values, &r->bd) : -EINVAL;
}

int dump_rows__string(struct dump_rows *r, const char *s, uint32_t *idx)
{
	return r ? dump_tables__string(r->bd.t, s, idx) : -EINVAL;
}

int dump_rows__finish(struct dump_rows *r, Profd__Profile **out)
{
	int err;

	*out = NULL;
	if (!r->bd.rows.n)
		return -ENODATA;
	err = number_names(&r->bd);
	if (err)
		return err;
	*out = build_carve(&r->bd, &r->meta);
	return *out ? 0 : -ENOMEM;
}

void dump_rows__free(struct dump_rows *r)
{
	if (!r)
		return;
	build_fini(&r->bd);
	free(r);
}

void dump__free(Profd__Profile *p)
{
	/* The Profile opens the one block that holds everything it points to. */
	free(p);
}
