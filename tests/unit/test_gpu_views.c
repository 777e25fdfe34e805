// SPDX-License-Identifier: BSD-2-Clause
/*
 * GPU value columns in the flame graph formats: --value picks a column by name, --gpu-idle the
 * idle column, NVTX frames are stripped unless --nvtx, GPU leaves read NAME_[g], and each
 * format shows the chosen value in its unit.
 *
 * The profile (pid 100, root first):
 *   epoch;step;main;train_step;                              cpu 5
 *   epoch;main;load_batch                                    cpu 3, idle 3
 *   epoch;step;main;train_step;cudaLaunchKernel;sgemm        gpu_time 2 ms, kernels 4
 *   main;train_step;[memcpy HtoD]                            copy 1.5 ms, 3 MiB
 *   main;train_step;cudaLaunchKernel                         uprobe launches 7
 * where epoch and step are NVTX ranges.
 */
#include "check.h"
#include "cli.h"
#include "fetch.h"
#include "format.h"
#include "profile.h"
#include "profile_fixture.h"
#include "value.h"

#include <errno.h>

static void fx_gpu(struct fixture *fx)
{
	fx_init_gpu(fx, 10000000);
	fx_proc(fx, 100, "python3");
	uint32_t epoch = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NVTX, "epoch");
	uint32_t step = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NVTX, "step");
	uint32_t mn = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	uint32_t train = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_PYTHON, "train_step", NULL, 0,
				       "/src/train.py", 42);
	uint32_t load = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_PYTHON, "load_batch", NULL, 0,
				      "/src/data.py", 10);
	uint32_t launch = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "cudaLaunchKernel");
	uint32_t sgemm = fx_frame(fx, PROFD__FRAME_KIND__FRAME_GPU, "sgemm");
	uint32_t memcpy_f = fx_frame(fx, PROFD__FRAME_KIND__FRAME_GPU, "[memcpy HtoD]");

	uint32_t s_cpu = fx_stack(fx, 4, (uint32_t[]){epoch, step, mn, train});
	uint32_t s_idle = fx_stack(fx, 3, (uint32_t[]){epoch, mn, load});
	uint32_t s_gpu = fx_stack(fx, 6, (uint32_t[]){epoch, step, mn, train, launch, sgemm});
	uint32_t s_copy = fx_stack(fx, 3, (uint32_t[]){mn, train, memcpy_f});
	uint32_t s_up = fx_stack(fx, 3, (uint32_t[]){mn, train, launch});

	fx_sample_values(fx, s_cpu, 100, 100, FX_GPU_COLUMNS, (uint64_t[]){5, 0, 0, 0, 0, 0, 0});
	fx_sample_values(fx, s_idle, 100, 101, FX_GPU_COLUMNS, (uint64_t[]){3, 3, 0, 0, 0, 0, 0});
	fx_sample_values(fx, s_gpu, 100, 100, FX_GPU_COLUMNS,
			 (uint64_t[]){0, 0, 2000000, 4, 0, 0, 0});
	fx_sample_values(fx, s_copy, 100, 100, FX_GPU_COLUMNS,
			 (uint64_t[]){0, 0, 0, 0, 1500000, 3 * 1048576, 0});
	fx_sample_values(fx, s_up, 100, 100, FX_GPU_COLUMNS, (uint64_t[]){0, 0, 0, 0, 0, 0, 7});
}

/* Render p with fn, value column vi; returns a malloc'd string or NULL. */
static char *render(int (*fn)(const Profd__Profile *, const struct render_opts *, FILE *),
		    const Profd__Profile *p, uint32_t vi)
{
	struct render_opts o = {.value_index = vi};
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);
	int err;

	if (!f)
		return NULL;
	err = fn(p, &o, f);
	fclose(f);
	if (err) {
		fprintf(stderr, "render failed: %d\n", err);
		free(buf);
		return NULL;
	}
	return buf;
}

/* The folded output of the fixture as `dump flamegraph --value V [--nvtx]` gives it. */
static void check_folded(int value, bool nvtx, const char *want)
{
	struct fixture fx;
	struct cli_error e = {0};
	uint32_t vi = UINT32_MAX;
	char *out;

	fx_gpu(&fx);
	CHECK_EQ_I(fetch_select_value(&fx.p, value, &vi, &e), 0);
	if (!nvtx)
		profile_strip_nvtx(&fx.p);
	out = render(format_folded, &fx.p, vi);
	CHECK(out != NULL);
	if (out)
		CHECK_STREQ(out, want);
	free(out);
}

