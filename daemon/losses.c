// SPDX-License-Identifier: BSD-2-Clause
#include "losses.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#define NSEC_PER_SEC_ 1000000000ull
#define DEFAULT_POINTS 3600

struct point {
	uint64_t t_ns;	/* when the count was last noted in this point's second */
	uint64_t total; /* the count then */
};

/* A ring of points, oldest at head. */
struct loss_log {
	struct point *pts;
	unsigned int cap, head, n;
	uint64_t first_total; /* the count before the first point: what an early window starts at */
	bool seen;
};

struct loss_log *loss_log__new(unsigned int max_points)
{
	struct loss_log *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->cap = max_points ? max_points : DEFAULT_POINTS;
	l->pts = calloc(l->cap, sizeof(*l->pts));
	if (!l->pts) {
		free(l);
		errno = ENOMEM;
		return NULL;
	}
	return l;
}

void loss_log__free(struct loss_log *l)
{
	if (!l)
		return;
	free(l->pts);
	free(l);
}

static struct point *at(const struct loss_log *l, unsigned int i)
{
	return &l->pts[(l->head + i) % l->cap];
}

void loss_log__note(struct loss_log *l, uint64_t now_ns, uint64_t total)
{
	struct point *last;

	if (!l)
		return;
	if (!l->seen) {
		l->seen = true;
		l->first_total = total;
	}
	last = l->n ? at(l, l->n - 1) : NULL;
	if (last && (now_ns < last->t_ns || now_ns / NSEC_PER_SEC_ == last->t_ns / NSEC_PER_SEC_)) {
		/* Same second (or a clock that went back): the point moves forward. */
		if (now_ns > last->t_ns)
			last->t_ns = now_ns;
		last->total = total;
		return;
	}
	if (l->n == l->cap) {
		l->first_total = at(l, 0)->total;
		l->head = (l->head + 1) % l->cap;
		l->n--;
	}
	*at(l, l->n++) = (struct point){.t_ns = now_ns, .total = total};
}

uint64_t loss_log__between(const struct loss_log *l, uint64_t start_ns, uint64_t end_ns)
{
	uint64_t from, to;
	unsigned int i;

	if (!l || !l->n || end_ns < start_ns)
		return 0;
	/* From: the last point at or before the start (before every point: the first count). */
	from = l->first_total;
	for (i = 0; i < l->n && at(l, i)->t_ns <= start_ns; i++)
		from = at(l, i)->total;
	/* To: the first point at or after the end, else the latest. */
	to = at(l, l->n - 1)->total;
	for (; i < l->n; i++) {
		if (at(l, i)->t_ns >= end_ns) {
			to = at(l, i)->total;
			break;
		}
	}
	return to > from ? to - from : 0;
}
