// SPDX-License-Identifier: BSD-2-Clause
/*
 * The protocol server on a real socket in a temporary directory. The loop runs in its own
 * thread with a fake handler; the test is the client, with plain blocking sockets.
 */
#define _GNU_SOURCE
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "server.h"
#include "wire.h"

#define FAKE_PID 4242
#define FAIL_TID 666
#define MiB (1u << 20)

static char tmpdir[64];
static char sock_dir[128];
static char sock_path[160];

/* What the fake handler saw; written on the loop thread, read on the test thread. */
static atomic_int calls_status;
static atomic_int calls_dump;
static atomic_uint seen_uid;
static atomic_int seen_pid;
static _Atomic uint64_t seen_conn;
/* What the close notification saw. */
static atomic_int closes;
static _Atomic uint64_t closed_conn[8];
static atomic_int closed_pid;
static size_t big_reply; /* set while the loop is stopped */
static struct server *cur_server;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[1 << 16];
static size_t log_len;

static void log_capture(enum log_level level, const char *msg, void *ctx)
{
	size_t n = strlen(msg);

	pthread_mutex_lock(&log_lock);
	if (log_len + n + 2 < sizeof(log_buf)) {
		memcpy(log_buf + log_len, msg, n);
		log_len += n;
		log_buf[log_len++] = '\n';
		log_buf[log_len] = '\0';
	}
	pthread_mutex_unlock(&log_lock);
	if (getenv("TEST_VERBOSE"))
		fprintf(stderr, "log: %s\n", msg);
}

static bool log_has(const char *s)
{
	bool found;

	pthread_mutex_lock(&log_lock);
	found = strstr(log_buf, s) != NULL;
	pthread_mutex_unlock(&log_lock);
	return found;
}

static void log_clear(void)
{
	pthread_mutex_lock(&log_lock);
	log_len = 0;
	log_buf[0] = '\0';
	pthread_mutex_unlock(&log_lock);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static int uplink_result = 1;
/* Set when a part could not run: the test then ends in CHECK_SKIP, never a pass. */
static const char *skipped;
/* Each dump takes this long in the handler (a dump of a large store). */
static int dump_work_ms;
/* GpuBatch asks the fake handler to close this connection (server__close_conn). */
static _Atomic uint64_t close_target;
static atomic_int close_result = 1;

static int fake_handle(void *ctx, const struct server_peer *peer, const Profd__Request *req,
		       uint8_t **frame, size_t *frame_len)
{
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__StatusReply st = PROFD__STATUS_REPLY__INIT;
	char *big = NULL;
	int err;

	seen_uid = peer->uid;
	seen_pid = peer->pid;
	seen_conn = peer->conn_id;
	switch (req->msg_case) {
	case PROFD__REQUEST__MSG_STATUS:
		calls_status++;
		st.has_pid = true;
		st.pid = FAKE_PID;
		st.has_clients = true;
		st.clients = server__clients(cur_server);
		break;
	case PROFD__REQUEST__MSG_GPU_ATTACH:
		/* As the daemon's handler does for a CUPTI library: the connection is an uplink. */
		uplink_result = server__set_uplink(cur_server, peer->conn_id);
		st.has_clients = true;
		st.clients = server__clients(cur_server);
		break;
	case PROFD__REQUEST__MSG_GPU_BATCH:
		close_result = server__close_conn(cur_server, close_target);
		break;
	case PROFD__REQUEST__MSG_DUMP:
		calls_dump++;
		if (dump_work_ms)
			sleep_ms(dump_work_ms);
		if (req->dump->has_tid && req->dump->tid == FAIL_TID)
			return -EIO;
		big = malloc(big_reply + 1);
		if (!big)
			return -ENOMEM;
		memset(big, 'x', big_reply);
		big[big_reply] = '\0';
		st.daemon_version = big;
		break;
	default:
		/* The server must never pass Hello or an unknown request on. */
		return -EINVAL;
	}
	resp.msg_case = PROFD__RESPONSE__MSG_STATUS;
	resp.status = &st;
	err = wire_pack_response(&resp, FRAME_MAX_REPLY, frame, frame_len);
	free(big);
	return err;
}

static void fake_close(void *ctx, const struct server_peer *peer)
{
	int i = closes++;

	if (i < 8)
		closed_conn[i] = peer->conn_id;
	closed_pid = peer->pid;
}

/* ---- the server in a thread -------------------------------------------------------------- */

struct harness {
	uv_loop_t loop;
	uv_async_t stop;
	struct server *s;
	pthread_t thread;
};

static void on_stop(uv_async_t *a)
{
	struct harness *h = a->data;

	server__close(h->s);
	uv_close((uv_handle_t *)&h->stop, NULL);
}

static void *loop_thread(void *arg)
{
	struct harness *h = arg;

	uv_run(&h->loop, UV_RUN_DEFAULT);
	return NULL;
}

static struct server_opts base_opts(void)
{
	struct server_opts o = {
	    .path = sock_path,
	    .handle = fake_handle,
	    .idle_timeout_ms = 5000,
	};
	return o;
}

/* Returns 0 with the loop running, or the negative errno of server__new. */
static int h_start(struct harness *h, const struct server_opts *o)
{
	int err;

	memset(h, 0, sizeof(*h));
	calls_status = calls_dump = 0;
	log_clear();
	uv_loop_init(&h->loop);
	h->s = server__new(&h->loop, o);
	if (!h->s) {
		err = -errno;
		uv_run(&h->loop, UV_RUN_DEFAULT);
		uv_loop_close(&h->loop);
		return err;
	}
	cur_server = h->s;
	uv_async_init(&h->loop, &h->stop, on_stop);
	h->stop.data = h;
	pthread_create(&h->thread, NULL, loop_thread, h);
	return 0;
}

static void h_stop(struct harness *h)
{
	struct stat st;

	uv_async_send(&h->stop);
	pthread_join(h->thread, NULL);
	/* Every handle closed: nothing of the server left in the loop. */
	CHECK_EQ_I(uv_loop_close(&h->loop), 0);
	/* server__close removes the socket. */
	CHECK(stat(sock_path, &st) < 0 && errno == ENOENT);
	cur_server = NULL;
}

/* ---- blocking client --------------------------------------------------------------------- */

static int cl_connect(void)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = 5};
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A server bug shows as a failed check after 5 s, never as a hung test. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	strcpy(addr.sun_path, sock_path);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static int cl_write(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* 0, -ENODATA at end of stream, or -errno (EAGAIN: timed out). */
static int cl_read(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n == 0)
			return -ENODATA;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int cl_send(int fd, const Profd__Request *req)
{
	uint8_t *buf;
	size_t len;
	int err;

	err = wire_pack_request(req, FRAME_MAX_REQUEST, &buf, &len);
	if (err)
		return err;
	err = cl_write(fd, buf, len);
	free(buf);
	return err;
}

static int cl_send_raw(int fd, const void *body, uint32_t len)
{
	uint8_t hdr[FRAME_HDR_SIZE];
	int err;

	frame_put_header(hdr, len);
	err = cl_write(fd, hdr, sizeof(hdr));
	return err ? err : cl_write(fd, body, len);
}

static Profd__Response *cl_recv(int fd)
{
	uint8_t hdr[FRAME_HDR_SIZE], *body;
	Profd__Response *resp;
	uint32_t len;

	if (cl_read(fd, hdr, sizeof(hdr)))
		return NULL;
	len = frame_get_header(hdr);
	if (len > 64 * MiB)
		return NULL;
	body = malloc(len ? len : 1);
	if (!body)
		return NULL;
	if (cl_read(fd, body, len)) {
		free(body);
		return NULL;
	}
	resp = profd__response__unpack(NULL, len, body);
	free(body);
	return resp;
}

static int cl_send_hello(int fd, uint32_t version)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__Hello hello = PROFD__HELLO__INIT;

	hello.protocol_version = version;
	hello.client = "test_server";
	req.msg_case = PROFD__REQUEST__MSG_HELLO;
	req.hello = &hello;
	return cl_send(fd, &req);
}

