// SPDX-License-Identifier: BSD-2-Clause
/*
 * The file formats for other tools, from a profile built by hand: pprof decoded back with
 * zlib and protobuf-c, speedscope and JSON compared byte for byte, JSON string escaping, and
 * the --format choices of `profctl dump`.
 */
#include "check.h"
#include "cli.h"
#include "cmd_dump.h"
#include "output.h"
#include "format.h"
#include "profile.h"
#include "profile_fixture.h"

#include <errno.h>
#include <stdarg.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "wire.h"

/*
 * pid 100 "app", threads 100 "app" and 101 "worker"; pid 200 "py" (no thread names).
 *   100/100: main;work;schedule_[k] x3        main;work x2 (work at another address)
 *   100/101: main;[unknown] (libfoo.so+0x1a2b) x4
 *   200/200: <module> (train.py:1);step (train.py:42) x5     [no stack] x1
 */
static void fx_standard(struct fixture *fx)
{
	uint32_t f_main, f_work, f_sched, f_step, f_unk, f_mod, f_work2;

	fx_init_samples(fx, 0);
	f_main = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main", "/usr/bin/app", 0x1100,
			       NULL, 0);
	fx->frames[f_main].has_build_id = 1;
	fx->frames[f_main].build_id = fx_str(fx, "abcd");
	f_work = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "work", "/usr/bin/app", 0x1200,
			       "/src/app.c", 7);
	fx->frames[f_work].has_build_id = 1;
	fx->frames[f_work].build_id = fx_str(fx, "abcd");
	f_sched = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_KERNEL, "schedule",
				"[kernel.kallsyms]", 0xffffffff81000010ull, NULL, 0);
	f_step = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_PYTHON, "step", NULL, 0x30,
			       "/srv/train.py", 42);
	f_unk = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "[unknown]",
			      "/usr/lib/libfoo.so", 0x1a2b, NULL, 0);
	f_mod = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_PYTHON, "<module>", NULL, 0x10,
			      "/srv/train.py", 1);
	f_work2 = fx_frame_full(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "work", "/usr/bin/app", 0x1210,
				"/src/app.c", 9);
	fx->frames[f_work2].has_build_id = 1;
	fx->frames[f_work2].build_id = fx_str(fx, "abcd");

	uint32_t s_sched = fx_stack(fx, 3, (uint32_t[]){f_main, f_work, f_sched});
	uint32_t s_work2 = fx_stack(fx, 2, (uint32_t[]){f_main, f_work2});
	uint32_t s_unk = fx_stack(fx, 2, (uint32_t[]){f_main, f_unk});
	uint32_t s_py = fx_stack(fx, 2, (uint32_t[]){f_mod, f_step});
	uint32_t s_none = fx_stack(fx, 0, NULL);

	fx_sample_tid(fx, s_py, 200, 200, 5);
	fx_sample_tid(fx, s_sched, 100, 100, 3);
	fx_sample_tid(fx, s_unk, 100, 101, 4);
	fx_sample_tid(fx, s_work2, 100, 100, 2);
	fx_sample_tid(fx, s_none, 200, 200, 1);
	fx_proc(fx, 100, "app");
	fx_proc(fx, 200, "py");
	fx_thread(fx, 100, 100, "app");
	fx_thread(fx, 100, 101, "worker");
	fx->p.start_ns = 5000000000ull;
	fx->p.end_ns = 7500000000ull;
	fx->p.has_start_ns = fx->p.has_end_ns = 1;
	fx->p.realtime_offset_ns = 1700000000000000000ll;
	fx->p.has_realtime_offset_ns = 1;
	fx->p.period_ns = 10000000;
	fx->p.has_period_ns = 1;
	fx->p.frequency_hz = 100;
	fx->p.has_frequency_hz = 1;
}

/* Render with fn into a malloc'd buffer (*len bytes, NUL after them); NULL on failure. */
static char *render(int (*fn)(const Profd__Profile *, const struct render_opts *, FILE *),
		    const Profd__Profile *p, const char *title, size_t *len)
{
	struct render_opts o = {.title = title};
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
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

/* Inflate a gzip stream (header and trailer checked by zlib). Returns a buffer or NULL. */
static uint8_t *gunzip(const char *in, size_t in_len, size_t *out_len)
{
	z_stream zs = {0};
	size_t cap = 1 << 16;
	uint8_t *out = malloc(cap);
	int zerr = Z_OK;

	/* 16 + 15: gzip only, not a bare zlib stream. */
	if (!out || inflateInit2(&zs, 16 + 15) != Z_OK) {
		free(out);
		return NULL;
	}
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)in_len;
	*out_len = 0;
	while (zerr == Z_OK) {
		if (*out_len == cap) {
			uint8_t *n = realloc(out, cap * 2);

			if (!n)
				break;
			out = n;
			cap *= 2;
		}
		zs.next_out = out + *out_len;
		zs.avail_out = (uInt)(cap - *out_len);
		zerr = inflate(&zs, Z_NO_FLUSH);
		*out_len = cap - zs.avail_out;
	}
	inflateEnd(&zs);
	if (zerr != Z_STREAM_END || zs.avail_in) {
		fprintf(stderr, "gunzip: zlib says %d, %u bytes left\n", zerr, zs.avail_in);
		free(out);
		return NULL;
	}
	return out;
}

