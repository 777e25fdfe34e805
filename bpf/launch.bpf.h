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
 * Both are rate limited per process (launch_take_token): a process that launches a hundred
 * thousand kernels a second must not make the daemon walk a hundred thousand stacks.
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

/*
 * Launch records per process: a token bucket refilled one token every launch_interval_ns, holding
 * up to launch_burst_ns / launch_interval_ns tokens. Set by the daemon before load; an interval
 * of 0 lifts the limit. USDT and uprobe records draw on the same bucket.
 */
const volatile __u64 launch_interval_ns = 0;
const volatile __u64 launch_burst_ns = 0;

/*
 * One word per process: when its bucket is full again (full_at). Taking a token moves full_at
 * one interval later, which is allowed while it stays within the burst of now; the bucket holds
 * (burst_ns - (full_at - now)) / interval tokens. That is the {tokens, last refill} pair folded
 * into one word, so one compare-and-swap updates it whole: threads of a process launch on many
 * CPUs at once, and tracing programs cannot take BPF spin locks. LRU: an evicted process starts
 * again with a full bucket.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} launch_buckets SEC(".maps");

/* Take a token for a launch record of tgid; false (and counted) when the bucket is empty. */
static __always_inline bool launch_take_token(__u32 tgid)
{
	__u64 now, full_at, next, *b;

	if (!launch_interval_ns)
		return true;
	now = bpf_ktime_get_ns();
	b = bpf_map_lookup_elem(&launch_buckets, &tgid);
	if (!b) {
		/* A process new to the map starts full, less this record's token. */
		next = now + launch_interval_ns;
		if (!bpf_map_update_elem(&launch_buckets, &tgid, &next, BPF_NOEXIST))
			return true;
		/* Another CPU created it first: take the token from that. */
		b = bpf_map_lookup_elem(&launch_buckets, &tgid);
		if (!b)
			return true;
	}
	for (int i = 0; i < 4; i++) {
		full_at = *(volatile __u64 *)b;
		next = (full_at > now ? full_at : now) + launch_interval_ns;
		if (next - now > launch_burst_ns)
			break;
		if (__sync_val_compare_and_swap(b, full_at, next) == full_at)
			return true;
	}
	/* Empty, or four other launches of the process took tokens meanwhile: over the limit. */
	count(PROFD_CNT_LAUNCH_LIMITED);
	return false;
}

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

	if (!wanted(tgid) || !launch_take_token(tgid))
		return 0;
	launch_emit(ctx, tgid, (__u32)id, corr_id, 0);
	return 0;
}

SEC("uprobe")
int profd_cuda_uprobe(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;

	if (!wanted(tgid) || bpf_map_lookup_elem(&launch_pids, &tgid) || !launch_take_token(tgid))
		return 0;
	launch_emit(ctx, tgid, (__u32)id, 0, PROFD_SAMPLE_UPROBE);
	return 0;
}

#endif
