// SPDX-License-Identifier: BSD-2-Clause
/*
 * The request handlers' GPU side, called directly as the server would: GpuAttach and GpuBatch
 * per connection, the close notification, StatusReply's gpu fields per caller, TraceRequest's
 * access rules and windows. The sampler is a stub (no BPF here).
 */
#include "unwinder.h"
#include "check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "frame.h"
#include "log.h"
#include "timeutil.h"
#include "memory.h"
#include "wire.h"

#define LIB "/usr/lib/libprofd_cupti.so"

/* --- sampler stubs ------------------------------------------------------------------------ */

static int probes_attached, probes_detached;

/* The unwinder runs a worker thread on BPF maps: status reads its counters only. */
void unwinder__stats(struct unwinder *u, struct unwinder_stats *out)
{
	memset(out, 0, sizeof(*out));
}

void unwinder__memory(struct unwinder *u, struct mem_usage *tables, struct mem_usage *procs)
{
	*tables = *procs = (struct mem_usage){0};
}

int sampler__counters(const struct sampler *s, uint64_t out[PROFD_CNT__MAX])
{
	memset(out, 0, sizeof(uint64_t) * PROFD_CNT__MAX);
	out[PROFD_CNT_LAUNCH_LIMITED] = 7;
	return 0;
}

unsigned int sampler__ncpus(const struct sampler *s)
{
	return 1;
}

bool sampler__filtered(const struct sampler *s)
{
	return false;
}

bool sampler__covers(const struct sampler *s, uint32_t pid)
{
	return false;
}

bool sampler__follows_children(const struct sampler *s)
{
	return false;
}

int sampler__follow(struct sampler *s, uint32_t pid)
{
	return -EINVAL;
}

/* No live stack dumps here (test_stacks_handler has them). */
struct snapshot *snapshot__new(struct sampler *s, char *why, size_t why_len)
{
	snprintf(why, why_len, "stub");
	errno = ENOTSUP;
	return NULL;
}

void snapshot__free(struct snapshot *sn)
{
}

int snapshot__take(struct snapshot *sn, uint32_t pid, size_t max_threads, snapshot_thread_fn fn,
		   void *ctx)
{
	return -ENOTSUP;
}

static int stub_attach(void *ctx, uint32_t pid, const char *path)
{
	probes_attached++;
	return 0;
}

static void stub_detach(void *ctx, uint32_t pid)
{
	probes_detached++;
}

/* --- a /proc of our own: PID/status with the real uid ------------------------------------- */

static char proc_root[64];

static void fake_proc(uint32_t pid, uint32_t uid)
{
	check_fake_proc_file(proc_root, pid, "status",
			     "Name:\ttrain\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%u\n"
			     "Pid:\t%u\nPPid:\t1\nUid:\t%u\t%u\t%u\t%u\nGid:\t0\t0\t0\t0\n",
			     pid, pid, uid, uid, uid, uid);
}

static void fake_proc_rm(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", proc_root);
	CHECK_EQ_I(system(cmd), 0);
}

/* --- calling the handlers ----------------------------------------------------------------- */

/* Record times: 20 s ago on the monotonic clock, inside what the module accepts (TTL + hold). */
static uint64_t t0;

static Profd__Response *call(struct daemon *d, const struct server_peer *peer,
			     const Profd__Request *req, int *ret)
{
	uint8_t *frame = NULL;
	size_t len = 0;
	Profd__Response *r = NULL;

	*ret = handlers__handle(d, peer, req, &frame, &len);
	if (!*ret && frame && len > FRAME_HDR_SIZE)
		r = profd__response__unpack(NULL, len - FRAME_HDR_SIZE, frame + FRAME_HDR_SIZE);
	free(frame);
	return r;
}

static int attach(struct daemon *d, const struct server_peer *peer, bool *enable)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__GpuAttach a = PROFD__GPU_ATTACH__INIT;
	Profd__Response *r;
	int ret;

	a.state = PROFD__GPU_STATE__GPU_STATE_READY;
	a.library_path = LIB;
	req.msg_case = PROFD__REQUEST__MSG_GPU_ATTACH;
	req.gpu_attach = &a;
	r = call(d, peer, &req, &ret);
	*enable = false;
	if (r && r->msg_case == PROFD__RESPONSE__MSG_GPU_CONTROL) {
		*enable = r->gpu_control->enable;
		CHECK_EQ_U(r->gpu_control->flush_interval_ms, 250);
	} else if (!ret) {
		ret = -EPROTO;
	}
	profd__response__free_unpacked(r, NULL);
	return ret;
}

