// SPDX-License-Identifier: BSD-2-Clause
#include "flame.h"
#include "grow.h"
#include "hash.h"
#include "ptrmap.h"
#include "satmath.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *fmt_duration(uint64_t ns, char *buf, size_t len)
{
	uint64_t s = ns / 1000000000ull;

	if (ns < 1000000ull)
		snprintf(buf, len, "%.0f us", ns / 1e3);
	else if (ns < 1000000000ull)
		snprintf(buf, len, "%.0f ms", ns / 1e6);
	else if (ns < 60000000000ull)
		snprintf(buf, len, "%.1f s", ns / 1e9);
	else if (s < 3600)
		snprintf(buf, len, "%" PRIu64 "m %" PRIu64 "s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%" PRIu64 "h %" PRIu64 "m %" PRIu64 "s", s / 3600, s / 60 % 60,
			 s % 60);
	else
		snprintf(buf, len, "%" PRIu64 "d %" PRIu64 "h %" PRIu64 "m", s / 86400,
			 s / 3600 % 24, s / 60 % 60);
	return buf;
}

char *fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	size_t u = 0;

	if (bytes < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", bytes);
		return buf;
	}
	v /= 1024;
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

char *fmt_mono_as_wall(uint64_t mono_ns, int64_t realtime_offset_ns, char *buf, size_t len)
{
	int64_t ns = (int64_t)mono_ns + realtime_offset_ns;
	time_t t = (time_t)(ns / 1000000000ll);
	struct tm tm;

	if (!localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, len, "?");
	return buf;
}

/* ---- call tree ---------------------------------------------------------------------------- */

struct proc_name {
	uint32_t pid;
	uint32_t name_id;
};

struct flame {
	struct flame_node *nodes;
	uint32_t *node_name; /* name id of each node: the key together with the parent */
	size_t n_nodes, cap_nodes, cap_node_name;
	uint32_t *node_hash; /* node index + 1, 0 empty; open addressing */
	size_t node_hash_cap;
	char **names; /* interned display names */
	size_t n_names, cap_names;
	uint32_t *name_hash; /* name id + 1, 0 empty */
	size_t name_hash_cap;
	uint32_t max_depth;
};

static uint64_t hash_str(const char *s)
{
	return hash_bytes(s, strlen(s));
}

static uint64_t hash_node(uint32_t parent, uint32_t name)
{
	uint64_t h = ((uint64_t)parent << 32 | name) * 0x9e3779b97f4a7c15ull;

	return h ^ (h >> 29);
}

/* Double an open-addressing table of indices + 1, rehashing with key(). */
static int rehash(uint32_t **table, size_t *cap, uint64_t (*key)(const struct flame *, uint32_t),
		  const struct flame *f)
{
	size_t ncap = *cap ? *cap * 2 : 1024;
	uint32_t *nt = calloc(ncap, sizeof(*nt));

	if (!nt)
		return -ENOMEM;
	for (size_t i = 0; i < *cap; i++) {
		uint32_t v = (*table)[i];
		size_t j;

		if (!v)
			continue;
		for (j = key(f, v - 1) & (ncap - 1); nt[j]; j = (j + 1) & (ncap - 1))
			;
		nt[j] = v;
	}
	free(*table);
	*table = nt;
	*cap = ncap;
	return 0;
}

static uint64_t name_key(const struct flame *f, uint32_t id)
{
	return hash_str(f->names[id]);
}

static uint64_t node_key(const struct flame *f, uint32_t idx)
{
	return hash_node(f->nodes[idx].parent, f->node_name[idx]);
}

/* Returns the id of name, adding a copy if new, or a negative errno. */
static int64_t intern(struct flame *f, const char *name)
{
	size_t j;
	char *copy;
	int err;

	if ((f->n_names + 1) * 2 > f->name_hash_cap) {
		err = rehash(&f->name_hash, &f->name_hash_cap, name_key, f);
		if (err)
			return err;
	}
	for (j = hash_str(name) & (f->name_hash_cap - 1); f->name_hash[j];
	     j = (j + 1) & (f->name_hash_cap - 1))
		if (strcmp(f->names[f->name_hash[j] - 1], name) == 0)
			return f->name_hash[j] - 1;
	if (f->n_names >= UINT32_MAX - 1)
		return -E2BIG;
	err = GROW(f->names, f->cap_names, f->n_names + 1);
	if (err)
		return err;
	copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	f->names[f->n_names] = copy;
	f->name_hash[j] = (uint32_t)++f->n_names;
	return f->n_names - 1;
}

