/* SPDX-License-Identifier: BSD-2-Clause */
/* profctl diff's command line, parsed apart from running it so tests can check each option. */
#ifndef PROFCTL_CMD_DIFF_H
#define PROFCTL_CMD_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "opts.h"
#include "output.h"

/* A time window of the daemon, as distances back from its clock's "now": from_ns > to_ns. */
struct diff_window {
	uint64_t from_ns;
	uint64_t to_ns;
	const char *text; /* as given, for messages and titles */
};

struct diff_args {
	bool help;
	const char *files[2]; /* A and B, when comparing files */
	size_t n_files;
	bool windows; /* --before and --after given instead of files */
	struct diff_window before, after;
	uint32_t pids[OPT_MAX_PIDS];
	size_t n_pids;
	enum dump_format format; /* never DEFAULT after a successful parse */
	const char *output;	 /* NULL: stdout */
	uint64_t timeout_ns;	 /* 0: global or default */
};

/*
 * Parse `diff ...` (argv[0] is "diff"). Returns 0 (a->help set for --help), or -EINVAL with e
 * filled (code PROFCTL_EXIT_USAGE). argv may be permuted; strings are borrowed.
 */
int diff_parse_args(int argc, char **argv, struct diff_args *a, struct cli_error *e);
/*
 * Parse a window: "FROM..TO" or "FROM" (meaning FROM..now), each point a duration back from
 * now ("10m", "90s") or "now". Returns 0, or -EINVAL when it is not one, -ERANGE when it is
 * empty or reversed or reaches back more than 365 days.
 */
int diff_parse_window(const char *s, struct diff_window *w);

#endif
