// SPDX-License-Identifier: BSD-2-Clause
/*
 * The aggregation store: process and thread metadata, kept in uint64 -> pointer maps and swept
 * when no remaining bucket names them (see store_priv.h for the whole layout).
 *
 * A pid names one process after another as the kernel reuses it: each process is a life of the
 * pid, numbered 1, 2, ... (STORE_LIFE_MAX, then 1 again), with its own record. The map holds
 * the newest life of each pid, and each record the one before it: a pid rarely has more than
 * one or two lives in the buckets, so a life is found by walking that chain. Buckets name the
 * life their data came from, so an exited process's data keeps its own name and owner.
 */
#include "store_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COMM 255
#define MAX_EXE 4095

struct proc {
	uint32_t pid;
	uint32_t uid;
	uint32_t ppid;	  /* 0: unknown */
	uint32_t life;	  /* 1 .. STORE_LIFE_MAX */
	uint64_t start;	  /* the process's start time (store__process_began); 0: unknown */
	uint64_t ref_idx; /* newest bucket idx + 1 naming it; 0: none */
	bool exited;
	char *comm;
	char *exe;	    /* NULL: unknown */
	struct proc *older; /* the life of the same pid before this one; NULL: none kept */
};

struct thread {
	uint32_t pid;
	uint32_t tid;
	uint32_t life;
	uint64_t ref_idx;
	char *comm;
};

/* --- pointer maps, charged to the store ---------------------------------------------------- */

/* What a map's two slot arrays cost (keys and values). */
static uint64_t pmap_cost(const struct ptrmap *m)
{
	size_t n = ptrmap_slots(m);

	return n ? 2 * store_mem_cost(n * sizeof(void *)) : 0;
}

/* Insert; the map's growth is charged to the store. Returns 0 or -ENOMEM. */
static int pmap_put(struct store *s, struct ptrmap *m, uint64_t key, void *val)
{
	uint64_t before = pmap_cost(m);
	int err = ptrmap_put(m, key, val);

	s->bytes += pmap_cost(m) - before;
	return err;
}

static void pmap_fini(struct store *s, struct ptrmap *m)
{
	s->bytes -= pmap_cost(m);
	ptrmap_fini(m);
}

/* --- processes and threads ------------------------------------------------------------------ */

/* Tids stay below STORE_PID_LIMIT: the life fits above them. */
static inline uint64_t thread_key(uint32_t pid, uint32_t life, uint32_t tid)
{
	return (uint64_t)pid << 32 | life << STORE_PID_BITS | tid;
}

/* The record of pid's life, NULL when not kept. */
static struct proc *proc_life(const struct store *s, uint32_t pid, uint32_t life)
{
	struct proc *p = ptrmap_get(&s->procs, pid);

	while (p && p->life != life)
		p = p->older;
	return p;
}

static void proc_release(struct store *s, struct proc *p);

/*
 * A new life of pid, older (the newest so far, or NULL) kept behind it. The oldest life whose
 * number comes round again is dropped first: its buckets' data would be read as the new one's.
 * Returns the record or NULL (-ENOMEM).
 */
static struct proc *proc_new_life(struct store *s, uint32_t pid, struct proc *older)
{
	uint32_t life = older ? older->life % STORE_LIFE_MAX + 1 : 1;
	struct proc *p = store_mem_zalloc(&s->bytes, sizeof(*p));

	if (!p)
		return NULL;
	p->pid = pid;
	p->life = life;
	p->ref_idx = s->max_idx_plus1;
	if (pmap_put(s, &s->procs, pid, p)) {
		store_mem_free(&s->bytes, p, sizeof(*p));
		return NULL;
	}
	p->older = older;
	for (struct proc *q = p; q->older; q = q->older) {
		if (q->older->life == life) {
			struct proc *gone = q->older;

			q->older = gone->older;
			proc_release(s, gone);
			s->lives--;
			break;
		}
	}
	if (older)
		older->exited = true; /* a pid names one process at a time */
	s->lives++;
	return p;
}

static int set_str(struct store *s, char **dst, const char *comm, size_t max)
{
	size_t len;
	char *p;

	if (!comm)
		comm = "";
	len = store_clip_len(comm, max);
	if (*dst && strlen(*dst) == len && !memcmp(*dst, comm, len))
		return 0;
	p = store_mem_alloc(&s->bytes, len + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, comm, len);
	p[len] = '\0';
	if (*dst)
		store_mem_free(&s->bytes, *dst, strlen(*dst) + 1);
	*dst = p;
	return 0;
}

/* Whether start is another process than p's life (NULL: none yet) by the rule store.h gives. */
static bool new_life(const struct proc *p, uint64_t start)
{
	if (!p)
		return true;
	if (!start || p->start == start)
		return false;
	/* Recorded before its start was known, and still running: the same process. */
	return p->start || p->exited;
}

bool store__process_is_new(const struct store *s, uint32_t pid, uint64_t start)
{
	const struct proc *p = s && pid < STORE_PID_LIMIT ? ptrmap_get(&s->procs, pid) : NULL;

	return p && new_life(p, start);
}

