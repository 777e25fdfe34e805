// SPDX-License-Identifier: BSD-2-Clause
/* profctl's errors: one line on stderr and an exit code scripts can rely on. */
#include "cli.h"

#include <stdio.h>

#include "wire.h"

void cli_error_set(struct cli_error *e, int code, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

int cli_error_print(const struct cli_error *e)
{
	fprintf(stderr, "profctl: %s\n", e->msg);
	return e->code;
}

int cli_exit_for_error(Profd__ErrorCode code)
{
	switch (code) {
	case PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED:
		return PROFCTL_EXIT_PERMISSION;
	case PROFD__ERROR_CODE__ERROR_NO_SAMPLES:
	case PROFD__ERROR_CODE__ERROR_NO_PROCESS:
		return PROFCTL_EXIT_NO_SAMPLES;
	case PROFD__ERROR_CODE__ERROR_UNSUPPORTED_VERSION:
	case PROFD__ERROR_CODE__ERROR_BAD_REQUEST:
		return PROFCTL_EXIT_PROTOCOL;
	default:
		return PROFCTL_EXIT_ERROR;
	}
}

void cli_error_from_reply(struct cli_error *e, const Profd__Error *err)
{
	const char *msg = err->message ? err->message : "";

	/* The daemon's message is printed as is; it names the kind of error itself. */
	cli_error_set(e, cli_exit_for_error(err->code), "%s",
		      *msg ? msg : wire_error_name(err->code));
	/* The daemon's text goes to a terminal: keep it to one line and free of escapes. */
	for (char *p = e->msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

uint64_t cli_timeout_ns(uint64_t own, const struct global_opts *g, uint64_t dflt)
{
	if (own)
		return own;
	return g->timeout_ns ? g->timeout_ns : dflt;
}
