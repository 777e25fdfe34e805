// SPDX-License-Identifier: BSD-2-Clause
#define _GNU_SOURCE
#include "uplink_priv.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "frame.h"
#include "gate.h"
#include "nvtx_open.h"
#include "timeutil.h"
#include "wire.h"

/* Replies to the library are a HelloReply, a GpuControl or an Error: small. */
#define UPLINK_MAX_REPLY (64u << 10)
/* Open NVTX ranges sent per interval at most (the innermost of very deep nesting go unsent). */
#define UPLINK_OPEN_MAX 1024
/* Batches sent back to back in one interval before the rest waits for the next one. */
#define UPLINK_MAX_BATCHES_PER_TICK 64
/* How long process exit waits for a last forced flush to reach the daemon. */
#define UPLINK_EXIT_FLUSH_MS 500
#define UPLINK_RETRY_MIN_MS 1000
#define UPLINK_RETRY_MAX_MS 30000
/* Lines waiting for the uplink thread to write them. */
#define LOG_SLOTS 16
#define LOG_LINE 256

struct uplink up = {
    .fd = -1,
    .wake_fd = -1,
    .core_lock = PTHREAD_MUTEX_INITIALIZER,
    .exit_lock = PTHREAD_MUTEX_INITIALIZER,
    .exit_cond = PTHREAD_COND_INITIALIZER,
};
static atomic_bool up_started;
static atomic_bool log_quiet;

/* ---- logging ------------------------------------------------------------------------------- */

enum { SLOT_FREE, SLOT_FILLING, SLOT_READY };

struct log_slot {
	atomic_int state;
	uint64_t seq;
	size_t len;
	char line[LOG_LINE];
};

static struct log_slot log_slots[LOG_SLOTS];
static atomic_uint_least64_t log_seq;

void uplink__set_quiet(bool quiet)
{
	atomic_store(&log_quiet, quiet);
}

