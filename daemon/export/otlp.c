// SPDX-License-Identifier: BSD-2-Clause
/*
 * OTLP profiles encoder: an export batch (struct export_series) as one ExportProfilesServiceRequest
 * of opentelemetry-proto v1.11.0 (proto/otlp/), gzip-compressed.
 *
 * The shape, and why:
 * - One ProfilesDictionary for the request. Entry 0 of every table is the zero value the spec
 *   asks for (string_table[0] is ""), so that index 0 means "none" everywhere; entries are
 *   shared by every series of the batch (one string, function, location, stack each).
 * - One ResourceProfiles per distinct label set, in the order the sets first appear, with the
 *   labels as resource attributes after the semantic conventions (label_attrs below; others as
 *   they are), and one ScopeProfiles (scope "profd", the daemon's version).
 * - A v1.11 Profile has a single sample_type (field 1 is not repeated), so a series gives one
 *   Profile per value column of its neutral profile: CPU one (samples/count), GPU two
 *   (gpu_kernel_time/nanoseconds, gpu_kernel_launches/count) over the same stacks, off-CPU one.
 *   Every Profile carries the window as time_unix_nano / duration_nano.
 * - CPU time is not sent as a second cpu/nanoseconds profile: the CPU profile says
 *   period_type cpu/nanoseconds and period = the sampling period, which is how OTLP (like pprof)
 *   states that every sample stands for that much CPU time. The OpenTelemetry eBPF profiler sends
 *   CPU profiles this way and Pyroscope's OTLP ingestion turns samples:count with period type
 *   cpu:nanoseconds into process_cpu cpu:nanoseconds (values times period). A second profile
 *   would repeat every sample and stack reference for a value the receiver can compute, and
 *   receivers that add up a resource's profiles would count the CPU twice.
 * - Samples of one column are merged per stack (the neutral profile keeps pid/tid apart; a
 *   series is already one label set, and pid/tid are labels only when asked for) and a sample
 *   whose value in the column is 0 is left out. Values saturate at INT64_MAX.
 * - Stacks are leaf first, as in the neutral profile. Locations carry profile.frame.type:
 *   "kernel", "native", "cpython", and "cuda" for GPU kernel frames (the semantic conventions
 *   have no value for GPU code; "cuda" names what runs there). NVTX ranges and thread-state
 *   frames are not code and have no frame type. Python frames: Function{name, filename} and
 *   Line{line}, no mapping. Native and kernel frames: a Mapping per file (kernel frames without
 *   a module: "[kernel.kallsyms]") with process.executable.build_id.gnu when the build id is
 *   known, and the address: the daemon's module-relative ELF address, with the mapping at 0
 *   and file offset 0 (as profctl's pprof output does), its limit one past the highest address
 *   seen. Unsymbolized frames ("[unknown]") have a location with no line.
 */
#include "otlp.h"
#include "otlp_pb.h"

#include "grow.h"
#include "intern.h"
#include "ptrmap.h"
#include "satmath.h"
#include "wire.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define SCOPE_NAME "profd"
#define KERNEL_MAPPING "[kernel.kallsyms]"
#define UNKNOWN_NAME "[unknown]"
#define FRAME_TYPE_KEY "profile.frame.type"
#define BUILD_ID_KEY "process.executable.build_id.gnu"

/* Series labels (Pyroscope's names) -> resource attributes (semantic conventions). */
static const struct {
	const char *label;
	const char *attr;
	bool integer; /* an int attribute when the value is a decimal number */
} label_attrs[] = {
    {"service_name", "service.name", false},
    {"host", "host.name", false},
    {"container", "container.id", false},
    {"pod_uid", "k8s.pod.uid", false},
    {"namespace", "k8s.namespace.name", false},
    {"pid", "process.pid", true},
    {"tid", "thread.id", true},
};

struct attr_key {
	int32_t key;	/* string index */
	int32_t is_int; /* 1: ival, 0: sval */
	int64_t ival;
	int64_t sval; /* index in vals */
};

struct e_attr {
	OtKeyValueAndUnit kv;
	OtAnyValue v;
};

struct e_map {
	OtMapping m;
	int32_t attr; /* build id attribute, 0: none */
};

