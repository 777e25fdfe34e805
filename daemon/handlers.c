// SPDX-License-Identifier: BSD-2-Clause
/*
 * Status, dump and trace requests (access control, time ranges, replies) and the CUPTI
 * library's GpuAttach / GpuBatch.
 */
#include "daemon.h"
#include "grow.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dump.h"
#include "exporter.h"
#include "unwinder.h"
#include "frame.h"
#include "log.h"
#include "memory.h"
#include "procfs.h"
#include "timeutil.h"
#include "wire.h"

#define MAX_DUMP_PIDS 1024
/* How often the CUPTI library sends a batch. */
#define GPU_FLUSH_INTERVAL_MS 250
/* Libraries listed in one StatusReply. */
#define MAX_GPU_STATUS 4096

int handlers__error(Profd__ErrorCode code, const char *msg, uint8_t **frame, size_t *len)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__Error err = PROFD__ERROR__INIT;

	err.code = code;
	err.message = (char *)msg;
	resp.msg_case = PROFD__RESPONSE__MSG_ERROR;
	resp.error = &err;
	return wire_pack_response(&resp, FRAME_MAX_REPLY, frame, len);
}

static uint64_t self_rss_bytes(void)
{
	unsigned long size, resident;
	FILE *f = fopen("/proc/self/statm", "re");
	uint64_t rss = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &resident) == 2)
		rss = (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
	fclose(f);
	return rss;
}

static struct gpu_conn *gpu_conn_of(struct daemon *d, uint64_t conn_id)
{
	for (size_t i = 0; i < d->n_gpu_conns; i++)
		if (d->gpu_conns[i].conn_id == conn_id)
			return &d->gpu_conns[i];
	return NULL;
}

/* The connection that speaks for pid now (a process's newest library connection). */
static struct gpu_conn *gpu_conn_of_pid(struct daemon *d, uint32_t pid)
{
	struct gpu_conn *found = NULL;

	for (size_t i = 0; i < d->n_gpu_conns; i++)
		if (d->gpu_conns[i].pid == pid &&
		    (!found || d->gpu_conns[i].conn_id > found->conn_id))
			found = &d->gpu_conns[i];
	return found;
}

/*
 * StatusReply.gpu: the attached libraries, a non-root caller's own only (the uid its library
 * connected with). st->gpu is malloc'd; the entries belong to the GPU module.
 */
/* The GPU libraries the peer may see, as StatusReply.gpu (the arrays freed by the caller). */
static int gpu_status_list(struct daemon *d, const struct server_peer *peer, Profd__StatusReply *st)
{
	struct gpu_proc_status *all;
	Profd__GpuProcessStatus *msgs, **ptrs;
	size_t n, k = 0;

	n = gpu__status(d->gpu, NULL, 0);
	if (!n)
		return 0;
	if (n > MAX_GPU_STATUS)
		n = MAX_GPU_STATUS;
	all = calloc(n, sizeof(*all));
	msgs = calloc(n, sizeof(*msgs));
	ptrs = calloc(n, sizeof(*ptrs));
	if (!all || !msgs || !ptrs) {
		free(all);
		free(msgs);
		free(ptrs);
		return -ENOMEM;
	}
	if (gpu__status(d->gpu, all, n) < n)
		n = gpu__status(d->gpu, all, n);
	for (size_t i = 0; i < n; i++) {
		const struct gpu_conn *c = gpu_conn_of_pid(d, all[i].pid);
		Profd__GpuProcessStatus *m = &msgs[k];

		if (peer->uid != 0 && (!c || c->uid != peer->uid))
			continue;
		profd__gpu_process_status__init(m);
		m->pid = all[i].pid;
		m->state = (Profd__GpuState)all[i].state; /* the same numbers (gpu.h) */
		m->detail = (char *)all[i].detail;
		m->has_enabled = true;
		m->enabled = all[i].enabled;
		m->has_clock = all[i].clock != 0;
		m->clock = (Profd__GpuClock)all[i].clock;
		m->has_cupti_version = all[i].cupti_version != 0;
		m->cupti_version = all[i].cupti_version;
		m->has_memory_live = m->has_memory_live_bytes = m->has_memory_untracked = true;
		m->memory_live = all[i].memory_live;
		m->memory_live_bytes = all[i].memory_live_bytes;
		m->memory_untracked = all[i].memory_untracked;
		m->has_zero_time_records = true;
		m->zero_time_records = all[i].zero_time_records;
		m->has_forced_flushes = true;
		m->forced_flushes = all[i].forced_flushes;
		m->has_max_delay_ms = all[i].max_delay_ms != 0;
		m->max_delay_ms = all[i].max_delay_ms;
		m->has_records_refused = m->has_bytes_refused = m->has_waits_refused = true;
		m->records_refused = all[i].records_refused;
		m->bytes_refused = all[i].bytes_refused;
		m->waits_refused = all[i].waits_refused;
		ptrs[k++] = m;
	}
	free(all);
	if (!k) {
		free(msgs);
		free(ptrs);
		return 0;
	}
	/* msgs is ptrs[0]: the caller frees both. */
	st->n_gpu = k;
	st->gpu = ptrs;
	return 0;
}

/* Whether uid owns pid, as the store knows it or (not seen yet) as /proc says. */
static bool pid_owned_by(struct daemon *d, uint32_t pid, uint32_t uid)
{
	struct store_process_info pi;
	char path[300];
	struct stat st;

	if (store__process(d->store, pid, &pi))
		return pi.uid == uid;
	snprintf(path, sizeof(path), "%s/%u/stat", d->proc_root ? d->proc_root : "/proc", pid);
	return stat(path, &st) == 0 && st.st_uid == uid;
}

