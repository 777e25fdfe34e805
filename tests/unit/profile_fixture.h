/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A decoded Profd__Profile built by hand for the client's unit tests, with every table in
 * fixed arrays inside one struct fixture, so a test needs no allocation and nothing to free.
 *
 * Indices are what the builders return: fx_str gives a string index, fx_frame* a frame index,
 * fx_stack a stack index, ready to be passed to the next builder. The tables are plain fields,
 * so a test can still poke at anything the builders do not cover (has_build_id, a broken
 * index, an exited process).
 *
 * Strings are not copied: pass literals or anything else that outlives the fixture.
 * Running out of room in an array is a mistake in the test itself, so it aborts with a
 * message rather than counting as a failed check.
 */
#ifndef PROFD_TEST_PROFILE_FIXTURE_H
#define PROFD_TEST_PROFILE_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profd.pb-c.h"

#define FX_NSTR 48
#define FX_NFRAME 16
#define FX_NSTACK 12
#define FX_DEPTH 8 /* frames in one stack */
#define FX_NSAMPLE 16
#define FX_NVALUE 2 /* value columns */
#define FX_NPROC 4
#define FX_NTHREAD 4

struct fixture {
	Profd__Profile p;
	char *strings[FX_NSTR];
	Profd__Frame frames[FX_NFRAME];
	Profd__Frame *frame_ptrs[FX_NFRAME];
	Profd__Stack stacks[FX_NSTACK];
	Profd__Stack *stack_ptrs[FX_NSTACK];
	uint32_t stack_frames[FX_NSTACK][FX_DEPTH];
	Profd__Sample samples[FX_NSAMPLE];
	Profd__Sample *sample_ptrs[FX_NSAMPLE];
	uint64_t values[FX_NSAMPLE][FX_NVALUE];
	Profd__ValueType vts[FX_NVALUE];
	Profd__ValueType *vt_ptrs[FX_NVALUE];
	Profd__Process procs[FX_NPROC];
	Profd__Process *proc_ptrs[FX_NPROC];
	Profd__Thread threads[FX_NTHREAD];
	Profd__Thread *thread_ptrs[FX_NTHREAD];
};

/* Takes the next free slot of a table that holds cap entries; returns its index. */
static inline size_t fx_slot(size_t *n, size_t cap, const char *what)
{
	if (*n >= cap) {
		fprintf(stderr, "profile fixture: more than %zu %s, raise its size\n", cap, what);
		abort();
	}
	return (*n)++;
}

/*
 * An empty profile: only the empty string at index 0, no value columns, no period. Tables
 * that stay empty still point into the fixture, which readers ignore as their counts are 0.
 */
static inline void fx_init(struct fixture *fx)
{
	memset(fx, 0, sizeof(*fx));
	profd__profile__init(&fx->p);
	fx->strings[0] = "";
	fx->p.strings = fx->strings;
	fx->p.n_strings = 1;
	fx->p.frames = fx->frame_ptrs;
	fx->p.stacks = fx->stack_ptrs;
	fx->p.samples = fx->sample_ptrs;
	fx->p.value_types = fx->vt_ptrs;
	fx->p.processes = fx->proc_ptrs;
	fx->p.threads = fx->thread_ptrs;
}

/* Index of s in the string table, added if it is not there yet (the wire has no duplicates). */
static inline uint32_t fx_str(struct fixture *fx, const char *s)
{
	size_t i;

	for (i = 0; i < fx->p.n_strings; i++)
		if (strcmp(fx->strings[i], s) == 0)
			return (uint32_t)i;
	i = fx_slot(&fx->p.n_strings, FX_NSTR, "strings");
	fx->strings[i] = (char *)s;
	return (uint32_t)i;
}

/* Appends a value column: every sample added afterwards may carry one more value. */
static inline void fx_value_type(struct fixture *fx, const char *type, const char *unit)
{
	size_t i = fx_slot(&fx->p.n_value_types, FX_NVALUE, "value types");

	profd__value_type__init(&fx->vts[i]);
	fx->vts[i].type = fx_str(fx, type);
	fx->vts[i].unit = fx_str(fx, unit);
	fx->vt_ptrs[i] = &fx->vts[i];
}

/*
 * fx_init, then the one "samples"/"count" column the daemon writes for CPU sampling, and the
 * sampling period when period_ns is not 0.
 */
static inline void fx_init_samples(struct fixture *fx, uint64_t period_ns)
{
	fx_init(fx);
	fx->p.has_period_ns = period_ns != 0;
	fx->p.period_ns = period_ns;
	fx_value_type(fx, "samples", "count");
}

