/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The pprof encoder shared by profctl's output formats and the daemon's fleet export, and the
 * rendering options every output format takes.
 */
#ifndef PROFD_PPROF_H
#define PROFD_PPROF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "profd.pb-c.h"

struct render_opts {
	bool process_root; /* system-wide dump: each stack starts with its process name */
	const char *title; /* SVG title; NULL: "Flame Graph" */
	/*
	 * The column of Sample.values drawn: flame widths, folded counts, speedscope weights,
	 * pprof's default sample type. 0 (the first) unless the caller chose one by name
	 * (profile_value_index).
	 */
	uint32_t value_index;
	/*
	 * pprof: no pid/tid/thread_name/process_name sample labels (a backend such as Pyroscope
	 * makes every sample label a series of its own).
	 */
	bool no_sample_labels;
};

/*
 * pprof: a gzip-compressed perftools.profiles.Profile (proto/profile.proto) as `go tool pprof`
 * reads it. The CPU sample column becomes two values, samples/count and cpu/nanoseconds
 * (samples times the period); other columns keep their type and unit. The default sample type
 * is cpu/nanoseconds when the chosen column is the CPU one, else the chosen column's type.
 * Every sample carries
 * pid and tid number labels and thread_name and process_name string labels. o may be NULL.
 * Returns 0 or a negative errno (-EIO when writing to out failed).
 */
int format_pprof(const Profd__Profile *p, const struct render_opts *o, FILE *out);

#endif