/*
 * What a non-root client may read of the status: the daemon's own settings and its own --pid
 * targets, not the counters of the whole machine, which tell what other users run. *own is a
 * new array of the targets left (the caller frees it).
 */
static int status_for_user(struct daemon *d, uint32_t uid, Profd__StatusReply *st, uint32_t **own)
{
	size_t n = 0;

	*own = st->n_target_pids ? calloc(st->n_target_pids, sizeof(**own)) : NULL;
	if (st->n_target_pids && !*own)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_target_pids; i++)
		if (pid_owned_by(d, st->target_pids[i], uid))
			(*own)[n++] = st->target_pids[i];
	st->target_pids = *own;
	st->n_target_pids = n;
	st->has_only_uid = true;
	st->only_uid = uid;
	st->has_samples_received = st->has_samples_lost_ringbuf = false;
	st->has_kstack_errors = st->has_ustack_errors = st->has_samples_evicted = false;
	/* Walk counts and the tables of every process's files: the machine's too. */
	st->unwind = NULL;
	st->has_task_events_lost = st->has_records_malformed = st->has_samples_dropped = false;
	st->has_python_samples = st->has_python_frames_dropped = false;
	st->has_python_frames_exited = false;
	st->has_python_no_thread_state = st->has_python_processes = false;
	st->has_python_gil_held = st->has_python_gil_free = st->has_python_no_gil = false;
	st->has_store_bytes = st->has_stacks = st->has_frames = st->has_processes = false;
	st->has_oldest_ns = st->has_newest_ns = false;
	st->has_clients = st->has_daemon_cpu_ns = st->has_daemon_rss_bytes = false;
	st->has_gpu_processes = st->has_gpu_launches = st->has_gpu_records = false;
	st->has_gpu_joined = st->has_gpu_unmatched = st->has_gpu_dropped = false;
	st->has_gpu_uprobe_launches = st->has_gpu_launches_limited = false;
	st->has_gpu_memory_records = st->has_gpu_memory_unmatched_frees = false;
	st->has_gpu_zero_time_records = st->has_gpu_forced_flushes = false;
	st->has_gpu_bad_records = false;
	st->has_gpu_records_refused = st->has_gpu_bytes_refused = false;
	st->has_gpu_batches_refused = st->has_gpu_waits_refused = false;
	st->has_store_evicted_over_share = false;
	st->has_perf_map_bytes = st->has_perf_map_entries_dropped = false;
	st->has_perf_maps_sparse = st->has_perf_map_reads = st->has_perf_map_read_ns = false;
	st->has_symbol_bytes = st->has_symbol_files = st->has_symbol_budget_bytes = false;
	st->has_trace_ring_bytes = false;
	st->n_memory = 0;
	st->has_off_cpu_waits = st->has_off_cpu_short_records = false;
	st->has_off_cpu_short_waits = st->has_off_cpu_lost = false;
	return 0;
}

/* The unwinder's counters and the BPF walk's ends into u (its fields point nowhere). */
static void status_unwind(struct daemon *d, const uint64_t *cnt, Profd__UnwindStatus *u)
{
	struct unwinder_stats us = {0};
	const uint64_t *end = cnt + PROFD_CNT_UNWIND;

	if (d->unwinder)
		unwinder__stats(d->unwinder, &us);
#define SET(f, v) (u->has_##f = true, u->f = (v))
	SET(bottom, end[PROFD_UNWIND_BOTTOM]);
	SET(truncated, end[PROFD_UNWIND_TRUNCATED]);
	SET(fp_fallback, end[PROFD_UNWIND_FP_FALLBACK]);
	SET(no_mapping, end[PROFD_UNWIND_NO_MAPPING]);
	SET(no_table, end[PROFD_UNWIND_NO_TABLE]);
	SET(no_row, end[PROFD_UNWIND_NO_ROW]);
	SET(invalid, end[PROFD_UNWIND_INVALID]);
	SET(read_fault, end[PROFD_UNWIND_READ_FAULT]);
	SET(bad_frame, end[PROFD_UNWIND_BAD_FRAME]);
	SET(scanned, cnt[PROFD_CNT_UNWIND_SCANNED]);
	SET(scan_steps, cnt[PROFD_CNT_UNWIND_SCAN_STEPS]);
	SET(scan_rejects, cnt[PROFD_CNT_UNWIND_SCAN_REJECTS]);
	SET(scan_short, cnt[PROFD_CNT_UNWIND_SCAN_SHORT]);
	SET(tables, us.tables);
	SET(table_bytes, us.table_bytes);
	SET(memory, us.memory);
	SET(builds, us.builds);
	SET(build_ns, us.build_ns);
	SET(build_failed, us.build_failed);
	SET(no_cfi, us.no_cfi);
	SET(too_big, us.too_big);
	SET(evictions, us.evictions);
	SET(over_budget, us.over_budget);
	SET(insn_functions, us.insn_functions);
	SET(insn_rows, us.insn_rows);
	SET(insn_partial, us.insn_partial);
	SET(insn_skipped, us.insn_skipped);
	SET(insn_instructions, us.insn_insns);
	SET(cache_hits, us.cache_hits);
	SET(processes, us.procs);
	SET(queued, us.queued);
	SET(busy_pid, us.busy_pid);
	SET(busy_done, us.busy_done);
	SET(busy_mappings, us.busy_files);
	SET(mappings_dropped, us.maps_dropped);
	SET(described, us.described);
	SET(over_bound, us.over_bound);
	SET(backoffs, us.backoffs);
	SET(max_mappings, us.max_maps);
#undef SET
}

