// SPDX-License-Identifier: BSD-2-Clause
/*
 * Bytes of client connections through the daemon's request path: the frame reader, the Request
 * unpack and handlers__handle, as daemon/server.c chains them, over a store, timeline, GPU
 * module and connection table built as daemon/main.c builds them and pre-filled with samples,
 * so dumps and traces have something to walk. No BPF: the sampler's two functions the
 * handlers call are stubs, and /proc is a small tree of our own in a temporary directory.
 *
 * Input, so that one input can be several peers (the GPU paths care who connected before):
 *
 *	byte 0		the daemon's options: bit 0 runs it with --pid targets
 *	then up to MAX_CONNS connections, each
 *	  byte		peer: bits 0-1 uid (root, a member, an outsider, another member),
 *			bits 2-4 pid (processes of those users, a gone one, none), bits 5-7
 *			how the bytes arrive (at once, or in reads of 1 to 64 bytes)
 *	  2 bytes	big-endian length of what this peer sends (cut to what is left)
 *	  bytes		what it sends: 4-byte big-endian frame lengths and Request messages
 *
 * Time: the daemon checks record times against CLOCK_MONOTONIC, which no input can know. Every
 * absolute time of a request (GPU records, dump and trace bounds) is therefore read as an
 * offset from a base ten seconds before the input started, and moved there after the unpack,
 * the one change the harness makes to what the server would hand over. The store's samples
 * sit at the same base.
 *
 * Every input builds its daemon afresh and frees it: nothing carries over to the next.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unwinder.h"
#include "daemon.h"
#include "snapshot.h"
#include "frame.h"
#include "log.h"
#include "timeutil.h"
#include "wire.h"

#define MAX_CONNS 8
#define BASE_BACK_NS (10 * NSEC_PER_SEC)

/* The users: root, two members of the socket group with processes, one with none. */
static const uint32_t peer_uids[4] = {0, 1000, 2000, 3000};
/* Processes: uid 1000's (sampled, and not yet), root's, uid 3000's, gone, and no pid. */
static const int32_t peer_pids[8] = {4242, 4343, 5000, 4444, 6000, 1, 0, -1};

struct fake_proc {
	uint32_t pid, uid;
	const char *comm;
};

static const struct fake_proc procs[] = {
    {4242, 1000, "train"},  {4343, 0, "python3"},
    {5000, 3000, "worker"}, {4444, 1000, "idle"}, /* in /proc, never sampled */
    {1, 0, "init"},
};

static char proc_root[64];
static struct config cfg_all, cfg_pids;
static struct symbolizer *sym;
static struct python *py;

/* --- the sampler, which needs BPF: the two calls the handlers make ------------------------- */

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
	for (int i = 0; i < PROFD_CNT__MAX; i++)
		out[i] = (uint64_t)i * 3;
	return 0;
}

unsigned int sampler__ncpus(const struct sampler *s)
{
	return 2;
}

bool sampler__filtered(const struct sampler *s)
{
	return true;
}

bool sampler__covers(const struct sampler *s, uint32_t pid)
{
	return pid != 4444;
}

bool sampler__follows_children(const struct sampler *s)
{
	return true;
}

int sampler__follow(struct sampler *s, uint32_t pid)
{
	return pid == 5000 ? -ENOSPC : 0;
}

/*
 * Live stack dumps without BPF: two threads of made-up stacks for any pid, so the handler's
 * symbolizing and packing run on what the fuzzer asks for.
 */
static int snapshot_token;

struct snapshot *snapshot__new(struct sampler *s, char *why, size_t why_len)
{
	return (struct snapshot *)&snapshot_token;
}

void snapshot__free(struct snapshot *sn)
{
}

int snapshot__take(struct snapshot *sn, uint32_t pid, size_t max_threads, snapshot_thread_fn fn,
		   void *ctx)
{
	static struct profd_sample_rec rec;
	size_t n = max_threads < 2 ? max_threads : 2;
	int err;

	if (pid == 4444)
		return 0; /* gone */
	for (size_t i = 0; i < n; i++) {
		memset(&rec, 0, PROFD_SAMPLE_HDR_SIZE);
		rec.hdr.type = PROFD_REC_THREAD;
		rec.pid = pid;
		rec.tid = pid + (uint32_t)i;
		rec.nr_kernel = 1;
		rec.nr_user = 2;
		rec.ips[0] = 0xffffffff81000000ull + i;
		rec.ips[1] = 0x401000 + i;
		rec.ips[2] = 0x7f0000001000ull;
		snprintf(rec.comm, sizeof(rec.comm), "t%zu", i);
		rec.hdr.size = PROFD_SAMPLE_HDR_SIZE + 8 * 3;
		err = fn(ctx, &rec, rec.hdr.size);
		if (err < 0)
			return err;
	}
	return max_threads < 2 ? -E2BIG : (int)n;
}

