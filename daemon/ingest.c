// SPDX-License-Identifier: BSD-2-Clause
#include "ingest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi.h"
#include "gpu.h"
#include "hash.h"
#include "log.h"
#include "offcpu.h"
#include "procfs.h"
#include "route.h"
#include "timeutil.h"

/*
 * Address cache: (pid, exec epoch, address) -> frame id, so the hot path of a repeated address is
 * one probe. Open addressing, wiped whole when full or when the store renumbers frames; an exec,
 * or code mapped into the process (another file may now lie where one was named), bumps the
 * pid's epoch so stale entries of the old mappings are never hit.
 */
#define ADDR_CACHE_BITS 16
#define ADDR_CACHE_SIZE (1u << ADDR_CACHE_BITS)
#define ADDR_CACHE_MAX_FILL (ADDR_CACHE_SIZE / 4 * 3)

struct addr_entry {
	uint64_t addr;
	uint64_t owner; /* pid << 32 | epoch; 0 marks an empty slot (pid 0 is never a user pid) */
	uint32_t frame;
	/*
	 * 0: final. Else the second (of the monotonic clock) from which the address is symbolized
	 * again: a user address without a symbol may get one later (a JIT writes its perf map
	 * after its code first ran).
	 */
	uint32_t retry_s;
};

/* How long an address without a symbol stays unnamed before it is looked up again. */
#define ADDR_RETRY_S 1

/* Known processes: pid -> exec epoch. */
#define PID_TABLE_MIN 1024

enum py_state {
	PY_UNKNOWN = 0, /* not looked at yet */
	PY_PENDING,	/* the executable needs a libpython the loader has not mapped yet */
	PY_ABSENT,	/* no CPython in this image (checked again only after an exec) */
	PY_ACTIVE,	/* the sampler reads its frames */
	PY_UNSUPPORTED, /* CPython we cannot read: native frames only */
};

struct pid_entry {
	uint32_t pid; /* 0: empty */
	uint32_t epoch;
	bool tombstone;
	uint8_t py_state;	   /* enum py_state */
	uint16_t py_version;	   /* major << 8 | minor when active */
	uint32_t uid;		   /* the owner (proc_owner) the process's data is filed under */
	uint64_t seen_ns;	   /* first sample of this image */
	uint64_t owner_checked_ns; /* when uid was last compared with /proc */
	uint64_t exit_ns;	   /* the exit record's time, once it came (a tombstone then) */
	uint64_t py_checked_ns;
	/* The process's start time (note_start): which process this is, whatever its epoch says. */
	uint64_t start;
};

/* A process that just exec'd may map its libpython after its first samples: look again. */
#define PY_RECHECK_WINDOW_NS (10ull * NSEC_PER_SEC)
#define PY_RECHECK_EVERY_NS (NSEC_PER_SEC / 2)

struct ingest {
	struct store *store;
	struct symbolizer *sym;
	struct python *py;
	ingest_py_config_fn py_config;
	void *py_ctx;
	ingest_unwind_fn unwind_note;
	ingest_maps_fn maps_changed;
	void *unwind_ctx;
	struct gpu *gpu;
	struct route route; /* the store, the GPU module and the timeline */
	char proc_root[256];
	struct addr_entry *addrs;
	size_t addr_fill;
	uint64_t store_gen;
	uint64_t kernel_gen;
	uint32_t now_s; /* the record's time in whole seconds, for addr_entry.retry_s */
	struct pid_entry *pids;
	size_t pid_cap; /* power of two */
	size_t pid_fill;
	size_t pid_live; /* pid_fill less the tombstones: the processes known now */
	uint32_t next_epoch;
	struct ingest_stats stats;
	bool thread_states; /* ingest_opts.thread_states */
	const char *kname_buf[PROFD_MAX_STACK];
	uint32_t frame_buf[2 * PROFD_MAX_STACK + PROFD_MAX_PY_FRAMES + 4];
	uint32_t user_buf[PROFD_MAX_STACK];
	uint32_t py_buf[PROFD_MAX_PY_FRAMES];
};

/* One C-level eval activation: py_buf[start .. end), newest first. */
struct py_act {
	uint16_t start, end;
};

/* Frame ids the store never hands out for these synthetic frames are interned lazily. */
static const struct frame_key key_no_stack = {.kind = FRAME_KIND_UNKNOWN, .name = "[no stack]"};
static const struct frame_key key_truncated = {.kind = FRAME_KIND_UNKNOWN, .name = "[truncated]"};
/* A process's sample with kernel frames only: exiting (no address space) or unreadable stack. */
static const struct frame_key key_no_user = {.kind = FRAME_KIND_UNKNOWN, .name = "[no user stack]"};
/* The leaf of a thread's waits summed in the kernel, each too short to be sent with its stacks. */
static const struct frame_key key_short_waits = {.kind = FRAME_KIND_UNKNOWN,
						 .name = "[short waits]"};
static const struct frame_key key_short_state = {.kind = FRAME_KIND_STATE,
						 .name = "[off-cpu: short waits]"};

struct ingest *ingest__new(const struct ingest_opts *opts)
{
	struct ingest *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->store = opts->store;
	in->sym = opts->sym;
	in->py = opts->py;
	in->py_config = opts->py_config;
	in->py_ctx = opts->py_ctx;
	in->unwind_note = opts->unwind_note;
	in->maps_changed = opts->maps_changed;
	in->unwind_ctx = opts->unwind_ctx;
	in->gpu = opts->gpu;
	in->thread_states = opts->thread_states;
	in->route =
	    (struct route){.store = opts->store, .gpu = opts->gpu, .timeline = opts->timeline};
	snprintf(in->proc_root, sizeof(in->proc_root), "%s",
		 opts->proc_root ? opts->proc_root : "/proc");
	in->addrs = calloc(ADDR_CACHE_SIZE, sizeof(*in->addrs));
	in->pid_cap = PID_TABLE_MIN;
	in->pids = calloc(in->pid_cap, sizeof(*in->pids));
	if (!in->addrs || !in->pids) {
		ingest__free(in);
		errno = ENOMEM;
		return NULL;
	}
	in->next_epoch = 1;
	return in;
}

void ingest__free(struct ingest *in)
{
	if (!in)
		return;
	free(in->addrs);
	free(in->pids);
	free(in);
}

void ingest__stats(const struct ingest *in, struct ingest_stats *out)
{
	*out = in->stats;
}

void ingest__memory(const struct ingest *in, struct mem_usage *out)
{
	out->bytes =
	    sizeof(*in) + ADDR_CACHE_SIZE * sizeof(*in->addrs) + in->pid_cap * sizeof(*in->pids);
	out->count = in->pid_live;
}

