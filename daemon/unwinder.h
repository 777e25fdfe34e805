/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The daemon's half of CFI unwinding: describes sampled processes to the BPF walker
 * (bpf/unwind.bpf.h). For each process it reads the executable mappings, finds or builds the
 * unwind table of each mapped ELF file (daemon/unwind/cfi.c) and loads it into the kernel once
 * per file, shared by every process that maps it: tables are keyed by build-id, else by
 * device, inode, size and modification time. Tables stay loaded after their processes exit, as
 * a cache within a memory budget, and the least recently used go first when it is reached.
 *
 * Everything slow (reading maps, opening files, parsing CFI, filling maps) happens on a worker
 * thread of its own: the calls below only queue work and read counters, so a process that maps
 * hundreds of libraries never stalls sampling or the socket. Until a process is described, the
 * BPF side walks its stacks with frame pointers and flags them (PROFD_UNWIND_FP_FALLBACK).
 */
#ifndef PROFD_UNWINDER_H
#define PROFD_UNWINDER_H

#include <stdbool.h>
#include <stdint.h>

#include "memuse.h"

struct unwinder_opts {
	int tables_fd;		/* the BPF map unwind_tables (borrowed) */
	int procs_fd;		/* the BPF map unwind_procs (borrowed) */
	uint32_t max_procs;	/* unwind_procs' max_entries */
	uint64_t memory;	/* bytes of tables kept loaded; 0: UNWINDER_DEFAULT_MEMORY */
	const char *proc_root;	/* NULL: "/proc" */
	const char *debug_root; /* NULL: "/usr/lib/debug" */
	/* The most executable mappings described per process; 0: PROFD_UNWIND_MAX_MAPS. */
	uint32_t max_maps;
	/* Slots of maps[] in unwind_procs' values (a power of two, at least max_maps). */
	uint32_t map_slots;
	/*
	 * Code mapped into a process is reported (unwinder__maps_changed): a described process is
	 * described again only then, not because its walks reach a pc it does not know.
	 */
	bool sees_maps;
};

#define UNWINDER_DEFAULT_MEMORY (256ull << 20)

struct unwinder_stats {
	uint64_t tables;       /* tables loaded now */
	uint64_t table_bytes;  /* their rows' bytes in the kernel */
	uint64_t memory;       /* the budget */
	uint64_t builds;       /* tables built */
	uint64_t build_ns;     /* time spent building and loading them */
	uint64_t build_failed; /* files whose CFI could not be read (stepped with frame pointers) */
	uint64_t no_cfi;       /* files without CFI (stepped with frame pointers) */
	uint64_t too_big;      /* files whose table alone exceeds the budget */
	uint64_t evictions;    /* tables dropped for the budget */
	uint64_t over_budget;  /* tables not loaded: the budget held only the process's own */
	/* of the tables built: functions without CFI analysed from their code (struct cfi_stats) */
	uint64_t insn_functions, insn_rows, insn_partial, insn_skipped, insn_insns;
	uint64_t cache_hits;   /* mappings whose file's table was loaded already */
	uint64_t procs;	       /* processes described to the kernel now */
	uint64_t described;    /* descriptions made (first ones and refreshes) */
	uint64_t queued;       /* processes waiting to be described */
	uint64_t maps_dropped; /* mappings left out: over the bound (max_maps) in a process */
	uint64_t over_bound;   /* processes described now with mappings left out */
	uint64_t backoffs;     /* walks' misses left alone: their mappings unchanged */
	uint64_t max_maps;     /* the bound */
	uint32_t busy_pid;     /* the process being described now; 0: none */
	uint32_t busy_done;    /* of its files, done */
	uint32_t busy_files;   /* its files */
};

struct unwinder;

/* Returns a running unwinder (its worker started) or NULL with errno set. */
struct unwinder *unwinder__new(const struct unwinder_opts *opts);
/* Stops the worker (a build in progress finishes first) and frees everything. Accepts NULL. */
void unwinder__free(struct unwinder *u);
/*
 * A walk of pid's stack could not use CFI (why: enum profd_unwind_end, FP_FALLBACK when the
 * process is not described, NO_MAPPING for a pc outside its described mappings, NO_TABLE when a
 * table was evicted): queue a description, at most one a second per process. With sees_maps, a
 * NO_MAPPING of a described process whose mappings did not change since is not acted on (a
 * process over the bound would be described again and again for nothing). Never blocks.
 */
void unwinder__want(struct unwinder *u, uint32_t pid, uint32_t why);
/*
 * pid mapped code since it was last described: describe it again (at most once a second), so
 * its walks neither miss the new code nor apply an old file's table where a new file lies.
 * Nothing for a process not described. Never blocks.
 */
void unwinder__maps_changed(struct unwinder *u, uint32_t pid);
/* pid exited or replaced its image: drop its description (its tables stay cached). */
void unwinder__forget(struct unwinder *u, uint32_t pid);
void unwinder__stats(struct unwinder *u, struct unwinder_stats *out);
/*
 * Memory held in the daemon (the tables' rows are the kernel's): a slot for every file ever
 * described (its identity and PT_LOAD headers, and the vDSO's copy), and the processes known
 * (described, queued or being described) with their table references.
 */
void unwinder__memory(struct unwinder *u, struct mem_usage *tables, struct mem_usage *procs);
/* Wait until nothing is queued or being built (tests, benchmarks). */
void unwinder__settle(struct unwinder *u);

#endif