static int cl_send_status(int fd)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__StatusRequest sr = PROFD__STATUS_REQUEST__INIT;

	req.msg_case = PROFD__REQUEST__MSG_STATUS;
	req.status = &sr;
	return cl_send(fd, &req);
}

static int cl_send_gpu_attach(int fd)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__GpuAttach ga = PROFD__GPU_ATTACH__INIT;

	ga.state = PROFD__GPU_STATE__GPU_STATE_READY;
	req.msg_case = PROFD__REQUEST__MSG_GPU_ATTACH;
	req.gpu_attach = &ga;
	return cl_send(fd, &req);
}

/* Sends GpuAttach; returns the clients count the reply carries, -1 on no reply. */
static int cl_gpu_attach(int fd)
{
	Profd__Response *r;
	int n = -1;

	if (cl_send_gpu_attach(fd))
		return -1;
	r = cl_recv(fd);
	if (r && r->msg_case == PROFD__RESPONSE__MSG_STATUS)
		n = (int)r->status->clients;
	profd__response__free_unpacked(r, NULL);
	return n;
}

static int cl_send_gpu_batch(int fd)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__GpuBatch gb = PROFD__GPU_BATCH__INIT;

	req.msg_case = PROFD__REQUEST__MSG_GPU_BATCH;
	req.gpu_batch = &gb;
	return cl_send(fd, &req);
}

static int cl_send_dump(int fd, bool fail)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__DumpRequest dr = PROFD__DUMP_REQUEST__INIT;

	if (fail) {
		dr.has_tid = true;
		dr.tid = FAIL_TID;
	}
	req.msg_case = PROFD__REQUEST__MSG_DUMP;
	req.dump = &dr;
	return cl_send(fd, &req);
}

/* Hello with the right version; true when the daemon answered as it should. */
static bool cl_hello(int fd)
{
	Profd__Response *r;
	bool ok;

	if (cl_send_hello(fd, PROFD_PROTOCOL_VERSION))
		return false;
	r = cl_recv(fd);
	ok = r && r->msg_case == PROFD__RESPONSE__MSG_HELLO &&
	     r->hello->protocol_version == PROFD_PROTOCOL_VERSION;
	profd__response__free_unpacked(r, NULL);
	return ok;
}

/* Status round trip: the clients count the daemon reported, or -1. */
static int cl_status(int fd)
{
	Profd__Response *r;
	int clients = -1;

	if (cl_send_status(fd))
		return -1;
	r = cl_recv(fd);
	if (r && r->msg_case == PROFD__RESPONSE__MSG_STATUS && r->status->has_pid &&
	    r->status->pid == FAKE_PID)
		clients = (int)r->status->clients;
	profd__response__free_unpacked(r, NULL);
	return clients;
}

/* Whether the server has closed its end already (without waiting). */
static bool cl_closed_now(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* The server closed its end: end of stream, or a reset when our unread bytes were dropped. */
static bool cl_closed(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, 0);

	return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void check_error(Profd__Response *r, Profd__ErrorCode code, const char *text)
{
	CHECK(r != NULL);
	if (!r)
		return;
	CHECK_EQ_U(r->msg_case, PROFD__RESPONSE__MSG_ERROR);
	if (r->msg_case != PROFD__RESPONSE__MSG_ERROR)
		goto out;
	CHECK_EQ_U(r->error->code, code);
	if (!strstr(r->error->message, text)) {
		fprintf(stderr, "error message \"%s\" lacks \"%s\"\n", r->error->message, text);
		CHECK(!"error message");
	}
out:
	profd__response__free_unpacked(r, NULL);
}

/* The clients count reaches want within 3 s (closing is noticed asynchronously). */
static int wait_clients(int fd, int want)
{
	int got = -1;

	for (int i = 0; i < 150; i++) {
		got = cl_status(fd);
		if (got == want)
			break;
		sleep_ms(20);
	}
	return got;
}

/* ---- cases ------------------------------------------------------------------------------- */

static void test_hello_status(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	Profd__Response *r;
	struct stat st;
	int fd;

	/* The modes must come from the server, whatever the umask. */
	umask(077);
	CHECK_EQ_I(h_start(&h, &o), 0);
	umask(022);
	CHECK(stat(sock_dir, &st) == 0 && S_ISDIR(st.st_mode));
	CHECK_EQ_U(st.st_mode & 07777, 0755);
	CHECK(stat(sock_path, &st) == 0 && S_ISSOCK(st.st_mode));
	CHECK_EQ_U(st.st_mode & 07777, 0660);

	fd = cl_connect();
	CHECK(fd >= 0);
	CHECK_EQ_I(cl_send_hello(fd, PROFD_PROTOCOL_VERSION), 0);
	r = cl_recv(fd);
	CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_HELLO);
	if (r && r->msg_case == PROFD__RESPONSE__MSG_HELLO) {
		CHECK_EQ_U(r->hello->protocol_version, PROFD_PROTOCOL_VERSION);
		CHECK_STREQ(r->hello->daemon_version, PROFD_VERSION);
		CHECK(r->hello->has_peer_uid);
		CHECK_EQ_U(r->hello->peer_uid, getuid());
	}
	profd__response__free_unpacked(r, NULL);
	/* One client: this one. */
	CHECK_EQ_I(cl_status(fd), 1);
	CHECK_EQ_I(calls_status, 1);
	CHECK_EQ_U(seen_uid, getuid());
	CHECK_EQ_I(seen_pid, getpid());
	/* A second status on the same connection. */
	CHECK_EQ_I(cl_status(fd), 1);
	CHECK_EQ_I(calls_status, 2);
	/* A request that trickles in a byte at a time is the same request. */
	{
		Profd__Request req = PROFD__REQUEST__INIT;
		Profd__StatusRequest sr = PROFD__STATUS_REQUEST__INIT;
		Profd__Response *rr;
		uint8_t *buf;
		size_t len;

		req.msg_case = PROFD__REQUEST__MSG_STATUS;
		req.status = &sr;
		CHECK_EQ_I(wire_pack_request(&req, 64, &buf, &len), 0);
		for (size_t i = 0; i < len; i++) {
			CHECK_EQ_I(cl_write(fd, buf + i, 1), 0);
			sleep_ms(10);
		}
		free(buf);
		rr = cl_recv(fd);
		CHECK(rr && rr->msg_case == PROFD__RESPONSE__MSG_STATUS &&
		      rr->status->pid == FAKE_PID);
		profd__response__free_unpacked(rr, NULL);
		CHECK_EQ_I(calls_status, 3);
	}
	close(fd);
	h_stop(&h);
	/* The directory the server created stays; the socket is gone (checked in h_stop). */
	CHECK(stat(sock_dir, &st) == 0);
}

