// SPDX-License-Identifier: BSD-2-Clause
/*
 * The whole libprofd_cupti.so as CUDA loads it (dlopen, InitializeInjection) with a fake
 * libcupti and a fake daemon: attach READY, enable on the daemon's word, a launch and a
 * synthetic kernel record arriving in a GpuBatch, disable on the daemon's word, disable when
 * the daemon goes away, and a taken subscriber slot reported once, not retried.
 *
 * The fake libcupti is single-threaded: the test drives it only while the library's uplink
 * thread waits for the fake daemon's reply, so the two never call into it at once.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "fake_cupti.h"
#include "fake_profd.h"

#define WAIT_MS 5000

static struct fake_profd fk = {.lfd = -1, .fd = -1};

/* Answer the request the library waits on, take the next one (any kind). */
static Profd__Request *answer(Profd__Request *prev, bool enable)
{
	if (prev)
		profd__request__free_unpacked(prev, NULL);
	CHECK_EQ_I(fake_send_control(&fk, enable, 50), 0);
	return fake_recv(&fk, WAIT_MS);
}

static bool is_batch(const Profd__Request *r)
{
	return r && r->msg_case == PROFD__REQUEST__MSG_GPU_BATCH;
}

/* A buffer with a kernel and the start of an NVTX range that stays open. */
static void put_records(uint32_t corr, const char *name)
{
	CUpti_ActivityKernel10 k;
	CUpti_ActivityMarker2 m;
	uint8_t *buf = NULL;
	size_t size = 0;

	fake_cupti_request_buffer(&buf, &size);
	CHECK(buf != NULL);
	CHECK(size >= sizeof(k) + sizeof(m));
	if (!buf || size < sizeof(k) + sizeof(m))
		return;
	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	/* CLOCK_MONOTONIC values (the callback clock): seconds after boot. */
	k.start = 7000000000ull;
	k.end = 7000004000ull;
	k.deviceId = 1;
	k.contextId = 1;
	k.streamId = 7;
	k.gridX = 4;
	k.gridY = 2;
	k.gridZ = 3;
	k.blockX = 128;
	k.blockY = 2;
	k.blockZ = 1;
	k.correlationId = corr;
	k.name = name;
	memcpy(buf, &k, sizeof(k));
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MARKER;
	m.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
	m.timestamp = 7000001000ull;
	m.id = 1;
	m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	m.objectId.pt.processId = 1234;
	m.objectId.pt.threadId = 77;
	m.name = "outer";
	memcpy(buf + sizeof(k), &m, sizeof(m));
	fake_cupti_complete_buffer(buf, size, sizeof(k) + sizeof(m));
}

static int (*load_library(void))(void)
{
	void *h = dlopen(CUPTI_LIB, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return NULL;
	}
	return (int (*)(void))dlsym(h, "InitializeInjection");
}

/*
 * The application side of test_exit_flush, in a child: collect with a long flush interval,
 * record a kernel when told, and exit: the kernel must reach the daemon on the way out.
 */
static void exit_flush_child(int go_fd)
{
	int (*init)(void) = load_library();
	char c;

	if (!init || init() != 1)
		_exit(3);
	if (read(go_fd, &c, 1) != 1)
		_exit(4);
	/* The uplink sits out its 5 s interval now: the fake is ours alone. */
	put_records(43, "_Z4exitv");
	exit(0);
}

