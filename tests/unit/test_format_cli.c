// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl's command line and error paths: argument parsing, the mapping of daemon errors to
 * exit codes, and whole commands against a small in-process fake daemon speaking the protocol.
 */
#include "check.h"
#include "cli.h"
#include "cmd_dump.h"
#include "commands.h"
#include "conn.h"
#include "profile_fixture.h"
#include "value.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "frame.h"
#include "wire.h"

#define ARGV(...) ((char *[]){__VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){__VA_ARGS__}) / sizeof(char *)))
#define PARSE(a, e, ...) dump_parse_args(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), a, e)

static void test_parse_dump(void)
{
	struct dump_args a;
	struct cli_error e;

	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--pid", "42", "--pid=7", "--pid", "42",
			 "--tid", "43", "--since", "30s", "-o", "out.svg"),
		   0);
	CHECK_EQ_U(a.q.n_pids, 2); /* the repeated 42 counts once */
	CHECK_EQ_U(a.q.pids[0], 42);
	CHECK_EQ_U(a.q.pids[1], 7);
	CHECK(a.q.has_tid);
	CHECK_EQ_U(a.q.tid, 43);
	CHECK(a.q.has_since);
	CHECK_EQ_U(a.q.since_ns, 30000000000ull);
	CHECK_STREQ(a.output, "out.svg");
	CHECK_EQ_I(a.format, DUMP_FORMAT_SVG); /* from the file name */
	CHECK(!a.help);

	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--since", "1.5m", "-o", "x.txt"), 0);
	CHECK_EQ_U(a.q.since_ns, 90000000000ull);
	CHECK_EQ_I(a.format, DUMP_FORMAT_FOLDED);
	CHECK_EQ_U(a.q.n_pids, 0);
	CHECK(!a.q.has_tid);

	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph"), 0);
	CHECK_EQ_I(a.format, DUMP_FORMAT_FOLDED);
	CHECK(a.output == NULL);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--format", "svg", "--timeout", "5m"), 0);
	CHECK_EQ_I(a.format, DUMP_FORMAT_SVG);
	CHECK_EQ_U(a.timeout_ns, 300000000000ull);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--format=folded", "-o", "a.svg"), 0);
	CHECK_EQ_I(a.format, DUMP_FORMAT_FOLDED);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--since", "2h"), 0);
	CHECK_EQ_U(a.q.since_ns, 7200000000000ull);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "--help"), 0);
	CHECK(a.help);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "-h"), 0);
	CHECK(a.help);
}

#define BAD(want, ...)                                                                             \
	do {                                                                                       \
		struct dump_args a_;                                                               \
		struct cli_error e_ = {0};                                                         \
		CHECK_EQ_I(PARSE(&a_, &e_, __VA_ARGS__), -EINVAL);                                 \
		CHECK_EQ_I(e_.code, PROFCTL_EXIT_USAGE);                                           \
		CHECK_STREQ(e_.msg, want);                                                         \
	} while (0)

static void test_parse_dump_errors(void)
{
	BAD("dump: --pid 'abc' is not a positive integer; see 'profctl dump --help'", "dump",
	    "flamegraph", "--pid", "abc");
	BAD("dump: --pid '-3' is not a positive integer; see 'profctl dump --help'", "dump",
	    "flamegraph", "--pid", "-3");
	BAD("dump: --pid '12x' is not a positive integer; see 'profctl dump --help'", "dump",
	    "flamegraph", "--pid", "12x");
	BAD("dump: --pid ' 12' is not a positive integer; see 'profctl dump --help'", "dump",
	    "flamegraph", "--pid", " 12");
	BAD("dump: --pid '0' is out of range (1 to 2147483647); see 'profctl dump --help'", "dump",
	    "flamegraph", "--pid", "0");
	BAD("dump: --pid '2147483648' is out of range (1 to 2147483647); see 'profctl dump "
	    "--help'",
	    "dump", "flamegraph", "--pid", "2147483648");
	BAD("dump: --tid '1.5' is not a positive integer; see 'profctl dump --help'", "dump",
	    "flamegraph", "--tid", "1.5");
	BAD("dump: --all-frames cannot go with --python-only; see 'profctl dump --help'", "dump",
	    "flamegraph", "--all-frames", "--python-only");
	BAD("dump: --all-frames is for flame graphs, not traces; see 'profctl dump --help'", "dump",
	    "trace", "--all-frames");
	BAD("dump: --tid '2' comes after another --tid; see 'profctl dump --help'", "dump",
	    "flamegraph", "--tid", "1", "--tid", "2");
	BAD("dump: --since '5x' is not a duration (like 30s, 5m, 1h); see 'profctl dump --help'",
	    "dump", "flamegraph", "--since", "5x");
	BAD("dump: --since '-5s' is not a duration (like 30s, 5m, 1h); see 'profctl dump --help'",
	    "dump", "flamegraph", "--since", "-5s");
	BAD("dump: --since '0' is out of range (more than 0, at most 365d); see 'profctl dump "
	    "--help'",
	    "dump", "flamegraph", "--since", "0");
	BAD("dump: --since '400d' is out of range (more than 0, at most 365d); see 'profctl dump "
	    "--help'",
	    "dump", "flamegraph", "--since", "400d");
	BAD("dump: --format 'png' is not folded, svg, pprof, speedscope or json; see 'profctl "
	    "dump --help'",
	    "dump", "flamegraph", "--format", "png");
	BAD("dump: --output '' is an empty file name; see 'profctl dump --help'", "dump",
	    "flamegraph", "-o", "");
	BAD("dump: --timeout '0' is not a duration from 1ms to 24h (like 30s, 5m); see 'profctl "
	    "dump --help'",
	    "dump", "flamegraph", "--timeout", "0");
	BAD("dump: option '--pid' needs a value; see 'profctl dump --help'", "dump", "flamegraph",
	    "--pid");
	BAD("dump: option '--output' needs a value; see 'profctl dump --help'", "dump",
	    "flamegraph", "-o");
	BAD("dump: unknown option '--pids'; see 'profctl dump --help'", "dump", "flamegraph",
	    "--pids", "3");
	BAD("dump: unknown option '-x'; see 'profctl dump --help'", "dump", "flamegraph", "-x");
	BAD("dump: unexpected argument 'extra'; see 'profctl dump --help'", "dump", "flamegraph",
	    "extra");
	BAD("dump: unknown kind 'flamegraf' (flamegraph, trace or stacks); see 'profctl dump "
	    "--help'",
	    "dump", "flamegraf");
	BAD("dump: say what to dump (flamegraph, trace or stacks); see 'profctl dump --help'",
	    "dump");
	BAD("dump: --value 'gpu-idle' is not cpu, gpu, gpu-kernels, copy, copy-bytes, launches, "
	    "off-cpu, wall, gpu-memory or gpu-memory-live; see 'profctl dump --help'",
	    "dump", "flamegraph", "--value", "gpu-idle");
	BAD("dump: --gpu-idle goes with --value cpu, off-cpu or wall, not gpu; see 'profctl dump "
	    "--help'",
	    "dump", "flamegraph", "--value", "gpu", "--gpu-idle");
	BAD("dump: --tid is for flame graphs, not traces; see 'profctl dump --help'", "dump",
	    "trace", "--tid", "3");
	BAD("dump: --value is for flame graphs, not traces; see 'profctl dump --help'", "dump",
	    "trace", "--value", "gpu");
	BAD("dump: --format is for flame graphs, not traces; see 'profctl dump --help'", "dump",
	    "trace", "--format", "json");
}

