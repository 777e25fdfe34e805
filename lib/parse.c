// SPDX-License-Identifier: BSD-2-Clause
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
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
	/* Digits only: strtoull would take a second "0x" prefix, a sign or leading spaces. */
	if (!*s)
		return -EINVAL;
	for (const char *p = s; *p; p++)
		if (!isxdigit((unsigned char)*p))
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

/*
 * A non-negative decimal with an optional fraction ("12", "1.5", ".5"), kept exact: integer
 * part, up to 19 fraction digits (later ones only refine below the unit's 1e-19 and are
 * dropped) and their scale. The suffix is returned in *rest. Floating point would turn "2.3s"
 * into 2299999999 ns and let values near 2^64 through the range check.
 */
struct decimal {
	uint64_t ip;
	uint64_t frac;
	uint64_t frac_scale; /* 10^digits kept */
	bool overflow;	     /* the integer part does not fit 64 bits */
};

static int parse_decimal(const char *s, struct decimal *d, const char **rest)
{
	bool digits = false;

	if (!s)
		return -EINVAL;
	memset(d, 0, sizeof(*d));
	d->frac_scale = 1;
	for (; isdigit((unsigned char)*s); s++) {
		digits = true;
		if (__builtin_mul_overflow(d->ip, 10, &d->ip) ||
		    __builtin_add_overflow(d->ip, (uint64_t)(*s - '0'), &d->ip))
			d->overflow = true;
	}
	if (*s == '.') {
		s++;
		for (int n = 0; isdigit((unsigned char)*s); s++, n++) {
			digits = true;
			if (n < 19) {
				d->frac = d->frac * 10 + (uint64_t)(*s - '0');
				d->frac_scale *= 10;
			}
		}
	}
	if (!digits)
		return -EINVAL;
	*rest = s;
	return 0;
}

/* d * mul, the fraction's share rounded down; -ERANGE past 64 bits. */
static int decimal_scale(const struct decimal *d, uint64_t mul, uint64_t *out)
{
	uint64_t v, f;

	if (d->overflow || __builtin_mul_overflow(d->ip, mul, &v))
		return -ERANGE;
	f = (uint64_t)((unsigned __int128)d->frac * mul / d->frac_scale);
	if (__builtin_add_overflow(v, f, &v))
		return -ERANGE;
	*out = v;
	return 0;
}

struct unit {
	const char *name;
	uint64_t mul;
};

static int parse_with_units(const char *s, const struct unit *units, size_t nunits, uint64_t min,
			    uint64_t max, uint64_t *out)
{
	struct decimal d;
	const char *rest;
	uint64_t v;
	int err;

	err = parse_decimal(s, &d, &rest);
	if (err)
		return err;
	for (size_t i = 0; i < nunits; i++) {
		if (strcmp(rest, units[i].name) != 0)
			continue;
		err = decimal_scale(&d, units[i].mul, &v);
		if (err)
			return err;
		if (v < min || v > max)
			return -ERANGE;
		*out = v;
		return 0;
	}
	return -EINVAL;
}

int parse_duration_ns(const char *s, uint64_t min_ns, uint64_t max_ns, uint64_t *out)
{
	static const struct unit units[] = {
	    {"ns", 1ull},
	    {"us", 1000ull},
	    {"ms", 1000000ull},
	    {"s", 1000000000ull},
	    {"", 1000000000ull},
	    {"m", 60000000000ull},
	    {"min", 60000000000ull},
	    {"h", 3600000000000ull},
	    {"d", 86400000000000ull},
	};

	return parse_with_units(s, units, sizeof(units) / sizeof(units[0]), min_ns, max_ns, out);
}

int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	static const struct unit units[] = {
	    {"", 1ull},	       {"B", 1ull},	    {"K", 1ull << 10}, {"KiB", 1ull << 10},
	    {"M", 1ull << 20}, {"MiB", 1ull << 20}, {"G", 1ull << 30}, {"GiB", 1ull << 30},
	};

	return parse_with_units(s, units, sizeof(units) / sizeof(units[0]), min, max, out);
}