static void addr_cache_wipe(struct ingest *in)
{
	memset(in->addrs, 0, ADDR_CACHE_SIZE * sizeof(*in->addrs));
	in->addr_fill = 0;
}

static struct pid_entry *pid_find(struct ingest *in, uint32_t pid)
{
	size_t mask = in->pid_cap - 1;

	for (size_t i = hash_mix64(pid) & mask;; i = (i + 1) & mask) {
		struct pid_entry *e = &in->pids[i];

		if (e->pid == pid && !e->tombstone)
			return e;
		if (e->pid == 0)
			return NULL;
	}
}

/* The entry of pid's last exited image (a tombstone, the newest of them), or NULL. */
static struct pid_entry *pid_find_exited(struct ingest *in, uint32_t pid)
{
	size_t mask = in->pid_cap - 1;
	struct pid_entry *last = NULL;

	for (size_t i = hash_mix64(pid) & mask; in->pids[i].pid; i = (i + 1) & mask) {
		struct pid_entry *e = &in->pids[i];

		if (e->pid == pid && e->tombstone &&
		    (!last || (int32_t)(e->epoch - last->epoch) > 0))
			last = e;
	}
	return last;
}

static int pid_table_grow(struct ingest *in)
{
	size_t live = 0, cap, mask;
	struct pid_entry *t;

	/* Rebuilding clears tombstones; grow only when live entries need the room. */
	for (size_t k = 0; k < in->pid_cap; k++)
		live += in->pids[k].pid && !in->pids[k].tombstone;
	cap = live * 2 >= in->pid_cap ? in->pid_cap * 2 : in->pid_cap;
	mask = cap - 1;
	t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t k = 0; k < in->pid_cap; k++) {
		struct pid_entry *e = &in->pids[k];
		size_t i;

		if (!e->pid || e->tombstone)
			continue;
		for (i = hash_mix64(e->pid) & mask; t[i].pid; i = (i + 1) & mask)
			;
		t[i] = *e;
	}
	free(in->pids);
	in->pids = t;
	in->pid_cap = cap;
	in->pid_fill = 0;
	in->pid_live = live;
	for (size_t k = 0; k < cap; k++)
		in->pid_fill += t[k].pid != 0;
	return 0;
}

static struct pid_entry *pid_insert(struct ingest *in, uint32_t pid)
{
	size_t mask;

	if ((in->pid_fill + 1) * 4 > in->pid_cap * 3 && pid_table_grow(in))
		return NULL;
	mask = in->pid_cap - 1;
	for (size_t i = hash_mix64(pid) & mask;; i = (i + 1) & mask) {
		struct pid_entry *e = &in->pids[i];

		if (e->pid == 0) {
			memset(e, 0, sizeof(*e));
			e->pid = pid;
			e->epoch = in->next_epoch++;
			in->pid_fill++;
			in->pid_live++;
			return e;
		}
	}
}

/*
 * A process gone before its start time was read: its fork's time with the top bit set, a value no
 * tick count after boot reaches, so it still begins a life of its own.
 */
#define START_OF_FORK(ts_ns) ((ts_ns) | 1ull << 63)

/*
 * Tell the store which process pid names now, by its start time (a process is the same across
 * its execs, another after the pid's reuse): the store keeps the data, name and owner of each
 * apart. What the GPU module still holds of an old process goes to the store first, under that
 * process. fork_ts: the fork record's time, 0 when no fork record is at hand. Returns the start
 * time used, 0 when unknown.
 */
static uint64_t note_start(struct ingest *in, uint32_t pid, uint64_t fork_ts)
{
	uint64_t start = 0;

	if (procfs_read_start(in->proc_root, pid, &start) && fork_ts)
		start = START_OF_FORK(fork_ts);
	if (in->gpu && store__process_is_new(in->store, pid, start))
		gpu__process_reused(in->gpu, pid);
	/* Out of memory: the data goes on under the pid's newest process, as it had to before. */
	(void)store__process_began(in->store, pid, start);
	return start;
}

/*
 * Whether pid names another process than e was made for though no exit or fork record said so
 * (the ring lost them): its start time in /proc is another. A start the fork record stood in
 * for (START_OF_FORK) is not compared: /proc could not be read then.
 */
static bool pid_reused(const struct ingest *in, const struct pid_entry *e)
{
	uint64_t start;

	return e->start && !(e->start & START_OF_FORK(0)) &&
	       !procfs_read_start(in->proc_root, e->pid, &start) && start != e->start;
}

/* Read the process name from /proc/PID/comm (the thread group leader's name). */
static void read_comm(const struct ingest *in, uint32_t pid, char *buf, size_t len,
		      const char *fallback)
{
	char path[320];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%u/comm", in->proc_root, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, len - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		snprintf(buf, len, "%s", fallback);
		return;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/*
 * Record pid's executable as its mappings name it (the symbolizer reads the same paths from
 * /proc/PID/maps), for the formats that name a profile's main binary. A process gone by now
 * (its samples came late) keeps none: better than the next owner of its pid's.
 */
static void note_exe(struct ingest *in, uint32_t pid)
{
	static const char deleted[] = " (deleted)";
	char path[320], exe[PATH_MAX];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%u/exe", in->proc_root, pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0 || exe[0] != '/') {
		store__set_process_exe(in->store, pid, NULL);
		return;
	}
	exe[n] = '\0';
	if ((size_t)n > sizeof(deleted) - 1 && !strcmp(exe + n - (sizeof(deleted) - 1), deleted))
		exe[n - (sizeof(deleted) - 1)] = '\0';
	store__set_process_exe(in->store, pid, exe);
}

/* Copy a fixed-size comm that may lack its NUL, replacing bytes that are not printable. */
static void comm_copy(char *dst, const char *src)
{
	size_t i;

	for (i = 0; i < PROFD_COMM_LEN - 1 && src[i]; i++)
		dst[i] = (src[i] < 0x20 || src[i] == 0x7f) ? '?' : src[i];
	dst[i] = '\0';
}

/*
 * Who owns a process, as ptrace and perf decide: its effective uid while it is dumpable, root
 * when it is not (a setuid or setgid program, one that dropped or changed credentials, one that
 * made itself undumpable). The files of /proc/PID belong to exactly that uid. Once the process is
 * gone or a zombie, the effective uid its record carries.
 */
