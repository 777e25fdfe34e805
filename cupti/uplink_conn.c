// SPDX-License-Identifier: BSD-2-Clause
/*
 * The uplink's connection to the daemon: connecting to its socket, one framed request and its
 * reply at a time (the daemon never speaks unasked), and the Hello exchange. The uplink thread
 * is the only caller.
 */
#include "uplink_priv.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdio.h"
#include "timeutil.h"
#include "wire.h"

#define UPLINK_CLIENT "libprofd_cupti"

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
		ssize_t n;
		int err = fd_wait(l->fd, POLLIN, deadline);

		if (err)
			return err;
		n = recv(l->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ECONNRESET;
		err = frame_reader__feed(l->reader, buf, (size_t)n, on_frame, l);
		if (err)
			return err == -ENOMEM ? err : -EPROTO;
	}
	return 0;
}

/*
 * Send req and wait for a reply of kind want. Returns 0 with *out set (caller frees),
 * -EREMOTEIO when the daemon answered with an Error (l->err has its message), -EPROTO for a
 * reply of another kind, or the I/O error.
 */
int uplink_call(struct link *l, const Profd__Request *req, Profd__Response__MsgCase want,
		Profd__Response **out, uint32_t timeout_ms)
{
	uint64_t deadline = mono_ns() + timeout_ms * NSEC_PER_MSEC;
	uint8_t *frame;
	size_t len;
	int err;

	err = wire_pack_request(req, FRAME_MAX_REQUEST, &frame, &len);
	if (err)
		return err;
	err = fd_send_all(l->fd, frame, len, deadline);
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

int uplink_connect(void)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = UPLINK_IO_TIMEOUT_MS / 1000};
	int fd, err;

	memcpy(addr.sun_path, up.path, sizeof(up.path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		uplink_log_once(LOGGED_CONNECT, "cannot create a socket: %s", strerror(-err));
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
		/* No daemon: the application runs as if nothing were injected, stderr included. */
		if (up.verbose)
			uplink_log_once(
			    LOGGED_NO_DAEMON,
			    "no daemon at %s; GPU activity is not collected until one starts",
			    up.path);
		break;
	case -EACCES:
	case -EPERM:
		uplink_log_once(
		    LOGGED_PERMISSION,
		    "permission denied on %s: GPU activity is not collected (the process "
		    "needs access to the daemon's socket)",
		    up.path);
		break;
	default:
		uplink_log_once(LOGGED_CONNECT, "cannot connect to %s: %s; retrying", up.path,
				strerror(-err));
		break;
	}
	return err;
}

int uplink_hello(struct link *l)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__Hello h = PROFD__HELLO__INIT;
	Profd__Response *resp;
	int err;

	h.protocol_version = PROFD_PROTOCOL_VERSION;
	h.client = UPLINK_CLIENT;
	req.msg_case = PROFD__REQUEST__MSG_HELLO;
	req.hello = &h;
	err = uplink_call(l, &req, PROFD__RESPONSE__MSG_HELLO, &resp, UPLINK_IO_TIMEOUT_MS);
	if (err == -EREMOTEIO) {
		uplink_log_once(LOGGED_REFUSED, "the daemon at %s refused this library: %s",
				up.path, l->err);
		return err;
	}
	if (err)
		return err;
	if (resp->hello->protocol_version != PROFD_PROTOCOL_VERSION) {
		uplink_log_once(LOGGED_REFUSED,
				"the daemon at %s speaks protocol version %u, this library %u: GPU "
				"activity is not collected",
				up.path, resp->hello->protocol_version, PROFD_PROTOCOL_VERSION);
		err = -EPROTO;
	}
	profd__response__free_unpacked(resp, NULL);
	return err;
}