static void test_version_mismatch(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	int fd;

	CHECK_EQ_I(h_start(&h, &o), 0);
	fd = cl_connect();
	CHECK_EQ_I(cl_send_hello(fd, 99), 0);
	check_error(cl_recv(fd), PROFD__ERROR_CODE__ERROR_UNSUPPORTED_VERSION,
		    "protocol version 99 is not supported");
	CHECK(cl_closed(fd));
	close(fd);
	/* The message names both versions. */
	fd = cl_connect();
	CHECK_EQ_I(cl_send_hello(fd, 2), 0);
	check_error(cl_recv(fd), PROFD__ERROR_CODE__ERROR_UNSUPPORTED_VERSION, "speaks version 1");
	CHECK(cl_closed(fd));
	close(fd);
	CHECK(log_has("protocol version 2, expected 1"));
	h_stop(&h);
}

static void test_before_hello(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	int fd;

	CHECK_EQ_I(h_start(&h, &o), 0);
	fd = cl_connect();
	CHECK_EQ_I(cl_send_status(fd), 0);
	check_error(cl_recv(fd), PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
		    "first message must be Hello");
	CHECK(cl_closed(fd));
	CHECK_EQ_I(calls_status, 0);
	close(fd);
	h_stop(&h);
}

static void test_garbage(void)
{
	static const uint8_t junk[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	struct server_opts o = base_opts();
	struct harness h;
	int fd;

	CHECK_EQ_I(h_start(&h, &o), 0);
	fd = cl_connect();
	CHECK(cl_hello(fd));
	CHECK_EQ_I(cl_send_raw(fd, junk, sizeof(junk)), 0);
	check_error(cl_recv(fd), PROFD__ERROR_CODE__ERROR_BAD_REQUEST, "undecodable request");
	CHECK(cl_closed(fd));
	close(fd);
	CHECK(log_has("undecodable request of 8 bytes"));
	/* Also before Hello: undecodable wins over out of order. */
	fd = cl_connect();
	CHECK_EQ_I(cl_send_raw(fd, junk, 3), 0);
	check_error(cl_recv(fd), PROFD__ERROR_CODE__ERROR_BAD_REQUEST, "undecodable request");
	CHECK(cl_closed(fd));
	close(fd);
	h_stop(&h);
}

/* A Hello whose encoded Request is exactly len bytes. */
static int send_hello_of_size(int fd, size_t len)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__Hello hello = PROFD__HELLO__INIT;
	size_t n = len;
	char *name;
	int err = -EINVAL;

	name = malloc(len + 1);
	if (!name)
		return -ENOMEM;
	hello.protocol_version = PROFD_PROTOCOL_VERSION;
	hello.client = name;
	req.msg_case = PROFD__REQUEST__MSG_HELLO;
	req.hello = &hello;
	while (n--) {
		size_t packed;

		memset(name, 'c', n);
		name[n] = '\0';
		packed = protobuf_c_message_get_packed_size(&req.base);
		if (packed == len) {
			uint8_t *buf;
			size_t blen;

			err = wire_pack_request(&req, len, &buf, &blen);
			if (!err) {
				err = cl_write(fd, buf, blen);
				free(buf);
			}
			break;
		}
		if (packed < len)
			break;
	}
	free(name);
	return err;
}

static void test_too_large(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	uint8_t hdr[FRAME_HDR_SIZE];
	Profd__Response *r;
	uint64_t t0;
	int fd, err;

	CHECK_EQ_I(h_start(&h, &o), 0);
	/* Exactly the maximum is a request like any other. */
	fd = cl_connect();
	CHECK_EQ_I(send_hello_of_size(fd, FRAME_MAX_REQUEST), 0);
	r = cl_recv(fd);
	CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_HELLO);
	profd__response__free_unpacked(r, NULL);
	CHECK_EQ_I(cl_status(fd), 1);
	close(fd);

	/* One byte more is refused. */
	fd = cl_connect();
	CHECK(cl_hello(fd));
	/* The server refuses on the header and closes: the rest of the body may meet EPIPE. */
	err = send_hello_of_size(fd, FRAME_MAX_REQUEST + 1);
	CHECK(err == 0 || err == -EPIPE || err == -ECONNRESET);
	check_error(cl_recv(fd), PROFD__ERROR_CODE__ERROR_TOO_LARGE,
		    "request of 1048577 bytes is over the 1048576 byte limit");
	CHECK(cl_closed(fd));
	close(fd);

	/*
	 * A header announcing 2 GiB and no body: the answer comes from the header alone, at once,
	 * so the server neither waited for nor made room for the body.
	 */
	fd = cl_connect();
	CHECK(cl_hello(fd));
	frame_put_header(hdr, 0x7fffffff);
	t0 = now_ms();
	CHECK_EQ_I(cl_write(fd, hdr, sizeof(hdr)), 0);
	check_error(cl_recv(fd), PROFD__ERROR_CODE__ERROR_TOO_LARGE, "2147483647 bytes");
	CHECK(now_ms() - t0 < 2000);
	CHECK(cl_closed(fd));
	close(fd);
	CHECK(log_has("frame of 2147483647 bytes over the 1048576 limit"));

	/* The same header split over two writes, after a complete request in the first. */
	fd = cl_connect();
	{
		uint8_t buf[64];
		uint8_t *p;
		size_t len;
		Profd__Request req = PROFD__REQUEST__INIT;
		Profd__Hello hello = PROFD__HELLO__INIT;

		hello.protocol_version = PROFD_PROTOCOL_VERSION;
		req.msg_case = PROFD__REQUEST__MSG_HELLO;
		req.hello = &hello;
		CHECK_EQ_I(wire_pack_request(&req, 64, &p, &len), 0);
		memcpy(buf, p, len);
		free(p);
		frame_put_header(buf + len, 9999999);
		CHECK_EQ_I(cl_write(fd, buf, len + 2), 0);
		sleep_ms(50);
		CHECK_EQ_I(cl_write(fd, buf + len + 2, 2), 0);
	}
	r = cl_recv(fd);
	CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_HELLO);
	profd__response__free_unpacked(r, NULL);
	check_error(cl_recv(fd), PROFD__ERROR_CODE__ERROR_TOO_LARGE, "over the 1048576 byte limit");
	CHECK(cl_closed(fd));
	close(fd);

	/* The daemon goes on. */
	fd = cl_connect();
	CHECK(cl_hello(fd));
	CHECK_EQ_I(wait_clients(fd, 1), 1);
	close(fd);
	h_stop(&h);
}