static int handle_status(struct daemon *d, const struct server_peer *peer, uint8_t **frame,
			 size_t *len)
{
	uint32_t *own = NULL;
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__StatusReply st = PROFD__STATUS_REPLY__INIT;
	Profd__UnwindStatus uw = PROFD__UNWIND_STATUS__INIT;
	Profd__MemoryOwner mem[MEM__COUNT], *mem_ptrs[MEM__COUNT];
	uint64_t cnt[PROFD_CNT__MAX] = {0};
	struct ingest_stats is;
	struct symbolizer_stats sy;
	struct timeline_stats tls;
	struct store_stats ss;
	struct rusage ru;
	uint64_t now = mono_ns();
	int err = 0;

	sampler__counters(d->sampler, cnt);
	ingest__stats(d->ingest, &is);
	store__stats(d->store, &ss);
	getrusage(RUSAGE_SELF, &ru);

	st.daemon_version = PROFD_VERSION;
	st.has_pid = true;
	st.pid = (uint32_t)getpid();
	st.has_uptime_ns = true;
	st.uptime_ns = now - d->start_ns;
	st.has_frequency_hz = true;
	st.frequency_hz = d->cfg->frequency_hz;
	st.has_system_wide = true;
	st.system_wide = d->sampler ? !sampler__filtered(d->sampler) : d->cfg->npids == 0;
	st.has_follows_children = true;
	st.follows_children = d->sampler && sampler__follows_children(d->sampler);
	st.has_children_followed = true;
	st.children_followed = is.forks;
	st.has_maps_changes = true;
	st.maps_changes = is.maps_changes;
	st.has_children_not_followed = true;
	st.children_not_followed = cnt[PROFD_CNT_FOLLOW_FULL];
	st.n_target_pids = d->cfg->npids;
	st.target_pids = (uint32_t *)d->cfg->pids;
	st.has_ncpus = true;
	st.ncpus = sampler__ncpus(d->sampler);
	status_unwind(d, cnt, &uw);
	st.unwind = &uw;
	st.has_off_cpu = true;
	st.off_cpu = d->cfg->off_cpu;
	if (d->cfg->off_cpu) {
		st.has_off_cpu_min_ns = true;
		st.off_cpu_min_ns = d->cfg->off_cpu_min_ns;
		st.has_off_cpu_waits = true;
		st.off_cpu_waits = is.offcpu_waits;
		st.has_off_cpu_short_records = true;
		st.off_cpu_short_records = is.offcpu_short_records;
		st.has_off_cpu_short_waits = true;
		st.off_cpu_short_waits = is.offcpu_short_waits;
		st.has_off_cpu_lost = true;
		st.off_cpu_lost = cnt[PROFD_CNT_OFFCPU_LOST];
	}
	st.has_samples_received = true;
	st.samples_received = is.samples;
	st.has_samples_lost_ringbuf = true;
	st.samples_lost_ringbuf = cnt[PROFD_CNT_RINGBUF_FULL];
	st.has_kstack_errors = true;
	st.kstack_errors = cnt[PROFD_CNT_KSTACK_ERR];
	st.has_ustack_errors = true;
	st.ustack_errors = cnt[PROFD_CNT_USTACK_ERR];
	st.has_samples_evicted = true;
	st.samples_evicted = ss.evicted_samples;
	st.has_store_evicted_over_share = true;
	st.store_evicted_over_share = ss.evicted_over_share;
	st.has_task_events_lost = true;
	st.task_events_lost = cnt[PROFD_CNT_TASK_DROPPED];
	st.has_records_malformed = true;
	st.records_malformed = is.malformed;
	st.has_samples_dropped = true;
	st.samples_dropped = is.store_errors;
	st.has_python_samples = true;
	st.python_samples = is.py_samples;
	st.has_python_frames_dropped = true;
	st.python_frames_dropped = is.py_frames_bad;
	st.has_python_frames_exited = true;
	st.python_frames_exited = is.py_frames_exited;
	st.has_python_no_thread_state = true;
	st.python_no_thread_state = is.py_no_tstate;
	st.has_python_processes = true;
	st.python_processes = is.py_processes;
	st.has_python_gil_held = st.has_python_gil_free = st.has_python_no_gil = true;
	st.python_gil_held = is.py_gil_held;
	st.python_gil_free = is.py_gil_free;
	st.python_no_gil = is.py_no_gil;
	st.has_store_bytes = true;
	st.store_bytes = ss.bytes;
	st.has_store_cap_bytes = true;
	st.store_cap_bytes = ss.cap;
	st.has_stacks = true;
	st.stacks = ss.stacks;
	st.has_frames = true;
	st.frames = ss.frames;
	st.has_processes = true;
	st.processes = ss.processes;
	st.has_oldest_ns = true;
	st.oldest_ns = ss.oldest_ns;
	st.has_newest_ns = true;
	st.newest_ns = ss.newest_ns;
	st.has_now_ns = true;
	st.now_ns = now;
	st.has_realtime_offset_ns = true;
	st.realtime_offset_ns = realtime_offset_ns();
	st.has_clients = true;
	st.clients = server__clients(d->server);
	st.has_daemon_cpu_ns = true;
	st.daemon_cpu_ns = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * NSEC_PER_SEC +
			   (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
	st.has_daemon_rss_bytes = true;
	st.daemon_rss_bytes = self_rss_bytes();
	memory_status(d, st.daemon_rss_bytes, &st, mem, mem_ptrs);
	symbolizer__stats(d->sym, &sy);
	st.has_perf_map_bytes = true;
	st.perf_map_bytes = sy.perf_map_bytes;
	st.has_perf_map_budget_bytes = true;
	st.perf_map_budget_bytes = sy.perf_map_budget;
	st.has_perf_map_entries_dropped = true;
	st.perf_map_entries_dropped = sy.perf_map_dropped;
	st.has_perf_maps_sparse = true;
	st.perf_maps_sparse = sy.perf_map_sparse;
	st.has_perf_map_reads = true;
	st.perf_map_reads = sy.perf_map_scans;
	st.has_perf_map_read_ns = true;
	st.perf_map_read_ns = sy.perf_map_scan_ns;
	st.has_symbol_bytes = true;
	st.symbol_bytes = sy.elf_bytes;
	st.has_symbol_files = true;
	st.symbol_files = sy.elf_files;
	st.has_symbol_budget_bytes = true;
	st.symbol_budget_bytes = sy.elf_budget;
	timeline__stats(d->timeline, &tls);
	st.has_trace_ring_bytes = true;
	st.trace_ring_bytes = tls.bytes;

	if (d->gpu) {
		struct gpu_stats gs;

		gpu__stats(d->gpu, &gs);
		st.has_gpu_processes = true;
		st.gpu_processes = gs.processes;
		st.has_gpu_launches = true;
		st.gpu_launches = gs.launches;
		st.has_gpu_records = true;
		st.gpu_records = gs.records;
		st.has_gpu_joined = true;
		st.gpu_joined = gs.joined;
		st.has_gpu_unmatched = true;
		st.gpu_unmatched = gs.unmatched;
		st.has_gpu_dropped = true;
		st.gpu_dropped = gs.dropped;
		st.has_gpu_uprobe_launches = true;
		st.gpu_uprobe_launches = is.uprobe_launches;
		st.has_gpu_launches_limited = true;
		st.gpu_launches_limited = cnt[PROFD_CNT_LAUNCH_LIMITED];
		st.has_gpu_memory_records = st.has_gpu_memory_unmatched_frees = true;
		st.gpu_memory_records = gs.mem_records;
		st.gpu_memory_unmatched_frees = gs.mem_unmatched;
		st.has_gpu_zero_time_records = true;
		st.gpu_zero_time_records = gs.zero_time_records;
		st.has_gpu_forced_flushes = true;
		st.gpu_forced_flushes = gs.forced_flushes;
		st.has_gpu_bad_records = true;
		st.gpu_bad_records = gs.bad_records;
		st.has_gpu_records_refused = st.has_gpu_bytes_refused = true;
		st.gpu_records_refused = gs.records_refused;
		st.gpu_bytes_refused = gs.bytes_refused;
		st.has_gpu_batches_refused = st.has_gpu_waits_refused = true;
		st.gpu_batches_refused = gs.batches_refused;
		st.gpu_waits_refused = gs.waits_refused;
		st.has_gpu_uplink_rate = true;
		st.gpu_uplink_rate = gpu__uplink_rate(d->gpu);
		err = gpu_status_list(d, peer, &st);
		if (err)
			return err;
	}

	if (d->exporter)
		err = exporter__status(d->exporter, &st);
	if (!err && peer->uid != 0)
		err = status_for_user(d, peer->uid, &st, &own);
	resp.msg_case = PROFD__RESPONSE__MSG_STATUS;
	resp.status = &st;
	if (!err)
		err = wire_pack_response(&resp, FRAME_MAX_REPLY, frame, len);
	free(own);
	if (st.gpu)
		free(st.gpu[0]);
	free(st.gpu);
	exporter__status_free(&st);
	return err;
}

/* What dump and trace requests have in common: which processes, which time. */
struct window {
	size_t n_pids;
	const uint32_t *pids;
	bool has_since, has_start, has_end, has_tid;
	uint64_t since_ns, start_ns, end_ns;
	uint32_t tid;
};

/* The window fields that dump and trace requests share (the same names in both messages). */
#define WINDOW_OF(req)                                                                             \
	((struct window){                                                                          \
	    .n_pids = (req)->n_pids,                                                               \
	    .pids = (req)->pids,                                                                   \
	    .has_since = (req)->has_since_ns,                                                      \
	    .since_ns = (req)->since_ns,                                                           \
	    .has_start = (req)->has_start_ns,                                                      \
	    .start_ns = (req)->start_ns,                                                           \
	    .has_end = (req)->has_end_ns,                                                          \
	    .end_ns = (req)->end_ns,                                                               \
	})

static void describe_window(const struct window *w, char *buf, size_t len)
{
	if (w->has_since) {
		uint64_t s = w->since_ns / NSEC_PER_SEC;

		if (w->since_ns < NSEC_PER_SEC)
			snprintf(buf, len, " in the last %llums",
				 (unsigned long long)(w->since_ns / NSEC_PER_MSEC));
		else if (s % 3600 == 0)
			snprintf(buf, len, " in the last %lluh", (unsigned long long)s / 3600);
		else if (s % 60 == 0)
			snprintf(buf, len, " in the last %llum", (unsigned long long)s / 60);
		else
			snprintf(buf, len, " in the last %llus", (unsigned long long)s);
	} else if (w->has_start || w->has_end)
		snprintf(buf, len, " in the requested time range");
	else
		buf[0] = '\0';
}

/*
 * Turn a window into a store query with the caller's rights applied. Returns 0 to go on, or 1
 * with *code and msg set: the request is refused.
 */
static int window_query(struct daemon *d, const struct server_peer *peer, const struct window *w,
			uint64_t now, struct store_query *q, Profd__ErrorCode *code, char *msg,
			size_t msglen)
{
	*q = (struct store_query){.end_ns = UINT64_MAX};
	*code = PROFD__ERROR_CODE__ERROR_BAD_REQUEST;
	if (w->n_pids > MAX_DUMP_PIDS) {
		snprintf(msg, msglen, "too many pids in one request (the limit is 1024)");
		return 1;
	}
	for (size_t i = 0; i < w->n_pids; i++) {
		if (w->pids[i] == 0) {
			snprintf(msg, msglen, "pid 0 is not a process");
			return 1;
		}
	}
	if (w->has_since) {
		if (w->since_ns == 0) {
			snprintf(msg, msglen, "--since must be longer than zero");
			return 1;
		}
		q->start_ns = w->since_ns < now ? now - w->since_ns : 0;
	}
	if (w->has_start)
		q->start_ns = w->start_ns > q->start_ns ? w->start_ns : q->start_ns;
	if (w->has_end)
		q->end_ns = w->end_ns;
	if (q->start_ns >= q->end_ns) {
		snprintf(msg, msglen, "the time range is empty: its start is not before its end");
		return 1;
	}

	/*
	 * Root sees everything; anyone else only processes running under their own uid. A pid
	 * the kernel reused may have held the caller's process before another user's: the caller
	 * may ask for it while the store keeps a process of theirs under it, and the uid filter
	 * gives them that process's data alone.
	 */
	if (peer->uid != 0) {
		for (size_t i = 0; i < w->n_pids; i++) {
			struct store_process_info pi;

			if (store__process(d->store, w->pids[i], &pi) &&
			    !store__process_owned(d->store, w->pids[i], peer->uid)) {
				*code = PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED;
				snprintf(msg, msglen,
					 "permission denied: pid %u runs as uid %u and you are "
					 "uid %u; only root may see other users' processes",
					 w->pids[i], pi.uid, peer->uid);
				return 1;
			}
		}
		q->filter_uid = true;
		q->uid = peer->uid;
	}
	q->pids = w->pids;
	q->npids = w->n_pids;
	q->tid = w->has_tid ? w->tid : 0;
	return 0;
}

/* "no samples for pid N in the last 10s (thread T)" and the like. */
static void no_data_message(const struct server_peer *peer, const struct window *w,
			    const char *what, char *msg, size_t msglen)
{
	char window[64];

	describe_window(w, window, sizeof(window));
	if (w->n_pids == 1)
		snprintf(msg, msglen, "no %s for pid %u%s", what, w->pids[0], window);
	else if (w->n_pids > 1)
		snprintf(msg, msglen, "no %s for those %zu pids%s", what, w->n_pids, window);
	else
		snprintf(msg, msglen, "no %s%s%s", what, window,
			 peer->uid ? " for processes of your uid" : "");
	if (w->has_tid) {
		size_t l = strlen(msg);

		snprintf(msg + l, msglen - l, " (thread %u)", w->tid);
	}
}

/*
 * Building a reply of this size took several times as much heap, freed once it is written: ask
 * the tick to hand the free pages back (daemon.trim_after_ns), so that a daemon answering an
 * occasional large dump does not keep its peak for good.
 */
#define TRIM_REPLY_BYTES (1u << 20)
#define TRIM_DELAY_NS (200 * NSEC_PER_MSEC)

static void note_large_reply(struct daemon *d, size_t len)
{
	if (len >= TRIM_REPLY_BYTES && !d->trim_after_ns)
		d->trim_after_ns = mono_ns() + TRIM_DELAY_NS;
}

/* store__descendants' parent for a process whose fork the daemon did not see. */
static uint32_t parent_from_proc(void *ctx, uint32_t pid)
{
	const struct daemon *d = ctx;
	uint32_t ppid = 0;

	if (procfs_read_ppid(d->proc_root ? d->proc_root : "/proc", pid, &ppid))
		return 0;
	return ppid;
}

/* The GPU memory live at a dump's end, as rows of the query's processes and thread. */
struct live_rows {
	const struct store_query *q;
	store_query_cb add;
	void *add_ctx;
};

static int live_row(uint32_t pid, uint32_t uid, uint32_t tid, uint32_t stack, uint64_t bytes,
		    void *ctx)
{
	struct live_rows *lr = ctx;
	const struct store_query *q = lr->q;
	uint64_t v[STORE_VALUE__COUNT] = {0};
	bool in = !q->npids;

	for (size_t i = 0; i < q->npids && !in; i++)
		in = q->pids[i] == pid;
	if (!in || (q->tid && q->tid != tid) || (q->filter_uid && q->uid != uid))
		return 0;
	v[STORE_VALUE_GPU_MEM_LIVE] = bytes;
	/* Merged dumps have no threads: one row per process and stack, as the store gives. */
	return lr->add(pid, q->merge_processes ? 0 : tid, stack, v, lr->add_ctx);
}

static int live_extra(void *ctx, const struct store_query *q, uint64_t end_ns, store_query_cb add,
		      void *add_ctx)
{
	struct daemon *d = ctx;
	struct live_rows lr = {.q = q, .add = add, .add_ctx = add_ctx};

	return d->gpu ? gpu__live_each(d->gpu, end_ns, live_row, &lr) : 0;
}

static int handle_dump(struct daemon *d, const struct server_peer *peer,
		       const Profd__DumpRequest *req, uint8_t **frame, size_t *len)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	struct window w = WINDOW_OF(req);
	uint32_t *family = NULL;
	size_t nfamily = 0;
	struct store_query q;
	struct dump_meta meta = {0};
	Profd__Profile *profile = NULL;
	Profd__ErrorCode code;
	struct store_stats ss;
	uint64_t now = mono_ns(), t_build, t_pack;
	char msg[256];
	int err;

	w.has_tid = req->has_tid;
	w.tid = req->tid;
	if (window_query(d, peer, &w, now, &q, &code, msg, sizeof(msg)))
		return handlers__error(code, msg, frame, len);
	if (req->has_children && req->children) {
		if (!w.n_pids)
			return handlers__error(
			    PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
			    "--children needs --pid: a dump of every process has "
			    "them already",
			    frame, len);
		/* The rights were checked on the pids asked for; the uid filter covers the rest. */
		err = store__descendants(d->store, w.pids, w.n_pids, parent_from_proc, d, &family,
					 &nfamily);
		if (err)
			return handlers__error(
			    PROFD__ERROR_CODE__ERROR_INTERNAL,
			    "listing the processes' descendants failed: out of memory", frame, len);
		q.pids = family;
		q.npids = nfamily;
	}

	/* The range the data can cover: not before the oldest sample kept, not after now. */
	store__stats(d->store, &ss);
	meta.start_ns = q.start_ns > ss.oldest_ns ? q.start_ns : ss.oldest_ns;
	meta.end_ns = q.end_ns < now ? q.end_ns : now;
	meta.frequency_hz = d->cfg->frequency_hz;
	meta.hide_kernel_addresses = peer->uid != 0;
	meta.realtime_offset_ns = realtime_offset_ns();
	/* The machine's losses are root's to know, as the status counters are. */
	meta.has_samples_lost = peer->uid == 0;
	meta.samples_lost = loss_log__between(d->losses, meta.start_ns, meta.end_ns);
	q.merge_processes = req->has_merge_processes && req->merge_processes;
	meta.extra = live_extra;
	meta.extra_ctx = d;
	t_build = mono_ns();
	err = dump__build(d->store, &q, &meta, &profile);
	t_build = mono_ns() - t_build;
	if (err == -ENODATA) {
		no_data_message(peer, &w, "samples", msg, sizeof(msg));
		err = handlers__error(PROFD__ERROR_CODE__ERROR_NO_SAMPLES, msg, frame, len);
		goto out;
	}
	if (err) {
		snprintf(msg, sizeof(msg), "building the profile failed: %s", strerror(-err));
		err = handlers__error(PROFD__ERROR_CODE__ERROR_INTERNAL, msg, frame, len);
		goto out;
	}
	if (peer->uid != 0) {
		profile->has_only_uid = true;
		profile->only_uid = peer->uid;
	}
	resp.msg_case = PROFD__RESPONSE__MSG_PROFILE;
	resp.profile = profile;
	t_pack = mono_ns();
	err = wire_pack_response(&resp, FRAME_MAX_REPLY, frame, len);
	t_pack = mono_ns() - t_pack;
	/* Where a dump's time goes, for the benchmarks (bench/run.py hour reads it with -v). */
	pr_debug("dump: uid %u: %zu stacks, %zu frames, %zu samples: built in %.1f ms, packed "
		 "%zu bytes in %.1f ms",
		 peer->uid, profile->n_stacks, profile->n_frames, profile->n_samples,
		 (double)t_build / 1e6, err ? 0 : *len, (double)t_pack / 1e6);
	dump__free(profile);
	note_large_reply(d, err ? 0 : *len);
	if (err == -EMSGSIZE)
		err =
		    handlers__error(PROFD__ERROR_CODE__ERROR_TOO_LARGE,
				    "the profile is larger than the 256 MiB reply limit: narrow it "
				    "with --pid or --since",
				    frame, len);
out:
	free(family);
	return err;
}

