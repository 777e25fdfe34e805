/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Delivery of encoded requests to one backend endpoint: a spool directory that survives restarts,
 * and a worker thread that sends the spool oldest first over HTTP (libcurl), retrying as the
 * backend asks. The daemon's loop only hands bodies over (sender__submit), which never blocks on
 * the disk or the network.
 *
 * Per request: written to the spool first (temp file, fsync, rename, fsync of the folder; a
 * spool that cannot be written keeps the request in memory, up to mem_max_bytes, and counts
 * spool_errors), sent oldest first, deleted on a 2xx. Network errors, timeouts, 408, 429 and 5xx:
 * retried after Retry-After (seconds or an HTTP-date; at most retry_max) when the reply has one,
 * else exponential backoff with +-20% jitter from 1 s to retry_max. 413: the request is split in
 * two with opts.split and both halves replace it, in its place in the order, written to the
 * spool before it leaves (a request that cannot be split is quarantined). Other 4xx (400):
 * moved to quarantine/ with "<name>.reply" beside it ("HTTP <status>", an empty line, the reply's
 * body), the rest goes on. 401/403: the spool is kept, the sender waits (backoff), logs an error
 * each time and sets auth_failing. A spool over max_bytes drops its oldest requests (dropped); a
 * request older than max_age is dropped unsent (expired). Delivery is at least once: a request
 * whose answer was lost (a reset, a crash, sender__free during the attempt) is sent again.
 *
 * Spool files are "<created_ns>-<seq>.req", both 20 digits, holding a header (magic, format,
 * exporter, length, samples, CRC-32) and the body as sent; a split's halves append "-0" and "-1".
 * A file that does not verify (when taken up at start, and again when read to be sent) is moved
 * to quarantine/ with "<name>.invalid" beside it and counted as invalid; it is never sent and
 * never counted against the cap of the good ones. quarantine/ counts against max_bytes and
 * max_age: over them its oldest go first. See spool.h.
 */
#ifndef PROFD_EXPORT_SENDER_H
#define PROFD_EXPORT_SENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sender_opts {
	const char *name; /* "pyroscope" or "otlp": logs, status, spool headers (< 16 chars) */
	const char *url;  /* the full endpoint URL, path included */
	const char *content_type;     /* "application/proto", "application/x-protobuf" */
	const char *content_encoding; /* NULL, or "gzip" when bodies are gzip-compressed */
	const char *spool_dir;	/* this sender's folder (created 0700 with parents; dirsafe_open) */
	uint64_t max_bytes;	/* spool cap; 0: 1 GiB */
	uint64_t max_age_ns;	/* older requests expire; 0: 1 h */
	uint64_t timeout_ns;	/* per request; 0: 30 s */
	uint64_t retry_max_ns;	/* longest wait between attempts; 0: 5 min */
	uint64_t mem_max_bytes; /* requests the spool cannot take, kept in memory; 0: 64 MiB */
	const char *ca_file;	/* NULL: the system CAs */
	const char *cert_file;	/* client certificate (PEM) for mTLS; NULL: none */
	const char *key_file;
	const char *bearer_token_file; /* "Authorization: Bearer <file's first line>" */
	const char *basic_auth_file;   /* one line "user:password" */
	const char *const *headers;    /* extra "Name: value" lines (X-Scope-OrgID) */
	size_t nheaders;
	/*
	 * Split a request the backend refused as too large (413) into two smaller ones: returns 0
	 * and *a, *b (malloc'd, the sender frees them), or a negative errno when it cannot be split
	 * (one series alone). NULL: never split.
	 */
	int (*split)(const uint8_t *body, size_t len, uint8_t **a, size_t *alen, uint8_t **b,
		     size_t *blen);
	/*
	 * How many samples a request carries: called on the worker thread for the halves of a
	 * split only, to share the request's count between them. NULL: in halves.
	 */
	uint64_t (*count)(const uint8_t *body, size_t len);
};

struct sender_stats {
	uint64_t requests_sent;	       /* answered 2xx */
	uint64_t requests_retried;     /* attempts that failed and will be tried again */
	uint64_t requests_dropped;     /* spool over its cap, or memory queue full */
	uint64_t requests_expired;     /* older than max_age, never sent */
	uint64_t requests_quarantined; /* refused by the backend (4xx) */
	uint64_t requests_invalid;     /* spool files that did not verify: quarantined, not sent */
	uint64_t requests_split;       /* 413s that split a request */
	uint64_t samples_sent;	       /* of the requests answered 2xx (as submitted) */
	uint64_t samples_resumed;      /* of the requests taken up from a previous run's spool */
	uint64_t bytes_sent;	       /* bodies answered 2xx */
	uint64_t spool_errors;	       /* spool writes that failed (disk full): kept in memory */
	uint64_t spool_bytes;	       /* spooled and not sent yet, memory queue included */
	uint64_t spool_requests;
	uint64_t oldest_ns;	      /* CLOCK_REALTIME creation of the oldest unsent; 0: none */
	uint64_t quarantine_requests; /* in quarantine/ now */
	uint64_t quarantine_bytes;    /* theirs and their notes' */
	uint64_t quarantine_dropped;  /* removed from quarantine/ by max_bytes or max_age */
	uint64_t last_success_ns;     /* CLOCK_REALTIME; 0: never */
	uint64_t last_error_ns;	      /* CLOCK_REALTIME; 0: never */
	char last_error[256];	      /* one line: "HTTP 503 (retry in 4 s)", "connect: ..." */
	bool auth_failing;	      /* the last answer was 401/403 */
};

struct sender;

/*
 * Start a sender: creates the spool folder, takes up the requests a previous run left there
 * (oldest first) and starts the worker thread. Returns the sender or NULL with errno set (and
 * one logged line saying why: a folder another user can write or a link on its path (EPERM,
 * ELOOP), not writable, unreadable token file, ...).
 */
struct sender *sender__new(const struct sender_opts *opts);
/*
 * Queue a request. Takes ownership of body (malloc'd) in every case. created_ns is its
 * CLOCK_REALTIME creation time (for expiry and the spool's order; 0: now); samples the CPU
 * samples it carries (samples_sent adds them when it is delivered). Never blocks on I/O.
 * Returns 0, -EINVAL for an empty body, or -ENOBUFS when the in-memory hand-over queue is full
 * (mem_max_bytes or 65536 requests not yet taken by the worker): the request is dropped and
 * counted.
 */
int sender__submit(struct sender *s, uint8_t *body, size_t len, uint64_t created_ns,
		   uint64_t samples);
/*
 * A copy of the counters (thread-safe), all of one moment: every request submitted or taken up
 * is in exactly one of sent, quarantined, invalid, dropped, expired or spool_requests (a split
 * adds one), and samples_sent never passes what was submitted and taken up.
 */
void sender__stats(struct sender *s, struct sender_stats *out);
/* Bytes of the requests submitted and held in memory until the worker spools them. */
uint64_t sender__memory(struct sender *s);
/*
 * Stop: requests not spooled yet are written to the spool (best effort) so the next run sends
 * them; an attempt in flight gets at most 1 s to finish, then is abandoned (and sent again by
 * the next run). NULL is fine.
 */
void sender__free(struct sender *s);

#endif