static void test_value_folded(void)
{
	check_folded(VALUE_CPU, false,
		     "main;load_batch (data.py:10) 3\n"
		     "main;train_step (train.py:42) 5\n");
	check_folded(VALUE_GPU_IDLE, false, "main;load_batch (data.py:10) 3\n");
	check_folded(VALUE_GPU, false,
		     "main;train_step (train.py:42);cudaLaunchKernel;sgemm_[g] "
		     "2000000\n");
	check_folded(VALUE_GPU_KERNELS, false,
		     "main;train_step (train.py:42);cudaLaunchKernel;sgemm_[g] 4\n");
	check_folded(VALUE_COPY, false,
		     "main;train_step (train.py:42);[memcpy HtoD]_[g] 1500000\n");
	check_folded(VALUE_COPY_BYTES, false,
		     "main;train_step (train.py:42);[memcpy HtoD]_[g] 3145728\n");
	check_folded(VALUE_LAUNCHES, false, "main;train_step (train.py:42);cudaLaunchKernel 7\n");
	/* --nvtx: the ranges stay at the root, outermost first. */
	check_folded(VALUE_CPU, true,
		     "[nvtx] epoch;[nvtx] step;main;train_step (train.py:42) 5\n"
		     "[nvtx] epoch;main;load_batch (data.py:10) 3\n");
	check_folded(VALUE_GPU, true,
		     "[nvtx] epoch;[nvtx] step;main;train_step (train.py:42);cudaLaunchKernel;"
		     "sgemm_[g] 2000000\n");
}

/* Columns are found by name: a daemon may send them in any order. */
static void test_value_by_name(void)
{
	struct fixture fx;
	struct cli_error e = {0};
	uint32_t vi = 99;
	char *out;

	fx_init(&fx);
	fx_value_type(&fx, "gpu_time", "nanoseconds");
	fx_value_type(&fx, "samples", "count");
	uint32_t a = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "a");
	uint32_t k = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_GPU, "k");
	uint32_t sa = fx_stack(&fx, 1, (uint32_t[]){a});
	uint32_t sk = fx_stack(&fx, 2, (uint32_t[]){a, k});

	fx_sample_values(&fx, sa, 1, 1, 2, (uint64_t[]){0, 9});
	fx_sample_values(&fx, sk, 1, 1, 2, (uint64_t[]){250, 0});
	CHECK_EQ_I(fetch_select_value(&fx.p, VALUE_CPU, &vi, &e), 0);
	CHECK_EQ_U(vi, 1);
	out = render(format_folded, &fx.p, vi);
	CHECK_STREQ(out ? out : "", "a 9\n");
	free(out);
	CHECK_EQ_I(fetch_select_value(&fx.p, VALUE_GPU, &vi, &e), 0);
	CHECK_EQ_U(vi, 0);
	out = render(format_folded, &fx.p, vi);
	CHECK_STREQ(out ? out : "", "a;k_[g] 250\n");
	free(out);
}

/* A daemon without GPU support sends only "samples": a clear error, exit code 5. */
static void test_value_missing(void)
{
	struct fixture fx;
	struct cli_error e = {0};
	uint32_t vi = 7;

	fx_init_samples(&fx, 0);
	uint32_t a = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "a");
	fx_sample(&fx, fx_stack(&fx, 1, (uint32_t[]){a}), 1, 4);

	CHECK_EQ_I(fetch_select_value(&fx.p, VALUE_CPU, &vi, &e), 0);
	CHECK_EQ_U(vi, 0);
	CHECK_EQ_I(fetch_select_value(&fx.p, VALUE_GPU, &vi, &e), -ENODATA);
	CHECK_EQ_I(e.code, PROFCTL_EXIT_NO_SAMPLES);
	CHECK_STREQ(e.msg, "the profile has no gpu_time values: the daemon does not collect them "
			   "(GPU support missing, or a daemon older than profctl)");
	e = (struct cli_error){0};
	CHECK_EQ_I(fetch_select_value(&fx.p, VALUE_GPU_IDLE, &vi, &e), -ENODATA);
	CHECK_EQ_I(e.code, PROFCTL_EXIT_NO_SAMPLES);
	CHECK(strstr(e.msg, "no gpu_idle_samples values") != NULL);

	/* The column exists but nothing in it. */
	fx_init_gpu(&fx, 0);
	a = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "a");
	fx_sample_values(&fx, fx_stack(&fx, 1, (uint32_t[]){a}), 1, 1, FX_GPU_COLUMNS,
			 (uint64_t[]){4, 0, 0, 0, 0, 0, 0});
	e = (struct cli_error){0};
	CHECK_EQ_I(fetch_select_value(&fx.p, VALUE_COPY, &vi, &e), -ENODATA);
	CHECK_EQ_I(e.code, PROFCTL_EXIT_NO_SAMPLES);
	CHECK_STREQ(e.msg, "no copy_time in the window: widen --since or check the --pid (is the "
			   "process's GPU library attached?)");
}

