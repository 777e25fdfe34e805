// SPDX-License-Identifier: BSD-2-Clause
/*
 * Off-CPU records and thread states: the wait reasons read from kernel frames, the state frame
 * names (GIL flags included), and ingest of hand-made PROFD_REC_OFFCPU and PROFD_REC_OFFCPU_AGG
 * records: malformed ones counted and dropped, a valid wait stored as off_cpu nanoseconds
 * under its stack with the state frame at the root, spread over the buckets it spans, short
 * waits under [short waits]; CPU samples get [running] only when thread states are on.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "abi.h"
#include "check.h"
#include "ingest.h"
#include "offcpu.h"
#include "store.h"
#include "symbolize.h"
#include "timeutil.h"

__attribute__((noinline)) int wait_leaf(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

__attribute__((noinline)) int wait_caller(int x)
{
	__asm__ volatile("" ::: "memory");
	return wait_leaf(x) * 2;
}

static void test_reasons(void)
{
	const char *futex[] = {"__schedule",   "schedule", "futex_wait_queue",
			       "__futex_wait", "do_futex", "__x64_sys_futex"};
	const char *sleep[] = {"schedule", "do_nanosleep", "hrtimer_nanosleep"};
	const char *pipe[] = {"schedule", "pipe_read", "vfs_read", "ksys_read"};
	const char *epoll[] = {"schedule", "schedule_hrtimeout_range", "ep_poll", "do_epoll_wait"};
	const char *poll[] = {"schedule", "do_sys_poll"};
	const char *sel[] = {"schedule", "do_select", "core_sys_select"};
	const char *sock[] = {"schedule", "schedule_timeout", "unix_stream_read_generic"};
	const char *tcp[] = {"schedule", "sk_wait_data", "tcp_recvmsg_locked"};
	const char *disk[] = {"schedule", "io_schedule", "folio_wait_bit_common"};
	const char *file[] = {"schedule", NULL, "vfs_read"};
	const char *none[] = {"schedule", "something_else"};
	char buf[64];

	CHECK_STREQ(offcpu_reason(PROFD_TASK_SLEEPING, futex, 6), "futex");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_SLEEPING, sleep, 3), "sleep");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_SLEEPING, pipe, 4), "pipe");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_SLEEPING, epoll, 4), "epoll");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_SLEEPING, poll, 2), "poll");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_SLEEPING, sel, 3), "select");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_SLEEPING, sock, 3), "socket");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_SLEEPING, tcp, 3), "socket");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_DISK_SLEEP, disk, 3), "disk");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_SLEEPING, file, 3), "read");
	/* Preempted whatever the frames say; else the state when no frame says. */
	CHECK_STREQ(offcpu_reason(PROFD_TASK_RUNNING, futex, 6), "preempted");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_DISK_SLEEP, none, 2), "disk");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_SLEEPING, none, 2), "sleeping");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_STOPPED, NULL, 0), "stopped");
	CHECK_STREQ(offcpu_reason(PROFD_TASK_UNKNOWN, none, 2), "unknown");
	/* Only the first n frames count. */
	CHECK_STREQ(offcpu_reason(PROFD_TASK_SLEEPING, futex, 2), "sleeping");

	CHECK_STREQ(offcpu_state_name(PROFD_TASK_SLEEPING, futex, 6, false, buf, sizeof(buf)),
		    "[off-cpu: futex]");
	CHECK_STREQ(offcpu_state_name(PROFD_TASK_SLEEPING, futex, 6, true, buf, sizeof(buf)),
		    "[waiting for GIL]");
	CHECK_STREQ(offcpu_state_name(PROFD_TASK_RUNNING, futex, 6, true, buf, sizeof(buf)),
		    "[off-cpu: preempted]");
	CHECK_STREQ(oncpu_state_name(0, false), "[running]");
	CHECK_STREQ(oncpu_state_name(PROFD_SAMPLE_GIL_HELD, false), "[running, holds GIL]");
	CHECK_STREQ(oncpu_state_name(PROFD_SAMPLE_GIL_FREE, false), "[running without GIL]");
	CHECK_STREQ(oncpu_state_name(PROFD_SAMPLE_NO_GIL, false), "[running, no GIL]");
	CHECK_STREQ(oncpu_state_name(PROFD_SAMPLE_GIL_HELD, true), "[waiting for GIL]");
	CHECK(is_gil_wait_symbol("take_gil"));
	CHECK(is_gil_wait_symbol("take_gil.lto_priv.0"));
	CHECK(!is_gil_wait_symbol("take_gilx") && !is_gil_wait_symbol(NULL));
	CHECK(is_cuda_sync_symbol("cudaStreamSynchronize"));
	CHECK(is_cuda_sync_symbol("cuStreamSynchronize_ptsz"));
	CHECK(is_cuda_sync_symbol("cudaDeviceSynchronize") &&
	      is_cuda_sync_symbol("cuCtxSynchronize"));
	CHECK(!is_cuda_sync_symbol("cudaStreamSynchronized") && !is_cuda_sync_symbol(NULL));
	CHECK(!is_cuda_sync_symbol("cudaStreamWaitEvent") && !is_cuda_sync_symbol("cudaMemcpy"));
}