/* A batch with one kernel; returns the reply (caller frees) and the handler's return. */
static Profd__Response *batch(struct daemon *d, const struct server_peer *peer, int *ret)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__GpuBatch b = PROFD__GPU_BATCH__INIT;
	Profd__GpuKernel k = PROFD__GPU_KERNEL__INIT, *kp = &k;
	char *strs[] = {"_Z1kv"};

	k.start_ns = t0 + 1000;
	k.end_ns = t0 + 2000;
	k.correlation_id = 1;
	k.has_name = true;
	k.name = 1;
	b.n_strings = 1;
	b.strings = strs;
	b.n_kernels = 1;
	b.kernels = &kp;
	/* What the library counted since its last batch. */
	b.has_zero_time_records = true;
	b.zero_time_records = 3;
	b.has_forced_flushes = true;
	b.forced_flushes = 1;
	req.msg_case = PROFD__REQUEST__MSG_GPU_BATCH;
	req.gpu_batch = &b;
	return call(d, peer, &req, ret);
}

/* One kernel that ends before it starts: refused as malformed, and counted. */
static Profd__Response *bad_batch(struct daemon *d, const struct server_peer *peer, int *ret)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__GpuBatch b = PROFD__GPU_BATCH__INIT;
	Profd__GpuKernel k = PROFD__GPU_KERNEL__INIT, *kp = &k;

	k.start_ns = t0 + 5000;
	k.end_ns = t0 + 4000;
	k.correlation_id = 99;
	b.n_kernels = 1;
	b.kernels = &kp;
	req.msg_case = PROFD__REQUEST__MSG_GPU_BATCH;
	req.gpu_batch = &b;
	return call(d, peer, &req, ret);
}

static Profd__Response *status(struct daemon *d, const struct server_peer *peer)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__StatusRequest sr = PROFD__STATUS_REQUEST__INIT;
	int ret;

	req.msg_case = PROFD__REQUEST__MSG_STATUS;
	req.status = &sr;
	return call(d, peer, &req, &ret);
}

static Profd__Response *trace(struct daemon *d, const struct server_peer *peer, uint32_t pid,
			      uint64_t since)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__TraceRequest tr = PROFD__TRACE_REQUEST__INIT;
	int ret;

	if (pid) {
		tr.n_pids = 1;
		tr.pids = &pid;
	}
	if (since) {
		tr.has_since_ns = true;
		tr.since_ns = since;
	}
	req.msg_case = PROFD__REQUEST__MSG_TRACE;
	req.trace = &tr;
	return call(d, peer, &req, &ret);
}

static void check_error(Profd__Response *r, Profd__ErrorCode code, const char *text)
{
	CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_ERROR);
	if (r && r->msg_case == PROFD__RESPONSE__MSG_ERROR) {
		CHECK_EQ_I(r->error->code, code);
		if (!strstr(r->error->message, text)) {
			fprintf(stderr, "\"%s\" lacks \"%s\"\n", r->error->message, text);
			CHECK(!"error text");
		}
	}
	profd__response__free_unpacked(r, NULL);
}

/* A batch with one allocation of bytes at addr (no launch: charged to the stand-in stack). */
static void mem_batch(struct daemon *d, const struct server_peer *peer, uint64_t addr,
		      uint64_t bytes)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__GpuBatch b = PROFD__GPU_BATCH__INIT;
	Profd__GpuMemory m = PROFD__GPU_MEMORY__INIT, *mp = &m;
	Profd__Response *r;
	int ret;

	m.ts_ns = t0 + 3000;
	m.address = addr;
	m.bytes = bytes;
	b.n_memory = 1;
	b.memory = &mp;
	req.msg_case = PROFD__REQUEST__MSG_GPU_BATCH;
	req.gpu_batch = &b;
	r = call(d, peer, &req, &ret);
	CHECK_EQ_I(ret, 0);
	profd__response__free_unpacked(r, NULL);
}

