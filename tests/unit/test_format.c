// SPDX-License-Identifier: BSD-2-Clause
/* Frame naming, folded output and the SVG flame graph, from profiles built by hand. */
#include "check.h"
#include "format.h"
#include "flame.h"
#include "profile_fixture.h"
#include "reshape.h"

#include <errno.h>
#include <unistd.h>

/*
 * Two processes; kernel, native and unknown frames; two stacks sharing main;work.
 *   pid 100 (python3): main;work;do_syscall_64;schedule x3 and x4, main;work;compute x5
 *   pid 200 (bash):    main;work;compute x2, main;[unknown in libfoo] x1
 */
static void fx_standard(struct fixture *fx)
{
	uint32_t f_main, f_work, f_sched, f_unk, f_sys, f_comp;

	fx_init(fx);
	f_main = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	f_work = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "work");
	f_sched = fx_frame(fx, PROFD__FRAME_KIND__FRAME_KERNEL, "schedule");
	f_unk = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "[unknown]");
	fx->frames[f_unk].has_module = 1;
	fx->frames[f_unk].module = fx_str(fx, "/usr/lib/libfoo.so");
	fx->frames[f_unk].has_address = 1;
	fx->frames[f_unk].address = 0x1a2b;
	f_sys = fx_frame(fx, PROFD__FRAME_KIND__FRAME_KERNEL, "do_syscall_64");
	f_comp = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "compute");

	uint32_t s_sched = fx_stack(fx, 4, (uint32_t[]){f_main, f_work, f_sys, f_sched});
	uint32_t s_comp = fx_stack(fx, 3, (uint32_t[]){f_main, f_work, f_comp});
	uint32_t s_unk = fx_stack(fx, 2, (uint32_t[]){f_main, f_unk});

	fx_sample(fx, s_sched, 100, 3);
	fx_sample(fx, s_comp, 100, 5);
	fx_sample(fx, s_comp, 200, 2);
	fx_sample(fx, s_unk, 200, 1);
	fx_sample(fx, s_sched, 100, 4);
	fx_proc(fx, 200, "bash");
	fx_proc(fx, 100, "python3");
}

/* Render with fn into a malloc'd string; NULL on failure. */
static char *render(int (*fn)(const Profd__Profile *, const struct render_opts *, FILE *),
		    const Profd__Profile *p, bool process_root)
{
	struct render_opts o = {.process_root = process_root, .title = "test <&> graph"};
	char *buf = NULL;
	size_t len = 0;
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

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void test_frame_names(void)
{
	struct fixture fx;
	char buf[128];
	uint32_t i;

	fx_init(&fx);
	i = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_KERNEL, "schedule");
	profile_frame_name(&fx.p, &fx.frames[i], buf, sizeof(buf));
	CHECK_STREQ(buf, "schedule_[k]");

	i = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "memcpy");
	profile_frame_name(&fx.p, &fx.frames[i], buf, sizeof(buf));
	CHECK_STREQ(buf, "memcpy");

	i = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "[unknown]");
	fx.frames[i].has_module = 1;
	fx.frames[i].module = fx_str(&fx, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	fx.frames[i].has_address = 1;
	fx.frames[i].address = 0x29d90;
	profile_frame_name(&fx.p, &fx.frames[i], buf, sizeof(buf));
	CHECK_STREQ(buf, "[unknown] (libc.so.6+0x29d90)");

	/* No symbol and no module: the raw address, still marked as kernel. */
	i = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_KERNEL, "");
	fx.frames[i].has_address = 1;
	fx.frames[i].address = 0xffffffff81000000ull;
	profile_frame_name(&fx.p, &fx.frames[i], buf, sizeof(buf));
	CHECK_STREQ(buf, "[unknown] (0xffffffff81000000)_[k]");

	/* No symbol, module or address (a frame the unwinder could not place): nothing to add. */
	i = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "[unknown]");
	fx.frames[i].has_address = 1;
	fx.frames[i].address = 0;
	profile_frame_name(&fx.p, &fx.frames[i], buf, sizeof(buf));
	CHECK_STREQ(buf, "[unknown]");

	i = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_PYTHON, "step");
	fx.frames[i].has_file = 1;
	fx.frames[i].file = fx_str(&fx, "/app/models/train.py");
	fx.frames[i].has_line = 1;
	fx.frames[i].line = 42;
	profile_frame_name(&fx.p, &fx.frames[i], buf, sizeof(buf));
	CHECK_STREQ(buf, "step (train.py:42)");

	i = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_GPU, "sgemm_kernel");
	CHECK_EQ_U(profile_frame_name(&fx.p, &fx.frames[i], buf, sizeof(buf)), 16);
	CHECK_STREQ(buf, "sgemm_kernel_[g]");

	/* Truncation keeps the string terminated and reports the whole length. */
	CHECK_EQ_U(profile_frame_name(&fx.p, &fx.frames[i], buf, 6), 16);
	CHECK_STREQ(buf, "sgemm");
}

