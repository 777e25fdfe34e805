// SPDX-License-Identifier: BSD-2-Clause
#include "format.h"
#include "grow.h"
#include "flame.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct line {
	char *stack;
	uint64_t value;
};

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->stack, ((const struct line *)b)->stack);
}

/* "root;...;leaf" for node idx, ';' in names made '_' so the separator stays unambiguous. */
static char *stack_of(const struct flame_node *nodes, uint32_t idx)
{
	size_t len = 0;
	char *s, *p;

	if (idx == 0)
		return strdup("");
	for (uint32_t i = idx; i != 0; i = nodes[i].parent)
		len += strlen(nodes[i].name) + 1;
	s = malloc(len);
	if (!s)
		return NULL;
	p = s + len - 1;
	*p = '\0';
	for (uint32_t i = idx; i != 0; i = nodes[i].parent) {
		size_t n = strlen(nodes[i].name);

		p -= n;
		memcpy(p, nodes[i].name, n);
		for (size_t k = 0; k < n; k++)
			if (p[k] == ';')
				p[k] = '_';
		if (p != s)
			*--p = ';';
	}
	return s;
}

int format_folded(const Profd__Profile *p, const struct render_opts *o, FILE *out)
{
	struct flame_opts fo = {.process_root = o->process_root, .value_index = o->value_index};
	const struct flame_node *nodes;
	struct line *lines = NULL;
	size_t n_nodes, n_lines = 0, cap = 0;
	struct flame *f;
	int err = 0;

	f = flame__new(p, &fo);
	if (!f)
		return -errno;
	nodes = flame__nodes(f, &n_nodes);
	for (size_t i = 1; i < n_nodes; i++) {
		if (!nodes[i].self)
			continue;
		err = GROW(lines, cap, n_lines + 1);
		if (err)
			goto out;
		lines[n_lines].stack = stack_of(nodes, (uint32_t)i);
		if (!lines[n_lines].stack) {
			err = -ENOMEM;
			goto out;
		}
		lines[n_lines++].value = nodes[i].self;
	}
	qsort(lines, n_lines, sizeof(*lines), cmp_line);
	for (size_t i = 0; i < n_lines; i++) {
		uint64_t v = lines[i].value;

		/* Replacing ';' can make two stacks equal; they are one line then. */
		while (i + 1 < n_lines && strcmp(lines[i].stack, lines[i + 1].stack) == 0)
			v += lines[++i].value;
		if (fprintf(out, "%s %" PRIu64 "\n", lines[i].stack, v) < 0) {
			err = -EIO;
			goto out;
		}
	}
	if (fflush(out) || ferror(out))
		err = -EIO;
out:
	for (size_t i = 0; i < n_lines; i++)
		free(lines[i].stack);
	free(lines);
	flame__free(f);
	return err;
}
