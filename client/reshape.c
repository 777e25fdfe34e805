// SPDX-License-Identifier: BSD-2-Clause
/* A profile's frames renamed, dropped and merged the way a view asks (see reshape.h). */
#include "reshape.h"
#include "grow.h"
#include "hash.h"
#include "profile.h"
#include "ptrmap.h"
#include "satmath.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Everything reshape allocates, with the profile first so reshape_free can find the rest. */
struct reshaped {
	Profd__Profile p;
	char **strings; /* src's up to n_src_strings (borrowed), then thread names (owned) */
	size_t n_strings, cap_strings, n_src_strings;
	Profd__Frame *frames;
	Profd__Frame **frame_ptrs;
	size_t n_frames, cap_frames;
	Profd__Stack *stacks; /* each stack's frames array is owned */
	Profd__Stack **stack_ptrs;
	size_t n_stacks, cap_stacks;
	Profd__Sample *samples;
	Profd__Sample **sample_ptrs;
	size_t n_samples, cap_samples;
	uint64_t *values; /* nv per sample */
	size_t cap_values, nv;
};

/* The state of one run: src, the options, and the lookups that merge equal things. */
struct build {
	const Profd__Profile *src;
	const struct reshape_opts *o;
	struct reshaped *r;
	uint32_t *frame_map;	 /* src frame -> frame of r */
	uint8_t *interp;	 /* hide_interp: src frame -> enum interp_kind */
	struct ptrmap thr_frame; /* pid << 32 | tid -> frame of r + 1 */
	struct ptrmap memo;	 /* (thread frame + 1) << 32 | src stack -> stack of r + 1 */
	struct ptrmap stack_set; /* hash of the frames, probed -> stack of r + 1 */
	struct ptrmap sample_set;
	uint32_t *tmp; /* one stack's frames while it is built */
	size_t cap_tmp;
};

static const char *str_of(const Profd__Profile *p, uint32_t idx)
{
	return idx < p->n_strings && p->strings[idx] ? p->strings[idx] : "";
}

bool reshape_is_noop(const struct reshape_opts *o)
{
	return !o->fold_native && !o->python_only && !o->hide_interp && !o->function &&
	       !o->no_lineno && !o->per_thread;
}

/* Whose code a native frame is, for hide_interp (reshape.h says how it is told). */
enum interp_kind {
	INTERP_NO = 0,
	INTERP_LIBPYTHON, /* a libpython*.so */
	INTERP_EXE,	  /* a process's executable: the interpreter unless libpython is there */
	INTERP_UNSEEN,	  /* in the per-module memo: not looked at yet */
};

static enum interp_kind module_interp(const Profd__Profile *p, const char *module)
{
	const char *base = strrchr(module, '/');

	base = base ? base + 1 : module;
	if (!strncmp(base, "libpython", 9))
		return INTERP_LIBPYTHON;
	for (size_t i = 0; i < p->n_processes; i++) {
		const Profd__Process *pr = p->processes[i];

		if (pr->has_exe && pr->exe < p->n_strings && p->strings[pr->exe] &&
		    !strcmp(p->strings[pr->exe], module))
			return INTERP_EXE;
	}
	return INTERP_NO;
}

/*
 * For hide_interp: each native frame's enum interp_kind, its module looked at once (the
 * processes are compared with each distinct module, not with each frame). Returns 0 or -ENOMEM.
 */
static int mark_interp(struct build *b)
{
	const Profd__Profile *src = b->src;
	uint8_t *memo;

	b->interp = calloc(src->n_frames ? src->n_frames : 1, 1);
	memo = malloc(src->n_strings ? src->n_strings : 1);
	if (!b->interp || !memo) {
		free(memo);
		return -ENOMEM;
	}
	memset(memo, INTERP_UNSEEN, src->n_strings);
	for (size_t i = 0; i < src->n_frames; i++) {
		const Profd__Frame *f = src->frames[i];

		if (f->kind != PROFD__FRAME_KIND__FRAME_NATIVE || !f->has_module ||
		    f->module >= src->n_strings)
			continue;
		if (memo[f->module] == INTERP_UNSEEN)
			memo[f->module] = (uint8_t)module_interp(src, str_of(src, f->module));
		b->interp[i] = memo[f->module];
	}
	free(memo);
	return 0;
}