static const char *pstr(const Perftools__Profiles__Profile *pp, int64_t i)
{
	return i >= 0 && (size_t)i < pp->n_string_table ? pp->string_table[i] : "<bad index>";
}

/* Append to a growing text. */
static void __attribute__((format(printf, 2, 3))) add(FILE *f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
}

/* The decoded profile as text, every table and id spelled out, to compare exactly. */
static char *describe(const Perftools__Profiles__Profile *pp)
{
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	add(f, "types");
	for (size_t i = 0; i < pp->n_sample_type; i++)
		add(f, " %s/%s", pstr(pp, pp->sample_type[i]->type),
		    pstr(pp, pp->sample_type[i]->unit));
	add(f, "\ndefault %s\n", pstr(pp, pp->default_sample_type));
	if (pp->period_type)
		add(f, "period %s/%s %" PRId64 "\n", pstr(pp, pp->period_type->type),
		    pstr(pp, pp->period_type->unit), pp->period);
	add(f, "time %" PRId64 " duration %" PRId64 "\n", pp->time_nanos, pp->duration_nanos);
	for (size_t i = 0; i < pp->n_comment; i++)
		add(f, "comment %s\n", pstr(pp, pp->comment[i]));
	for (size_t i = 0; i < pp->n_mapping; i++) {
		const Perftools__Profiles__Mapping *m = pp->mapping[i];

		add(f,
		    "mapping %" PRIu64 " %s build '%s' [0x%" PRIx64 ", 0x%" PRIx64 ") off %" PRIu64
		    " funcs %d files %d lines %d inline %d\n",
		    m->id, pstr(pp, m->filename), pstr(pp, m->build_id), m->memory_start,
		    m->memory_limit, m->file_offset, m->has_functions, m->has_filenames,
		    m->has_line_numbers, m->has_inline_frames);
	}
	for (size_t i = 0; i < pp->n_location; i++) {
		const Perftools__Profiles__Location *l = pp->location[i];

		add(f, "location %" PRIu64 " mapping %" PRIu64 " 0x%" PRIx64, l->id, l->mapping_id,
		    l->address);
		for (size_t j = 0; j < l->n_line; j++)
			add(f, " fn %" PRIu64 " line %" PRId64, l->line[j]->function_id,
			    l->line[j]->line);
		add(f, "\n");
	}
	for (size_t i = 0; i < pp->n_function; i++) {
		const Perftools__Profiles__Function *fn = pp->function[i];

		add(f, "function %" PRIu64 " %s system %s file '%s' start %" PRId64 "\n", fn->id,
		    pstr(pp, fn->name), pstr(pp, fn->system_name), pstr(pp, fn->filename),
		    fn->start_line);
	}
	for (size_t i = 0; i < pp->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pp->sample[i];

		add(f, "sample");
		for (size_t j = 0; j < s->n_location_id; j++)
			add(f, " %" PRIu64, s->location_id[j]);
		add(f, " =");
		for (size_t j = 0; j < s->n_value; j++)
			add(f, " %" PRId64, s->value[j]);
		for (size_t j = 0; j < s->n_label; j++) {
			const Perftools__Profiles__Label *lb = s->label[j];

			if (lb->str)
				add(f, " %s=%s", pstr(pp, lb->key), pstr(pp, lb->str));
			else
				add(f, " %s=%" PRId64, pstr(pp, lb->key), lb->num);
		}
		add(f, "\n");
	}
	fclose(f);
	return buf;
}

