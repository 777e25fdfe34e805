// SPDX-License-Identifier: BSD-2-Clause
#include "log.h"

#include <stdio.h>
#include <string.h>

enum log_level log_current_level = LOG_LVL_INFO;
static log_sink_fn log_sink = log_sink_stderr;
static void *log_sink_ctx;
static const char *log_ident = "profd";

static const char *const level_names[] = {"error", "warn", "info", "debug"};

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

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char buf[1024];
	size_t n;

	if (!log_enabled(level))
		return;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	/* One message is one line: drop a trailing newline (libbpf sends them). */
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	log_sink(level, buf, log_sink_ctx);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}
