// SPDX-License-Identifier: BSD-2-Clause
/*
 * Trace dumps: a window of the timeline's events (and the NVTX ranges still open, which are
 * not in the ring yet) as a protobuf Trace, with the frame, stack and string tables of dump.c.
 */
#include "dump.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "ptrmap.h"

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
static bool ev_visible(const struct tfilter *f, const struct tl_event *e)
{
	const struct store_query *q = f->q;

	if (!pid_wanted(f, e->pid))
		return false;
	if (q->filter_uid && e->uid != q->uid)
		return false;
	/* A thread filter keeps the thread's own events and every GPU record of the process. */
	return !q->tid || !e->tid || e->tid == q->tid;
}

static bool ev_wanted(const struct tfilter *f, const struct tl_event *e)
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
	const struct tl_event *x = *(const struct tl_event *const *)a,
			      *y = *(const struct tl_event *const *)b;

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
	struct store *store;
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
	if (GROW(b->pid_list, b->pids_cap, b->npids + 1))
		return -ENOMEM;
	b->pid_list[b->npids++] = pid;
	return ptrmap_put(&b->pids, pid, (void *)(uintptr_t)b->npids);
}

static int note_thread(struct trace_build *b, uint32_t pid, uint32_t tid)
{
	uint64_t key = (uint64_t)pid << 32 | tid;

	if (!tid || ptrmap_get(&b->threads, key))
		return 0;
	if (GROW(b->thread_keys, b->threads_cap, b->nthreads + 1))
		return -ENOMEM;
	b->thread_keys[b->nthreads++] = key;
	return ptrmap_put(&b->threads, key, (void *)(uintptr_t)b->nthreads);
}

static int str_idx(struct trace_build *b, const char *s, uint32_t *idx)
{
	return dump_tables__string(b->t, s ? s : "", idx);
}