/* Process exit flushes what CUPTI holds and sends it, without waiting for the interval. */
static void test_exit_flush(void)
{
	struct fake_profd d = {.lfd = -1, .fd = -1};
	Profd__Request *req = NULL;
	int go[2], status = -1;
	uint64_t t0;
	bool seen = false;
	pid_t pid;

	CHECK_EQ_I(fake_listen(&d), 0);
	setenv("PROFD_SOCKET", d.path, 1);
	CHECK_EQ_I(pipe(go), 0);
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		exit_flush_child(go[0]);
	}
	close(go[0]);
	req = fake_handshake(&d, WAIT_MS);
	CHECK(req != NULL);
	if (req) {
		profd__request__free_unpacked(req, NULL);
		/* Enable: the clock comes back in a second GpuAttach. */
		CHECK_EQ_I(fake_send_control(&d, true, 5000), 0);
		req = fake_recv(&d, WAIT_MS);
		CHECK(req && req->msg_case == PROFD__REQUEST__MSG_GPU_ATTACH);
		CHECK_EQ_I(fake_send_control(&d, true, 5000), 0);
	}
	if (req)
		profd__request__free_unpacked(req, NULL);
	t0 = fake_now_ms();
	CHECK_EQ_I(write(go[1], "g", 1), 1);
	close(go[1]);
	req = fake_recv_batch(&d, WAIT_MS);
	CHECK(req != NULL);
	if (req) {
		seen = req->gpu_batch->n_kernels == 1 &&
		       req->gpu_batch->kernels[0]->correlation_id == 43;
		/* A forced flush vouches for everything before it. */
		CHECK(req->gpu_batch->has_complete_until_ns);
		profd__request__free_unpacked(req, NULL);
		CHECK_EQ_I(fake_send_control(&d, true, 5000), 0);
	}
	CHECK(seen);
	CHECK_EQ_I(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Well before the 5 s interval: exit asked for the flush. */
	CHECK(fake_now_ms() - t0 < 2500);
	fake_cleanup(&d);
}

