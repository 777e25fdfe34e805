// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CPU sampler: a perf_event program on the cpu-clock event of every CPU, and the launch probes
 * of launch.bpf.h, which share its maps. It only collects (ids, timestamp, raw addresses); the
 * daemon owns symbols and aggregation.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set before load: true restricts sampling to the tgids in target_pids (PROFD_TARGET_*). */
const volatile bool filter_pids = false;
/*
 * Wake the daemon only when this much data waits; otherwise it drains on its own timer. A
 * wake-up per sample would cost the sampled thread an interrupt on its way back to user mode.
 */
const volatile __u64 wakeup_bytes = 1 << 20;

static __always_inline __u64 rb_flags(void *rb)
{
	return bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									: BPF_RB_NO_WAKEUP;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROFD_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} target_pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized by the daemon before load */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROFD_CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/*
 * Scratch space to build a full-size sample; only the used part goes to the ring buffer. One
 * slot per kind of program (enum scratch_slot): the timer's program interrupts a launch probe's
 * program on the same CPU and must not write over the record it is building.
 */
enum scratch_slot {
	SLOT_SAMPLE = 0, /* perf_event: the CPU sampler */
	SLOT_LAUNCH = 1, /* usdt/uprobe: launch probes */
	SLOT_SWITCH = 2, /* tp_btf/sched_switch: off-CPU stacks (Python walk only) */
	SLOT__COUNT = 3,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLOT__COUNT);
	__type(key, __u32);
	__type(value, struct profd_sample_rec);
} scratch SEC(".maps");

#include "python.bpf.h"

static __always_inline void count_n(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += n;
}

static __always_inline void count(__u32 idx)
{
	count_n(idx, 1);
}

static __always_inline bool wanted(__u32 tgid)
{
	if (!filter_pids)
		return true;
	return bpf_map_lookup_elem(&target_pids, &tgid) != NULL;
}

/*
 * The effective uid, whose rights the thread acts with: a setuid program counts as its owner's,
 * not its caller's, as ptrace and perf decide (bpf_get_current_uid_gid gives the real uid).
 */
static __always_inline __u32 current_euid(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return BPF_CORE_READ(task, cred, euid.val);
}

/* A record with no stacks yet, taken on this CPU: what fill_ident and its kin share. */
static __always_inline void clear_stacks(struct profd_sample_rec *rec)
{
	rec->cpu = bpf_get_smp_processor_id();
	rec->flags = 0;
	rec->corr_id = 0;
	rec->nr_kernel = 0;
	rec->nr_user = 0;
	rec->nr_py = 0;
	rec->py_status = PROFD_PY_NONE;
}

/* Who and when: everything a record says about the current thread but its stacks. */
static __always_inline void fill_ident(struct profd_sample_rec *rec, __u32 type, __u32 tgid,
				       __u32 tid)
{
	rec->hdr.type = type;
	rec->ts_ns = bpf_ktime_get_ns();
	rec->pid = tgid;
	rec->tid = tid;
	rec->uid = current_euid();
	clear_stacks(rec);
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
}

#include "unwind.bpf.h"

/*
 * The user stack into rec->ips after the kn kernel addresses: from CFI when the daemon described
 * the process and st holds the thread's user registers, else the kernel's frame-pointer walk.
 * Sets nr_user and the flags of how the walk ended (counted); returns the frames written.
 */
static __always_inline long fill_user_stack(void *ctx, struct profd_sample_rec *rec, long kn,
					    struct uw_state *st)
{
	__u32 end = PROFD_UNWIND_FP_FALLBACK;
	long un = 0;

