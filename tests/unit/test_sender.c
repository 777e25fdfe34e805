// SPDX-License-Identifier: BSD-2-Clause
/*
 * The export sender against a scripted HTTP/1.1 server on 127.0.0.1 (a real socket, a thread of
 * this process): delivery and the spool, Retry-After in both forms, backoff, connections reset
 * mid-request, 413 splits, 400 quarantine, 401, the spool's cap and expiry, restarts resuming
 * the spool, a hung request at sender__free, and a full disk (a tiny tmpfs in a mount namespace
 * of this process). Every request body the server reads is compared with what was submitted.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "log.h"
#include "sender.h"
#include "spool.h"
#include "timeutil.h"

/* --- the scripted server ------------------------------------------------------------------- */

enum action {
	A_REPLY = 0,
	A_RESET, /* read reset_after bytes of the body, then close with a reset */
	A_HANG,	 /* read the request, never answer */
	A_HUGE,	 /* answer status with a body of 10 GB, written until the client hangs up */
};

struct reply {
	int status;
	enum action action;
	const char *headers;	/* extra header lines, each ending "\r\n" */
	const char *body;	/* NULL: none */
	int retry_after_date_s; /* > 0: "Retry-After: <HTTP-date this many seconds ahead>" */
	size_t reset_after;
};

struct got {
	uint8_t *body;
	size_t len;
	char *head; /* request line and headers, NUL-terminated */
	uint64_t at_ns;
};

#define MAX_SCRIPT 16
#define MAX_GOT 64

struct server {
	int lfd, port, stop_fd[2];
	pthread_t thread;
	pthread_mutex_t lock;
	struct reply script[MAX_SCRIPT];
	size_t nscript, next;
	struct reply dflt; /* after the script */
	struct got got[MAX_GOT];
	size_t ngot, nconn, attempts;
	uint64_t huge_written; /* bytes of A_HUGE bodies the client took before hanging up */
	uint64_t huge_ns;      /* how long the last A_HUGE answer lasted */
	size_t huge_answers;   /* A_HUGE answers finished */
};

struct rbuf {
	uint8_t *data;
	size_t len, cap;
};

/* Read more of connection c into b. Returns > 0, or <= 0 on EOF, error or stop. */
static ssize_t conn_read(struct server *sv, int c, struct rbuf *b)
{
	struct pollfd p[2] = {{.fd = c, .events = POLLIN},
			      {.fd = sv->stop_fd[0], .events = POLLIN}};
	ssize_t r;

	if (poll(p, 2, 20000) <= 0 || p[1].revents)
		return -1;
	if (b->cap - b->len < 65536) {
		b->cap = b->cap * 2 + 65536;
		b->data = realloc(b->data, b->cap + 1);
		if (!b->data)
			abort();
	}
	r = read(c, b->data + b->len, b->cap - b->len);
	if (r > 0)
		b->len += (size_t)r;
	return r;
}

static void send_str(int c, const char *s)
{
	size_t len = strlen(s);

	while (len) {
		ssize_t w = send(c, s, len, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		s += w;
		len -= (size_t)w;
	}
}

static void answer(int c, const struct reply *r)
{
	char buf[2048], date[64] = "";
	const char *body = r->body ? r->body : "";

	if (r->retry_after_date_s > 0) {
		time_t t = time(NULL) + r->retry_after_date_s;
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(date, sizeof(date), "Retry-After: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
	}
	snprintf(buf, sizeof(buf), "HTTP/1.1 %d Scripted\r\nContent-Length: %zu\r\n%s%s\r\n%s",
		 r->status, strlen(body), r->headers ? r->headers : "", date, body);
	send_str(c, buf);
}

/* A reply claiming 10 GB, its body written as fast as the client takes it. */
static void answer_huge(struct server *sv, int c, int status)
{
	static char chunk[65536];
	uint64_t t0 = mono_ns(), n = 0;
	char head[256];

	memset(chunk, 'x', sizeof(chunk));
	snprintf(head, sizeof(head), "HTTP/1.1 %d Scripted\r\nContent-Length: 10000000000\r\n\r\n",
		 status);
	send_str(c, head);
	/* 20 s at most: the sender's timeout is 5 s */
	while (n < 10000000000ull && mono_ns() - t0 < 20 * NSEC_PER_SEC) {
		ssize_t w = send(c, chunk, sizeof(chunk), MSG_NOSIGNAL);

		if (w <= 0)
			break;
		n += (uint64_t)w;
	}
	pthread_mutex_lock(&sv->lock);
	sv->huge_written += n;
	sv->huge_ns = mono_ns() - t0;
	sv->huge_answers++;
	pthread_mutex_unlock(&sv->lock);
}

/* Serve the requests of one connection until it closes. */
static void serve(struct server *sv, int c)
{
	struct rbuf b = {0};

	for (;;) {
		uint8_t *end;
		char *head, *cl;
		size_t hlen, clen = 0, need;
		struct reply r;

		while (!(b.data && (end = memmem(b.data, b.len, "\r\n\r\n", 4))))
			if (conn_read(sv, c, &b) <= 0)
				goto out;
		hlen = (size_t)(end - b.data) + 4;
		head = strndup((char *)b.data, hlen);
		cl = strcasestr(head, "\r\nContent-Length:");
		if (cl)
			clen = strtoul(cl + 17, NULL, 10);
		pthread_mutex_lock(&sv->lock);
		r = sv->next < sv->nscript ? sv->script[sv->next++] : sv->dflt;
		sv->attempts++;
		pthread_mutex_unlock(&sv->lock);
		need = hlen + (r.action == A_RESET && r.reset_after < clen ? r.reset_after : clen);
		while (b.len < need)
			if (conn_read(sv, c, &b) <= 0) {
				free(head);
				goto out;
			}
		if (r.action == A_RESET) {
			struct linger lg = {.l_onoff = 1, .l_linger = 0};

			setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			free(head);
			goto out;
		}
		pthread_mutex_lock(&sv->lock);
		if (sv->ngot < MAX_GOT) {
			struct got *g = &sv->got[sv->ngot++];

			g->body = malloc(clen ? clen : 1);
			memcpy(g->body, b.data + hlen, clen);
			g->len = clen;
			g->head = head;
			g->at_ns = mono_ns();
			head = NULL;
		}
		pthread_mutex_unlock(&sv->lock);
		free(head);
		if (r.action == A_HANG) {
			struct pollfd p[2] = {{.fd = c, .events = POLLIN},
					      {.fd = sv->stop_fd[0], .events = POLLIN}};

			poll(p, 2, 20000);
			goto out;
		}
		if (r.action == A_HUGE) {
			answer_huge(sv, c, r.status);
			goto out;
		}
		answer(c, &r);
		memmove(b.data, b.data + need, b.len - need);
		b.len -= need;
	}
out:
	free(b.data);
}

static void *server_main(void *arg)
{
	struct server *sv = arg;

	for (;;) {
		struct pollfd p[2] = {{.fd = sv->lfd, .events = POLLIN},
				      {.fd = sv->stop_fd[0], .events = POLLIN}};
		int c;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		c = accept4(sv->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		pthread_mutex_lock(&sv->lock);
		sv->nconn++;
		pthread_mutex_unlock(&sv->lock);
		serve(sv, c);
		close(c);
	}
	return NULL;
}

static void server_start(struct server *sv, int status)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);

	memset(sv, 0, sizeof(*sv));
	sv->dflt.status = status;
	pthread_mutex_init(&sv->lock, NULL);
	sv->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sv->lfd < 0 || bind(sv->lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(sv->lfd, 8) || getsockname(sv->lfd, (struct sockaddr *)&sa, &sl) ||
	    pipe2(sv->stop_fd, O_CLOEXEC)) {
		perror("test server");
		exit(1);
	}
	sv->port = ntohs(sa.sin_port);
	pthread_create(&sv->thread, NULL, server_main, sv);
}

static void server_script(struct server *sv, const struct reply *r)
{
	pthread_mutex_lock(&sv->lock);
	sv->script[sv->nscript++] = *r;
	pthread_mutex_unlock(&sv->lock);
}

static void server_set_default(struct server *sv, int status)
{
	pthread_mutex_lock(&sv->lock);
	sv->dflt.status = status;
	pthread_mutex_unlock(&sv->lock);
}

static size_t server_ngot(struct server *sv)
{
	size_t n;

	pthread_mutex_lock(&sv->lock);
	n = sv->ngot;
	pthread_mutex_unlock(&sv->lock);
	return n;
}

static void server_stop(struct server *sv)
{
	if (write(sv->stop_fd[1], "x", 1) != 1)
		abort();
	pthread_join(sv->thread, NULL);
	close(sv->lfd);
	close(sv->stop_fd[0]);
	close(sv->stop_fd[1]);
	for (size_t i = 0; i < sv->ngot; i++) {
		free(sv->got[i].body);
		free(sv->got[i].head);
	}
	pthread_mutex_destroy(&sv->lock);
}

/* A port where nothing listens: connections are refused. */
static int dead_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

/* --- helpers ------------------------------------------------------------------------------- */

static char root[64];
static char token_file[128];

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static char *path(const char *fmt, ...)
{
	static char bufs[4][512];
	static int next;
	char *b = bufs[next++ % 4];
	int n = snprintf(b, 512, "%s/", root);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b + n, 512 - (size_t)n, fmt, ap);
	va_end(ap);
	return b;
}

