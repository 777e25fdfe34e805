/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * OTLP profiles (experimental): an ExportProfilesServiceRequest of opentelemetry-proto v1.11.0
 * (opentelemetry/proto/collector/profiles/v1development), for POST /v1development/profiles.
 */
#ifndef PROFD_EXPORT_OTLP_H
#define PROFD_EXPORT_OTLP_H

#include <stddef.h>
#include <stdint.h>

#include "series.h"

/*
 * Encode series[0..n) as one ExportProfilesServiceRequest, gzip-compressed (the body of a
 * request sent with Content-Encoding: gzip): one ResourceProfiles per distinct label set
 * (resource attributes after the semantic conventions: service_name -> service.name, host ->
 * host.name, container -> container.id, pod_uid -> k8s.pod.uid, namespace ->
 * k8s.namespace.name, pid -> process.pid, tid -> thread.id, others as they are), one
 * ScopeProfiles (scope "profd", PROFD_VERSION), one Profile per series and value column (a
 * v1.11 Profile has one sample_type; CPU profiles say period_type cpu/nanoseconds and the
 * period), with time and duration; one shared ProfilesDictionary; locations carry
 * profile.frame.type = kernel / native / cpython, and "cuda" for GPU kernel frames. See
 * otlp.c for the details. Returns 0 and *out (malloc'd) / *len, -EINVAL for a series whose
 * profile has an index out of its tables, -E2BIG past the format's int32 indices, -ENOMEM.
 */
int otlp__encode(const struct export_series *series, size_t n, uint8_t **out, size_t *len);

/*
 * sender_opts.split for OTLP bodies: halves the ResourceProfiles (with one resource: its
 * scopes, then profiles, then samples), each half with a dictionary of only what it uses.
 * Returns 0 and *a, *b (malloc'd), or a negative errno: -E2BIG when there is nothing to halve
 * (one sample), -EBADMSG for a body that is not a gzipped request, -ENOMEM.
 */
int otlp__split(const uint8_t *body, size_t len, uint8_t **a, size_t *alen, uint8_t **b,
		size_t *blen);
/*
 * sender_opts.count: the sum of the sample values of the Profiles holding a kind's first
 * column (samples, gpu_kernel_time, off_cpu), as the Pyroscope encoder's count of the same
 * batch; 0 for a body that cannot be read.
 */
uint64_t otlp__count(const uint8_t *body, size_t len);

#endif
