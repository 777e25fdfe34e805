/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A fake daemon for the CUPTI library's tests: a listening unix socket in a temporary
 * directory, one connection at a time, requests decoded with protobuf-c, replies written by the
 * test. Every wait has a timeout so a library that stays silent fails the test, not hangs it.
 */
#ifndef PROFD_FAKE_PROFD_H
#define PROFD_FAKE_PROFD_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "wire.h"

struct fake_profd {
	char dir[48];
	char path[96];
	int lfd;	 /* listening */
	int fd;		 /* the library's connection */
	size_t last_len; /* body length of the last request */
};

static inline uint64_t fake_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Make the directory (once) and listen at dir/profd.sock. Returns 0 or -errno. */
static inline int fake_listen(struct fake_profd *f)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};

	if (!f->dir[0]) {
		snprintf(f->dir, sizeof(f->dir), "/tmp/profd-cupti-test.XXXXXX");
		if (!mkdtemp(f->dir))
			return -errno;
		snprintf(f->path, sizeof(f->path), "%s/profd.sock", f->dir);
		f->fd = -1;
	}
	unlink(f->path);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", f->path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->lfd < 0)
		return -errno;
	if (bind(f->lfd, (struct sockaddr *)&addr, sizeof(addr)) || listen(f->lfd, 4))
		return -errno;
	return 0;
}

/* Stop listening and remove the socket: the daemon is gone. */
static inline void fake_unlisten(struct fake_profd *f)
{
	if (f->lfd >= 0)
		close(f->lfd);
	f->lfd = -1;
	unlink(f->path);
}

static inline void fake_close_conn(struct fake_profd *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

static inline void fake_cleanup(struct fake_profd *f)
{
	fake_close_conn(f);
	fake_unlisten(f);
	if (f->dir[0])
		rmdir(f->dir);
}

/* Wait for the library to connect. Returns true when it did within timeout_ms. */
static inline bool fake_accept(struct fake_profd *f, int timeout_ms)
{
	struct pollfd pfd = {.fd = f->lfd, .events = POLLIN};

	fake_close_conn(f);
	if (poll(&pfd, 1, timeout_ms) != 1)
		return false;
	f->fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
	return f->fd >= 0;
}

static inline int fake_read_full(int fd, void *buf, size_t len, uint64_t deadline_ms)
{
	uint8_t *p = buf;

	while (len) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		uint64_t now = fake_now_ms();
		ssize_t n;

		if (now >= deadline_ms || poll(&pfd, 1, (int)(deadline_ms - now)) != 1)
			return -ETIMEDOUT;
		n = read(fd, p, len);
		if (n <= 0)
			return n ? -errno : -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The next request on the connection, or NULL after timeout_ms or on EOF. Caller frees. */
static inline Profd__Request *fake_recv(struct fake_profd *f, int timeout_ms)
{
	uint64_t deadline = fake_now_ms() + (uint64_t)timeout_ms;
	uint8_t hdr[FRAME_HDR_SIZE];
	Profd__Request *req;
	uint8_t *body;
	uint32_t len;

	if (f->fd < 0 || fake_read_full(f->fd, hdr, sizeof(hdr), deadline))
		return NULL;
	len = frame_get_header(hdr);
	f->last_len = len;
	if (len > FRAME_MAX_REQUEST) {
		fprintf(stderr, "fake_profd: request of %u bytes is over the limit\n", len);
		return NULL;
	}
	body = malloc(len ? len : 1);
	if (!body || fake_read_full(f->fd, body, len, deadline)) {
		free(body);
		return NULL;
	}
	req = profd__request__unpack(NULL, len, body);
	free(body);
	return req;
}

static inline int fake_send(struct fake_profd *f, const Profd__Response *resp)
{
	uint8_t *buf;
	size_t len;
	int err = wire_pack_response(resp, FRAME_MAX_REPLY, &buf, &len);

	if (err)
		return err;
	if (send(f->fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len)
		err = -EIO;
	free(buf);
	return err;
}

static inline int fake_send_hello(struct fake_profd *f)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__HelloReply h = PROFD__HELLO_REPLY__INIT;

	h.protocol_version = PROFD_PROTOCOL_VERSION;
	resp.msg_case = PROFD__RESPONSE__MSG_HELLO;
	resp.hello = &h;
	return fake_send(f, &resp);
}

static inline int fake_send_control(struct fake_profd *f, bool enable, uint32_t interval_ms)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__GpuControl c = PROFD__GPU_CONTROL__INIT;

	c.enable = enable;
	c.has_flush_interval_ms = interval_ms != 0;
	c.flush_interval_ms = interval_ms;
	resp.msg_case = PROFD__RESPONSE__MSG_GPU_CONTROL;
	resp.gpu_control = &c;
	return fake_send(f, &resp);
}

static inline int fake_send_error(struct fake_profd *f, Profd__ErrorCode code, const char *msg)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__Error e = PROFD__ERROR__INIT;

	e.code = code;
	e.message = (char *)msg;
	resp.msg_case = PROFD__RESPONSE__MSG_ERROR;
	resp.error = &e;
	return fake_send(f, &resp);
}

/*
 * Accept a connection and run the handshake: Hello (answered), then GpuAttach (returned, not
 * answered: the test decides the GpuControl). NULL when any step fails or times out.
 */
static inline Profd__Request *fake_handshake(struct fake_profd *f, int timeout_ms)
{
	Profd__Request *req;

	if (!fake_accept(f, timeout_ms))
		return NULL;
	req = fake_recv(f, timeout_ms);
	if (!req || req->msg_case != PROFD__REQUEST__MSG_HELLO ||
	    req->hello->protocol_version != PROFD_PROTOCOL_VERSION || !req->hello->client ||
	    strcmp(req->hello->client, "libprofd_cupti") != 0) {
		fprintf(stderr, "fake_profd: expected the library's Hello\n");
		if (req)
			profd__request__free_unpacked(req, NULL);
		return NULL;
	}
	profd__request__free_unpacked(req, NULL);
	if (fake_send_hello(f))
		return NULL;
	req = fake_recv(f, timeout_ms);
	if (req && req->msg_case != PROFD__REQUEST__MSG_GPU_ATTACH) {
		fprintf(stderr, "fake_profd: expected GpuAttach, got request %d\n", req->msg_case);
		profd__request__free_unpacked(req, NULL);
		return NULL;
	}
	return req;
}

/* The next GpuBatch (NULL if something else or nothing came). Caller frees. */
static inline Profd__Request *fake_recv_batch(struct fake_profd *f, int timeout_ms)
{
	Profd__Request *req = fake_recv(f, timeout_ms);

	if (req && req->msg_case != PROFD__REQUEST__MSG_GPU_BATCH) {
		fprintf(stderr, "fake_profd: expected GpuBatch, got request %d\n", req->msg_case);
		profd__request__free_unpacked(req, NULL);
		return NULL;
	}
	return req;
}

#endif
