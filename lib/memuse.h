/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What a module holds in memory, by its own count: the bytes it asked malloc for (malloc's own
 * headers and the free memory it keeps are not in them) and how many things those bytes hold
 * (processes, files, clients). Each module keeps the figures as running counts, updated where
 * it allocates and frees, so that reading them costs nothing: `profctl status` shows them, and
 * what grows without a bound shows there without a heap profiler.
 */
#ifndef PROFD_MEMUSE_H
#define PROFD_MEMUSE_H

#include <stdint.h>

struct mem_usage {
	uint64_t bytes;
	uint64_t count;
};

/* *total -= v; a count never goes below zero, even where a caller got it wrong. */
static inline void mem_sub(uint64_t *total, uint64_t v)
{
	*total = *total > v ? *total - v : 0;
}

#endif