/* Returns the child of parent named name_id, adding it if new, or a negative errno. */
static int64_t child(struct flame *f, uint32_t parent, uint32_t name_id, enum flame_kind kind)
{
	struct flame_node *n;
	size_t j;
	int err;

	if ((f->n_nodes + 1) * 2 > f->node_hash_cap) {
		err = rehash(&f->node_hash, &f->node_hash_cap, node_key, f);
		if (err)
			return err;
	}
	for (j = hash_node(parent, name_id) & (f->node_hash_cap - 1); f->node_hash[j];
	     j = (j + 1) & (f->node_hash_cap - 1)) {
		uint32_t idx = f->node_hash[j] - 1;

		if (f->nodes[idx].parent == parent && f->node_name[idx] == name_id)
			return idx;
	}
	if (f->n_nodes >= UINT32_MAX - 1)
		return -E2BIG;
	err = GROW(f->nodes, f->cap_nodes, f->n_nodes + 1);
	if (!err)
		err = GROW(f->node_name, f->cap_node_name, f->n_nodes + 1);
	if (err)
		return err;
	n = &f->nodes[f->n_nodes];
	*n = (struct flame_node){
	    .name = f->names[name_id],
	    .parent = parent,
	    .first_child = FLAME_NONE,
	    .next_sibling = FLAME_NONE,
	    .depth = parent == FLAME_NONE ? 0 : f->nodes[parent].depth + 1,
	    .kind = kind,
	};
	f->node_name[f->n_nodes] = name_id;
	if (parent != FLAME_NONE) {
		n->next_sibling = f->nodes[parent].first_child;
		f->nodes[parent].first_child = (uint32_t)f->n_nodes;
	}
	if (n->depth > f->max_depth)
		f->max_depth = n->depth;
	f->node_hash[j] = (uint32_t)++f->n_nodes;
	return f->n_nodes - 1;
}

static enum flame_kind kind_of(Profd__FrameKind k)
{
	switch (k) {
	case PROFD__FRAME_KIND__FRAME_KERNEL:
		return FLAME_KERNEL;
	case PROFD__FRAME_KIND__FRAME_NATIVE:
		return FLAME_NATIVE;
	case PROFD__FRAME_KIND__FRAME_PYTHON:
		return FLAME_PYTHON;
	case PROFD__FRAME_KIND__FRAME_GPU:
		return FLAME_GPU;
	case PROFD__FRAME_KIND__FRAME_NVTX:
		return FLAME_NVTX;
	default:
		return FLAME_UNKNOWN;
	}
}

