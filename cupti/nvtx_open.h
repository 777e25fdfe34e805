/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * NVTX ranges that have started and not yet ended, for the uplink: it sends them in every
 * batch with GpuNvtxRange.open set, so a long range labels samples before it closes. Called
 * from the uplink thread; thread-safe against the buffer callbacks that pair ranges.
 */
#ifndef PROFD_CUPTI_NVTX_OPEN_H
#define PROFD_CUPTI_NVTX_OPEN_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"

/*
 * Copy up to max open ranges into out as EV_NVTX events whose end_ns is now_ns (pass the
 * batch's complete_until_ns). Names and domains are interned. Returns how many were copied;
 * the uplink marks each one open.
 */
size_t core__open_ranges(struct ev *out, size_t max, uint64_t now_ns);

#endif
