// SPDX-License-Identifier: BSD-2-Clause
/*
 * The uplink's batches: the connection's string table grows, and each kernel, copy, API call and
 * NVTX range is validated before anything of it is kept, then goes to the timeline, the labels
 * and the join.
 */
#include "gpu_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

#include "demangle.h"
#include "satmath.h"

/* One connection's string table: names of kernels, API calls and NVTX ranges. */
#define MAX_STRINGS 65536
#define MAX_STRING_BYTES (4u << 20)
#define MAX_STRING_LEN 4096
/* A kernel's leaf frame: C++ template kernels demangle to pages; the leaf keeps its head. */
#define MAX_LEAF_LEN 1024
/* A kernel or copy longer than this is a broken clock, not a real record. */
#define MAX_RECORD_NS (3600ull * 1000000000ull)
/* How far in the future (a clock running ahead of ours) a record may end. */
#define MAX_FUTURE_NS (60ull * 1000000000ull)
/*
 * A weight is how many launches one probed launch stands for: the library's rate limit allows
 * at most this many per probed one. Larger is a broken or hostile library.
 */
#define MAX_WEIGHT 65536u
/* Records one batch may say were lost: far beyond any real pool. */
#define MAX_DROPPED (1ull << 32)
/* One copy moves at most this much: no device has more memory. */
#define MAX_COPY_BYTES (1ull << 44)
/* A single allocation larger than this (1 PiB) is a broken record. */
#define MAX_MEMORY_BYTES (1ull << 50)

/* --- string tables ------------------------------------------------------------------------ */

/*
 * Append one string to the connection's table. A string past the table's bounds (too long,
 * the table full, over the memory budget) is refused but still takes its index, so the
 * library's numbering stays right; names that resolve to a refused string show as unknown.
 */
static int proc_add_string(struct gpu *g, struct gpu_proc *p, const char *s)
{
	size_t len = strnlen(s, MAX_STRING_LEN + 1);
	struct gname *n = NULL;
	size_t cap = p->strs_cap, cost;
	int err;

	if (p->nstrs == UINT32_MAX)
		return -EINVAL;
	p->nstrs++;
	if (p->nstored < p->nstrs - 1 || p->nstored >= MAX_STRINGS)
		goto refused; /* full: every later index is a refused one */
	err = gpu_grow(g, (void **)&p->strs, &cap, p->nstored + 1, sizeof(*p->strs));
	if (err == -ENOMEM)
		return err;
	if (err)
		goto refused;
	p->strs_cap = (uint32_t)cap;
	/* The user's bound counts what the string costs, names of a few bytes included. */
	cost = len + 1 + sizeof(*n) + sizeof(*p->strs);
	if (len <= MAX_STRING_LEN && p->str_bytes + len + 1 <= MAX_STRING_BYTES &&
	    gpu_uid_string_add(g, p->uid, cost)) {
		n = gname_new(g, s, len);
		if (!n)
			gpu_uid_string_sub(g, p->uid, cost);
		if (!n && errno == ENOMEM)
			return -ENOMEM;
	}
	if (n) {
		p->str_bytes += len + 1;
		p->str_uid_bytes += cost;
	} else
		g->strings_refused++;
	p->strs[p->nstored++] = (struct gstr){.name = n};
	return 0;
refused:
	g->strings_refused++;
	return 0;
}

/* Up to max bytes of s, not cutting a UTF-8 sequence in two. */
static size_t utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

/*
 * The leaf frame name of string idx as a kernel: demangled once per table entry (a kernel
 * launched a million times is demangled once), at most MAX_LEAF_LEN bytes. Returns a borrowed
 * name, or NULL for no name (unnamed, refused) or no memory: the caller shows a stand-in.
 */
static struct gname *kernel_leaf(struct gpu *g, struct gpu_proc *p, uint32_t idx)
{
	struct gstr *e;
	const char *src;
	char *d;

