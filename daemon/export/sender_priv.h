/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The sender's insides, shared by sender.c (the worker and the API), sender_queue.c (the queue
 * of unsent requests and the spool under it) and sender_http.c (libcurl set-up and callbacks).
 * Who may touch what: the fields under "the worker's alone" belong to the worker thread (and to
 * sender__new before it starts); the fields under "shared" are read and written under lock.
 *
 * The counters: the worker counts in w, its own, and copies w with the queue's and quarantine's
 * state into pub under the lock at the end of each step (sender_publish), so a reader sees every
 * counter of one moment: a request answered 2xx leaves the queue in the same copy that counts
 * it sent. Only what sender__submit does is counted under the lock directly.
 */
#ifndef PROFD_EXPORT_SENDER_PRIV_H
#define PROFD_EXPORT_SENDER_PRIV_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sender.h"
#include "spool.h"
#include "timeutil.h"

#define DEF_MAX_BYTES (1ull << 30)
#define DEF_MAX_AGE_NS (3600 * NSEC_PER_SEC)
#define DEF_TIMEOUT_NS (30 * NSEC_PER_SEC)
#define DEF_RETRY_MAX_NS (300 * NSEC_PER_SEC)
#define DEF_MEM_MAX (64ull << 20)
#define HANDOVER_MAX_REQS 65536
#define REPLY_MAX (64u << 10)	   /* reply bytes kept for the quarantine and the error line */
#define STOP_GRACE_NS NSEC_PER_SEC /* how long sender__free lets an attempt finish */
#define IDLE_WAKE_NS (60 * NSEC_PER_SEC)

struct req {
	struct req *prev, *next;
	uint64_t created_ns;
	size_t len;
	uint64_t samples; /* CPU samples it carries (the exporter's count, kept in the header) */
	bool unverified;  /* taken up from a previous run: its body's CRC not checked yet */
	uint8_t *body; /* handed over, or kept in memory (the spool failed); NULL: in the spool */
	char name[SPOOL_NAME_MAX];
};

/* A request in quarantine/ with its notes. */
struct quar {
	char name[SPOOL_NAME_MAX];
	uint64_t created_ns;
	uint64_t bytes;
};

struct sender {
	char *name, *url;
	uint64_t max_bytes, max_age_ns, retry_max_ns, mem_max;
	int (*split)(const uint8_t *body, size_t len, uint8_t **a, size_t *alen, uint8_t **b,
		     size_t *blen);
	uint64_t (*count)(const uint8_t *body, size_t len);
	int dirfd, qfd; /* the spool folder and its quarantine/ */
	CURLM *multi;
	CURL *easy;
	struct curl_slist *headers;
	char *userpwd;
	/* What sender_setup_auth read, kept to read the credentials again after a 401/403. */
	struct sender_opts auth_opts; /* name, files, headers, content type and encoding */
	char errbuf[CURL_ERROR_SIZE];

	/* The worker's alone. */
	struct req *head, *tail; /* unsent, oldest first */
	uint64_t q_bytes, q_count, mem_bytes;
	struct quar *quar; /* quarantine/, oldest first */
	size_t nquar, quar_cap;
	uint64_t quar_bytes;
	bool verify_resumed;   /* requests taken up from the spool wait for sender_verify_resumed */
	struct sender_stats w; /* the counters, published to pub by sender_publish */
	struct req *inflight;  /* the request of the attempt in flight */
	uint8_t *send_buf;     /* its body when read from the spool */
	uint64_t next_attempt_ns; /* mono_ns() */
	unsigned failures;	  /* consecutive failed attempts */
	uint64_t seq, rand;
	bool spool_failing; /* the last spool write failed (log the first of a streak) */
	/* the reply of the attempt in flight */
	bool has_retry_after;
	uint64_t retry_after_ns;
	uint8_t reply[REPLY_MAX];
	size_t reply_len;
	bool reply_cut; /* the body went past REPLY_MAX: the transfer was stopped there */

	/* Shared, under lock. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop, busy; /* busy: a transfer is in flight (submit interrupts curl_multi_poll) */
	struct req *ho_head, *ho_tail;
	uint64_t ho_bytes, ho_count, ho_oldest, ho_dropped;
	/* taken from the hand-over by the worker, not in pub yet: still counted as waiting */
	uint64_t tk_bytes, tk_count, tk_oldest;
	struct sender_stats pub; /* w and the queue as the worker last published them */
	pthread_t thread;
};

static inline uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* sender.c */
void sender_set_error(struct sender *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copy the worker's counters and what the queue and quarantine/ hold now to sender__stats. */
void sender_publish(struct sender *s);
/* Abandon the attempt in flight, if any; its request stays queued. */
void sender_abort_inflight(struct sender *s);

/* sender_queue.c: the queue, oldest first, and the spool files under it (worker only) */
void sender_q_insert(struct sender *s, struct req *r);
void sender_q_unlink(struct sender *s, struct req *r);
/* Take r out of the queue and forget it, its spool file included. */
void sender_q_drop(struct sender *s, struct req *r);
/*
 * Drop the oldest until the queue and quarantine/ together fit max_bytes (quarantine/ first: a
 * refused request will never be delivered, an unsent one still may) and memory fits mem_max.
 */
void sender_enforce_caps(struct sender *s);
/*
 * Move r (out of the queue, freed) to quarantine/ with the note "<name><suffix>": for a file
 * that did not verify (".invalid", body NULL) or a request the backend refused (".reply"; body
 * the request when it is only in memory). Returns 0, or -errno (logged; r is dropped).
 */
int sender_quarantine(struct sender *s, struct req *r, const uint8_t *body, const char *suffix,
		      const uint8_t *note, size_t note_len);
/* r's spool file did not verify (why): quarantined and counted as invalid, never sent. */
void sender_invalid(struct sender *s, struct req *r, const char *why);
/* Check the body of each request taken up from the spool (worker, before the first attempt). */
void sender_verify_resumed(struct sender *s);
/* Spool the requests handed over (a list linked by next) and queue them. */
void sender_take_in(struct sender *s, struct req *in);
/* Drop the requests and quarantined ones older than max_age (never the one in flight). */
void sender_expire(struct sender *s);
/*
 * Take up what a previous run left in the spool folder dir and in its quarantine/; files whose
 * header does not verify are quarantined at once. 0 or -errno (logged).
 */
int sender_resume(struct sender *s, const char *dir);
/* At exit: what is only in memory goes to the spool for the next run (best effort). */
void sender_spool_leftovers(struct sender *s);

/* sender_http.c */
/* Headers and credentials of o into s: 0, or -errno with one line logged. */
int sender_setup_auth(struct sender *s, const struct sender_opts *o);
/*
 * After a 401/403: read the credentials files again (a token rotated on disk) and put the new
 * ones on the handle. Returns true when they changed (the next attempt can go at once).
 */
bool sender_reload_auth(struct sender *s);
/* curl_global_init (once), the multi and easy handles and their options: 0 or -errno. */
int sender_setup_curl(struct sender *s, const struct sender_opts *o);

#endif
