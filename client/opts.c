// SPDX-License-Identifier: BSD-2-Clause
/* The option parsers every command shares, so one option reads and fails alike everywhere. */
#include "opts.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

static bool is_global(const char *cmd)
{
	return strcmp(cmd, "profctl") == 0;
}

int opt_bad_value(struct cli_error *e, const char *cmd, const char *opt, const char *val,
		  const char *what)
{
	if (is_global(cmd))
		cli_error_set(e, PROFCTL_EXIT_USAGE, "%s '%s' %s; see 'profctl --help'", opt, val,
			      what);
	else
		cli_error_set(e, PROFCTL_EXIT_USAGE, "%s: %s '%s' %s; see 'profctl %s --help'", cmd,
			      opt, val, what, cmd);
	return -EINVAL;
}

int opt_bad_option(int c, char **argv, const struct option *longopts, const char *cmd,
		   struct cli_error *e)
{
	bool global = is_global(cmd);
	char opt[64], where[48], help[64];

	snprintf(where, sizeof(where), "%s%s", global ? "" : cmd, global ? "" : ": ");
	snprintf(help, sizeof(help), "profctl%s%s --help", global ? "" : " ", global ? "" : cmd);
	if (c == ':') {
		snprintf(opt, sizeof(opt), "-%c", optopt);
		for (const struct option *o = longopts; o && o->name; o++)
			if (o->val == optopt)
				snprintf(opt, sizeof(opt), "--%s", o->name);
		cli_error_set(e, PROFCTL_EXIT_USAGE, "%soption '%s' needs a value; see '%s'", where,
			      opt, help);
	} else if (optopt && strncmp(argv[optind - 1], "--", 2) == 0) {
		/* getopt reports "--json=x" as '?' with the option's val in optopt. */
		snprintf(opt, sizeof(opt), "%.60s", argv[optind - 1]);
		cli_error_set(e, PROFCTL_EXIT_USAGE, "%soption '%s' takes no value; see '%s'",
			      where, opt, help);
	} else {
		if (optopt)
			snprintf(opt, sizeof(opt), "-%c", optopt);
		else
			snprintf(opt, sizeof(opt), "%.60s", argv[optind - 1]);
		cli_error_set(e, PROFCTL_EXIT_USAGE, "%sunknown option '%s'; see '%s'", where, opt,
			      help);
	}
	return -EINVAL;
}

int opt_no_operands(const char *cmd, int argc, char **argv, struct cli_error *e)
{
	if (optind >= argc)
		return 0;
	cli_error_set(e, PROFCTL_EXIT_USAGE,
		      "%s: unexpected argument '%s'; see 'profctl %s --help'", cmd, argv[optind],
		      cmd);
	return -EINVAL;
}

/* A process or thread id: the kernel's pid_t is signed, so at most INT32_MAX. */
static int parse_id(const char *cmd, const char *opt, const char *val, uint32_t *out,
		    struct cli_error *e)
{
	int err = parse_u32(val, 1, INT32_MAX, out);

	if (err == -ERANGE)
		return opt_bad_value(e, cmd, opt, val, "is out of range (1 to 2147483647)");
	if (err)
		return opt_bad_value(e, cmd, opt, val, "is not a positive integer");
	return 0;
}

int opt_parse_pid(const char *cmd, const char *val, uint32_t *pids, size_t *n_pids,
		  struct cli_error *e)
{
	uint32_t id;
	int err = parse_id(cmd, "--pid", val, &id, e);

	if (err)
		return err;
	for (size_t i = 0; i < *n_pids; i++)
		if (pids[i] == id)
			return 0;
	if (*n_pids == OPT_MAX_PIDS) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "%s: more than %d --pid options; see 'profctl %s --help'", cmd,
			      OPT_MAX_PIDS, cmd);
		return -EINVAL;
	}
	pids[(*n_pids)++] = id;
	return 0;
}

int opt_parse_tid(const char *cmd, const char *val, bool *has_tid, uint32_t *tid,
		  struct cli_error *e)
{
	uint32_t id;
	int err;

	if (*has_tid)
		return opt_bad_value(e, cmd, "--tid", val, "comes after another --tid");
	err = parse_id(cmd, "--tid", val, &id, e);
	if (err)
		return err;
	*tid = id;
	*has_tid = true;
	return 0;
}

int opt_parse_timeout(const char *cmd, const char *val, uint64_t *out, struct cli_error *e)
{
	uint64_t ns;

	if (parse_duration_ns(val, 1000000ull, PROFCTL_MAX_TIMEOUT_NS, &ns))
		return opt_bad_value(e, cmd, "--timeout", val,
				     "is not a duration from 1ms to 24h (like 30s, 5m)");
	*out = ns;
	return 0;
}

int opt_parse_duration(const char *cmd, const char *opt, const char *val, uint64_t min_ns,
		       uint64_t max_ns, const char *range, uint64_t *out, struct cli_error *e)
{
	char what[128];
	uint64_t ns;
	int err = parse_duration_ns(val, min_ns, max_ns, &ns);

	if (!err) {
		*out = ns;
		return 0;
	}
	if (err == -ERANGE) {
		snprintf(what, sizeof(what), "is out of range (%s)", range);
		return opt_bad_value(e, cmd, opt, val, what);
	}
	return opt_bad_value(e, cmd, opt, val, "is not a duration (like 500ms, 30s, 5m)");
}

int opt_parse_count(const char *cmd, const char *opt, const char *val, uint32_t min, uint32_t max,
		    uint32_t *out, struct cli_error *e)
{
	char what[96];
	uint32_t n;

	if (!parse_u32(val, min, max, &n)) {
		*out = n;
		return 0;
	}
	snprintf(what, sizeof(what), "is not a number from %u to %u", min, max);
	return opt_bad_value(e, cmd, opt, val, what);
}

int opt_parse_output(const char *cmd, const char *val, const char **out, struct cli_error *e)
{
	if (!*val)
		return opt_bad_value(e, cmd, "--output", val, "is an empty file name");
	*out = val;
	return 0;
}
