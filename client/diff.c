// SPDX-License-Identifier: BSD-2-Clause
/* The merge of a diff's two sides into one table, and that table as two-column folded text. */
#include "diff.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct diff {
	struct diff_row *rows;
	size_t n;
	uint64_t total_a, total_b;
};

struct diff *diff__new(const struct stacks *a, const struct stacks *b)
{
	struct diff *d = calloc(1, sizeof(*d));
	const struct stack_count *va, *vb;
	size_t i = 0, j = 0, na, nb;

	if (!d)
		return NULL;
	va = stacks__items(a, &na);
	vb = stacks__items(b, &nb);
	d->rows = calloc(na + nb ? na + nb : 1, sizeof(*d->rows));
	if (!d->rows)
		goto fail;
	d->total_a = stacks__total(a);
	d->total_b = stacks__total(b);
	/* Both sides are sorted bytewise: one merge pass. */
	while (i < na || j < nb) {
		int c = i == na ? 1 : j == nb ? -1 : strcmp(va[i].stack, vb[j].stack);
		struct diff_row *r = &d->rows[d->n];
		const char *stack = c <= 0 ? va[i].stack : vb[j].stack;

		r->a = c <= 0 ? va[i++].count : 0;
		r->b = c >= 0 ? vb[j++].count : 0;
		r->stack = strdup(stack);
		if (!r->stack)
			goto fail;
		d->n++;
	}
	return d;
fail:
	diff__free(d);
	errno = ENOMEM;
	return NULL;
}

void diff__free(struct diff *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free((char *)d->rows[i].stack);
	free(d->rows);
	free(d);
}

const struct diff_row *diff__rows(const struct diff *d, size_t *n)
{
	*n = d->n;
	return d->rows;
}

uint64_t diff__total_a(const struct diff *d)
{
	return d->total_a;
}

uint64_t diff__total_b(const struct diff *d)
{
	return d->total_b;
}

int diff__write_folded(const struct diff *d, FILE *out)
{
	for (size_t i = 0; i < d->n; i++)
		if (fprintf(out, "%s %" PRIu64 " %" PRIu64 "\n", d->rows[i].stack, d->rows[i].a,
			    d->rows[i].b) < 0)
			return -EIO;
	return fflush(out) || ferror(out) ? -EIO : 0;
}