static void test_pprof(void)
{
	static const char want[] =
	    "types samples/count cpu/nanoseconds\n"
	    "default cpu\n"
	    "period cpu/nanoseconds 10000000\n"
	    "time 1700000005000000000 duration 2500000000\n"
	    "comment profd " PROFD_VERSION "\n"
	    "comment test title\n"
	    "mapping 1 /usr/bin/app build 'abcd' [0x0, 0x1211) off 0 funcs 1 files 0 lines 0 "
	    "inline 0\n"
	    "mapping 2 [kernel.kallsyms] build '' [0x0, 0xffffffff81000011) off 0 funcs 1 files "
	    "0 lines 0 inline 0\n"
	    "mapping 3 /usr/lib/libfoo.so build '' [0x0, 0x1a2c) off 0 funcs 1 files 0 lines 0 "
	    "inline 0\n"
	    "location 1 mapping 1 0x1100 fn 1 line 0\n"
	    "location 2 mapping 1 0x1200 fn 2 line 7\n"
	    "location 3 mapping 2 0xffffffff81000010 fn 3 line 0\n"
	    "location 4 mapping 0 0x0 fn 4 line 42\n"
	    "location 5 mapping 3 0x1a2b\n"
	    "location 6 mapping 0 0x0 fn 5 line 1\n"
	    "location 7 mapping 1 0x1210 fn 2 line 9\n"
	    "function 1 main system main file '' start 0\n"
	    "function 2 work system work file '/src/app.c' start 0\n"
	    "function 3 schedule system schedule file '' start 0\n"
	    "function 4 step system step file '/srv/train.py' start 0\n"
	    "function 5 <module> system <module> file '/srv/train.py' start 0\n"
	    "sample 4 6 = 5 50000000 pid=200 tid=200 process_name=py\n"
	    "sample 3 2 1 = 3 30000000 pid=100 tid=100 thread_name=app process_name=app\n"
	    "sample 5 1 = 4 40000000 pid=100 tid=101 thread_name=worker process_name=app\n"
	    "sample 7 1 = 2 20000000 pid=100 tid=100 thread_name=app process_name=app\n"
	    "sample = 1 10000000 pid=200 tid=200 process_name=py\n";
	Perftools__Profiles__Profile *pp;
	struct fixture fx;
	size_t len, raw_len;
	uint8_t *raw;
	char *gz, *text;

	fx_standard(&fx);
	gz = render(format_pprof, &fx.p, "test title", &len);
	CHECK(gz != NULL);
	if (!gz)
		return;
	/* gzip magic, deflate, no name or mtime: the same profile gives the same bytes. */
	CHECK(len > 10 && (uint8_t)gz[0] == 0x1f && (uint8_t)gz[1] == 0x8b && gz[2] == 8);
	CHECK(len > 10 && gz[4] == 0 && gz[5] == 0 && gz[6] == 0 && gz[7] == 0);
	raw = gunzip(gz, len, &raw_len);
	CHECK(raw != NULL);
	if (!raw)
		goto out_gz;
	pp = perftools__profiles__profile__unpack(NULL, raw_len, raw);
	CHECK(pp != NULL);
	if (!pp)
		goto out_raw;
	CHECK(pp->n_string_table > 0 && strcmp(pp->string_table[0], "") == 0);
	text = describe(pp);
	CHECK_STREQ(text, want);
	free(text);
	perftools__profiles__profile__free_unpacked(pp, NULL);
out_raw:
	free(raw);
out_gz:
	free(gz);
}

/* A value column other than CPU samples keeps its type and unit; no period: no cpu time. */
static void test_pprof_value_types(void)
{
	Perftools__Profiles__Profile *pp;
	struct fixture fx;
	size_t len, raw_len;
	uint8_t *raw = NULL;
	char *gz;

	fx_init_samples(&fx, 0);
	uint32_t f = fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_GPU, "sgemm", NULL, 0, NULL, 0);
	uint32_t s = fx_stack(&fx, 1, (uint32_t[]){f});

	fx_value_type(&fx, "gpu_time", "nanoseconds");
	fx_sample_values(&fx, s, 9, 9, 2, (uint64_t[]){7, 123456});
	fx.p.frequency_hz = 50; /* period_ns unset: 1e9 / 50 */

	gz = render(format_pprof, &fx.p, NULL, &len);
	if (gz)
		raw = gunzip(gz, len, &raw_len);
	pp = raw ? perftools__profiles__profile__unpack(NULL, raw_len, raw) : NULL;
	CHECK(pp != NULL);
	if (pp) {
		CHECK_EQ_U(pp->n_sample_type, 3);
		CHECK_STREQ(pstr(pp, pp->sample_type[2]->type), "gpu_time");
		CHECK_STREQ(pstr(pp, pp->sample_type[2]->unit), "nanoseconds");
		CHECK_EQ_I(pp->period, 20000000);
		CHECK_EQ_U(pp->n_sample, 1);
		CHECK_EQ_U(pp->sample[0]->n_value, 3);
		CHECK_EQ_I(pp->sample[0]->value[0], 7);
		CHECK_EQ_I(pp->sample[0]->value[1], 140000000);
		CHECK_EQ_I(pp->sample[0]->value[2], 123456);
		/* No module: no mapping, and the function keeps its plain name. */
		CHECK_EQ_U(pp->n_mapping, 0);
		CHECK_EQ_U(pp->n_location, 1);
		CHECK_EQ_U(pp->location[0]->mapping_id, 0);
		CHECK_EQ_U(pp->n_function, 1);
		CHECK_STREQ(pstr(pp, pp->function[0]->name), "sgemm");
		CHECK_EQ_U(pp->n_comment, 1);
		perftools__profiles__profile__free_unpacked(pp, NULL);
	}
	free(raw);
	free(gz);
}

