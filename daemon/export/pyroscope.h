/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Grafana Pyroscope's push API: PushRequest (proto/pyroscope/push.proto) bodies for
 * POST /push.v1.PusherService/Push, one gzipped pprof per series.
 */
#ifndef PROFD_EXPORT_PYROSCOPE_H
#define PROFD_EXPORT_PYROSCOPE_H

#include <stddef.h>
#include <stdint.h>

#include "series.h"

/* Pyroscope's default ingestion burst is 2 MB a tenant: requests stay below this. */
#define PYROSCOPE_MAX_REQUEST (1536u << 10)

/*
 * Called per request built: takes body (malloc'd) in every case; samples is the CPU samples it
 * carries. Returns 0 or a negative errno (which stops the encoding).
 */
typedef int (*pyroscope_emit_fn)(uint8_t *body, size_t len, uint64_t samples, void *ctx);

/*
 * Encode series[0..n) as PushRequests: each series one RawProfileSeries (its labels plus
 * __name__ from its kind) with one RawSample (a gzipped pprof of its profile: no sample labels,
 * time and duration of the window; a fresh UUID), packed into requests of at most max_bytes
 * (a series larger alone goes alone). Returns 0 or a negative errno.
 */
int pyroscope__encode(const struct export_series *series, size_t n, size_t max_bytes,
		      pyroscope_emit_fn emit, void *ctx);

/* sender_opts.split: halve a PushRequest's series. 0, -E2BIG (one series), -EBADMSG. */
int pyroscope__split(const uint8_t *body, size_t len, uint8_t **a, size_t *alen, uint8_t **b,
		     size_t *blen);

/* sender_opts.count: the CPU samples of a PushRequest (its process_cpu pprofs' first values). */
uint64_t pyroscope__count(const uint8_t *body, size_t len);

#endif
