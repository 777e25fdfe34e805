/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The one place that encodes what a dump answers: a store query as the neutral protobuf Profile
 * (dump.c), a window of the timeline as a Trace (dump_trace.c), and the dense frame, stack and
 * string tables both carry.
 */
#ifndef PROFD_DUMP_H
#define PROFD_DUMP_H

#include <stdbool.h>
#include <stdint.h>

#include "profd.pb-c.h"
#include "store.h"
#include "timeline.h"

struct dump_meta {
	uint64_t start_ns; /* the time range the dump covers, for Profile.start_ns/end_ns */
	uint64_t end_ns;
	uint32_t frequency_hz;
	int64_t realtime_offset_ns;
	bool hide_kernel_addresses; /* leave kernel frames without addresses (non-root callers) */
	bool has_samples_lost;	    /* for Profile.samples_lost */
	uint64_t samples_lost;
	/*
	 * Rows that are not in the store but computed for the window (GPU memory live at its
	 * end, end_ns): called once after the store's rows, it calls add for each (with the
	 * query's filters applied) and returns 0, add's error or its own. NULL: none.
	 */
	int (*extra)(void *ctx, const struct store_query *q, uint64_t end_ns, store_query_cb add,
		     void *add_ctx);
	void *extra_ctx;
};

/*
 * Build a Profile for the query. Returns 0 and *out (free with dump__free), -ENODATA when the
 * query matched no sample, or another negative errno.
 */
int dump__build(struct store *s, const struct store_query *q, const struct dump_meta *meta,
		Profd__Profile **out);
void dump__free(Profd__Profile *p);

/*
 * A Profile from rows given one by one (the fleet export drains the store's journal into it).
 * The store must not be compacted between dump_rows__new and dump_rows__finish.
 */
struct dump_rows;
/* A builder over store s; meta as for dump__build (copied). NULL with errno on failure. */
struct dump_rows *dump_rows__new(struct store *s, const struct dump_meta *meta);
/* Add one sample row; a row of zeros is left out. 0 or a negative errno (-EINVAL: bad stack). */
int dump_rows__add(struct dump_rows *r, uint32_t pid, uint32_t tid, uint32_t stack,
		   const uint64_t values[STORE_VALUE__COUNT]);
/* The index of string s in the Profile to be (for value type names the caller sets). */
int dump_rows__string(struct dump_rows *r, const char *s, uint32_t *idx);
/*
 * The Profile of the rows added (all STORE_VALUE__COUNT columns, as dump__build gives): 0 and
 * *out (free with dump__free; it lives in one block, so its arrays may be edited in place),
 * -ENODATA for no rows, or another negative errno. Call once.
 */
int dump_rows__finish(struct dump_rows *r, Profd__Profile **out);
void dump_rows__free(struct dump_rows *r);

/* One thread of a live stack dump. */
struct dump_thread {
	uint32_t pid;
	uint32_t tid;
	uint32_t stack; /* store stack id, leaf first */
	uint32_t state; /* enum profd_task_state, the same numbers as Profd__ThreadState */
	uint32_t gil;	/* Profd__GilState; 0: unknown (left out of the Profile) */
	bool on_cpu;
};
/*
 * Build a live stack dump's Profile: one Sample per thread of th[0..n) (the "samples" value 1),
 * Profile.threads in the order given, each with its name from the store (store__set_thread),
 * its state, on_cpu and gil. meta as for dump__build. Returns 0 and *out (free with dump__free),
 * -ENODATA for n == 0, or another negative errno.
 */
int dump__threads(struct store *s, const struct dump_thread *th, size_t n,
		  const struct dump_meta *meta, Profd__Profile **out);

/* Trace dumps (dump_trace.c). */
struct trace_meta {
	int64_t realtime_offset_ns;
	uint32_t frequency_hz;
	bool hide_kernel_addresses;
	bool has_samples_lost; /* for Trace.samples_lost */
	uint64_t samples_lost;
};
/*
 * Build a Trace of the timeline's events in [q->start_ns, q->end_ns) for q's pids, uid-filtered
 * as store queries are, plus the events of extra[0..nextra) that pass the same filters (NVTX
 * ranges still open, not in the ring yet; names borrowed for the call). Returns 0 and *out
 * (free with dump__trace_free), -ENODATA when nothing matched, or another negative errno.
 */
int dump__trace(struct store *s, const struct timeline *tl, const struct tl_event *extra,
		size_t nextra, const struct store_query *q, const struct trace_meta *meta,
		Profd__Trace **out);
void dump__trace_free(Profd__Trace *t);

/*
 * Dense tables of the frames, stacks and strings a message refers to, numbered in first-seen
 * order. The tables point into the store's frames and strings: between dump_tables__new and
 * dump_tables__finish_trace the store must not drop any: no compaction (store__compact,
 * store__gc_commit). Adding, which only evicts buckets, and interning more are fine.
 */
struct dump_tables;
/*
 * Tables for frames/stacks/strings of store s; strings[0] is "". hide_kernel_addresses leaves
 * kernel frames without addresses (non-root callers). NULL with errno on failure.
 */
struct dump_tables *dump_tables__new(struct store *s, bool hide_kernel_addresses);
/* Index in the tables' stacks of store stack `stack_id` (added with its frames on first use).
 * 0 or -errno (-EINVAL for an unknown stack id). */
int dump_tables__stack(struct dump_tables *t, uint32_t stack_id, uint32_t *idx);
/* Index of a string in the tables' strings (the text is copied; NULL means ""). 0 or -errno. */
int dump_tables__string(struct dump_tables *t, const char *s, uint32_t *idx);
/*
 * Move strings, frames and stacks into tr (tr owns them afterwards; free with
 * dump_tables__free_trace). Replaces whatever tr held in those fields. 0 or -errno.
 */
int dump_tables__finish_trace(struct dump_tables *t, Profd__Trace *tr);
/* Free what dump_tables__finish_trace moved into tr (not tr itself, not its other fields). */
void dump_tables__free_trace(Profd__Trace *tr);
void dump_tables__free(struct dump_tables *t);

#endif
