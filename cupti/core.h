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
	int state;	      /* PROFD__GPU_STATE__* */
	char detail[160];     /* one line when state is not READY */
	uint32_t cupti_version;
	char cupti_path[256]; /* the libcupti in use, "" if none */
	char library_path[256]; /* this .so's own file (dladdr), for the USDT attach */
	int clock;	      /* PROFD__GPU_CLOCK__*; UNSPECIFIED until the first enable */
	uint32_t launch_rate_limit; /* per thread per second; 0: every launch probed */
};

/*
 * Find and load CUPTI (the one already in the process first; $PROFD_CUPTI_PATH when set is the
 * only other candidate, else the system's), resolve the function table. Never subscribes.
 * Returns 0 (info->state READY) or a negative errno with info->state/detail saying why; the
 * library then stays idle and the uplink reports the state.
 */
int core__init(struct evq *q, struct core_info *info);
/*
 * Subscribe, set the clock, enable callbacks and activity kinds. Returns 0, or a negative errno
 * with info->state/detail updated (SUBSCRIBER_TAKEN when another tool holds the slot: nothing
 * is enabled then and the slot is left alone).
 */
int core__enable(struct core_info *info);
/* Disable activity and callbacks, flush what is buffered, unsubscribe. Idempotent. */
void core__disable(void);
/*
 * Ask CUPTI for completed buffers (forced: partly filled ones too). Sets *complete_until_ns to
 * a time before which every record has now been pushed (0 if unknown). Safe when disabled.
 */
void core__flush(bool forced, uint64_t *complete_until_ns);
/* Whether core__enable succeeded and core__disable was not called since. */
bool core__enabled(void);

#endif
