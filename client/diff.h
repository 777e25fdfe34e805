/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The model of a differential profile: two sides' stacks merged into one table, each stack
 * with its count in A (the baseline) and in B.
 */
#ifndef PROFCTL_DIFF_H
#define PROFCTL_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stacks.h"

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

#endif
