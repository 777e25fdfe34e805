// SPDX-License-Identifier: BSD-2-Clause
/*
 * The whole libprofd_cupti.so as CUDA loads it (dlopen, InitializeInjection) with a fake
 * libcupti and a fake daemon: attach READY, enable on the daemon's word, the watermark held
 * at a launch whose record is missing, a synthetic kernel record arriving in a GpuBatch, no
 * forced flush while collecting, a daemon flipping enable held to one enable per 5 s,
 * collection kept through a daemon restart and stopped after the grace when it stays away,
 * a taken subscriber slot reported once, not retried, another client (Kineto) taking the
 * activity API reported and left alone, and process exit during a slow enable.
 *
 * The fake libcupti is single-threaded: the test drives it only while the library's uplink
 * thread waits for the fake daemon's reply, so the two never call into it at once.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fake_cupti.h"
#include "fake_profd.h"

#define WAIT_MS 5000

static struct fake_profd fk = {.lfd = -1, .fd = -1};

/* Answer the request the library waits on, take the next one (any kind). */
static Profd__Request *answer_on(struct fake_profd *d, Profd__Request *prev, bool enable)
{
	if (prev)
		profd__request__free_unpacked(prev, NULL);
	CHECK_EQ_I(fake_send_control(d, enable, 50), 0);
	return fake_recv(d, WAIT_MS);
}

