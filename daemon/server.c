// SPDX-License-Identifier: BSD-2-Clause
#define _GNU_SOURCE
#include "server.h"
#include "grow.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "dirsafe.h"
#include "frame.h"
#include "log.h"
#include "wire.h"

#define DEFAULT_SOCKET_MODE 0660
#define DEFAULT_MAX_CLIENTS 64
#define DEFAULT_MAX_UPLINKS 1024
#define DEFAULT_MAX_UPLINKS_PER_UID 64
#define DEFAULT_IDLE_TIMEOUT_MS 30000
#define DEFAULT_MAX_PENDING_WRITE (4u << 20)
#define DEFAULT_WRITE_TIMEOUT_MS 60000
#define DEFAULT_MAX_PENDING_PER_UID (32u << 20)
/*
 * Connections past a user's (or the daemon's) client limit that may still become uplinks: a
 * CUDA library must not be locked out by its user's idle profctl clients.
 */
#define MAX_PROBATION 32
#define MAX_PROBATION_PER_UID 4
/*
 * A library says Hello and GpuAttach as soon as it is connected: a connection on probation this
 * long without attaching is an idle client, and gives way to a newer one when probation is full.
 */
#define PROBATION_GRACE_MS 1000
/*
 * Time non-root requests may take in one turn of the loop; the rest wait for the next turn, so
 * that the ring buffer is drained and root is answered whatever other users send.
 */
#define TURN_BUDGET_NS (20ull * 1000000ull)
#define LISTEN_BACKLOG 128
/* One read buffer for the whole server: each read is handed to its callback before the next. */
#define READ_BUF_SIZE (64u << 10)
/*
 * Bytes of requests read but not yet handled (frames in pieces, held-back requests) that the
 * connections of one non-root uid may hold together: each may hold a request of up to
 * FRAME_MAX_REQUEST, and a user with 64 uplinks and clients would otherwise cost over 100 MiB
 * outside every other bound. A CUDA library sends one batch of at most 512 KiB and waits for
 * its answer, so this leaves room for dozens of them at once. Counted only once a connection
 * holds more than FRAME_KEEP_BYTES, so small requests never pay for the count.
 */
#define MAX_BUFFERED_PER_UID (32u << 20)

struct conn;

struct server {
	uv_loop_t *loop;
	uv_pipe_t listener;
	struct server_opts opts; /* defaults filled in; path points to our copy */
	char *path;
	struct conn *conns;    /* every connection not yet freed, closing ones included */
	unsigned int nclients; /* admitted connections that are not closing, uplinks not included */
	unsigned int nuplinks; /* admitted connections marked by server__set_uplink */
	unsigned int nprobation; /* admitted past the client limits: may only become uplinks */
	unsigned int nparked;	 /* connections waiting for their uid's replies to drain */
	/*
	 * Fairness: turn starts each loop iteration (before polling), when the non-root request
	 * budget starts again; resume runs the connections that waited for the next turn, FIFO.
	 */
	uv_prepare_t turn;
	uv_idle_t resume;
	int aux_open; /* of turn and resume */
	uint64_t turn_ns;
	struct conn *defer_head, *defer_tail;
	bool closing;
	bool listener_closed;
	dev_t sock_dev; /* the socket file this server bound: the only one it unlinks */
	ino_t sock_ino;
	uint64_t next_conn_id;
	uint8_t rbuf[READ_BUF_SIZE];
};

struct conn {
	struct server *s;
	struct conn *prev, *next;
	uv_pipe_t pipe;
	uv_timer_t idle_timer;
	uv_timer_t write_timer;
	uv_shutdown_t shutdown_req;
	int handles_open;
	struct frame_reader *reader;
	struct server_peer peer;
	size_t queued;	      /* bytes of replies whose write has not completed */
	unsigned int nwrites; /* replies whose write has not completed */
	/*
	 * Requests that arrived in the same read after this client went over max_pending_write:
	 * re-framed (header + body) and handled once its replies drain. Reading stops as soon as
	 * this fills, so it holds at most one read buffer plus one request.
	 */
	uint8_t *backlog;
	size_t backlog_len, backlog_off, backlog_cap;
	bool
	    admitted; /* counted in nclients (or nuplinks when uplink, nprobation when probation) */
	bool uplink;  /* a long-lived data source (server__set_uplink) */
	bool probation; /* past the client limits: Hello and GpuAttach only */
	bool deferred;	/* in the server's defer list, for the next turn */
	bool parked;	/* waiting until its uid's queued replies drain */
	struct conn *dnext;
	bool hello_done;
	bool reading;
	bool draining; /* a final reply is queued; the connection closes once it is out */
	bool closing;
	size_t fed;	       /* header + body bytes of the frames completed in this feed */
	uint64_t probation_ms; /* uv_now() when it went on probation */
};

struct wreq {
	uv_write_t req;
	struct conn *c;
	uint8_t *buf;
	size_t len;
};

static void conn_pump(struct conn *c);
static void conn_undefer(struct conn *c);
static void on_resume(uv_idle_t *h);
static void on_idle(uv_timer_t *t);
static void on_write_timeout(uv_timer_t *t);

/* (Re)arm the idle timer: a request must complete within idle_timeout_ms from now. */
static void conn_idle_again(struct conn *c)
{
	uv_timer_start(&c->idle_timer, on_idle, c->s->opts.idle_timeout_ms, 0);
}