/* --value: every column stays a sample type, the chosen one is the default. */
static void test_pprof_default_type(void)
{
	struct fixture fx;
	uint32_t vis[] = {0, 1};
	const char *want[] = {"cpu", "gpu_time"};

	fx_init_samples(&fx, 10000000);
	fx_value_type(&fx, "gpu_time", "nanoseconds");
	uint32_t f = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_GPU, "sgemm");
	fx_sample_values(&fx, fx_stack(&fx, 1, (uint32_t[]){f}), 9, 9, 2, (uint64_t[]){0, 5000});
	for (size_t i = 0; i < 2; i++) {
		struct render_opts o = {.value_index = vis[i]};
		Perftools__Profiles__Profile *pp = NULL;
		uint8_t *raw = NULL;
		size_t len = 0, raw_len;
		char *gz = NULL;
		FILE *out = open_memstream(&gz, &len);

		CHECK(out && format_pprof(&fx.p, &o, out) == 0);
		if (out)
			fclose(out);
		if (gz)
			raw = gunzip(gz, len, &raw_len);
		if (raw)
			pp = perftools__profiles__profile__unpack(NULL, raw_len, raw);
		CHECK(pp != NULL);
		if (pp) {
			CHECK_EQ_U(pp->n_sample_type, 3);
			CHECK_STREQ(pstr(pp, pp->default_sample_type), want[i]);
			CHECK_EQ_I(pp->sample[0]->value[2], 5000);
			perftools__profiles__profile__free_unpacked(pp, NULL);
		}
		free(raw);
		free(gz);
	}
}

/* The first mapping is the main binary for pprof: the busiest one that is not a library. */
static void test_pprof_main_mapping(void)
{
	Perftools__Profiles__Profile *pp;
	struct fixture fx;
	size_t len, raw_len;
	uint8_t *raw = NULL;
	char *gz;

	fx_init_samples(&fx, 0);
	uint32_t k =
	    fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_KERNEL, "schedule", NULL, 0x10, NULL, 0);
	uint32_t c = fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "memcpy",
				   "/usr/lib/libc.so.6", 0x20, NULL, 0);
	uint32_t l = fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "start",
				   "/usr/lib/ld-linux-x86-64.so.2", 0x30, NULL, 0);
	uint32_t t1 =
	    fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "t1", "/opt/one", 0x40, NULL, 0);
	uint32_t t2 = fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "t2", "/opt/two.so.d/two",
				    0x50, NULL, 0);

	fx_sample_tid(&fx, fx_stack(&fx, 2, (uint32_t[]){l, k}), 1, 1, 50);
	fx_sample_tid(&fx, fx_stack(&fx, 3, (uint32_t[]){t1, c, c}), 1, 1, 2);
	fx_sample_tid(&fx, fx_stack(&fx, 2, (uint32_t[]){t2, c}), 2, 2, 3);
	gz = render(format_pprof, &fx.p, NULL, &len);
	if (gz)
		raw = gunzip(gz, len, &raw_len);
	pp = raw ? perftools__profiles__profile__unpack(NULL, raw_len, raw) : NULL;
	CHECK(pp != NULL);
	if (pp) {
		CHECK_EQ_U(pp->n_mapping, 5);
		/* two (3 samples) beats one (2; the repeated libc frame does not count twice). */
		CHECK_STREQ(pstr(pp, pp->mapping[0]->filename), "/opt/two.so.d/two");
		CHECK_EQ_U(pp->mapping[0]->id, 5);
		/* The others keep their order and ids. */
		CHECK_STREQ(pstr(pp, pp->mapping[1]->filename), "[kernel.kallsyms]");
		CHECK_EQ_U(pp->mapping[1]->id, 1);
		CHECK_STREQ(pstr(pp, pp->mapping[4]->filename), "/opt/one");
		CHECK_EQ_U(pp->mapping[4]->id, 4);
		/* A kernel frame without a module still lands in the kernel's mapping. */
		CHECK_EQ_U(pp->location[0]->mapping_id, 1);
		perftools__profiles__profile__free_unpacked(pp, NULL);
	}
	free(raw);
	free(gz);
}

/* Render fx as pprof and decode it; NULL on failure (a failed check). */
static Perftools__Profiles__Profile *pprof_of(struct fixture *fx)
{
	Perftools__Profiles__Profile *pp;
	size_t len, raw_len;
	uint8_t *raw = NULL;
	char *gz;

	gz = render(format_pprof, &fx->p, NULL, &len);
	if (gz)
		raw = gunzip(gz, len, &raw_len);
	pp = raw ? perftools__profiles__profile__unpack(NULL, raw_len, raw) : NULL;
	CHECK(pp != NULL);
	free(raw);
	free(gz);
	return pp;
}

