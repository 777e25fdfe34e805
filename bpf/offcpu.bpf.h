/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Off-CPU time, included by sample.bpf.c (its maps, fill_ident and fill_user). On
 * tp_btf/sched_switch a sampled thread that leaves the CPU has the time and its state noted in
 * its task storage; when it is switched in again the time it was away is known. A wait shorter
 * than off_cpu_min_ns is added to a per-thread sum that goes out as one small record per
 * PROFD_OFFCPU_AGG_NS. A longer one gets its kernel stack read at the switch-in (the task's
 * stack did not change while it was away) and its user and Python stacks read by the thread
 * itself as its system call returns (tp_btf/sys_exit), exactly as the CPU sampler reads them:
 * so a context switch costs two task storage lookups, and only long waits pay for stacks. A
 * thread that leaves the CPU outside a system call (preempted in its own code, or waiting in a
 * page fault) has no call to return from: its user stacks are read as it leaves.
 * Task storage: the thread comes back on any CPU, and the storage lives and dies with the task.
 * The programs are loaded only with --off-cpu: without it nothing runs on a context switch.
 */
#ifndef PROFD_OFFCPU_BPF_H
#define PROFD_OFFCPU_BPF_H

/* Set before load: the shortest wait recorded with its own stacks. */
const volatile __u64 off_cpu_min_ns = 10000;

struct offcpu_task {
	__u64 out_ns;	  /* switch-out time of the wait in progress; 0: none tracked */
	__u64 agg_ns;	  /* short waits not sent yet */
	__u64 agg_count;  /* how many */
	__u64 agg_since;  /* when the first of them ended */
	__u64 pending_ns; /* a long wait in a system call, sent as the call returns; 0: none */
	__u32 state;	  /* enum profd_task_state of the wait in progress */
	__u32 pending_state;
	__u32 pending_nk; /* kernel addresses in kips */
	__u32 __pad;
	__u64 out_start;	     /* out_ns of the last wait, kept after it ended */
	__u64 kips[PROFD_MAX_STACK]; /* the pending wait's kernel stack */
	/* A preempted thread's identity, user and Python stacks (from ips[0]), read at switch-out.
	 */
	struct profd_sample_rec rec;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct offcpu_task);
} offcpu_tasks SEC(".maps");

/*
 * The thread on this CPU with a long wait pending, switched in last; 0: none. The system call
 * return hook runs for every call of the machine, and this spares all but that thread's the
 * task storage look-up. It cannot miss: from its switch-in to its call's return the thread
 * stays on this CPU unless it is switched out, and a switch-out sends what is pending.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} offcpu_pending_tid SEC(".maps");

/* Where a long wait's record is put together; one per CPU: neither program nests in itself. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct profd_offcpu_rec);
} offcpu_scratch SEC(".maps");

/* Kernel task state bits (include/linux/sched.h): ABI for as long as /proc shows them. */
#define KSTATE_INTERRUPTIBLE 0x1
#define KSTATE_UNINTERRUPTIBLE 0x2
#define KSTATE_STOPPED 0x4
#define KSTATE_TRACED 0x8
#define KSTATE_DEAD 0x80
#define PF_KTHREAD_FLAG 0x00200000

/* User and Python bytes a sample holds at most after its kernel addresses. */
#define OFFCPU_USER_MAX (8 * PROFD_MAX_STACK + 16 * PROFD_MAX_PY_FRAMES)

static __always_inline __u32 offcpu_state(bool preempt, unsigned int kstate)
{
	if (preempt || !(kstate & 0xff))
		return PROFD_TASK_RUNNING;
	if (kstate & KSTATE_UNINTERRUPTIBLE)
		return PROFD_TASK_DISK_SLEEP;
	if (kstate & KSTATE_INTERRUPTIBLE)
		return PROFD_TASK_SLEEPING;
	if (kstate & KSTATE_TRACED)
		return PROFD_TASK_TRACED;
	if (kstate & KSTATE_STOPPED)
		return PROFD_TASK_STOPPED;
	return PROFD_TASK_UNKNOWN;
}

/* fill_ident for task (not current), whose wait began at start. */
static __always_inline void fill_ident_task(struct profd_sample_rec *rec, struct task_struct *task,
					    __u64 start)
{
	rec->hdr.type = PROFD_REC_OFFCPU;
	rec->ts_ns = start;
	rec->pid = task->tgid;
	rec->tid = task->pid;
	rec->uid = BPF_CORE_READ(task, cred, euid.val);
	clear_stacks(rec);
	bpf_probe_read_kernel(rec->comm, sizeof(rec->comm), task->comm);
}

/* Send out (its sample part size bytes, at most a whole one) as a wait of off_ns. */
static __always_inline void offcpu_send(struct profd_offcpu_rec *out, __u64 size, __u64 off_ns,
					__u32 state)
{
	if (size > sizeof(out->sample))
		return;
	out->sample.hdr.size = size;
	size += PROFD_OFFCPU_HDR_SIZE;
	out->hdr.type = PROFD_REC_OFFCPU;
	out->hdr.size = size;
	out->off_ns = off_ns;
	out->state = state;
	out->__pad = 0;
	if (bpf_ringbuf_output(&events, out, size & 8191, rb_flags(&events)))
		count(PROFD_CNT_OFFCPU_LOST);
}

