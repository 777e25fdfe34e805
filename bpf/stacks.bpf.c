// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Live stack dump: a sleepable task iterator, attached to one process (bpf_iter_link_info
 * .task.pid), writes one PROFD_REC_THREAD record per thread to the iterator's seq file. Blocked
 * threads take no CPU samples, so each thread's stacks are read here, on demand: the kernel
 * stack with bpf_get_task_stack, the user stack by a frame-pointer walk from the registers the
 * thread entered the kernel with (bpf_get_task_stack has no user stacks of other tasks), read
 * with bpf_copy_from_user_task, and the Python frames by the walk of python.bpf.h over the same
 * reader. The daemon reads the iterator synchronously, one reader at a time (the per-CPU scratch
 * maps rely on that: a sleepable program stays on its CPU but may be preempted).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/*
 * The process being read, set by the daemon before each read: the link's pid filter does the
 * work, this guards against a kernel that would ignore it and walk every task.
 */
__u32 target_tgid = 0;

/* The iterator's scratch: the record being built and the user walk's state (see py_scratch). */
struct snap_scratch {
	struct profd_sample_rec rec;
	__u64 fp;  /* frame pointer of the next frame record to read */
	__u32 idx; /* next free ips[] slot */
	__u32 end; /* first ips[] slot the user walk may not fill */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct snap_scratch);
} snap_scratch_map SEC(".maps");

/* py_procs and py_tstates are the sampler's maps (bpf_map__reuse_fd before load). */
#define PY_READ_TASK 1
/* A dump shows up to 4096 threads (daemon/handle_stacks.c): reach as many thread states. */
#define PY_MAX_THREADS_WALK 4096
#include "python.bpf.h"

/* Older kernels name task_struct.__state "state". */
struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

/*
 * The state letter /proc shows (task_state_index in the kernel): the report bits of __state
 * and exit_state have kept their values since 4.14; TASK_IDLE (0x402) and TASK_RTLOCK_WAIT
 * (0x1000) are the whole-value special cases.
 */
static __always_inline __u32 task_state(struct task_struct *task)
{
	__u32 raw, st;

	if (bpf_core_field_exists(task->__state))
		raw = BPF_CORE_READ(task, __state);
	else
		raw = (__u32)BPF_CORE_READ((struct task_struct___old *)task, state);
	if (raw == 0x402)
		return PROFD_TASK_IDLE;
	if (raw == 0x1000)
		return PROFD_TASK_DISK_SLEEP;
	st = (raw | (__u32)BPF_CORE_READ(task, exit_state)) & 0x7f;
	if (st & 0x40)
		return PROFD_TASK_PARKED;
	if (st & 0x20)
		return PROFD_TASK_ZOMBIE;
	if (st & 0x10)
		return PROFD_TASK_DEAD;
	if (st & 0x08)
		return PROFD_TASK_TRACED;
	if (st & 0x04)
		return PROFD_TASK_STOPPED;
	if (st & 0x02)
		return PROFD_TASK_DISK_SLEEP;
	if (st & 0x01)
		return PROFD_TASK_SLEEPING;
	return PROFD_TASK_RUNNING;
}

struct ustack_ctx {
	struct task_struct *task;
	struct snap_scratch *s;
};

/*
 * One frame record of the user stack: [fp] is the caller's frame pointer, [fp + 8] the return
 * address. The chain must climb (the stack grows down, so every caller's record lies above its
 * callee's), stay aligned and end at a zero pointer or an unreadable address.
 */
static long ustack_cb(__u32 i, void *arg)
{
	struct ustack_ctx *c = arg;
	struct snap_scratch *s = c->s;
	__u64 rec[2];
	__u32 idx = s->idx;

	if (!s->fp || (s->fp & 7))
		return 1;
	if (idx >= s->end || idx >= 2 * PROFD_MAX_STACK) {
		s->rec.flags |= PROFD_SAMPLE_USTACK_TRUNC;
		return 1;
	}
	if (bpf_copy_from_user_task(rec, sizeof(rec), (const void *)s->fp, c->task, 0))
		return 1;
	if (!rec[1])
		return 1;
	s->rec.ips[idx] = rec[1];
	s->idx = idx + 1;
	s->fp = rec[0] > s->fp ? rec[0] : 0;
	return 0;
}