static void test_idle_timeout(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	uint8_t part[14] = {0};
	uint64_t t0, dt;
	int fd, quiet, chatty;

	o.idle_timeout_ms = 200;
	CHECK_EQ_I(h_start(&h, &o), 0);

	/* A truncated frame, then silence. */
	fd = cl_connect();
	CHECK(cl_hello(fd));
	frame_put_header(part, 100);
	t0 = now_ms();
	CHECK_EQ_I(cl_write(fd, part, sizeof(part)), 0);
	quiet = cl_connect();
	CHECK(cl_closed(fd));
	dt = now_ms() - t0;
	CHECK(dt >= 150 && dt < 3000);
	close(fd);
	CHECK(log_has("14 bytes of an incomplete request"));

	/* A client that never says anything is gone as well. */
	CHECK(cl_closed(quiet));
	close(quiet);

	/* One that keeps asking, slower than nothing but faster than the timeout, stays. */
	chatty = cl_connect();
	CHECK(cl_hello(chatty));
	for (int i = 0; i < 6; i++) {
		sleep_ms(100);
		CHECK_EQ_I(cl_status(chatty), 1);
	}
	close(chatty);
	h_stop(&h);
}

static void test_unknown_request(void)
{
	/* Field 15, length-delimited, empty: what a newer client's request looks like here. */
	static const uint8_t unknown[] = {0x7a, 0x00};
	struct server_opts o = base_opts();
	struct harness h;
	int fd;

	CHECK_EQ_I(h_start(&h, &o), 0);
	fd = cl_connect();
	CHECK(cl_hello(fd));
	CHECK_EQ_I(cl_send_raw(fd, unknown, sizeof(unknown)), 0);
	check_error(cl_recv(fd), PROFD__ERROR_CODE__ERROR_BAD_REQUEST, "unknown request");
	/* The connection still works. */
	CHECK_EQ_I(cl_status(fd), 1);
	/* An empty Request is the same thing. */
	CHECK_EQ_I(cl_send_raw(fd, "", 0), 0);
	check_error(cl_recv(fd), PROFD__ERROR_CODE__ERROR_BAD_REQUEST, "unknown request");
	CHECK_EQ_I(cl_status(fd), 1);
	CHECK_EQ_I(calls_status, 2);
	close(fd);
	h_stop(&h);
}

static void test_handler_error(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	int fd;

	CHECK_EQ_I(h_start(&h, &o), 0);
	fd = cl_connect();
	CHECK(cl_hello(fd));
	CHECK_EQ_I(cl_send_dump(fd, true), 0);
	CHECK(cl_closed(fd));
	CHECK_EQ_I(calls_dump, 1);
	close(fd);
	fd = cl_connect();
	CHECK(cl_hello(fd));
	CHECK_EQ_I(cl_status(fd), 1);
	close(fd);
	h_stop(&h);
}

static void test_disconnect_mid_reply(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	uint8_t hdr[FRAME_HDR_SIZE];
	static uint8_t some[64 << 10];
	int fd, other;

	big_reply = 50 * MiB;
	CHECK_EQ_I(h_start(&h, &o), 0);
	fd = cl_connect();
	CHECK(cl_hello(fd));
	CHECK_EQ_I(cl_send_dump(fd, false), 0);
	CHECK_EQ_I(cl_read(fd, hdr, sizeof(hdr)), 0);
	CHECK(frame_get_header(hdr) > 50 * MiB);
	CHECK_EQ_I(cl_read(fd, some, sizeof(some)), 0);
	close(fd);

	other = cl_connect();
	CHECK(cl_hello(other));
	CHECK_EQ_I(wait_clients(other, 1), 1);
	CHECK_EQ_I(calls_dump, 1);
	close(other);
	h_stop(&h);
	big_reply = 0;
}

static void test_slow_reader(void)
{
	enum { NREQ = 40 };
	struct server_opts o = base_opts();
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__DumpRequest dr = PROFD__DUMP_REQUEST__INIT;
	struct harness h;
	uint8_t *one, *all;
	size_t one_len;
	int slow, other, answered = 0, calls;

	big_reply = MiB;
	o.max_pending_write = 4 * MiB;
	o.write_timeout_ms = 10000;
	CHECK_EQ_I(h_start(&h, &o), 0);

	slow = cl_connect();
	CHECK(cl_hello(slow));
	/* Many requests in one write: most of them arrive in the read that crosses the limit. */
	req.msg_case = PROFD__REQUEST__MSG_DUMP;
	req.dump = &dr;
	CHECK_EQ_I(wire_pack_request(&req, 64, &one, &one_len), 0);
	all = malloc(NREQ * one_len);
	for (int i = 0; i < NREQ; i++)
		memcpy(all + i * one_len, one, one_len);
	CHECK_EQ_I(cl_write(slow, all, NREQ * one_len), 0);
	free(all);
	free(one);
	sleep_ms(300);
	/*
	 * One request in flight: the next is handled once the reply to the last is written, and
	 * a 1 MiB reply does not fit the kernel's socket buffer.
	 */
	calls = calls_dump;
	CHECK_EQ_I(calls, 1);

	/* Meanwhile another client is served. */
	other = cl_connect();
	CHECK(cl_hello(other));
	CHECK_EQ_I(cl_status(other), 2);
	sleep_ms(100);
	CHECK_EQ_I(calls_dump, calls);

	/* Reading the replies lets the held-back requests through, in order, every one. */
	for (int i = 0; i < NREQ; i++) {
		Profd__Response *r = cl_recv(slow);

		if (r && r->msg_case == PROFD__RESPONSE__MSG_STATUS &&
		    strlen(r->status->daemon_version) == MiB)
			answered++;
		profd__response__free_unpacked(r, NULL);
	}
	CHECK_EQ_I(answered, NREQ);
	CHECK_EQ_I(calls_dump, NREQ);
	/* And the connection is as good as new. */
	CHECK_EQ_I(cl_status(slow), 2);
	close(slow);
	close(other);
	h_stop(&h);
	big_reply = 0;
}

static void test_write_timeout(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	uint64_t t0, dt;
	int fd, other;

	big_reply = 8 * MiB;
	o.write_timeout_ms = 300;
	CHECK_EQ_I(h_start(&h, &o), 0);
	fd = cl_connect();
	CHECK(cl_hello(fd));
	other = cl_connect();
	CHECK(cl_hello(other));
	t0 = now_ms();
	CHECK_EQ_I(cl_send_dump(fd, false), 0);
	/* Never read the reply: the server gives up on it after the write timeout. */
	CHECK_EQ_I(wait_clients(other, 1), 1);
	dt = now_ms() - t0;
	CHECK(dt >= 250 && dt < 3000);
	CHECK(log_has("reply not read within 300 ms"));
	close(fd);
	close(other);
	h_stop(&h);
	big_reply = 0;
}

