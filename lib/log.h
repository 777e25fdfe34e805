/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Levelled logging with a pluggable sink. The level is checked before any formatting.
 * Messages name the module first: "symbolize: /usr/lib/libfoo.so: no .symtab, using .dynsym".
 */
#ifndef PROFD_LOG_H
#define PROFD_LOG_H

#include <stdarg.h>
#include <stdbool.h>

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
