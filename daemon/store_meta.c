// SPDX-License-Identifier: BSD-2-Clause
/*
 * The aggregation store: process and thread metadata, kept in uint64 -> pointer maps and swept
 * when no remaining bucket names them (see store_priv.h for the whole layout).
 */
#include "store_priv.h"

#include <errno.h>
#include <string.h>

#define MAX_COMM 255

struct proc {
	uint32_t pid;
	uint32_t uid;
	uint64_t ref_idx; /* newest bucket idx + 1 naming it; 0: none */
	bool exited;
	char *comm;
};

struct thread {
	uint32_t pid;
	uint32_t tid;
	uint64_t ref_idx;
	char *comm;
};

/* --- pointer map ---------------------------------------------------------------------------- */

static int pmap_init(struct store *s, struct pmap *m, uint32_t nslots)
{
	m->slots = store_mem_zalloc(s, nslots * sizeof(*m->slots));
	if (!m->slots)
		return -ENOMEM;
	m->mask = nslots - 1;
	m->n = 0;
	return 0;
}

static void pmap_fini(struct store *s, struct pmap *m)
{
	store_mem_free(s, m->slots, (m->mask + 1) * sizeof(*m->slots));
	m->slots = NULL;
}

static void *pmap_get(const struct pmap *m, uint64_t key)
{
	uint32_t i = (uint32_t)hash_mix64(key) & m->mask;

	for (;; i = (i + 1) & m->mask) {
		if (!m->slots[i].val)
			return NULL;
		if (m->slots[i].key == key)
			return m->slots[i].val;
	}
}

static void pmap_put_slot(struct pslot *slots, uint32_t mask, uint64_t key, void *val)
{
	uint32_t i = (uint32_t)hash_mix64(key) & mask;

	while (slots[i].val)
		i = (i + 1) & mask;
	slots[i].key = key;
	slots[i].val = val;
}

