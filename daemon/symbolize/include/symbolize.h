/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Symbolization in the daemon: kernel addresses from /proc/kallsyms; user addresses from
 * /proc/PID/maps plus ELF .symtab/.dynsym (PIE and shared libraries with their load bias), separate
 * debug files (.gnu_debuglink, build-id under /usr/lib/debug), and perf map files for JIT code.
 * ELF data is cached per file (build-id, else device+inode), not per pid. C++ names demangled.
 *
 * Not thread-safe: one owner thread.
 */
#ifndef PROFD_SYMBOLIZE_H
#define PROFD_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "memuse.h"

/*
 * One resolved address. Strings are owned by the symbolizer and valid until the next call into
 * it; callers copy what they keep.
 */
struct sym_result {
	const char *name;   /* function name (demangled), NULL when no symbol covers the address */
	const char *module; /* mapping path ("/usr/lib/x86_64-linux-gnu/libc.so.6"), kernel
			     * module name ("ext4"), "[kernel.kallsyms]", "[vdso]", or "[unknown]"
			     * when no mapping covers the address */
	uint64_t address;   /* user: ELF virtual address within module; kernel: the address */
	const char *build_id; /* hex, NULL if none */
	/*
	 * user: the start of the anonymous executable mapping (JIT code) that holds the address
	 * when no perf map entry names it, so its frames can add up per mapping; else 0
	 */
	uint64_t anon_start;
};

struct symbolizer_opts {
	/* Root for /proc (tests point it elsewhere); NULL means "/proc". */
	const char *proc_root;
	/* Root of separate debug files; NULL means "/usr/lib/debug". */
	const char *debug_root;
	/* Files kept open in the ELF cache; 0 means a default (256). */
	unsigned int max_elf_files;
	/* Bytes of symbol indexes kept across those files; 0 means a default (32 MiB). */
	uint64_t max_sym_bytes;
	/*
	 * Files larger than this are indexed on a thread of their own, their addresses unnamed
	 * until it is done; 0 means a default (16 MiB).
	 */
	uint64_t elf_sync_max;
	/* How often /proc/modules is compared to re-read kallsyms; 0 means 10 s. */
	uint64_t kernel_recheck_ns;
	/*
	 * Bytes of perf-map symbols kept across processes; 0 means 64 MiB. One map gets at most a
	 * quarter; a map that does not fit keeps only the entries samples hit.
	 */
	uint64_t max_perf_map_bytes;
	/* Skip /proc/kallsyms (tests, or a kernel that hides addresses). */
	bool no_kernel;
};

struct symbolizer_stats {
	uint64_t perf_map_bytes;   /* symbol bytes of every perf map */
	uint64_t perf_map_budget;  /* max_perf_map_bytes */
	uint64_t perf_map_dropped; /* entries left out for the budget, by the maps' last scans */
	uint64_t perf_map_scans, perf_map_scan_ns; /* reads of perf maps, and their time */
	uint32_t perf_map_sparse;		   /* maps holding only the entries samples hit */
	uint64_t elf_bytes;			   /* symbol tables of the ELF cache */
	uint64_t elf_budget;			   /* their bound */
	uint32_t elf_files;			   /* files in the ELF cache */
};

struct symbolizer;

/* Returns a new symbolizer or NULL with errno set. */
struct symbolizer *symbolizer__new(const struct symbolizer_opts *opts);
void symbolizer__free(struct symbolizer *s);

/* Returns 0 (out filled; out->name NULL if unknown), or a negative errno. */
int symbolizer__kernel(struct symbolizer *s, uint64_t addr, struct sym_result *out);
/*
 * Returns 0 (out filled; name NULL when no symbol, module "[unknown]" when no mapping), or a
 * negative errno (e.g. -ESRCH: the process is gone and nothing is cached for it).
 */
int symbolizer__user(struct symbolizer *s, uint32_t pid, uint64_t addr, struct sym_result *out);

/*
 * A perf map larger than 1 MiB is read by a worker thread: the first lookups in its code
 * return no name, the ones after the read do. Wait for every read queued (tests).
 */
void symbolizer__settle(struct symbolizer *s);
void symbolizer__stats(const struct symbolizer *s, struct symbolizer_stats *out);
/*
 * Memory held: symbols (the ELF cache's tables and their files, cached names, perf maps,
 * kallsyms) and the per-process state (mappings) of the processes not forgotten yet.
 */
void symbolizer__memory(const struct symbolizer *s, struct mem_usage *symbols,
			struct mem_usage *procs);

/* The process replaced its image (exec) or exited: drop what is cached for the pid. */
void symbolizer__forget_pid(struct symbolizer *s, uint32_t pid);
/*
 * pid mapped code: its cached mappings are read again before its next address is named (a new
 * file may lie where another was). Its perf map stays. Accepts NULL.
 */
void symbolizer__maps_changed(struct symbolizer *s, uint32_t pid);

/*
 * Bumped each time kernel symbols are read again (a module was loaded or removed): kernel
 * results cached by the caller are stale then.
 */
uint64_t symbolizer__kernel_generation(const struct symbolizer *s);

/* Whether kernel symbols are available (kallsyms readable with real addresses). */
bool symbolizer__has_kernel(const struct symbolizer *s);

#endif