/* (Re)arm the write timer: the oldest queued reply must be out within write_timeout_ms. */
static void conn_write_again(struct conn *c)
{
	uv_timer_start(&c->write_timer, on_write_timeout, c->s->opts.write_timeout_ms, 0);
}

static void server_maybe_free(struct server *s)
{
	if (s->closing && s->listener_closed && !s->conns && !s->aux_open) {
		free(s->path);
		free(s);
	}
}

static void conn_handle_closed(uv_handle_t *h)
{
	struct conn *c = h->data;
	struct server *s = c->s;

	if (--c->handles_open > 0)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	frame_reader__free(c->reader);
	free(c->backlog);
	free(c);
	server_maybe_free(s);
}

static void conn_undefer(struct conn *c)
{
	struct server *s = c->s;
	struct conn **pp, *prev = NULL;

	if (!c->deferred)
		return;
	for (pp = &s->defer_head; *pp; prev = *pp, pp = &(*pp)->dnext) {
		if (*pp != c)
			continue;
		*pp = c->dnext;
		if (s->defer_tail == c)
			s->defer_tail = prev;
		break;
	}
	c->dnext = NULL;
	c->deferred = false;
}

/*
 * Close every handle of the connection. Queued writes are cancelled by libuv (their callbacks
 * free the buffers) before the pipe's close callback runs, so the memory goes last.
 */
static void conn_close(struct conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	conn_undefer(c);
	if (c->parked) {
		c->parked = false;
		c->s->nparked--;
	}
	if (c->admitted) {
		c->admitted = false;
		if (c->uplink)
			c->s->nuplinks--;
		else if (c->probation)
			c->s->nprobation--;
		else
			c->s->nclients--;
		/* One on probation was never more than a refusal in waiting: nothing to tell. */
		if (c->s->opts.on_close && !c->probation)
			c->s->opts.on_close(c->s->opts.ctx, &c->peer);
	}
	pr_debug("server: client pid %d uid %u: closing", c->peer.pid, c->peer.uid);
	uv_close((uv_handle_t *)&c->pipe, conn_handle_closed);
	uv_close((uv_handle_t *)&c->idle_timer, conn_handle_closed);
	uv_close((uv_handle_t *)&c->write_timer, conn_handle_closed);
}

static void conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct conn *c = h->data;

	*buf = uv_buf_init((char *)c->s->rbuf, sizeof(c->s->rbuf));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void conn_read_stop(struct conn *c)
{
	if (c->reading) {
		uv_read_stop((uv_stream_t *)&c->pipe);
		c->reading = false;
	}
}

static int conn_read_start(struct conn *c)
{
	int err;

	if (c->reading)
		return 0;
	err = uv_read_start((uv_stream_t *)&c->pipe, conn_alloc, on_read);
	if (err)
		return err;
	c->reading = true;
	return 0;
}

static bool conn_over_limit(const struct conn *c)
{
	return c->queued > c->s->opts.max_pending_write;
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	struct conn *c = req->data;

	/* Cancelled shutdowns arrive while the connection is already closing. */
	if (!c->closing)
		conn_close(c);
}

/* Admitted connections of one uid right now: clients, or uplinks. */
static unsigned int conns_of_uid(const struct server *s, uint32_t uid, bool uplink)
{
	unsigned int n = 0;

	for (const struct conn *c = s->conns; c; c = c->next)
		n += c->admitted && !c->probation && c->uplink == uplink && c->peer.uid == uid;
	return n;
}

/* Connections on probation that may still attach (not being refused): of uid, or all. */
static unsigned int probation_waiting(const struct server *s, uint32_t uid, bool all)
{
	unsigned int n = 0;

	for (const struct conn *c = s->conns; c; c = c->next)
		n += c->admitted && c->probation && !c->draining && !c->closing &&
		     (all || c->peer.uid == uid);
	return n;
}

/* The longest waiting of those probation_waiting counts; NULL when none. */
static struct conn *probation_oldest(const struct server *s, uint32_t uid, bool all)
{
	struct conn *old = NULL;

	for (struct conn *c = s->conns; c; c = c->next)
		if (c->admitted && c->probation && !c->draining && !c->closing &&
		    (all || c->peer.uid == uid) && (!old || c->peer.conn_id < old->peer.conn_id))
			old = c;
	return old;
}

/* Reply bytes queued to the connections of one uid. */
static size_t queued_of_uid(const struct server *s, uint32_t uid)
{
	size_t n = 0;

	for (const struct conn *c = s->conns; c; c = c->next)
		if (c->peer.uid == uid && !c->closing)
			n += c->queued;
	return n;
}

/*
 * Whether c's next request may be handled now. Root always: the daemon's owner must be able to
 * see and stop it under any load. Others while this turn's budget lasts and while their user's
 * queued replies are under max_pending_per_uid.
 */
static bool conn_may_handle(const struct conn *c)
{
	const struct server *s = c->s;

	if (c->peer.uid == 0)
		return true;
	return s->turn_ns < TURN_BUDGET_NS &&
	       queued_of_uid(s, c->peer.uid) < s->opts.max_pending_per_uid;
}

