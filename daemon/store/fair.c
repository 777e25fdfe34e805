// SPDX-License-Identifier: BSD-2-Clause
/*
 * Fairness between users under the cap: who owns how many of the buckets' entries, and whose
 * entries eviction takes first.
 *
 * The rule: every uid that owns entries in the buckets (the owner recorded with each entry, the
 * process's uid when it was sampled; data of unknown owner counts as one more uid) is entitled to
 * an equal share of them, share = entries / uids owning any. When the store must evict and the
 * uid owning the most entries holds more than its share plus an eighth of it, eviction takes
 * that uid's entries, oldest bucket first; otherwise the oldest bucket goes, everyone's entries
 * in it. Entries are the measure because they are what each user's data adds one by one (24
 * bytes each) and what pins the interned stacks: a user whose entries go leaves the stacks only
 * they named dead, for the next compaction. The margin keeps users of about equal weight from
 * taking turns at every eviction; they share the oldest-first order instead.
 */
#include "store_priv.h"

struct store_uid {
	uint64_t entries;
};

int store_fair_add(struct store *s, uint32_t uid)
{
	struct store_uid *u = ptrmap_get(&s->uids, uid);

	if (!u) {
		u = store_mem_zalloc(&s->bytes, sizeof(*u));
		if (!u)
			return -ENOMEM;
		if (ptrmap_put(&s->uids, uid, u)) {
			store_mem_free(&s->bytes, u, sizeof(*u));
			return -ENOMEM;
		}
	}
	u->entries++;
	s->nentries++;
	return 0;
}

void store_fair_remove(struct store *s, uint32_t uid)
{
	struct store_uid *u = ptrmap_get(&s->uids, uid);

	if (!u)
		return;
	if (s->nentries)
		s->nentries--;
	if (--u->entries)
		return;
	/* No entries left: no longer counted among the users sharing the store. */
	ptrmap_del(&s->uids, uid);
	store_mem_free(&s->bytes, u, sizeof(*u));
}

bool store_fair_victim(const struct store *s, uint32_t *uid)
{
	const struct store_uid *top = NULL;
	uint64_t share;

	if (s->uids.n < 2)
		return false;
	for (size_t i = 0; s->uids.mask && i <= s->uids.mask; i++) {
		const struct store_uid *u = s->uids.vals[i];

		if (u && (!top || u->entries > top->entries)) {
			top = u;
			*uid = (uint32_t)s->uids.keys[i];
		}
	}
	share = s->nentries / s->uids.n;
	return top && top->entries > share + share / 8;
}

void store_fair_free(struct store *s)
{
	for (size_t i = 0; s->uids.mask && i <= s->uids.mask; i++)
		if (s->uids.vals[i])
			store_mem_free(&s->bytes, s->uids.vals[i], sizeof(struct store_uid));
	ptrmap_fini(&s->uids);
	s->nentries = 0;
}
