// SPDX-License-Identifier: BSD-2-Clause
/* The sender's libcurl side: options, credentials and headers, and the reply callbacks. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "fdio.h"
#include "log.h"
#include "parse.h"
#include "sender_priv.h"

#define SECRET_MAX 4096 /* token and password files */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Retry-After: delay-seconds or an HTTP-date. */
static void parse_retry_after(struct sender *s, const char *v, size_t len)
{
	char buf[64];
	uint64_t secs;
	time_t t, now;

	while (len && (*v == ' ' || *v == '\t')) {
		v++;
		len--;
	}
	while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
		len--;
	if (!len || len >= sizeof(buf))
		return;
	memcpy(buf, v, len);
	buf[len] = '\0';
	if (!parse_u64(buf, 0, UINT32_MAX, &secs)) {
		s->retry_after_ns = secs * NSEC_PER_SEC;
		s->has_retry_after = true;
		return;
	}
	t = curl_getdate(buf, NULL);
	if (t == (time_t)-1)
		return;
	now = time(NULL);
	s->retry_after_ns = t > now ? (uint64_t)(t - now) * NSEC_PER_SEC : 0;
	s->has_retry_after = true;
}

static size_t on_header(char *buf, size_t size, size_t n, void *ctx)
{
	struct sender *s = ctx;
	size_t len = size * n;

	if (len >= 5 && !strncmp(buf, "HTTP/", 5)) {
		/* a new response (after a 100 Continue): forget the previous one's */
		s->has_retry_after = false;
		s->reply_len = 0;
		s->reply_cut = false;
	} else if (len > 12 && !strncasecmp(buf, "Retry-After:", 12)) {
		parse_retry_after(s, buf + 12, len - 12);
	}
	return len;
}

/*
 * The reply's body matters only as far as its first REPLY_MAX bytes (the error text kept with a
 * quarantined request and in the error line): past them the transfer stops, so a backend
 * answering an endless body costs 64 KiB, not a read until the timeout on every attempt.
 * finish() takes the status as the answer (reply_cut).
 */
static size_t on_body(char *buf, size_t size, size_t n, void *ctx)
{
	struct sender *s = ctx;
	size_t len = size * n, room = REPLY_MAX - s->reply_len;

	memcpy(s->reply + s->reply_len, buf, len < room ? len : room);
	s->reply_len += len < room ? len : room;
	if (len > room) {
		s->reply_cut = true;
		return 0; /* CURLE_WRITE_ERROR: the connection is closed, not drained */
	}
	return len;
}

