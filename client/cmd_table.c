// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl table: the hottest functions as one table, laid out like the PyTorch profiler's
 * key_averages().table(). Also the helpers `profctl top` shares with it (view.h).
 */
#include "cli.h"
#include "conn.h"
#include "functable.h"
#include "profile.h"
#include "view.h"
#include "value.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "parse.h"
#include "wire.h"

#define TABLE_DEFAULT_LIMIT 20

void cmd_table_usage(FILE *f)
{
	fputs(
	    "Usage: profctl [--socket PATH] table [--pid N]... [--tid N] [--since DURATION]\n"
	    "               [--sort self|total] [--limit N] [--timeout DURATION]\n"
	    "\n"
	    "Print the hottest functions of the samples the daemon holds as one table, laid\n"
	    "out like the PyTorch profiler's key_averages().table(). A function is its display\n"
	    "name, the same as in flame graphs: all its addresses and call paths add up.\n"
	    "\n"
	    "Columns:\n"
	    "  Self CPU %, Self CPU    samples whose innermost frame is the function, as a share\n"
	    "                          of all samples and as CPU time (samples x period)\n"
	    "  CPU total %, CPU total  samples with the function anywhere on the stack (once per\n"
	    "                          sample, even when it recurses)\n"
	    "  # Samples               that number of samples\n"
	    "  GPU columns             the same pairs for each GPU value the daemon records\n"
	    "The footer gives the totals the percentages are of.\n"
	    "\n"
	    "Options:\n"
	    "  --pid N              only process N (repeat for more); default: every process\n"
	    "                       you may see\n"
	    "  --tid N              only thread N\n"
	    "  --since DURATION     only the last DURATION (30s, 5m, 1h, 500ms; bare number: s)\n"
	    "  --sort self|total    order by self time (default) or total time\n"
	    "  --limit N            at most N rows (default 20; 0: all)\n"
	    "  --timeout DURATION   how long to wait for the daemon (default 60s)\n"
	    "  -h, --help           show this help\n"
	    "\n"
	    "Names are cut to the terminal's width; into a pipe or a file they are printed whole.\n"
	    "\n"
	    "Examples:\n"
	    "  profctl table --pid 1234\n"
	    "  profctl table --pid 1234 --since 30s --sort total --limit 50\n"
	    "  profctl table --since 5m --limit 0 > functions.txt\n",
	    f);
}

static int bad_value(const char *cmd, struct cli_error *e, const char *opt, const char *val,
		     const char *what)
{
	return cli_bad_value(e, cmd, opt, val, what);
}

static int parse_id(const char *cmd, const char *opt, const char *val, uint32_t *out,
		    struct cli_error *e)
{
	int err = parse_u32(val, 1, INT32_MAX, out);

	if (err == -ERANGE)
		return bad_value(cmd, e, opt, val, "is out of range (1 to 2147483647)");
	if (err)
		return bad_value(cmd, e, opt, val, "is not a positive integer");
	return 0;
}

int view_parse_pid(const char *cmd, const char *val, struct view_query *q, struct cli_error *e)
{
	uint32_t id;
	int err = parse_id(cmd, "--pid", val, &id, e);

	if (err)
		return err;
	for (size_t i = 0; i < q->n_pids; i++)
		if (q->pids[i] == id)
			return 0;
	if (q->n_pids == DUMP_MAX_PIDS) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "%s: more than %d --pid options; see 'profctl %s --help'", cmd,
			      DUMP_MAX_PIDS, cmd);
		return -EINVAL;
	}
	q->pids[q->n_pids++] = id;
	return 0;
}

int view_parse_tid(const char *cmd, const char *val, struct view_query *q, struct cli_error *e)
{
	int err;

	if (q->has_tid)
		return bad_value(cmd, e, "--tid", val, "comes after another --tid");
	err = parse_id(cmd, "--tid", val, &q->tid, e);
	if (err)
		return err;
	q->has_tid = true;
	return 0;
}

int view_parse_sort(const char *cmd, const char *val, enum functable_sort *out, struct cli_error *e)
{
	if (strcmp(val, "self") == 0)
		*out = FUNCTABLE_SORT_SELF;
	else if (strcmp(val, "total") == 0)
		*out = FUNCTABLE_SORT_TOTAL;
	else
		return bad_value(cmd, e, "--sort", val, "is not self or total");
	return 0;
}

int view_parse_duration(const char *cmd, const char *opt, const char *val, uint64_t min_ns,
			uint64_t max_ns, const char *range, uint64_t *out, struct cli_error *e)
{
	char what[128];
	int err = parse_duration_ns(val, min_ns, max_ns, out);

	if (!err)
		return 0;
	if (err == -ERANGE) {
		snprintf(what, sizeof(what), "is out of range (%s)", range);
		return bad_value(cmd, e, opt, val, what);
	}
	return bad_value(cmd, e, opt, val, "is not a duration (like 500ms, 30s, 5m)");
}

