/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * profctl's errors: the exit codes, the one-line message every failure ends in, the mapping
 * of a daemon's Error reply to both, and the global options every command receives.
 */
#ifndef PROFCTL_CLI_H
#define PROFCTL_CLI_H

#include <stdarg.h>
#include <stdint.h>

#include "profd.pb-c.h"

/* Exit codes: documented in `profctl --help` and docs/profctl.md; scripts rely on them. */
enum profctl_exit {
	PROFCTL_EXIT_OK = 0,
	PROFCTL_EXIT_ERROR = 1,	      /* other: output file, daemon failure */
	PROFCTL_EXIT_USAGE = 2,	      /* bad command line */
	PROFCTL_EXIT_UNREACHABLE = 3, /* no daemon at the socket, or it went away */
	PROFCTL_EXIT_PERMISSION = 4,  /* socket or daemon refused us */
	PROFCTL_EXIT_NO_SAMPLES = 5,  /* the filter matched nothing in the window */
	PROFCTL_EXIT_PROTOCOL = 6,    /* version mismatch or a reply we cannot understand */
	PROFCTL_EXIT_TIMEOUT = 7,     /* the daemon did not answer in time */
};

#define PROFCTL_STATUS_TIMEOUT_NS (10ull * 1000000000ull)
#define PROFCTL_DUMP_TIMEOUT_NS (60ull * 1000000000ull)
#define PROFCTL_MAX_TIMEOUT_NS (24ull * 3600 * 1000000000ull)

/* A failure: the exit code and the one line printed after "profctl: ". */
struct cli_error {
	int code;
	char msg[1024];
};

void cli_error_set(struct cli_error *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Print "profctl: MSG" on stderr. Returns e->code, the exit code. */
int cli_error_print(const struct cli_error *e);
/* The exit code for an Error reply's code. */
int cli_exit_for_error(Profd__ErrorCode code);
/*
 * Fill e from a daemon's Error reply: "NAME: MESSAGE" with the message as the daemon wrote it
 * (control characters replaced so it stays one line).
 */
void cli_error_from_reply(struct cli_error *e, const Profd__Error *err);

/* Options before the command. */
struct global_opts {
	const char *socket;  /* NULL: $PROFD_SOCKET, else the default */
	uint64_t timeout_ns; /* 0: the command's default */
};

/*
 * The timeout a command waits for the daemon: its own --timeout (own, 0 when not given), else
 * the global one, else dflt.
 */
uint64_t cli_timeout_ns(uint64_t own, const struct global_opts *g, uint64_t dflt);

#endif
