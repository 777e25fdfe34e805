// SPDX-License-Identifier: BSD-2-Clause
/*
 * The GPU module's front: per-process state of the attached CUPTI libraries, the attach and
 * detach of the uplink (validated here, before anything is kept), the CPU sample and launch entry
 * points, status, and the store's GC callback. The batches of records are taken in gpu_batch.c,
 * the join in gpu_join.c, the labels in gpu_labels.c; the records go to the timeline.
 */
#include "gpu_priv.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "log.h"

#define DEFAULT_TTL_NS (30ull * 1000000000ull)
#define DEFAULT_HOLD_NS (3ull * 1000000000ull)
#define DEFAULT_MAX_PENDING (1u << 20)
#define DEFAULT_MAX_BYTES (256u << 20)
/* Libraries connected at once: each holds a connection, so this is far above the server's. */
#define MAX_PROCS 4096
/* A library's one-line reason for its state, as kept for status. */
#define MAX_DETAIL_LEN 256

/* --- processes ---------------------------------------------------------------------------- */

struct gpu_proc *gpu_proc(const struct gpu *g, uint32_t pid)
{
	return ptrmap_get(&g->procs, pid);
}

/*
 * The uid of pid's events: the one its library connected with (fixed at creation, checked
 * against the process's real uid), else what the store knows.
 */