/* The GPU module's hooks into the sampler (main.c's, without one) and the session's coverage. */
static int probe_attach(void *ctx, uint32_t pid, const char *library_path)
{
	return pid == 4242 ? 0 : -ENOENT;
}

static void probe_detach(void *ctx, uint32_t pid)
{
}

static bool covers(void *ctx, uint32_t pid)
{
	const struct daemon *d = ctx;

	if (!d->cfg->npids)
		return true;
	for (size_t i = 0; i < d->cfg->npids; i++)
		if (d->cfg->pids[i] == pid)
			return true;
	return false;
}

/* Every message is formatted (a bad format is a finding too), none is printed. */
static void log_discard(enum log_level level, const char *msg, void *ctx)
{
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0) {
		fprintf(stderr, "fuzz_request: %s: cannot write\n", path);
		abort();
	}
	fclose(f);
}

/* PROC/PID/status and PROC/PID/stat: what the handlers read of a process (its owner). */
static void make_proc(void)
{
	char path[128], text[256];

	snprintf(proc_root, sizeof(proc_root), "%s/profd-fuzz-proc-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(proc_root)) {
		perror("fuzz_request: mkdtemp");
		abort();
	}
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		const struct fake_proc *p = &procs[i];

		snprintf(path, sizeof(path), "%s/%u", proc_root, p->pid);
		mkdir(path, 0755);
		snprintf(path, sizeof(path), "%s/%u/status", proc_root, p->pid);
		snprintf(text, sizeof(text),
			 "Name:\t%s\nState:\tS (sleeping)\nTgid:\t%u\nPid:\t%u\nPPid:\t1\n"
			 "Uid:\t%u\t%u\t%u\t%u\nGid:\t0\t0\t0\t0\nNSpid:\t%u\n",
			 p->comm, p->pid, p->pid, p->uid, p->uid, p->uid, p->uid, p->pid);
		write_file(path, text);
		snprintf(path, sizeof(path), "%s/%u/stat", proc_root, p->pid);
		snprintf(text, sizeof(text), "%u (%s) S 1 %u %u 0 -1\n", p->pid, p->comm, p->pid,
			 p->pid);
		write_file(path, text);
		/* stat() of it is what pid_owned_by() checks. */
		if (chown(path, p->uid, p->uid) && geteuid() == 0)
			abort();
	}
}

static void remove_proc(void)
{
	char path[128];

	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%u/status", proc_root, procs[i].pid);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%u/stat", proc_root, procs[i].pid);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%u", proc_root, procs[i].pid);
		rmdir(path);
	}
	rmdir(proc_root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char *all[] = {"profd", NULL};
	char *pids[] = {"profd", "--pid", "4242", "--pid", "5000", "--pid", "4444", NULL};

	log_set_level(LOG_LVL_DEBUG);
	log_set_sink(log_discard, NULL);
	make_proc();
	atexit(remove_proc);
	/* The daemon's own command line parser gives the defaults main() runs with. */
	if (config_parse(1, all, &cfg_all) != CONFIG_RUN ||
	    config_parse(7, pids, &cfg_pids) != CONFIG_RUN)
		abort();
	/* Only their counters are read by the handlers: one of each for every input. */
	sym = symbolizer__new(&(struct symbolizer_opts){.proc_root = proc_root, .no_kernel = true});
	py = python__new(&(struct python_opts){.proc_root = proc_root});
	if (!sym || !py)
		abort();
	return 0;
}

