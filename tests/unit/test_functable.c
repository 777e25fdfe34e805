// SPDX-License-Identifier: BSD-2-Clause
/* Per-function self and total values, their order, and the table and top text, by hand. */
#include "check.h"
#include "functable.h"
#include "profile.h"
#include "profile_fixture.h"

#include <errno.h>

/* A native frame at an address of its own, so equal names are still distinct frames. */
static uint32_t fx_native(struct fixture *fx, const char *name)
{
	return fx_frame_at(fx, PROFD__FRAME_KIND__FRAME_NATIVE, name, 0x1000 + fx->p.n_frames * 16);
}

/* The process does not matter to the table: every sample is in pid and tid 100. */
static void sample(struct fixture *fx, uint32_t stack, uint64_t v)
{
	fx_sample(fx, stack, 100, v);
}

/* A sample with both columns of test_gpu_columns: CPU samples and GPU nanoseconds. */
static void sample2(struct fixture *fx, uint32_t stack, uint64_t v0, uint64_t v1)
{
	fx_sample_values(fx, stack, 100, 100, 2, (uint64_t[]){v0, v1});
}

#define STACK(fx, ...)                                                                             \
	fx_stack(fx, sizeof((uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t),                         \
		 (uint32_t[]){__VA_ARGS__})

/*
 *   main;run;work_a;spin_a x6     spin_a at one address
 *   main;other;spin_a x2          spin_a at another address: the same function
 *   main;run;work_b;spin_b x2
 *   main;run x1                   self in run
 *   main;rec;rec;rec x3           recursion: rec's total is 3, not 9
 *   (no frames) x1                "[no stack]"
 *   main;run;work_b x0            a zero sample changes nothing
 * and a kernel frame no sample uses.
 */
static void fx_standard(struct fixture *fx)
{
	uint32_t f_main, f_run, f_wa, f_sa, f_sa2, f_other, f_wb, f_sb, f_rec;

	fx_init_samples(fx, 0);
	f_main = fx_native(fx, "main");
	f_run = fx_native(fx, "run");
	f_wa = fx_native(fx, "work_a");
	f_sa = fx_native(fx, "spin_a");
	f_wb = fx_native(fx, "work_b");
	f_sb = fx_native(fx, "spin_b");
	f_rec = fx_native(fx, "rec");
	f_other = fx_native(fx, "other");
	f_sa2 = fx_native(fx, "spin_a");
	fx_frame_at(fx, PROFD__FRAME_KIND__FRAME_KERNEL, "schedule", 0xffffffff81000000ull);

	sample(fx, STACK(fx, f_main, f_run, f_wa, f_sa), 6);
	sample(fx, STACK(fx, f_main, f_other, f_sa2), 2);
	sample(fx, STACK(fx, f_main, f_run, f_wb, f_sb), 2);
	sample(fx, STACK(fx, f_main, f_run), 1);
	sample(fx, STACK(fx, f_main, f_rec, f_rec, f_rec), 3);
	sample(fx, fx_stack(fx, 0, NULL), 1);
	sample(fx, STACK(fx, f_main, f_run, f_wb), 0);
}

static const struct functable_row *find(const struct functable *t, const char *name)
{
	for (size_t i = 0; i < functable__n_rows(t); i++)
		if (strcmp(functable__row(t, i)->name, name) == 0)
			return functable__row(t, i);
	return NULL;
}

/* "a,b,c": the row names in the table's order. */
static void order(const struct functable *t, char *buf, size_t len)
{
	size_t pos = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < functable__n_rows(t) && pos < len; i++)
		pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", i ? "," : "",
					functable__row(t, i)->name);
}

static void check_row(const struct functable *t, const char *name, uint64_t self, uint64_t total)
{
	const struct functable_row *r = find(t, name);

	CHECK(r != NULL);
	if (!r) {
		fprintf(stderr, "  no row %s\n", name);
		return;
	}
	if (r->self[0] != self || r->total[0] != total)
		fprintf(stderr, "  row %s: self %" PRIu64 " total %" PRIu64 "\n", name, r->self[0],
			r->total[0]);
	CHECK_EQ_U(r->self[0], self);
	CHECK_EQ_U(r->total[0], total);
}