struct e_loc {
	OtLocation l;
	OtLine line;
	OtLine *line_ptr;
	int32_t attr; /* frame type attribute, 0: none */
};

struct e_stack {
	OtStack s;
};

struct e_res {
	OtResourceProfiles rp;
	OtResource r;
	OtScopeProfiles sp;
	OtScopeProfiles *sp_ptr;
	OtKeyValue *kv;
	OtAnyValue *av;
	OtKeyValue **kv_ptrs;
	size_t nkv;
	OtProfile **prof_ptrs;
	size_t nprof;
};

struct e_sample {
	OtSample s;
	uint64_t sum;
	int64_t v;
};

struct e_prof {
	OtProfile p;
	OtValueType st, pt;
	size_t res;
	struct e_sample *samples;
	size_t nsamples, cap_samples;
	OtSample **ptrs;
};

struct enc {
	struct intern *strs; /* string_table: index = string index */
	struct intern *vals; /* string attribute values (not in string_table: sent as strings) */
	/* Dictionary tables: intern index i is table entry i + 1 (entry 0 is the zero value). */
	struct intern *attr_keys, *map_keys, *fn_keys, *loc_keys, *stack_keys, *res_keys;
	struct e_attr *attrs;
	size_t cap_attrs;
	struct e_map *maps;
	size_t cap_maps;
	OtFunction *fns;
	size_t cap_fns;
	struct e_loc *locs;
	size_t cap_locs;
	struct e_stack *stacks;
	size_t cap_stacks;
	struct e_res *res;
	size_t cap_res;
	struct e_prof *profs;
	size_t nprofs, cap_profs;
	OtScope scope;
	int32_t frame_type_attr[PROFD__FRAME_KIND__FRAME_STATE + 1];
};

/* Make room for element i of *arr, zeroed. Returns 0, -EOVERFLOW or -ENOMEM. */
static int grow_zero(void **arr, size_t *cap, size_t i, size_t size)
{
	size_t old = *cap;
	int err = grow_array(arr, cap, i + 1, size);

	if (!err && *cap > old)
		memset((char *)*arr + old * size, 0, (*cap - old) * size);
	return err;
}

/* A string's index in string_table, or a negative errno. */
static int32_t str_idx(struct enc *e, const char *s)
{
	int64_t i = intern__str(e->strs, s);

	if (i < 0)
		return (int32_t)i;
	return i > INT32_MAX ? -E2BIG : (int32_t)i;
}

/*
 * Intern key in t for a table with entries of size bytes at *arr; a new entry is zeroed.
 * Returns the intern index (table index - 1) with *added, or a negative errno.
 */
static int64_t table_add(struct intern *t, const void *key, size_t len, void **arr, size_t *cap,
			 size_t size, int *added)
{
	int64_t i = intern__add(t, key, len, added);
	int err;

	if (i < 0)
		return i;
	if (i >= INT32_MAX)
		return -E2BIG;
	if (*added) {
		err = grow_zero(arr, cap, (size_t)i, size);
		if (err)
			return err;
	}
	return i;
}

/* The attribute table index of key = value (a string, or an int), or a negative errno. */
static int32_t attr_idx(struct enc *e, const char *key, const char *sval, int64_t ival)
{
	struct attr_key k;
	struct e_attr *a;
	int64_t i;
	int added;

	memset(&k, 0, sizeof(k));
	k.key = str_idx(e, key);
	if (k.key < 0)
		return k.key;
	k.is_int = !sval;
	if (sval) {
		k.sval = intern__str(e->vals, sval);
		if (k.sval < 0)
			return (int32_t)k.sval;
	} else {
		k.ival = ival;
	}
	i = table_add(e->attr_keys, &k, sizeof(k), (void **)&e->attrs, &e->cap_attrs,
		      sizeof(*e->attrs), &added);
	if (i < 0 || !added)
		return i < 0 ? (int32_t)i : (int32_t)i + 1;
	a = &e->attrs[i];
	opentelemetry__proto__profiles__v1development__key_value_and_unit__init(&a->kv);
	opentelemetry__proto__common__v1__any_value__init(&a->v);
	a->kv.key_strindex = k.key;
	if (sval) {
		a->v.value_case = OT_STRING;
		/* The interned copy: its own allocation, stable while the table grows. */
		a->v.string_value = intern__keys(e->vals)[k.sval];
	} else {
		a->v.value_case = OT_INT;
		a->v.int_value = ival;
	}
	return (int32_t)i + 1;
}

