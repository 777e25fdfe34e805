/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A token bucket kept as one number, the time at which it would be full again (the generic cell
 * rate algorithm): `rate` tokens a second, at most `burst_ns` worth of them saved up. Taking n
 * tokens moves that time n / rate seconds on; they may be taken while it stays within burst_ns
 * of now, or whatever their number when the bucket is full: a take larger than the burst then
 * passes once and the bucket stays empty until the rate has paid for it, so the average holds
 * and no take is refused for ever. Callers that must pass two buckets at once ask tbucket_fits
 * of both, then take from both. Times are CLOCK_MONOTONIC ns; not thread-safe.
 */
#ifndef PROFD_TBUCKET_H
#define PROFD_TBUCKET_H

#include <stdbool.h>
#include <stdint.h>

#include "satmath.h"

struct tbucket {
	uint64_t full_at; /* 0: full (never taken from) */
};

/* What n tokens cost in ns at rate a second (saturating; rate 0 costs everything). */
static inline uint64_t tbucket_cost(uint64_t n, uint64_t rate)
{
	return rate ? sat_mul(n, 1000000000ull) / rate : UINT64_MAX;
}

/* Whether n tokens may be taken now. */
static inline bool tbucket_fits(const struct tbucket *b, uint64_t now, uint64_t n, uint64_t rate,
				uint64_t burst_ns)
{
	uint64_t from = b->full_at > now ? b->full_at : now;

	return b->full_at <= now || sat_add(from, tbucket_cost(n, rate)) - now <= burst_ns;
}

/* Take n tokens (the caller asked tbucket_fits). */
static inline void tbucket_take(struct tbucket *b, uint64_t now, uint64_t n, uint64_t rate)
{
	uint64_t from = b->full_at > now ? b->full_at : now;

	b->full_at = sat_add(from, tbucket_cost(n, rate));
}

#endif
