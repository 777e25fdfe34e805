// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl diff: a differential flame graph of two profiles, from two files (folded or pprof)
 * or from two time windows of the daemon, as SVG or as two-column folded stacks; and the
 * merge of the two sides into one table.
 */
#include "cli.h"
#include "conn.h"
#include "diff.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "wire.h"

#define MAX_WINDOW_NS (365ull * 86400 * 1000000000ull)

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
	return cli_bad_value(e, "diff", opt, val, what);
}

struct diff {
	struct diff_row *rows;
	size_t n;
	uint64_t total_a, total_b;
};

struct diff *diff__new(const struct stacks *a, const struct stacks *b)
{
	struct diff *d = calloc(1, sizeof(*d));
	const struct stack_count *va, *vb;
	size_t i = 0, j = 0, na, nb;

	if (!d)
		return NULL;
	va = stacks__items(a, &na);
	vb = stacks__items(b, &nb);
	d->rows = calloc(na + nb ? na + nb : 1, sizeof(*d->rows));
	if (!d->rows)
		goto fail;
	d->total_a = stacks__total(a);
	d->total_b = stacks__total(b);
	/* Both sides are sorted bytewise: one merge pass. */
	while (i < na || j < nb) {
		int c = i == na ? 1 : j == nb ? -1 : strcmp(va[i].stack, vb[j].stack);
		struct diff_row *r = &d->rows[d->n];
		const char *stack = c <= 0 ? va[i].stack : vb[j].stack;

		r->a = c <= 0 ? va[i++].count : 0;
		r->b = c >= 0 ? vb[j++].count : 0;
		r->stack = strdup(stack);
		if (!r->stack)
			goto fail;
		d->n++;
	}
	return d;
fail:
	diff__free(d);
	errno = ENOMEM;
	return NULL;
}

void diff__free(struct diff *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free((char *)d->rows[i].stack);
	free(d->rows);
	free(d);
}

const struct diff_row *diff__rows(const struct diff *d, size_t *n)
{
	*n = d->n;
	return d->rows;
}

uint64_t diff__total_a(const struct diff *d)
{
	return d->total_a;
}

uint64_t diff__total_b(const struct diff *d)
{
	return d->total_b;
}

int diff__write_folded(const struct diff *d, FILE *out)
{
	for (size_t i = 0; i < d->n; i++)
		if (fprintf(out, "%s %" PRIu64 " %" PRIu64 "\n", d->rows[i].stack, d->rows[i].a,
			    d->rows[i].b) < 0)
			return -EIO;
	return fflush(out) || ferror(out) ? -EIO : 0;
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
	return parse_duration_ns(buf, 1, MAX_WINDOW_NS, out);
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

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

int diff_parse_args(int argc, char **argv, struct diff_args *a, struct cli_error *e)
{
	static const struct option longopts[] = {
	    {"before", required_argument, NULL, 'B'}, {"after", required_argument, NULL, 'A'},
	    {"pid", required_argument, NULL, 'p'},    {"format", required_argument, NULL, 'f'},
	    {"output", required_argument, NULL, 'o'}, {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},	      {0},
	};
	bool has_before = false, has_after = false;
	uint32_t id;
	int opt, err;

	*a = (struct diff_args){0};
	optind = 0;
	opterr = 0;
	/* No '+': the files may come before the options, as people type them. */
	while ((opt = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'B':
			err = window_opt("--before", optarg, &a->before, &has_before, e);
			if (err)
				return err;
			break;
		case 'A':
			err = window_opt("--after", optarg, &a->after, &has_after, e);
			if (err)
				return err;
			break;
		case 'p':
			err = parse_u32(optarg, 1, INT32_MAX, &id);
			if (err == -ERANGE)
				return bad_value(e, "--pid", optarg,
						 "is out of range (1 to 2147483647)");
			if (err)
				return bad_value(e, "--pid", optarg, "is not a positive integer");
			for (size_t i = 0; i < a->n_pids; i++)
				if (a->pids[i] == id)
					goto next;
			if (a->n_pids == DUMP_MAX_PIDS) {
				cli_error_set(e, PROFCTL_EXIT_USAGE,
					      "diff: more than %d --pid options; see 'profctl diff "
					      "--help'",
					      DUMP_MAX_PIDS);
				return -EINVAL;
			}
			a->pids[a->n_pids++] = id;
			break;
		case 'f':
			if (strcmp(optarg, "svg") == 0)
				a->format = DUMP_FORMAT_SVG;
			else if (strcmp(optarg, "folded") == 0)
				a->format = DUMP_FORMAT_FOLDED;
			else
				return bad_value(e, "--format", optarg, "is not svg or folded");
			break;
		case 'o':
			if (!*optarg)
				return bad_value(e, "--output", optarg, "is an empty file name");
			a->output = optarg;
			break;
		case 't':
			err = cli_parse_timeout("diff", optarg, &a->timeout_ns, e);
			if (err)
				return err;
			break;
		case 'h':
			a->help = true;
			return 0;
		default:
			return cli_bad_option(opt, argv, longopts, "diff", e);
		}
	next:;
	}
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
	a->windows = has_before || has_after;
	if (a->windows && a->n_files) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "diff: give two files or --before and --after, not both; see "
			      "'profctl diff --help'");
		return -EINVAL;
	}
	if (a->windows && !(has_before && has_after)) {
		cli_error_set(
		    e, PROFCTL_EXIT_USAGE, "diff: %s needs %s too; see 'profctl diff --help'",
		    has_before ? "--before" : "--after", has_before ? "--after" : "--before");
		return -EINVAL;
	}
	if (!a->windows && a->n_files != 2) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "diff: give two profiles to compare (A B), or --before and --after; "
			      "see 'profctl diff --help'");
		return -EINVAL;
	}
	if (!a->windows && a->n_pids) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "diff: --pid selects from the daemon's windows, not from files; see "
			      "'profctl diff --help'");
		return -EINVAL;
	}
	if (!a->windows && strcmp(a->files[0], "-") == 0 && strcmp(a->files[1], "-") == 0) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "diff: only one of A and B can be standard input ('-')");
		return -EINVAL;
	}
	if (a->format == DUMP_FORMAT_DEFAULT)
		a->format = a->output && ends_with(a->output, ".svg") ? DUMP_FORMAT_SVG
								      : DUMP_FORMAT_FOLDED;
	return 0;
}