/* c has a request it may not handle now: wait for the next turn, or for its user's replies. */
static void conn_wait(struct conn *c)
{
	struct server *s = c->s;

	if (c->deferred || c->parked)
		return;
	if (queued_of_uid(s, c->peer.uid) >= s->opts.max_pending_per_uid) {
		/* Not idle: its request is in. Its user's write timeouts bound the wait. */
		uv_timer_stop(&c->idle_timer);
		c->parked = true;
		s->nparked++;
		return;
	}
	c->deferred = true;
	c->dnext = NULL;
	if (s->defer_tail)
		s->defer_tail->dnext = c;
	else
		s->defer_head = c;
	s->defer_tail = c;
	if (!uv_is_active((uv_handle_t *)&s->resume))
		uv_idle_start(&s->resume, on_resume);
}

/* A reply of uid went out: its parked connections may go on, in the next turn. */
static void unpark_uid(struct server *s, uint32_t uid)
{
	if (!s->nparked || queued_of_uid(s, uid) >= s->opts.max_pending_per_uid)
		return;
	for (struct conn *c = s->conns; c; c = c->next) {
		if (!c->parked || c->peer.uid != uid)
			continue;
		c->parked = false;
		s->nparked--;
		conn_idle_again(c);
		conn_wait(c);
	}
}

/* Stop taking requests; close once what is queued (a final error) has reached the kernel. */
static void conn_drain_and_close(struct conn *c)
{
	if (c->closing || c->draining)
		return;
	c->draining = true;
	conn_read_stop(c);
	uv_timer_stop(&c->idle_timer);
	c->shutdown_req.data = c;
	if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->pipe, on_shutdown))
		conn_close(c);
}

static void on_write(uv_write_t *req, int status)
{
	struct wreq *w = req->data;
	struct conn *c = w->c;

	c->queued -= w->len;
	c->nwrites--;
	free(w->buf);
	free(w);
	unpark_uid(c->s, c->peer.uid);
	if (c->closing)
		return;
	if (status < 0) {
		/* EPIPE and ECONNRESET: the client went away mid-reply; nothing to tell anyone. */
		pr_debug("server: client pid %d uid %u: write failed: %s", c->peer.pid, c->peer.uid,
			 uv_strerror(status));
		conn_close(c);
		return;
	}
	if (c->nwrites) {
		/* The next reply gets a full window of its own. */
		conn_write_again(c);
	} else {
		uv_timer_stop(&c->write_timer);
		if (!c->draining)
			conn_idle_again(c);
	}
	if (!c->nwrites)
		conn_pump(c);
}

/* Queue a framed reply; takes ownership of buf whatever the outcome. */
static void conn_send(struct conn *c, uint8_t *buf, size_t len)
{
	struct wreq *w;
	uv_buf_t b;
	int err;

	if (c->closing) {
		free(buf);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		free(buf);
		pr_warn("server: client pid %d uid %u: out of memory for a reply", c->peer.pid,
			c->peer.uid);
		conn_close(c);
		return;
	}
	w->c = c;
	w->buf = buf;
	w->len = len;
	w->req.data = w;
	b = uv_buf_init((char *)buf, (unsigned int)len);
	err = uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_write);
	if (err) {
		pr_debug("server: client pid %d uid %u: write failed: %s", c->peer.pid, c->peer.uid,
			 uv_strerror(err));
		free(buf);
		free(w);
		conn_close(c);
		return;
	}
	c->queued += len;
	if (c->nwrites++ == 0) {
		uv_timer_stop(&c->idle_timer);
		conn_write_again(c);
	}
	/* A client that does not read its replies gets no more of them computed. */
	if (conn_over_limit(c))
		conn_read_stop(c);
}

static void conn_send_error(struct conn *c, Profd__ErrorCode code, const char *msg)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__Error e = PROFD__ERROR__INIT;
	uint8_t *buf;
	size_t len;
	int err;

	e.code = code;
	e.message = (char *)msg;
	resp.msg_case = PROFD__RESPONSE__MSG_ERROR;
	resp.error = &e;
	err = wire_pack_response(&resp, FRAME_MAX_REPLY, &buf, &len);
	if (err) {
		conn_close(c);
		return;
	}
	conn_send(c, buf, len);
}

/* Past the client limits: say busy, then close once that is out. */
static void conn_refuse_busy(struct conn *c)
{
	struct server *s = c->s;

	pr_warn("server: client pid %d uid %u: refused, too many connections (%u clients, %u of "
		"uid %u)",
		c->peer.pid, c->peer.uid, s->nclients, conns_of_uid(s, c->peer.uid, false),
		c->peer.uid);
	conn_send_error(c, PROFD__ERROR_CODE__ERROR_BUSY,
			"busy: too many connections from your user or in all, try again later");
	conn_drain_and_close(c);
}

/*
 * Room on probation for c, a connection past the client limits. Its user's idle connections
 * must not keep her own CUDA jobs out: when her share is full, her longest waiting connection
 * there gives way (a library attaches at once, so that one is not a library). When probation
 * is full for everyone, the longest waiting connection gives way once it has had
 * PROBATION_GRACE_MS to attach. Returns false when there is no room: c is to be refused.
 */