/*
 * Send the pending long wait of the current thread: its kernel stack from the switch-in, its
 * user and Python stacks read now. The thread has not returned to user space since the wait
 * (this is its system call's return, or it waits again inside the same call), so they are
 * still the wait's.
 */
/*
 * The futex word the current thread's system call waits on (x86-64: futex(2), its first
 * argument), 0 for any other call: the Python walk tells a wait for the GIL by it.
 */
static __always_inline __u64 futex_word(void)
{
#if defined(__TARGET_ARCH_x86)
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());

	if (regs && regs->orig_ax == 202 /* __NR_futex */)
		return regs->di;
#endif
	return 0;
}

static __always_inline void offcpu_send_pending(void *ctx, struct offcpu_task *st, __u32 tgid,
						__u32 tid)
{
	struct profd_offcpu_rec *out;
	struct py_scratch *py;
	__u32 slot = 0, nk = st->pending_nk, pslot = SLOT_SWITCH;
	__u64 size, off_ns = st->pending_ns;

	st->pending_ns = 0;
	out = bpf_map_lookup_elem(&offcpu_scratch, &slot);
	if (!out || nk > PROFD_MAX_STACK)
		return;
	nk &= 127;
	fill_ident(&out->sample, PROFD_REC_OFFCPU, tgid, tid);
	/* The record's time is the wait's start. */
	out->sample.ts_ns -= off_ns;
	if (nk && bpf_probe_read_kernel(out->sample.ips, nk * 8, st->kips))
		return;
	out->sample.nr_kernel = nk;
	py = bpf_map_lookup_elem(&py_scratch_map, &pslot);
	if (py)
		py->futex_uaddr = futex_word();
	size = fill_user(ctx, &out->sample, nk, SLOT_SWITCH);
	if (py)
		py->futex_uaddr = 0;
	offcpu_send(out, size, off_ns, st->pending_state);
}

/*
 * Whether a task leaves the CPU outside a system call: preempted in its own code (an interrupt
 * preempted it), or waiting in a page fault. A thread woken by the one that runs is often
 * preempted as its call returns, a hundred thousand times a second in a ping-pong, and the
 * partner runs for microseconds: those waits, inside a call, are charged with their kernel stack
 * alone; reading a user stack each time would cost more than they are worth.
 */
static __always_inline bool outside_syscall(struct task_struct *task)
{
#if defined(__TARGET_ARCH_x86)
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);

	return !regs || (long)regs->orig_ax < 0;
#else
	return true;
#endif
}

/*
 * prev leaves the CPU: note when and how. A thread outside a system call (preempted in its own
 * code, or waiting in a page fault) has its user and Python stacks read now: it will not come
 * back through a system call's return, and reading them later would find whatever it ran next.
 * A thread that waits in a system call has them read as the call returns (profd_sys_exit), and
 * only if the wait was long.
 */
static __always_inline void offcpu_out(void *ctx, struct task_struct *prev, bool preempt,
				       unsigned int kstate, __u64 now)
{
	__u32 tgid = prev->tgid, tid = prev->pid;
	struct offcpu_task *st;

	if (tid == 0 || (prev->flags & PF_KTHREAD_FLAG) || (kstate & KSTATE_DEAD))
		return;
	/*
	 * A task with storage was wanted when it got it, and a process leaves the targets only
	 * as it exits: one look-up per switch, not the target map's too.
	 */
	st = bpf_task_storage_get(&offcpu_tasks, prev, 0, 0);
	if (!st) {
		if (!wanted(tgid))
			return;
		st = bpf_task_storage_get(&offcpu_tasks, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!st)
			return;
	}
	/* Woken, then waiting again inside the same system call: send the first wait now. */
	if (st->pending_ns) {
		count(PROFD_CNT_OFFCPU_UNSENT);
		offcpu_send_pending(ctx, st, tgid, tid);
	}
	st->state = offcpu_state(preempt, kstate);
	st->rec.hdr.size = 0;
	if (outside_syscall(prev)) {
		fill_ident(&st->rec, PROFD_REC_OFFCPU, tgid, tid);
		fill_user(ctx, &st->rec, 0, SLOT_SWITCH);
	}
	st->out_ns = now;
	st->out_start = st->out_ns;
}

/* The short waits of next, summed: one record for all of them. */
static __always_inline void offcpu_flush(struct offcpu_task *st, struct task_struct *next,
					 __u64 now)
{
	struct profd_offcpu_agg_rec *a;

	a = bpf_ringbuf_reserve(&events, sizeof(*a), 0);
	if (!a) {
		count(PROFD_CNT_OFFCPU_LOST);
		return; /* kept: the next flush sends them */
	}
	a->hdr.type = PROFD_REC_OFFCPU_AGG;
	a->hdr.size = sizeof(*a);
	a->ts_ns = now;
	a->off_ns = st->agg_ns;
	a->count = st->agg_count;
	a->pid = next->tgid;
	a->tid = next->pid;
	a->uid = BPF_CORE_READ(next, cred, euid.val);
	a->__pad = 0;
	bpf_probe_read_kernel(a->comm, sizeof(a->comm), next->comm);
	bpf_ringbuf_submit(a, rb_flags(&events));
	st->agg_ns = 0;
	st->agg_count = 0;
	st->agg_since = 0;
}

