/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Inside the uplink: uplink.c (the thread's state, its state machine, logging, start, exit and
 * fork), uplink_conn.c (the connection to the daemon and the request/reply exchange). Not for
 * other modules.
 */
#ifndef PROFD_CUPTI_UPLINK_PRIV_H
#define PROFD_CUPTI_UPLINK_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/un.h>

#include "frame.h"
#include "gate.h"
#include "profd.pb-c.h"
#include "uplink.h"

/* Conditions logged once per process, however often they recur. */
enum {
	LOGGED_NO_DAEMON = 1 << 0,
	LOGGED_PERMISSION = 1 << 1,
	LOGGED_CONNECT = 1 << 2,
	LOGGED_REFUSED = 1 << 3,
	LOGGED_LOST = 1 << 4,
	LOGGED_INIT = 1 << 5,
};

struct uplink {
	struct evq *q;
	struct core_info info; /* the thread's own copy; core__enable updates it */
	bool init_ok;	       /* core__init succeeded: enabling may be tried */
	bool verbose;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint32_t retry_min_ms, retry_max_ms;
	unsigned logged;
	atomic_int wake_fd;   /* eventfd: a line to write, or process exit wants a last flush */
	struct gate gate;     /* when enabling may be tried again */
	uint64_t grace_until; /* connection lost while collecting: disable at this time */
	/* Held around every core call; process exit takes it to stop them for good. */
	pthread_mutex_t core_lock;
	atomic_bool core_off;	 /* exiting or forked: the core is never called again */
	atomic_bool enabling;	 /* core__enable in progress: exit waits longer for it */
	atomic_bool exit_wanted; /* process exit asked for a last flush */
	atomic_int fd;		 /* the daemon connection, -1 when none */
	atomic_bool enabled;	 /* a mirror of core__enabled() for the exit handler */
	atomic_size_t stack_size;
	/* Last flush at exit: requested by uplink__exiting, done by the thread. */
	pthread_mutex_t exit_lock;
	pthread_cond_t exit_cond;
	bool exit_requested, exit_flush_done;
};

struct link {
	int fd;
	struct frame_reader *reader;
	Profd__Response *resp; /* set by on_frame */
	uint32_t interval_ms;
	bool want_enable; /* the daemon's last GpuControl.enable */
	bool pending;	  /* it started asking, and no enable was tried since */
	struct ev *evs;	  /* drained, not yet sent */
	size_t nevs, off;
	uint64_t drained; /* events drained on this connection */
	bool more;	  /* the last drain was full: the queue may hold more */
	/*
	 * The watermark of a flush (until_pend) holds once every event queued before the flush
	 * returned (until_target, in evq__pushed counts) is in a batch; from then on every batch
	 * carries it (until_ok) until a later one holds.
	 */
	uint64_t until_ok, until_pend, until_target;
	struct ev *opens; /* NVTX ranges open at until_pend */
	size_t nopens, open_off;
	char err[200]; /* the daemon's Error message, for the log */
};

/* uplink.c: the thread's state. */
extern struct uplink up;

/* Uplink thread only: recorded and written at once. */
void uplink_log_once(unsigned cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* uplink_conn.c */
/*
 * Send req and wait for a reply of kind want. Returns 0 with *out set (caller frees),
 * -EREMOTEIO when the daemon answered with an Error (l->err has its message), -EPROTO for a
 * reply of another kind, or the I/O error.
 */
int uplink_call(struct link *l, const Profd__Request *req, Profd__Response__MsgCase want,
		Profd__Response **out, uint32_t timeout_ms);
/* Connect to the daemon's socket. Returns the socket, or a negative errno (logged once). */
int uplink_connect(void);
/* The Hello exchange. Returns 0, -EREMOTEIO (refused, logged), -EPROTO or the I/O error. */
int uplink_hello(struct link *l);

#endif