char *reshape_thread_name(const Profd__Profile *p, const Profd__Sample *s, char *buf, size_t len)
{
	const char *name = profile_sample_thread_name(p, s);
	uint32_t tid = s->tid;

	if (name && *name)
		snprintf(buf, len, "thread %" PRIu32 " (%.200s)", tid, name);
	else
		snprintf(buf, len, "thread %" PRIu32, tid);
	return buf;
}

/* ---- frames ------------------------------------------------------------------------------- */

static bool is_unknown_symbol(const Profd__Profile *p, const Profd__Frame *f)
{
	const char *name = str_of(p, f->name);

	return !*name || strcmp(name, "[unknown]") == 0;
}

/* The frame f becomes under the options: lines or addresses dropped. */
static Profd__Frame rewrite_frame(const struct build *b, const Profd__Frame *f)
{
	Profd__Frame n = *f;

	if (f->kind == PROFD__FRAME_KIND__FRAME_PYTHON && (b->o->function || b->o->no_lineno)) {
		n.has_line = false;
		n.line = 0;
	}
	if (b->o->function && f->kind != PROFD__FRAME_KIND__FRAME_PYTHON &&
	    f->kind != PROFD__FRAME_KIND__FRAME_NVTX && f->has_module &&
	    *str_of(b->src, f->module) && is_unknown_symbol(b->src, f)) {
		n.has_address = false;
		n.address = 0;
	}
	return n;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return (a > b) - (a < b);
}

/* Total order on frames by every field a reader may show; equal frames are one. */
static int cmp_frame(const Profd__Frame *x, const Profd__Frame *y)
{
	int c;

	if ((c = cmp_u64(x->kind, y->kind)) || (c = cmp_u64(x->name, y->name)) ||
	    (c = cmp_u64(x->has_module, y->has_module)) ||
	    (c = cmp_u64(x->has_module ? x->module : 0, y->has_module ? y->module : 0)) ||
	    (c = cmp_u64(x->has_address, y->has_address)) ||
	    (c = cmp_u64(x->has_address ? x->address : 0, y->has_address ? y->address : 0)) ||
	    (c = cmp_u64(x->has_file, y->has_file)) ||
	    (c = cmp_u64(x->has_file ? x->file : 0, y->has_file ? y->file : 0)) ||
	    (c = cmp_u64(x->has_line, y->has_line)) ||
	    (c = cmp_u64(x->has_line ? x->line : 0, y->has_line ? y->line : 0)) ||
	    (c = cmp_u64(x->has_build_id, y->has_build_id)))
		return c;
	return cmp_u64(x->has_build_id ? x->build_id : 0, y->has_build_id ? y->build_id : 0);
}

struct frame_ref {
	Profd__Frame f;
	uint32_t src;
};

static int cmp_frame_ref(const void *a, const void *b)
{
	const struct frame_ref *x = a, *y = b;
	int c = cmp_frame(&x->f, &y->f);

	return c ? c : cmp_u64(x->src, y->src);
}

/* Rewrite src's frames and keep one of each distinct result. Returns 0 or -ENOMEM. */
static int build_frames(struct build *b)
{
	const Profd__Profile *src = b->src;
	struct reshaped *r = b->r;
	struct frame_ref *refs = calloc(src->n_frames ? src->n_frames : 1, sizeof(*refs));
	int err = 0;

	if (!refs)
		return -ENOMEM;
	for (size_t i = 0; i < src->n_frames; i++)
		refs[i] = (struct frame_ref){rewrite_frame(b, src->frames[i]), (uint32_t)i};
	/* Sorted, so frames keep an order that does not depend on the daemon's. */
	qsort(refs, src->n_frames, sizeof(*refs), cmp_frame_ref);
	for (size_t i = 0; i < src->n_frames; i++) {
		if (!r->n_frames || cmp_frame(&r->frames[r->n_frames - 1], &refs[i].f)) {
			err = GROW(r->frames, r->cap_frames, r->n_frames + 1);
			if (err)
				break;
			r->frames[r->n_frames++] = refs[i].f;
		}
		b->frame_map[refs[i].src] = (uint32_t)(r->n_frames - 1);
	}
	free(refs);
	return err;
}

