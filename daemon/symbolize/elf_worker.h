/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the symbolizer: ELF images of big files loaded on a thread of their own, so that
 * indexing a library's half a million symbols (libtorch_cpu.so: 13 MB of .symtab, ~100 ms, and
 * its relocations for the PLT names) or reading the CFI ranges that name the functions of a big
 * library without .symtab never holds the event loop that ingests samples and answers dumps.
 * Jobs run one at a time, in order.
 *
 * All functions run on the caller's thread; only the loads run on the worker's.
 */
#ifndef PROFD_ELF_WORKER_H
#define PROFD_ELF_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolize_elf.h"

struct elf_worker;

struct elf_worker_result {
	uint64_t tag;	      /* as given to elf_worker__start */
	int err;	      /* of elf_image__load */
	struct elf_image img; /* the caller's once collected: elf_image__fini() */
	uint64_t wall_ns;     /* how long the load took */
};

/* Returns a worker or NULL with errno set. The thread starts with the first job. */
struct elf_worker *elf_worker__new(void);
/* Finish the running load, drop the queued ones and their results, join, free. Accepts NULL. */
void elf_worker__free(struct elf_worker *w);
/*
 * Queue the load of the file open on fd (taken: the worker closes it) with dbg (copied).
 * Returns 0, or a negative errno (fd is then the caller's still).
 */
int elf_worker__start(struct elf_worker *w, int fd, const struct elf_debug_ctx *dbg, uint64_t tag);
/*
 * Queue the load of the CFI ranges of the file open on fd (taken) and of its debug file
 * (debug_path, may be NULL): the result's image holds only those (elf_image__load_fdes).
 * Returns 0 or a negative errno (fd is then the caller's still).
 */
int elf_worker__start_fdes(struct elf_worker *w, int fd, const char *debug_path, uint64_t tag);
/* Jobs queued, running, or finished and not collected. No lock taken. */
size_t elf_worker__pending(struct elf_worker *w);
/*
 * Collect a finished load: true with *res filled, false while none has finished. With wait,
 * block until one has (false at once when nothing is pending).
 */
bool elf_worker__collect(struct elf_worker *w, struct elf_worker_result *res, bool wait);

#endif
