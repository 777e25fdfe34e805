/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Raw GPU and CPU events of a recent window (Profd__Trace): checking one from the wire, and
 * rendering it as a Chrome trace event file for Perfetto and chrome://tracing.
 *
 * The file is the JSON object form {"traceEvents": [...], "displayTimeUnit": "ms"}. Every
 * event has ph, ts (microseconds on the daemon's CLOCK_MONOTONIC, three decimals, so ns are
 * kept exactly), pid and tid, and events are sorted by ts, so each track's are in order.
 * Tracks:
 *   - each process pid: one track per thread (thread_name metadata), with CUDA API calls and
 *     NVTX ranges as complete ("X") events (enclosing ones first, so they nest), launches as
 *     zero-length "X" events carrying the launching stack, and CPU samples as thread-scoped
 *     instant ("i") events named by their leaf frame with the stack (leaf first) in args;
 *   - each (pid, device) with GPU work: a pseudo process "GPU D of NAME (pid P)", pid
 *     TRACE_GPU_PID_BASE + n, one track per stream (tid = stream id) with kernels and copies;
 *   - flow arrows ("s" at the launch on its thread, "f" with bp "e" at the kernel's start) from
 *     each launch to every kernel of its correlation id, one id per arrow.
 */
#ifndef PROFCTL_TRACE_H
#define PROFCTL_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profd.pb-c.h"

/* Above any real pid (pid_max is at most 2^22), so GPU pseudo processes never collide. */
#define TRACE_GPU_PID_BASE 1000000000u

/*
 * Check that every index in t (strings, frames, stacks) is in range and that no event ends
 * before it starts, so the rest of the client may follow them. Returns 0 or -EPROTO with a
 * reason in err.
 */
int trace_check(const Profd__Trace *t, char *err, size_t err_len);

/*
 * A Profile that shares t's strings, frames and stacks (and nothing else), so the profile
 * helpers (profile_frame_name, profile_check) work on a trace. Points into t.
 */
void trace_as_profile(const Profd__Trace *t, Profd__Profile *view);

/* Events of every kind in t. */
size_t trace_n_events(const Profd__Trace *t);

/* "HtoD", "DtoH", ... "memset": the short name of a copy kind. */
const char *trace_copy_kind_name(Profd__GpuCopyKind k);

/*
 * Write t (checked with trace_check) as Chrome trace event JSON to out. Returns 0, -ENOMEM,
 * or -EIO when writing failed.
 */
int format_trace(const Profd__Trace *t, FILE *out);

#endif