/* Regular files in dir, and the name of the first in *first. */
static int count_files(const char *dir, char *first, size_t size)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_type == DT_REG) {
			if (!n && first)
				snprintf(first, size, "%s", de->d_name);
			n++;
		}
	closedir(d);
	return n;
}

static uint8_t *read_whole(const char *p, size_t *len)
{
	FILE *f = fopen(p, "rb");
	uint8_t *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	*len = fread(buf, 1, (size_t)n, f);
	buf[*len] = 0;
	fclose(f);
	return buf;
}

/* The bodies submitted, to compare with what the server read. */
struct body {
	uint8_t *data;
	size_t len;
};

static struct body make_body(size_t len, unsigned seed)
{
	struct body b = {malloc(len), len};

	for (size_t i = 0; i < len; i++)
		b.data[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
	return b;
}

/* Submit a copy of b. */
static int submit(struct sender *s, struct body b, uint64_t created_ns)
{
	uint8_t *copy = malloc(b.len);

	memcpy(copy, b.data, b.len);
	/* as many samples as count_100 finds in it */
	return sender__submit(s, copy, b.len, created_ns, b.len / 100);
}

static bool got_is(struct server *sv, size_t i, const uint8_t *data, size_t len)
{
	bool ok;

	pthread_mutex_lock(&sv->lock);
	ok = i < sv->ngot && sv->got[i].len == len && !memcmp(sv->got[i].body, data, len);
	pthread_mutex_unlock(&sv->lock);
	if (!ok)
		fprintf(stderr, "request %zu: not the %zu bytes expected (%zu bytes)\n", i, len,
			i < sv->ngot ? sv->got[i].len : 0);
	return ok;
}

static size_t server_huge_answers(struct server *sv)
{
	size_t n;

	pthread_mutex_lock(&sv->lock);
	n = sv->huge_answers;
	pthread_mutex_unlock(&sv->lock);
	return n;
}

static double gap_s(struct server *sv, size_t i, size_t j)
{
	return (double)(sv->got[j].at_ns - sv->got[i].at_ns) / NSEC_PER_SEC;
}

#define STAT(s, field)                                                                             \
	({                                                                                         \
		struct sender_stats st_;                                                           \
		sender__stats((s), &st_);                                                          \
		st_.field;                                                                         \
	})

/* The last error line (valid until the next call). */
static const char *last_err(struct sender *s)
{
	static struct sender_stats st;

	sender__stats(s, &st);
	return st.last_error;
}

/* Wait until cond holds, at most timeout_s seconds. */
#define WAIT_FOR(cond, timeout_s)                                                                  \
	({                                                                                         \
		uint64_t until_ = mono_ns() + (uint64_t)((timeout_s)*1e9);                         \
		bool ok_;                                                                          \
		while (!(ok_ = (cond)) && mono_ns() < until_)                                      \
			usleep(5000);                                                              \
		if (!ok_)                                                                          \
			fprintf(stderr, "%s:%d: timed out waiting for %s\n", __FILE__, __LINE__,   \
				#cond);                                                            \
		ok_;                                                                               \
	})

/* The test's split: halves of the bytes; one byte cannot be split. */
static int split_half(const uint8_t *body, size_t len, uint8_t **a, size_t *alen, uint8_t **b,
		      size_t *blen)
{
	if (len < 2)
		return -EINVAL;
	*alen = len / 2;
	*blen = len - *alen;
	*a = malloc(*alen);
	*b = malloc(*blen);
	memcpy(*a, body, *alen);
	memcpy(*b, body + *alen, *blen);
	return 0;
}

/* One "sample" per 100 bytes. */
static uint64_t count_100(const uint8_t *body, size_t len)
{
	return len / 100;
}

static const char *const extra_headers[] = {"X-Scope-OrgID: tenant-1"};

static struct sender_opts opts_for(const char *dir, int port, char *url, size_t url_size)
{
	snprintf(url, url_size, "http://127.0.0.1:%d/push.v1.PusherService/Push", port);
	return (struct sender_opts){
	    .name = "pyroscope",
	    .url = url,
	    .content_type = "application/proto",
	    .content_encoding = "gzip",
	    .spool_dir = dir,
	    .timeout_ns = 5 * NSEC_PER_SEC,
	    .retry_max_ns = NSEC_PER_SEC,
	    .bearer_token_file = token_file,
	    .headers = extra_headers,
	    .nheaders = 1,
	    .split = split_half,
	    .count = count_100,
	};
}

static struct sender *start_sender(const char *dir, int port)
{
	char url[128];
	struct sender_opts o = opts_for(dir, port, url, sizeof(url));

	return sender__new(&o);
}

/* --- the cases ----------------------------------------------------------------------------- */

static void test_delivery(void)
{
	struct body b[3] = {make_body(1000, 1), make_body(50000, 2), make_body(3, 3)};
	uint64_t t = real_ns(), total = 0;
	const char *dir = path("delivery");
	struct server sv;
	struct sender *s;

	server_start(&sv, 200);
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	for (int i = 0; i < 3; i++) {
		CHECK_EQ_I(submit(s, b[i], t + (uint64_t)i), 0);
		total += b[i].len;
	}
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 3, 5));
	for (size_t i = 0; i < 3; i++)
		CHECK(got_is(&sv, i, b[i].data, b[i].len));
	CHECK_EQ_U(server_ngot(&sv), 3);
	CHECK(strstr(sv.got[0].head, "POST /push.v1.PusherService/Push HTTP/1.1\r\n") ==
	      sv.got[0].head);
	CHECK(strcasestr(sv.got[0].head, "\r\nContent-Type: application/proto\r\n"));
	CHECK(strcasestr(sv.got[0].head, "\r\nContent-Encoding: gzip\r\n"));
	CHECK(strcasestr(sv.got[0].head, "\r\nX-Scope-OrgID: tenant-1\r\n"));
	CHECK(strcasestr(sv.got[0].head, "\r\nAuthorization: Bearer sekrit-token\r\n"));
	CHECK_EQ_U(sv.nconn, 1); /* kept alive */
	CHECK_EQ_U(STAT(s, bytes_sent), total);
	CHECK_EQ_U(STAT(s, samples_sent), 10 + 500 + 0);
	CHECK_EQ_U(STAT(s, requests_retried), 0);
	CHECK_EQ_U(STAT(s, spool_requests), 0);
	CHECK_EQ_U(STAT(s, spool_bytes), 0);
	CHECK_EQ_U(STAT(s, oldest_ns), 0);
	CHECK(STAT(s, last_success_ns) >= t);
	CHECK_EQ_I(count_files(dir, NULL, 0), 0);
	sender__free(s);
	server_stop(&sv);
	for (int i = 0; i < 3; i++)
		free(b[i].data);
}

