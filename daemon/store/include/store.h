/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The aggregation store: interned frames and stacks, and per-(process, thread, stack) values in
 * time buckets, with memory bounded by a cap (oldest buckets evicted first, evictions counted;
 * a user holding more than an equal share of the data loses its own oldest data first).
 * Every value (CPU samples now, GPU time later) is a column of the same table.
 *
 * Interned data nothing refers to any more is reclaimed by compaction, which renumbers frame and
 * stack ids. It runs only when its owner asks (store__compact_due, then the store__gc_* steps, on
 * the daemon's periodic tick): adding, interning and eviction never move an id.
 *
 * Not thread-safe: the daemon's loop thread owns it.
 */
#ifndef PROFD_STORE_H
#define PROFD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum frame_kind {
	FRAME_KIND_UNKNOWN = 0,
	FRAME_KIND_KERNEL = 1,
	FRAME_KIND_NATIVE = 2,
	FRAME_KIND_PYTHON = 3,
	FRAME_KIND_GPU = 4,
	FRAME_KIND_NVTX = 5,
	/* a thread state at the root end of a stack: "[running]", "[off-cpu: futex]" */
	FRAME_KIND_STATE = 6,
};

/*
 * Value columns. New kinds of value append here, and store_value_type() names them (the names
 * and units are the Profile's value_types, which clients select by name). An entry holds one
 * column, so a column costs memory only where it has values.
 */
enum store_value {
	STORE_VALUE_CPU_SAMPLES = 0,  /* "samples" count: CPU samples */
	STORE_VALUE_GPU_IDLE_SAMPLES, /* "gpu_idle_samples" count: CPU samples taken while none of
				       * the process's kernels ran (CUPTI-connected processes) */
	STORE_VALUE_GPU_NS,	      /* "gpu_time" nanoseconds: kernel time by launching stack */
	STORE_VALUE_GPU_KERNELS,      /* "gpu_kernels" count: kernels by launching stack */
	STORE_VALUE_COPY_NS,	      /* "copy_time" nanoseconds: memcpy/memset time */
	STORE_VALUE_COPY_BYTES,	      /* "copy_bytes" bytes */
	STORE_VALUE_UPROBE_LAUNCHES,  /* "uprobe_launches" count: libcuda launches seen by a uprobe
				       * in processes without the CUPTI library (no durations) */
	STORE_VALUE_OFFCPU_NS,	      /* "off_cpu" nanoseconds: time off the CPU, by the stack
				       * the thread left with (--off-cpu) */
	STORE_VALUE_GPU_IDLE_OFFCPU_NS, /* "gpu_idle_off_cpu" nanoseconds: the part of that time
					 * in which none of the process's kernels ran
					 * (CUPTI-connected processes) */
	STORE_VALUE_GPU_MEM_BYTES,	/* "gpu_memory" bytes: GPU memory allocated, by the
					 * allocating stack, at the allocation's time */
	STORE_VALUE_GPU_MEM_LIVE,	/* "gpu_memory_live" bytes: never added to the store; a
					 * dump fills it from the GPU module's live allocations
					 * (gpu__live_each) for the window's end */
	STORE_VALUE__COUNT,
};

/* Name and unit of a column, e.g. "samples" and "count". */
void store_value_type(enum store_value col, const char **type, const char **unit);

/*
 * What identifies a frame. Strings are copied on intern. Two frames are the same when every
 * field is equal; native frames are per address (module + rel address), so pprof can keep one
 * location per address while folded output merges by name.
 */
struct frame_key {
	enum frame_kind kind;
	const char *name;   /* never NULL: "[unknown]" when no symbol */
	const char *module; /* mapping path or kernel module; NULL if none */
	uint64_t address;   /* module-relative (native) or absolute (kernel) address */
	const char *file;   /* source file; NULL if unknown */
	uint32_t line;
	const char *build_id; /* hex; NULL if unknown */
};

/* A stored frame as the store hands it back; strings owned by the store. */
struct store_frame {
	enum frame_kind kind;
	const char *name;
	const char *module;
	uint64_t address;
	const char *file;
	uint32_t line;
	const char *build_id;
};

struct store_opts {
	size_t mem_cap;	    /* bytes; 0 for the default (256 MiB) */
	uint64_t bucket_ns; /* time bucket width; 0 for the default (1 s) */
};

