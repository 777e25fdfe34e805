/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the export sender's unit tests share (test_sender.c, test_spool.c): a scripted HTTP/1.1
 * server on 127.0.0.1 (a real socket, a thread of the test), the test's folder and token file,
 * and functions that submit bodies, read the spool and wait for the counters. Include it after
 * defining _GNU_SOURCE.
 */
#ifndef PROFD_TEST_SENDER_FIXTURE_H
#define PROFD_TEST_SENDER_FIXTURE_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
static inline ssize_t conn_read(struct server *sv, int c, struct rbuf *b)
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

static inline void send_str(int c, const char *s)
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

static inline void answer(int c, const struct reply *r)
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
static inline void answer_huge(struct server *sv, int c, int status)
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
static inline void serve(struct server *sv, int c)
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

static inline void *server_main(void *arg)
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

static inline void server_start(struct server *sv, int status)
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

static inline void server_script(struct server *sv, const struct reply *r)
{
	pthread_mutex_lock(&sv->lock);
	sv->script[sv->nscript++] = *r;
	pthread_mutex_unlock(&sv->lock);
}

static inline void server_set_default(struct server *sv, int status)
{
	pthread_mutex_lock(&sv->lock);
	sv->dflt.status = status;
	pthread_mutex_unlock(&sv->lock);
}

static inline size_t server_ngot(struct server *sv)
{
	size_t n;

	pthread_mutex_lock(&sv->lock);
	n = sv->ngot;
	pthread_mutex_unlock(&sv->lock);
	return n;
}

static inline void server_stop(struct server *sv)
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
static inline int dead_port(void)
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

static inline uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static inline char *path(const char *fmt, ...)
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
static inline int count_files(const char *dir, char *first, size_t size)
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

static inline uint8_t *read_whole(const char *p, size_t *len)
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

static inline struct body make_body(size_t len, unsigned seed)
{
	struct body b = {malloc(len), len};

	for (size_t i = 0; i < len; i++)
		b.data[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
	return b;
}

/* Submit a copy of b. */
static inline int submit(struct sender *s, struct body b, uint64_t created_ns)
{
	uint8_t *copy = malloc(b.len);

	memcpy(copy, b.data, b.len);
	/* as many samples as count_100 finds in it */
	return sender__submit(s, copy, b.len, created_ns, b.len / 100);
}

static inline bool got_is(struct server *sv, size_t i, const uint8_t *data, size_t len)
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

static inline size_t server_huge_answers(struct server *sv)
{
	size_t n;

	pthread_mutex_lock(&sv->lock);
	n = sv->huge_answers;
	pthread_mutex_unlock(&sv->lock);
	return n;
}

static inline double gap_s(struct server *sv, size_t i, size_t j)
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
static inline const char *last_err(struct sender *s)
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
static inline int split_half(const uint8_t *body, size_t len, uint8_t **a, size_t *alen,
			     uint8_t **b, size_t *blen)
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
static inline uint64_t count_100(const uint8_t *body, size_t len)
{
	return len / 100;
}

static const char *const extra_headers[] = {"X-Scope-OrgID: tenant-1"};

static inline struct sender_opts opts_for(const char *dir, int port, char *url, size_t url_size)
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

static inline struct sender *start_sender(const char *dir, int port)
{
	char url[128];
	struct sender_opts o = opts_for(dir, port, url, sizeof(url));

	return sender__new(&o);
}

/* The request files of dir, oldest first: up to max names into names. */
static inline size_t list_requests(const char *dir, char names[][SPOOL_NAME_MAX], size_t max)
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

static inline void write_file(const char *p, const void *data, size_t len)
{
	FILE *f = fopen(p, "wb");

	if (!CHECK(f != NULL))
		return;
	if (len)
		CHECK_EQ_U(fwrite(data, 1, len, f), len);
	fclose(f);
}

/*
 * The test's folder /tmp/NAME.XXXXXX (root) with its token file, no proxy between the sender
 * and the local server, the sender's logs quiet unless TEST_SENDER_VERBOSE. Starts no thread.
 * Returns 0, or 1 after printing why.
 */
static inline int fixture_setup(const char *name)
{
	FILE *f;

	unsetenv("http_proxy");
	unsetenv("HTTP_PROXY");
	unsetenv("all_proxy");
	unsetenv("ALL_PROXY");
	snprintf(root, sizeof(root), "/tmp/%s.XXXXXX", name);
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(token_file, sizeof(token_file), "%s/token", root);
	f = fopen(token_file, "w");
	if (!f) {
		perror(token_file);
		return 1;
	}
	fputs("sekrit-token\n", f);
	fclose(f);
	if (!getenv("TEST_SENDER_VERBOSE"))
		log_set_level(LOG_LVL_ERROR);
	return 0;
}

static inline int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

/* Remove the test's folder and all in it. */
static inline void fixture_cleanup(void)
{
	nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
