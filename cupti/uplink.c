// SPDX-License-Identifier: BSD-2-Clause
#include "uplink.h"

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
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "frame.h"
#include "nvtx_open.h"
#include "timeutil.h"
#include "wire.h"

#define UPLINK_CLIENT "libprofd_cupti"
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

/* Conditions logged once per process, however often they recur. */
enum {
	LOGGED_NO_DAEMON = 1 << 0,
	LOGGED_PERMISSION = 1 << 1,
	LOGGED_CONNECT = 1 << 2,
	LOGGED_REFUSED = 1 << 3,
	LOGGED_LOST = 1 << 4,
};

struct uplink {
	struct evq *q;
	struct core_info info; /* the thread's own copy; core__enable updates it */
	bool init_ok;	       /* core__init succeeded: enabling may be tried */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint32_t retry_min_ms, retry_max_ms;
	unsigned logged;
	int wake_fd; /* eventfd: process exit wants a last flush */
	/* Held around every core call; process exit takes it to stop them for good. */
	pthread_mutex_t core_lock;
	atomic_bool core_off; /* exiting or forked: the core is never called again */
	atomic_int fd;	      /* the daemon connection, -1 when none */
	atomic_bool enabled;  /* a mirror of core__enabled() for the exit handler */
	/* Last flush at exit: requested by uplink__exiting, done by the thread. */
	pthread_mutex_t exit_lock;
	pthread_cond_t exit_cond;
	bool exit_requested, exit_flush_done;
};

static struct uplink up = {
    .fd = -1,
    .wake_fd = -1,
    .core_lock = PTHREAD_MUTEX_INITIALIZER,
    .exit_lock = PTHREAD_MUTEX_INITIALIZER,
    .exit_cond = PTHREAD_COND_INITIALIZER,
};
static atomic_bool up_started;
static atomic_bool log_quiet;

void uplink__set_quiet(bool quiet)
{
	atomic_store(&log_quiet, quiet);
}

void uplink__log(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	if (atomic_load(&log_quiet))
		return;
	n = snprintf(line, sizeof(line), "profd_cupti: ");
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/*
	 * One write, not stdio: the line stays whole among other processes' output on a shared
	 * terminal, and the application's stderr buffer and lock are left alone.
	 */
	(void)!write(STDERR_FILENO, line, (size_t)n);
}