static void test_max_clients(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	int a, b, c, d = -1;
	bool admitted = false;

	o.max_clients = 2;
	CHECK_EQ_I(h_start(&h, &o), 0);
	a = cl_connect();
	b = cl_connect();
	CHECK(cl_hello(a));
	CHECK(cl_hello(b));
	c = cl_connect();
	CHECK(c >= 0);
	/*
	 * On probation: it may say Hello (it could be a CUDA library about to become an uplink),
	 * and any other request is refused.
	 */
	CHECK(cl_hello(c));
	CHECK_EQ_I(cl_send_status(c), 0);
	check_error(cl_recv(c), PROFD__ERROR_CODE__ERROR_BUSY, "too many connections");
	CHECK(cl_closed(c));
	close(c);
	CHECK(log_has("refused, too many connections (2 clients"));
	CHECK_EQ_I(cl_status(a), 2);

	/* A place frees up. */
	close(a);
	for (int i = 0; i < 150 && !admitted; i++) {
		Profd__Response *r;

		d = cl_connect();
		cl_send_hello(d, PROFD_PROTOCOL_VERSION);
		r = cl_recv(d);
		admitted = r && r->msg_case == PROFD__RESPONSE__MSG_HELLO;
		profd__response__free_unpacked(r, NULL);
		if (!admitted) {
			close(d);
			d = -1;
			sleep_ms(20);
		}
	}
	CHECK(admitted);
	CHECK_EQ_I(cl_status(d), 2);
	CHECK_EQ_I(cl_status(b), 2);
	close(b);
	if (d >= 0)
		close(d);
	h_stop(&h);
}

/*
 * One peer's connect loop past the limit (issue 24 item 5: 182,161 lines in 20 s): the log
 * gets at most a burst per interval of the refusal and one line with the count, which adds up
 * to every refusal.
 */
static size_t log_count(const char *s, uint64_t *repeats)
{
	size_t n = 0;

	*repeats = 0;
	pthread_mutex_lock(&log_lock);
	for (const char *p = log_buf; (p = strstr(p, s)); p += strlen(s)) {
		const char *eol = strchr(p, '\n');
		const char *r = strstr(p, " (repeated ");

		if (r && (!eol || r < eol)) {
			uint64_t v = 0;

			for (r += strlen(" (repeated "); *r && *r != ' '; r++)
				if (*r != ',')
					v = v * 10 + (uint64_t)(*r - '0');
			*repeats += v;
		} else {
			n++;
		}
	}
	pthread_mutex_unlock(&log_lock);
	return n;
}

static void test_refusal_flood(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	uint64_t start, repeats;
	size_t written, intervals;
	int a, b;

	o.max_clients = 2;
	CHECK_EQ_I(h_start(&h, &o), 0);
	a = cl_connect();
	b = cl_connect();
	CHECK(cl_hello(a));
	CHECK(cl_hello(b));
	/* A fresh limiter and log: earlier tests' refusals do not count here. */
	log_set_rate_limit(LOG_RATE_BURST, LOG_RATE_INTERVAL_NS);
	log_clear();
	start = now_ms();
	for (int i = 0; i < 300; i++) {
		int c = cl_connect();

		CHECK(c >= 0);
		CHECK(cl_hello(c));
		CHECK_EQ_I(cl_send_status(c), 0);
		/* The refusal is logged before the reply is sent. */
		check_error(cl_recv(c), PROFD__ERROR_CODE__ERROR_BUSY, "too many connections");
		close(c);
	}
	intervals = (size_t)((now_ms() - start) / (LOG_RATE_INTERVAL_NS / 1000000)) + 1;
	written = log_count("refused, too many connections", &repeats);
	CHECK(written >= LOG_RATE_BURST);
	CHECK(written <= intervals * LOG_RATE_BURST);
	log_flush_repeats();
	written = log_count("refused, too many connections", &repeats);
	CHECK_EQ_U(written + repeats, 300);
	CHECK(repeats >= 300 - intervals * LOG_RATE_BURST);
	close(a);
	close(b);
	h_stop(&h);
}

static void test_two_clients(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	int a, b;

	CHECK_EQ_I(h_start(&h, &o), 0);
	a = cl_connect();
	b = cl_connect();
	CHECK(a >= 0 && b >= 0);
	/* Interleaved: each waits on the server while the other is being answered. */
	CHECK_EQ_I(cl_send_hello(a, PROFD_PROTOCOL_VERSION), 0);
	CHECK(cl_hello(b));
	CHECK_EQ_I(cl_status(b), 2);
	{
		Profd__Response *r = cl_recv(a);

		CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_HELLO);
		profd__response__free_unpacked(r, NULL);
	}
	CHECK_EQ_I(cl_send_status(a), 0);
	CHECK_EQ_I(cl_send_status(b), 0);
	for (int i = 0; i < 2; i++) {
		Profd__Response *r = cl_recv(i ? a : b);

		CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_STATUS &&
		      r->status->pid == FAKE_PID);
		profd__response__free_unpacked(r, NULL);
	}
	CHECK_EQ_I(calls_status, 3);
	close(a);
	close(b);
	h_stop(&h);
}

/* Connection ids and the close notification, whoever ends the connection. */
static void test_on_close(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	uint64_t id1, id2, id3;
	int a, b, c, busy;

	o.on_close = fake_close;
	o.max_clients = 3;
	o.max_clients_per_uid = 3;
	closes = 0;
	memset((void *)closed_conn, 0, sizeof(closed_conn));
	CHECK_EQ_I(h_start(&h, &o), 0);

	a = cl_connect();
	CHECK(cl_hello(a));
	CHECK(cl_status(a) > 0);
	id1 = seen_conn;
	b = cl_connect();
	CHECK(cl_hello(b));
	CHECK(cl_status(b) > 0);
	id2 = seen_conn;
	CHECK(id1 != 0 && id2 != 0 && id1 != id2);
	CHECK_EQ_I(seen_pid, getpid());
	/* Requests on one connection keep its id. */
	CHECK(cl_status(a) > 0);
	CHECK_EQ_U(seen_conn, id1);
	CHECK_EQ_I(closes, 0);

	/* The peer hangs up. */
	close(a);
	for (int i = 0; i < 100 && closes < 1; i++)
		sleep_ms(10);
	CHECK_EQ_I(closes, 1);
	CHECK_EQ_U(closed_conn[0], id1);
	CHECK_EQ_I(closed_pid, getpid());

	/* The handler fails: the server closes it. */
	CHECK_EQ_I(cl_send_dump(b, true), 0);
	CHECK(cl_closed(b));
	close(b);
	for (int i = 0; i < 100 && closes < 2; i++)
		sleep_ms(10);
	CHECK_EQ_I(closes, 2);
	CHECK_EQ_U(closed_conn[1], id2);

	/* Refused connections were never admitted: nothing to tell. */
	c = cl_connect();
	CHECK(cl_hello(c));
	CHECK(cl_status(c) > 0);
	id3 = seen_conn;
	CHECK(id3 != id1 && id3 != id2);
	a = cl_connect();
	b = cl_connect();
	CHECK(cl_hello(a) && cl_hello(b));
	busy = cl_connect();
	CHECK(cl_hello(busy));
	CHECK_EQ_I(cl_send_status(busy), 0);
	check_error(cl_recv(busy), PROFD__ERROR_CODE__ERROR_BUSY, "too many connections");
	CHECK(cl_closed(busy));
	close(busy);
	sleep_ms(50);
	CHECK_EQ_I(closes, 2);

	/* Shutdown closes the rest: each told once. */
	h_stop(&h);
	CHECK_EQ_I(closes, 5);
	CHECK(closed_conn[2] == id3 || closed_conn[3] == id3 || closed_conn[4] == id3);
	CHECK(closed_conn[2] != closed_conn[3] && closed_conn[3] != closed_conn[4] &&
	      closed_conn[2] != closed_conn[4]);
	close(a);
	close(b);
	close(c);
}