static const char *pstr(const Profd__Profile *p, uint32_t i)
{
	return p->strings[i];
}

/* Check every index of the neutral profile before following it. 0 or -EINVAL. */
static int validate(const Profd__Profile *p)
{
	if (!p->n_strings || !p->n_value_types)
		return -EINVAL;
	for (size_t i = 0; i < p->n_strings; i++)
		if (!p->strings[i])
			return -EINVAL;
	for (size_t i = 0; i < p->n_frames; i++) {
		const Profd__Frame *f = p->frames[i];

		if (f->name >= p->n_strings || (f->has_module && f->module >= p->n_strings) ||
		    (f->has_file && f->file >= p->n_strings) ||
		    (f->has_build_id && f->build_id >= p->n_strings))
			return -EINVAL;
	}
	for (size_t i = 0; i < p->n_stacks; i++)
		for (size_t j = 0; j < p->stacks[i]->n_frames; j++)
			if (p->stacks[i]->frames[j] >= p->n_frames)
				return -EINVAL;
	for (size_t i = 0; i < p->n_value_types; i++)
		if (p->value_types[i]->type >= p->n_strings ||
		    p->value_types[i]->unit >= p->n_strings)
			return -EINVAL;
	for (size_t i = 0; i < p->n_samples; i++)
		if (p->samples[i]->stack >= p->n_stacks ||
		    p->samples[i]->n_values != p->n_value_types)
			return -EINVAL;
	return 0;
}

static const char *frame_type(Profd__FrameKind k)
{
	switch (k) {
	case PROFD__FRAME_KIND__FRAME_KERNEL:
		return "kernel";
	case PROFD__FRAME_KIND__FRAME_NATIVE:
		return "native";
	case PROFD__FRAME_KIND__FRAME_PYTHON:
		return "cpython";
	case PROFD__FRAME_KIND__FRAME_GPU:
		return "cuda";
	default:
		return NULL;
	}
}

/* The mapping table index of a native or kernel frame's file, 0 for none, or -errno. */
static int32_t mapping_idx(struct enc *e, const Profd__Profile *p, const Profd__Frame *f)
{
	const char *module = f->has_module ? pstr(p, f->module) : "";
	const char *build_id = f->has_build_id ? pstr(p, f->build_id) : "";
	int32_t key[2];
	struct e_map *m;
	int64_t i;
	int added;

	if (f->kind != PROFD__FRAME_KIND__FRAME_KERNEL &&
	    f->kind != PROFD__FRAME_KIND__FRAME_NATIVE)
		return 0;
	if (!*module && f->kind == PROFD__FRAME_KIND__FRAME_KERNEL)
		module = KERNEL_MAPPING;
	if (!*module)
		return 0;
	key[0] = str_idx(e, module);
	key[1] = *build_id ? attr_idx(e, BUILD_ID_KEY, build_id, 0) : 0;
	if (key[0] < 0 || key[1] < 0)
		return key[0] < 0 ? key[0] : key[1];
	i = table_add(e->map_keys, key, sizeof(key), (void **)&e->maps, &e->cap_maps,
		      sizeof(*e->maps), &added);
	if (i < 0 || !added)
		return i < 0 ? (int32_t)i : (int32_t)i + 1;
	m = &e->maps[i];
	opentelemetry__proto__profiles__v1development__mapping__init(&m->m);
	m->m.filename_strindex = key[0];
	m->attr = key[1];
	return (int32_t)i + 1;
}

/* The function table index of name in file, or -errno. */
static int32_t function_idx(struct enc *e, const char *name, const char *file)
{
	int32_t key[2];
	int64_t i;
	int added;

	key[0] = str_idx(e, name);
	key[1] = str_idx(e, file);
	if (key[0] < 0 || key[1] < 0)
		return key[0] < 0 ? key[0] : key[1];
	i = table_add(e->fn_keys, key, sizeof(key), (void **)&e->fns, &e->cap_fns, sizeof(*e->fns),
		      &added);
	if (i < 0 || !added)
		return i < 0 ? (int32_t)i : (int32_t)i + 1;
	opentelemetry__proto__profiles__v1development__function__init(&e->fns[i]);
	e->fns[i].name_strindex = key[0];
	e->fns[i].filename_strindex = key[1];
	return (int32_t)i + 1;
}

