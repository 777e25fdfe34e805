/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Ingest: decode the sampler's ring buffer records, validate them, symbolize the addresses while
 * the process is alive and add the stacks to the store.
 */
#ifndef PROFD_INGEST_H
#define PROFD_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "symbolize.h"

struct ingest_opts {
	struct store *store;	   /* borrowed */
	struct symbolizer *sym;	   /* borrowed */
	const char *proc_root;	   /* NULL: "/proc" */
};

struct ingest_stats {
	uint64_t records;
	uint64_t samples;
	uint64_t malformed; /* records that failed validation, dropped and counted */
	uint64_t execs;
	uint64_t exits;
	uint64_t store_errors; /* samples the store refused (allocation failure) */
	uint64_t busy_ns;      /* time spent in ingest__record */
	uint64_t addr_cache_hits;
	uint64_t addr_cache_misses;
};

struct ingest;

/* Returns a new ingest or NULL with errno set. */
struct ingest *ingest__new(const struct ingest_opts *opts);
void ingest__free(struct ingest *in);
/*
 * Handle one ring buffer record. Returns 0; malformed records are counted, not fatal, so the
 * return is always 0 unless memory ran out (-ENOMEM).
 */
int ingest__record(struct ingest *in, const void *data, size_t size);
void ingest__stats(const struct ingest *in, struct ingest_stats *out);

#endif
