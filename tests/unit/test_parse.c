// SPDX-License-Identifier: BSD-2-Clause
/* Strict parsing: what is accepted is exact, everything else is refused with the right errno. */
#include "check.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "parse.h"

#define SENTINEL 0x5a5a5a5a5a5a5a5aull

/* The error code, and the value only when it parsed: a failure must leave *out alone. */
static int u64(const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
	*v = SENTINEL;
	return parse_u64(s, min, max, v);
}

static void test_u64(void)
{
	uint64_t v;

	CHECK_EQ_I(u64("0", 0, UINT64_MAX, &v), 0);
	CHECK_EQ_U(v, 0);
	CHECK_EQ_I(u64("42", 0, UINT64_MAX, &v), 0);
	CHECK_EQ_U(v, 42);
	CHECK_EQ_I(u64("007", 0, UINT64_MAX, &v), 0);
	CHECK_EQ_U(v, 7);
	CHECK_EQ_I(u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
	CHECK_EQ_U(v, UINT64_MAX);
	/* Overflow and bounds. */
	CHECK_EQ_I(u64("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	CHECK_EQ_I(u64("99999999999999999999999", 0, UINT64_MAX, &v), -ERANGE);
	CHECK_EQ_I(u64("10", 11, 20, &v), -ERANGE);
	CHECK_EQ_I(u64("21", 11, 20, &v), -ERANGE);
	CHECK_EQ_U(v, SENTINEL);
	CHECK_EQ_I(u64("11", 11, 20, &v), 0);
	CHECK_EQ_U(v, 11);
	CHECK_EQ_I(u64("20", 11, 20, &v), 0);
	CHECK_EQ_U(v, 20);
	/* Signs, spaces, junk, empty, NULL, other bases. */
	CHECK_EQ_I(u64("-1", 0, UINT64_MAX, &v), -EINVAL);
	CHECK_EQ_I(u64("+1", 0, UINT64_MAX, &v), -EINVAL);
	CHECK_EQ_I(u64(" 1", 0, UINT64_MAX, &v), -EINVAL);
	CHECK_EQ_I(u64("1 ", 0, UINT64_MAX, &v), -EINVAL);
	CHECK_EQ_I(u64("1x", 0, UINT64_MAX, &v), -EINVAL);
	CHECK_EQ_I(u64("12abc", 0, UINT64_MAX, &v), -EINVAL);
	CHECK_EQ_I(u64("1.0", 0, UINT64_MAX, &v), -EINVAL);
	CHECK_EQ_I(u64("0x10", 0, UINT64_MAX, &v), -EINVAL);
	CHECK_EQ_I(u64("", 0, UINT64_MAX, &v), -EINVAL);
	CHECK_EQ_I(u64(NULL, 0, UINT64_MAX, &v), -EINVAL);
	CHECK_EQ_U(v, SENTINEL);
}

static void test_u32(void)
{
	uint32_t v = 7;

	CHECK_EQ_I(parse_u32("4294967295", 0, UINT32_MAX, &v), 0);
	CHECK_EQ_U(v, UINT32_MAX);
	CHECK_EQ_I(parse_u32("4294967296", 0, UINT32_MAX, &v), -ERANGE);
	CHECK_EQ_U(v, UINT32_MAX);
	CHECK_EQ_I(parse_u32("99", 1, 100, &v), 0);
	CHECK_EQ_U(v, 99);
	CHECK_EQ_I(parse_u32("0", 1, 100, &v), -ERANGE);
	CHECK_EQ_I(parse_u32("101", 1, 100, &v), -ERANGE);
	CHECK_EQ_I(parse_u32("-5", 0, UINT32_MAX, &v), -EINVAL);
	CHECK_EQ_I(parse_u32("5\n", 0, UINT32_MAX, &v), -EINVAL);
	CHECK_EQ_U(v, 99);
}

static void test_hex(void)
{
	uint64_t v;

	CHECK_EQ_I(parse_hex_u64("ff", &v), 0);
	CHECK_EQ_U(v, 0xff);
	CHECK_EQ_I(parse_hex_u64("0xDEADbeef", &v), 0);
	CHECK_EQ_U(v, 0xdeadbeef);
	CHECK_EQ_I(parse_hex_u64("0X10", &v), 0);
	CHECK_EQ_U(v, 0x10);
	CHECK_EQ_I(parse_hex_u64("ffffffffffffffff", &v), 0);
	CHECK_EQ_U(v, UINT64_MAX);
	CHECK_EQ_I(parse_hex_u64("0", &v), 0);
	CHECK_EQ_U(v, 0);
	v = SENTINEL;
	CHECK_EQ_I(parse_hex_u64("10000000000000000", &v), -ERANGE);
	CHECK_EQ_I(parse_hex_u64("0x", &v), -EINVAL);
	CHECK_EQ_I(parse_hex_u64("", &v), -EINVAL);
	CHECK_EQ_I(parse_hex_u64("0x0x5", &v), -EINVAL);
	CHECK_EQ_I(parse_hex_u64("0x-1", &v), -EINVAL);
	CHECK_EQ_I(parse_hex_u64("-1", &v), -EINVAL);
	CHECK_EQ_I(parse_hex_u64(" 1", &v), -EINVAL);
	CHECK_EQ_I(parse_hex_u64("0x 1", &v), -EINVAL);
	CHECK_EQ_I(parse_hex_u64("1g", &v), -EINVAL);
	CHECK_EQ_I(parse_hex_u64("12 ", &v), -EINVAL);
	CHECK_EQ_I(parse_hex_u64(NULL, &v), -EINVAL);
	CHECK_EQ_U(v, SENTINEL);
}

static void test_duration(void)
{
	static const struct {
		const char *s;
		uint64_t ns;
	} good[] = {
	    {"1ns", 1},
	    {"250us", 250000},
	    {"500ms", 500000000},
	    {"30s", 30000000000ull},
	    {"30", 30000000000ull}, /* bare number: seconds */
	    {"1.5m", 90000000000ull},
	    {"2min", 120000000000ull},
	    {"1h", 3600000000000ull},
	    {"2d", 172800000000000ull},
	    {"0.5s", 500000000},
	    {".25s", 250000000},
	    {"1.", 1000000000},
	    /* Exact decimal arithmetic, where doubles give 2299999999 and the like. */
	    {"2.3s", 2300000000ull},
	    {"0.7s", 700000000},
	    {"4.35s", 4350000000ull},
	    {"1.1ms", 1100000},
	    /* Below a nanosecond rounds down. */
	    {"1.9ns", 1},
	    {"0.0000000015s", 1},
	    {"18446744073709551615ns", UINT64_MAX},
	    {"0", 0},
	};
	static const char *const invalid[] = {
	    "",	  ".",	   "s",	    "-1s",    "+1s", " 1s", "1s ",  "1 s", "1sec",
	    "1S", "1e3ms", "0x10s", "1.5.3s", "inf", "nan", "1,5s", "5w",
	};
	uint64_t v;
	bool ok;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = SENTINEL;
		ok = parse_duration_ns(good[i].s, 0, UINT64_MAX, &v) == 0 && v == good[i].ns;
		if (!ok)
			fprintf(stderr, "duration \"%s\": got %llu, want %llu\n", good[i].s,
				(unsigned long long)v, (unsigned long long)good[i].ns);
		CHECK(ok);
	}
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		v = SENTINEL;
		ok = parse_duration_ns(invalid[i], 0, UINT64_MAX, &v) == -EINVAL && v == SENTINEL;
		if (!ok)
			fprintf(stderr, "duration \"%s\" not refused\n", invalid[i]);
		CHECK(ok);
	}
	CHECK_EQ_I(parse_duration_ns(NULL, 0, UINT64_MAX, &v), -EINVAL);
	/* Overflow of 64 bits, through the integer part or the unit. */
	CHECK_EQ_I(parse_duration_ns("18446744073709551616ns", 0, UINT64_MAX, &v), -ERANGE);
	CHECK_EQ_I(parse_duration_ns("18446744074s", 0, UINT64_MAX, &v), -ERANGE);
	CHECK_EQ_I(parse_duration_ns("213504d", 0, UINT64_MAX, &v), -ERANGE);
	CHECK_EQ_I(parse_duration_ns("99999999999999999999999999ns", 0, UINT64_MAX, &v), -ERANGE);
	/* Bounds, inclusive. */
	CHECK_EQ_I(parse_duration_ns("999ms", 1000000000ull, 60000000000ull, &v), -ERANGE);
	CHECK_EQ_I(parse_duration_ns("1s", 1000000000ull, 60000000000ull, &v), 0);
	CHECK_EQ_U(v, 1000000000ull);
	CHECK_EQ_I(parse_duration_ns("1m", 1000000000ull, 60000000000ull, &v), 0);
	CHECK_EQ_U(v, 60000000000ull);
	CHECK_EQ_I(parse_duration_ns("60.000000001s", 1000000000ull, 60000000000ull, &v), -ERANGE);
}

static void test_size(void)
{
	static const struct {
		const char *s;
		uint64_t bytes;
	} good[] = {
	    {"0", 0},
	    {"512", 512},
	    {"512B", 512},
	    {"4K", 4096},
	    {"4KiB", 4096},
	    {"64M", 64ull << 20},
	    {"64MiB", 64ull << 20},
	    {"2G", 2ull << 30},
	    {"2GiB", 2ull << 30},
	    {"1.5K", 1536},
	    {"0.5M", 512ull << 10},
	    {"0.1K", 102}, /* 102.4 rounds down */
	    {"17179869183G", 17179869183ull << 30},
	};
	static const char *const invalid[] = {
	    "", "K", "-1K", "+1K", " 1K", "1K ", "1 K", "1k", "1KB", "1T", "1e3", "0x10", "1..5K",
	};
	uint64_t v;
	bool ok;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = SENTINEL;
		ok = parse_size(good[i].s, 0, UINT64_MAX, &v) == 0 && v == good[i].bytes;
		if (!ok)
			fprintf(stderr, "size \"%s\": got %llu, want %llu\n", good[i].s,
				(unsigned long long)v, (unsigned long long)good[i].bytes);
		CHECK(ok);
	}
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		v = SENTINEL;
		ok = parse_size(invalid[i], 0, UINT64_MAX, &v) == -EINVAL && v == SENTINEL;
		if (!ok)
			fprintf(stderr, "size \"%s\" not refused\n", invalid[i]);
		CHECK(ok);
	}
	/* 2^34 G is 2^64. */
	CHECK_EQ_I(parse_size("17179869184G", 0, UINT64_MAX, &v), -ERANGE);
	CHECK_EQ_I(parse_size("4097", 4096, 1 << 20, &v), 0);
	CHECK_EQ_U(v, 4097);
	CHECK_EQ_I(parse_size("1M", 4096, 1 << 20, &v), 0);
	CHECK_EQ_U(v, 1 << 20);
	CHECK_EQ_I(parse_size("1025K", 4096, 1 << 20, &v), -ERANGE);
	CHECK_EQ_I(parse_size("3K", 4096, 1 << 20, &v), -ERANGE);
}

int main(void)
{
	test_u64();
	test_u32();
	test_hex();
	test_duration();
	test_size();
	return CHECK_DONE();
}