static void test_check(void)
{
	struct fixture fx;
	char why[128];

	fx_standard(&fx);
	CHECK_EQ_I(profile_check(&fx.p, why, sizeof(why)), 0);
	fx.stack_frames[1][0] = 99;
	CHECK_EQ_I(profile_check(&fx.p, why, sizeof(why)), -EPROTO);
	CHECK_STREQ(why, "stack 1 names frame 99 of 6");

	fx_standard(&fx);
	fx.samples[2].stack = 3;
	CHECK_EQ_I(profile_check(&fx.p, why, sizeof(why)), -EPROTO);
	CHECK_STREQ(why, "sample 2 names stack 3 of 3");

	fx_standard(&fx);
	fx.frames[0].name = 500;
	CHECK_EQ_I(profile_check(&fx.p, why, sizeof(why)), -EPROTO);
}

static void test_folded(void)
{
	struct fixture fx;
	char *out;

	fx_standard(&fx);
	out = render(format_folded, &fx.p, false);
	CHECK_STREQ(out, "main;[unknown] (libfoo.so+0x1a2b) 1\n"
			 "main;work;compute 7\n"
			 "main;work;do_syscall_64_[k];schedule_[k] 7\n");
	free(out);

	/* System-wide: the process name is the root frame, so processes stay apart. */
	out = render(format_folded, &fx.p, true);
	CHECK_STREQ(out, "bash;main;[unknown] (libfoo.so+0x1a2b) 1\n"
			 "bash;main;work;compute 2\n"
			 "python3;main;work;compute 5\n"
			 "python3;main;work;do_syscall_64_[k];schedule_[k] 7\n");
	free(out);
}

static void test_folded_sanitize(void)
{
	struct fixture fx;
	uint32_t f_main, f_semi, f_under, f_nl;
	char *out;

	fx_init(&fx);
	f_main = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	f_semi = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "a;b");
	f_under = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "a_b");
	f_nl = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "x\ny");
	fx_sample(&fx, fx_stack(&fx, 2, (uint32_t[]){f_main, f_semi}), 1, 2);
	fx_sample(&fx, fx_stack(&fx, 2, (uint32_t[]){f_main, f_under}), 1, 3);
	fx_sample(&fx, fx_stack(&fx, 2, (uint32_t[]){f_main, f_nl}), 1, 1);
	/* A pid the profile does not name, an empty stack, a zero value and no value at all. */
	fx_sample(&fx, fx_stack(&fx, 0, NULL), 1, 4);
	fx_sample(&fx, 0, 1, 0);
	fx_sample(&fx, 0, 1, 9);
	fx.samples[5].n_values = 0;

	/* "a;b" turns into "a_b" and then is the same stack as "a_b": one line, 2 + 3. */
	out = render(format_folded, &fx.p, false);
	CHECK_STREQ(out, "[no stack] 4\n"
			 "main;a_b 5\n"
			 "main;x?y 1\n");
	free(out);

	out = render(format_folded, &fx.p, true);
	CHECK_STREQ(out, "[pid 1];[no stack] 4\n"
			 "[pid 1];main;a_b 5\n"
			 "[pid 1];main;x?y 1\n");
	free(out);
}