	if (!idx || idx > p->nstored || !p->strs[idx - 1].name)
		return NULL;
	e = &p->strs[idx - 1];
	if (e->leaf)
		return e->leaf;
	d = demangle(e->name->s);
	src = d ? d : e->name->s;
	if (!d && e->name->len <= MAX_LEAF_LEN) {
		e->leaf = gname_ref(e->name); /* as sent */
	} else {
		size_t len = utf8_cut(src, strlen(src), MAX_LEAF_LEN);
		size_t cost = len + 1 + sizeof(*e->leaf);

		/* A name of the table too: counted against its user's bound. */
		if (gpu_uid_string_add(g, p->uid, cost)) {
			e->leaf = gname_new(g, src, len);
			if (e->leaf)
				p->str_uid_bytes += cost;
			else
				gpu_uid_string_sub(g, p->uid, cost);
		}
		if (!e->leaf)
			g->st.refused++;
	}
	free(d);
	return e->leaf;
}

/* --- records ---------------------------------------------------------------------------- */

/*
 * A record's times: a real interval, ended no earlier than anything the join could still take
 * (TTL + hold ago) and no later than a minute ahead of our clock. Times far off would create
 * store buckets after every real one, or labels nobody prunes.
 */
static bool valid_times(const struct gpu *g, uint64_t start, uint64_t end)
{
	uint64_t back = g->o.join_ttl_ns + g->o.hold_ns;

	if (!start || end < start || end - start > MAX_RECORD_NS)
		return false;
	if (!g->now)
		return true; /* no clock yet */
	return start >= (g->now > back ? g->now - back : 0) && end <= g->now + MAX_FUTURE_NS;
}

static void ev_device(struct tl_event *e, bool has_device, uint32_t device, bool has_stream,
		      uint32_t stream)
{
	e->has_device = has_device;
	e->device = device;
	e->has_stream = has_stream;
	e->stream = stream;
}

/* A timeline event of process p over [start, end]. */
static struct tl_event ev_of(const struct gpu_proc *p, enum tl_type type, uint32_t corr,
			     uint64_t start, uint64_t end)
{
	return (struct tl_event){
	    .type = type, .pid = p->pid, .uid = p->uid, .corr = corr, .start = start, .end = end};
}

/* A record the launch probe did not see (weight 0) is in the timeline only: nothing to join. */
static int join_weighted(struct gpu *g, struct gpu_proc *p, struct wait_rec *r, uint32_t corr)
{
	if (r->weight == 0) {
		gname_unref(g, r->leaf);
		g->st.unprobed++;
		return 0;
	}
	return gpu_join_record(g, p->pid, r, corr);
}

/*
 * start = end = 0: CUPTI 12.6u2 to 13.0.x may leave a record's timestamps out (libraries of
 * this version count those themselves and do not send them). Its time is lost, and counted as
 * that, not as a malformed record.
 */
static bool zero_time(struct gpu *g, struct gpu_proc *p, uint64_t start, uint64_t end)
{
	if (start || end)
		return false;
	g->st.zero_time_records = sat_add(g->st.zero_time_records, 1);
	p->zero_time_records = sat_add(p->zero_time_records, 1);
	return true;
}

static int batch_kernel(struct gpu *g, struct gpu_proc *p, const Profd__GpuKernel *k)
{
	struct wait_rec r = {0};
	struct tl_event e;
	struct gname *leaf;
	uint32_t idx = k->has_name ? k->name : 0;
	bool bad;
	int err;

	gpu_proc_string(p, idx, &bad);
	if (!bad && zero_time(g, p, k->start_ns, k->end_ns))
		return 0;
	if (bad || !valid_times(g, k->start_ns, k->end_ns)) {
		g->st.bad_records++;
		return 0;
	}
	g->st.records++;
	if (gpu_busy_add(g, p, k->start_ns, k->end_ns))
		g->st.refused++;
	leaf = kernel_leaf(g, p, idx);
	e = ev_of(p, TL_KERNEL, k->correlation_id, k->start_ns, k->end_ns);
	ev_device(&e, k->has_device, k->device, k->has_stream, k->stream);
	e.grid = k->has_grid ? k->grid : 0;
	e.block = k->has_block ? k->block : 0;
	e.name = leaf ? leaf->s : "[unknown kernel]";
	err = gpu_timeline_push(g, &e);
	if (err)
		return err;
	r.start = k->start_ns;
	r.end = k->end_ns;
	r.weight = k->weight;
	r.leaf = gname_ref(leaf);
	return join_weighted(g, p, &r, k->correlation_id);
}

