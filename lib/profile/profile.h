/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The profile model shared by profctl and the daemon's exporter: checks of every index in a
 * decoded Profd__Profile and the display names of its frames, processes and threads. The merged
 * call tree the client's views are drawn from is the client's own (client/flame.h).
 *
 * Display names, the same in every format: kernel frames end in "_[k]", GPU frames in "_[g]",
 * native frames are the bare function name, Python frames are "NAME (FILE:LINE)" with the file's
 * base name, NVTX ranges are "[nvtx] NAME", and a frame without a symbol is
 * "[unknown] (MODULE+0xADDR)".
 */
#ifndef PROFD_PROFILE_H
#define PROFD_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profd.pb-c.h"

/*
 * Check that every index in p (strings, frames, stacks) is in range, so the code that draws
 * from it (profctl's formats, the pprof encoder) may follow them. Returns 0 or -EPROTO with a
 * reason in err.
 */
int profile_check(const Profd__Profile *p, char *err, size_t err_len);
/* The string at idx, "" when out of range. Owned by p. */
const char *profile_string(const Profd__Profile *p, uint32_t idx);
/*
 * Write the display name of frame f into buf (always NUL-terminated, truncated to fit).
 * Returns the length of the whole name, like snprintf.
 */
size_t profile_frame_name(const Profd__Profile *p, const Profd__Frame *f, char *buf, size_t len);
/*
 * The function a frame belongs to, for per-function tables: like profile_frame_name but without
 * the Python line ("NAME (FILE)") and, for frames without a symbol, without the address
 * ("[unknown] (MODULE)"), so every line or address of one function counts together.
 */
size_t profile_function_name(const Profd__Profile *p, const Profd__Frame *f, char *buf, size_t len);
/*
 * The thread state a stack carries as its root frame ("[off-cpu: futex]", "[running]"), or NULL
 * when its root frame is not a state. Owned by p.
 */
const char *profile_stack_state(const Profd__Profile *p, const Profd__Stack *st);
/* The name of process pid from p->processes, or NULL when p does not list it. Owned by p. */
const char *profile_process_name(const Profd__Profile *p, uint32_t pid);
/* The name (comm) of thread tid of pid from p->threads, or NULL when p does not list it. */
const char *profile_thread_name(const Profd__Profile *p, uint32_t pid, uint32_t tid);
/*
 * The kernel reuses pids, so one pid may stand for several processes of a profile: a sample
 * and a thread say which by Sample.process and Thread.process (index + 1 into p->processes;
 * profile_check bounds them). These helpers fall back to the pid for a profile without them.
 *
 * profile_sample_process: the process sample s belongs to, NULL when p does not list it.
 * profile_thread_key: a key telling threads apart across those processes: the process entry
 * (process != 0) or else the pid, with the tid.
 * profile_sample_thread_name: the name of the thread s was taken in, NULL when not listed.
 */
const Profd__Process *profile_sample_process(const Profd__Profile *p, const Profd__Sample *s);
uint64_t profile_thread_key(uint32_t process, uint32_t pid, uint32_t tid);
const char *profile_sample_thread_name(const Profd__Profile *p, const Profd__Sample *s);

#endif