/* Raw events of a window for timelines, with the same rights and window rules as a dump. */
static int handle_trace(struct daemon *d, const struct server_peer *peer,
			const Profd__TraceRequest *req, uint8_t **frame, size_t *len)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	struct window w = WINDOW_OF(req);
	struct trace_meta meta = {0};
	struct tl_event *open = NULL;
	size_t nopen = 0;
	Profd__Trace *tr = NULL;
	Profd__ErrorCode code;
	struct store_query q;
	uint64_t now = mono_ns();
	char msg[256];
	int err;

	if (window_query(d, peer, &w, now, &q, &code, msg, sizeof(msg)))
		return handlers__error(code, msg, frame, len);
	meta.frequency_hz = d->cfg->frequency_hz;
	meta.hide_kernel_addresses = peer->uid != 0;
	meta.realtime_offset_ns = realtime_offset_ns();
	meta.has_samples_lost = peer->uid == 0;
	meta.samples_lost =
	    loss_log__between(d->losses, q.start_ns, q.end_ns < now ? q.end_ns : now);
	err = d->gpu ? gpu__open_ranges(d->gpu, &open, &nopen) : 0;
	if (!err)
		err = dump__trace(d->store, d->timeline, open, nopen, &q, &meta, &tr);
	free(open);
	if (err == -ENODATA) {
		no_data_message(peer, &w, "events", msg, sizeof(msg));
		return handlers__error(PROFD__ERROR_CODE__ERROR_NO_SAMPLES, msg, frame, len);
	}
	if (err) {
		snprintf(msg, sizeof(msg), "building the trace failed: %s", strerror(-err));
		return handlers__error(PROFD__ERROR_CODE__ERROR_INTERNAL, msg, frame, len);
	}
	if (tr->end_ns > now)
		tr->end_ns = now;
	resp.msg_case = PROFD__RESPONSE__MSG_TRACE;
	resp.trace = tr;
	err = wire_pack_response(&resp, FRAME_MAX_REPLY, frame, len);
	dump__trace_free(tr);
	note_large_reply(d, err ? 0 : *len);
	if (err == -EMSGSIZE)
		return handlers__error(
		    PROFD__ERROR_CODE__ERROR_TOO_LARGE,
		    "the trace is larger than the 256 MiB reply limit: narrow it "
		    "with --pid or --since",
		    frame, len);
	return err;
}