static uint32_t proc_owner(const struct ingest *in, uint32_t pid, uint32_t euid)
{
	char path[300], state;
	struct stat st;
	/* A file in it: the directory's own owner is not updated when dumpability changes. */
	int n = snprintf(path, sizeof(path), "%s/%u/stat", in->proc_root, pid);

	if (n <= 0 || (size_t)n >= sizeof(path) || stat(path, &st) != 0)
		return euid;
	/*
	 * The kernel also gives root the files of a task that has let go of its memory: an
	 * exited process not reaped yet. That is no change of owner: keep the record's.
	 */
	if (st.st_uid == 0 && euid != 0 &&
	    (procfs_read_state(in->proc_root, pid, &state) || state == 'Z' || state == 'X'))
		return euid;
	return (uint32_t)st.st_uid;
}

/* A process may change credentials while profiled: look again now and then. */
#define OWNER_RECHECK_NS NSEC_PER_SEC

static void owner_check(struct ingest *in, struct pid_entry *e, uint32_t euid, uint64_t now)
{
	struct store_process_info pi;
	char comm[256] = "";
	uint32_t uid;

	if (now - e->owner_checked_ns < OWNER_RECHECK_NS)
		return;
	e->owner_checked_ns = now;
	uid = proc_owner(in, e->pid, euid);
	if (uid == e->uid)
		return;
	e->uid = uid;
	if (store__process(in->store, e->pid, &pi) && pi.comm)
		snprintf(comm, sizeof(comm), "%s", pi.comm);
	store__set_process(in->store, e->pid, uid, comm);
}

static void forget_process(struct ingest *in, uint32_t pid);

/*
 * How long after its process's exit record a sample at the pid may still be that process's (its
 * last thread on its way out of the kernel takes microseconds): a later one is a new process's.
 */
#define LATE_SAMPLE_NS (100 * NSEC_PER_MSEC)

/* ts: the record's time (0: none, a request's). */
static struct pid_entry *see_process(struct ingest *in, uint32_t pid, uint32_t tid, uint32_t uid,
				     const char *thread_comm, uint64_t ts, uint64_t now)
{
	struct pid_entry *e = pid_find(in, pid);
	char comm[64], state;

	if (e && now - e->owner_checked_ns >= OWNER_RECHECK_NS && pid_reused(in, e)) {
		/* A new process: new symbols, a new life in the store, as after a fork record. */
		forget_process(in, pid);
		e = NULL;
	}
	if (e) {
		owner_check(in, e, uid, now);
		return e;
	}
	/*
	 * The last thread of a process is still sampled on its way out of the kernel, after its
	 * exit record: such a sample must not bring the process's entry back, as no record would
	 * remove it again (nor what the symbolizer and the Python module hold for it). While the
	 * pid is gone or a zombie, samples taken right after the exit are the exited image's; a
	 * live process there, or a sample taken later, is a new one's (the pid reused by a fork
	 * that did not exec).
	 */
	e = pid_find_exited(in, pid);
	if (e && (!ts || ts <= e->exit_ns + LATE_SAMPLE_NS) &&
	    (procfs_read_state(in->proc_root, pid, &state) || state == 'Z' || state == 'X')) {
		/* Exited before its first sample: the store learns of it now. */
		if (!e->seen_ns) {
			e->seen_ns = now;
			store__set_process(in->store, pid, e->uid, thread_comm);
			store__process_exited(in->store, pid);
		}
		return e;
	}
	e = pid_insert(in, pid);
	if (!e)
		return NULL;
	e->seen_ns = now;
	e->start = note_start(in, pid, 0);
	e->uid = uid = proc_owner(in, pid, uid);
	e->owner_checked_ns = now;
	/* The main thread's name is the process's: /proc is read only for other threads'. */
	if (tid == pid)
		snprintf(comm, sizeof(comm), "%s", thread_comm);
	else
		read_comm(in, pid, comm, sizeof(comm), thread_comm);
	store__set_process(in->store, pid, uid, comm);
	note_exe(in, pid);
	return e;
}

static void forget_process(struct ingest *in, uint32_t pid)
{
	struct pid_entry *e = pid_find(in, pid);

	if (e) {
		if (e->py_state == PY_ACTIVE && in->py_config)
			in->py_config(in->py_ctx, pid, NULL);
		e->tombstone = true;
		in->pid_live--;
	}
	symbolizer__forget_pid(in->sym, pid);
	if (in->py)
		python__forget_pid(in->py, pid);
	if (in->unwind_note)
		in->unwind_note(in->unwind_ctx, pid, PROFD_UNWIND_NONE);
}

/* Find CPython in a process once, and again for a while after exec (libpython maps late). */
static void python_check(struct ingest *in, struct pid_entry *e, uint64_t now)
{
	struct profd_py_proc cfg;
	int r;

	if (!in->py || e->tombstone || (e->py_state != PY_UNKNOWN && e->py_state != PY_PENDING))
		return;
	if (e->py_state == PY_PENDING && (now - e->seen_ns > PY_RECHECK_WINDOW_NS ||
					  now - e->py_checked_ns < PY_RECHECK_EVERY_NS))
		return;
	e->py_checked_ns = now;
	r = python__detect(in->py, e->pid, &cfg);
	if (r == PYTHON_SUPPORTED) {
		if (in->py_config && in->py_config(in->py_ctx, e->pid, &cfg) == 0) {
			e->py_state = PY_ACTIVE;
			e->py_version = python__version(in->py, e->pid);
			in->stats.py_processes++;
		} else {
			e->py_state = PY_UNSUPPORTED;
		}
	} else if (r == PYTHON_UNSUPPORTED && cfg.gil_kind == PROFD_PY_GIL_DISABLED) {
		/*
		 * A free-threaded build: native frames only, but the sampler marks its samples as
		 * running without a GIL. PY_ACTIVE so that its entry goes when it exits.
		 */
		if (in->py_config && in->py_config(in->py_ctx, e->pid, &cfg) == 0)
			e->py_state = PY_ACTIVE;
		else
			e->py_state = PY_UNSUPPORTED;
	} else if (r == PYTHON_UNSUPPORTED) {
		e->py_state = PY_UNSUPPORTED;
	} else if (r == -EAGAIN) {
		e->py_state = PY_PENDING; /* not remembered by python__detect: ask again soon */
	} else {
		/* Not Python (a detection that cost an ELF read per process), or gone. */
		e->py_state = PY_ABSENT;
	}
}

/*
 * Native user frames are kept per address (pprof has one location per address). A named kernel
 * frame is kept per function: its instruction addresses are many (every exec, page fault and
 * syscall path ends somewhere else) and would multiply the stacks for nothing a kernel frame is
 * read for, and an absolute kernel address is not for every reader anyway (KASLR).
 */