	if (!bpf_get_current_task_btf()->mm) {
		end = PROFD_UNWIND_NONE;
	} else if (st && unwind_cfi_walk(st, rec->pid)) {
		un = st->n;
		if (un > PROFD_MAX_STACK)
			un = PROFD_MAX_STACK;
		/* kn and un are bounded above, so the verifier can check the destination. */
		if (un && bpf_probe_read_kernel(&rec->ips[kn & 127], (un & 127) * 8, st->ips))
			un = 0;
		end = st->end;
		if (st->scans) {
			count(PROFD_CNT_UNWIND_SCANNED);
			count_n(PROFD_CNT_UNWIND_SCAN_STEPS, st->scans);
			if (end != PROFD_UNWIND_BOTTOM)
				count(PROFD_CNT_UNWIND_SCAN_SHORT);
		}
		if (st->rejects)
			count_n(PROFD_CNT_UNWIND_SCAN_REJECTS, st->rejects);
		if (end == PROFD_UNWIND_TRUNCATED)
			rec->flags |= PROFD_SAMPLE_USTACK_TRUNC;
	} else {
		un = bpf_get_stack(ctx, &rec->ips[kn & 127], PROFD_MAX_STACK * 8, BPF_F_USER_STACK);
		if (un < 0) {
			count(PROFD_CNT_USTACK_ERR);
			rec->flags |= PROFD_SAMPLE_USTACK_ERR;
			un = 0;
		}
		un /= 8;
		if (un >= PROFD_MAX_STACK) {
			un = PROFD_MAX_STACK;
			rec->flags |= PROFD_SAMPLE_USTACK_TRUNC;
		}
	}
	rec->flags |= (end << PROFD_SAMPLE_UNWIND_SHIFT) & PROFD_SAMPLE_UNWIND_MASK;
	count(PROFD_CNT_UNWIND + (end < PROFD_UNWIND__MAX ? end : 0));
	return un;
}

/*
 * The user stack after the kn kernel addresses, then the Python frames after both (slot: the
 * program's scratch slot). Sets nr_user, nr_py, py_status and flags; returns the record's size.
 */
static __always_inline __u64 fill_user(void *ctx, struct profd_sample_rec *rec, long kn, __u32 slot)
{
	long un = fill_user_stack(ctx, rec, kn, unwind_regs_task(slot));
	__u64 size;

	rec->nr_user = un;
	size = PROFD_SAMPLE_HDR_SIZE + 8 * (kn + un);
	size += py_collect(rec, kn + un, slot, bpf_get_current_task_btf());
	if (size > sizeof(*rec))
		size = sizeof(*rec);
	rec->hdr.size = size;
	return size;
}

SEC("perf_event")
int profd_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct profd_sample_rec *rec;
	__u32 slot = SLOT_SAMPLE;
	__u64 size;
	long kn;

	/* The idle task (pid 0) is not work anyone asked about. */
	if (tid == 0 || !wanted(tgid))
		return 0;
	count(PROFD_CNT_SAMPLES);

	rec = bpf_map_lookup_elem(&scratch, &slot);
	if (!rec)
		return 0;
	fill_ident(rec, PROFD_REC_SAMPLE, tgid, tid);

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

	size = fill_user(ctx, rec, kn, SLOT_SAMPLE);
	/* PF_KTHREAD: a kernel thread has no user stack to miss (an exiting process has none too).
	 */
	if (bpf_get_current_task_btf()->flags & 0x00200000)
		rec->flags |= PROFD_SAMPLE_KERNEL_THREAD;
	if (bpf_ringbuf_output(&events, rec, size, rb_flags(&events)))
		count(PROFD_CNT_RINGBUF_FULL);
	return 0;
}

#include "launch.bpf.h"
#include "offcpu.bpf.h"

