/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * uint64 key -> pointer map: open addressing with linear probing and backward-shift deletion
 * (no tombstones). NULL values mark empty slots, so NULL cannot be stored. Not thread-safe.
 * Iterate with: for (i = 0; m->mask && i <= m->mask; i++) if (m->vals[i]) ...
 */
#ifndef PROFD_PTRMAP_H
#define PROFD_PTRMAP_H

#include <stddef.h>
#include <stdint.h>

struct ptrmap {
	uint64_t *keys;
	void **vals; /* NULL: empty slot */
	size_t mask; /* slots - 1; 0 with no slots */
	size_t n;
};

/* The value of key, or NULL. */
void *ptrmap_get(const struct ptrmap *m, uint64_t key);
/* Insert or replace (val not NULL). Grows at 3/4 full. Returns 0 or -ENOMEM. */
int ptrmap_put(struct ptrmap *m, uint64_t key, void *val);
/* Remove key. Returns the removed value or NULL. */
void *ptrmap_del(struct ptrmap *m, uint64_t key);
/*
 * Remove the entry in slot i while iterating: a later entry of the cluster may move into slot
 * i, so look at slot i again before going on.
 */
void ptrmap_del_slot(struct ptrmap *m, size_t i);
/* Slots allocated (0 when empty): the map holds 16 bytes per slot. */
static inline size_t ptrmap_slots(const struct ptrmap *m)
{
	return m->mask ? m->mask + 1 : 0;
}
/* Free the slots; the map is empty and usable again. */
void ptrmap_fini(struct ptrmap *m);

#endif