int main(void)
{
	const char *kname = "_Z3fooPf";
	int (*init)(void);
	Profd__Request *req;
	size_t subs;
	void *h;

	setenv("PROFD_CUPTI_PATH", CUPTI_FAKE, 1);
	/* First, in a child, while this process has loaded nothing yet. */
	test_exit_flush();
	CHECK_EQ_I(fake_listen(&fk), 0);
	setenv("PROFD_SOCKET", fk.path, 1);

	h = dlopen(CUPTI_LIB, RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return CHECK_DONE();
	}
	init = (int (*)(void))dlsym(h, "InitializeInjection");
	CHECK(init != NULL);
	/* Nothing but the entry points leaves the library. */
	CHECK(dlsym(h, "core__init") == NULL);
	CHECK(dlsym(h, "protobuf_c_message_pack") == NULL);
	if (!init)
		return CHECK_DONE();
	CHECK_EQ_I(init(), 1);
	/*
	 * Only now: the fake loads the real libcupti for its iterator, and the library prefers a
	 * libcupti already in the process over $PROFD_CUPTI_PATH.
	 */
	if (!fake_cupti_real_iterator()) {
		fprintf(stderr, "skip: no libcupti to walk activity buffers\n");
		return 77;
	}

	/* Attach: CUPTI found, not enabled yet, so no clock. */
	req = fake_handshake(&fk, WAIT_MS);
	CHECK(req != NULL);
	if (!req)
		goto out;
	CHECK_EQ_I(req->gpu_attach->state, PROFD__GPU_STATE__GPU_STATE_READY);
	CHECK_EQ_U(req->gpu_attach->cupti_version, CUPTI_API_VERSION);
	CHECK(req->gpu_attach->cupti_path && strstr(req->gpu_attach->cupti_path, "fake_cupti"));
	CHECK(req->gpu_attach->library_path &&
	      strstr(req->gpu_attach->library_path, "libprofd_cupti.so"));
	CHECK(!req->gpu_attach->has_clock);
	CHECK(!fake_cupti_subscribed());

	/* Enable: the library subscribes, then tells the daemon the clock it got. */
	req = answer(req, true);
	CHECK(req && req->msg_case == PROFD__REQUEST__MSG_GPU_ATTACH);
	if (!req || req->msg_case != PROFD__REQUEST__MSG_GPU_ATTACH)
		goto out;
	CHECK_EQ_I(req->gpu_attach->state, PROFD__GPU_STATE__GPU_STATE_READY);
	CHECK_EQ_I(req->gpu_attach->clock, PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK);
	CHECK(fake_cupti_subscribed());
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	req = answer(req, true);
	CHECK(is_batch(req));

	/* A launch and its kernel record, while the uplink waits for our reply. */
	fake_cupti_invoke_callback(CUPTI_CB_DOMAIN_RUNTIME_API,
				   CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_ENTER,
				   42, kname);
	fake_cupti_invoke_callback(CUPTI_CB_DOMAIN_RUNTIME_API,
				   CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_EXIT,
				   42, kname);
	put_records(42, kname);
	req = answer(req, true);
	CHECK(is_batch(req));
	if (!is_batch(req))
		goto out;
	CHECK_EQ_U(req->gpu_batch->n_kernels, 1);
	if (req->gpu_batch->n_kernels == 1) {
		const Profd__GpuKernel *k = req->gpu_batch->kernels[0];

		CHECK_EQ_U(k->correlation_id, 42);
		CHECK_EQ_U(k->start_ns, 7000000000ull);
		CHECK_EQ_U(k->end_ns, 7000004000ull);
		CHECK_EQ_U(k->device, 1);
		CHECK_EQ_U(k->stream, 7);
		CHECK_EQ_U(k->grid, 24);
		CHECK_EQ_U(k->block, 256);
		CHECK(!k->has_graph_id);
		CHECK_EQ_U(k->weight, 1);
		CHECK_EQ_U(k->name, 1);
		CHECK(req->gpu_batch->n_strings >= 1);
		if (req->gpu_batch->n_strings >= 1)
			CHECK_STREQ(req->gpu_batch->strings[0], kname);
	}

	/*
	 * The open range goes out with the next forced flush (one a second at most): marked open,
	 * ending where the batch vouches for the records.
	 */
	for (int i = 0; i < 60 && is_batch(req) && !req->gpu_batch->has_complete_until_ns; i++)
		req = answer(req, true);
	CHECK(is_batch(req) && req->gpu_batch->has_complete_until_ns);
	if (!is_batch(req))
		goto out;
	CHECK_EQ_U(req->gpu_batch->n_nvtx, 1);
	if (req->gpu_batch->n_nvtx == 1) {
		const Profd__GpuNvtxRange *n = req->gpu_batch->nvtx[0];
		const Profd__GpuBatch *b = req->gpu_batch;

		CHECK(n->open);
		CHECK_EQ_U(n->start_ns, 7000001000ull);
		CHECK_EQ_U(n->end_ns, b->complete_until_ns);
		CHECK_EQ_U(n->tid, 77);
		CHECK_EQ_U(n->depth, 0);
		CHECK(n->name == 2 && b->n_strings >= 1 &&
		      strcmp(b->strings[b->n_strings - 1], "outer") == 0);
	}

	/* enable=false: the library lets go of CUPTI before its next batch. */
	req = answer(req, false);
	CHECK(is_batch(req));
	CHECK(!fake_cupti_subscribed());
	CHECK(!fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	/* And back on when asked again. */
	req = answer(req, true);
	CHECK(is_batch(req));
	CHECK(fake_cupti_subscribed());

	/* The daemon goes away: collection stops; it comes back, the library reconnects idle. */
	if (req)
		profd__request__free_unpacked(req, NULL);
	fake_close_conn(&fk);
	req = fake_handshake(&fk, WAIT_MS);
	CHECK(req != NULL);
	if (!req)
		goto out;
	CHECK(!fake_cupti_subscribed());
	CHECK_EQ_I(req->gpu_attach->state, PROFD__GPU_STATE__GPU_STATE_READY);

	/* Another tool holds the slot: reported in a new GpuAttach, tried once per request. */
	fake_cupti_set_old_subscriber("nsys");
	fake_cupti_set_result("cuptiSubscribe_v2", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
	fake_cupti_set_result("cuptiSubscribe", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
	subs = fake_cupti_call_count("cuptiSubscribe_v2") + fake_cupti_call_count("cuptiSubscribe");
	req = answer(req, true);
	CHECK(req && req->msg_case == PROFD__REQUEST__MSG_GPU_ATTACH);
	if (!req || req->msg_case != PROFD__REQUEST__MSG_GPU_ATTACH)
		goto out;
	CHECK_EQ_I(req->gpu_attach->state, PROFD__GPU_STATE__GPU_STATE_SUBSCRIBER_TAKEN);
	CHECK(req->gpu_attach->detail && req->gpu_attach->detail[0]);
	for (int i = 0; i < 4; i++) {
		req = answer(req, true);
		CHECK(is_batch(req));
	}
	CHECK_EQ_U(fake_cupti_call_count("cuptiSubscribe_v2") +
		       fake_cupti_call_count("cuptiSubscribe"),
		   subs + 1);
	CHECK(!fake_cupti_subscribed());
out:
	if (req)
		profd__request__free_unpacked(req, NULL);
	fake_cleanup(&fk);
	return CHECK_DONE();
}
