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
 * (resource attributes after the semantic conventions: service.name, host.name, container.id,
 * process.pid, ...), one ScopeProfiles (scope "profd"), one Profile per series with its sample
 * type(s), time and duration; one shared ProfilesDictionary; locations carry
 * profile.frame.type = kernel / native / cpython (and "cuda" for GPU kernel frames).
 * Returns 0 and *out (malloc'd) / *len, or a negative errno.
 */
int otlp__encode(const struct export_series *series, size_t n, uint8_t **out, size_t *len);

/* sender_opts.split for OTLP bodies: halves the ResourceProfiles. 0 or negative errno. */
int otlp__split(const uint8_t *body, size_t len, uint8_t **a, size_t *alen, uint8_t **b,
		size_t *blen);
/* sender_opts.count: the sum of the first value of every sample (CPU: samples). */
uint64_t otlp__count(const uint8_t *body, size_t len);

#endif