static void test_parse_dump_gpu(void)
{
	struct dump_args a;
	struct cli_error e;

	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph"), 0);
	CHECK_EQ_I(a.kind, DUMP_KIND_FLAMEGRAPH);
	CHECK_EQ_I(a.value, VALUE_CPU);
	CHECK(!a.nvtx && !a.gpu_idle);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--value", "copy-bytes", "--nvtx"), 0);
	CHECK_EQ_I(a.value, VALUE_COPY_BYTES);
	CHECK(a.nvtx);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--gpu-idle"), 0);
	CHECK_EQ_I(a.value, VALUE_GPU_IDLE);
	/* --value cpu says the same thing --gpu-idle starts from. */
	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--value=cpu", "--gpu-idle"), 0);
	CHECK_EQ_I(a.value, VALUE_GPU_IDLE);
	/* With off-CPU time: the parts of the waits, and of wall-clock time, the GPU was idle. */
	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--gpu-idle", "--value", "off-cpu"), 0);
	CHECK_EQ_I(a.value, VALUE_GPU_IDLE_OFFCPU);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--value", "wall", "--gpu-idle"), 0);
	CHECK_EQ_I(a.value, VALUE_GPU_IDLE_WALL);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "trace", "--pid", "9", "--since", "10s", "-o", "t.json"),
		   0);
	CHECK_EQ_I(a.kind, DUMP_KIND_TRACE);
	CHECK_EQ_U(a.q.n_pids, 1);
	CHECK_EQ_U(a.q.since_ns, 10000000000ull);
	CHECK_STREQ(a.output, "t.json");
	CHECK_EQ_I(PARSE(&a, &e, "dump", "trace", "--help"), 0);
	CHECK(a.help);

	/* dump stacks: one --pid, --json and -o; nothing of flame graphs or traces. */
	CHECK_EQ_I(PARSE(&a, &e, "dump", "stacks", "--pid", "42", "--json", "-o", "s.json"), 0);
	CHECK_EQ_I(a.kind, DUMP_KIND_STACKS);
	CHECK_EQ_U(a.q.n_pids, 1);
	CHECK_EQ_U(a.q.pids[0], 42);
	CHECK(a.json);
	CHECK_STREQ(a.output, "s.json");
	CHECK_EQ_I(PARSE(&a, &e, "dump", "stacks", "--pid", "42"), 0);
	CHECK(!a.json);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "stacks"), -EINVAL);
	CHECK(strstr(e.msg, "exactly one --pid") != NULL);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "stacks", "--pid", "1", "--pid", "2"), -EINVAL);
	CHECK(strstr(e.msg, "exactly one --pid") != NULL);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "stacks", "--pid", "1", "--since", "5s"), -EINVAL);
	CHECK(strstr(e.msg, "--since is not for stacks") != NULL);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "stacks", "--pid", "1", "--format", "json"), -EINVAL);
	CHECK(strstr(e.msg, "--format is not for stacks") != NULL);
	CHECK_EQ_I(e.code, PROFCTL_EXIT_USAGE);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--json"), -EINVAL);
	CHECK(strstr(e.msg, "--json is for stacks") != NULL);
	CHECK_EQ_I(PARSE(&a, &e, "dump", "stack", "--pid", "1"), -EINVAL);
	CHECK(strstr(e.msg, "flamegraph, trace or stacks") != NULL);
}

