// SPDX-License-Identifier: BSD-2-Clause
/*
 * `profctl dump trace`: a synthetic Trace rendered as Chrome trace event JSON, checked line by
 * line for the events that matter and, when python3 is there, parsed back whole by
 * check_trace_json.py (every event well-formed, ts monotonic per track, slices nested, every
 * flow from a launch ending at an existing kernel).
 *
 * The trace, pid 100 "python3" (T = 1000 s on the monotonic clock, times in us after T):
 *   tid 100 "python3": NVTX epoch [0, 10000) > step [1000, 6000) > fwd [1000, 2000);
 *                      cudaMemcpyAsync [800, 950) corr 6; cudaLaunchKernel [1500, 1520)
 *                      corr 7 with its launch at 1510; cudaLaunchKernel [3000, 3010) corr 8
 *                      (a graph) with its launch at 3005; a launch at 7900 corr 10 without a
 *                      traced call; a CPU sample at 1000.
 *   tid 101 "loader": CPU samples at 2000 and 4000 in load_batch, and a wait off the CPU in a
 *                     futex between them [2100, 3900).
 *   GPU 0: HtoD copy [1000, 1400) corr 6 stream 7; sgemm [1600, 3600) corr 7 stream 7;
 *          relu [3700, 4000) corr 8 stream 7; add<float> [3700, 3800) corr 8 stream 13;
 *          a kernel with a hostile name [8000, 8100) corr 10 stream 7.
 *   GPU 1: "other" [5000, 5500) corr 9 stream 0, no launch seen.
 */
#include "check.h"
#include "format.h"
#include "profile.h"
#include "profile_fixture.h"
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define T 1000000000000ull
#define US(x) (T + (uint64_t)(x)*1000ull)
#define WEIRD "k\"q\\\n\x01\xff"

static void build(struct fixture *fx, struct trace_fixture *tx)
{
	fx_init(fx);
	fx_proc(fx, 100, "python3");
	fx_thread(fx, 100, 100, "python3");
	fx_thread(fx, 100, 101, "loader");
	uint32_t mn = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	uint32_t train = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_PYTHON, "train_step", NULL, 0,
				       "/src/train.py", 42);
	uint32_t load = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_PYTHON, "load_batch", NULL, 0,
				      "/src/data.py", 10);
	uint32_t launch = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "cudaLaunchKernel");
	uint32_t s_launch = fx_stack(fx, 3, (uint32_t[]){mn, train, launch});
	uint32_t s_cpu = fx_stack(fx, 2, (uint32_t[]){mn, train});
	uint32_t s_load = fx_stack(fx, 2, (uint32_t[]){mn, load});
	uint32_t s_wait = fx_stack(
	    fx, 4,
	    (uint32_t[]){fx_frame(fx, PROFD__FRAME_KIND__FRAME_STATE, "[off-cpu: futex]"), mn, load,
			 fx_frame(fx, PROFD__FRAME_KIND__FRAME_KERNEL, "futex_wait")});

	tx_init(tx, fx, T, US(10000));
	tx_nvtx(tx, US(0), US(10000), 100, 100, "epoch", 0);
	tx_nvtx(tx, US(1000), US(2000), 100, 100, "fwd", 2);
	tx_nvtx(tx, US(1000), US(6000), 100, 100, "step", 1);
	tx_api(tx, US(800), US(950), 100, 100, 6, "cudaMemcpyAsync");
	tx_api(tx, US(1500), US(1520), 100, 100, 7, "cudaLaunchKernel");
	tx_api(tx, US(3000), US(3010), 100, 100, 8, "cudaGraphLaunch");
	tx_launch(tx, US(1510), 100, 100, s_launch, 7);
	tx_launch(tx, US(3005), 100, 100, s_launch, 8);
	tx_launch(tx, US(7900), 100, 100, s_launch, 10);
	tx_sample(tx, US(4000), 100, 101, s_load);
	tx_sample(tx, US(2000), 100, 101, s_load);
	tx_wait(tx, US(2100), US(3900), 100, 101, s_wait);
	tx_sample(tx, US(1000), 100, 100, s_cpu);
	tx_copy(tx, US(1000), US(1400), 100, 6, PROFD__GPU_COPY_KIND__GPU_COPY_HTOD, 1048576, 0, 7);
	tx_kernel(tx, US(1600), US(3600), 100, 7, "sgemm", 0, 7);
	tx_kernel(tx, US(3700), US(4000), 100, 8, "relu", 0, 7);
	tx_kernel(tx, US(3700), US(3800), 100, 8, "add<float>", 0, 13);
	tx_kernel(tx, US(5000), US(5500), 100, 9, "other", 1, 0);
	tx_kernel(tx, US(8000), US(8100), 100, 10, WEIRD, 0, 7);
}

