// SPDX-License-Identifier: BSD-2-Clause
/*
 * The uplink against a fake daemon, with CUPTI absent (the core reports NO_CUPTI): the
 * handshake, events pushed into the queue arriving with exact values, the per-connection string
 * table, drop counts, frame splitting, the flush interval clamp, reconnecting after the daemon
 * closes the connection or restarts, an old daemon's refusal, and no log line at all for a
 * missing daemon however often it is retried.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core.h"
#include "events.h"
#include "fake_profd.h"
#include "uplink.h"

#define QUEUE_CAP 64
#define WAIT_MS 5000

static struct fake_profd fk = {.lfd = -1, .fd = -1};
static struct evq *q;

static void push(const struct ev *e)
{
	CHECK_EQ_I(evq__push(q, e), 0);
}

static struct ev kernel(uint32_t corr, const char *name)
{
	struct ev e = {
	    .type = EV_KERNEL,
	    .corr = corr,
	    .start_ns = 1000000000ull + corr,
	    .end_ns = 1000005000ull + corr,
	    .device = 1,
	    .stream = 7,
	    .grid = 256,
	    .block = 128,
	    .weight = 1,
	    .name = names__intern(name),
	};
	return e;
}

/* Answer the batch the library waits on, and take the next one. */
static Profd__Request *next_batch(Profd__Request *prev, bool enable, uint32_t interval)
{
	if (prev)
		profd__request__free_unpacked(prev, NULL);
	CHECK_EQ_I(fake_send_control(&fk, enable, interval), 0);
	return fake_recv_batch(&fk, WAIT_MS);
}

static size_t batch_events(const Profd__GpuBatch *b)
{
	return b->n_kernels + b->n_copies + b->n_api_calls + b->n_nvtx;
}

/*
 * No daemon yet: the library retries in silence (the application runs as if nothing were
 * injected, stderr included), on a thread with a stack CUPTI's code fits on.
 */
