// SPDX-License-Identifier: BSD-2-Clause
/*
 * The GPU module's front: per-process state of the attached CUPTI libraries, the uplink messages
 * (validated here, before anything is kept), the CPU sample and launch entry points, status, and
 * the store's GC callback. The join and labels live in gpu_join.c, the event ring in gpu_ring.c.
 */
#include "gpu_priv.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "hash.h"
#include "log.h"

#define DEFAULT_TTL_NS (30ull * 1000000000ull)
#define DEFAULT_HOLD_NS (3ull * 1000000000ull)
#define DEFAULT_RING_BYTES (32u << 20)
#define DEFAULT_MAX_PENDING (1u << 20)
#define DEFAULT_MAX_BYTES (256u << 20)
/* Libraries connected at once: each holds a connection, so this is far above the server's. */
#define MAX_PROCS 4096
/* One connection's string table: names of kernels, API calls and NVTX ranges. */
#define MAX_STRINGS 65536
#define MAX_STRING_BYTES (4u << 20)
#define MAX_STRING_LEN 4096
/* A kernel's leaf frame: C++ template kernels demangle to pages; the leaf keeps its head. */
#define MAX_LEAF_LEN 1024
#define MAX_DETAIL_LEN 256
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

/* --- processes ---------------------------------------------------------------------------- */

struct gpu_proc *gpu_proc(const struct gpu *g, uint32_t pid)
{
	return ptrmap_get(&g->procs, pid);
}

/*
 * The uid of pid's events: the one its library connected with (fixed at creation, checked
 * against the process's real uid), else what the store knows.
 */
uint32_t gpu_uid_of(const struct gpu *g, uint32_t pid)
{
	struct store_process_info pi;
	struct gpu_proc *p = gpu_proc(g, pid);

	if (p && !p->uid_refused)
		return p->uid;
	return store__process(g->store, pid, &pi) ? pi.uid : STORE_UID_UNKNOWN;
}

/* --- the memory budget -------------------------------------------------------------------- */

int gpu_charge(struct gpu *g, size_t bytes)
{
	if (bytes > g->o.max_bytes || g->bytes > g->o.max_bytes - bytes)
		return -ENOSPC;
	g->bytes += bytes;
	return 0;
}

void gpu_uncharge(struct gpu *g, size_t bytes)
{
	g->bytes = bytes < g->bytes ? g->bytes - bytes : 0;
}

int gpu_grow(struct gpu *g, void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 4;
	void *na;
	int err;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	err = gpu_charge(g, (ncap - *cap) * elem);
	if (err)
		return err;
	na = realloc(*arr, ncap * elem);
	if (!na) {
		gpu_uncharge(g, (ncap - *cap) * elem);
		return -ENOMEM;
	}
	*arr = na;
	*cap = ncap;
	return 0;
}

void gpu_free_array(struct gpu *g, void *arr, size_t cap, size_t elem)
{
	gpu_uncharge(g, cap * elem);
	free(arr);
}

static size_t gname_cost(size_t len)
{
	return sizeof(struct gname) + len + 1;
}

struct gname *gname_new(struct gpu *g, const char *s, size_t len)
{
	struct gname *n;

	if (gpu_charge(g, gname_cost(len))) {
		errno = ENOSPC;
		return NULL;
	}
	n = malloc(gname_cost(len));
	if (!n) {
		gpu_uncharge(g, gname_cost(len));
		errno = ENOMEM;
		return NULL;
	}
	n->refs = 1;
	n->len = (uint32_t)len;
	memcpy(n->s, s, len);
	n->s[len] = '\0';
	return n;
}

struct gname *gname_ref(struct gname *n)
{
	if (n)
		n->refs++;
	return n;
}

void gname_unref(struct gpu *g, struct gname *n)
{
	if (!n || --n->refs)
		return;
	gpu_uncharge(g, gname_cost(n->len));
	free(n);
}

/* --- string tables ------------------------------------------------------------------------ */

struct gname *gpu_proc_string(const struct gpu_proc *p, uint32_t idx, bool *bad)
{
	*bad = false;
	if (!idx)
		return NULL;
	if (idx > p->nstrs) {
		*bad = true;
		return NULL;
	}
	return idx <= p->nstored ? p->strs[idx - 1].name : NULL;
}