static void test_error_mapping(void)
{
	Profd__Error err = PROFD__ERROR__INIT;
	struct cli_error e;

	CHECK_EQ_I(cli_exit_for_error(PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED), 4);
	CHECK_EQ_I(cli_exit_for_error(PROFD__ERROR_CODE__ERROR_NO_SAMPLES), 5);
	CHECK_EQ_I(cli_exit_for_error(PROFD__ERROR_CODE__ERROR_NO_PROCESS), 5);
	CHECK_EQ_I(cli_exit_for_error(PROFD__ERROR_CODE__ERROR_UNSUPPORTED), 1);
	CHECK_EQ_I(cli_exit_for_error(PROFD__ERROR_CODE__ERROR_UNSUPPORTED_VERSION), 6);
	CHECK_EQ_I(cli_exit_for_error(PROFD__ERROR_CODE__ERROR_BAD_REQUEST), 6);
	CHECK_EQ_I(cli_exit_for_error(PROFD__ERROR_CODE__ERROR_INTERNAL), 1);
	CHECK_EQ_I(cli_exit_for_error(PROFD__ERROR_CODE__ERROR_TOO_LARGE), 1);
	CHECK_EQ_I(cli_exit_for_error(PROFD__ERROR_CODE__ERROR_BUSY), 1);
	CHECK_EQ_I(cli_exit_for_error((Profd__ErrorCode)99), 1);

	err.code = PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED;
	err.message = "permission denied: uid 1000 may not see pid 1 (owned by uid 0)";
	cli_error_from_reply(&e, &err);
	CHECK_EQ_I(e.code, PROFCTL_EXIT_PERMISSION);
	/* Printed as the daemon wrote it. */
	CHECK_STREQ(e.msg, "permission denied: uid 1000 may not see pid 1 (owned by uid 0)");
	err.message = "";
	cli_error_from_reply(&e, &err);
	CHECK_STREQ(e.msg, "permission denied");

	/* The daemon's text stays one line, without terminal escapes. */
	err.code = PROFD__ERROR_CODE__ERROR_NO_SAMPLES;
	err.message = "no samples\nfor pid 7\x1b[31m";
	cli_error_from_reply(&e, &err);
	CHECK_EQ_I(e.code, PROFCTL_EXIT_NO_SAMPLES);
	CHECK_STREQ(e.msg, "no samples?for pid 7?[31m");
}

/* ---- a fake daemon ------------------------------------------------------------------------- */

enum scenario {
	SC_NORMAL,	   /* hello, then status or a profile */
	SC_OLD_VERSION,	   /* HelloReply with another version */
	SC_REFUSE_VERSION, /* Error UNSUPPORTED_VERSION to the hello */
	SC_NO_SAMPLES,	   /* Error NO_SAMPLES to the dump */
	SC_DENIED,	   /* Error PERMISSION_DENIED to the dump */
	SC_SILENT,	   /* accept, read, never answer */
	SC_CLOSE,	   /* accept and close */
	SC_WRONG_KIND,	   /* answer a dump with a status reply */
	SC_BAD_PROFILE,	   /* a profile whose sample names a missing stack */
	SC_GPU,		   /* a daemon with GPU support: GPU columns, traces, GPU status */
};

struct fake {
	int lfd;
	char dir[32];
	char path[64];
	enum scenario sc;
	pthread_t thread;
	/* What the client asked, for the test to check. */
	int n_requests;
	uint32_t hello_version;
	uint32_t dump_pids[4];
	size_t n_dump_pids;
	bool dump_has_since;
	uint64_t dump_since_ns;
	int n_traces;
	uint32_t trace_pids[4];
	size_t n_trace_pids;
	uint64_t trace_since_ns;
	int cfd;
};

static int send_response(int fd, const Profd__Response *r)
{
	uint8_t *buf;
	size_t len;
	int err = wire_pack_response(r, FRAME_MAX_REPLY, &buf, &len);

	if (err)
		return err;
	if (write(fd, buf, len) != (ssize_t)len)
		err = -EIO;
	free(buf);
	return err;
}

static int send_error(int fd, Profd__ErrorCode code, const char *msg)
{
	Profd__Response r = PROFD__RESPONSE__INIT;
	Profd__Error e = PROFD__ERROR__INIT;

	e.code = code;
	e.message = (char *)msg;
	r.msg_case = PROFD__RESPONSE__MSG_ERROR;
	r.error = &e;
	return send_response(fd, &r);
}

static int send_status(int fd, bool gpu)
{
	Profd__Response r = PROFD__RESPONSE__INIT;
	Profd__StatusReply s = PROFD__STATUS_REPLY__INIT;
	uint32_t targets[] = {5, 6};

	s.daemon_version = "0.1.0";
	s.has_pid = 1;
	s.pid = 42;
	s.has_frequency_hz = 1;
	s.frequency_hz = 99;
	s.n_target_pids = 2;
	s.target_pids = targets;
	s.has_samples_received = 1;
	s.samples_received = 1000;
	s.has_realtime_offset_ns = 1;
	s.realtime_offset_ns = -5;
	s.has_system_wide = 1;
	s.system_wide = 0;
	r.msg_case = PROFD__RESPONSE__MSG_STATUS;
	if (gpu) {
		static Profd__GpuProcessStatus g0 = PROFD__GPU_PROCESS_STATUS__INIT,
					       g1 = PROFD__GPU_PROCESS_STATUS__INIT,
					       g2 = PROFD__GPU_PROCESS_STATUS__INIT;
		static Profd__GpuProcessStatus *gs[] = {&g0, &g1, &g2};

		g0.pid = 100;
		g0.state = PROFD__GPU_STATE__GPU_STATE_READY;
		g0.has_enabled = g0.enabled = 1;
		g0.has_clock = 1;
		g0.clock = PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK;
		g0.has_cupti_version = 1;
		g0.cupti_version = 130000;
		g0.has_zero_time_records = 1;
		g0.zero_time_records = 3;
		g0.has_forced_flushes = 1;
		g0.forced_flushes = 2;
		g0.has_max_delay_ms = 1;
		g0.max_delay_ms = 5000;
		g1.pid = 200;
		g1.state = PROFD__GPU_STATE__GPU_STATE_SUBSCRIBER_TAKEN;
		g1.detail = "cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED\n";
		s.has_gpu_processes = 1;
		s.gpu_processes = 2;
		s.has_gpu_launches = 1;
		s.gpu_launches = 500;
		s.has_gpu_records = 1;
		s.gpu_records = 520;
		s.has_gpu_joined = 1;
		s.gpu_joined = 498;
		s.has_gpu_unmatched = 1;
		s.gpu_unmatched = 2;
		g2.pid = 300;
		g2.state = PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN;
		g2.has_enabled = 1;
		g2.detail = "another CUPTI client took it";
		s.n_gpu = 3;
		s.gpu = gs;
	}
	if (gpu) {
		/* A backend in trouble: the text line must stay one line whatever it answered. */
		static Profd__ExportStatus x = PROFD__EXPORT_STATUS__INIT;
		static Profd__ExportStatus *xs[] = {&x};

		x.name = "pyroscope";
		x.url = "http://p:4040/push.v1.PusherService/Push";
		x.has_requests_sent = x.has_requests_retried = 1;
		x.requests_sent = 3;
		x.requests_retried = 2;
		x.has_samples_exported = x.has_samples_sent = 1;
		x.samples_exported = 10;
		x.samples_sent = 7;
		x.has_spool_bytes = x.has_spool_requests = x.has_oldest_age_ns = 1;
		x.spool_bytes = 2048;
		x.spool_requests = 2;
		x.oldest_age_ns = 65000000000ull;
		x.has_last_error_age_ns = 1;
		x.last_error_age_ns = 5000000000ull;
		x.last_error = "HTTP 401: no\nway";
		x.has_auth_failing = x.auth_failing = 1;
		s.n_export = 1;
		s.export = xs;
	}
	if (gpu) {
		/* Owners with a count (in the noun of each) and without. */
		static Profd__MemoryOwner m[3] = {PROFD__MEMORY_OWNER__INIT,
						  PROFD__MEMORY_OWNER__INIT,
						  PROFD__MEMORY_OWNER__INIT};
		static Profd__MemoryOwner *ms[] = {&m[0], &m[1], &m[2]};

		m[0].name = "ingest";
		m[0].has_bytes = m[0].has_count = 1;
		m[0].bytes = 1536 << 10;
		m[0].count = 1;
		m[1].name = "symbols";
		m[1].has_bytes = m[1].has_count = 1;
		m[1].bytes = 2048;
		m[1].count = 3;
		m[2].name = "other";
		m[2].has_bytes = 1;
		m[2].bytes = 25 << 20;
		s.n_memory = 3;
		s.memory = ms;
	}
	r.status = &s;
	return send_response(fd, &r);
}

