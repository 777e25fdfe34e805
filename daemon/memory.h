/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The daemon's memory by owner, for StatusReply.memory: each module's own count (its header's
 * __memory() or __stats()), and what the process's RSS holds beyond them.
 */
#ifndef PROFD_MEMORY_H
#define PROFD_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon.h"
#include "memuse.h"
#include "profd.pb-c.h"

enum memory_owner_id {
	MEM_STORE,
	MEM_SYMBOLS,
	MEM_UNWIND_TABLES,
	MEM_INGEST,
	MEM_PYTHON,
	MEM_UNWINDER,
	MEM_SYMBOLIZER,
	MEM_GPU,
	MEM_EXPORT,
	MEM_CLIENTS,
	MEM_TRACE_RING,
	MEM_OTHER, /* rss less the others (0 when they add up to more) */
	MEM__COUNT,
};

/*
 * Each owner's bytes and count into out[MEM__COUNT] (a module the daemon runs without counts
 * 0); the names are memory_owner_name()'s. Cheap: running counts, no walk of a big table.
 */
void memory_owners(struct daemon *d, uint64_t rss, struct mem_usage *out);
/* The owner's name in status ("store", "python", "other", ...). */
const char *memory_owner_name(enum memory_owner_id id);
/* Whether the owner's count means something (processes, files, clients). */
bool memory_owner_counts(enum memory_owner_id id);

/*
 * Fill st->memory from memory_owners(): msgs and ptrs are the caller's arrays of MEM__COUNT
 * (nothing is allocated).
 */
void memory_status(struct daemon *d, uint64_t rss, Profd__StatusReply *st, Profd__MemoryOwner *msgs,
		   Profd__MemoryOwner **ptrs);

#endif