static bool probation_make_room(struct server *s, const struct conn *c)
{
	struct conn *old;

	if (c->peer.uid != 0 && probation_waiting(s, c->peer.uid, false) >= MAX_PROBATION_PER_UID) {
		old = probation_oldest(s, c->peer.uid, false);
		pr_debug("server: client pid %d uid %u: on probation without attaching, gives way",
			 old->peer.pid, old->peer.uid);
		conn_refuse_busy(old);
	}
	if (probation_waiting(s, 0, true) < MAX_PROBATION)
		return true;
	old = probation_oldest(s, 0, true);
	if (uv_now(s->loop) - old->probation_ms < PROBATION_GRACE_MS)
		return false;
	conn_refuse_busy(old);
	return true;
}

static void conn_hello(struct conn *c, const Profd__Hello *hello)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__HelloReply hr = PROFD__HELLO_REPLY__INIT;
	uint8_t *buf;
	size_t len;
	int err;

	if (hello->protocol_version != PROFD_PROTOCOL_VERSION) {
		char msg[160];

		snprintf(msg, sizeof(msg),
			 "protocol version %u is not supported: this daemon (profd %s) speaks "
			 "version %u",
			 hello->protocol_version, PROFD_VERSION, PROFD_PROTOCOL_VERSION);
		pr_warn("server: client pid %d uid %u: protocol version %u, expected %u",
			c->peer.pid, c->peer.uid, hello->protocol_version, PROFD_PROTOCOL_VERSION);
		conn_send_error(c, PROFD__ERROR_CODE__ERROR_UNSUPPORTED_VERSION, msg);
		conn_drain_and_close(c);
		return;
	}
	hr.protocol_version = PROFD_PROTOCOL_VERSION;
	hr.daemon_version = (char *)PROFD_VERSION;
	hr.has_peer_uid = true;
	hr.peer_uid = c->peer.uid;
	resp.msg_case = PROFD__RESPONSE__MSG_HELLO;
	resp.hello = &hr;
	err = wire_pack_response(&resp, FRAME_MAX_REPLY, &buf, &len);
	if (err) {
		conn_close(c);
		return;
	}
	c->hello_done = true;
	conn_send(c, buf, len);
}

/* One whole request body. Anything that must end the connection does it here. */
static void conn_request(struct conn *c, const uint8_t *body, size_t len)
{
	struct server *s = c->s;
	Profd__Request *req;
	uint8_t *frame = NULL;
	size_t frame_len = 0;
	int err;

	if (!c->nwrites)
		conn_idle_again(c);
	req = profd__request__unpack(NULL, len, body);
	if (!req) {
		pr_warn("server: client pid %d uid %u: undecodable request of %zu bytes",
			c->peer.pid, c->peer.uid, len);
		conn_send_error(c, PROFD__ERROR_CODE__ERROR_BAD_REQUEST, "undecodable request");
		conn_drain_and_close(c);
		return;
	}
	if (req->msg_case == PROFD__REQUEST__MSG_HELLO) {
		conn_hello(c, req->hello);
		goto out;
	}
	if (!c->hello_done) {
		pr_warn("server: client pid %d uid %u: request before Hello", c->peer.pid,
			c->peer.uid);
		conn_send_error(c, PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
				"bad request: the first message must be Hello");
		conn_drain_and_close(c);
		goto out;
	}
	if (req->msg_case == PROFD__REQUEST__MSG__NOT_SET) {
		/* A newer client's request: its field is unknown here and was skipped. */
		pr_debug("server: client pid %d uid %u: unknown request", c->peer.pid, c->peer.uid);
		conn_send_error(c, PROFD__ERROR_CODE__ERROR_BAD_REQUEST, "unknown request");
		goto out;
	}
	/*
	 * Past the client limits, a connection may only become a CUDA library's uplink; the
	 * handler makes it one (server__set_uplink), or it goes.
	 */
	if (c->probation && req->msg_case != PROFD__REQUEST__MSG_GPU_ATTACH) {
		conn_refuse_busy(c);
		goto out;
	}
	/* A data source's connection is not a way around the client limits: data only. */
	if (c->uplink && req->msg_case != PROFD__REQUEST__MSG_GPU_ATTACH &&
	    req->msg_case != PROFD__REQUEST__MSG_GPU_BATCH) {
		pr_debug("server: client pid %d uid %u: request %d on an uplink", c->peer.pid,
			 c->peer.uid, (int)req->msg_case);
		conn_send_error(c, PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
				"bad request: this connection only sends GPU data");
		goto out;
	}
	err = s->opts.handle(s->opts.ctx, &c->peer, req, &frame, &frame_len);
	if (err < 0 || !frame) {
		pr_debug("server: client pid %d uid %u: handler failed: %s", c->peer.pid,
			 c->peer.uid, strerror(err < 0 ? -err : EINVAL));
		free(frame);
		conn_close(c);
		goto out;
	}
	conn_send(c, frame, frame_len);
	if (c->probation)
		conn_drain_and_close(c); /* the attach was refused: its error is the last word */
out:
	profd__request__free_unpacked(req, NULL);
}

/* conn_request, with the time a non-root request takes charged to this turn's budget. */
static void conn_request_timed(struct conn *c, const uint8_t *body, size_t len)
{
	uint64_t t0 = uv_hrtime();

	conn_request(c, body, len);
	if (c->peer.uid != 0)
		c->s->turn_ns += uv_hrtime() - t0;
}