int gpu_timeline_push(struct gpu *g, const struct tl_event *e)
{
	return g->o.timeline ? timeline__push(g->o.timeline, e) : 0;
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
	size_t ncap = *cap ? *cap : 4, fits;
	void *na;
	int err;

	if (need <= *cap)
		return 0;
	/* Small per-process arrays start at 4, not grow_cap's 8; grow_cap checks the bytes. */
	if (grow_cap(0, need, elem, SIZE_MAX, &fits))
		return -ENOMEM;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 / elem ? need : ncap * 2;
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
	gpu_uid_string_sub(g, p->uid, p->str_uid_bytes);
	p->str_bytes = p->str_uid_bytes = 0;
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

static bool proc_covered(struct gpu *g, uint32_t pid)
{
	return !g->o.covers || g->o.covers(g->o.covers_ctx, pid);
}

bool gpu_proc_enable(struct gpu *g, struct gpu_proc *p)
{
	p->enabled = p->attached && !p->uid_refused && proc_covered(g, p->pid) &&
		     p->state == GPU_STATE_READY;
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

/* --- the store's compaction ---------------------------------------------------------------- */

/* Every stack id the module holds: kept in mark, or (mark NULL) renumbered through remap. */
static void gpu_gc(struct gpu *g, struct store_gc *mark, const struct store_gc *remap)
{
	for (size_t i = 0; g->procs.mask && i <= g->procs.mask; i++) {
		struct gpu_proc *p = g->procs.vals[i];

		if (!p)
			continue;
		for (size_t j = 0; j < p->nheld; j++) {
			if (mark)
				store_gc__keep(mark, p->held[j].stack);
			else
				p->held[j].stack = store_gc__map(remap, p->held[j].stack);
		}
	}
	gpu_join_gc(g, mark, remap);
	gpu_mem_gc(g, mark, remap);
}

void gpu__gc_mark(struct gpu *g, struct store_gc *gc)
{
	if (g && gc)
		gpu_gc(g, gc, NULL);
}

void gpu__gc_remap(struct gpu *g, const struct store_gc *gc)
{
	if (g && gc)
		gpu_gc(g, NULL, gc);
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
	if (!g->o.max_pending)
		g->o.max_pending = DEFAULT_MAX_PENDING;
	if (!g->o.max_bytes)
		g->o.max_bytes = DEFAULT_MAX_BYTES;
	return g;
}

void gpu__free(struct gpu *g)
{
	if (!g)
		return;
	gpu_join_free_all(g);
	for (size_t i = 0; g->procs.mask && i <= g->procs.mask; i++)
		proc_free(g, g->procs.vals[i]);
	ptrmap_fini(&g->procs);
	ptrmap_fini(&g->joins);
	ptrmap_fini(&g->pjoins);
	gpu_mem_free_all(g);
	gpu_uid_free_all(g);
	free(g);
}

/* --- the uplink --------------------------------------------------------------------------- */

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

static const char *state_name(enum gpu_state s)
{
	switch (s) {
	case GPU_STATE_READY:
		return "GPU_STATE_READY";
	case GPU_STATE_NO_CUPTI:
		return "GPU_STATE_NO_CUPTI";
	case GPU_STATE_CUPTI_TOO_OLD:
		return "GPU_STATE_CUPTI_TOO_OLD";
	case GPU_STATE_SUBSCRIBER_TAKEN:
		return "GPU_STATE_SUBSCRIBER_TAKEN";
	case GPU_STATE_ERROR:
		return "GPU_STATE_ERROR";
	case GPU_STATE_ACTIVITY_TAKEN:
		return "GPU_STATE_ACTIVITY_TAKEN";
	default:
		return "?";
	}
}

int gpu_proc_attach(struct gpu *g, uint32_t pid, uint32_t uid, unsigned int flags,
		    const struct gpu_attach_info *m, bool *enable)
{
	struct gpu_proc *p;
	char *detail = NULL;
	bool created = false, was_ready, covered;
	int err;

	*enable = false;
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
	was_ready = !created && p->state == GPU_STATE_READY;
	p->attached = true;
	p->exited = false;
	p->uid_refused = flags & GPU_ATTACH_UID_MISMATCH;
	p->state = m->state;
	free(p->detail);
	p->detail = detail;
	p->clock = m->clock;
	p->cupti_version = m->cupti_version;
	p->launch_rate_limit = m->launch_rate_limit;
	p->max_delay_ms = m->max_delay_ms;
	covered = proc_covered(g, pid);

	/*
	 * The probe goes on once per process, at its first READY, and stays until the process
	 * leaves: a library that flips between states must not make the daemon attach and detach
	 * uprobes over and over. Processes the session does not cover get none.
	 */
	if (p->state == GPU_STATE_READY && !p->probe_attached && covered && !p->uid_refused &&
	    g->o.attach_probe) {
		err = g->o.attach_probe(g->o.probe_ctx, pid, m->library_path);
		/* The prober has said why (a library without the probe note is no error). */
		if (err)
			pr_info("gpu: pid %u: no launch probe in %s: its GPU time goes to "
				"\"[launch stack unknown]\"",
				pid, m->library_path);
		p->probe_attached = !err;
	}
	if (p->uid_refused)
		pr_warn("gpu: pid %u: the CUPTI library's connection runs as uid %u, not as the "
			"process's owner: its GPU data is refused",
			pid, uid);
	else if (p->state == GPU_STATE_READY && (created || !was_ready))
		pr_info("gpu: pid %u: CUPTI library %s", pid, created ? "attached" : "ready");
	else if (created)
		pr_info("gpu: pid %u: CUPTI library attached, not collecting: %s%s%s", pid,
			state_name(p->state), p->detail ? ": " : "", p->detail ? p->detail : "");
	else if (was_ready && p->state == GPU_STATE_ACTIVITY_TAKEN)
		/* Once per process: the library never comes back from it. */
		pr_info("gpu: pid %u: CUPTI library stopped: %s", pid,
			p->detail ? p->detail : state_name(p->state));
	else
		/* Libraries say how they stand again and again: not worth a line each time. */
		pr_debug("gpu: pid %u: CUPTI library attached again: %s%s%s", pid,
			 state_name(p->state), p->detail ? ": " : "", p->detail ? p->detail : "");
	*enable = gpu_proc_enable(g, p);
	update_processes(g);
	return 0;
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

bool gpu__holds(const struct gpu *g, uint32_t pid)
{
	const struct gpu_proc *p = g ? gpu_proc(g, pid) : NULL;

	return p && p->enabled;
}

int gpu__hold(struct gpu *g, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack)
{
	struct gpu_proc *p = gpu_proc(g, pid);

	if (p && p->enabled)
		return gpu_hold(g, p, ts_ns, ts_ns, tid, stack);
	return store__add(g->store, ts_ns, pid, tid, stack, STORE_VALUE_CPU_SAMPLES, 1);
}

int gpu__hold_wait(struct gpu *g, uint64_t start_ns, uint64_t end_ns, uint32_t pid, uint32_t tid,
		   uint32_t stack)
{
	struct gpu_proc *p = gpu_proc(g, pid);

	if (p && p->enabled && end_ns > start_ns)
		return gpu_hold(g, p, start_ns, end_ns, tid, stack);
	return 0;
}

int gpu__launch(struct gpu *g, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack,
		uint32_t corr_id)
{
	if (!corr_id || !stack)
		return 0;
	g->st.launches++;
	return gpu_join_launch(g, ts_ns, pid, tid, stack, corr_id);
}

void gpu__process_exited(struct gpu *g, uint32_t pid)
{
	struct gpu_proc *p = gpu_proc(g, pid);

	if (p)
		p->exited = true;
	/* The driver releases what the process had: nothing of it is live from now on. */
	gpu_mem_end(g, pid, g->now);
}

void gpu__process_reused(struct gpu *g, uint32_t pid)
{
	struct gpu_proc *p = gpu_proc(g, pid);

	gpu_join_expire_pid(g, pid);
	gpu_mem_end(g, pid, g->now);
	if (!p)
		return;
	proc_finish(g, p);
	ptrmap_del(&g->procs, pid);
	proc_free(g, p);
	update_processes(g);
}

void gpu__clock(struct gpu *g, uint64_t now_ns)
{
	if (now_ns > g->now)
		g->now = now_ns;
}

void gpu__tick(struct gpu *g, uint64_t now_ns)
{
	struct store_stats ss;
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
	store__stats(g->store, &ss);
	gpu_mem_prune(g, ss.oldest_ns);
}

void gpu__stats(const struct gpu *g, struct gpu_stats *out)
{
	*out = g->st;
	out->held = g->nheld;
	out->bytes = g->bytes;
}

size_t gpu__status(const struct gpu *g, struct gpu_proc_status *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; g->procs.mask && i <= g->procs.mask; i++) {
		const struct gpu_proc *p = g->procs.vals[i];

		if (!p || !p->attached)
			continue;
		if (n < max) {
			out[n] = (struct gpu_proc_status){
			    .pid = p->pid,
			    .state = p->state,
			    .detail = p->uid_refused ? "refused: the library's connection does "
						       "not run as the process's owner"
						     : p->detail,
			    .enabled = p->enabled,
			    .clock = p->clock,
			    .cupti_version = p->cupti_version,
			    .zero_time_records = p->zero_time_records,
			    .forced_flushes = p->forced_flushes,
			    .max_delay_ms = p->max_delay_ms,
			    .records_refused = p->records_refused,
			    .bytes_refused = p->bytes_refused,
			    .waits_refused = p->waits_refused,
			};
			gpu_mem_status(g, p->pid, &out[n]);
		}
		n++;
	}
	return n;
}

int gpu__open_ranges(struct gpu *g, struct tl_event **out, size_t *n)
{
	struct tl_event *v = NULL;
	size_t cap = 0, k = 0;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; g->procs.mask && i <= g->procs.mask; i++) {
		const struct gpu_proc *p = g->procs.vals[i];

		for (size_t j = 0; p && j < p->nopen; j++) {
			const struct nvtx_range *r = &p->open[j];

			if (GROW(v, cap, k + 1)) {
				free(v);
				return -ENOMEM;
			}
			v[k++] = (struct tl_event){
			    .type = TL_NVTX,
			    .pid = p->pid,
			    .uid = p->uid,
			    .tid = r->tid,
			    .start = r->start,
			    .end = r->end,
			    .depth = r->depth,
			    .name = r->name ? r->name->s : "[unnamed]",
			};
		}
	}
	*out = v;
	*n = k;
	return 0;
}