struct store_stats {
	uint64_t samples;	  /* value-0 total added since start */
	uint64_t evicted_samples; /* value-0 total dropped by eviction */
	uint64_t evicted_buckets;
	uint64_t bytes; /* memory accounted right now */
	uint64_t cap;
	uint64_t frames;
	uint64_t stacks;
	uint64_t processes; /* process records: every life of every pid kept */
	uint64_t buckets;
	uint64_t oldest_ns;  /* start of the oldest bucket holding data, 0 if empty */
	uint64_t newest_ns;  /* newest sample timestamp, 0 if empty */
	uint64_t generation; /* bumps when frame or stack ids are renumbered (compaction) */
	/* Appended after the first version; zero-initialised by store__stats like the rest. */
	uint64_t threads;
	uint64_t compactions;
	uint64_t interned_bytes; /* part of bytes held by frames, stacks and strings */
	/* Entries evicted from a uid over its share, before the oldest bucket (fair.c). */
	uint64_t evicted_over_share;
};

struct store;

/* Returns a new store or NULL with errno set. */
struct store *store__new(const struct store_opts *opts);
void store__free(struct store *s);

/*
 * Intern a frame / a stack (frame ids, leaf first). Return an id > 0, or 0 with errno set
 * (ENOMEM, EINVAL for a bad key or frame id). Ids stay valid until store__stats().generation
 * changes, which only a compaction does; callers that cache ids must drop their caches then.
 */
uint32_t store__intern_frame(struct store *s, const struct frame_key *key);
uint32_t store__intern_stack(struct store *s, const uint32_t *frames, size_t n);

/*
 * Add value to column `col` of (pid, tid, stack) in the bucket of ts_ns. May evict old buckets
 * to stay under the cap, but never compacts: ids stay as they are. Dead interned data that the
 * next compaction reclaims, when it is a real share of the cap, is not a reason to evict: until
 * that compaction the store may be over its cap by that much. A sample older than an evicted
 * bucket is counted as evicted at once. Returns 0, -EINVAL for a bad stack id or column, -ENOMEM.
 */
int store__add(struct store *s, uint64_t ts_ns, uint32_t pid, uint32_t tid, uint32_t stack,
	       enum store_value col, uint64_t value);

/*
 * Charge a span of time [start, end) to column `col` of (pid, tid, stack): each bucket it spans
 * gets its share, so a long wait belongs to every second it lasted, not to the one it ended in.
 * part, when not NULL, says how much of a piece [a, b) (inside one bucket) to charge, e.g. the
 * part of it in which a GPU was idle; NULL charges b - a. At most 4096 pieces: the last one
 * takes the rest. Returns 0 or store__add's error.
 */
int store__add_span(struct store *s, uint64_t start, uint64_t end, uint32_t pid, uint32_t tid,
		    uint32_t stack, enum store_value col,
		    uint64_t (*part)(void *ctx, uint64_t a, uint64_t b), void *ctx);

/*
 * Process and thread metadata. An exited process is kept until the last bucket naming it is
 * evicted; a live one until it exits. A thread name is kept while a bucket names the thread (or
 * since it was set, until the newest bucket of that moment is evicted): callers set it again
 * when store__thread_name() returns NULL. Comms are copied (at most 255 bytes kept). Return 0 or
 * -ENOMEM.
 */
int store__set_process(struct store *s, uint32_t pid, uint32_t uid, const char *comm);
/*
 * Lives: the kernel reuses pids, so one pid names one process after another. The store keeps
 * each process apart as a life of its pid, numbered 1 .. STORE_LIFE_MAX per pid (then 1 again:
 * the oldest life of that number is dropped), with its own name, owner, executable, threads and
 * data; 0 stands for none. What is added for a pid belongs to its newest life, and every other
 * call that takes a pid alone speaks of that newest life too.
 *
 * store__process_began: pid now names the process that started at `start` (the kernel's start
 * time, in any unit that tells two processes of one pid apart; 0: unknown). A start other than
 * the newest life's begins a new life, blank until store__set_process, and the one before it
 * is exited; the same start, or 0, is the same process (an exec keeps its life). A life
 * recorded before its start was known takes the start while it has not exited. Returns 0,
 * -EINVAL (pid 0 or out of range) or -ENOMEM.
 */
#define STORE_LIFE_MAX 1023u
int store__process_began(struct store *s, uint32_t pid, uint64_t start);
/*
 * Whether store__process_began(pid, start) would end a life pid has now and begin another:
 * what other holders of the old process's data must hand to the store first.
 */
