// SPDX-License-Identifier: BSD-2-Clause
/* Per-function self and total values of a profile, and the two tables drawn from them. */
#define _GNU_SOURCE /* qsort_r */
#include "functable.h"
#include "grow.h"
#include "profile.h"
#include "ptrmap.h"
#include "satmath.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define NO_STACK_NAME "[no stack]"
#define COL_SEP "  "
/* PyTorch's columns are 12 wide; ours grow when a header or a value needs more. */
#define TABLE_COL_MIN 12
#define NAME_MIN 12

struct functable {
	struct functable_row *rows;
	size_t n_rows;
	char **names; /* one per function, rows point into it */
	size_t n_names;
	uint64_t *vals; /* per row: self[nv] then total[nv] */
	size_t nv;
	char **types, **units;
	uint64_t *sums;
	size_t cpu;
	uint64_t period_ns;
	char **groups; /* per_thread: "TID COMM" of each thread, rows point into it */
	size_t n_groups, cap_groups;
	bool per_thread;
};

/*
 * The function name of frame f (lines and addresses merged), or its display name when lines,
 * malloc'd, one line.
 */
static char *frame_name(const Profd__Profile *p, const Profd__Frame *f, bool lines)
{
	size_t (*name)(const Profd__Profile *, const Profd__Frame *, char *, size_t) =
	    lines ? profile_frame_name : profile_function_name;
	char small[256], *s;
	size_t need = name(p, f, small, sizeof(small));

	s = malloc(need + 1);
	if (!s)
		return NULL;
	if (need < sizeof(small))
		memcpy(s, small, need + 1);
	else
		name(p, f, s, need + 1);
	/* Names reach a terminal: no escape sequences, no line breaks. */
	for (char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return s;
}

struct name_ref {
	const char *name;
	uint32_t frame;
};

static int cmp_name_ref(const void *a, const void *b)
{
	const struct name_ref *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->frame > y->frame) - (x->frame < y->frame);
}

struct sort_key {
	enum functable_sort by;
	size_t vi;
};

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
	return (a < b) - (a > b);
}

static int cmp_row(const void *a, const void *b, void *ctx)
{
	const struct functable_row *x = a, *y = b;
	const struct sort_key *k = ctx;
	int c;

	if (k->by == FUNCTABLE_SORT_TOTAL) {
		c = cmp_u64_desc(x->total[k->vi], y->total[k->vi]);
		if (!c)
			c = cmp_u64_desc(x->self[k->vi], y->self[k->vi]);
	} else {
		c = cmp_u64_desc(x->self[k->vi], y->self[k->vi]);
		if (!c)
			c = cmp_u64_desc(x->total[k->vi], y->total[k->vi]);
	}
	if (!c)
		c = strcmp(x->name, y->name);
	return c || !x->thread || !y->thread ? c : strcmp(x->thread, y->thread);
}

void functable__sort(struct functable *t, enum functable_sort by, size_t vi)
{
	struct sort_key k = {.by = by, .vi = vi < t->nv ? vi : t->cpu};

	qsort_r(t->rows, t->n_rows, sizeof(*t->rows), cmp_row, &k);
}

/* Copy the value types, "samples"/"count" when the profile names none. Returns 0 or -ENOMEM. */
static int copy_types(struct functable *t, const Profd__Profile *p)
{
	t->nv = p->n_value_types ? p->n_value_types : 1;
	t->types = calloc(t->nv, sizeof(*t->types));
	t->units = calloc(t->nv, sizeof(*t->units));
	t->sums = calloc(t->nv, sizeof(*t->sums));
	if (!t->types || !t->units || !t->sums)
		return -ENOMEM;
	for (size_t i = 0; i < t->nv; i++) {
		const Profd__ValueType *vt = p->n_value_types ? p->value_types[i] : NULL;

		t->types[i] = strdup(vt ? profile_string(p, vt->type) : "samples");
		t->units[i] = strdup(vt ? profile_string(p, vt->unit) : "count");
		if (!t->types[i] || !t->units[i])
			return -ENOMEM;
	}
	t->cpu = 0;
	for (size_t i = 0; i < t->nv; i++) {
		if (strcmp(t->types[i], "samples") == 0) {
			t->cpu = i;
			break;
		}
	}
	return 0;
}

/*
 * Number the distinct display names: frame_fn[i] gets the function of frame i, t->names the
 * names in byte order. Returns 0 or -ENOMEM.
 */
