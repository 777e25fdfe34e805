/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Perf maps (/tmp/perf-PID.map, written by JITs: one "START SIZE NAME" line per code blob, hex
 * numbers, "0x" optional) read as a stream into a symbol table of bounded size.
 *
 * The file belongs to the profiled process's user, who can make it as large as the disk allows.
 * The scan never holds more than one buffer of it and keeps a table of at most opts.budget
 * bytes: every entry while they fit, and past that only the entries that cover the addresses
 * samples asked about (opts.wanted). Entries left out are counted, never silently lost.
 *
 * perf_map__scan touches no global state and may run on any thread.
 */
#ifndef PROFD_PERF_MAP_H
#define PROFD_PERF_MAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolize_elf.h"

/* Longest name kept; a longer line is a bad line. */
#define PERF_MAP_NAME_MAX 4096

struct perf_map_scan_opts {
	/* Addresses samples hit that must be named if the file has them: sorted, ascending. */
	const uint64_t *wanted;
	size_t n_wanted;
	/* Bytes the table may hold (entries and names); 0 keeps wanted entries only. */
	uint64_t budget;
	/* Bytes of the file read at most; the rest is left unread (stats.truncated). */
	uint64_t max_read;
	/* Set by another thread to abandon the scan (-ECANCELED). NULL: never. */
	const atomic_bool *stop;
};

struct perf_map_scan_stats {
	uint64_t bytes_read;
	uint64_t lines;	    /* valid entries seen */
	uint64_t bad_lines; /* lines that are not "START SIZE NAME" */
	uint64_t kept;	    /* entries in the table */
	uint64_t dropped;   /* valid entries not kept for the budget */
	bool sparse;	    /* the table holds only entries covering wanted addresses */
	bool truncated;	    /* stopped at max_read */
};

/*
 * Parse one line (without its newline; modified in place). Returns 0 with *start, *size and
 * *name (pointing into line), or -EINVAL: missing fields, bad hex, size 0, a range that wraps,
 * an empty or too long name.
 */
int perf_map__parse_line(char *line, uint64_t *start, uint64_t *size, char **name);

/*
 * Read fd from its current offset to its end (or opts->max_read) into *out, which must be
 * empty (zeroed); on success the table is finished (sorted, a later line for the same start
 * wins: newer code). Returns 0, -ECANCELED, -ENOMEM or a negative errno of read(2); on error
 * *out is left empty. stats may be NULL.
 */
int perf_map__scan(int fd, const struct perf_map_scan_opts *opts, struct sym_table *out,
		   struct perf_map_scan_stats *stats);

/* Memory held by a table, as the budget counts it. */
uint64_t perf_map__table_bytes(const struct sym_table *t);

/*
 * One scan at a time on a thread of its own, so that a large map never holds the caller's
 * event loop. All functions but the thread's own run on the caller's thread.
 */
struct perf_map_worker;

struct perf_map_result {
	uint64_t tag; /* as given to perf_map_worker__start */
	int err;      /* of perf_map__scan */
	struct sym_table table;
	struct perf_map_scan_stats stats;
	uint64_t wall_ns; /* how long the scan took */
	uint64_t *wanted; /* the addresses it looked for (owned by the result) */
	size_t n_wanted;
};

/* Returns a worker or NULL with errno set. The thread starts with the first scan. */
struct perf_map_worker *perf_map_worker__new(void);
/* Abandon a running scan, join the thread and free everything. Accepts NULL. */
void perf_map_worker__free(struct perf_map_worker *w);
/*
 * Scan fd (taken: closed by the worker) with these options; wanted is taken too (malloc'd, may
 * be NULL). Returns 0, or -EBUSY while a scan runs or its result was not collected (fd and
 * wanted are then left to the caller), or -errno when the thread cannot start.
 */
int perf_map_worker__start(struct perf_map_worker *w, int fd, uint64_t *wanted, size_t n_wanted,
			   uint64_t budget, uint64_t max_read, uint64_t tag);
/* Whether a scan was started and its result not collected yet. */
bool perf_map_worker__busy(struct perf_map_worker *w);
/*
 * Collect a finished scan: true with *res filled (the caller owns res->table and res->wanted),
 * false while none has finished. With wait, block until the running one has.
 */
bool perf_map_worker__collect(struct perf_map_worker *w, struct perf_map_result *res, bool wait);

#endif