/* gpu_memory_live per pid in a dump by peer of pid (0: every process); -1 for an error reply. */
static int64_t live_of(struct daemon *d, const struct server_peer *peer, uint32_t pid, uint32_t of)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__DumpRequest dr = PROFD__DUMP_REQUEST__INIT;
	Profd__Response *r;
	int64_t v = 0;
	int ret, col = -1;

	if (pid) {
		dr.n_pids = 1;
		dr.pids = &pid;
	}
	req.msg_case = PROFD__REQUEST__MSG_DUMP;
	req.dump = &dr;
	r = call(d, peer, &req, &ret);
	if (!r || r->msg_case != PROFD__RESPONSE__MSG_PROFILE) {
		profd__response__free_unpacked(r, NULL);
		return -1;
	}
	for (size_t i = 0; i < r->profile->n_value_types; i++)
		if (!strcmp(r->profile->strings[r->profile->value_types[i]->type],
			    "gpu_memory_live"))
			col = (int)i;
	CHECK(col >= 0);
	for (size_t i = 0; col >= 0 && i < r->profile->n_samples; i++)
		if (r->profile->samples[i]->pid == of)
			v += (int64_t)r->profile->samples[i]->values[col];
	profd__response__free_unpacked(r, NULL);
	return v;
}

/*
 * StatusReply.memory: every owner once, each module's own count (the GPU module's as its
 * stats say, the ingest's processes), and "other" the RSS the owners leave.
 */
static void check_memory_owners(struct daemon *d, const Profd__StatusReply *st)
{
	uint64_t sum = 0, other = UINT64_MAX;
	struct mem_usage in;
	struct gpu_stats gs;
	int gpu = 0, ingest = 0;

	gpu__stats(d->gpu, &gs);
	ingest__memory(d->ingest, &in);
	CHECK_EQ_U(st->n_memory, MEM__COUNT);
	for (size_t i = 0; i < st->n_memory; i++) {
		const Profd__MemoryOwner *m = st->memory[i];

		CHECK(m->has_bytes);
		for (size_t k = 0; k < i; k++)
			CHECK(strcmp(st->memory[k]->name, m->name) != 0);
		if (!strcmp(m->name, "other")) {
			other = m->bytes;
			continue;
		}
		sum += m->bytes;
		if (!strcmp(m->name, "gpu")) {
			gpu++;
			CHECK(gs.bytes > 0);
			CHECK_EQ_U(m->bytes, gs.bytes);
			CHECK(m->has_count);
			CHECK_EQ_U(m->count, gs.processes);
		} else if (!strcmp(m->name, "ingest")) {
			ingest++;
			CHECK_EQ_U(m->bytes, in.bytes);
			CHECK_EQ_U(m->count, in.count);
		}
	}
	CHECK_EQ_I(gpu, 1);
	CHECK_EQ_I(ingest, 1);
	CHECK(st->daemon_rss_bytes > 0);
	CHECK_EQ_U(other, st->daemon_rss_bytes > sum ? st->daemon_rss_bytes - sum : 0);
}

/*
 * The live GPU memory a dump shows follows the dump's rules: root sees every process's, a user
 * their own processes' only, a pid filter only that process.
 */
static void test_memory_dumps(struct daemon *d, const struct server_peer *lib_a,
			      const struct server_peer *lib_b)
{
	struct server_peer root = {.uid = 0, .pid = 1, .conn_id = 20};
	struct server_peer user = {.uid = 1000, .pid = 2, .conn_id = 21};
	struct server_peer other = {.uid = 3000, .pid = 3, .conn_id = 22};
	Profd__Response *r;

	mem_batch(d, lib_a, 0x10000, 4096);
	mem_batch(d, lib_b, 0x20000, 8192);
	CHECK_EQ_I(live_of(d, &root, 0, 500), 4096);
	CHECK_EQ_I(live_of(d, &root, 0, 600), 8192);
	CHECK_EQ_I(live_of(d, &root, 600, 500), 0);
	CHECK_EQ_I(live_of(d, &root, 600, 600), 8192);
	CHECK_EQ_I(live_of(d, &user, 0, 500), 4096);
	CHECK_EQ_I(live_of(d, &user, 0, 600), 0);
	CHECK_EQ_I(live_of(d, &other, 0, 500), -1); /* no samples of its uid at all */

	/* The memory counters are the machine's: root's only. */
	r = status(d, &root);
	CHECK(r && r->status && r->status->has_gpu_memory_records);
	if (r && r->status) {
		CHECK_EQ_U(r->status->gpu_memory_records, 2);
		check_memory_owners(d, r->status);
	}
	profd__response__free_unpacked(r, NULL);
	r = status(d, &user);
	CHECK(r && r->status && !r->status->has_gpu_memory_records);
	CHECK(r && r->status && r->status->n_memory == 0);
	if (r && r->status && r->status->n_gpu == 1) {
		CHECK_EQ_U(r->status->gpu[0]->memory_live, 1);
		CHECK_EQ_U(r->status->gpu[0]->memory_live_bytes, 4096);
	}
	profd__response__free_unpacked(r, NULL);
}