/* The first line of a secret file, without its line end; refuses control characters. */
static int read_secret(const char *path, char **out)
{
	char buf[SECRET_MAX + 1];
	size_t n = 0;
	ssize_t r;
	int fd, err = 0;

	/* Checked at parsing already; the file may have been replaced by a FIFO since. */
	fd = fd_open_regular(path, 0);
	if (fd < 0)
		return fd;
	while (n < SECRET_MAX) {
		r = read(fd, buf + n, SECRET_MAX - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			break;
		}
		if (!r)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (!err) {
		buf[n] = '\0';
		n = strcspn(buf, "\r\n");
		buf[n] = '\0';
		while (n && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
			buf[--n] = '\0';
		if (!n)
			err = -ENODATA;
		for (size_t i = 0; i < n && !err; i++)
			if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
				err = -EINVAL;
	}
	if (!err && !(*out = strdup(buf)))
		err = -ENOMEM;
	explicit_bzero(buf, sizeof(buf));
	return err;
}

static int check_readable(const char *path)
{
	int fd = fd_open_regular(path, 0);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

static bool header_ok(const char *h)
{
	const char *colon = strchr(h, ':');

	if (!colon || colon == h)
		return false;
	for (const char *p = h; *p; p++)
		if ((unsigned char)*p < 0x20 && *p != '\t')
			return false;
	for (const char *p = h; p < colon; p++)
		if (*p == ' ' || *p == '\t')
			return false;
	return true;
}

static int add_header(struct sender *s, const char *fmt, ...)
{
	char buf[8192];
	struct curl_slist *l;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -E2BIG;
	l = curl_slist_append(s->headers, buf);
	explicit_bzero(buf, sizeof(buf));
	if (!l)
		return -ENOMEM;
	s->headers = l;
	return 0;
}

/* The headers, the credentials and the files of opts: 0, or -errno with one line logged. */
int sender_setup_auth(struct sender *s, const struct sender_opts *o)
{
	const char *files[] = {o->ca_file, o->cert_file, o->key_file};
	char *secret = NULL;
	int err;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (files[i] && (err = check_readable(files[i]))) {
			pr_err("export: %s: %s: %s", s->name, files[i], strerror(-err));
			return err;
		}
	}
	if (o->bearer_token_file) {
		err = read_secret(o->bearer_token_file, &secret);
		if (!err)
			err = add_header(s, "Authorization: Bearer %s", secret);
		if (secret) {
			explicit_bzero(secret, strlen(secret));
			free(secret);
		}
		if (err) {
			pr_err("export: %s: %s: %s", s->name, o->bearer_token_file,
			       err == -ENODATA ? "empty" : strerror(-err));
			return err;
		}
	}
	if (o->basic_auth_file) {
		err = read_secret(o->basic_auth_file, &s->userpwd);
		if (!err && !strchr(s->userpwd, ':'))
			err = -EINVAL;
		if (err) {
			pr_err("export: %s: %s: %s", s->name, o->basic_auth_file,
			       err == -ENODATA	? "empty"
			       : err == -EINVAL ? "not one line \"user:password\""
						: strerror(-err));
			return err;
		}
	}
	for (size_t i = 0; i < o->nheaders; i++) {
		if (!o->headers[i] || !header_ok(o->headers[i])) {
			pr_err("export: %s: header \"%s\": not \"Name: value\"", s->name,
			       o->headers[i] ? o->headers[i] : "");
			return -EINVAL;
		}
		if ((err = add_header(s, "%s", o->headers[i])))
			return err;
	}
	if ((err = add_header(s, "Content-Type: %s", o->content_type)))
		return err;
	if (o->content_encoding &&
	    (err = add_header(s, "Content-Encoding: %s", o->content_encoding)))
		return err;
	/* no 100-continue round trip before each body */
	return add_header(s, "Expect:");
}

static bool same_headers(const struct curl_slist *a, const struct curl_slist *b)
{
	for (; a && b; a = a->next, b = b->next)
		if (strcmp(a->data, b->data))
			return false;
	return !a && !b;
}

static void free_secrets(struct curl_slist *headers, char *userpwd)
{
	for (struct curl_slist *l = headers; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(headers);
	if (userpwd) {
		explicit_bzero(userpwd, strlen(userpwd));
		free(userpwd);
	}
}

bool sender_reload_auth(struct sender *s)
{
	struct curl_slist *old_headers = s->headers;
	char *old_userpwd = s->userpwd;
	bool changed;

	if (!s->auth_opts.bearer_token_file && !s->auth_opts.basic_auth_file)
		return false;
	s->headers = NULL;
	s->userpwd = NULL;
	if (sender_setup_auth(s, &s->auth_opts)) {
		/* Unreadable now (logged): keep what worked before. */
		free_secrets(s->headers, s->userpwd);
		s->headers = old_headers;
		s->userpwd = old_userpwd;
		return false;
	}
	changed = !same_headers(old_headers, s->headers) || (!old_userpwd) != (!s->userpwd) ||
		  (old_userpwd && strcmp(old_userpwd, s->userpwd));
	curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
	if (s->userpwd) {
		curl_easy_setopt(s->easy, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(s->easy, CURLOPT_USERPWD, s->userpwd);
	}
	free_secrets(old_headers, old_userpwd);
	return changed;
}

/* Whether url parses as an http:// or https:// URL. */
static bool url_ok(const char *url)
{
	CURLU *u = curl_url();
	char *scheme = NULL;
	bool ok;

	if (!u)
		return false;
	ok = !curl_url_set(u, CURLUPART_URL, url, 0) &&
	     !curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) &&
	     (!strcmp(scheme, "http") || !strcmp(scheme, "https"));
	curl_free(scheme);
	curl_url_cleanup(u);
	return ok;
}

int sender_setup_curl(struct sender *s, const struct sender_opts *o)
{
	uint64_t timeout = o->timeout_ns ? o->timeout_ns : DEF_TIMEOUT_NS;
	CURL *e;

	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		pr_err("export: %s: curl_global_init: %s", s->name,
		       curl_easy_strerror(curl_init_rc));
		return -EIO;
	}
	if (!url_ok(s->url)) {
		pr_err("export: %s: \"%s\": not an http:// or https:// URL", s->name, s->url);
		return -EINVAL;
	}
	s->multi = curl_multi_init();
	s->easy = e = curl_easy_init();
	if (!s->multi || !e)
		return -ENOMEM;
	curl_easy_setopt(e, CURLOPT_URL, s->url);
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->headers);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "profd");
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(timeout / NSEC_PER_MSEC));
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, s);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
#if LIBCURL_VERSION_NUM >= 0x075700
	/* do not wait for a hung name lookup when a transfer is abandoned */
	curl_easy_setopt(e, CURLOPT_QUICK_EXIT, 1L);
#endif
	if (o->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file);
	if (o->cert_file)
		curl_easy_setopt(e, CURLOPT_SSLCERT, o->cert_file);
	if (o->key_file)
		curl_easy_setopt(e, CURLOPT_SSLKEY, o->key_file);
	if (s->userpwd) {
		curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(e, CURLOPT_USERPWD, s->userpwd);
	}
	return 0;
}
