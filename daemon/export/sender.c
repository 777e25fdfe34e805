// SPDX-License-Identifier: BSD-2-Clause
/*
 * One worker thread per sender owns the queue of unsent requests (sorted by spool name, so
 * oldest first), the spool folder and the libcurl handles. sender__submit only appends to a
 * hand-over list under the lock and wakes the worker, which spools what was handed over before
 * anything else, so a request reaches the disk even while an attempt is in flight.
 *
 * The transfer runs through a curl multi handle holding one easy handle that is reused, so the
 * connection is kept alive between requests. The worker pumps it with curl_multi_poll(), which
 * sender__submit and sender__free interrupt with curl_multi_wakeup(); between attempts it sleeps
 * on the condition variable until the next attempt is due, a request expires or work arrives.
 */
#include "sender.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "sender_priv.h"
#include "timeutil.h"

/* The worker's: seen by readers at the next sender_publish. */
void sender_set_error(struct sender *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->w.last_error, sizeof(s->w.last_error), fmt, ap);
	va_end(ap);
	s->w.last_error_ns = real_ns();
}

void sender_publish(struct sender *s)
{
	s->w.spool_bytes = s->q_bytes;
	s->w.spool_requests = s->q_count;
	s->w.oldest_ns = s->head ? s->head->created_ns : 0;
	s->w.quarantine_requests = s->nquar;
	s->w.quarantine_bytes = s->quar_bytes;
	pthread_mutex_lock(&s->lock);
	s->pub = s->w;
	/* what was taken from the hand-over is in the queue now, or counted where it went */
	s->tk_bytes = s->tk_count = s->tk_oldest = 0;
	pthread_mutex_unlock(&s->lock);
}

void sender_abort_inflight(struct sender *s)
{
	if (!s->inflight)
		return;
	curl_multi_remove_handle(s->multi, s->easy);
	free(s->send_buf);
	s->send_buf = NULL;
	s->inflight = NULL;
	pthread_mutex_lock(&s->lock);
	s->busy = false;
	pthread_mutex_unlock(&s->lock);
}

/* --- one attempt --------------------------------------------------------------------------- */

/* Start sending the oldest request. */
static void start(struct sender *s)
{
	struct req *r = s->head;
	const uint8_t *body = r->body;
	size_t len = r->len;
	int err;

	if (!body) {
		struct spool_info info;
		char why[SPOOL_WHY_MAX];

		err = spool_read(s->dirfd, r->name, s->name, s->max_bytes, true, &s->send_buf,
				 &info, why, sizeof(why));
		if (err == -EBADMSG) {
			/* changed on disk since it was written or checked: never sent as it is */
			sender_invalid(s, r, why);
			sender_publish(s);
			return;
		}
		if (err) {
			/* gone or unreadable: nothing to send, nothing to keep */
			pr_err("export: %s: spool: %s: %s; dropped", s->name, r->name,
			       strerror(-err));
			s->w.requests_dropped++;
			sender_q_drop(s, r);
			sender_publish(s);
			return;
		}
		body = s->send_buf;
		len = (size_t)info.len;
		/* what the header says now is what gets sent and counted */
		s->q_bytes = s->q_bytes - r->len + len;
		r->len = len;
		r->samples = info.samples;
	}
	s->has_retry_after = false;
	s->reply_len = 0;
	s->reply_cut = false;
	s->errbuf[0] = '\0';
	curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, body);
	pthread_mutex_lock(&s->lock);
	s->busy = true;
	pthread_mutex_unlock(&s->lock);
	s->inflight = r;
	if (curl_multi_add_handle(s->multi, s->easy) != CURLM_OK) {
		pr_err("export: %s: curl_multi_add_handle failed", s->name);
		sender_abort_inflight(s);
		s->next_attempt_ns = mono_ns() + NSEC_PER_SEC;
	}
}

static uint64_t next_rand(struct sender *s)
{
	/* xorshift64: jitter only */
	s->rand ^= s->rand << 13;
	s->rand ^= s->rand >> 7;
	s->rand ^= s->rand << 17;
	return s->rand;
}

/* Exponential from 1 s (or retry_max when smaller) to retry_max, +-20% jitter. */
static uint64_t backoff_ns(struct sender *s)
{
	uint64_t lo = s->retry_max_ns < NSEC_PER_SEC ? s->retry_max_ns : NSEC_PER_SEC, d = lo, j;

	for (unsigned i = 1; i < s->failures && d < s->retry_max_ns; i++)
		d *= 2;
	if (d > s->retry_max_ns)
		d = s->retry_max_ns;
	j = d / 5;
	d = d - j + (j ? next_rand(s) % (2 * j + 1) : 0);
	return d < lo ? lo : d > s->retry_max_ns ? s->retry_max_ns : d;
}