static int reply_control(bool enable, uint8_t **frame, size_t *len)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__GpuControl ctl = PROFD__GPU_CONTROL__INIT;

	ctl.enable = enable;
	ctl.has_flush_interval_ms = true;
	ctl.flush_interval_ms = GPU_FLUSH_INTERVAL_MS;
	resp.msg_case = PROFD__RESPONSE__MSG_GPU_CONTROL;
	resp.gpu_control = &ctl;
	return wire_pack_response(&resp, FRAME_MAX_REPLY, frame, len);
}

/*
 * A CUPTI library introduces its process. The process is the peer's (SO_PEERCRED), never one
 * the message names. A malformed attach closes the connection. A process has one connection
 * that speaks for it, its newest: a newer one closes the older, and the older may not attach
 * again.
 */
static int handle_gpu_attach(struct daemon *d, const struct server_peer *peer,
			     const Profd__GpuAttach *m, uint8_t **frame, size_t *len)
{
	uint32_t pid = (uint32_t)peer->pid, real_uid = 0;
	struct gpu_conn *c, *old;
	uint64_t old_id = 0;
	unsigned int flags = 0;
	bool enable = false, added = false;
	int err;

	if (peer->pid <= 0 || !d->gpu)
		return handlers__error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
				       "GPU attach: the daemon cannot take GPU data from this peer",
				       frame, len);
	gpu__clock(d->gpu, mono_ns());
	c = gpu_conn_of(d, peer->conn_id);
	if (c && c->pid != pid)
		return -EINVAL;
	if (c && gpu_conn_of_pid(d, pid) != c)
		return handlers__error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
				       "GPU attach: a newer connection speaks for this process",
				       frame, len);
	if (!c) {
		if (GROW(d->gpu_conns, d->gpu_conns_cap, d->n_gpu_conns + 1))
			return -ENOMEM;
		/* A library stays connected for the life of its process: not a profctl client. */
		err = d->server ? server__set_uplink(d->server, peer->conn_id) : 0;
		if (err == -EBUSY)
			return handlers__error(PROFD__ERROR_CODE__ERROR_BUSY,
					       "busy: too many CUDA processes connected (for the "
					       "daemon or for your user)",
					       frame, len);
		if (err)
			return err;
		/* The process's newer connection: it starts from scratch (string table). */
		old = gpu_conn_of_pid(d, pid);
		if (old) {
			old_id = old->conn_id;
			gpu__detach(d->gpu, pid);
		}
		c = &d->gpu_conns[d->n_gpu_conns++];
		*c = (struct gpu_conn){.conn_id = peer->conn_id, .pid = pid, .uid = peer->uid};
		added = true;
	}
	/*
	 * The connection's uid must own the process: a process can connect as another user only
	 * by passing its socket on, and then its data would be shown to that user.
	 */
	err = procfs_status_u32(d->proc_root, pid, "Uid", &real_uid);
	if (err || real_uid != peer->uid) {
		if (err)
			pr_warn("gpu: pid %u: cannot read its uid: %s", pid, strerror(-err));
		flags |= GPU_ATTACH_UID_MISMATCH;
	}
	err = gpu__attach(d->gpu, pid, peer->uid, flags, m, &enable);
	if (err) {
		pr_warn("gpu: pid %d: %s GpuAttach, closing its connection", peer->pid,
			err == -EINVAL ? "malformed" : "cannot take its");
		if (added)
			d->n_gpu_conns--; /* it was the last one */
		return err;
	}
	/* One connection per process: the older one goes (its close detaches nothing now). */
	if (old_id && d->server)
		server__close_conn(d->server, old_id);
	return reply_control(enable, frame, len);
}