/* main;work x3 in pid 5 ("app"), main x1 in pid 6 ("tool"). */
static int send_profile(int fd, bool broken)
{
	Profd__Response r = PROFD__RESPONSE__INIT;
	Profd__Profile p = PROFD__PROFILE__INIT;
	char *strings[] = {"", "main", "work", "app", "tool"};
	Profd__Frame f0 = PROFD__FRAME__INIT, f1 = PROFD__FRAME__INIT;
	Profd__Frame *frames[] = {&f0, &f1};
	uint32_t st0_frames[] = {1, 0}, st1_frames[] = {0};
	Profd__Stack st0 = PROFD__STACK__INIT, st1 = PROFD__STACK__INIT;
	Profd__Stack *stacks[] = {&st0, &st1};
	uint64_t v0 = 3, v1 = 1;
	Profd__Sample s0 = PROFD__SAMPLE__INIT, s1 = PROFD__SAMPLE__INIT;
	Profd__Sample *samples[] = {&s0, &s1};
	Profd__Process p0 = PROFD__PROCESS__INIT, p1 = PROFD__PROCESS__INIT;
	Profd__Process *procs[] = {&p0, &p1};

	f0.kind = f1.kind = PROFD__FRAME_KIND__FRAME_NATIVE;
	f0.name = 1;
	f1.name = 2;
	st0.n_frames = 2;
	st0.frames = st0_frames;
	st1.n_frames = 1;
	st1.frames = st1_frames;
	s0.stack = 0;
	s0.pid = s0.tid = 5;
	s0.n_values = 1;
	s0.values = &v0;
	s1.stack = broken ? 7 : 1;
	s1.pid = s1.tid = 6;
	s1.n_values = 1;
	s1.values = &v1;
	p0.pid = 5;
	p0.name = 3;
	p1.pid = 6;
	p1.name = 4;
	p.n_strings = 5;
	p.strings = strings;
	p.n_frames = 2;
	p.frames = frames;
	p.n_stacks = 2;
	p.stacks = stacks;
	p.n_samples = 2;
	p.samples = samples;
	p.n_processes = 2;
	p.processes = procs;
	r.msg_case = PROFD__RESPONSE__MSG_PROFILE;
	r.profile = &p;
	return send_response(fd, &r);
}

/*
 * pid 100 "trainer", root first: main;step;[nvtx] fwd... as the daemon would send them:
 *   [nvtx fwd];main;step                        cpu 4
 *   [nvtx fwd];main;loader                      cpu 2, idle 2
 *   [nvtx fwd];main;step;cudaLaunchKernel;gemm  gpu 3 ms, 2 kernels
 */
static void gpu_fixture(struct fixture *fx)
{
	fx_init_gpu(fx, 10000000);
	fx_proc(fx, 100, "trainer");
	fx_thread(fx, 100, 100, "trainer");
	uint32_t fwd = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NVTX, "fwd");
	uint32_t mn = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	uint32_t step = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "step");
	uint32_t loader = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "loader");
	uint32_t cl = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "cudaLaunchKernel");
	uint32_t gemm = fx_frame(fx, PROFD__FRAME_KIND__FRAME_GPU, "gemm");

	fx_sample_values(fx, fx_stack(fx, 3, (uint32_t[]){fwd, mn, step}), 100, 100, FX_GPU_COLUMNS,
			 (uint64_t[]){4, 0, 0, 0, 0, 0, 0});
	fx_sample_values(fx, fx_stack(fx, 3, (uint32_t[]){fwd, mn, loader}), 100, 100,
			 FX_GPU_COLUMNS, (uint64_t[]){2, 2, 0, 0, 0, 0, 0});
	fx_sample_values(fx, fx_stack(fx, 5, (uint32_t[]){fwd, mn, step, cl, gemm}), 100, 100,
			 FX_GPU_COLUMNS, (uint64_t[]){0, 0, 3000000, 2, 0, 0, 0});
}

