// SPDX-License-Identifier: BSD-2-Clause
/*
 * The OTLP profiles encoder (daemon/export/otlp.c), checked against the official classes: a
 * batch of hand-built neutral profiles (kernel, native, Python and GPU frames; CPU, GPU and
 * off-CPU kinds; two label sets given in different orders) is encoded, and check_otlp.py,
 * run with the python of scripts/test-venv (opentelemetry-proto from PyPI), gunzips and parses
 * the body and compares every sample's resolved stack, values, resource attributes, times and
 * frame types with what this file expects, computed here from the inputs, not from the
 * encoder. The same for the halves of otlp__split, split down to single samples, and
 * otlp__count. Bad input (broken indices, garbage bodies) is checked here in C.
 */
#include "check.h"
#include "otlp.h"
#include "profile_fixture.h"
#include "wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define K PROFD__FRAME_KIND__FRAME_KERNEL
#define N PROFD__FRAME_KIND__FRAME_NATIVE
#define P PROFD__FRAME_KIND__FRAME_PYTHON
#define G PROFD__FRAME_KIND__FRAME_GPU
#define V PROFD__FRAME_KIND__FRAME_NVTX
#define S PROFD__FRAME_KIND__FRAME_STATE

#define PYEXE "/usr/bin/python3.12"
#define PY_BUILD_ID "4f1c2a9be07d55aa90f3e2c1d8b7a6e5f4031221"
#define CUDART "/usr/lib/x86_64-linux-gnu/libcudart.so.12"

static const struct export_label trainer_labels[] = {
    {"service_name", "trainer"},
    {"host", "node-1"},
    {"container", "3f9ac2b7d1e0"},
    {"pid", "4242"},
    {"team", "ml"},
};
static const char trainer_attrs[] = "{\"service.name\": \"trainer\", \"host.name\": \"node-1\", "
				    "\"container.id\": \"3f9ac2b7d1e0\", \"process.pid\": 4242, "
				    "\"team\": \"ml\"}";
/* The same label set twice, in two orders: one resource. */
static const struct export_label web_labels[] = {
    {"host", "node-1"},
    {"service_name", "web"},
    {"namespace", "prod"},
    {"pod_uid", "6c0e6d2a-1b7e-4d53-9a0e-2f7f5b8d9c11"},
};
static const struct export_label web_labels_again[] = {
    {"pod_uid", "6c0e6d2a-1b7e-4d53-9a0e-2f7f5b8d9c11"},
    {"namespace", "prod"},
    {"service_name", "web"},
    {"host", "node-1"},
};
static const char web_attrs[] = "{\"host.name\": \"node-1\", \"service.name\": \"web\", "
				"\"k8s.namespace.name\": \"prod\", "
				"\"k8s.pod.uid\": \"6c0e6d2a-1b7e-4d53-9a0e-2f7f5b8d9c11\"}";

static void build_id(struct fixture *fx, uint32_t frame, const char *id)
{
	fx->frames[frame].has_build_id = 1;
	fx->frames[frame].build_id = fx_str(fx, id);
}

/* CPU samples of a Python trainer: Python on the CPU, a CUDA launch into the driver, a syscall. */
static void build_cpu_trainer(struct fixture *fx)
{
	uint32_t main_, eval, launch, ioctl, sys, mod, train, fwd;

	fx_init_samples(fx, 20408163); /* 49 Hz */
	main_ = fx_frame_full(fx, N, "main", PYEXE, 0x4a10, NULL, 0);
	build_id(fx, main_, PY_BUILD_ID);
	eval = fx_frame_full(fx, N, "_PyEval_EvalFrameDefault", PYEXE, 0x1b2c30, "Python/ceval.c",
			     4321);
	build_id(fx, eval, PY_BUILD_ID);
	mod = fx_frame_full(fx, P, "<module>", NULL, 0, "/app/train.py", 3);
	train = fx_frame_full(fx, P, "train", NULL, 0, "/app/train.py", 42);
	fwd = fx_frame_full(fx, P, "Model.forward", NULL, 0, "/app/model.py", 17);
	launch = fx_frame_full(fx, N, "cudaLaunchKernel", CUDART, 0x7f00, NULL, 0);
	ioctl = fx_frame_full(fx, K, "nvidia_ioctl", "[nvidia]", 0x1234, NULL, 0);
	sys = fx_frame_at(fx, K, "do_syscall_64", 0xffffffff81e3a0c0ull);

	uint32_t s_py[] = {main_, eval, mod, train, fwd};
	uint32_t s_launch[] = {main_, eval, mod, train, launch, sys, ioctl};
	uint32_t s_sys[] = {main_, sys};
	uint32_t a = fx_stack(fx, 5, s_py), b = fx_stack(fx, 7, s_launch),
		 c = fx_stack(fx, 2, s_sys);

	/* Two threads on the same stack: one sample in OTLP (no per-thread attributes). */
	fx_sample_tid(fx, a, 4242, 4242, 30);
	fx_sample_tid(fx, a, 4242, 4243, 12);
	fx_sample_tid(fx, b, 4242, 4243, 7);
	fx_sample(fx, c, 4242, 3);
}

