/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * profctl's shared pieces: exit codes, the one-line error every failure ends in, the global
 * options and the command entry points.
 */
#ifndef PROFCTL_CLI_H
#define PROFCTL_CLI_H

#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "profd.pb-c.h"

/* Exit codes: documented in `profctl --help` and docs/profctl.md; scripts rely on them. */
enum profctl_exit {
	PROFCTL_EXIT_OK = 0,
	PROFCTL_EXIT_ERROR = 1,	      /* other: output file, daemon failure */
	PROFCTL_EXIT_USAGE = 2,	      /* bad command line */
	PROFCTL_EXIT_UNREACHABLE = 3, /* no daemon at the socket, or it went away */
	PROFCTL_EXIT_PERMISSION = 4,  /* socket or daemon refused us */
	PROFCTL_EXIT_NO_SAMPLES = 5,  /* the filter matched nothing in the window */
	PROFCTL_EXIT_PROTOCOL = 6,    /* version mismatch or a reply we cannot understand */
	PROFCTL_EXIT_TIMEOUT = 7,     /* the daemon did not answer in time */
};

#define PROFCTL_STATUS_TIMEOUT_NS (10ull * 1000000000ull)
#define PROFCTL_DUMP_TIMEOUT_NS (60ull * 1000000000ull)
#define PROFCTL_MAX_TIMEOUT_NS (24ull * 3600 * 1000000000ull)

/* A failure: the exit code and the one line printed after "profctl: ". */
struct cli_error {
	int code;
	char msg[1024];
};

void cli_error_set(struct cli_error *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Print "profctl: MSG" on stderr and return e->code. */
int cli_error_print(const struct cli_error *e);
/*
 * Fill e for getopt_long's return c ('?' unknown option, ':' missing value) in command cmd
 * ("profctl" for the global options). Returns -EINVAL.
 */
int cli_bad_option(int c, char **argv, const struct option *longopts, const char *cmd,
		   struct cli_error *e);
/*
 * Fill e for a bad option value: "CMD: OPT 'VAL' WHAT; see 'profctl CMD --help'", exit code
 * PROFCTL_EXIT_USAGE. Returns -EINVAL.
 */
int cli_bad_value(struct cli_error *e, const char *cmd, const char *opt, const char *val,
		  const char *what);
/* Parse --timeout VAL (1ms to 24h) into *out; on error fill e as cli_bad_value. Returns 0 or -EINVAL. */
int cli_parse_timeout(const char *cmd, const char *val, uint64_t *out, struct cli_error *e);
/* The exit code for an Error reply's code. */
int cli_exit_for_error(Profd__ErrorCode code);
/*
 * Fill e from a daemon's Error reply: "NAME: MESSAGE" with the message as the daemon wrote it
 * (control characters replaced so it stays one line).
 */
void cli_error_from_reply(struct cli_error *e, const Profd__Error *err);

/* Options before the command. */
struct global_opts {
	const char *socket;  /* NULL: $PROFD_SOCKET, else the default */
	uint64_t timeout_ns; /* 0: the command's default */
};

/*
 * Commands: argv[0] is the command name. Each returns an exit code (enum profctl_exit) and has
 * printed any error already.
 */
int cmd_status(int argc, char **argv, const struct global_opts *g);
int cmd_dump(int argc, char **argv, const struct global_opts *g);
int cmd_top(int argc, char **argv, const struct global_opts *g);
int cmd_table(int argc, char **argv, const struct global_opts *g);
int cmd_diff(int argc, char **argv, const struct global_opts *g);
int cmd_report(int argc, char **argv, const struct global_opts *g);
void cmd_status_usage(FILE *f);
void cmd_dump_usage(FILE *f);
void cmd_top_usage(FILE *f);
void cmd_table_usage(FILE *f);
void cmd_diff_usage(FILE *f);
void cmd_report_usage(FILE *f);

/*
 * A StatusReply as text for people (GPU lines only when the daemon sent GPU counters) or as one
 * JSON object with every field set, named as in profd.proto. Implemented in cmd_status.c.
 */
void status_print_text(FILE *out, const Profd__StatusReply *st);
void status_print_json(FILE *out, const Profd__StatusReply *st);

enum dump_format {
	DUMP_FORMAT_DEFAULT = 0, /* from -o's suffix (.svg, .pb.gz, .json, ...), else folded */
	DUMP_FORMAT_FOLDED,
	DUMP_FORMAT_SVG,
	DUMP_FORMAT_PPROF,
	DUMP_FORMAT_SPEEDSCOPE,
	DUMP_FORMAT_JSON,
};

#define DUMP_MAX_PIDS 256

enum dump_kind {
	DUMP_KIND_FLAMEGRAPH = 0,
	DUMP_KIND_TRACE, /* Chrome trace event JSON of the raw events */
};

struct dump_args {
	bool help;
	enum dump_kind kind;
	uint32_t pids[DUMP_MAX_PIDS];
	size_t n_pids;
	bool has_tid;
	uint32_t tid;
	bool has_since;
	uint64_t since_ns;
	enum dump_format format; /* never DEFAULT after a successful parse */
	const char *output;	 /* NULL: stdout */
	bool python_only;	 /* hide native frames between Python frames */
	uint64_t timeout_ns;	 /* 0: global or default */
	int value;		 /* enum value_kind (value.h): the column drawn */
	bool gpu_idle;		 /* --gpu-idle: the gpu_idle_samples column */
	bool nvtx;		 /* keep NVTX frames */
};

/*
 * Parse `dump flamegraph ...` or `dump trace ...` (argv[0] is "dump"). Returns 0 (a->help set
 * for --help), or -EINVAL with e filled (code PROFCTL_EXIT_USAGE). argv may be permuted;
 * strings are borrowed.
 */
int dump_parse_args(int argc, char **argv, struct dump_args *a, struct cli_error *e);

struct conn;

/*
 * The column of p that value (enum value_kind) names, by name. Returns 0 with *index set, or
 * -ENODATA with e filled (PROFCTL_EXIT_NO_SAMPLES) when p lacks the column or it sums to 0.
 * Implemented in cmd_dump.c.
 */
int dump_select_value(const Profd__Profile *p, int value, uint32_t *index, struct cli_error *e);
/* Tell a non-root user, on stderr, that the daemon showed only their own processes. */
void cli_note_filtered(const Profd__Profile *p);
/*
 * Send dreq on c and check the profile that comes back: consistent indices (profile_check)
 * and at least one sample with a value in any column. Returns 0 with *out set (free it with
 * profd__response__free_unpacked), or a negative errno with e filled: what conn__call returns,
 * -EPROTO (PROFCTL_EXIT_PROTOCOL) for an inconsistent profile, -ENODATA
 * (PROFCTL_EXIT_NO_SAMPLES) for an empty one. Implemented in cmd_dump.c.
 */
int dump_fetch(struct conn *c, const Profd__DumpRequest *dreq, Profd__Response **out,
	       struct cli_error *e);
/*
 * Write the file at path atomically: render_fn writes to a temporary file beside it (and
 * returns 0 or a negative errno), which then replaces path with the mode a plain open would
 * give. Returns 0 or a negative errno with e filled. Implemented in cmd_dump.c.
 */
int cli_write_file(const char *path, int (*render_fn)(FILE *out, void *ctx), void *ctx,
		   struct cli_error *e);

#endif