int store__process_began(struct store *s, uint32_t pid, uint64_t start)
{
	struct proc *p;

	if (!s || !pid || pid >= STORE_PID_LIMIT)
		return -EINVAL;
	p = ptrmap_get(&s->procs, pid);
	if (!new_life(p, start)) {
		if (start)
			p->start = start;
		return 0;
	}
	p = proc_new_life(s, pid, p);
	if (!p)
		return -ENOMEM;
	p->start = start;
	return 0;
}

int store__set_process(struct store *s, uint32_t pid, uint32_t uid, const char *comm)
{
	struct proc *p;

	if (!s)
		return -EINVAL;
	p = ptrmap_get(&s->procs, pid);
	if (!p) {
		p = proc_new_life(s, pid, NULL);
		if (!p)
			return -ENOMEM;
	}
	/* An exec or a change of owner: the newest life's record describes it now. */
	p->uid = uid;
	p->exited = false;
	if (p->ref_idx < s->max_idx_plus1)
		p->ref_idx = s->max_idx_plus1;
	return set_str(s, &p->comm, comm, MAX_COMM);
}

int store__set_thread(struct store *s, uint32_t pid, uint32_t tid, const char *comm)
{
	const struct proc *p;
	struct thread *t;
	uint32_t life;
	int err;

	if (!s || tid >= STORE_PID_LIMIT)
		return -EINVAL;
	/* The thread of the process that holds pid now. */
	p = ptrmap_get(&s->procs, pid);
	life = p ? p->life : 0;
	t = ptrmap_get(&s->threads, thread_key(pid, life, tid));
	if (!t) {
		t = store_mem_zalloc(&s->bytes, sizeof(*t));
		if (!t)
			return -ENOMEM;
		t->pid = pid;
		t->tid = tid;
		t->life = life;
		err = pmap_put(s, &s->threads, thread_key(pid, life, tid), t);
		if (err) {
			store_mem_free(&s->bytes, t, sizeof(*t));
			return err;
		}
	}
	if (t->ref_idx < s->max_idx_plus1)
		t->ref_idx = s->max_idx_plus1;
	return set_str(s, &t->comm, comm, MAX_COMM);
}

int store__set_process_exe(struct store *s, uint32_t pid, const char *exe)
{
	struct proc *p = s ? ptrmap_get(&s->procs, pid) : NULL;

	if (!p)
		return -ENOENT;
	if (!exe || !exe[0]) {
		if (p->exe)
			store_mem_free(&s->bytes, p->exe, strlen(p->exe) + 1);
		p->exe = NULL;
		return 0;
	}
	return set_str(s, &p->exe, exe, MAX_EXE);
}

int store__set_parent(struct store *s, uint32_t pid, uint32_t ppid)
{
	struct proc *p = s ? ptrmap_get(&s->procs, pid) : NULL;

	if (!p)
		return -ENOENT;
	p->ppid = ppid;
	return 0;
}