void uplink__log(const char *fmt, ...)
{
	int saved_errno = errno, fd, n;
	struct log_slot *s = NULL;
	va_list ap;

	if (atomic_load(&log_quiet))
		return;
	for (int i = 0; i < LOG_SLOTS && !s; i++) {
		int free_ = SLOT_FREE;

		if (atomic_compare_exchange_strong(&log_slots[i].state, &free_, SLOT_FILLING))
			s = &log_slots[i];
	}
	if (!s)
		goto out; /* every slot waits for the writer: this line is lost */
	n = snprintf(s->line, sizeof(s->line), "profd_cupti: ");
	va_start(ap, fmt);
	n += vsnprintf(s->line + n, sizeof(s->line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(s->line) - 2)
		n = (int)sizeof(s->line) - 2;
	s->line[n++] = '\n';
	s->len = (size_t)n;
	s->seq = atomic_fetch_add(&log_seq, 1);
	atomic_store_explicit(&s->state, SLOT_READY, memory_order_release);
	/* An eventfd write neither blocks (the counter is far from full) nor raises a signal. */
	fd = atomic_load(&up.wake_fd);
	if (fd >= 0) {
		uint64_t one = 1;

		(void)!write(fd, &one, sizeof(one));
	}
out:
	errno = saved_errno;
}

void uplink__write_logs(void)
{
	for (;;) {
		struct log_slot *first = NULL;
		struct pollfd pfd = {.fd = STDERR_FILENO, .events = POLLOUT};

		for (int i = 0; i < LOG_SLOTS; i++) {
			struct log_slot *s = &log_slots[i];

			if (atomic_load_explicit(&s->state, memory_order_acquire) == SLOT_READY &&
			    (!first || s->seq < first->seq))
				first = s;
		}
		if (!first)
			return;
		/*
		 * One write, not stdio: the line stays whole among other processes' output on a
		 * shared terminal, and the application's stderr buffer and lock are left alone.
		 * A full pipe drops the line rather than stall the uplink; this thread blocks
		 * every signal, so a closed one only fails the write.
		 */
		if (poll(&pfd, 1, 0) == 1 && !(pfd.revents & (POLLERR | POLLNVAL)))
			(void)!write(STDERR_FILENO, first->line, first->len);
		atomic_store_explicit(&first->state, SLOT_FREE, memory_order_release);
	}
}

/* Uplink thread only: recorded and written at once. */
void uplink_log_once(unsigned cond, const char *fmt, ...)
{
	char line[480];
	va_list ap;

	if (up.logged & cond)
		return;
	up.logged |= cond;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	uplink__log("%s", line);
	uplink__write_logs();
}

/* Core calls go through these: after process exit began, the core is left alone. */
static bool core_begin(void)
{
	pthread_mutex_lock(&up.core_lock);
	if (atomic_load(&up.core_off)) {
		pthread_mutex_unlock(&up.core_lock);
		return false;
	}
	return true;
}

static void core_end(void)
{
	atomic_store(&up.enabled, core__enabled());
	pthread_mutex_unlock(&up.core_lock);
}

/* Stop collecting (the daemon asked, or it is gone for good). */
static void core_stop(void)
{
	if (!core_begin())
		return;
	if (core__enabled()) {
		core__disable();
		gate__stopped(&up.gate, mono_ns());
	}
	core_end();
}

/* Follow a GpuControl: the interval, and disabling at once. Enabling waits for sync_enable. */
static void apply_control(struct link *l, const Profd__GpuControl *c)
{
	uint32_t ms = c->has_flush_interval_ms && c->flush_interval_ms ? c->flush_interval_ms
								       : UPLINK_INTERVAL_DEFAULT_MS;
	bool was = l->want_enable;

	if (ms < UPLINK_INTERVAL_MIN_MS)
		ms = UPLINK_INTERVAL_MIN_MS;
	if (ms > UPLINK_INTERVAL_MAX_MS)
		ms = UPLINK_INTERVAL_MAX_MS;
	l->interval_ms = ms;
	l->want_enable = c->enable;
	/* A daemon answers: collection is its to decide again, the grace is over. */
	up.grace_until = 0;
	if (c->enable) {
		/*
		 * Enabling is tried once per request: when the daemon starts asking (its first
		 * control on a connection, or false -> true). A failure (another tool holds the
		 * subscriber slot) is reported, not retried in a loop that would race the other
		 * tool for the slot; the gate spaces out the attempts of a daemon that flips.
		 */
		if (!was)
			l->pending = true;
		return;
	}
	l->pending = false;
	core_stop();
}

/*
 * Enable when a request waits and the gate allows it. Returns true when that changed what the
 * library reports (a success changes the clock, a failure the state): the daemon needs both.
 */
static bool try_enable(struct link *l)
{
	struct core_info before;
	int err;

	if (!l->pending || !l->want_enable || !up.init_ok || !gate__may_enable(&up.gate, mono_ns()))
		return false;
	if (!core_begin())
		return false;
	l->pending = false;
	if (core__enabled()) {
		core_end();
		return false;
	}
	before = up.info;
	atomic_store(&up.enabling, true);
	/* A failure is the core's to log (it knows which); the daemon gets it in GpuAttach. */
	err = core__enable(&up.info);
	atomic_store(&up.enabling, false);
	gate__attempted(&up.gate, mono_ns(), err == 0);
	core_end();
	return memcmp(&before, &up.info, sizeof(before)) != 0;
}

/* Tell the daemon how the library stands, and follow its answer. */
static int send_attach(struct link *l)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__GpuAttach a = PROFD__GPU_ATTACH__INIT;
	const struct core_info *i = &up.info;
	Profd__Response *resp;
	int err;

	a.state = (Profd__GpuState)i->state;
	a.detail = i->detail[0] ? (char *)i->detail : NULL;
	a.has_cupti_version = i->cupti_version != 0;
	a.cupti_version = i->cupti_version;
	a.cupti_path = i->cupti_path[0] ? (char *)i->cupti_path : NULL;
	a.library_path = i->library_path[0] ? (char *)i->library_path : NULL;
	a.has_clock = i->clock != 0;
	a.clock = (Profd__GpuClock)i->clock;
	a.has_launch_rate_limit = true;
	a.launch_rate_limit = i->launch_rate_limit;
	a.has_max_delay_ms = true;
	a.max_delay_ms = i->max_delay_ms;
	req.msg_case = PROFD__REQUEST__MSG_GPU_ATTACH;
	req.gpu_attach = &a;
	err = uplink_call(l, &req, PROFD__RESPONSE__MSG_GPU_CONTROL, &resp, UPLINK_IO_TIMEOUT_MS);
	if (err)
		return err;
	apply_control(l, resp->gpu_control);
	profd__response__free_unpacked(resp, NULL);
	return 0;
}

