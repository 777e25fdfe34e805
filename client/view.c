// SPDX-License-Identifier: BSD-2-Clause
/* The function-table views' shared pieces: top and table read and rank functions alike. */
#include "view.h"
#include "opts.h"
#include "value.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int view_parse_sort(const char *cmd, const char *val, enum functable_sort *out, struct cli_error *e)
{
	if (strcmp(val, "self") == 0)
		*out = FUNCTABLE_SORT_SELF;
	else if (strcmp(val, "total") == 0)
		*out = FUNCTABLE_SORT_TOTAL;
	else
		return opt_bad_value(e, cmd, "--sort", val, "is not self or total");
	return 0;
}

int view_parse_value(const char *cmd, const char *val, int *out, struct cli_error *e)
{
	enum value_kind k;

	if (value_parse(val, &k))
		return opt_bad_value(e, cmd, "--value", val, "is not " VALUE_OPTION_LIST);
	*out = (int)k;
	return 0;
}

long view_value_index(const struct functable *t, int value)
{
	const char *col = value_column_name((enum value_kind)value);

	if (value == VALUE_CPU)
		return (long)functable__cpu_index(t);
	for (size_t i = 0; i < functable__n_values(t); i++)
		if (strcmp(functable__value_type(t, i), col) == 0)
			return (long)i;
	return -1;
}

bool view_opt(int opt, struct view_opts *v)
{
	switch (opt) {
	case VIEW_OPT_FUNCTION:
		v->function = true;
		return true;
	case VIEW_OPT_NO_LINENO:
		v->no_lineno = true;
		return true;
	case VIEW_OPT_LINES:
		v->lines = true;
		return true;
	case VIEW_OPT_NATIVE:
		v->native = true;
		return true;
	case VIEW_OPT_PYTHON_ONLY:
		v->python_only = true;
		return true;
	case VIEW_OPT_PER_THREAD:
		v->per_thread = true;
		return true;
	case VIEW_OPT_ALL_FRAMES:
		v->all_frames = true;
		return true;
	default:
		return false;
	}
}

int view_check(const char *cmd, const struct view_opts *v, struct cli_error *e)
{
	const char *a = NULL, *b = NULL;

	if (v->lines && (v->function || v->no_lineno)) {
		a = "--lines";
		b = v->function ? "--function" : "--no-lineno";
	} else if ((v->native || v->all_frames) && v->python_only) {
		a = v->native ? "--native" : "--all-frames";
		b = "--python-only";
	}
	if (!a)
		return 0;
	cli_error_set(e, PROFCTL_EXIT_USAGE, "%s: %s cannot go with %s; see 'profctl %s --help'",
		      cmd, a, b, cmd);
	return -EINVAL;
}

struct reshape_opts view_reshape_opts(const struct view_opts *v, bool table)
{
	if (!table)
		return (struct reshape_opts){
		    .python_only = v->python_only,
		    .hide_interp = !v->all_frames,
		    .function = v->function,
		    .no_lineno = v->no_lineno,
		    .per_thread = v->per_thread,
		};
	return (struct reshape_opts){
	    .fold_native = !v->native,
	    .python_only = v->python_only,
	    .hide_interp = !v->all_frames,
	    .function = !v->lines,
	    .no_lineno = v->no_lineno,
	};
}

struct functable *view_functable(const Profd__Profile *p, const struct view_opts *v)
{
	struct reshape_opts ro = view_reshape_opts(v, true);
	struct functable_opts fo = {.lines = v->lines, .per_thread = v->per_thread};
	Profd__Profile *rp = reshape(p, &ro);
	struct functable *t;
	int err;

	if (!rp)
		return NULL;
	t = functable__new_opts(rp, &fo);
	err = t ? 0 : errno;
	reshape_free(rp);
	errno = err;
	return t;
}

int view_fetch(struct conn *c, const struct fetch_query *q, const struct view_opts *v,
	       struct functable **out, Profd__Response **resp_out, struct cli_error *e)
{
	Profd__DumpRequest dreq = PROFD__DUMP_REQUEST__INIT;
	Profd__Response *resp = NULL;
	struct functable *t;
	int err;

	fetch_dump_request(q, &dreq);
	/* An empty profile reads as -EREMOTEIO here, like the daemon's own "no samples" error,
	 * which top treats alike. */
	err = fetch_profile(c, &dreq, false, &resp, e);
	if (err)
		return err == -ENODATA ? -EREMOTEIO : err;
	/* NVTX labels are ranges, not functions: every sample under one would rank it first. */
	profile_strip_nvtx(resp->profile);
	profile_strip_states(resp->profile);
	/* With off-CPU time the tables show wall-clock time too, beside CPU and off-CPU. */
	{
		int oi = profile_value_index(resp->profile, "off_cpu");
		uint32_t wi;

		if (oi >= 0 && profile_value_total(resp->profile, (uint32_t)oi) &&
		    profile_add_wall(resp->profile, false, &wi) == -ENOMEM) {
			err = -ENOMEM;
			cli_error_set(e, PROFCTL_EXIT_ERROR, "adding up wall-clock time: %s",
				      strerror(ENOMEM));
			goto out;
		}
	}
	t = view_functable(resp->profile, v);
	if (!t) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "summing the profile: %s", strerror(-err));
		goto out;
	}
	if (!functable__n_rows(t)) {
		functable__free(t);
		fetch_no_samples(e);
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
