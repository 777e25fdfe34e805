// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl diff: a differential flame graph of two profiles, from two files (folded or pprof)
 * or from two time windows of the daemon, as SVG or as two-column folded stacks.
 */
#include "cmd_diff.h"
#include "commands.h"
#include "conn.h"
#include "diff.h"
#include "fetch.h"
#include "format.h"
#include "opts.h"
#include "output.h"
#include "stacks.h"

#include <errno.h>
#include <string.h>

#include "parse.h"
#include "wire.h"
#include "value.h"

void cmd_diff_usage(FILE *f)
{
	fputs("Usage: profctl diff [--format svg|folded] [-o FILE] A B\n"
	      "       profctl [--socket PATH] diff [--pid N]... --before WINDOW\n"
	      "               --after WINDOW [--format svg|folded] [-o FILE]\n"
	      "               [--timeout DURATION]\n"
	      "\n"
	      "Compare two profiles: A, the baseline, and B. A and B are files of folded\n"
	      "stacks (dump --format folded, flamegraph.pl's input) or pprof profiles\n"
	      "(gzip-compressed profile.proto, dump --format pprof); '-' reads standard\n"
	      "input. Or they are two time windows of the samples the daemon holds.\n"
	      "\n"
	      "The SVG draws each frame as wide as its samples in B and colours it by how\n"
	      "its share of all samples changed from A to B: red grew, blue shrank, grey\n"
	      "stayed; the larger the change, the stronger the colour. Frames only in A are\n"
	      "not drawn; the legend says how many samples of A that leaves out. Hover shows\n"
	      "both counts. The folded output has lines 'STACK COUNT_A COUNT_B', the\n"
	      "two-column input flamegraph.pl draws differential graphs from.\n"
	      "\n"
	      "Options:\n"
	      "  --before WINDOW      A is the daemon's samples in WINDOW\n"
	      "  --after WINDOW       B is the daemon's samples in WINDOW; WINDOW is\n"
	      "                       FROM..TO, each a time back from now (30s, 5m, 1h) or\n"
	      "                       'now', older first; a lone FROM means FROM..now\n"
	      "  --pid N              only process N in both windows (repeat for more);\n"
	      "                       without it every process you may see, each under its\n"
	      "                       own root frame\n"
	      "  --format svg|folded  differential SVG, or folded stacks with both counts\n"
	      "                       (default: svg when FILE ends in .svg, else folded)\n"
	      "  -o, --output FILE    write FILE (atomically) instead of standard output\n"
	      "  --timeout DURATION   how long to wait for the daemon (default 60s)\n"
	      "  -h, --help           show this help\n"
	      "\n"
	      "Examples:\n"
	      "  profctl diff before.folded after.folded -o diff.svg\n"
	      "  profctl diff old.pb.gz new.pb.gz --format folded | flamegraph.pl > d.svg\n"
	      "  profctl diff --pid 1234 --before 10m..5m --after 5m..now -o diff.svg\n"
	      "  profctl diff --before 2h..1h --after 1h -o hour.svg\n",
	      f);
}

static int bad_value(struct cli_error *e, const char *opt, const char *val, const char *what)
{
	return opt_bad_value(e, "diff", opt, val, what);
}

/* One point of a window: "now" or a duration back from now. */
static int parse_point(const char *s, size_t n, uint64_t *out)
{
	char buf[32];

	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (strcmp(buf, "now") == 0) {
		*out = 0;
		return 0;
	}
	return parse_duration_ns(buf, 1, OPT_MAX_SINCE_NS, out);
}

int diff_parse_window(const char *s, struct diff_window *w)
{
	const char *dots = strstr(s, "..");
	int err;

	w->text = s;
	if (!dots) {
		w->to_ns = 0;
		err = parse_point(s, strlen(s), &w->from_ns);
	} else {
		err = parse_point(s, (size_t)(dots - s), &w->from_ns);
		if (!err)
			err = parse_point(dots + 2, strlen(dots + 2), &w->to_ns);
	}
	if (err)
		return err;
	return w->from_ns > w->to_ns ? 0 : -ERANGE;
}

static int window_opt(const char *opt, const char *val, struct diff_window *w, bool *seen,
		      struct cli_error *e)
{
	int err;

	if (*seen)
		return bad_value(e, opt, val, "comes after another one");
	err = diff_parse_window(val, w);
	if (err == -ERANGE)
		return bad_value(e, opt, val,
				 "is empty or reversed, or reaches back more than 365d (write "
				 "the older point first, like 10m..5m)");
	if (err)
		return bad_value(e, opt, val, "is not a window (like 10m..5m, 5m..now, 1h)");
	*seen = true;
	return 0;
}

static const struct option diff_longopts[] = {
    {"before", required_argument, NULL, 'B'}, {"after", required_argument, NULL, 'A'},
    {"pid", required_argument, NULL, 'p'},    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'}, {"timeout", required_argument, NULL, 't'},
    {"help", no_argument, NULL, 'h'},	      {0},
};