static struct profd_offcpu_rec orec;

/* A wait of this process's thread tid: wait_leaf called from wait_caller, off_ns long. */
static size_t fill_off(uint32_t tid, uint32_t state, uint64_t start, uint64_t off_ns)
{
	memset(&orec, 0, sizeof(orec));
	orec.sample.hdr.type = PROFD_REC_OFFCPU;
	orec.sample.hdr.size = PROFD_SAMPLE_HDR_SIZE + 16;
	orec.sample.ts_ns = start;
	orec.sample.pid = (uint32_t)getpid();
	orec.sample.tid = tid;
	orec.sample.uid = getuid();
	orec.sample.nr_user = 2;
	memcpy(orec.sample.comm, "waiter", 7);
	orec.sample.ips[0] = (uint64_t)(uintptr_t)&wait_leaf + 1;
	orec.sample.ips[1] = (uint64_t)(uintptr_t)&wait_caller + 5;
	orec.hdr.type = PROFD_REC_OFFCPU;
	orec.hdr.size = PROFD_OFFCPU_HDR_SIZE + orec.sample.hdr.size;
	orec.off_ns = off_ns;
	orec.state = state;
	return orec.hdr.size;
}

struct seen {
	uint32_t stack;
	uint64_t off, cpu;
	int keys;
};

static int seen_cb(uint32_t pid, uint32_t tid, uint32_t stack,
		   const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct seen *s = ctx;

	(void)pid;
	(void)tid;
	s->stack = stack;
	s->off += values[STORE_VALUE_OFFCPU_NS];
	s->cpu += values[STORE_VALUE_CPU_SAMPLES];
	s->keys++;
	return 0;
}

/* What the store holds for thread tid in [start, end): the one stack's names, leaf first. */
static struct seen query(struct store *s, uint32_t tid, uint64_t start, uint64_t end, char *names,
			 size_t len)
{
	uint32_t pid = (uint32_t)getpid();
	struct store_query q = {
	    .start_ns = start, .end_ns = end, .pids = &pid, .npids = 1, .tid = tid};
	struct seen sn = {0};
	const uint32_t *frames;
	size_t n;

	names[0] = '\0';
	store__query(s, &q, seen_cb, &sn);
	if (sn.keys < 1 || !store__stack(s, sn.stack, &frames, &n))
		return sn;
	for (size_t i = 0; i < n; i++) {
		const struct store_frame *f = store__frame(s, frames[i]);
		size_t l = strlen(names);

		snprintf(names + l, len - l, "%s%s", i ? ";" : "", f ? f->name : "?");
	}
	return sn;
}

