// SPDX-License-Identifier: BSD-2-Clause
/*
 * The raw event ring for timelines: CPU samples, launches, kernels, copies, API calls and NVTX
 * ranges in arrival order, bounded in bytes (event slots plus their names), the oldest
 * overwritten first and counted. Names are shared between events and refcounted, so a kernel
 * launched a million times costs its name once. gpu__trace turns a window of it into a Trace.
 */
#include "gpu_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "hash.h"

struct rstr {
	uint64_t hash;
	uint32_t refs;
	char s[];
};

static size_t rstr_cost(size_t len)
{
	return sizeof(struct rstr) + len + 1 + 2 * sizeof(void *);
}

int ring_init(struct ring *r, size_t bytes)
{
	memset(r, 0, sizeof(*r));
	r->limit = bytes;
	r->max = bytes / sizeof(struct ev);
	if (r->max < 16)
		r->max = 16;
	return 0;
}

static void rstr_unref(struct ring *r, struct rstr *s)
{
	size_t i, j;

	if (!s || --s->refs)
		return;
	for (i = s->hash & r->str_mask; r->strs[i] != s; i = (i + 1) & r->str_mask)
		;
	for (j = (i + 1) & r->str_mask; r->strs[j]; j = (j + 1) & r->str_mask) {
		size_t home = r->strs[j]->hash & r->str_mask;

		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			r->strs[i] = r->strs[j];
			i = j;
		}
	}
	r->strs[i] = NULL;
	r->nstr--;
	r->str_bytes -= rstr_cost(strlen(s->s));
	free(s);
}

static struct rstr *rstr_get(struct ring *r, const char *name)
{
	size_t len = strlen(name), i;
	uint64_t h = hash_bytes(name, len);
	struct rstr *s;

	if (r->str_mask) {
		for (i = h & r->str_mask; r->strs[i]; i = (i + 1) & r->str_mask) {
			if (r->strs[i]->hash == h && !strcmp(r->strs[i]->s, name)) {
				r->strs[i]->refs++;
				return r->strs[i];
			}
		}
	}
	if (!r->str_mask || (r->nstr + 1) * 2 > r->str_mask + 1) {
		size_t nslots = r->str_mask ? 2 * (r->str_mask + 1) : 64;
		struct rstr **ns = calloc(nslots, sizeof(*ns));

		if (!ns)
			return NULL;
		for (size_t j = 0; r->str_mask && j <= r->str_mask; j++) {
			if (!r->strs[j])
				continue;
			for (i = r->strs[j]->hash & (nslots - 1); ns[i]; i = (i + 1) & (nslots - 1))
				;
			ns[i] = r->strs[j];
		}
		free(r->strs);
		r->strs = ns;
		r->str_mask = nslots - 1;
	}
	s = malloc(sizeof(*s) + len + 1);
	if (!s)
		return NULL;
	s->hash = h;
	s->refs = 1;
	memcpy(s->s, name, len + 1);
	for (i = h & r->str_mask; r->strs[i]; i = (i + 1) & r->str_mask)
		;
	r->strs[i] = s;
	r->nstr++;
	r->str_bytes += rstr_cost(len);
	return s;
}

static void ring_drop_oldest(struct ring *r)
{
	struct ev *e = &r->ev[r->head];

	rstr_unref(r, e->name);
	e->name = NULL;
	r->head = (r->head + 1) % r->cap;
	r->n--;
	r->overwritten++;
}

void ring_fini(struct ring *r)
{
	while (r->n)
		ring_drop_oldest(r);
	free(r->ev);
	free(r->strs);
	memset(r, 0, sizeof(*r));
}