static void test_flame_tree(void)
{
	struct flame_opts o = {.process_root = false};
	const struct flame_node *n;
	struct fixture fx;
	struct flame *f;
	size_t cnt;

	fx_standard(&fx);
	f = flame__new(&fx.p, &o);
	if (!CHECK(f != NULL))
		return;
	n = flame__nodes(f, &cnt);
	/* all, main, work, do_syscall_64, schedule, compute, [unknown] */
	CHECK_EQ_U(cnt, 7);
	CHECK_EQ_U(flame__max_depth(f), 4);
	CHECK_STREQ(n[0].name, "all");
	CHECK_EQ_U(n[0].value, 15);
	CHECK_EQ_U(n[0].self, 0);
	CHECK_STREQ(n[n[0].first_child].name, "main");
	CHECK_EQ_U(n[n[0].first_child].value, 15);
	/* Children come in name order: "[unknown] ..." sorts before "work". */
	CHECK_STREQ(n[n[n[0].first_child].first_child].name, "[unknown] (libfoo.so+0x1a2b)");
	flame__free(f);
}

/*
 * A stack met again (another thread, another process of the same name) adds to the leaf it
 * reached the first time; totals come out the same whatever the order and however the
 * daemon split the rows (per thread, or merged per process name).
 */
static void shared_stacks(struct fixture *fx, uint32_t *s_work, uint32_t *s_comp, uint32_t *s_none)
{
	uint32_t f_main, f_work, f_comp;

	fx_init(fx);
	f_main = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	f_work = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "work");
	f_comp = fx_frame(fx, PROFD__FRAME_KIND__FRAME_NATIVE, "compute");
	*s_work = fx_stack(fx, 2, (uint32_t[]){f_main, f_work});
	*s_comp = fx_stack(fx, 3, (uint32_t[]){f_main, f_work, f_comp});
	*s_none = fx_stack(fx, 0, NULL);
}

static void test_flame_shared_stacks(void)
{
	struct flame_opts o = {.process_root = true};
	const struct flame_node *n;
	struct fixture fx, merged;
	uint32_t s_work, s_comp, s_none;
	struct flame *f;
	size_t cnt;
	char *out;

	shared_stacks(&fx, &s_work, &s_comp, &s_none);
	fx_sample_tid(&fx, s_comp, 100, 101, 1);
	fx_sample_tid(&fx, s_work, 100, 100, 2);
	fx_sample_tid(&fx, s_work, 300, 301, 3);
	fx_sample_tid(&fx, s_none, 300, 300, 4);
	fx_sample_tid(&fx, s_comp, 100, 102, 5);
	fx_sample_tid(&fx, s_work, 400, 400, 6);
	fx_proc(&fx, 100, "python3");
	fx_proc(&fx, 300, "python3");
	fx_proc(&fx, 400, "bash");

	out = render(format_folded, &fx.p, true);
	CHECK_STREQ(out, "bash;main;work 6\n"
			 "python3;[no stack] 4\n"
			 "python3;main;work 5\n"
			 "python3;main;work;compute 6\n");
	free(out);
	out = render(format_folded, &fx.p, false);
	CHECK_STREQ(out, "[no stack] 4\n"
			 "main;work 11\n"
			 "main;work;compute 6\n");
	free(out);

	f = flame__new(&fx.p, &o);
	if (CHECK(f != NULL)) {
		n = flame__nodes(f, &cnt);
		/* all, python3, main, work, compute, [no stack], bash, main, work */
		CHECK_EQ_U(cnt, 9);
		CHECK_EQ_U(n[0].value, 21);
		for (size_t i = 0; i < cnt; i++) {
			uint64_t below = 0;

			for (uint32_t c = n[i].first_child; c != FLAME_NONE; c = n[c].next_sibling)
				below += n[c].value;
			CHECK_EQ_U(n[i].value, n[i].self + below);
		}
		flame__free(f);
	}

	/* The same samples as the daemon sends them merged: one row per name and stack. */
	shared_stacks(&merged, &s_work, &s_comp, &s_none);
	fx_sample_tid(&merged, s_comp, 100, 0, 6);
	fx_sample_tid(&merged, s_work, 100, 0, 5);
	fx_sample_tid(&merged, s_none, 100, 0, 4);
	fx_sample_tid(&merged, s_work, 400, 0, 6);
	fx_proc(&merged, 100, "python3");
	fx_proc(&merged, 400, "bash");
	merged.p.has_merged_processes = merged.p.merged_processes = 1;
	out = render(format_folded, &merged.p, true);
	CHECK_STREQ(out, "bash;main;work 6\n"
			 "python3;[no stack] 4\n"
			 "python3;main;work 5\n"
			 "python3;main;work;compute 6\n");
	free(out);
}