/* A lifecycle record for process pid, whose leader is task; ppid 0 reads the parent's. */
static __always_inline void task_record(__u32 type, struct task_struct *task, __u32 pid, __u32 ppid)
{
	struct profd_task_rec *rec;

	rec = bpf_ringbuf_reserve(&events, sizeof(*rec), 0);
	if (!rec) {
		count(PROFD_CNT_TASK_DROPPED);
		return;
	}
	rec->hdr.type = type;
	rec->hdr.size = sizeof(*rec);
	rec->ts_ns = bpf_ktime_get_ns();
	rec->pid = pid;
	rec->uid = current_euid();
	rec->ppid = ppid ? ppid : BPF_CORE_READ(task, group_leader, real_parent, tgid);
	rec->__pad = 0;
	bpf_probe_read_kernel_str(rec->comm, sizeof(rec->comm), task->group_leader->comm);
	bpf_ringbuf_submit(rec, rb_flags(&events));
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(profd_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (wanted(tgid))
		task_record(PROFD_REC_EXEC, bpf_get_current_task_btf(), tgid, 0);
	return 0;
}

/*
 * Processes whose code mappings changed since the daemon last looked (value: unused). Only the
 * change from clean to dirty sends a record; the daemon deletes the entry when it acts on it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROFD_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} maps_dirty SEC(".maps");

/*
 * The pages of executable mappings (mm->exec_vm) each process had when last seen. LRU: a process
 * pushed out counts as changed when next seen, which costs a record, never a missed change.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PROFD_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u64);
} maps_exec_vm SEC(".maps");

/*
 * Code mapped or unmapped: every mmap, munmap, mprotect or mremap changes a process's mappings
 * under its mmap lock, and the kernel counts the pages of its executable mappings in
 * mm->exec_vm (vm_stat_account). When the lock is let go the change is complete: a different
 * count then marks the process dirty, and a record goes out if it was clean. A read of
 * /proc/PID/maps after the record sees the change. Not seen: code replaced by as many pages of
 * code in one call (mmap MAP_FIXED over a mapping, mremap moving one), which dlopen and JIT
 * compilers do not do. The cheaper hooks are not there on every kernel: fentry on the mmap and
 * mprotect paths needs ftrace's direct calls (refused on some), perf_event_mmap() is in
 * kernel/events/, built without ftrace's hooks, and kprobes may be configured out.
 */
SEC("tp_btf/mmap_lock_released")
int BPF_PROG(profd_maps, struct mm_struct *mm, bool write)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct profd_task_rec *rec;
	__u64 exec_vm, *seen;
	__u8 one = 1;
	long err;

	/* Another process's memory (/proc/PID/mem, an exiting or exec'ing image): not ours. */
	if (task->mm != mm || !wanted(tgid))
		return 0;
	exec_vm = BPF_CORE_READ(mm, exec_vm);
	seen = bpf_map_lookup_elem(&maps_exec_vm, &tgid);
	if (seen && *seen == exec_vm)
		return 0;
	/* Dirty already: the daemon reads the mappings after it marks the process clean. */
	if (bpf_map_lookup_elem(&maps_dirty, &tgid))
		goto remember;
	err = bpf_map_update_elem(&maps_dirty, &tgid, &one, BPF_NOEXIST);
	if (err) {
		/* -EEXIST: another thread of the process marked it just now */
		if (err != -17)
			count(PROFD_CNT_TASK_DROPPED);
		return 0;
	}
	rec = bpf_ringbuf_reserve(&events, sizeof(*rec), 0);
	if (!rec) {
		/* Clean again, the count not taken: the process's next unlock tries again. */
		bpf_map_delete_elem(&maps_dirty, &tgid);
		count(PROFD_CNT_TASK_DROPPED);
		return 0;
	}
	rec->hdr.type = PROFD_REC_MAPS;
	rec->hdr.size = sizeof(*rec);
	rec->ts_ns = bpf_ktime_get_ns();
	rec->pid = tgid;
	rec->uid = current_euid();
	rec->ppid = 0;
	rec->__pad = 0;
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
	bpf_ringbuf_submit(rec, rb_flags(&events));
remember:
	if (seen)
		*seen = exec_vm;
	else
		bpf_map_update_elem(&maps_exec_vm, &tgid, &exec_vm, BPF_ANY);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(profd_exit, struct task_struct *p)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u8 *target;

	/* Only the last thread of the group: signal->live reached zero before this tracepoint. */
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;
	/* Asked first: a followed process's exit is still reported as it leaves the filter. */
	if (wanted(tgid))
		task_record(PROFD_REC_EXIT, bpf_get_current_task_btf(), tgid, 0);
	bpf_map_delete_elem(&maps_dirty, &tgid);
	bpf_map_delete_elem(&maps_exec_vm, &tgid);
	/* Followed processes leave the map, also where it filters nothing (system-wide). */
	target = bpf_map_lookup_elem(&target_pids, &tgid);
	if (target && (*target & PROFD_TARGET_TRANSIENT))
		bpf_map_delete_elem(&target_pids, &tgid);
	return 0;
}

/*
 * A new process of a followed one is sampled from its first instruction: it enters the filter
 * here, in the parent's fork, before it can run. New threads (same tgid) need nothing. A
 * daemon that samples every process follows only the commands it records, for the parent
 * links of their process trees (the record names the parent).
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(profd_fork, struct task_struct *parent, struct task_struct *child)
{
	__u8 flags = PROFD_TARGET_SAMPLE | PROFD_TARGET_FOLLOW | PROFD_TARGET_TRANSIENT;
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 *target;

	if (child->pid != ctgid)
		return 0;
	target = bpf_map_lookup_elem(&target_pids, &ptgid);
	if (!target || !(*target & PROFD_TARGET_FOLLOW))
		return 0;
	if (bpf_map_update_elem(&target_pids, &ctgid, &flags, BPF_ANY)) {
		count(PROFD_CNT_FOLLOW_FULL);
		return 0;
	}
	task_record(PROFD_REC_FORK, child, ctgid, ptgid);
	return 0;
}