/* The attempt failed and the request stays first: schedule the next attempt. */
static void retry_later(struct sender *s, enum log_level lvl, const char *why)
{
	uint64_t delay;

	s->failures++;
	if (s->has_retry_after)
		delay = s->retry_after_ns < s->retry_max_ns ? s->retry_after_ns : s->retry_max_ns;
	else
		delay = backoff_ns(s);
	s->next_attempt_ns = mono_ns() + delay;
	s->w.requests_retried++;
	sender_set_error(s, "%s (retry in %.1f s)", why, (double)delay / NSEC_PER_SEC);
	pr_log(lvl,
	       "export: %s: %s: %s; %" PRIu64 " requests (%" PRIu64 " bytes) kept, retry in %.1f s",
	       s->name, s->url, why, s->q_count, s->q_bytes, (double)delay / NSEC_PER_SEC);
}

/* The reply's first line of text, for the logs ("" when it has none). */
static void reply_excerpt(const struct sender *s, char *buf, size_t size)
{
	size_t n = 0;

	for (size_t i = 0; i < s->reply_len && n + 1 < size; i++) {
		char c = (char)s->reply[i];

		if (c == '\n' || c == '\r')
			break;
		buf[n++] = c >= 0x20 && c < 0x7f ? c : '?';
	}
	buf[n] = '\0';
}

static void quarantine(struct sender *s, struct req *r, const uint8_t *body, long status)
{
	char ex[128], head[32], name[SPOOL_NAME_MAX];
	uint8_t *note;
	size_t hlen;
	int err = -ENOMEM;

	memcpy(name, r->name, sizeof(name));
	reply_excerpt(s, ex, sizeof(ex));
	hlen = (size_t)snprintf(head, sizeof(head), "HTTP %ld\n\n", status);
	note = malloc(hlen + s->reply_len);
	if (note) {
		memcpy(note, head, hlen);
		memcpy(note + hlen, s->reply, s->reply_len);
		/* a spooled request's file is moved; one kept in memory is written there */
		err = sender_quarantine(s, r, r->body ? body : NULL, ".reply", note,
					hlen + s->reply_len);
		free(note);
	} else {
		sender_q_drop(s, r);
		s->w.requests_dropped++;
	}
	if (err) {
		pr_err("export: %s: HTTP %ld for %s and quarantine/ failed (%s): request dropped",
		       s->name, status, name, strerror(-err));
	} else {
		s->w.requests_quarantined++;
		pr_err("export: %s: HTTP %ld: request %s refused, moved to quarantine/: %s",
		       s->name, status, name, ex);
	}
	sender_set_error(s, "HTTP %ld: %s (quarantined)", status, ex);
	sender_enforce_caps(s);
}

/* 413: both halves replace r, in order, on disk before r leaves it. */
static void split_req(struct sender *s, struct req *r, const uint8_t *body, long status)
{
	struct req *h[2] = {NULL, NULL};
	uint8_t *part[2] = {NULL, NULL};
	size_t plen[2];
	int err = -ENOTSUP;

	if (s->split)
		err = s->split(body, r->len, &part[0], &plen[0], &part[1], &plen[1]);
	for (int i = 0; !err && i < 2; i++) {
		h[i] = calloc(1, sizeof(*h[i]));
		if (!h[i])
			err = -ENOMEM;
		else
			err = spool_name_half(r->name, i, h[i]->name);
	}
	if (err) {
		free(h[0]);
		free(h[1]);
		free(part[0]);
		free(part[1]);
		pr_warn("export: %s: HTTP 413 and the request cannot be split (%s)", s->name,
			strerror(-err));
		quarantine(s, r, body, status);
		return;
	}
	/* the halves share the request's samples, whatever count() makes of them */
	h[0]->samples = s->count ? s->count(part[0], plen[0]) : r->samples / 2;
	if (h[0]->samples > r->samples)
		h[0]->samples = r->samples;
	h[1]->samples = r->samples - h[0]->samples;
	for (int i = 0; i < 2; i++) {
		h[i]->created_ns = r->created_ns;
		h[i]->len = plen[i];
		h[i]->body = part[i];
		if (!spool_write(s->dirfd, h[i]->name, s->name, part[i], plen[i], h[i]->samples)) {
			free(part[i]);
			h[i]->body = NULL;
		} else {
			s->w.spool_errors++;
		}
	}
	pr_info("export: %s: HTTP 413: request %s (%zu bytes) split in %zu + %zu bytes", s->name,
		r->name, r->len, plen[0], plen[1]);
	s->w.requests_split++;
	sender_q_drop(s, r);
	sender_q_insert(s, h[0]);
	sender_q_insert(s, h[1]);
	sender_enforce_caps(s);
}