/* A frame with only a kind and a name: no address, module, file or line. */
static inline uint32_t fx_frame(struct fixture *fx, Profd__FrameKind kind, const char *name)
{
	size_t i = fx_slot(&fx->p.n_frames, FX_NFRAME, "frames");
	Profd__Frame *f = &fx->frames[i];

	profd__frame__init(f);
	f->kind = kind;
	f->name = fx_str(fx, name);
	fx->frame_ptrs[i] = f;
	return (uint32_t)i;
}

/*
 * A frame at address (always present, even when 0); module and file may be NULL for none,
 * line 0 means none.
 */
static inline uint32_t fx_frame_full(struct fixture *fx, Profd__FrameKind kind, const char *name,
				     const char *module, uint64_t address, const char *file,
				     uint32_t line)
{
	uint32_t i = fx_frame(fx, kind, name);
	Profd__Frame *f = &fx->frames[i];

	if (module) {
		f->has_module = 1;
		f->module = fx_str(fx, module);
	}
	f->has_address = 1;
	f->address = address;
	if (file) {
		f->has_file = 1;
		f->file = fx_str(fx, file);
	}
	if (line) {
		f->has_line = 1;
		f->line = line;
	}
	return i;
}

/* A frame with a name and an address (always present, even when 0), nothing else. */
static inline uint32_t fx_frame_at(struct fixture *fx, Profd__FrameKind kind, const char *name,
				   uint64_t address)
{
	return fx_frame_full(fx, kind, name, NULL, address, NULL, 0);
}

/* Frames given root first, as people read stacks; stored leaf first, as the wire has them. */
static inline uint32_t fx_stack(struct fixture *fx, size_t n, const uint32_t *root_first)
{
	size_t i = fx_slot(&fx->p.n_stacks, FX_NSTACK, "stacks");
	Profd__Stack *s = &fx->stacks[i];

	if (n > FX_DEPTH) {
		fprintf(stderr, "profile fixture: stack of %zu frames, at most %d\n", n, FX_DEPTH);
		abort();
	}
	profd__stack__init(s);
	for (size_t k = 0; k < n; k++)
		fx->stack_frames[i][k] = root_first[n - 1 - k];
	s->frames = fx->stack_frames[i];
	s->n_frames = n;
	fx->stack_ptrs[i] = s;
	return (uint32_t)i;
}

/*
 * A sample of stack in pid/tid with n values, copied. n is up to the test: it need not match
 * the number of value columns, so tests can build profiles a reader has to cope with.
 */
static inline void fx_sample_values(struct fixture *fx, uint32_t stack, uint32_t pid, uint32_t tid,
				    size_t n, const uint64_t *values)
{
	size_t i = fx_slot(&fx->p.n_samples, FX_NSAMPLE, "samples");
	Profd__Sample *s = &fx->samples[i];

	if (n > FX_NVALUE) {
		fprintf(stderr, "profile fixture: %zu values, at most %d\n", n, FX_NVALUE);
		abort();
	}
	profd__sample__init(s);
	s->stack = stack;
	s->pid = pid;
	s->tid = tid;
	for (size_t k = 0; k < n; k++)
		fx->values[i][k] = values[k];
	s->values = fx->values[i];
	s->n_values = n;
	fx->sample_ptrs[i] = s;
}

/* A sample with one value, in thread tid of pid. */
static inline void fx_sample_tid(struct fixture *fx, uint32_t stack, uint32_t pid, uint32_t tid,
				 uint64_t value)
{
	fx_sample_values(fx, stack, pid, tid, 1, &value);
}

/* A sample with one value, in the main thread of pid (tid == pid). */
static inline void fx_sample(struct fixture *fx, uint32_t stack, uint32_t pid, uint64_t value)
{
	fx_sample_tid(fx, stack, pid, pid, value);
}

static inline void fx_proc(struct fixture *fx, uint32_t pid, const char *name)
{
	size_t i = fx_slot(&fx->p.n_processes, FX_NPROC, "processes");

	profd__process__init(&fx->procs[i]);
	fx->procs[i].pid = pid;
	fx->procs[i].name = fx_str(fx, name);
	fx->proc_ptrs[i] = &fx->procs[i];
}

static inline void fx_thread(struct fixture *fx, uint32_t pid, uint32_t tid, const char *name)
{
	size_t i = fx_slot(&fx->p.n_threads, FX_NTHREAD, "threads");

	profd__thread__init(&fx->threads[i]);
	fx->threads[i].pid = pid;
	fx->threads[i].tid = tid;
	fx->threads[i].name = fx_str(fx, name);
	fx->thread_ptrs[i] = &fx->threads[i];
}

#endif /* PROFD_TEST_PROFILE_FIXTURE_H */
