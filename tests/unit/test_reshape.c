// SPDX-License-Identifier: BSD-2-Clause
/*
 * The py-spy-like views: --function, --no-lineno, native frames folded into Python self time,
 * --python-only at the leaf, --per-thread roots and rows, the interpreter's frames between
 * Python frames hidden unless --all-frames; and that what they merge really sums.
 */
#include "check.h"
#include "format.h"
#include "functable.h"
#include "profile.h"
#include "profile_fixture.h"
#include "reshape.h"
#include "view.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PY PROFD__FRAME_KIND__FRAME_PYTHON
#define NAT PROFD__FRAME_KIND__FRAME_NATIVE
#define KER PROFD__FRAME_KIND__FRAME_KERNEL
#define GPU PROFD__FRAME_KIND__FRAME_GPU

static char *folded(const Profd__Profile *p, bool process_root)
{
	struct render_opts o = {.process_root = process_root};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (format_folded(p, &o, f)) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	return buf;
}

static char *table_text(const struct functable *t, bool top)
{
	struct functable_print_opts o = {0};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (top)
		functable__print_top(t, &o, f);
	else
		functable__print_table(t, &o, f);
	fclose(f);
	return buf;
}

/* The row named name (of thread, when not NULL), or NULL. */
static const struct functable_row *row(const struct functable *t, const char *name,
				       const char *thread)
{
	for (size_t i = 0; i < functable__n_rows(t); i++) {
		const struct functable_row *r = functable__row(t, i);

		if (strcmp(r->name, name) == 0 &&
		    (!thread || (r->thread && strcmp(r->thread, thread) == 0)))
			return r;
	}
	return NULL;
}

/* A function sampled at two lines, and an unnamed frame at two addresses of one library. */
static void lines_fixture(struct fixture *fx)
{
	uint32_t m, mod, t9, t11, u1, u2;

	fx_init_samples(fx, 0);
	m = fx_frame(fx, NAT, "main");
	mod = fx_frame_full(fx, PY, "<module>", NULL, 0, "/srv/app.py", 3);
	t9 = fx_frame_full(fx, PY, "train", NULL, 0, "/srv/app.py", 9);
	t11 = fx_frame_full(fx, PY, "train", NULL, 0, "/srv/app.py", 11);
	u1 = fx_frame_full(fx, NAT, "[unknown]", "/lib/libx.so", 0x10, NULL, 0);
	u2 = fx_frame_full(fx, NAT, "[unknown]", "/lib/libx.so", 0x20, NULL, 0);
	fx_sample(fx, fx_stack(fx, 3, (uint32_t[]){m, mod, t9}), 7, 2);
	fx_sample(fx, fx_stack(fx, 3, (uint32_t[]){m, mod, t11}), 7, 3);
	fx_sample(fx, fx_stack(fx, 4, (uint32_t[]){m, mod, t9, u1}), 7, 1);
	fx_sample(fx, fx_stack(fx, 4, (uint32_t[]){m, mod, t11, u2}), 7, 4);
}

/* --function: a stack differing only by lines is one stack, one sample, the values summed. */
static void test_function(void)
{
	struct fixture fx;
	Profd__Profile *p;
	char err[128], *out;

	lines_fixture(&fx);
	p = reshape(&fx.p, &(struct reshape_opts){.function = true});
	CHECK(p != NULL);
	CHECK_EQ_I(profile_check(p, err, sizeof(err)), 0);
	CHECK_EQ_U(p->n_stacks, 2);
	CHECK_EQ_U(p->n_samples, 2);
	CHECK_EQ_U(p->samples[0]->values[0] + p->samples[1]->values[0], 10);
	/* main, <module>, train, [unknown] (libx.so): 4 frames from 6. */
	CHECK_EQ_U(p->n_frames, 4);
	out = folded(p, false);
	CHECK_STREQ(out, "main;<module> (app.py);train (app.py) 5\n"
			 "main;<module> (app.py);train (app.py);[unknown] (libx.so) 5\n");
	free(out);
	reshape_free(p);
}

