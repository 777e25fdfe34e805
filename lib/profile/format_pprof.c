// SPDX-License-Identifier: BSD-2-Clause
/*
 * pprof output: the profile as a perftools.profiles.Profile (proto/profile.proto), encoded by
 * protobuf-c and gzipped with zlib, as `go tool pprof` and the tools that share its format read
 * it from disk.
 *
 * The daemon already symbolized every frame, so the file says so (has_functions on every
 * mapping) and readers do not try again against binaries that may have changed since. Locations
 * keep the daemon's module-relative ELF addresses; each mapping starts at 0 with file offset 0,
 * so an address minus the mapping's start plus its offset is that same ELF address, and the
 * limit is one past the highest address seen in the module. Kernel frames carry plain function
 * names, as pprof users expect; their mapping ("[kernel.kallsyms]" or the module's "[name]")
 * keeps the kind visible. Frames without a symbol get a location with its address and no
 * function, which is how pprof shows unsymbolized code. Python frames have no mapping: their
 * function is the qualified name with the full path of the file, and the line is the line
 * executing.
 */
#include "pprof.h"
#include "grow.h"
#include "intern.h"
#include "profile.h"
#include "wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <zlib.h>

#include "profile.pb-c.h"

#define KERNEL_MAPPING "[kernel.kallsyms]"
#define UNKNOWN_NAME "[unknown]"
#define MAX_LABELS 4

struct pp_mapping {
	Perftools__Profiles__Mapping m;
	bool any_symbol; /* some location in it has a function */
	bool all_lines;	 /* every such location has a line number */
	bool all_files;	 /* every such function has a file name */
	uint64_t weight; /* samples with a frame in it */
	size_t last;	 /* the sample that last added to weight, + 1 */
};

struct pp_location {
	Perftools__Profiles__Location loc;
	Perftools__Profiles__Line line;
	Perftools__Profiles__Line *line_ptr;
};

struct pp {
	const Profd__Profile *p;
	struct intern *strs;  /* the string table */
	struct intern *maps;  /* key: module and build id string indices */
	struct intern *locs;  /* key: see location_key() */
	struct intern *funcs; /* key: name and file string indices */
	struct pp_mapping *mappings;
	size_t cap_mappings;
	struct pp_location *locations;
	size_t cap_locations;
	Perftools__Profiles__Function *functions;
	size_t cap_functions;
	uint64_t *loc_of_frame; /* Profile frame -> location id */
	int64_t main_map;	/* the executable's mapping (0-based), -1: unknown */
	bool no_labels;		/* render_opts.no_sample_labels */
};

/* Make room for element n of *arr, zeroed. Returns 0, -EOVERFLOW or -ENOMEM. */
static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t old = *cap;
	int err = grow_array(arr, cap, n + 1, size);

	/* grow_array checked *cap * size, so the new tail's size fits too. */
	if (!err && *cap > old)
		memset((char *)*arr + old * size, 0, (*cap - old) * size);
	return err;
}

static int64_t str_id(struct pp *pp, const char *s)
{
	return intern__str(pp->strs, s);
}

static bool unsymbolized(const char *name)
{
	return !*name || strcmp(name, UNKNOWN_NAME) == 0;
}