static int cmp_proc(const void *a, const void *b)
{
	const struct proc_name *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

struct child_ref {
	const char *name;
	uint32_t idx;
};

static int cmp_child(const void *a, const void *b)
{
	const struct child_ref *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* Relink every node's children in name order, so output does not depend on sample order. */
static int sort_children(struct flame *f)
{
	struct child_ref *refs = NULL;
	size_t cap = 0;

	for (size_t i = 0; i < f->n_nodes; i++) {
		struct flame_node *n = &f->nodes[i];
		size_t cnt = 0;

		for (uint32_t c = n->first_child; c != FLAME_NONE; c = f->nodes[c].next_sibling) {
			int err = GROW(refs, cap, cnt + 1);

			if (err) {
				free(refs);
				return err;
			}
			refs[cnt++] = (struct child_ref){f->nodes[c].name, c};
		}
		if (cnt < 2)
			continue;
		qsort(refs, cnt, sizeof(*refs), cmp_child);
		n->first_child = refs[0].idx;
		for (size_t k = 0; k < cnt; k++)
			f->nodes[refs[k].idx].next_sibling =
			    k + 1 < cnt ? refs[k + 1].idx : FLAME_NONE;
	}
	free(refs);
	return 0;
}

/* Fill every node's value from the selves: a child's index is always above its parent's. */
static void sum_values(struct flame *f)
{
	for (size_t i = f->n_nodes; i-- > 0;) {
		struct flame_node *n = &f->nodes[i];

		sat_inc(&n->value, n->self);
		if (n->parent != FLAME_NONE)
			sat_inc(&f->nodes[n->parent].value, n->value);
	}
}

/* Interned name of pid's process; "[pid N]" when the profile does not name it. */
static int64_t process_name_id(struct flame *f, const struct proc_name *procs, size_t n,
			       uint32_t pid)
{
	struct proc_name key = {.pid = pid};
	const struct proc_name *hit = bsearch(&key, procs, n, sizeof(*procs), cmp_proc);
	char buf[32];

	if (hit)
		return hit->name_id;
	snprintf(buf, sizeof(buf), "[pid %" PRIu32 "]", pid);
	return intern(f, buf);
}

/* Replace bytes that would break one-line output: control characters become '?'. */
static void sanitize_line(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

struct flame *flame__new(const Profd__Profile *p, const struct flame_opts *opts)
{
	uint32_t *frame_name = NULL, *proc_name = NULL;
	struct proc_name *procs = NULL;
	/*
	 * Leaf node + 1 of each (process node << 32 | stack index) already walked: samples of one
	 * stack in many threads and processes of one name walk the tree once.
	 */
	struct ptrmap memo = {0};
	char *buf = NULL;
	size_t buf_len = 4096;
	struct flame *f;
	int64_t id, nostack = -1;
	int err = 0;

	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	buf = malloc(buf_len);
	frame_name = calloc(p->n_frames ? p->n_frames : 1, sizeof(*frame_name));
	procs = calloc(p->n_processes ? p->n_processes : 1, sizeof(*procs));
	proc_name = calloc(p->n_processes ? p->n_processes : 1, sizeof(*proc_name));
	if (!buf || !frame_name || !procs || !proc_name) {
		err = -ENOMEM;
		goto out;
	}
	id = intern(f, "all");
	if (id < 0 || (id = child(f, FLAME_NONE, (uint32_t)id, FLAME_ROOT)) < 0) {
		err = (int)id;
		goto out;
	}
	for (size_t i = 0; i < p->n_frames; i++) {
		size_t need = profile_frame_name(p, p->frames[i], buf, buf_len);

		if (need >= buf_len) {
			char *nb = realloc(buf, need + 1);

			if (!nb) {
				err = -ENOMEM;
				goto out;
			}
			buf = nb;
			buf_len = need + 1;
			profile_frame_name(p, p->frames[i], buf, buf_len);
		}
		sanitize_line(buf);
		id = intern(f, buf);
		if (id < 0) {
			err = (int)id;
			goto out;
		}
		frame_name[i] = (uint32_t)id;
	}
	for (size_t i = 0; i < p->n_processes; i++) {
		const char *name = profile_string(p, p->processes[i]->name);

		if (strlen(name) >= buf_len)
			name = "[process]";
		snprintf(buf, buf_len, "%s", *name ? name : "[process]");
		sanitize_line(buf);
		id = intern(f, buf);
		if (id < 0) {
			err = (int)id;
			goto out;
		}
		procs[i] = (struct proc_name){p->processes[i]->pid, (uint32_t)id};
		proc_name[i] = (uint32_t)id;
	}
	qsort(procs, p->n_processes, sizeof(*procs), cmp_proc);

	for (size_t i = 0; i < p->n_samples; i++) {
		const Profd__Sample *s = p->samples[i];
		const Profd__Stack *st = p->stacks[s->stack];
		uint64_t v = opts->value_index < s->n_values ? s->values[opts->value_index] : 0;
		int64_t cur = 0;
		uintptr_t leaf;
		uint64_t key;

		if (!v)
			continue;
		if (opts->process_root) {
			/* A reused pid has several processes: the sample says which is its own. */
			id = s->process ? proc_name[s->process - 1]
					: process_name_id(f, procs, p->n_processes, s->pid);
			if (id < 0 ||
			    (cur = child(f, (uint32_t)cur, (uint32_t)id, FLAME_PROCESS)) < 0) {
				err = (int)(id < 0 ? id : cur);
				goto out;
			}
		}
		key = (uint64_t)cur << 32 | s->stack;
		leaf = (uintptr_t)ptrmap_get(&memo, key);
		if (leaf) {
			sat_inc(&f->nodes[leaf - 1].self, v);
			continue;
		}
		if (st->n_frames == 0) {
			/* Keep the samples (and the totals honest) even when no frame was read. */
			if (nostack < 0 && (nostack = intern(f, "[no stack]")) < 0) {
				err = (int)nostack;
				goto out;
			}
			cur = child(f, (uint32_t)cur, (uint32_t)nostack, FLAME_UNKNOWN);
			if (cur < 0) {
				err = (int)cur;
				goto out;
			}
		}
		for (size_t j = st->n_frames; j-- > 0;) {
			uint32_t fi = st->frames[j];

			cur = child(f, (uint32_t)cur, frame_name[fi], kind_of(p->frames[fi]->kind));
			if (cur < 0) {
				err = (int)cur;
				goto out;
			}
		}
		if (ptrmap_put(&memo, key, (void *)(uintptr_t)(cur + 1))) {
			err = -ENOMEM;
			goto out;
		}
		sat_inc(&f->nodes[cur].self, v);
	}
	sum_values(f);
	err = sort_children(f);
out:
	ptrmap_fini(&memo);
	free(procs);
	free(proc_name);
	free(frame_name);
	free(buf);
	if (err) {
		flame__free(f);
		errno = -err;
		return NULL;
	}
	return f;
}

void flame__free(struct flame *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_names; i++)
		free(f->names[i]);
	free(f->names);
	free(f->name_hash);
	free(f->nodes);
	free(f->node_name);
	free(f->node_hash);
	free(f);
}

const struct flame_node *flame__nodes(const struct flame *f, size_t *n)
{
	*n = f->n_nodes;
	return f->nodes;
}

uint32_t flame__max_depth(const struct flame *f)
{
	return f->max_depth;
}

int profile_name_processes_by_pid(Profd__Profile *p)
{
	size_t n = p->n_strings;
	char **grown;

	if (!p->n_processes)
		return 0;
	/* The strings array is the unpacker's (malloc): free_unpacked frees what is added. */
	grown = realloc(p->strings, (n + p->n_processes) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	p->strings = grown;
	for (size_t i = 0; i < p->n_processes; i++) {
		Profd__Process *proc = p->processes[i];
		const char *name = profile_string(p, proc->name);
		char *s;

		size_t len = strlen(name) + 32;

		/* Processes renamed so far keep their new names: all strings stay valid. */
		s = malloc(len);
		if (!s)
			return -ENOMEM;
		snprintf(s, len, "pid %" PRIu32 " (%s)", proc->pid, *name ? name : "?");
		grown[p->n_strings] = s;
		proc->name = (uint32_t)p->n_strings++;
	}
	return 0;
}