static int handle_gpu_batch(struct daemon *d, const struct server_peer *peer,
			    const Profd__GpuBatch *m, uint8_t **frame, size_t *len)
{
	struct gpu_conn *c = gpu_conn_of(d, peer->conn_id);
	bool enable = false;
	int err;

	if (!c)
		return handlers__error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
				       "bad request: GpuBatch before GpuAttach", frame, len);
	/* A process that attached again on a newer connection: this one is stale. */
	if (gpu_conn_of_pid(d, c->pid) != c)
		return reply_control(false, frame, len);
	gpu__clock(d->gpu, mono_ns());
	err = gpu__batch(d->gpu, c->pid, m, &enable);
	if (err == -EBUSY) {
		char msg[192];

		/* Told, not dropped: the library ends this uplink and connects again later. */
		snprintf(msg, sizeof(msg),
			 "busy: GPU records over the rate of this uplink or of its user's uplinks "
			 "(%u records a second an uplink): the batch was refused",
			 gpu__uplink_rate(d->gpu));
		return handlers__error(PROFD__ERROR_CODE__ERROR_BUSY, msg, frame, len);
	}
	if (err) {
		pr_warn("gpu: pid %u: %s GpuBatch, closing its connection", c->pid,
			err == -EINVAL ? "malformed" : "cannot take its");
		return err;
	}
	return reply_control(enable, frame, len);
}