/* The mapping id (1-based) of module, adding the mapping if new; 0 for none, or -errno. */
static int64_t mapping_of(struct pp *pp, const Profd__Frame *f)
{
	const Profd__Profile *p = pp->p;
	const char *module = f->has_module ? profile_string(p, f->module) : "";
	const char *build_id = f->has_build_id ? profile_string(p, f->build_id) : "";
	int64_t key[2], id;
	int added, err;

	if (f->kind == PROFD__FRAME_KIND__FRAME_PYTHON)
		return 0;
	if (!*module && f->kind == PROFD__FRAME_KIND__FRAME_KERNEL)
		module = KERNEL_MAPPING;
	if (!*module)
		return 0;
	key[0] = str_id(pp, module);
	key[1] = str_id(pp, build_id);
	if (key[0] < 0 || key[1] < 0)
		return -ENOMEM;
	id = intern__add(pp->maps, key, sizeof(key), &added);
	if (id < 0 || !added)
		return id < 0 ? id : id + 1;
	err = grow((void **)&pp->mappings, &pp->cap_mappings, (size_t)id, sizeof(*pp->mappings));
	if (err)
		return err;
	perftools__profiles__mapping__init(&pp->mappings[id].m);
	pp->mappings[id].m.id = (uint64_t)id + 1;
	pp->mappings[id].m.filename = key[0];
	pp->mappings[id].m.build_id = key[1];
	pp->mappings[id].all_lines = true;
	pp->mappings[id].all_files = true;
	return id + 1;
}

/* The function id (1-based) named name in file, adding it if new, or -errno. */
static int64_t function_of(struct pp *pp, const char *name, const char *file)
{
	Perftools__Profiles__Function *fn;
	int64_t key[2], id;
	int added, err;

	key[0] = str_id(pp, name);
	key[1] = str_id(pp, file);
	if (key[0] < 0 || key[1] < 0)
		return -ENOMEM;
	id = intern__add(pp->funcs, key, sizeof(key), &added);
	if (id < 0 || !added)
		return id < 0 ? id : id + 1;
	err = grow((void **)&pp->functions, &pp->cap_functions, (size_t)id, sizeof(*pp->functions));
	if (err)
		return err;
	fn = &pp->functions[id];
	perftools__profiles__function__init(fn);
	fn->id = (uint64_t)id + 1;
	fn->name = key[0];
	/* We only have the demangled name; pprof falls back to it for both. */
	fn->system_name = key[0];
	fn->filename = key[1];
	return id + 1;
}

/*
 * What makes two frames one location: the mapping and address for code in a mapping, the
 * function, file and line for Python, and everything the frame has otherwise.
 */
static size_t location_key(const Profd__Frame *f, int64_t mapping, uint64_t *key)
{
	if (f->kind == PROFD__FRAME_KIND__FRAME_PYTHON) {
		key[0] = 'P';
		key[1] = f->name;
		key[2] = f->has_file ? f->file : 0;
		key[3] = f->has_line ? f->line : 0;
		return 4;
	}
	if (mapping > 0 && f->has_address) {
		key[0] = 'A';
		key[1] = (uint64_t)mapping;
		key[2] = f->address;
		return 3;
	}
	key[0] = 'F';
	key[1] = (uint64_t)f->kind << 32 | f->name;
	key[2] = (uint64_t)mapping;
	key[3] = f->has_address ? f->address : 0;
	key[4] = (uint64_t)(f->has_file ? f->file : 0) << 32 | (f->has_line ? f->line : 0);
	return 5;
}

static int add_frame(struct pp *pp, size_t i)
{
	const Profd__Profile *p = pp->p;
	const Profd__Frame *f = p->frames[i];
	const char *name = profile_string(p, f->name);
	const char *file = f->has_file ? profile_string(p, f->file) : "";
	struct pp_location *l;
	struct pp_mapping *m;
	uint64_t key[5];
	int64_t map_id, id, fn_id;
	int added, err;

	map_id = mapping_of(pp, f);
	if (map_id < 0)
		return (int)map_id;
	id = intern__add(pp->locs, key, location_key(f, map_id, key) * sizeof(*key), &added);
	if (id < 0)
		return (int)id;
	pp->loc_of_frame[i] = (uint64_t)id + 1;
	if (!added)
		return 0;
	err = grow((void **)&pp->locations, &pp->cap_locations, (size_t)id, sizeof(*pp->locations));
	if (err)
		return err;
	l = &pp->locations[id];
	perftools__profiles__location__init(&l->loc);
	l->loc.id = (uint64_t)id + 1;
	l->loc.mapping_id = (uint64_t)map_id;
	if (f->kind != PROFD__FRAME_KIND__FRAME_PYTHON && f->has_address)
		l->loc.address = f->address;
	m = map_id ? &pp->mappings[map_id - 1] : NULL;
	if (m && l->loc.address >= m->m.memory_limit)
		m->m.memory_limit = l->loc.address == UINT64_MAX ? UINT64_MAX : l->loc.address + 1;
	if (unsymbolized(name))
		return 0;
	fn_id = function_of(pp, name, file);
	if (fn_id < 0)
		return (int)fn_id;
	perftools__profiles__line__init(&l->line);
	l->line.function_id = (uint64_t)fn_id;
	l->line.line = f->has_line ? f->line : 0;
	if (m) {
		m->any_symbol = true;
		m->all_lines &= l->line.line != 0;
		m->all_files &= *file != 0;
	}
	return 0;
}