/* The key must not be present. Returns 0 or -ENOMEM. */
static int pmap_put(struct store *s, struct pmap *m, uint64_t key, void *val)
{
	uint32_t nslots = m->mask + 1;

	if ((m->n + 1) * 4 > nslots * 3) {
		struct pslot *ns = store_mem_zalloc(s, 2 * nslots * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		for (uint32_t i = 0; i < nslots; i++)
			if (m->slots[i].val)
				pmap_put_slot(ns, 2 * nslots - 1, m->slots[i].key, m->slots[i].val);
		store_mem_free(s, m->slots, nslots * sizeof(*ns));
		m->slots = ns;
		m->mask = 2 * nslots - 1;
	}
	pmap_put_slot(m->slots, m->mask, key, val);
	m->n++;
	return 0;
}

/* Remove the entry in slot i, shifting later members of its cluster back. */
static void pmap_del_slot(struct pmap *m, uint32_t i)
{
	uint32_t j = i;

	m->slots[i].val = NULL;
	m->n--;
	for (;;) {
		uint32_t home;

		j = (j + 1) & m->mask;
		if (!m->slots[j].val)
			return;
		home = (uint32_t)hash_mix64(m->slots[j].key) & m->mask;
		/* Move j into the hole unless its home lies cyclically in (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			m->slots[i] = m->slots[j];
			m->slots[j].val = NULL;
			i = j;
		}
	}
}

/* --- processes and threads ------------------------------------------------------------------ */

static inline uint64_t thread_key(uint32_t pid, uint32_t tid)
{
	return (uint64_t)pid << 32 | tid;
}

static int set_comm(struct store *s, char **dst, const char *comm)
{
	size_t len;
	char *p;

	if (!comm)
		comm = "";
	len = store_clip_len(comm, MAX_COMM);
	if (*dst && strlen(*dst) == len && !memcmp(*dst, comm, len))
		return 0;
	p = store_mem_alloc(s, len + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, comm, len);
	p[len] = '\0';
	if (*dst)
		store_mem_free(s, *dst, strlen(*dst) + 1);
	*dst = p;
	return 0;
}

int store__set_process(struct store *s, uint32_t pid, uint32_t uid, const char *comm)
{
	struct proc *p;
	int err;

	if (!s)
		return -EINVAL;
	p = pmap_get(&s->procs, pid);
	if (!p) {
		p = store_mem_zalloc(s, sizeof(*p));
		if (!p)
			return -ENOMEM;
		p->pid = pid;
		err = pmap_put(s, &s->procs, pid, p);
		if (err) {
			store_mem_free(s, p, sizeof(*p));
			return err;
		}
	}
	/* A reused pid or an exec: the record describes the newest process. */
	p->uid = uid;
	p->exited = false;
	if (p->ref_idx < s->max_idx_plus1)
		p->ref_idx = s->max_idx_plus1;
	return set_comm(s, &p->comm, comm);
}

int store__set_thread(struct store *s, uint32_t pid, uint32_t tid, const char *comm)
{
	struct thread *t;
	int err;

	if (!s)
		return -EINVAL;
	t = pmap_get(&s->threads, thread_key(pid, tid));
	if (!t) {
		t = store_mem_zalloc(s, sizeof(*t));
		if (!t)
			return -ENOMEM;
		t->pid = pid;
		t->tid = tid;
		err = pmap_put(s, &s->threads, thread_key(pid, tid), t);
		if (err) {
			store_mem_free(s, t, sizeof(*t));
			return err;
		}
	}
	if (t->ref_idx < s->max_idx_plus1)
		t->ref_idx = s->max_idx_plus1;
	return set_comm(s, &t->comm, comm);
}

void store__process_exited(struct store *s, uint32_t pid)
{
	struct proc *p = s ? pmap_get(&s->procs, pid) : NULL;

	if (p)
		p->exited = true;
}

bool store__process(const struct store *s, uint32_t pid, struct store_process_info *out)
{
	const struct proc *p = s ? pmap_get(&s->procs, pid) : NULL;

	if (!p)
		return false;
	out->pid = p->pid;
	out->uid = p->uid;
	out->comm = p->comm ? p->comm : "";
	out->exited = p->exited;
	return true;
}

const char *store__thread_name(const struct store *s, uint32_t pid, uint32_t tid)
{
	const struct thread *t = s ? pmap_get(&s->threads, thread_key(pid, tid)) : NULL;

	return t ? t->comm : NULL;
}

static void proc_release(struct store *s, struct proc *p)
{
	if (p->comm)
		store_mem_free(s, p->comm, strlen(p->comm) + 1);
	store_mem_free(s, p, sizeof(*p));
}

static void thread_release(struct store *s, struct thread *t)
{
	if (t->comm)
		store_mem_free(s, t->comm, strlen(t->comm) + 1);
	store_mem_free(s, t, sizeof(*t));
}

/* Drop metadata no remaining bucket refers to (exited processes; any thread). */
void store_meta_sweep(struct store *s)
{
	uint64_t oldest_plus1 = s->nb ? s->b[0].idx + 1 : UINT64_MAX;
	uint32_t i;

	for (i = 0; i <= s->procs.mask;) {
		struct proc *p = s->procs.slots[i].val;

		if (p && p->exited && p->ref_idx < oldest_plus1) {
			pmap_del_slot(&s->procs, i);
			proc_release(s, p);
			continue; /* the slot may hold a shifted entry now */
		}
		i++;
	}
	for (i = 0; i <= s->threads.mask;) {
		struct thread *t = s->threads.slots[i].val;

		if (t && t->ref_idx < oldest_plus1) {
			pmap_del_slot(&s->threads, i);
			thread_release(s, t);
			continue;
		}
		i++;
	}
}

void store_meta_note(struct store *s, uint32_t pid, uint32_t tid, uint64_t idx)
{
	struct proc *p = pmap_get(&s->procs, pid);
	struct thread *t = pmap_get(&s->threads, thread_key(pid, tid));

	if (p && p->ref_idx < idx + 1)
		p->ref_idx = idx + 1;
	if (t && t->ref_idx < idx + 1)
		t->ref_idx = idx + 1;
}

int store_meta_init(struct store *s)
{
	if (pmap_init(s, &s->procs, 16) || pmap_init(s, &s->threads, 16))
		return -ENOMEM;
	return 0;
}

void store_meta_free(struct store *s)
{
	if (s->procs.slots)
		for (uint32_t i = 0; i <= s->procs.mask; i++)
			if (s->procs.slots[i].val)
				proc_release(s, s->procs.slots[i].val);
	if (s->threads.slots)
		for (uint32_t i = 0; i <= s->threads.mask; i++)
			if (s->threads.slots[i].val)
				thread_release(s, s->threads.slots[i].val);
	pmap_fini(s, &s->procs);
	pmap_fini(s, &s->threads);
}
