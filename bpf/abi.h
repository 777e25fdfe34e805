/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one header shared by the BPF programs and user space: ring buffer record layouts and
 * counter indices. Fixed-width types, explicit padding, a size assert on every record.
 * Records never leave the daemon: daemon/ingest.c converts them to the store's model.
 */
#ifndef PROFD_BPF_ABI_H
#define PROFD_BPF_ABI_H

#ifdef __bpf__
/* vmlinux.h supplies __u32/__u64 on the BPF side. */
#else
#include <linux/types.h>
#endif

#define PROFD_COMM_LEN 16
/* bpf_get_stack() depth; 127 matches the kernel's default perf_event_max_stack. */
#define PROFD_MAX_STACK 127

enum profd_record_type {
	PROFD_REC_SAMPLE = 1, /* struct profd_sample_rec */
	PROFD_REC_EXEC = 2,   /* struct profd_task_rec: the process replaced its image */
	PROFD_REC_EXIT = 3,   /* struct profd_task_rec: the whole thread group exited */
	/*
	 * struct profd_sample_rec taken at a CUDA launch, not by the timer: from the USDT probe
	 * profd:cuda_launch in libprofd_cupti.so (corr_id set), or from a uprobe on a libcuda
	 * launch function in a process without the library (PROFD_SAMPLE_UPROBE, corr_id 0).
	 * nr_kernel is 0; the user and Python stacks are the launching thread's.
	 */
	PROFD_REC_LAUNCH = 4,
	/*
	 * struct profd_task_rec: a followed process forked a new process (pid: the child, ppid:
	 * the parent), which the filter now covers too (see PROFD_TARGET_FOLLOW).
	 */
	PROFD_REC_FORK = 5,
	/*
	 * struct profd_sample_rec of one thread of a live stack dump (bpf/stacks.bpf.c): written
	 * to the stacks iterator's seq file, never to the ring buffer. task_state is set; the
	 * user stack is a frame-pointer walk from the registers the thread entered the kernel with.
	 */
	PROFD_REC_THREAD = 6,
	/*
	 * struct profd_offcpu_rec: a sampled thread was off the CPU for off_ns, at least the
	 * daemon's --off-cpu-min; its stacks are those it left the CPU with (tp_btf/sched_switch).
	 */
	PROFD_REC_OFFCPU = 7,
	/* struct profd_offcpu_agg_rec: the shorter waits of one thread, summed in the kernel. */
	PROFD_REC_OFFCPU_AGG = 8,
	/*
	 * struct profd_task_rec: the process's executable mappings changed (code mapped, unmapped
	 * or made executable), so what the daemon knows of its mappings may be stale. One record
	 * per change from clean to dirty (the map maps_dirty), the next only after the daemon
	 * marked it clean again: a process that maps in a loop costs one record per drain.
	 */
	PROFD_REC_MAPS = 9,
};

/*
 * Values of the target_pids map (bits): the process is sampled; the processes it forks are
 * added with PROFD_TARGET_SAMPLE | PROFD_TARGET_FOLLOW | PROFD_TARGET_TRANSIENT (and theirs);
 * a transient entry leaves the map when its process exits, so a reused pid is not sampled.
 */
#define PROFD_TARGET_SAMPLE (1u << 0)
#define PROFD_TARGET_FOLLOW (1u << 1)
#define PROFD_TARGET_TRANSIENT (1u << 2)
/* Processes the filter holds at most (--pid targets, their descendants, followed commands). */
#define PROFD_MAX_TARGETS 16384

/* Flags of struct profd_sample_rec. */
#define PROFD_SAMPLE_KSTACK_ERR (1u << 0)    /* bpf_get_stack() failed for the kernel stack */
#define PROFD_SAMPLE_USTACK_ERR (1u << 1)    /* bpf_get_stack() failed for the user stack */
#define PROFD_SAMPLE_USTACK_TRUNC (1u << 2)  /* user stack filled every slot: likely truncated */
#define PROFD_SAMPLE_KSTACK_TRUNC (1u << 3)  /* kernel stack filled every slot */
#define PROFD_SAMPLE_KERNEL_THREAD (1u << 4) /* a kernel thread (PF_KTHREAD) */