/*
 * A thread preempted, or that waited outside a system call, comes back after d ns: its kernel
 * stack now, its user part from storage.
 */
static __always_inline void offcpu_send_now(struct offcpu_task *st, struct task_struct *next,
					    __u64 d)
{
	struct profd_offcpu_rec *out;
	__u32 slot = 1;
	__u64 ubytes;
	long kn;

	out = bpf_map_lookup_elem(&offcpu_scratch, &slot);
	if (!out)
		return;
	ubytes = st->rec.hdr.size;
	if (ubytes) {
		if (ubytes < PROFD_SAMPLE_HDR_SIZE ||
		    ubytes > PROFD_SAMPLE_HDR_SIZE + OFFCPU_USER_MAX)
			return;
		ubytes -= PROFD_SAMPLE_HDR_SIZE;
		__builtin_memcpy(&out->sample, &st->rec, PROFD_SAMPLE_HDR_SIZE);
	} else {
		/* Preempted in a system call: who and when, no user stack (see above). */
		fill_ident_task(&out->sample, next, st->out_start);
		out->sample.flags |= PROFD_SAMPLE_USTACK_ERR;
	}
	kn = bpf_get_task_stack(next, out->sample.ips, PROFD_MAX_STACK * 8, 0);
	if (kn < 0) {
		count(PROFD_CNT_KSTACK_ERR);
		out->sample.flags |= PROFD_SAMPLE_KSTACK_ERR;
		kn = 0;
	}
	kn /= 8;
	if (kn >= PROFD_MAX_STACK) {
		kn = PROFD_MAX_STACK;
		out->sample.flags |= PROFD_SAMPLE_KSTACK_TRUNC;
	}
	kn &= 127;
	if (ubytes && bpf_probe_read_kernel(&out->sample.ips[kn], ubytes & 4095, st->rec.ips))
		return;
	out->sample.nr_kernel = kn;
	offcpu_send(out, PROFD_SAMPLE_HDR_SIZE + 8 * kn + ubytes, d, st->state);
}

/*
 * next comes back: charge the time it was away. A long wait in a system call keeps its kernel
 * stack (unchanged while the thread was away) and waits for the call's return, where the thread
 * itself reads its user and Python stacks: still those of the wait.
 */
static __always_inline void offcpu_in(struct task_struct *next, __u64 now)
{
	struct offcpu_task *st;
	__u32 zero = 0, *hint;
	__u64 d;
	long kn;

	st = bpf_task_storage_get(&offcpu_tasks, next, 0, 0);
	if (!st || !st->out_ns)
		return;
	d = now > st->out_ns ? now - st->out_ns : 0;
	st->out_ns = 0;
	if (d >= off_cpu_min_ns) {
		/* The user part read as it left, or (preempted in a call) none to read. */
		if (st->state == PROFD_TASK_RUNNING || st->rec.hdr.size) {
			offcpu_send_now(st, next, d);
			return;
		}
		kn = bpf_get_task_stack(next, st->kips, sizeof(st->kips), 0);
		if (kn < 0) {
			count(PROFD_CNT_KSTACK_ERR);
			kn = 0;
		}
		st->pending_nk = kn / 8;
		st->pending_ns = d;
		st->pending_state = st->state;
		hint = bpf_map_lookup_elem(&offcpu_pending_tid, &zero);
		if (hint)
			*hint = next->pid;
		return;
	}
	if (!st->agg_count)
		st->agg_since = now;
	st->agg_ns += d;
	st->agg_count++;
	if (now - st->agg_since >= PROFD_OFFCPU_AGG_NS)
		offcpu_flush(st, next, now);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(profd_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	/* One clock read for both ends: a VM's clock is not cheap, and this runs per switch. */
	__u64 now = bpf_ktime_get_ns();

	offcpu_out(ctx, prev, preempt, prev_state, now);
	offcpu_in(next, now);
	return 0;
}

/*
 * A system call returns in a thread with a long wait pending: the thread is still where it
 * waited, so its user and Python stacks are read now and sent after the kernel stack.
 */
SEC("tp_btf/sys_exit")
int BPF_PROG(profd_sys_exit, struct pt_regs *regs, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct offcpu_task *st;
	__u32 zero = 0, *hint;

	hint = bpf_map_lookup_elem(&offcpu_pending_tid, &zero);
	if (!hint || *hint != (__u32)id)
		return 0;
	*hint = 0;
	st = bpf_task_storage_get(&offcpu_tasks, bpf_get_current_task_btf(), 0, 0);
	if (st && st->pending_ns)
		offcpu_send_pending(ctx, st, id >> 32, (__u32)id);
	return 0;
}

#endif /* PROFD_OFFCPU_BPF_H */
