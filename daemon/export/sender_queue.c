// SPDX-License-Identifier: BSD-2-Clause
/*
 * The queue of unsent requests, sorted by spool name (oldest first), and the spool files under
 * it: taking up what was handed over, the caps, expiry, and the spool of a previous run.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sender_priv.h"

void sender_q_insert(struct sender *s, struct req *r)
{
	struct req *after = s->tail;

	/* requests mostly come in order: look from the newest end */
	while (after && strcmp(after->name, r->name) > 0)
		after = after->prev;
	r->prev = after;
	r->next = after ? after->next : s->head;
	if (r->next)
		r->next->prev = r;
	else
		s->tail = r;
	if (after)
		after->next = r;
	else
		s->head = r;
	s->q_bytes += r->len;
	s->q_count++;
	if (r->body)
		s->mem_bytes += r->len;
}

void sender_q_unlink(struct sender *s, struct req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		s->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		s->tail = r->prev;
	r->prev = r->next = NULL;
	s->q_bytes -= r->len;
	s->q_count--;
	if (r->body)
		s->mem_bytes -= r->len;
}

/* Take r out of the queue and forget it, its spool file included. */
void sender_q_drop(struct sender *s, struct req *r)
{
	int err;

	if (r == s->inflight)
		sender_abort_inflight(s);
	sender_q_unlink(s, r);
	if (!r->body) {
		err = spool_remove(s->dirfd, r->name);
		if (err && err != -ENOENT)
			pr_warn("export: %s: spool: %s: %s", s->name, r->name, strerror(-err));
	}
	free(r->body);
	free(r);
}

/* Drop the oldest requests until the queue fits max_bytes and memory fits mem_max. */
void sender_enforce_caps(struct sender *s)
{
	uint64_t dropped = 0, bytes = 0;
	struct req *r, *next;

	for (r = s->head; r && s->mem_bytes > s->mem_max; r = next) {
		next = r->next;
		if (!r->body)
			continue;
		bytes += r->len;
		dropped++;
		sender_q_drop(s, r);
	}
	while (s->head && s->q_bytes > s->max_bytes) {
		bytes += s->head->len;
		dropped++;
		sender_q_drop(s, s->head);
	}
	if (!dropped)
		return;
	stat_add(s, &s->st.requests_dropped, dropped);
	pr_warn("export: %s: spool full: dropped the %" PRIu64 " oldest requests (%" PRIu64
		" bytes)",
		s->name, dropped, bytes);
}

/* Spool the requests handed over (a list linked by next) and queue them. */
void sender_take_in(struct sender *s, struct req *in)
{
	struct req *r, *next;
	int err;

	if (!in)
		return;
	for (r = in; r; r = next) {
		next = r->next;
		r->next = NULL;
		spool_name(r->name, r->created_ns, s->seq++);
		err = spool_write(s->dirfd, r->name, r->body, r->len);
		if (!err) {
			free(r->body);
			r->body = NULL;
			if (s->spool_failing)
				pr_info("export: %s: spool writable again", s->name);
			s->spool_failing = false;
		} else {
			stat_add(s, &s->st.spool_errors, 1);
			if (!s->spool_failing)
				pr_err("export: %s: spool: %s: %s; keeping requests in memory",
				       s->name, r->name, strerror(-err));
			s->spool_failing = true;
		}
		sender_q_insert(s, r);
	}
	sender_enforce_caps(s);
	sender_publish(s);
}

/* Drop the requests older than max_age (never the one in flight). */
void sender_expire(struct sender *s)
{
	uint64_t now = real_ns(), n = 0;
	struct req *r, *next;

	for (r = s->head; r && now > r->created_ns && now - r->created_ns > s->max_age_ns;
	     r = next) {
		next = r->next;
		if (r == s->inflight)
			continue;
		sender_q_drop(s, r);
		n++;
	}
	if (!n)
		return;
	stat_add(s, &s->st.requests_expired, n);
	pr_warn("export: %s: %" PRIu64 " requests older than %" PRIu64 " s expired unsent", s->name,
		n, (uint64_t)(s->max_age_ns / NSEC_PER_SEC));
	sender_publish(s);
}

/* At exit: what is only in memory goes to the spool for the next run (best effort). */
void sender_spool_leftovers(struct sender *s)
{
	uint64_t lost = 0, kept = 0;
	int err = 0;

	for (struct req *r = s->head; r; r = r->next) {
		if (r->body) {
			err = spool_write(s->dirfd, r->name, r->body, r->len);
			if (err) {
				lost++;
				continue;
			}
		}
		kept++;
	}
	if (lost)
		pr_err("export: %s: %" PRIu64 " requests could not be spooled at exit (%s): lost",
		       s->name, lost, strerror(-err));
	if (kept)
		pr_info("export: %s: %" PRIu64 " requests left in the spool for the next run",
			s->name, kept);
}

/* Take up what a previous run left in the spool. */
int sender_resume(struct sender *s, const char *dir)
{
	struct spool_file *files;
	size_t n;
	int err;

	err = spool_scan(s->dirfd, &files, &n);
	if (err) {
		pr_err("export: %s: %s: %s", s->name, dir, strerror(-err));
		return err;
	}
	for (size_t i = 0; i < n; i++) {
		struct req *r = calloc(1, sizeof(*r));

		if (!r) {
			free(files);
			return -ENOMEM;
		}
		memcpy(r->name, files[i].name, sizeof(r->name));
		r->created_ns = files[i].created_ns;
		r->len = files[i].size;
		sender_q_insert(s, r);
		if (files[i].seq >= s->seq)
			s->seq = files[i].seq + 1;
	}
	free(files);
	if (n)
		pr_info("export: %s: resuming %zu requests (%" PRIu64 " bytes) from %s", s->name, n,
			s->q_bytes, dir);
	sender_enforce_caps(s);
	sender_publish(s);
	return 0;
}