/* A first answer from the script, then 200: the gap between the two attempts in [lo, hi] s. */
static void retried_once(const char *name, const struct reply *first, uint64_t retry_max_ns,
			 double lo, double hi)
{
	struct body b = make_body(20000, 7);
	struct sender_opts o;
	struct server sv;
	struct sender *s;
	char url[128];

	server_start(&sv, 200);
	server_script(&sv, first);
	o = opts_for(path("%s", name), sv.port, url, sizeof(url));
	o.retry_max_ns = retry_max_ns;
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_I(submit(s, b, 0), 0);
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 1, hi + 3));
	CHECK_EQ_U(STAT(s, requests_retried), 1);
	CHECK(strstr(last_err(s), "HTTP") != NULL);
	if (CHECK_EQ_U(server_ngot(&sv), 2)) {
		double gap = gap_s(&sv, 0, 1);

		fprintf(stderr, "%s: retried after %.2f s\n", name, gap);
		CHECK(gap >= lo && gap <= hi);
		CHECK(got_is(&sv, 0, b.data, b.len));
		CHECK(got_is(&sv, 1, b.data, b.len));
	}
	CHECK_EQ_I(count_files(o.spool_dir, NULL, 0), 0);
	sender__free(s);
	server_stop(&sv);
	free(b.data);
}

static void test_retries(void)
{
	/* Retry-After in seconds, longer than the first backoff (about 1 s) */
	retried_once("503-seconds", &(struct reply){.status = 503, .headers = "Retry-After: 2\r\n"},
		     3 * NSEC_PER_SEC, 1.9, 2.7);
	/* Retry-After as an HTTP-date 3 s ahead (whole seconds: 2 to 3 s from now) */
	retried_once("503-date", &(struct reply){.status = 503, .retry_after_date_s = 3},
		     5 * NSEC_PER_SEC, 1.9, 3.6);
	/* no Retry-After: the first backoff step, 1 s +20% */
	retried_once("429-backoff", &(struct reply){.status = 429}, 5 * NSEC_PER_SEC, 0.95, 1.6);
	retried_once("502-backoff", &(struct reply){.status = 502, .body = "bad gateway"},
		     NSEC_PER_SEC, 0.95, 1.6);
}

static void test_reset(void)
{
	struct body b = make_body(256 << 10, 9);
	const char *dir = path("reset");
	struct server sv;
	struct sender *s;

	server_start(&sv, 200);
	server_script(&sv, &(struct reply){.action = A_RESET, .reset_after = 1000});
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_I(submit(s, b, 0), 0);
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 1, 5));
	CHECK_EQ_U(STAT(s, requests_retried), 1);
	CHECK_EQ_U(sv.attempts, 2);
	CHECK_EQ_U(server_ngot(&sv), 1);
	CHECK(got_is(&sv, 0, b.data, b.len));
	CHECK_EQ_I(count_files(dir, NULL, 0), 0);
	sender__free(s);
	server_stop(&sv);
	free(b.data);
}

static void test_split(void)
{
	struct body a = make_body(4001, 11), b = make_body(100, 12), c = make_body(1, 13);
	const char *dir = path("split");
	uint64_t t = real_ns();
	struct server sv;
	struct sender *s;

	server_start(&sv, 200);
	server_script(&sv, &(struct reply){.status = 413});
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_I(submit(s, a, t), 0);
	CHECK_EQ_I(submit(s, b, t + 1), 0);
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 3, 5));
	CHECK_EQ_U(STAT(s, requests_split), 1);
	/* the refused request, then its halves in order, then the next request */
	if (CHECK_EQ_U(server_ngot(&sv), 4)) {
		CHECK(got_is(&sv, 0, a.data, a.len));
		CHECK(got_is(&sv, 1, a.data, 2000));
		CHECK(got_is(&sv, 2, a.data + 2000, 2001));
		CHECK(got_is(&sv, 3, b.data, b.len));
	}
	CHECK_EQ_U(STAT(s, bytes_sent), a.len + b.len);
	/* one byte cannot be split: quarantined */
	server_script(&sv, &(struct reply){.status = 413, .body = "too large"});
	CHECK_EQ_I(submit(s, c, 0), 0);
	CHECK(WAIT_FOR(STAT(s, requests_quarantined) == 1, 5));
	CHECK_EQ_I(count_files(path("split/quarantine"), NULL, 0), 2);
	CHECK_EQ_I(count_files(dir, NULL, 0), 0);
	sender__free(s);
	server_stop(&sv);
	free(a.data);
	free(b.data);
	free(c.data);
}