/*
 * Processes one uid other than root may have followed at once: the target filter holds
 * PROFD_MAX_TARGETS processes for everyone, and one user's script must not fill it.
 */
#define FOLLOW_MAX_PER_UID 64

/*
 * Whether uid may follow one more process: forget its followed processes that are gone, then
 * count the rest. Returns 0 with the slot reserved for pid, -EUSERS at the cap, -ENOMEM.
 */
static int follow_reserve(struct daemon *d, uint32_t uid, uint32_t pid)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_follow_roots;) {
		struct follow_root *f = &d->follow_roots[i];

		if (kill((pid_t)f->pid, 0) && errno == ESRCH) {
			*f = d->follow_roots[--d->n_follow_roots];
			continue;
		}
		n += f->uid == uid;
		i++;
	}
	if (n >= FOLLOW_MAX_PER_UID)
		return -EUSERS;
	if (GROW(d->follow_roots, d->follow_roots_cap, d->n_follow_roots + 1))
		return -ENOMEM;
	d->follow_roots[d->n_follow_roots++] = (struct follow_root){pid, uid};
	return 0;
}

/* Sample a process from now on: `profctl record` asks it for the command it starts. */
static int handle_follow(struct daemon *d, const struct server_peer *peer,
			 const Profd__FollowRequest *req, uint8_t **frame, size_t *len)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__FollowReply fr = PROFD__FOLLOW_REPLY__INIT;
	uint32_t owner;
	char msg[256];
	int err;

	if (req->pid == 0 || req->pid > INT32_MAX)
		return handlers__error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
				       "pid 0 is not a process", frame, len);
	if (procfs_owner_uid(d->proc_root, req->pid, &owner)) {
		snprintf(msg, sizeof(msg), "no process with pid %u", req->pid);
		return handlers__error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST, msg, frame, len);
	}
	if (peer->uid != 0 && owner != peer->uid) {
		snprintf(msg, sizeof(msg),
			 "permission denied: pid %u runs as uid %u and you are uid %u; only root "
			 "may profile other users' processes",
			 req->pid, owner, peer->uid);
		return handlers__error(PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED, msg, frame, len);
	}
	if (peer->uid != 0) {
		err = follow_reserve(d, peer->uid, req->pid);
		if (err) {
			snprintf(msg, sizeof(msg),
				 err == -EUSERS
				     ? "uid %u follows %d processes already (profctl record "
				       "runs); wait for one to end"
				     : "uid %u: out of memory",
				 peer->uid, FOLLOW_MAX_PER_UID);
			return handlers__error(PROFD__ERROR_CODE__ERROR_BUSY, msg, frame, len);
		}
	}
	fr.has_system_wide = true;
	fr.system_wide = !d->sampler || !sampler__filtered(d->sampler);
	/* System-wide too: its forks then name their parent, for the --children dump. */
	err = d->sampler ? sampler__follow(d->sampler, req->pid) : 0;
	if (err && peer->uid != 0)
		d->n_follow_roots--; /* the slot follow_reserve took last */
	if (err) {
		snprintf(msg, sizeof(msg), "cannot follow pid %u: %s", req->pid,
			 err == -ENOSPC ? "the daemon follows too many processes" : strerror(-err));
		return handlers__error(PROFD__ERROR_CODE__ERROR_BUSY, msg, frame, len);
	}
	pr_info("following pid %u for uid %u", req->pid, peer->uid);
	fr.has_children = true;
	fr.children = fr.system_wide || sampler__follows_children(d->sampler);
	fr.has_now_ns = true;
	fr.now_ns = mono_ns();
	resp.msg_case = PROFD__RESPONSE__MSG_FOLLOW;
	resp.follow = &fr;
	return wire_pack_response(&resp, FRAME_MAX_REPLY, frame, len);
}