/* GPU kernel time and launches of the same trainer: launching stacks with the kernel as leaf. */
static void build_gpu_trainer(struct fixture *fx)
{
	uint32_t main_, eval, mod, train, fwd, launch, gemm, add;

	fx_init(fx);
	fx_value_type(fx, "gpu_kernel_time", "nanoseconds");
	fx_value_type(fx, "gpu_kernel_launches", "count");
	main_ = fx_frame_full(fx, N, "main", PYEXE, 0x4a10, NULL, 0);
	build_id(fx, main_, PY_BUILD_ID);
	eval = fx_frame_full(fx, N, "_PyEval_EvalFrameDefault", PYEXE, 0x1b2c30, "Python/ceval.c",
			     4321);
	build_id(fx, eval, PY_BUILD_ID);
	mod = fx_frame_full(fx, P, "<module>", NULL, 0, "/app/train.py", 3);
	train = fx_frame_full(fx, P, "train", NULL, 0, "/app/train.py", 42);
	fwd = fx_frame_full(fx, P, "Model.forward", NULL, 0, "/app/model.py", 17);
	launch = fx_frame_full(fx, N, "cudaLaunchKernel", CUDART, 0x7f00, NULL, 0);
	gemm = fx_frame(fx, G, "ampere_sgemm_128x64_nn");
	add = fx_frame(fx, G, "vectorAdd(float const*, float const*, float*, int)");

	uint32_t s_gemm[] = {main_, eval, mod, train, fwd, launch, gemm};
	uint32_t s_add[] = {main_, eval, mod, train, launch, add};
	uint32_t s_late[] = {main_, eval, mod, fwd, launch, add};
	uint32_t a = fx_stack(fx, 7, s_gemm), b = fx_stack(fx, 6, s_add),
		 c = fx_stack(fx, 6, s_late);

	fx_sample_values(fx, a, 4242, 4242, 2, (uint64_t[]){1500000, 30});
	fx_sample_values(fx, b, 4242, 4242, 2, (uint64_t[]){0, 5});
	fx_sample_values(fx, b, 4242, 4243, 2, (uint64_t[]){250000, 2});
	/* Launched, not finished in the window: no time, so no sample in the time profile. */
	fx_sample_values(fx, c, 4242, 4243, 2, (uint64_t[]){0, 4});
}

/* CPU samples of a web server: unsymbolized code, NVTX and state frames, an empty stack. */
static void build_cpu_web(struct fixture *fx)
{
	uint32_t state, nvtx, main_, unknown, sched;

	fx_init_samples(fx, 0);
	fx->p.has_frequency_hz = 1;
	fx->p.frequency_hz = 99; /* no period_ns: the period comes from the rate */
	state = fx_frame(fx, S, "[running]");
	nvtx = fx_frame(fx, V, "handle_request");
	main_ = fx_frame_full(fx, N, "main", "/usr/sbin/web", 0x1100, "web.c", 88);
	unknown = fx_frame_full(fx, N, "[unknown]", "/usr/lib/libfoo.so", 0x99, NULL, 0);
	sched = fx_frame(fx, K, "schedule");

	uint32_t s_unknown[] = {state, nvtx, main_, unknown};
	uint32_t s_sched[] = {main_, sched};
	uint32_t a = fx_stack(fx, 4, s_unknown), b = fx_stack(fx, 2, s_sched),
		 c = fx_stack(fx, 0, NULL);

	fx_sample(fx, a, 77, 5);
	fx_sample(fx, b, 77, 2);
	fx_sample(fx, c, 78, 4);
}

