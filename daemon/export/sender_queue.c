// SPDX-License-Identifier: BSD-2-Clause
/*
 * The queue of unsent requests, sorted by spool name (oldest first), and the spool files under
 * it: taking up what was handed over, quarantine/, the caps, expiry, and the spool of a previous
 * run.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* Where name goes in quarantine/'s list (sorted by name). */
static size_t quar_pos(const struct sender *s, const char *name)
{
	size_t lo = 0, hi = s->nquar;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(s->quar[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Count name (bytes with its notes) as in quarantine/. 0 or -ENOMEM. */
static int quar_add(struct sender *s, const char *name, uint64_t created_ns, uint64_t bytes)
{
	size_t at = quar_pos(s, name);

	if (at < s->nquar && !strcmp(s->quar[at].name, name)) {
		/* the same name again (a request sent twice across runs, refused twice) */
		s->quar_bytes = s->quar_bytes - s->quar[at].bytes + bytes;
		s->quar[at].bytes = bytes;
		return 0;
	}
	if (s->nquar == s->quar_cap) {
		size_t cap = s->quar_cap ? 2 * s->quar_cap : 64;
		struct quar *nq = realloc(s->quar, cap * sizeof(*nq));

		if (!nq)
			return -ENOMEM;
		s->quar = nq;
		s->quar_cap = cap;
	}
	memmove(&s->quar[at + 1], &s->quar[at], (s->nquar - at) * sizeof(*s->quar));
	memcpy(s->quar[at].name, name, SPOOL_NAME_MAX);
	s->quar[at].created_ns = created_ns;
	s->quar[at].bytes = bytes;
	s->quar_bytes += bytes;
	s->nquar++;
	return 0;
}

/* Remove the oldest in quarantine/, its notes included. */
static void quar_drop_oldest(struct sender *s)
{
	spool_quarantine_remove(s->qfd, s->quar[0].name);
	s->quar_bytes -= s->quar[0].bytes;
	s->nquar--;
	memmove(&s->quar[0], &s->quar[1], s->nquar * sizeof(*s->quar));
	s->w.quarantine_dropped++;
}

int sender_quarantine(struct sender *s, struct req *r, const uint8_t *body, const char *suffix,
		      const uint8_t *note, size_t note_len)
{
	uint64_t bytes = note_len + (body ? SPOOL_HDR_LEN + r->len : 0);
	struct stat st;
	int err;

	if (!body && !fstatat(s->dirfd, r->name, &st, AT_SYMLINK_NOFOLLOW))
		bytes += spool_disk_bytes(&st);
	err = spool_quarantine(s->dirfd, s->qfd, r->name, s->name, body, r->len, r->samples, suffix,
			       note, note_len);
	if (!err)
		err = quar_add(s, r->name, r->created_ns, bytes);
	if (err) {
		/* not moved: it must not be sent, nor stay to be found again */
		if (!r->body)
			spool_remove(s->dirfd, r->name);
		s->w.requests_dropped++;
	}
	/* the file is in quarantine/ or gone: only the entry is dropped */
	if (r == s->inflight)
		sender_abort_inflight(s);
	sender_q_unlink(s, r);
	free(r->body);
	free(r);
	return err;
}

void sender_invalid(struct sender *s, struct req *r, const char *why)
{
	char name[SPOOL_NAME_MAX], note[SPOOL_WHY_MAX + 2];
	int n, err;

	memcpy(name, r->name, sizeof(name));
	n = snprintf(note, sizeof(note), "%s\n", why);
	err = sender_quarantine(s, r, NULL, ".invalid", (const uint8_t *)note,
				n < (int)sizeof(note) ? (size_t)n : sizeof(note) - 1);
	if (err) {
		pr_err("export: %s: spool: %s: %s, and quarantine/ failed (%s): deleted", s->name,
		       name, why, strerror(-err));
		return;
	}
	s->w.requests_invalid++;
	/* a damaged spool could hold thousands: the first few by name, then a count */
	if (s->w.requests_invalid <= 5)
		pr_warn("export: %s: spool: %s: %s: moved to quarantine/, not sent", s->name, name,
			why);
	else if (s->w.requests_invalid == 6)
		pr_warn("export: %s: spool: more files that do not verify: quarantined without a "
			"line each (profctl status counts them)",
			s->name);
}

void sender_verify_resumed(struct sender *s)
{
	struct req *r, *next;

	s->verify_resumed = false;
	for (r = s->head; r; r = next) {
		struct spool_info info;
		char why[SPOOL_WHY_MAX];
		int err;

		next = r->next;
		if (!r->unverified)
			continue;
		r->unverified = false;
		err = spool_read(s->dirfd, r->name, s->name, s->max_bytes, true, NULL, &info, why,
				 sizeof(why));
		if (err == -EBADMSG) {
			/* its samples were counted as taken up from the header: not any more */
			s->w.samples_resumed -= r->samples;
			sender_invalid(s, r, why);
		} else if (err) {
			sender_q_drop(s, r);
			s->w.requests_dropped++;
		}
	}
	/* only now does what is left count against the cap: the bad ones are out of it */
	sender_enforce_caps(s);
	sender_publish(s);
}

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
	/* quarantine/ first: nothing there will be sent; then the oldest unsent */
	while (s->nquar && s->q_bytes + s->quar_bytes > s->max_bytes)
		quar_drop_oldest(s);
	while (s->head && s->q_bytes > s->max_bytes) {
		bytes += s->head->len;
		dropped++;
		sender_q_drop(s, s->head);
	}
	if (!dropped)
		return;
	s->w.requests_dropped += dropped;
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
		err = spool_write(s->dirfd, r->name, s->name, r->body, r->len, r->samples);
		if (!err) {
			free(r->body);
			r->body = NULL;
			if (s->spool_failing)
				pr_info("export: %s: spool writable again", s->name);
			s->spool_failing = false;
		} else {
			s->w.spool_errors++;
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

void sender_expire(struct sender *s)
{
	uint64_t now = real_ns(), n = 0, nq = s->w.quarantine_dropped;
	struct req *r, *next;

	while (s->nquar && now > s->quar[0].created_ns &&
	       now - s->quar[0].created_ns > s->max_age_ns)
		quar_drop_oldest(s);
	if (s->w.quarantine_dropped != nq)
		sender_publish(s);

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
	s->w.requests_expired += n;
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
			err = spool_write(s->dirfd, r->name, s->name, r->body, r->len, r->samples);
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

int sender_resume(struct sender *s, const char *dir)
{
	struct spool_file *files;
	size_t n, nbad = 0;
	int err;

	err = spool_scan(s->qfd, true, &files, &n);
	if (err) {
		pr_err("export: %s: %s/quarantine: %s", s->name, dir, strerror(-err));
		return err;
	}
	for (size_t i = 0; i < n && !err; i++)
		err = quar_add(s, files[i].name, files[i].created_ns, files[i].size);
	free(files);
	if (err)
		return err;
	err = spool_scan(s->dirfd, false, &files, &n);
	if (err) {
		pr_err("export: %s: %s: %s", s->name, dir, strerror(-err));
		return err;
	}
	for (size_t i = 0; i < n; i++) {
		struct req *r = calloc(1, sizeof(*r));
		struct spool_info info = {0};
		char why[SPOOL_WHY_MAX];

		if (!r) {
			free(files);
			return -ENOMEM;
		}
		memcpy(r->name, files[i].name, sizeof(r->name));
		r->created_ns = files[i].created_ns;
		if (files[i].seq >= s->seq)
			s->seq = files[i].seq + 1;
		/* header and size now; the bodies' CRCs on the worker (a whole spool to read) */
		err = spool_read(s->dirfd, r->name, s->name, s->max_bytes, false, NULL, &info, why,
				 sizeof(why));
		r->len = info.len;
		r->samples = info.samples;
		r->unverified = true;
		sender_q_insert(s, r);
		if (err == -EBADMSG) {
			sender_invalid(s, r, why);
			nbad++;
		} else if (err) {
			pr_warn("export: %s: spool: %s: %s; left alone", s->name, files[i].name,
				strerror(-err));
			sender_q_unlink(s, r);
			free(r);
		} else {
			s->w.samples_resumed += info.samples;
		}
	}
	free(files);
	if (s->q_count)
		pr_info("export: %s: resuming %" PRIu64 " requests (%" PRIu64 " bytes) from %s",
			s->name, s->q_count, s->q_bytes, dir);
	if (nbad)
		pr_warn("export: %s: %zu files in %s did not verify (see quarantine/)", s->name,
			nbad, dir);
	s->verify_resumed = s->q_count > 0;
	if (!s->verify_resumed)
		sender_enforce_caps(s);
	sender_publish(s);
	return 0;
}