static int batch_copy(struct gpu *g, struct gpu_proc *p, const Profd__GpuCopy *c)
{
	struct wait_rec r = {0};
	struct tl_event e;
	int err;

	if (zero_time(g, p, c->start_ns, c->end_ns))
		return 0;
	if (!valid_times(g, c->start_ns, c->end_ns) ||
	    c->kind < PROFD__GPU_COPY_KIND__GPU_COPY_UNKNOWN ||
	    c->kind > PROFD__GPU_COPY_KIND__GPU_COPY_MEMSET ||
	    (c->has_bytes && c->bytes > MAX_COPY_BYTES)) {
		g->st.bad_records++;
		return 0;
	}
	g->st.records++;
	e = ev_of(p, TL_COPY, c->correlation_id, c->start_ns, c->end_ns);
	e.kind = (uint8_t)c->kind;
	e.bytes = c->has_bytes ? c->bytes : 0;
	ev_device(&e, c->has_device, c->device, c->has_stream, c->stream);
	err = gpu_timeline_push(g, &e);
	if (err)
		return err;
	r.is_copy = true;
	r.kind = (enum gpu_copy_kind)c->kind;
	r.start = c->start_ns;
	r.end = c->end_ns;
	r.bytes = e.bytes;
	r.weight = c->weight;
	return join_weighted(g, p, &r, c->correlation_id);
}

/*
 * An allocation joins its launch stack as a kernel does, and is tracked by address for what is
 * live; a release only ends the allocation of its address. Neither goes to the timeline.
 */
static int batch_memory(struct gpu *g, struct gpu_proc *p, const Profd__GpuMemory *m)
{
	uint32_t device = m->has_device ? m->device : 0;
	struct wait_rec r = {0};
	int err;

	if (!valid_times(g, m->ts_ns, m->ts_ns) || !m->address || m->bytes > MAX_MEMORY_BYTES ||
	    (!m->release && !m->bytes)) {
		g->st.bad_records++;
		return 0;
	}
	if (m->release) {
		gpu_mem_release(g, p->pid, device, m->address, m->ts_ns);
		return 0;
	}
	err = gpu_mem_alloc(g, p->pid, p->uid, device, m->address, m->bytes, m->ts_ns);
	if (err)
		return err;
	r.start = r.end = m->ts_ns;
	r.bytes = m->bytes;
	r.address = m->address;
	r.weight = 1;
	r.mem = m->has_pool && m->pool	       ? GPU_MEM_POOL
		: m->has_managed && m->managed ? GPU_MEM_MANAGED
					       : GPU_MEM_DEVICE;
	return gpu_join_record(g, p->pid, &r, m->correlation_id);
}

static int batch_api(struct gpu *g, struct gpu_proc *p, const Profd__GpuApiCall *a)
{
	struct tl_event e;
	struct gname *name;
	bool bad;

	name = gpu_proc_string(p, a->has_name ? a->name : 0, &bad);
	if (bad || !a->tid || !valid_times(g, a->start_ns, a->end_ns)) {
		g->st.bad_records++;
		return 0;
	}
	e = ev_of(p, TL_API, a->correlation_id, a->start_ns, a->end_ns);
	e.tid = a->tid;
	e.name = name ? name->s : "[unknown]";
	return gpu_timeline_push(g, &e);
}

static int batch_nvtx(struct gpu *g, struct gpu_proc *p, const Profd__GpuNvtxRange *n)
{
	struct tl_event e = {0};
	struct nvtx_range r;
	struct gname *name;
	bool bad;

	name = gpu_proc_string(p, n->name, &bad);
	if (bad || !n->tid || !valid_times(g, n->start_ns, n->end_ns)) {
		g->st.bad_records++;
		return 0;
	}
	/* Marks (start == end) label nothing but still close their open version. */
	r = (struct nvtx_range){
	    .start = n->start_ns,
	    .end = n->end_ns,
	    .tid = n->tid,
	    .depth = n->has_depth ? n->depth : 0,
	    .open = n->has_open && n->open,
	};
	if (gpu_nvtx_add(g, p, &r, name))
		g->st.refused++;
	if (n->has_open && n->open)
		return 0; /* to the timeline once closed; traces take open ones from the table */
	e = ev_of(p, TL_NVTX, 0, n->start_ns, n->end_ns);
	e.tid = n->tid;
	e.depth = n->has_depth ? n->depth : 0;
	e.name = name ? name->s : "[unnamed]";
	return gpu_timeline_push(g, &e);
}