static int send_gpu_profile(int fd)
{
	Profd__Response r = PROFD__RESPONSE__INIT;
	struct fixture fx;

	gpu_fixture(&fx);
	r.msg_case = PROFD__RESPONSE__MSG_PROFILE;
	r.profile = &fx.p;
	return send_response(fd, &r);
}

/* Two gemm kernels of 1 ms and 2 ms in a 10 ms window, one launch, one sample. */
static int send_trace(int fd)
{
	Profd__Response r = PROFD__RESPONSE__INIT;
	struct fixture fx;
	struct trace_fixture tx;

	gpu_fixture(&fx);
	tx_init(&tx, &fx, 1000000000, 1010000000);
	tx_api(&tx, 1001000000, 1001100000, 100, 100, 5, "cudaLaunchKernel");
	tx_launch(&tx, 1001050000, 100, 100, 2, 5);
	tx_kernel(&tx, 1002000000, 1003000000, 100, 5, "gemm", 0, 7);
	tx_kernel(&tx, 1004000000, 1006000000, 100, 6, "gemm", 0, 7);
	tx_sample(&tx, 1005000000, 100, 100, 1);
	r.msg_case = PROFD__RESPONSE__MSG_TRACE;
	r.trace = &tx.t;
	return send_response(fd, &r);
}

static int on_request(const uint8_t *body, size_t len, void *ctx)
{
	struct fake *fk = ctx;
	Profd__Request *req = profd__request__unpack(NULL, len, body);
	Profd__Response r = PROFD__RESPONSE__INIT;
	Profd__HelloReply hr = PROFD__HELLO_REPLY__INIT;
	int err = 0;

	if (!req)
		return -EBADMSG;
	fk->n_requests++;
	switch (req->msg_case) {
	case PROFD__REQUEST__MSG_HELLO:
		fk->hello_version = req->hello->protocol_version;
		if (fk->sc == SC_SILENT)
			break;
		if (fk->sc == SC_REFUSE_VERSION) {
			err = send_error(fk->cfd, PROFD__ERROR_CODE__ERROR_UNSUPPORTED_VERSION,
					 "this daemon speaks protocol 3");
			break;
		}
		hr.protocol_version = fk->sc == SC_OLD_VERSION ? 2 : PROFD_PROTOCOL_VERSION;
		r.msg_case = PROFD__RESPONSE__MSG_HELLO;
		r.hello = &hr;
		err = send_response(fk->cfd, &r);
		break;
	case PROFD__REQUEST__MSG_STATUS:
		err = send_status(fk->cfd, fk->sc == SC_GPU);
		break;
	case PROFD__REQUEST__MSG_DUMP:
		fk->n_dump_pids = req->dump->n_pids < 4 ? req->dump->n_pids : 4;
		for (size_t i = 0; i < fk->n_dump_pids; i++)
			fk->dump_pids[i] = req->dump->pids[i];
		fk->dump_has_since = req->dump->has_since_ns;
		fk->dump_since_ns = req->dump->since_ns;
		if (fk->sc == SC_NO_SAMPLES)
			err = send_error(fk->cfd, PROFD__ERROR_CODE__ERROR_NO_SAMPLES,
					 "no samples for pid 5 in the last 30s");
		else if (fk->sc == SC_DENIED)
			err = send_error(fk->cfd, PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED,
					 "permission denied: uid 1000 may not see pid 1");
		else if (fk->sc == SC_WRONG_KIND)
			err = send_status(fk->cfd, false);
		else if (fk->sc == SC_GPU)
			err = send_gpu_profile(fk->cfd);
		else
			err = send_profile(fk->cfd, fk->sc == SC_BAD_PROFILE);
		break;
	case PROFD__REQUEST__MSG_TRACE:
		fk->n_traces++;
		fk->n_trace_pids = req->trace->n_pids < 4 ? req->trace->n_pids : 4;
		for (size_t i = 0; i < fk->n_trace_pids; i++)
			fk->trace_pids[i] = req->trace->pids[i];
		fk->trace_since_ns = req->trace->since_ns;
		/* An older daemon does not know the request and hangs up. */
		err = fk->sc == SC_GPU ? send_trace(fk->cfd) : -EPROTO;
		break;
	default:
		err = -EPROTO;
	}
	profd__request__free_unpacked(req, NULL);
	return err;
}

static void *fake_main(void *arg)
{
	struct fake *fk = arg;
	struct frame_reader *r = frame_reader__new(FRAME_MAX_REQUEST);
	uint8_t buf[4096];
	ssize_t n;

	fk->cfd = accept(fk->lfd, NULL, NULL);
	if (fk->cfd < 0 || !r)
		goto out;
	if (fk->sc == SC_CLOSE)
		goto out;
	/* Serve until the client hangs up. */
	while ((n = read(fk->cfd, buf, sizeof(buf))) > 0)
		if (frame_reader__feed(r, buf, (size_t)n, on_request, fk) < 0)
			break;
out:
	if (fk->cfd >= 0)
		close(fk->cfd);
	frame_reader__free(r);
	return NULL;
}

static int fake_start(struct fake *fk, enum scenario sc)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};

	memset(fk, 0, sizeof(*fk));
	fk->sc = sc;
	fk->cfd = -1;
	snprintf(fk->dir, sizeof(fk->dir), "/tmp/test_profctl_XXXXXX");
	if (!mkdtemp(fk->dir))
		return -errno;
	snprintf(fk->path, sizeof(fk->path), "%s/profd.sock", fk->dir);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", fk->path);
	fk->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fk->lfd < 0 || bind(fk->lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(fk->lfd, 4) < 0)
		return -errno;
	return -pthread_create(&fk->thread, NULL, fake_main, fk);
}

static void fake_stop(struct fake *fk)
{
	pthread_join(fk->thread, NULL);
	close(fk->lfd);
	unlink(fk->path);
	rmdir(fk->dir);
}