/* Both windows' profiles, as stacks, from the daemon. */
static int fetch_windows(const struct diff_args *a, const struct global_opts *g, struct stacks **sa,
			 struct stacks **sb, struct cli_error *e)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__StatusRequest sreq = PROFD__STATUS_REQUEST__INIT;
	const struct diff_window *win[2] = {&a->before, &a->after};
	struct stacks **out[2] = {sa, sb};
	Profd__Response *resp = NULL;
	uint64_t now, timeout_ns;
	struct conn *c;
	int err;

	timeout_ns = a->timeout_ns   ? a->timeout_ns
		     : g->timeout_ns ? g->timeout_ns
				     : PROFCTL_DUMP_TIMEOUT_NS;
	c = conn__open(wire_socket_path(g->socket), timeout_ns, e);
	if (!c)
		return -errno;
	/* Windows are relative to the daemon's clock; ask it for its now. */
	req.msg_case = PROFD__REQUEST__MSG_STATUS;
	req.status = &sreq;
	err = conn__call(c, &req, PROFD__RESPONSE__MSG_STATUS, &resp, e);
	if (err)
		goto out;
	if (!resp->status->has_now_ns) {
		cli_error_set(e, PROFCTL_EXIT_PROTOCOL,
			      "the daemon's status has no clock reading: are profd and profctl the "
			      "same version?");
		err = -EPROTO;
		goto out;
	}
	now = resp->status->now_ns;
	profd__response__free_unpacked(resp, NULL);
	resp = NULL;

	for (int i = 0; i < 2; i++) {
		Profd__DumpRequest dreq = PROFD__DUMP_REQUEST__INIT;
		const char *which = i ? "after" : "before";

		dreq.n_pids = a->n_pids;
		dreq.pids = (uint32_t *)a->pids;
		dreq.has_start_ns = 1;
		dreq.start_ns = now > win[i]->from_ns ? now - win[i]->from_ns : 0;
		dreq.has_end_ns = 1;
		dreq.end_ns = now > win[i]->to_ns ? now - win[i]->to_ns : 0;
		err = dump_fetch(c, &dreq, &resp, e);
		if (err == -ENODATA || (err && e->code == PROFCTL_EXIT_NO_SAMPLES)) {
			cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES,
				      "no samples in the %s window (%s): widen it, or check the "
				      "--pid",
				      which, win[i]->text);
			goto out;
		}
		if (err)
			goto out;
		*out[i] = stacks__from_profile(resp->profile, a->n_pids == 0);
		profd__response__free_unpacked(resp, NULL);
		resp = NULL;
		if (!*out[i]) {
			err = -errno;
			cli_error_set(e, PROFCTL_EXIT_ERROR, "%s window: %s", which,
				      strerror(-err));
			goto out;
		}
	}
out:
	if (resp)
		profd__response__free_unpacked(resp, NULL);
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
	if (a.output) {
		if (cli_write_file(a.output, render_to, &r, &e))
			ret = cli_error_print(&e);
	} else {
		err = render_to(stdout, &r);
		if (err) {
			cli_error_set(&e, PROFCTL_EXIT_ERROR, "writing to standard output: %s",
				      strerror(-err));
			ret = cli_error_print(&e);
		}
	}
out:
	diff__free(d);
	stacks__free(sb);
	stacks__free(sa);
	return ret;
}