/* --no-lineno: lines go, so Python frames merge; addresses of unnamed frames stay apart. */
static void test_no_lineno(void)
{
	struct fixture fx;
	Profd__Profile *p;
	char *out;

	lines_fixture(&fx);
	p = reshape(&fx.p, &(struct reshape_opts){.no_lineno = true});
	CHECK(p != NULL);
	CHECK_EQ_U(p->n_stacks, 3);
	out = folded(p, false);
	CHECK_STREQ(out, "main;<module> (app.py);train (app.py) 5\n"
			 "main;<module> (app.py);train (app.py);[unknown] (libx.so+0x10) 1\n"
			 "main;<module> (app.py);train (app.py);[unknown] (libx.so+0x20) 4\n");
	free(out);
	reshape_free(p);

	/* Nothing asked: the frames read as sampled. */
	p = reshape(&fx.p, &(struct reshape_opts){0});
	CHECK(p != NULL);
	out = folded(p, false);
	CHECK(strstr(out, "train (app.py:11);[unknown] (libx.so+0x20) 4\n") != NULL);
	free(out);
	reshape_free(p);
}

/*
 * Interpreter frames above the newest Python frame (PyFloat_FromDouble, _PyObject_Malloc),
 * a C library's, the kernel's and a GPU frame; and a C program's stack with no Python frame.
 */
static void native_fixture(struct fixture *fx)
{
	uint32_t m, ev, mod, calc, pf, mal, z, k, gk, launch, cm, cw;

	fx_init_samples(fx, 10000000);
	fx_proc(fx, 7, "python3");
	fx_proc(fx, 8, "cprog");
	m = fx_frame(fx, NAT, "main");
	ev = fx_frame(fx, NAT, "_PyEval_EvalFrameDefault");
	mod = fx_frame_full(fx, PY, "<module>", NULL, 0, "/srv/app.py", 3);
	calc = fx_frame_full(fx, PY, "calc", NULL, 0, "/srv/app.py", 20);
	pf = fx_frame(fx, NAT, "PyFloat_FromDouble");
	mal = fx_frame(fx, NAT, "_PyObject_Malloc");
	z = fx_frame(fx, NAT, "deflate_slow");
	k = fx_frame(fx, KER, "clear_page");
	gk = fx_frame(fx, GPU, "sgemm");
	launch = fx_frame(fx, NAT, "cudaLaunchKernel");
	cm = fx_frame(fx, NAT, "cmain");
	cw = fx_frame(fx, NAT, "cwork");
	/* python: main, <module>, the interpreter, calc, then the leaves */
	fx_sample(fx, fx_stack(fx, 6, (uint32_t[]){m, mod, ev, calc, pf, mal}), 7, 5);
	fx_sample(fx, fx_stack(fx, 5, (uint32_t[]){m, mod, ev, calc, z}), 7, 3);
	fx_sample(fx, fx_stack(fx, 6, (uint32_t[]){m, mod, ev, calc, mal, k}), 7, 2);
	fx_sample(fx, fx_stack(fx, 4, (uint32_t[]){m, mod, ev, calc}), 7, 1);
	fx_sample(fx, fx_stack(fx, 6, (uint32_t[]){m, mod, ev, calc, launch, gk}), 7, 4);
	fx_sample(fx, fx_stack(fx, 2, (uint32_t[]){cm, cw}), 8, 6);
}