struct profd_rec_hdr {
	__u32 type; /* enum profd_record_type */
	__u32 size; /* bytes of the whole record including this header */
};

/* Python frames read per sample; deeper stacks are cut at the oldest end and flagged. */
#define PROFD_MAX_PY_FRAMES 128

/* py_status of a sample. */
enum profd_py_status {
	PROFD_PY_NONE = 0,	/* not a CPython process (or Python disabled) */
	PROFD_PY_OK = 1,	/* nr_py frames read (possibly 0: the thread runs no Python now) */
	PROFD_PY_NO_TSTATE = 2, /* no PyThreadState matches this thread */
	PROFD_PY_READ_ERR = 3,	/* a read of interpreter memory failed (paged out, torn) */
};

/* Flags of struct profd_py_frame. */
#define PROFD_PYF_ENTRY (1u << 0)    /* 3.11: is_entry, the oldest frame of a C eval activation */
#define PROFD_PYF_BOUNDARY (1u << 1) /* 3.12+: owner >= boundary (shim / C-stack entry frame) */
/*
 * The frame's code object was fingerprinted when sampled: bits PROFD_PYF_CHECK_SHIFT and up hold
 * PROFD_PY_CODE_CHECK(co_filename, co_name) as the sampler read them. The daemon reads the code
 * object later (up to a drain interval), when the object may have been freed and its address
 * reused by another (the top level of a module being imported lives only during its import):
 * a fingerprint that differs says the code it would name is not the code that ran. Set on the
 * frames whose code may be short-lived (each activation's first; every frame up to 3.10).
 */
#define PROFD_PYF_CHECKED (1u << 2)
#define PROFD_PYF_CHECK_SHIFT 8
#define PROFD_PY_CODE_CHECK(filename, name) ((__u32)((((filename) ^ (name)) >> 4) & 0xffffff))

/*
 * One Python frame as the interpreter holds it: no strings, user space symbolizes. `code` is the
 * frame's code object (3.14: tag bits cleared); `lasti` is f_lasti (3.8-3.10, an int) or, from
 * 3.11, the byte distance from the code object's start to the current instruction pointer.
 */
struct profd_py_frame {
	__u64 code;
	__u32 lasti;
	__u32 flags; /* PROFD_PYF_* */
};
_Static_assert(sizeof(struct profd_py_frame) == 16, "profd_py_frame layout");

/*
 * One CPU sample. The record on the ring buffer is cut after its last used byte: ips[0 ..
 * nr_kernel) are kernel addresses, leaf first, then nr_user user addresses, leaf first, then
 * nr_py struct profd_py_frame, newest first, right after the last used ips[] slot.
 * size = PROFD_SAMPLE_HDR_SIZE + 8 * (nr_kernel + nr_user) + 16 * nr_py.
 */
struct profd_sample_rec {
	struct profd_rec_hdr hdr;
	__u64 ts_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u32 pid;   /* thread group id in the root PID namespace */
	__u32 tid;
	__u32 uid; /* effective uid */
	__u32 cpu;
	__u32 flags; /* PROFD_SAMPLE_* */
	__u16 nr_kernel;
	__u16 nr_user;
	char comm[PROFD_COMM_LEN]; /* thread name */
	__u16 nr_py;
	__u16 py_status; /* enum profd_py_status */
	union {
		__u32 corr_id;	  /* PROFD_REC_LAUNCH: CUPTI correlation id; 0 otherwise */
		__u32 task_state; /* PROFD_REC_THREAD: enum profd_task_state */
	};
	/* ips, then the Python frames; sized for the most of both. */
	__u64 ips[2 * PROFD_MAX_STACK + 2 * PROFD_MAX_PY_FRAMES];
};

#define PROFD_SAMPLE_HDR_SIZE 64
_Static_assert(sizeof(struct profd_rec_hdr) == 8, "profd_rec_hdr layout");
_Static_assert(__builtin_offsetof(struct profd_sample_rec, ips) == PROFD_SAMPLE_HDR_SIZE,
	       "profd_sample_rec header layout");
_Static_assert(sizeof(struct profd_sample_rec) ==
		   PROFD_SAMPLE_HDR_SIZE + 8 * 2 * PROFD_MAX_STACK + 16 * PROFD_MAX_PY_FRAMES,
	       "profd_sample_rec layout");