struct loc_key {
	int32_t mapping;
	int32_t function; /* 0: no line */
	int64_t line;
	uint64_t address;
	int32_t attr;
	int32_t pad;
};

/* The location table index of frame f, or -errno. */
static int32_t location_idx(struct enc *e, const Profd__Profile *p, const Profd__Frame *f)
{
	const char *name = pstr(p, f->name);
	const char *file = f->has_file ? pstr(p, f->file) : "";
	unsigned kind = (unsigned)f->kind;
	struct loc_key k;
	struct e_loc *l;
	int64_t i;
	int added;

	memset(&k, 0, sizeof(k));
	k.mapping = mapping_idx(e, p, f);
	if (k.mapping < 0)
		return k.mapping;
	if (*name && strcmp(name, UNKNOWN_NAME) != 0) {
		k.function = function_idx(e, name, file);
		if (k.function < 0)
			return k.function;
		k.line = f->has_line ? f->line : 0;
	}
	if (k.mapping && f->has_address)
		k.address = f->address;
	if (kind < sizeof(e->frame_type_attr) / sizeof(e->frame_type_attr[0]) && frame_type(kind)) {
		/* Added on first use: the dictionary holds only what the request uses. */
		if (!e->frame_type_attr[kind])
			e->frame_type_attr[kind] = attr_idx(e, FRAME_TYPE_KEY, frame_type(kind), 0);
		if (e->frame_type_attr[kind] < 0)
			return e->frame_type_attr[kind];
		k.attr = e->frame_type_attr[kind];
	}
	i = table_add(e->loc_keys, &k, sizeof(k), (void **)&e->locs, &e->cap_locs, sizeof(*e->locs),
		      &added);
	if (i < 0 || !added)
		return i < 0 ? (int32_t)i : (int32_t)i + 1;
	l = &e->locs[i];
	opentelemetry__proto__profiles__v1development__location__init(&l->l);
	opentelemetry__proto__profiles__v1development__line__init(&l->line);
	l->l.mapping_index = k.mapping;
	l->l.address = k.address;
	l->line.function_index = k.function;
	l->line.line = k.line;
	l->attr = k.attr;
	if (k.mapping) {
		OtMapping *m = &e->maps[k.mapping - 1].m;

		if (k.address >= m->memory_limit)
			m->memory_limit = k.address == UINT64_MAX ? UINT64_MAX : k.address + 1;
	}
	return (int32_t)i + 1;
}

/* The stack table index of the neutral stack si (its locations cached in loc_of). */
static int32_t stack_idx(struct enc *e, const Profd__Profile *p, size_t si, int32_t *loc_of)
{
	const Profd__Stack *s = p->stacks[si];
	int32_t *key;
	int64_t i;
	int added;

	if (!s->n_frames)
		return 0; /* stack_table[0], the empty stack */
	if (s->n_frames > INT32_MAX / sizeof(*key))
		return -E2BIG;
	key = malloc(s->n_frames * sizeof(*key));
	if (!key)
		return -ENOMEM;
	for (size_t j = 0; j < s->n_frames; j++) {
		uint32_t fi = s->frames[j];

		if (!loc_of[fi]) {
			int32_t l = location_idx(e, p, p->frames[fi]);

			if (l < 0) {
				free(key);
				return l;
			}
			loc_of[fi] = l;
		}
		key[j] = loc_of[fi];
	}
	i = table_add(e->stack_keys, key, s->n_frames * sizeof(*key), (void **)&e->stacks,
		      &e->cap_stacks, sizeof(*e->stacks), &added);
	if (i < 0 || !added) {
		free(key);
		return i < 0 ? (int32_t)i : (int32_t)i + 1;
	}
	opentelemetry__proto__profiles__v1development__stack__init(&e->stacks[i].s);
	e->stacks[i].s.n_location_indices = s->n_frames;
	e->stacks[i].s.location_indices = key; /* owned by the entry */
	return (int32_t)i + 1;
}