static void test_sums(void)
{
	struct fixture fx;
	struct functable *t;
	char buf[256];

	fx_standard(&fx);
	t = functable__new(&fx.p);
	CHECK(t != NULL);
	if (!t)
		return;
	CHECK_EQ_U(functable__n_values(t), 1);
	CHECK_STREQ(functable__value_type(t, 0), "samples");
	CHECK_EQ_U(functable__cpu_index(t), 0);
	CHECK_EQ_U(functable__sum(t, 0), 15);
	CHECK_EQ_U(functable__period_ns(t), 0);
	/* 9 functions: main run work_a spin_a other work_b spin_b rec [no stack]; no schedule. */
	CHECK_EQ_U(functable__n_rows(t), 9);
	check_row(t, "main", 0, 14);
	check_row(t, "run", 1, 9);
	check_row(t, "work_a", 0, 6);
	check_row(t, "spin_a", 8, 8);
	check_row(t, "other", 0, 2);
	check_row(t, "work_b", 0, 2);
	check_row(t, "spin_b", 2, 2);
	check_row(t, "rec", 3, 3);
	check_row(t, "[no stack]", 1, 1);
	CHECK(find(t, "schedule_[k]") == NULL);

	/* Self: ties broken by total, then by name. */
	order(t, buf, sizeof(buf));
	CHECK_STREQ(buf, "spin_a,rec,spin_b,run,[no stack],main,work_a,other,work_b");
	functable__sort(t, FUNCTABLE_SORT_TOTAL, 0);
	order(t, buf, sizeof(buf));
	CHECK_STREQ(buf, "main,run,spin_a,work_a,rec,spin_b,other,work_b,[no stack]");
	/* An out-of-range column sorts by the CPU column. */
	functable__sort(t, FUNCTABLE_SORT_SELF, 7);
	order(t, buf, sizeof(buf));
	CHECK_STREQ(buf, "spin_a,rec,spin_b,run,[no stack],main,work_a,other,work_b");
	functable__free(t);
}

static void test_names(void)
{
	struct fixture fx;
	struct functable *t;
	uint32_t f_k, f_bad, f_py, f_py2, f_unk1, f_unk2;

	fx_init_samples(&fx, 0);
	f_k = fx_frame_at(&fx, PROFD__FRAME_KIND__FRAME_KERNEL, "schedule", 0xffffffff81000000ull);
	f_bad = fx_native(&fx, "evil\033[2Jname");
	f_py = fx_frame_at(&fx, PROFD__FRAME_KIND__FRAME_PYTHON, "train", 0);
	fx.frames[f_py].has_file = 1;
	fx.frames[f_py].file = fx_str(&fx, "/srv/app/model.py");
	fx.frames[f_py].has_line = 1;
	fx.frames[f_py].line = 42;
	f_py2 = fx_frame_at(&fx, PROFD__FRAME_KIND__FRAME_PYTHON, "train", 0);
	fx.frames[f_py2].has_file = 1;
	fx.frames[f_py2].file = fx.frames[f_py].file;
	fx.frames[f_py2].has_line = 1;
	fx.frames[f_py2].line = 57;
	f_unk1 = fx_frame_at(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "[unknown]", 0x10);
	f_unk2 = fx_frame_at(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "[unknown]", 0x20);
	fx.frames[f_unk1].has_module = fx.frames[f_unk2].has_module = 1;
	fx.frames[f_unk1].module = fx.frames[f_unk2].module = fx_str(&fx, "/lib/libcrypto.so.3");
	sample(&fx, STACK(&fx, f_py, f_bad, f_k), 5);
	sample(&fx, STACK(&fx, f_py2, f_unk1), 2);
	sample(&fx, STACK(&fx, f_py2, f_unk2), 3);
	t = functable__new(&fx.p);
	CHECK(t != NULL);
	if (!t)
		return;
	check_row(t, "schedule_[k]", 5, 5);
	/* An escape sequence in a symbol must not reach the terminal. */
	check_row(t, "evil?[2Jname", 0, 5);
	/* One row per function: every line of a Python function, every address of a module. */
	check_row(t, "train (model.py)", 0, 10);
	check_row(t, "[unknown] (libcrypto.so.3)", 5, 5);
	functable__free(t);
}

