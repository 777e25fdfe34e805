/* SPDX-License-Identifier: BSD-2-Clause */
/* Strict parsing of numbers, sizes and durations from users and files. No atoi. */
#ifndef PROFD_PARSE_H
#define PROFD_PARSE_H

#include <stdint.h>

/*
 * Parse a whole decimal unsigned integer in [min, max]. Returns 0, -EINVAL on anything but
 * digits (no sign, no spaces, no trailing bytes), -ERANGE outside the bounds.
 */
int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);
/* The value of one hexadecimal digit, or -1. */
static inline int parse_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Hexadecimal, with or without 0x; same rules. */
int parse_hex_u64(const char *s, uint64_t *out);
/*
 * Durations: a number with a unit among ns, us, ms, s, m, h, d ("30s", "1.5m", "500ms"); a
 * bare number means seconds. Result in nanoseconds in [min_ns, max_ns].
 */
int parse_duration_ns(const char *s, uint64_t min_ns, uint64_t max_ns, uint64_t *out);
/* Sizes: a number with an optional K, M, G suffix (powers of 1024, "KiB" style accepted). */
int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif
