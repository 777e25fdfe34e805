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

#define FX_NSTR 96
#define FX_NFRAME 32
#define FX_NSTACK 12
#define FX_DEPTH 12 /* frames in one stack */
#define FX_NSAMPLE 24
#define FX_NVALUE 8 /* value columns */
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

/*
 * fx_init, then the value columns a daemon with GPU support writes, in its order: samples,
 * gpu_idle_samples, gpu_time, gpu_kernels, copy_time, copy_bytes, uprobe_launches. Pass
 * samples' values in that order to fx_sample_values (FX_GPU_COLUMNS of them).
 */
#define FX_GPU_COLUMNS 7
static inline void fx_init_gpu(struct fixture *fx, uint64_t period_ns)
{
	fx_init_samples(fx, period_ns);
	fx_value_type(fx, "gpu_idle_samples", "count");
	fx_value_type(fx, "gpu_time", "nanoseconds");
	fx_value_type(fx, "gpu_kernels", "count");
	fx_value_type(fx, "copy_time", "nanoseconds");
	fx_value_type(fx, "copy_bytes", "bytes");
	fx_value_type(fx, "uprobe_launches", "count");
}

/*
 * A decoded Profd__Trace whose strings, frames, stacks, processes and threads are those of a
 * struct fixture (build them with the fx_* builders), with its events in fixed arrays. Every
 * tx_* builder refreshes the shared tables, so build in any order.
 */
#define TX_NEVENT 24

struct trace_fixture {
	Profd__Trace t;
	struct fixture *fx;
	Profd__TraceSample samples[TX_NEVENT];
	Profd__TraceSample *sample_ptrs[TX_NEVENT];
	Profd__TraceLaunch launches[TX_NEVENT];
	Profd__TraceLaunch *launch_ptrs[TX_NEVENT];
	Profd__TraceKernel kernels[TX_NEVENT];
	Profd__TraceKernel *kernel_ptrs[TX_NEVENT];
	Profd__TraceCopy copies[TX_NEVENT];
	Profd__TraceCopy *copy_ptrs[TX_NEVENT];
	Profd__TraceApiCall api[TX_NEVENT];
	Profd__TraceApiCall *api_ptrs[TX_NEVENT];
	Profd__TraceNvtx nvtx[TX_NEVENT];
	Profd__TraceNvtx *nvtx_ptrs[TX_NEVENT];
	Profd__TraceWait waits[TX_NEVENT];
	Profd__TraceWait *wait_ptrs[TX_NEVENT];
};

static inline void tx_sync(struct trace_fixture *tx)
{
	Profd__Profile *p = &tx->fx->p;

	tx->t.strings = p->strings;
	tx->t.n_strings = p->n_strings;
	tx->t.frames = p->frames;
	tx->t.n_frames = p->n_frames;
	tx->t.stacks = p->stacks;
	tx->t.n_stacks = p->n_stacks;
	tx->t.processes = p->processes;
	tx->t.n_processes = p->n_processes;
	tx->t.threads = p->threads;
	tx->t.n_threads = p->n_threads;
}

/* An empty trace over fx's tables, covering [start_ns, end_ns). */
static inline void tx_init(struct trace_fixture *tx, struct fixture *fx, uint64_t start_ns,
			   uint64_t end_ns)
{
	memset(tx, 0, sizeof(*tx));
	profd__trace__init(&tx->t);
	tx->fx = fx;
	tx->t.samples = tx->sample_ptrs;
	tx->t.launches = tx->launch_ptrs;
	tx->t.kernels = tx->kernel_ptrs;
	tx->t.copies = tx->copy_ptrs;
	tx->t.api_calls = tx->api_ptrs;
	tx->t.nvtx = tx->nvtx_ptrs;
	tx->t.waits = tx->wait_ptrs;
	tx->t.has_start_ns = tx->t.has_end_ns = 1;
	tx->t.start_ns = start_ns;
	tx->t.end_ns = end_ns;
	tx_sync(tx);
}

static inline void tx_sample(struct trace_fixture *tx, uint64_t ts, uint32_t pid, uint32_t tid,
			     uint32_t stack)
{
	size_t i = fx_slot(&tx->t.n_samples, TX_NEVENT, "trace samples");

	profd__trace_sample__init(&tx->samples[i]);
	tx->samples[i].ts_ns = ts;
	tx->samples[i].pid = pid;
	tx->samples[i].tid = tid;
	tx->samples[i].stack = stack;
	tx->sample_ptrs[i] = &tx->samples[i];
	tx_sync(tx);
}