/* Render with fn into a malloc'd string; NULL on failure. */
static char *render(int (*fn)(const struct functable *, const struct functable_print_opts *,
			      FILE *),
		    const struct functable *t, size_t width, size_t limit)
{
	struct functable_print_opts o = {.width = width, .limit = limit};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int err;

	if (!f)
		return NULL;
	err = fn(t, &o, f);
	fclose(f);
	if (err) {
		fprintf(stderr, "render failed: %d\n", err);
		free(buf);
		return NULL;
	}
	return buf;
}

/* main;compute x3, main;io x1 at 1 kHz. */
static struct functable *small_table(struct fixture *fx, uint64_t period_ns)
{
	uint32_t f_main, f_comp, f_io;

	fx_init_samples(fx, period_ns);
	f_main = fx_native(fx, "main");
	f_comp = fx_native(fx, "compute");
	f_io = fx_native(fx, "io");
	sample(fx, STACK(fx, f_main, f_comp), 3);
	sample(fx, STACK(fx, f_main, f_io), 1);
	return functable__new(&fx->p);
}

static void test_table_text(void)
{
	struct fixture fx;
	struct functable *t = small_table(&fx, 1000000);
	char *s;

	CHECK(t != NULL);
	if (!t)
		return;
	s = render(functable__print_table, t, 0, 0);
	CHECK_STREQ(
	    s, "-------  ------------  ------------  ------------  ------------  ------------\n"
	       "Name       Self CPU %      Self CPU   CPU total %     CPU total     # Samples\n"
	       "-------  ------------  ------------  ------------  ------------  ------------\n"
	       "compute        75.00%       3.000ms        75.00%       3.000ms             3\n"
	       "io             25.00%       1.000ms        25.00%       1.000ms             1\n"
	       "main            0.00%       0.000us       100.00%       4.000ms             4\n"
	       "-------  ------------  ------------  ------------  ------------  ------------\n"
	       "Self CPU time total: 4.000ms\n");
	free(s);

	/* --limit and --sort total. */
	functable__sort(t, FUNCTABLE_SORT_TOTAL, 0);
	s = render(functable__print_table, t, 0, 1);
	CHECK_STREQ(s,
		    "----  ------------  ------------  ------------  ------------  ------------\n"
		    "Name    Self CPU %      Self CPU   CPU total %     CPU total     # Samples\n"
		    "----  ------------  ------------  ------------  ------------  ------------\n"
		    "main         0.00%       0.000us       100.00%       4.000ms             4\n"
		    "----  ------------  ------------  ------------  ------------  ------------\n"
		    "Self CPU time total: 4.000ms\n");
	free(s);
	functable__free(t);

	/* Without a period there is no time: sample counts instead. */
	t = small_table(&fx, 0);
	CHECK(t != NULL);
	if (!t)
		return;
	s = render(functable__print_table, t, 0, 2);
	CHECK_STREQ(s, "-------  ------------  ------------  ------------  -------------\n"
		       "Name       Self CPU %  Self Samples   CPU total %  Total Samples\n"
		       "-------  ------------  ------------  ------------  -------------\n"
		       "compute        75.00%             3        75.00%              3\n"
		       "io             25.00%             1        25.00%              1\n"
		       "-------  ------------  ------------  ------------  -------------\n"
		       "Self CPU samples total: 4\n");
	free(s);
	functable__free(t);
}

