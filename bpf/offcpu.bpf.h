/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Off-CPU time, included by sample.bpf.c (its maps, fill_ident and fill_user): on
 * tp_btf/sched_switch, a sampled thread that leaves the CPU gets its stacks read while it is
 * still current (kernel, user, Python: exactly as the CPU sampler reads them) into its own task
 * storage; when it is switched in again, the time it was away is charged: one record with those
 * stacks when the wait reached off_cpu_min_ns, else a per-thread sum that goes out as one small
 * record per PROFD_OFFCPU_AGG_NS. Task storage rather than a per-CPU scratch: the thread comes
 * back on any CPU, and the storage lives and dies with the task (no map to clean up at exit).
 * The program is loaded only with --off-cpu: without it nothing runs on a context switch.
 */
#ifndef PROFD_OFFCPU_BPF_H
#define PROFD_OFFCPU_BPF_H

/* Set before load: the shortest wait recorded with its own stacks. */
const volatile __u64 off_cpu_min_ns = 10000;

struct offcpu_task {
	__u64 out_ns;	 /* switch-out time of the wait in progress; 0: none tracked */
	__u64 agg_ns;	 /* short waits not sent yet */
	__u64 agg_count; /* how many */
	__u64 agg_since; /* when the first of them ended */
	struct profd_offcpu_rec rec;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct offcpu_task);
} offcpu_tasks SEC(".maps");

/* Kernel task state bits (include/linux/sched.h): ABI for as long as /proc shows them. */
#define KSTATE_INTERRUPTIBLE 0x1
#define KSTATE_UNINTERRUPTIBLE 0x2
#define KSTATE_STOPPED 0x4
#define KSTATE_TRACED 0x8
#define KSTATE_DEAD 0x80
#define PF_KTHREAD_FLAG 0x00200000

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

/* prev (current) leaves the CPU: read its stacks now, while they are its own. */
static __always_inline void offcpu_out(void *ctx, struct task_struct *prev, bool preempt,
				       unsigned int kstate)
{
	__u32 tgid = prev->tgid, tid = prev->pid;
	struct profd_sample_rec *rec;
	struct offcpu_task *st;
	long kn;

	if (tid == 0 || (prev->flags & PF_KTHREAD_FLAG) || (kstate & KSTATE_DEAD) || !wanted(tgid))
		return;
	st = bpf_task_storage_get(&offcpu_tasks, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return;
	rec = &st->rec.sample;
	fill_ident(rec, PROFD_REC_OFFCPU, tgid, tid);
	kn = bpf_get_stack(ctx, rec->ips, PROFD_MAX_STACK * 8, 0);
	if (kn < 0) {
		count(PROFD_CNT_KSTACK_ERR);
		rec->flags |= PROFD_SAMPLE_KSTACK_ERR;
		kn = 0;
	}
	kn /= 8;
	if (kn >= PROFD_MAX_STACK) {
		kn = PROFD_MAX_STACK;
		rec->flags |= PROFD_SAMPLE_KSTACK_TRUNC;
	}
	rec->nr_kernel = kn;
	fill_user(ctx, rec, kn, SLOT_SWITCH);
	st->rec.state = offcpu_state(preempt, kstate);
	st->out_ns = rec->ts_ns;
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
	a->uid = st->rec.sample.uid;
	a->__pad = 0;
	bpf_probe_read_kernel(a->comm, sizeof(a->comm), next->comm);
	bpf_ringbuf_submit(a, rb_flags(&events));
	st->agg_ns = 0;
	st->agg_count = 0;
	st->agg_since = 0;
}

/* next comes back: charge the time it was away. */
static __always_inline void offcpu_in(struct task_struct *next)
{
	struct offcpu_task *st;
	__u64 now, d, size;

	st = bpf_task_storage_get(&offcpu_tasks, next, 0, 0);
	if (!st || !st->out_ns)
		return;
	now = bpf_ktime_get_ns();
	d = now > st->out_ns ? now - st->out_ns : 0;
	st->out_ns = 0;
	if (d >= off_cpu_min_ns) {
		size = st->rec.sample.hdr.size;
		if (size < PROFD_SAMPLE_HDR_SIZE || size > sizeof(st->rec.sample))
			return;
		size += PROFD_OFFCPU_HDR_SIZE;
		st->rec.hdr.type = PROFD_REC_OFFCPU;
		st->rec.hdr.size = size;
		st->rec.off_ns = d;
		st->rec.__pad = 0;
		if (bpf_ringbuf_output(&events, &st->rec, size, rb_flags(&events)))
			count(PROFD_CNT_OFFCPU_LOST);
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
	offcpu_out(ctx, prev, preempt, prev_state);
	offcpu_in(next);
	return 0;
}

#endif /* PROFD_OFFCPU_BPF_H */