/* Run xmllint on text; 0 valid, 1 invalid, 77 when xmllint is not installed. */
static int xmllint(const char *text)
{
	char path[] = "/tmp/test_format_svg_XXXXXX";
	int fd = mkstemp(path), rc;
	FILE *f;

	if (fd < 0)
		return 1;
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	if (system("command -v xmllint >/dev/null 2>&1") != 0) {
		unlink(path);
		return 77;
	}
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "xmllint --noout %s", path);
		rc = system(cmd);
	}
	unlink(path);
	return rc == 0 ? 0 : 1;
}

/* Set when an SVG could not be validated: the test then ends in CHECK_SKIP, never a pass. */
static bool xml_unchecked;

static void check_valid_xml(const char *svg)
{
	int rc = xmllint(svg);

	if (rc == 77)
		xml_unchecked = true;
	else
		CHECK_EQ_I(rc, 0);
}

static void test_svg(void)
{
	struct fixture fx;
	char *a, *b;

	fx_standard(&fx);
	a = render(format_svg, &fx.p, false);
	if (!CHECK(a != NULL))
		return;
	check_valid_xml(a);
	/* One node per distinct path: each name once, the totals of each. */
	CHECK_EQ_U(count(a, "<title>main ("), 1);
	CHECK_EQ_U(count(a, "<title>work ("), 1);
	CHECK_EQ_U(count(a, "<title>compute (7 samples, 46.67%)</title>"), 1);
	CHECK_EQ_U(count(a, "<title>schedule_[k] (7 samples, 46.67%)</title>"), 1);
	CHECK_EQ_U(count(a, "<title>do_syscall_64_[k] ("), 1);
	CHECK_EQ_U(count(a, "<title>[unknown] (libfoo.so+0x1a2b) (1 samples, 6.67%)</title>"), 1);
	CHECK_EQ_U(count(a, "<title>all (15 samples, 100.00%)</title>"), 1);
	CHECK_EQ_U(count(a, "<g class=\"f\""), 7);
	CHECK_EQ_U(count(a, ">15 samples"), 1);
	/* The root spans the full width between the margins. */
	CHECK_EQ_U(count(a, "width=\"1180.00\""), 2);
	/* The title is escaped; the script is embedded, nothing is fetched. */
	CHECK_EQ_U(count(a, "test &lt;&amp;&gt; graph"), 1);
	CHECK_EQ_U(count(a, "<script"), 1);
	CHECK_EQ_U(count(a, "href"), 0);
	CHECK_EQ_U(count(a, "var W = 1200, XPAD = 10, CW = 6.60, TOTAL = 15;"), 1);
	/* Same input, same bytes (colours come from names, not chance). */
	b = render(format_svg, &fx.p, false);
	CHECK_STREQ(a, b);
	free(b);
	free(a);

	a = render(format_svg, &fx.p, true);
	if (!CHECK(a != NULL))
		return;
	check_valid_xml(a);
	CHECK_EQ_U(count(a, "<title>main ("), 2);
	CHECK_EQ_U(count(a, "<title>work ("), 2);
	CHECK_EQ_U(count(a, "<title>compute ("), 2);
	CHECK_EQ_U(count(a, "<title>python3 (12 samples, 80.00%)</title>"), 1);
	CHECK_EQ_U(count(a, "<title>bash (3 samples, 20.00%)</title>"), 1);
	CHECK_EQ_U(count(a, "<g class=\"f\""), 12);
	free(a);
}