/* A zlib gzip stream behind protobuf-c's buffer interface, written to a FILE as it fills. */
struct gz_sink {
	ProtobufCBuffer base;
	z_stream zs;
	FILE *out;
	int err;
	unsigned char buf[65536];
};

/* Run deflate with flush until it wants more input (or ends), writing what it made. */
static void gz_run(struct gz_sink *g, int flush)
{
	int zerr;

	do {
		g->zs.next_out = g->buf;
		g->zs.avail_out = sizeof(g->buf);
		zerr = deflate(&g->zs, flush);
		if (zerr == Z_STREAM_ERROR) {
			g->err = -EINVAL;
			return;
		}
		size_t n = sizeof(g->buf) - g->zs.avail_out;

		if (n && fwrite(g->buf, 1, n, g->out) != n) {
			g->err = -EIO;
			return;
		}
	} while (g->zs.avail_out == 0 || (flush == Z_FINISH && zerr != Z_STREAM_END));
}

static void gz_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	struct gz_sink *g = (struct gz_sink *)b;

	while (len && !g->err) {
		uInt n = len > 1u << 30 ? 1u << 30 : (uInt)len;

		g->zs.next_in = (Bytef *)data;
		g->zs.avail_in = n;
		gz_run(g, Z_NO_FLUSH);
		data += n;
		len -= n;
	}
}

