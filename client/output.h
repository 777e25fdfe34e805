/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Where a command's rendered output goes: a file replaced atomically, or standard output, with
 * the one-line message for each way writing it can fail. Also the output formats a file name
 * asks for.
 */
#ifndef PROFCTL_OUTPUT_H
#define PROFCTL_OUTPUT_H

#include <stdio.h>

#include "cli.h"

enum dump_format {
	DUMP_FORMAT_DEFAULT = 0, /* from -o's suffix (.svg, .pb.gz, .json, ...), else folded */
	DUMP_FORMAT_FOLDED,
	DUMP_FORMAT_SVG,
	DUMP_FORMAT_PPROF,
	DUMP_FORMAT_SPEEDSCOPE,
	DUMP_FORMAT_JSON,
};

/* The format a file name asks for by its suffix; DUMP_FORMAT_FOLDED when it says nothing. */
enum dump_format output_format_for_file(const char *path);

/* Writes the output to out; returns 0 or a negative errno. */
typedef int (*output_render_fn)(FILE *out, void *ctx);

/*
 * Write the file at path atomically: render writes to a temporary file beside it, which then
 * replaces path with the mode a plain open would give. Returns 0 or a negative errno with e
 * filled (PROFCTL_EXIT_ERROR); path is left as it was on failure.
 */
int output_write_file(const char *path, output_render_fn render, void *ctx, struct cli_error *e);
/*
 * Write to the file at path as output_write_file does, or to standard output when path is
 * NULL. Returns 0 or a negative errno with e filled (PROFCTL_EXIT_ERROR).
 */
int output_write(const char *path, output_render_fn render, void *ctx, struct cli_error *e);

#endif
