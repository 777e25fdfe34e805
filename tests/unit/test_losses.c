// SPDX-License-Identifier: BSD-2-Clause
/* The loss log: what the cumulative loss count grew by over a window, rounded outwards. */
#include "check.h"

#include "losses.h"

#define S 1000000000ull

int main(void)
{
	struct loss_log *l = loss_log__new(4);

	CHECK(l != NULL);
	if (!l)
		return CHECK_DONE();
	CHECK_EQ_U(loss_log__between(l, 0, 10 * S), 0);
	/* Points at 1 s (count 5), 2.5 s (7, updated within its second to 9), 4 s (20). */
	loss_log__note(l, 1 * S, 5);
	loss_log__note(l, 2 * S + S / 2, 7);
	loss_log__note(l, 2 * S + S * 9 / 10, 9);
	loss_log__note(l, 4 * S, 20);
	/* All of it: from the first count. */
	CHECK_EQ_U(loss_log__between(l, 0, 10 * S), 15);
	/* From 1 s to 2 s: rounded out to the points at 1 s and 2.9 s. */
	CHECK_EQ_U(loss_log__between(l, 1 * S, 2 * S), 4);
	/* From 3 s on: 9 at 2.9 s, 20 at 4 s. */
	CHECK_EQ_U(loss_log__between(l, 3 * S, 5 * S), 11);
	/* A window after the last point: the latest count is the end; nothing since. */
	CHECK_EQ_U(loss_log__between(l, 5 * S, 6 * S), 0);
	CHECK_EQ_U(loss_log__between(l, 6 * S, 5 * S), 0);
	/* The ring keeps 4 points: the oldest (1 s: 5) goes, its count is where older windows
	 * start. */
	loss_log__note(l, 5 * S, 21);
	loss_log__note(l, 6 * S, 30);
	CHECK_EQ_U(loss_log__between(l, 0, 10 * S), 25);
	CHECK_EQ_U(loss_log__between(l, 5 * S, 6 * S), 9);
	/* A clock that goes back does not add a point. */
	loss_log__note(l, 5 * S, 31);
	CHECK_EQ_U(loss_log__between(l, 5 * S + 1, 7 * S), 10);
	loss_log__free(l);
	loss_log__free(NULL);
	return CHECK_DONE();
}