static int name_functions(struct functable *t, const Profd__Profile *p, uint32_t *frame_fn,
			  bool lines)
{
	struct name_ref *refs;
	int err = 0;
	size_t i;

	refs = calloc(p->n_frames ? p->n_frames : 1, sizeof(*refs));
	/* One more for "[no stack]". */
	t->names = calloc(p->n_frames + 1, sizeof(*t->names));
	if (!refs || !t->names) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < p->n_frames; i++) {
		refs[i].name = frame_name(p, p->frames[i], lines);
		refs[i].frame = (uint32_t)i;
		if (!refs[i].name) {
			err = -ENOMEM;
			goto out;
		}
	}
	qsort(refs, p->n_frames, sizeof(*refs), cmp_name_ref);
	for (i = 0; i < p->n_frames; i++) {
		if (t->n_names && strcmp(t->names[t->n_names - 1], refs[i].name) == 0) {
			free((char *)refs[i].name);
		} else {
			t->names[t->n_names++] = (char *)refs[i].name;
		}
		refs[i].name = NULL;
		frame_fn[refs[i].frame] = (uint32_t)(t->n_names - 1);
	}
out:
	if (refs)
		for (i = 0; i < p->n_frames; i++)
			free((char *)refs[i].name);
	free(refs);
	return err;
}

