/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The store's charged allocator and id tables, shared by its files (the buckets, the interned
 * data, the metadata).
 *
 * Every allocation goes through store_mem_alloc/_realloc/_free, which charge an estimate of what
 * malloc really hands out (header and 16-byte rounding) to a byte counter, so the store's `bytes`
 * follows the heap. The counter is passed explicitly: the interned data charges the store's
 * without knowing the store.
 */
#ifndef PROFD_STORE_MEM_H
#define PROFD_STORE_MEM_H

#include "grow.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* What malloc uses for a request of n bytes: an 8-byte header, 16-byte granules, pages when
 * large enough to be mapped on its own. */
static inline uint64_t store_mem_cost(size_t n)
{
	if (!n)
		return 0;
	if (n >= 128 * 1024)
		return (n + 4096 + 4095) & ~(uint64_t)4095;
	n += 8;
	if (n < 32)
		n = 32;
	return (n + 15) & ~(uint64_t)15;
}

/* malloc / calloc / realloc / free charged to *bytes; NULL on failure, charging nothing. */
static inline void *store_mem_alloc(uint64_t *bytes, size_t n)
{
	void *p = malloc(n);

	if (p)
		*bytes += store_mem_cost(n);
	return p;
}

static inline void *store_mem_zalloc(uint64_t *bytes, size_t n)
{
	void *p = calloc(1, n);

	if (p)
		*bytes += store_mem_cost(n);
	return p;
}

static inline void *store_mem_realloc(uint64_t *bytes, void *p, size_t old, size_t n)
{
	void *q = realloc(p, n);

	if (q || !n) {
		*bytes -= store_mem_cost(old);
		*bytes += store_mem_cost(n);
	}
	return q;
}

/* n is the size p was allocated with; p may be NULL. */
static inline void store_mem_free(uint64_t *bytes, void *p, size_t n)
{
	if (!p)
		return;
	*bytes -= store_mem_cost(n);
	free(p);
}

/*
 * Make *arr (*cap elements of elem bytes, charged to *bytes) hold need elements, at most max:
 * capacity doubles, and starts at `first` so that small arrays skip the first doublings. Returns
 * 0, -EOVERFLOW or -ENOMEM; *arr and *cap are unchanged on failure.
 */
static inline int store_mem_grow(uint64_t *bytes, void **arr, uint32_t *cap, size_t need,
				 size_t first, size_t elem, size_t max)
{
	size_t ncap;
	void *p;
	int err;

	if (need <= *cap)
		return 0; /* the common case, inline: adds check on every new entry */
	if (max > UINT32_MAX)
		max = UINT32_MAX;
	err = grow_cap(*cap, need > first ? need : first, elem, max, &ncap);
	if (err || ncap == *cap)
		return err;
	p = store_mem_realloc(bytes, *arr, (size_t)*cap * elem, ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = (uint32_t)ncap;
	return 0;
}

/* The largest id table: 2^31 slots (more ids than that never fit under any cap). */
#define STORE_IDTAB_MAX_SLOTS (1u << 31)

/*
 * An id table: open addressing over uint32 ids (0 empty), kept at most 3/4 full by its users.
 * Allocates one with room for n ids into *tab and *mask, charged to *bytes; returns 0 or -ENOMEM
 * (also when n ids would need more than STORE_IDTAB_MAX_SLOTS).
 */
static inline int store_idtab_alloc(uint64_t *bytes, uint32_t **tab, uint32_t *mask, uint64_t n)
{
	uint64_t nslots = 16;

	while (nslots * 3 < n * 4 + 4)
		nslots *= 2;
	if (nslots > STORE_IDTAB_MAX_SLOTS)
		return -ENOMEM;
	*tab = store_mem_zalloc(bytes, nslots * sizeof(uint32_t));
	if (!*tab)
		return -ENOMEM;
	*mask = (uint32_t)(nslots - 1);
	return 0;
}

/* Put id in the first free slot from h on; the table must have one. */
static inline void store_idtab_insert(uint32_t *tab, uint32_t mask, uint32_t h, uint32_t id)
{
	uint32_t i;

	for (i = h & mask; tab[i]; i = (i + 1) & mask)
		;
	tab[i] = id;
}

#endif