/* Uplinks (CUPTI libraries) leave the client count and have a limit of their own. */
static void test_uplinks(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	int a, b, c, d;

	o.max_clients = 2;
	o.max_uplinks = 1;
	CHECK_EQ_I(h_start(&h, &o), 0);
	a = cl_connect();
	b = cl_connect();
	CHECK(cl_hello(a) && cl_hello(b));
	CHECK_EQ_I(cl_status(b), 2);
	/* a becomes an uplink: one client left, so c gets in. */
	CHECK_EQ_I(cl_gpu_attach(a), 1);
	CHECK_EQ_I(uplink_result, 0);
	c = cl_connect();
	CHECK(cl_hello(c));
	CHECK_EQ_I(cl_status(c), 2);
	/* Marking again is harmless (b and c are the clients now). */
	CHECK_EQ_I(cl_gpu_attach(a), 2);
	CHECK_EQ_I(uplink_result, 0);
	/* A second uplink is over max_uplinks: it stays a client. */
	CHECK_EQ_I(cl_gpu_attach(b), 2);
	CHECK_EQ_I(uplink_result, -EBUSY);
	/* The uplink goes: the uplink slot frees, the client count does not move. */
	close(a);
	sleep_ms(100);
	CHECK_EQ_I(cl_status(c), 2);
	CHECK_EQ_I(cl_gpu_attach(b), 1);
	CHECK_EQ_I(uplink_result, 0);
	d = cl_connect();
	CHECK(cl_hello(d));
	CHECK_EQ_I(cl_status(d), 2);
	close(b);
	close(c);
	close(d);
	h_stop(&h);
}

/*
 * A client in a child process, forked before the server's thread exists: once told to go
 * (a byte on go), it connects as uid (when we are root), says Hello and GpuAttach, reports
 * (a byte on done) and keeps the connection until go closes.
 */
struct child {
	pid_t pid;
	int go, done;
};