static void test_width(void)
{
	struct fixture fx;
	struct functable *t;
	uint32_t f_long, f_u;
	char *s;

	fx_init_samples(&fx, 1000000);
	f_long = fx_native(&fx, "a_very_long_function_name_that_does_not_fit");
	/* Three 2-byte characters: cut and padded by characters, not bytes. */
	f_u = fx_native(&fx, "\xc3\xa9t\xc3\xa9_\xc3\xa9");
	sample(&fx, STACK(&fx, f_long), 2);
	sample(&fx, STACK(&fx, f_u), 1);
	t = functable__new(&fx.p);
	CHECK(t != NULL);
	if (!t)
		return;
	/* 5 columns of 12 + 2 take 70: 90 leaves the name 20. */
	s = render(functable__print_table, t, 90, 0);
	CHECK(s && strstr(s, "\na_very_long_funct...        66.67%") != NULL);
	CHECK(s && strstr(s, "\n\xc3\xa9t\xc3\xa9_\xc3\xa9"
			     "                       33.33%") != NULL);
	CHECK(s && strstr(s, "\n--------------------  ------------") != NULL);
	free(s);

	/* top: the name is last and takes what is left of the width: 50 - 4 * (7 + 2). */
	s = render(functable__print_top, t, 50, 0);
	CHECK_STREQ(s, " Self %  Total %     Self    Total  Function\n"
		       " 66.67%   66.67%        2        2  a_very_long...\n"
		       " 33.33%   33.33%        1        1  \xc3\xa9t\xc3\xa9_\xc3\xa9\n");
	free(s);
	/* Unlimited width: whole names. */
	s = render(functable__print_top, t, 0, 1);
	CHECK_STREQ(s, " Self %  Total %     Self    Total  Function\n"
		       " 66.67%   66.67%        2        2  "
		       "a_very_long_function_name_that_does_not_fit\n");
	free(s);
	functable__free(t);
}

static void test_gpu_columns(void)
{
	struct fixture fx;
	struct functable *t;
	uint32_t f_main, f_step, f_launch, f_kern;
	const struct functable_row *r;
	char *s;

	fx_init_samples(&fx, 10000000);
	fx_value_type(&fx, "gpu_time", "nanoseconds");
	f_main = fx_native(&fx, "main");
	f_step = fx_native(&fx, "step");
	f_launch = fx_native(&fx, "cudaLaunchKernel");
	f_kern = fx_frame_at(&fx, PROFD__FRAME_KIND__FRAME_GPU, "gemm", 0);
	sample2(&fx, STACK(&fx, f_main, f_step), 4, 0);
	sample2(&fx, STACK(&fx, f_main, f_step, f_launch), 1, 0);
	sample2(&fx, STACK(&fx, f_main, f_step, f_launch, f_kern), 0, 2500000);
	t = functable__new(&fx.p);
	CHECK(t != NULL);
	if (!t)
		return;
	CHECK_EQ_U(functable__n_values(t), 2);
	CHECK_STREQ(functable__value_type(t, 1), "gpu_time");
	CHECK_STREQ(functable__value_unit(t, 1), "nanoseconds");
	CHECK_EQ_U(functable__sum(t, 0), 5);
	CHECK_EQ_U(functable__sum(t, 1), 2500000);
	r = find(t, "gemm_[g]");
	CHECK(r && r->self[0] == 0 && r->total[0] == 0);
	CHECK(r && r->self[1] == 2500000 && r->total[1] == 2500000);
	r = find(t, "step");
	CHECK(r && r->self[0] == 4 && r->total[0] == 5 && r->self[1] == 0 &&
	      r->total[1] == 2500000);
	/* Sorting by the GPU column puts the kernel first. */
	functable__sort(t, FUNCTABLE_SORT_SELF, 1);
	CHECK_STREQ(functable__row(t, 0)->name, "gemm_[g]");
	functable__sort(t, FUNCTABLE_SORT_SELF, 0);

	s = render(functable__print_table, t, 0, 0);
	CHECK(s &&
	      strstr(s, "\nName                Self CPU %      Self CPU   CPU total %     CPU "
			"total     # Samples    Self GPU %      Self GPU   GPU total %     GPU "
			"total\n") != NULL);
	CHECK(s &&
	      strstr(s, "\nstep                    80.00%      40.000ms       100.00%      "
			"50.000ms             5         0.00%       0.000us       100.00%       "
			"2.500ms\n") != NULL);
	CHECK(s &&
	      strstr(s, "\ngemm_[g]                 0.00%       0.000us         0.00%       "
			"0.000us             0       100.00%       2.500ms       100.00%       "
			"2.500ms\n") != NULL);
	CHECK(s &&
	      strstr(s, "\nSelf CPU time total: 50.000ms\nSelf GPU time total: 2.500ms\n") != NULL);
	free(s);
	s = render(functable__print_top, t, 0, 1);
	CHECK_STREQ(s, " Self %  Total %     Self    Total  Self GPU  GPU total  Function\n"
		       " 80.00%  100.00%        4        5   0.000us    2.500ms  step\n");
	free(s);
	functable__free(t);
}