static void test_quarantine(void)
{
	struct body e = make_body(3000, 21), f = make_body(500, 22);
	const char *dir = path("quarantine"), *qdir = path("quarantine/quarantine");
	uint64_t t = real_ns();
	char name[256], *p;
	uint8_t *data;
	struct server sv;
	struct sender *s;
	size_t len;

	server_start(&sv, 200);
	server_script(&sv, &(struct reply){.status = 400, .body = "bad profile: no service_name"});
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_I(submit(s, e, t), 0);
	CHECK_EQ_I(submit(s, f, t + 1), 0);
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 1 && STAT(s, requests_quarantined) == 1, 5));
	CHECK_EQ_U(STAT(s, requests_retried), 0);
	CHECK(strstr(last_err(s), "HTTP 400: bad profile") != NULL);
	CHECK(got_is(&sv, 0, e.data, e.len));
	CHECK(got_is(&sv, 1, f.data, f.len));
	CHECK_EQ_I(count_files(dir, NULL, 0), 0);
	CHECK_EQ_I(count_files(qdir, name, sizeof(name)), 2);
	p = strstr(name, ".reply");
	if (p)
		*p = '\0';
	data = read_whole(path("quarantine/quarantine/%s", name), &len);
	/* as it was spooled: its header, then the body */
	CHECK(data && len == SPOOL_HDR_LEN + e.len && !memcmp(data + SPOOL_HDR_LEN, e.data, e.len));
	free(data);
	data = read_whole(path("quarantine/quarantine/%s.reply", name), &len);
	CHECK(data && !strcmp((char *)data, "HTTP 400\n\nbad profile: no service_name"));
	free(data);
	sender__free(s);
	server_stop(&sv);
	free(e.data);
	free(f.data);
}

/* 401: the spool is kept across retries and a restart; a later sender delivers it. */
static void test_auth(void)
{
	struct body g = make_body(1234, 31);
	const char *dir = path("auth");
	struct server sv;
	struct sender *s;

	server_start(&sv, 401);
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_I(submit(s, g, 0), 0);
	CHECK(WAIT_FOR(STAT(s, requests_retried) >= 2, 5));
	CHECK(STAT(s, auth_failing));
	CHECK(strstr(last_err(s), "HTTP 401") != NULL);
	CHECK_EQ_U(STAT(s, requests_sent), 0);
	CHECK_EQ_U(STAT(s, spool_requests), 1);
	CHECK_EQ_I(count_files(dir, NULL, 0), 1);
	sender__free(s);
	server_set_default(&sv, 200);
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_U(STAT(s, spool_requests), 1);
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 1, 5));
	CHECK(!STAT(s, auth_failing));
	CHECK(got_is(&sv, server_ngot(&sv) - 1, g.data, g.len));
	CHECK_EQ_I(count_files(dir, NULL, 0), 0);
	sender__free(s);
	server_stop(&sv);
	free(g.data);
}

static void set_token(const char *text)
{
	FILE *f = fopen(token_file, "w");

	if (!CHECK(f != NULL))
		return;
	fputs(text, f);
	fclose(f);
}

/* Whether a request after the first `from` carried header line `line`. */
static bool got_header(struct server *sv, size_t from, const char *line)
{
	bool found = false;

	pthread_mutex_lock(&sv->lock);
	for (size_t i = from; i < sv->ngot && !found; i++)
		found = sv->got[i].head && strstr(sv->got[i].head, line);
	pthread_mutex_unlock(&sv->lock);
	return found;
}

/*
 * A token rotated on disk: after a 401 the sender reads the file again and tries the new token
 * at once, without waiting for a restart or a reload.
 */
static void test_auth_rotated(void)
{
	struct body g = make_body(700, 53);
	const char *dir = path("auth-rotated");
	struct server sv;
	struct sender *s;
	size_t before;

	server_start(&sv, 401);
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_I(submit(s, g, 0), 0);
	CHECK(WAIT_FOR(STAT(s, requests_retried) >= 1 && STAT(s, auth_failing), 5));
	CHECK(got_header(&sv, 0, "Authorization: Bearer sekrit-token\r\n"));
	before = server_ngot(&sv);
	set_token("rotated-token\n");
	/* The next attempt (after the backoff) gets 401 too, reads the file, retries at once. */
	CHECK(WAIT_FOR(got_header(&sv, before, "Authorization: Bearer rotated-token\r\n"), 5));
	server_set_default(&sv, 200);
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 1, 5));
	CHECK(!STAT(s, auth_failing));
	CHECK(got_is(&sv, server_ngot(&sv) - 1, g.data, g.len));
	sender__free(s);
	server_stop(&sv);
	set_token("sekrit-token\n");
	free(g.data);
}

/* A backend that refuses connections; a spool of 3000 bytes takes 5 requests of 1000. */
static void test_cap(void)
{
	struct body b[5];
	const char *dir = path("cap");
	uint64_t t = real_ns() - NSEC_PER_SEC;
	struct sender_opts o;
	struct server sv;
	struct sender *s;
	char url[128];

	o = opts_for(dir, dead_port(), url, sizeof(url));
	o.max_bytes = 3000;
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	for (unsigned i = 0; i < 5; i++) {
		b[i] = make_body(1000, 40 + i);
		CHECK_EQ_I(submit(s, b[i], t + i), 0);
	}
	CHECK(WAIT_FOR(STAT(s, requests_dropped) == 2 && STAT(s, spool_requests) == 3, 3));
	CHECK_EQ_U(STAT(s, spool_bytes), 3000);
	CHECK_EQ_U(STAT(s, oldest_ns), t + 2);
	CHECK(STAT(s, requests_retried) >= 1);
	CHECK(strstr(last_err(s), "retry in") != NULL);
	CHECK_EQ_I(count_files(dir, NULL, 0), 3);
	sender__free(s);
	/* the next run sends the newest three, in order */
	server_start(&sv, 200);
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 3, 5));
	if (CHECK_EQ_U(server_ngot(&sv), 3))
		for (unsigned i = 0; i < 3; i++)
			CHECK(got_is(&sv, i, b[i + 2].data, b[i + 2].len));
	CHECK_EQ_I(count_files(dir, NULL, 0), 0);
	sender__free(s);
	server_stop(&sv);
	for (int i = 0; i < 5; i++)
		free(b[i].data);
}