/* The tables count the natives above Python as its self time; kernel, GPU and C stay. */
static void test_fold_native(void)
{
	struct fixture fx;
	struct view_opts v = {0};
	struct functable *t;
	const struct functable_row *r;
	char *out;

	native_fixture(&fx);
	t = view_functable(&fx.p, &v);
	CHECK(t != NULL);
	r = row(t, "calc (app.py)", NULL);
	CHECK(r != NULL);
	/* 5 (PyFloat_FromDouble, _PyObject_Malloc) + 3 (libz) + 1 (calc itself) */
	CHECK_EQ_U(r->self[0], 9);
	CHECK_EQ_U(r->total[0], 15);
	CHECK(row(t, "PyFloat_FromDouble", NULL) == NULL);
	CHECK(row(t, "_PyObject_Malloc", NULL) == NULL);
	CHECK(row(t, "deflate_slow", NULL) == NULL);
	CHECK(row(t, "cudaLaunchKernel", NULL) == NULL);
	r = row(t, "clear_page_[k]", NULL);
	CHECK(r != NULL && r->self[0] == 2);
	r = row(t, "sgemm_[g]", NULL);
	CHECK(r != NULL && r->self[0] == 4);
	/* The C program is as sampled. */
	r = row(t, "cwork", NULL);
	CHECK(r != NULL && r->self[0] == 6);
	/* Between Python frames the interpreter stays without --python-only. */
	r = row(t, "_PyEval_EvalFrameDefault", NULL);
	CHECK(r != NULL && r->self[0] == 0 && r->total[0] == 15);
	/* Self still sums to all samples. */
	{
		uint64_t self = 0;

		for (size_t i = 0; i < functable__n_rows(t); i++)
			self += functable__row(t, i)->self[0];
		CHECK_EQ_U(self, functable__sum(t, 0));
		CHECK_EQ_U(self, 21);
	}
	functable__free(t);

	/* --native: as today, the leaves their own. */
	v.native = true;
	t = view_functable(&fx.p, &v);
	CHECK(t != NULL);
	CHECK_EQ_U(row(t, "calc (app.py)", NULL)->self[0], 1);
	CHECK_EQ_U(row(t, "_PyObject_Malloc", NULL)->self[0], 5);
	CHECK_EQ_U(row(t, "deflate_slow", NULL)->self[0], 3);
	functable__free(t);

	/* --python-only: the interpreter between Python frames goes too. */
	v = (struct view_opts){.python_only = true};
	t = view_functable(&fx.p, &v);
	CHECK(t != NULL);
	CHECK(row(t, "_PyEval_EvalFrameDefault", NULL) == NULL);
	CHECK_EQ_U(row(t, "calc (app.py)", NULL)->self[0], 9);
	CHECK_EQ_U(row(t, "main", NULL)->total[0], 15);
	functable__free(t);

	/* The flame graph's --python-only drops the leaves too, and keeps C programs whole. */
	{
		Profd__Profile *p = reshape(&fx.p, &(struct reshape_opts){.python_only = true});

		CHECK(p != NULL);
		out = folded(p, true);
		CHECK_STREQ(out,
			    "cprog;cmain;cwork 6\n"
			    "python3;main;<module> (app.py:3);calc (app.py:20) 9\n"
			    "python3;main;<module> (app.py:3);calc (app.py:20);clear_page_[k] 2\n"
			    "python3;main;<module> (app.py:3);calc (app.py:20);sgemm_[g] 4\n");
		free(out);
		reshape_free(p);
	}
}

/* Two named threads and one the profile does not name. */
static void thread_fixture(struct fixture *fx)
{
	uint32_t m, a, b, l;

	fx_init_samples(fx, 10000000);
	fx_proc(fx, 7, "python3");
	fx_thread(fx, 7, 11, "worker-a");
	fx_thread(fx, 7, 12, "worker-b");
	m = fx_frame(fx, NAT, "start_thread");
	a = fx_frame_full(fx, PY, "burn_a", NULL, 0, "/srv/app.py", 5);
	b = fx_frame_full(fx, PY, "burn_b", NULL, 0, "/srv/app.py", 9);
	l = fx_frame(fx, NAT, "PyNumber_Multiply");
	fx_sample_tid(fx, fx_stack(fx, 3, (uint32_t[]){m, a, l}), 7, 11, 6);
	fx_sample_tid(fx, fx_stack(fx, 2, (uint32_t[]){m, b}), 7, 12, 3);
	fx_sample_tid(fx, fx_stack(fx, 2, (uint32_t[]){m, a}), 7, 12, 1);
	fx_sample_tid(fx, fx_stack(fx, 2, (uint32_t[]){m, a}), 7, 13, 2);
}