/*
 * A stale connection may not attach again; a process another uid owns is recorded, never
 * enabled, and its batches close the connection.
 */
static void test_refusals(struct daemon *d)
{
	struct server_peer a1 = {.uid = 1000, .pid = 500, .conn_id = 20};
	struct server_peer a2 = {.uid = 1000, .pid = 500, .conn_id = 21};
	struct server_peer thief = {.uid = 1000, .pid = 800, .conn_id = 22};
	struct server_peer gone = {.uid = 1000, .pid = 900, .conn_id = 23};
	struct server_peer root = {.uid = 0, .pid = 1, .conn_id = 24};
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__GpuAttach a = PROFD__GPU_ATTACH__INIT;
	int before = probes_attached, ret;
	Profd__Response *r;
	bool enable;

	CHECK_EQ_I(attach(d, &a1, &enable), 0);
	CHECK(enable);
	CHECK_EQ_I(attach(d, &a2, &enable), 0);
	CHECK(enable);
	CHECK_EQ_I(probes_attached, before + 2);
	/* a1 no longer speaks for pid 500: its attach is refused and changes nothing. */
	a.state = PROFD__GPU_STATE__GPU_STATE_ERROR;
	req.msg_case = PROFD__REQUEST__MSG_GPU_ATTACH;
	req.gpu_attach = &a;
	check_error(call(d, &a1, &req, &ret), PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
		    "a newer connection speaks for this process");
	CHECK_EQ_I(ret, 0);
	r = batch(d, &a2, &ret);
	CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_GPU_CONTROL && r->gpu_control->enable);
	profd__response__free_unpacked(r, NULL);

	/* Pid 800 is root's: a uid 1000 connection for it is recorded, not enabled, not probed. */
	before = probes_attached;
	CHECK_EQ_I(attach(d, &thief, &enable), 0);
	CHECK(!enable);
	CHECK_EQ_I(probes_attached, before);
	r = status(d, &root);
	CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_STATUS);
	if (r && r->msg_case == PROFD__RESPONSE__MSG_STATUS) {
		bool seen = false;

		for (size_t i = 0; i < r->status->n_gpu; i++) {
			if (r->status->gpu[i]->pid != 800)
				continue;
			seen = true;
			CHECK(!r->status->gpu[i]->enabled);
			CHECK_EQ_I(r->status->gpu[i]->state, PROFD__GPU_STATE__GPU_STATE_READY);
			CHECK(strstr(r->status->gpu[i]->detail, "not run as the process's owner"));
		}
		CHECK(seen);
	}
	profd__response__free_unpacked(r, NULL);
	r = batch(d, &thief, &ret);
	CHECK_EQ_I(ret, -EPERM);
	CHECK(r == NULL);
	/* A process whose status cannot be read (gone): the same. */
	CHECK_EQ_I(attach(d, &gone, &enable), 0);
	CHECK(!enable);
	CHECK_EQ_I(probes_attached, before);
	handlers__closed(d, &thief);
	handlers__closed(d, &gone);
	handlers__closed(d, &a1);
	handlers__closed(d, &a2);
}