/* A request that never gets an answer: spooling goes on, sender__free takes ~1 s at most. */
static void test_hang(void)
{
	struct body h = make_body(7000, 51), i = make_body(8000, 52);
	const char *dir = path("hang");
	uint64_t t = real_ns(), t0;
	struct server sv;
	struct sender *s;
	double dt;

	server_start(&sv, 200);
	server_script(&sv, &(struct reply){.action = A_HANG});
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_I(submit(s, h, t), 0);
	CHECK(WAIT_FOR(server_ngot(&sv) == 1, 5));
	CHECK_EQ_I(submit(s, i, t + 1), 0);
	/* spooled while the first is in flight */
	CHECK(WAIT_FOR(count_files(dir, NULL, 0) == 2, 2));
	CHECK(WAIT_FOR(STAT(s, spool_requests) == 2, 2));
	t0 = mono_ns();
	sender__free(s);
	dt = (double)(mono_ns() - t0) / NSEC_PER_SEC;
	fprintf(stderr, "hang: sender__free took %.2f s\n", dt);
	CHECK(dt < 1.5);
	CHECK_EQ_I(count_files(dir, NULL, 0), 2);
	/* the next run: both, oldest first (the first again: at least once) */
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 2, 5));
	if (CHECK_EQ_U(server_ngot(&sv), 3)) {
		CHECK(got_is(&sv, 0, h.data, h.len));
		CHECK(got_is(&sv, 1, h.data, h.len));
		CHECK(got_is(&sv, 2, i.data, i.len));
	}
	sender__free(s);
	server_stop(&sv);
	free(h.data);
	free(i.data);
}

static void test_expiry(void)
{
	struct body j = make_body(900, 61), k = make_body(901, 62);
	struct sender_opts o;
	struct server sv;
	struct sender *s;
	char url[128];

	/* one submitted already too old, one fresh: only the fresh one goes */
	server_start(&sv, 200);
	o = opts_for(path("expiry"), sv.port, url, sizeof(url));
	o.max_age_ns = NSEC_PER_SEC;
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_I(submit(s, j, real_ns() - 5 * NSEC_PER_SEC), 0);
	CHECK_EQ_I(submit(s, k, 0), 0);
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 1 && STAT(s, requests_expired) == 1, 5));
	CHECK_EQ_U(server_ngot(&sv), 1);
	CHECK(got_is(&sv, 0, k.data, k.len));
	sender__free(s);
	server_stop(&sv);
	/* a backend that is down: the spooled request expires while waiting */
	o = opts_for(path("expiry-down"), dead_port(), url, sizeof(url));
	o.max_age_ns = NSEC_PER_SEC;
	o.retry_max_ns = 5 * NSEC_PER_SEC;
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_I(submit(s, j, 0), 0);
	CHECK(WAIT_FOR(STAT(s, requests_expired) == 1, 3));
	CHECK_EQ_U(STAT(s, spool_requests), 0);
	CHECK_EQ_I(count_files(o.spool_dir, NULL, 0), 0);
	sender__free(s);
	free(j.data);
	free(k.data);
}

/* The request files of dir, oldest first: up to max names into names. */
static size_t list_requests(const char *dir, char names[][SPOOL_NAME_MAX], size_t max)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	size_t n = 0;
	uint64_t c, q;

	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max)
		if (spool_name_parse(de->d_name, &c, &q)) /* which checked it fits */
			memcpy(names[n++], de->d_name, strlen(de->d_name) + 1);
	closedir(d);
	qsort(names, n, SPOOL_NAME_MAX, (int (*)(const void *, const void *))strcmp);
	return n;
}