static void fx_proc_exe(struct fixture *fx, uint32_t pid, const char *name, const char *exe)
{
	fx_proc(fx, pid, name);
	fx->procs[fx->p.n_processes - 1].has_exe = 1;
	fx->procs[fx->p.n_processes - 1].exe = fx_str(fx, exe);
}

/*
 * With Process.exe the first mapping is the busiest process's executable: added when none of
 * its frames is in the profile (a Python process: Python frames, libpython and libz), first
 * even when another binary that is no library is busier.
 */
static void test_pprof_main_exe(void)
{
	Perftools__Profiles__Profile *pp;
	struct fixture fx;

	fx_init_samples(&fx, 0);
	uint32_t z = fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "deflate",
				   "/usr/lib/libz.so.1.2.13", 0x20, NULL, 0);
	uint32_t lp = fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "PyObject_Call",
				    "/opt/py/lib/libpython3.12.so.1.0", 0x30, NULL, 0);
	uint32_t py = fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_PYTHON, "main", NULL, 0,
				    "/app/main.py", 12);

	fx_sample(&fx, fx_stack(&fx, 3, (uint32_t[]){py, lp, z}), 7, 5);
	fx_sample(&fx, fx_stack(&fx, 2, (uint32_t[]){py, lp}), 7, 1);
	fx_proc_exe(&fx, 7, "python3.12", "/opt/py/bin/python3.12");
	pp = pprof_of(&fx);
	if (pp) {
		CHECK_EQ_U(pp->n_mapping, 3);
		CHECK_STREQ(pstr(pp, pp->mapping[0]->filename), "/opt/py/bin/python3.12");
		CHECK_EQ_U(pp->mapping[0]->id, 3);
		CHECK_STREQ(pstr(pp, pp->mapping[1]->filename), "/usr/lib/libz.so.1.2.13");
		CHECK_EQ_U(pp->mapping[1]->id, 1);
		/* No location points at the added mapping. */
		for (size_t i = 0; i < pp->n_location; i++)
			CHECK(pp->location[i]->mapping_id != 3);
		perftools__profiles__profile__free_unpacked(pp, NULL);
	}

	/* Two processes: the executable of the one with more samples, though its own frames are
	 * fewer than another binary's. */
	fx_init_samples(&fx, 0);
	uint32_t a = fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "a_main", "/usr/bin/a",
				   0x10, NULL, 0);
	uint32_t b = fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "b_main", "/usr/bin/b",
				   0x10, NULL, 0);
	uint32_t plug = fx_frame_full(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "work",
				      "/opt/plugins/work", 0x10, NULL, 0);

	fx_sample(&fx, fx_stack(&fx, 1, (uint32_t[]){a}), 1, 4);
	fx_sample(&fx, fx_stack(&fx, 1, (uint32_t[]){plug}), 2, 9);
	fx_sample(&fx, fx_stack(&fx, 2, (uint32_t[]){b, plug}), 2, 1);
	fx_proc_exe(&fx, 1, "a", "/usr/bin/a");
	fx_proc_exe(&fx, 2, "b", "/usr/bin/b");
	pp = pprof_of(&fx);
	if (pp) {
		CHECK_EQ_U(pp->n_mapping, 3);
		CHECK_STREQ(pstr(pp, pp->mapping[0]->filename), "/usr/bin/b");
		CHECK_EQ_U(pp->mapping[0]->id, 2);
		CHECK_STREQ(pstr(pp, pp->mapping[1]->filename), "/usr/bin/a");
		perftools__profiles__profile__free_unpacked(pp, NULL);
	}

	/* A relative or empty path is not an executable's: the old choice stands. */
	fx.procs[1].exe = fx_str(&fx, "b");
	fx.procs[0].exe = fx_str(&fx, "");
	pp = pprof_of(&fx);
	if (pp) {
		CHECK_STREQ(pstr(pp, pp->mapping[0]->filename), "/opt/plugins/work");
		perftools__profiles__profile__free_unpacked(pp, NULL);
	}
}