static Profd__Request *answer(Profd__Request *prev, bool enable)
{
	return answer_on(&fk, prev, enable);
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
	if (CHECK(req != NULL)) {
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
	if (CHECK(req != NULL)) {
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

/*
 * The application side of test_exit_during_enable: a slow enable (cuptiSubscribe_v2 takes 1 s)
 * is in progress when the process exits. The library's exit handler must wait for it (within
 * 2 s); this handler, registered first, runs after the library's and reports whether the
 * enable had finished by then.
 */
static int report_fd = -1;

static void report_enable_done(void)
{
	char c = fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ? '1' : '0';

	(void)!write(report_fd, &c, 1);
}

static void exit_enable_child(int fd)
{
	int (*init)(void);

	report_fd = fd;
	atexit(report_enable_done);
	fake_cupti_set_delay("cuptiSubscribe_v2", 1000);
	init = load_library();
	if (!init || init() != 1)
		_exit(3);
	for (int i = 0; i < 5000 && fake_cupti_call_count("cuptiSubscribe_v2") == 0; i++)
		usleep(1000);
	exit(fake_cupti_call_count("cuptiSubscribe_v2") ? 0 : 4);
}

static void test_exit_during_enable(void)
{
	struct fake_profd d = {.lfd = -1, .fd = -1};
	Profd__Request *req;
	int rep[2], status = -1;
	char c = 0;
	uint64_t t0;
	pid_t pid;

	CHECK_EQ_I(fake_listen(&d), 0);
	setenv("PROFD_SOCKET", d.path, 1);
	CHECK_EQ_I(pipe(rep), 0);
	pid = fork();
	if (pid == 0) {
		close(rep[0]);
		exit_enable_child(rep[1]);
	}
	close(rep[1]);
	req = fake_handshake(&d, WAIT_MS);
	if (CHECK(req != NULL))
		profd__request__free_unpacked(req, NULL);
	t0 = fake_now_ms();
	CHECK_EQ_I(fake_send_control(&d, true, 5000), 0);
	CHECK_EQ_I(read(rep[0], &c, 1), 1);
	CHECK_EQ_I(c, '1');
	CHECK_EQ_I(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Bounded: the enable took 1 s, exit waits at most 2 s for it. */
	CHECK(fake_now_ms() - t0 < 2500);
	close(rep[0]);
	fake_cleanup(&d);
}

/*
 * The application side of test_subscriber_taken: another tool holds the slot; after the
 * parent's go, report how often the library tried to subscribe.
 */
static void taken_child(int go, int rep)
{
	int (*init)(void);
	char c;
	uint32_t n;

	fake_cupti_set_old_subscriber("nsys");
	fake_cupti_set_result("cuptiSubscribe_v2", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
	fake_cupti_set_result("cuptiSubscribe", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
	init = load_library();
	if (!init || init() != 1)
		_exit(3);
	if (read(go, &c, 1) != 1)
		_exit(4);
	n = (uint32_t)(fake_cupti_call_count("cuptiSubscribe_v2") +
		       fake_cupti_call_count("cuptiSubscribe") +
		       (fake_cupti_subscribed() ? 100 : 0));
	(void)!write(rep, &n, sizeof(n));
	_exit(0);
}

/* Another tool holds the slot: reported in a new GpuAttach, tried once per request. */
static void test_subscriber_taken(void)
{
	struct fake_profd d = {.lfd = -1, .fd = -1};
	Profd__Request *req;
	int go[2], rep[2], status = -1;
	uint32_t n = 0;
	pid_t pid;

	CHECK_EQ_I(fake_listen(&d), 0);
	setenv("PROFD_SOCKET", d.path, 1);
	CHECK_EQ_I(pipe(go), 0);
	CHECK_EQ_I(pipe(rep), 0);
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		close(rep[0]);
		taken_child(go[0], rep[1]);
	}
	close(go[0]);
	close(rep[1]);
	req = fake_handshake(&d, WAIT_MS);
	if (CHECK(req != NULL)) {
		profd__request__free_unpacked(req, NULL);
		CHECK_EQ_I(fake_send_control(&d, true, 50), 0);
		req = fake_recv(&d, WAIT_MS);
	}
	if (CHECK(req && req->msg_case == PROFD__REQUEST__MSG_GPU_ATTACH)) {
		CHECK_EQ_I(req->gpu_attach->state, PROFD__GPU_STATE__GPU_STATE_SUBSCRIBER_TAKEN);
		CHECK(req->gpu_attach->detail && strstr(req->gpu_attach->detail, "nsys"));
	}
	for (int i = 0; i < 4 && req; i++) {
		req = answer_on(&d, req, true);
		CHECK(is_batch(req));
	}
	CHECK_EQ_I(write(go[1], "g", 1), 1);
	CHECK_EQ_I(read(rep[0], &n, sizeof(n)), (int)sizeof(n));
	CHECK_EQ_U(n, 1);
	if (req)
		profd__request__free_unpacked(req, NULL);
	CHECK_EQ_I(waitpid(pid, &status, 0), pid);
	close(go[1]);
	close(rep[0]);
	fake_cleanup(&d);
}

/*
 * The application side of test_other_client: collecting, torch.profiler's Kineto starts (while
 * the parent holds the daemon's reply, so the uplink is not in the fake); then report what the
 * library left of Kineto's: its callbacks, its clock, its kernel kind, our subscription.
 */
static void other_child(int go, int rep)
{
	int (*init)(void);
	uint32_t n;
	char c;

	init = load_library();
	if (!init || init() != 1)
		_exit(3);
	if (read(go, &c, 1) != 1)
		_exit(4);
	fake_cupti_other_start(true);
	(void)!write(rep, "s", 1);
	if (read(go, &c, 1) != 1)
		_exit(5);
	n = (uint32_t)fake_cupti_other_owns_callbacks() |
	    (uint32_t)fake_cupti_other_owns_clock() << 1 |
	    (uint32_t)fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) << 2 |
	    (uint32_t)fake_cupti_subscribed() << 3 |
	    (uint32_t)(fake_cupti_call_count("cuptiActivityRegisterCallbacks") == 2) << 4;
	(void)!write(rep, &n, sizeof(n));
	_exit(0);
}

/* Kineto takes the activity API: the library says so in a GpuAttach and leaves it alone. */
static void test_other_client(void)
{
	struct fake_profd d = {.lfd = -1, .fd = -1};
	Profd__Request *req;
	int go[2], rep[2], status = -1;
	uint32_t n = 0;
	bool told = false;
	char c = 0;
	pid_t pid;

	CHECK_EQ_I(fake_listen(&d), 0);
	setenv("PROFD_SOCKET", d.path, 1);
	CHECK_EQ_I(pipe(go), 0);
	CHECK_EQ_I(pipe(rep), 0);
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		close(rep[0]);
		other_child(go[0], rep[1]);
	}
	close(go[0]);
	close(rep[1]);
	req = fake_handshake(&d, WAIT_MS);
	for (int i = 0; i < 4 && req; i++) /* enabled, then batches */
		req = answer_on(&d, req, true);
	CHECK(is_batch(req));
	CHECK_EQ_I(write(go[1], "g", 1), 1);
	CHECK_EQ_I(read(rep[0], &c, 1), 1);
	for (int i = 0; i < 20 && req && !told; i++) {
		req = answer_on(&d, req, true);
		if (req && req->msg_case == PROFD__REQUEST__MSG_GPU_ATTACH) {
			told = true;
			CHECK_EQ_I(req->gpu_attach->state,
				   PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN);
			CHECK(req->gpu_attach->detail &&
			      strstr(req->gpu_attach->detail, "timestamp callback"));
		}
	}
	CHECK(told);
	/* Asked to collect on: it stays off, and the fake is left to Kineto. */
	for (int i = 0; i < 3 && req; i++) {
		req = answer_on(&d, req, true);
		CHECK(is_batch(req));
	}
	CHECK_EQ_I(write(go[1], "g", 1), 1);
	CHECK_EQ_I(read(rep[0], &n, sizeof(n)), (int)sizeof(n));
	CHECK_EQ_U(n, 0x1f);
	if (req)
		profd__request__free_unpacked(req, NULL);
	close(go[1]);
	CHECK_EQ_I(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(rep[0]);
	fake_cleanup(&d);
}

static uint64_t coarse_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(void)
{
	const char *kname = "_Z3fooPf";
	uint64_t before_ns, after_ns, t_enable, t0;
	size_t subs, enables, forced;
	int (*init)(void);
	Profd__Request *req;
	bool all_until = true;
	void *h;

	setenv("PROFD_CUPTI_PATH", CUPTI_FAKE, 1);
	/* First, in children, while this process has loaded nothing yet. */
	test_exit_flush();
	test_exit_during_enable();
	test_subscriber_taken();
	test_other_client();
	CHECK_EQ_I(fake_listen(&fk), 0);
	setenv("PROFD_SOCKET", fk.path, 1);

	h = dlopen(CUPTI_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!CHECK(h != NULL)) {
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
	if (!fake_cupti_real_iterator())
		return CHECK_SKIP("no libcupti to walk activity buffers");

	/* Attach: CUPTI found, not enabled yet, so no clock. */
	req = fake_handshake(&fk, WAIT_MS);
	if (!CHECK(req != NULL))
		goto out;
	CHECK_EQ_I(req->gpu_attach->state, PROFD__GPU_STATE__GPU_STATE_READY);
	CHECK_EQ_U(req->gpu_attach->cupti_version, CUPTI_API_VERSION);
	CHECK(req->gpu_attach->cupti_path && strstr(req->gpu_attach->cupti_path, "cupti_fake"));
	CHECK(req->gpu_attach->library_path &&
	      strstr(req->gpu_attach->library_path, "libprofd_cupti.so"));
	CHECK(!req->gpu_attach->has_clock);
	CHECK(!fake_cupti_subscribed());

	/* Enable: the library subscribes, then tells the daemon the clock it got. */
	t_enable = fake_now_ms();
	req = answer(req, true);
	if (!CHECK(req && req->msg_case == PROFD__REQUEST__MSG_GPU_ATTACH))
		goto out;
	CHECK_EQ_I(req->gpu_attach->state, PROFD__GPU_STATE__GPU_STATE_READY);
	CHECK_EQ_I(req->gpu_attach->clock, PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK);
	CHECK(fake_cupti_subscribed());
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	req = answer(req, true);
	CHECK(is_batch(req));

	/*
	 * A launch whose kernel has not been reported: the watermark stops at its API enter (the
	 * coarse clock's reading there, in microseconds, or the previous flush's start when that
	 * reading lags behind it), however late the flush.
	 */
	before_ns = coarse_now_ns();
	fake_cupti_invoke_callback(CUPTI_CB_DOMAIN_RUNTIME_API,
				   CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_ENTER,
				   42, kname);
	fake_cupti_invoke_callback(CUPTI_CB_DOMAIN_RUNTIME_API,
				   CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_EXIT,
				   42, kname);
	after_ns = mono_now_ns();
	req = answer(req, true);
	if (!CHECK(is_batch(req)))
		goto out;
	CHECK(req->gpu_batch->has_complete_until_ns);
	CHECK(req->gpu_batch->complete_until_ns >= before_ns / 1000 * 1000);
	CHECK(req->gpu_batch->complete_until_ns <= after_ns);
	req = answer(req, true);
	CHECK(is_batch(req) && req->gpu_batch->complete_until_ns <= after_ns);

	/* Its kernel record, while the uplink waits for our reply. */
	put_records(42, kname);
	req = answer(req, true);
	if (!CHECK(is_batch(req)))
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
	 * The launch's record is in: the watermark moves on to this flush's start, past the
	 * launch. The range that stays open comes in the same batch, after the kernel, marked
	 * open and ending at the watermark.
	 */
	CHECK(req->gpu_batch->has_complete_until_ns);
	CHECK(req->gpu_batch->complete_until_ns > after_ns);
	CHECK(req->gpu_batch->complete_until_ns <= mono_now_ns());
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

	/* Over more than a second of 50 ms intervals: never a forced flush, always a watermark. */
	for (int i = 0; i < 25 && is_batch(req); i++) {
		req = answer(req, true);
		all_until &= is_batch(req) && req->gpu_batch->has_complete_until_ns &&
			     req->gpu_batch->n_nvtx == 1 && req->gpu_batch->nvtx[0]->open;
	}
	CHECK(is_batch(req));
	CHECK(all_until);
	CHECK(fake_cupti_call_count("cuptiActivityFlushAll") >= 25);
	CHECK_EQ_I(
	    fake_cupti_call_index("cuptiActivityFlushAll", true, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
	    -1);

	/*
	 * A daemon that flips enable on every reply for 2 s: one disable, and no enable before
	 * 5 s after the last one (the review saw 19 subscribes and 95 enables in such 2 s).
	 */
	subs = fake_cupti_call_count("cuptiSubscribe_v2");
	enables = fake_cupti_call_count("cuptiActivityEnable");
	forced = fake_cupti_call_count("cuptiActivityFlushAll");
	t0 = fake_now_ms();
	for (int i = 0; fake_now_ms() - t0 < 2000 && req && i < 200; i++)
		req = answer(req, i % 2 != 0);
	CHECK(is_batch(req));
	CHECK(fake_now_ms() - t_enable < 4500);
	CHECK_EQ_U(fake_cupti_call_count("cuptiSubscribe_v2"), subs);
	CHECK_EQ_U(fake_cupti_call_count("cuptiActivityEnable"), enables);
	/* Disabled: kinds off, the one CUPTI session kept. */
	CHECK(!fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	CHECK(fake_cupti_subscribed());
	CHECK_EQ_U(fake_cupti_call_count("cuptiUnsubscribe"), 0);
	CHECK_EQ_U(fake_cupti_call_index("cuptiActivityFlushAll", true,
					 CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) >= 0,
		   1);
	(void)forced;
	/* Asked to stay on, it comes back once the gate opens (5 s after the first enable). */
	for (int i = 0; i < 400 && is_batch(req) &&
			!fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	     i++)
		req = answer(req, true);
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	CHECK(fake_now_ms() - t_enable >= 4900);
	CHECK_EQ_U(fake_cupti_call_count("cuptiSubscribe_v2"), subs);
	CHECK_EQ_U(fake_cupti_sessions(), 1);
	if (req && req->msg_case == PROFD__REQUEST__MSG_GPU_ATTACH)
		req = answer(req, true);

	/*
	 * The daemon restarts: collection goes on meanwhile (no disable, no second subscribe), and
	 * the new daemon finds the library collecting.
	 */
	if (req)
		profd__request__free_unpacked(req, NULL);
	subs = fake_cupti_call_count("cuptiSubscribe_v2");
	fake_close_conn(&fk);
	req = fake_handshake(&fk, WAIT_MS);
	if (!CHECK(req != NULL))
		goto out;
	CHECK(fake_cupti_subscribed());
	CHECK_EQ_I(req->gpu_attach->state, PROFD__GPU_STATE__GPU_STATE_READY);
	CHECK_EQ_I(req->gpu_attach->clock, PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK);
	req = answer(req, true);
	CHECK(is_batch(req));
	CHECK(fake_cupti_subscribed());
	CHECK_EQ_U(fake_cupti_call_count("cuptiSubscribe_v2"), subs);
	CHECK_EQ_U(fake_cupti_call_count("cuptiUnsubscribe"), 0);

	/* The daemon stays away: after the 5 s grace, collection stops. */
	if (req)
		profd__request__free_unpacked(req, NULL);
	req = NULL;
	fake_close_conn(&fk);
	fake_unlisten(&fk);
	t0 = fake_now_ms();
	CHECK(fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	while (fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) &&
	       fake_now_ms() - t0 < 10000)
		usleep(20000);
	CHECK(!fake_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	CHECK(fake_now_ms() - t0 >= 4900);
	CHECK(fake_now_ms() - t0 < 7000);
	CHECK(fake_cupti_subscribed());
	CHECK_EQ_U(fake_cupti_call_count("cuptiUnsubscribe"), 0);
out:
	if (req)
		profd__request__free_unpacked(req, NULL);
	fake_cleanup(&fk);
	return CHECK_DONE();
}
