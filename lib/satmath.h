/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Saturating arithmetic on counters and sums (samples, nanoseconds, bytes): a total that
 * overflows stays at UINT64_MAX instead of wrapping to a small, believable number.
 */
#ifndef PROFD_SATMATH_H
#define PROFD_SATMATH_H

#include <stdint.h>

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* *dst += v, saturating. */
static inline void sat_inc(uint64_t *dst, uint64_t v)
{
	*dst = sat_add(*dst, v);
}

static inline uint64_t sat_mul(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

#endif