static void write_file(const char *p, const void *data, size_t len)
{
	FILE *f = fopen(p, "wb");

	if (!CHECK(f != NULL))
		return;
	if (len)
		CHECK_EQ_U(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* A header as spool.h lays it out, its own CRC right, claiming a body of len bytes. */
static void fake_header(uint8_t *h, const char *exporter, uint64_t len)
{
	memset(h, 0, SPOOL_HDR_LEN);
	memcpy(h, "PROFDSPL", 8);
	h[8] = 1;
	h[12] = SPOOL_HDR_LEN;
	strcpy((char *)h + 16, exporter);
	for (int i = 0; i < 8; i++)
		h[32 + i] = (uint8_t)(len >> (8 * i));
	uint32_t crc = (uint32_t)crc32(crc32(0, NULL, 0), h, 52);
	for (int i = 0; i < 4; i++)
		h[52 + i] = (uint8_t)(crc >> (8 * i));
}

/*
 * A spool damaged while profd was stopped (the probe's list, and more): files left by an older
 * profd without a header, emptied, cut short, random bytes, another exporter's, a file grown
 * past its header, one claiming a body over the cap, a 64 MiB sparse one, a link, a FIFO and a
 * file of another user. Each is quarantined with a note saying why, none is sent, none counts
 * against the cap of the three good requests, which all go.
 */
static void test_spool_damage(void)
{
	char dir[512];
	struct body good[5], junk = make_body(2000, 99);
	char names[8][SPOOL_NAME_MAX], name[SPOOL_NAME_MAX], url[128];
	uint64_t t = real_ns() - 60 * NSEC_PER_SEC;
	uint8_t h[SPOOL_HDR_LEN], *data;
	struct sender_opts o;
	struct server sv;
	struct sender *s;
	size_t len, n;
	int dfd;

	snprintf(dir, sizeof(dir), "%s", path("damage"));
	o = opts_for(dir, dead_port(), url, sizeof(url));
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	for (unsigned i = 0; i < 5; i++) {
		good[i] = make_body(1000, 90 + i);
		CHECK_EQ_I(submit(s, good[i], t + i), 0);
	}
	CHECK(WAIT_FOR(count_files(dir, NULL, 0) == 5, 3));
	sender__free(s);
	n = list_requests(dir, names, 8);
	if (!CHECK_EQ_U(n, 5))
		return;
	/* the fourth, cut to 300 bytes; a byte of the fifth's body changed */
	CHECK_EQ_I(truncate(path("damage/%s", names[3]), 300), 0);
	dfd = open(path("damage/%s", names[4]), O_WRONLY | O_CLOEXEC);
	CHECK(pwrite(dfd, "?", 1, SPOOL_HDR_LEN + 500) == 1);
	close(dfd);
	/* older than the good ones, so a cap would take them first if they counted */
	spool_name(name, t - 20, 100);
	write_file(path("damage/%s", name), good[0].data, good[0].len); /* no header */
	spool_name(name, t - 19, 101);
	write_file(path("damage/%s", name), "", 0);
	spool_name(name, t - 18, 102);
	write_file(path("damage/%s", name), junk.data, junk.len);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	spool_name(name, t - 17, 103);
	CHECK_EQ_I(spool_write(dfd, name, "otlp", good[1].data, good[1].len, 10), 0);
	spool_name(name, t - 16, 104);
	CHECK_EQ_I(spool_write(dfd, name, "pyroscope", good[1].data, good[1].len, 10), 0);
	CHECK_EQ_I(truncate(path("damage/%s", name), 3ll << 30), 0); /* 3 GiB, sparse */
	spool_name(name, t - 15, 105);
	fake_header(h, "pyroscope", 3ull << 30);
	write_file(path("damage/%s", name), h, sizeof(h));
	spool_name(name, t - 14, 106);
	fake_header(h, "pyroscope", 64u << 20);
	write_file(path("damage/%s", name), h, sizeof(h));
	CHECK_EQ_I(truncate(path("damage/%s", name), SPOOL_HDR_LEN + (64 << 20)), 0);
	spool_name(name, t - 13, 107);
	CHECK_EQ_I(symlink(path("damage/%s", names[0]), path("damage/%s", name)), 0);
	spool_name(name, t - 12, 108);
	CHECK_EQ_I(mkfifo(path("damage/%s", name), 0600), 0);
	spool_name(name, t - 11, 109);
	CHECK_EQ_I(spool_write(dfd, name, "pyroscope", good[2].data, good[2].len, 10), 0);
	if (geteuid() == 0)
		CHECK_EQ_I(fchownat(dfd, name, 12345, 12345, 0), 0);
	close(dfd);
	/* a write a crash interrupted goes; a file that is no request is left alone */
	write_file(path("damage/.tmp-%s", names[0]), "x", 1);
	write_file(path("damage/README"), "x", 1);

	/* taken up: only the good ones wait, whatever the others' sizes say */
	o = opts_for(dir, dead_port(), url, sizeof(url));
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_U(STAT(s, spool_requests), 4);
	CHECK_EQ_U(STAT(s, spool_bytes), 4000);
	/* the changed byte: found reading the body, before anything is sent */
	CHECK(WAIT_FOR(STAT(s, requests_invalid) == (geteuid() == 0 ? 12 : 11), 5));
	CHECK_EQ_U(STAT(s, spool_requests), 3);
	CHECK_EQ_U(STAT(s, spool_bytes), 3000);
	CHECK_EQ_U(STAT(s, samples_resumed), 30 + (geteuid() == 0 ? 0 : 10));
	CHECK_EQ_U(STAT(s, quarantine_requests), STAT(s, requests_invalid));
	CHECK_EQ_U(STAT(s, requests_dropped), 0);
	CHECK_EQ_U(list_requests(dir, names + 5, 3), 3);
	CHECK_EQ_I(count_files(dir, NULL, 0), 4);
	CHECK(access(path("damage/README"), F_OK) == 0);
	/* each with its reason beside it */
	spool_name(name, t - 20, 100);
	data = read_whole(path("damage/quarantine/%s.invalid", name), &len);
	CHECK(data && strstr((char *)data, "no spool header"));
	free(data);
	spool_name(name, t - 17, 103);
	data = read_whole(path("damage/quarantine/%s.invalid", name), &len);
	CHECK(data && strstr((char *)data, "a request for otlp, not pyroscope"));
	free(data);
	spool_name(name, t - 14, 106);
	data = read_whole(path("damage/quarantine/%s.invalid", name), &len);
	CHECK(data && strstr((char *)data, "sparse"));
	free(data);
	spool_name(name, t - 13, 107);
	data = read_whole(path("damage/quarantine/%s.invalid", name), &len);
	CHECK(data && strstr((char *)data, "symbolic link"));
	free(data);
	data = read_whole(path("damage/quarantine/%s.invalid", names[3]), &len);
	CHECK(data && strstr((char *)data, "300 bytes, its header says"));
	free(data);
	data = read_whole(path("damage/quarantine/%s.invalid", names[4]), &len);
	CHECK(data && strstr((char *)data, "the body's checksum does not match"));
	free(data);
	sender__free(s);

	/* a cap the good ones fill exactly: quarantine/ makes way, they all go, in order */
	server_start(&sv, 200);
	o = opts_for(dir, sv.port, url, sizeof(url));
	o.max_bytes = 3000;
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 3 && STAT(s, spool_requests) == 0, 10));
	CHECK_EQ_U(STAT(s, requests_dropped), 0);
	CHECK_EQ_U(STAT(s, samples_sent), 30);
	CHECK_EQ_U(STAT(s, quarantine_requests), 0);
	if (CHECK_EQ_U(server_ngot(&sv), 3))
		for (size_t i = 0; i < 3; i++)
			CHECK(got_is(&sv, i, good[i].data, good[i].len));
	CHECK_EQ_U(list_requests(dir, names + 5, 3), 0);
	sender__free(s);
	server_stop(&sv);
	for (int i = 0; i < 5; i++)
		free(good[i].data);
	free(junk.data);
}

/*
 * The counters are one moment's: every request submitted is in exactly one of sent, dropped,
 * expired, quarantined or waiting at every read, and samples_sent never passes what was
 * submitted. (A fresh clone's CI read requests_sent 3 with spool_requests still 1.)
 */
struct reader {
	struct sender *s;
	uint64_t want, want_samples, reads, torn;
	struct sender_stats bad;
	volatile bool stop;
};

static void *read_stats(void *arg)
{
	struct reader *rd = arg;

	while (!rd->stop) {
		struct sender_stats st;
		uint64_t all;

		sender__stats(rd->s, &st);
		all = st.requests_sent + st.requests_dropped + st.requests_expired +
		      st.requests_quarantined + st.requests_invalid + st.spool_requests;
		rd->reads++;
		if (all != rd->want || st.samples_sent > rd->want_samples) {
			if (!rd->torn++)
				rd->bad = st;
		}
		if (st.requests_sent == rd->want)
			break;
	}
	return NULL;
}