static void test_speedscope(void)
{
	static const char want[] =
	    "{\n"
	    "  \"$schema\": \"https://www.speedscope.app/file-format-schema.json\",\n"
	    "  \"exporter\": \"profd " PROFD_VERSION "\",\n"
	    "  \"name\": \"t \\\"1\\\"\",\n"
	    "  \"activeProfileIndex\": 2,\n"
	    "  \"shared\": {\"frames\": [\n"
	    "    {\"name\": \"main\", \"file\": \"/usr/bin/app\"},\n"
	    "    {\"name\": \"work\", \"file\": \"/src/app.c\", \"line\": 7},\n"
	    "    {\"name\": \"schedule_[k]\", \"file\": \"[kernel.kallsyms]\"},\n"
	    "    {\"name\": \"step (train.py:42)\", \"file\": \"/srv/train.py\", \"line\": 42},\n"
	    "    {\"name\": \"[unknown] (libfoo.so+0x1a2b)\", \"file\": \"/usr/lib/libfoo.so\"},\n"
	    "    {\"name\": \"<module> (train.py:1)\", \"file\": \"/srv/train.py\", \"line\": 1},\n"
	    "    {\"name\": \"[no stack]\"}\n"
	    "  ]},\n"
	    "  \"profiles\": [\n"
	    "    {\"type\": \"sampled\", \"name\": \"app (tid 100)\", \"unit\": \"none\", "
	    "\"startValue\": 0, \"endValue\": 5,\n"
	    "     \"samples\": [[0, 1, 2], [0, 1]],\n"
	    "     \"weights\": [3, 2]},\n"
	    "    {\"type\": \"sampled\", \"name\": \"worker (tid 101)\", \"unit\": \"none\", "
	    "\"startValue\": 0, \"endValue\": 4,\n"
	    "     \"samples\": [[0, 4]],\n"
	    "     \"weights\": [4]},\n"
	    "    {\"type\": \"sampled\", \"name\": \"py (tid 200)\", \"unit\": \"none\", "
	    "\"startValue\": 0, \"endValue\": 6,\n"
	    "     \"samples\": [[5, 3], [6]],\n"
	    "     \"weights\": [5, 1]}\n"
	    "  ]\n"
	    "}\n";
	struct fixture fx;
	size_t len;
	char *text;

	fx_standard(&fx);
	text = render(format_speedscope, &fx.p, "t \"1\"", &len);
	CHECK_STREQ(text, want);
	free(text);

	/* Nothing sampled: still a valid file, with no profiles. */
	fx_init_samples(&fx, 0);
	text = render(format_speedscope, &fx.p, NULL, &len);
	CHECK(text && strstr(text, "\"profiles\": []\n}\n") != NULL);
	CHECK(text && strstr(text, "\"name\": \"profd profile\"") != NULL);
	free(text);
}

static void test_json(void)
{
	static const char want[] =
	    "{\n"
	    "  \"format_version\": 1,\n"
	    "  \"start_ns\": 5000000000,\n"
	    "  \"end_ns\": 7500000000,\n"
	    "  \"realtime_offset_ns\": 1700000000000000000,\n"
	    "  \"frequency_hz\": 100,\n"
	    "  \"period_ns\": 10000000,\n"
	    "  \"value\": \"samples\",\n"
	    "  \"value_types\": [\n"
	    "    {\"type\": \"samples\", \"unit\": \"count\"}\n"
	    "  ],\n"
	    "  \"processes\": [\n"
	    "    {\"pid\": 100, \"name\": \"app\", \"uid\": null, \"exited\": false},\n"
	    "    {\"pid\": 200, \"name\": \"p\\ty\\u001b\xef\xbf\xbd\", \"uid\": 1000, \"exited\": "
	    "true}\n"
	    "  ],\n"
	    "  \"threads\": [\n"
	    "    {\"tid\": 100, \"pid\": 100, \"name\": \"app\"},\n"
	    "    {\"tid\": 101, \"pid\": 100, \"name\": \"worker\"}\n"
	    "  ],\n"
	    "  \"frames\": [\n"
	    "    {\"kind\": \"native\", \"name\": \"main\", \"module\": \"/usr/bin/app\", "
	    "\"address\": \"0x1100\", \"file\": null, \"line\": null, \"build_id\": \"abcd\"},\n"
	    "    {\"kind\": \"native\", \"name\": \"work\", \"module\": \"/usr/bin/app\", "
	    "\"address\": \"0x1200\", \"file\": \"/src/app.c\", \"line\": 7, \"build_id\": "
	    "\"abcd\"},\n"
	    "    {\"kind\": \"kernel\", \"name\": \"schedule\", \"module\": \"[kernel.kallsyms]\", "
	    "\"address\": \"0xffffffff81000010\", \"file\": null, \"line\": null, \"build_id\": "
	    "null},\n"
	    "    {\"kind\": \"python\", \"name\": \"step\", \"module\": null, \"address\": "
	    "\"0x30\", "
	    "\"file\": \"/srv/train.py\", \"line\": 42, \"build_id\": null},\n"
	    "    {\"kind\": \"native\", \"name\": \"[unknown]\", \"module\": "
	    "\"/usr/lib/libfoo.so\", "
	    "\"address\": \"0x1a2b\", \"file\": null, \"line\": null, \"build_id\": null},\n"
	    "    {\"kind\": \"python\", \"name\": \"<module>\", \"module\": null, \"address\": "
	    "\"0x10\", \"file\": \"/srv/train.py\", \"line\": 1, \"build_id\": null},\n"
	    "    {\"kind\": \"native\", \"name\": \"work\", \"module\": \"/usr/bin/app\", "
	    "\"address\": \"0x1210\", \"file\": \"/src/app.c\", \"line\": 9, \"build_id\": "
	    "\"abcd\"}\n"
	    "  ],\n"
	    "  \"stacks\": [\n"
	    "    [2, 1, 0],\n"
	    "    [6, 0],\n"
	    "    [4, 0],\n"
	    "    [3, 5],\n"
	    "    []\n"
	    "  ],\n"
	    "  \"samples\": [\n"
	    "    {\"stack\": 3, \"pid\": 200, \"tid\": 200, \"values\": [5]},\n"
	    "    {\"stack\": 0, \"pid\": 100, \"tid\": 100, \"values\": [3]},\n"
	    "    {\"stack\": 2, \"pid\": 100, \"tid\": 101, \"values\": [4]},\n"
	    "    {\"stack\": 1, \"pid\": 100, \"tid\": 100, \"values\": [2]},\n"
	    "    {\"stack\": 4, \"pid\": 200, \"tid\": 200, \"values\": [1]}\n"
	    "  ]\n"
	    "}\n";
	struct fixture fx;
	size_t len;
	char *text, *again;

	fx_standard(&fx);
	/* A process name with a tab, an escape and a byte that is not UTF-8. */
	fx.procs[1].name = fx_str(&fx, "p\ty\x1b\xff");
	fx.procs[1].has_uid = 1;
	fx.procs[1].uid = 1000;
	fx.procs[1].has_exited = 1;
	fx.procs[1].exited = 1;
	text = render(format_json, &fx.p, NULL, &len);
	CHECK_STREQ(text, want);
	again = render(format_json, &fx.p, NULL, &len);
	CHECK_STREQ(again, text);
	free(again);
	free(text);

	fx_init_samples(&fx, 0);
	text = render(format_json, &fx.p, NULL, &len);
	CHECK(text && strstr(text, "  \"frames\": [],\n  \"stacks\": [],\n  \"samples\": []\n}\n"));
	free(text);
}