/* Samples over the last seconds before base: three users' processes, kernel, native, Python. */
static void fill(struct daemon *d, uint64_t base)
{
	static const struct frame_key keys[] = {
	    {.kind = FRAME_KIND_KERNEL, .name = "do_syscall_64", .address = 0xffffffff81000010},
	    {.kind = FRAME_KIND_NATIVE,
	     .name = "_ZN5torch8autograd6Engine7executeEv",
	     .module = "/usr/lib/libtorch.so",
	     .address = 0x1234,
	     .build_id = "0123456789abcdef0123456789abcdef01234567"},
	    {.kind = FRAME_KIND_NATIVE,
	     .name = "main",
	     .module = "/usr/bin/python3.11",
	     .address = 64},
	    {.kind = FRAME_KIND_PYTHON, .name = "step", .file = "train.py", .line = 42},
	    {.kind = FRAME_KIND_PYTHON, .name = "<module>", .file = "train.py", .line = 1},
	    {.kind = FRAME_KIND_UNKNOWN, .name = "[unknown]"},
	};
	uint32_t f[6], stacks[4];
	struct tl_event ev;

	for (size_t i = 0; i < 6; i++)
		f[i] = store__intern_frame(d->store, &keys[i]);
	stacks[0] = store__intern_stack(d->store, (uint32_t[]){f[0], f[1], f[2]}, 3);
	stacks[1] = store__intern_stack(d->store, (uint32_t[]){f[3], f[4], f[2]}, 3);
	stacks[2] = store__intern_stack(d->store, (uint32_t[]){f[5]}, 1);
	stacks[3] = store__intern_stack(d->store, (uint32_t[]){f[1], f[3], f[4]}, 3);
	store__set_process(d->store, 4242, 1000, "train");
	store__set_process(d->store, 4343, 0, "python3");
	store__set_process(d->store, 5000, 3000, "worker");
	store__set_thread(d->store, 4242, 4243, "dataloader");
	for (uint32_t i = 0; i < 48; i++) {
		uint64_t ts = base - (uint64_t)(48 - i) * 100 * NSEC_PER_MSEC;
		uint32_t pid = i % 3 == 0 ? 4242 : i % 3 == 1 ? 4343 : 5000;
		uint32_t tid = pid + (i & 1);
		uint32_t st = stacks[i % 4];

		store__add(d->store, ts, pid, tid, st, STORE_VALUE_CPU_SAMPLES, 1);
		if (i % 5 == 0)
			store__add(d->store, ts, pid, tid, st, STORE_VALUE_GPU_NS, 1000 + i);
		ev = (struct tl_event){.type = TL_SAMPLE, .pid = pid, .tid = tid, .stack = st};
		ev.uid = pid == 4242 ? 1000 : pid == 4343 ? 0 : 3000;
		ev.start = ev.end = ts;
		timeline__push(d->timeline, &ev);
		/* Launches of 4242 with correlation ids 1..8, for batches to join with. */
		if (pid == 4242 && i < 24)
			gpu__launch(d->gpu, ts, pid, tid, stacks[0], i / 3 + 1);
	}
	store__process_exited(d->store, 5000);
}

static int daemon_new(struct daemon *d, const struct config *cfg, uint64_t base)
{
	*d = (struct daemon){.cfg = cfg, .sym = sym, .py = py, .proc_root = proc_root};
	d->start_ns = base - 60 * NSEC_PER_SEC;
	d->store =
	    store__new(&(struct store_opts){.mem_cap = cfg->mem_cap, .bucket_ns = cfg->bucket_ns});
	if (!d->store)
		return -ENOMEM;
	d->timeline = timeline__new(&(struct timeline_opts){.bytes = cfg->gpu_ring_size});
	if (!d->timeline)
		return -ENOMEM;
	d->gpu = gpu__new(&(struct gpu_opts){
	    .store = d->store,
	    .timeline = d->timeline,
	    .attach_probe = probe_attach,
	    .detach_probe = probe_detach,
	    .covers = covers,
	    .covers_ctx = d,
	});
	if (!d->gpu)
		return -ENOMEM;
	d->ingest = ingest__new(&(struct ingest_opts){
	    .store = d->store,
	    .sym = d->sym,
	    .py = d->py,
	    .proc_root = proc_root,
	    .gpu = d->gpu,
	    .timeline = d->timeline,
	});
	if (!d->ingest)
		return -ENOMEM;
	fill(d, base);
	return 0;
}

/* In main()'s order. */
static void daemon_free(struct daemon *d)
{
	gpu__free(d->gpu);
	ingest__free(d->ingest);
	timeline__free(d->timeline);
	handlers__fini(d);
	store__free(d->store);
}

/* --- one connection ----------------------------------------------------------------------- */

struct conn {
	struct daemon *d;
	struct server_peer peer;
	uint64_t base;
};

static void rebase(uint64_t *t, uint64_t base)
{
	*t += base;
}

/* See the top: a request's absolute times are offsets from the base. */
static void rebase_request(Profd__Request *req, uint64_t base)
{
	Profd__GpuBatch *b;

	switch (req->msg_case) {
	case PROFD__REQUEST__MSG_DUMP:
		rebase(&req->dump->start_ns, base);
		rebase(&req->dump->end_ns, base);
		break;
	case PROFD__REQUEST__MSG_TRACE:
		rebase(&req->trace->start_ns, base);
		rebase(&req->trace->end_ns, base);
		break;
	case PROFD__REQUEST__MSG_GPU_BATCH:
		b = req->gpu_batch;
		for (size_t i = 0; i < b->n_kernels; i++) {
			rebase(&b->kernels[i]->start_ns, base);
			rebase(&b->kernels[i]->end_ns, base);
		}
		for (size_t i = 0; i < b->n_copies; i++) {
			rebase(&b->copies[i]->start_ns, base);
			rebase(&b->copies[i]->end_ns, base);
		}
		for (size_t i = 0; i < b->n_api_calls; i++) {
			rebase(&b->api_calls[i]->start_ns, base);
			rebase(&b->api_calls[i]->end_ns, base);
		}
		for (size_t i = 0; i < b->n_nvtx; i++) {
			rebase(&b->nvtx[i]->start_ns, base);
			rebase(&b->nvtx[i]->end_ns, base);
		}
		rebase(&b->complete_until_ns, base);
		break;
	default:
		break;
	}
}