static uint32_t intern_sym(struct ingest *in, enum frame_kind kind, const struct sym_result *r)
{
	/*
	 * A user address outside every known mapping (the process exec'd or exited before its maps
	 * were read) is a randomized number that tells nothing: all of them are one frame.
	 */
	bool unmapped = kind == FRAME_KIND_NATIVE && r->module && !strcmp(r->module, "[unknown]");
	struct frame_key key = {
	    .kind = kind,
	    .name = r->name ? r->name : "[unknown]",
	    .module = unmapped ? NULL : r->module,
	    .address = (kind == FRAME_KIND_KERNEL && r->name) || unmapped ? 0 : r->address,
	    .build_id = r->build_id,
	};
	char jit[160];

	/*
	 * JIT code no perf map names: every address of it would be a frame of its own, none adding
	 * up. One frame per mapping instead, named by the mapping and where it starts (stable for
	 * the mapping's life): "[jit] ([anon]@0x7f37fc180000)".
	 */
	if (kind == FRAME_KIND_NATIVE && !r->name && r->anon_start && r->module) {
		snprintf(jit, sizeof(jit), "[jit] (%.100s@0x%" PRIx64 ")", r->module,
			 r->anon_start);
		key.name = jit;
		key.address = r->anon_start;
	}
	return store__intern_frame(in->store, &key);
}

/* Frame id for an address; kernel addresses use owner 1 (pid 0, epoch 1). */
static uint32_t frame_for(struct ingest *in, uint64_t owner, uint32_t pid, uint64_t addr,
			  bool kernel)
{
	size_t mask = ADDR_CACHE_SIZE - 1;
	struct sym_result r;
	uint32_t frame;
	bool again = false;
	size_t i;
	int err;

	for (i = hash_mix64(addr ^ (owner * 0x9e3779b97f4a7c15ull)) & mask; in->addrs[i].owner;
	     i = (i + 1) & mask) {
		if (in->addrs[i].owner == owner && in->addrs[i].addr == addr) {
			if (!in->addrs[i].retry_s || in->now_s < in->addrs[i].retry_s) {
				in->stats.addr_cache_hits++;
				return in->addrs[i].frame;
			}
			again = true; /* this slot is refreshed below */
			break;
		}
	}
	in->stats.addr_cache_misses++;
	if (kernel)
		err = symbolizer__kernel(in->sym, addr, &r);
	else
		err = symbolizer__user(in->sym, pid, addr, &r);
	if (err) {
		/* The process vanished before we could read its maps: keep the raw address. */
		r.name = NULL;
		r.module = "[unknown]";
		r.address = addr;
		r.build_id = NULL;
		r.anon_start = 0;
	}
	frame = intern_sym(in, kernel ? FRAME_KIND_KERNEL : FRAME_KIND_NATIVE, &r);
	if (!frame)
		return 0;
	/*
	 * No mapping covers the address: garbage, or a library mapped after the symbolizer last
	 * read the maps (a process fresh from exec). Ask again next time instead of remembering.
	 */
	if (!kernel && r.module && !strcmp(r.module, "[unknown]"))
		return frame;
	if (again) {
		in->addrs[i].frame = frame;
		in->addrs[i].retry_s = r.name ? 0 : in->now_s + ADDR_RETRY_S;
		return frame;
	}
	if (in->addr_fill >= ADDR_CACHE_MAX_FILL) {
		addr_cache_wipe(in);
		for (i = hash_mix64(addr ^ (owner * 0x9e3779b97f4a7c15ull)) & mask;
		     in->addrs[i].owner; i = (i + 1) & mask)
			;
	}
	in->addrs[i].owner = owner;
	in->addrs[i].addr = addr;
	in->addrs[i].frame = frame;
	in->addrs[i].retry_s = kernel || r.name ? 0 : in->now_s + ADDR_RETRY_S;
	in->addr_fill++;
	return frame;
}

/* A sample stamped further ahead than this is corrupt: it would pin a bucket in the future. */
#define MAX_CLOCK_AHEAD_NS (60ull * NSEC_PER_SEC)

static bool is_unmapped(const struct ingest *in, uint32_t frame_id)
{
	const struct store_frame *f = store__frame(in->store, frame_id);

	/* intern_sym() keeps no module (and no address) for these. */
	return f && f->kind == FRAME_KIND_NATIVE && !f->module && !strcmp(f->name, "[unknown]");
}

static bool is_eval_frame(const struct ingest *in, uint32_t frame_id)
{
	static const char eval[] = "_PyEval_EvalFrameDefault";
	const struct store_frame *f = store__frame(in->store, frame_id);

	/* The function itself, or a split-off part of it: "_PyEval_EvalFrameDefault.cold". */
	return f && f->kind == FRAME_KIND_NATIVE && f->name &&
	       !strncmp(f->name, eval, sizeof(eval) - 1) &&
	       (f->name[sizeof(eval) - 1] == '\0' || f->name[sizeof(eval) - 1] == '.');
}

/*
 * The frame standing for a sampled Python frame that could not be named (err from
 * python__symbolize), so the frames around it keep their places: its activation still holds
 * one frame and lines up with its own eval loop frame. Kind Python, so views that keep
 * Python frames (--python-only) keep it too; the name says why, and has no file or line.
 */
static uint32_t py_placeholder(struct ingest *in, int err)
{
	struct frame_key key = {.kind = FRAME_KIND_PYTHON};

	if (err == -ESRCH || err == -ENODATA)
		key.name = "[python frame: process exited]";
	else if (err == -ENOENT)
		key.name = "[python frame: code unreadable]";
	else
		key.name = "[python frame: unreadable]";
	return store__intern_frame(in->store, &key);
}

/*
 * Symbolize the Python frames of a sample into in->py_buf and cut them into eval activations,
 * newest first: each _PyEval_EvalFrameDefault on the native stack ran one activation. Up to
 * 3.10 every frame is its own activation; 3.11 marks an activation's oldest frame (is_entry);
 * from 3.12 a C-boundary frame (shim, entry) closes one and is not user code. A frame that
 * cannot be named stays as a placeholder: dropping it would empty the activation of a module
 * being imported (its code object is often freed by the time the sample is read), and from
 * 3.12 an empty activation merges into the next, shifting every older one by an eval frame.
 * Returns the number of activations.
 */
