/* SPDX-License-Identifier: BSD-2-Clause */
/* Output formats drawn from a checked profile (pprof.h: the options and the pprof encoder). */
#ifndef PROFCTL_FORMAT_H
#define PROFCTL_FORMAT_H

#include <stdbool.h>
#include <stdio.h>

#include "pprof.h"
#include "profd.pb-c.h"

/*
 * Folded stacks, as flamegraph.pl and inferno read them: one line per distinct stack, frames
 * root first joined by ';', a space and the summed value of the chosen column; lines sorted
 * bytewise. ';'
 * in names becomes '_' and control characters become '?'. Returns 0 or a negative errno
 * (-EIO when writing to out failed).
 */
int format_folded(const Profd__Profile *p, const struct render_opts *o, FILE *out);

/*
 * A self-contained interactive flame graph SVG (root at the bottom; hover, click to zoom,
 * search). Tooltips and the subtitle give the chosen column in its unit: sample counts, times
 * (ns as us/ms/s), sizes (KiB, MiB). Returns 0 or a negative errno.
 */
int format_svg(const Profd__Profile *p, const struct render_opts *o, FILE *out);

/*
 * speedscope's JSON file format: one "sampled" profile per thread, weights the chosen column
 * (unit "nanoseconds" or "bytes" when the column has that unit, else "none"), frames in one
 * shared table, each sample's frames root first. o->title names the file (o may be NULL).
 * Returns 0 or a negative errno.
 */
int format_speedscope(const Profd__Profile *p, const struct render_opts *o, FILE *out);

/*
 * The profile as one JSON document for scripts, strings resolved, laid out as docs/profctl.md
 * describes; the same profile gives the same bytes. "value" names the chosen column (o may
 * be NULL: the first). Returns 0 or a negative errno.
 */
int format_json(const Profd__Profile *p, const struct render_opts *o, FILE *out);

/*
 * A live stack dump (one sample per thread, Profile.threads with states; checked) as text in
 * py-spy dump's layout: "Thread TID (NAME) STATE", then its frames newest first, Python
 * "QUALNAME (FILE:LINE)", native "func (module)", kernel "func [k]". Returns 0 or -EIO.
 */
int format_stacks_text(const Profd__Profile *p, FILE *out);
/* The same as one JSON document, laid out as docs/profctl.md describes. Returns 0 or -EIO. */
int format_stacks_json(const Profd__Profile *p, FILE *out);

struct diff;

struct diff_svg_opts {
	const char *title;  /* NULL: "Differential flame graph" */
	const char *name_a; /* what A is, for the subtitle ("before.folded") */
	const char *name_b;
};

/*
 * A differential flame graph SVG (format_svg.c): frames as wide as their samples in B, filled
 * by the change of their share of all samples from A to B, red where it grew and blue where it
 * shrank, stronger for larger changes relative to the largest one, grey where it stayed. Frames
 * with no samples in B are not drawn; the legend says how many samples of A that leaves out.
 * Hover, zoom and search work as in format_svg. Returns 0 or a negative errno.
 */
int format_svg_diff(const struct diff *d, const struct diff_svg_opts *o, FILE *out);

/*
 * Write s as a JSON string literal with its quotes: control characters escaped, bytes that
 * are not valid UTF-8 replaced by U+FFFD. Returns 0 or -EIO.
 */
int json_write_string(FILE *out, const char *s);

#endif
