/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Live stack dumps, the kernel side's lifecycle: the task iterator of bpf/stacks.bpf.c, loaded
 * once and sharing the sampler's Python maps, attached to one process per dump and read
 * synchronously. Each thread of the process comes back as one PROFD_REC_THREAD record
 * (bpf/abi.h): its kernel stack, its user stack (frame pointers) and its Python frames, with
 * its name and scheduler state. One reader at a time: the loop's thread.
 */
#ifndef PROFD_SNAPSHOT_H
#define PROFD_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "abi.h"

struct sampler;
struct snapshot;

/* Called per thread record; size is the record's (already checked against its header). A
 * negative return stops the read and is returned by snapshot__take. */
typedef int (*snapshot_thread_fn)(void *ctx, const struct profd_sample_rec *rec, size_t size);

/*
 * Load the iterator program, sharing the sampler's py_procs and py_tstates. Returns the
 * snapshot or NULL with errno set and a one-line reason in why (the kernel feature missing).
 */
struct snapshot *snapshot__new(struct sampler *s, char *why, size_t why_len);
void snapshot__free(struct snapshot *sn);

/*
 * Read the threads of process pid (a thread group id), at most max_threads of them, calling fn
 * for each. Returns the number of records read (0: the process is gone), -E2BIG when it has
 * more than max_threads (fn saw max_threads), fn's negative return, or another negative errno.
 */
int snapshot__take(struct snapshot *sn, uint32_t pid, size_t max_threads, snapshot_thread_fn fn,
		   void *ctx);

#endif
