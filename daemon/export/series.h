/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What an export batch holds, for the encoders (pyroscope.c, otlp.c): one series per label set and
 * profile kind, each a neutral Profile (proto/profd.proto) of the window's samples.
 */
#ifndef PROFD_EXPORT_SERIES_H
#define PROFD_EXPORT_SERIES_H

#include <stddef.h>
#include <stdint.h>

#include "profd.pb-c.h"

enum export_kind {
	EXPORT_CPU = 0, /* Pyroscope process_cpu: one column "samples"/"count"; the encoders add
			 * cpu/nanoseconds (samples times Profile.period_ns) */
	EXPORT_GPU,	/* two columns: "gpu_kernel_time"/"nanoseconds", "gpu_kernel_launches"/
			 * "count"; stacks are launching CPU stacks with the kernel as leaf frame */
	EXPORT_OFFCPU,	/* one column "off_cpu"/"nanoseconds" */
	EXPORT_KIND__COUNT,
};

/* Pyroscope's __name__ of a kind: "process_cpu", "gpu", "off_cpu". */
const char *export_kind_name(enum export_kind k);

struct export_label {
	const char *name;
	const char *value;
};

/*
 * One series. labels are the series labels in Pyroscope's naming (service_name, host,
 * container, pod_uid, namespace, static labels, pid when asked for), without __name__ (the
 * encoders add it from kind). The OTLP encoder maps them to resource attributes
 * (service_name -> service.name, host -> host.name, container -> container.id,
 * pid -> process.pid, others as they are).
 */
struct export_series {
	const struct export_label *labels;
	size_t nlabels;
	enum export_kind kind;
	const Profd__Profile *profile; /* strings, frames, stacks, value_types, samples; borrowed */
	uint64_t time_unix_ns;	       /* start of the window, CLOCK_REALTIME */
	uint64_t duration_ns;	       /* length of the window */
};

#endif