static void test_stats_consistent(void)
{
	const char *dir = path("consistent");
	struct reader rd = {.want = 200};
	struct body b = make_body(300, 77);
	struct server sv;
	pthread_t th;

	server_start(&sv, 200);
	rd.s = start_sender(dir, sv.port);
	if (!CHECK(rd.s != NULL))
		return;
	/* all handed over before the reader looks: from then on the total is known */
	for (uint64_t i = 0; i < rd.want; i++) {
		CHECK_EQ_I(submit(rd.s, b, 0), 0);
		rd.want_samples += b.len / 100;
	}
	pthread_create(&th, NULL, read_stats, &rd);
	CHECK(WAIT_FOR(STAT(rd.s, requests_sent) == rd.want, 30));
	rd.stop = true;
	pthread_join(th, NULL);
	fprintf(stderr, "consistent: %" PRIu64 " reads, %" PRIu64 " torn\n", rd.reads, rd.torn);
	if (!CHECK_EQ_U(rd.torn, 0))
		fprintf(stderr,
			"first torn read: sent %" PRIu64 " waiting %" PRIu64
			" samples_sent %" PRIu64 "\n",
			rd.bad.requests_sent, rd.bad.spool_requests, rd.bad.samples_sent);
	CHECK(rd.reads > 100);
	CHECK_EQ_U(STAT(rd.s, samples_sent), rd.want_samples);
	sender__free(rd.s);
	server_stop(&sv);
	free(b.data);
}

/*
 * A reply whose body says 10 GB: the sender reads 64 KiB of it and goes on with the status
 * (400: quarantined with that much of the reply; 503: retried), it does not read until the
 * timeout (5 s here) on every attempt.
 */
static void test_huge_reply(void)
{
	struct body e = make_body(900, 81), f = make_body(901, 82);
	const char *dir = path("huge");
	char names[4][SPOOL_NAME_MAX];
	struct server sv;
	struct sender *s;
	uint8_t *data;
	size_t len;

	server_start(&sv, 200);
	server_script(&sv, &(struct reply){.status = 400, .action = A_HUGE});
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_I(submit(s, e, 0), 0);
	CHECK(WAIT_FOR(STAT(s, requests_quarantined) == 1, 3));
	CHECK(WAIT_FOR(server_huge_answers(&sv) == 1, 3));
	CHECK_EQ_U(STAT(s, requests_retried), 0);
	fprintf(stderr, "huge: the client took %" PRIu64 " bytes in %.2f s\n", sv.huge_written,
		(double)sv.huge_ns / NSEC_PER_SEC);
	/* 64 KiB read, what the socket buffers hold besides */
	CHECK(sv.huge_written < (32u << 20));
	if (CHECK_EQ_U(list_requests(path("huge/quarantine"), names, 4), 1)) {
		data = read_whole(path("huge/quarantine/%s.reply", names[0]), &len);
		CHECK(data && len == strlen("HTTP 400\n\n") + (64u << 10));
		CHECK(data && !strncmp((char *)data, "HTTP 400\n\nxxxx", 14));
		free(data);
	}
	server_script(&sv, &(struct reply){.status = 503, .action = A_HUGE});
	CHECK_EQ_I(submit(s, f, 0), 0);
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 1, 5));
	CHECK(WAIT_FOR(server_huge_answers(&sv) == 2, 3));
	CHECK_EQ_U(STAT(s, requests_retried), 1);
	CHECK(sv.huge_written < (64u << 20));
	CHECK(got_is(&sv, 2, f.data, f.len));
	sender__free(s);
	server_stop(&sv);
	free(e.data);
	free(f.data);
}

/*
 * quarantine/ counts against the spool's cap and age: over them its oldest go first, before any
 * request still to be sent, and status counts them.
 */
static void test_quarantine_cap(void)
{
	const char *dir = path("qcap");
	uint64_t t = real_ns(), each = strlen("HTTP 400\n\n") + SPOOL_HDR_LEN + 1000;
	char names[16][SPOOL_NAME_MAX], want[SPOOL_NAME_MAX], url[128];
	struct body b[8];
	struct sender_opts o;
	struct server sv;
	struct sender *s;

	server_start(&sv, 400);
	o = opts_for(dir, sv.port, url, sizeof(url));
	o.max_bytes = 5000; /* four quarantined requests of 1000 bytes and their notes */
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	for (unsigned i = 0; i < 8; i++) {
		b[i] = make_body(1000, 110 + i);
		CHECK_EQ_I(submit(s, b[i], t + i), 0);
		CHECK(WAIT_FOR(STAT(s, requests_quarantined) == i + 1, 3));
	}
	CHECK_EQ_U(STAT(s, quarantine_requests), 4);
	CHECK_EQ_U(STAT(s, quarantine_dropped), 4);
	CHECK_EQ_U(STAT(s, quarantine_bytes), 4 * each);
	CHECK_EQ_U(STAT(s, requests_dropped), 0);
	/* the newest four are kept, their notes with them */
	CHECK_EQ_I(count_files(path("qcap/quarantine"), NULL, 0), 8);
	if (CHECK_EQ_U(list_requests(path("qcap/quarantine"), names, 16), 4)) {
		spool_name(want, t + 4, 4);
		CHECK_STREQ(names[0], want);
	}
	sender__free(s);
	server_stop(&sv);

	/* a backend down: what waits to be sent pushes quarantine/ out, not the other way */
	o = opts_for(dir, dead_port(), url, sizeof(url));
	o.max_bytes = 5000;
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_U(STAT(s, quarantine_requests), 4);
	for (unsigned i = 0; i < 3; i++)
		CHECK_EQ_I(submit(s, b[i], 0), 0);
	CHECK(WAIT_FOR(STAT(s, spool_requests) == 3 && STAT(s, quarantine_requests) == 1, 3));
	CHECK_EQ_U(STAT(s, quarantine_dropped), 3);
	CHECK_EQ_U(STAT(s, requests_dropped), 0);
	sender__free(s);

	/* and the age cap: a restart with max_age 1 s empties it */
	o.max_age_ns = NSEC_PER_SEC;
	usleep(1100 * 1000);
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	CHECK(WAIT_FOR(STAT(s, quarantine_requests) == 0, 3));
	CHECK_EQ_U(STAT(s, quarantine_dropped), 1);
	CHECK_EQ_I(count_files(path("qcap/quarantine"), NULL, 0), 0);
	sender__free(s);
	for (int i = 0; i < 8; i++)
		free(b[i].data);
}