static void test_ingest(bool thread_states)
{
	struct store *store = store__new(&(struct store_opts){0});
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){.no_kernel = true});
	uint32_t me = (uint32_t)getpid();
	uint64_t now = mono_ns(), bw;
	struct profd_offcpu_agg_rec agg;
	struct profd_sample_rec srec;
	struct ingest_stats st;
	struct ingest *in;
	struct seen sn;
	char names[512];
	size_t size;

	CHECK(store && sym);
	in = ingest__new(
	    &(struct ingest_opts){.store = store, .sym = sym, .thread_states = thread_states});
	CHECK(in != NULL);
	if (!in || !store || !sym)
		goto out;
	bw = store__bucket_ns(store);

	/* Malformed: each counted, none stored. */
	size = fill_off(me + 1, PROFD_TASK_SLEEPING, now - 2 * bw, bw);
	CHECK_EQ_I(ingest__record(in, &orec, PROFD_OFFCPU_HDR_SIZE + 8), 0); /* short */
	orec.sample.hdr.size += 8;					     /* sizes disagree */
	CHECK_EQ_I(ingest__record(in, &orec, size), 0);
	size = fill_off(me + 1, PROFD_TASK_SLEEPING, now - 2 * bw, 0); /* no time */
	CHECK_EQ_I(ingest__record(in, &orec, size), 0);
	size = fill_off(me + 1, 99, now - 2 * bw, bw); /* no such state */
	CHECK_EQ_I(ingest__record(in, &orec, size), 0);
	size = fill_off(me + 1, PROFD_TASK_SLEEPING, now, 3600 * NSEC_PER_SEC); /* ends ahead */
	CHECK_EQ_I(ingest__record(in, &orec, size), 0);
	size = fill_off(me + 1, PROFD_TASK_SLEEPING, now - 2 * bw, bw);
	orec.sample.nr_user = 3; /* frames beyond the record */
	CHECK_EQ_I(ingest__record(in, &orec, size), 0);
	size = fill_off(me + 1, PROFD_TASK_SLEEPING, now - 2 * bw, bw);
	orec.sample.hdr.type = PROFD_REC_SAMPLE; /* the inner record is not a wait */
	CHECK_EQ_I(ingest__record(in, &orec, size), 0);
	memset(&agg, 0, sizeof(agg));
	agg.hdr.type = PROFD_REC_OFFCPU_AGG;
	agg.hdr.size = sizeof(agg);
	agg.ts_ns = now;
	agg.pid = me;
	agg.tid = me + 2;
	agg.off_ns = 5000;
	CHECK_EQ_I(ingest__record(in, &agg, sizeof(agg)), 0); /* count 0 */
	ingest__stats(in, &st);
	CHECK_EQ_U(st.malformed, 8);
	CHECK_EQ_U(st.offcpu_waits, 0);
	sn = query(store, 0, 0, UINT64_MAX, names, sizeof(names));
	CHECK_EQ_I(sn.keys, 0);

	/* A wait of 1.5 buckets from the middle of one: its time in the buckets it spans. */
	{
		uint64_t start = (now / bw - 3) * bw + bw / 2, end = start + bw + bw / 2;

		size = fill_off(me + 1, PROFD_TASK_SLEEPING, start, end - start);
		CHECK_EQ_I(ingest__record(in, &orec, size), 0);
		sn = query(store, me + 1, 0, UINT64_MAX, names, sizeof(names));
		CHECK_STREQ(names, "wait_leaf;wait_caller;[off-cpu: sleeping]");
		CHECK_EQ_U(sn.off, end - start);
		CHECK_EQ_U(sn.cpu, 0);
		sn = query(store, me + 1, (start / bw) * bw, (start / bw + 1) * bw, names,
			   sizeof(names));
		CHECK_EQ_U(sn.off, bw / 2);
		sn = query(store, me + 1, (start / bw + 1) * bw, (start / bw + 2) * bw, names,
			   sizeof(names));
		CHECK_EQ_U(sn.off, bw);
	}
	/* Preempted: the state says it whatever the frames. */
	size = fill_off(me + 3, PROFD_TASK_RUNNING, now - bw, 1234);
	CHECK_EQ_I(ingest__record(in, &orec, size), 0);
	sn = query(store, me + 3, 0, UINT64_MAX, names, sizeof(names));
	CHECK_STREQ(names, "wait_leaf;wait_caller;[off-cpu: preempted]");
	CHECK_EQ_U(sn.off, 1234);

	/* Short waits, summed by the kernel. */
	agg.count = 40;
	CHECK_EQ_I(ingest__record(in, &agg, sizeof(agg)), 0);
	sn = query(store, me + 2, 0, UINT64_MAX, names, sizeof(names));
	CHECK_STREQ(names, "[short waits];[off-cpu: short waits]");
	CHECK_EQ_U(sn.off, 5000);

	/* A CPU sample: [running] at the root with thread states on, refined by GIL flags. */
	memset(&srec, 0, sizeof(srec));
	srec.hdr.type = PROFD_REC_SAMPLE;
	srec.hdr.size = PROFD_SAMPLE_HDR_SIZE + 8;
	srec.ts_ns = now;
	srec.pid = me;
	srec.tid = me + 4;
	srec.uid = getuid();
	srec.nr_user = 1;
	srec.ips[0] = (uint64_t)(uintptr_t)&wait_leaf + 1;
	CHECK_EQ_I(ingest__record(in, &srec, srec.hdr.size), 0);
	sn = query(store, me + 4, 0, UINT64_MAX, names, sizeof(names));
	CHECK_STREQ(names, thread_states ? "wait_leaf;[running]" : "wait_leaf");
	CHECK_EQ_U(sn.cpu, 1);
	srec.tid = me + 5;
	srec.flags = PROFD_SAMPLE_GIL_HELD;
	CHECK_EQ_I(ingest__record(in, &srec, srec.hdr.size), 0);
	sn = query(store, me + 5, 0, UINT64_MAX, names, sizeof(names));
	CHECK_STREQ(names, "wait_leaf;[running, holds GIL]");

	ingest__stats(in, &st);
	CHECK_EQ_U(st.malformed, 8);
	CHECK_EQ_U(st.offcpu_waits, 2);
	CHECK_EQ_U(st.offcpu_short_records, 1);
	CHECK_EQ_U(st.offcpu_short_waits, 40);
out:
	ingest__free(in);
	symbolizer__free(sym);
	store__free(store);
}

int main(void)
{
	test_reasons();
	test_ingest(true);
	test_ingest(false);
	return CHECK_DONE();
}