#define PROFD_SAMPLE_PY_TRUNC (1u << 5) /* more Python frames than PROFD_MAX_PY_FRAMES */
#define PROFD_SAMPLE_UPROBE (1u << 6)	/* PROFD_REC_LAUNCH from a libcuda uprobe */
/* PROFD_REC_THREAD: the thread was on a CPU as it was read: its user stack may be torn. */
#define PROFD_SAMPLE_ON_CPU (1u << 7)
/*
 * The GIL, for a thread of a CPython process (none of the three: not known). HELD: the GIL is
 * locked and its last holder is this thread's PyThreadState. FREE: the thread has a thread state
 * but does not hold the GIL (C code that released it, or a thread about to wait for it). NO_GIL:
 * a free-threaded build (3.13t, 3.14t), which has no GIL to hold.
 */
#define PROFD_SAMPLE_GIL_HELD (1u << 8)
#define PROFD_SAMPLE_GIL_FREE (1u << 9)
#define PROFD_SAMPLE_NO_GIL (1u << 10)
/*
 * An off-CPU record of a Python thread that waited for the GIL: the system call the wait was in
 * is a futex on a word inside the interpreter's struct _gil_runtime_state (its condition
 * variable or mutex), which is where take_gil blocks in every version (3.8-3.14).
 */
#define PROFD_SAMPLE_GIL_WAIT (1u << 11)
/* Bytes from the GIL's address that hold its futex words: struct _gil_runtime_state is < 256. */
#define PROFD_GIL_SPAN 256

/* A thread's scheduler state in a PROFD_REC_THREAD, as the state letter of /proc/PID/stat. */
enum profd_task_state {
	PROFD_TASK_UNKNOWN = 0,
	PROFD_TASK_RUNNING = 1,	   /* R: running or runnable */
	PROFD_TASK_SLEEPING = 2,   /* S: interruptible wait */
	PROFD_TASK_DISK_SLEEP = 3, /* D: uninterruptible wait */
	PROFD_TASK_STOPPED = 4,	   /* T: stopped by a signal */
	PROFD_TASK_TRACED = 5,	   /* t: stopped by a tracer */
	PROFD_TASK_DEAD = 6,	   /* X */
	PROFD_TASK_ZOMBIE = 7,	   /* Z */
	PROFD_TASK_PARKED = 8,	   /* P: a parked kernel thread */
	PROFD_TASK_IDLE = 9,	   /* I: an idle kernel thread */
};

/* The USDT probe libprofd_cupti.so fires per traced launch: provider, name, arguments. */
#define PROFD_USDT_PROVIDER "profd"
#define PROFD_USDT_LAUNCH "cuda_launch" /* (u32 correlation id, u32 callback id) */

/*
 * Where to find a CPython process's threads and frames: filled by the daemon (daemon/python.c)
 * per process, read by the sampler. Offsets are in bytes; PROFD_PY_NO_FIELD marks a field the
 * version lacks.
 */
#define PROFD_PY_NO_FIELD 0xffff

/* Where a process's GIL is (struct _gil_runtime_state). */
enum profd_py_gil_kind {
	PROFD_PY_GIL_UNKNOWN = 0,  /* not read */
	PROFD_PY_GIL_RUNTIME = 1,  /* 3.8-3.11: at runtime_addr + gil_off (_PyRuntime.ceval.gil) */
	PROFD_PY_GIL_INTERP = 2,   /* 3.12+: *(tstate->interp + gil_off) (interp->ceval.gil) */
	PROFD_PY_GIL_DISABLED = 3, /* free-threaded build: no GIL, and no frames are read */
};

enum profd_py_lasti_kind {
	PROFD_PY_LASTI_INT = 0, /* 3.8-3.10: int f_lasti at fr_lasti */
	PROFD_PY_LASTI_PTR = 1, /* 3.11+: instruction pointer at fr_lasti; emit ptr - code */
};