static void test_per_thread(void)
{
	struct fixture fx;
	struct view_opts v = {.per_thread = true};
	struct functable *t;
	Profd__Profile *p;
	char err[128], *out;

	thread_fixture(&fx);
	p = reshape(&fx.p, &(struct reshape_opts){.per_thread = true, .no_lineno = true});
	CHECK(p != NULL);
	CHECK_EQ_I(profile_check(p, err, sizeof(err)), 0);
	out = folded(p, true);
	CHECK_STREQ(out, "python3;thread 11 (worker-a);start_thread;burn_a (app.py);"
			 "PyNumber_Multiply 6\n"
			 "python3;thread 12 (worker-b);start_thread;burn_a (app.py) 1\n"
			 "python3;thread 12 (worker-b);start_thread;burn_b (app.py) 3\n"
			 "python3;thread 13;start_thread;burn_a (app.py) 2\n");
	free(out);
	reshape_free(p);

	t = view_functable(&fx.p, &v);
	CHECK(t != NULL);
	/* burn_a's time is apart per thread, its native leaf folded into it. */
	CHECK_EQ_U(row(t, "burn_a (app.py)", "11 worker-a")->self[0], 6);
	CHECK_EQ_U(row(t, "burn_a (app.py)", "12 worker-b")->self[0], 1);
	CHECK_EQ_U(row(t, "burn_a (app.py)", "13")->self[0], 2);
	CHECK_EQ_U(row(t, "burn_b (app.py)", "12 worker-b")->total[0], 3);
	CHECK_EQ_U(row(t, "start_thread", "12 worker-b")->total[0], 4);
	CHECK_EQ_U(functable__n_rows(t), 7);
	/* Sorted by self: worker-a's burn_a first. */
	CHECK_STREQ(functable__row(t, 0)->thread, "11 worker-a");
	out = table_text(t, false);
	CHECK(strstr(out, "Name") && strstr(out, "Thread"));
	CHECK(strstr(out, "burn_a (app.py)  11 worker-a") != NULL);
	free(out);
	out = table_text(t, true);
	CHECK(strstr(out, "Thread       Function") != NULL);
	CHECK(strstr(out, "11 worker-a  burn_a (app.py)") != NULL);
	free(out);
	functable__free(t);

	/* Without it, no Thread column and one row per function. */
	v.per_thread = false;
	t = view_functable(&fx.p, &v);
	CHECK(t != NULL);
	CHECK_EQ_U(row(t, "burn_a (app.py)", NULL)->self[0], 9);
	CHECK(row(t, "burn_a (app.py)", NULL)->thread == NULL);
	out = table_text(t, false);
	CHECK(strstr(out, "Thread") == NULL);
	free(out);
	functable__free(t);
}

/* --lines in the tables: a row per line; the default merges them. */
static void test_table_lines(void)
{
	struct fixture fx;
	struct view_opts v = {.lines = true, .native = true};
	struct functable *t;

	lines_fixture(&fx);
	t = view_functable(&fx.p, &v);
	CHECK(t != NULL);
	CHECK_EQ_U(row(t, "train (app.py:9)", NULL)->total[0], 3);
	CHECK_EQ_U(row(t, "train (app.py:11)", NULL)->total[0], 7);
	CHECK_EQ_U(row(t, "[unknown] (libx.so+0x20)", NULL)->self[0], 4);
	functable__free(t);
	v = (struct view_opts){.native = true};
	t = view_functable(&fx.p, &v);
	CHECK(t != NULL);
	CHECK_EQ_U(row(t, "train (app.py)", NULL)->total[0], 10);
	CHECK_EQ_U(row(t, "[unknown] (libx.so)", NULL)->self[0], 5);
	functable__free(t);
}

/* A process whose executable is exe (the path its frames' module names). */
static void fx_proc_exe(struct fixture *fx, uint32_t pid, const char *name, const char *exe)
{
	fx_proc(fx, pid, name);
	fx->procs[fx->p.n_processes - 1].has_exe = 1;
	fx->procs[fx->p.n_processes - 1].exe = fx_str(fx, exe);
}

#define LIBPY "/opt/py/lib/libpython3.12.so.1.0"
#define STATIC_PY "/usr/bin/python3.11"
#define EMBED "/opt/app/embed"

/*
 * CPython's call machinery between Python frames: a shared libpython (pid 9: a torch-like
 * step, and torch's C++ calling a Python hook), a static interpreter whose built-in zlib
 * module runs above the newest Python frame (pid 7), and a program that links libpython and
 * whose own callback sits between Python frames (pid 10).
 */