static char *render(const Profd__Trace *t, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	int err;

	if (!f)
		return NULL;
	err = format_trace(t, f);
	fclose(f);
	if (err) {
		fprintf(stderr, "format_trace: %d\n", err);
		free(buf);
		return NULL;
	}
	return buf;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

/* Position of needle in hay, or SIZE_MAX. */
static size_t pos(const char *hay, const char *needle)
{
	const char *p = strstr(hay, needle);

	return p ? (size_t)(p - hay) : SIZE_MAX;
}

static void test_events(void)
{
	struct fixture fx;
	struct trace_fixture tx;
	char why[128];
	size_t len;
	char *out;

	build(&fx, &tx);
	CHECK_EQ_I(trace_check(&tx.t, why, sizeof(why)), 0);
	CHECK_EQ_U(trace_n_events(&tx.t), 19);
	out = render(&tx.t, &len);
	CHECK(out != NULL);
	if (!out)
		return;
	CHECK(strstr(out, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n{") == out);
	CHECK(len > 4 && strcmp(out + len - 4, "\n]}\n") == 0);
	/* Tracks: the process, its threads, a pseudo process per GPU, a track per stream. */
	CHECK_EQ_U(count(out, "{\"ph\": \"M\", \"pid\": 100, \"tid\": 0, \"ts\": 0.000, \"name\": "
			      "\"process_name\", \"args\": {\"name\": \"python3\"}}"),
		   1);
	CHECK_EQ_U(count(out,
			 "{\"ph\": \"M\", \"pid\": 100, \"tid\": 101, \"ts\": 0.000, \"name\": "
			 "\"thread_name\", \"args\": {\"name\": \"loader\"}}"),
		   1);
	CHECK_EQ_U(count(out, "{\"ph\": \"M\", \"pid\": 1000000000, \"tid\": 0, \"ts\": 0.000, "
			      "\"name\": \"process_name\", \"args\": {\"name\": \"GPU 0 of python3 "
			      "(pid 100)\"}}"),
		   1);
	CHECK_EQ_U(count(out, "\"args\": {\"name\": \"GPU 1 of python3 (pid 100)\"}}"), 1);
	CHECK_EQ_U(count(out, "{\"ph\": \"M\", \"pid\": 1000000000, \"tid\": 13, \"ts\": 0.000, "
			      "\"name\": \"thread_name\", \"args\": {\"name\": \"stream 13\"}}"),
		   1);
	CHECK_EQ_U(count(out, "\"name\": \"thread_name\""), 5); /* 2 threads, 3 streams */
	/* The kernel, exactly: us with the ns kept, its ids in args. */
	CHECK_EQ_U(count(out, "{\"ph\": \"X\", \"pid\": 1000000000, \"tid\": 7, \"ts\": "
			      "1000001600.000, \"dur\": 2000.000, \"name\": \"sgemm\", \"cat\": "
			      "\"kernel\", \"args\": {\"correlation_id\": 7, \"device\": 0, "
			      "\"stream\": 7}}"),
		   1);
	CHECK_EQ_U(count(out,
			 "{\"ph\": \"X\", \"pid\": 1000000000, \"tid\": 7, \"ts\": "
			 "1000001000.000, \"dur\": 400.000, \"name\": \"memcpy HtoD\", \"cat\": "
			 "\"copy\", \"args\": {\"kind\": \"HtoD\", \"bytes\": 1048576, "
			 "\"correlation_id\": 6}}"),
		   1);
	CHECK_EQ_U(count(out, "\"pid\": 1000000001, \"tid\": 0, \"ts\": 1000005000.000, \"dur\": "
			      "500.000, \"name\": \"other\""),
		   1);
	CHECK_EQ_U(count(out, "{\"ph\": \"X\", \"pid\": 100, \"tid\": 100, \"ts\": 1000001500.000, "
			      "\"dur\": 20.000, \"name\": \"cudaLaunchKernel\", \"cat\": "
			      "\"cuda_api\", \"args\": {\"correlation_id\": 7}}"),
		   1);
	/* A launch: a zero-length slice with its stack, leaf first, and its kernel. */
	CHECK_EQ_U(count(out,
			 "{\"ph\": \"X\", \"pid\": 100, \"tid\": 100, \"ts\": 1000001510.000, "
			 "\"dur\": 0.000, \"name\": \"launch\", \"cat\": \"launch\", \"args\": "
			 "{\"correlation_id\": 7, \"kernel\": \"sgemm\", \"stack\": "
			 "[\"cudaLaunchKernel\", \"train_step (train.py:42)\", \"main\"]}}"),
		   1);
	/* Samples: thread-scoped instants named by the leaf. */
	CHECK_EQ_U(count(out, "{\"ph\": \"i\", \"pid\": 100, \"tid\": 101, \"ts\": 1000002000.000, "
			      "\"s\": \"t\", \"name\": \"load_batch (data.py:10)\", \"cat\": "
			      "\"cpu_sample\", \"args\": {\"stack\": [\"load_batch (data.py:10)\", "
			      "\"main\"]}}"),
		   1);
	CHECK_EQ_U(count(out, "\"cat\": \"cpu_sample\""), 3);
	/* A wait: a slice on its thread named by its state, its stack leaf first. */
	CHECK_EQ_U(count(out, "{\"ph\": \"X\", \"pid\": 100, \"tid\": 101, \"ts\": "
			      "1000002100.000, \"dur\": 1800.000, \"name\": \"off-cpu: futex\", "
			      "\"cat\": \"off_cpu\", \"args\": {\"stack\": [\"futex_wait_[k]\", "
			      "\"load_batch (data.py:10)\", \"main\", \"[off-cpu: futex]\"]}}"),
		   1);
	/* Flows: one per (launch, kernel), ids 1..4; the graph launch fans out to two. */
	CHECK_EQ_U(count(out, "{\"ph\": \"s\", \"pid\": 100, \"tid\": 100, \"ts\": 1000001510.000, "
			      "\"id\": 1, \"name\": \"launch\", \"cat\": \"launch\"}"),
		   1);
	CHECK_EQ_U(count(out,
			 "{\"ph\": \"f\", \"pid\": 1000000000, \"tid\": 7, \"ts\": "
			 "1000001600.000, \"id\": 1, \"name\": \"launch\", \"cat\": \"launch\", "
			 "\"bp\": \"e\"}"),
		   1);
	CHECK_EQ_U(count(out, "{\"ph\": \"s\""), 4);
	CHECK_EQ_U(count(out, "{\"ph\": \"f\""), 4);
	CHECK_EQ_U(count(out, "\"ph\": \"f\", \"pid\": 1000000000, \"tid\": 7, \"ts\": "
			      "1000003700.000, \"id\": 2"),
		   1);
	CHECK_EQ_U(count(out, "\"ph\": \"f\", \"pid\": 1000000000, \"tid\": 13, \"ts\": "
			      "1000003700.000, \"id\": 3"),
		   1);
	CHECK_EQ_U(count(out, "\"ph\": \"f\", \"pid\": 1000000000, \"tid\": 7, \"ts\": "
			      "1000008000.000, \"id\": 4"),
		   1);
	/* The kernel no launch was seen for has no arrow. */
	CHECK_EQ_U(count(out, "\"ph\": \"f\", \"pid\": 1000000001"), 0);
	/* Any name is escaped: quote, backslash, newline, control byte, invalid UTF-8. */
	CHECK_EQ_U(
	    count(out, "\"name\": \"k\\\"q\\\\\\n\\u0001\xef\xbf\xbd\", \"cat\": \"kernel\""), 1);
	/* NVTX ranges nest: enclosing first, equal starts ordered longest first. */
	CHECK(pos(out, "\"name\": \"epoch\"") < pos(out, "\"name\": \"step\""));
	CHECK(pos(out, "\"name\": \"step\"") < pos(out, "\"name\": \"fwd\""));
	CHECK(pos(out, "\"name\": \"fwd\"") < pos(out, "\"name\": \"train_step (train.py:42)\""));
	CHECK_EQ_U(count(out, "\"name\": \"step\", \"cat\": \"nvtx\", \"args\": {\"depth\": 1}}"),
		   1);
	free(out);
}

/* The whole file through a real JSON parser and the structural checks of the script. */
/* Set when a part could not run: the test then ends in CHECK_SKIP, never a pass. */
static const char *skipped;

static void test_parse_back(void)
{
	struct fixture fx;
	struct trace_fixture tx;
	char path[] = "/tmp/test_trace_XXXXXX";
	char cmd[512], line[256] = "";
	size_t len;
	char *out;
	FILE *p;
	int fd, rc;

	if (system("python3 -c 'import json' >/dev/null 2>&1") != 0) {
		skipped = "no python3: the trace JSON was not parsed back";
		return;
	}
	build(&fx, &tx);
	out = render(&tx.t, &len);
	fd = mkstemp(path);
	CHECK(out != NULL && fd >= 0);
	if (!out || fd < 0) {
		free(out);
		return;
	}
	CHECK_EQ_I(write(fd, out, len), (ssize_t)len);
	close(fd);
	snprintf(cmd, sizeof(cmd), "python3 %s %s", CHECK_TRACE_PY, path);
	p = popen(cmd, "r");
	CHECK(p != NULL);
	if (p) {
		if (!fgets(line, sizeof(line), p))
			line[0] = '\0';
		rc = pclose(p);
		CHECK_EQ_I(rc, 0);
		/* 3 process names, 3 sort indices, 5 thread names; 16 slices, 3 samples. */
		CHECK_STREQ(line, "{\"M\": 11, \"X\": 16, \"f\": 4, \"i\": 3, \"s\": 4}\n");
	}
	unlink(path);
	free(out);

	/* A broken file is caught: the checker is not a rubber stamp. */
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	if (fd >= 0) {
		static const char bad[] =
		    "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n"
		    "{\"ph\": \"X\", \"pid\": 1, \"tid\": 1, \"ts\": 5.000, \"dur\": 1.000, "
		    "\"name\": \"a\"},\n"
		    "{\"ph\": \"X\", \"pid\": 1, \"tid\": 1, \"ts\": 4.000, \"dur\": 1.000, "
		    "\"name\": \"b\"}\n]}\n";

		CHECK_EQ_I(write(fd, bad, sizeof(bad) - 1), (ssize_t)(sizeof(bad) - 1));
		close(fd);
		snprintf(cmd, sizeof(cmd), "python3 %s %s >/dev/null", CHECK_TRACE_PY, path);
		CHECK(system(cmd) != 0);
		unlink(path);
	}
}

static void test_check(void)
{
	struct fixture fx;
	struct trace_fixture tx;
	char why[128] = "";

	build(&fx, &tx);
	tx.kernels[0].name = 999;
	CHECK_EQ_I(trace_check(&tx.t, why, sizeof(why)), -EPROTO);
	CHECK_STREQ(why, "an event names a string past the 21 in the table");
	build(&fx, &tx);
	tx.launches[1].stack = 4;
	CHECK_EQ_I(trace_check(&tx.t, why, sizeof(why)), -EPROTO);
	CHECK_STREQ(why, "launch 1 names stack 4 of 4");
	build(&fx, &tx);
	tx.waits[0].stack = 4;
	CHECK_EQ_I(trace_check(&tx.t, why, sizeof(why)), -EPROTO);
	CHECK_STREQ(why, "wait 0 names stack 4 of 4");
	build(&fx, &tx);
	tx.waits[0].end_ns = tx.waits[0].start_ns - 1;
	CHECK_EQ_I(trace_check(&tx.t, why, sizeof(why)), -EPROTO);
	CHECK_STREQ(why, "an event ends before it starts");
	build(&fx, &tx);
	tx.api[0].end_ns = tx.api[0].start_ns - 1;
	CHECK_EQ_I(trace_check(&tx.t, why, sizeof(why)), -EPROTO);
	CHECK_STREQ(why, "an event ends before it starts");
}

/* No events: still a valid, empty document. */
static void test_empty(void)
{
	struct fixture fx;
	struct trace_fixture tx;
	size_t len;
	char *out;

	fx_init(&fx);
	tx_init(&tx, &fx, 0, 0);
	out = render(&tx.t, &len);
	CHECK_STREQ(out ? out : "", "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n]}\n");
	free(out);
}

int main(void)
{
	test_events();
	test_parse_back();
	test_check();
	test_empty();
	return skipped ? CHECK_SKIP(skipped) : CHECK_DONE();
}
