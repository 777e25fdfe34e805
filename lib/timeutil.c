// SPDX-License-Identifier: BSD-2-Clause
#include "timeutil.h"

#include <limits.h>
#include <time.h>

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

int64_t realtime_offset_ns(void)
{
	uint64_t m0 = clock_ns(CLOCK_MONOTONIC);
	uint64_t r = clock_ns(CLOCK_REALTIME);
	uint64_t m1 = clock_ns(CLOCK_MONOTONIC);

	return (int64_t)(r - (m0 + (m1 - m0) / 2));
}

int ms_until(uint64_t deadline_ns)
{
	uint64_t now = mono_ns(), ms;

	if (now >= deadline_ns)
		return 0;
	ms = (deadline_ns - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}