/* Run a command with its stdout in a file; returns the exit code and the output. */
static int run_cmd(int (*cmd)(int, char **, const struct global_opts *), int argc, char **argv,
		   const struct global_opts *g, char *out, size_t out_len)
{
	char path[] = "/tmp/test_profctl_out_XXXXXX";
	int fd = mkstemp(path), saved, rc;
	ssize_t n;

	fflush(stdout);
	saved = dup(1);
	dup2(fd, 1);
	rc = cmd(argc, argv, g);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	n = pread(fd, out, out_len - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
	return rc;
}

static void test_status(void)
{
	struct fake fk;
	struct global_opts g = {0};
	char out[4096];

	CHECK_EQ_I(fake_start(&fk, SC_NORMAL), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_status, 2, ARGV("status", "--json"), &g, out, sizeof(out)), 0);
	fake_stop(&fk);
	CHECK_STREQ(out, "{\"daemon_version\": \"0.1.0\", \"pid\": 42, \"frequency_hz\": 99, "
			 "\"system_wide\": false, \"target_pids\": [5, 6], "
			 "\"samples_received\": 1000, \"realtime_offset_ns\": -5, \"gpu\": [], "
			 "\"export\": [], \"memory\": []}\n");
	CHECK_EQ_U(fk.hello_version, PROFD_PROTOCOL_VERSION);
	CHECK_EQ_I(fk.n_requests, 2);

	CHECK_EQ_I(fake_start(&fk, SC_NORMAL), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_status, 1, ARGV("status"), &g, out, sizeof(out)), 0);
	fake_stop(&fk);
	CHECK(strstr(out, "profd 0.1.0, pid 42\n") == out);
	CHECK(strstr(out, "\nsampling:     99 Hz on 0 CPUs, pids 5, 6\n") != NULL);
	CHECK(strstr(out, "\nsamples:      1000 received, 0 lost (ring buffer full), 0 evicted "
			  "(memory cap)\n") != NULL);
	CHECK(strstr(out, "\ntime range:   no samples yet\n") != NULL);
	/* No GPU counters from this daemon: no GPU lines. */
	CHECK(strstr(out, "gpu:") == NULL);

	CHECK_EQ_I(fake_start(&fk, SC_GPU), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_status, 1, ARGV("status"), &g, out, sizeof(out)), 0);
	fake_stop(&fk);
	CHECK(strstr(out,
		     "\ngpu:          2 processes, 500 launches, 520 records, 498 joined, 2 "
		     "unmatched, 0 dropped, 0 uprobe launches\n"
		     "  pid 100:    ready, collecting, clock monotonic callback, CUPTI 130000, "
		     "delay bound 5000 ms, 3 without timestamps, 2 forced flushes\n"
		     "  pid 200:    CUPTI subscriber taken by another tool: cuptiSubscribe: "
		     "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED?\n"
		     "  pid 300:    stopped: CUPTI activity taken by another tool in the process, "
		     "idle: another CUPTI client took it\n"
		     "clients:") != NULL);
	CHECK(
	    strstr(out,
		   "\nexport pyroscope http://p:4040/push.v1.PusherService/Push: last "
		   "success never, last error 5.0 s ago (HTTP 401: no?way); requests 3 "
		   "sent, 2 retried, 0 dropped, 0 expired, 0 quarantined; samples 10 "
		   "exported, 7 sent; spool 2.0 KiB in 2 requests, oldest 1m 5s; quarantine 0 "
		   "requests in 0 B, 0 dropped; THE BACKEND REFUSES THE CREDENTIALS (401/403)\n") !=
	    NULL);
	CHECK(strstr(out, "\nmemory:       ingest            1.5 MiB  1 process\n"
			  "              symbols           2.0 KiB  3 files\n"
			  "              other            25.0 MiB\n") != NULL);

	CHECK_EQ_I(fake_start(&fk, SC_GPU), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_status, 2, ARGV("status", "--json"), &g, out, sizeof(out)), 0);
	fake_stop(&fk);
	CHECK(strstr(out,
		     "\"gpu_processes\": 2, \"gpu_launches\": 500, \"gpu_records\": 520, "
		     "\"gpu_joined\": 498, \"gpu_unmatched\": 2, \"gpu\": [{\"pid\": 100, "
		     "\"state\": \"GPU_STATE_READY\", \"enabled\": true, \"clock\": "
		     "\"GPU_CLOCK_CALLBACK\", \"cupti_version\": 130000, \"zero_time_records\": 3, "
		     "\"forced_flushes\": 2, \"max_delay_ms\": 5000}, {\"pid\": 200, "
		     "\"state\": \"GPU_STATE_SUBSCRIBER_TAKEN\", \"detail\": \"cuptiSubscribe: "
		     "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED\\n\"}, {\"pid\": 300, "
		     "\"state\": \"GPU_STATE_ACTIVITY_TAKEN\", \"detail\": \"another CUPTI client "
		     "took it\", \"enabled\": false}], \"export\": [{") != NULL);
	CHECK(strstr(out, "\"export\": [{\"name\": \"pyroscope\", \"url\": "
			  "\"http://p:4040/push.v1.PusherService/Push\", \"requests_sent\": 3, "
			  "\"requests_retried\": 2, \"samples_exported\": 10, \"samples_sent\": 7, "
			  "\"spool_bytes\": 2048, \"spool_requests\": 2, \"oldest_age_ns\": "
			  "65000000000, \"last_error_age_ns\": 5000000000, \"last_error\": \"HTTP "
			  "401: no\\nway\", \"auth_failing\": true}], \"memory\": [{\"name\": "
			  "\"ingest\", \"bytes\": 1572864, \"count\": 1}, {\"name\": \"symbols\", "
			  "\"bytes\": 2048, \"count\": 3}, {\"name\": \"other\", \"bytes\": "
			  "26214400}]}\n") != NULL);
}

