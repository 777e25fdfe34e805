// SPDX-License-Identifier: BSD-2-Clause
#include "log.h"
#include "timeutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum log_level log_current_level = LOG_LVL_INFO;
static log_sink_fn log_sink = log_sink_stderr;
static void *log_sink_ctx;
static const char *log_ident = "profd";

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/*
 * The rate limiter's table: LOG_SITES slots, a site found by its format string's address within
 * LOG_PROBE slots of its hash. When every slot there is busy with a live interval, the oldest
 * is written out and taken over, so a site may lose its place (and start a fresh interval) but
 * no count is dropped silently.
 */
#define LOG_SITES 64
#define LOG_PROBE 8
#define LOG_LINE 1024

struct log_site {
	const char *fmt;   /* the key; NULL: free */
	uint64_t start_ns; /* when its interval began */
	uint64_t count;	   /* lines in the interval, written or held back */
	enum log_level level;
	char held[LOG_LINE]; /* the first line held back, for the count's line */
};

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static struct log_site log_sites[LOG_SITES];
static unsigned rate_burst = LOG_RATE_BURST;
static uint64_t rate_interval_ns = LOG_RATE_INTERVAL_NS;
static uint64_t (*log_clock)(void) = mono_ns;

void log_set_level(enum log_level level)
{
	log_current_level = level;
}

enum log_level log_get_level(void)
{
	return log_current_level;
}

void log_set_sink(log_sink_fn sink, void *ctx)
{
	log_sink = sink ? sink : log_sink_stderr;
	log_sink_ctx = sink ? ctx : NULL;
}

void log_set_ident(const char *ident)
{
	log_ident = ident;
}

void log_sink_stderr(enum log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	fprintf(stderr, "%s: %s: %s\n", log_ident, level_names[level], msg);
}

static void site_close(struct log_site *s, uint64_t now);

void log_set_rate_limit(unsigned burst, uint64_t interval_ns)
{
	uint64_t now;

	pthread_mutex_lock(&log_lock);
	/* Counts held under the old limit are written under it. */
	now = log_clock();
	for (size_t i = 0; i < LOG_SITES; i++)
		site_close(&log_sites[i], now);
	rate_burst = burst;
	rate_interval_ns = interval_ns ? interval_ns : 1;
	pthread_mutex_unlock(&log_lock);
}

void log_set_clock(uint64_t (*now_ns)(void))
{
	pthread_mutex_lock(&log_lock);
	log_clock = now_ns ? now_ns : mono_ns;
	pthread_mutex_unlock(&log_lock);
}

/* "182,161": counts of a flood are long. */
static void group_digits(uint64_t v, char *buf, size_t len)
{
	char digits[24];
	size_t n = (size_t)snprintf(digits, sizeof(digits), "%" PRIu64, v), o = 0;

	for (size_t i = 0; i < n && o + 1 < len; i++) {
		if (i && (n - i) % 3 == 0 && o + 2 < len)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
}

/*
 * Write the count of a site that held lines back and free its slot. The time is that of its
 * interval, or less when the slot is closed early (taken over, at exit), in whole seconds
 * rounded up, at least 1. Called with log_lock.
 */
static void site_close(struct log_site *s, uint64_t now)
{
	if (s->fmt && s->count > rate_burst) {
		char line[LOG_LINE + 128], num[32];
		uint64_t span = now - s->start_ns;

		if (span > rate_interval_ns)
			span = rate_interval_ns;
		if (span < 1000000000ull)
			span = 1000000000ull;
		group_digits(s->count - rate_burst, num, sizeof(num));
		snprintf(line, sizeof(line), "%s (repeated %s times in %" PRIu64 " s)", s->held,
			 num, (uint64_t)((span + 999999999ull) / 1000000000ull));
		log_sink(s->level, line, log_sink_ctx);
	}
	s->fmt = NULL;
	s->count = 0;
}

/* The slot of fmt, taken when it had none. Called with log_lock. */
static struct log_site *site_of(const char *fmt, uint64_t now)
{
	size_t h = (size_t)(((uintptr_t)fmt >> 3) * 0x9e3779b97f4a7c15ull >> 32) % LOG_SITES;
	struct log_site *free_slot = NULL, *oldest = NULL;

	for (size_t i = 0; i < LOG_PROBE; i++) {
		struct log_site *s = &log_sites[(h + i) % LOG_SITES];

		if (s->fmt == fmt)
			return s;
		if (!s->fmt && !free_slot)
			free_slot = s;
		if (s->fmt && (!oldest || s->start_ns < oldest->start_ns))
			oldest = s;
	}
	if (!free_slot) {
		site_close(oldest, now);
		free_slot = oldest;
	}
	free_slot->fmt = fmt;
	free_slot->start_ns = now;
	free_slot->count = 0;
	return free_slot;
}

/* Close the sites whose interval is over at now. Called with log_lock. */
static void expire_sites(uint64_t now)
{
	for (size_t i = 0; i < LOG_SITES; i++)
		if (log_sites[i].fmt && now - log_sites[i].start_ns >= rate_interval_ns)
			site_close(&log_sites[i], now);
}

void log_expire_repeats(void)
{
	pthread_mutex_lock(&log_lock);
	expire_sites(log_clock());
	pthread_mutex_unlock(&log_lock);
}

void log_flush_repeats(void)
{
	uint64_t now;

	pthread_mutex_lock(&log_lock);
	now = log_clock();
	for (size_t i = 0; i < LOG_SITES; i++)
		site_close(&log_sites[i], now);
	pthread_mutex_unlock(&log_lock);
}

static void format_line(char *buf, size_t len, const char *fmt, va_list ap)
{
	size_t n;

	vsnprintf(buf, len, fmt, ap);
	/* One message is one line: drop a trailing newline (libbpf sends them). */
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
}

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char buf[LOG_LINE];
	struct log_site *site;
	uint64_t now;

	if (!log_enabled(level))
		return;
	pthread_mutex_lock(&log_lock);
	if (!rate_burst) {
		format_line(buf, sizeof(buf), fmt, ap);
		log_sink(level, buf, log_sink_ctx);
		goto out;
	}
	now = log_clock();
	/* Intervals that are over write their counts first, so the log stays in time order. */
	expire_sites(now);
	site = site_of(fmt, now);
	if (site->count < rate_burst) {
		site->count++;
		format_line(buf, sizeof(buf), fmt, ap);
		log_sink(level, buf, log_sink_ctx);
	} else if (site->count++ == rate_burst) {
		/* Only the first line held back is formatted: the rest of a flood costs a count. */
		format_line(site->held, sizeof(site->held), fmt, ap);
		site->level = level;
	}
out:
	pthread_mutex_unlock(&log_lock);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}