/* A string of r's own, added after src's. Returns its index or a negative errno. */
static int64_t add_string(struct reshaped *r, const char *s)
{
	char *copy;
	int err;

	if (r->n_strings >= UINT32_MAX)
		return -E2BIG;
	err = GROW(r->strings, r->cap_strings, r->n_strings + 1);
	if (err)
		return err;
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	r->strings[r->n_strings] = copy;
	return (int64_t)r->n_strings++;
}

/* The root frame of thread pid/tid, added on first use. Returns its index or a negative errno. */
/* The root frame of sample s's thread (the thread of its process, when pids were reused). */
static int64_t thread_frame(struct build *b, const Profd__Sample *s)
{
	struct reshaped *r = b->r;
	uint64_t key = profile_thread_key(s->process, s->pid, s->tid);
	uintptr_t hit = (uintptr_t)ptrmap_get(&b->thr_frame, key);
	char name[256];
	int64_t str;
	int err;

	if (hit)
		return (int64_t)hit - 1;
	str = add_string(r, reshape_thread_name(b->src, s, name, sizeof(name)));
	if (str < 0)
		return str;
	err = GROW(r->frames, r->cap_frames, r->n_frames + 1);
	if (err)
		return err;
	profd__frame__init(&r->frames[r->n_frames]);
	r->frames[r->n_frames].kind = PROFD__FRAME_KIND__FRAME_UNKNOWN;
	r->frames[r->n_frames].name = (uint32_t)str;
	if (ptrmap_put(&b->thr_frame, key, (void *)(uintptr_t)(r->n_frames + 1)))
		return -ENOMEM;
	return (int64_t)r->n_frames++;
}

/* ---- stacks and samples ------------------------------------------------------------------- */

/*
 * Find or add the n entries of v in set, under hash h, probing h + 1, h + 2... on a collision;
 * eq(ctx, idx) says whether entry idx holds v. Returns idx + 1 of the match, or 0 with *slot
 * the free key to add it under.
 */
static uintptr_t set_find(const struct ptrmap *set, uint64_t h,
			  bool (*eq)(const void *ctx, uint32_t idx), const void *ctx,
			  uint64_t *slot)
{
	uintptr_t v;

	for (; (v = (uintptr_t)ptrmap_get(set, h)); h++)
		if (eq(ctx, (uint32_t)(v - 1)))
			return v;
	*slot = h;
	return 0;
}

struct stack_key {
	const struct reshaped *r;
	const uint32_t *frames;
	size_t n;
};

static bool stack_eq(const void *ctx, uint32_t idx)
{
	const struct stack_key *k = ctx;
	const Profd__Stack *s = &k->r->stacks[idx];

	return s->n_frames == k->n && !memcmp(s->frames, k->frames, k->n * sizeof(*k->frames));
}

/* Whether frame j of a stack goes (first, last: its newest and oldest Python frames). */
static bool dropped(const struct build *b, const Profd__Frame *f, size_t j, size_t first,
		    size_t last, bool interp)
{
	if (f->kind != PROFD__FRAME_KIND__FRAME_NATIVE || first == SIZE_MAX)
		return false;
	if (j < first)
		return b->o->fold_native || b->o->python_only;
	if (j >= last)
		return false;
	return b->o->python_only || (b->o->hide_interp && interp);
}