static void log_once(unsigned cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_once(unsigned cond, const char *fmt, ...)
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

static void core_stop(void)
{
	if (!core_begin())
		return;
	if (core__enabled())
		core__disable();
	core_end();
}

/* ---- the connection -------------------------------------------------------------------- */

struct link {
	int fd;
	struct frame_reader *reader;
	Profd__Response *resp; /* set by on_frame */
	uint32_t interval_ms;
	bool want_enable; /* the daemon's last GpuControl.enable */
	uint64_t last_forced_ns;
	struct ev *evs; /* drained, not yet sent */
	size_t nevs, off;
	bool more;	  /* the last drain was full: the queue may hold more */
	struct ev *opens; /* NVTX ranges open at this interval's flush */
	size_t nopens, open_off;
	char err[200]; /* the daemon's Error message, for the log */
};

static int remaining_ms(uint64_t deadline)
{
	uint64_t now = mono_ns();

	if (now >= deadline)
		return 0;
	return (int)((deadline - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC);
}

static int send_all(int fd, const uint8_t *buf, size_t len, uint64_t deadline)
{
	while (len) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		ssize_t n;
		int r = poll(&pfd, 1, remaining_ms(deadline));

		if (r == 0)
			return -ETIMEDOUT;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int on_frame(const uint8_t *body, size_t len, void *ctx)
{
	struct link *l = ctx;

	/* One request, one reply: a second frame is the daemon misbehaving. */
	if (l->resp)
		return -EPROTO;
	l->resp = profd__response__unpack(NULL, len, body);
	return l->resp ? 0 : -EBADMSG;
}

static int recv_reply(struct link *l, uint64_t deadline)
{
	uint8_t buf[4096];

	while (!l->resp) {
		struct pollfd pfd = {.fd = l->fd, .events = POLLIN};
		ssize_t n;
		int r = poll(&pfd, 1, remaining_ms(deadline));

		if (r == 0)
			return -ETIMEDOUT;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		n = recv(l->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ECONNRESET;
		r = frame_reader__feed(l->reader, buf, (size_t)n, on_frame, l);
		if (r)
			return r == -ENOMEM ? r : -EPROTO;
	}
	return 0;
}

/*
 * Send req and wait for a reply of kind want. Returns 0 with *out set (caller frees),
 * -EREMOTEIO when the daemon answered with an Error (l->err has its message), -EPROTO for a
 * reply of another kind, or the I/O error.
 */
static int call(struct link *l, const Profd__Request *req, Profd__Response__MsgCase want,
		Profd__Response **out, uint32_t timeout_ms)
{
	uint64_t deadline = mono_ns() + timeout_ms * NSEC_PER_MSEC;
	uint8_t *frame;
	size_t len;
	int err;

	err = wire_pack_request(req, FRAME_MAX_REQUEST, &frame, &len);
	if (err)
		return err;
	err = send_all(l->fd, frame, len, deadline);
	free(frame);
	if (err)
		return err;
	err = recv_reply(l, deadline);
	if (err)
		return err;
	*out = l->resp;
	l->resp = NULL;
	if ((*out)->msg_case == want)
		return 0;
	if ((*out)->msg_case == PROFD__RESPONSE__MSG_ERROR && (*out)->error) {
		snprintf(l->err, sizeof(l->err), "%s",
			 (*out)->error->message ? (*out)->error->message : "error");
		err = -EREMOTEIO;
	} else {
		snprintf(l->err, sizeof(l->err), "unexpected reply %d", (int)(*out)->msg_case);
		err = -EPROTO;
	}
	profd__response__free_unpacked(*out, NULL);
	*out = NULL;
	return err;
}

static int do_connect(void)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = UPLINK_IO_TIMEOUT_MS / 1000};
	int fd, err;

	memcpy(addr.sun_path, up.path, sizeof(up.path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		log_once(LOGGED_CONNECT, "cannot create a socket: %s", strerror(-err));
		return err;
	}
	/* A daemon with a full accept queue makes connect() wait: bound it. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0)
		return fd;
	err = -errno;
	close(fd);
	switch (err) {
	case -ENOENT:
	case -ECONNREFUSED:
	case -ENOTDIR:
		log_once(LOGGED_NO_DAEMON,
			 "no daemon at %s; GPU activity is not collected until one starts",
			 up.path);
		break;
	case -EACCES:
	case -EPERM:
		log_once(LOGGED_PERMISSION,
			 "permission denied on %s: GPU activity is not collected (the process "
			 "needs access to the daemon's socket)",
			 up.path);
		break;
	default:
		log_once(LOGGED_CONNECT, "cannot connect to %s: %s; retrying", up.path,
			 strerror(-err));
		break;
	}
	return err;
}

static int hello(struct link *l)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__Hello h = PROFD__HELLO__INIT;
	Profd__Response *resp;
	int err;

	h.protocol_version = PROFD_PROTOCOL_VERSION;
	h.client = UPLINK_CLIENT;
	req.msg_case = PROFD__REQUEST__MSG_HELLO;
	req.hello = &h;
	err = call(l, &req, PROFD__RESPONSE__MSG_HELLO, &resp, UPLINK_IO_TIMEOUT_MS);
	if (err == -EREMOTEIO) {
		log_once(LOGGED_REFUSED, "the daemon at %s refused this library: %s", up.path,
			 l->err);
		return err;
	}
	if (err)
		return err;
	if (resp->hello->protocol_version != PROFD_PROTOCOL_VERSION) {
		log_once(LOGGED_REFUSED,
			 "the daemon at %s speaks protocol version %u, this library %u: GPU "
			 "activity is not collected",
			 up.path, resp->hello->protocol_version, PROFD_PROTOCOL_VERSION);
		err = -EPROTO;
	}
	profd__response__free_unpacked(resp, NULL);
	return err;
}

/*
 * Follow a GpuControl. Returns 1 when enabling changed the library's state (the daemon must
 * get a new GpuAttach), else 0.
 */
static int apply_control(struct link *l, const Profd__GpuControl *c)
{
	uint32_t ms = c->has_flush_interval_ms && c->flush_interval_ms ? c->flush_interval_ms
								       : UPLINK_INTERVAL_DEFAULT_MS;
	bool was = l->want_enable;
	struct core_info before;

	if (ms < UPLINK_INTERVAL_MIN_MS)
		ms = UPLINK_INTERVAL_MIN_MS;
	if (ms > UPLINK_INTERVAL_MAX_MS)
		ms = UPLINK_INTERVAL_MAX_MS;
	l->interval_ms = ms;
	l->want_enable = c->enable;
	if (!core_begin())
		return 0;
	if (!c->enable) {
		if (core__enabled())
			core__disable();
		core_end();
		return 0;
	}
	/*
	 * Enabling is tried once per request: when the daemon starts asking (its first control
	 * on a connection, or false -> true). A failure (another tool holds the subscriber
	 * slot) is reported, not retried in a loop that would race the other tool for the slot.
	 */
	if (was || !up.init_ok || core__enabled()) {
		core_end();
		return 0;
	}
	before = up.info;
	/* A failure is the core's to log (it knows which); the daemon gets it in GpuAttach. */
	core__enable(&up.info);
	core_end();
	/* A success changes the clock, a failure the state: the daemon needs both. */
	return memcmp(&before, &up.info, sizeof(before)) != 0;
}

static int attach(struct link *l)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__GpuAttach a = PROFD__GPU_ATTACH__INIT;
	const struct core_info *i = &up.info;
	Profd__Response *resp;
	int err, again;

	/* At most a few rounds: each enable attempt happens once per request anyway. */
	for (int round = 0; round < 4; round++) {
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
		req.msg_case = PROFD__REQUEST__MSG_GPU_ATTACH;
		req.gpu_attach = &a;
		err = call(l, &req, PROFD__RESPONSE__MSG_GPU_CONTROL, &resp, UPLINK_IO_TIMEOUT_MS);
		if (err)
			return err;
		again = apply_control(l, resp->gpu_control);
		profd__response__free_unpacked(resp, NULL);
		if (!again)
			break;
	}
	return 0;
}

/*
 * One interval's work: flush the core, send what the queue holds in as many GpuBatch frames
 * as it takes (each under UPLINK_BATCH_BUDGET), follow each reply. forced: flush partly
 * filled CUPTI buffers too (process exit).
 */
static int tick(struct link *l, struct gpubatch *b, bool forced)
{
	uint64_t complete_until = 0, now = mono_ns();
	int err = 0;

	l->nopens = l->open_off = 0;
	if (core_begin()) {
		if (core__enabled()) {
			/*
			 * An unforced flush returns only full buffers, so a process that launches
			 * little would hold its records indefinitely; a forced one every second
			 * bounds that delay without paying for it on every interval.
			 */
			if (now - l->last_forced_ns >= UPLINK_FORCED_FLUSH_MS * NSEC_PER_MSEC)
				forced = true;
			core__flush(forced, &complete_until);
			if (forced)
				l->last_forced_ns = now;
			/* Open ranges end, for now, where the flush vouches for the records. */
			if (complete_until)
				l->nopens =
				    core__open_ranges(l->opens, UPLINK_OPEN_MAX, complete_until);
		}
		core_end();
	}
	for (int nb = 0; nb < UPLINK_MAX_BATCHES_PER_TICK; nb++) {
		Profd__Request req = PROFD__REQUEST__INIT;
		Profd__GpuBatch *msg;
		Profd__Response *resp;
		bool last;
		int again;

		if (l->off == l->nevs) {
			l->nevs = evq__drain(up.q, l->evs, UPLINK_BATCH_EVENTS);
			l->off = 0;
			l->more = l->nevs == UPLINK_BATCH_EVENTS;
		}
		gpubatch__begin(b);
		msg = gpubatch__msg(b);
		while (l->off < l->nevs && gpubatch__add(b, &l->evs[l->off], false))
			l->off++;
		/* Open ranges go last, after every closed event the flush produced. */
		if (l->off == l->nevs && !l->more)
			while (l->open_off < l->nopens &&
			       gpubatch__add(b, &l->opens[l->open_off], true))
				l->open_off++;
		last = l->off == l->nevs && !l->more && l->open_off == l->nopens;
		msg->dropped = evq__take_dropped(up.q);
		msg->has_dropped = msg->dropped != 0;
		/* Only the batch that emptied the queue vouches for everything before the time. */
		msg->has_complete_until_ns = last && complete_until;
		msg->complete_until_ns = complete_until;
		req.msg_case = PROFD__REQUEST__MSG_GPU_BATCH;
		req.gpu_batch = msg;
		err = call(l, &req, PROFD__RESPONSE__MSG_GPU_CONTROL, &resp, UPLINK_IO_TIMEOUT_MS);
		gpubatch__begin(b);
		if (err)
			return err;
		again = apply_control(l, resp->gpu_control);
		profd__response__free_unpacked(resp, NULL);
		if (again) {
			err = attach(l);
			if (err)
				return err;
		}
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
		int r = poll(pfd, up.wake_fd >= 0 ? 2 : 1, remaining_ms(deadline));

		if (r == 0)
			return 0;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pfd[1].revents & POLLIN) {
			uint64_t v;

			/* Nonblocking; another reader cannot exist, so the value is ours. */
			(void)!read(up.wake_fd, &v, sizeof(v));
			return 1;
		}
		if (pfd[0].revents)
			return -ECONNRESET;
	}
}

/* Discard what an earlier connection left: the new daemon gets this connection's events. */
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

	l->fd = do_connect();
	if (l->fd < 0)
		return 0;
	atomic_store(&up.fd, l->fd);
	frame_reader__free(l->reader);
	l->reader = frame_reader__new(UPLINK_MAX_REPLY);
	if (!l->reader)
		goto out;
	gpubatch__forget_strings(b);
	l->want_enable = false;
	l->interval_ms = UPLINK_INTERVAL_DEFAULT_MS;
	l->last_forced_ns = 0;
	discard_queue(l);
	err = hello(l);
	if (err)
		goto out;
	err = attach(l);
	if (err == -EREMOTEIO)
		log_once(LOGGED_REFUSED, "the daemon at %s does not take GPU activity: %s", up.path,
			 l->err);
	if (err)
		goto out;
	attached = 1;
	for (;;) {
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
		if (err)
			break;
	}
	if (err == -EREMOTEIO)
		log_once(LOGGED_LOST, "the daemon at %s ended the GPU uplink: %s; reconnecting",
			 up.path, l->err);
	else
		log_once(LOGGED_LOST, "lost the daemon at %s (%s); reconnecting", up.path,
			 strerror(-err));
out:
	if (l->resp) {
		profd__response__free_unpacked(l->resp, NULL);
		l->resp = NULL;
	}
	atomic_store(&up.fd, -1);
	close(l->fd);
	l->fd = -1;
	/* Without a daemon nobody reads the events: stop making them. */
	core_stop();
	exit_flush_done();
	return attached;
}

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void *uplink_main(void *arg)
{
	uint32_t wait_ms = up.retry_min_ms;
	struct link l = {.fd = -1};
	struct gpubatch *b = gpubatch__new();

	l.evs = calloc(UPLINK_BATCH_EVENTS, sizeof(*l.evs));
	l.opens = calloc(UPLINK_OPEN_MAX, sizeof(*l.opens));
	if (!l.evs || !l.opens || !b) {
		uplink__log("out of memory: GPU activity is not collected");
		free(l.evs);
		free(l.opens);
		gpubatch__free(b);
		return NULL;
	}
	for (;;) {
		if (session(&l, b))
			wait_ms = up.retry_min_ms;
		/* Exit already began: nothing to reconnect for. */
		if (atomic_load(&up.core_off)) {
			sleep_ms(UPLINK_RETRY_MAX_MS);
			continue;
		}
		sleep_ms(wait_ms);
		wait_ms = wait_ms * 2 > up.retry_max_ms ? up.retry_max_ms : wait_ms * 2;
	}
	return NULL;
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
	if (strlen(path) >= sizeof(up.path)) {
		uplink__log("socket path too long: %s; GPU activity is not collected", path);
		return -ENAMETOOLONG;
	}
	memcpy(up.path, path, strlen(path) + 1);
	up.q = q;
	up.info = *info;
	up.init_ok = info->state == PROFD__GPU_STATE__GPU_STATE_READY;
	up.retry_min_ms = opts && opts->retry_min_ms ? opts->retry_min_ms : UPLINK_RETRY_MIN_MS;
	up.retry_max_ms = opts && opts->retry_max_ms ? opts->retry_max_ms : UPLINK_RETRY_MAX_MS;
	if (up.retry_max_ms < up.retry_min_ms)
		up.retry_max_ms = up.retry_min_ms;
	up.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	/* The thread starts with every signal blocked: the application's handlers never run
	 * on it and its syscalls are never interrupted. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* The thread's frames are small; do not take the process's default 8 MiB. */
	pthread_attr_setstacksize(&attr, 256u << 10);
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

void uplink__exiting(void)
{
	struct timespec ts;
	bool locked;

	if (!atomic_load(&up_started))
		return;
	/* Connected and collecting: let the thread flush what CUPTI holds, briefly. */
	if (atomic_load(&up.fd) >= 0 && atomic_load(&up.enabled) && up.wake_fd >= 0) {
		uint64_t one = 1;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)UPLINK_EXIT_FLUSH_MS * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&up.exit_lock);
		up.exit_requested = true;
		if (write(up.wake_fd, &one, sizeof(one)) == sizeof(one)) {
			while (!up.exit_flush_done)
				if (pthread_cond_timedwait(&up.exit_cond, &up.exit_lock, &ts))
					break;
		}
		pthread_mutex_unlock(&up.exit_lock);
	}
	/* A core call still running gets a moment to finish; exit does not wait longer. */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 200 * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	locked = pthread_mutex_timedlock(&up.core_lock, &ts) == 0;
	atomic_store(&up.core_off, true);
	if (locked)
		pthread_mutex_unlock(&up.core_lock);
}

void uplink__forked_child(void)
{
	int fd = atomic_load(&up.fd);

	/*
	 * Only the forking thread survives a fork: the uplink is gone, and the locks it held
	 * may be held forever. The parent's connection is its own; the child lets go of it so
	 * the daemon sees the parent leave.
	 */
	atomic_store(&up.core_off, true);
	atomic_store(&up.fd, -1);
	if (fd >= 0)
		close(fd);
	pthread_mutex_init(&up.core_lock, NULL);
	pthread_mutex_init(&up.exit_lock, NULL);
}
