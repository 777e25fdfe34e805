/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * How many samples were lost when: the daemon's loss counters (ring buffer full, no memory to
 * store) are cumulative, so a dump asks this log what they grew by over its window. One point
 * per second at most, the last hour kept; a window's count is rounded outwards to those points,
 * so it is never less than what was lost inside the window (it may include some of the second
 * before and after).
 */
#ifndef PROFD_LOSSES_H
#define PROFD_LOSSES_H

#include <stdint.h>

struct loss_log;

/* Returns a log of at most max_points points (0: an hour's worth), or NULL with errno set. */
struct loss_log *loss_log__new(unsigned int max_points);
void loss_log__free(struct loss_log *l);

/* The cumulative count is total at now_ns (monotonic; calls in time order). */
void loss_log__note(struct loss_log *l, uint64_t now_ns, uint64_t total);

/* What the count grew by from start_ns to end_ns (CLOCK_MONOTONIC). */
uint64_t loss_log__between(const struct loss_log *l, uint64_t start_ns, uint64_t end_ns);

#endif
