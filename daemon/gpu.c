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
/* Libraries connected at once: each holds a connection, so this is far above the server's. */
#define MAX_PROCS 4096
/* One connection's string table: names of kernels, API calls and NVTX ranges. */
#define MAX_STRINGS 65536
#define MAX_STRING_BYTES (4u << 20)
#define MAX_STRING_LEN 4096
#define MAX_DETAIL_LEN 256
/* A kernel or copy longer than this is a broken clock, not a real record. */
#define MAX_RECORD_NS (3600ull * 1000000000ull)

/* --- processes ---------------------------------------------------------------------------- */

struct gpu_proc *gpu_proc(const struct gpu *g, uint32_t pid)
{
	return ptrmap_get(&g->procs, pid);
}

uint32_t gpu_uid_of(const struct gpu *g, uint32_t pid)
{
	struct store_process_info pi;
	struct gpu_proc *p = gpu_proc(g, pid);

	if (p)
		return p->uid;
	return store__process(g->store, pid, &pi) ? pi.uid : STORE_UID_UNKNOWN;
}

const char *gpu_proc_string(const struct gpu_proc *p, uint32_t idx, bool *bad)
{
	*bad = false;
	if (!idx)
		return NULL;
	if (idx > p->nstrs) {
		*bad = true;
		return NULL;
	}
	return p->strs[idx - 1];
}

static void proc_reset_strings(struct gpu_proc *p)
{
	for (uint32_t i = 0; i < p->nstrs; i++)
		free(p->strs[i]);
	free(p->strs);
	p->strs = NULL;
	p->nstrs = p->strs_cap = 0;
	p->str_bytes = 0;
}

static void proc_free(struct gpu_proc *p)
{
	if (!p)
		return;
	proc_reset_strings(p);
	gpu_proc_free_labels(p);
	free(p->held);
	free(p->detail);
	free(p);
}

/*
 * Append one string to the connection's table. Past the table's bounds a string is refused but
 * still takes its index (as NULL), so the library's numbering stays right; names that resolve
 * to a refused string show as unknown.
 */
