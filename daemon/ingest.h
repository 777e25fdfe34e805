/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Ingest: decode the sampler's ring buffer records, validate them, symbolize the addresses while
 * the process is alive, and route them: every CPU sample and launch to the timeline; CPU samples
 * to the store, unless the GPU module holds the process's samples for labelling; launch stacks
 * to the GPU module to be joined with their kernels, or (libcuda uprobes) to the store.
 */
#ifndef PROFD_INGEST_H
#define PROFD_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "abi.h"
#include "memuse.h"
#include "python.h"
#include "store.h"
#include "symbolize.h"
#include "timeline.h"

struct gpu;

/* Install (cfg) or remove (NULL) a process's CPython layout in the sampler. */
typedef int (*ingest_py_config_fn)(void *ctx, uint32_t pid, const struct profd_py_proc *cfg);

/*
 * A sample's user stack could not be walked from CFI for want of what the unwinder provides
 * (why: PROFD_UNWIND_FP_FALLBACK, NO_MAPPING or NO_TABLE), or the process exec'd or exited
 * (why: PROFD_UNWIND_NONE): tell the unwinder.
 */
typedef void (*ingest_unwind_fn)(void *ctx, uint32_t pid, uint32_t why);
/*
 * pid mapped code (PROFD_REC_MAPS): ingest has dropped what it knew of the process's mappings;
 * the callee redoes what depends on them and lets the kernel side report the next change.
 */
typedef void (*ingest_maps_fn)(void *ctx, uint32_t pid);

struct ingest_opts {
	struct store *store;	/* borrowed */
	struct symbolizer *sym; /* borrowed */
	const char *proc_root;	/* NULL: "/proc" */
	struct python *py;	/* borrowed; NULL: no Python frames */
	ingest_py_config_fn py_config;
	void *py_ctx;
	/*
	 * borrowed; NULL: no GPU correlation. When set, the samples of processes gpu__holds names
	 * go to gpu__hold, USDT launch records to gpu__launch, and libcuda uprobe launches to the
	 * store's STORE_VALUE_UPROBE_LAUNCHES; when NULL, launch records are counted and dropped.
	 */
	struct gpu *gpu;
	struct timeline *timeline;    /* borrowed; NULL: nothing kept for traces */
	ingest_unwind_fn unwind_note; /* NULL: none */
	ingest_maps_fn maps_changed;  /* NULL: none */
	void *unwind_ctx;	      /* of both */
	/*
	 * Put a thread state frame (FRAME_KIND_STATE) at the root of every CPU sample's stack:
	 * "[running]", refined by the sample's GIL flags. Off-CPU records always get theirs.
	 */
	bool thread_states;
};

struct ingest_stats {
	uint64_t records;
	uint64_t samples;
	uint64_t malformed; /* records that failed validation, dropped and counted */
	uint64_t execs;
	uint64_t forks; /* new processes of followed ones (PROFD_REC_FORK) */
	uint64_t exits;
	uint64_t maps_changes; /* PROFD_REC_MAPS: a process mapped code */
	uint64_t store_errors; /* samples the store refused (allocation failure) */
	uint64_t addr_cache_hits;
	uint64_t addr_cache_misses;
	uint64_t unwind_cut;	   /* user stacks cut at a return address outside every mapping */
	uint64_t py_samples;	   /* samples that carried Python frames */
	uint64_t py_frames;	   /* Python frames symbolized */
	uint64_t py_frames_bad;	   /* frames that could not be named: placeholders instead */
	uint64_t py_frames_exited; /* of those, of a process that exited before they were read */
	uint64_t py_no_tstate;	   /* samples of a Python process with no matching thread state */
	uint64_t py_read_errors;   /* samples whose frame walk hit unreadable memory */
	uint64_t py_processes;	   /* processes where CPython was found and set up */
	/* CPU samples by the GIL state of their thread (PROFD_SAMPLE_GIL_*, NO_GIL) */
	uint64_t py_gil_held, py_gil_free, py_no_gil;
	uint64_t launches;	   /* launch records (USDT and uprobe) handed to the GPU module */
	uint64_t uprobe_launches;  /* of those, from libcuda uprobes */
	uint64_t launches_dropped; /* valid launch records dropped: no GPU module */
	uint64_t offcpu_waits;	   /* PROFD_REC_OFFCPU records stored */
	uint64_t offcpu_short_records; /* PROFD_REC_OFFCPU_AGG records stored */
	uint64_t offcpu_short_waits;   /* the waits those summed */
};

struct ingest;

/* Returns a new ingest or NULL with errno set. */
struct ingest *ingest__new(const struct ingest_opts *opts);
void ingest__free(struct ingest *in);
/*
 * Handle one ring buffer record. Returns 0; malformed records are counted, not fatal, so the
 * return is always 0 unless memory ran out (-ENOMEM).
 */
int ingest__record(struct ingest *in, const void *data, size_t size);
void ingest__stats(const struct ingest *in, struct ingest_stats *out);
/* The pid table and the address cache: their bytes and the processes the table knows now. */
void ingest__memory(const struct ingest *in, struct mem_usage *out);

/*
 * Live stack dumps (snapshot.h). Before reading process pid's threads: know the process (its
 * name and owner from /proc) and find its CPython, so the iterator reads its Python frames.
 * Returns 0 or a negative errno (-ENOMEM).
 */
int ingest__snapshot_begin(struct ingest *in, uint32_t pid);
/*
 * Symbolize one PROFD_REC_THREAD record of size bytes exactly as a sample of its process would
 * be: *stack gets the store stack id (valid until the store's next compaction), and the thread's
 * name is set in the store. Returns 0, -EINVAL for a malformed record, -ESRCH when
 * ingest__snapshot_begin did not see the process, or -ENOMEM.
 */
int ingest__snapshot_thread(struct ingest *in, const struct profd_sample_rec *rec, size_t size,
			    uint32_t *stack);
/*
 * After the dump of a process the sampler does not sample (outside its --pid targets): forget
 * its symbols and CPython layout, which no exit record would ever release.
 */
void ingest__snapshot_forget(struct ingest *in, uint32_t pid);

#endif
