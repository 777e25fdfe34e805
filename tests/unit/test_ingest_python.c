// SPDX-License-Identifier: BSD-2-Clause
/*
 * The merge of Python frames into native stacks (ingest.c), against hand-made samples of this
 * very process: its native frames are this file's functions, two of them named like
 * CPython's eval loop and exec builtin, and CPython support is a test double that names code
 * objects from a table, or fails for the ones a sample finds freed. A frame that cannot be
 * named stays where it was as a placeholder; every other Python frame keeps its eval frame, in
 * 3.11 (activations closed by is_entry) and 3.12+ (closed by C-boundary shim frames) alike,
 * also when the newest eval frame had not linked its activation yet.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "abi.h"
#include "check.h"
#include "ingest.h"
#include "python.h"
#include "store.h"
#include "symbolize.h"
#include "timeutil.h"

/* Native frames of the samples: this file's functions, symbolized from the test's own ELF. */
__attribute__((noinline)) int c_leaf(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

__attribute__((noinline)) int _PyEval_EvalFrameDefault(int x)
{
	__asm__ volatile("" ::: "memory");
	return c_leaf(x) + 1;
}

__attribute__((noinline)) int builtin_exec(int x)
{
	__asm__ volatile("" ::: "memory");
	return _PyEval_EvalFrameDefault(x) + 1;
}

__attribute__((noinline)) int py_main(int x)
{
	__asm__ volatile("" ::: "memory");
	return builtin_exec(x) + 1;
}

/* --- CPython support, a double: code objects by address ------------------------------------ */

#define CODE_FREED 0x1000 /* a code object freed before the sample was read */
#define CODE_SHIM 0x2000

static uint16_t fake_version; /* major << 8 | minor of the "process" */

static const struct {
	uint64_t code;
	const char *name;
	uint32_t line;
} codes[] = {
    {0x3000, "<module>", 3},
    {0x4000, "_call_with_frames_removed", 241},
    {0x5000, "main", 12},
};

int python__detect(struct python *py, uint32_t pid, struct profd_py_proc *cfg)
{
	(void)py;
	(void)pid;
	memset(cfg, 0, sizeof(*cfg));
	return PYTHON_SUPPORTED;
}

int python__symbolize(struct python *py, uint32_t pid, const struct profd_py_frame *frame,
		      struct py_frame_sym *out)
{
	(void)py;
	(void)pid;
	memset(out, 0, sizeof(*out));
	if (frame->code == CODE_FREED)
		return -ENOENT;
	if (frame->code == CODE_SHIM) {
		out->qualname = "<interpreter trampoline>";
		out->filename = "<shim>";
		out->skip = true;
		return 0;
	}
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		if (codes[i].code == frame->code) {
			out->qualname = codes[i].name;
			out->filename = "t.py";
			out->line = codes[i].line;
			return 0;
		}
	}
	return -ENOENT;
}

uint16_t python__version(const struct python *py, uint32_t pid)
{
	(void)py;
	(void)pid;
	return fake_version;
}

void python__forget_pid(struct python *py, uint32_t pid)
{
	(void)py;
	(void)pid;
}

static int py_config(void *ctx, uint32_t pid, const struct profd_py_proc *cfg)
{
	(void)ctx;
	(void)pid;
	(void)cfg;
	return 0;
}

/* --- samples --------------------------------------------------------------------------------- */

static struct profd_sample_rec rec;

/*
 * A sample of this process, native stack leaf first: c_leaf, eval, builtin_exec, eval, py_main
 * (the inner eval runs the imported module's top level, the outer one the importer), then the
 * Python frames pf[0 .. npy), newest first.
 */
static void fill(const struct profd_py_frame *pf, uint32_t npy)
{
	uint32_t me = (uint32_t)getpid();
	const uint64_t ips[] = {
	    (uint64_t)(uintptr_t)&c_leaf + 1,
	    (uint64_t)(uintptr_t)&_PyEval_EvalFrameDefault + 5,
	    (uint64_t)(uintptr_t)&builtin_exec + 5,
	    (uint64_t)(uintptr_t)&_PyEval_EvalFrameDefault + 5,
	    (uint64_t)(uintptr_t)&py_main + 5,
	};
	uint32_t nu = sizeof(ips) / sizeof(ips[0]);

	memset(&rec, 0, sizeof(rec));
	rec.hdr.type = PROFD_REC_SAMPLE;
	rec.hdr.size = PROFD_SAMPLE_HDR_SIZE + 8 * nu + sizeof(*pf) * npy;
	rec.ts_ns = mono_ns();
	rec.pid = me;
	rec.tid = me;
	rec.uid = getuid();
	rec.nr_user = nu;
	rec.nr_py = npy;
	rec.py_status = PROFD_PY_OK;
	memcpy(rec.comm, "test_ingest_py", 15);
	memcpy(rec.ips, ips, sizeof(ips));
	memcpy(&rec.ips[nu], pf, sizeof(*pf) * npy);
}

struct collect {
	uint32_t stack;
	int keys;
};

static int collect_cb(uint32_t pid, uint32_t tid, uint32_t stack,
		      const uint64_t values[STORE_VALUE__COUNT], void *ctx)
{
	struct collect *c = ctx;

	(void)pid;
	(void)tid;
	(void)values;
	c->stack = stack;
	c->keys++;
	return 0;
}