/* Which of --before and --after were given, for the checks after the loop. */
struct seen {
	bool before, after;
};

/*
 * One option getopt_long returned, optarg its value. Returns 0, 1 for --help, or -EINVAL with
 * e filled.
 */
static int parse_option(int opt, char **argv, struct diff_args *a, struct seen *seen,
			struct cli_error *e)
{
	switch (opt) {
	case 'B':
		return window_opt("--before", optarg, &a->before, &seen->before, e);
	case 'A':
		return window_opt("--after", optarg, &a->after, &seen->after, e);
	case 'p':
		return opt_parse_pid("diff", optarg, a->pids, &a->n_pids, e);
	case 'f':
		if (strcmp(optarg, "svg") == 0)
			a->format = DUMP_FORMAT_SVG;
		else if (strcmp(optarg, "folded") == 0)
			a->format = DUMP_FORMAT_FOLDED;
		else
			return bad_value(e, "--format", optarg, "is not svg or folded");
		return 0;
	case 'o':
		return opt_parse_output("diff", optarg, &a->output, e);
	case 't':
		return opt_parse_timeout("diff", optarg, &a->timeout_ns, e);
	case 'h':
		return 1;
	default:
		return opt_bad_option(opt, argv, diff_longopts, "diff", e);
	}
}

/* The operands: A and B. Returns 0 or -EINVAL with e filled for a third. */
static int parse_files(int argc, char **argv, struct diff_args *a, struct cli_error *e)
{
	for (int i = optind; i < argc; i++) {
		if (a->n_files == 2) {
			cli_error_set(e, PROFCTL_EXIT_USAGE,
				      "diff: unexpected argument '%s': give two profiles, A and B; "
				      "see 'profctl diff --help'",
				      argv[i]);
			return -EINVAL;
		}
		a->files[a->n_files++] = argv[i];
	}
	return 0;
}

/* Two files or two windows, and what goes with each. Returns 0 or -EINVAL with e filled. */
static int check_sources(struct diff_args *a, const struct seen *seen, struct cli_error *e)
{
	a->windows = seen->before || seen->after;
	if (a->windows && a->n_files) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "diff: give two files or --before and --after, not both; see "
			      "'profctl diff --help'");
		return -EINVAL;
	}
	if (a->windows && !(seen->before && seen->after)) {
		cli_error_set(
		    e, PROFCTL_EXIT_USAGE, "diff: %s needs %s too; see 'profctl diff --help'",
		    seen->before ? "--before" : "--after", seen->before ? "--after" : "--before");
		return -EINVAL;
	}
	if (a->windows)
		return 0;
	if (a->n_files != 2) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "diff: give two profiles to compare (A B), or --before and --after; "
			      "see 'profctl diff --help'");
		return -EINVAL;
	}
	if (a->n_pids) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "diff: --pid selects from the daemon's windows, not from files; see "
			      "'profctl diff --help'");
		return -EINVAL;
	}
	if (strcmp(a->files[0], "-") == 0 && strcmp(a->files[1], "-") == 0) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "diff: only one of A and B can be standard input ('-')");
		return -EINVAL;
	}
	return 0;
}

int diff_parse_args(int argc, char **argv, struct diff_args *a, struct cli_error *e)
{
	struct seen seen = {0};
	int opt, err;

	*a = (struct diff_args){0};
	optind = 0;
	opterr = 0;
	/* No '+': the files may come before the options, as people type them. */
	while ((opt = getopt_long(argc, argv, ":o:h", diff_longopts, NULL)) != -1) {
		err = parse_option(opt, argv, a, &seen, e);
		if (err) {
			a->help = err > 0;
			return err < 0 ? err : 0;
		}
	}
	err = parse_files(argc, argv, a, e);
	if (!err)
		err = check_sources(a, &seen, e);
	if (err)
		return err;
	/* Only two formats here: a file name asking for any other gets folded. */
	if (a->format == DUMP_FORMAT_DEFAULT)
		a->format = a->output && output_format_for_file(a->output) == DUMP_FORMAT_SVG
				? DUMP_FORMAT_SVG
				: DUMP_FORMAT_FOLDED;
	return 0;
}

/* The daemon's clock: windows are distances back from its now, not ours. */
static int daemon_now(struct conn *c, uint64_t *now, struct cli_error *e)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__StatusRequest sreq = PROFD__STATUS_REQUEST__INIT;
	Profd__Response *resp = NULL;
	int err;

	req.msg_case = PROFD__REQUEST__MSG_STATUS;
	req.status = &sreq;
	err = conn__call(c, &req, PROFD__RESPONSE__MSG_STATUS, &resp, e);
	if (err)
		return err;
	if (!resp->status->has_now_ns) {
		cli_error_set(e, PROFCTL_EXIT_PROTOCOL,
			      "the daemon's status has no clock reading: are profd and profctl the "
			      "same version?");
		err = -EPROTO;
	} else {
		*now = resp->status->now_ns;
	}
	profd__response__free_unpacked(resp, NULL);
	return err;
}