/* The group of a sample: its thread under per_thread, else 0. Returns it or a negative errno. */
static int64_t group_of(struct functable *t, struct ptrmap *groups, const Profd__Profile *p,
			const Profd__Sample *s, bool per_thread)
{
	uint64_t key = profile_thread_key(s->process, s->pid, s->tid);
	const char *name;
	uintptr_t hit;
	char buf[256];
	int err;

	if (!per_thread)
		return 0;
	hit = (uintptr_t)ptrmap_get(groups, key);
	if (hit)
		return (int64_t)hit - 1;
	err = GROW(t->groups, t->cap_groups, t->n_groups + 1);
	if (err)
		return err;
	/* "TID COMM": the column's header says it is a thread. */
	name = profile_sample_thread_name(p, s);
	if (name && *name)
		snprintf(buf, sizeof(buf), "%" PRIu32 " %.200s", s->tid, name);
	else
		snprintf(buf, sizeof(buf), "%" PRIu32, s->tid);
	t->groups[t->n_groups] = strdup(buf);
	if (!t->groups[t->n_groups])
		return -ENOMEM;
	for (char *c = t->groups[t->n_groups]; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	if (ptrmap_put(groups, key, (void *)(uintptr_t)(t->n_groups + 1)))
		return -ENOMEM;
	return (int64_t)t->n_groups++;
}

/* Where sums are gathered: one cell per (group, stack) and per (group, function). */
struct sums {
	struct ptrmap gs; /* group << 32 | stack -> cell + 1 */
	uint32_t *gs_group, *gs_stack;
	uint64_t *gs_vals; /* nv per cell */
	size_t n_gs, cap_gs_group, cap_gs_stack, cap_gs_vals;
	struct ptrmap rows; /* group << 32 | function -> row + 1 */
	uint32_t *row_group, *row_fn;
	uint64_t *row_vals; /* self[nv] then total[nv] per row */
	size_t n_rows, cap_row_group, cap_row_fn, cap_row_vals;
};

static void sums_fini(struct sums *m)
{
	ptrmap_fini(&m->gs);
	ptrmap_fini(&m->rows);
	free(m->gs_group);
	free(m->gs_stack);
	free(m->gs_vals);
	free(m->row_group);
	free(m->row_fn);
	free(m->row_vals);
}

/* The cell of (group, stack), added zeroed if new. Returns its index or a negative errno. */
static int64_t gs_cell(struct sums *m, size_t nv, uint32_t group, uint32_t stack)
{
	uint64_t key = (uint64_t)group << 32 | stack;
	uintptr_t hit = (uintptr_t)ptrmap_get(&m->gs, key);
	int err;

	if (hit)
		return (int64_t)hit - 1;
	err = GROW(m->gs_group, m->cap_gs_group, m->n_gs + 1);
	if (!err)
		err = GROW(m->gs_stack, m->cap_gs_stack, m->n_gs + 1);
	if (!err)
		err = GROW(m->gs_vals, m->cap_gs_vals, (m->n_gs + 1) * nv);
	if (err)
		return err;
	m->gs_group[m->n_gs] = group;
	m->gs_stack[m->n_gs] = stack;
	memset(&m->gs_vals[m->n_gs * nv], 0, nv * sizeof(*m->gs_vals));
	if (ptrmap_put(&m->gs, key, (void *)(uintptr_t)(m->n_gs + 1)))
		return -ENOMEM;
	return (int64_t)m->n_gs++;
}

/* The row of (group, fn), added zeroed if new. Returns its index or a negative errno. */
static int64_t row_cell(struct sums *m, size_t nv, uint32_t group, uint32_t fn)
{
	uint64_t key = (uint64_t)group << 32 | fn;
	uintptr_t hit = (uintptr_t)ptrmap_get(&m->rows, key);
	int err;

	if (hit)
		return (int64_t)hit - 1;
	err = GROW(m->row_group, m->cap_row_group, m->n_rows + 1);
	if (!err)
		err = GROW(m->row_fn, m->cap_row_fn, m->n_rows + 1);
	if (!err)
		err = GROW(m->row_vals, m->cap_row_vals, (m->n_rows + 1) * 2 * nv);
	if (err)
		return err;
	m->row_group[m->n_rows] = group;
	m->row_fn[m->n_rows] = fn;
	memset(&m->row_vals[m->n_rows * 2 * nv], 0, 2 * nv * sizeof(*m->row_vals));
	if (ptrmap_put(&m->rows, key, (void *)(uintptr_t)(m->n_rows + 1)))
		return -ENOMEM;
	return (int64_t)m->n_rows++;
}

/*
 * Add the per-cell sums to the rows: self to the leaf's, total once to each distinct function
 * of the stack. Returns 0 or a negative errno.
 */
static int add_stacks(struct functable *t, const Profd__Profile *p, const uint32_t *frame_fn,
		      struct sums *m, uint32_t no_stack)
{
	size_t nv = t->nv;
	/* stamp[fn] == cell + 1: fn already counted for this cell (recursion). */
	size_t *stamp = calloc(t->n_names ? t->n_names : 1, sizeof(*stamp));
	int err = 0;

	if (!stamp)
		return -ENOMEM;
	for (size_t c = 0; c < m->n_gs && !err; c++) {
		const Profd__Stack *st = p->stacks[m->gs_stack[c]];
		const uint64_t *v = &m->gs_vals[c * nv];
		uint32_t g = m->gs_group[c];
		bool any = false;
		int64_t row;

		for (size_t k = 0; k < nv; k++)
			any |= v[k] != 0;
		if (!any)
			continue;
		row = row_cell(m, nv, g, st->n_frames ? frame_fn[st->frames[0]] : no_stack);
		if (row < 0) {
			err = (int)row;
			break;
		}
		for (size_t k = 0; k < nv; k++)
			sat_inc(&m->row_vals[(size_t)row * 2 * nv + k], v[k]);
		if (!st->n_frames) {
			for (size_t k = 0; k < nv; k++)
				sat_inc(&m->row_vals[(size_t)row * 2 * nv + nv + k], v[k]);
			continue;
		}
		for (size_t j = 0; j < st->n_frames; j++) {
			uint32_t fn = frame_fn[st->frames[j]];

			if (stamp[fn] == c + 1)
				continue;
			stamp[fn] = c + 1;
			row = row_cell(m, nv, g, fn);
			if (row < 0) {
				err = (int)row;
				break;
			}
			for (size_t k = 0; k < nv; k++)
				sat_inc(&m->row_vals[(size_t)row * 2 * nv + nv + k], v[k]);
		}
	}
	free(stamp);
	return err;
}

struct functable *functable__new(const Profd__Profile *p)
{
	return functable__new_opts(p, &(struct functable_opts){0});
}

struct functable *functable__new_opts(const Profd__Profile *p, const struct functable_opts *o)
{
	struct ptrmap groups = {0};
	struct sums m = {0};
	uint32_t *frame_fn = NULL, no_stack = UINT32_MAX;
	struct functable *t;
	bool empty_stacks = false;
	size_t nv;
	int err;

	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->period_ns = p->has_period_ns ? p->period_ns : 0;
	t->per_thread = o->per_thread;
	err = copy_types(t, p);
	if (err)
		goto out;
	nv = t->nv;
	/* Both products are bounded by the decoded message, but check rather than trust that. */
	if (p->n_samples > SIZE_MAX / sizeof(uint64_t) / 2 / nv ||
	    p->n_frames + 1 > SIZE_MAX / sizeof(uint64_t) / 2 / nv) {
		err = -E2BIG;
		goto out;
	}
	frame_fn = calloc(p->n_frames ? p->n_frames : 1, sizeof(*frame_fn));
	if (!frame_fn) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < p->n_samples; i++) {
		const Profd__Sample *s = p->samples[i];
		int64_t g = group_of(t, &groups, p, s, o->per_thread), c;

		if (g < 0 || (c = gs_cell(&m, nv, (uint32_t)g, s->stack)) < 0) {
			err = g < 0 ? (int)g : (int)c;
			goto out;
		}
		for (size_t k = 0; k < nv && k < s->n_values; k++) {
			sat_inc(&m.gs_vals[(size_t)c * nv + k], s->values[k]);
			sat_inc(&t->sums[k], s->values[k]);
		}
		if (p->stacks[s->stack]->n_frames == 0)
			empty_stacks = true;
	}
	err = name_functions(t, p, frame_fn, o->lines);
	if (err)
		goto out;
	if (empty_stacks) {
		t->names[t->n_names] = strdup(NO_STACK_NAME);
		if (!t->names[t->n_names]) {
			err = -ENOMEM;
			goto out;
		}
		no_stack = (uint32_t)t->n_names++;
	}
	err = add_stacks(t, p, frame_fn, &m, no_stack);
	if (err)
		goto out;

	/* Rows for what some sample reached; frames no sample uses stay out. */
	t->rows = calloc(m.n_rows ? m.n_rows : 1, sizeof(*t->rows));
	if (!t->rows) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t r = 0; r < m.n_rows; r++) {
		const uint64_t *v = &m.row_vals[r * 2 * nv];
		bool any = false;

		for (size_t k = 0; k < nv; k++)
			any |= v[nv + k] != 0;
		if (!any)
			continue;
		t->rows[t->n_rows++] = (struct functable_row){
		    .name = t->names[m.row_fn[r]],
		    .thread = o->per_thread ? t->groups[m.row_group[r]] : NULL,
		    .self = v,
		    .total = v + nv,
		};
	}
	t->vals = m.row_vals;
	m.row_vals = NULL;
	functable__sort(t, FUNCTABLE_SORT_SELF, t->cpu);