static int backlog_add(struct conn *c, const uint8_t *body, size_t len)
{
	size_t need = c->backlog_len + FRAME_HDR_SIZE + len;

	if (GROW(c->backlog, c->backlog_cap, need))
		return -ENOMEM;
	frame_put_header(c->backlog + c->backlog_len, (uint32_t)len);
	memcpy(c->backlog + c->backlog_len + FRAME_HDR_SIZE, body, len);
	c->backlog_len = need;
	return 0;
}

static bool backlog_empty(const struct conn *c)
{
	return c->backlog_off == c->backlog_len;
}

/*
 * One request in flight per connection: the next one held back is handled once the reply to
 * the last has been written, and the connection is read again only when none is held back and
 * no reply is pending. A client that pipelines requests gets one answered per loop turn.
 */
static void conn_pump(struct conn *c)
{
	if (c->closing || c->draining)
		return;
	if (!c->nwrites && !conn_over_limit(c) && !backlog_empty(c)) {
		const uint8_t *p = c->backlog + c->backlog_off;
		size_t len = frame_get_header(p);

		if (!conn_may_handle(c)) {
			conn_read_stop(c);
			conn_wait(c);
			return;
		}
		c->backlog_off += FRAME_HDR_SIZE + len;
		conn_request_timed(c, p + FRAME_HDR_SIZE, len);
	}
	if (backlog_empty(c)) {
		c->backlog_len = c->backlog_off = 0;
		if (c->backlog_cap > READ_BUF_SIZE) {
			free(c->backlog);
			c->backlog = NULL;
			c->backlog_cap = 0;
		}
	}
	if (c->closing || c->draining)
		return;
	if (c->nwrites || conn_over_limit(c) || !backlog_empty(c)) {
		conn_read_stop(c);
		return;
	}
	if (conn_read_start(c))
		conn_close(c);
}

static void on_turn(uv_prepare_t *h)
{
	struct server *s = h->data;

	s->turn_ns = 0;
}

/* The next turn: the connections that waited for it go on, in the order they came. */
static void on_resume(uv_idle_t *h)
{
	struct server *s = h->data;
	struct conn *tail = s->defer_tail, *c;
	bool last = false;

	s->turn_ns = 0;
	/* Only those waiting now: one that must wait again goes behind them, to the next turn. */
	while (!last && (c = s->defer_head)) {
		last = c == tail;
		s->defer_head = c->dnext;
		if (!s->defer_head)
			s->defer_tail = NULL;
		c->dnext = NULL;
		c->deferred = false;
		conn_pump(c);
	}
	if (!s->defer_head)
		uv_idle_stop(&s->resume);
}

static int on_frame(const uint8_t *body, size_t len, void *ctx)
{
	struct conn *c = ctx;

	c->fed += FRAME_HDR_SIZE + len;
	if (c->closing || c->draining)
		return -ECANCELED;
	if (c->nwrites || conn_over_limit(c) || !backlog_empty(c) || !conn_may_handle(c))
		return backlog_add(c, body, len);
	conn_request_timed(c, body, len);
	return 0;
}

/*
 * The reader refused a header announcing more than FRAME_MAX_REQUEST, before storing any of
 * the body. For the log, find that header: it follows the frames completed by this read
 * (held bytes of them came from earlier reads); it is unknown only when it began in an earlier
 * read.
 */
static void conn_too_large(struct conn *c, const uint8_t *buf, size_t len, size_t held)
{
	char msg[128];
	size_t off;

	if (c->fed || !held) {
		off = c->fed - held;
		if (off + FRAME_HDR_SIZE <= len) {
			uint32_t announced = frame_get_header(buf + off);

			pr_warn("server: client pid %d uid %u: frame of %u bytes over the %u limit",
				c->peer.pid, c->peer.uid, announced, FRAME_MAX_REQUEST);
			snprintf(msg, sizeof(msg), "request of %u bytes is over the %u byte limit",
				 announced, FRAME_MAX_REQUEST);
			goto send;
		}
	}
	pr_warn("server: client pid %d uid %u: frame over the %u byte limit", c->peer.pid,
		c->peer.uid, FRAME_MAX_REQUEST);
	snprintf(msg, sizeof(msg), "request over the %u byte limit", FRAME_MAX_REQUEST);
send:
	conn_send_error(c, PROFD__ERROR_CODE__ERROR_TOO_LARGE, msg);
	conn_drain_and_close(c);
}

/* Request bytes uid's connections hold, read but not yet handled. */
static size_t buffered_of_uid(const struct server *s, uint32_t uid)
{
	size_t n = 0;

	for (const struct conn *c = s->conns; c; c = c->next)
		if (!c->closing && c->admitted && c->peer.uid == uid)
			n += frame_reader__bytes(c->reader) + c->backlog_cap;
	return n;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = stream->data;
	size_t held;
	int err;

	if (nread == 0 || c->closing)
		return;
	if (nread < 0) {
		if (nread == UV_EOF)
			pr_debug("server: client pid %d uid %u: disconnected", c->peer.pid,
				 c->peer.uid);
		else
			pr_debug("server: client pid %d uid %u: read failed: %s", c->peer.pid,
				 c->peer.uid, uv_strerror((int)nread));
		conn_close(c);
		return;
	}
	held = frame_reader__pending(c->reader);
	if (c->peer.uid != 0 && held + (size_t)nread > FRAME_KEEP_BYTES &&
	    buffered_of_uid(c->s, c->peer.uid) + (size_t)nread > MAX_BUFFERED_PER_UID) {
		pr_warn("server: client pid %d uid %u: the user's connections hold over %u MiB of "
			"requests not yet handled, closing this one",
			c->peer.pid, c->peer.uid, MAX_BUFFERED_PER_UID >> 20);
		conn_close(c);
		return;
	}
	c->fed = 0;
	err = frame_reader__feed(c->reader, buf->base, (size_t)nread, on_frame, c);
	if (err == -EMSGSIZE)
		conn_too_large(c, (const uint8_t *)buf->base, (size_t)nread, held);
	else if (err == -ENOMEM) {
		pr_warn("server: client pid %d uid %u: out of memory reading a request",
			c->peer.pid, c->peer.uid);
		conn_close(c);
	}
	/* -ECANCELED: the connection is already on its way out. */
	/* Requests held back: read no more until they are answered. */
	if (!err)
		conn_pump(c);
}

