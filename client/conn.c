// SPDX-License-Identifier: BSD-2-Clause
#include "conn.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdio.h"
#include "frame.h"
#include "flame.h"
#include "timeutil.h"
#include "wire.h"

struct conn {
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint64_t timeout_ns;
	struct frame_reader *reader;
	bool quiet; /* no progress line, even on a terminal */
};

/* A reply still arriving after this long gets a progress line on a terminal. */
#define PROGRESS_AFTER_NS (500ull * 1000000ull)
#define PROGRESS_EVERY_NS (100ull * 1000000ull)

static void set_timeout_error(struct conn *c, struct cli_error *e)
{
	char dur[32];

	cli_error_set(e, PROFCTL_EXIT_TIMEOUT,
		      "no answer from the daemon at %s within %s: it may be busy; retry, or raise "
		      "--timeout",
		      c->path, fmt_duration(c->timeout_ns, dur, sizeof(dur)));
}

static void set_io_error(struct conn *c, int err, struct cli_error *e)
{
	if (err == -ETIMEDOUT)
		set_timeout_error(c, e);
	else if (err == -ECONNRESET || err == -EPIPE)
		cli_error_set(e, PROFCTL_EXIT_UNREACHABLE,
			      "the daemon at %s closed the connection: check its log "
			      "(journalctl -u profd)",
			      c->path);
	else
		cli_error_set(e, PROFCTL_EXIT_ERROR, "talking to the daemon at %s: %s", c->path,
			      strerror(-err));
}

struct reply_ctx {
	Profd__Response *resp;
};

/* "receiving profile: 12.3 MiB of 40.0 MiB" on stderr while a long reply arrives. */
struct progress {
	bool on;    /* stderr is a terminal and the connection is not quiet */
	bool shown; /* a line is on the screen and must be cleared */
	const char *what;
	uint64_t start_ns, drawn_ns;
	uint8_t hdr[FRAME_HDR_SIZE];
	uint64_t got, total; /* total 0 until the frame header is in */
};

static void progress_add(struct progress *pr, const uint8_t *buf, size_t n)
{
	char a[32], b[32];
	uint64_t now;

	/* One request, one reply: its first bytes are the frame header. */
	for (size_t i = 0; pr->got + i < FRAME_HDR_SIZE && i < n; i++)
		pr->hdr[pr->got + i] = buf[i];
	pr->got += n;
	if (!pr->total && pr->got >= FRAME_HDR_SIZE)
		pr->total = FRAME_HDR_SIZE + (uint64_t)frame_get_header(pr->hdr);
	if (!pr->on || !pr->total || pr->got >= pr->total)
		return;
	now = mono_ns();
	if (now - pr->start_ns < PROGRESS_AFTER_NS || now - pr->drawn_ns < PROGRESS_EVERY_NS)
		return;
	fprintf(stderr, "\rreceiving %s: %s of %s\033[K", pr->what,
		fmt_bytes(pr->got, a, sizeof(a)), fmt_bytes(pr->total, b, sizeof(b)));
	fflush(stderr);
	pr->drawn_ns = now;
	pr->shown = true;
}

static void progress_end(struct progress *pr)
{
	if (!pr->shown)
		return;
	fputs("\r\033[K", stderr);
	fflush(stderr);
	pr->shown = false;
}

static int on_frame(const uint8_t *body, size_t len, void *ctx)
{
	struct reply_ctx *rc = ctx;

	/* One request, one reply: anything after it is the daemon misbehaving. */
	if (rc->resp)
		return -EPROTO;
	rc->resp = profd__response__unpack(NULL, len, body);
	return rc->resp ? 0 : -EBADMSG;
}

static int recv_reply(struct conn *c, Profd__Response **out, const char *what, uint64_t deadline,
		      struct cli_error *e)
{
	struct progress pr = {.what = what, .start_ns = mono_ns()};
	struct reply_ctx rc = {0};
	uint8_t *buf;
	int err = 0;

	/* Pipes and log files get no progress line. */
	pr.on = !c->quiet && isatty(STDERR_FILENO);

