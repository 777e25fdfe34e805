/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The CUPTI side of the library: loading CUPTI, the subscriber slot, callbacks (launch probe,
 * rate limit, weights), activity buffers, clock conversion, NVTX. The uplink thread drives it:
 * core__enable when the daemon asks for collection, core__disable when it stops asking or goes
 * away, core__flush on every batch interval. Decoded events go into the evq given to
 * core__init. All functions are called from the uplink thread only, except the CUPTI
 * callbacks the core registers itself.
 */
#ifndef PROFD_CUPTI_CORE_H
#define PROFD_CUPTI_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "events.h"

/* The numbers of proto's GpuState and GpuClock. */
struct core_info {
	int state;	  /* PROFD__GPU_STATE__* */
	char detail[160]; /* one line when state is not READY */
	uint32_t cupti_version;
	char cupti_path[256];	    /* the libcupti in use, "" if none */
	char library_path[256];	    /* this .so's own file (dladdr), for the USDT attach */
	int clock;		    /* PROFD__GPU_CLOCK__*; UNSPECIFIED until the first enable */
	uint32_t launch_rate_limit; /* per thread per second; 0: every launch probed */
	uint32_t max_delay_ms;	    /* the delay bound of the flush; 0: never forced */
};

/*
 * Find CUPTI and resolve its function table: the one already in the process, else
 * $PROFD_CUPTI_PATH when set. Neither: the system's libcupti is loaded only by the first
 * core__enable (a process that is never profiled never gets it), and info says READY with an
 * empty cupti_path and no version until then. Never subscribes, never logs (it runs inside
 * cuInit on an application thread). Returns 0 (info->state READY) or a negative errno with
 * info->state/detail saying why; the library then stays idle and the uplink reports the state.
 */
int core__init(struct evq *q, struct core_info *info);
/*
 * Load the system's CUPTI if core__init deferred it, subscribe (once: the subscription stays
 * for the life of the process), set the clock, enable callbacks and activity kinds. Returns 0,
 * or a negative errno with info->state/detail updated (SUBSCRIBER_TAKEN when another tool holds
 * the slot: nothing is enabled then and the slot is left alone; ACTIVITY_TAKEN, -EBUSY, once
 * another client of the process took the activity API (core__taken); NO_CUPTI when the
 * deferred load failed).
 */
int core__enable(struct core_info *info);
/*
 * Disable activity and callbacks, flush what is buffered. The subscription stays for the life of
 * the process: every CUPTI session after the first gets wrong graph-launch correlation ids on
 * CUPTI before 13.1 Update 1, so the next enable reuses it. Idempotent.
 */
void core__disable(void);
/*
 * Ask CUPTI for the buffers whose records are all complete (forced: every buffer, losing the
 * records after the first incomplete one in each; only for disable and exit). An unforced
 * flush is forced after all when a buffer CUPTI holds, or a launch whose record is missing, is
 * older than the delay bound (PROFD_CUPTI_MAX_DELAY_MS): CUPTI returns a buffer only once every
 * record in it is complete, which a thread that keeps the GPU busy may never let happen. It
 * checks CUPTI's clock and whether records still reach us (core__taken). Grows the buffer
 * pool when it ran dry. Sets *complete_until_ns to a watermark: every record that ended before
 * it has been pushed to the queue. It is the smaller of the flush's start and the API-enter
 * time of the oldest traced launch whose record is still missing (launches older than
 * 10 s are taken as lost), never less than the previous one, and it does not move while a
 * buffer is being decoded on another thread. 0 if unknown. Safe when disabled.
 */
void core__flush(bool forced, uint64_t *complete_until_ns);
/* Whether core__enable succeeded and core__disable was not called since. */
bool core__enabled(void);
/*
 * Whether another CUPTI client of the process took the activity API from us (a flush found
 * CUPTI's clock replaced, or launches whose records no longer reach us): the core stopped for
 * good and leaves the activity API to that client. Returns true once, setting info's state to
 * ACTIVITY_TAKEN with the reason, so the caller tells the daemon.
 */
bool core__taken(struct core_info *info);
/* Counts since the previous call: zero-timestamp records, forced flushes. Any thread. */
void core__take_counts(uint64_t *zero_time_records, uint64_t *forced_flushes);
/* In a forked child: every callback becomes a no-op (core_forked). Async-signal-safe. */
void core__forked_child(void);

#endif
