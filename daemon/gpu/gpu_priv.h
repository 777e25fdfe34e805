/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Inside the GPU module: gpu.c (processes, attach and detach, status, GC, the memory budget),
 * gpu_batch.c (the uplink's batches: string tables and records, validated), gpu_join.c (launch
 * and record join, charging, held samples), gpu_labels.c (the labels of samples and records:
 * NVTX ranges and GPU busy intervals), gpu_rate.c (what an uplink and a user may cost a second,
 * and each user's waiting records). Not for other modules.
 */
#ifndef PROFD_GPU_PRIV_H
#define PROFD_GPU_PRIV_H

#include "gpu.h"
#include "ptrmap.h"
#include "tbucket.h"

/* NVTX levels (depths) that label a stack; deeper ranges only go to the timeline. */
#define MAX_NVTX_DEPTH 32

/*
 * A name shared by a connection's string table, the records waiting for their launch and the
 * NVTX ranges, so a name sent once costs its bytes once however many records use it.
 */
struct gname {
	uint32_t refs;
	uint32_t len;
	char s[];
};

/* One entry of a connection's string table. */
struct gstr {
	struct gname *name; /* NULL: refused (too long, table full, over the budget) */
	struct gname *leaf; /* the kernel leaf of name (demangled, capped), made on first use */
};

/* An NVTX range kept to label samples and launches of its thread. */
struct nvtx_range {
	uint64_t start;
	uint64_t end;
	uint32_t tid;
	uint32_t depth; /* < MAX_NVTX_DEPTH */
	bool open;
	struct gname *name; /* a reference; NULL: unnamed */
};

/* A kernel busy interval [start, end) of a process. */
struct busy {
	uint64_t start;
	uint64_t end;
};

/*
 * A CPU sample (end == ts) or an off-CPU wait [ts, end) waiting for its labels: a sample gets
 * its NVTX frames and whether the GPU was idle, a wait the part of it the GPU was idle.
 */
struct held {
	uint64_t ts;
	uint64_t end;
	uint32_t tid;
	uint32_t stack;
};

/* A process whose CUPTI library is (or was, until the next tick after exit) attached. */
struct gpu_proc {
	uint32_t pid;
	uint32_t uid; /* the peer's at creation; never changes */
	bool attached;
	bool enabled;
	bool exited;
	bool probe_attached;
	bool uid_refused; /* the process's real uid is not the connection's: never enabled */
	enum gpu_state state;
	char *detail;
	enum gpu_clock clock;
	uint32_t cupti_version;
	uint32_t launch_rate_limit;
	uint32_t max_delay_ms;
	uint64_t zero_time_records;
	uint64_t forced_flushes;
	/* The uplink's rate (gpu_rate.c) and what it refused. */
	struct tbucket rate_records, rate_bytes;
	bool rate_limited; /* its last batch was refused */
	uint64_t records_refused, bytes_refused;
	uint64_t waits_refused; /* records sent to the stand-in at once: too many waiting */
	/*
	 * The connection's string table: index i (from 1) is strs[i - 1] while i <= nstored; the
	 * indices up to nstrs past that were refused (the table is full) and name nothing.
	 */
	struct gstr *strs;
	uint32_t nstored, strs_cap;
	uint32_t nstrs;
	size_t str_bytes;
	size_t str_uid_bytes; /* what the table counts against its user's bound (gpu_rate.c) */
	uint64_t complete_until_ns;
	/*
	 * Closed NVTX ranges ordered by (tid, depth, start) in [0, nvtx_sorted), the ones that
	 * came out of order after that until the next lookup sorts them in; the ranges still
	 * open, always in that order.
	 */
	struct nvtx_range *nvtx;
	size_t nnvtx, nvtx_sorted, nvtx_cap;
	struct nvtx_range *open;
	size_t nopen, open_cap;
	/* Sorted by start and disjoint in [0, busy_sorted); out-of-order ones after that. */
	struct busy *busy;
	size_t nbusy, busy_sorted, busy_cap;
	/*
	 * Busy intervals that ended before this were dropped (pruned, or the older half when
	 * full): what the GPU did before it is unknown, and never counted as idle.
	 */
	uint64_t busy_from;
	struct held *held;
	size_t nheld, held_cap;
};

/* What a memory allocation record is (wait_rec.mem): its leaf frame. */
enum gpu_mem_kind {
	GPU_MEM_NONE, /* not a memory record */
	GPU_MEM_DEVICE,
	GPU_MEM_MANAGED,
	GPU_MEM_POOL,
};

/* A record waiting for its launch. */
struct wait_rec {
	uint64_t start;
	uint64_t end;
	uint64_t bytes;
	uint64_t address; /* memory records */
	uint32_t weight;
	bool is_copy;
	enum gpu_copy_kind kind;
	enum gpu_mem_kind mem;
	struct gname *leaf; /* kernel name, demangled; a reference; NULL for copies or unnamed */
};

/* The lists a join is on. */
enum {
	JL_EXPIRY, /* all joins, by deadline (arrival + TTL; a refreshed join goes to the tail) */
	JL_PID,	   /* the joins of one pid */
	JL_LAUNCH, /* the joins of one pid with a launch, by the launch's arrival */
	JL_UNREC,  /* the launches of one pid no record has reached yet, by arrival */
	JL__COUNT,
};

struct join;
struct jlist {
	struct join *head, *tail;
};

/* One (pid, correlation id) of the join. */
struct join {
	uint32_t pid;
	uint32_t corr;
	/* The launch: stack 0 until it came. */
	uint32_t tid;
	uint32_t stack;
	uint64_t launch_ts;
	uint64_t deadline;
	uint64_t nrecs; /* records charged to this launch */
	struct wait_rec *wait;
	uint32_t nwait, wait_cap;
	uint8_t on; /* bit k: on list k */
	struct join *prev[JL__COUNT], *next[JL__COUNT];
};

/* The joins of one pid. */
struct pjoins {
	struct jlist l[JL__COUNT]; /* JL_EXPIRY unused */
	size_t nwait;		   /* records waiting */
	uint32_t uid;		   /* the process's owner: its waits count for that user too */
};

struct gpu {
	struct gpu_opts o;
	struct store *store;
	struct ptrmap procs;  /* pid -> struct gpu_proc */
	struct ptrmap joins;  /* pid << 32 | corr -> struct join */
	struct ptrmap pjoins; /* pid -> struct pjoins */
	struct ptrmap mem;    /* pid -> struct gpu_mem (gpu_mem.c) */
	struct ptrmap uids;   /* uid -> struct gpu_uid (gpu_rate.c) */
	struct jlist jl;      /* JL_EXPIRY */
	size_t npending;      /* launches + waiting records */
	size_t nheld;
	size_t bytes; /* GPU state counted against max_bytes */
	uint64_t now;
	struct gpu_stats st;
	uint64_t strings_refused;
};

/* An attach message, validated and decoded by gpu_batch.c. Strings borrowed for the call. */
struct gpu_attach_info {
	enum gpu_state state;
	const char *detail;	  /* NULL or "": none */
	const char *library_path; /* absolute; NULL unless READY */
	enum gpu_clock clock;
	uint32_t cupti_version;
	uint32_t launch_rate_limit;
	uint32_t max_delay_ms;
};

/* gpu.c */
/* The rest of gpu__attach, once the message is decoded: see gpu.h for the returns. */
int gpu_proc_attach(struct gpu *g, uint32_t pid, uint32_t uid, unsigned int flags,
		    const struct gpu_attach_info *m, bool *enable);
struct gpu_proc *gpu_proc(const struct gpu *g, uint32_t pid);
/* A string of the process's table by index: NULL for 0, a refused string or a bad index. */
struct gname *gpu_proc_string(const struct gpu_proc *p, uint32_t idx, bool *bad);
/* Append a record to the timeline, when there is one. Returns 0 or -ENOMEM. */
int gpu_timeline_push(struct gpu *g, const struct tl_event *e);
/*
 * Whether p collects now: attached, READY, its owner's connection and covered by the session.
 * When not, its held samples are released.
 */
bool gpu_proc_enable(struct gpu *g, struct gpu_proc *p);
/*
 * The memory budget: count bytes of GPU state. gpu_charge returns 0, or -ENOSPC (nothing
 * counted) when they would take the module over max_bytes.
 */
int gpu_charge(struct gpu *g, size_t bytes);
void gpu_uncharge(struct gpu *g, size_t bytes);
/*
 * Grow *arr (of elem-sized entries, *cap allocated) to hold at least need, counted against the
 * budget. Returns 0, -ENOSPC (over the budget) or -ENOMEM; *arr is unchanged on failure.
 */
int gpu_grow(struct gpu *g, void **arr, size_t *cap, size_t need, size_t elem);
/* Free an array grown by gpu_grow. */
void gpu_free_array(struct gpu *g, void *arr, size_t cap, size_t elem);
struct gname *gname_new(struct gpu *g, const char *s, size_t len);
struct gname *gname_ref(struct gname *n);
void gname_unref(struct gpu *g, struct gname *n);

/* gpu_join.c */
int gpu_join_launch(struct gpu *g, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t stack,
		    uint32_t corr);
/* A validated kernel or copy record with weight > 0. Takes r->leaf's reference. */
int gpu_join_record(struct gpu *g, uint32_t pid, struct wait_rec *r, uint32_t corr);
/* Settle the joins whose deadline is at or before now. */
void gpu_join_expire(struct gpu *g, uint64_t now);
/* Settle every join of pid (it exited): only its own, whatever their deadline. */
void gpu_join_expire_pid(struct gpu *g, uint32_t pid);
/* The launch ts of pid's oldest pending launch (any / no record yet); UINT64_MAX: none. */
uint64_t gpu_join_oldest_launch(const struct gpu *g, uint32_t pid, bool unrecorded);
void gpu_join_free_all(struct gpu *g);
/* A CPU sample (end == ts) or an off-CPU wait [ts, end) of p, held for its labels. */
int gpu_hold(struct gpu *g, struct gpu_proc *p, uint64_t ts, uint64_t end, uint32_t tid,
	     uint32_t stack);
/* Release the held samples that are due (all when all is set). */
void gpu_release(struct gpu *g, struct gpu_proc *p, uint64_t now, bool all);
/* The store's compaction: keep every join's stack in mark, or (mark NULL) map it through remap. */
void gpu_join_gc(struct gpu *g, struct store_gc *mark, const struct store_gc *remap);

/* gpu_rate.c */
/*
 * Whether p's batch m fits the rate of its uplink and of its user: takes the tokens when it
 * does; counts it as refused (and logs once until a batch fits again) when it does not.
 */
bool gpu_rate_admit(struct gpu *g, struct gpu_proc *p, const Profd__GpuBatch *m);
/* Whether uid may have one more record waiting for its launch. */
bool gpu_uid_may_wait(struct gpu *g, uint32_t uid);
/* add records of uid started waiting, sub stopped. */
void gpu_uid_waits(struct gpu *g, uint32_t uid, size_t add, size_t sub);
/*
 * Count bytes of string table for uid: false (nothing counted) when its connections' tables
 * would pass their bound together, or out of memory.
 */
bool gpu_uid_string_add(struct gpu *g, uint32_t uid, size_t bytes);
void gpu_uid_string_sub(struct gpu *g, uint32_t uid, size_t bytes);
void gpu_uid_free_all(struct gpu *g);

/* gpu_mem.c */
/*
 * An allocation record of pid (uid: the process's owner), tracked by address until its release
 * or the process's end; its stack comes with gpu_mem_joined. Returns 0 or -ENOMEM (not tracked
 * for the per-process bound or the budget: counted, 0).
 */
int gpu_mem_alloc(struct gpu *g, uint32_t pid, uint32_t uid, uint32_t device, uint64_t addr,
		  uint64_t bytes, uint64_t ts);
/* A release record: ends the allocation live at (device, addr), or is counted as unmatched. */
void gpu_mem_release(struct gpu *g, uint32_t pid, uint32_t device, uint64_t addr, uint64_t ts);
/* The join charged the allocation (addr, allocated at ts) to stack. */
void gpu_mem_joined(struct gpu *g, uint32_t pid, uint64_t addr, uint64_t ts, uint32_t tid,
		    uint32_t stack);
/* pid ended (exit or disconnect) at ts: its allocations are released then. */
void gpu_mem_end(struct gpu *g, uint32_t pid, uint64_t ts);
/* Forget the releases before `before` (the store's oldest data) and ended processes. */
void gpu_mem_prune(struct gpu *g, uint64_t before);
void gpu_mem_free_all(struct gpu *g);
void gpu_mem_gc(struct gpu *g, struct store_gc *mark, const struct store_gc *remap);
/* Fill s's memory fields for pid. */
void gpu_mem_status(const struct gpu *g, uint32_t pid, struct gpu_proc_status *s);

/* gpu_labels.c */
/* Returns 0, or -ENOSPC when refused (per-process cap or budget; counted by the caller). */
/* range's name is ignored: the range takes a reference on name instead. */
int gpu_nvtx_add(struct gpu *g, struct gpu_proc *p, const struct nvtx_range *range,
		 struct gname *name);
/*
 * The NVTX frames of (p, tid) at ts, innermost first (appended to a leaf-first stack they put
 * the outermost range at the root end). Returns how many ids were written (<= MAX_NVTX_DEPTH).
 */
size_t gpu_nvtx_frames(struct gpu *g, struct gpu_proc *p, uint32_t tid, uint64_t ts, uint32_t *ids);
/* Returns 0, or -ENOSPC when refused. */
int gpu_busy_add(struct gpu *g, struct gpu_proc *p, uint64_t start, uint64_t end);
/* Whether a kernel of p ran at ts. */
bool gpu_busy_at(struct gpu *g, struct gpu_proc *p, uint64_t ts);
/*
 * Nanoseconds of [a, b) in which no kernel of p ran, after busy_from only (what came before is
 * unknown).
 */
uint64_t gpu_idle_ns(struct gpu *g, struct gpu_proc *p, uint64_t a, uint64_t b);
/* Drop the labels nothing can ask for any more. */
void gpu_prune(struct gpu *g, struct gpu_proc *p, uint64_t now);
void gpu_proc_free_labels(struct gpu *g, struct gpu_proc *p);

#endif