out:
	sums_fini(&m);
	ptrmap_fini(&groups);
	free(frame_fn);
	if (err) {
		functable__free(t);
		errno = -err;
		return NULL;
	}
	return t;
}

void functable__free(struct functable *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_names; i++)
		free(t->names[i]);
	for (size_t i = 0; i < t->n_groups; i++)
		free(t->groups[i]);
	free(t->groups);
	for (size_t i = 0; i < t->nv; i++) {
		if (t->types)
			free(t->types[i]);
		if (t->units)
			free(t->units[i]);
	}
	free(t->names);
	free(t->types);
	free(t->units);
	free(t->sums);
	free(t->vals);
	free(t->rows);
	free(t);
}

size_t functable__n_rows(const struct functable *t)
{
	return t->n_rows;
}

const struct functable_row *functable__row(const struct functable *t, size_t i)
{
	return i < t->n_rows ? &t->rows[i] : NULL;
}

size_t functable__n_values(const struct functable *t)
{
	return t->nv;
}

const char *functable__value_type(const struct functable *t, size_t vi)
{
	return vi < t->nv ? t->types[vi] : "";
}

const char *functable__value_unit(const struct functable *t, size_t vi)
{
	return vi < t->nv ? t->units[vi] : "";
}

uint64_t functable__sum(const struct functable *t, size_t vi)
{
	return vi < t->nv ? t->sums[vi] : 0;
}

size_t functable__cpu_index(const struct functable *t)
{
	return t->cpu;
}

uint64_t functable__period_ns(const struct functable *t)
{
	return t->period_ns;
}

/* ---- rendering ---------------------------------------------------------------------------- */

char *functable_fmt_time(uint64_t ns, char *buf, size_t len)
{
	if (ns >= 1000000000ull)
		snprintf(buf, len, "%.3fs", ns / 1e9);
	else if (ns >= 1000000ull)
		snprintf(buf, len, "%.3fms", ns / 1e6);
	else
		snprintf(buf, len, "%.3fus", ns / 1e3);
	return buf;
}