static void test_no_daemon_then_connect(void)
{
	char logpath[160], buf[512] = {0};
	struct uplink_opts opts = {.retry_min_ms = 50, .retry_max_ms = 200};
	int saved, logfd;
	struct core_info info;
	Profd__Request *req;
	ssize_t n;

	/* The core may say why CUPTI is missing: that line is its own, not the uplink's. */
	memset(&info, 0, sizeof(info));
	CHECK(core__init(q, &info) < 0);
	CHECK_EQ_I(info.state, PROFD__GPU_STATE__GPU_STATE_NO_CUPTI);
	saved = dup(STDERR_FILENO);

	snprintf(logpath, sizeof(logpath), "%s/log", fk.dir);
	logfd = open(logpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(logfd >= 0);
	dup2(logfd, STDERR_FILENO);
	CHECK_EQ_I(uplink__start(q, &info, &opts), 0);
	CHECK_EQ_I(uplink__start(q, &info, &opts), -EALREADY);
	/* 50 + 100 + 200 + 200 + ...: several attempts. */
	usleep(900 * 1000);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(logfd, buf, sizeof(buf) - 1, 0);
	close(logfd);
	unlink(logpath);
	CHECK_EQ_I(n, 0);
	CHECK_STREQ(buf, "");
	CHECK_EQ_U(uplink__test_stack_size(), UPLINK_STACK_SIZE);
	CHECK(UPLINK_STACK_SIZE >= 1u << 20);

	CHECK_EQ_I(fake_listen(&fk), 0);
	req = fake_handshake(&fk, WAIT_MS);
	if (!CHECK(req != NULL))
		return;
	CHECK_EQ_I(req->gpu_attach->state, PROFD__GPU_STATE__GPU_STATE_NO_CUPTI);
	CHECK(req->gpu_attach->detail && strstr(req->gpu_attach->detail, "/nonexistent"));
	CHECK(!req->gpu_attach->has_clock);
	CHECK(req->gpu_attach->has_launch_rate_limit);
	profd__request__free_unpacked(req, NULL);
}

/* enable with no CUPTI changes nothing (no new GpuAttach); the interval is clamped to 50 ms. */
static void test_interval_and_enable(void)
{
	Profd__Request *a, *b;
	uint64_t t0, t1;

	CHECK_EQ_I(fake_send_control(&fk, true, 1), 0);
	a = fake_recv_batch(&fk, WAIT_MS);
	if (!CHECK(a != NULL))
		return;
	CHECK_EQ_U(batch_events(a->gpu_batch), 0);
	CHECK(!a->gpu_batch->has_complete_until_ns);
	CHECK(!a->gpu_batch->has_dropped);
	/* Four intervals: about 200 ms at the 50 ms floor, 1 s at the default. */
	t0 = fake_now_ms();
	b = a;
	for (int i = 0; i < 4 && b; i++)
		b = next_batch(b, true, 1);
	t1 = fake_now_ms();
	CHECK(b != NULL);
	CHECK(t1 - t0 >= 4 * 45);
	CHECK(t1 - t0 < 800);
	if (b)
		profd__request__free_unpacked(b, NULL);
}

/* Events of every type arrive with exact values; strings are sent once per connection. */
static Profd__Request *test_events(void)
{
	struct ev k = kernel(11, "kern_a"), c = {0}, a = {0}, n = {0}, g = kernel(12, "kern_a");
	Profd__Request *req;
	Profd__GpuBatch *b;

	c.type = EV_COPY;
	c.copy_kind = PROFD__GPU_COPY_KIND__GPU_COPY_DTOH;
	c.corr = 21;
	c.start_ns = 2000;
	c.end_ns = 2600;
	c.bytes = 1ull << 33;
	c.device = 2;
	c.stream = 3;
	c.weight = 4;
	a.type = EV_API;
	a.corr = 11;
	a.start_ns = 900;
	a.end_ns = 950;
	a.tid = 4242;
	a.name = names__intern("cudaLaunchKernel");
	n.type = EV_NVTX;
	n.start_ns = 500;
	n.end_ns = 5000;
	n.tid = 4243;
	n.depth = 2;
	n.name = names__intern("range");
	n.domain = names__intern("dom");
	g.graph_id = 99;
	g.weight = 0;

	/* The library waits for our reply: what we push now is in its next batch, whole. */
	CHECK_EQ_I(fake_send_control(&fk, false, 50), 0);
	req = fake_recv_batch(&fk, WAIT_MS);
	CHECK(req != NULL);
	push(&k);
	push(&c);
	push(&a);
	push(&n);
	push(&g);
	req = next_batch(req, false, 50);
	if (!CHECK(req != NULL))
		return NULL;
	b = req->gpu_batch;
	CHECK_EQ_U(b->n_strings, 4);
	if (b->n_strings == 4) {
		CHECK_STREQ(b->strings[0], "kern_a");
		CHECK_STREQ(b->strings[1], "cudaLaunchKernel");
		CHECK_STREQ(b->strings[2], "range");
		CHECK_STREQ(b->strings[3], "dom");
	}
	CHECK_EQ_U(b->n_kernels, 2);
	if (b->n_kernels == 2) {
		const Profd__GpuKernel *x = b->kernels[0], *y = b->kernels[1];

		CHECK_EQ_U(x->start_ns, 1000000011ull);
		CHECK_EQ_U(x->end_ns, 1000005011ull);
		CHECK_EQ_U(x->correlation_id, 11);
		CHECK_EQ_U(x->name, 1);
		CHECK_EQ_U(x->device, 1);
		CHECK_EQ_U(x->stream, 7);
		CHECK(!x->has_graph_id);
		CHECK_EQ_U(x->grid, 256);
		CHECK_EQ_U(x->block, 128);
		CHECK_EQ_U(x->weight, 1);
		CHECK_EQ_U(y->correlation_id, 12);
		CHECK_EQ_U(y->name, 1);
		CHECK_EQ_U(y->graph_id, 99);
		CHECK(y->has_weight);
		CHECK_EQ_U(y->weight, 0);
	}
	CHECK_EQ_U(b->n_copies, 1);
	if (b->n_copies == 1) {
		CHECK_EQ_U(b->copies[0]->start_ns, 2000);
		CHECK_EQ_U(b->copies[0]->end_ns, 2600);
		CHECK_EQ_U(b->copies[0]->correlation_id, 21);
		CHECK_EQ_I(b->copies[0]->kind, PROFD__GPU_COPY_KIND__GPU_COPY_DTOH);
		CHECK_EQ_U(b->copies[0]->bytes, 1ull << 33);
		CHECK_EQ_U(b->copies[0]->device, 2);
		CHECK_EQ_U(b->copies[0]->stream, 3);
		CHECK_EQ_U(b->copies[0]->weight, 4);
	}
	CHECK_EQ_U(b->n_api_calls, 1);
	if (b->n_api_calls == 1) {
		CHECK_EQ_U(b->api_calls[0]->start_ns, 900);
		CHECK_EQ_U(b->api_calls[0]->end_ns, 950);
		CHECK_EQ_U(b->api_calls[0]->correlation_id, 11);
		CHECK_EQ_U(b->api_calls[0]->tid, 4242);
		CHECK_EQ_U(b->api_calls[0]->name, 2);
	}
	CHECK_EQ_U(b->n_nvtx, 1);
	if (b->n_nvtx == 1) {
		CHECK_EQ_U(b->nvtx[0]->start_ns, 500);
		CHECK_EQ_U(b->nvtx[0]->end_ns, 5000);
		CHECK_EQ_U(b->nvtx[0]->tid, 4243);
		CHECK_EQ_U(b->nvtx[0]->name, 3);
		CHECK_EQ_U(b->nvtx[0]->domain, 4);
		CHECK_EQ_U(b->nvtx[0]->depth, 2);
		CHECK(!b->nvtx[0]->open);
	}
	CHECK(!b->has_dropped);

	/* The next batch: known strings by index, only the new one sent. */
	k = kernel(13, "kern_a");
	g = kernel(14, "kern_b");
	n.domain = NULL;
	push(&k);
	push(&g);
	push(&n);
	req = next_batch(req, false, 50);
	if (!CHECK(req != NULL))
		return NULL;
	b = req->gpu_batch;
	CHECK_EQ_U(b->n_strings, 1);
	if (b->n_strings == 1)
		CHECK_STREQ(b->strings[0], "kern_b");
	CHECK_EQ_U(b->n_kernels, 2);
	if (b->n_kernels == 2) {
		CHECK_EQ_U(b->kernels[0]->name, 1);
		CHECK_EQ_U(b->kernels[1]->name, 5);
	}
	CHECK_EQ_U(b->n_nvtx, 1);
	if (b->n_nvtx == 1) {
		CHECK_EQ_U(b->nvtx[0]->name, 3);
		CHECK(!b->nvtx[0]->has_domain);
	}
	return req;
}

/* A full queue drops and counts; the count arrives once. */
static Profd__Request *test_drops(Profd__Request *req)
{
	Profd__GpuBatch *b;
	bool in_order = true;

	for (uint32_t i = 0; i < QUEUE_CAP + 36; i++) {
		struct ev k = kernel(1000 + i, "kern_a");

		CHECK_EQ_I(evq__push(q, &k), i < QUEUE_CAP ? 0 : -ENOSPC);
	}
	CHECK_EQ_U(evq__len(q), QUEUE_CAP);
	req = next_batch(req, false, 50);
	if (!CHECK(req != NULL))
		return NULL;
	b = req->gpu_batch;
	CHECK_EQ_U(b->n_kernels, QUEUE_CAP);
	for (size_t i = 0; i < b->n_kernels; i++)
		in_order &= b->kernels[i]->correlation_id == 1000 + i;
	CHECK(in_order);
	CHECK(b->has_dropped);
	CHECK_EQ_U(b->dropped, 36);
	CHECK_EQ_U(b->n_strings, 0);
	req = next_batch(req, false, 50);
	if (CHECK(req != NULL))
		CHECK(!req->gpu_batch->has_dropped);
	return req;
}

/* Long names: cut below the limit at a UTF-8 boundary, batches split under the budget. */
static Profd__Request *test_split(Profd__Request *req)
{
	const size_t nk = 40, len = 20000;
	char *name = malloc(len + 1);
	size_t got = 0, batches = 0, strings = 0;
	bool sizes_ok = true, cut_ok = true, idx_ok = true;

	for (size_t i = 0; i < nk; i++) {
		struct ev k;

		memset(name, 'a' + (int)(i % 26), len);
		name[len] = 0;
		snprintf(name, 8, "k%03zu_", i);
		name[5] = '_';
		/* "é" straddles the cut at UPLINK_MAX_STRING - 1 in the first name. */
		if (i == 0) {
			name[UPLINK_MAX_STRING - 2] = (char)0xc3;
			name[UPLINK_MAX_STRING - 1] = (char)0xa9;
		}
		k = kernel(5000 + (uint32_t)i, name);
		push(&k);
	}
	free(name);
	while (got < nk) {
		Profd__GpuBatch *b;

		req = next_batch(req, false, 50);
		if (!CHECK(req != NULL))
			return NULL;
		b = req->gpu_batch;
		batches++;
		sizes_ok &= fk.last_len <= UPLINK_BATCH_BUDGET + 2 * UPLINK_MAX_STRING;
		for (size_t i = 0; i < b->n_strings; i++) {
			size_t want = strings == 0 ? UPLINK_MAX_STRING - 2 : UPLINK_MAX_STRING - 1;

			cut_ok &= strlen(b->strings[i]) == want;
			strings++;
		}
		for (size_t i = 0; i < b->n_kernels; i++) {
			idx_ok &= b->kernels[i]->correlation_id == 5000 + got;
			/* kern_a 1, cudaLaunchKernel 2, range 3, dom 4, kern_b 5, then these. */
			idx_ok &= b->kernels[i]->name == 6 + got;
			got++;
		}
		if (batches > 10)
			break;
	}
	CHECK_EQ_U(got, nk);
	CHECK_EQ_U(strings, nk);
	CHECK(batches >= 2);
	CHECK(sizes_ok);
	CHECK(cut_ok);
	CHECK(idx_ok);
	return req;
}

/* The daemon closes the connection: the library comes back with a fresh string table. */
static void test_reconnect(Profd__Request *req)
{
	struct ev k = kernel(77, "kern_b");

	if (req)
		profd__request__free_unpacked(req, NULL);
	fake_close_conn(&fk);
	req = fake_handshake(&fk, WAIT_MS);
	if (!CHECK(req != NULL))
		return;
	CHECK_EQ_I(req->gpu_attach->state, PROFD__GPU_STATE__GPU_STATE_NO_CUPTI);
	CHECK_EQ_I(fake_send_control(&fk, false, 50), 0);
	profd__request__free_unpacked(req, NULL);
	req = fake_recv_batch(&fk, WAIT_MS);
	CHECK(req != NULL);
	push(&k);
	req = next_batch(req, false, 50);
	if (!CHECK(req != NULL))
		return;
	CHECK_EQ_U(req->gpu_batch->n_strings, 1);
	if (req->gpu_batch->n_strings == 1)
		CHECK_STREQ(req->gpu_batch->strings[0], "kern_b");
	CHECK_EQ_U(req->gpu_batch->n_kernels, 1);
	if (req->gpu_batch->n_kernels == 1) {
		CHECK_EQ_U(req->gpu_batch->kernels[0]->correlation_id, 77);
		CHECK_EQ_U(req->gpu_batch->kernels[0]->name, 1);
	}
	profd__request__free_unpacked(req, NULL);
}

/* An old daemon refuses GpuAttach; then the daemon restarts: the library finds the new one. */
static void test_refused_then_restart(void)
{
	Profd__Request *req;

	fake_close_conn(&fk);
	req = fake_handshake(&fk, WAIT_MS);
	if (CHECK(req != NULL))
		profd__request__free_unpacked(req, NULL);
	CHECK_EQ_I(fake_send_error(&fk, PROFD__ERROR_CODE__ERROR_BAD_REQUEST, "unknown request"),
		   0);
	/* It closes and comes back after its backoff. */
	req = fake_handshake(&fk, WAIT_MS);
	if (CHECK(req != NULL))
		profd__request__free_unpacked(req, NULL);
	CHECK_EQ_I(fake_send_control(&fk, false, 50), 0);
	req = fake_recv_batch(&fk, WAIT_MS);
	if (CHECK(req != NULL))
		profd__request__free_unpacked(req, NULL);

	/* Restart: connection and socket gone for a while, then a new socket at the path. */
	fake_close_conn(&fk);
	fake_unlisten(&fk);
	usleep(400 * 1000);
	CHECK_EQ_I(fake_listen(&fk), 0);
	req = fake_handshake(&fk, WAIT_MS);
	if (CHECK(req != NULL))
		profd__request__free_unpacked(req, NULL);
	CHECK_EQ_I(fake_send_control(&fk, false, 50), 0);
	req = fake_recv_batch(&fk, WAIT_MS);
	if (CHECK(req != NULL))
		profd__request__free_unpacked(req, NULL);
}

int main(void)
{
	Profd__Request *req;

	/* The directory first: the library looks for a daemon there before one listens. */
	CHECK_EQ_I(fake_listen(&fk), 0);
	fake_unlisten(&fk);
	setenv("PROFD_SOCKET", fk.path, 1);
	setenv("PROFD_CUPTI_PATH", "/nonexistent/libcupti.so", 1);
	q = evq__new(QUEUE_CAP);
	if (!CHECK(q != NULL))
		return CHECK_DONE();

	test_no_daemon_then_connect();
	test_interval_and_enable();
	req = test_events();
	req = test_drops(req);
	req = test_split(req);
	test_reconnect(req);
	test_refused_then_restart();
	fake_cleanup(&fk);
	return CHECK_DONE();
}