/* A wait off the CPU [start, end) in stack. */
static inline void tx_wait(struct trace_fixture *tx, uint64_t start, uint64_t end, uint32_t pid,
			   uint32_t tid, uint32_t stack)
{
	size_t i = fx_slot(&tx->t.n_waits, TX_NEVENT, "trace waits");

	profd__trace_wait__init(&tx->waits[i]);
	tx->waits[i].start_ns = start;
	tx->waits[i].end_ns = end;
	tx->waits[i].pid = pid;
	tx->waits[i].tid = tid;
	tx->waits[i].stack = stack;
	tx->wait_ptrs[i] = &tx->waits[i];
	tx_sync(tx);
}

static inline void tx_launch(struct trace_fixture *tx, uint64_t ts, uint32_t pid, uint32_t tid,
			     uint32_t stack, uint32_t corr)
{
	size_t i = fx_slot(&tx->t.n_launches, TX_NEVENT, "trace launches");

	profd__trace_launch__init(&tx->launches[i]);
	tx->launches[i].ts_ns = ts;
	tx->launches[i].pid = pid;
	tx->launches[i].tid = tid;
	tx->launches[i].stack = stack;
	tx->launches[i].correlation_id = corr;
	tx->launch_ptrs[i] = &tx->launches[i];
	tx_sync(tx);
}

static inline void tx_kernel(struct trace_fixture *tx, uint64_t start, uint64_t end, uint32_t pid,
			     uint32_t corr, const char *name, uint32_t device, uint32_t stream)
{
	size_t i = fx_slot(&tx->t.n_kernels, TX_NEVENT, "trace kernels");
	Profd__TraceKernel *k = &tx->kernels[i];

	profd__trace_kernel__init(k);
	k->start_ns = start;
	k->end_ns = end;
	k->pid = pid;
	k->correlation_id = corr;
	k->name = fx_str(tx->fx, name);
	k->has_device = k->has_stream = 1;
	k->device = device;
	k->stream = stream;
	tx->kernel_ptrs[i] = k;
	tx_sync(tx);
}

static inline void tx_copy(struct trace_fixture *tx, uint64_t start, uint64_t end, uint32_t pid,
			   uint32_t corr, Profd__GpuCopyKind kind, uint64_t bytes, uint32_t device,
			   uint32_t stream)
{
	size_t i = fx_slot(&tx->t.n_copies, TX_NEVENT, "trace copies");
	Profd__TraceCopy *c = &tx->copies[i];

	profd__trace_copy__init(c);
	c->start_ns = start;
	c->end_ns = end;
	c->pid = pid;
	c->correlation_id = corr;
	c->kind = kind;
	c->has_bytes = c->has_device = c->has_stream = 1;
	c->bytes = bytes;
	c->device = device;
	c->stream = stream;
	tx->copy_ptrs[i] = c;
	tx_sync(tx);
}

static inline void tx_api(struct trace_fixture *tx, uint64_t start, uint64_t end, uint32_t pid,
			  uint32_t tid, uint32_t corr, const char *name)
{
	size_t i = fx_slot(&tx->t.n_api_calls, TX_NEVENT, "trace API calls");
	Profd__TraceApiCall *a = &tx->api[i];

	profd__trace_api_call__init(a);
	a->start_ns = start;
	a->end_ns = end;
	a->pid = pid;
	a->tid = tid;
	a->correlation_id = corr;
	a->name = fx_str(tx->fx, name);
	tx->api_ptrs[i] = a;
	tx_sync(tx);
}

static inline void tx_nvtx(struct trace_fixture *tx, uint64_t start, uint64_t end, uint32_t pid,
			   uint32_t tid, const char *name, uint32_t depth)
{
	size_t i = fx_slot(&tx->t.n_nvtx, TX_NEVENT, "trace NVTX ranges");
	Profd__TraceNvtx *n = &tx->nvtx[i];

	profd__trace_nvtx__init(n);
	n->start_ns = start;
	n->end_ns = end;
	n->pid = pid;
	n->tid = tid;
	n->name = fx_str(tx->fx, name);
	n->has_depth = 1;
	n->depth = depth;
	tx->nvtx_ptrs[i] = n;
	tx_sync(tx);
}

#endif /* PROFD_TEST_PROFILE_FIXTURE_H */
