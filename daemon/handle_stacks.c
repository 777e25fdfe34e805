// SPDX-License-Identifier: BSD-2-Clause
/*
 * StacksRequest: a live stack dump of one process. Every thread's stacks are read on demand by
 * the task iterator (snapshot.h), symbolized as samples are (ingest__snapshot_thread) and
 * answered as a Profile with one sample per thread (dump__threads).
 *
 * Who may ask: root for any process, anyone else for the processes they own as ptrace decides
 * (the owner of /proc/PID/stat: root for a process that is not dumpable), which is the rule of
 * dumps. A process outside the daemon's --pid targets may be dumped too; what the daemon learnt
 * about it is dropped afterwards.
 */
#include "daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dump.h"
#include "frame.h"
#include "log.h"
#include "procfs.h"
#include "timeutil.h"
#include "wire.h"

/* The threads one dump shows at most: their records take ~1.5 KiB to 6 KiB each. */
#define MAX_STACK_THREADS 4096

/* Sampled anyway (a --pid target, a process followed from one, or every process)? */
static bool is_target(const struct daemon *d, uint32_t pid)
{
	if (d->sampler)
		return sampler__covers(d->sampler, pid);
	if (!d->cfg->npids)
		return true;
	for (size_t i = 0; i < d->cfg->npids; i++)
		if (d->cfg->pids[i] == pid)
			return true;
	return false;
}

struct take_ctx {
	struct daemon *d;
	struct dump_thread *th;
	size_t n;
	size_t bad; /* records ingest refused as malformed */
};

/* The Profile's GIL state of a thread record's flags. */
static uint32_t gil_state(uint32_t flags)
{
	if (flags & PROFD_SAMPLE_GIL_HELD)
		return PROFD__GIL_STATE__GIL_HELD;
	if (flags & PROFD_SAMPLE_GIL_FREE)
		return PROFD__GIL_STATE__GIL_NOT_HELD;
	if (flags & PROFD_SAMPLE_NO_GIL)
		return PROFD__GIL_STATE__GIL_NONE;
	return PROFD__GIL_STATE__GIL_UNKNOWN;
}

static int on_thread(void *ctx, const struct profd_sample_rec *rec, size_t size)
{
	struct take_ctx *t = ctx;
	uint32_t stack = 0;
	int err = ingest__snapshot_thread(t->d->ingest, rec, size, &stack);

	if (err == -EINVAL) {
		t->bad++;
		return 0;
	}
	if (err)
		return err;
	t->th[t->n++] = (struct dump_thread){
	    .pid = rec->pid,
	    .tid = rec->tid,
	    .stack = stack,
	    .state = rec->task_state,
	    .gil = gil_state(rec->flags),
	    .on_cpu = (rec->flags & PROFD_SAMPLE_ON_CPU) != 0,
	};
	return 0;
}

/*
 * Whether the peer may dump pid, and pid is a process. Returns 0, or 1 with *code and msg set.
 */
static int check_target(struct daemon *d, const struct server_peer *peer, uint32_t pid,
			Profd__ErrorCode *code, char *msg, size_t len)
{
	uint32_t tgid = 0, owner = 0;
	int err;

	*code = PROFD__ERROR_CODE__ERROR_BAD_REQUEST;
	if (pid == 0) {
		snprintf(msg, len, "pid 0 is not a process");
		return 1;
	}
	err = procfs_status_u32(d->proc_root, pid, "Tgid", &tgid);
	if (!err)
		err = procfs_owner_uid(d->proc_root, pid, &owner);
	if (err == -ESRCH) {
		*code = PROFD__ERROR_CODE__ERROR_NO_PROCESS;
		snprintf(msg, len, "no process %u", pid);
		return 1;
	}
	if (err) {
		*code = PROFD__ERROR_CODE__ERROR_INTERNAL;
		snprintf(msg, len, "cannot read /proc/%u/status: %s", pid, strerror(-err));
		return 1;
	}
	if (tgid != pid) {
		*code = PROFD__ERROR_CODE__ERROR_NO_PROCESS;
		snprintf(msg, len, "%u is a thread of process %u: dump stacks --pid %u", pid, tgid,
			 tgid);
		return 1;
	}
	if (peer->uid != 0 && owner != peer->uid) {
		*code = PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED;
		snprintf(
		    msg, len,
		    "permission denied: pid %u runs as uid %u and you are uid %u; only root may "
		    "see other users' processes",
		    pid, owner, peer->uid);
		return 1;
	}
	return 0;
}