static char *json_of(const char *s)
{
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	CHECK_EQ_I(json_write_string(f, s), 0);
	fclose(f);
	return buf;
}

#define CHECK_JSON(in, want)                                                                       \
	do {                                                                                       \
		char *j_ = json_of(in);                                                            \
		CHECK_STREQ(j_, want);                                                             \
		free(j_);                                                                          \
	} while (0)

static void test_json_strings(void)
{
	CHECK_JSON("", "\"\"");
	CHECK_JSON("a\"b\\c/d", "\"a\\\"b\\\\c/d\"");
	CHECK_JSON("\b\f\n\r\t\x01\x1f\x7f", "\"\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\"");
	/* Valid UTF-8 of each length passes through. */
	CHECK_JSON("\xc3\xa9\xe2\x82\xac\xf0\x9f\x94\xa5",
		   "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x94\xa5\"");
	/* A stray continuation byte, an overlong '/', a surrogate, past U+10FFFF, a cut tail. */
	CHECK_JSON("a\x80z", "\"a\xef\xbf\xbdz\"");
	CHECK_JSON("\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\"");
	CHECK_JSON("\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
	CHECK_JSON("\xf4\x90\x80\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
	CHECK_JSON("x\xe2\x82", "\"x\xef\xbf\xbd\xef\xbf\xbd\"");
}

#define ARGV(...) ((char *[]){__VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){__VA_ARGS__}) / sizeof(char *)))
#define PARSE(a, e, ...) dump_parse_args(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), a, e)

static void test_format_choice(void)
{
	static const struct {
		const char *file;
		enum dump_format want;
	} by_name[] = {
	    {"cpu.pb.gz", DUMP_FORMAT_PPROF},
	    {"out/cpu.pprof", DUMP_FORMAT_PPROF},
	    {"cpu.speedscope.json", DUMP_FORMAT_SPEEDSCOPE},
	    {"cpu.json", DUMP_FORMAT_JSON},
	    {"cpu.svg", DUMP_FORMAT_SVG},
	    {"cpu.gz", DUMP_FORMAT_FOLDED},
	    {"cpu.folded", DUMP_FORMAT_FOLDED},
	};
	static const struct {
		const char *name;
		enum dump_format want;
	} by_flag[] = {
	    {"pprof", DUMP_FORMAT_PPROF}, {"speedscope", DUMP_FORMAT_SPEEDSCOPE},
	    {"json", DUMP_FORMAT_JSON},	  {"folded", DUMP_FORMAT_FOLDED},
	    {"svg", DUMP_FORMAT_SVG},
	};
	struct dump_args a;
	struct cli_error e = {0};

	for (size_t i = 0; i < sizeof(by_name) / sizeof(by_name[0]); i++) {
		CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "-o", (char *)by_name[i].file), 0);
		CHECK_EQ_I(a.format, by_name[i].want);
	}
	for (size_t i = 0; i < sizeof(by_flag) / sizeof(by_flag[0]); i++) {
		/* --format wins over the file name. */
		CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "-o", "x.svg", "--format",
				 (char *)by_flag[i].name),
			   0);
		CHECK_EQ_I(a.format, by_flag[i].want);
	}
	CHECK_EQ_I(PARSE(&a, &e, "dump", "flamegraph", "--format", "PPROF"), -EINVAL);
	CHECK_STREQ(e.msg, "dump: --format 'PPROF' is not folded, svg, pprof, speedscope or json; "
			   "see 'profctl dump --help'");
}

