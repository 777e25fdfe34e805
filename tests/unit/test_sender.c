// SPDX-License-Identifier: BSD-2-Clause
/*
 * The export sender against a scripted HTTP/1.1 server on 127.0.0.1 (a real socket, a thread of
 * this process; sender_fixture.h): delivery and the spool, Retry-After in both forms, backoff,
 * connections reset mid-request, 413 splits, 400 quarantine, 401, the spool's cap and expiry,
 * restarts resuming the spool, a hung request at sender__free, counters read while they change,
 * a reply body of 10 GB, and a full disk (a tiny tmpfs in a mount namespace of this process).
 * Every request body the server reads is compared with what was submitted. The spool's files
 * and folders as a trust boundary are test_spool.c's.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/mount.h>

#include "sender_fixture.h"

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

int main(void)
{
	const char *no_fs;
	char fs[128];

	if (fixture_setup("test_sender"))
		return 1;
	snprintf(fs, sizeof(fs), "%s/tinyfs", root);
	no_fs = mount_tiny_fs(fs);

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
	test_stats_consistent();
	test_huge_reply();
	if (!no_fs) {
		test_disk_full(fs);
		umount2(fs, MNT_DETACH);
	}
	fixture_cleanup();
	if (no_fs)
		return CHECK_SKIP(no_fs);
	return CHECK_DONE();
}
