/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The uplink: one detached thread per process that talks to the daemon over its unix socket.
 * It reports the core's state (GpuAttach), follows the daemon's GpuControl (enable, disable,
 * flush interval), and drains the event queue into GpuBatch messages. It is the only code that
 * touches the socket, so no CUDA thread ever waits on the daemon. A missing or restarting
 * daemon is retried with a backoff for the life of the process.
 */
#ifndef PROFD_CUPTI_UPLINK_H
#define PROFD_CUPTI_UPLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "events.h"

/* Longest string sent in a GpuBatch; longer names are cut at a UTF-8 boundary below this. */
#define UPLINK_MAX_STRING 16384
/* A GpuBatch frame stays below this (the daemon accepts requests up to FRAME_MAX_REQUEST). */
#define UPLINK_BATCH_BUDGET (512u << 10)
/* Events per GpuBatch at most. */
#define UPLINK_BATCH_EVENTS 4096
/* Flush interval bounds (GpuControl.flush_interval_ms is clamped to them) and default. */
#define UPLINK_INTERVAL_MIN_MS 50
#define UPLINK_INTERVAL_MAX_MS 5000
#define UPLINK_INTERVAL_DEFAULT_MS 250
/*
 * After the daemon's connection is lost, collection goes on this long (a restarting daemon
 * comes back within it, and the application is spared a disable and an enable); what is
 * collected meanwhile cannot be sent and is dropped.
 */
#define UPLINK_GRACE_MS 5000
/* The uplink thread's stack: CUPTI and driver code run on it (enable, flush). */
#define UPLINK_STACK_SIZE (1u << 20)
/* Process exit waits this long for a core call in progress, or this long for an enable. */
#define UPLINK_EXIT_CORE_WAIT_MS 200
#define UPLINK_EXIT_ENABLE_WAIT_MS 2000
/* A reply from the daemon, or room to send, must come within this. */
#define UPLINK_IO_TIMEOUT_MS 5000

struct uplink_opts {
	const char *socket_path; /* NULL: $PROFD_SOCKET, else the default */
	uint32_t retry_min_ms;	 /* first wait after a failed connect; 0: 1 s */
	uint32_t retry_max_ms;	 /* the wait doubles up to this; 0: 30 s */
	bool quiet;		 /* no log lines on stderr */
	bool verbose;		 /* also "no daemon at ..." ($PROFD_CUPTI_VERBOSE=1 sets it too) */
};

/*
 * Start the uplink thread (detached, every signal blocked) for queue q, with the state that
 * core__init reported (copied). Once per process: a second call returns -EALREADY. Returns 0,
 * or a negative errno when the thread could not be started (the library then stays idle).
 * Reads the environment here, on the caller's thread, never later.
 */
int uplink__start(struct evq *q, const struct core_info *info, const struct uplink_opts *opts);

/*
 * Called at process exit: waits briefly for a core call in progress, then keeps the uplink
 * thread from calling into the core (and so into CUPTI) again while the process tears down.
 */
void uplink__exiting(void);

/*
 * In a forked child: the thread is gone; drop the parent's socket, never call the core, turn
 * the core's callbacks into no-ops. Async-signal-safe (called from pthread_atfork's child).
 */
void uplink__forked_child(void);

/*
 * Record one line "profd_cupti: ..." for stderr, unless quiet. Any thread: never writes, never
 * blocks, keeps errno; the line waits in a fixed slot (dropped when all are taken) until the
 * uplink thread, which blocks every signal, writes it. An application thread never writes to
 * stderr for us: a closed pipe would raise SIGPIPE in it, a full one would block it.
 */
void uplink__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Write the recorded lines to stderr, oldest first, one write() each; a line that does not
 * fit in a full pipe is dropped. The uplink thread calls it; tests too.
 */
void uplink__write_logs(void);
/* Silence uplink__log from now on (PROFD_CUPTI_QUIET); set before anything may log. */
void uplink__set_quiet(bool quiet);
/* Tests: the uplink thread's stack size (0 until the thread runs). */
size_t uplink__test_stack_size(void);

#endif