void handlers__closed(void *ctx, const struct server_peer *peer)
{
	struct daemon *d = ctx;
	struct gpu_conn *c = gpu_conn_of(d, peer->conn_id);
	uint32_t pid;
	bool current;

	if (!c)
		return;
	pid = c->pid;
	current = gpu_conn_of_pid(d, pid) == c;
	*c = d->gpu_conns[--d->n_gpu_conns];
	/* Only the connection that speaks for the process now detaches it. */
	if (current && d->gpu)
		gpu__detach(d->gpu, pid);
}

void handlers__fini(struct daemon *d)
{
	snapshot__free(d->snapshot);
	d->snapshot = NULL;
	free(d->gpu_conns);
	d->gpu_conns = NULL;
	d->n_gpu_conns = d->gpu_conns_cap = 0;
	free(d->follow_roots);
	d->follow_roots = NULL;
	d->n_follow_roots = d->follow_roots_cap = 0;
}

int handlers__handle(void *ctx, const struct server_peer *peer, const Profd__Request *req,
		     uint8_t **frame, size_t *frame_len)
{
	struct daemon *d = ctx;

	switch (req->msg_case) {
	case PROFD__REQUEST__MSG_STATUS:
		return handle_status(d, peer, frame, frame_len);
	case PROFD__REQUEST__MSG_DUMP:
		return handle_dump(d, peer, req->dump, frame, frame_len);
	case PROFD__REQUEST__MSG_TRACE:
		return handle_trace(d, peer, req->trace, frame, frame_len);
	case PROFD__REQUEST__MSG_STACKS:
		return handlers__stacks(d, peer, req->stacks, frame, frame_len);
	case PROFD__REQUEST__MSG_GPU_ATTACH:
		return handle_gpu_attach(d, peer, req->gpu_attach, frame, frame_len);
	case PROFD__REQUEST__MSG_GPU_BATCH:
		return handle_gpu_batch(d, peer, req->gpu_batch, frame, frame_len);
	case PROFD__REQUEST__MSG_FOLLOW:
		return handle_follow(d, peer, req->follow, frame, frame_len);
	default:
		return handlers__error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST, "unknown request",
				       frame, frame_len);
	}
}