static size_t python_frames(struct ingest *in, const struct pid_entry *pe,
			    const struct profd_sample_rec *rec, struct py_act *acts)
{
	const struct profd_py_frame *pf =
	    (const struct profd_py_frame *)&rec->ips[rec->nr_kernel + rec->nr_user];
	uint16_t ver = pe->py_version;
	size_t nact = 0, m = 0, start = 0;
	bool gone = false;

	for (uint32_t i = 0; i < rec->nr_py; i++) {
		struct py_frame_sym sym;
		bool boundary = ver >= 0x030c && (pf[i].flags & PROFD_PYF_BOUNDARY);
		bool close = ver < 0x030b || (ver == 0x030b && (pf[i].flags & PROFD_PYF_ENTRY));
		int err = -ESRCH;
		uint32_t f = 0;

		/* A process gone before it was ever detected: no use trying every frame. (One
		 * that was detected still names the frames whose code objects were read.) */
		if (!boundary && !gone) {
			err = python__symbolize(in->py, rec->pid, &pf[i], &sym);
			gone = err == -ESRCH;
		}
		if (!boundary && !err) {
			if (!sym.skip) {
				struct frame_key key = {
				    .kind = FRAME_KIND_PYTHON,
				    .name = sym.qualname ? sym.qualname : "[unknown]",
				    .file = sym.filename,
				    .line = sym.line,
				};

				f = store__intern_frame(in->store, &key);
				in->stats.py_frames++;
			}
		} else if (!boundary) {
			in->stats.py_frames_bad++;
			if (err == -ESRCH || err == -ENODATA)
				in->stats.py_frames_exited++;
			f = py_placeholder(in, err);
		}
		if (f)
			in->py_buf[m++] = f;
		/* Up to 3.11 an activation is kept even if empty, to stay aligned with the C
		 * frames. */
		if ((boundary && m > start) || close) {
			acts[nact].start = start;
			acts[nact].end = m;
			nact++;
			start = m;
		}
	}
	if (m > start) {
		acts[nact].start = start;
		acts[nact].end = m;
		nact++;
	}
	return nact;
}

/* Append activation a's frames (newest first) to the output stack. */
static void put_act(struct ingest *in, const struct py_act *a, uint32_t *n)
{
	for (uint16_t k = a->start; k < a->end; k++)
		in->frame_buf[(*n)++] = in->py_buf[k];
}

/*
 * Frames a launch probe sees above the application's launch call: our library's callback,
 * CUPTI's dispatch and the driver. They are the same for every launch and would only push the
 * kernel leaf away from the code that launched it. The runtime (libcudart: cudaLaunchKernel)
 * stays, as the call the application made.
 */
static bool is_launch_plumbing(const struct ingest *in, uint32_t frame_id)
{
	static const char *const libs[] = {"libprofd_cupti.so", "libcupti.so", "libcuda.so"};
	const struct store_frame *f = store__frame(in->store, frame_id);
	const char *base;

	if (!f || f->kind != FRAME_KIND_NATIVE || !f->module)
		return false;
	base = strrchr(f->module, '/');
	base = base ? base + 1 : f->module;
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
		if (!strncmp(base, libs[i], strlen(libs[i])))
			return true;
	return false;
}

/* A kernel frame of the BPF machinery: a program (no symbol of its own), a trampoline. */
static bool is_tracing_frame(const struct ingest *in, uint32_t frame_id)
{
	const struct store_frame *f = store__frame(in->store, frame_id);

	return !f || f->name[0] == '[' || !strncmp(f->name, "bpf_", 4) ||
	       !strncmp(f->name, "__bpf_", 6) || !strcmp(f->name, "_einittext");
}

/*
 * Whether a launch record's kind and correlation id agree: the USDT probe always has an id
 * (CUPTI numbers from 1), a uprobe never. Either has no kernel stack.
 */
static bool launch_valid(const struct profd_sample_rec *rec)
{
	if (rec->nr_kernel != 0)
		return false;
	if (rec->flags & PROFD_SAMPLE_UPROBE)
		return rec->corr_id == 0;
	return rec->corr_id != 0;
}

/* Route a symbolized record (route.h): the timeline, then the store or the GPU module. */
static void deliver(struct ingest *in, const struct pid_entry *pe,
		    const struct profd_sample_rec *rec, uint32_t stack)
{
	bool launch = rec->hdr.type == PROFD_REC_LAUNCH;
	bool uprobe = launch && (rec->flags & PROFD_SAMPLE_UPROBE);
	int err;

	if (launch) {
		in->stats.launches++;
		if (uprobe)
			in->stats.uprobe_launches++;
		err = route__launch(&in->route, rec->ts_ns, rec->pid, rec->tid, pe->uid, stack,
				    uprobe ? 0 : rec->corr_id);
	} else {
		in->stats.samples++;
		if (rec->flags & PROFD_SAMPLE_GIL_HELD)
			in->stats.py_gil_held++;
		else if (rec->flags & PROFD_SAMPLE_GIL_FREE)
			in->stats.py_gil_free++;
		else if (rec->flags & PROFD_SAMPLE_NO_GIL)
			in->stats.py_no_gil++;
		err = route__sample(&in->route, rec->ts_ns, rec->pid, rec->tid, pe->uid, stack);
	}
	if (err)
		in->stats.store_errors++;
}

/* Whether a sample or launch record is whole and sane; counts it as malformed when not. */
static bool sample_valid(struct ingest *in, const struct profd_sample_rec *rec, size_t size,
			 uint64_t now)
{
	uint32_t nk, nu, npy;

	if (size < PROFD_SAMPLE_HDR_SIZE)
		goto bad;
	nk = rec->nr_kernel;
	nu = rec->nr_user;
	npy = rec->nr_py;
	if (nk > PROFD_MAX_STACK || nu > PROFD_MAX_STACK || npy > PROFD_MAX_PY_FRAMES ||
	    size < PROFD_SAMPLE_HDR_SIZE + 8ull * (nk + nu) + sizeof(struct profd_py_frame) * npy ||
	    rec->pid == 0 || rec->ts_ns > now + MAX_CLOCK_AHEAD_NS ||
	    (rec->hdr.type == PROFD_REC_LAUNCH && !launch_valid(rec)))
		goto bad;
	return true;
bad:
	in->stats.malformed++;
	return false;
}

/*
 * Kernel frames into frame_buf (returns how many), user frames into user_buf (*nuser). Return
 * addresses point after the call: look up addr - 1 for every frame but the leaf.
 */
