/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Inside the GPU module: gpu.c (processes, the uplink messages, status, GC), gpu_join.c (launch
 * and record join, charging, held samples, NVTX labels, idle time), gpu_ring.c (the raw event
 * ring and traces). Not for other modules.
 */
#ifndef PROFD_GPU_PRIV_H
#define PROFD_GPU_PRIV_H

#include "gpu.h"
#include "ptrmap.h"



/* An NVTX range kept to label samples and launches of its thread. */
struct nvtx_range {
	uint64_t start;
	uint64_t end;
	uint32_t tid;
	uint32_t depth;
	bool open;
	char *name; /* owned */
};

/* A kernel busy interval [start, end) of a process, merged with its neighbours. */
struct busy {
	uint64_t start;
	uint64_t end;
};

/* A CPU sample waiting for its labels. */
struct held {
	uint64_t ts;
	uint32_t tid;
	uint32_t stack;
};

/* A process whose CUPTI library is (or was, until the next tick after exit) attached. */
struct gpu_proc {
	uint32_t pid;
	uint32_t uid;
	bool attached;
	bool enabled;
	bool exited;
	bool probe_attached;
	Profd__GpuState state;
	char *detail;
	Profd__GpuClock clock;
	uint32_t cupti_version;
	uint32_t launch_rate_limit;
	/* The connection's string table: index i is strs[i - 1]; NULL for a refused string. */
	char **strs;
	uint32_t nstrs;
	uint32_t strs_cap;
	size_t str_bytes;
	uint64_t complete_until_ns;
	/* Closed ranges in arrival order, and the ranges still open. */
	struct nvtx_range *nvtx;
	size_t nnvtx, nvtx_cap;
	struct nvtx_range *open;
	size_t nopen, open_cap;
	struct busy *busy; /* sorted by start, disjoint */
	size_t nbusy, busy_cap;
	struct held *held;
	size_t nheld, held_cap;
	/* Status strings handed out by gpu__status. */
	Profd__GpuProcessStatus st;
};

/* A record waiting for its launch. */
struct wait_rec {
	uint64_t start;
	uint64_t end;
	uint64_t bytes;
	uint32_t weight;
	bool is_copy;
	Profd__GpuCopyKind kind;
	char *leaf; /* kernel name, demangled; owned; NULL for copies */
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
	struct join *prev, *next; /* expiry order: insertion */
};

/* One raw event of the ring. */
enum ev_type {
	EV_SAMPLE = 1,
	EV_LAUNCH,
	EV_KERNEL,
	EV_COPY,
	EV_API,
	EV_NVTX,
};

struct rstr; /* a ring string, shared by events and refcounted */

struct ev {
	uint8_t type;
	uint8_t kind; /* copies: Profd__GpuCopyKind */
	uint8_t has_device;
	uint8_t has_stream;
	uint32_t pid;
	uint32_t tid;
	uint32_t uid;
	uint32_t corr;
	uint32_t stack; /* samples, launches */
	uint32_t device;
	uint32_t stream;
	uint32_t depth;
	uint64_t start; /* ts of samples and launches */
	uint64_t end;
	union {
		uint64_t bytes; /* copies */
		struct {
			uint32_t grid, block; /* kernels; 0 when not reported */
		};
	};
	struct rstr *name; /* kernels, api calls, NVTX */
};

struct ring {
	struct ev *ev;
	size_t cap;  /* slots allocated (grows up to max) */
	size_t max;  /* slots allowed */
	size_t head; /* oldest */
	size_t n;
	size_t limit; /* bytes: slots + strings */
	size_t str_bytes;
	struct rstr **strs; /* open addressing by string */
	size_t str_mask, nstr;
	uint64_t overwritten;
};

struct gpu {
	struct gpu_opts o;
	struct store *store;
	struct ptrmap procs; /* pid -> struct gpu_proc */
	struct ptrmap joins; /* pid << 32 | corr -> struct join */
	struct join *jhead, *jtail;
	size_t npending; /* launches + waiting records */
	size_t nheld;
	uint64_t now;
	struct gpu_stats st;
	uint64_t strings_refused;
	/*
	 * A stack id between two store__add calls: each add may compact and renumber, so the id
	 * lives where the GC callback remaps it.
	 */
	uint32_t scratch_stack;
	struct ring ring;
};

/* gpu.c */
struct gpu_proc *gpu_proc(const struct gpu *g, uint32_t pid);
/* A string of the process's table by index: NULL for 0, a refused string or a bad index. */
const char *gpu_proc_string(const struct gpu_proc *p, uint32_t idx, bool *bad);
uint32_t gpu_uid_of(const struct gpu *g, uint32_t pid);

/* gpu_join.c */
int gpu_join_launch(struct gpu *g, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t stack,
		    uint32_t corr);
/* A validated kernel (leaf set) or copy record with weight > 0. Takes leaf. */
int gpu_join_record(struct gpu *g, uint32_t pid, struct wait_rec *r, uint32_t corr);
void gpu_join_expire(struct gpu *g, uint64_t now, uint32_t only_pid);
void gpu_join_free_all(struct gpu *g);
void gpu_nvtx_add(struct gpu *g, struct gpu_proc *p, const Profd__GpuNvtxRange *r,
		  const char *name);
void gpu_busy_add(struct gpu_proc *p, uint64_t start, uint64_t end);
int gpu_hold(struct gpu *g, struct gpu_proc *p, uint64_t ts, uint32_t tid, uint32_t stack);
/* Release the held samples that are due (all when all is set). */
void gpu_release(struct gpu *g, struct gpu_proc *p, uint64_t now, bool all);
void gpu_prune(struct gpu *g, struct gpu_proc *p, uint64_t now);
void gpu_proc_free_labels(struct gpu_proc *p);
void gpu_join_gc(struct gpu *g, enum store_gc_phase phase);

/* gpu_ring.c */
int ring_init(struct ring *r, size_t bytes);
void ring_fini(struct ring *r);
/* Append; name is copied (NULL: none). Returns 0 or -ENOMEM. */
int ring_push(struct ring *r, const struct ev *e, const char *name);
void ring_gc(struct gpu *g, enum store_gc_phase phase);

#endif