/* Enable if asked and allowed; a new GpuAttach after each change. */
static int sync_enable(struct link *l)
{
	/* At most a few rounds: each attempt happens once per request anyway. */
	for (int round = 0; round < 4; round++) {
		int err;

		if (!try_enable(l))
			return 0;
		err = send_attach(l);
		if (err)
			return err;
	}
	return 0;
}

/*
 * One interval's work: flush the core, send what the queue holds in as many GpuBatch frames
 * as it takes (each under UPLINK_BATCH_BUDGET), follow each reply. final: process exit, the
 * one flush that is forced (partly filled CUPTI buffers too).
 */
static int tick(struct link *l, struct gpubatch *b, bool final)
{
	uint64_t until = 0;
	bool taken = false;
	int err;

	l->nopens = l->open_off = 0;
	err = sync_enable(l);
	if (err)
		return err;
	if (core_begin()) {
		if (core__enabled()) {
			core__flush(final, &until);
			/*
			 * An older watermark not yet sent keeps its place: a newer one would move
			 * the target on every interval under a steady backlog and never hold.
			 */
			if (until && !l->until_pend) {
				l->until_pend = until;
				l->until_target = evq__pushed(up.q);
			}
			/* Open ranges end, for now, where the watermark vouches for the records. */
			if (l->until_pend)
				l->nopens =
				    core__open_ranges(l->opens, UPLINK_OPEN_MAX, l->until_pend);
		}
		/* Another CUPTI client took the activity API (maybe while no daemon was there). */
		taken = core__taken(&up.info);
		core_end();
	}
	if (taken) {
		err = send_attach(l);
		if (err)
			return err;
	}
	for (int nb = 0; nb < UPLINK_MAX_BATCHES_PER_TICK; nb++) {
		Profd__Request req = PROFD__REQUEST__INIT;
		Profd__GpuBatch *msg;
		Profd__Response *resp;
		bool last;

		if (l->off == l->nevs) {
			l->nevs = evq__drain(up.q, l->evs, UPLINK_BATCH_EVENTS);
			l->off = 0;
			l->drained += l->nevs;
			l->more = l->nevs == UPLINK_BATCH_EVENTS;
		}
		gpubatch__begin(b);
		msg = gpubatch__msg(b);
		while (l->off < l->nevs && gpubatch__add(b, &l->evs[l->off], false))
			l->off++;
		if (l->until_pend && l->drained - (l->nevs - l->off) >= l->until_target) {
			l->until_ok = l->until_pend;
			l->until_pend = 0;
		}
		/* Open ranges go after every closed event queued before the flush. */
		if (!l->until_pend)
			while (l->open_off < l->nopens &&
			       gpubatch__add(b, &l->opens[l->open_off], true))
				l->open_off++;
		last = l->off == l->nevs && !l->more && l->open_off == l->nopens;
		msg->dropped = evq__take_dropped(up.q);
		msg->has_dropped = msg->dropped != 0;
		core__take_counts(&msg->zero_time_records, &msg->forced_flushes);
		msg->has_zero_time_records = msg->zero_time_records != 0;
		msg->has_forced_flushes = msg->forced_flushes != 0;
		msg->has_complete_until_ns = l->until_ok != 0;
		msg->complete_until_ns = l->until_ok;
		req.msg_case = PROFD__REQUEST__MSG_GPU_BATCH;
		req.gpu_batch = msg;
		err = uplink_call(l, &req, PROFD__RESPONSE__MSG_GPU_CONTROL, &resp,
				  UPLINK_IO_TIMEOUT_MS);
		gpubatch__begin(b);
		if (err)
			return err;
		apply_control(l, resp->gpu_control);
		profd__response__free_unpacked(resp, NULL);
		err = sync_enable(l);
		if (err)
			return err;
		if (last)
			break;
	}
	return 0;
}

