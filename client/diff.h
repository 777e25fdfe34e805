/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * profctl diff: the two sides of a differential flame graph as folded stacks with counts, read
 * from folded text, from pprof files or from daemon profiles, and merged into one table.
 *
 * A stack is "root;...;leaf" with the frame names profctl prints everywhere else, so a folded
 * dump, a pprof dump and a live window of the same program line up frame by frame.
 */
#ifndef PROFCTL_DIFF_H
#define PROFCTL_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "profd.pb-c.h"

#define DIFF_MAX_INPUT (256u << 20) /* bytes of a file, and of a pprof file decompressed */
/*
 * A decompressed pprof profile: protobuf-c's decoded form is many times the encoded bytes (an
 * empty Sample is 2 bytes on the wire, 80 in memory), so this bounds what a crafted file costs.
 */
#define DIFF_MAX_PPROF (64u << 20)
#define DIFF_MAX_LINE (1u << 20)    /* bytes of one folded line */
#define DIFF_MAX_DEPTH 4096	    /* frames in one stack */

struct stack_count {
	char *stack; /* root first, frames joined by ';' */
	uint64_t count;
};

/* One side: unique stacks in bytewise order with their summed counts. */
struct stacks;

/*
 * Parse folded text (flamegraph.pl's input: "frame;frame;frame COUNT" per line) of len bytes,
 * NUL bytes included. Empty lines and a "\r" before each newline are accepted; anything else
 * that is not a stack of non-empty frames, one space and a decimal count fails with a one-line
 * reason in err naming "name:LINE". Returns the stacks (free with stacks__free) or NULL with
 * errno set: EINVAL for malformed text, EOVERFLOW when counts add up past 2^64, ENOMEM.
 */
struct stacks *stacks__from_folded(const char *name, const char *text, size_t len, char *err,
				   size_t err_len);
/*
 * Parse a gzip-compressed pprof profile (profile.proto) of len bytes. The values summed are
 * those of the sample type "samples" when the profile has one, else of its default sample
 * type, else of its last, as pprof itself picks. Frame names follow profctl's rules where the
 * file tells: Python files give "NAME (FILE:LINE)", kernel mappings "NAME_[k]". Returns the
 * stacks or NULL with errno set (EINVAL, EFBIG, EOVERFLOW, ENOMEM) and a reason in err.
 */
struct stacks *stacks__from_pprof(const char *name, const uint8_t *data, size_t len, char *err,
				  size_t err_len);
/*
 * Stacks of a profile from the daemon (already checked with profile_check), named as
 * format_folded names them; process_root puts each process name under the root. Returns the
 * stacks or NULL with errno set.
 */
struct stacks *stacks__from_profile(const Profd__Profile *p, bool process_root);
/*
 * Read the file at path (at most DIFF_MAX_INPUT bytes) and parse it by its content: gzip magic
 * means pprof, anything else must be folded text. Returns the stacks or NULL with errno set
 * and a reason in err naming the file.
 */
struct stacks *stacks__read_file(const char *path, char *err, size_t err_len);
void stacks__free(struct stacks *s);
/* The stacks, *n set to their number. Owned by s. */
const struct stack_count *stacks__items(const struct stacks *s, size_t *n);
/* The sum of all counts. */
uint64_t stacks__total(const struct stacks *s);

struct diff_row {
	const char *stack; /* owned by the diff */
	uint64_t a, b;
};

/* Both sides stack by stack: A is the baseline ("before"), B the profile compared with it. */
struct diff;

/*
 * Merge a and b into one table of every stack of either, in bytewise order. The diff copies
 * what it needs; a and b may be freed afterwards. Returns the diff (free with diff__free) or
 * NULL with errno set.
 */
struct diff *diff__new(const struct stacks *a, const struct stacks *b);
void diff__free(struct diff *d);
/* The rows, *n set to their number. Owned by d. */
const struct diff_row *diff__rows(const struct diff *d, size_t *n);
uint64_t diff__total_a(const struct diff *d);
uint64_t diff__total_b(const struct diff *d);

/*
 * The diff as "STACK COUNT_A COUNT_B" lines, the two-column folded format flamegraph.pl and
 * difffolded.pl use. Returns 0 or -EIO.
 */
int diff__write_folded(const struct diff *d, FILE *out);

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

/* A time window of the daemon, as distances back from its clock's "now": from_ns > to_ns. */
struct diff_window {
	uint64_t from_ns;
	uint64_t to_ns;
	const char *text; /* as given, for messages and titles */
};

struct diff_args {
	bool help;
	const char *files[2]; /* A and B, when comparing files */
	size_t n_files;
	bool windows; /* --before and --after given instead of files */
	struct diff_window before, after;
	uint32_t pids[DUMP_MAX_PIDS];
	size_t n_pids;
	enum dump_format format; /* never DEFAULT after a successful parse */
	const char *output;	 /* NULL: stdout */
	uint64_t timeout_ns;	 /* 0: global or default */
};

/*
 * Parse `diff ...` (argv[0] is "diff"). Returns 0 (a->help set for --help), or -EINVAL with e
 * filled (code PROFCTL_EXIT_USAGE). argv may be permuted; strings are borrowed.
 */
int diff_parse_args(int argc, char **argv, struct diff_args *a, struct cli_error *e);
/*
 * Parse a window: "FROM..TO" or "FROM" (meaning FROM..now), each point a duration back from
 * now ("10m", "90s") or "now". Returns 0, or -EINVAL when it is not one, -ERANGE when it is
 * empty or reversed or reaches back more than 365 days.
 */
int diff_parse_window(const char *s, struct diff_window *w);

#endif