static uint32_t native_frames(struct ingest *in, const struct profd_sample_rec *rec, uint64_t owner,
			      uint32_t *nuser)
{
	uint32_t nk = rec->nr_kernel, nu = rec->nr_user, n = 0;

	*nuser = 0;
	for (uint32_t i = 0; i < nk; i++) {
		uint32_t f = frame_for(in, 1, 0, rec->ips[i] - (i > 0), true);

		if (f)
			in->frame_buf[n++] = f;
	}
	for (uint32_t i = 0; i < nu; i++) {
		uint32_t f = frame_for(in, owner, rec->pid, rec->ips[nk + i] - (i > 0), false);

		/*
		 * A return address outside every mapping means the frame-pointer chain ran into
		 * code built without frame pointers (an interpreter, libc): what follows is noise.
		 */
		if (i > 0 && f && is_unmapped(in, f)) {
			in->stats.unwind_cut++;
			break;
		}
		if (f)
			in->user_buf[(*nuser)++] = f;
	}
	/*
	 * A wait's kernel stack starts in the tracing that read it (the BPF program and its
	 * trampoline, without symbols or named bpf_*): cut those leaf frames.
	 */
	if (rec->hdr.type == PROFD_REC_OFFCPU) {
		uint32_t skip = 0;

		while (skip < n && skip < 8 && is_tracing_frame(in, in->frame_buf[skip]))
			skip++;
		if (skip < n) {
			memmove(in->frame_buf, in->frame_buf + skip, (n - skip) * sizeof(uint32_t));
			n -= skip;
		}
	}
	/* A USDT launch stack starts inside the CUPTI library and CUDA: cut those leaf frames. */
	if (rec->hdr.type == PROFD_REC_LAUNCH && !(rec->flags & PROFD_SAMPLE_UPROBE)) {
		uint32_t skip = 0;

		while (skip < *nuser && is_launch_plumbing(in, in->user_buf[skip]))
			skip++;
		if (skip) {
			memmove(in->user_buf, in->user_buf + skip,
				(*nuser - skip) * sizeof(uint32_t));
			*nuser -= skip;
		}
	}
	return n;
}

/*
 * Append the user frames to frame_buf[0..n), each eval loop frame giving way to the Python
 * frames it ran (other native frames stay). Returns the new length; *py_merged tells whether
 * any Python frame went in.
 */
static uint32_t merge_python(struct ingest *in, const struct pid_entry *pe,
			     const struct profd_sample_rec *rec, uint32_t n, uint32_t nuser,
			     bool *py_merged)
{
	struct py_act acts[PROFD_MAX_PY_FRAMES];
	size_t nact = 0, next_act = 0;
	uint32_t unlinked = 0;

	if (rec->py_status == PROFD_PY_NO_TSTATE)
		in->stats.py_no_tstate++;
	else if (rec->py_status == PROFD_PY_READ_ERR)
		in->stats.py_read_errors++;
	if (rec->nr_py && in->py && pe->py_state == PY_ACTIVE) {
		nact = python_frames(in, pe, rec, acts);
		in->stats.py_samples++;
	}
	/*
	 * More eval loop frames than activations in a whole walk: the newest eval loop frames ran
	 * none that the interpreter had linked yet (sampled as it entered or left an activation,
	 * between its C frame and tstate's current frame). They stay native frames; matched from
	 * the leaf, each would take the activation of the next and shift the whole stack.
	 */
	if (nact && rec->py_status == PROFD_PY_OK && !(rec->flags & PROFD_SAMPLE_PY_TRUNC)) {
		uint32_t evals = 0;

		for (uint32_t i = 0; i < nuser; i++)
			evals += is_eval_frame(in, in->user_buf[i]);
		unlinked = evals > nact ? evals - (uint32_t)nact : 0;
	}
	for (uint32_t i = 0; i < nuser; i++) {
		if (next_act < nact && is_eval_frame(in, in->user_buf[i])) {
			if (unlinked) {
				unlinked--;
				in->frame_buf[n++] = in->user_buf[i];
			} else {
				put_act(in, &acts[next_act++], &n);
			}
		} else {
			in->frame_buf[n++] = in->user_buf[i];
		}
	}
	/* Unwinding stopped short of the interpreter: the Python stack still goes below. */
	while (next_act < nact)
		put_act(in, &acts[next_act++], &n);
	*py_merged = next_act > 0;
	return n;
}

/* Append a marker frame (a "[...]" pseudo-frame) when it interns; returns the new length. */
static uint32_t put_marker(struct ingest *in, const struct frame_key *key, uint32_t n)
{
	uint32_t f = store__intern_frame(in->store, key);

	if (f)
		in->frame_buf[n++] = f;
	return n;
}

/* A record of this time is next: drop cached frame ids the store or the kernel renumbered. */
static void record_time(struct ingest *in, uint64_t now)
{
	in->now_s = (uint32_t)(now / NSEC_PER_SEC);
	if (store__generation(in->store) != in->store_gen ||
	    symbolizer__kernel_generation(in->sym) != in->kernel_gen) {
		addr_cache_wipe(in);
		in->store_gen = store__generation(in->store);
		in->kernel_gen = symbolizer__kernel_generation(in->sym);
	}
}

/* Whether one of the user frames user_buf[0 .. nuser) is a native frame pred() names. */
static bool user_frame_is(const struct ingest *in, uint32_t nuser, bool (*pred)(const char *))
{
	for (uint32_t i = 0; i < nuser; i++) {
		const struct store_frame *f = store__frame(in->store, in->user_buf[i]);

		if (f && f->kind == FRAME_KIND_NATIVE && pred(f->name))
			return true;
	}
	return false;
}

/* Whether one of the user frames user_buf[0 .. nuser) is CPython waiting for the GIL. */
static bool waits_for_gil(const struct ingest *in, uint32_t nuser)
{
	return user_frame_is(in, nuser, is_gil_wait_symbol);
}

/*
 * The thread state frame's name for a record whose nk kernel frames are frame_buf[0 .. nk) and
 * nuser user frames user_buf[0 .. nuser): off (not NULL) is the wait the record is the stack of.
 * NULL when the record gets no state frame (launches, live dumps, CPU samples without
 * thread_states or GIL flags).
 */
static const char *state_name(struct ingest *in, const struct profd_sample_rec *rec,
			      const struct profd_offcpu_rec *off, uint32_t nk, uint32_t nuser,
			      char *buf, size_t len)
{
	const uint32_t gil_flags =
	    PROFD_SAMPLE_GIL_HELD | PROFD_SAMPLE_GIL_FREE | PROFD_SAMPLE_NO_GIL;

	if (off) {
		for (uint32_t i = 0; i < nk && i < PROFD_MAX_STACK; i++) {
			const struct store_frame *f = store__frame(in->store, in->frame_buf[i]);

			in->kname_buf[i] = f ? f->name : NULL;
		}
		if (off->state != PROFD_TASK_RUNNING &&
		    user_frame_is(in, nuser, is_cuda_sync_symbol)) {
			snprintf(buf, len, "[off-cpu: CUDA sync]");
			return buf;
		}
		return offcpu_state_name(
		    off->state, in->kname_buf, nk < PROFD_MAX_STACK ? nk : 0,
		    (rec->flags & PROFD_SAMPLE_GIL_WAIT) || waits_for_gil(in, nuser), buf, len);
	}
	if (rec->hdr.type != PROFD_REC_SAMPLE || (!in->thread_states && !(rec->flags & gil_flags)))
		return NULL;
	if (user_frame_is(in, nuser, is_cuda_sync_symbol))
		return "[running: CUDA sync]";
	return oncpu_state_name(rec->flags, waits_for_gil(in, nuser));
}