/* Release process exit if it waits for the last flush. */
static void exit_flush_done(void)
{
	pthread_mutex_lock(&up.exit_lock);
	if (up.exit_requested) {
		up.exit_flush_done = true;
		pthread_cond_broadcast(&up.exit_cond);
	}
	pthread_mutex_unlock(&up.exit_lock);
}

/* The wake eventfd fired: take its count, write what was logged. */
static void woken(void)
{
	uint64_t v;

	/* Nonblocking; another reader cannot exist, so the value is ours. */
	(void)!read(up.wake_fd, &v, sizeof(v));
	uplink__write_logs();
}

/*
 * Wait an interval for the next tick. Returns 0, 1 when process exit asks for a last flush, or
 * an error when the daemon closed the connection meanwhile (it never speaks unasked).
 */
static int idle(struct link *l)
{
	uint64_t deadline = mono_ns() + l->interval_ms * NSEC_PER_MSEC;

	for (;;) {
		struct pollfd pfd[2] = {{.fd = l->fd, .events = POLLIN},
					{.fd = up.wake_fd, .events = POLLIN}};
		int r = poll(pfd, up.wake_fd >= 0 ? 2 : 1, ms_until(deadline));

		if (r == 0)
			return 0;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pfd[1].revents & POLLIN) {
			woken();
			if (atomic_load(&up.exit_wanted))
				return 1;
		}
		if (pfd[0].revents)
			return -ECONNRESET;
	}
}

/* Discard what the queue holds: nobody will take it. */
static void discard_queue(struct link *l)
{
	while (evq__drain(up.q, l->evs, UPLINK_BATCH_EVENTS))
		;
	evq__take_dropped(up.q);
	l->nevs = l->off = 0;
	l->more = false;
}

/* One connection from connect to its end. Returns 1 when it got as far as GpuAttach. */
static int session(struct link *l, struct gpubatch *b)
{
	int err, attached = 0;

	l->fd = uplink_connect();
	if (l->fd < 0)
		return 0;
	atomic_store(&up.fd, l->fd);
	frame_reader__free(l->reader);
	l->reader = frame_reader__new(UPLINK_MAX_REPLY);
	if (!l->reader)
		goto out;
	gpubatch__forget_strings(b);
	l->want_enable = l->pending = false;
	l->interval_ms = UPLINK_INTERVAL_DEFAULT_MS;
	/* What an earlier connection left is not this daemon's. */
	discard_queue(l);
	l->drained = 0;
	l->until_ok = l->until_pend = l->until_target = 0;
	err = uplink_hello(l);
	if (err)
		goto out;
	err = send_attach(l);
	if (err == -EREMOTEIO)
		uplink_log_once(LOGGED_REFUSED, "the daemon at %s does not take GPU activity: %s",
				up.path, l->err);
	if (err)
		goto out;
	attached = 1;
	/* A daemon runs and will not get GPU activity from us: say why, once. */
	if (!up.init_ok)
		uplink_log_once(LOGGED_INIT, "%s; GPU activity is not collected", up.info.detail);
	err = sync_enable(l);
	for (; !err;) {
		bool final;

		err = idle(l);
		if (err < 0)
			break;
		final = err == 1;
		err = tick(l, b, final);
		if (final) {
			/* The process is exiting: the core is off limits from here on. */
			atomic_store(&up.core_off, true);
			goto out;
		}
	}
	if (err == -EREMOTEIO)
		uplink_log_once(LOGGED_LOST,
				"the daemon at %s ended the GPU uplink: %s; reconnecting", up.path,
				l->err);
	else
		uplink_log_once(LOGGED_LOST, "lost the daemon at %s (%s); reconnecting", up.path,
				strerror(-err));
out:
	if (l->resp) {
		profd__response__free_unpacked(l->resp, NULL);
		l->resp = NULL;
	}
	atomic_store(&up.fd, -1);
	close(l->fd);
	l->fd = -1;
	/*
	 * Without a daemon nobody reads the events. Collection goes on for the grace period only
	 * (a restarting daemon is back by then), never extended by a daemon that accepts and
	 * drops the connection before it answers.
	 */
	if (atomic_load(&up.enabled) && !atomic_load(&up.core_off) && !up.grace_until)
		up.grace_until = mono_ns() + UPLINK_GRACE_MS * NSEC_PER_MSEC;
	exit_flush_done();
	return attached;
}

