// SPDX-License-Identifier: BSD-2-Clause
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end != '\0')
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int err = parse_u64(s, min, max, &v);

	if (!err)
		*out = (uint32_t)v;
	return err;
}

int parse_hex_u64(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s)
		return -EINVAL;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	if (!isxdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 16);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

/* A non-negative decimal with an optional fraction, then a suffix returned in *rest. */
static int parse_decimal(const char *s, double *out, const char **rest)
{
	char *end;
	double v;

	if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '.'))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno == ERANGE || !isfinite(v) || v < 0)
		return -EINVAL;
	/* strtod takes hex floats and exponents; users did not mean those. */
	for (const char *p = s; p < end; p++)
		if (!isdigit((unsigned char)*p) && *p != '.')
			return -EINVAL;
	*out = v;
	*rest = end;
	return 0;
}

int parse_duration_ns(const char *s, uint64_t min_ns, uint64_t max_ns, uint64_t *out)
{
	static const struct {
		const char *unit;
		double ns;
	} units[] = {
		{ "ns", 1 },	 { "us", 1e3 },	    { "ms", 1e6 },	 { "s", 1e9 },
		{ "", 1e9 },	 { "m", 60e9 },	    { "min", 60e9 }, { "h", 3600e9 },
		{ "d", 86400e9 },
	};
	const char *rest;
	double v;
	int err;

	err = parse_decimal(s, &v, &rest);
	if (err)
		return err;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(rest, units[i].unit) != 0)
			continue;
		v *= units[i].ns;
		if (v > (double)max_ns || v < (double)min_ns)
			return -ERANGE;
		*out = (uint64_t)v;
		return 0;
	}
	return -EINVAL;
}

int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	static const struct {
		const char *unit;
		double mul;
	} units[] = {
		{ "", 1 },	     { "B", 1 },	      { "K", 1024.0 },
		{ "KiB", 1024.0 },   { "M", 1048576.0 },      { "MiB", 1048576.0 },
		{ "G", 1073741824.0 }, { "GiB", 1073741824.0 },
	};
	const char *rest;
	double v;
	int err;

	err = parse_decimal(s, &v, &rest);
	if (err)
		return err;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(rest, units[i].unit) != 0)
			continue;
		v *= units[i].mul;
		if (v > (double)max || v < (double)min)
			return -ERANGE;
		*out = (uint64_t)v;
		return 0;
	}
	return -EINVAL;
}
