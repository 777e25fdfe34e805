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
};

/* Flags of struct profd_sample_rec. */
#define PROFD_SAMPLE_KSTACK_ERR (1u << 0)    /* bpf_get_stack() failed for the kernel stack */
#define PROFD_SAMPLE_USTACK_ERR (1u << 1)    /* bpf_get_stack() failed for the user stack */
#define PROFD_SAMPLE_USTACK_TRUNC (1u << 2)  /* user stack filled every slot: likely truncated */
#define PROFD_SAMPLE_KSTACK_TRUNC (1u << 3)  /* kernel stack filled every slot */
#define PROFD_SAMPLE_KERNEL_THREAD (1u << 4) /* no user address space (kthread) */

struct profd_rec_hdr {
	__u32 type; /* enum profd_record_type */
	__u32 size; /* bytes of the whole record including this header */
};

/*
 * One CPU sample. The record on the ring buffer is cut after the last used slot of ips[]:
 * ips[0 .. nr_kernel) are kernel addresses, leaf first, then ips[nr_kernel .. nr_kernel +
 * nr_user) user addresses, leaf first. size = offsetof(ips) + 8 * (nr_kernel + nr_user).
 */
struct profd_sample_rec {
	struct profd_rec_hdr hdr;
	__u64 ts_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u32 pid;   /* thread group id in the root PID namespace */
	__u32 tid;
	__u32 uid;
	__u32 cpu;
	__u32 flags; /* PROFD_SAMPLE_* */
	__u16 nr_kernel;
	__u16 nr_user;
	char comm[PROFD_COMM_LEN]; /* thread name */
	__u64 ips[2 * PROFD_MAX_STACK];
};

#define PROFD_SAMPLE_HDR_SIZE 56
_Static_assert(sizeof(struct profd_rec_hdr) == 8, "profd_rec_hdr layout");
_Static_assert(__builtin_offsetof(struct profd_sample_rec, ips) == PROFD_SAMPLE_HDR_SIZE,
	       "profd_sample_rec header layout");
_Static_assert(sizeof(struct profd_sample_rec) == PROFD_SAMPLE_HDR_SIZE + 8 * 2 * PROFD_MAX_STACK,
	       "profd_sample_rec layout");

/* Process lifecycle, from tp_btf/sched_process_exec and sched_process_exit. */
struct profd_task_rec {
	struct profd_rec_hdr hdr;
	__u64 ts_ns;
	__u32 pid;
	__u32 uid;
	char comm[PROFD_COMM_LEN]; /* process name after exec, or at exit */
};
_Static_assert(sizeof(struct profd_task_rec) == 40, "profd_task_rec layout");

/* Indices of the per-CPU counters array map "counters". */
enum profd_counter {
	PROFD_CNT_SAMPLES = 0,	    /* perf events that matched the target filter */
	PROFD_CNT_RINGBUF_FULL = 1, /* records dropped because the ring buffer was full */
	PROFD_CNT_KSTACK_ERR = 2,   /* kernel stack reads that failed */
	PROFD_CNT_USTACK_ERR = 3,   /* user stack reads that failed */
	PROFD_CNT_TASK_DROPPED = 4, /* exec/exit records dropped (ring buffer full) */
	PROFD_CNT__MAX = 8,
};

#endif /* PROFD_BPF_ABI_H */