struct profd_py_proc {
	__u64 runtime_addr;	   /* &_PyRuntime in the process */
	__u16 version;		   /* 0x030b for 3.11 */
	__u16 rt_interp_head;	   /* _PyRuntimeState.interpreters.head */
	__u16 interp_next;	   /* PyInterpreterState.next */
	__u16 interp_threads_head; /* PyInterpreterState.tstate_head / threads.head */
	__u16 ts_next;		   /* PyThreadState.next */
	__u16 ts_thread_id;	   /* PyThreadState.thread_id (== pthread_self() == fsbase) */
	__u16 ts_frame;		   /* .frame (3.8-3.10), .cframe (3.11, 3.12), .current_frame */
	__u16 cframe_current;	   /* _PyCFrame.current_frame (3.11, 3.12) or NO_FIELD */
	__u16 fr_code;		   /* f_code / f_executable */
	__u16 fr_back;		   /* f_back / previous */
	__u16 fr_lasti;		   /* f_lasti / prev_instr / instr_ptr */
	__u16 fr_owner;		   /* owner (3.11+) or NO_FIELD */
	__u16 fr_is_entry;	   /* is_entry (3.11) or NO_FIELD */
	__u16 fr_size;		   /* bytes to read per frame to cover every field above */
	__u8 lasti_kind;	   /* enum profd_py_lasti_kind */
	__u8 boundary_owner;	   /* owner >= this marks a C boundary frame; 0: none */
	__u8 code_tag_mask;	   /* low bits of f_executable to clear (3.14: 1) */
	__u8 gil_kind;		   /* enum profd_py_gil_kind */
	__u16 gil_off;		   /* see enum profd_py_gil_kind */
	__u16 ts_interp;	   /* PyThreadState.interp (PROFD_PY_GIL_INTERP) */
	/*
	 * _gil_runtime_state.last_holder (a PyThreadState *); `locked` (an int: 1 locked, 0 free,
	 * -1 not created yet) is 8 bytes after it in every version: one 16-byte read gets both.
	 */
	__u16 gil_holder;
	/* PyCodeObject.co_filename, co_name 8 bytes on (PROFD_PYF_CHECKED); or NO_FIELD */
	__u16 co_filename;
};
_Static_assert(sizeof(struct profd_py_proc) == 48, "profd_py_proc layout");

/* Process lifecycle, from tp_btf/sched_process_exec, sched_process_exit and sched_process_fork. */
struct profd_task_rec {
	struct profd_rec_hdr hdr;
	__u64 ts_ns;
	__u32 pid;
	__u32 uid;		   /* effective uid */
	char comm[PROFD_COMM_LEN]; /* process name after exec, at exit, or at fork (the parent's) */
	__u32 ppid;		   /* the parent process (real_parent's tgid); 0: unknown */
	__u32 __pad;
};
_Static_assert(sizeof(struct profd_task_rec) == 48, "profd_task_rec layout");

/*
 * Native unwinding from CFI (.eh_frame / .debug_frame). The daemon turns each ELF file's CFI into
 * a compact table of rows sorted by pc (daemon/unwind/cfi.c), loads it as one inner array of the
 * map unwind_tables (shared by every process that maps the file), and describes each sampled
 * process's executable mappings in unwind_procs. The BPF walk (bpf/unwind.bpf.h) finds the last
 * row at or below a frame's pc and applies it. Facts about x86-64 CFI: see docs/unwinding.md.
 */
enum profd_unwind_kind {
	PROFD_UW_INVALID = 0, /* CFI profd cannot follow here: the walk stops (invalid row) */
	PROFD_UW_RSP = 1,     /* CFA = rsp + 8 * cfa */
	PROFD_UW_RBP = 2,     /* CFA = rbp + 8 * cfa */
	/* .plt: CFA = rsp + 8, + 8 more when (pc & 15) >= reg (the stub's jmp has pushed) */
	PROFD_UW_PLT = 3,
	PROFD_UW_SIGNAL = 4, /* rt_sigreturn trampoline: registers from the ucontext at rsp */
	PROFD_UW_STOP = 5,   /* return address undefined: the bottom of the stack */
	/*
	 * Only where every register is known (the first frame, or one a signal interrupted):
	 * CFA = reg[reg] + 8 * (cfa & 0xff); rbp saved at CFA + 8 * (s8)(cfa >> 8), 0: unchanged.
	 */
	PROFD_UW_CFA_REG = 6,
	/* Likewise: the return address is in reg[reg] (__vfork), CFA = rsp + 8 * cfa. */
	PROFD_UW_RA_REG = 7,
	/* CFA = *(rsp + 8 * (cfa & 0xff)) + 8 * (s8)(cfa >> 8): realigned stacks (OpenSSL). */
	PROFD_UW_DEREF = 8,
	/* No FDE covers the pc (code without CFI between functions): step with frame pointers. */
	PROFD_UW_GAP = 9,
	/*
	 * GCC's realigned stack (DRAP): CFA = *(rbp + 8 * reg); with PROFD_UW_DRAP_SAVED in cfa,
	 * rbp is restored from rbp + 8 * (s8)(cfa & 0xff), else it keeps its value.
	 */
	PROFD_UW_DRAP = 10,
};
#define PROFD_UW_DRAP_SAVED 0x100

