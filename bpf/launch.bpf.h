/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Launch probes: the stack of a thread that launches GPU work, taken as a CPU sample is (user
 * stack by frame pointers, Python frames, no kernel stack) and sent as PROFD_REC_LAUNCH.
 *
 * - profd_cuda_launch: the USDT probe profd:cuda_launch(correlation id, callback id) that
 *   libprofd_cupti.so fires per traced launch. The daemon attaches it per process, to the
 *   library's file, once the library has said hello; the correlation id joins the stack to the
 *   kernel record CUPTI delivers later.
 * - profd_cuda_uprobe: entry uprobes on libcuda's launch functions, attached to every process
 *   that maps libcuda, for processes that run without the library. No correlation id: the
 *   daemon can count launches per stack, not charge GPU time.
 *
 * Included by sample.bpf.c, after its maps and helpers: one object, shared maps.
 */
#ifndef PROFD_LAUNCH_BPF_H
#define PROFD_LAUNCH_BPF_H

/* Argument specs, one per attached USDT link (one per process with the library). */
#define BPF_USDT_MAX_SPEC_CNT 1024
/* Only used by kernels without BPF cookies (before 5.15); profd needs 5.17 anyway. */
#define BPF_USDT_MAX_IP_CNT 1
#include <bpf/usdt.bpf.h>

/*
 * tgids whose library has the USDT probe attached, filled by the daemon: their launches arrive
 * with correlation ids, so the libcuda uprobes ignore them instead of counting them twice.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} launch_pids SEC(".maps");

static __always_inline void launch_emit(struct pt_regs *ctx, __u32 tgid, __u32 tid, __u32 corr_id,
					__u32 flags)
{
	struct profd_sample_rec *rec;
	__u32 slot = SLOT_LAUNCH;
	__u64 size, ts;

	rec = bpf_map_lookup_elem(&scratch, &slot);
	if (!rec)
		return;
	fill_ident(rec, PROFD_REC_LAUNCH, tgid, tid);
	ts = rec->ts_ns;
	rec->corr_id = corr_id;
	rec->flags = flags;
	size = fill_user(ctx, rec, 0, SLOT_LAUNCH);
	/*
	 * Uprobe programs run preemptible (migration disabled only): another launch on this CPU
	 * may have taken the slot meanwhile. Its record went out whole; this one is mixed, drop it.
	 */
	if (rec->ts_ns != ts || rec->tid != tid)
		return;
	if (bpf_ringbuf_output(&events, rec, size, rb_flags(&events)))
		count(PROFD_CNT_RINGBUF_FULL);
}

SEC("usdt")
int BPF_USDT(profd_cuda_launch, __u32 corr_id, __u32 cbid)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;

	if (!wanted(tgid))
		return 0;
	launch_emit(ctx, tgid, (__u32)id, corr_id, 0);
	return 0;
}

SEC("uprobe")
int profd_cuda_uprobe(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;

	if (!wanted(tgid) || bpf_map_lookup_elem(&launch_pids, &tgid))
		return 0;
	launch_emit(ctx, tgid, (__u32)id, 0, PROFD_SAMPLE_UPROBE);
	return 0;
}

#endif