/* The stack of r that src stack si becomes (thread frame tf, or -1). Returns it or -errno. */
static int64_t map_stack(struct build *b, uint32_t si, int64_t tf)
{
	const Profd__Stack *st = b->src->stacks[si];
	struct reshaped *r = b->r;
	size_t n = 0, first = SIZE_MAX, last = 0;
	bool has_libpython = false;
	struct stack_key k;
	uint64_t slot = 0;
	uintptr_t hit;
	uint32_t *copy;
	int err;

	err = GROW(b->tmp, b->cap_tmp, st->n_frames + 1);
	if (err)
		return err;
	/* The Python frames nearest the leaf and the root. */
	for (size_t j = 0; j < st->n_frames; j++) {
		if (b->interp && b->interp[st->frames[j]] == INTERP_LIBPYTHON)
			has_libpython = true;
		if (b->src->frames[st->frames[j]]->kind != PROFD__FRAME_KIND__FRAME_PYTHON)
			continue;
		if (first == SIZE_MAX)
			first = j;
		last = j;
	}
	for (size_t j = 0; j < st->n_frames; j++) {
		uint32_t f = b->frame_map[st->frames[j]];
		uint8_t ik = b->interp ? b->interp[st->frames[j]] : INTERP_NO;
		bool interp = ik == INTERP_LIBPYTHON || (ik == INTERP_EXE && !has_libpython);

		if (!dropped(b, &r->frames[f], j, first, last, interp))
			b->tmp[n++] = f;
	}
	if (tf >= 0)
		b->tmp[n++] = (uint32_t)tf;
	k = (struct stack_key){r, b->tmp, n};
	hit = set_find(&b->stack_set, hash_bytes(b->tmp, n * sizeof(*b->tmp)), stack_eq, &k, &slot);
	if (hit)
		return (int64_t)hit - 1;
	if (r->n_stacks >= UINT32_MAX - 1)
		return -E2BIG;
	err = GROW(r->stacks, r->cap_stacks, r->n_stacks + 1);
	if (err)
		return err;
	copy = malloc(n ? n * sizeof(*copy) : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, b->tmp, n * sizeof(*copy));
	profd__stack__init(&r->stacks[r->n_stacks]);
	r->stacks[r->n_stacks].frames = copy;
	r->stacks[r->n_stacks].n_frames = n;
	r->n_stacks++; /* copy is the stack's now, freed with it */
	if (ptrmap_put(&b->stack_set, slot, (void *)(uintptr_t)r->n_stacks))
		return -ENOMEM;
	return (int64_t)r->n_stacks - 1;
}

struct sample_key {
	const struct reshaped *r;
	uint32_t stack, pid, tid, process;
};

static bool sample_eq(const void *ctx, uint32_t idx)
{
	const struct sample_key *k = ctx;
	const Profd__Sample *s = &k->r->samples[idx];

	return s->stack == k->stack && s->pid == k->pid && s->tid == k->tid &&
	       s->process == k->process;
}

/* Add src sample s on stack of r, summed into an equal one. Returns 0 or a negative errno. */
static int add_sample(struct build *b, const Profd__Sample *s, uint32_t stack)
{
	struct reshaped *r = b->r;
	struct sample_key k = {r, stack, s->pid, s->tid, s->process};
	uint64_t key[4] = {stack, s->pid, s->tid, s->process}, slot = 0;
	uintptr_t hit =
	    set_find(&b->sample_set, hash_bytes(key, sizeof(key)), sample_eq, &k, &slot);
	uint64_t *v;
	int err;

	if (!hit) {
		err = GROW(r->samples, r->cap_samples, r->n_samples + 1);
		if (!err)
			err = GROW(r->values, r->cap_values, (r->n_samples + 1) * r->nv);
		if (err)
			return err;
		profd__sample__init(&r->samples[r->n_samples]);
		r->samples[r->n_samples].stack = stack;
		r->samples[r->n_samples].pid = s->pid;
		r->samples[r->n_samples].tid = s->tid;
		r->samples[r->n_samples].has_process = s->has_process;
		r->samples[r->n_samples].process = s->process;
		memset(&r->values[r->n_samples * r->nv], 0, r->nv * sizeof(*r->values));
		if (ptrmap_put(&b->sample_set, slot, (void *)(uintptr_t)(r->n_samples + 1)))
			return -ENOMEM;
		hit = ++r->n_samples;
	}
	v = &r->values[(hit - 1) * r->nv];
	for (size_t i = 0; i < s->n_values && i < r->nv; i++)
		sat_inc(&v[i], s->values[i]);
	return 0;
}

