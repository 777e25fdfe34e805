/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU correlation: joins the launch stacks the USDT probe captured with the kernel and copy
 * records the CUPTI library sends, charges GPU time to the launching stack, labels CPU samples
 * with the NVTX ranges active on their thread and with whether the process's GPU was idle, and
 * writes its records (kernels, copies, API calls, closed NVTX ranges) to the timeline. The
 * uplink's messages are decoded in gpu_batch.c alone; the module encodes nothing.
 *
 * Time: every timestamp is CLOCK_MONOTONIC ns (bpf_ktime_get_ns and the library's converted
 * CUPTI clock).
 *
 * CPU samples of a process with a connected library are held back until the library reports
 * that every GPU record older than the sample has arrived (GpuBatch.complete_until_ns) and no
 * launch of the process before the sample still waits for its first record (a kernel that may
 * be running), or until hold_ns passed, because the NVTX ranges and kernels that decide their
 * labels arrive late. Ingest asks gpu__holds for each sample and hands only those to gpu__hold;
 * it adds every other sample to the store itself.
 *
 * Bounded: per process (NVTX ranges, busy intervals, waiting records, held samples), in bytes
 * for all of it (max_bytes), and record times are checked against the module's clock.
 *
 * Not thread-safe: the daemon's loop thread owns it. Stack ids it holds are kept through the
 * store's compaction and renumbered by gpu__gc_mark and gpu__gc_remap.
 */
#ifndef PROFD_GPU_H
#define PROFD_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profd.pb-c.h"
#include "store.h"
#include "timeline.h"

struct gpu_opts {
	struct store *store;  /* borrowed */
	uint64_t join_ttl_ns; /* a launch or a record waits this long for its partner; 0: 30 s */
	uint64_t hold_ns;     /* the longest a CPU sample is held for labels; 0: 3 s */
	struct timeline *timeline; /* borrowed; NULL: records are not kept for traces */
	size_t max_pending; /* launches + records waiting to join, all processes; 0: 1 << 20 */
	/*
	 * Bytes of GPU state (string tables, waiting records, NVTX ranges, busy intervals, held
	 * samples, joins; the ring has its own bound) beyond which new state is refused and
	 * counted in gpu_stats.refused; 0: 256 MiB.
	 */
	size_t max_bytes;
	/*
	 * Called when a process's library attaches and reports where it lives, so the daemon can
	 * attach the USDT probe there for that pid. Returns 0 or a negative errno, having logged
	 * why (the process still sends records; they are charged to "[launch stack unknown]").
	 */
	int (*attach_probe)(void *ctx, uint32_t pid, const char *library_path);
	void (*detach_probe)(void *ctx, uint32_t pid);
	void *probe_ctx;
	/*
	 * Records a second one uplink may send (and 160 bytes for each); the uplinks of one uid
	 * together twice that. 0: 200000 (gpu_rate.c).
	 */
	uint32_t uplink_rate;
	/* Whether the daemon's session covers pid (its --pid list, or every process). */
	bool (*covers)(void *ctx, uint32_t pid);
	void *covers_ctx;
};

struct gpu_stats {
	uint64_t processes; /* libraries connected now */
	uint64_t launches;  /* launch probes received */
	uint64_t records;   /* kernel + copy records received */
	uint64_t joined;    /* records charged to their launch stack */
	uint64_t unmatched; /* records whose launch never came (charged to a stand-in stack) */
	uint64_t unprobed;  /* records with weight 0 (covered by a weighted launch) */
	uint64_t dropped;   /* records the libraries reported lost */
	uint64_t launches_expired;  /* launches whose records never came */
	uint64_t held;		    /* CPU samples held right now */
	uint64_t bad_records;	    /* records that failed validation (end < start, bad string,
				     * a time outside [now - (TTL + hold), now + 60 s]) */
	uint64_t refused;	    /* records, ranges and strings not kept: a per-process cap or
				     * the memory budget (records are charged to the stand-in) */
	uint64_t bytes;		    /* GPU state counted against max_bytes now */
	uint64_t mem_records;	    /* memory allocation and release records received */
	uint64_t mem_unmatched;	    /* releases that matched no tracked allocation */
	uint64_t zero_time_records; /* kernel and copy records without timestamps (start = end =
				     * 0, a CUPTI bug): counted by the libraries or found here */
	uint64_t forced_flushes;    /* flushes the libraries forced for their delay bound */
	uint64_t records_refused;   /* records of batches over an uplink's or a user's rate */
	uint64_t bytes_refused;	    /* their batches' encoded bytes */
	uint64_t batches_refused;
	uint64_t waits_refused; /* records charged to the stand-in at once: their process or user
				 * had too many waiting for their launch (counted in unmatched) */
};