/* Is pid in the sorted set[0 .. n)? */
static bool in_set(const uint32_t *set, size_t n, uint32_t pid)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (set[mid] == pid)
			return true;
		if (set[mid] < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static int cmp_pid(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int store__descendants(const struct store *s, const uint32_t *roots, size_t nroots,
		       uint32_t (*parent_of)(void *ctx, uint32_t pid), void *ctx, uint32_t **out,
		       size_t *nout)
{
	size_t nprocs = s ? s->procs.n : 0, nrel = 0, n = 0;
	uint32_t(*rel)[2] = NULL, *set = NULL;
	bool added = true;

	/* (pid, parent) of each process once: parent_of may read /proc. */
	rel = nprocs ? malloc(nprocs * sizeof(*rel)) : NULL;
	set = malloc((nroots + nprocs + 1) * sizeof(*set));
	if ((nprocs && !rel) || !set) {
		free(rel);
		free(set);
		return -ENOMEM;
	}
	for (uint32_t i = 0; nprocs && i <= s->procs.mask && nrel < nprocs; i++) {
		const struct proc *p = s->procs.vals[i];
		uint32_t ppid;

		if (!p)
			continue;
		ppid = p->ppid;
		if (!ppid && parent_of)
			ppid = parent_of(ctx, p->pid);
		if (ppid && ppid != p->pid) {
			rel[nrel][0] = p->pid;
			rel[nrel][1] = ppid;
			nrel++;
		}
	}
	for (size_t i = 0; i < nroots; i++)
		set[n++] = roots[i];
	qsort(set, n, sizeof(*set), cmp_pid);
	/* A process joins when its parent is in: one pass per generation. */
	while (added) {
		size_t before = n;

		for (size_t i = 0; i < nrel; i++)
			if (!in_set(set, before, rel[i][0]) && in_set(set, before, rel[i][1]))
				set[n++] = rel[i][0];
		added = n > before;
		if (added)
			qsort(set, n, sizeof(*set), cmp_pid);
	}
	free(rel);
	*out = set;
	*nout = n;
	return 0;
}

void store__process_exited(struct store *s, uint32_t pid)
{
	struct proc *p = s ? ptrmap_get(&s->procs, pid) : NULL;

	if (p)
		p->exited = true;
}

static bool proc_info(const struct proc *p, struct store_process_info *out)
{
	if (!p)
		return false;
	out->pid = p->pid;
	out->life = p->life;
	out->start = p->start;
	out->uid = p->uid;
	out->ppid = p->ppid;
	out->comm = p->comm ? p->comm : "";
	out->exe = p->exe;
	out->exited = p->exited;
	return true;
}

bool store__process(const struct store *s, uint32_t pid, struct store_process_info *out)
{
	return proc_info(s ? ptrmap_get(&s->procs, pid) : NULL, out);
}

bool store__process_life(const struct store *s, uint32_t pid, uint32_t life,
			 struct store_process_info *out)
{
	return proc_info(s && life ? proc_life(s, pid, life) : NULL, out);
}

bool store__process_owned(const struct store *s, uint32_t pid, uint32_t uid)
{
	for (const struct proc *p = s ? ptrmap_get(&s->procs, pid) : NULL; p; p = p->older)
		if (p->uid == uid)
			return true;
	return false;
}

const char *store__thread_name_life(const struct store *s, uint32_t pid, uint32_t life,
				    uint32_t tid)
{
	const struct thread *t;

	if (!s || tid >= STORE_PID_LIMIT || life > STORE_LIFE_MAX)
		return NULL;
	t = ptrmap_get(&s->threads, thread_key(pid, life, tid));
	return t ? t->comm : NULL;
}

const char *store__thread_name(const struct store *s, uint32_t pid, uint32_t tid)
{
	const struct proc *p = s ? ptrmap_get(&s->procs, pid) : NULL;

	return store__thread_name_life(s, pid, p ? p->life : 0, tid);
}

uint32_t store_meta_owner(const struct store *s, uint32_t pid, uint32_t *life)
{
	const struct proc *p = ptrmap_get(&s->procs, pid);

	*life = p ? p->life : 0;
	return p ? p->uid : STORE_UID_UNKNOWN;
}

static void proc_release(struct store *s, struct proc *p)
{
	if (p->comm)
		store_mem_free(&s->bytes, p->comm, strlen(p->comm) + 1);
	if (p->exe)
		store_mem_free(&s->bytes, p->exe, strlen(p->exe) + 1);
	store_mem_free(&s->bytes, p, sizeof(*p));
}

static void thread_release(struct store *s, struct thread *t)
{
	if (t->comm)
		store_mem_free(&s->bytes, t->comm, strlen(t->comm) + 1);
	store_mem_free(&s->bytes, t, sizeof(*t));
}

/* Drop metadata no remaining bucket refers to (exited processes; any thread). */
void store_meta_sweep(struct store *s)
{
	uint64_t oldest_plus1 = s->nb ? s->b[0].idx + 1 : UINT64_MAX;
	uint32_t i;

	for (i = 0; s->procs.mask && i <= s->procs.mask;) {
		struct proc *p = s->procs.vals[i], **pp;

		if (!p) {
			i++;
			continue;
		}
		/* The older lives first: every one of them has exited. */
		for (pp = &p->older; *pp;) {
			struct proc *q = *pp;

			if (q->ref_idx < oldest_plus1) {
				*pp = q->older;
				proc_release(s, q);
				s->lives--;
			} else {
				pp = &q->older;
			}
		}
		if (p->exited && p->ref_idx < oldest_plus1) {
			if (p->older) {
				s->procs.vals[i] = p->older;
			} else {
				ptrmap_del_slot(&s->procs, i);
				proc_release(s, p);
				s->lives--;
				continue; /* the slot may hold a shifted entry now */
			}
			proc_release(s, p);
			s->lives--;
		}
		i++;
	}
	for (i = 0; s->threads.mask && i <= s->threads.mask;) {
		struct thread *t = s->threads.vals[i];

		if (t && t->ref_idx < oldest_plus1) {
			ptrmap_del_slot(&s->threads, i);
			thread_release(s, t);
			continue;
		}
		i++;
	}
}

void store_meta_note(struct store *s, uint32_t pid, uint32_t life, uint32_t tid, uint64_t idx)
{
	struct proc *p = proc_life(s, pid, life);
	struct thread *t = ptrmap_get(&s->threads, thread_key(pid, life, tid));

	if (p && p->ref_idx < idx + 1)
		p->ref_idx = idx + 1;
	if (t && t->ref_idx < idx + 1)
		t->ref_idx = idx + 1;
}

int store_meta_init(struct store *s)
{
	/* The maps allocate on first use. */
	memset(&s->procs, 0, sizeof(s->procs));
	memset(&s->threads, 0, sizeof(s->threads));
	return 0;
}

void store_meta_free(struct store *s)
{
	for (size_t i = 0; s->procs.mask && i <= s->procs.mask; i++) {
		for (struct proc *p = s->procs.vals[i], *older; p; p = older) {
			older = p->older;
			proc_release(s, p);
		}
	}
	for (size_t i = 0; s->threads.mask && i <= s->threads.mask; i++)
		if (s->threads.vals[i])
			thread_release(s, s->threads.vals[i]);
	pmap_fini(s, &s->procs);
	pmap_fini(s, &s->threads);
}