	buf = malloc(65536);
	if (!buf) {
		cli_error_set(e, PROFCTL_EXIT_ERROR, "out of memory");
		return -ENOMEM;
	}
	while (!rc.resp) {
		ssize_t n;

		err = fd_wait(c->fd, POLLIN, deadline);
		if (err) {
			set_io_error(c, err, e);
			goto out;
		}
		n = recv(c->fd, buf, 65536, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			err = -errno;
			set_io_error(c, err, e);
			goto out;
		}
		if (n == 0) {
			err = -ECONNRESET;
			set_io_error(c, err, e);
			goto out;
		}
		progress_add(&pr, buf, (size_t)n);
		err = frame_reader__feed(c->reader, buf, (size_t)n, on_frame, &rc);
		if (err == -ENOMEM) {
			cli_error_set(e, PROFCTL_EXIT_ERROR, "out of memory reading the reply");
			goto out;
		} else if (err == -EMSGSIZE) {
			cli_error_set(
			    e, PROFCTL_EXIT_PROTOCOL,
			    "the daemon at %s sent a reply larger than %u MiB: narrow the "
			    "request (--pid, --since)",
			    c->path, FRAME_MAX_REPLY >> 20);
			goto out;
		} else if (err) {
			cli_error_set(
			    e, PROFCTL_EXIT_PROTOCOL,
			    "the daemon at %s sent a reply profctl cannot decode: are profd "
			    "and profctl the same version?",
			    c->path);
			err = -EPROTO;
			goto out;
		}
	}
	*out = rc.resp;
	rc.resp = NULL;
out:
	progress_end(&pr);
	if (rc.resp)
		profd__response__free_unpacked(rc.resp, NULL);
	free(buf);
	return err;
}

static const char *response_kind(Profd__Response__MsgCase c)
{
	switch (c) {
	case PROFD__RESPONSE__MSG_HELLO:
		return "hello";
	case PROFD__RESPONSE__MSG_STATUS:
		return "status";
	case PROFD__RESPONSE__MSG_PROFILE:
		return "profile";
	case PROFD__RESPONSE__MSG_ERROR:
		return "error";
	default:
		return "empty";
	}
}

int conn__call(struct conn *c, const Profd__Request *req, Profd__Response__MsgCase want,
	       Profd__Response **out, struct cli_error *e)
{
	uint64_t deadline = mono_ns() + c->timeout_ns;
	Profd__Response *resp = NULL;
	uint8_t *frame = NULL;
	size_t frame_len;
	int err;

	err = wire_pack_request(req, FRAME_MAX_REQUEST, &frame, &frame_len);
	if (err) {
		cli_error_set(e, PROFCTL_EXIT_ERROR, "cannot encode the request: %s",
			      strerror(-err));
		return err;
	}
	err = fd_send_all(c->fd, frame, frame_len, deadline);
	free(frame);
	if (err) {
		set_io_error(c, err, e);
		return err;
	}
	err = recv_reply(c, &resp, want == PROFD__RESPONSE__MSG_PROFILE ? "profile" : "reply",
			 deadline, e);
	if (err)
		return err;
	if (resp->msg_case == want) {
		*out = resp;
		return 0;
	}
	if (resp->msg_case == PROFD__RESPONSE__MSG_ERROR) {
		cli_error_from_reply(e, resp->error);
		err = -EREMOTEIO;
	} else {
		cli_error_set(
		    e, PROFCTL_EXIT_PROTOCOL,
		    "the daemon at %s answered with a %s reply where profctl expected %s: "
		    "are profd and profctl the same version?",
		    c->path, response_kind(resp->msg_case), response_kind(want));
		err = -EPROTO;
	}
	profd__response__free_unpacked(resp, NULL);
	return err;
}