/*
 * A pid the kernel reused: two processes of pid 100, each sample and thread naming its own by
 * Sample.process / Thread.process. Every format shows each one's samples under its own name
 * (looking the name up by pid gave both the same one).
 */
static void fx_reused(struct fixture *fx)
{
	fx_init_samples(fx, 10000000);
	uint32_t f_main = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	uint32_t f_old = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "oldproc_secret_fn");
	uint32_t f_new = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "newproc_fn");
	uint32_t s_old = fx_stack(fx, 2, (uint32_t[]){f_main, f_old});
	uint32_t s_new = fx_stack(fx, 2, (uint32_t[]){f_main, f_new});

	fx_proc(fx, 100, "oldproc");
	fx_proc(fx, 100, "newproc");
	fx->procs[0].has_start_time = fx->procs[1].has_start_time = 1;
	fx->procs[0].start_time = 1000;
	fx->procs[1].start_time = 2000;
	fx_thread(fx, 100, 100, "old-main");
	fx_thread(fx, 100, 100, "new-main");
	fx->threads[0].process = 1;
	fx->threads[1].process = 2;
	fx_sample(fx, s_new, 100, 5);
	fx_sample(fx, s_old, 100, 3);
	fx->samples[0].has_process = fx->samples[1].has_process = 1;
	fx->samples[0].process = 2;
	fx->samples[1].process = 1;
}

static void test_reused_pid(void)
{
	struct render_opts ro = {.process_root = true};
	Perftools__Profiles__Profile *pp;
	struct fixture fx;
	char why[128], *buf = NULL, *out;
	size_t len = 0;
	FILE *f;

	fx_reused(&fx);
	CHECK_EQ_I(profile_check(&fx.p, why, sizeof(why)), 0);
	CHECK(profile_sample_process(&fx.p, &fx.samples[1]) == &fx.procs[0]);
	CHECK_STREQ(profile_sample_thread_name(&fx.p, &fx.samples[0]), "new-main");

	f = open_memstream(&buf, &len);
	CHECK(f && format_folded(&fx.p, &ro, f) == 0);
	if (f)
		fclose(f);
	CHECK_STREQ(buf, "newproc;main;newproc_fn 5\n"
			 "oldproc;main;oldproc_secret_fn 3\n");
	free(buf);

	pp = pprof_of(&fx);
	if (pp) {
		char *d = describe(pp);

		CHECK(d && strstr(d, "= 5 50000000 pid=100 tid=100 thread_name=new-main "
				     "process_name=newproc\n") != NULL);
		CHECK(d && strstr(d, "= 3 30000000 pid=100 tid=100 thread_name=old-main "
				     "process_name=oldproc\n") != NULL);
		free(d);
		perftools__profiles__profile__free_unpacked(pp, NULL);
	}

	out = render(format_speedscope, &fx.p, NULL, &len);
	CHECK(out && strstr(out, "\"name\": \"old-main (tid 100)\""));
	CHECK(out && strstr(out, "\"name\": \"new-main (tid 100)\""));
	free(out);

	out = render(format_json, &fx.p, NULL, &len);
	CHECK(out && strstr(out, "{\"pid\": 100, \"name\": \"oldproc\", \"uid\": null, "
				 "\"exited\": false, \"start_time\": 1000}"));
	CHECK(out && strstr(out, "{\"stack\": 1, \"pid\": 100, \"tid\": 100, \"process\": 1, "
				 "\"values\": [5]}"));
	CHECK(out && strstr(out, "{\"tid\": 100, \"pid\": 100, \"name\": \"old-main\", "
				 "\"process\": 0}"));
	free(out);

	/* A process index past the table is refused before any format reads it. */
	fx.samples[1].process = 3;
	CHECK_EQ_I(profile_check(&fx.p, why, sizeof(why)), -EPROTO);
	CHECK_STREQ(why, "sample 1 names process 3 of 2");
	fx.samples[1].process = 1;
	fx.threads[0].process = 9;
	CHECK_EQ_I(profile_check(&fx.p, why, sizeof(why)), -EPROTO);
	CHECK_STREQ(why, "thread 0 names process 9 of 2");
}

int main(void)
{
	test_pprof();
	test_pprof_value_types();
	test_pprof_default_type();
	test_pprof_main_mapping();
	test_pprof_main_exe();
	test_speedscope();
	test_json();
	test_json_strings();
	test_format_choice();
	test_reused_pid();
	return CHECK_DONE();
}
