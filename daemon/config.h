/* SPDX-License-Identifier: BSD-2-Clause */
/* profd's command line. */
#ifndef PROFD_CONFIG_H
#define PROFD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

#define CONFIG_MAX_PIDS 1024
#define CONFIG_MAX_LIBCUDA 8
/* Pyroscope takes at most 30 label names a series; profd's own use up to 6 of them. */
#define CONFIG_MAX_LABELS 24
#define CONFIG_MAX_HEADERS 16
#define CONFIG_MAX_SERVICES 64

struct config_label {
	const char *name;
	const char *value;
};

/* A [services] rule: processes whose executable path, comm or command line match glob. */
struct config_service {
	const char *name;
	const char *glob;
};

/*
 * The [export] section: where and how profiles leave the node. config_export_same compares
 * every field: a new one goes there too, or a reload that changes only it is not applied.
 */
struct export_config {
	const char *pyroscope; /* base URL; NULL: off */
	const char *otlp;      /* base URL; NULL: off */
	uint64_t interval_ns;
	const char *spool;
	uint64_t spool_max_size;
	uint64_t spool_max_age_ns;
	uint64_t retry_max_ns;
	uint64_t timeout_ns;
	struct config_label labels[CONFIG_MAX_LABELS];
	size_t nlabels;
	bool label_pid;	  /* sample_labels = pid */
	bool label_tid;	  /* sample_labels = tid */
	const char *host; /* NULL: the hostname */
	const char *ca_file;
	const char *cert_file;
	const char *key_file;
	const char *bearer_token_file;
	const char *basic_auth_file;
	const char *headers[CONFIG_MAX_HEADERS];
	size_t nheaders;
	struct config_service services[CONFIG_MAX_SERVICES];
	size_t nservices;
};

struct config {
	uint32_t pids[CONFIG_MAX_PIDS]; /* empty: system-wide */
	size_t npids;
	uint32_t frequency_hz;
	const char *socket_path;
	const char *socket_group; /* NULL: the socket keeps root's group */
	uint64_t mem_cap;
	uint64_t ringbuf_size;	/* a power of two; by the CPU count unless given */
	uint64_t unwind_memory; /* --unwind-memory: kernel bytes of unwind tables */
	/* --unwind-max-mappings: the executable mappings of a process described to the walk */
	uint32_t unwind_max_maps;
	uint64_t bucket_ns;
	enum log_level log_level;
	bool log_journal;
	uint64_t gpu_ring_size; /* bytes of the raw GPU/CPU event ring for traces */
	/* --gpu-uplink-rate: records a second one CUPTI library's uplink may send */
	uint32_t gpu_uplink_rate;
	/* --libcuda paths to probe, tried in order; none given: look in the usual places */
	const char *libcuda[CONFIG_MAX_LIBCUDA];
	size_t nlibcuda;
	bool libcuda_none;	 /* --libcuda none: no libcuda uprobes */
	bool no_children;	 /* --no-children: the targets' new processes are not followed */
	bool off_cpu;		 /* --off-cpu: record off-CPU time (tp_btf/sched_switch) */
	uint64_t off_cpu_min_ns; /* --off-cpu-min: shorter waits are only summed per thread */
	/*
	 * --record -- CMD...: run CMD, profile it and its children until it exits, write the
	 * profile (through profctl record on a private socket) and exit with CMD's status.
	 */
	bool record;
	char **record_argv;	   /* CMD and its arguments, NULL-terminated (argv's own strings) */
	const char *record_output; /* -o FILE; NULL: profctl record's default */
	const char *record_format; /* --format; NULL: from the file name */
	const char *record_duration; /* --duration; NULL: until CMD exits */
	bool socket_given;	     /* --socket was given */
	const char *config_file;     /* the file read; NULL: none */
	struct export_config export;
	/* Strings the configuration file gave, owned here (config_free). */
	char **owned;
	size_t nowned;
};

enum config_result {
	CONFIG_RUN = 0,	 /* start the daemon */
	CONFIG_EXIT = 1, /* --help or --version was printed */
};

/*
 * Parse argv into *cfg: defaults, then the configuration file (--config FILE, else
 * /etc/profd/profd.conf when it exists), then the command line, which wins. Returns
 * CONFIG_RUN, CONFIG_EXIT, or -EINVAL after printing one line that says what is wrong
 * (`profd: FILE:LINE: ...` for the file). *cfg points into argv: keep argv while cfg lives;
 * release it with config_free in every case.
 */
int config_parse(int argc, char **argv, struct config *cfg);
void config_free(struct config *cfg);
/*
 * Whether a and b set every [export] setting alike (a new field of struct export_config is
 * compared here too). The files they name are compared by config_export_files_hash.
 */
bool config_export_same(const struct export_config *a, const struct export_config *b);
/*
 * A hash of the bytes of the TLS and credentials files x names, so that a reload sees a rotated
 * token or certificate under the same name. Reads at most CONFIG_FILE_MAX bytes of each, and
 * never blocks on a FIFO; a missing or unreadable file hashes as such.
 */
uint64_t config_export_files_hash(const struct export_config *x);
/* The ring buffer's size when --ringbuf-size is not given, for ncpus CPUs. */
uint64_t config_default_ringbuf(long ncpus);

#endif