/* The GPU views end to end against the fake daemon, and what an older daemon gets. */
static void test_gpu_commands(void)
{
	struct global_opts g = {0};
	struct fake fk;
	char dir[] = "/tmp/test_profctl_gpu_XXXXXX", file[128], out[8192];
	FILE *f;
	size_t n;

	CHECK_EQ_I(fake_start(&fk, SC_GPU), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_dump, 6,
			   ARGV("dump", "flamegraph", "--pid", "100", "--value", "gpu"), &g, out,
			   sizeof(out)),
		   0);
	fake_stop(&fk);
	CHECK_STREQ(out, "main;step;cudaLaunchKernel;gemm_[g] 3000000\n");

	CHECK_EQ_I(fake_start(&fk, SC_GPU), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_dump, 6,
			   ARGV("dump", "flamegraph", "--pid", "100", "--gpu-idle", "--nvtx"), &g,
			   out, sizeof(out)),
		   0);
	fake_stop(&fk);
	CHECK_STREQ(out, "[nvtx] fwd;main;loader 2\n");

	/* The default stays the CPU flame graph, NVTX stripped. */
	CHECK_EQ_I(fake_start(&fk, SC_GPU), 0);
	g.socket = fk.path;
	CHECK_EQ_I(
	    run_cmd(cmd_dump, 4, ARGV("dump", "flamegraph", "--pid", "100"), &g, out, sizeof(out)),
	    0);
	fake_stop(&fk);
	CHECK_STREQ(out, "main;loader 2\nmain;step 4\n");

	/* dump trace to a file. */
	CHECK(mkdtemp(dir) != NULL);
	snprintf(file, sizeof(file), "%s/trace.json", dir);
	CHECK_EQ_I(fake_start(&fk, SC_GPU), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_dump, 8,
			   ARGV("dump", "trace", "--pid", "100", "--since", "10s", "-o", file), &g,
			   out, sizeof(out)),
		   0);
	fake_stop(&fk);
	CHECK_STREQ(out, "");
	CHECK_EQ_I(fk.n_traces, 1);
	CHECK_EQ_U(fk.n_trace_pids, 1);
	CHECK_EQ_U(fk.trace_pids[0], 100);
	CHECK_EQ_U(fk.trace_since_ns, 10000000000ull);
	f = fopen(file, "r");
	CHECK(f != NULL);
	if (f) {
		n = fread(out, 1, sizeof(out) - 1, f);
		out[n] = '\0';
		fclose(f);
		CHECK(strstr(out, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n") == out);
		CHECK(strstr(out, "\"ts\": 1002000.000, \"dur\": 1000.000, \"name\": \"gemm\"") !=
		      NULL);
		CHECK(strstr(out, "{\"ph\": \"s\", \"pid\": 100, \"tid\": 100, \"ts\": "
				  "1001050.000, \"id\": 1") != NULL);
		unlink(file);
	}
	CHECK_EQ_I(rmdir(dir), 0);

	/* report: busy 3 ms of 10 ms from the trace, the rest from the profile. */
	CHECK_EQ_I(fake_start(&fk, SC_GPU), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_report, 3, ARGV("report", "--pid", "100"), &g, out, sizeof(out)), 0);
	fake_stop(&fk);
	CHECK(strstr(out, "Window: 10.00 ms of the daemon's trace ring\n"
			  "GPU busy: 30.0% (3.00 ms with a kernel running, 2 kernels)\n") == out);
	CHECK(strstr(out, "       3.00 ms  100.0%         2  gemm\n") != NULL);
	CHECK(strstr(out, "       3.00 ms  100.0%         2  cudaLaunchKernel\n") != NULL);
	CHECK(strstr(out, "(2 of 6 CPU samples, 33.3%)") != NULL);

	/* An older daemon: only "samples", no trace. */
	CHECK_EQ_I(fake_start(&fk, SC_NORMAL), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_dump, 4, ARGV("dump", "flamegraph", "--value", "gpu"), &g, out,
			   sizeof(out)),
		   PROFCTL_EXIT_NO_SAMPLES);
	fake_stop(&fk);
	CHECK_STREQ(out, "");
	CHECK_EQ_I(fake_start(&fk, SC_NORMAL), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_report, 1, ARGV("report"), &g, out, sizeof(out)), 0);
	fake_stop(&fk);
	CHECK(strstr(out, "GPU busy: unknown (the daemon sent no trace)\n") == out);
	CHECK(strstr(out, "Top kernels by GPU time: none (the profile has no gpu_time column)") !=
	      NULL);
	CHECK_EQ_I(fake_start(&fk, SC_NORMAL), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_dump, 2, ARGV("dump", "trace"), &g, out, sizeof(out)),
		   PROFCTL_EXIT_UNREACHABLE);
	fake_stop(&fk);
}