static int cmp_label(const void *a, const void *b)
{
	const struct export_label *x = *(const struct export_label *const *)a;
	const struct export_label *y = *(const struct export_label *const *)b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

/* value as a decimal int64, false when it is not one. */
static bool parse_int(const char *value, int64_t *out)
{
	uint64_t v = 0;

	if (!*value || strlen(value) > 19)
		return false;
	for (const char *c = value; *c; c++) {
		if (*c < '0' || *c > '9')
			return false;
		v = v * 10 + (uint64_t)(*c - '0');
	}
	if (v > INT64_MAX)
		return false;
	*out = (int64_t)v;
	return true;
}

/* Fill the resource attributes of a new resource from its sorted labels. 0 or -ENOMEM. */
static int resource_init(struct e_res *r, const struct export_label **labels, size_t n)
{
	opentelemetry__proto__profiles__v1development__resource_profiles__init(&r->rp);
	opentelemetry__proto__resource__v1__resource__init(&r->r);
	opentelemetry__proto__profiles__v1development__scope_profiles__init(&r->sp);
	r->kv = calloc(n ? n : 1, sizeof(*r->kv));
	r->av = calloc(n ? n : 1, sizeof(*r->av));
	r->kv_ptrs = calloc(n ? n : 1, sizeof(*r->kv_ptrs));
	if (!r->kv || !r->av || !r->kv_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *key = labels[i]->name;
		bool integer = false;
		int64_t iv;

		for (size_t j = 0; j < sizeof(label_attrs) / sizeof(label_attrs[0]); j++)
			if (strcmp(labels[i]->name, label_attrs[j].label) == 0) {
				key = label_attrs[j].attr;
				integer = label_attrs[j].integer;
				break;
			}
		opentelemetry__proto__common__v1__key_value__init(&r->kv[i]);
		opentelemetry__proto__common__v1__any_value__init(&r->av[i]);
		/* Borrowed from the series (or label_attrs) until the request is packed. */
		r->kv[i].key = (char *)key;
		r->kv[i].value = &r->av[i];
		if (integer && parse_int(labels[i]->value, &iv)) {
			r->av[i].value_case = OT_INT;
			r->av[i].int_value = iv;
		} else {
			r->av[i].value_case = OT_STRING;
			r->av[i].string_value = (char *)labels[i]->value;
		}
		r->kv_ptrs[i] = &r->kv[i];
	}
	r->nkv = n;
	return 0;
}

/* The resource index of a series' label set, adding the resource if new, or -errno. */
static int64_t resource_idx(struct enc *e, const struct export_series *s)
{
	const struct export_label **sorted;
	char *key = NULL;
	size_t len = 0, pos = 0;
	int64_t i;
	int added, err = 0;

	sorted = calloc(s->nlabels ? s->nlabels : 1, sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	for (size_t j = 0; j < s->nlabels; j++) {
		if (!s->labels[j].name || !s->labels[j].value) {
			err = -EINVAL;
			goto out;
		}
		sorted[j] = &s->labels[j];
		len += strlen(sorted[j]->name) + strlen(sorted[j]->value) + 2;
	}
	qsort(sorted, s->nlabels, sizeof(*sorted), cmp_label);
	key = malloc(len ? len : 1);
	if (!key) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < s->nlabels; j++) {
		size_t nl = strlen(sorted[j]->name) + 1, vl = strlen(sorted[j]->value) + 1;

		memcpy(key + pos, sorted[j]->name, nl);
		memcpy(key + pos + nl, sorted[j]->value, vl);
		pos += nl + vl;
	}
	i = table_add(e->res_keys, key, len, (void **)&e->res, &e->cap_res, sizeof(*e->res),
		      &added);
	if (i < 0) {
		err = (int)i;
		goto out;
	}
	if (added)
		err = resource_init(&e->res[i], sorted, s->nlabels);
out:
	free(key);
	free(sorted);
	return err ? err : i;
}

/* Encode column c of series s as a Profile of resource res (none when the column is empty). */
static int add_profile(struct enc *e, const struct export_series *s, size_t c, int32_t *loc_of,
		       int32_t *stack_of)
{
	const Profd__Profile *p = s->profile;
	struct ptrmap pos = {0};
	struct e_prof *ep;
	int64_t res;
	int err;

	err = grow_zero((void **)&e->profs, &e->cap_profs, e->nprofs, sizeof(*e->profs));
	if (err)
		return err;
	ep = &e->profs[e->nprofs];
	for (size_t i = 0; i < p->n_samples; i++) {
		const Profd__Sample *smp = p->samples[i];
		uint64_t v = smp->values[c];
		struct e_sample *es;
		uintptr_t at;
		int32_t st;

		if (!v)
			continue;
		if (!stack_of[smp->stack]) {
			st = stack_idx(e, p, smp->stack, loc_of);
			if (st < 0) {
				err = st;
				goto fail;
			}
			stack_of[smp->stack] = st + 1;
		}
		st = stack_of[smp->stack] - 1;
		at = (uintptr_t)ptrmap_get(&pos, (uint64_t)st);
		if (!at) {
			err = grow_zero((void **)&ep->samples, &ep->cap_samples, ep->nsamples,
					sizeof(*ep->samples));
			if (!err)
				err = ptrmap_put(&pos, (uint64_t)st, (void *)(ep->nsamples + 1));
			if (err)
				goto fail;
			at = ++ep->nsamples;
			es = &ep->samples[at - 1];
			opentelemetry__proto__profiles__v1development__sample__init(&es->s);
			es->s.stack_index = st;
		}
		es = &ep->samples[at - 1];
		es->sum = sat_add(es->sum, v);
	}
	ptrmap_fini(&pos);
	if (!ep->nsamples)
		return 0; /* nothing in this column: no profile (its zeroed slot is reused) */
	res = resource_idx(e, s);
	if (res < 0) {
		err = (int)res;
		goto fail;
	}
	opentelemetry__proto__profiles__v1development__profile__init(&ep->p);
	opentelemetry__proto__profiles__v1development__value_type__init(&ep->st);
	opentelemetry__proto__profiles__v1development__value_type__init(&ep->pt);
	ep->res = (size_t)res;
	ep->st.type_strindex = str_idx(e, pstr(p, p->value_types[c]->type));
	ep->st.unit_strindex = str_idx(e, pstr(p, p->value_types[c]->unit));
	if (ep->st.type_strindex < 0 || ep->st.unit_strindex < 0) {
		err = -ENOMEM;
		goto fail;
	}
	ep->p.time_unix_nano = s->time_unix_ns;
	ep->p.duration_nano = s->duration_ns;
	if (s->kind == EXPORT_CPU) {
		uint64_t period = p->has_period_ns ? p->period_ns : 0;

		if (!period && p->has_frequency_hz && p->frequency_hz)
			period = 1000000000ull / p->frequency_hz;
		if (period) {
			ep->pt.type_strindex = str_idx(e, "cpu");
			ep->pt.unit_strindex = str_idx(e, "nanoseconds");
			if (ep->pt.type_strindex < 0 || ep->pt.unit_strindex < 0) {
				err = -ENOMEM;
				goto fail;
			}
			ep->p.period = period > INT64_MAX ? INT64_MAX : (int64_t)period;
			ep->p.period_type = &ep->pt; /* fixed up again in finish() */
		}
	}
	e->res[res].nprof++;
	e->nprofs++;
	return 0;
fail:
	ptrmap_fini(&pos);
	free(ep->samples);
	memset(ep, 0, sizeof(*ep));
	return err;
}

static int add_series(struct enc *e, const struct export_series *s)
{
	const Profd__Profile *p = s->profile;
	int32_t *loc_of = NULL, *stack_of = NULL;
	int err;

	if (!p || (unsigned)s->kind >= EXPORT_KIND__COUNT || (s->nlabels && !s->labels))
		return -EINVAL;
	err = validate(p);
	if (err)
		return err;
	loc_of = calloc(p->n_frames ? p->n_frames : 1, sizeof(*loc_of));
	stack_of = calloc(p->n_stacks ? p->n_stacks : 1, sizeof(*stack_of));
	if (!loc_of || !stack_of) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t c = 0; c < p->n_value_types && !err; c++)
		err = add_profile(e, s, c, loc_of, stack_of);
out:
	free(loc_of);
	free(stack_of);
	return err;
}

