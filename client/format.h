/* SPDX-License-Identifier: BSD-2-Clause */
/* Output formats drawn from a checked profile. */
#ifndef PROFCTL_FORMAT_H
#define PROFCTL_FORMAT_H

#include <stdbool.h>
#include <stdio.h>

#include "profd.pb-c.h"

struct render_opts {
	bool process_root; /* system-wide dump: each stack starts with its process name */
	const char *title; /* SVG title; NULL: "Flame Graph" */
};

/*
 * Folded stacks, as flamegraph.pl and inferno read them: one line per distinct stack, frames
 * root first joined by ';', a space and the summed sample count; lines sorted bytewise. ';'
 * in names becomes '_' and control characters become '?'. Returns 0 or a negative errno
 * (-EIO when writing to out failed).
 */
int format_folded(const Profd__Profile *p, const struct render_opts *o, FILE *out);

/*
 * A self-contained interactive flame graph SVG (root at the bottom; hover, click to zoom,
 * search). Returns 0 or a negative errno.
 */
int format_svg(const Profd__Profile *p, const struct render_opts *o, FILE *out);

#endif