static void test_dump_to_file(void)
{
	struct global_opts g = {0};
	struct fake fk;
	char dir[] = "/tmp/test_profctl_dump_XXXXXX", file[128], out[4096];
	FILE *f;
	size_t n;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(file, sizeof(file), "%s/cpu.folded", dir);

	CHECK_EQ_I(fake_start(&fk, SC_NORMAL), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_dump, 6, ARGV("dump", "flamegraph", "--since", "30s", "-o", file),
			   &g, out, sizeof(out)),
		   0);
	fake_stop(&fk);
	CHECK_STREQ(out, ""); /* all of it went to the file */
	CHECK_EQ_U(fk.n_dump_pids, 0);
	CHECK(fk.dump_has_since);
	CHECK_EQ_U(fk.dump_since_ns, 30000000000ull);
	f = fopen(file, "r");
	CHECK(f != NULL);
	if (f) {
		n = fread(out, 1, sizeof(out) - 1, f);
		out[n] = '\0';
		fclose(f);
		/* No --pid: each process under its own name. */
		CHECK_STREQ(out, "app;main;work 3\ntool;main 1\n");
	}

	/* With --pid the stacks start at the program's own root; output on stdout. */
	CHECK_EQ_I(fake_start(&fk, SC_NORMAL), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_dump, 6, ARGV("dump", "flamegraph", "--pid", "5", "--pid", "6"), &g,
			   out, sizeof(out)),
		   0);
	fake_stop(&fk);
	CHECK_STREQ(out, "main 1\nmain;work 3\n");
	CHECK_EQ_U(fk.n_dump_pids, 2);
	CHECK_EQ_U(fk.dump_pids[0], 5);
	CHECK_EQ_U(fk.dump_pids[1], 6);
	CHECK(!fk.dump_has_since);

	/* The SVG's title names each process once, also under --children (its root frames
	 * read "pid N (NAME)"; the title read "pid 5 (pid 5 (app))"). */
	{
		static char svg[1 << 16];

		CHECK_EQ_I(fake_start(&fk, SC_NORMAL), 0);
		g.socket = fk.path;
		CHECK_EQ_I(run_cmd(cmd_dump, 7,
				   ARGV("dump", "flamegraph", "--pid", "5", "--children",
					"--format", "svg"),
				   &g, svg, sizeof(svg)),
			   0);
		fake_stop(&fk);
		CHECK(strstr(svg, ">CPU flame graph: pid 5 (app)</text>") != NULL);
		CHECK(strstr(svg, "(pid 5 (app))") == NULL);
	}

	/* The file gets the mode open() would give it, not mkstemp's 0600. */
	{
		struct stat st;
		mode_t mask = umask(022);

		CHECK_EQ_I(stat(file, &st), 0);
		CHECK_EQ_U(st.st_mode & 0777, 0666 & ~mask);
		umask(mask);
	}

	/* A directory that does not exist: exit 1, nothing left behind. */
	CHECK_EQ_I(fake_start(&fk, SC_NORMAL), 0);
	g.socket = fk.path;
	snprintf(file, sizeof(file), "%s/missing/cpu.svg", dir);
	CHECK_EQ_I(
	    run_cmd(cmd_dump, 4, ARGV("dump", "flamegraph", "-o", file), &g, out, sizeof(out)),
	    PROFCTL_EXIT_ERROR);
	fake_stop(&fk);

	snprintf(file, sizeof(file), "%s/cpu.folded", dir);
	unlink(file);
	CHECK_EQ_I(rmdir(dir), 0); /* fails if a temporary file was left */
}

/* conn__open (and a dump when it gets that far) against scenario sc: the error it ends in. */
static void expect_failure(enum scenario sc, int code, const char *msg_part)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__DumpRequest d = PROFD__DUMP_REQUEST__INIT;
	Profd__Response *resp = NULL;
	struct cli_error e = {0};
	struct fake fk;
	struct conn *c;

	CHECK_EQ_I(fake_start(&fk, sc), 0);
	c = conn__open(fk.path, 300000000ull, &e);
	if (c) {
		req.msg_case = PROFD__REQUEST__MSG_DUMP;
		req.dump = &d;
		CHECK(conn__call(c, &req, PROFD__RESPONSE__MSG_PROFILE, &resp, &e) < 0);
		conn__free(c);
	}
	fake_stop(&fk);
	CHECK_EQ_I(e.code, code);
	if (!strstr(e.msg, msg_part)) {
		fprintf(stderr, "scenario %d: \"%s\" lacks \"%s\"\n", sc, e.msg, msg_part);
		CHECK(0);
	}
}

static void test_failures(void)
{
	struct cli_error e = {0};
	char path[200];

	expect_failure(SC_OLD_VERSION, PROFCTL_EXIT_PROTOCOL,
		       "protocol version mismatch: the daemon at ");
	expect_failure(SC_OLD_VERSION, PROFCTL_EXIT_PROTOCOL,
		       " speaks version 2, profctl speaks 1: install matching versions");
	expect_failure(SC_REFUSE_VERSION, PROFCTL_EXIT_PROTOCOL,
		       "refused protocol version 1 (this daemon "
		       "speaks protocol 3)");
	expect_failure(SC_NO_SAMPLES, PROFCTL_EXIT_NO_SAMPLES,
		       "no samples for pid 5 in the last 30s");
	expect_failure(SC_DENIED, PROFCTL_EXIT_PERMISSION,
		       "permission denied: uid 1000 may not see pid 1");
	expect_failure(SC_SILENT, PROFCTL_EXIT_TIMEOUT, "within 300 ms: it may be busy");
	expect_failure(SC_CLOSE, PROFCTL_EXIT_UNREACHABLE, "closed the connection");
	expect_failure(SC_WRONG_KIND, PROFCTL_EXIT_PROTOCOL,
		       "answered with a status reply where profctl expected profile");

	CHECK(conn__open("/nonexistent/profd.sock", 1000000000ull, &e) == NULL);
	CHECK_EQ_I(e.code, PROFCTL_EXIT_UNREACHABLE);
	CHECK_STREQ(e.msg, "no daemon at /nonexistent/profd.sock: start it with `sudo profd` or "
			   "pass --socket");

	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	CHECK(conn__open(path, 1000000000ull, &e) == NULL);
	CHECK_EQ_I(e.code, PROFCTL_EXIT_USAGE);
}

static void test_bad_profile(void)
{
	struct global_opts g = {0};
	struct fake fk;
	char out[256];

	CHECK_EQ_I(fake_start(&fk, SC_BAD_PROFILE), 0);
	g.socket = fk.path;
	CHECK_EQ_I(run_cmd(cmd_dump, 2, ARGV("dump", "flamegraph"), &g, out, sizeof(out)),
		   PROFCTL_EXIT_PROTOCOL);
	fake_stop(&fk);
	CHECK_STREQ(out, "");
}

int main(void)
{
	test_parse_dump();
	test_parse_dump_errors();
	test_parse_dump_gpu();
	test_error_mapping();
	test_status();
	test_dump_to_file();
	test_failures();
	test_bad_profile();
	test_gpu_commands();
	return CHECK_DONE();
}