/*
 * One row: its rule holds from pc (an ELF virtual address) up to the next row's pc. reg: for
 * RSP, RBP and DEREF rows, rbp is saved at CFA + 8 * reg (0: rbp keeps its value); PLT: the
 * threshold; CFA_REG and RA_REG: a DWARF register number (0 rax .. 16 rip).
 */
struct profd_unwind_row {
	__u32 pc;
	__u8 kind; /* enum profd_unwind_kind */
	__s8 reg;
	__u16 cfa;
};
_Static_assert(sizeof(struct profd_unwind_row) == 8, "profd_unwind_row layout");

/*
 * Executable mappings of one process that the walk knows, by default (--unwind-max-mappings);
 * more are left out. The daemon sizes unwind_procs' values for the bound before load, up to
 * PROFD_UNWIND_MAPS_LIMIT.
 */
#define PROFD_UNWIND_MAX_MAPS 512
#define PROFD_UNWIND_MAPS_LIMIT 8192
/* Files whose tables the map unwind_tables holds at most. */
#define PROFD_UNWIND_MAX_TABLES 4096

/* unwind_map.table for a mapping without CFI (JIT code, anonymous memory): frame pointers. */
#define PROFD_UNWIND_FP_ONLY 0

struct profd_unwind_map {
	__u64 start; /* [start, end): runtime addresses */
	__u64 end;
	__u64 bias;  /* ELF virtual address = runtime address - bias */
	__u32 table; /* key of its file's table in unwind_tables, or PROFD_UNWIND_FP_ONLY */
	__u32 nrows; /* rows in that table */
};
_Static_assert(sizeof(struct profd_unwind_map) == 32, "profd_unwind_map layout");

/*
 * Value of unwind_procs (key: tgid): maps[0 .. nr_maps) sorted by start, not overlapping. The
 * array holds a power of two of mappings, at least the bound: PROFD_UNWIND_PROC_SIZE(that).
 */
struct profd_unwind_proc {
	__u32 nr_maps;
	__u32 __pad;
	struct profd_unwind_map maps[];
};
#define PROFD_UNWIND_PROC_SIZE(nmaps) (8 + 32 * (nmaps))
_Static_assert(sizeof(struct profd_unwind_proc) == PROFD_UNWIND_PROC_SIZE(0),
	       "profd_unwind_proc layout");

/*
 * How a sample's user stack walk ended: in bits 16-20 of profd_sample_rec.flags
 * (PROFD_SAMPLE_UNWIND_MASK). Only PROFD_UNWIND_BOTTOM means the stack is whole.
 */
enum profd_unwind_end {
	PROFD_UNWIND_NONE = 0,	      /* no user stack walked (kernel thread, no mm) */
	PROFD_UNWIND_BOTTOM = 1,      /* reached the bottom: whole */
	PROFD_UNWIND_TRUNCATED = 2,   /* more frames than PROFD_MAX_STACK */
	PROFD_UNWIND_FP_FALLBACK = 3, /* the process's tables were not loaded yet: frame pointers */
	PROFD_UNWIND_NO_MAPPING = 4,  /* a pc in no mapping the daemon described */
	PROFD_UNWIND_NO_TABLE = 5,    /* its file's table is not loaded (evicted, over the bound) */
	PROFD_UNWIND_NO_ROW = 6,      /* a pc its file's table does not cover */
	PROFD_UNWIND_INVALID = 7,     /* an INVALID row, or a rule the frame cannot apply */
	PROFD_UNWIND_READ_FAULT = 8,  /* a stack read failed (not resident, bad address) */
	PROFD_UNWIND_BAD_FRAME = 9,   /* the stack did not grow up, or a frame pointer was bad */
	PROFD_UNWIND__MAX = 10,
};
#define PROFD_SAMPLE_UNWIND_SHIFT 16
#define PROFD_SAMPLE_UNWIND_MASK (0x1fu << PROFD_SAMPLE_UNWIND_SHIFT)

