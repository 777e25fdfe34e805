/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Per-function totals of a profile, the data behind `profctl top` and `profctl table`.
 *
 * A function is a function name (profile_function_name): every line and address of one
 * function, and every stack it appears in, adds to one row (functable_opts can split them by
 * line, or by thread). For each value type of the profile (CPU samples, and
 * GPU time or launches once the daemon sends them) a row has a pair:
 *   self:  the value of the samples whose leaf frame is the function;
 *   total: the value of the samples whose stack holds the function anywhere, counted once per
 *          sample even when the function recurses.
 * Samples without frames count as the function "[no stack]", so self sums to the column total.
 */
#ifndef PROFCTL_FUNCTABLE_H
#define PROFCTL_FUNCTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profd.pb-c.h"

struct functable_row {
	const char *name;     /* owned by the table; control characters replaced by '?' */
	const char *thread;   /* per_thread: "TID COMM" of the row's thread, else NULL; owned */
	const uint64_t *self; /* functable__n_values() entries each; owned by the table */
	const uint64_t *total;
};

enum functable_sort {
	FUNCTABLE_SORT_SELF,  /* self desc, then total desc, then name */
	FUNCTABLE_SORT_TOTAL, /* total desc, then self desc, then name */
};

struct functable;

/*
 * Sum the samples of p (already checked with profile_check) per function, sorted by self of
 * the CPU column. Returns the table (free with functable__free; it does not point into p) or
 * NULL with errno set.
 */
struct functable *functable__new(const Profd__Profile *p);

struct functable_opts {
	/* A row per display name (profile_frame_name: Python lines, unknown addresses apart). */
	bool lines;
	/*
	 * A row per (thread, function): each thread's samples apart, the row naming the thread;
	 * printed tables get a Thread column.
	 */
	bool per_thread;
};

/* functable__new with options; functable__new is this with none. */
struct functable *functable__new_opts(const Profd__Profile *p, const struct functable_opts *o);
void functable__free(struct functable *t);

/* Re-sort the rows by self or total of value column vi (out of range: the CPU column). */
void functable__sort(struct functable *t, enum functable_sort by, size_t vi);

size_t functable__n_rows(const struct functable *t);
/* Row i in the current order; owned by t. */
const struct functable_row *functable__row(const struct functable *t, size_t i);
/* The number of value columns: the profile's value types (at least 1). */
size_t functable__n_values(const struct functable *t);
/* Column vi's type and unit as the profile names them ("samples", "count"); owned by t. */
const char *functable__value_type(const struct functable *t, size_t vi);
const char *functable__value_unit(const struct functable *t, size_t vi);
/* The sum of column vi over all samples: what percentages are of. */
uint64_t functable__sum(const struct functable *t, size_t vi);
/* The column holding CPU samples ("samples"), or 0 when the profile names none. */
size_t functable__cpu_index(const struct functable *t);
/* The profile's sampling period, 0 when unknown (then CPU time columns are left out). */
uint64_t functable__period_ns(const struct functable *t);

struct functable_print_opts {
	size_t width; /* the line width to fit by shortening names; 0: no limit */
	size_t limit; /* at most this many rows; 0: all */
	bool ansi;    /* top only: the column header in reverse video */
};

/*
 * The key-averages table (`profctl table`), modelled on the PyTorch profiler's: a dashed rule,
 * the column header (Name, Self CPU %, Self CPU, CPU total %, CPU total, # Samples, then
 * columns for each further value type with a nonzero total), a rule, the rows in the current order,
 * a rule and a footer with the column totals ("Self CPU time total: 1.234s"). Returns 0 or -EIO
 * when writing to out failed.
 */
int functable__print_table(const struct functable *t, const struct functable_print_opts *o,
			   FILE *out);

/*
 * The rows of `profctl top`: a column header and one line per row with Self %, Total %, Self
 * and Total samples, columns for each further value type with a nonzero total, and the function
 * name last, cut to fit o->width. Returns 0 or -EIO.
 */
int functable__print_top(const struct functable *t, const struct functable_print_opts *o,
			 FILE *out);

/* PyTorch's time format: "12.000us", "10.588ms", "1.234s". Returns buf. */
char *functable_fmt_time(uint64_t ns, char *buf, size_t len);

#endif