static void test_value_parse(void)
{
	enum value_kind k = VALUE_CPU;

	CHECK_EQ_I(value_parse("gpu", &k), 0);
	CHECK_EQ_I(k, VALUE_GPU);
	CHECK_EQ_I(value_parse("copy-bytes", &k), 0);
	CHECK_EQ_I(k, VALUE_COPY_BYTES);
	CHECK_EQ_I(value_parse("launches", &k), 0);
	CHECK_STREQ(value_column_name(k), "uprobe_launches");
	CHECK_EQ_I(value_parse("gpu-idle", &k), -EINVAL); /* its own option */
	CHECK_EQ_I(value_parse("GPU", &k), -EINVAL);
	CHECK_EQ_I(value_parse("", &k), -EINVAL);
}

static void test_fmt_value(void)
{
	char b[32];

	CHECK_STREQ(fmt_value(999, "nanoseconds", b, sizeof(b)), "999 ns");
	CHECK_STREQ(fmt_value(12500, "nanoseconds", b, sizeof(b)), "12.5 us");
	CHECK_STREQ(fmt_value(2000000, "nanoseconds", b, sizeof(b)), "2.00 ms");
	CHECK_STREQ(fmt_value(1500000000, "nanoseconds", b, sizeof(b)), "1.500 s");
	CHECK_STREQ(fmt_value(512, "bytes", b, sizeof(b)), "512 B");
	CHECK_STREQ(fmt_value(1536, "bytes", b, sizeof(b)), "1.5 KiB");
	CHECK_STREQ(fmt_value(3 * 1048576, "bytes", b, sizeof(b)), "3.0 MiB");
	CHECK_STREQ(fmt_value(42, "count", b, sizeof(b)), "42");
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static void test_svg_units(void)
{
	struct fixture fx;
	char *out;

	fx_gpu(&fx);
	profile_strip_nvtx(&fx.p);
	out = render(format_svg, &fx.p, 2); /* gpu_time */
	CHECK(out != NULL);
	if (out) {
		CHECK_EQ_U(count(out, "<title>sgemm_[g] (2.00 ms, 100.00%)</title>"), 1);
		CHECK_EQ_U(count(out, "<title>all (2.00 ms, 100.00%)</title>"), 1);
		CHECK_EQ_U(count(out, ">2.00 ms of gpu_time, sampled at"), 0); /* no frequency */
		CHECK_EQ_U(count(out, ">2.00 ms of gpu_time</text>"), 1);
		/* Only the GPU stack is drawn. */
		CHECK_EQ_U(count(out, "load_batch"), 0);
	}
	free(out);
	out = render(format_svg, &fx.p, 5); /* copy_bytes */
	CHECK(out && count(out, "<title>[memcpy HtoD]_[g] (3.0 MiB, 100.00%)</title>") == 1);
	free(out);
	out = render(format_svg, &fx.p, 3); /* gpu_kernels */
	CHECK(out && count(out, "<title>sgemm_[g] (4 kernels, 100.00%)</title>") == 1);
	free(out);
	out = render(format_svg, &fx.p, 1); /* gpu_idle_samples */
	CHECK(out &&
	      count(out, "<title>load_batch (data.py:10) (3 samples, 100.00%)</title>") == 1);
	free(out);
	/* --nvtx frames get their own colour family and their names. */
	fx_gpu(&fx);
	out = render(format_svg, &fx.p, 0);
	CHECK(out && count(out, "<title>[nvtx] epoch (8 samples, 100.00%)</title>") == 1);
	free(out);
}

static void test_speedscope_units(void)
{
	struct fixture fx;
	char *out;

	fx_gpu(&fx);
	profile_strip_nvtx(&fx.p);
	out = render(format_speedscope, &fx.p, 2);
	CHECK(out != NULL);
	if (out) {
		CHECK_EQ_U(count(out, "\"unit\": \"nanoseconds\", \"startValue\": 0, "
				      "\"endValue\": 2000000"),
			   1);
		CHECK_EQ_U(count(out, "\"weights\": [2000000]"), 1);
	}
	free(out);
	out = render(format_speedscope, &fx.p, 5);
	CHECK(out && count(out, "\"unit\": \"bytes\"") == 1);
	free(out);
	out = render(format_speedscope, &fx.p, 0);
	CHECK(out && count(out, "\"unit\": \"none\"") == 2); /* threads 100 and 101 */
	free(out);
}

static void test_json_value(void)
{
	struct fixture fx;
	char *out;

	fx_gpu(&fx);
	out = render(format_json, &fx.p, 2);
	CHECK(out && count(out, "\n  \"value\": \"gpu_time\",\n") == 1);
	CHECK(out && count(out, "{\"kind\": \"nvtx\", \"name\": \"epoch\"") == 1);
	free(out);
}

int main(void)
{
	test_value_folded();
	test_value_by_name();
	test_value_missing();
	test_value_parse();
	test_fmt_value();
	test_svg_units();
	test_speedscope_units();
	test_json_value();
	return CHECK_DONE();
}