static void test_svg_escaping(void)
{
	struct fixture fx;
	uint32_t f_main, f_odd, f_bad;
	char *a;

	fx_init(&fx);
	f_main = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	f_odd = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "operator<<&\"'>");
	/* Not UTF-8, a control character, a non-character: none may break the XML. */
	f_bad = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "bad\xff\x01\xef\xbf\xbfname");
	fx_sample(&fx, fx_stack(&fx, 2, (uint32_t[]){f_main, f_odd}), 1, 1);
	fx_sample(&fx, fx_stack(&fx, 2, (uint32_t[]){f_main, f_bad}), 1, 1);
	fx.p.has_start_ns = 1;
	fx.p.start_ns = 1000000000ull;
	fx.p.has_end_ns = 1;
	fx.p.end_ns = 31000000000ull;
	a = render(format_svg, &fx.p, false);
	if (!CHECK(a != NULL))
		return;
	check_valid_xml(a);
	CHECK_EQ_U(count(a, "<title>operator&lt;&lt;&amp;&quot;&apos;&gt; (1 samples, 50.00%)"), 1);
	CHECK_EQ_U(count(a, "<title>bad\xef\xbf\xbd?\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdname ("),
		   1);
	CHECK_EQ_U(count(a, ">2 samples in 30.0 s<"), 1);
	free(a);
}

/*
 * --python-only: the interpreter's native frames between Python frames and the C extension above
 * the newest Python frame go; the kernel, and main below the oldest, stay.
 */
static void test_python_only(void)
{
	struct fixture fx;
	uint32_t f_main, f_eval, f_mod, f_fn, f_ext, f_k, f_eval2;
	Profd__Profile *shaped;
	char *out;

	fx_init(&fx);
	f_main = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	f_eval = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "PyObject_Call");
	f_eval2 = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "_PyFunction_Vectorcall");
	f_mod = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_PYTHON, "<module>");
	fx.frames[f_mod].has_file = 1;
	fx.frames[f_mod].file = fx_str(&fx, "/srv/app.py");
	fx.frames[f_mod].has_line = 1;
	fx.frames[f_mod].line = 3;
	f_fn = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_PYTHON, "train");
	fx.frames[f_fn].has_file = 1;
	fx.frames[f_fn].file = fx_str(&fx, "/srv/app.py");
	fx.frames[f_fn].has_line = 1;
	fx.frames[f_fn].line = 9;
	f_ext = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "sha256_block");
	f_k = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_KERNEL, "clear_page");
	fx_sample(&fx,
		  fx_stack(&fx, 7, (uint32_t[]){f_main, f_mod, f_eval, f_eval2, f_fn, f_ext, f_k}),
		  7, 4);
	fx_sample(&fx, fx_stack(&fx, 2, (uint32_t[]){f_main, f_eval}), 7, 1);
	shaped = reshape(&fx.p, &(struct reshape_opts){.python_only = true});
	CHECK(shaped != NULL);
	out = render(format_folded, shaped, false);
	/* The natives between and above the Python frames go, the kernel's stay. */
	CHECK_STREQ(out, "main;<module> (app.py:3);train (app.py:9);clear_page_[k] 4\n"
			 "main;PyObject_Call 1\n");
	free(out);
	reshape_free(shaped);
}

int main(void)
{
	test_frame_names();
	test_check();
	test_folded();
	test_folded_sanitize();
	test_flame_shared_stacks();
	test_flame_tree();
	test_svg();
	test_svg_escaping();
	test_python_only();
	if (xml_unchecked)
		return CHECK_SKIP("xmllint not installed: the SVGs were not validated as XML");
	return CHECK_DONE();
}