/* Indices of the per-CPU counters array map "counters". */
enum profd_counter {
	PROFD_CNT_SAMPLES = 0,	      /* perf events that matched the target filter */
	PROFD_CNT_RINGBUF_FULL = 1,   /* records dropped because the ring buffer was full */
	PROFD_CNT_KSTACK_ERR = 2,     /* kernel stack reads that failed */
	PROFD_CNT_USTACK_ERR = 3,     /* user stack reads that failed */
	PROFD_CNT_TASK_DROPPED = 4,   /* exec/exit records dropped (ring buffer full) */
	PROFD_CNT_LAUNCH_LIMITED = 5, /* launch records over their process's rate limit */
	PROFD_CNT_FOLLOW_FULL = 6,    /* new processes of followed ones not followed: map full */
	PROFD_CNT_OFFCPU_LOST = 7,    /* off-CPU records (either kind) dropped: ring buffer full */
	/* long waits sent at the thread's next switch-out, not at its system call's return */
	PROFD_CNT_OFFCPU_UNSENT = 8,
	/* user stack walks by how they ended: PROFD_CNT_UNWIND + enum profd_unwind_end */
	PROFD_CNT_UNWIND = 9,
	/* walks that left a frame without CFI by a stack scan (a heuristic), and such frames */
	PROFD_CNT_UNWIND_SCANNED = PROFD_CNT_UNWIND + PROFD_UNWIND__MAX,
	PROFD_CNT_UNWIND_SCAN_STEPS,
	/* return addresses the scan passed over: the caller's row did not fit the stack there */
	PROFD_CNT_UNWIND_SCAN_REJECTS,
	/* walks that used the scan and still did not reach the bottom */
	PROFD_CNT_UNWIND_SCAN_SHORT,
	PROFD_CNT__MAX,
};

/*
 * One wait of a sampled thread: the switch-out's stacks in `sample` (a profd_sample_rec cut
 * after its last used byte, its hdr.type PROFD_REC_OFFCPU too; sample.ts_ns is the switch-out
 * time), how long the thread stayed off the CPU, and the state it left in (PROFD_TASK_RUNNING:
 * preempted, PROFD_TASK_SLEEPING, PROFD_TASK_DISK_SLEEP). size = PROFD_OFFCPU_HDR_SIZE +
 * sample.hdr.size.
 */
struct profd_offcpu_rec {
	struct profd_rec_hdr hdr;
	__u64 off_ns;
	__u32 state; /* enum profd_task_state */
	__u32 __pad;
	struct profd_sample_rec sample;
};
#define PROFD_OFFCPU_HDR_SIZE 24
_Static_assert(__builtin_offsetof(struct profd_offcpu_rec, sample) == PROFD_OFFCPU_HDR_SIZE,
	       "profd_offcpu_rec layout");

/*
 * Waits of one thread shorter than the threshold, summed in the kernel and sent at most every
 * PROFD_OFFCPU_AGG_NS of the thread's time, so a thread that switches 100,000 times a second
 * costs a record per interval, not per switch.
 */
#define PROFD_OFFCPU_AGG_NS (100ull * 1000 * 1000)
struct profd_offcpu_agg_rec {
	struct profd_rec_hdr hdr;
	__u64 ts_ns;  /* the switch-in that sent it */
	__u64 off_ns; /* the waits' sum */
	__u64 count;  /* how many waits */
	__u32 pid;
	__u32 tid;
	__u32 uid;
	__u32 __pad;
	char comm[PROFD_COMM_LEN];
};
_Static_assert(sizeof(struct profd_offcpu_agg_rec) == 64, "profd_offcpu_agg_rec layout");

#endif /* PROFD_BPF_ABI_H */