/* Pack msg, gzip it and write it to out. Returns 0 or a negative errno. */
static int write_gzipped(const ProtobufCMessage *msg, FILE *out)
{
	struct gz_sink *g = calloc(1, sizeof(*g));
	int err;

	if (!g)
		return -ENOMEM;
	g->base.append = gz_append;
	g->out = out;
	/* 16 + 15: a gzip header and trailer around a 32 KiB-window deflate stream. */
	if (deflateInit2(&g->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + 15, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		return -ENOMEM;
	}
	protobuf_c_message_pack_to_buffer(msg, &g->base);
	if (!g->err)
		gz_run(g, Z_FINISH);
	err = g->err;
	deflateEnd(&g->zs);
	free(g);
	if (!err && (fflush(out) || ferror(out)))
		err = -EIO;
	return err;
}

/* Saturate: pprof values are signed. */
static int64_t to_i64(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int64_t mul_sat(uint64_t a, uint64_t b)
{
	if (a && b > INT64_MAX / a)
		return INT64_MAX;
	return (int64_t)(a * b);
}

/* Index of the CPU samples column ("samples"/"count"), or -1. */
static ssize_t cpu_column(const Profd__Profile *p)
{
	for (size_t i = 0; i < p->n_value_types; i++)
		if (strcmp(profile_string(p, p->value_types[i]->type), "samples") == 0 &&
		    strcmp(profile_string(p, p->value_types[i]->unit), "count") == 0)
			return (ssize_t)i;
	return -1;
}

/*
 * Thread names by profile_thread_key and process names by pid, for a lookup per sample (a sample
 * that names its process entry takes the name from there: a reused pid has several).
 */
struct name_ref {
	uint64_t key;
	const char *name;
};

static int cmp_name_ref(const void *a, const void *b)
{
	const struct name_ref *x = a, *y = b;

	return x->key < y->key ? -1 : x->key > y->key;
}

/* A sorted table of n names of threads (threads true) or processes. NULL when out of memory. */
static struct name_ref *name_table(const Profd__Profile *p, bool threads, size_t *n)
{
	struct name_ref *t;

	*n = threads ? p->n_threads : p->n_processes;
	t = calloc(*n ? *n : 1, sizeof(*t));
	if (!t)
		return NULL;
	for (size_t i = 0; i < *n; i++) {
		if (threads)
			t[i] = (struct name_ref){profile_thread_key(p->threads[i]->process,
								    p->threads[i]->pid,
								    p->threads[i]->tid),
						 profile_string(p, p->threads[i]->name)};
		else
			t[i] = (struct name_ref){p->processes[i]->pid,
						 profile_string(p, p->processes[i]->name)};
	}
	qsort(t, *n, sizeof(*t), cmp_name_ref);
	return t;
}

/* The name under key in t, "" when t does not have it. */
static const char *name_of(const struct name_ref *t, size_t n, uint64_t key)
{
	struct name_ref k = {.key = key};
	const struct name_ref *hit = bsearch(&k, t, n, sizeof(*t), cmp_name_ref);

	return hit ? hit->name : "";
}

/* Everything the encoded message points at, freed in one place. */
struct pp_out {
	Perftools__Profiles__ValueType *types;
	Perftools__Profiles__ValueType **type_ptrs;
	Perftools__Profiles__ValueType period_type;
	Perftools__Profiles__Sample *samples;
	Perftools__Profiles__Sample **sample_ptrs;
	uint64_t *location_ids;
	int64_t *values;
	Perftools__Profiles__Label *labels;
	Perftools__Profiles__Label **label_ptrs;
	Perftools__Profiles__Mapping **mapping_ptrs;
	Perftools__Profiles__Location **location_ptrs;
	Perftools__Profiles__Function **function_ptrs;
	int64_t comment[3];
};

static void pp_out_free(struct pp_out *o)
{
	free(o->types);
	free(o->type_ptrs);
	free(o->samples);
	free(o->sample_ptrs);
	free(o->location_ids);
	free(o->values);
	free(o->labels);
	free(o->label_ptrs);
	free(o->mapping_ptrs);
	free(o->location_ptrs);
	free(o->function_ptrs);
}

static void *alloc_n(size_t n, size_t size)
{
	return calloc(n ? n : 1, size);
}

/* The value types: the CPU column becomes samples/count and cpu/nanoseconds. */
static int build_types(struct pp *pp, Perftools__Profiles__Profile *msg, struct pp_out *o,
		       ssize_t cpu, uint32_t chosen)
{
	const Profd__Profile *p = pp->p;
	size_t n = p->n_value_types + (cpu >= 0);
	int64_t ids[4];

	o->types = alloc_n(n, sizeof(*o->types));
	o->type_ptrs = alloc_n(n, sizeof(*o->type_ptrs));
	if (!o->types || !o->type_ptrs)
		return -ENOMEM;
	for (size_t i = 0, k = 0; i < p->n_value_types; i++) {
		const Profd__ValueType *vt = p->value_types[i];

		ids[0] = str_id(pp, profile_string(p, vt->type));
		ids[1] = str_id(pp, profile_string(p, vt->unit));
		ids[2] = str_id(pp, "cpu");
		ids[3] = str_id(pp, "nanoseconds");
		if (ids[0] < 0 || ids[1] < 0 || ids[2] < 0 || ids[3] < 0)
			return -ENOMEM;
		perftools__profiles__value_type__init(&o->types[k]);
		o->types[k].type = ids[0];
		o->types[k].unit = ids[1];
		o->type_ptrs[k] = &o->types[k];
		k++;
		if (i == chosen && (ssize_t)i != cpu)
			msg->default_sample_type = ids[0];
		if ((ssize_t)i != cpu)
			continue;
		perftools__profiles__value_type__init(&o->types[k]);
		o->types[k].type = ids[2];
		o->types[k].unit = ids[3];
		o->type_ptrs[k] = &o->types[k];
		k++;
		/* What people open a CPU profile for: time, not sample counts. */
		if (i == chosen)
			msg->default_sample_type = ids[2];
	}
	msg->n_sample_type = n;
	msg->sample_type = o->type_ptrs;
	return 0;
}

static int build_samples(struct pp *pp, Perftools__Profiles__Profile *msg, struct pp_out *o,
			 ssize_t cpu, uint64_t period)
{
	const Profd__Profile *p = pp->p;
	size_t n_frames = 0, nv = msg->n_sample_type, n_thr, n_proc;
	struct name_ref *thr = name_table(p, true, &n_thr);
	struct name_ref *proc = name_table(p, false, &n_proc);
	uint64_t *loc_ids;
	int64_t keys[4];
	int err = 0;

	if (!thr || !proc) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < p->n_samples; i++)
		n_frames += p->stacks[p->samples[i]->stack]->n_frames;
	o->samples = alloc_n(p->n_samples, sizeof(*o->samples));
	o->sample_ptrs = alloc_n(p->n_samples, sizeof(*o->sample_ptrs));
	o->location_ids = alloc_n(n_frames, sizeof(*o->location_ids));
	o->values = alloc_n(p->n_samples * nv, sizeof(*o->values));
	o->labels = alloc_n(p->n_samples * MAX_LABELS, sizeof(*o->labels));
	o->label_ptrs = alloc_n(p->n_samples * MAX_LABELS, sizeof(*o->label_ptrs));
	if (!o->samples || !o->sample_ptrs || !o->location_ids || !o->values || !o->labels ||
	    !o->label_ptrs) {
		err = -ENOMEM;
		goto out;
	}
	keys[0] = str_id(pp, "pid");
	keys[1] = str_id(pp, "tid");
	keys[2] = str_id(pp, "thread_name");
	keys[3] = str_id(pp, "process_name");
	if (keys[0] < 0 || keys[1] < 0 || keys[2] < 0 || keys[3] < 0) {
		err = -ENOMEM;
		goto out;
	}

	loc_ids = o->location_ids;
	for (size_t i = 0; i < p->n_samples; i++) {
		const Profd__Sample *s = p->samples[i];
		const Profd__Stack *st = p->stacks[s->stack];
		Perftools__Profiles__Sample *ps = &o->samples[i];
		Perftools__Profiles__Label *lb = &o->labels[i * MAX_LABELS];
		Perftools__Profiles__Label **lp = &o->label_ptrs[i * MAX_LABELS];
		const char *tname =
		    name_of(thr, n_thr, profile_thread_key(s->process, s->pid, s->tid));
		const char *pname = s->process
					? profile_string(p, p->processes[s->process - 1]->name)
					: name_of(proc, n_proc, s->pid);
		int64_t *v = &o->values[i * nv];
		size_t k = 0;

		perftools__profiles__sample__init(ps);
		/* Both lists are leaf first. */
		for (size_t j = 0; j < st->n_frames; j++) {
			uint64_t lid = pp->loc_of_frame[st->frames[j]];
			uint64_t mid = pp->locations[lid - 1].loc.mapping_id;
			struct pp_mapping *m = mid ? &pp->mappings[mid - 1] : NULL;

			loc_ids[j] = lid;
			if (m && m->last != i + 1) {
				m->last = i + 1;
				m->weight += s->n_values ? s->values[0] : 0;
			}
		}
		ps->n_location_id = st->n_frames;
		ps->location_id = loc_ids;
		loc_ids += st->n_frames;

		for (size_t j = 0; j < p->n_value_types; j++) {
			uint64_t x = j < s->n_values ? s->values[j] : 0;

			v[k++] = to_i64(x);
			if ((ssize_t)j == cpu)
				v[k++] = mul_sat(x, period);
		}
		ps->n_value = nv;
		ps->value = v;

		k = 0;
		for (size_t j = 0; j < MAX_LABELS; j++)
			perftools__profiles__label__init(&lb[j]);
		if (pp->no_labels)
			goto labelled;
		lb[k].key = keys[0];
		lb[k++].num = s->pid;
		lb[k].key = keys[1];
		lb[k++].num = s->tid;
		if (*tname) {
			lb[k].key = keys[2];
			if ((lb[k++].str = str_id(pp, tname)) < 0) {
				err = -ENOMEM;
				goto out;
			}
		}
		if (*pname) {
			lb[k].key = keys[3];
			if ((lb[k++].str = str_id(pp, pname)) < 0) {
				err = -ENOMEM;
				goto out;
			}
		}
labelled:
		for (size_t j = 0; j < k; j++)
			lp[j] = &lb[j];
		ps->n_label = k;
		ps->label = lp;
		o->sample_ptrs[i] = ps;
	}
	msg->n_sample = p->n_samples;
	msg->sample = o->sample_ptrs;
out:
	free(proc);
	free(thr);
	return err;
}

/* True for names like libc.so.6 and ld-linux-x86-64.so.2, and pseudo files like "[vdso]". */
static bool library_like(const char *path)
{
	const char *base = strrchr(path, '/'), *so;

	base = base ? base + 1 : path;
	if (*base == '[')
		return true;
	so = strstr(base, ".so");
	return so && (so[3] == '\0' || so[3] == '.');
}

struct pid_weight {
	uint32_t pid;
	uint64_t weight;
};

static int pid_weight_cmp(const void *pa, const void *pb)
{
	const struct pid_weight *a = pa, *b = pb;

	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

/*
 * The executable of the busiest process that has one in the profile (the daemon's
 * Process.exe), NULL when none does. Returns -ENOMEM or 0.
 */
static int busiest_exe(const Profd__Profile *p, const char **exe)
{
	struct pid_weight *w, key, *hit;
	size_t n = 0, best = 0;

	*exe = NULL;
	w = alloc_n(p->n_processes, sizeof(*w));
	if (!w)
		return p->n_processes ? -ENOMEM : 0;
	for (size_t i = 0; i < p->n_processes; i++) {
		const Profd__Process *pr = p->processes[i];

		if (pr->has_exe && *profile_string(p, pr->exe) == '/')
			w[n++] = (struct pid_weight){.pid = pr->pid};
	}
	qsort(w, n, sizeof(*w), pid_weight_cmp);
	for (size_t i = 0; i < p->n_samples && n; i++) {
		const Profd__Sample *s = p->samples[i];

		key.pid = s->pid;
		hit = bsearch(&key, w, n, sizeof(*w), pid_weight_cmp);
		if (hit && s->n_values)
			hit->weight += s->values[0];
	}
	for (size_t i = 1; i < n; i++)
		if (w[i].weight > w[best].weight)
			best = i;
	for (size_t i = 0; n && i < p->n_processes; i++) {
		const Profd__Process *pr = p->processes[i];

		if (pr->pid == w[best].pid && pr->has_exe) {
			*exe = profile_string(p, pr->exe);
			break;
		}
	}
	free(w);
	return 0;
}

/*
 * pprof readers take the first mapping for the main binary: it names the profile in their
 * reports ("File: python3.12"). That is the busiest process's executable, whose mapping is
 * added when no frame of the profile lies in it (an interpreter's stacks may be Python and
 * library frames only). Sets pp->main_map; -1 when no process says what its executable is.
 */
static int add_main_mapping(struct pp *pp)
{
	size_t n = intern__count(pp->maps);
	const char *exe;
	char **strs;
	int64_t key[2], id, best = -1;
	int added, err;

	pp->main_map = -1;
	err = busiest_exe(pp->p, &exe);
	if (err || !exe)
		return err;
	strs = intern__keys(pp->strs);
	/* The same path under several build ids (a binary replaced while profiled): the busiest. */
	for (size_t i = 0; i < n; i++) {
		if (strcmp(strs[pp->mappings[i].m.filename], exe))
			continue;
		if (best < 0 || pp->mappings[i].weight > pp->mappings[best].weight)
			best = (int64_t)i;
	}
	if (best >= 0) {
		pp->main_map = best;
		return 0;
	}
	key[0] = str_id(pp, exe);
	key[1] = str_id(pp, "");
	if (key[0] < 0 || key[1] < 0)
		return -ENOMEM;
	id = intern__add(pp->maps, key, sizeof(key), &added);
	if (id < 0)
		return (int)id;
	err = grow((void **)&pp->mappings, &pp->cap_mappings, (size_t)id, sizeof(*pp->mappings));
	if (err)
		return err;
	perftools__profiles__mapping__init(&pp->mappings[id].m);
	pp->mappings[id].m.id = (uint64_t)id + 1;
	pp->mappings[id].m.filename = key[0];
	pp->mappings[id].all_lines = true;
	pp->mappings[id].all_files = true;
	pp->main_map = id;
	return 0;
}

/*
 * Without the executable's name (a daemon before Process.exe), the busiest mapping that is not a
 * shared library, else the first.
 */
static size_t main_mapping(const struct pp *pp, size_t n)
{
	char **strs = intern__keys(pp->strs);
	size_t best = 0;
	bool found = false;

	for (size_t i = 0; i < n; i++) {
		const struct pp_mapping *m = &pp->mappings[i];

		if (library_like(strs[m->m.filename]))
			continue;
		if (!found || m->weight > pp->mappings[best].weight)
			best = i;
		found = true;
	}
	return best;
}

/* Point the message at the mapping, location and function tables, now that they are final. */
static int link_tables(struct pp *pp, Perftools__Profiles__Profile *msg, struct pp_out *o)
{
	size_t nm = intern__count(pp->maps), nl = intern__count(pp->locs);
	size_t nf = intern__count(pp->funcs);

	o->mapping_ptrs = alloc_n(nm, sizeof(*o->mapping_ptrs));
	o->location_ptrs = alloc_n(nl, sizeof(*o->location_ptrs));
	o->function_ptrs = alloc_n(nf, sizeof(*o->function_ptrs));
	if (!o->mapping_ptrs || !o->location_ptrs || !o->function_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < nm; i++) {
		struct pp_mapping *m = &pp->mappings[i];

		/* The daemon symbolized what it could; what it could not, pprof cannot either. */
		m->m.has_functions = true;
		m->m.has_filenames = m->any_symbol && m->all_files;
		m->m.has_line_numbers = m->any_symbol && m->all_lines;
		o->mapping_ptrs[i] = &m->m;
	}
	/* Ids stay as they are: only the order of the list says which is main. */
	if (nm) {
		size_t first = pp->main_map >= 0 && (size_t)pp->main_map < nm
				   ? (size_t)pp->main_map
				   : main_mapping(pp, nm);

		memmove(&o->mapping_ptrs[1], &o->mapping_ptrs[0], first * sizeof(*o->mapping_ptrs));
		o->mapping_ptrs[0] = &pp->mappings[first].m;
	}
	for (size_t i = 0; i < nl; i++) {
		struct pp_location *l = &pp->locations[i];

		if (l->line.function_id) {
			l->line_ptr = &l->line;
			l->loc.n_line = 1;
			l->loc.line = &l->line_ptr;
		}
		o->location_ptrs[i] = &l->loc;
	}
	for (size_t i = 0; i < nf; i++)
		o->function_ptrs[i] = &pp->functions[i];
	msg->n_mapping = nm;
	msg->mapping = o->mapping_ptrs;
	msg->n_location = nl;
	msg->location = o->location_ptrs;
	msg->n_function = nf;
	msg->function = o->function_ptrs;
	return 0;
}

int format_pprof(const Profd__Profile *p, const struct render_opts *ro, FILE *out)
{
	Perftools__Profiles__Profile msg = PERFTOOLS__PROFILES__PROFILE__INIT;
	struct pp pp = {.p = p, .main_map = -1, .no_labels = ro && ro->no_sample_labels};
	struct pp_out o = {0};
	uint64_t period = p->period_ns;
	ssize_t cpu = cpu_column(p);
	int64_t id;
	int err = 0;

	if (!period && p->frequency_hz)
		period = 1000000000ull / p->frequency_hz;
	pp.strs = intern__new();
	pp.maps = intern__new();
	pp.locs = intern__new();
	pp.funcs = intern__new();
	pp.loc_of_frame = alloc_n(p->n_frames, sizeof(*pp.loc_of_frame));
	if (!pp.strs || !pp.maps || !pp.locs || !pp.funcs || !pp.loc_of_frame) {
		err = -ENOMEM;
		goto out;
	}
	/* string_table[0] must be "". */
	if (str_id(&pp, "") != 0) {
		err = -ENOMEM;
		goto out;
	}
	err = build_types(&pp, &msg, &o, cpu, ro ? ro->value_index : 0);
	if (err)
		goto out;
	for (size_t i = 0; i < p->n_frames && !err; i++)
		err = add_frame(&pp, i);
	if (!err)
		err = build_samples(&pp, &msg, &o, cpu, period);
	if (!err)
		err = add_main_mapping(&pp);
	if (!err)
		err = link_tables(&pp, &msg, &o);
	if (err)
		goto out;

	perftools__profiles__value_type__init(&o.period_type);
	o.period_type.type = str_id(&pp, "cpu");
	o.period_type.unit = str_id(&pp, "nanoseconds");
	if (o.period_type.type < 0 || o.period_type.unit < 0) {
		err = -ENOMEM;
		goto out;
	}
	msg.period_type = &o.period_type;
	msg.period = to_i64(period);
	if (p->start_ns)
		msg.time_nanos = (int64_t)p->start_ns + p->realtime_offset_ns;
	/* A window from 0 means "from the first sample kept": no start or duration to give. */
	if (p->start_ns && p->end_ns > p->start_ns)
		msg.duration_nanos = to_i64(p->end_ns - p->start_ns);
	id = str_id(&pp, "profd " PROFD_VERSION);
	if (id < 0) {
		err = (int)id;
		goto out;
	}
	o.comment[msg.n_comment++] = id;
	if (ro && ro->title) {
		id = str_id(&pp, ro->title);
		if (id < 0) {
			err = (int)id;
			goto out;
		}
		o.comment[msg.n_comment++] = id;
	}
	if (p->has_samples_lost && p->samples_lost) {
		char lost[64];

		snprintf(lost, sizeof(lost), "samples lost: %" PRIu64, p->samples_lost);
		id = str_id(&pp, lost);
		if (id < 0) {
			err = (int)id;
			goto out;
		}
		o.comment[msg.n_comment++] = id;
	}
	msg.comment = o.comment;
	/* Last: everything above may still add strings. */
	msg.n_string_table = intern__count(pp.strs);
	msg.string_table = intern__keys(pp.strs);
	err = write_gzipped(&msg.base, out);
out:
	pp_out_free(&o);
	free(pp.loc_of_frame);
	free(pp.functions);
	free(pp.locations);
	free(pp.mappings);
	intern__free(pp.funcs);
	intern__free(pp.locs);
	intern__free(pp.maps);
	intern__free(pp.strs);
	return err;
}