/* The attempt in flight ended with rc. */
static void finish(struct sender *s, CURLcode rc)
{
	struct req *r = s->inflight;
	const uint8_t *body = r->body ? r->body : s->send_buf;
	char why[CURL_ERROR_SIZE + 64];
	long status = 0;

	curl_multi_remove_handle(s->multi, s->easy);
	pthread_mutex_lock(&s->lock);
	s->busy = false;
	pthread_mutex_unlock(&s->lock);
	s->inflight = NULL;
	/* on_body stopped a reply past REPLY_MAX: the status and what was kept are the answer */
	if (rc == CURLE_WRITE_ERROR && s->reply_cut)
		rc = CURLE_OK;
	if (rc != CURLE_OK) {
		snprintf(why, sizeof(why), "%s", s->errbuf[0] ? s->errbuf : curl_easy_strerror(rc));
		s->has_retry_after = false;
		retry_later(s, LOG_LVL_WARN, why);
		goto out;
	}
	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	s->w.auth_failing = status == 401 || status == 403;
	if (status >= 200 && status < 300) {
		/* counted sent in the same sender_publish that takes it out of the queue */
		s->w.requests_sent++;
		s->w.samples_sent += r->samples;
		s->w.bytes_sent += r->len;
		s->w.last_success_ns = real_ns();
		if (s->failures)
			pr_info("export: %s: %s: delivering again", s->name, s->url);
		s->failures = 0;
		s->next_attempt_ns = 0;
		sender_q_drop(s, r);
		goto out;
	}
	if (status == 401 || status == 403) {
		/* A token rotated on disk (a projected Kubernetes token): try it at once. */
		if (sender_reload_auth(s)) {
			pr_info("export: %s: HTTP %ld: the credentials files changed; trying them",
				s->name, status);
			s->failures = 0;
			s->next_attempt_ns = 0;
			goto out;
		}
		snprintf(why, sizeof(why), "HTTP %ld: the backend refuses our credentials", status);
		s->has_retry_after = false;
		retry_later(s, LOG_LVL_ERROR, why);
		goto out;
	}
	if (status == 413 || (status >= 400 && status < 500 && status != 408 && status != 429)) {
		/* the backend answered about this request: the next one goes at once */
		s->failures = 0;
		s->next_attempt_ns = 0;
	}
	if (status == 413) {
		split_req(s, r, body, status);
	} else if (status >= 400 && status < 500 && status != 408 && status != 429) {
		quarantine(s, r, body, status);
	} else {
		/* 408, 429, 5xx: the backend's trouble; 1xx and 3xx: not ours to follow */
		char ex[96];

		reply_excerpt(s, ex, sizeof(ex));
		snprintf(why, sizeof(why), "HTTP %ld%s%s", status, ex[0] ? ": " : "", ex);
		retry_later(s, LOG_LVL_WARN, why);
	}
out:
	free(s->send_buf);
	s->send_buf = NULL;
	sender_publish(s);
}

/* Drive the transfer in flight, waiting at most until deadline (mono_ns) or 1 s. */
static void pump(struct sender *s, uint64_t deadline)
{
	int running = 0, left, ms = 1000;
	CURLMsg *m;

	curl_multi_perform(s->multi, &running);
	while ((m = curl_multi_info_read(s->multi, &left))) {
		if (m->msg == CURLMSG_DONE && s->inflight) {
			finish(s, m->data.result);
			return;
		}
	}
	if (deadline && ms_until(deadline) < ms)
		ms = ms_until(deadline);
	curl_multi_poll(s->multi, NULL, 0, ms, NULL);
}