static int proc_add_string(struct gpu *g, struct gpu_proc *p, const char *s)
{
	size_t len = strnlen(s, MAX_STRING_LEN + 1);
	char *copy = NULL;

	if (p->nstrs == UINT32_MAX)
		return -EINVAL;
	if (p->nstrs == p->strs_cap) {
		uint32_t ncap = p->strs_cap ? p->strs_cap * 2 : 256;
		char **n;

		if (p->strs_cap >= MAX_STRINGS) {
			/* Full: count what is refused; indices past the table are bad. */
			g->strings_refused++;
			return 0;
		}
		n = realloc(p->strs, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		p->strs = n;
		p->strs_cap = ncap;
	}
	if (len <= MAX_STRING_LEN && p->str_bytes + len + 1 <= MAX_STRING_BYTES) {
		copy = strdup(s);
		if (!copy)
			return -ENOMEM;
		p->str_bytes += len + 1;
	} else {
		g->strings_refused++;
	}
	p->strs[p->nstrs++] = copy;
	return 0;
}

static bool proc_enable(struct gpu *g, struct gpu_proc *p)
{
	bool covers = !g->o.covers || g->o.covers(g->o.covers_ctx, p->pid);

	p->enabled = p->attached && covers && p->state == PROFD__GPU_STATE__GPU_STATE_READY;
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
		proc_free(g->procs.vals[i]);
	ptrmap_fini(&g->procs);
	ptrmap_fini(&g->joins);
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

int gpu__attach(struct gpu *g, uint32_t pid, uint32_t uid, const Profd__GpuAttach *m, bool *enable)
{
	struct gpu_proc *p;
	char *detail = NULL;
	bool created = false;
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
	if (m->detail && m->detail[0]) {
		detail = copy_detail(m->detail);
		if (!detail)
			return -ENOMEM;
	}

	p = gpu_proc(g, pid);
	if (!p) {
		if (g->procs.n >= MAX_PROCS) {
			free(detail);
			return -ENOMEM;
		}
		p = calloc(1, sizeof(*p));
		if (!p) {
			free(detail);
			return -ENOMEM;
		}
		p->pid = pid;
		err = ptrmap_put(&g->procs, pid, p);
		if (err) {
			free(p);
			free(detail);
			return err;
		}
		created = true;
	}
	/*
	 * Otherwise the library says again how it stands (its state or clock changed): the string
	 * table and the probe stay. A new connection of the process is a gpu__detach first.
	 */
	p->uid = uid;
	p->attached = true;
	p->exited = false;
	p->state = m->state;
	free(p->detail);
	p->detail = detail;
	p->clock = m->has_clock ? m->clock : PROFD__GPU_CLOCK__GPU_CLOCK_UNSPECIFIED;
	p->cupti_version = m->has_cupti_version ? m->cupti_version : 0;
	p->launch_rate_limit = m->has_launch_rate_limit ? m->launch_rate_limit : 0;

	if (p->state == PROFD__GPU_STATE__GPU_STATE_READY && !p->probe_attached &&
	    g->o.attach_probe) {
		err = g->o.attach_probe(g->o.probe_ctx, pid, m->library_path);
		if (err)
			pr_warn(
			    "gpu: pid %u: cannot attach the launch probe to %s: %s (its GPU time "
			    "goes to \"[launch stack unknown]\")",
			    pid, m->library_path, strerror(-err));
		p->probe_attached = !err;
	} else if (p->state != PROFD__GPU_STATE__GPU_STATE_READY && p->probe_attached) {
		if (g->o.detach_probe)
			g->o.detach_probe(g->o.probe_ctx, pid);
		p->probe_attached = false;
	}
	if (p->state == PROFD__GPU_STATE__GPU_STATE_READY)
		pr_info("gpu: pid %u: CUPTI library %s", pid, created ? "attached" : "ready");
	else
		pr_info(
		    "gpu: pid %u: CUPTI library attached, not collecting: %s%s%s", pid,
		    protobuf_c_enum_descriptor_get_value(&profd__gpu_state__descriptor, p->state)
			->name,
		    p->detail ? ": " : "", p->detail ? p->detail : "");
	*enable = proc_enable(g, p);
	update_processes(g);
	return 0;
}

static bool valid_times(uint64_t start, uint64_t end)
{
	return start && end >= start && end - start <= MAX_RECORD_NS;
}

/* The leaf name of a kernel: demangled when it demangles, as sent otherwise. */
static char *kernel_leaf(const char *name)
{
	char *d;

	if (!name)
		return strdup("[unknown kernel]");
	d = demangle(name);
	return d ? d : strdup(name);
}

static int batch_kernel(struct gpu *g, struct gpu_proc *p, const Profd__GpuKernel *k)
{
	struct wait_rec r = {0};
	struct ev e = {0};
	const char *name;
	bool bad;
	int err;

	name = gpu_proc_string(p, k->has_name ? k->name : 0, &bad);
	if (bad || !valid_times(k->start_ns, k->end_ns)) {
		g->st.bad_records++;
		return 0;
	}
	g->st.records++;
	gpu_busy_add(p, k->start_ns, k->end_ns);
	r.leaf = kernel_leaf(name);
	if (!r.leaf)
		return -ENOMEM;
	e.type = EV_KERNEL;
	e.pid = p->pid;
	e.uid = p->uid;
	e.corr = k->correlation_id;
	e.start = k->start_ns;
	e.end = k->end_ns;
	e.has_device = k->has_device;
	e.device = k->device;
	e.has_stream = k->has_stream;
	e.stream = k->stream;
	e.grid = k->has_grid ? k->grid : 0;
	e.block = k->has_block ? k->block : 0;
	err = ring_push(&g->ring, &e, r.leaf);
	if (err || k->weight == 0) {
		if (!err)
			g->st.unprobed++;
		free(r.leaf);
		return err;
	}
	r.start = k->start_ns;
	r.end = k->end_ns;
	r.weight = k->weight;
	return gpu_join_record(g, p->pid, &r, k->correlation_id);
}

static int batch_copy(struct gpu *g, struct gpu_proc *p, const Profd__GpuCopy *c)
{
	struct wait_rec r = {0};
	struct ev e = {0};
	int err;

	if (!valid_times(c->start_ns, c->end_ns) ||
	    c->kind < PROFD__GPU_COPY_KIND__GPU_COPY_UNKNOWN ||
	    c->kind > PROFD__GPU_COPY_KIND__GPU_COPY_MEMSET) {
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
	e.has_device = c->has_device;
	e.device = c->device;
	e.has_stream = c->has_stream;
	e.stream = c->stream;
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
	struct ev e = {0};
	const char *name;
	bool bad;

	name = gpu_proc_string(p, a->has_name ? a->name : 0, &bad);
	if (bad || !a->tid || !valid_times(a->start_ns, a->end_ns)) {
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
	return ring_push(&g->ring, &e, name ? name : "[unknown]");
}

static int batch_nvtx(struct gpu *g, struct gpu_proc *p, const Profd__GpuNvtxRange *n)
{
	struct ev e = {0};
	const char *name;
	bool bad;

	name = gpu_proc_string(p, n->name, &bad);
	if (bad || !n->tid || !valid_times(n->start_ns, n->end_ns)) {
		g->st.bad_records++;
		return 0;
	}
	if (!name)
		name = "[unnamed]";
	if (n->start_ns < n->end_ns || (n->has_open && n->open))
		gpu_nvtx_add(g, p, n, name);
	if (n->has_open && n->open)
		return 0; /* into the ring once closed; traces take open ones from the table */
	e.type = EV_NVTX;
	e.pid = p->pid;
	e.tid = n->tid;
	e.uid = p->uid;
	e.start = n->start_ns;
	e.end = n->end_ns;
	e.depth = n->has_depth ? n->depth : 0;
	return ring_push(&g->ring, &e, name);
}

int gpu__batch(struct gpu *g, uint32_t pid, const Profd__GpuBatch *m, bool *enable)
{
	struct gpu_proc *p = gpu_proc(g, pid);
	int err = 0;

	*enable = false;
	if (!p || !p->attached || !m)
		return -EINVAL;
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
		g->st.dropped += m->dropped;
	if (m->has_complete_until_ns && m->complete_until_ns > p->complete_until_ns)
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
	proc_free(p);
	update_processes(g);
}

/* --- samples and launches ----------------------------------------------------------------- */

int gpu__cpu_sample(struct gpu *g, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack)
{
	struct gpu_proc *p = gpu_proc(g, pid);
	struct ev e = {.type = EV_SAMPLE,
		       .pid = pid,
		       .tid = tid,
		       .stack = stack,
		       .start = ts_ns,
		       .end = ts_ns};
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
	struct ev e = {.type = EV_LAUNCH,
		       .pid = pid,
		       .tid = tid,
		       .stack = stack,
		       .corr = corr_id,
		       .start = ts_ns,
		       .end = ts_ns};
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
	struct ev e = {.type = EV_LAUNCH,
		       .pid = pid,
		       .tid = tid,
		       .stack = stack,
		       .start = ts_ns,
		       .end = ts_ns};
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

void gpu__tick(struct gpu *g, uint64_t now_ns)
{
	uint32_t gone[64];
	size_t ngone = 0;

	if (now_ns > g->now)
		g->now = now_ns;
	for (size_t i = 0; g->procs.mask && i <= g->procs.mask; i++) {
		struct gpu_proc *p = g->procs.vals[i];

		if (!p)
			continue;
		gpu_release(g, p, g->now, false);
		gpu_prune(g, p, g->now);
		if (p->exited && ngone < sizeof(gone) / sizeof(gone[0]))
			gone[ngone++] = p->pid;
	}
	gpu_join_expire(g, g->now, 0);
	for (size_t i = 0; i < ngone; i++) {
		struct gpu_proc *p = gpu_proc(g, gone[i]);

		/* What waits for this process can no longer come: settle it now. */
		gpu_join_expire(g, UINT64_MAX, gone[i]);
		proc_finish(g, p);
		ptrmap_del(&g->procs, gone[i]);
		proc_free(p);
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
			s->detail = p->detail;
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