/* Load the iterator on first use; a failure is remembered and answered from then on. */
static struct snapshot *snapshot_of(struct daemon *d)
{
	if (!d->snapshot && !d->snapshot_error[0] && d->sampler)
		d->snapshot =
		    snapshot__new(d->sampler, d->snapshot_error, sizeof(d->snapshot_error));
	if (!d->snapshot && !d->snapshot_error[0])
		snprintf(d->snapshot_error, sizeof(d->snapshot_error),
			 "no sampler to share maps with");
	return d->snapshot;
}

int handlers__stacks(struct daemon *d, const struct server_peer *peer,
		     const Profd__StacksRequest *req, uint8_t **frame, size_t *len)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	struct take_ctx t = {.d = d};
	struct dump_meta meta = {0};
	Profd__Profile *profile = NULL;
	Profd__ErrorCode code;
	struct snapshot *sn;
	uint64_t t0 = mono_ns();
	bool truncated = false;
	int pidfd = -1, err, n;
	char msg[256];

	if (check_target(d, peer, req->pid, &code, msg, sizeof(msg)))
		return handlers__error(code, msg, frame, len);
	sn = snapshot_of(d);
	if (!sn) {
		snprintf(msg, sizeof(msg), "live stack dumps are not available: %s",
			 d->snapshot_error);
		return handlers__error(PROFD__ERROR_CODE__ERROR_UNSUPPORTED, msg, frame, len);
	}
	/*
	 * Held across the read: if the process is still there after it, the pid named it all
	 * along (the owner checked above is the owner of the threads read).
	 */
	pidfd = (int)syscall(SYS_pidfd_open, (pid_t)req->pid, 0);
	if (pidfd < 0) {
		if (errno == ESRCH) {
			snprintf(msg, sizeof(msg), "no process %u", req->pid);
			return handlers__error(PROFD__ERROR_CODE__ERROR_NO_PROCESS, msg, frame,
					       len);
		}
		err = -errno;
		goto internal;
	}
	t.th = calloc(MAX_STACK_THREADS, sizeof(*t.th));
	if (!t.th) {
		err = -ENOMEM;
		goto internal;
	}
	err = ingest__snapshot_begin(d->ingest, req->pid);
	if (err)
		goto internal;
	n = snapshot__take(sn, req->pid, MAX_STACK_THREADS, on_thread, &t);
	if (!is_target(d, req->pid))
		ingest__snapshot_forget(d->ingest, req->pid);
	truncated = n == -E2BIG;
	if (n < 0 && !truncated) {
		err = n;
		goto internal;
	}
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) || !t.n) {
		snprintf(msg, sizeof(msg), "no process %u: it exited during the dump", req->pid);
		err = handlers__error(PROFD__ERROR_CODE__ERROR_NO_PROCESS, msg, frame, len);
		goto out;
	}
	if (t.bad)
		pr_warn("stacks: pid %u: %zu malformed thread records", req->pid, t.bad);

	meta.start_ns = meta.end_ns = mono_ns();
	meta.realtime_offset_ns = realtime_offset_ns();
	meta.hide_kernel_addresses = peer->uid != 0;
	err = dump__threads(d->store, t.th, t.n, &meta, &profile);
	if (err)
		goto internal;
	if (truncated) {
		profile->has_threads_limit = true;
		profile->threads_limit = MAX_STACK_THREADS;
	}
	if (peer->uid != 0) {
		profile->has_only_uid = true;
		profile->only_uid = peer->uid;
	}
	resp.msg_case = PROFD__RESPONSE__MSG_PROFILE;
	resp.profile = profile;
	err = wire_pack_response(&resp, FRAME_MAX_REPLY, frame, len);
	pr_debug("stacks: uid %u: pid %u: %zu threads in %.1f ms", peer->uid, req->pid, t.n,
		 (double)(mono_ns() - t0) / 1e6);
	dump__free(profile);
	goto out;
internal:
	snprintf(msg, sizeof(msg), "the stack dump of pid %u failed: %s", req->pid, strerror(-err));
	err = handlers__error(PROFD__ERROR_CODE__ERROR_INTERNAL, msg, frame, len);
out:
	free(t.th);
	if (pidfd >= 0)
		close(pidfd);
	return err;
}