int main(void)
{
	struct config cfg = {.frequency_hz = 99};
	struct daemon d = {.cfg = &cfg};
	struct server_peer lib_a = {.uid = 1000, .pid = 500, .conn_id = 1};
	struct server_peer lib_b = {.uid = 2000, .pid = 600, .conn_id = 2};
	struct server_peer lib_a2 = {.uid = 1000, .pid = 500, .conn_id = 3};
	struct server_peer root = {.uid = 0, .pid = 1, .conn_id = 10};
	struct server_peer user = {.uid = 1000, .pid = 2, .conn_id = 11};
	struct server_peer other = {.uid = 3000, .pid = 3, .conn_id = 12};
	Profd__Response *r;
	bool enable;
	int ret;

	log_set_level(getenv("TEST_VERBOSE") ? LOG_LVL_DEBUG : LOG_LVL_ERROR);
	snprintf(proc_root, sizeof(proc_root), "/tmp/profd-test-gpu-handlers.XXXXXX");
	if (!mkdtemp(proc_root)) {
		perror("mkdtemp");
		return 1;
	}
	fake_proc(500, 1000);
	fake_proc(600, 2000);
	fake_proc(800, 0); /* a root process whose library connects as uid 1000 */
	d.proc_root = proc_root;
	d.start_ns = mono_ns();
	t0 = d.start_ns - 20 * NSEC_PER_SEC;
	d.store = store__new(&(struct store_opts){0});
	d.sym = symbolizer__new(&(struct symbolizer_opts){0});
	d.timeline = timeline__new(&(struct timeline_opts){0});
	d.ingest = ingest__new(
	    &(struct ingest_opts){.store = d.store, .sym = d.sym, .timeline = d.timeline});
	d.gpu = gpu__new(&(struct gpu_opts){.store = d.store,
					    .timeline = d.timeline,
					    .attach_probe = stub_attach,
					    .detach_probe = stub_detach});
	CHECK(d.store && d.sym && d.ingest && d.gpu && d.timeline);
	store__set_process(d.store, 500, 1000, "train_a");
	store__set_process(d.store, 600, 2000, "train_b");

	/* A batch before an attach on that connection is a bad request. */
	check_error(batch(&d, &lib_a, &ret), PROFD__ERROR_CODE__ERROR_BAD_REQUEST,
		    "GpuBatch before GpuAttach");
	CHECK_EQ_I(ret, 0);

	CHECK_EQ_I(attach(&d, &lib_a, &enable), 0);
	CHECK(enable);
	CHECK_EQ_I(attach(&d, &lib_b, &enable), 0);
	CHECK_EQ_I(probes_attached, 2);
	r = batch(&d, &lib_a, &ret);
	CHECK_EQ_I(ret, 0);
	CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_GPU_CONTROL && r->gpu_control->enable);
	profd__response__free_unpacked(r, NULL);
	r = batch(&d, &lib_b, &ret);
	profd__response__free_unpacked(r, NULL);

	/* A malformed attach closes the connection (the handler fails). */
	{
		Profd__Request req = PROFD__REQUEST__INIT;
		Profd__GpuAttach a = PROFD__GPU_ATTACH__INIT;
		struct server_peer bad = {.uid = 1000, .pid = 700, .conn_id = 4};

		a.state = PROFD__GPU_STATE__GPU_STATE_READY;
		a.library_path = "no/slash";
		req.msg_case = PROFD__REQUEST__MSG_GPU_ATTACH;
		req.gpu_attach = &a;
		r = call(&d, &bad, &req, &ret);
		CHECK_EQ_I(ret, -EINVAL);
		CHECK(r == NULL);
	}

	/* A malformed record is refused without failing the batch, and counted. */
	r = status(&d, &root);
	CHECK(r && r->status->has_gpu_bad_records && r->status->gpu_bad_records == 0);
	profd__response__free_unpacked(r, NULL);
	r = bad_batch(&d, &lib_a, &ret);
	CHECK_EQ_I(ret, 0);
	profd__response__free_unpacked(r, NULL);
	r = status(&d, &root);
	CHECK(r && r->status->has_gpu_bad_records);
	if (r)
		CHECK_EQ_U(r->status->gpu_bad_records, 1);
	profd__response__free_unpacked(r, NULL);
	r = status(&d, &user);
	CHECK(r && !r->status->has_gpu_bad_records); /* the machine's count: root's */
	profd__response__free_unpacked(r, NULL);

	/* Status: root sees both libraries, a user their own, another user none. */
	r = status(&d, &root);
	CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_STATUS);
	if (r) {
		CHECK_EQ_U(r->status->gpu_processes, 2);
		CHECK_EQ_U(r->status->gpu_records, 2);
		CHECK_EQ_U(r->status->gpu_unmatched, 0);
		CHECK_EQ_U(r->status->n_gpu, 2);
		CHECK(r->status->has_gpu_launches_limited);
		CHECK_EQ_U(r->status->gpu_launches_limited, 7);
		CHECK(r->status->has_gpu_zero_time_records);
		CHECK_EQ_U(r->status->gpu_zero_time_records, 6);
		CHECK(r->status->has_gpu_forced_flushes);
		CHECK_EQ_U(r->status->gpu_forced_flushes, 2);
		for (size_t i = 0; i < r->status->n_gpu; i++) {
			CHECK(r->status->gpu[i]->has_zero_time_records);
			CHECK_EQ_U(r->status->gpu[i]->zero_time_records, 3);
			CHECK_EQ_U(r->status->gpu[i]->forced_flushes, 1);
		}
	}
	profd__response__free_unpacked(r, NULL);
	r = status(&d, &user);
	if (r) {
		/* The machine's counts are root's; the user's own process keeps its own. */
		CHECK(!r->status->has_gpu_zero_time_records);
		CHECK(!r->status->has_gpu_forced_flushes);
		CHECK_EQ_U(r->status->n_gpu, 1);
		if (r->status->n_gpu == 1) {
			CHECK_EQ_U(r->status->gpu[0]->pid, 500);
			CHECK(r->status->gpu[0]->enabled);
		}
	}
	profd__response__free_unpacked(r, NULL);
	r = status(&d, &other);
	if (r)
		CHECK_EQ_U(r->status->n_gpu, 0);
	profd__response__free_unpacked(r, NULL);

	/* Traces: as dumps. */
	r = trace(&d, &root, 0, 0);
	CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_TRACE);
	if (r && r->msg_case == PROFD__RESPONSE__MSG_TRACE) {
		CHECK_EQ_U(r->trace->n_kernels, 2);
		CHECK(!r->trace->has_only_uid);
		CHECK_STREQ(r->trace->strings[r->trace->kernels[0]->name], "k()");
	}
	profd__response__free_unpacked(r, NULL);
	r = trace(&d, &user, 0, 0);
	CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_TRACE);
	if (r && r->msg_case == PROFD__RESPONSE__MSG_TRACE) {
		CHECK_EQ_U(r->trace->n_kernels, 1);
		CHECK_EQ_U(r->trace->kernels[0]->pid, 500);
		CHECK_EQ_U(r->trace->only_uid, 1000);
	}
	profd__response__free_unpacked(r, NULL);
	check_error(trace(&d, &user, 600, 0), PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED,
		    "pid 600 runs as uid 2000");
	check_error(trace(&d, &other, 0, 0), PROFD__ERROR_CODE__ERROR_NO_SAMPLES,
		    "no events for processes of your uid");
	/* The kernels are from 20 s ago: not in the last 10 s. */
	check_error(trace(&d, &root, 500, 10 * NSEC_PER_SEC), PROFD__ERROR_CODE__ERROR_NO_SAMPLES,
		    "no events for pid 500 in the last 10s");

	test_memory_dumps(&d, &lib_a, &lib_b);

	/* The process attaches again on a new connection: the old one's close changes nothing. */
	CHECK_EQ_I(attach(&d, &lib_a2, &enable), 0);
	r = batch(&d, &lib_a, &ret);
	CHECK(r && r->msg_case == PROFD__RESPONSE__MSG_GPU_CONTROL && !r->gpu_control->enable);
	profd__response__free_unpacked(r, NULL);
	handlers__closed(&d, &lib_a);
	{
		struct gpu_stats gs;

		gpu__stats(d.gpu, &gs);
		CHECK_EQ_U(gs.processes, 2);
		handlers__closed(&d, &lib_a2);
		handlers__closed(&d, &lib_b);
		handlers__closed(&d, &root); /* not a library: nothing */
		gpu__stats(d.gpu, &gs);
		CHECK_EQ_U(gs.processes, 0);
	}
	CHECK_EQ_I(probes_detached, 3); /* a's first probe on re-attach, then a2 and b */

	test_refusals(&d);

	handlers__fini(&d);
	fake_proc_rm();
	gpu__free(d.gpu);
	timeline__free(d.timeline);
	ingest__free(d.ingest);
	symbolizer__free(d.sym);
	store__free(d.store);
	return CHECK_DONE();
}