struct gpu;

/* Returns a new module or NULL with errno set. Registers itself as the store's GC holder. */
struct gpu *gpu__new(const struct gpu_opts *opts);
void gpu__free(struct gpu *g);

/* gpu__attach flags. */
enum {
	/*
	 * The process's real uid is not the connection's: its state is recorded (status shows
	 * it) but it is never enabled, probed or held, and its batches are refused.
	 */
	GPU_ATTACH_UID_MISMATCH = 1 << 0,
};

/*
 * The library of process pid (from SO_PEERCRED; uid the peer's) attached. A repeated attach of
 * the same pid (the library reports a new state after enabling) only updates its state: the
 * uid, the string table and the launch probe stay, so no launch is missed. The probe is
 * attached once, at the first READY of a process the session covers. A process that
 * reconnects is first gpu__detach'ed by the caller. Sets *enable to whether it should collect
 * now. Returns 0, -EINVAL for a malformed message (the connection is closed), -EPERM for a
 * repeated attach under another uid, -ENOMEM.
 */
int gpu__attach(struct gpu *g, uint32_t pid, uint32_t uid, unsigned int flags,
		const Profd__GpuAttach *m, bool *enable);
/*
 * A batch from pid's library. Sets *enable as gpu__attach. Returns 0, -EINVAL (malformed: a
 * weight over 65536, more than 2^32 dropped; nothing of it is kept), -EPERM (a process
 * attached with GPU_ATTACH_UID_MISMATCH), -EBUSY (over its uplink's or its user's rate: only
 * its strings were kept, the refusal counted), -ENOMEM.
 */
int gpu__batch(struct gpu *g, uint32_t pid, const Profd__GpuBatch *m, bool *enable);
/* pid's library disconnected: release its held samples, detach its probe. */
void gpu__detach(struct gpu *g, uint32_t pid);

/*
 * Whether pid's CPU samples must be held for labelling (its library collects now). When false
 * the caller adds the sample to the store itself.
 */
bool gpu__holds(const struct gpu *g, uint32_t pid);
/*
 * Hold a CPU sample of a process gpu__holds named (stack interned in the store): it goes to the
 * store (STORE_VALUE_CPU_SAMPLES, and STORE_VALUE_GPU_IDLE_SAMPLES when no kernel covered it)
 * with its NVTX frames once its labels are known. A process that stopped collecting meanwhile
 * gets it added at once. Returns 0 or -ENOMEM.
 */
int gpu__hold(struct gpu *g, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack);
/*
 * Hold an off-CPU wait [start_ns, end_ns) of a process gpu__holds named, whose off-CPU time the
 * caller stored: once the GPU records up to its end are in, the part of it in which none of the
 * process's kernels ran goes to STORE_VALUE_GPU_IDLE_OFFCPU_NS. A process that stopped
 * collecting meanwhile gets nothing. Returns 0 or -ENOMEM.
 */
int gpu__hold_wait(struct gpu *g, uint64_t start_ns, uint64_t end_ns, uint32_t pid, uint32_t tid,
		   uint32_t stack);
/* A launch record from the USDT probe (corr_id > 0), stack interned. Returns 0 or -ENOMEM. */
int gpu__launch(struct gpu *g, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack,
		uint32_t corr_id);
/* The process exited: its pending state goes after the next tick. */
void gpu__process_exited(struct gpu *g, uint32_t pid);
/*
 * pid is about to name another process (the kernel reused it): settle what is held of the old
 * one now, its held samples and the launches still waiting for their kernels, so that the store
 * files them under the old process, and forget it; its live allocations end.
 */
void gpu__process_reused(struct gpu *g, uint32_t pid);

