// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl report: GPU busy percent, top kernels, top launch sites and what the CPU did while
 * the GPU sat idle, from one profile and one trace of the same processes.
 */
#include "commands.h"
#include "conn.h"
#include "fetch.h"
#include "opts.h"
#include "report.h"
#include "trace.h"

#include <errno.h>
#include <string.h>

#include "wire.h"

#define REPORT_DEFAULT_TOP 10

void cmd_report_usage(FILE *f)
{
	fputs("Usage: profctl [--socket PATH] report [--pid N]... [--since DURATION] [--top N]\n"
	      "               [--json] [--timeout DURATION]\n"
	      "\n"
	      "What the GPU did and what the CPU did while it waited:\n"
	      "  - GPU busy: the time at least one kernel ran (overlaps counted once) over the\n"
	      "    window of the daemon's trace ring, as a percent of that window;\n"
	      "  - top kernels by GPU time (time, percent of all GPU time, kernel count);\n"
	      "  - top launch sites: the launching stacks the GPU time was charged to, shown by\n"
	      "    their innermost Python frame, else their innermost native frame;\n"
	      "  - top CPU stacks sampled while none of the process's kernels ran.\n"
	      "\n"
	      "Options:\n"
	      "  --pid N              only process N (repeat for more); default every process\n"
	      "                       you may see\n"
	      "  --since DURATION     only the last DURATION (30s, 5m, 1h; bare number: s)\n"
	      "  --top N              rows per list (default 10, 0 to 1000)\n"
	      "  --json               one JSON object instead of text\n"
	      "  --timeout DURATION   how long to wait for the daemon (default 60s)\n"
	      "  -h, --help           show this help\n"
	      "\n"
	      "Examples:\n"
	      "  profctl report --pid 1234\n"
	      "  profctl report --pid 1234 --since 30s --json | jq .gpu_busy.percent\n",
	      f);
}

struct report_args {
	struct fetch_query q;
	uint32_t top;
	bool json;
	uint64_t timeout_ns;
};

/* Returns 1 for --help, 0 to run, or -EINVAL with e filled. */
static int parse_args(int argc, char **argv, struct report_args *a, struct cli_error *e)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"since", required_argument, NULL, 's'},
	    {"top", required_argument, NULL, 'n'},
	    {"json", no_argument, NULL, 'j'},
	    {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	int opt, err = 0;

	*a = (struct report_args){.top = REPORT_DEFAULT_TOP};
	optind = 0;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			err = opt_parse_pid("report", optarg, a->q.pids, &a->q.n_pids, e);
			break;
		case 's':
			err = opt_parse_duration("report", "--since", optarg, 1, OPT_MAX_SINCE_NS,
						 "more than 0, at most 365d", &a->q.since_ns, e);
			a->q.has_since = true;
			break;
		case 'n':
			err = opt_parse_count("report", "--top", optarg, 0, 1000, &a->top, e);
			break;
		case 'j':
			a->json = true;
			break;
		case 't':
			err = opt_parse_timeout("report", optarg, &a->timeout_ns, e);
			break;
		case 'h':
			return 1;
		default:
			return opt_bad_option(opt, argv, longopts, "report", e);
		}
		if (err)
			return err;
	}
	return opt_no_operands("report", argc, argv, e);
}

/*
 * The trace, or NULL in *trace when the daemon has none to give: an older daemon answers with
 * an error and may hang up. Returns 0 or a negative errno with e filled.
 */
static int fetch_report_trace(struct conn *c, const struct fetch_query *q, Profd__Response **resp,
			      const Profd__Trace **trace, struct cli_error *e)
{
	Profd__TraceRequest treq = PROFD__TRACE_REQUEST__INIT;
	int err;

	*trace = NULL;
	fetch_trace_request(q, &treq);
	err = fetch_trace(c, &treq, resp, e);
	if (err == -EREMOTEIO || err == -ECONNRESET) {
		fprintf(stderr,
			"profctl: note: no trace from the daemon (%s); GPU busy is unknown\n",
			e->msg);
		*e = (struct cli_error){0};
		return 0;
	}
	if (err)
		return err;
	*trace = (*resp)->trace;
	return 0;
}

int cmd_report(int argc, char **argv, const struct global_opts *g)
{
	Profd__DumpRequest dreq = PROFD__DUMP_REQUEST__INIT;
	Profd__Response *presp = NULL, *tresp = NULL;
	const Profd__Trace *trace = NULL;
	struct report_args a;
	struct report r = {0};
	struct cli_error e = {0};
	struct conn *c = NULL;
	int err, ret = PROFCTL_EXIT_OK;

	err = parse_args(argc, argv, &a, &e);
	if (err < 0)
		return cli_error_print(&e);
	if (err > 0) {
		cmd_report_usage(stdout);
		return PROFCTL_EXIT_OK;
	}
	c = conn__open(wire_socket_path(g->socket),
		       cli_timeout_ns(a.timeout_ns, g, PROFCTL_DUMP_TIMEOUT_NS), &e);
	if (!c)
		return cli_error_print(&e);

	fetch_dump_request(&a.q, &dreq);
	/* An empty profile is fine while the trace has GPU events: checked below. */
	if (fetch_profile(c, &dreq, true, &presp, &e))
		goto fail;
	/* The trace last: a daemon too old to know it answers with an error and may hang up. */
	if (fetch_report_trace(c, &a.q, &tresp, &trace, &e))
		goto fail;
	if (!presp->profile->n_samples && (!trace || !trace_n_events(trace))) {
		cli_error_set(&e, PROFCTL_EXIT_NO_SAMPLES,
			      "no samples and no GPU events: widen --since or check the --pid");
		goto fail;
	}
	fetch_note_filtered(presp->profile->has_only_uid, presp->profile->only_uid);
	fetch_note_lost(presp->profile->has_samples_lost, presp->profile->samples_lost);
	err = report_build(&r, presp->profile, trace);
	if (err) {
		cli_error_set(&e, PROFCTL_EXIT_ERROR, "report: %s", strerror(-err));
		goto fail;
	}
	err = a.json ? report_print_json(&r, a.top, stdout) : report_print(&r, a.top, stdout);
	if (err) {
		cli_error_set(&e, PROFCTL_EXIT_ERROR, "writing to standard output: %s",
			      strerror(-err));
		goto fail;
	}
	goto out;
fail:
	ret = cli_error_print(&e);
out:
	report_release(&r);
	if (tresp)
		profd__response__free_unpacked(tresp, NULL);
	if (presp)
		profd__response__free_unpacked(presp, NULL);
	conn__free(c);
	return ret;
}