static void proc_reset_strings(struct gpu *g, struct gpu_proc *p)
{
	for (uint32_t i = 0; i < p->nstored; i++) {
		gname_unref(g, p->strs[i].name);
		gname_unref(g, p->strs[i].leaf);
	}
	gpu_free_array(g, p->strs, p->strs_cap, sizeof(*p->strs));
	p->strs = NULL;
	p->nstored = p->strs_cap = p->nstrs = 0;
	p->str_bytes = 0;
}

static void proc_free(struct gpu *g, struct gpu_proc *p)
{
	if (!p)
		return;
	proc_reset_strings(g, p);
	gpu_proc_free_labels(g, p);
	gpu_free_array(g, p->held, p->held_cap, sizeof(*p->held));
	free(p->detail);
	free(p);
	gpu_uncharge(g, sizeof(*p));
}

/*
 * Append one string to the connection's table. A string past the table's bounds (too long,
 * the table full, over the memory budget) is refused but still takes its index, so the
 * library's numbering stays right; names that resolve to a refused string show as unknown.
 */
static int proc_add_string(struct gpu *g, struct gpu_proc *p, const char *s)
{
	size_t len = strnlen(s, MAX_STRING_LEN + 1);
	struct gname *n = NULL;
	size_t cap = p->strs_cap;
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
	if (len <= MAX_STRING_LEN && p->str_bytes + len + 1 <= MAX_STRING_BYTES) {
		n = gname_new(g, s, len);
		if (!n && errno == ENOMEM)
			return -ENOMEM;
	}
	if (n)
		p->str_bytes += len + 1;
	else
		g->strings_refused++;
	p->strs[p->nstored++] = (struct gstr){ .name = n };
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
		e->leaf = gname_new(g, src, utf8_cut(src, strlen(src), MAX_LEAF_LEN));
		if (!e->leaf)
			g->st.refused++;
	}
	free(d);
	return e->leaf;
}

static bool proc_covered(struct gpu *g, uint32_t pid)
{
	return !g->o.covers || g->o.covers(g->o.covers_ctx, pid);
}

static bool proc_enable(struct gpu *g, struct gpu_proc *p)
{
	p->enabled = p->attached && !p->uid_refused && proc_covered(g, p->pid) &&
		     p->state == PROFD__GPU_STATE__GPU_STATE_READY;
	if (!p->enabled)
		gpu_release(g, p, g->now, true);
	return p->enabled;
}

static void update_processes(struct gpu *g)
{
	uint64_t n = 0;

	for (size_t i = 0; g->procs.mask && i <= g->procs.mask; i++) {
		struct gpu_proc *p = g->procs.vals[i];

		n += p && p->attached;
	}
	g->st.processes = n;
}

/* --- GC ----------------------------------------------------------------------------------- */

static void on_gc(struct store *s, enum store_gc_phase phase, void *ctx)
{
	struct gpu *g = ctx;

	for (size_t i = 0; g->procs.mask && i <= g->procs.mask; i++) {
		struct gpu_proc *p = g->procs.vals[i];

		if (!p)
			continue;
		for (size_t j = 0; j < p->nheld; j++) {
			if (phase == STORE_GC_MARK)
				store__gc_keep_stack(s, p->held[j].stack);
			else
				p->held[j].stack = store__gc_remap_stack(s, p->held[j].stack);
		}
	}
	if (g->scratch_stack) {
		if (phase == STORE_GC_MARK)
			store__gc_keep_stack(s, g->scratch_stack);
		else
			g->scratch_stack = store__gc_remap_stack(s, g->scratch_stack);
	}
	gpu_join_gc(g, phase);
	ring_gc(g, phase);
}

/* --- lifecycle ---------------------------------------------------------------------------- */

struct gpu *gpu__new(const struct gpu_opts *opts)
{
	struct gpu *g;