static int do_connect(struct conn *c, const char *path, struct cli_error *e)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	uint64_t t = c->timeout_ns;
	struct timeval tv = {.tv_sec = (time_t)(t / 1000000000ull),
			     .tv_usec = (suseconds_t)(t % 1000000000ull / 1000)};
	int err;

	memcpy(addr.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "cannot create a socket: %s", strerror(-err));
		return err;
	}
	/* A daemon with a full accept queue makes connect() wait; bound that wait too. */
	if (setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "setsockopt: %s", strerror(-err));
		return err;
	}
	if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) == 0)
		return 0;
	err = -errno;
	switch (err) {
	case -ENOENT:
	case -ECONNREFUSED:
	case -ENOTDIR:
		cli_error_set(e, PROFCTL_EXIT_UNREACHABLE,
			      "no daemon at %s: start it with `sudo profd` or pass --socket", path);
		break;
	case -EACCES:
	case -EPERM:
		cli_error_set(e, PROFCTL_EXIT_PERMISSION,
			      "permission denied on %s: run profctl with sudo, or as a member of "
			      "the socket's group",
			      path);
		break;
	case -EAGAIN:
	case -ETIMEDOUT:
	case -EINPROGRESS:
		set_timeout_error(c, e);
		err = -ETIMEDOUT;
		break;
	default:
		cli_error_set(e, PROFCTL_EXIT_UNREACHABLE, "cannot connect to %s: %s", path,
			      strerror(-err));
		break;
	}
	return err;
}

static int hello(struct conn *c, struct cli_error *e)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__Hello h = PROFD__HELLO__INIT;
	Profd__Response *resp = NULL;
	int err;

	h.protocol_version = PROFD_PROTOCOL_VERSION;
	h.client = "profctl " PROFD_VERSION;
	req.msg_case = PROFD__REQUEST__MSG_HELLO;
	req.hello = &h;
	err = conn__call(c, &req, PROFD__RESPONSE__MSG_HELLO, &resp, e);
	if (err) {
		if (err == -EREMOTEIO && e->code == PROFCTL_EXIT_PROTOCOL) {
			char reason[sizeof(e->msg)];

			memcpy(reason, e->msg, sizeof(reason));
			cli_error_set(
			    e, PROFCTL_EXIT_PROTOCOL,
			    "the daemon at %s refused protocol version %d (%.900s): install "
			    "matching versions of profd and profctl",
			    c->path, PROFD_PROTOCOL_VERSION, reason);
		}
		return err;
	}
	if (resp->hello->protocol_version != PROFD_PROTOCOL_VERSION) {
		cli_error_set(e, PROFCTL_EXIT_PROTOCOL,
			      "protocol version mismatch: the daemon at %s speaks version %" PRIu32
			      ", profctl speaks %d: install matching versions of profd and profctl",
			      c->path, resp->hello->protocol_version, PROFD_PROTOCOL_VERSION);
		err = -EPROTO;
	}
	profd__response__free_unpacked(resp, NULL);
	return err;
}

struct conn *conn__open(const char *path, uint64_t timeout_ns, struct cli_error *e)
{
	struct conn *c;
	int err;

	if (strlen(path) >= sizeof(c->path)) {
		cli_error_set(e, PROFCTL_EXIT_USAGE, "socket path too long (%zu bytes at most): %s",
			      sizeof(c->path) - 1, path);
		errno = ENAMETOOLONG;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		cli_error_set(e, PROFCTL_EXIT_ERROR, "out of memory");
		return NULL;
	}
	c->fd = -1;
	c->timeout_ns = timeout_ns;
	memcpy(c->path, path, strlen(path) + 1);
	c->reader = frame_reader__new(FRAME_MAX_REPLY);
	if (!c->reader) {
		err = -ENOMEM;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "out of memory");
		goto fail;
	}
	err = do_connect(c, path, e);
	if (err)
		goto fail;
	err = hello(c, e);
	if (err)
		goto fail;
	return c;
fail:
	conn__free(c);
	errno = -err;
	return NULL;
}

void conn__set_quiet(struct conn *c, bool quiet)
{
	c->quiet = quiet;
}

void conn__free(struct conn *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	frame_reader__free(c->reader);
	free(c);
}