/*
 * Whether rec's user stack (nuser frames) stopped short of the stack's bottom (a frame-pointer
 * walk, the fallback until the process's unwind tables are loaded, cannot tell: it counts as
 * short). Tells the unwinder when what it provides was missing.
 */
static bool unwind_partial(struct ingest *in, const struct profd_sample_rec *rec, uint32_t nuser)
{
	uint32_t end = (rec->flags & PROFD_SAMPLE_UNWIND_MASK) >> PROFD_SAMPLE_UNWIND_SHIFT;

	if ((end == PROFD_UNWIND_FP_FALLBACK || end == PROFD_UNWIND_NO_MAPPING ||
	     end == PROFD_UNWIND_NO_TABLE) &&
	    in->unwind_note)
		in->unwind_note(in->unwind_ctx, rec->pid, end);
	return end > PROFD_UNWIND_BOTTOM && nuser;
}

/*
 * The store stack of a valid record of pe's process: kernel, native and Python frames, leaf
 * first, the markers of what is missing, and at the root the thread's state (state_name; off:
 * the wait of an off-CPU record, else NULL). Returns the stack id, or 0 when the store refused.
 */
static uint32_t record_stack(struct ingest *in, const struct pid_entry *pe,
			     const struct profd_sample_rec *rec, const struct profd_offcpu_rec *off)
{
	uint32_t n, nuser;
	bool py_merged, partial;
	const char *state;
	char sbuf[64];

	n = native_frames(in, rec, (uint64_t)rec->pid << 32 | pe->epoch, &nuser);
	state = state_name(in, rec, off, n, nuser, sbuf, sizeof(sbuf));
	n = merge_python(in, pe, rec, n, nuser, &py_merged);
	/* Kernel frames alone would look like the root of the process's work. */
	if (n > 0 && nuser == 0 && !py_merged && !(rec->flags & PROFD_SAMPLE_KERNEL_THREAD))
		n = put_marker(in, &key_no_user, n);
	partial = unwind_partial(in, rec, nuser);
	if (partial || rec->flags & (PROFD_SAMPLE_USTACK_TRUNC | PROFD_SAMPLE_KSTACK_TRUNC |
				     PROFD_SAMPLE_PY_TRUNC))
		n = put_marker(in, &key_truncated, n);
	/* Keep the sample: a kernel thread whose stack read failed still used the CPU. */
	if (n == 0)
		n = put_marker(in, &key_no_stack, n);
	if (state)
		n = put_marker(in, &(struct frame_key){.kind = FRAME_KIND_STATE, .name = state}, n);
	return store__intern_stack(in->store, in->frame_buf, n);
}

/*
 * The store stack of a valid sample, launch or off-CPU record (off: its wait), its process and
 * thread noted: *pe gets the process. Returns the stack, 0 when the store refused it (counted),
 * or -ENOMEM.
 */
static int64_t ingest_stack(struct ingest *in, const struct profd_sample_rec *rec,
			    const struct profd_offcpu_rec *off, uint64_t now, struct pid_entry **pe)
{
	char comm[PROFD_COMM_LEN];
	uint32_t stack;

	record_time(in, now);
	comm_copy(comm, rec->comm);
	*pe = see_process(in, rec->pid, rec->tid, rec->uid, comm, rec->ts_ns, now);
	if (!*pe) {
		in->stats.store_errors++;
		return -ENOMEM;
	}
	python_check(in, *pe, now);
	stack = record_stack(in, *pe, rec, off);
	/* A late sample of an exited process: what naming its frames cached goes with it. */
	if ((*pe)->tombstone) {
		symbolizer__forget_pid(in->sym, rec->pid);
		if (in->py)
			python__forget_pid(in->py, rec->pid);
	}
	if (!stack) {
		in->stats.store_errors++;
		return 0;
	}
	store__set_thread(in->store, rec->pid, rec->tid, comm);
	return stack;
}

/*
 * A CPU sample, or a launch record (same layout, user and Python stacks only): both symbolized
 * the same way, so a launch stack and a sample stack of the same code are the same stack.
 */
static int handle_sample(struct ingest *in, const struct profd_sample_rec *rec, size_t size,
			 uint64_t now)
{
	struct pid_entry *pe;
	int64_t stack;

	if (!sample_valid(in, rec, size, now))
		return 0;
	if (rec->hdr.type == PROFD_REC_LAUNCH && !in->gpu) {
		/* Nothing would join it with a kernel: do not pay for its symbols. */
		in->stats.launches_dropped++;
		return 0;
	}
	stack = ingest_stack(in, rec, NULL, now, &pe);
	if (stack > 0)
		deliver(in, pe, rec, (uint32_t)stack);
	return stack < 0 ? (int)stack : 0;
}

int ingest__snapshot_begin(struct ingest *in, uint32_t pid)
{
	uint64_t now = mono_ns();
	struct pid_entry *pe;

	if (!pid)
		return -EINVAL;
	/* No record yet: the process's name comes from /proc, its owner too. */
	pe = see_process(in, pid, 0, STORE_UID_UNKNOWN, "", 0, now);
	if (!pe)
		return -ENOMEM;
	python_check(in, pe, now);
	return 0;
}

int ingest__snapshot_thread(struct ingest *in, const struct profd_sample_rec *rec, size_t size,
			    uint32_t *stack)
{
	uint64_t now = mono_ns();
	char comm[PROFD_COMM_LEN];
	struct pid_entry *pe;

	if (size < PROFD_SAMPLE_HDR_SIZE || rec->hdr.type != PROFD_REC_THREAD ||
	    rec->hdr.size != size || !sample_valid(in, rec, size, now))
		return -EINVAL;
	pe = pid_find(in, rec->pid);
	if (!pe)
		return -ESRCH; /* ingest__snapshot_begin was not called, or an exec came between */
	record_time(in, now);
	comm_copy(comm, rec->comm);
	*stack = record_stack(in, pe, rec, NULL);
	if (!*stack)
		return -ENOMEM;
	return store__set_thread(in->store, rec->pid, rec->tid, comm);
}

void ingest__snapshot_forget(struct ingest *in, uint32_t pid)
{
	forget_process(in, pid);
	/* Not sampled, so no bucket names it: the store lets it go with its next sweep. */
	store__process_exited(in->store, pid);
}