	if (!opts || !opts->store) {
		errno = EINVAL;
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (!g) {
		errno = ENOMEM;
		return NULL;
	}
	g->o = *opts;
	g->store = opts->store;
	if (!g->o.join_ttl_ns)
		g->o.join_ttl_ns = DEFAULT_TTL_NS;
	if (!g->o.hold_ns)
		g->o.hold_ns = DEFAULT_HOLD_NS;
	if (!g->o.ring_bytes)
		g->o.ring_bytes = DEFAULT_RING_BYTES;
	if (!g->o.max_pending)
		g->o.max_pending = DEFAULT_MAX_PENDING;
	if (!g->o.max_bytes)
		g->o.max_bytes = DEFAULT_MAX_BYTES;
	if (ring_init(&g->ring, g->o.ring_bytes)) {
		free(g);
		errno = ENOMEM;
		return NULL;
	}
	store__set_gc_holder(g->store, on_gc, g);
	return g;
}

void gpu__free(struct gpu *g)
{
	if (!g)
		return;
	store__set_gc_holder(g->store, NULL, NULL);
	gpu_join_free_all(g);
	for (size_t i = 0; g->procs.mask && i <= g->procs.mask; i++)
		proc_free(g, g->procs.vals[i]);
	ptrmap_fini(&g->procs);
	ptrmap_fini(&g->joins);
	ptrmap_fini(&g->pjoins);
	ring_fini(&g->ring);
	free(g);
}

/* --- the uplink --------------------------------------------------------------------------- */

static bool valid_state(Profd__GpuState s)
{
	return s >= PROFD__GPU_STATE__GPU_STATE_READY && s <= PROFD__GPU_STATE__GPU_STATE_ERROR;
}

static bool valid_path(const char *p)
{
	size_t len;

	if (!p || p[0] != '/')
		return false;
	len = strnlen(p, PATH_MAX);
	return len < PATH_MAX;
}

/* A copy of a one-line detail: at most MAX_DETAIL_LEN bytes, control characters replaced. */
static char *copy_detail(const char *d)
{
	size_t len = strnlen(d, MAX_DETAIL_LEN);
	char *c = malloc(len + 1);

	if (!c)
		return NULL;
	for (size_t i = 0; i < len; i++)
		c[i] = (unsigned char)d[i] < 0x20 || d[i] == 0x7f ? ' ' : d[i];
	c[len] = '\0';
	return c;
}

static const char *state_name(Profd__GpuState s)
{
	const ProtobufCEnumValue *v =
	    protobuf_c_enum_descriptor_get_value(&profd__gpu_state__descriptor, s);

	return v ? v->name : "?";
}

int gpu__attach(struct gpu *g, uint32_t pid, uint32_t uid, unsigned int flags,
		const Profd__GpuAttach *m, bool *enable)
{
	struct gpu_proc *p;
	char *detail = NULL;
	bool created = false, was_ready, covered;
	int err;

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

	p = gpu_proc(g, pid);
	/* The process and its owner are the connection's: an attach never changes the owner. */
	if (p && p->uid != uid)
		return -EPERM;
	if (m->detail && m->detail[0]) {
		detail = copy_detail(m->detail);
		if (!detail)
			return -ENOMEM;
	}
	if (!p) {
		if (g->procs.n >= MAX_PROCS || gpu_charge(g, sizeof(*p))) {
			free(detail);
			return -ENOMEM;
		}
		p = calloc(1, sizeof(*p));
		if (!p) {
			gpu_uncharge(g, sizeof(*p));
			free(detail);
			return -ENOMEM;
		}
		p->pid = pid;
		p->uid = uid;
		err = ptrmap_put(&g->procs, pid, p);
		if (err) {
			free(p);
			gpu_uncharge(g, sizeof(*p));
			free(detail);
			return err;
		}
		created = true;
	}
	/*
	 * Otherwise the library says again how it stands (its state or clock changed): the string
	 * table and the probe stay. A new connection of the process is a gpu__detach first.
	 */
	was_ready = !created && p->state == PROFD__GPU_STATE__GPU_STATE_READY;
	p->attached = true;
	p->exited = false;
	p->uid_refused = flags & GPU_ATTACH_UID_MISMATCH;
	p->state = m->state;
	free(p->detail);
	p->detail = detail;
	p->clock = m->has_clock ? m->clock : PROFD__GPU_CLOCK__GPU_CLOCK_UNSPECIFIED;
	p->cupti_version = m->has_cupti_version ? m->cupti_version : 0;
	p->launch_rate_limit = m->has_launch_rate_limit ? m->launch_rate_limit : 0;
	covered = proc_covered(g, pid);

	/*
	 * The probe goes on once per process, at its first READY, and stays until the process
	 * leaves: a library that flips between states must not make the daemon attach and detach
	 * uprobes over and over. Processes the session does not cover get none.
	 */
	if (p->state == PROFD__GPU_STATE__GPU_STATE_READY && !p->probe_attached && covered &&
	    !p->uid_refused && g->o.attach_probe) {
		err = g->o.attach_probe(g->o.probe_ctx, pid, m->library_path);
		if (err)
			pr_warn(
			    "gpu: pid %u: cannot attach the launch probe to %s: %s (its GPU time "
			    "goes to \"[launch stack unknown]\")",
			    pid, m->library_path, strerror(-err));
		p->probe_attached = !err;
	}
	if (p->uid_refused)
		pr_warn("gpu: pid %u: the CUPTI library's connection runs as uid %u, not as the "
			"process's owner: its GPU data is refused",
			pid, uid);
	else if (p->state == PROFD__GPU_STATE__GPU_STATE_READY && (created || !was_ready))
		pr_info("gpu: pid %u: CUPTI library %s", pid, created ? "attached" : "ready");
	else if (created)
		pr_info("gpu: pid %u: CUPTI library attached, not collecting: %s%s%s", pid,
			state_name(p->state), p->detail ? ": " : "", p->detail ? p->detail : "");
	else
		/* Libraries say how they stand again and again: not worth a line each time. */
		pr_debug("gpu: pid %u: CUPTI library attached again: %s%s%s", pid,
			 state_name(p->state), p->detail ? ": " : "", p->detail ? p->detail : "");
	*enable = proc_enable(g, p);
	update_processes(g);
	return 0;
}

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

static void ev_device(struct ev *e, bool has_device, uint32_t device, bool has_stream,
		      uint32_t stream)
{
	e->has_device = has_device;
	e->device = device;
	e->has_stream = has_stream;
	e->stream = stream;
}

static int batch_kernel(struct gpu *g, struct gpu_proc *p, const Profd__GpuKernel *k)
{
	struct wait_rec r = { 0 };
	struct ev e = { 0 };
	struct gname *leaf;
	uint32_t idx = k->has_name ? k->name : 0;
	bool bad;
	int err;

	gpu_proc_string(p, idx, &bad);
	if (bad || !valid_times(g, k->start_ns, k->end_ns)) {
		g->st.bad_records++;
		return 0;
	}
	g->st.records++;
	if (gpu_busy_add(g, p, k->start_ns, k->end_ns))
		g->st.refused++;
	leaf = kernel_leaf(g, p, idx);
	e.type = EV_KERNEL;
	e.pid = p->pid;
	e.uid = p->uid;
	e.corr = k->correlation_id;
	e.start = k->start_ns;
	e.end = k->end_ns;
	ev_device(&e, k->has_device, k->device, k->has_stream, k->stream);
	e.grid = k->has_grid ? k->grid : 0;
	e.block = k->has_block ? k->block : 0;
	err = ring_push(&g->ring, &e, leaf ? leaf->s : "[unknown kernel]");
	if (err)
		return err;
	if (k->weight == 0) {
		g->st.unprobed++;
		return 0;
	}
	r.start = k->start_ns;
	r.end = k->end_ns;
	r.weight = k->weight;
	r.leaf = gname_ref(leaf);
	return gpu_join_record(g, p->pid, &r, k->correlation_id);
}

static int batch_copy(struct gpu *g, struct gpu_proc *p, const Profd__GpuCopy *c)
{
	struct wait_rec r = { 0 };
	struct ev e = { 0 };
	int err;

	if (!valid_times(g, c->start_ns, c->end_ns) ||
	    c->kind < PROFD__GPU_COPY_KIND__GPU_COPY_UNKNOWN ||
	    c->kind > PROFD__GPU_COPY_KIND__GPU_COPY_MEMSET ||
	    (c->has_bytes && c->bytes > MAX_COPY_BYTES)) {
		g->st.bad_records++;
		return 0;
	}
	g->st.records++;
	e.type = EV_COPY;
	e.kind = (uint8_t)c->kind;
	e.pid = p->pid;
	e.uid = p->uid;
	e.corr = c->correlation_id;
	e.start = c->start_ns;
	e.end = c->end_ns;
	e.bytes = c->has_bytes ? c->bytes : 0;
	ev_device(&e, c->has_device, c->device, c->has_stream, c->stream);
	err = ring_push(&g->ring, &e, NULL);
	if (err)
		return err;
	if (c->weight == 0) {
		g->st.unprobed++;
		return 0;
	}
	r.is_copy = true;
	r.kind = c->kind;
	r.start = c->start_ns;
	r.end = c->end_ns;
	r.bytes = e.bytes;
	r.weight = c->weight;
	return gpu_join_record(g, p->pid, &r, c->correlation_id);
}

static int batch_api(struct gpu *g, struct gpu_proc *p, const Profd__GpuApiCall *a)
{
	struct ev e = { 0 };
	struct gname *name;
	bool bad;

	name = gpu_proc_string(p, a->has_name ? a->name : 0, &bad);
	if (bad || !a->tid || !valid_times(g, a->start_ns, a->end_ns)) {
		g->st.bad_records++;
		return 0;
	}
	e.type = EV_API;
	e.pid = p->pid;
	e.tid = a->tid;
	e.uid = p->uid;
	e.corr = a->correlation_id;
	e.start = a->start_ns;
	e.end = a->end_ns;
	return ring_push(&g->ring, &e, name ? name->s : "[unknown]");
}

static int batch_nvtx(struct gpu *g, struct gpu_proc *p, const Profd__GpuNvtxRange *n)
{
	struct ev e = { 0 };
	struct gname *name;
	bool bad;

	name = gpu_proc_string(p, n->name, &bad);
	if (bad || !n->tid || !valid_times(g, n->start_ns, n->end_ns)) {
		g->st.bad_records++;
		return 0;
	}
	/* Marks (start == end) label nothing but still close their open version. */
	if (gpu_nvtx_add(g, p, n, name))
		g->st.refused++;
	if (n->has_open && n->open)
		return 0; /* into the ring once closed; traces take open ones from the table */
	e.type = EV_NVTX;
	e.pid = p->pid;
	e.tid = n->tid;
	e.uid = p->uid;
	e.start = n->start_ns;
	e.end = n->end_ns;
	e.depth = n->has_depth ? n->depth : 0;
	return ring_push(&g->ring, &e, name ? name->s : "[unnamed]");
}

/* What makes the whole batch malformed, checked before any of it is kept. */
static bool batch_malformed(const Profd__GpuBatch *m)
{
	if (m->has_dropped && m->dropped > MAX_DROPPED)
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
	return false;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
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
	/* NVTX first: the kernels and samples of this batch are labelled with them. */
	for (size_t i = 0; i < m->n_nvtx && !err; i++)
		err = batch_nvtx(g, p, m->nvtx[i]);
	for (size_t i = 0; i < m->n_api_calls && !err; i++)
		err = batch_api(g, p, m->api_calls[i]);
	for (size_t i = 0; i < m->n_kernels && !err; i++)
		err = batch_kernel(g, p, m->kernels[i]);
	for (size_t i = 0; i < m->n_copies && !err; i++)
		err = batch_copy(g, p, m->copies[i]);
	if (m->has_dropped)
		g->st.dropped = sat_add(g->st.dropped, m->dropped);
	/* Bounded like a record's end: a far-future mark would release every later sample. */
	if (m->has_complete_until_ns && m->complete_until_ns > p->complete_until_ns &&
	    (!g->now || m->complete_until_ns <= g->now + MAX_FUTURE_NS))
		p->complete_until_ns = m->complete_until_ns;
	gpu_release(g, p, g->now, false);
	*enable = proc_enable(g, p);
	return err;
}

static void proc_finish(struct gpu *g, struct gpu_proc *p)
{
	gpu_release(g, p, g->now, true);
	if (p->probe_attached && g->o.detach_probe)
		g->o.detach_probe(g->o.probe_ctx, p->pid);
	p->probe_attached = false;
	p->attached = p->enabled = false;
}

void gpu__detach(struct gpu *g, uint32_t pid)
{
	struct gpu_proc *p = gpu_proc(g, pid);

	if (!p)
		return;
	pr_info("gpu: pid %u: CUPTI library disconnected", pid);
	proc_finish(g, p);
	ptrmap_del(&g->procs, pid);
	proc_free(g, p);
	update_processes(g);
}

/* --- samples and launches ----------------------------------------------------------------- */

int gpu__cpu_sample(struct gpu *g, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack)
{
	struct gpu_proc *p = gpu_proc(g, pid);
	struct ev e = { .type = EV_SAMPLE,
			.pid = pid,
			.tid = tid,
			.stack = stack,
			.start = ts_ns,
			.end = ts_ns };
	int err;

	e.uid = gpu_uid_of(g, pid);
	err = ring_push(&g->ring, &e, NULL);
	if (err)
		return err;
	if (p && p->enabled)
		return gpu_hold(g, p, ts_ns, tid, stack);
	return store__add(g->store, ts_ns, pid, tid, stack, STORE_VALUE_CPU_SAMPLES, 1);
}

int gpu__launch(struct gpu *g, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack,
		uint32_t corr_id)
{
	struct ev e = { .type = EV_LAUNCH,
			.pid = pid,
			.tid = tid,
			.stack = stack,
			.corr = corr_id,
			.start = ts_ns,
			.end = ts_ns };
	int err;

	if (!corr_id || !stack)
		return 0;
	g->st.launches++;
	e.uid = gpu_uid_of(g, pid);
	err = ring_push(&g->ring, &e, NULL);
	if (err)
		return err;
	return gpu_join_launch(g, ts_ns, pid, tid, stack, corr_id);
}

int gpu__uprobe_launch(struct gpu *g, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack)
{
	struct ev e = { .type = EV_LAUNCH,
			.pid = pid,
			.tid = tid,
			.stack = stack,
			.start = ts_ns,
			.end = ts_ns };
	int err;

	g->st.uprobe_launches++;
	e.uid = gpu_uid_of(g, pid);
	err = ring_push(&g->ring, &e, NULL);
	if (err)
		return err;
	return store__add(g->store, ts_ns, pid, tid, stack, STORE_VALUE_UPROBE_LAUNCHES, 1);
}

void gpu__process_exited(struct gpu *g, uint32_t pid)
{
	struct gpu_proc *p = gpu_proc(g, pid);

	if (p)
		p->exited = true;
}

void gpu__clock(struct gpu *g, uint64_t now_ns)
{
	if (now_ns > g->now)
		g->now = now_ns;
}

void gpu__tick(struct gpu *g, uint64_t now_ns)
{
	uint32_t gone[64];
	size_t ngone = 0;

	gpu__clock(g, now_ns);
	/* First: a launch that went no longer holds back samples or keeps labels. */
	gpu_join_expire(g, g->now);
	for (size_t i = 0; g->procs.mask && i <= g->procs.mask; i++) {
		struct gpu_proc *p = g->procs.vals[i];

		if (!p)
			continue;
		gpu_release(g, p, g->now, false);
		gpu_prune(g, p, g->now);
		if (p->exited && ngone < sizeof(gone) / sizeof(gone[0]))
			gone[ngone++] = p->pid;
	}
	for (size_t i = 0; i < ngone; i++) {
		struct gpu_proc *p = gpu_proc(g, gone[i]);

		/* What waits for this process can no longer come: settle it now. */
		gpu_join_expire_pid(g, gone[i]);
		proc_finish(g, p);
		ptrmap_del(&g->procs, gone[i]);
		proc_free(g, p);
	}
	if (ngone)
		update_processes(g);
}

void gpu__stats(const struct gpu *g, struct gpu_stats *out)
{
	*out = g->st;
	out->held = g->nheld;
	out->ring_events = g->ring.n;
	out->ring_overwritten = g->ring.overwritten;
	out->bytes = g->bytes;
}

size_t gpu__status(struct gpu *g, Profd__GpuProcessStatus **out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; g->procs.mask && i <= g->procs.mask; i++) {
		struct gpu_proc *p = g->procs.vals[i];
		Profd__GpuProcessStatus *s;

		if (!p || !p->attached)
			continue;
		if (n < max) {
			s = &p->st;
			profd__gpu_process_status__init(s);
			s->pid = p->pid;
			s->state = p->state;
			s->detail = p->uid_refused ? (char *)"refused: the library's connection "
							     "does not run as the process's owner"
						   : p->detail;
			s->has_enabled = true;
			s->enabled = p->enabled;
			if (p->clock) {
				s->has_clock = true;
				s->clock = p->clock;
			}
			if (p->cupti_version) {
				s->has_cupti_version = true;
				s->cupti_version = p->cupti_version;
			}
			out[n] = s;
		}
		n++;
	}
	return n;
}
