/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the function-table views, `profctl top` and `profctl table`, share: the --sort option,
 * a profile fetched as a function table, and the terminal's width.
 */
#ifndef PROFCTL_VIEW_H
#define PROFCTL_VIEW_H

#include "cli.h"
#include "fetch.h"
#include "functable.h"

struct conn;

/* --sort self|total. Returns 0 or -EINVAL with e filled (code PROFCTL_EXIT_USAGE). */
int view_parse_sort(const char *cmd, const char *val, enum functable_sort *out,
		    struct cli_error *e);

/*
 * Ask the daemon on c for the profile q selects and sum it per function. Returns 0 with *out
 * (free with functable__free) and, when resp is not NULL, *resp the reply holding the profile
 * (free with profd__response__free_unpacked); or a negative errno with e filled: -EREMOTEIO
 * with code PROFCTL_EXIT_NO_SAMPLES when nothing matched, and what conn__call returns
 * otherwise.
 */
int view_fetch(struct conn *c, const struct fetch_query *q, struct functable **out,
	       Profd__Response **resp, struct cli_error *e);

/* The width of the terminal on fd, 0 when fd is not one. */
unsigned view_term_cols(int fd);

#endif
