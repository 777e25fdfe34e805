/* SPDX-License-Identifier: BSD-2-Clause */
/* profctl dump's command line, parsed apart from running it so tests can check each option. */
#ifndef PROFCTL_CMD_DUMP_H
#define PROFCTL_CMD_DUMP_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "fetch.h"
#include "output.h"
#include "view.h"

enum dump_kind {
	DUMP_KIND_FLAMEGRAPH = 0,
	DUMP_KIND_TRACE,  /* Chrome trace event JSON of the raw events */
	DUMP_KIND_STACKS, /* a live stack dump of one process */
};

struct dump_args {
	bool help;
	enum dump_kind kind;
	struct fetch_query q;	 /* --pid, --tid, --since */
	enum dump_format format; /* never DEFAULT after a successful parse */
	const char *output;	 /* NULL: stdout */
	struct view_opts v;	 /* --python-only, --function, --no-lineno, --per-thread */
	uint64_t timeout_ns;	 /* 0: global or default */
	int value;		 /* enum value_kind (value.h): the column drawn */
	bool gpu_idle;		 /* --gpu-idle: the gpu_idle_samples column */
	bool nvtx;		 /* keep NVTX frames */
	bool thread_state;	 /* --thread-state: keep the thread state frames */
	bool children;		 /* --children: the pids' descendants, each under its own root */
	bool json;		 /* stacks: JSON instead of text */
};

/*
 * Parse `dump flamegraph ...`, `dump trace ...` or `dump stacks ...` (argv[0] is "dump"). Returns 0
 * (a->help set for --help), or -EINVAL with e filled (code PROFCTL_EXIT_USAGE). argv may be
 * permuted; strings are borrowed.
 */
int dump_parse_args(int argc, char **argv, struct dump_args *a, struct cli_error *e);

/* A --format name (folded, svg, pprof, speedscope, json). Returns 0 or -EINVAL. */
int dump_format_parse(const char *val, enum dump_format *out);

struct conn;
/*
 * Fetch the flame graph profile a asks for on c and write it as a asks (a->format, a->output;
 * a->kind must be DUMP_KIND_FLAMEGRAPH). Returns an exit code, any error printed.
 */
int dump_flamegraph(struct conn *c, const struct dump_args *a);

#endif