bool store__process_is_new(const struct store *s, uint32_t pid, uint64_t start);
int store__set_thread(struct store *s, uint32_t pid, uint32_t tid, const char *comm);
void store__process_exited(struct store *s, uint32_t pid);
/* Record pid's parent process. Returns 0, or -ENOENT when pid has no record. */
int store__set_parent(struct store *s, uint32_t pid, uint32_t ppid);
/*
 * roots and every process the store knows to descend from one of them, through the parents
 * store__set_parent recorded or, for a process without one, parent_of(ctx, pid) (may be NULL;
 * returns 0 for unknown). Sets *out (sorted, roots included; free() it) and *nout. Returns 0
 * or -ENOMEM.
 */
int store__descendants(const struct store *s, const uint32_t *roots, size_t nroots,
		       uint32_t (*parent_of)(void *ctx, uint32_t pid), void *ctx, uint32_t **out,
		       size_t *nout);
/*
 * The path of pid's executable (copied, at most 4095 bytes kept; NULL or "": unknown), for a
 * process set before. Returns 0, -ENOENT for an unknown pid, or -ENOMEM.
 */
int store__set_process_exe(struct store *s, uint32_t pid, const char *exe);

/*
 * Lookups; NULL / false when unknown. Returned memory is owned by the store and stays valid
 * until the next call that interns, adds, sets or compacts.
 */
const struct store_frame *store__frame(const struct store *s, uint32_t frame_id);
/* Sets *frames (leaf first) and *n. */
bool store__stack(const struct store *s, uint32_t stack_id, const uint32_t **frames, size_t *n);
struct store_process_info {
	uint32_t pid;
	uint32_t life;	/* store__process_began */
	uint64_t start; /* 0: unknown */
	uint32_t uid;
	uint32_t ppid; /* the parent process; 0: not known */
	const char *comm;
	const char *exe; /* NULL when unknown */
	bool exited;
};
bool store__process(const struct store *s, uint32_t pid, struct store_process_info *out);
/* One life of pid, false when the store keeps no such life (life 0 included). */
bool store__process_life(const struct store *s, uint32_t pid, uint32_t life,
			 struct store_process_info *out);
/* Whether any life of pid the store keeps is owned by uid. */
bool store__process_owned(const struct store *s, uint32_t pid, uint32_t uid);
const char *store__thread_name(const struct store *s, uint32_t pid, uint32_t tid);
/* The name of thread tid of pid's life (0: data added while no process record existed). */
const char *store__thread_name_life(const struct store *s, uint32_t pid, uint32_t life,
				    uint32_t tid);

/* The owner of data whose process had no uid recorded: matches no uid filter. */
#define STORE_UID_UNKNOWN UINT32_MAX

/*
 * The export journal. While on, every value store__add takes (store__add_span's pieces too) is
 * also summed in one side table per (pid, tid, stack, column), whatever its time: a sample that
 * arrives late, even one whose bucket was evicted, is there once. store__journal_drain hands the
 * table over and empties it, so an exporter that drains on a timer sends every value exactly
 * once. Its stacks stay valid through compaction (renumbered with the buckets); its memory is
 * charged to the store. Turning it off drops what it holds.
 */
void store__journal_enable(struct store *s, bool on);
/* Called once per journal row; stack ids are valid until the next compaction. */
typedef int (*store_journal_cb)(uint32_t pid, uint32_t tid, uint32_t stack, enum store_value col,
				uint64_t value, void *ctx);
/*
 * Call cb per row, then empty the journal (also when cb fails). *lost (may be NULL) gets the
 * number of values the journal had no memory for since the last drain. Returns 0, -EINVAL, or
 * cb's first negative value (the rows after it are dropped).
 */
int store__journal_drain(struct store *s, store_journal_cb cb, void *ctx, uint64_t *lost);

/* Call cb per journal row without draining it (a peek: who is in it). 0 or cb's first error. */
int store__journal_each(const struct store *s, store_journal_cb cb, void *ctx);

/* A query over a time range. */
struct store_query {
	uint64_t start_ns;    /* inclusive */
	uint64_t end_ns;      /* exclusive; UINT64_MAX for open */
	const uint32_t *pids; /* NULL / 0: any */
	size_t npids;
	uint32_t tid;	 /* 0: any */
	bool filter_uid; /* only data of processes owned by `uid` when it was sampled */
	uint32_t uid;
	/*
	 * Sum the processes of one name (store__process's comm; "" without one) and all their
	 * threads: the callback then gets one key per (name, stack), with the pid of the first
	 * process of that name met and tid 0.
	 */
	bool merge_processes;
};

