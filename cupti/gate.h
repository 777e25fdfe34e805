/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * When the uplink may enable collection. Enabling costs the application (CUPTI instruments
 * kernels, the first enable can stall for seconds) and so does each disable (a forced flush);
 * a daemon that flips its GpuControl, or an enable that keeps failing, must not turn that into
 * a loop. At most one attempt per GATE_MIN_NS; the wait doubles, up to GATE_MAX_NS, after each
 * failure and after each collection that ended within GATE_STABLE_NS of its start, and comes
 * back to GATE_MIN_NS after one that lasted longer. Pure bookkeeping on times the caller gives.
 */
#ifndef PROFD_CUPTI_GATE_H
#define PROFD_CUPTI_GATE_H

#include <stdbool.h>
#include <stdint.h>

#define GATE_MIN_NS (5ull * 1000000000ull)
#define GATE_MAX_NS (60ull * 1000000000ull)
#define GATE_STABLE_NS (60ull * 1000000000ull)

struct gate {
	uint64_t next_ns;    /* no attempt before this */
	uint64_t backoff_ns; /* the wait the next attempt sets */
	uint64_t since_ns;   /* when the current collection began; 0: not collecting */
	bool collecting;
};

void gate__init(struct gate *g);
/* Whether an enable may be attempted at now. */
bool gate__may_enable(const struct gate *g, uint64_t now);
/* An enable was attempted at now; ok: it succeeded (collection runs from now). */
void gate__attempted(struct gate *g, uint64_t now, bool ok);
/* Collection stopped at now (the daemon asked, or it went away for good). */
void gate__stopped(struct gate *g, uint64_t now);

#endif