int view_parse_count(const char *cmd, const char *opt, const char *val, uint32_t min, uint32_t max,
		     uint32_t *out, struct cli_error *e)
{
	char what[96];
	int err = parse_u32(val, min, max, out);

	if (!err)
		return 0;
	snprintf(what, sizeof(what), "is not a number from %u to %u", min, max);
	return bad_value(cmd, e, opt, val, what);
}

int view_fetch(struct conn *c, const struct view_query *q, struct functable **out,
	       Profd__Response **resp_out, struct cli_error *e)
{
	Profd__DumpRequest dreq = PROFD__DUMP_REQUEST__INIT;
	Profd__Response *resp = NULL;
	struct functable *t;
	int err;

	dreq.n_pids = q->n_pids;
	dreq.pids = (uint32_t *)q->pids;
	dreq.has_tid = q->has_tid;
	dreq.tid = q->tid;
	dreq.has_since_ns = q->has_since;
	dreq.since_ns = q->since_ns;
	/* The same request, checks and messages as a dump; an empty profile reads as -EREMOTEIO
	 * here, like the daemon's own "no samples" error, which top treats alike. */
	err = dump_fetch(c, &dreq, &resp, e);
	if (err)
		return err == -ENODATA ? -EREMOTEIO : err;
	/* NVTX labels are ranges, not functions: every sample under one would rank it first. */
	profile_strip_nvtx(resp->profile);
	t = functable__new(resp->profile);
	if (!t) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "summing the profile: %s", strerror(-err));
		goto out;
	}
	if (!functable__n_rows(t)) {
		functable__free(t);
		cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES,
			      "no samples: the daemon returned an empty profile; widen --since or "
			      "check the --pid");
		err = -EREMOTEIO;
		goto out;
	}
	*out = t;
	if (resp_out) {
		*resp_out = resp;
		resp = NULL;
	}
out:
	if (resp)
		profd__response__free_unpacked(resp, NULL);
	return err;
}

unsigned view_term_cols(int fd)
{
	struct winsize ws;

	if (!isatty(fd) || ioctl(fd, TIOCGWINSZ, &ws) < 0)
		return 0;
	return ws.ws_col;
}

int cmd_table(int argc, char **argv, const struct global_opts *g)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},   {"tid", required_argument, NULL, 'T'},
	    {"since", required_argument, NULL, 's'}, {"sort", required_argument, NULL, 'S'},
	    {"limit", required_argument, NULL, 'l'}, {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},	     {0},
	};
	static struct view_query q; /* large: keep it off the stack */
	enum functable_sort sort = FUNCTABLE_SORT_SELF;
	struct functable_print_opts po = {.limit = TABLE_DEFAULT_LIMIT};
	uint64_t timeout_ns = 0;
	struct functable *t = NULL;
	struct cli_error e = {0};
	struct conn *c;
	uint32_t limit;
	int opt, err;

	q = (struct view_query){0};
	optind = 0;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			err = view_parse_pid("table", optarg, &q, &e);
			break;
		case 'T':
			err = view_parse_tid("table", optarg, &q, &e);
			break;
		case 's':
			err = view_parse_duration("table", "--since", optarg, 1, VIEW_MAX_SINCE_NS,
						  "more than 0, at most 365d", &q.since_ns, &e);
			q.has_since = true;
			break;
		case 'S':
			err = view_parse_sort("table", optarg, &sort, &e);
			break;
		case 'l':
			err = view_parse_count("table", "--limit", optarg, 0, 1000000, &limit, &e);
			po.limit = limit;
			break;
		case 't':
			err = view_parse_duration("table", "--timeout", optarg, 1000000ull,
						  PROFCTL_MAX_TIMEOUT_NS, "1ms to 24h", &timeout_ns,
						  &e);
			break;
		case 'h':
			cmd_table_usage(stdout);
			return PROFCTL_EXIT_OK;
		default:
			err = cli_bad_option(opt, argv, longopts, "table", &e);
			break;
		}
		if (err)
			return cli_error_print(&e);
	}
	if (optind < argc) {
		cli_error_set(&e, PROFCTL_EXIT_USAGE,
			      "table: unexpected argument '%s'; see 'profctl table --help'",
			      argv[optind]);
		return cli_error_print(&e);
	}
	if (!timeout_ns)
		timeout_ns = g->timeout_ns ? g->timeout_ns : PROFCTL_DUMP_TIMEOUT_NS;

	c = conn__open(wire_socket_path(g->socket), timeout_ns, &e);
	if (!c)
		return cli_error_print(&e);
	err = view_fetch(c, &q, &t, NULL, &e);
	conn__free(c);
	if (err)
		return cli_error_print(&e);
	functable__sort(t, sort, functable__cpu_index(t));
	po.width = view_term_cols(STDOUT_FILENO);
	err = functable__print_table(t, &po, stdout);
	functable__free(t);
	if (err || fflush(stdout) || ferror(stdout)) {
		cli_error_set(&e, PROFCTL_EXIT_ERROR, "writing to standard output: %s",
			      strerror(errno ? errno : EIO));
		return cli_error_print(&e);
	}
	return PROFCTL_EXIT_OK;
}
