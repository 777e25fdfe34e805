/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `profctl report`: the GPU questions in numbers. From a Trace: how busy the GPU was (the union
 * of kernel intervals over the trace's window). From a Profile: the kernels that took the GPU
 * time, the launch sites (launching stacks) they were charged to, the CPU stacks sampled
 * while none of the process's kernels ran (the gpu_idle_samples column), and with off-CPU time
 * the wall-clock time by thread state and the top waits, and where the threads were, running
 * or waiting, while the GPU was idle (gpu_idle_samples x period + gpu_idle_off_cpu).
 */
#ifndef PROFCTL_REPORT_H
#define PROFCTL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profd.pb-c.h"

/* One line of a top list. */
struct report_row {
	char *name;	/* kernel name, launch site, or stack (leaf <- caller <- ...) */
	uint64_t value; /* ns of GPU time, or idle samples */
	uint64_t count; /* kernels (for kernels and launch sites) */
};

/* GPU busy time of one (pid, device) over the window. */
struct report_device {
	uint32_t pid, device;
	uint64_t busy_ns;
	uint64_t kernels;
};

struct report {
	/* From the trace; has_trace false when there was none (older daemon). */
	bool has_trace;
	uint64_t window_start_ns, window_end_ns; /* CLOCK_MONOTONIC */
	int64_t realtime_offset_ns;
	bool ring_cut;	       /* the ring had dropped events from the start of the window */
	uint64_t busy_ns;      /* union of every kernel interval, clipped to the window */
	uint64_t kernels_seen; /* kernels in the trace overlapping the window */
	struct report_device *devices; /* sorted by pid, device */
	size_t n_devices;

	/* From the profile; has_gpu_time / has_idle false when it lacks the column. */
	bool has_gpu_time, has_idle;
	uint64_t gpu_ns_total;			   /* the gpu_time column's sum */
	uint64_t cpu_samples;			   /* the samples column's sum */
	uint64_t idle_samples;			   /* the gpu_idle_samples column's sum */
	struct report_row *kernels, *sites, *idle; /* each sorted by value, descending */
	size_t n_kernels, n_sites, n_idle;	   /* all of them; printing cuts to top */

	/*
	 * With off-CPU time (profd --off-cpu; has_off_cpu false without the off_cpu column, or
	 * when it sums to 0): wall-clock time (CPU samples x period + off-CPU ns) by thread state
	 * (the FRAME_STATE root frame's name, "[unknown state]" without one), and off-CPU time by
	 * stack (leaf first, state and NVTX frames left out).
	 */
	bool has_off_cpu;
	uint64_t wall_ns, off_cpu_ns;
	struct report_row *states, *waits;
	size_t n_states, n_waits;

	/*
	 * With off-CPU time and GPU data (has_idle_wall false without the gpu_idle_off_cpu
	 * column): the wall-clock time of the processes' threads while none of their kernels
	 * ran, by thread state, and by state and stack ("[off-cpu: futex] leaf <- caller").
	 */
	bool has_idle_wall;
	uint64_t idle_wall_ns;
	struct report_row *idle_states, *idle_wall;
	size_t n_idle_states, n_idle_wall;
};

/*
 * Compute the report from p and t (either may be NULL; both checked with profile_check and
 * trace_check). Returns 0 with r filled (release with report_release), or -ENOMEM.
 */
int report_build(struct report *r, const Profd__Profile *p, const Profd__Trace *t);
void report_release(struct report *r);

/*
 * The plain text report, at most top rows per list; the layout is stable for scripts that
 * grep it (docs/profctl.md). Returns 0 or -EIO.
 */
int report_print(const struct report *r, size_t top, FILE *out);
/* The same as one JSON object. Returns 0 or -EIO. */
int report_print_json(const struct report *r, size_t top, FILE *out);

struct report_span {
	uint64_t start, end;
};

/*
 * The busy time of n intervals [start, end) clipped to [lo, hi): the length of their union,
 * overlaps counted once. Sorts s in place (by start). Returns the ns.
 */
uint64_t report_union_ns(struct report_span *s, size_t n, uint64_t lo, uint64_t hi);

#endif