/* All seven columns of a GPU daemon, only two with values: the empty ones are not shown. */
static void test_empty_columns_hidden(void)
{
	struct fixture fx;
	struct functable *t;
	uint32_t f_main, f_kern;
	char *s;

	fx_init_gpu(&fx, 10000000);
	f_main = fx_native(&fx, "main");
	f_kern = fx_frame_at(&fx, PROFD__FRAME_KIND__FRAME_GPU, "gemm", 0);
	fx_sample_values(&fx, STACK(&fx, f_main), 100, 100, FX_GPU_COLUMNS,
			 (uint64_t[]){4, 0, 0, 0, 0, 0, 0});
	fx_sample_values(&fx, STACK(&fx, f_main, f_kern), 100, 100, FX_GPU_COLUMNS,
			 (uint64_t[]){0, 0, 2500000, 0, 0, 0, 0});
	t = functable__new(&fx.p);
	CHECK(t != NULL);
	if (!t)
		return;
	CHECK_EQ_U(functable__n_values(t), 7);
	s = render(functable__print_table, t, 0, 0);
	CHECK(s &&
	      strstr(s, "\nName        Self CPU %      Self CPU   CPU total %     CPU "
			"total     # Samples    Self GPU %      Self GPU   GPU total %     GPU "
			"total\n") != NULL);
	CHECK(s && strstr(s, "gpu_idle") == NULL && strstr(s, "copy") == NULL);
	CHECK(s &&
	      strstr(s, "\nSelf CPU time total: 40.000ms\nSelf GPU time total: 2.500ms\n") != NULL);
	free(s);
	s = render(functable__print_top, t, 0, 1);
	CHECK_STREQ(s, " Self %  Total %     Self    Total  Self GPU  GPU total  Function\n"
		       "100.00%  100.00%        4        4   0.000us    2.500ms  main\n");
	free(s);
	functable__free(t);
}

static void test_time_format(void)
{
	char buf[32];

	CHECK_STREQ(functable_fmt_time(0, buf, sizeof(buf)), "0.000us");
	CHECK_STREQ(functable_fmt_time(12345, buf, sizeof(buf)), "12.345us");
	CHECK_STREQ(functable_fmt_time(999999, buf, sizeof(buf)), "999.999us");
	CHECK_STREQ(functable_fmt_time(10588000, buf, sizeof(buf)), "10.588ms");
	CHECK_STREQ(functable_fmt_time(1234000000, buf, sizeof(buf)), "1.234s");
}

static void test_empty(void)
{
	struct fixture fx;
	struct functable *t;
	char *s;

	fx_init_samples(&fx, 1000000);
	t = functable__new(&fx.p);
	CHECK(t != NULL);
	if (!t)
		return;
	CHECK_EQ_U(functable__n_rows(t), 0);
	CHECK_EQ_U(functable__sum(t, 0), 0);
	s = render(functable__print_top, t, 80, 0);
	CHECK_STREQ(s, " Self %  Total %     Self    Total  Function\n");
	free(s);
	functable__free(t);
}

int main(void)
{
	test_sums();
	test_names();
	test_table_text();
	test_width();
	test_gpu_columns();
	test_empty_columns_hidden();
	test_time_format();
	test_empty();
	return CHECK_DONE();
}