static int fill_event(struct trace_build *b, const struct tl_event *e, size_t *next)
{
	Profd__Trace *tr = b->tr;
	int err = 0;

	err = note_pid(b, e->pid);
	if (!err && (e->type == TL_SAMPLE || e->type == TL_LAUNCH || e->type == TL_API ||
		     e->type == TL_NVTX || e->type == TL_OFFCPU))
		err = note_thread(b, e->pid, e->tid);
	if (err)
		return err;
	switch (e->type) {
	case TL_SAMPLE: {
		Profd__TraceSample *m = tr->samples[next[0]++];

		profd__trace_sample__init(m);
		m->ts_ns = e->start;
		m->pid = e->pid;
		m->tid = e->tid;
		return dump_tables__stack(b->t, e->stack, &m->stack);
	}
	case TL_LAUNCH: {
		Profd__TraceLaunch *m = tr->launches[next[1]++];

		profd__trace_launch__init(m);
		m->ts_ns = e->start;
		m->pid = e->pid;
		m->tid = e->tid;
		m->correlation_id = e->corr;
		return dump_tables__stack(b->t, e->stack, &m->stack);
	}
	case TL_KERNEL: {
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
		return str_idx(b, e->name, &m->name);
	}
	case TL_COPY: {
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
	case TL_API: {
		Profd__TraceApiCall *m = tr->api_calls[next[4]++];

		profd__trace_api_call__init(m);
		m->start_ns = e->start;
		m->end_ns = e->end;
		m->pid = e->pid;
		m->tid = e->tid;
		m->correlation_id = e->corr;
		return str_idx(b, e->name, &m->name);
	}
	case TL_NVTX: {
		Profd__TraceNvtx *m = tr->nvtx[next[5]++];

		profd__trace_nvtx__init(m);
		m->start_ns = e->start;
		m->end_ns = e->end;
		m->pid = e->pid;
		m->tid = e->tid;
		m->has_depth = true;
		m->depth = e->depth;
		return str_idx(b, e->name, &m->name);
	}
	case TL_OFFCPU: {
		Profd__TraceWait *m = tr->waits[next[6]++];

		profd__trace_wait__init(m);
		m->start_ns = e->start;
		m->end_ns = e->end;
		m->pid = e->pid;
		m->tid = e->tid;
		return dump_tables__stack(b->t, e->stack, &m->stack);
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
		bool known = store__process(b->store, b->pid_list[i], &pi);

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
		err = str_idx(b, store__thread_name(b->store, pid, tid), &m->name);
	}
	return err;
}

void dump__trace_free(Profd__Trace *t)
{
	void **arrays[] = {
	    (void **)t->processes, (void **)t->threads, (void **)t->samples,
	    (void **)t->launches,  (void **)t->kernels, (void **)t->copies,
	    (void **)t->api_calls, (void **)t->nvtx,	(void **)t->waits,
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
	t->waits = NULL;
	t->n_processes = t->n_threads = t->n_samples = t->n_launches = 0;
	t->n_kernels = t->n_copies = t->n_api_calls = t->n_nvtx = t->n_waits = 0;
	dump_tables__free_trace(t);
	free(t);
}

int dump__trace(struct store *s, const struct timeline *tl, const struct tl_event *extra,
		size_t nextra, const struct store_query *q, const struct trace_meta *meta,
		Profd__Trace **out)
{
	struct trace_build b = {.store = s};
	struct timeline_stats ts;
	struct tfilter f = {0};
	struct tl_event *evs = NULL, e;
	const struct tl_event **sel = NULL;
	size_t nsel = 0, evs_cap = 0, nring = timeline__count(tl), counts[TL_NTYPES] = {0},
	       next[TL_NTYPES] = {0};
	uint64_t oldest = UINT64_MAX, newest = 0;
	Profd__Trace *tr = NULL;
	int err = 0;

	*out = NULL;
	err = tfilter_init(&f, q);
	if (err)
		goto out;
	/* Copies of the events in the window (the ring keeps samples compact). */
	for (size_t i = 0; i < nring + nextra; i++) {
		if (i < nring) {
			timeline__get(tl, i, &e);
			/* Only what the caller may see tells how far back the ring goes. */
			if (!ev_visible(&f, &e))
				continue;
			if (e.start < oldest)
				oldest = e.start;
			if (!ev_wanted(&f, &e))
				continue;
		} else {
			e = extra[i - nring];
			if (!ev_wanted(&f, &e))
				continue;
			if (e.start < oldest)
				oldest = e.start;
		}
		if (GROW(evs, evs_cap, nsel + 1)) {
			err = -ENOMEM;
			goto out;
		}
		evs[nsel++] = e;
	}
	if (!nsel) {
		err = -ENODATA;
		goto out;
	}
	sel = malloc(nsel * sizeof(*sel));
	if (!sel) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nsel; i++)
		sel[i] = &evs[i];
	qsort(sel, nsel, sizeof(*sel), ev_cmp);
	for (size_t i = 0; i < nsel; i++) {
		counts[sel[i]->type - 1]++;
		if (sel[i]->end > newest)
			newest = sel[i]->end;
	}

	b.t = dump_tables__new(s, meta ? meta->hide_kernel_addresses : true);
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
	    (counts[5] && !msg_array((void ***)&tr->nvtx, counts[5], sizeof(Profd__TraceNvtx))) ||
	    (counts[6] && !msg_array((void ***)&tr->waits, counts[6], sizeof(Profd__TraceWait)))) {
		err = -ENOMEM;
		goto out;
	}
	tr->n_samples = counts[0];
	tr->n_launches = counts[1];
	tr->n_kernels = counts[2];
	tr->n_copies = counts[3];
	tr->n_api_calls = counts[4];
	tr->n_nvtx = counts[5];
	tr->n_waits = counts[6];
	for (size_t i = 0; i < nsel && !err; i++) {
		const struct tl_event *e = sel[i];

		err = fill_event(&b, e, next);
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
	timeline__stats(tl, &ts);
	tr->events_overwritten = ts.overwritten;
	if (meta) {
		tr->has_realtime_offset_ns = true;
		tr->realtime_offset_ns = meta->realtime_offset_ns;
		if (meta->frequency_hz) {
			tr->has_frequency_hz = true;
			tr->frequency_hz = meta->frequency_hz;
		}
		tr->has_samples_lost = meta->has_samples_lost;
		tr->samples_lost = meta->samples_lost;
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
		dump__trace_free(tr);
	dump_tables__free(b.t);
	ptrmap_fini(&b.pids);
	ptrmap_fini(&b.threads);
	free(b.pid_list);
	free(b.thread_keys);
	free(sel);
	free(evs);
	free(f.pids);
	return err;
}