static int ring_grow(struct ring *r)
{
	size_t ncap = r->cap ? r->cap * 2 : 1024;
	struct ev *ne;

	if (ncap > r->max)
		ncap = r->max;
	ne = malloc(ncap * sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	for (size_t i = 0; i < r->n; i++)
		ne[i] = r->ev[(r->head + i) % r->cap];
	free(r->ev);
	r->ev = ne;
	r->cap = ncap;
	r->head = 0;
	return 0;
}

int ring_push(struct ring *r, const struct ev *e, const char *name)
{
	size_t len = name ? strlen(name) : 0, need = name ? rstr_cost(len) : 0;
	char cut[4096];
	struct rstr *s = NULL;
	struct ev *slot;

	/*
	 * One name never takes more than a 64th of the ring: a huge one would otherwise push out
	 * every other event. Cut names end with "...".
	 */
	if (name && need > r->limit / 64) {
		size_t room = r->limit / 64, over = rstr_cost(0) + 3;
		size_t max = room > over ? room - over : 0;

		if (max > sizeof(cut) - 4)
			max = sizeof(cut) - 4;
		while (max > 0 && ((unsigned char)name[max] & 0xc0) == 0x80)
			max--; /* not inside a UTF-8 sequence */
		memcpy(cut, name, max);
		memcpy(cut + max, "...", 4);
		name = cut;
		need = rstr_cost(max + 3);
	}
	/* Room in bytes: slots in use plus names; one event always fits. */
	while (r->n && (r->n + 1) * sizeof(*e) + r->str_bytes + need > r->limit)
		ring_drop_oldest(r);
	if (r->n == r->cap && r->cap < r->max && ring_grow(r))
		return -ENOMEM;
	if (r->n == r->cap)
		ring_drop_oldest(r);
	if (name) {
		s = rstr_get(r, name);
		if (!s)
			return -ENOMEM;
	}
	slot = &r->ev[(r->head + r->n) % r->cap];
	*slot = *e;
	slot->name = s;
	r->n++;
	return 0;
}

void ring_gc(struct gpu *g, struct store_gc *mark, const struct store_gc *remap)
{
	struct ring *r = &g->ring;

	for (size_t i = 0; i < r->n; i++) {
		struct ev *e = &r->ev[(r->head + i) % r->cap];

		if (!e->stack)
			continue;
		if (mark)
			store_gc__keep(mark, e->stack);
		else
			e->stack = store_gc__map(remap, e->stack);
	}
}

/* --- traces ------------------------------------------------------------------------------- */

/* A query's filters, its pids sorted for binary search (a trace looks at every event). */
struct tfilter {
	const struct store_query *q;
	uint32_t *pids;
	size_t npids;
};

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int tfilter_init(struct tfilter *f, const struct store_query *q)
{
	f->q = q;
	f->npids = q->npids;
	f->pids = NULL;
	if (!q->npids)
		return 0;
	f->pids = malloc(q->npids * sizeof(*f->pids));
	if (!f->pids)
		return -ENOMEM;
	memcpy(f->pids, q->pids, q->npids * sizeof(*f->pids));
	qsort(f->pids, f->npids, sizeof(*f->pids), u32_cmp);
	return 0;
}

static bool pid_wanted(const struct tfilter *f, uint32_t pid)
{
	return !f->npids || bsearch(&pid, f->pids, f->npids, sizeof(pid), u32_cmp);
}

/* Whether an event passes the query's pid, uid and thread filters (the window aside). */
static bool ev_visible(const struct tfilter *f, const struct ev *e)
{
	const struct store_query *q = f->q;

	if (!pid_wanted(f, e->pid))
		return false;
	if (q->filter_uid && e->uid != q->uid)
		return false;
	/* A thread filter keeps the thread's own events and every GPU record of the process. */
	return !q->tid || !e->tid || e->tid == q->tid;
}

static bool ev_wanted(const struct tfilter *f, const struct ev *e)
{
	const struct store_query *q = f->q;

	if (!ev_visible(f, e))
		return false;
	if (e->start >= q->end_ns)
		return false;
	/* Instants inside the window; intervals that overlap it. */
	return e->end > e->start ? e->end > q->start_ns : e->start >= q->start_ns;
}

static int ev_cmp(const void *a, const void *b)
{
	const struct ev *x = *(const struct ev *const *)a, *y = *(const struct ev *const *)b;

	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

/* Array of n message pointers into one block of n messages; both NULL when n is 0. */
static void *msg_array(void ***ptrs, size_t n, size_t size)
{
	char *blk;

	*ptrs = NULL;
	if (!n)
		return NULL;
	blk = calloc(n, size);
	*ptrs = calloc(n, sizeof(void *));
	if (!blk || !*ptrs) {
		free(blk);
		free(*ptrs);
		*ptrs = NULL;
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		(*ptrs)[i] = blk + i * size;
	return blk;
}

struct trace_build {
	struct gpu *g;
	struct dump_tables *t;
	Profd__Trace *tr;
	struct ptrmap pids;    /* pid -> index + 1 */
	struct ptrmap threads; /* pid << 32 | tid -> index + 1 */
	uint64_t *thread_keys;
	size_t nthreads, threads_cap;
	uint32_t *pid_list;
	size_t npids, pids_cap;
};

static int note_pid(struct trace_build *b, uint32_t pid)
{
	if (ptrmap_get(&b->pids, pid))
		return 0;
	if (b->npids == b->pids_cap) {
		size_t ncap = b->pids_cap ? b->pids_cap * 2 : 16;
		uint32_t *n = realloc(b->pid_list, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		b->pid_list = n;
		b->pids_cap = ncap;
	}
	b->pid_list[b->npids++] = pid;
	return ptrmap_put(&b->pids, pid, (void *)(uintptr_t)b->npids);
}

static int note_thread(struct trace_build *b, uint32_t pid, uint32_t tid)
{
	uint64_t key = (uint64_t)pid << 32 | tid;

	if (!tid || ptrmap_get(&b->threads, key))
		return 0;
	if (b->nthreads == b->threads_cap) {
		size_t ncap = b->threads_cap ? b->threads_cap * 2 : 64;
		uint64_t *n = realloc(b->thread_keys, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		b->thread_keys = n;
		b->threads_cap = ncap;
	}
	b->thread_keys[b->nthreads++] = key;
	return ptrmap_put(&b->threads, key, (void *)(uintptr_t)b->nthreads);
}

static int str_idx(struct trace_build *b, const char *s, uint32_t *idx)
{
	return dump_tables__string(b->t, s ? s : "", idx);
}

static int fill_event(struct trace_build *b, const struct ev *e, size_t *next)
{
	Profd__Trace *tr = b->tr;
	int err = 0;

	err = note_pid(b, e->pid);
	if (!err && (e->type == EV_SAMPLE || e->type == EV_LAUNCH || e->type == EV_API ||
		     e->type == EV_NVTX))
		err = note_thread(b, e->pid, e->tid);
	if (err)
		return err;
	switch (e->type) {
	case EV_SAMPLE: {
		Profd__TraceSample *m = tr->samples[next[0]++];

		profd__trace_sample__init(m);
		m->ts_ns = e->start;
		m->pid = e->pid;
		m->tid = e->tid;
		return dump_tables__stack(b->t, e->stack, &m->stack);
	}
	case EV_LAUNCH: {
		Profd__TraceLaunch *m = tr->launches[next[1]++];

		profd__trace_launch__init(m);
		m->ts_ns = e->start;
		m->pid = e->pid;
		m->tid = e->tid;
		m->correlation_id = e->corr;
		return dump_tables__stack(b->t, e->stack, &m->stack);
	}
	case EV_KERNEL: {
		Profd__TraceKernel *m = tr->kernels[next[2]++];

		profd__trace_kernel__init(m);
		m->start_ns = e->start;
		m->end_ns = e->end;
		m->pid = e->pid;
		m->correlation_id = e->corr;
		m->has_device = e->has_device;
		m->device = e->device;
		m->has_stream = e->has_stream;
		m->stream = e->stream;
		m->has_grid = e->grid != 0;
		m->grid = e->grid;
		m->has_block = e->block != 0;
		m->block = e->block;
		return str_idx(b, e->name ? e->name->s : NULL, &m->name);
	}
	case EV_COPY: {
		Profd__TraceCopy *m = tr->copies[next[3]++];

		profd__trace_copy__init(m);
		m->start_ns = e->start;
		m->end_ns = e->end;
		m->pid = e->pid;
		m->correlation_id = e->corr;
		m->kind = e->kind;
		m->has_bytes = true;
		m->bytes = e->bytes;
		m->has_device = e->has_device;
		m->device = e->device;
		m->has_stream = e->has_stream;
		m->stream = e->stream;
		return 0;
	}
	case EV_API: {
		Profd__TraceApiCall *m = tr->api_calls[next[4]++];

		profd__trace_api_call__init(m);
		m->start_ns = e->start;
		m->end_ns = e->end;
		m->pid = e->pid;
		m->tid = e->tid;
		m->correlation_id = e->corr;
		return str_idx(b, e->name ? e->name->s : NULL, &m->name);
	}
	case EV_NVTX: {
		Profd__TraceNvtx *m = tr->nvtx[next[5]++];

		profd__trace_nvtx__init(m);
		m->start_ns = e->start;
		m->end_ns = e->end;
		m->pid = e->pid;
		m->tid = e->tid;
		m->has_depth = true;
		m->depth = e->depth;
		return str_idx(b, e->name ? e->name->s : NULL, &m->name);
	}
	}
	return -EINVAL;
}

static int fill_meta(struct trace_build *b)
{
	Profd__Trace *tr = b->tr;
	Profd__Process *pb;
	Profd__Thread *tb;
	int err = 0;

	pb = msg_array((void ***)&tr->processes, b->npids, sizeof(*pb));
	tb = msg_array((void ***)&tr->threads, b->nthreads, sizeof(*tb));
	if ((b->npids && !pb) || (b->nthreads && !tb)) {
		free(pb);
		free(tb);
		free(tr->processes);
		free(tr->threads);
		tr->processes = NULL;
		tr->threads = NULL;
		return -ENOMEM;
	}
	tr->n_processes = b->npids;
	tr->n_threads = b->nthreads;
	for (size_t i = 0; i < b->npids && !err; i++) {
		struct store_process_info pi;
		Profd__Process *m = tr->processes[i];
		bool known = store__process(b->g->store, b->pid_list[i], &pi);

		profd__process__init(m);
		m->pid = b->pid_list[i];
		err = str_idx(b, known ? pi.comm : NULL, &m->name);
		if (known && pi.uid != STORE_UID_UNKNOWN) {
			m->has_uid = true;
			m->uid = pi.uid;
		}
		if (known && pi.exited) {
			m->has_exited = true;
			m->exited = true;
		}
	}
	for (size_t i = 0; i < b->nthreads && !err; i++) {
		Profd__Thread *m = tr->threads[i];
		uint32_t pid = (uint32_t)(b->thread_keys[i] >> 32);
		uint32_t tid = (uint32_t)b->thread_keys[i];

		profd__thread__init(m);
		m->pid = pid;
		m->tid = tid;
		err = str_idx(b, store__thread_name(b->g->store, pid, tid), &m->name);
	}
	return err;
}

void gpu__trace_free(Profd__Trace *t)
{
	void **arrays[] = {
	    (void **)t->processes, (void **)t->threads, (void **)t->samples,   (void **)t->launches,
	    (void **)t->kernels,   (void **)t->copies,	(void **)t->api_calls, (void **)t->nvtx,
	};

	if (!t)
		return;
	for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
		if (arrays[i])
			free(arrays[i][0]);
		free(arrays[i]);
	}
	t->processes = NULL;
	t->threads = NULL;
	t->samples = NULL;
	t->launches = NULL;
	t->kernels = NULL;
	t->copies = NULL;
	t->api_calls = NULL;
	t->nvtx = NULL;
	t->n_processes = t->n_threads = t->n_samples = t->n_launches = 0;
	t->n_kernels = t->n_copies = t->n_api_calls = t->n_nvtx = 0;
	dump_tables__free_trace(t);
	free(t);
}

/*
 * Ranges still open are not in the ring yet: they come from the processes' tables, only the
 * ones the query may see. Fills *opens and *names (parallel; caller frees both).
 */
static int collect_opens(struct gpu *g, const struct tfilter *f, struct ev **opens,
			 const char ***names, size_t *n)
{
	size_t cap = 0;

	*opens = NULL;
	*names = NULL;
	*n = 0;
	for (size_t i = 0; g->procs.mask && i <= g->procs.mask; i++) {
		struct gpu_proc *p = g->procs.vals[i];

		if (!p || !pid_wanted(f, p->pid) || (f->q->filter_uid && p->uid != f->q->uid))
			continue;
		for (size_t j = 0; j < p->nopen; j++) {
			struct ev e = { .type = EV_NVTX,
					.pid = p->pid,
					.uid = p->uid,
					.tid = p->open[j].tid,
					.start = p->open[j].start,
					.end = p->open[j].end,
					.depth = p->open[j].depth };

			if (!ev_wanted(f, &e))
				continue;
			if (*n == cap) {
				size_t ncap = cap ? 2 * cap : 64;
				struct ev *no = realloc(*opens, ncap * sizeof(*no));
				const char **nn;

				if (!no)
					return -ENOMEM;
				*opens = no;
				nn = realloc(*names, ncap * sizeof(*nn));
				if (!nn)
					return -ENOMEM;
				*names = nn;
				cap = ncap;
			}
			(*opens)[*n] = e;
			(*names)[*n] = p->open[j].name ? p->open[j].name->s : "[unnamed]";
			(*n)++;
		}
	}
	return 0;
}

int gpu__trace(struct gpu *g, const struct store_query *q, const struct gpu_trace_meta *meta,
	       Profd__Trace **out)
{
	struct trace_build b = { .g = g };
	struct tfilter f = { 0 };
	const struct ev **sel = NULL;
	struct ev *opens = NULL;
	const char **open_names = NULL;
	size_t nsel = 0, nopen = 0, counts[6] = { 0 }, next[6] = { 0 };
	uint64_t oldest = UINT64_MAX, newest = 0;
	Profd__Trace *tr = NULL;
	int err = 0;

	*out = NULL;
	err = tfilter_init(&f, q);
	if (!err)
		err = collect_opens(g, &f, &opens, &open_names, &nopen);
	if (err)
		goto out;
	sel = malloc((g->ring.n + nopen + 1) * sizeof(*sel));
	if (!sel) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < g->ring.n; i++) {
		const struct ev *e = &g->ring.ev[(g->ring.head + i) % g->ring.cap];

		/* Only what the caller may see tells how far back the ring goes. */
		if (!ev_visible(&f, e))
			continue;
		if (e->start < oldest)
			oldest = e->start;
		if (ev_wanted(&f, e))
			sel[nsel++] = e;
	}
	for (size_t i = 0; i < nopen; i++) {
		if (opens[i].start < oldest)
			oldest = opens[i].start;
		sel[nsel++] = &opens[i];
	}
	if (!nsel) {
		err = -ENODATA;
		goto out;
	}
	qsort(sel, nsel, sizeof(*sel), ev_cmp);
	for (size_t i = 0; i < nsel; i++) {
		counts[sel[i]->type - 1]++;
		if (sel[i]->end > newest)
			newest = sel[i]->end;
	}

	b.t = dump_tables__new(g->store, meta ? meta->hide_kernel_addresses : true);
	tr = calloc(1, sizeof(*tr));
	if (!b.t || !tr) {
		err = -ENOMEM;
		goto out;
	}
	profd__trace__init(tr);
	b.tr = tr;
	if ((counts[0] &&
	     !msg_array((void ***)&tr->samples, counts[0], sizeof(Profd__TraceSample))) ||
	    (counts[1] &&
	     !msg_array((void ***)&tr->launches, counts[1], sizeof(Profd__TraceLaunch))) ||
	    (counts[2] &&
	     !msg_array((void ***)&tr->kernels, counts[2], sizeof(Profd__TraceKernel))) ||
	    (counts[3] && !msg_array((void ***)&tr->copies, counts[3], sizeof(Profd__TraceCopy))) ||
	    (counts[4] &&
	     !msg_array((void ***)&tr->api_calls, counts[4], sizeof(Profd__TraceApiCall))) ||
	    (counts[5] && !msg_array((void ***)&tr->nvtx, counts[5], sizeof(Profd__TraceNvtx)))) {
		err = -ENOMEM;
		goto out;
	}
	tr->n_samples = counts[0];
	tr->n_launches = counts[1];
	tr->n_kernels = counts[2];
	tr->n_copies = counts[3];
	tr->n_api_calls = counts[4];
	tr->n_nvtx = counts[5];
	for (size_t i = 0; i < nsel && !err; i++) {
		const struct ev *e = sel[i];

		err = fill_event(&b, e, next);
		/* An open range: its name was taken from its process's table. */
		if (!err && e >= opens && e < opens + nopen)
			err = str_idx(&b, open_names[e - opens], &tr->nvtx[next[5] - 1]->name);
	}
	if (!err)
		err = fill_meta(&b);
	if (err)
		goto out;
	tr->has_start_ns = true;
	tr->start_ns = q->start_ns > oldest ? q->start_ns : oldest;
	tr->has_end_ns = true;
	tr->end_ns = q->end_ns != UINT64_MAX ? q->end_ns : newest;
	tr->has_oldest_ns = true;
	tr->oldest_ns = oldest;
	tr->has_events_overwritten = true;
	tr->events_overwritten = g->ring.overwritten;
	if (meta) {
		tr->has_realtime_offset_ns = true;
		tr->realtime_offset_ns = meta->realtime_offset_ns;
		if (meta->frequency_hz) {
			tr->has_frequency_hz = true;
			tr->frequency_hz = meta->frequency_hz;
		}
	}
	if (q->filter_uid) {
		tr->has_only_uid = true;
		tr->only_uid = q->uid;
	}
	err = dump_tables__finish_trace(b.t, tr);
	if (err)
		goto out;
	*out = tr;
	tr = NULL;
out:
	if (tr)
		gpu__trace_free(tr);
	dump_tables__free(b.t);
	ptrmap_fini(&b.pids);
	ptrmap_fini(&b.threads);
	free(b.pid_list);
	free(b.thread_keys);
	free(sel);
	free(opens);
	free(open_names);
	free(f.pids);
	return err;
}