/* One window's profile as stacks. which names it in messages ("before", "after"). */
static int fetch_window(struct conn *c, const struct diff_args *a, const struct diff_window *w,
			uint64_t now, const char *which, struct stacks **out, struct cli_error *e)
{
	Profd__DumpRequest dreq = PROFD__DUMP_REQUEST__INIT;
	Profd__Response *resp = NULL;
	int err;

	dreq.n_pids = a->n_pids;
	dreq.pids = (uint32_t *)a->pids;
	dreq.has_start_ns = 1;
	dreq.start_ns = now > w->from_ns ? now - w->from_ns : 0;
	dreq.has_end_ns = 1;
	dreq.end_ns = now > w->to_ns ? now - w->to_ns : 0;
	/* The diff compares stacks under process names only. */
	dreq.has_merge_processes = 1;
	dreq.merge_processes = 1;
	err = fetch_profile(c, &dreq, false, &resp, e);
	if (err == -ENODATA || (err && e->code == PROFCTL_EXIT_NO_SAMPLES)) {
		cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES,
			      "no samples in the %s window (%s): widen it, or check the --pid",
			      which, w->text);
		return err;
	}
	if (err)
		return err;
	profile_strip_states(resp->profile);
	*out = stacks__from_profile(resp->profile, a->n_pids == 0);
	profd__response__free_unpacked(resp, NULL);
	if (!*out) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "%s window: %s", which, strerror(-err));
		return err;
	}
	return 0;
}

/* Both windows' profiles, as stacks, from the daemon. */
static int fetch_windows(const struct diff_args *a, const struct global_opts *g, struct stacks **sa,
			 struct stacks **sb, struct cli_error *e)
{
	uint64_t now;
	struct conn *c;
	int err;

	c = conn__open(wire_socket_path(g->socket),
		       cli_timeout_ns(a->timeout_ns, g, PROFCTL_DUMP_TIMEOUT_NS), e);
	if (!c)
		return -errno;
	err = daemon_now(c, &now, e);
	if (!err)
		err = fetch_window(c, a, &a->before, now, "before", sa, e);
	if (!err)
		err = fetch_window(c, a, &a->after, now, "after", sb, e);
	conn__free(c);
	return err;
}

static int read_side(const char *path, struct stacks **out, struct cli_error *e)
{
	char why[512];

	*out = stacks__read_file(path, why, sizeof(why));
	if (!*out) {
		cli_error_set(e, PROFCTL_EXIT_ERROR, "diff: %s", why);
		return -EINVAL;
	}
	if (!stacks__total(*out)) {
		cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES, "diff: %s: no samples in it",
			      strcmp(path, "-") == 0 ? "standard input" : path);
		return -ENODATA;
	}
	return 0;
}

struct render {
	const struct diff *d;
	const struct diff_args *a;
	const char *name_a, *name_b;
};

static int render_to(FILE *out, void *ctx)
{
	const struct render *r = ctx;
	struct diff_svg_opts o = {.name_a = r->name_a, .name_b = r->name_b};

	if (r->a->format == DUMP_FORMAT_SVG)
		return format_svg_diff(r->d, &o, out);
	return diff__write_folded(r->d, out);
}

int cmd_diff(int argc, char **argv, const struct global_opts *g)
{
	struct stacks *sa = NULL, *sb = NULL;
	struct cli_error e = {0};
	struct diff *d = NULL;
	struct diff_args a;
	struct render r;
	char name_a[128], name_b[128];
	int err, ret = PROFCTL_EXIT_OK;

	if (diff_parse_args(argc, argv, &a, &e))
		return cli_error_print(&e);
	if (a.help) {
		cmd_diff_usage(stdout);
		return PROFCTL_EXIT_OK;
	}
	if (a.windows) {
		err = fetch_windows(&a, g, &sa, &sb, &e);
		snprintf(name_a, sizeof(name_a), "window %.100s", a.before.text);
		snprintf(name_b, sizeof(name_b), "window %.100s", a.after.text);
	} else {
		err = read_side(a.files[0], &sa, &e);
		if (!err)
			err = read_side(a.files[1], &sb, &e);
		snprintf(name_a, sizeof(name_a), "%s", a.files[0]);
		snprintf(name_b, sizeof(name_b), "%s", a.files[1]);
	}
	if (err) {
		ret = cli_error_print(&e);
		goto out;
	}
	d = diff__new(sa, sb);
	if (!d) {
		cli_error_set(&e, PROFCTL_EXIT_ERROR, "out of memory");
		ret = cli_error_print(&e);
		goto out;
	}
	r = (struct render){.d = d, .a = &a, .name_a = name_a, .name_b = name_b};
	if (output_write(a.output, render_to, &r, &e))
		ret = cli_error_print(&e);
out:
	diff__free(d);
	stacks__free(sb);
	stacks__free(sa);
	return ret;
}