/*
 * Between connection attempts: write logs as they come, and while the grace period runs keep
 * CUPTI's buffers moving (flushed and dropped, there is no one to send them to); when it ends,
 * stop collecting.
 */
static void wait_between(struct link *l, uint32_t ms)
{
	uint64_t deadline = mono_ns() + ms * NSEC_PER_MSEC;

	for (;;) {
		uint64_t now = mono_ns(), next = deadline;
		struct pollfd pfd = {.fd = up.wake_fd, .events = POLLIN};
		uint64_t until;

		if (up.grace_until && now >= up.grace_until) {
			up.grace_until = 0;
			core_stop();
			discard_queue(l);
		} else if (up.grace_until) {
			if (core_begin()) {
				core__flush(false, &until);
				core_end();
			}
			discard_queue(l);
			next = now + UPLINK_INTERVAL_DEFAULT_MS * NSEC_PER_MSEC;
			if (next > up.grace_until)
				next = up.grace_until;
			if (next > deadline)
				next = deadline;
		}
		if (now >= deadline)
			return;
		if (up.wake_fd < 0) {
			struct timespec ts = {.tv_sec = (time_t)((next - now) / NSEC_PER_SEC),
					      .tv_nsec = (long)((next - now) % NSEC_PER_SEC)};

			nanosleep(&ts, NULL);
			continue;
		}
		if (poll(&pfd, 1, ms_until(next)) > 0 && (pfd.revents & POLLIN)) {
			woken();
			/* Exit while disconnected: there is nothing to flush to. */
			if (atomic_load(&up.exit_wanted))
				exit_flush_done();
		}
	}
}

static void *uplink_main(void *arg)
{
	uint32_t wait_ms = up.retry_min_ms;
	struct link l = {.fd = -1};
	struct gpubatch *b = gpubatch__new();
	pthread_attr_t attr;
	size_t stack = 0;

	if (pthread_getattr_np(pthread_self(), &attr) == 0) {
		pthread_attr_getstacksize(&attr, &stack);
		pthread_attr_destroy(&attr);
	}
	atomic_store(&up.stack_size, stack);
	l.evs = calloc(UPLINK_BATCH_EVENTS, sizeof(*l.evs));
	l.opens = calloc(UPLINK_OPEN_MAX, sizeof(*l.opens));
	if (!l.evs || !l.opens || !b) {
		uplink__log("out of memory: GPU activity is not collected");
		uplink__write_logs();
		free(l.evs);
		free(l.opens);
		gpubatch__free(b);
		return NULL;
	}
	uplink__write_logs(); /* what core__init recorded (a malformed variable) */
	for (;;) {
		if (session(&l, b))
			wait_ms = up.retry_min_ms;
		/* Exit already began: nothing to reconnect for. */
		if (atomic_load(&up.core_off)) {
			wait_between(&l, UPLINK_RETRY_MAX_MS);
			continue;
		}
		wait_between(&l, wait_ms);
		wait_ms = wait_ms * 2 > up.retry_max_ms ? up.retry_max_ms : wait_ms * 2;
	}
	return NULL;
}

static bool env_flag(const char *name)
{
	const char *v = getenv(name);

	return v && strcmp(v, "1") == 0;
}