/* Periodic work (the daemon calls it every 100 ms): release held samples, expire joins. */
void gpu__tick(struct gpu *g, uint64_t now_ns);

/*
 * The store's compaction (store.h), which the daemon runs on its tick: gpu__gc_mark keeps every
 * stack id the module holds (pending launches, held samples, the event ring) in the plan before
 * store__gc_commit; after a successful commit gpu__gc_remap replaces each with its new id. NULL g
 * or gc: no-op.
 */
void gpu__gc_mark(struct gpu *g, struct store_gc *gc);
void gpu__gc_remap(struct gpu *g, const struct store_gc *gc);
/*
 * Only move the module's clock forward (never back), without the periodic work: the caller
 * does it before gpu__attach and gpu__batch, so records are checked against the time now, not
 * the last tick's. Before the first call or tick no record time is refused.
 */
void gpu__clock(struct gpu *g, uint64_t now_ns);

/*
 * The NVTX ranges still open (not in the timeline until they close), for traces: *out is a new
 * array (the caller frees it) of *n TL_NVTX events whose names belong to the module and stay
 * valid until the next call into it. Returns 0 or -ENOMEM.
 */
int gpu__open_ranges(struct gpu *g, struct tl_event **out, size_t *n);

void gpu__stats(const struct gpu *g, struct gpu_stats *out);
/* Records a second one uplink may send (gpu_opts.uplink_rate with its default filled in). */
uint32_t gpu__uplink_rate(const struct gpu *g);
/*
 * What a process's CUPTI library reported, and its copies. The numbers are the wire's (GpuState,
 * GpuClock, GpuCopyKind in profd.proto), so decoding and encoding are checked casts; only
 * gpu_batch.c decodes and only the reply encoders encode.
 */
enum gpu_state {
	GPU_STATE_UNSPECIFIED,
	GPU_STATE_READY,
	GPU_STATE_NO_CUPTI,
	GPU_STATE_CUPTI_TOO_OLD,
	GPU_STATE_SUBSCRIBER_TAKEN,
	GPU_STATE_ERROR,
	GPU_STATE_ACTIVITY_TAKEN,
};
enum gpu_clock {
	GPU_CLOCK_UNSPECIFIED, /* not reported */
	GPU_CLOCK_CALLBACK,
	GPU_CLOCK_OFFSET,
};
enum gpu_copy_kind {
	GPU_COPY_UNKNOWN,
	GPU_COPY_HTOD,
	GPU_COPY_DTOH,
	GPU_COPY_DTOD,
	GPU_COPY_HTOH,
	GPU_COPY_PTOP,
	GPU_COPY_MEMSET,
};

/* How one process's library stands, for status replies. */
struct gpu_proc_status {
	uint32_t pid;
	enum gpu_state state; /* as the library last reported it */
	const char *detail;   /* NULL: none */
	bool enabled;
	enum gpu_clock clock;
	uint32_t cupti_version; /* 0: not reported */
	uint64_t memory_live;	/* allocations tracked as live now */
	uint64_t memory_live_bytes;
	uint64_t memory_untracked; /* allocations or releases not kept for the bounds */
	uint64_t zero_time_records;
	uint64_t forced_flushes;
	uint32_t max_delay_ms;	  /* the library's delay bound; 0: none or not reported */
	uint64_t records_refused; /* as gpu_stats, this process */
	uint64_t bytes_refused;
	uint64_t waits_refused;
};
/*
 * Fills up to max entries (strings owned by the module, valid until the next call into it) and
 * returns how many processes have a library attached.
 */
size_t gpu__status(const struct gpu *g, struct gpu_proc_status *out, size_t max);

/*
 * GPU memory live at at_ns (allocated before it, not released before it), by allocating stack:
 * cb once per allocation (pid, the process's owner's uid, the allocating thread, the stack, its
 * bytes). Allocations whose stack is not joined yet are left out. Returns 0 or cb's first
 * nonzero return. The dump fills STORE_VALUE_GPU_MEM_LIVE from it.
 */
typedef int (*gpu_live_cb)(uint32_t pid, uint32_t uid, uint32_t tid, uint32_t stack, uint64_t bytes,
			   void *ctx);
int gpu__live_each(const struct gpu *g, uint64_t at_ns, gpu_live_cb cb, void *ctx);

#endif
