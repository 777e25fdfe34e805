// SPDX-License-Identifier: BSD-2-Clause
/*
 * The enable gate of the CUPTI library's uplink: at most one enable per 5 s, the wait doubling
 * to 60 s after failures and after collections that ended within a minute, back to 5 s after
 * one that lasted.
 */
#include "check.h"
#include "gate.h"

#define SEC 1000000000ull

int main(void)
{
	struct gate g;

	gate__init(&g);
	/* The first attempt is never held back. */
	CHECK(gate__may_enable(&g, 0));
	CHECK(gate__may_enable(&g, 100 * SEC));
	gate__attempted(&g, 100 * SEC, true);
	/* A daemon flipping every 50 ms: disabled at once, enabled again only 5 s later. */
	gate__stopped(&g, 100 * SEC + SEC / 20);
	CHECK(!gate__may_enable(&g, 100 * SEC + SEC / 10));
	CHECK(!gate__may_enable(&g, 105 * SEC - 1));
	CHECK(gate__may_enable(&g, 105 * SEC));
	gate__attempted(&g, 105 * SEC, true);
	gate__stopped(&g, 105 * SEC + SEC / 20);
	/* Flipped twice: 10 s, then 20 s, 40 s, capped at 60 s. */
	CHECK(!gate__may_enable(&g, 115 * SEC - 1));
	CHECK(gate__may_enable(&g, 115 * SEC));
	gate__attempted(&g, 115 * SEC, true);
	gate__stopped(&g, 116 * SEC);
	CHECK(!gate__may_enable(&g, 135 * SEC - 1));
	CHECK(gate__may_enable(&g, 135 * SEC));
	gate__attempted(&g, 135 * SEC, false); /* failures count the same */
	CHECK(!gate__may_enable(&g, 175 * SEC - 1));
	CHECK(gate__may_enable(&g, 175 * SEC));
	gate__attempted(&g, 175 * SEC, false);
	CHECK(!gate__may_enable(&g, 235 * SEC - 1));
	CHECK(gate__may_enable(&g, 235 * SEC));
	gate__attempted(&g, 235 * SEC, true);
	CHECK_EQ_U(g.backoff_ns, 60 * SEC);
	/* A collection that lasted a minute or more: back to 5 s. */
	gate__stopped(&g, 295 * SEC);
	CHECK_EQ_U(g.backoff_ns, 5 * SEC);
	CHECK(gate__may_enable(&g, 295 * SEC));
	gate__attempted(&g, 295 * SEC, true);
	gate__stopped(&g, 296 * SEC);
	CHECK(!gate__may_enable(&g, 300 * SEC - 1));
	CHECK(gate__may_enable(&g, 300 * SEC));
	/* Stopping when not collecting changes nothing. */
	gate__stopped(&g, 301 * SEC);
	CHECK_EQ_U(g.backoff_ns, 10 * SEC);
	return CHECK_DONE();
}
