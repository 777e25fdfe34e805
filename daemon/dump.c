// SPDX-License-Identifier: BSD-2-Clause
/*
 * Store query -> Profile. Two passes: the first walks the query result and numbers what it
 * references (stacks, frames, strings, processes, threads) in first-seen order, so the tables are
 * dense and the output is deterministic for a given store; the second fills the messages. All
 * the Profile's memory is one block sized after the first pass, with the Profile at its start,
 * so dump__free() is a single free() and building costs one large allocation.
 */
#include "dump.h"
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
	if (v->n == v->cap) {
		size_t ncap = v->cap ? v->cap * 2 : 256;
		void *np = realloc(v->p, ncap * item);

		if (!np)
			return NULL;
		v->p = np;
		v->cap = ncap;
	}
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

/* Strings by content; the texts stay owned by the store (or are literals) until copied. */
struct strset {
	struct vec strs; /* const char * */
	size_t bytes;	 /* sum of lengths + NULs */
	uint32_t *tab;	 /* index + 1 */
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

/* Returns the index of p (NULL means "") or -ENOMEM. */
static int64_t strset_index(struct strset *ss, const char *p)
{
	const char **strs = ss->strs.p;
	const char **slot;
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
	slot = vec_push(&ss->strs, sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	*slot = p;
	ss->hashes[ss->strs.n - 1] = h;
	ss->tab[i] = (uint32_t)ss->strs.n;
	ss->bytes += strlen(p) + 1;
	return (int64_t)ss->strs.n - 1;
}

struct row {
	uint32_t pid;
	uint32_t tid;
	uint32_t stack; /* dense index */
	uint64_t v[STORE_VALUE__COUNT];
};

struct build {
	struct store *s;
	struct vec rows;     /* struct row */
	struct vec stacks;   /* uint32_t store stack id, by dense index */
	struct vec frames;   /* uint32_t store frame id, by dense index */
	uint32_t *stack_map; /* store stack id -> dense index + 1 */
	uint32_t *frame_map;
	uint64_t nstack_ids;
	uint64_t nframe_ids;
	uint64_t stack_frames; /* sum of stack depths */
	struct strset strs;
	struct idxmap procs;	/* pid -> dense index */
	struct idxmap threads;	/* pid << 32 | tid -> dense index */
	struct vec proc_pids;	/* uint32_t */
	struct vec thread_keys; /* uint64_t */
};

static int collect_row(uint32_t pid, uint32_t tid, uint32_t stack,
		       const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct build *bd = ctx;
	struct row *r;
	bool created = false;

	if (stack > bd->nstack_ids)
		return -EINVAL;
	if (!bd->stack_map[stack]) {
		uint32_t *id = vec_push(&bd->stacks, sizeof(*id));

		if (!id)
			return -ENOMEM;
		*id = stack;
		bd->stack_map[stack] = (uint32_t)bd->stacks.n;
	}
	r = vec_push(&bd->rows, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->pid = pid;
	r->tid = tid;
	r->stack = bd->stack_map[stack] - 1;
	memcpy(r->v, values, sizeof(r->v));
	if (idxmap_get_or_add(&bd->procs, pid, &created) < 0)
		return -ENOMEM;
	if (created) {
		uint32_t *p = vec_push(&bd->proc_pids, sizeof(*p));

		if (!p)
			return -ENOMEM;
		*p = pid;
	}
	created = false;
	if (idxmap_get_or_add(&bd->threads, (uint64_t)pid << 32 | tid, &created) < 0)
		return -ENOMEM;
	if (created) {
		uint64_t *k = vec_push(&bd->thread_keys, sizeof(*k));

		if (!k)
			return -ENOMEM;
		*k = (uint64_t)pid << 32 | tid;
	}
	return 0;
}

/* Number the frames of the referenced stacks, then every string, in a fixed order. */
static int number_frames_and_strings(struct build *bd)
{
	const uint32_t *sids = bd->stacks.p;

	for (size_t k = 0; k < bd->stacks.n; k++) {
		const uint32_t *fr;
		size_t n;

		if (!store__stack(bd->s, sids[k], &fr, &n))
			return -EINVAL;
		bd->stack_frames += n;
		for (size_t j = 0; j < n; j++) {
			uint32_t *id;

			if (fr[j] > bd->nframe_ids)
				return -EINVAL;
			if (bd->frame_map[fr[j]])
				continue;
			id = vec_push(&bd->frames, sizeof(*id));
			if (!id)
				return -ENOMEM;
			*id = fr[j];
			bd->frame_map[fr[j]] = (uint32_t)bd->frames.n;
		}
	}
	if (strset_index(&bd->strs, "") < 0 || strset_index(&bd->strs, "samples") < 0 ||
	    strset_index(&bd->strs, "count") < 0)
		return -ENOMEM;
	for (size_t k = 0; k < bd->frames.n; k++) {
		const struct store_frame *f = store__frame(bd->s, ((uint32_t *)bd->frames.p)[k]);

		if (!f)
			return -EINVAL;
		if (strset_index(&bd->strs, f->name) < 0 ||
		    strset_index(&bd->strs, f->module) < 0 ||
		    strset_index(&bd->strs, f->file) < 0 ||
		    strset_index(&bd->strs, f->build_id) < 0)
			return -ENOMEM;
	}
	for (size_t k = 0; k < bd->proc_pids.n; k++) {
		struct store_process_info pi;
		const char *name = "";

		if (store__process(bd->s, ((uint32_t *)bd->proc_pids.p)[k], &pi))
			name = pi.comm;
		if (strset_index(&bd->strs, name) < 0)
			return -ENOMEM;
	}
	for (size_t k = 0; k < bd->thread_keys.n; k++) {
		uint64_t key = ((uint64_t *)bd->thread_keys.p)[k];

		if (strset_index(&bd->strs, store__thread_name(bd->s, key >> 32, (uint32_t)key)) <
		    0)
			return -ENOMEM;
	}
	return 0;
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
	default:
		return PROFD__FRAME_KIND__FRAME_UNKNOWN;
	}
}

/* Index of a string numbered in the first pass (it cannot fail then). */
static uint32_t sidx(struct build *bd, const char *p)
{
	return (uint32_t)strset_index(&bd->strs, p);
}

/*
 * With c->p NULL only measures; with a block of the measured size, fills it. Both runs take
 * the same pieces in the same order.
 */
static Profd__Profile *lay_out(struct build *bd, struct carver *c, const struct dump_meta *meta)
{
	static const char *const vt_names[STORE_VALUE__COUNT][2] = {
	    [STORE_VALUE_CPU_SAMPLES] = {"samples", "count"},
	};
	size_t nstr = bd->strs.strs.n, nfr = bd->frames.n, nst = bd->stacks.n, nrow = bd->rows.n;
	size_t nproc = bd->proc_pids.n, nthr = bd->thread_keys.n;
	Profd__Profile *p = carve(c, sizeof(*p), alignof(Profd__Profile));
	char **strings = carve(c, nstr * sizeof(char *), alignof(char *));
	char *text = carve(c, bd->strs.bytes, 1);
	Profd__Frame **frame_ptrs = carve(c, nfr * sizeof(void *), alignof(void *));
	Profd__Frame *frames = carve(c, nfr * sizeof(*frames), alignof(Profd__Frame));
	Profd__Stack **stack_ptrs = carve(c, nst * sizeof(void *), alignof(void *));
	Profd__Stack *stacks = carve(c, nst * sizeof(*stacks), alignof(Profd__Stack));
	uint32_t *stack_frames = carve(c, bd->stack_frames * sizeof(uint32_t), alignof(uint32_t));
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
	const char **src = bd->strs.strs.p;
	const struct row *rows = bd->rows.p;

	if (!c->p)
		return NULL;
	profd__profile__init(p);
	for (size_t k = 0; k < nstr; k++) {
		size_t len = strlen(src[k]) + 1;

		memcpy(text, src[k], len);
		strings[k] = text;
		text += len;
	}
	p->n_strings = nstr;
	p->strings = strings;

	for (size_t k = 0; k < nfr; k++) {
		const struct store_frame *f = store__frame(bd->s, ((uint32_t *)bd->frames.p)[k]);
		Profd__Frame *pf = &frames[k];

		profd__frame__init(pf);
		pf->kind = proto_kind(f->kind);
		pf->name = sidx(bd, f->name);
		/*
		 * Named kernel frames are kept per function, without an address; and kernel
		 * addresses would defeat KASLR for callers who are not root.
		 */
		pf->has_address = f->address != 0 && !(meta && meta->hide_kernel_addresses &&
							f->kind == FRAME_KIND_KERNEL);
		pf->address = pf->has_address ? f->address : 0;
		if (f->module) {
			pf->has_module = 1;
			pf->module = sidx(bd, f->module);
		}
		if (f->file) {
			pf->has_file = 1;
			pf->file = sidx(bd, f->file);
		}
		if (f->line) {
			pf->has_line = 1;
			pf->line = f->line;
		}
		if (f->build_id) {
			pf->has_build_id = 1;
			pf->build_id = sidx(bd, f->build_id);
		}
		frame_ptrs[k] = pf;
	}
	p->n_frames = nfr;
	p->frames = frame_ptrs;

	for (size_t k = 0; k < nst; k++) {
		const uint32_t *fr;
		size_t n;

		store__stack(bd->s, ((uint32_t *)bd->stacks.p)[k], &fr, &n);
		profd__stack__init(&stacks[k]);
		for (size_t j = 0; j < n; j++)
			stack_frames[j] = bd->frame_map[fr[j]] - 1;
		stacks[k].n_frames = n;
		stacks[k].frames = stack_frames;
		stack_frames += n;
		stack_ptrs[k] = &stacks[k];
	}
	p->n_stacks = nst;
	p->stacks = stack_ptrs;

	for (size_t k = 0; k < STORE_VALUE__COUNT; k++) {
		profd__value_type__init(&vts[k]);
		vts[k].type = sidx(bd, vt_names[k][0]);
		vts[k].unit = sidx(bd, vt_names[k][1]);
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

		profd__process__init(pp);
		pp->pid = ((uint32_t *)bd->proc_pids.p)[k];
		if (store__process(bd->s, pp->pid, &pi)) {
			pp->name = sidx(bd, pi.comm);
			pp->has_uid = 1;
			pp->uid = pi.uid;
			pp->has_exited = 1;
			pp->exited = pi.exited;
		}
		proc_ptrs[k] = pp;
	}
	p->n_processes = nproc;
	p->processes = proc_ptrs;

	for (size_t k = 0; k < nthr; k++) {
		uint64_t key = ((uint64_t *)bd->thread_keys.p)[k];
		Profd__Thread *pt = &thrs[k];

		profd__thread__init(pt);
		pt->pid = key >> 32;
		pt->tid = (uint32_t)key;
		pt->name = sidx(bd, store__thread_name(bd->s, pt->pid, pt->tid));
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
	}
	return p;
}

int dump__build(struct store *s, const struct store_query *q, const struct dump_meta *meta,
		Profd__Profile **out)
{
	struct build bd = {.s = s};
	struct store_stats st;
	struct carver c = {0};
	int err;

	if (!s || !q || !out)
		return -EINVAL;
	*out = NULL;
	store__stats(s, &st);
	bd.nstack_ids = st.stacks;
	bd.nframe_ids = st.frames;
	bd.stack_map = calloc(st.stacks + 1, sizeof(uint32_t));
	bd.frame_map = calloc(st.frames + 1, sizeof(uint32_t));
	if (!bd.stack_map || !bd.frame_map || idxmap_init(&bd.procs, 256) ||
	    idxmap_init(&bd.threads, 1024) || strset_grow(&bd.strs)) {
		err = -ENOMEM;
		goto out;
	}
	err = store__query(s, q, collect_row, &bd);
	if (err)
		goto out;
	if (!bd.rows.n) {
		err = -ENODATA;
		goto out;
	}
	err = number_frames_and_strings(&bd);
	if (err)
		goto out;
	lay_out(&bd, &c, meta);
	c.p = malloc(c.off);
	if (!c.p) {
		err = -ENOMEM;
		goto out;
	}
	c.off = 0;
	*out = lay_out(&bd, &c, meta);
	err = 0;
out:
	free(bd.rows.p);
	free(bd.stacks.p);
	free(bd.frames.p);
	free(bd.stack_map);
	free(bd.frame_map);
	free(bd.strs.strs.p);
	free(bd.strs.tab);
	free(bd.strs.hashes);
	idxmap_fini(&bd.procs);
	idxmap_fini(&bd.threads);
	free(bd.proc_pids.p);
	free(bd.thread_keys.p);
	return err;
}

void dump__free(Profd__Profile *p)
{
	/* The Profile opens the one block that holds everything it points to. */
	free(p);
}