/* Sleep until the next attempt is due, the oldest request expires or work is handed over. */
static void idle(struct sender *s)
{
	uint64_t now = mono_ns(), until = now + IDLE_WAKE_NS, t, rnow, age;
	struct timespec ts;

	if (s->head) {
		if (s->next_attempt_ns < until)
			until = s->next_attempt_ns;
		/* wake when the oldest expires */
		rnow = real_ns();
		age = rnow > s->head->created_ns ? rnow - s->head->created_ns : 0;
		t = now + (age < s->max_age_ns ? s->max_age_ns - age : 0) + NSEC_PER_MSEC;
		if (t < until)
			until = t;
	}
	if (s->nquar) {
		/* and when the oldest in quarantine/ does */
		rnow = real_ns();
		age = rnow > s->quar[0].created_ns ? rnow - s->quar[0].created_ns : 0;
		t = now + (age < s->max_age_ns ? s->max_age_ns - age : 0) + NSEC_PER_MSEC;
		if (t < until)
			until = t;
	}
	ts.tv_sec = (time_t)(until / NSEC_PER_SEC);
	ts.tv_nsec = (long)(until % NSEC_PER_SEC);
	pthread_mutex_lock(&s->lock);
	while (!s->ho_head && !s->stop)
		if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&s->lock);
}

static void *worker(void *arg)
{
	struct sender *s = arg;
	uint64_t stop_at = 0;

	for (;;) {
		struct req *in;
		bool stop;

		/* before the hand-over is taken: its publish would forget what was taken */
		if (s->verify_resumed)
			sender_verify_resumed(s);
		pthread_mutex_lock(&s->lock);
		in = s->ho_head;
		s->ho_head = s->ho_tail = NULL;
		/* still waiting for readers until sender_take_in publishes where they went */
		s->tk_bytes += s->ho_bytes;
		s->tk_count += s->ho_count;
		if (s->ho_oldest && (!s->tk_oldest || s->ho_oldest < s->tk_oldest))
			s->tk_oldest = s->ho_oldest;
		s->ho_bytes = s->ho_count = s->ho_oldest = 0;
		stop = s->stop;
		pthread_mutex_unlock(&s->lock);
		sender_take_in(s, in);
		if (stop && !stop_at)
			stop_at = mono_ns() + STOP_GRACE_NS;
		if (stop && (!s->inflight || mono_ns() >= stop_at))
			break;
		if (s->inflight) {
			pump(s, stop_at);
			continue;
		}
		sender_expire(s);
		if (s->head && mono_ns() >= s->next_attempt_ns)
			start(s);
		else
			idle(s);
	}
	sender_abort_inflight(s);
	sender_spool_leftovers(s);
	return NULL;
}

/* --- set-up -------------------------------------------------------------------------------- */

static void sender_release(struct sender *s)
{
	struct req *r, *next;

	for (r = s->head; r; r = next) {
		next = r->next;
		free(r->body);
		free(r);
	}
	for (r = s->ho_head; r; r = next) {
		next = r->next;
		free(r->body);
		free(r);
	}
	free(s->send_buf);
	if (s->easy)
		curl_easy_cleanup(s->easy);
	if (s->multi)
		curl_multi_cleanup(s->multi);
	curl_slist_free_all(s->headers);
	free((char *)s->auth_opts.bearer_token_file);
	free((char *)s->auth_opts.basic_auth_file);
	if (s->userpwd) {
		explicit_bzero(s->userpwd, strlen(s->userpwd));
		free(s->userpwd);
	}
	if (s->dirfd >= 0)
		close(s->dirfd);
	if (s->qfd >= 0)
		close(s->qfd);
	free(s->quar);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s->name);
	free(s->url);
	free(s);
}

struct sender *sender__new(const struct sender_opts *o)
{
	pthread_condattr_t ca;
	struct sender *s;
	int err;

	char why[SPOOL_WHY_MAX + 64];

