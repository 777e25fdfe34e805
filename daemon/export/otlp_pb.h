/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Short names for the protoc-c types of opentelemetry-proto (proto/otlp/) that otlp.c and
 * otlp_split.c build and read, and the gzip helpers both use. Private to daemon/export.
 */
#ifndef PROFD_EXPORT_OTLP_PB_H
#define PROFD_EXPORT_OTLP_PB_H

#include <stddef.h>
#include <stdint.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
    OtRequest;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary OtDictionary;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles OtResourceProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles OtScopeProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile OtProfile;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType OtValueType;
typedef Opentelemetry__Proto__Profiles__V1development__Sample OtSample;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping OtMapping;
typedef Opentelemetry__Proto__Profiles__V1development__Stack OtStack;
typedef Opentelemetry__Proto__Profiles__V1development__Location OtLocation;
typedef Opentelemetry__Proto__Profiles__V1development__Line OtLine;
typedef Opentelemetry__Proto__Profiles__V1development__Function OtFunction;
typedef Opentelemetry__Proto__Profiles__V1development__Link OtLink;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit OtKeyValueAndUnit;
typedef Opentelemetry__Proto__Resource__V1__Resource OtResource;
typedef Opentelemetry__Proto__Common__V1__KeyValue OtKeyValue;
typedef Opentelemetry__Proto__Common__V1__AnyValue OtAnyValue;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope OtScope;

#define OT_STRING OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
#define OT_INT OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE
#define OT_STRINDEX OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX

/* The most a body may inflate to when it is read back (split, count): 1 GiB. */
#define OTLP_MAX_INFLATED (1ull << 30)

/* Pack req and gzip it. Returns 0 and *out (malloc'd) / *len, or a negative errno. */
int otlp_pack_gzip(const OtRequest *req, uint8_t **out, size_t *len);
/*
 * Gunzip body and unpack the request. Returns it (free with
 * opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(r,
 * NULL)) or NULL with errno set: EBADMSG for a body that is not a gzipped request, EFBIG past
 * OTLP_MAX_INFLATED, ENOMEM.
 */
OtRequest *otlp_unpack_gzip(const uint8_t *body, size_t len);
void otlp_request_free(OtRequest *r);

#endif