/* What makes the whole batch malformed, checked before any of it is kept. */
static bool batch_malformed(const Profd__GpuBatch *m)
{
	if ((m->has_dropped && m->dropped > MAX_DROPPED) ||
	    (m->has_zero_time_records && m->zero_time_records > MAX_DROPPED) ||
	    (m->has_forced_flushes && m->forced_flushes > MAX_DROPPED))
		return true;
	for (size_t i = 0; i < m->n_kernels; i++)
		if (!m->kernels[i] || m->kernels[i]->weight > MAX_WEIGHT)
			return true;
	for (size_t i = 0; i < m->n_copies; i++)
		if (!m->copies[i] || m->copies[i]->weight > MAX_WEIGHT)
			return true;
	for (size_t i = 0; i < m->n_nvtx; i++)
		if (!m->nvtx[i])
			return true;
	for (size_t i = 0; i < m->n_api_calls; i++)
		if (!m->api_calls[i])
			return true;
	for (size_t i = 0; i < m->n_memory; i++)
		if (!m->memory[i])
			return true;
	return false;
}

int gpu__batch(struct gpu *g, uint32_t pid, const Profd__GpuBatch *m, bool *enable)
{
	struct gpu_proc *p = gpu_proc(g, pid);
	int err = 0;

	*enable = false;
	if (!p || !p->attached || !m || batch_malformed(m))
		return -EINVAL;
	if (p->uid_refused)
		return -EPERM;
	for (size_t i = 0; i < m->n_strings && !err; i++)
		err = proc_add_string(g, p, m->strings[i] ? m->strings[i] : "");
	/* Over the rate: the strings above keep the numbering, nothing else of it is taken. */
	if (!err && !gpu_rate_admit(g, p, m))
		return -EBUSY;
	/* NVTX first: the kernels and samples of this batch are labelled with them. */
	for (size_t i = 0; i < m->n_nvtx && !err; i++)
		err = batch_nvtx(g, p, m->nvtx[i]);
	for (size_t i = 0; i < m->n_api_calls && !err; i++)
		err = batch_api(g, p, m->api_calls[i]);
	for (size_t i = 0; i < m->n_kernels && !err; i++)
		err = batch_kernel(g, p, m->kernels[i]);
	for (size_t i = 0; i < m->n_copies && !err; i++)
		err = batch_copy(g, p, m->copies[i]);
	for (size_t i = 0; i < m->n_memory && !err; i++)
		err = batch_memory(g, p, m->memory[i]);
	if (m->has_dropped)
		g->st.dropped = sat_add(g->st.dropped, m->dropped);
	if (m->has_zero_time_records) {
		g->st.zero_time_records = sat_add(g->st.zero_time_records, m->zero_time_records);
		p->zero_time_records = sat_add(p->zero_time_records, m->zero_time_records);
	}
	if (m->has_forced_flushes) {
		g->st.forced_flushes = sat_add(g->st.forced_flushes, m->forced_flushes);
		p->forced_flushes = sat_add(p->forced_flushes, m->forced_flushes);
	}
	/* Bounded like a record's end: a far-future mark would release every later sample. */
	if (m->has_complete_until_ns && m->complete_until_ns > p->complete_until_ns &&
	    (!g->now || m->complete_until_ns <= g->now + MAX_FUTURE_NS))
		p->complete_until_ns = m->complete_until_ns;
	gpu_release(g, p, g->now, false);
	*enable = gpu_proc_enable(g, p);
	return err;
}

/* --- attach --------------------------------------------------------------------------------- */