/* A wait at least --off-cpu-min long, with the stacks the thread left the CPU with. */
static int handle_offcpu(struct ingest *in, const struct profd_offcpu_rec *r, size_t size,
			 uint64_t now)
{
	const struct profd_sample_rec *rec = &r->sample;
	struct pid_entry *pe;
	int64_t sstack;
	uint32_t stack;
	size_t ssize;

	if (size < PROFD_OFFCPU_HDR_SIZE + PROFD_SAMPLE_HDR_SIZE)
		goto bad;
	ssize = size - PROFD_OFFCPU_HDR_SIZE;
	if (rec->hdr.type != PROFD_REC_OFFCPU || rec->hdr.size != ssize || r->off_ns == 0 ||
	    r->state > PROFD_TASK_IDLE || r->off_ns > now + MAX_CLOCK_AHEAD_NS ||
	    rec->ts_ns > now + MAX_CLOCK_AHEAD_NS - r->off_ns)
		goto bad;
	if (!sample_valid(in, rec, ssize, now))
		return 0;
	sstack = ingest_stack(in, rec, r, now, &pe);
	if (sstack <= 0)
		return (int)sstack;
	stack = (uint32_t)sstack;
	in->stats.offcpu_waits++;
	if (route__wait(&in->route, rec->ts_ns, rec->ts_ns + r->off_ns, rec->pid, rec->tid, pe->uid,
			stack))
		in->stats.store_errors++;
	return 0;
bad:
	in->stats.malformed++;
	return 0;
}

/* A thread's short waits, summed in the kernel: one stack, [short waits] under its state. */
static int handle_offcpu_agg(struct ingest *in, const struct profd_offcpu_agg_rec *r, size_t size,
			     uint64_t now)
{
	char comm[PROFD_COMM_LEN];
	struct pid_entry *pe;
	uint32_t frames[2], stack;

	if (size < sizeof(*r) || r->pid == 0 || r->tid == 0 || r->count == 0 || r->off_ns == 0 ||
	    r->ts_ns > now + MAX_CLOCK_AHEAD_NS) {
		in->stats.malformed++;
		return 0;
	}
	record_time(in, now);
	comm_copy(comm, r->comm);
	pe = see_process(in, r->pid, r->tid, r->uid, comm, r->ts_ns, now);
	if (!pe) {
		in->stats.store_errors++;
		return -ENOMEM;
	}
	frames[0] = store__intern_frame(in->store, &key_short_waits);
	frames[1] = store__intern_frame(in->store, &key_short_state);
	stack = frames[0] && frames[1] ? store__intern_stack(in->store, frames, 2) : 0;
	if (!stack) {
		in->stats.store_errors++;
		return 0;
	}
	store__set_thread(in->store, r->pid, r->tid, comm);
	in->stats.offcpu_short_records++;
	in->stats.offcpu_short_waits += r->count;
	if (store__add(in->store, r->ts_ns, r->pid, r->tid, stack, STORE_VALUE_OFFCPU_NS,
		       r->off_ns))
		in->stats.store_errors++;
	return 0;
}

static int handle_task(struct ingest *in, const struct profd_task_rec *rec, size_t size)
{
	char comm[PROFD_COMM_LEN];
	struct pid_entry *e;

	if (size < sizeof(*rec) || rec->pid == 0) {
		in->stats.malformed++;
		return 0;
	}
	comm_copy(comm, rec->comm);
	if (rec->hdr.type == PROFD_REC_EXEC || rec->hdr.type == PROFD_REC_FORK) {
		if (rec->hdr.type == PROFD_REC_EXEC)
			in->stats.execs++;
		else
			in->stats.forks++;
		/* A new image: new symbols, new name. A new epoch makes old cache entries dead. */
		forget_process(in, rec->pid);
		e = pid_insert(in, rec->pid);
		if (!e)
			return -ENOMEM;
		e->seen_ns = rec->ts_ns;
		e->start =
		    note_start(in, rec->pid, rec->hdr.type == PROFD_REC_FORK ? rec->ts_ns : 0);
		e->uid = proc_owner(in, rec->pid, rec->uid);
		e->owner_checked_ns = mono_ns();
		store__set_process(in->store, rec->pid, e->uid, comm);
		if (rec->ppid && rec->ppid != rec->pid)
			store__set_parent(in->store, rec->pid, rec->ppid);
		note_exe(in, rec->pid);
	} else {
		in->stats.exits++;
		/*
		 * A process not seen yet gets an entry too (seen_ns 0), left as its exited image
		 * for the samples of its last moments that may follow this record (see_process).
		 */
		e = pid_find(in, rec->pid);
		if (!e && (e = pid_insert(in, rec->pid)))
			e->uid = rec->uid;
		if (e)
			e->exit_ns = rec->ts_ns;
		forget_process(in, rec->pid);
		store__process_exited(in->store, rec->pid);
		if (in->gpu)
			gpu__process_exited(in->gpu, rec->pid);
	}
	return 0;
}

/*
 * The process's code mappings changed: the names of its addresses, its cached mappings and its
 * unwind description may all be of what was there before. Its later samples are named afresh.
 */
static int handle_maps(struct ingest *in, const struct profd_task_rec *rec, size_t size)
{
	struct pid_entry *e;

	if (size < sizeof(*rec) || rec->pid == 0) {
		in->stats.malformed++;
		return 0;
	}
	in->stats.maps_changes++;
	e = pid_find(in, rec->pid);
	if (e)
		e->epoch = in->next_epoch++;
	symbolizer__maps_changed(in->sym, rec->pid);
	if (in->maps_changed)
		in->maps_changed(in->unwind_ctx, rec->pid);
	return 0;
}

int ingest__record(struct ingest *in, const void *data, size_t size)
{
	const struct profd_rec_hdr *hdr = data;
	int err = 0;

	in->stats.records++;
	if (size < sizeof(*hdr) || hdr->size > size) {
		in->stats.malformed++;
		return 0;
	}
	switch (hdr->type) {
	case PROFD_REC_SAMPLE:
	case PROFD_REC_LAUNCH:
		err = handle_sample(in, data, hdr->size, mono_ns());
		break;
	case PROFD_REC_EXEC:
	case PROFD_REC_EXIT:
	case PROFD_REC_FORK:
		err = handle_task(in, data, hdr->size);
		break;
	case PROFD_REC_MAPS:
		err = handle_maps(in, data, hdr->size);
		break;
	case PROFD_REC_OFFCPU:
		err = handle_offcpu(in, data, hdr->size, mono_ns());
		break;
	case PROFD_REC_OFFCPU_AGG:
		err = handle_offcpu_agg(in, data, hdr->size, mono_ns());
		break;
	default:
		in->stats.malformed++;
		break;
	}
	return err;
}
