/* SPDX-License-Identifier: BSD-2-Clause */
#ifndef PROFD_TIMEUTIL_H
#define PROFD_TIMEUTIL_H

#include <stdint.h>

#define NSEC_PER_SEC 1000000000ull
#define NSEC_PER_MSEC 1000000ull
#define NSEC_PER_USEC 1000ull

/* CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns(), the one clock of every event. */
uint64_t mono_ns(void);
/* CLOCK_REALTIME - CLOCK_MONOTONIC in ns, to show monotonic stamps as wall-clock time. */
int64_t realtime_offset_ns(void);
/*
 * Milliseconds from now to a mono_ns() deadline, for poll(): 0 once it has passed, rounded up so
 * a few microseconds left still wait rather than spin, at most INT_MAX.
 */
int ms_until(uint64_t deadline_ns);

#endif