/* Off-CPU time of the same web server: frames shared with the CPU series. */
static void build_offcpu_web(struct fixture *fx)
{
	uint32_t main_, sched;

	fx_init(fx);
	fx_value_type(fx, "off_cpu", "nanoseconds");
	main_ = fx_frame_full(fx, N, "main", "/usr/sbin/web", 0x1100, "web.c", 88);
	sched = fx_frame(fx, K, "schedule");

	uint32_t s_sched[] = {main_, sched};

	fx_sample(fx, fx_stack(fx, 2, s_sched), 77, 5000000);
	fx_sample(fx, fx_stack(fx, 2, s_sched), 78, 1000000);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static const char *expected_type(Profd__FrameKind k)
{
	switch (k) {
	case K:
		return "kernel";
	case N:
		return "native";
	case P:
		return "cpython";
	case G:
		return "cuda";
	default:
		return NULL;
	}
}

/* What a frame must look like in the request. */
static void json_frame(FILE *f, const Profd__Profile *p, const Profd__Frame *fr)
{
	const char *name = p->strings[fr->name], *type = expected_type(fr->kind);
	const char *module = fr->has_module ? p->strings[fr->module] : NULL;
	bool code = fr->kind == K || fr->kind == N;

	if (code && !module && fr->kind == K)
		module = "[kernel.kallsyms]";
	if (!code)
		module = NULL;
	fprintf(f, "{\"name\": ");
	if (strcmp(name, "[unknown]") == 0)
		fprintf(f, "null");
	else
		json_str(f, name);
	fprintf(f, ", \"type\": ");
	if (type)
		json_str(f, type);
	else
		fprintf(f, "null");
	fprintf(f, ", \"file\": ");
	json_str(f, fr->has_file && strcmp(name, "[unknown]") ? p->strings[fr->file] : "");
	fprintf(f, ", \"line\": %u, \"mapping\": ", fr->has_line ? fr->line : 0);
	if (module)
		json_str(f, module);
	else
		fprintf(f, "null");
	fprintf(f, ", \"build_id\": ");
	if (module && fr->has_build_id)
		json_str(f, p->strings[fr->build_id]);
	else
		fprintf(f, "null");
	fprintf(f, ", \"address\": %llu}",
		module && fr->has_address ? (unsigned long long)fr->address : 0ull);
}

/*
 * The profiles series s must become: one per column with a nonzero sample, its samples merged
 * per stack, stacks root first. Returns the series' count (its first column's total).
 */
static uint64_t json_profiles(FILE *f, const struct export_series *s, bool *first)
{
	const Profd__Profile *p = s->profile;
	uint64_t count = 0;

	for (size_t c = 0; c < p->n_value_types; c++) {
		uint64_t sums[FX_NSTACK] = {0}, total = 0;
		bool first_sample = true;

		for (size_t i = 0; i < p->n_samples; i++)
			sums[p->samples[i]->stack] += p->samples[i]->values[c];
		for (size_t i = 0; i < p->n_stacks; i++)
			total += sums[i];
		if (c == 0)
			count = total;
		if (!total)
			continue;
		fprintf(f, "%s\n    {\"sample_type\": [", *first ? "" : ",");
		*first = false;
		json_str(f, p->strings[p->value_types[c]->type]);
		fprintf(f, ", ");
		json_str(f, p->strings[p->value_types[c]->unit]);
		fprintf(f, "], \"time\": %llu, \"duration\": %llu, ",
			(unsigned long long)s->time_unix_ns, (unsigned long long)s->duration_ns);
		if (s->kind == EXPORT_CPU)
			fprintf(f,
				"\"period_type\": [\"cpu\", \"nanoseconds\"], \"period\": %llu, ",
				(unsigned long long)(p->has_period_ns
							 ? p->period_ns
							 : 1000000000ull / p->frequency_hz));
		else
			fprintf(f, "\"period_type\": null, \"period\": 0, ");
		fprintf(f, "\"samples\": [");
		for (size_t i = 0; i < p->n_stacks; i++) {
			const Profd__Stack *st = p->stacks[i];

			if (!sums[i])
				continue;
			fprintf(f, "%s\n      {\"value\": %llu, \"stack\": [",
				first_sample ? "" : ",", (unsigned long long)sums[i]);
			first_sample = false;
			for (size_t j = st->n_frames; j-- > 0;) {
				json_frame(f, p, p->frames[st->frames[j]]);
				if (j)
					fprintf(f, ", ");
			}
			fprintf(f, "]}");
		}
		fprintf(f, "]}");
	}
	return count;
}

static int write_file(const char *dir, const char *name, const uint8_t *b, size_t n)
{
	char path[4096];
	FILE *f;
	int err = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		return -errno;
	if (fwrite(b, 1, n, f) != n)
		err = -EIO;
	if (fclose(f) && !err)
		err = -EIO;
	return err;
}

/*
 * Split body until nothing splits, writing every leaf as piece-N.bin; the counts of the two
 * halves of every split must add up to the count of what was split.
 */
static void split_all(const char *dir, const uint8_t *body, size_t len, int depth, int *pieces)
{
	uint8_t *a, *b;
	size_t alen, blen;
	char name[64];
	int err = otlp__split(body, len, &a, &alen, &b, &blen);

	if (err) {
		CHECK_EQ_I(err, -E2BIG);
		snprintf(name, sizeof(name), "piece-%d.bin", (*pieces)++);
		CHECK_EQ_I(write_file(dir, name, body, len), 0);
		return;
	}
	CHECK(depth < 32);
	CHECK_EQ_U(otlp__count(a, alen) + otlp__count(b, blen), otlp__count(body, len));
	if (depth < 32) {
		split_all(dir, a, alen, depth + 1, pieces);
		split_all(dir, b, blen, depth + 1, pieces);
	}
	free(a);
	free(b);
}

/* Inputs the encoder must refuse, and bodies split and count cannot read. */
static void check_bad_input(struct fixture *fx)
{
	struct export_series s = {.labels = web_labels, .nlabels = 4, .profile = &fx->p};
	uint8_t junk[] = {0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 'x', 'y'};
	uint8_t *out = NULL, *a, *b;
	size_t len = 0, alen, blen;

	build_cpu_web(fx);
	fx->samples[0].stack = 9; /* past the stacks */
	CHECK_EQ_I(otlp__encode(&s, 1, &out, &len), -EINVAL);
	CHECK(out == NULL);
	build_cpu_web(fx);
	fx->stack_frames[0][1] = 15; /* past the frames */
	CHECK_EQ_I(otlp__encode(&s, 1, &out, &len), -EINVAL);
	build_cpu_web(fx);
	fx->frames[0].name = 63; /* past the strings */
	CHECK_EQ_I(otlp__encode(&s, 1, &out, &len), -EINVAL);
	build_cpu_web(fx);
	fx->samples[1].n_values = 2; /* more values than columns */
	CHECK_EQ_I(otlp__encode(&s, 1, &out, &len), -EINVAL);
	s.kind = EXPORT_KIND__COUNT;
	CHECK_EQ_I(otlp__encode(&s, 1, &out, &len), -EINVAL);

	CHECK_EQ_U(otlp__count(junk, sizeof(junk)), 0);
	CHECK_EQ_I(otlp__split(junk, sizeof(junk), &a, &alen, &b, &blen), -EBADMSG);
	CHECK_EQ_I(otlp__split((const uint8_t *)"plain", 5, &a, &alen, &b, &blen), -EBADMSG);
	CHECK(a == NULL && b == NULL);
}

/* A body cut short or with bytes after it is not a request. */
static void check_damaged_body(const uint8_t *body, size_t len)
{
	uint8_t *longer = malloc(len + 4), *a, *b;
	size_t alen, blen;

	CHECK_EQ_U(otlp__count(body, len / 2), 0);
	CHECK_EQ_I(otlp__split(body, len - 1, &a, &alen, &b, &blen), -EBADMSG);
	if (!CHECK(longer != NULL))
		return;
	memcpy(longer, body, len);
	memcpy(longer + len, "junk", 4);
	CHECK_EQ_U(otlp__count(longer, len + 4), 0);
	free(longer);
}

/* The python of scripts/test-venv, made on first use; false when it cannot be had. */
static bool venv_python(char *py, size_t size)
{
	FILE *p = popen(TEST_VENV " 2>&1", "r");
	char line[4096] = "";
	bool ok;

	if (!p)
		return false;
	while (fgets(line, sizeof(line), p))
		if (line[0] == '/')
			snprintf(py, size, "%.*s", (int)strcspn(line, "\n"), line);
		else
			fputs(line, stderr);
	ok = pclose(p) == 0 && py[0] == '/';
	return ok;
}

int main(void)
{
	static struct fixture fx[5];
	struct export_series series[4] = {
	    {trainer_labels, 5, EXPORT_CPU, &fx[0].p, 1764000000123456789ull, 15000000000ull},
	    {trainer_labels, 5, EXPORT_GPU, &fx[1].p, 1764000000123456789ull, 15000000000ull},
	    {web_labels, 4, EXPORT_CPU, &fx[2].p, 1764000015000000000ull, 14500000000ull},
	    {web_labels_again, 4, EXPORT_OFFCPU, &fx[3].p, 1764000015000000000ull, 14500000000ull},
	};
	const char *attrs[] = {trainer_attrs, trainer_attrs, web_attrs, web_attrs};
	char dir[] = "/tmp/test_otlp.XXXXXX", path[4200], py[4096] = "", cmd[9000];
	uint8_t *body = NULL, *one = NULL, *a, *b;
	size_t len = 0, one_len = 0, alen, blen;
	uint64_t count = 0;
	bool first = true;
	int pieces = 0, rc;
	FILE *f;

	build_cpu_trainer(&fx[0]);
	build_gpu_trainer(&fx[1]);
	build_cpu_web(&fx[2]);
	build_offcpu_web(&fx[3]);
	check_bad_input(&fx[4]);

	if (!CHECK(mkdtemp(dir) != NULL))
		return CHECK_DONE();
	if (!CHECK_EQ_I(otlp__encode(series, 4, &body, &len), 0))
		return CHECK_DONE();
	CHECK(len > 18 && body[0] == 0x1f && body[1] == 0x8b); /* gzip */
	CHECK_EQ_I(write_file(dir, "body.bin", body, len), 0);

	/* The expected request, from the inputs. */
	snprintf(path, sizeof(path), "%s/expected.json", dir);
	f = fopen(path, "w");
	if (!CHECK(f != NULL))
		return CHECK_DONE();
	fprintf(f, "{\"scope\": {\"name\": \"profd\", \"version\": \"%s\"},\n \"series\": [",
		PROFD_VERSION);
	for (size_t i = 0; i < 4; i++) {
		fprintf(f, "%s\n  {\"attributes\": %s, \"profiles\": [", i ? "," : "", attrs[i]);
		first = true;
		count += json_profiles(f, &series[i], &first);
		fprintf(f, "]}");
	}
	fprintf(f, "],\n \"resources\": 2,\n \"count\": %llu,\n \"encoder_count\": %llu,\n",
		(unsigned long long)count, (unsigned long long)otlp__count(body, len));
	CHECK_EQ_U(otlp__count(body, len), count);
	CHECK_EQ_U(count, 52 + 1750000 + 11 + 6000000);

	/* Halves, then halves of halves down to single samples. */
	if (CHECK_EQ_I(otlp__split(body, len, &a, &alen, &b, &blen), 0)) {
		CHECK_EQ_I(write_file(dir, "half-a.bin", a, alen), 0);
		CHECK_EQ_I(write_file(dir, "half-b.bin", b, blen), 0);
		CHECK(alen < len && blen < len);
		fprintf(f, " \"half_counts\": [%llu, %llu],\n",
			(unsigned long long)otlp__count(a, alen),
			(unsigned long long)otlp__count(b, blen));
		free(a);
		free(b);
	}
	split_all(dir, body, len, 0, &pieces);
	fprintf(f, " \"pieces\": %d}\n", pieces);
	CHECK(fclose(f) == 0);
	/*
	 * Every leaf holds one sample: 3 + 2 + 3 (trainer: CPU, GPU time, launches) and 3 + 1
	 * (web: CPU, off-CPU, whose two stacks are the same frames and merge).
	 */
	CHECK_EQ_I(pieces, 12);

	/* One series with one sample cannot be split. */
	series[3].profile = &fx[4].p;
	build_offcpu_web(&fx[4]);
	fx[4].p.n_samples = 1;
	if (CHECK_EQ_I(otlp__encode(&series[3], 1, &one, &one_len), 0))
		CHECK_EQ_I(otlp__split(one, one_len, &a, &alen, &b, &blen), -E2BIG);
	free(one);
	check_damaged_body(body, len);
	free(body);

	if (!venv_python(py, sizeof(py))) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd))
			fprintf(stderr, "could not remove %s\n", dir);
		return CHECK_SKIP("no python with opentelemetry-proto (scripts/test-venv failed)");
	}
	snprintf(cmd, sizeof(cmd), "%s %s %s", py, CHECK_OTLP_PY, dir);
	rc = system(cmd);
	CHECK_EQ_I(rc, 0);
	if (!rc) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		CHECK_EQ_I(system(cmd), 0);
	} else {
		fprintf(stderr, "files kept in %s\n", dir);
	}
	return CHECK_DONE();
}
