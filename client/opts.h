/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Command-line options the commands share: one parser per kind of value, each failing with the
 * same one-line message in every command ("CMD: OPT 'VAL' WHAT; see 'profctl CMD --help'").
 * cmd "profctl" means the global options: the message then names no command.
 */
#ifndef PROFCTL_OPTS_H
#define PROFCTL_OPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"

/* --pid options one request may carry. */
#define OPT_MAX_PIDS 256
/* How far back --since and diff's windows may reach. */
#define OPT_MAX_SINCE_NS (365ull * 86400 * 1000000000ull)

/* Fill e for a bad option value, exit code PROFCTL_EXIT_USAGE. Returns -EINVAL. */
int opt_bad_value(struct cli_error *e, const char *cmd, const char *opt, const char *val,
		  const char *what);
/*
 * Fill e for getopt_long's return c ('?' unknown option, ':' missing value) in command cmd.
 * Returns -EINVAL.
 */
int opt_bad_option(int c, char **argv, const struct option *longopts, const char *cmd,
		   struct cli_error *e);
/*
 * After getopt_long: fail on the first argument left at argv[optind], for commands that take
 * none. Returns 0 or -EINVAL with e filled.
 */
int opt_no_operands(const char *cmd, int argc, char **argv, struct cli_error *e);

/*
 * Each parser below returns 0 with the value stored, or -EINVAL with e filled (code
 * PROFCTL_EXIT_USAGE) and the destination unchanged.
 */

/*
 * --pid VAL: add a process id (1 to INT32_MAX) to pids[*n_pids], at most OPT_MAX_PIDS of them;
 * a repeated id is kept once.
 */
int opt_parse_pid(const char *cmd, const char *val, uint32_t *pids, size_t *n_pids,
		  struct cli_error *e);
/* --tid VAL: one thread id; a second --tid is an error. */
int opt_parse_tid(const char *cmd, const char *val, bool *has_tid, uint32_t *tid,
		  struct cli_error *e);
/* --timeout VAL: 1ms to 24h. */
int opt_parse_timeout(const char *cmd, const char *val, uint64_t *out, struct cli_error *e);
/* A duration in [min_ns, max_ns], which range ("100ms to 1h") says in the message. */
int opt_parse_duration(const char *cmd, const char *opt, const char *val, uint64_t min_ns,
		       uint64_t max_ns, const char *range, uint64_t *out, struct cli_error *e);
/* A count in [min, max]. */
int opt_parse_count(const char *cmd, const char *opt, const char *val, uint32_t min, uint32_t max,
		    uint32_t *out, struct cli_error *e);
/* -o/--output VAL: a file name, not empty. *out borrows val. */
int opt_parse_output(const char *cmd, const char *val, const char **out, struct cli_error *e);

#endif