/*
 * Called once per distinct (pid, tid, stack) of one process with values summed over the range: a
 * pid that named several processes (lives, above) gives a row for each.
 */
typedef int (*store_query_cb)(uint32_t pid, uint32_t tid, uint32_t stack,
			      const uint64_t values[STORE_VALUE__COUNT], void *ctx);
/*
 * Called once per distinct (pid, life, tid, stack): the lives of one pid come apart (life 0:
 * data added while the pid had no process record).
 */
typedef int (*store_life_cb)(uint32_t pid, uint32_t life, uint32_t tid, uint32_t stack,
			     const uint64_t values[STORE_VALUE__COUNT], void *ctx);

/*
 * Aggregate the buckets overlapping [start, end) (whole buckets: a bucket that straddles a
 * bound is included, so a window may hold up to one bucket more than asked) and call cb per key.
 * Returns 0, a negative errno, or cb's first negative value.
 */
int store__query(struct store *s, const struct store_query *q, store_query_cb cb, void *ctx);
/*
 * store__query with each pid's lives apart. With merge_processes the names are those of each
 * life, and the key's pid and life those of the first process of that name met.
 */
int store__query_lives(struct store *s, const struct store_query *q, store_life_cb cb, void *ctx);

void store__stats(const struct store *s, struct store_stats *out);
/* store__stats().generation alone, for hot paths that only check their cached ids. */
uint64_t store__generation(const struct store *s);

/*
 * Compaction: drop interned frames, stacks and strings nothing refers to and renumber the rest
 * densely (order kept), bumping generation. The owner runs it in steps, between two adds:
 *
 *	if (store__compact_due(s) && (gc = store__gc_plan(s))) {
 *		store_gc__keep(gc, id);			// for each id held outside the buckets
 *		if (!store__gc_commit(s, gc))
 *			id = store_gc__map(gc, id);	// for each of them
 *		store_gc__free(gc);
 *	}
 *
 * Holders of ids outside the buckets (the GPU module's pending launches, held samples and event
 * ring) keep them in the plan and map them after the commit. Nothing else may change the store
 * between plan and commit except adding and interning (ids interned after the plan cannot be
 * kept); one plan at a time.
 */
struct store_gc;

/*
 * Whether compaction is worth running now: the store is over its cap and dead interned data is a
 * large share of the cap, or no bucket is left and there is dead data at all. What holders kept
 * at the last compaction does not count. False while a plan is out.
 */
bool store__compact_due(const struct store *s);
/*
 * Start a compaction: record the ids it covers and allocate what keeping them needs. Returns the
 * plan, owned by the caller until store_gc__free (which must come before store__free), or NULL
 * with errno ENOMEM, or EBUSY when another plan is out.
 */
struct store_gc *store__gc_plan(struct store *s);
/*
 * Keep stack (and its frames) through this compaction though no bucket names it. Ids the plan
 * does not cover (0, interned since, or unknown) are ignored; keeping twice is keeping once.
 */
void store_gc__keep(struct store_gc *gc, uint32_t stack);
/*
 * Drop what neither a bucket nor a keep references, renumber the rest and the buckets' entries,
 * and bump generation when anything was dropped; may then evict buckets if the store is still
 * over its cap. The plan is spent either way (store_gc__free it). Returns 0, -EINVAL for a plan
 * that is not s's or already committed, or -ENOMEM (the store is unchanged: ids stay valid).
 */
int store__gc_commit(struct store *s, struct store_gc *gc);
/*
 * After a successful commit: the new id of stack old, 0 if it was dropped or is unknown. When the
 * commit dropped nothing (or failed) ids did not change: returns old while it is a valid id.
 */
uint32_t store_gc__map(const struct store_gc *gc, uint32_t old);
/* Free a plan; one that was not committed lets go of its keeps and changes nothing. NULL: no-op. */
void store_gc__free(struct store_gc *gc);

/*
 * Plan and commit with no holder: for tests and explicit trims, when nothing outside the buckets
 * holds ids. Returns 0, -ENOMEM (store unchanged) or -EBUSY while a plan is out.
 */
int store__compact(struct store *s);

/* Bucket width in ns. */
uint64_t store__bucket_ns(const struct store *s);

#endif
