/* SPDX-License-Identifier: BSD-2-Clause */
/* Turns a store query into the neutral protobuf Profile (dense frame/stack/string tables). */
#ifndef PROFD_DUMP_H
#define PROFD_DUMP_H

#include <stdbool.h>
#include <stdint.h>

#include "profd.pb-c.h"
#include "store.h"

struct dump_meta {
	uint64_t start_ns; /* the time range the dump covers, for Profile.start_ns/end_ns */
	uint64_t end_ns;
	uint32_t frequency_hz;
	int64_t realtime_offset_ns;
	bool hide_kernel_addresses; /* leave kernel frames without addresses (non-root callers) */
};

/*
 * Build a Profile for the query. Returns 0 and *out (free with dump__free), -ENODATA when the
 * query matched no sample, or another negative errno.
 */
int dump__build(struct store *s, const struct store_query *q, const struct dump_meta *meta,
		Profd__Profile **out);
void dump__free(Profd__Profile *p);

#endif
