/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Levelled logging with a pluggable sink. The level is checked before any formatting.
 * Messages name the module first: "symbolize: /usr/lib/libfoo.so: no .symtab, using .dynsym".
 *
 * Repeated lines are rate-limited per message site (the format string's address): a peer that
 * can make the daemon log (a connect loop, a flood of bad requests) must not fill the disk. A
 * site writes at most `burst` lines per interval; the rest are counted, and one line, the first
 * one held back followed by "(repeated N times in S s)", is written when the interval is over
 * (at the next line logged from anywhere, log_expire_repeats() or log_flush_repeats()). The
 * sink is called with the lock held, so a sink must not log. The table of sites is
 * fixed, so memory stays bounded however many sites log. Thread-safe.
 */
#ifndef PROFD_LOG_H
#define PROFD_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

enum log_level {
	LOG_LVL_ERROR = 0,
	LOG_LVL_WARN = 1,
	LOG_LVL_INFO = 2,
	LOG_LVL_DEBUG = 3,
};

/* A sink receives one formatted message without a trailing newline. */
typedef void (*log_sink_fn)(enum log_level level, const char *msg, void *ctx);

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* NULL restores the default stderr sink. */
void log_set_sink(log_sink_fn sink, void *ctx);
/* The stderr sink: "profd: warn: msg" (the program name comes from log_set_ident()). */
void log_sink_stderr(enum log_level level, const char *msg, void *ctx);
void log_set_ident(const char *ident);

/* The defaults: 10 lines per site per 10 s. burst 0 turns the limit off. */
#define LOG_RATE_BURST 10
#define LOG_RATE_INTERVAL_NS (10ull * 1000000000ull)
void log_set_rate_limit(unsigned burst, uint64_t interval_ns);
/* The limiter's clock (CLOCK_MONOTONIC ns); NULL restores it. For tests. */
void log_set_clock(uint64_t (*now_ns)(void));
/* Write the counts of the sites whose interval is over (the daemon calls it on its timer). */
void log_expire_repeats(void);
/* Write the count of every site holding lines back now (at exit, so no count is lost). */
void log_flush_repeats(void);

void log_vmsg(enum log_level level, const char *fmt, va_list ap);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

extern enum log_level log_current_level;

#define log_enabled(lvl) ((lvl) <= log_current_level)
#define pr_log(lvl, ...)                                                                           \
	do {                                                                                       \
		if (log_enabled(lvl))                                                              \
			log_msg(lvl, __VA_ARGS__);                                                 \
	} while (0)
#define pr_err(...) pr_log(LOG_LVL_ERROR, __VA_ARGS__)
#define pr_warn(...) pr_log(LOG_LVL_WARN, __VA_ARGS__)
#define pr_info(...) pr_log(LOG_LVL_INFO, __VA_ARGS__)
#define pr_debug(...) pr_log(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
