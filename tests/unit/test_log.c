// SPDX-License-Identifier: BSD-2-Clause
/*
 * lib/log's rate limiter on a fake clock: a flood of one site gives a bounded number of lines
 * and one line with the exact count per interval, sites are limited apart, the table stays
 * bounded without losing a count, and threads logging together lose nothing.
 */
#include "check.h"
#include "log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SEC 1000000000ull
#define MAX_LINES 4096

static char lines[MAX_LINES][1200];
static size_t n_lines;
static uint64_t fake_now = 1000 * SEC;

static uint64_t fake_clock(void)
{
	return fake_now;
}

static void capture(enum log_level level, const char *msg, void *ctx)
{
	(void)level;
	(void)ctx;
	if (n_lines < MAX_LINES)
		snprintf(lines[n_lines], sizeof(lines[0]), "%s", msg);
	n_lines++;
}

static void reset(unsigned burst, uint64_t interval_ns)
{
	log_set_rate_limit(burst, interval_ns);
	n_lines = 0;
}

/* The N of "(repeated N times in S s)" in line i, commas dropped; 0 when it is no such line. */
static uint64_t repeated(size_t i)
{
	const char *p = strstr(lines[i], " (repeated ");
	uint64_t v = 0;

	if (!p)
		return 0;
	for (p += strlen(" (repeated "); *p && *p != ' '; p++)
		if (*p != ',')
			v = v * 10 + (uint64_t)(*p - '0');
	return v;
}

static void refused(int pid)
{
	pr_warn("server: client pid %d: refused, too many connections", pid);
}

static void test_flood(void)
{
	reset(10, 10 * SEC);
	for (int i = 0; i < 100000; i++)
		refused(i);
	/* The burst is written, the rest only counted. */
	CHECK_EQ_U(n_lines, 10);
	CHECK_STREQ(lines[9], "server: client pid 9: refused, too many connections");
	/* Within the interval nothing more, even from the timer. */
	fake_now += 9 * SEC;
	log_expire_repeats();
	CHECK_EQ_U(n_lines, 10);
	/* The next line after the interval writes the count first: the first line held back. */
	fake_now += SEC;
	refused(7);
	CHECK_EQ_U(n_lines, 12);
	CHECK_STREQ(lines[10], "server: client pid 10: refused, too many connections "
			       "(repeated 99,990 times in 10 s)");
	CHECK_STREQ(lines[11], "server: client pid 7: refused, too many connections");
	CHECK_EQ_U(repeated(10), 99990);
}

/* A long flood stays at burst + 1 lines per interval, and every line is accounted for. */
static void test_long_flood(void)
{
	const uint64_t total = 2000000;
	uint64_t seen = 0;

	reset(10, 10 * SEC);
	/* 2,000,000 lines over 200 s of the fake clock. */
	for (uint64_t i = 0; i < total; i++) {
		if (i % 10000 == 0)
			fake_now += SEC;
		refused((int)i);
	}
	log_flush_repeats();
	CHECK(n_lines <= 21 * 11);
	CHECK(n_lines >= 20 * 11);
	for (size_t i = 0; i < n_lines && i < MAX_LINES; i++)
		seen += repeated(i) ? repeated(i) : 1;
	CHECK_EQ_U(seen, total);
}

static void test_sites_apart(void)
{
	reset(3, 10 * SEC);
	for (int i = 0; i < 50; i++)
		refused(i);
	/* Another site is not held back by the first one's flood. */
	pr_err("exporter: backend answered %d", 400);
	CHECK_EQ_U(n_lines, 4);
	CHECK_STREQ(lines[3], "exporter: backend answered 400");
	/* The timer writes the count once the interval is over, nothing else needed. */
	fake_now += 10 * SEC;
	log_expire_repeats();
	CHECK_EQ_U(n_lines, 5);
	CHECK_EQ_U(repeated(4), 47);
	log_expire_repeats();
	CHECK_EQ_U(n_lines, 5);
}

/* Lines below the level are neither formatted nor counted. */
static void test_level_first(void)
{
	enum log_level lvl = log_get_level();

	reset(5, 10 * SEC);
	log_set_level(LOG_LVL_ERROR);
	for (int i = 0; i < 100; i++)
		refused(i);
	CHECK_EQ_U(n_lines, 0);
	log_set_level(lvl);
	for (int i = 0; i < 5; i++)
		refused(i);
	CHECK_EQ_U(n_lines, 5);
	log_flush_repeats();
	CHECK_EQ_U(n_lines, 5);
}

/* Many more sites than the table holds: memory stays fixed and no count is lost. */
static void test_many_sites(void)
{
	static char fmts[300][32];
	uint64_t seen = 0;

	reset(2, 10 * SEC);
	for (int s = 0; s < 300; s++)
		snprintf(fmts[s], sizeof(fmts[s]), "site %d: %%d", s);
	for (int round = 0; round < 3; round++)
		for (int s = 0; s < 300; s++)
			for (int i = 0; i < 5; i++)
				log_msg(LOG_LVL_WARN, fmts[s], i);
	log_flush_repeats();
	CHECK(n_lines <= 3 * 300 * 3);
	for (size_t i = 0; i < n_lines; i++)
		seen += repeated(i) ? repeated(i) : 1;
	CHECK_EQ_U(seen, 3 * 300 * 5);
}

static void *flood_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < 50000; i++)
		refused(i);
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[4];

	reset(10, 10 * SEC);
	for (int i = 0; i < 4; i++)
		CHECK_EQ_I(pthread_create(&t[i], NULL, flood_thread, NULL), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ_U(n_lines, 10);
	log_flush_repeats();
	CHECK_EQ_U(n_lines, 11);
	CHECK_EQ_U(repeated(10), 4 * 50000 - 10);
	/* Written early (at exit): the time the flood took so far, not the whole interval. */
	CHECK(strstr(lines[10], " times in 1 s)") != NULL);
}

/* burst 0: no limit. */
static void test_off(void)
{
	reset(0, 10 * SEC);
	for (int i = 0; i < 1000; i++)
		refused(i);
	CHECK_EQ_U(n_lines, 1000);
}

int main(void)
{
	log_set_sink(capture, NULL);
	log_set_clock(fake_clock);
	log_set_level(LOG_LVL_INFO);

	test_flood();
	test_long_flood();
	test_sites_apart();
	test_level_first();
	test_many_sites();
	test_threads();
	test_off();

	log_set_clock(NULL);
	log_set_sink(NULL, NULL);
	log_set_rate_limit(LOG_RATE_BURST, LOG_RATE_INTERVAL_NS);
	return CHECK_DONE();
}