static void test_bad_opts(void)
{
	const char *bad_header[] = {"no colon here"};
	struct sender_opts o;
	char url[128];
	FILE *f;

	o = opts_for(path("bad"), dead_port(), url, sizeof(url));
	o.bearer_token_file = path("no-such-token");
	errno = 0;
	CHECK(sender__new(&o) == NULL);
	CHECK_EQ_I(errno, ENOENT);
	fclose(fopen(path("empty-token"), "w"));
	o.bearer_token_file = path("empty-token");
	CHECK(sender__new(&o) == NULL);
	o.bearer_token_file = NULL;
	o.basic_auth_file = token_file; /* no ':' */
	CHECK(sender__new(&o) == NULL);
	CHECK_EQ_I(errno, EINVAL);
	o.basic_auth_file = NULL;
	o.ca_file = path("no-such-ca.pem");
	CHECK(sender__new(&o) == NULL);
	o.ca_file = NULL;
	o.headers = bad_header;
	CHECK(sender__new(&o) == NULL);
	o.headers = extra_headers;
	o.url = "ftp://127.0.0.1/push";
	CHECK(sender__new(&o) == NULL);
	CHECK_EQ_I(errno, EINVAL);
	o.url = "127.0.0.1:4040/push";
	CHECK(sender__new(&o) == NULL);
	o.url = url;
	f = fopen(path("a-file"), "w");
	fclose(f);
	o.spool_dir = path("a-file/spool");
	CHECK(sender__new(&o) == NULL);
	CHECK_EQ_I(errno, ENOTDIR);
	/* the spool is a trust boundary: a link on its path, a folder others can write */
	mkdir(path("real"), 0700);
	CHECK_EQ_I(symlink(path("real"), path("link")), 0);
	o.spool_dir = path("link/spool");
	CHECK(sender__new(&o) == NULL);
	CHECK_EQ_I(errno, ELOOP);
	CHECK(access(path("real/spool"), F_OK) != 0); /* nothing made through the link */
	mkdir(path("open"), 0700);
	chmod(path("open"), 0777);
	o.spool_dir = path("open");
	CHECK(sender__new(&o) == NULL);
	CHECK_EQ_I(errno, EPERM);
	o.spool_dir = path("open/spool"); /* under it, too: not sticky */
	CHECK(sender__new(&o) == NULL);
	CHECK_EQ_I(errno, EPERM);
	if (geteuid() == 0) {
		mkdir(path("theirs"), 0700);
		CHECK_EQ_I(chown(path("theirs"), 12345, 12345), 0);
		o.spool_dir = path("theirs/spool");
		CHECK(sender__new(&o) == NULL);
		CHECK_EQ_I(errno, EPERM);
	}
}

/* --- a full disk --------------------------------------------------------------------------- */

static int write_str(const char *p, const char *s)
{
	int fd = open(p, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	close(fd);
	return ok ? 0 : -1;
}

/*
 * A 64 KiB tmpfs at dir, in a mount namespace of this process (a user namespace too when not
 * privileged). Before any thread starts. Returns 0 or a reason.
 */
static const char *mount_tiny_fs(const char *dir)
{
	if (unshare(CLONE_NEWNS)) {
		char map[64];
		unsigned uid = getuid(), gid = getgid();

		if (unshare(CLONE_NEWUSER | CLONE_NEWNS))
			return "no mount namespace (not root, no user namespaces)";
		snprintf(map, sizeof(map), "0 %u 1", uid);
		if (write_str("/proc/self/setgroups", "deny") ||
		    write_str("/proc/self/uid_map", map))
			return "cannot map the user namespace";
		snprintf(map, sizeof(map), "0 %u 1", gid);
		if (write_str("/proc/self/gid_map", map))
			return "cannot map the user namespace";
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return "cannot make the mounts private";
	if (mkdir(dir, 0700) || mount("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0700"))
		return "cannot mount a tmpfs";
	return NULL;
}

static void test_disk_full(const char *fs)
{
	struct body b[4] = {make_body(8000, 81), make_body(8001, 82), make_body(8002, 83),
			    make_body(8003, 84)};
	char dir[512], filler[512], url[128], buf[4096] = {0};
	struct sender_opts o;
	struct server sv;
	struct sender *s;
	int fd;

	snprintf(dir, sizeof(dir), "%s/spool", fs);
	snprintf(filler, sizeof(filler), "%s/filler", fs);
	mkdir(dir, 0700);
	fd = open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	while (write(fd, buf, sizeof(buf)) > 0)
		;
	CHECK_EQ_I(errno, ENOSPC);
	close(fd);

	server_start(&sv, 200);
	s = start_sender(dir, sv.port);
	if (!CHECK(s != NULL))
		return;
	for (int i = 0; i < 3; i++)
		CHECK_EQ_I(submit(s, b[i], 0), 0);
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 3, 5));
	CHECK_EQ_U(STAT(s, spool_errors), 3);
	for (size_t i = 0; i < 3; i++)
		CHECK(got_is(&sv, i, b[i].data, b[i].len));
	CHECK_EQ_I(count_files(dir, NULL, 0), 0);
	/* room again: spooled as before */
	unlink(filler);
	CHECK_EQ_I(submit(s, b[3], 0), 0);
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 4, 5));
	CHECK_EQ_U(STAT(s, spool_errors), 3);
	CHECK(got_is(&sv, 3, b[3].data, b[3].len));
	sender__free(s);
	server_stop(&sv);

	/* full and the backend down: memory holds mem_max_bytes, the oldest go beyond */
	fd = open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	while (write(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	o = opts_for(dir, dead_port(), url, sizeof(url));
	o.mem_max_bytes = 20000;
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	for (int i = 0; i < 3; i++) {
		CHECK_EQ_I(submit(s, b[i], real_ns() + (uint64_t)i), 0);
		CHECK(WAIT_FOR(STAT(s, spool_errors) == (uint64_t)i + 1, 3));
	}
	CHECK_EQ_U(STAT(s, requests_dropped), 1);
	CHECK_EQ_U(STAT(s, spool_requests), 2);
	CHECK_EQ_U(STAT(s, spool_bytes), b[1].len + b[2].len);
	CHECK_EQ_U(STAT(s, spool_errors), 3);
	sender__free(s);
	unlink(filler);
	for (int i = 0; i < 4; i++)
		free(b[i].data);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

int main(void)
{
	const char *no_fs;
	char fs[128];
	FILE *f;

	/* the test server is local: no proxy in between */
	unsetenv("http_proxy");
	unsetenv("HTTP_PROXY");
	unsetenv("all_proxy");
	unsetenv("ALL_PROXY");
	snprintf(root, sizeof(root), "/tmp/test_sender.XXXXXX");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(fs, sizeof(fs), "%s/tinyfs", root);
	no_fs = mount_tiny_fs(fs);
	snprintf(token_file, sizeof(token_file), "%s/token", root);
	f = fopen(token_file, "w");
	fputs("sekrit-token\n", f);
	fclose(f);
	if (!getenv("TEST_SENDER_VERBOSE"))
		log_set_level(LOG_LVL_ERROR);

	test_bad_opts();
	test_delivery();
	test_retries();
	test_reset();
	test_split();
	test_quarantine();
	test_auth();
	test_auth_rotated();
	test_cap();
	test_hang();
	test_expiry();
	test_spool_damage();
	test_stats_consistent();
	test_huge_reply();
	test_quarantine_cap();
	if (!no_fs) {
		test_disk_full(fs);
		umount2(fs, MNT_DETACH);
	}
	nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	if (no_fs)
		return CHECK_SKIP(no_fs);
	return CHECK_DONE();
}
