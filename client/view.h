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
#include "reshape.h"

#include <getopt.h>
#include <stdbool.h>

struct conn;

/*
 * The py-spy-like options of dump, top and table: how Python frames read (--function,
 * --no-lineno, --lines), which native frames show (--native, --python-only, --all-frames) and
 * whether threads are apart (--per-thread). Each command puts VIEW_LONGOPTS in its getopt table.
 */
struct view_opts {
	bool function;	  /* --function: a Python function's lines are one frame */
	bool no_lineno;	  /* --no-lineno: Python frames without their line */
	bool lines;	  /* --lines (top, table): a row per Python line */
	bool native;	  /* --native (top, table): native frames above Python stay */
	bool python_only; /* --python-only: no native frames above or between Python frames */
	bool all_frames;  /* --all-frames: the interpreter's frames between Python frames too */
	bool per_thread;  /* --per-thread: a root frame, or a column, per thread */
};

enum {
	VIEW_OPT_FUNCTION = 0x100,
	VIEW_OPT_NO_LINENO,
	VIEW_OPT_LINES,
	VIEW_OPT_NATIVE,
	VIEW_OPT_PYTHON_ONLY,
	VIEW_OPT_PER_THREAD,
	VIEW_OPT_ALL_FRAMES,
};

/* The options dump takes, and the ones only the function tables (top, table) add. */
#define VIEW_LONGOPTS_DUMP                                                                         \
	{"function", no_argument, NULL, VIEW_OPT_FUNCTION},                                        \
	    {"no-lineno", no_argument, NULL, VIEW_OPT_NO_LINENO},                                  \
	    {"python-only", no_argument, NULL, VIEW_OPT_PYTHON_ONLY},                              \
	    {"all-frames", no_argument, NULL, VIEW_OPT_ALL_FRAMES},                                \
	{                                                                                          \
		"per-thread", no_argument, NULL, VIEW_OPT_PER_THREAD                               \
	}
#define VIEW_LONGOPTS_TABLE                                                                        \
	VIEW_LONGOPTS_DUMP, {"lines", no_argument, NULL, VIEW_OPT_LINES},                          \
	{                                                                                          \
		"native", no_argument, NULL, VIEW_OPT_NATIVE                                       \
	}

/* Record getopt_long's opt in v when it is a view option. Returns true when it was. */
bool view_opt(int opt, struct view_opts *v);
/*
 * Options that each parse but do not go together (--lines with --function or --no-lineno,
 * --native or --all-frames with --python-only). Returns 0 or -EINVAL with e filled
 * (PROFCTL_EXIT_USAGE).
 */
int view_check(const char *cmd, const struct view_opts *v, struct cli_error *e);
/*
 * What v asks of the profile: for a flame graph (table false) frames as they are unless an
 * option says; for the function tables (table true) native frames above Python folded into
 * it unless --native, lines merged unless --lines. Both without the interpreter's frames
 * between Python frames unless --all-frames. Per-thread tables split rows, not stacks.
 */
struct reshape_opts view_reshape_opts(const struct view_opts *v, bool table);

/*
 * --value VALUE of top and table: the column rows are ranked by (value.h's kinds, gpu-idle
 * aside). Returns 0 or -EINVAL with e filled (code PROFCTL_EXIT_USAGE).
 */
int view_parse_value(const char *cmd, const char *val, int *out, struct cli_error *e);
/*
 * The column of t that value (enum value_kind) names, or -1 when t has none (wall_time exists
 * when the profile had off-CPU time: view_fetch adds it).
 */
long view_value_index(const struct functable *t, int value);

/* --sort self|total. Returns 0 or -EINVAL with e filled (code PROFCTL_EXIT_USAGE). */
int view_parse_sort(const char *cmd, const char *val, enum functable_sort *out,
		    struct cli_error *e);

/*
 * Ask the daemon on c for the profile q selects and sum it per function as v says. Returns 0 with
 * *out (free with functable__free) and, when resp is not NULL, *resp the reply holding the profile
 * (free with profd__response__free_unpacked); or a negative errno with e filled: -EREMOTEIO
 * with code PROFCTL_EXIT_NO_SAMPLES when nothing matched, and what conn__call returns
 * otherwise.
 */
int view_fetch(struct conn *c, const struct fetch_query *q, const struct view_opts *v,
	       struct functable **out, Profd__Response **resp, struct cli_error *e);
/*
 * The function table of p (checked) as v says: p reshaped (view_reshape_opts with table true),
 * then summed. Returns the table or NULL with errno set.
 */
struct functable *view_functable(const Profd__Profile *p, const struct view_opts *v);

/* The width of the terminal on fd, 0 when fd is not one. */
unsigned view_term_cols(int fd);

#endif
