/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Asking the daemon for a profile or a trace and checking what comes back, so every command
 * hands only consistent, non-empty data to the models and formats, and fails with the same
 * messages when it cannot.
 */
#ifndef PROFCTL_FETCH_H
#define PROFCTL_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "opts.h"
#include "profd.pb-c.h"

struct conn;

/* The filter of one request: --pid, --tid, --since. */
struct fetch_query {
	uint32_t pids[OPT_MAX_PIDS];
	size_t n_pids;
	bool has_tid;
	uint32_t tid;
	bool has_since;
	uint64_t since_ns;
	/* Dumps only: one row per process name and stack (DumpRequest.merge_processes). */
	bool merge_processes;
	/* Dumps only: the descendants of the pids too (DumpRequest.children). */
	bool children;
	/* Dumps only: CLOCK_MONOTONIC start of the window at the daemon (DumpRequest.start_ns). */
	bool has_start;
	uint64_t start_ns;
};

/* Fill d, initialised by the caller, from q. d points at q's pids: keep q while d is used. */
void fetch_dump_request(const struct fetch_query *q, Profd__DumpRequest *d);
/* The same for a trace request, which has no thread filter. */
void fetch_trace_request(const struct fetch_query *q, Profd__TraceRequest *t);

/*
 * Send dreq on c and check the profile that comes back: consistent indices (profile_check)
 * and, unless allow_empty, at least one sample with a value in any column. Returns 0 with *out
 * set (free it with profd__response__free_unpacked), or a negative errno with e filled: what
 * conn__call returns, -EPROTO (PROFCTL_EXIT_PROTOCOL) for an inconsistent profile, -ENODATA
 * (PROFCTL_EXIT_NO_SAMPLES) for an empty one.
 */
int fetch_profile(struct conn *c, const Profd__DumpRequest *dreq, bool allow_empty,
		  Profd__Response **out, struct cli_error *e);
/*
 * Send treq on c and check the trace that comes back (trace_check). Returns 0 with *out set
 * (free it with profd__response__free_unpacked), or a negative errno with e filled: what
 * conn__call returns, or -EPROTO (PROFCTL_EXIT_PROTOCOL) for an inconsistent trace. An empty
 * trace is not an error here.
 */
int fetch_trace(struct conn *c, const Profd__TraceRequest *treq, Profd__Response **out,
		struct cli_error *e);
/*
 * Ask for the live stack dump of process pid and check the profile that comes back (as
 * fetch_profile, and at least one thread). Returns 0 with *out set (free it with
 * profd__response__free_unpacked) or a negative errno with e filled.
 */
int fetch_stacks(struct conn *c, uint32_t pid, Profd__Response **out, struct cli_error *e);
/*
 * Fill e for a profile with nothing in it, as fetch_profile does (PROFCTL_EXIT_NO_SAMPLES).
 * Returns -ENODATA.
 */
int fetch_no_samples(struct cli_error *e);

/*
 * The column of p that value (enum value_kind) names. Returns 0 with *index set, or -ENODATA
 * with e filled (PROFCTL_EXIT_NO_SAMPLES) when p lacks the column or it sums to 0. VALUE_WALL
 * and VALUE_GPU_IDLE_WALL add their column to p first (profile_add_wall).
 */
int fetch_select_value(Profd__Profile *p, int value, uint32_t *index, struct cli_error *e);

/* Tell a non-root user, on stderr, that the daemon showed only their own processes. */
void fetch_note_filtered(bool has_only_uid, uint32_t only_uid);
/* Tell stderr how many samples the daemon lost in the window, when it says and it is some. */
void fetch_note_lost(bool has_samples_lost, uint64_t samples_lost);

#endif