static int enc_init(struct enc *e)
{
	memset(e, 0, sizeof(*e));
	e->strs = intern__new();
	e->vals = intern__new();
	e->attr_keys = intern__new();
	e->map_keys = intern__new();
	e->fn_keys = intern__new();
	e->loc_keys = intern__new();
	e->stack_keys = intern__new();
	e->res_keys = intern__new();
	if (!e->strs || !e->vals || !e->attr_keys || !e->map_keys || !e->fn_keys || !e->loc_keys ||
	    !e->stack_keys || !e->res_keys)
		return -ENOMEM;
	if (str_idx(e, "") != 0)
		return -ENOMEM;
	opentelemetry__proto__common__v1__instrumentation_scope__init(&e->scope);
	e->scope.name = (char *)SCOPE_NAME;
	e->scope.version = (char *)PROFD_VERSION;
	return 0;
}

static void enc_fini(struct enc *e)
{
	/* Every slot up to a table's capacity is zeroed when it grows: free by capacity. */
	for (size_t i = 0; i < e->cap_stacks; i++)
		free(e->stacks[i].s.location_indices);
	for (size_t i = 0; i < e->cap_res; i++) {
		free(e->res[i].kv);
		free(e->res[i].av);
		free(e->res[i].kv_ptrs);
		free(e->res[i].prof_ptrs);
	}
	for (size_t i = 0; i < e->cap_profs; i++) {
		free(e->profs[i].samples);
		free(e->profs[i].ptrs);
	}
	free(e->attrs);
	free(e->maps);
	free(e->fns);
	free(e->locs);
	free(e->stacks);
	free(e->res);
	free(e->profs);
	intern__free(e->strs);
	intern__free(e->vals);
	intern__free(e->attr_keys);
	intern__free(e->map_keys);
	intern__free(e->fn_keys);
	intern__free(e->loc_keys);
	intern__free(e->stack_keys);
	intern__free(e->res_keys);
}