/* The module's enums are the wire's numbers: decoding is a cast. */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(GPU_STATE_READY, PROFD__GPU_STATE__GPU_STATE_READY) &&
		   SAME(GPU_STATE_NO_CUPTI, PROFD__GPU_STATE__GPU_STATE_NO_CUPTI) &&
		   SAME(GPU_STATE_CUPTI_TOO_OLD, PROFD__GPU_STATE__GPU_STATE_CUPTI_TOO_OLD) &&
		   SAME(GPU_STATE_SUBSCRIBER_TAKEN, PROFD__GPU_STATE__GPU_STATE_SUBSCRIBER_TAKEN) &&
		   SAME(GPU_STATE_ERROR, PROFD__GPU_STATE__GPU_STATE_ERROR) &&
		   SAME(GPU_STATE_ACTIVITY_TAKEN, PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN),
	       "enum gpu_state is the wire's GpuState");
_Static_assert(SAME(GPU_CLOCK_UNSPECIFIED, PROFD__GPU_CLOCK__GPU_CLOCK_UNSPECIFIED) &&
		   SAME(GPU_CLOCK_CALLBACK, PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK) &&
		   SAME(GPU_CLOCK_OFFSET, PROFD__GPU_CLOCK__GPU_CLOCK_OFFSET),
	       "enum gpu_clock is the wire's GpuClock");
_Static_assert(SAME(GPU_COPY_UNKNOWN, PROFD__GPU_COPY_KIND__GPU_COPY_UNKNOWN) &&
		   SAME(GPU_COPY_HTOD, PROFD__GPU_COPY_KIND__GPU_COPY_HTOD) &&
		   SAME(GPU_COPY_DTOH, PROFD__GPU_COPY_KIND__GPU_COPY_DTOH) &&
		   SAME(GPU_COPY_DTOD, PROFD__GPU_COPY_KIND__GPU_COPY_DTOD) &&
		   SAME(GPU_COPY_HTOH, PROFD__GPU_COPY_KIND__GPU_COPY_HTOH) &&
		   SAME(GPU_COPY_PTOP, PROFD__GPU_COPY_KIND__GPU_COPY_PTOP) &&
		   SAME(GPU_COPY_MEMSET, PROFD__GPU_COPY_KIND__GPU_COPY_MEMSET),
	       "enum gpu_copy_kind is the wire's GpuCopyKind");

static bool valid_state(Profd__GpuState s)
{
	return s >= PROFD__GPU_STATE__GPU_STATE_READY &&
	       s <= PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN;
}

static bool valid_path(const char *p)
{
	size_t len;

	if (!p || p[0] != '/')
		return false;
	len = strnlen(p, PATH_MAX);
	return len < PATH_MAX;
}

int gpu__attach(struct gpu *g, uint32_t pid, uint32_t uid, unsigned int flags,
		const Profd__GpuAttach *m, bool *enable)
{
	struct gpu_attach_info a;

	*enable = false;
	if (!pid || !m || !valid_state(m->state))
		return -EINVAL;
	if (m->has_clock && (m->clock < PROFD__GPU_CLOCK__GPU_CLOCK_UNSPECIFIED ||
			     m->clock > PROFD__GPU_CLOCK__GPU_CLOCK_OFFSET))
		return -EINVAL;
	if (m->library_path && !valid_path(m->library_path))
		return -EINVAL;
	if (m->state == PROFD__GPU_STATE__GPU_STATE_READY && !m->library_path)
		return -EINVAL;
	a = (struct gpu_attach_info){
	    .state = (enum gpu_state)m->state,
	    .detail = m->detail,
	    .library_path = m->library_path,
	    .clock = m->has_clock ? (enum gpu_clock)m->clock : GPU_CLOCK_UNSPECIFIED,
	    .cupti_version = m->has_cupti_version ? m->cupti_version : 0,
	    .launch_rate_limit = m->has_launch_rate_limit ? m->launch_rate_limit : 0,
	    .max_delay_ms = m->has_max_delay_ms ? m->max_delay_ms : 0,
	};
	return gpu_proc_attach(g, pid, uid, flags, &a, enable);
}