/* A reply the daemon sends must be one frame that a client can decode. */
static void check_reply(const uint8_t *frame, size_t len)
{
	Profd__Response *resp;

	if (len < FRAME_HDR_SIZE || frame_get_header(frame) != len - FRAME_HDR_SIZE) {
		fprintf(stderr, "fuzz_request: reply of %zu bytes with a bad frame header\n", len);
		abort();
	}
	resp = profd__response__unpack(NULL, len - FRAME_HDR_SIZE, frame + FRAME_HDR_SIZE);
	if (!resp || resp->msg_case == PROFD__RESPONSE__MSG__NOT_SET) {
		fprintf(stderr, "fuzz_request: a reply of %zu bytes does not decode\n", len);
		abort();
	}
	profd__response__free_unpacked(resp, NULL);
}

/* server.c's conn_request, less what only a socket has (Hello, uplink and fairness rules). */
static int on_frame(const uint8_t *body, size_t len, void *ctx)
{
	struct conn *c = ctx;
	Profd__Request *req;
	uint8_t *frame = NULL;
	size_t frame_len = 0;
	int err;

	req = profd__request__unpack(NULL, len, body);
	if (!req)
		return 0; /* the server answers a bad request and carries on */
	/* Hello is the server's own (a version check); the handlers never see one. */
	if (req->msg_case == PROFD__REQUEST__MSG_HELLO) {
		profd__request__free_unpacked(req, NULL);
		return 0;
	}
	rebase_request(req, c->base);
	err = handlers__handle(c->d, &c->peer, req, &frame, &frame_len);
	profd__request__free_unpacked(req, NULL);
	if (!err)
		check_reply(frame, frame_len);
	free(frame);
	/* The loop's drain timer runs between requests: held samples go, joins expire. */
	gpu__tick(c->d->gpu, mono_ns());
	return err < 0 ? err : 0; /* a handler's error closes the connection */
}

/*
 * What one peer sends. Returns whether the server would have closed the connection; one still
 * open stays so (in the GPU connection table) until the input ends, so that a later peer's
 * requests meet it there as they would on a socket.
 */
static bool run_conn(struct daemon *d, const struct server_peer *peer, uint8_t how,
		     const uint8_t *data, size_t len, uint64_t base)
{
	struct conn c = {.d = d, .peer = *peer, .base = base};
	size_t chunk = how ? (size_t)1 << (how - 1) : len;
	struct frame_reader *r = frame_reader__new(FRAME_MAX_REQUEST);
	bool closed = false;

	if (!r)
		abort();
	for (size_t off = 0; off < len; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;

		if (frame_reader__feed(r, data + off, n, on_frame, &c) < 0) {
			/* An oversized frame or a handler's error: the server closes it. */
			handlers__closed(d, peer);
			closed = true;
			break;
		}
	}
	frame_reader__free(r);
	return closed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct server_peer peers[MAX_CONNS];
	bool open[MAX_CONNS] = {0};
	struct daemon d;
	uint64_t base;
	size_t off = 1, n = 0;

	if (size < 1)
		return 0;
	base = mono_ns() - BASE_BACK_NS;
	if (daemon_new(&d, data[0] & 1 ? &cfg_pids : &cfg_all, base))
		abort();
	while (n < MAX_CONNS && off + 3 <= size) {
		uint8_t peer = data[off];
		size_t len = (size_t)data[off + 1] << 8 | data[off + 2];

		off += 3;
		if (len > size - off)
			len = size - off;
		peers[n] = (struct server_peer){
		    .uid = peer_uids[peer & 3],
		    .gid = peer_uids[peer & 3],
		    .pid = peer_pids[(peer >> 2) & 7],
		    .conn_id = n + 1,
		};
		open[n] = !run_conn(&d, &peers[n], peer >> 5, data + off, len, base);
		off += len;
		n++;
	}
	/* The clients hang up, in the order they came. */
	for (size_t i = 0; i < n; i++)
		if (open[i])
			handlers__closed(&d, &peers[i]);
	daemon_free(&d);
	return 0;
}