static void child_start(struct child *ch, uid_t uid)
{
	int go[2], done[2];
	char c;
	int fd;

	CHECK_EQ_I(pipe(go), 0);
	CHECK_EQ_I(pipe(done), 0);
	ch->pid = fork();
	if (ch->pid == 0) {
		close(go[1]);
		close(done[0]);
		if (geteuid() == 0 && setuid(uid) < 0)
			_exit(2);
		if (read(go[0], &c, 1) != 1)
			_exit(3);
		fd = cl_connect();
		if (fd < 0 || !cl_hello(fd) || cl_send_gpu_attach(fd))
			_exit(4);
		profd__response__free_unpacked(cl_recv(fd), NULL);
		c = 'x';
		if (write(done[1], &c, 1) != 1)
			_exit(5);
		while (read(go[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(go[0]);
	close(done[1]);
	ch->go = go[1];
	ch->done = done[0];
}

/* Let the child attach; returns once it has its reply. */
static void child_attach(struct child *ch)
{
	char c = 'g';

	CHECK_EQ_I(write(ch->go, &c, 1), 1);
	CHECK_EQ_I(read(ch->done, &c, 1), 1);
}

static void child_end(struct child *ch)
{
	int status = -1;

	close(ch->go);
	close(ch->done);
	waitpid(ch->pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * Uplinks of one user are limited (root's only by the global limit), an uplink sends GPU data
 * and nothing else, and the handler can close a connection (a process's older uplink).
 */
static void test_uplink_rules(void)
{
	struct server_opts o = base_opts();
	struct child c1, c2;
	struct harness h;
	int a, b, d;
	uint64_t a_id;

	/* Another user's connections: from children that drop to nobody when we are root. */
	CHECK_EQ_I(chmod(tmpdir, 0711), 0);
	child_start(&c1, 65534);
	child_start(&c2, 65534);
	o.socket_mode = 0666;
	o.max_uplinks = 8;
	o.max_uplinks_per_uid = 1;
	o.on_close = fake_close;
	closes = 0;
	memset((void *)closed_conn, 0, sizeof(closed_conn));
	CHECK_EQ_I(h_start(&h, &o), 0);
	child_attach(&c1);
	CHECK_EQ_I(uplink_result, 0);
	child_attach(&c2);
	CHECK_EQ_I(uplink_result, -EBUSY);
	CHECK(log_has("refused as an uplink, uid 65534 already has 1"));

	a = cl_connect();
	b = cl_connect();
	CHECK(cl_hello(a) && cl_hello(b));
	/* Clients left: b and the refused child's connection. */
	CHECK_EQ_I(cl_gpu_attach(a), 2);
	CHECK_EQ_I(uplink_result, 0);
	a_id = seen_conn;
	/* Root has no per-user limit (a non-root test run has one uplink already: refused). */
	CHECK(cl_gpu_attach(b) >= 0);
	CHECK_EQ_I(uplink_result, geteuid() == 0 ? 0 : -EBUSY);
	/* An uplink asks for a status: refused, and the handler never sees it. */
	calls_status = 0;
	CHECK_EQ_I(cl_send_status(a), 0);
	check_error(cl_recv(a), PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
		    "this connection only sends GPU data");
	CHECK_EQ_I(calls_status, 0);

	/* The handler closes a: it is told at once, a sees the end. */
	d = cl_connect();
	CHECK(cl_hello(d));
	close_target = a_id;
	CHECK_EQ_I(cl_send_gpu_batch(d), 0);
	profd__response__free_unpacked(cl_recv(d), NULL);
	CHECK_EQ_I(close_result, 0);
	CHECK_EQ_I(closes, 1);
	CHECK_EQ_U(closed_conn[0], a_id);
	CHECK(cl_closed(a));
	/* No such connection any more. */
	CHECK_EQ_I(cl_send_gpu_batch(d), 0);
	profd__response__free_unpacked(cl_recv(d), NULL);
	CHECK_EQ_I(close_result, -ENOENT);
	close(a);
	close(b);
	close(d);
	/* The second child holds a copy of the first one's pipe: it goes first. */
	child_end(&c2);
	child_end(&c1);
	h_stop(&h);
	chmod(tmpdir, 0700);
}

/*
 * A CUDA library of a user whose client slots are all taken (idle profctl clients) still
 * becomes an uplink: past the limits a connection is on probation, and GpuAttach makes it one.
 */
static void test_probation_uplink(void)
{
	struct server_opts o = base_opts();
	struct harness h;
	int a, b, lib, other;

	o.max_clients = 2;
	CHECK_EQ_I(h_start(&h, &o), 0);
	a = cl_connect();
	b = cl_connect();
	CHECK(cl_hello(a) && cl_hello(b));
	lib = cl_connect();
	CHECK(cl_hello(lib));
	uplink_result = 1;
	CHECK_EQ_I(cl_gpu_attach(lib), 2);
	CHECK_EQ_I(uplink_result, 0);
	/* An uplink now: it stays and sends its data. */
	close_target = 0;
	CHECK_EQ_I(cl_send_gpu_batch(lib), 0);
	profd__response__free_unpacked(cl_recv(lib), NULL);
	CHECK(!cl_closed_now(lib));
	/* The client slots are still full for anything else. */
	other = cl_connect();
	CHECK(cl_hello(other));
	CHECK_EQ_I(cl_send_status(other), 0);
	check_error(cl_recv(other), PROFD__ERROR_CODE__ERROR_BUSY, "too many connections");
	close(other);
	close(a);
	close(b);
	close(lib);
	h_stop(&h);
}

/*
 * A user's idle connections, her whole client share and then her whole share of probation, do
 * not keep her own CUDA library out: its connection takes the place of her longest waiting one
 * on probation and becomes an uplink; her idle clients stay.
 */
static void test_probation_own_user(void)
{
	enum { PER_UID = 2, NIDLE = PER_UID + 4 /* MAX_PROBATION_PER_UID */ };
	struct server_opts o = base_opts();
	struct harness h;
	int go[2], status = -1;
	pid_t pid;
	char c;

	if (geteuid() != 0) {
		skipped = "the per-user probation needs root, to connect as another user";
		return;
	}
	CHECK_EQ_I(chmod(tmpdir, 0711), 0);
	CHECK_EQ_I(pipe(go), 0);
	pid = fork();
	if (pid == 0) {
		int fd[NIDLE], lib;
		Profd__Response *r;
		bool gave_way;

		close(go[1]);
		if (setuid(65534) < 0 || read(go[0], &c, 1) != 1)
			_exit(2);
		for (int i = 0; i < NIDLE; i++) {
			fd[i] = cl_connect();
			if (fd[i] < 0 || !cl_hello(fd[i]))
				_exit(3);
		}
		lib = cl_connect();
		if (lib < 0 || !cl_hello(lib))
			_exit(4); /* refused: the bug */
		if (cl_gpu_attach(lib) < 0)
			_exit(5);
		sleep_ms(100);
		/* The first on probation gave way (told busy, then closed); the others stay. */
		r = cl_recv(fd[PER_UID]);
		gave_way = r && r->msg_case == PROFD__RESPONSE__MSG_ERROR &&
			   r->error->code == PROFD__ERROR_CODE__ERROR_BUSY &&
			   cl_closed(fd[PER_UID]);
		profd__response__free_unpacked(r, NULL);
		if (!gave_way)
			_exit(6);
		for (int i = 0; i < NIDLE; i++)
			if (i != PER_UID && cl_closed_now(fd[i]))
				_exit(7);
		if (cl_closed_now(lib))
			_exit(8);
		_exit(0);
	}
	close(go[0]);
	o.socket_mode = 0666;
	o.max_clients_per_uid = PER_UID;
	uplink_result = 1;
	CHECK_EQ_I(h_start(&h, &o), 0);
	c = 'g';
	CHECK_EQ_I(write(go[1], &c, 1), 1);
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fprintf(stderr, "the user's connections: exit status %d\n",
			WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ_I(uplink_result, 0);
	close(go[1]);
	h_stop(&h);
	chmod(tmpdir, 0700);
}

/*
 * Probation full for everyone (root's idle connections here): a new connection is refused while
 * those had less than the grace to attach, and takes the longest waiting one's place after.
 */
static void test_probation_full(void)
{
	enum { NPROB = 32 /* MAX_PROBATION */ };
	struct server_opts o = base_opts();
	struct harness h;
	int a, fd[NPROB], lib;

	o.max_clients = 1;
	CHECK_EQ_I(h_start(&h, &o), 0);
	a = cl_connect();
	CHECK(cl_hello(a));
	for (int i = 0; i < NPROB; i++) {
		fd[i] = cl_connect();
		CHECK(cl_hello(fd[i]));
	}
	lib = cl_connect();
	CHECK(!cl_hello(lib));
	close(lib);
	sleep_ms(1100);
	lib = cl_connect();
	CHECK(cl_hello(lib));
	uplink_result = 1;
	CHECK(cl_gpu_attach(lib) >= 0);
	CHECK_EQ_I(uplink_result, 0);
	check_error(cl_recv(fd[0]), PROFD__ERROR_CODE__ERROR_BUSY, "too many connections");
	CHECK(cl_closed(fd[0]));
	for (int i = 1; i < NPROB; i++)
		CHECK(!cl_closed_now(fd[i]));
	CHECK(!cl_closed_now(a));
	close(lib);
	for (int i = 0; i < NPROB; i++)
		close(fd[i]);
	close(a);
	h_stop(&h);
}

/*
 * Another user pipelines many slow requests in one write: they are answered one per loop turn
 * within a time budget, and root's status is answered promptly all along.
 */
/*
 * Requests read but not handled yet cost memory outside every other bound: one user's
 * connections, each holding most of a 1 MiB request, may hold 32 MiB together; the connection
 * that would take them past it is closed, and the others are not.
 */
static void test_buffered_per_uid(void)
{
	enum { NCONN = 44, PART = 900 << 10 };
	struct server_opts o = base_opts();
	struct harness h;
	int go[2], done[2], status = -1;
	pid_t pid;
	char c;

	if (geteuid() != 0) {
		skipped = "the buffered-bytes bound needs root, to connect as another user";
		return;
	}
	CHECK_EQ_I(chmod(tmpdir, 0711), 0);
	CHECK_EQ_I(pipe(go), 0);
	CHECK_EQ_I(pipe(done), 0);
	pid = fork();
	if (pid == 0) {
		struct pollfd pf[NCONN];
		uint8_t *part = calloc(1, PART);
		int closed = 0;

		close(go[1]);
		close(done[0]);
		if (!part || setuid(65534) < 0 || read(go[0], &c, 1) != 1)
			_exit(100);
		frame_put_header(part, FRAME_MAX_REQUEST);
		for (int i = 0; i < NCONN; i++) {
			pf[i] = (struct pollfd){.fd = cl_connect(), .events = POLLIN};
			if (pf[i].fd < 0 || !cl_hello(pf[i].fd))
				_exit(101);
			/* Most of a request, never the rest: the daemon holds it. */
			if (cl_write(pf[i].fd, part, PART))
				pf[i].revents = POLLHUP;
		}
		sleep_ms(500);
		for (int i = 0; i < NCONN; i++) {
			struct pollfd one = pf[i];

			closed += pf[i].revents || poll(&one, 1, 0) > 0;
		}
		c = (char)closed;
		if (write(done[1], &c, 1) != 1)
			_exit(102);
		_exit(0);
	}
	close(go[0]);
	close(done[1]);
	o.socket_mode = 0666;
	o.max_clients = 128;
	o.max_clients_per_uid = 64;
	CHECK_EQ_I(h_start(&h, &o), 0);
	c = 'g';
	CHECK_EQ_I(write(go[1], &c, 1), 1);
	CHECK_EQ_I(read(done[0], &c, 1), 1);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fprintf(stderr, "buffered per uid: %d of %d connections closed\n", c, NCONN);
	/* 1 MiB of buffer each (900 KiB rounds up): 32 fit, the rest go. */
	CHECK(c >= NCONN - 32 && c <= NCONN - 24);
	CHECK(log_has("hold over 32 MiB of requests not yet handled"));
	close(go[1]);
	close(done[0]);
	h_stop(&h);
	chmod(tmpdir, 0700);
}

static void test_pipelined_flood(void)
{
	enum { NREQ = 60, WORK_MS = 10 };
	struct server_opts o = base_opts();
	struct harness h;
	uint64_t t0, dt, worst = 0;
	int go[2], done[2], root, n = 0;
	pid_t pid;
	char c;

	if (geteuid() != 0) {
		skipped = "the pipelined flood needs root, to connect as another user";
		return;
	}
	CHECK_EQ_I(chmod(tmpdir, 0711), 0);
	CHECK_EQ_I(pipe(go), 0);
	CHECK_EQ_I(pipe(done), 0);
	pid = fork();
	if (pid == 0) {
		Profd__Request req = PROFD__REQUEST__INIT;
		Profd__DumpRequest dr = PROFD__DUMP_REQUEST__INIT;
		uint8_t *one, *all;
		size_t one_len;
		int fd, got = 0;

		close(go[1]);
		close(done[0]);
		if (setuid(65534) < 0 || read(go[0], &c, 1) != 1)
			_exit(2);
		fd = cl_connect();
		if (fd < 0 || !cl_hello(fd))
			_exit(3);
		req.msg_case = PROFD__REQUEST__MSG_DUMP;
		req.dump = &dr;
		if (wire_pack_request(&req, 64, &one, &one_len))
			_exit(4);
		all = malloc(NREQ * one_len);
		for (int i = 0; i < NREQ; i++)
			memcpy(all + i * one_len, one, one_len);
		if (cl_write(fd, all, NREQ * one_len))
			_exit(5);
		c = 's';
		if (write(done[1], &c, 1) != 1)
			_exit(6);
		for (int i = 0; i < NREQ; i++) {
			Profd__Response *r = cl_recv(fd);

			got += r != NULL;
			profd__response__free_unpacked(r, NULL);
		}
		_exit(got == NREQ ? 0 : 7);
	}
	close(go[0]);
	close(done[1]);
	o.socket_mode = 0666;
	dump_work_ms = WORK_MS;
	calls_dump = 0;
	CHECK_EQ_I(h_start(&h, &o), 0);
	root = cl_connect();
	CHECK(cl_hello(root));
	c = 'g';
	CHECK_EQ_I(write(go[1], &c, 1), 1);
	CHECK_EQ_I(read(done[0], &c, 1), 1);
	/* NREQ x 10 ms of another user's work queued: root asks all along. */
	while (calls_dump < NREQ && n < 200) {
		t0 = now_ms();
		CHECK(cl_status(root) > 0);
		dt = now_ms() - t0;
		worst = dt > worst ? dt : worst;
		n++;
		sleep_ms(5);
	}
	{
		int status = -1;

		waitpid(pid, &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	CHECK_EQ_I(calls_dump, NREQ);
	CHECK(n >= 5);
	/* Back to back, root would wait for all of them (600 ms); now a turn's budget at most. */
	CHECK(worst < 100);
	fprintf(stderr, "pipelined flood: root asked %d times, slowest answer %llu ms\n", n,
		(unsigned long long)worst);
	dump_work_ms = 0;
	close(root);
	close(go[1]);
	close(done[0]);
	h_stop(&h);
	chmod(tmpdir, 0700);
}

static void test_socket_file(void)
{
	struct server_opts o = base_opts();
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct harness h;
	uv_loop_t loop2;
	struct stat st;
	char deep[256];
	int fd;

	/* A socket left by a dead daemon: nobody listens, so it is replaced. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	strcpy(addr.sun_path, sock_path);
	CHECK_EQ_I(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	close(fd);
	CHECK(stat(sock_path, &st) == 0 && S_ISSOCK(st.st_mode));
	CHECK_EQ_I(h_start(&h, &o), 0);
	CHECK(log_has("removing a stale socket"));
	fd = cl_connect();
	CHECK(cl_hello(fd));

	/* A live daemon keeps its socket. */
	uv_loop_init(&loop2);
	errno = 0;
	CHECK(server__new(&loop2, &o) == NULL);
	CHECK_EQ_I(errno, EADDRINUSE);
	CHECK_EQ_I(uv_loop_close(&loop2), 0);
	CHECK(stat(sock_path, &st) == 0 && S_ISSOCK(st.st_mode));
	CHECK_EQ_I(wait_clients(fd, 1), 1); /* the probe connection goes away */
	close(fd);
	h_stop(&h);

	/* Anything but a socket is not ours to remove. */
	fd = open(sock_path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	close(fd);
	CHECK_EQ_I(h_start(&h, &o), -EEXIST);
	CHECK(stat(sock_path, &st) == 0 && S_ISREG(st.st_mode));
	unlink(sock_path);

	/* Only the last directory is created. */
	snprintf(deep, sizeof(deep), "%s/a/b/profd.sock", tmpdir);
	o.path = deep;
	CHECK_EQ_I(h_start(&h, &o), -ENOENT);
	snprintf(deep, sizeof(deep), "%s/a", tmpdir);
	CHECK(stat(deep, &st) < 0 && errno == ENOENT);
	CHECK(log_has("only its last component is created"));
}

int main(void)
{
	/* The daemon's job too: a client gone mid-reply is an EPIPE, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	log_set_sink(log_capture, NULL);
	log_set_level(LOG_LVL_DEBUG);

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/profd-test-server.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(sock_dir, sizeof(sock_dir), "%s/run", tmpdir);
	snprintf(sock_path, sizeof(sock_path), "%s/profd.sock", sock_dir);

	test_hello_status();
	test_version_mismatch();
	test_before_hello();
	test_garbage();
	test_too_large();
	test_idle_timeout();
	test_unknown_request();
	test_handler_error();
	test_disconnect_mid_reply();
	test_slow_reader();
	test_write_timeout();
	test_max_clients();
	test_refusal_flood();
	test_two_clients();
	test_on_close();
	test_uplinks();
	test_uplink_rules();
	test_probation_uplink();
	test_probation_own_user();
	test_probation_full();
	test_pipelined_flood();
	test_buffered_per_uid();
	test_socket_file();

	unlink(sock_path);
	rmdir(sock_dir);
	rmdir(tmpdir);
	if (skipped)
		return CHECK_SKIP(skipped);
	return CHECK_DONE();
}