static void interp_fixture(struct fixture *fx)
{
	uint32_t main9, runmain, mod9, tpcall, slotcall, eval9, fwd, thp, aten, page, cfcall,
	    engine, pycall, hook, main7, mod7, methvc, eval7, compress, zlibc, deflate, emain,
	    runstr, mod10, objcall, cb, objcall2, handler;

	fx_init_samples(fx, 10000000);
	fx_proc_exe(fx, 9, "python3.12", "/opt/py/bin/python3.12");
	fx_proc_exe(fx, 7, "python3.11", STATIC_PY);
	fx_proc_exe(fx, 10, "embed", EMBED);
	main9 = fx_frame_full(fx, NAT, "main", "/opt/py/bin/python3.12", 0x1100, NULL, 0);
	runmain = fx_frame_full(fx, NAT, "Py_RunMain", LIBPY, 0x2000, NULL, 0);
	mod9 = fx_frame_full(fx, PY, "<module>", NULL, 0, "/srv/train.py", 30);
	tpcall = fx_frame_full(fx, NAT, "_PyObject_MakeTpCall", LIBPY, 0x3000, NULL, 0);
	slotcall = fx_frame_full(fx, NAT, "slot_tp_call", LIBPY, 0x3100, NULL, 0);
	eval9 = fx_frame_full(fx, NAT, "_PyEval_EvalFrameDefault", LIBPY, 0x4000, NULL, 0);
	fwd = fx_frame_full(fx, PY, "forward", NULL, 0, "/srv/model.py", 12);
	thp = fx_frame_full(fx, NAT, "THPVariable_add", "/venv/torch/lib/libtorch_python.so", 0x10,
			    NULL, 0);
	aten = fx_frame_full(fx, NAT, "at::native::add", "/venv/torch/lib/libtorch_cpu.so", 0x20,
			     NULL, 0);
	page = fx_frame(fx, KER, "clear_page");
	cfcall = fx_frame_full(fx, NAT, "cfunction_call", LIBPY, 0x3200, NULL, 0);
	engine = fx_frame_full(fx, NAT, "torch::autograd::Engine::execute",
			       "/venv/torch/lib/libtorch_cpu.so", 0x30, NULL, 0);
	pycall = fx_frame_full(fx, NAT, "PyObject_Call", LIBPY, 0x3300, NULL, 0);
	hook = fx_frame_full(fx, PY, "hook", NULL, 0, "/srv/train.py", 7);
	main7 = fx_frame_full(fx, NAT, "main", STATIC_PY, 0x100, NULL, 0);
	mod7 = fx_frame_full(fx, PY, "<module>", NULL, 0, "/srv/pack.py", 5);
	methvc = fx_frame_full(fx, NAT, "method_vectorcall", STATIC_PY, 0x200, NULL, 0);
	eval7 = fx_frame_full(fx, NAT, "_PyEval_EvalFrameDefault", STATIC_PY, 0x300, NULL, 0);
	compress = fx_frame_full(fx, PY, "pack", NULL, 0, "/srv/pack.py", 2);
	zlibc = fx_frame_full(fx, NAT, "zlib_compress", STATIC_PY, 0x400, NULL, 0);
	deflate = fx_frame_full(fx, NAT, "deflate", "/usr/lib/libz.so.1", 0x500, NULL, 0);
	emain = fx_frame_full(fx, NAT, "main", EMBED, 0x10, NULL, 0);
	runstr = fx_frame_full(fx, NAT, "PyRun_SimpleString", LIBPY, 0x5000, NULL, 0);
	mod10 = fx_frame_full(fx, PY, "<module>", NULL, 0, "<string>", 1);
	objcall = fx_frame_full(fx, NAT, "PyObject_Vectorcall", LIBPY, 0x5100, NULL, 0);
	cb = fx_frame_full(fx, NAT, "app_callback", EMBED, 0x20, NULL, 0);
	objcall2 = fx_frame_full(fx, NAT, "PyObject_CallObject", LIBPY, 0x5200, NULL, 0);
	handler = fx_frame_full(fx, PY, "handler", NULL, 0, "/srv/app.py", 4);
	fx_sample(fx,
		  fx_stack(fx, 11,
			   (uint32_t[]){main9, runmain, mod9, tpcall, slotcall, eval9, fwd, tpcall,
					thp, aten, page}),
		  9, 5);
	fx_sample(fx, fx_stack(fx, 6, (uint32_t[]){main9, mod9, cfcall, engine, pycall, hook}), 9,
		  2);
	fx_sample(
	    fx, fx_stack(fx, 7, (uint32_t[]){main7, mod7, methvc, eval7, compress, zlibc, deflate}),
	    7, 3);
	fx_sample(
	    fx, fx_stack(fx, 7, (uint32_t[]){emain, runstr, mod10, objcall, cb, objcall2, handler}),
	    10, 1);
}