static char *fmt_pct(uint64_t v, uint64_t sum, char *buf, size_t len)
{
	if (!sum)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.2f%%", 100.0 * (double)v / (double)sum);
	return buf;
}

enum cell {
	CELL_PCT,   /* share of the column's sum */
	CELL_TIME,  /* a time: the value in ns, or samples * period */
	CELL_COUNT, /* the bare value */
};

/* One printed column: which value, self or total, and how it is shown. */
struct column {
	char header[48];
	size_t vi;
	bool total;
	enum cell cell;
	uint64_t scale; /* CELL_TIME: ns per unit of the value */
	size_t width;
};

#define MAX_COLUMNS 64

static bool is_ns(const char *unit)
{
	return strcmp(unit, "nanoseconds") == 0 || strcmp(unit, "ns") == 0;
}

/* How column vi is called in headers: "CPU", "GPU" for GPU time, else the type's own name. */
static const char *value_label(const struct functable *t, size_t vi)
{
	const char *type = t->types[vi];

	if (vi == t->cpu)
		return "CPU";
	if (strcmp(type, "gpu_time") == 0 || strcmp(type, "gpu_ns") == 0)
		return "GPU";
	return *type ? type : "value";
}

static size_t add_col(struct column *cols, size_t n, size_t vi, bool total, enum cell cell,
		      uint64_t scale, const char *fmt, const char *label)
{
	if (n >= MAX_COLUMNS)
		return n;
	cols[n] = (struct column){.vi = vi, .total = total, .cell = cell, .scale = scale};
	snprintf(cols[n].header, sizeof(cols[n].header), fmt, label);
	return n + 1;
}

/* The table's columns: the CPU column's first, then the others in profile order. */
static size_t table_columns(const struct functable *t, struct column *cols)
{
	size_t n = 0;

	for (size_t step = 0; step <= t->nv; step++) {
		/* step 0 is the CPU column, then every other column in order. */
		size_t vi = step == 0 ? t->cpu : step - 1;
		const char *l = value_label(t, vi);

		if (step && vi == t->cpu)
			continue;
		/* A column nothing was charged to (GPU time of a CPU-only job) is noise. */
		if (vi != t->cpu && !t->sums[vi])
			continue;
		if (vi == t->cpu) {
			bool timed = t->period_ns != 0;

			n = add_col(cols, n, vi, false, CELL_PCT, 0, "Self %s %%", l);
			n = add_col(cols, n, vi, false, timed ? CELL_TIME : CELL_COUNT,
				    t->period_ns, timed ? "Self %s" : "Self Samples", l);
			n = add_col(cols, n, vi, true, CELL_PCT, 0, "%s total %%", l);
			n = add_col(cols, n, vi, true, timed ? CELL_TIME : CELL_COUNT, t->period_ns,
				    timed ? "%s total" : "Total Samples", l);
			if (timed)
				n = add_col(cols, n, vi, true, CELL_COUNT, 0, "# Samples", l);
			continue;
		}
		n = add_col(cols, n, vi, false, CELL_PCT, 0, "Self %s %%", l);
		n = add_col(cols, n, vi, false, is_ns(t->units[vi]) ? CELL_TIME : CELL_COUNT, 1,
			    "Self %s", l);
		n = add_col(cols, n, vi, true, CELL_PCT, 0, "%s total %%", l);
		n = add_col(cols, n, vi, true, is_ns(t->units[vi]) ? CELL_TIME : CELL_COUNT, 1,
			    "%s total", l);
	}
	return n;
}

/*
 * top's columns: Self % and Total % and the sample counts of the CPU column, then time or
 * count pairs of the other columns (GPU time once it exists).
 */
static size_t top_columns(const struct functable *t, struct column *cols)
{
	size_t n = 0, c = t->cpu;

	n = add_col(cols, n, c, false, CELL_PCT, 0, "Self %%", "");
	n = add_col(cols, n, c, true, CELL_PCT, 0, "Total %%", "");
	n = add_col(cols, n, c, false, CELL_COUNT, 0, "Self", "");
	n = add_col(cols, n, c, true, CELL_COUNT, 0, "Total", "");
	for (size_t vi = 0; vi < t->nv; vi++) {
		const char *l = value_label(t, vi);
		enum cell cell = is_ns(t->units[vi]) ? CELL_TIME : CELL_COUNT;

		if (vi == c || !t->sums[vi])
			continue;
		n = add_col(cols, n, vi, false, cell, 1, "Self %s", l);
		n = add_col(cols, n, vi, true, cell, 1, "%s total", l);
	}
	return n;
}