static void on_idle(uv_timer_t *t)
{
	struct conn *c = t->data;
	size_t partial = frame_reader__pending(c->reader);

	if (partial)
		pr_warn("server: client pid %d uid %u: %zu bytes of an incomplete request and "
			"nothing more for %llu ms, closing",
			c->peer.pid, c->peer.uid, partial,
			(unsigned long long)c->s->opts.idle_timeout_ms);
	else
		pr_debug("server: client pid %d uid %u: idle for %llu ms, closing", c->peer.pid,
			 c->peer.uid, (unsigned long long)c->s->opts.idle_timeout_ms);
	conn_close(c);
}

static void on_write_timeout(uv_timer_t *t)
{
	struct conn *c = t->data;

	pr_warn("server: client pid %d uid %u: reply not read within %llu ms (%zu bytes queued), "
		"closing",
		c->peer.pid, c->peer.uid, (unsigned long long)c->s->opts.write_timeout_ms,
		c->queued);
	conn_close(c);
}

static int conn_peercred(struct conn *c)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	uv_os_fd_t fd;
	int err;

	err = uv_fileno((uv_handle_t *)&c->pipe, &fd);
	if (err)
		return err;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	c->peer.uid = cred.uid;
	c->peer.gid = cred.gid;
	c->peer.pid = cred.pid;
	return 0;
}

static void on_connection(uv_stream_t *listener, int status)
{
	struct server *s = listener->data;
	struct conn *c;
	int err;

	if (status < 0) {
		pr_warn("server: accept failed: %s", uv_strerror(status));
		return;
	}
	/*
	 * If this fails, the connection stays in libuv's hands and the listener pauses until a
	 * later accept: with no memory for ~1 KiB there is nothing better to do.
	 */
	c = calloc(1, sizeof(*c));
	if (!c) {
		pr_err("server: out of memory accepting a client");
		return;
	}
	c->s = s;
	c->peer.conn_id = ++s->next_conn_id;
	c->peer.pid = -1;
	c->peer.uid = c->peer.gid = (uint32_t)-1;
	uv_pipe_init(s->loop, &c->pipe, 0);
	uv_timer_init(s->loop, &c->idle_timer);
	uv_timer_init(s->loop, &c->write_timer);
	c->pipe.data = c->idle_timer.data = c->write_timer.data = c;
	c->handles_open = 3;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;

	err = uv_accept(listener, (uv_stream_t *)&c->pipe);
	if (err) {
		pr_warn("server: accept failed: %s", uv_strerror(err));
		goto fail;
	}
	err = conn_peercred(c);
	if (err) {
		pr_warn("server: SO_PEERCRED failed: %s", strerror(-err));
		goto fail;
	}
	/*
	 * One user must not be able to hold every slot and lock others (root included) out: each
	 * non-root uid gets a share of the slots. Root is only bound by the global limit.
	 */
	if ((c->peer.uid != 0 &&
	     conns_of_uid(s, c->peer.uid, false) >= s->opts.max_clients_per_uid) ||
	    s->nclients >= s->opts.max_clients) {
		/* It may be a CUDA library about to become an uplink: hear what it asks first. */
		if (!probation_make_room(s, c)) {
			conn_refuse_busy(c);
			return;
		}
		c->probation = true;
		c->probation_ms = uv_now(s->loop);
	}
	c->reader = frame_reader__new(FRAME_MAX_REQUEST);
	if (!c->reader) {
		pr_err("server: out of memory accepting a client");
		goto fail;
	}
	err = conn_read_start(c);
	if (err) {
		pr_warn("server: client pid %d uid %u: cannot read: %s", c->peer.pid, c->peer.uid,
			uv_strerror(err));
		goto fail;
	}
	c->admitted = true;
	if (c->probation)
		s->nprobation++;
	else
		s->nclients++;
	conn_idle_again(c);
	pr_debug("server: client pid %d uid %u gid %u connected (%u clients)", c->peer.pid,
		 c->peer.uid, c->peer.gid, s->nclients);
	return;
fail:
	conn_close(c);
}

/*
 * An existing socket directory must be one that no other user can write: otherwise a user could
 * put a link where the socket goes, or swap the socket for one, between the daemon's steps. A
 * sticky directory (like /tmp) is accepted: there nobody can remove or rename another's file.
 */
static int check_dir(const char *dir, const struct stat *st)
{
	char why[128];
	int err = dirsafe_check(st, true, why, sizeof(why));

	if (err)
		pr_err("server: the socket directory %s %s: refusing it", dir, why);
	return err;
}