int uplink__start(struct evq *q, const struct core_info *info, const struct uplink_opts *opts)
{
	const char *path = opts && opts->socket_path ? opts->socket_path : wire_socket_path(NULL);
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int err;

	if (atomic_exchange(&up_started, true))
		return -EALREADY;
	if (opts && opts->quiet)
		uplink__set_quiet(true);
	/* No thread will write these lines: recorded and lost, never written from this thread. */
	if (strlen(path) >= sizeof(up.path)) {
		uplink__log("socket path too long: %s; GPU activity is not collected", path);
		return -ENAMETOOLONG;
	}
	memcpy(up.path, path, strlen(path) + 1);
	up.q = q;
	up.info = *info;
	up.init_ok = info->state == PROFD__GPU_STATE__GPU_STATE_READY;
	up.verbose = (opts && opts->verbose) || env_flag("PROFD_CUPTI_VERBOSE");
	up.retry_min_ms = opts && opts->retry_min_ms ? opts->retry_min_ms : UPLINK_RETRY_MIN_MS;
	up.retry_max_ms = opts && opts->retry_max_ms ? opts->retry_max_ms : UPLINK_RETRY_MAX_MS;
	if (up.retry_max_ms < up.retry_min_ms)
		up.retry_max_ms = up.retry_min_ms;
	gate__init(&up.gate);
	atomic_store(&up.wake_fd, eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));

	/* The thread starts with every signal blocked: the application's handlers never run
	 * on it, its syscalls are never interrupted, and a write to a closed stderr pipe only
	 * fails instead of killing the process with SIGPIPE. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/*
	 * CUPTI and driver code run on this thread (enable, flush, the buffer callbacks inside a
	 * flush), with frames we do not control: not the 256 KiB our own code would need, nor
	 * the process's default 8 MiB.
	 */
	pthread_attr_setstacksize(&attr, UPLINK_STACK_SIZE);
	err = -pthread_create(&t, &attr, uplink_main, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		uplink__log("cannot start the uplink thread: %s; GPU activity is not collected",
			    strerror(-err));
		return err;
	}
	return 0;
}

static void deadline_in(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	ts->tv_sec += ms / 1000 + ts->tv_nsec / 1000000000L;
	ts->tv_nsec %= 1000000000L;
}

void uplink__exiting(void)
{
	struct timespec ts;
	bool locked;

	if (!atomic_load(&up_started))
		return;
	/* Connected and collecting: let the thread flush what CUPTI holds, briefly. */
	if (atomic_load(&up.fd) >= 0 && atomic_load(&up.enabled) && up.wake_fd >= 0) {
		uint64_t one = 1;

		deadline_in(&ts, UPLINK_EXIT_FLUSH_MS);
		pthread_mutex_lock(&up.exit_lock);
		up.exit_requested = true;
		atomic_store(&up.exit_wanted, true);
		if (write(up.wake_fd, &one, sizeof(one)) == sizeof(one)) {
			while (!up.exit_flush_done)
				if (pthread_cond_timedwait(&up.exit_cond, &up.exit_lock, &ts))
					break;
		}
		pthread_mutex_unlock(&up.exit_lock);
	}
	/*
	 * A core call still running gets a moment to finish. An enable gets longer (the first
	 * one can take seconds inside CUPTI, and tearing the process down under it is worse),
	 * but exit is never held for more than that.
	 */
	deadline_in(&ts, UPLINK_EXIT_CORE_WAIT_MS);
	locked = pthread_mutex_timedlock(&up.core_lock, &ts) == 0;
	if (!locked && atomic_load(&up.enabling)) {
		deadline_in(&ts, UPLINK_EXIT_ENABLE_WAIT_MS - UPLINK_EXIT_CORE_WAIT_MS);
		locked = pthread_mutex_timedlock(&up.core_lock, &ts) == 0;
	}
	atomic_store(&up.core_off, true);
	if (locked)
		pthread_mutex_unlock(&up.core_lock);
}

void uplink__forked_child(void)
{
	int fd = atomic_load(&up.fd), wfd = atomic_load(&up.wake_fd);

	/*
	 * Only the forking thread survives a fork: the uplink is gone, and the locks it held
	 * may be held forever, as may any lock of the core's callbacks. The parent's connection
	 * is its own; the child lets go of it so the daemon sees the parent leave. The wake
	 * eventfd is shared with the parent: the child must not wake the parent's thread.
	 */
	core__forked_child();
	uplink__set_quiet(true);
	atomic_store(&up.core_off, true);
	atomic_store(&up.fd, -1);
	atomic_store(&up.wake_fd, -1);
	if (fd >= 0)
		close(fd);
	if (wfd >= 0)
		close(wfd);
	pthread_mutex_init(&up.core_lock, NULL);
	pthread_mutex_init(&up.exit_lock, NULL);
}

size_t uplink__test_stack_size(void)
{
	return atomic_load(&up.stack_size);
}