static int build_samples(struct build *b)
{
	const Profd__Profile *src = b->src;

	for (size_t i = 0; i < src->n_samples; i++) {
		const Profd__Sample *s = src->samples[i];
		int64_t tf = -1, st;
		uintptr_t hit;
		uint64_t key;

		if (b->o->per_thread) {
			tf = thread_frame(b, s);
			if (tf < 0)
				return (int)tf;
		}
		key = (uint64_t)(tf + 1) << 32 | s->stack;
		hit = (uintptr_t)ptrmap_get(&b->memo, key);
		if (hit) {
			st = (int64_t)hit - 1;
		} else {
			st = map_stack(b, s->stack, tf);
			if (st < 0)
				return (int)st;
			if (ptrmap_put(&b->memo, key, (void *)(uintptr_t)(st + 1)))
				return -ENOMEM;
		}
		int err = add_sample(b, s, (uint32_t)st);

		if (err)
			return err;
	}
	return 0;
}

/* Point the profile at the tables, now that they no longer move. Returns 0 or -ENOMEM. */
static int link_tables(struct reshaped *r)
{
	r->frame_ptrs = calloc(r->n_frames ? r->n_frames : 1, sizeof(*r->frame_ptrs));
	r->stack_ptrs = calloc(r->n_stacks ? r->n_stacks : 1, sizeof(*r->stack_ptrs));
	r->sample_ptrs = calloc(r->n_samples ? r->n_samples : 1, sizeof(*r->sample_ptrs));
	if (!r->frame_ptrs || !r->stack_ptrs || !r->sample_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_frames; i++)
		r->frame_ptrs[i] = &r->frames[i];
	for (size_t i = 0; i < r->n_stacks; i++)
		r->stack_ptrs[i] = &r->stacks[i];
	for (size_t i = 0; i < r->n_samples; i++) {
		r->sample_ptrs[i] = &r->samples[i];
		r->samples[i].values = &r->values[i * r->nv];
		r->samples[i].n_values = r->nv;
	}
	r->p.strings = r->strings;
	r->p.n_strings = r->n_strings;
	r->p.frames = r->frame_ptrs;
	r->p.n_frames = r->n_frames;
	r->p.stacks = r->stack_ptrs;
	r->p.n_stacks = r->n_stacks;
	r->p.samples = r->sample_ptrs;
	r->p.n_samples = r->n_samples;
	return 0;
}

Profd__Profile *reshape(const Profd__Profile *src, const struct reshape_opts *o)
{
	struct build b = {.src = src, .o = o};
	struct reshaped *r;
	int err;

	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	b.r = r;
	/* Processes, threads, value types and the scalars are src's, unchanged. */
	r->p = *src;
	r->nv = src->n_value_types;
	for (size_t i = 0; i < src->n_samples; i++)
		if (src->samples[i]->n_values > r->nv)
			r->nv = src->samples[i]->n_values;
	err = GROW(r->strings, r->cap_strings, src->n_strings + 1);
	if (err)
		goto out;
	memcpy(r->strings, src->strings, src->n_strings * sizeof(*r->strings));
	r->n_strings = r->n_src_strings = src->n_strings;
	b.frame_map = calloc(src->n_frames ? src->n_frames : 1, sizeof(*b.frame_map));
	if (!b.frame_map) {
		err = -ENOMEM;
		goto out;
	}
	err = o->hide_interp ? mark_interp(&b) : 0;
	if (!err)
		err = build_frames(&b);
	if (!err)
		err = build_samples(&b);
	if (!err)
		err = link_tables(r);
out:
	ptrmap_fini(&b.thr_frame);
	ptrmap_fini(&b.memo);
	ptrmap_fini(&b.stack_set);
	ptrmap_fini(&b.sample_set);
	free(b.frame_map);
	free(b.interp);
	free(b.tmp);
	if (err) {
		reshape_free(&r->p);
		errno = -err;
		return NULL;
	}
	return &r->p;
}

void reshape_free(Profd__Profile *p)
{
	struct reshaped *r = (struct reshaped *)p;

	if (!r)
		return;
	for (size_t i = r->n_src_strings; i < r->n_strings; i++)
		free(r->strings[i]);
	for (size_t i = 0; i < r->n_stacks; i++)
		free(r->stacks[i].frames);
	free(r->strings);
	free(r->frames);
	free(r->frame_ptrs);
	free(r->stacks);
	free(r->stack_ptrs);
	free(r->samples);
	free(r->sample_ptrs);
	free(r->values);
	free(r);
}