/* The user stack after the kn kernel addresses; returns how many addresses it has. */
static __always_inline __u32 user_stack(struct task_struct *task, struct snap_scratch *s, __u32 kn)
{
	struct ustack_ctx c = {.task = task, .s = s};
	struct pt_regs *regs;
	__u64 ip, sp, fp;
	__u32 n;

	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return 0;
	ip = PT_REGS_IP_CORE(regs);
	sp = PT_REGS_SP_CORE(regs);
	fp = PT_REGS_FP_CORE(regs);
	if (!ip || kn >= PROFD_MAX_STACK)
		return 0;
	s->rec.ips[kn & 127] = ip;
	s->idx = kn + 1;
	s->end = kn + PROFD_MAX_STACK;
	/* A frame pointer below the stack pointer is not one (a leaf that reuses the register). */
	s->fp = fp >= sp ? fp : 0;
	bpf_loop(PROFD_MAX_STACK, ustack_cb, &c, 0);
	/* Bounded where the verifier sees it: the walk never passes s->end. */
	n = s->idx - kn;
	barrier_var(n);
	return n < PROFD_MAX_STACK ? n : PROFD_MAX_STACK;
}

SEC("iter.s/task")
int profd_stacks(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct snap_scratch *s;
	struct profd_sample_rec *rec;
	__u32 zero = 0, kn = 0, un = 0;
	__u64 size;
	long n;

	if (!task || task->tgid != target_tgid)
		return 0;
	s = bpf_map_lookup_elem(&snap_scratch_map, &zero);
	if (!s)
		return 0;
	rec = &s->rec;
	rec->hdr.type = PROFD_REC_THREAD;
	rec->ts_ns = bpf_ktime_get_ns();
	rec->pid = task->tgid;
	rec->tid = task->pid;
	rec->uid = BPF_CORE_READ(task, cred, euid.val);
	rec->cpu = bpf_core_field_exists(task->thread_info.cpu) ? task->thread_info.cpu : 0;
	rec->flags = 0;
	rec->task_state = task_state(task);
	rec->nr_kernel = 0;
	rec->nr_user = 0;
	rec->nr_py = 0;
	rec->py_status = PROFD_PY_NONE;
	bpf_probe_read_kernel_str(rec->comm, sizeof(rec->comm), task->comm);
	if (task->on_cpu)
		rec->flags |= PROFD_SAMPLE_ON_CPU;

	n = bpf_get_task_stack(task, rec->ips, PROFD_MAX_STACK * 8, 0);
	if (n < 0) {
		rec->flags |= PROFD_SAMPLE_KSTACK_ERR;
		n = 0;
	}
	kn = n / 8;
	if (kn >= PROFD_MAX_STACK) {
		kn = PROFD_MAX_STACK;
		rec->flags |= PROFD_SAMPLE_KSTACK_TRUNC;
	}
	rec->nr_kernel = kn;

	/* PF_KTHREAD: no user stack, no Python. */
	if (task->flags & 0x00200000) {
		rec->flags |= PROFD_SAMPLE_KERNEL_THREAD;
	} else if (task->mm) {
		un = user_stack(task, s, kn);
		rec->nr_user = un;
	}
	size = PROFD_SAMPLE_HDR_SIZE + 8 * (kn + un);
	if (!(rec->flags & PROFD_SAMPLE_KERNEL_THREAD) && task->mm) {
		/* kn, un <= PROFD_MAX_STACK each; a bound the verifier can follow into py_collect.
		 */
		n = kn + un;
		barrier_var(n);
		if (n > 2 * PROFD_MAX_STACK)
			n = 2 * PROFD_MAX_STACK;
		size += py_collect(rec, (__u32)n, 0, task);
	}
	if (size > sizeof(*rec))
		size = sizeof(*rec);
	rec->hdr.size = size;
	bpf_seq_write(ctx->meta->seq, rec, size);
	return 0;
}