/*
 * Create the socket's directory if it is missing (only the last component, mode 0755), or check
 * the existing one.
 */
static int make_parent_dir(const char *path)
{
	char *dir = strdup(path);
	char *slash;
	struct stat st;
	int err = 0;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		goto out; /* relative name in the cwd, or a file in "/" */
	*slash = '\0';
	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode)) {
			err = -ENOTDIR;
			pr_err("server: %s: not a directory", dir);
		} else {
			err = check_dir(dir, &st);
		}
		goto out;
	}
	if (errno != ENOENT) {
		err = -errno;
		pr_err("server: %s: %s", dir, strerror(-err));
		goto out;
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		err = -errno;
		pr_err("server: cannot create the socket directory %s: %s%s", dir, strerror(-err),
		       err == -ENOENT ? " (only its last component is created)" : "");
		goto out;
	}
	/* The umask must not narrow it: clients need to reach the socket inside. */
	if (chmod(dir, 0755) < 0) {
		err = -errno;
		pr_err("server: chmod %s: %s", dir, strerror(-err));
	}
out:
	free(dir);
	return err;
}

/*
 * A socket file already at the path: if a daemon answers, it is in use; if nobody does, it is
 * left over from a daemon that died and is removed. Anything that is not a socket is refused.
 */
static int clear_stale_socket(const struct sockaddr_un *addr)
{
	struct stat st;
	int fd, err;

	if (lstat(addr->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		pr_err("server: %s exists and is not a socket, refusing to replace it",
		       addr->sun_path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* Non-blocking: a live daemon with a full backlog answers EAGAIN instead of blocking us. */
	if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) == 0 || errno == EAGAIN ||
	    errno == EINPROGRESS) {
		pr_err("server: %s: another daemon is already serving on this socket",
		       addr->sun_path);
		err = -EADDRINUSE;
	} else if (errno == ECONNREFUSED) {
		pr_info("server: %s: removing a stale socket", addr->sun_path);
		err = unlink(addr->sun_path) < 0 && errno != ENOENT ? -errno : 0;
	} else {
		err = -errno;
		pr_err("server: %s: cannot check the existing socket: %s", addr->sun_path,
		       strerror(-err));
	}
	close(fd);
	return err;
}

/*
 * Remove the socket file only if it is still the one this server bound: a newer daemon may
 * serve on the same path by now (it found this one's socket stale or was started meanwhile).
 */
static void unlink_own_socket(struct server *s)
{
	struct stat st;

	if (!s->sock_ino)
		return;
	if (lstat(s->path, &st) < 0) {
		if (errno != ENOENT)
			pr_warn("server: %s: %s", s->path, strerror(errno));
		return;
	}
	if (!S_ISSOCK(st.st_mode) || st.st_dev != s->sock_dev || st.st_ino != s->sock_ino) {
		pr_info("server: %s is no longer this daemon's socket: left in place", s->path);
		return;
	}
	if (unlink(s->path) < 0 && errno != ENOENT)
		pr_warn("server: unlink %s: %s", s->path, strerror(errno));
}

/*
 * Bind and listen on path, with its mode and group set as the file is made or through the
 * file's own inode, never through a name that may have changed since: the umask gives bind the
 * mode, and the group is changed without following links. Records the socket's inode in s.
 */
static int bind_socket(struct server *s, int *out_fd)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	const char *path = s->path;
	mode_t mode = s->opts.socket_mode, old_umask;
	struct stat st;
	int fd = -1, err;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		pr_err("server: %s: socket path too long", path);
		return -ENAMETOOLONG;
	}
	strcpy(addr.sun_path, path);
	err = make_parent_dir(path);
	if (err)
		return err;
	err = clear_stale_socket(&addr);
	if (err)
		return err;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* bind makes the file 0777 less the umask: let the umask say exactly the mode. */
	old_umask = umask(~mode & 0777);
	err = bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ? -errno : 0;
	umask(old_umask);
	if (err) {
		pr_err("server: bind %s: %s", path, strerror(-err));
		goto err_close;
	}
	if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		err = -EEXIST;
		pr_err("server: %s: the socket just bound is gone or replaced", path);
		goto err_close;
	}
	s->sock_dev = st.st_dev;
	s->sock_ino = st.st_ino;
	if (s->opts.set_socket_gid &&
	    fchownat(AT_FDCWD, path, (uid_t)-1, s->opts.socket_gid, AT_SYMLINK_NOFOLLOW) < 0) {
		err = -errno;
		pr_err("server: %s: chown to gid %u: %s", path, (unsigned int)s->opts.socket_gid,
		       strerror(-err));
		goto err_unlink;
	}
	if (listen(fd, LISTEN_BACKLOG) < 0) {
		err = -errno;
		pr_err("server: listen %s: %s", path, strerror(-err));
		goto err_unlink;
	}
	*out_fd = fd;
	return 0;
err_unlink:
	unlink_own_socket(s);
err_close:
	close(fd);
	return err;
}

static void listener_closed(uv_handle_t *h)
{
	struct server *s = h->data;

	s->listener_closed = true;
	server_maybe_free(s);
}

static void aux_closed(uv_handle_t *h)
{
	struct server *s = h->data;

	s->aux_open--;
	server_maybe_free(s);
}

struct server *server__new(uv_loop_t *loop, const struct server_opts *opts)
{
	struct server *s;
	int fd = -1, err;

