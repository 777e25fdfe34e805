// SPDX-License-Identifier: BSD-2-Clause
/* Status and dump requests: access control, time ranges, replies. */
#include "daemon.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "dump.h"
#include "frame.h"
#include "log.h"
#include "timeutil.h"
#include "wire.h"

#define MAX_DUMP_PIDS 1024

static int reply_error(Profd__ErrorCode code, const char *msg, uint8_t **frame, size_t *len)
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

static int handle_status(struct daemon *d, uint8_t **frame, size_t *len)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__StatusReply st = PROFD__STATUS_REPLY__INIT;
	uint64_t cnt[PROFD_CNT__MAX] = { 0 };
	struct ingest_stats is;
	struct store_stats ss;
	struct rusage ru;
	uint64_t now = mono_ns();

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
	st.system_wide = d->cfg->npids == 0;
	st.n_target_pids = d->cfg->npids;
	st.target_pids = (uint32_t *)d->cfg->pids;
	st.has_ncpus = true;
	st.ncpus = sampler__ncpus(d->sampler);
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
	st.has_python_no_thread_state = true;
	st.python_no_thread_state = is.py_no_tstate;
	st.has_python_processes = true;
	st.python_processes = is.py_processes;
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

	resp.msg_case = PROFD__RESPONSE__MSG_STATUS;
	resp.status = &st;
	return wire_pack_response(&resp, FRAME_MAX_REPLY, frame, len);
}

static void describe_window(const Profd__DumpRequest *req, char *buf, size_t len)
{
	if (req->has_since_ns) {
		uint64_t s = req->since_ns / NSEC_PER_SEC;

		if (req->since_ns < NSEC_PER_SEC)
			snprintf(buf, len, " in the last %llums",
				 (unsigned long long)(req->since_ns / NSEC_PER_MSEC));
		else if (s % 3600 == 0)
			snprintf(buf, len, " in the last %lluh", (unsigned long long)s / 3600);
		else if (s % 60 == 0)
			snprintf(buf, len, " in the last %llum", (unsigned long long)s / 60);
		else
			snprintf(buf, len, " in the last %llus", (unsigned long long)s);
	}
	else if (req->has_start_ns || req->has_end_ns)
		snprintf(buf, len, " in the requested time range");
	else
		buf[0] = '\0';
}

static int handle_dump(struct daemon *d, const struct server_peer *peer,
		       const Profd__DumpRequest *req, uint8_t **frame, size_t *len)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	struct store_query q = { .end_ns = UINT64_MAX };
	struct dump_meta meta = { 0 };
	Profd__Profile *profile = NULL;
	struct store_stats ss;
	uint64_t now = mono_ns();
	char msg[256], window[64];
	int err;

	if (req->n_pids > MAX_DUMP_PIDS)
		return reply_error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
				   "too many pids in one dump (the limit is 1024)", frame, len);
	for (size_t i = 0; i < req->n_pids; i++) {
		if (req->pids[i] == 0)
			return reply_error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
					   "pid 0 is not a process", frame, len);
	}
	if (req->has_since_ns) {
		if (req->since_ns == 0)
			return reply_error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
					   "--since must be longer than zero", frame, len);
		q.start_ns = req->since_ns < now ? now - req->since_ns : 0;
	}
	if (req->has_start_ns)
		q.start_ns = req->start_ns > q.start_ns ? req->start_ns : q.start_ns;
	if (req->has_end_ns)
		q.end_ns = req->end_ns;
	if (q.start_ns >= q.end_ns)
		return reply_error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
				   "the time range is empty: its start is not before its end", frame,
				   len);
	describe_window(req, window, sizeof(window));

	/* Root sees everything; anyone else only processes running under their own uid. */
	if (peer->uid != 0) {
		for (size_t i = 0; i < req->n_pids; i++) {
			struct store_process_info pi;

			if (store__process(d->store, req->pids[i], &pi) && pi.uid != peer->uid) {
				snprintf(msg, sizeof(msg),
					 "permission denied: pid %u runs as uid %u and you are "
					 "uid %u; only root may see other users' processes",
					 req->pids[i], pi.uid, peer->uid);
				return reply_error(PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED, msg,
						   frame, len);
			}
		}
		q.filter_uid = true;
		q.uid = peer->uid;
	}
	q.pids = req->pids;
	q.npids = req->n_pids;
	q.tid = req->has_tid ? req->tid : 0;

	/* The range the data can cover: not before the oldest sample kept, not after now. */
	store__stats(d->store, &ss);
	meta.start_ns = q.start_ns > ss.oldest_ns ? q.start_ns : ss.oldest_ns;
	meta.end_ns = q.end_ns < now ? q.end_ns : now;
	meta.frequency_hz = d->cfg->frequency_hz;
	meta.hide_kernel_addresses = peer->uid != 0;
	meta.realtime_offset_ns = realtime_offset_ns();
	err = dump__build(d->store, &q, &meta, &profile);
	if (err == -ENODATA) {
		if (req->n_pids == 1)
			snprintf(msg, sizeof(msg), "no samples for pid %u%s", req->pids[0], window);
		else if (req->n_pids > 1)
			snprintf(msg, sizeof(msg), "no samples for those %zu pids%s", req->n_pids,
				 window);
		else
			snprintf(msg, sizeof(msg), "no samples%s%s", window,
				 peer->uid ? " for processes of your uid" : "");
		if (req->has_tid) {
			size_t l = strlen(msg);

			snprintf(msg + l, sizeof(msg) - l, " (thread %u)", req->tid);
		}
		return reply_error(PROFD__ERROR_CODE__ERROR_NO_SAMPLES, msg, frame, len);
	}
	if (err) {
		snprintf(msg, sizeof(msg), "building the profile failed: %s", strerror(-err));
		return reply_error(PROFD__ERROR_CODE__ERROR_INTERNAL, msg, frame, len);
	}
	if (peer->uid != 0) {
		profile->has_only_uid = true;
		profile->only_uid = peer->uid;
	}
	resp.msg_case = PROFD__RESPONSE__MSG_PROFILE;
	resp.profile = profile;
	err = wire_pack_response(&resp, FRAME_MAX_REPLY, frame, len);
	dump__free(profile);
	if (err == -EMSGSIZE)
		return reply_error(PROFD__ERROR_CODE__ERROR_TOO_LARGE,
				   "the profile is larger than the 256 MiB reply limit: narrow it "
				   "with --pid or --since",
				   frame, len);
	return err;
}

int handlers__handle(void *ctx, const struct server_peer *peer, const Profd__Request *req,
		     uint8_t **frame, size_t *frame_len)
{
	struct daemon *d = ctx;

	switch (req->msg_case) {
	case PROFD__REQUEST__MSG_STATUS:
		return handle_status(d, frame, frame_len);
	case PROFD__REQUEST__MSG_DUMP:
		return handle_dump(d, peer, req->dump, frame, frame_len);
	default:
		return reply_error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST, "unknown request", frame,
				   frame_len);
	}
}
