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

int view_fetch(struct conn *c, const struct fetch_query *q, struct functable **out,
	       Profd__Response **resp_out, struct cli_error *e)
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
	t = functable__new(resp->profile);
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