	if (!loop || !opts || !opts->path || !*opts->path || !opts->handle) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->loop = loop;
	s->opts = *opts;
	s->path = strdup(opts->path);
	if (!s->path) {
		err = -ENOMEM;
		goto err_free;
	}
	s->opts.path = s->path;
	if (!s->opts.socket_mode)
		s->opts.socket_mode = DEFAULT_SOCKET_MODE;
	if (!s->opts.max_clients)
		s->opts.max_clients = DEFAULT_MAX_CLIENTS;
	if (!s->opts.max_uplinks)
		s->opts.max_uplinks = DEFAULT_MAX_UPLINKS;
	if (!s->opts.max_uplinks_per_uid)
		s->opts.max_uplinks_per_uid = DEFAULT_MAX_UPLINKS_PER_UID;
	if (!s->opts.max_clients_per_uid)
		s->opts.max_clients_per_uid = s->opts.max_clients / 4 ? s->opts.max_clients / 4 : 1;
	if (!s->opts.idle_timeout_ms)
		s->opts.idle_timeout_ms = DEFAULT_IDLE_TIMEOUT_MS;
	if (!s->opts.max_pending_write)
		s->opts.max_pending_write = DEFAULT_MAX_PENDING_WRITE;
	if (!s->opts.write_timeout_ms)
		s->opts.write_timeout_ms = DEFAULT_WRITE_TIMEOUT_MS;
	if (!s->opts.max_pending_per_uid)
		s->opts.max_pending_per_uid = DEFAULT_MAX_PENDING_PER_UID;

	err = bind_socket(s, &fd);
	if (err)
		goto err_free;
	err = uv_pipe_init(loop, &s->listener, 0);
	if (err) {
		close(fd);
		unlink_own_socket(s);
		goto err_free;
	}
	s->listener.data = s;
	err = uv_pipe_open(&s->listener, fd);
	if (err) {
		close(fd);
		goto err_handle;
	}
	err = uv_listen((uv_stream_t *)&s->listener, LISTEN_BACKLOG, on_connection);
	if (err)
		goto err_handle;
	uv_prepare_init(loop, &s->turn);
	uv_idle_init(loop, &s->resume);
	s->turn.data = s->resume.data = s;
	s->aux_open = 2;
	uv_prepare_start(&s->turn, on_turn);
	/* Marking turns must not keep a loop alive by itself. */
	uv_unref((uv_handle_t *)&s->turn);
	pr_debug("server: listening on %s", s->path);
	return s;

err_handle:
	/* The handle is in the loop now: its memory goes in the close callback. */
	pr_err("server: %s: %s", s->path, uv_strerror(err));
	unlink_own_socket(s);
	s->closing = true;
	uv_close((uv_handle_t *)&s->listener, listener_closed);
	errno = -err;
	return NULL;
err_free:
	free(s->path);
	free(s);
	errno = -err;
	return NULL;
}

void server__close(struct server *s)
{
	struct conn *c;

	if (!s || s->closing)
		return;
	s->closing = true;
	unlink_own_socket(s);
	for (c = s->conns; c; c = c->next)
		conn_close(c);
	uv_close((uv_handle_t *)&s->turn, aux_closed);
	uv_close((uv_handle_t *)&s->resume, aux_closed);
	uv_close((uv_handle_t *)&s->listener, listener_closed);
}

unsigned int server__clients(const struct server *s)
{
	return s ? s->nclients : 0;
}

void server__memory(const struct server *s, struct mem_usage *out)
{
	*out = (struct mem_usage){0};
	if (!s)
		return;
	out->bytes = sizeof(*s);
	/* The connections are bounded by the client limits: a walk of a few dozen at most. */
	for (const struct conn *c = s->conns; c; c = c->next) {
		out->bytes +=
		    sizeof(*c) + c->queued + c->backlog_cap + frame_reader__pending(c->reader);
		out->count++;
	}
}

int server__set_uplink(struct server *s, uint64_t conn_id)
{
	struct conn *c;

	for (c = s->conns; c; c = c->next)
		if (c->peer.conn_id == conn_id && c->admitted && !c->closing)
			break;
	if (!c)
		return -ENOENT;
	if (c->uplink)
		return 0;
	if (s->nuplinks >= s->opts.max_uplinks)
		return -EBUSY;
	/* As for clients: one user must not take every uplink slot. Root has the global limit. */
	if (c->peer.uid != 0 && conns_of_uid(s, c->peer.uid, true) >= s->opts.max_uplinks_per_uid) {
		pr_warn("server: client pid %d uid %u: refused as an uplink, uid %u already has %u",
			c->peer.pid, c->peer.uid, c->peer.uid, s->opts.max_uplinks_per_uid);
		return -EBUSY;
	}
	c->uplink = true;
	if (c->probation) {
		c->probation = false;
		s->nprobation--;
	} else {
		s->nclients--;
	}
	s->nuplinks++;
	return 0;
}

int server__close_conn(struct server *s, uint64_t conn_id)
{
	for (struct conn *c = s->conns; c; c = c->next) {
		if (c->peer.conn_id != conn_id || c->closing)
			continue;
		conn_close(c);
		return 0;
	}
	return -ENOENT;
}

unsigned int server__uplinks(const struct server *s)
{
	return s ? s->nuplinks : 0;
}
