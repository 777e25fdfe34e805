// SPDX-License-Identifier: BSD-2-Clause
#include "gate.h"

static void grow(struct gate *g)
{
	g->backoff_ns = g->backoff_ns * 2 > GATE_MAX_NS ? GATE_MAX_NS : g->backoff_ns * 2;
}

void gate__init(struct gate *g)
{
	*g = (struct gate){.backoff_ns = GATE_MIN_NS};
}

bool gate__may_enable(const struct gate *g, uint64_t now)
{
	return now >= g->next_ns;
}

void gate__attempted(struct gate *g, uint64_t now, bool ok)
{
	g->next_ns = now + g->backoff_ns;
	if (!ok) {
		grow(g);
		return;
	}
	g->collecting = true;
	g->since_ns = now;
}

void gate__stopped(struct gate *g, uint64_t now)
{
	if (!g->collecting)
		return;
	g->collecting = false;
	/* A flip: collection ended soon after it began. */
	if (now - g->since_ns < GATE_STABLE_NS)
		grow(g);
	else
		g->backoff_ns = GATE_MIN_NS;
}