/* By default the interpreter's frames between Python frames go; --all-frames keeps them. */
static void test_hide_interp(void)
{
	struct view_opts v = {0};
	struct reshape_opts ro;
	struct functable *t;
	struct fixture fx;
	Profd__Profile *p;
	char err[128], *out;

	interp_fixture(&fx);
	ro = view_reshape_opts(&v, false);
	CHECK(ro.hide_interp);
	p = reshape(&fx.p, &ro);
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ_I(profile_check(p, err, sizeof(err)), 0);
	out = folded(p, true);
	/*
	 * pid 9: the machinery between <module> and forward goes, what forward calls (through
	 * _PyObject_MakeTpCall) and Py_RunMain below stay, and so does torch's C++ between
	 * Python frames. pid 7: method_vectorcall and the eval loop go, zlib's module stays.
	 * pid 10: libpython's frames go, the program's own callback stays.
	 */
	CHECK_STREQ(
	    out, "embed;main;PyRun_SimpleString;<module> (<string>:1);app_callback;"
		 "handler (app.py:4) 1\n"
		 "python3.11;main;<module> (pack.py:5);pack (pack.py:2);zlib_compress;deflate 3\n"
		 "python3.12;main;<module> (train.py:30);torch::autograd::Engine::execute;"
		 "hook (train.py:7) 2\n"
		 "python3.12;main;Py_RunMain;<module> (train.py:30);forward (model.py:12);"
		 "_PyObject_MakeTpCall;THPVariable_add;at::native::add;clear_page_[k] 5\n");
	free(out);
	reshape_free(p);

	/* --all-frames: as sampled. */
	v.all_frames = true;
	ro = view_reshape_opts(&v, false);
	CHECK(!ro.hide_interp);
	CHECK(reshape_is_noop(&ro));
	p = reshape(&fx.p, &(struct reshape_opts){.per_thread = false});
	out = p ? folded(p, true) : NULL;
	CHECK(out && strstr(out, "python3.12;main;Py_RunMain;<module> (train.py:30);"
				 "_PyObject_MakeTpCall;slot_tp_call;_PyEval_EvalFrameDefault;"
				 "forward (model.py:12);") != NULL);
	CHECK(out && strstr(out, "python3.11;main;<module> (pack.py:5);method_vectorcall;"
				 "_PyEval_EvalFrameDefault;pack (pack.py:2)") != NULL);
	free(out);
	reshape_free(p);

	/* The tables: the machinery is no row by default, one with --all-frames. */
	v = (struct view_opts){0};
	t = view_functable(&fx.p, &v);
	CHECK(t != NULL);
	CHECK(row(t, "slot_tp_call", NULL) == NULL);
	CHECK(row(t, "method_vectorcall", NULL) == NULL);
	CHECK(row(t, "app_callback", NULL) != NULL);
	CHECK(row(t, "torch::autograd::Engine::execute", NULL) != NULL);
	functable__free(t);
	v.all_frames = true;
	t = view_functable(&fx.p, &v);
	CHECK(t != NULL);
	CHECK(row(t, "slot_tp_call", NULL) != NULL && row(t, "slot_tp_call", NULL)->total[0] == 5);
	functable__free(t);

	/* --python-only still hides every native frame between Python frames. */
	p = reshape(&fx.p, &(struct reshape_opts){.python_only = true, .hide_interp = true});
	out = p ? folded(p, true) : NULL;
	CHECK_STREQ(out,
		    "embed;main;PyRun_SimpleString;<module> (<string>:1);handler (app.py:4) 1\n"
		    "python3.11;main;<module> (pack.py:5);pack (pack.py:2) 3\n"
		    "python3.12;main;<module> (train.py:30);hook (train.py:7) 2\n"
		    "python3.12;main;Py_RunMain;<module> (train.py:30);forward (model.py:12);"
		    "clear_page_[k] 5\n");
	free(out);
	reshape_free(p);
}

static void test_check_opts(void)
{
	struct cli_error e = {0};

	CHECK_EQ_I(view_check("table", &(struct view_opts){.lines = true, .function = true}, &e),
		   -EINVAL);
	CHECK(strstr(e.msg, "--lines cannot go with --function") != NULL);
	CHECK_EQ_I(view_check("top", &(struct view_opts){.native = true, .python_only = true}, &e),
		   -EINVAL);
	CHECK(strstr(e.msg, "--native cannot go with --python-only") != NULL);
	CHECK_EQ_I(
	    view_check("dump", &(struct view_opts){.all_frames = true, .python_only = true}, &e),
	    -EINVAL);
	CHECK(strstr(e.msg, "--all-frames cannot go with --python-only") != NULL);
	CHECK_EQ_I(view_check("top", &(struct view_opts){.function = true, .per_thread = true}, &e),
		   0);
}

int main(void)
{
	test_function();
	test_no_lineno();
	test_fold_native();
	test_per_thread();
	test_table_lines();
	test_hide_interp();
	test_check_opts();
	return CHECK_DONE();
}