/* The names of the only stack in s, leaf first, joined by ';'; "" unless exactly one. */
static void stack_names(struct store *s, char *out, size_t len)
{
	uint32_t me = (uint32_t)getpid();
	struct store_query q = {.end_ns = UINT64_MAX, .pids = &me, .npids = 1};
	struct collect c = {0};
	const uint32_t *frames;
	size_t n;

	out[0] = '\0';
	store__query(s, &q, collect_cb, &c);
	if (c.keys != 1 || !store__stack(s, c.stack, &frames, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		const struct store_frame *f = store__frame(s, frames[i]);
		size_t l = strlen(out);

		snprintf(out + l, len - l, "%s%s", i ? ";" : "", f ? f->name : "?");
	}
}

/* Ingest one sample of pf under CPython version ver; its stack's names into out. */
static void merge(uint16_t ver, const struct profd_py_frame *pf, uint32_t npy, char *out,
		  size_t len, struct ingest_stats *st)
{
	struct store *store = store__new(&(struct store_opts){0});
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){.no_kernel = true});
	struct ingest *in = NULL;

	out[0] = '\0';
	CHECK(store && sym);
	if (!store || !sym)
		goto out;
	fake_version = ver;
	/* Never dereferenced: the double stands for the whole of CPython support. */
	in = ingest__new(&(struct ingest_opts){.store = store,
					       .sym = sym,
					       .py = (struct python *)&fake_version,
					       .py_config = py_config});
	CHECK(in != NULL);
	if (!in)
		goto out;
	fill(pf, npy);
	CHECK_EQ_I(ingest__record(in, &rec, rec.hdr.size), 0);
	stack_names(store, out, len);
	ingest__stats(in, st);
out:
	ingest__free(in);
	symbolizer__free(sym);
	store__free(store);
}

#define EXPECT_WHOLE "c_leaf;<module>;builtin_exec;_call_with_frames_removed;main;py_main"
#define EXPECT_HOLE                                                                                \
	"c_leaf;[python frame: code "                                                              \
	"unreadable];builtin_exec;_call_with_frames_removed;main;py_main"

int main(void)
{
	/* 3.11: the oldest frame of each eval activation has is_entry. */
	const struct profd_py_frame v311[] = {
	    {.code = 0x3000, .flags = PROFD_PYF_ENTRY},
	    {.code = 0x4000},
	    {.code = 0x5000, .flags = PROFD_PYF_ENTRY},
	};
	const struct profd_py_frame v311_freed[] = {
	    {.code = CODE_FREED, .flags = PROFD_PYF_ENTRY},
	    {.code = 0x4000},
	    {.code = 0x5000, .flags = PROFD_PYF_ENTRY},
	};
	/* 3.12: each eval activation ends in a shim frame (owner >= the boundary). */
	const struct profd_py_frame v312[] = {
	    {.code = 0x3000}, {.code = CODE_SHIM, .flags = PROFD_PYF_BOUNDARY}, {.code = 0x4000},
	    {.code = 0x5000}, {.code = CODE_SHIM, .flags = PROFD_PYF_BOUNDARY},
	};
	const struct profd_py_frame v312_freed[] = {
	    {.code = CODE_FREED},
	    {.code = CODE_SHIM, .flags = PROFD_PYF_BOUNDARY},
	    {.code = 0x4000},
	    {.code = 0x5000},
	    {.code = CODE_SHIM, .flags = PROFD_PYF_BOUNDARY},
	};
	/* An importer whose own frame is unreadable too: two placeholders, in their places. */
	const struct profd_py_frame v312_two[] = {
	    {.code = CODE_FREED},
	    {.code = CODE_SHIM, .flags = PROFD_PYF_BOUNDARY},
	    {.code = 0x4000},
	    {.code = CODE_FREED},
	    {.code = CODE_SHIM, .flags = PROFD_PYF_BOUNDARY},
	};
	/*
	 * Sampled as the inner eval loop entered its activation, before linking it: the walk
	 * sees the outer activation only. Its eval frame stays native, nothing shifts.
	 */
	const struct profd_py_frame v312_entering[] = {
	    {.code = 0x4000},
	    {.code = 0x5000},
	    {.code = CODE_SHIM, .flags = PROFD_PYF_BOUNDARY},
	};
	struct ingest_stats st;
	char names[1024];

	merge(0x030b, v311, 3, names, sizeof(names), &st);
	CHECK_STREQ(names, EXPECT_WHOLE);
	merge(0x030b, v311_freed, 3, names, sizeof(names), &st);
	CHECK_STREQ(names, EXPECT_HOLE);
	CHECK_EQ_U(st.py_frames_bad, 1);
	CHECK_EQ_U(st.py_frames, 2);

	merge(0x030c, v312, 5, names, sizeof(names), &st);
	CHECK_STREQ(names, EXPECT_WHOLE);
	/* Before placeholders: "c_leaf;_call_with_frames_removed;main;builtin_exec;
	 * _PyEval_EvalFrameDefault;py_main", every activation one eval frame off. */
	merge(0x030c, v312_freed, 5, names, sizeof(names), &st);
	CHECK_STREQ(names, EXPECT_HOLE);
	CHECK_EQ_U(st.py_frames_bad, 1);
	merge(0x030c, v312_two, 5, names, sizeof(names), &st);
	CHECK_STREQ(names, "c_leaf;[python frame: code unreadable];builtin_exec;"
			   "_call_with_frames_removed;[python frame: code unreadable];py_main");
	CHECK_EQ_U(st.py_frames_bad, 2);
	/* Before: "c_leaf;_call_with_frames_removed;main;builtin_exec;_PyEval_EvalFrameDefault;
	 * py_main". */
	merge(0x030c, v312_entering, 3, names, sizeof(names), &st);
	CHECK_STREQ(names, "c_leaf;_PyEval_EvalFrameDefault;builtin_exec;"
			   "_call_with_frames_removed;main;py_main");
	return CHECK_DONE();
}
