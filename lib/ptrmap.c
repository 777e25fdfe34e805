// SPDX-License-Identifier: BSD-2-Clause
/* uint64 key -> pointer map: open addressing, linear probing, backward-shift deletion. */
#include "ptrmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

static size_t slot_of(const struct ptrmap *m, uint64_t key)
{
	return (size_t)hash_mix64(key) & m->mask;
}

void *ptrmap_get(const struct ptrmap *m, uint64_t key)
{
	if (!m->n)
		return NULL;
	for (size_t i = slot_of(m, key); m->vals[i]; i = (i + 1) & m->mask)
		if (m->keys[i] == key)
			return m->vals[i];
	return NULL;
}

static int ptrmap_grow(struct ptrmap *m)
{
	size_t nslots = m->mask ? 2 * (m->mask + 1) : 16;
	struct ptrmap g = {.mask = nslots - 1};

	g.keys = malloc(nslots * sizeof(*g.keys));
	g.vals = calloc(nslots, sizeof(*g.vals));
	if (!g.keys || !g.vals) {
		free(g.keys);
		free(g.vals);
		return -ENOMEM;
	}
	for (size_t j = 0; m->mask && j <= m->mask; j++) {
		size_t i;

		if (!m->vals[j])
			continue;
		for (i = slot_of(&g, m->keys[j]); g.vals[i]; i = (i + 1) & g.mask)
			;
		g.keys[i] = m->keys[j];
		g.vals[i] = m->vals[j];
	}
	g.n = m->n;
	free(m->keys);
	free(m->vals);
	*m = g;
	return 0;
}

int ptrmap_put(struct ptrmap *m, uint64_t key, void *val)
{
	size_t i;

	if (m->mask) {
		for (i = slot_of(m, key); m->vals[i]; i = (i + 1) & m->mask) {
			if (m->keys[i] == key) {
				m->vals[i] = val;
				return 0;
			}
		}
	}
	if (!m->mask || (m->n + 1) * 4 > (m->mask + 1) * 3) {
		if (ptrmap_grow(m))
			return -ENOMEM;
	}
	for (i = slot_of(m, key); m->vals[i]; i = (i + 1) & m->mask)
		;
	m->keys[i] = key;
	m->vals[i] = val;
	m->n++;
	return 0;
}

void *ptrmap_del(struct ptrmap *m, uint64_t key)
{
	size_t i, j;
	void *val;

	if (!m->n)
		return NULL;
	for (i = slot_of(m, key); m->vals[i]; i = (i + 1) & m->mask)
		if (m->keys[i] == key)
			break;
	if (!m->vals[i])
		return NULL;
	val = m->vals[i];
	/* Backward shift: move later members of the run into the hole when their home allows. */
	for (j = (i + 1) & m->mask; m->vals[j]; j = (j + 1) & m->mask) {
		size_t home = slot_of(m, m->keys[j]);

		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			i = j;
		}
	}
	m->vals[i] = NULL;
	m->n--;
	return val;
}

void ptrmap_fini(struct ptrmap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

void ptrmap_del_slot(struct ptrmap *m, size_t i)
{
	if (m->mask && i <= m->mask && m->vals[i])
		ptrmap_del(m, m->keys[i]);
}