	if (!o || !o->name || !o->url || !o->spool_dir || !o->content_type ||
	    (o->nheaders && !o->headers) || strlen(o->name) >= SPOOL_EXPORTER_MAX) {
		pr_err("export: sender: name (< 16 characters), url, spool_dir and content_type "
		       "are required");
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->dirfd = s->qfd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	s->name = strdup(o->name);
	s->url = strdup(o->url);
	if (!s->name || !s->url) {
		err = -ENOMEM;
		goto fail;
	}
	s->max_bytes = o->max_bytes ? o->max_bytes : DEF_MAX_BYTES;
	s->max_age_ns = o->max_age_ns ? o->max_age_ns : DEF_MAX_AGE_NS;
	s->retry_max_ns = o->retry_max_ns ? o->retry_max_ns : DEF_RETRY_MAX_NS;
	s->mem_max = o->mem_max_bytes ? o->mem_max_bytes : DEF_MEM_MAX;
	s->split = o->split;
	s->count = o->count;
	if (getrandom(&s->rand, sizeof(s->rand), GRND_NONBLOCK) != sizeof(s->rand) || !s->rand)
		s->rand = mono_ns() ^ (uintptr_t)s ^ 0x9e3779b97f4a7c15ull;
	s->auth_opts = (struct sender_opts){
	    .name = s->name,
	    .bearer_token_file = o->bearer_token_file ? strdup(o->bearer_token_file) : NULL,
	    .basic_auth_file = o->basic_auth_file ? strdup(o->basic_auth_file) : NULL,
	    .headers = o->headers,
	    .nheaders = o->nheaders,
	    .content_type = o->content_type,
	    .content_encoding = o->content_encoding,
	};
	if ((o->bearer_token_file && !s->auth_opts.bearer_token_file) ||
	    (o->basic_auth_file && !s->auth_opts.basic_auth_file)) {
		err = -ENOMEM;
		goto fail;
	}
	if ((err = sender_setup_auth(s, o)))
		goto fail;
	if ((err = sender_setup_curl(s, o))) {
		if (err == -ENOMEM)
			pr_err("export: %s: cannot set up libcurl", s->name);
		goto fail;
	}
	s->dirfd = spool_open(o->spool_dir, why, sizeof(why));
	if (s->dirfd < 0) {
		err = s->dirfd;
		pr_err("export: %s: spool %s: %s: refusing it", s->name, o->spool_dir, why);
		goto fail;
	}
	s->qfd = spool_quarantine_open(s->dirfd, why, sizeof(why));
	if (s->qfd < 0) {
		err = s->qfd;
		pr_err("export: %s: spool %s: %s: refusing it", s->name, o->spool_dir, why);
		goto fail;
	}
	if ((err = sender_resume(s, o->spool_dir)))
		goto fail;
	err = -pthread_create(&s->thread, NULL, worker, s);
	if (err) {
		pr_err("export: %s: cannot start the sender thread: %s", s->name, strerror(-err));
		goto fail;
	}
	return s;
fail:
	sender_release(s);
	errno = -err;
	return NULL;
}

int sender__submit(struct sender *s, uint8_t *body, size_t len, uint64_t created_ns,
		   uint64_t samples)
{
	struct req *r;
	bool wake;

	if (!body || !len) {
		free(body);
		return -EINVAL;
	}
	r = calloc(1, sizeof(*r));
	pthread_mutex_lock(&s->lock);
	if (!r || s->ho_count >= HANDOVER_MAX_REQS || s->ho_bytes + len > s->mem_max) {
		s->ho_dropped++;
		pthread_mutex_unlock(&s->lock);
		pr_warn("export: %s: hand-over queue full: request of %zu bytes dropped", s->name,
			len);
		free(r);
		free(body);
		return -ENOBUFS;
	}
	r->body = body;
	r->len = len;
	r->samples = samples;
	r->created_ns = created_ns ? created_ns : real_ns();
	if (s->ho_tail)
		s->ho_tail->next = r;
	else
		s->ho_head = r;
	s->ho_tail = r;
	s->ho_bytes += len;
	s->ho_count++;
	if (!s->ho_oldest || r->created_ns < s->ho_oldest)
		s->ho_oldest = r->created_ns;
	wake = s->busy;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (wake)
		curl_multi_wakeup(s->multi);
	return 0;
}

void sender__stats(struct sender *s, struct sender_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->pub;
	out->requests_dropped += s->ho_dropped;
	out->spool_bytes += s->ho_bytes + s->tk_bytes;
	out->spool_requests += s->ho_count + s->tk_count;
	if (s->ho_oldest && (!out->oldest_ns || s->ho_oldest < out->oldest_ns))
		out->oldest_ns = s->ho_oldest;
	if (s->tk_oldest && (!out->oldest_ns || s->tk_oldest < out->oldest_ns))
		out->oldest_ns = s->tk_oldest;
	pthread_mutex_unlock(&s->lock);
}

void sender__free(struct sender *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	curl_multi_wakeup(s->multi);
	pthread_join(s->thread, NULL);
	sender_release(s);
}

uint64_t sender__memory(struct sender *s)
{
	uint64_t n;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	n = s->ho_bytes + s->tk_bytes;
	pthread_mutex_unlock(&s->lock);
	return n;
}