/* A table's pointer array: entry 0 points at zero, entry i + 1 at base + i * size. */
static void **table_ptrs(void *zero, void *base, size_t n, size_t size)
{
	void **t = calloc(n + 1, sizeof(*t));

	if (!t)
		return NULL;
	t[0] = zero;
	for (size_t i = 0; i < n; i++)
		t[i + 1] = (char *)base + i * size;
	return t;
}

/* Every table as protobuf-c wants it, packed and gzipped. Growth is over: fix the pointers. */
static int finish(struct enc *e, uint8_t **out, size_t *len)
{
	OtDictionary dict;
	OtRequest req;
	OtMapping zero_map;
	OtLocation zero_loc;
	OtFunction zero_fn;
	OtLink zero_link, *zero_link_ptr = &zero_link;
	OtKeyValueAndUnit zero_attr;
	OtStack zero_stack;
	size_t nres = intern__count(e->res_keys), nattrs = intern__count(e->attr_keys);
	size_t nmaps = intern__count(e->map_keys), nfns = intern__count(e->fn_keys);
	size_t nlocs = intern__count(e->loc_keys), nstacks = intern__count(e->stack_keys);
	void **maps = NULL, **locs = NULL, **fns = NULL, **attrs = NULL, **stacks = NULL;
	OtResourceProfiles **res = NULL;
	int err = -ENOMEM;

	opentelemetry__proto__profiles__v1development__mapping__init(&zero_map);
	opentelemetry__proto__profiles__v1development__location__init(&zero_loc);
	opentelemetry__proto__profiles__v1development__function__init(&zero_fn);
	opentelemetry__proto__profiles__v1development__link__init(&zero_link);
	opentelemetry__proto__profiles__v1development__key_value_and_unit__init(&zero_attr);
	opentelemetry__proto__profiles__v1development__stack__init(&zero_stack);
	for (size_t i = 0; i < nattrs; i++)
		e->attrs[i].kv.value = &e->attrs[i].v;
	for (size_t i = 0; i < nmaps; i++)
		if (e->maps[i].attr) {
			e->maps[i].m.n_attribute_indices = 1;
			e->maps[i].m.attribute_indices = &e->maps[i].attr;
		}
	for (size_t i = 0; i < nlocs; i++) {
		struct e_loc *l = &e->locs[i];

		if (l->line.function_index) {
			l->line_ptr = &l->line;
			l->l.n_lines = 1;
			l->l.lines = &l->line_ptr;
		}
		if (l->attr) {
			l->l.n_attribute_indices = 1;
			l->l.attribute_indices = &l->attr;
		}
	}
	for (size_t i = 0; i < nres; i++) {
		struct e_res *r = &e->res[i];

		r->prof_ptrs = calloc(r->nprof ? r->nprof : 1, sizeof(*r->prof_ptrs));
		if (!r->prof_ptrs)
			goto out;
		r->r.n_attributes = r->nkv;
		r->r.attributes = r->kv_ptrs;
		r->rp.resource = &r->r;
		r->sp.scope = &e->scope;
		r->sp.profiles = r->prof_ptrs;
		r->sp.n_profiles = 0; /* counts up as the profiles are placed below */
		r->sp_ptr = &r->sp;
		r->rp.n_scope_profiles = 1;
		r->rp.scope_profiles = &r->sp_ptr;
	}
	for (size_t i = 0; i < e->nprofs; i++) {
		struct e_prof *ep = &e->profs[i];
		struct e_res *r = &e->res[ep->res];

		ep->ptrs = calloc(ep->nsamples, sizeof(*ep->ptrs));
		if (!ep->ptrs)
			goto out;
		for (size_t j = 0; j < ep->nsamples; j++) {
			struct e_sample *es = &ep->samples[j];

			es->v = es->sum > INT64_MAX ? INT64_MAX : (int64_t)es->sum;
			es->s.n_values = 1;
			es->s.values = &es->v;
			ep->ptrs[j] = &es->s;
		}
		ep->p.sample_type = &ep->st;
		if (ep->p.period_type)
			ep->p.period_type = &ep->pt;
		ep->p.n_samples = ep->nsamples;
		ep->p.samples = ep->ptrs;
		r->prof_ptrs[r->sp.n_profiles++] = &ep->p;
	}
	maps = table_ptrs(&zero_map, e->maps, nmaps, sizeof(*e->maps));
	locs = table_ptrs(&zero_loc, e->locs, nlocs, sizeof(*e->locs));
	fns = table_ptrs(&zero_fn, e->fns, nfns, sizeof(*e->fns));
	attrs = table_ptrs(&zero_attr, e->attrs, nattrs, sizeof(*e->attrs));
	stacks = table_ptrs(&zero_stack, e->stacks, nstacks, sizeof(*e->stacks));
	res = calloc(nres ? nres : 1, sizeof(*res));
	if (!maps || !locs || !fns || !attrs || !stacks || !res)
		goto out;
	for (size_t i = 0; i < nres; i++)
		res[i] = &e->res[i].rp;
	opentelemetry__proto__profiles__v1development__profiles_dictionary__init(&dict);
	dict.n_mapping_table = nmaps + 1;
	dict.mapping_table = (OtMapping **)maps;
	dict.n_location_table = nlocs + 1;
	dict.location_table = (OtLocation **)locs;
	dict.n_function_table = nfns + 1;
	dict.function_table = (OtFunction **)fns;
	dict.n_link_table = 1;
	dict.link_table = &zero_link_ptr;
	dict.n_string_table = intern__count(e->strs);
	dict.string_table = intern__keys(e->strs);
	dict.n_attribute_table = nattrs + 1;
	dict.attribute_table = (OtKeyValueAndUnit **)attrs;
	dict.n_stack_table = nstacks + 1;
	dict.stack_table = (OtStack **)stacks;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(
	    &req);
	req.n_resource_profiles = nres;
	req.resource_profiles = res;
	req.dictionary = &dict;
	err = otlp_pack_gzip(&req, out, len);
out:
	free(maps);
	free(locs);
	free(fns);
	free(attrs);
	free(stacks);
	free(res);
	return err;
}

int otlp__encode(const struct export_series *series, size_t n, uint8_t **out, size_t *len)
{
	struct enc e;
	int err;

	*out = NULL;
	*len = 0;
	if (n && !series)
		return -EINVAL;
	err = enc_init(&e);
	for (size_t i = 0; i < n && !err; i++)
		err = add_series(&e, &series[i]);
	if (!err)
		err = finish(&e, out, len);
	enc_fini(&e);
	return err;
}