static char *fmt_cell(const struct functable *t, const struct column *c, const uint64_t *self,
		      const uint64_t *total, char *buf, size_t len)
{
	uint64_t v = c->total ? total[c->vi] : self[c->vi];

	switch (c->cell) {
	case CELL_PCT:
		return fmt_pct(v, t->sums[c->vi], buf, len);
	case CELL_TIME:
		/* Saturate rather than wrap: a wrong huge time beats a wrong small one. */
		return functable_fmt_time(
		    c->scale && v > UINT64_MAX / c->scale ? UINT64_MAX : v * c->scale, buf, len);
	default:
		snprintf(buf, len, "%" PRIu64, v);
		return buf;
	}
}

/* Columns on screen: UTF-8 continuation bytes take none. */
static size_t disp_len(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/*
 * Print name in exactly w columns: padded on the right (unless last), or cut with "..." at a
 * character boundary when longer.
 */
static void put_name(FILE *out, const char *name, size_t w, bool last)
{
	size_t len = disp_len(name), cols = 0;
	const char *p = name;

	if (len <= w) {
		fputs(name, out);
		if (!last)
			fprintf(out, "%*s", (int)(w - len), "");
		return;
	}
	if (w < 4) {
		fprintf(out, "%.*s", (int)w, "...");
		return;
	}
	for (; *p; p++) {
		if (((unsigned char)*p & 0xc0) != 0x80) {
			if (cols == w - 3)
				break;
			cols++;
		}
	}
	fprintf(out, "%.*s...", (int)(p - name), name);
}

/* Widen each column to its header and its values over the rows that will be printed. */
static void size_columns(const struct functable *t, struct column *cols, size_t n, size_t rows,
			 size_t min)
{
	char buf[64];

	for (size_t c = 0; c < n; c++) {
		cols[c].width = strlen(cols[c].header) > min ? strlen(cols[c].header) : min;
		for (size_t r = 0; r < rows; r++) {
			size_t l = strlen(fmt_cell(t, &cols[c], t->rows[r].self, t->rows[r].total,
						   buf, sizeof(buf)));

			if (l > cols[c].width)
				cols[c].width = l;
		}
	}
}

static void rule(FILE *out, size_t name_w, size_t thread_w, const struct column *cols, size_t n)
{
	for (size_t i = 0; i < name_w; i++)
		fputc('-', out);
	if (thread_w)
		fputs(COL_SEP, out);
	for (size_t i = 0; i < thread_w; i++)
		fputc('-', out);
	for (size_t c = 0; c < n; c++) {
		fputs(COL_SEP, out);
		for (size_t i = 0; i < cols[c].width; i++)
			fputc('-', out);
	}
	fputc('\n', out);
}

static size_t rows_to_print(const struct functable *t, const struct functable_print_opts *o)
{
	return o->limit && o->limit < t->n_rows ? o->limit : t->n_rows;
}

/* The Thread column's width: 0 without one, else its longest entry (at most 40). */
static size_t thread_width(const struct functable *t, size_t rows)
{
	size_t w = 6; /* "Thread" */

	if (!t->per_thread)
		return 0;
	for (size_t r = 0; r < rows; r++) {
		size_t l = t->rows[r].thread ? disp_len(t->rows[r].thread) : 0;

		if (l > w)
			w = l;
	}
	return w > 40 ? 40 : w;
}

/* The Name column's width: the longest name, shrunk so the line fits o->width. */
static size_t name_width(const struct functable *t, const struct functable_print_opts *o,
			 const struct column *cols, size_t n, size_t rows, size_t thread_w)
{
	size_t w = 4, rest = thread_w ? thread_w + strlen(COL_SEP) : 0; /* "Name" */

	for (size_t r = 0; r < rows; r++) {
		size_t l = disp_len(t->rows[r].name);

		if (l > w)
			w = l;
	}
	for (size_t c = 0; c < n; c++)
		rest += strlen(COL_SEP) + cols[c].width;
	if (o->width && w + rest > o->width)
		w = o->width > rest + NAME_MIN ? o->width - rest : NAME_MIN;
	return w;
}

int functable__print_table(const struct functable *t, const struct functable_print_opts *o,
			   FILE *out)
{
	struct column cols[MAX_COLUMNS];
	size_t n = table_columns(t, cols), rows = rows_to_print(t, o), name_w;
	size_t thread_w = thread_width(t, rows);
	char buf[64];

	size_columns(t, cols, n, rows, TABLE_COL_MIN);
	name_w = name_width(t, o, cols, n, rows, thread_w);

	rule(out, name_w, thread_w, cols, n);
	put_name(out, "Name", name_w, false);
	if (thread_w) {
		fputs(COL_SEP, out);
		put_name(out, "Thread", thread_w, false);
	}
	for (size_t c = 0; c < n; c++)
		fprintf(out, COL_SEP "%*s", (int)cols[c].width, cols[c].header);
	fputc('\n', out);
	rule(out, name_w, thread_w, cols, n);
	for (size_t r = 0; r < rows; r++) {
		put_name(out, t->rows[r].name, name_w, false);
		if (thread_w) {
			fputs(COL_SEP, out);
			put_name(out, t->rows[r].thread ? t->rows[r].thread : "", thread_w, false);
		}
		for (size_t c = 0; c < n; c++)
			fprintf(out, COL_SEP "%*s", (int)cols[c].width,
				fmt_cell(t, &cols[c], t->rows[r].self, t->rows[r].total, buf,
					 sizeof(buf)));
		fputc('\n', out);
	}
	rule(out, name_w, thread_w, cols, n);

	/* Footer: what the percentages are of, as PyTorch prints "Self CPU time total". */
	for (size_t vi = 0; vi < t->nv; vi++) {
		const char *l = value_label(t, vi);

		if (vi != t->cpu && !t->sums[vi])
			continue;
		if (vi == t->cpu && t->period_ns)
			fprintf(out, "Self %s time total: %s\n", l,
				functable_fmt_time(t->sums[vi] > UINT64_MAX / t->period_ns
						       ? UINT64_MAX
						       : t->sums[vi] * t->period_ns,
						   buf, sizeof(buf)));
		else if (vi == t->cpu)
			fprintf(out, "Self %s samples total: %" PRIu64 "\n", l, t->sums[vi]);
		else if (is_ns(t->units[vi]))
			fprintf(out, "Self %s time total: %s\n", l,
				functable_fmt_time(t->sums[vi], buf, sizeof(buf)));
		else
			fprintf(out, "Self %s total: %" PRIu64 "\n", l, t->sums[vi]);
	}
	return ferror(out) ? -EIO : 0;
}

int functable__print_top(const struct functable *t, const struct functable_print_opts *o, FILE *out)
{
	struct column cols[MAX_COLUMNS];
	size_t n = top_columns(t, cols), rows = rows_to_print(t, o), used = 0, name_w;
	size_t thread_w = thread_width(t, rows);
	char buf[64];

	size_columns(t, cols, n, rows, 7);
	for (size_t c = 0; c < n; c++)
		used += cols[c].width + strlen(COL_SEP);
	if (thread_w)
		used += thread_w + strlen(COL_SEP);
	/* The name takes what is left of the line, a few columns at the least. */
	name_w = o->width ? (o->width > used + 8 ? o->width - used : 8) : SIZE_MAX;

	if (o->ansi)
		fputs("\033[7m", out);
	for (size_t c = 0; c < n; c++)
		fprintf(out, "%*s" COL_SEP, (int)cols[c].width, cols[c].header);
	if (thread_w) {
		put_name(out, "Thread", thread_w, false);
		fputs(COL_SEP, out);
	}
	put_name(out, "Function", name_w, !o->ansi || !o->width);
	if (o->ansi) {
		/* Reverse video across the whole line, like top's header. */
		fputs("\033[0m", out);
	}
	fputc('\n', out);
	for (size_t r = 0; r < rows; r++) {
		for (size_t c = 0; c < n; c++)
			fprintf(out, "%*s" COL_SEP, (int)cols[c].width,
				fmt_cell(t, &cols[c], t->rows[r].self, t->rows[r].total, buf,
					 sizeof(buf)));
		if (thread_w) {
			put_name(out, t->rows[r].thread ? t->rows[r].thread : "", thread_w, false);
			fputs(COL_SEP, out);
		}
		put_name(out, t->rows[r].name, name_w, true);
		fputc('\n', out);
	}
	return ferror(out) ? -EIO : 0;
}
