// SPDX-License-Identifier: BSD-2-Clause
/*
 * Store query -> Profile: exact dense tables, every value column, a pack/unpack round trip,
 * -ENODATA; the frame/stack/string tables a Trace carries.
 */
#include "check.h"
#include "dump.h"
#include "store.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define SEC 1000000000ull

struct fixture {
	struct store *s;
	uint32_t s1, s2;
};

static void fixture_init(struct fixture *fx)
{
	struct frame_key a = {.kind = FRAME_KIND_NATIVE,
			      .name = "main",
			      .module = "/bin/app",
			      .address = 0x10,
			      .file = "app.c",
			      .line = 3,
			      .build_id = "beef"};
	struct frame_key b = {.kind = FRAME_KIND_KERNEL,
			      .name = "schedule",
			      .module = "[kernel.kallsyms]",
			      .address = 0xffffffff81000000ull};
	struct frame_key c = {.kind = FRAME_KIND_PYTHON,
			      .name = "run",
			      .module = "script.py",
			      .file = "script.py",
			      .line = 7};
	uint32_t fa, fb, fc, st1[2], st2[2], unused;

	fx->s = store__new(&(struct store_opts){.bucket_ns = SEC});
	fa = store__intern_frame(fx->s, &a);
	fb = store__intern_frame(fx->s, &b);
	fc = store__intern_frame(fx->s, &c);
	st1[0] = fb;
	st1[1] = fa;
	st2[0] = fc;
	st2[1] = fa;
	/* An unused stack and frame must not show up. */
	unused = store__intern_frame(fx->s, &(struct frame_key){.name = "unused", .address = 1});
	CHECK(store__intern_stack(fx->s, &unused, 1) != 0);
	fx->s1 = store__intern_stack(fx->s, st1, 2);
	fx->s2 = store__intern_stack(fx->s, st2, 2);
	CHECK_EQ_I(store__set_process(fx->s, 100, 1000, "app"), 0);
	CHECK_EQ_I(store__set_thread(fx->s, 100, 101, "app-worker"), 0);
	CHECK_EQ_I(store__add(fx->s, 1, 100, 101, fx->s1, STORE_VALUE_CPU_SAMPLES, 3), 0);
	CHECK_EQ_I(store__add(fx->s, 2, 100, 100, fx->s2, STORE_VALUE_CPU_SAMPLES, 2), 0);
	CHECK_EQ_I(store__add(fx->s, 3, 200, 201, fx->s1, STORE_VALUE_CPU_SAMPLES, 1), 0);
	CHECK_EQ_I(store__add(fx->s, 4, 100, 101, fx->s1, STORE_VALUE_CPU_SAMPLES, 10), 0);
	/* Outside the dumped range. */
	CHECK_EQ_I(store__add(fx->s, 5 * SEC, 100, 101, fx->s2, STORE_VALUE_CPU_SAMPLES, 7), 0);
	store__process_exited(fx->s, 100);
}

static const char *str(const Profd__Profile *p, uint32_t i)
{
	return i < p->n_strings ? p->strings[i] : "(out of range)";
}

/* The whole expected profile of the fixture for [0, 1 s). */
static void check_full(const Profd__Profile *p)
{
	/* "", the value types' names and units, then the frames', then processes and threads. */
	static const char *const strings[] = {"",
					      "samples",
					      "count",
					      "gpu_idle_samples",
					      "gpu_time",
					      "nanoseconds",
					      "gpu_kernels",
					      "copy_time",
					      "copy_bytes",
					      "bytes",
					      "uprobe_launches",
					      "off_cpu",
					      "gpu_idle_off_cpu",
					      "gpu_memory",
					      "gpu_memory_live",
					      "schedule",
					      "[kernel.kallsyms]",
					      "main",
					      "/bin/app",
					      "app.c",
					      "beef",
					      "run",
					      "script.py",
					      "app",
					      "app-worker"};
	static const uint32_t vt[11][2] = {{1, 2},  {3, 2},  {4, 5},  {6, 2},  {7, 5}, {8, 9},
					   {10, 2}, {11, 5}, {12, 5}, {13, 9}, {14, 9}};
	const Profd__Frame *f;

	CHECK_EQ_U(p->n_strings, 25);
	for (size_t k = 0; k < 25 && k < p->n_strings; k++)
		CHECK_STREQ(p->strings[k], strings[k]);

	CHECK_EQ_U(p->n_value_types, 11);
	for (size_t k = 0; k < 11 && k < p->n_value_types; k++) {
		CHECK_EQ_U(p->value_types[k]->type, vt[k][0]);
		CHECK_EQ_U(p->value_types[k]->unit, vt[k][1]);
	}

	/* Frames in first-seen order over stacks in first-seen order, leaf first. */
	CHECK_EQ_U(p->n_frames, 3);
	if (p->n_frames != 3)
		return;
	f = p->frames[0];
	CHECK_EQ_U(f->kind, PROFD__FRAME_KIND__FRAME_KERNEL);
	CHECK_EQ_U(f->name, 15);
	CHECK(f->has_module);
	CHECK_EQ_U(f->module, 16);
	CHECK(f->has_address);
	CHECK_EQ_U(f->address, 0xffffffff81000000ull);
	CHECK(!f->has_file);
	CHECK(!f->has_line);
	CHECK(!f->has_build_id);
	f = p->frames[1];
	CHECK_EQ_U(f->kind, PROFD__FRAME_KIND__FRAME_NATIVE);
	CHECK_EQ_U(f->name, 17);
	CHECK_EQ_U(f->module, 18);
	CHECK_EQ_U(f->address, 0x10);
	CHECK(f->has_file);
	CHECK_EQ_U(f->file, 19);
	CHECK(f->has_line);
	CHECK_EQ_U(f->line, 3);
	CHECK(f->has_build_id);
	CHECK_EQ_U(f->build_id, 20);
	f = p->frames[2];
	CHECK_EQ_U(f->kind, PROFD__FRAME_KIND__FRAME_PYTHON);
	CHECK_EQ_U(f->name, 21);
	CHECK_EQ_U(f->module, 22);
	CHECK_EQ_U(f->file, 22);
	CHECK_EQ_U(f->line, 7);
	CHECK(!f->has_build_id);

	CHECK_EQ_U(p->n_stacks, 2);
	if (p->n_stacks == 2) {
		CHECK_EQ_U(p->stacks[0]->n_frames, 2);
		CHECK_EQ_U(p->stacks[0]->frames[0], 0);
		CHECK_EQ_U(p->stacks[0]->frames[1], 1);
		CHECK_EQ_U(p->stacks[1]->n_frames, 2);
		CHECK_EQ_U(p->stacks[1]->frames[0], 2);
		CHECK_EQ_U(p->stacks[1]->frames[1], 1);
	}

	CHECK_EQ_U(p->n_samples, 3);
	if (p->n_samples == 3) {
		static const uint32_t want[3][4] = {
		    {0, 100, 101, 13}, {1, 100, 100, 2}, {0, 200, 201, 1}};

		for (size_t k = 0; k < 3; k++) {
			CHECK_EQ_U(p->samples[k]->stack, want[k][0]);
			CHECK_EQ_U(p->samples[k]->pid, want[k][1]);
			CHECK_EQ_U(p->samples[k]->tid, want[k][2]);
			CHECK_EQ_U(p->samples[k]->n_values, 11);
			if (p->samples[k]->n_values != 8)
				continue;
			CHECK_EQ_U(p->samples[k]->values[0], want[k][3]);
			for (size_t c = 1; c < 8; c++)
				CHECK_EQ_U(p->samples[k]->values[c], 0);
		}
	}

	CHECK_EQ_U(p->n_processes, 2);
	if (p->n_processes == 2) {
		CHECK_EQ_U(p->processes[0]->pid, 100);
		CHECK_STREQ(str(p, p->processes[0]->name), "app");
		CHECK(p->processes[0]->has_uid);
		CHECK_EQ_U(p->processes[0]->uid, 1000);
		CHECK(p->processes[0]->has_exited);
		CHECK(p->processes[0]->exited);
		CHECK_EQ_U(p->processes[1]->pid, 200);
		CHECK_EQ_U(p->processes[1]->name, 0);
		CHECK(!p->processes[1]->has_uid);
	}

	CHECK_EQ_U(p->n_threads, 3);
	if (p->n_threads == 3) {
		CHECK_EQ_U(p->threads[0]->pid, 100);
		CHECK_EQ_U(p->threads[0]->tid, 101);
		CHECK_STREQ(str(p, p->threads[0]->name), "app-worker");
		CHECK_EQ_U(p->threads[1]->pid, 100);
		CHECK_EQ_U(p->threads[1]->tid, 100);
		CHECK_EQ_U(p->threads[1]->name, 0);
		CHECK_EQ_U(p->threads[2]->pid, 200);
		CHECK_EQ_U(p->threads[2]->tid, 201);
		CHECK_EQ_U(p->threads[2]->name, 0);
	}

	CHECK(p->has_start_ns);
	CHECK_EQ_U(p->start_ns, 0);
	CHECK(p->has_end_ns);
	CHECK_EQ_U(p->end_ns, SEC);
	CHECK(p->has_frequency_hz);
	CHECK_EQ_U(p->frequency_hz, 99);
	CHECK(p->has_period_ns);
	CHECK_EQ_U(p->period_ns, 10101010);
	CHECK(p->has_realtime_offset_ns);
	CHECK_EQ_I(p->realtime_offset_ns, -5);
}

static void test_full(void)
{
	struct fixture fx;
	struct store_query q = {.start_ns = 0, .end_ns = SEC};
	struct dump_meta meta = {
	    .start_ns = 0, .end_ns = SEC, .frequency_hz = 99, .realtime_offset_ns = -5};
	Profd__Profile *p = NULL, *u;
	uint8_t *buf;
	size_t len;

	fixture_init(&fx);
	CHECK_EQ_I(dump__build(fx.s, &q, &meta, &p), 0);
	/* The profile owns copies: it outlives the store. */
	store__free(fx.s);
	CHECK(p != NULL);
	if (!p)
		return;
	check_full(p);

	len = profd__profile__get_packed_size(p);
	buf = malloc(len);
	CHECK_EQ_U(profd__profile__pack(p, buf), len);
	u = profd__profile__unpack(NULL, len, buf);
	CHECK(u != NULL);
	if (u) {
		check_full(u);
		profd__profile__free_unpacked(u, NULL);
	}
	free(buf);
	dump__free(p);
	dump__free(NULL);
}

static void test_filtered(void)
{
	struct fixture fx;
	uint32_t pid = 200;
	struct store_query q = {.start_ns = 0, .end_ns = UINT64_MAX, .pids = &pid, .npids = 1};
	Profd__Profile *p = NULL;

	fixture_init(&fx);
	CHECK_EQ_I(dump__build(fx.s, &q, NULL, &p), 0);
	CHECK(p != NULL);
	if (p) {
		CHECK_EQ_U(p->n_samples, 1);
		CHECK_EQ_U(p->n_stacks, 1);
		CHECK_EQ_U(p->n_frames, 2);
		CHECK_EQ_U(p->n_processes, 1);
		CHECK_EQ_U(p->n_threads, 1);
		/* "", 14 value type names and units, schedule, [kernel.kallsyms], main, /bin/app,
		 * app.c, beef */
		CHECK_EQ_U(p->n_strings, 21);
		CHECK_STREQ(str(p, p->frames[p->stacks[0]->frames[0]]->name), "schedule");
		CHECK_STREQ(str(p, p->frames[p->stacks[0]->frames[1]]->name), "main");
		CHECK(!p->has_frequency_hz);
		CHECK(!p->has_period_ns);
	}
	dump__free(p);

	/* The whole range: the later bucket adds 7 to (100, 101, stack 2). */
	q.npids = 0;
	q.pids = NULL;
	CHECK_EQ_I(dump__build(fx.s, &q, NULL, &p), 0);
	if (p) {
		uint64_t total = 0;

		for (size_t k = 0; k < p->n_samples; k++)
			total += p->samples[k]->values[0];
		CHECK_EQ_U(p->n_samples, 4);
		CHECK_EQ_U(total, 23);
	}
	dump__free(p);
	store__free(fx.s);
}

static void test_nodata(void)
{
	struct fixture fx;
	struct store *empty = store__new(NULL);
	uint32_t pid = 999;
	struct store_query q = {.start_ns = 0, .end_ns = UINT64_MAX, .pids = &pid, .npids = 1};
	Profd__Profile *p = (Profd__Profile *)&q;

	CHECK_EQ_I(dump__build(empty, &q, NULL, &p), -ENODATA);
	CHECK(p == NULL);
	fixture_init(&fx);
	CHECK_EQ_I(dump__build(fx.s, &q, NULL, &p), -ENODATA);
	q.npids = 0;
	q.start_ns = 10 * SEC;
	CHECK_EQ_I(dump__build(fx.s, &q, NULL, &p), -ENODATA);
	CHECK_EQ_I(dump__build(fx.s, NULL, NULL, &p), -EINVAL);
	store__free(fx.s);
	store__free(empty);
}

/* GPU columns land in the same samples as CPU ones; a sample whose values are all 0 is left out. */
static void test_columns(void)
{
	struct fixture fx;
	struct store_query q = {.start_ns = 0, .end_ns = SEC};
	Profd__Profile *p = NULL;

	fixture_init(&fx);
	CHECK_EQ_I(store__add(fx.s, 5, 100, 101, fx.s1, STORE_VALUE_GPU_NS, 5000), 0);
	CHECK_EQ_I(store__add(fx.s, 6, 100, 101, fx.s1, STORE_VALUE_GPU_KERNELS, 2), 0);
	CHECK_EQ_I(store__add(fx.s, 7, 300, 301, fx.s2, STORE_VALUE_COPY_BYTES, 64), 0);
	/* Nothing but zeros: no sample, so neither its process nor its thread. */
	CHECK_EQ_I(store__add(fx.s, 8, 400, 401, fx.s2, STORE_VALUE_GPU_NS, 0), 0);
	CHECK_EQ_I(store__add(fx.s, 9, 400, 401, fx.s2, STORE_VALUE_CPU_SAMPLES, 0), 0);
	CHECK_EQ_I(dump__build(fx.s, &q, NULL, &p), 0);
	CHECK(p != NULL);
	if (p) {
		static const uint64_t want[4][3 + 7] = {
		    {0, 100, 101, 13, 0, 5000, 2, 0, 0, 0},
		    {1, 100, 100, 2, 0, 0, 0, 0, 0, 0},
		    {0, 200, 201, 1, 0, 0, 0, 0, 0, 0},
		    {1, 300, 301, 0, 0, 0, 0, 0, 64, 0},
		};

		CHECK_EQ_U(p->n_samples, 4);
		for (size_t k = 0; k < 4 && k < p->n_samples; k++) {
			CHECK_EQ_U(p->samples[k]->stack, want[k][0]);
			CHECK_EQ_U(p->samples[k]->pid, want[k][1]);
			CHECK_EQ_U(p->samples[k]->tid, want[k][2]);
			CHECK_EQ_U(p->samples[k]->n_values, 11);
			for (size_t c = 0; c < 7 && c < p->samples[k]->n_values; c++)
				CHECK_EQ_U(p->samples[k]->values[c], want[k][3 + c]);
		}
		CHECK_EQ_U(p->n_processes, 3);
		CHECK_EQ_U(p->n_threads, 4);
		CHECK_EQ_U(p->n_stacks, 2);
		for (size_t k = 0; k < p->n_processes; k++)
			CHECK(p->processes[k]->pid != 400);
	}
	dump__free(p);

	/* Only zeros in range: no data. */
	q.start_ns = 0;
	q.end_ns = SEC;
	{
		uint32_t pid = 400;

		q.pids = &pid;
		q.npids = 1;
		p = NULL;
		CHECK_EQ_I(dump__build(fx.s, &q, NULL, &p), -ENODATA);
		CHECK(p == NULL);
	}
	store__free(fx.s);
}

static const char *tstr(const Profd__Trace *t, uint32_t i)
{
	return i < t->n_strings ? t->strings[i] : "(out of range)";
}

/* The Trace's tables: dense, deduplicated, first-seen order, owned by the Trace. */
static void check_trace_tables(const Profd__Trace *tr)
{
	static const char *const strings[] = {
	    "",	    "run",	"script.py",	     "main",	       "/bin/app", "app.c",
	    "beef", "schedule", "[kernel.kallsyms]", "cuLaunchKernel", "gemm",	   "nvtx range"};
	const Profd__Frame *f;

	CHECK_EQ_U(tr->n_strings, 12);
	for (size_t k = 0; k < 12 && k < tr->n_strings; k++)
		CHECK_STREQ(tr->strings[k], strings[k]);
	CHECK_EQ_U(tr->n_frames, 5);
	if (tr->n_frames != 5)
		return;
	f = tr->frames[0];
	CHECK_EQ_U(f->kind, PROFD__FRAME_KIND__FRAME_PYTHON);
	CHECK_EQ_U(f->name, 1);
	CHECK_EQ_U(f->module, 2);
	CHECK_EQ_U(f->file, 2);
	CHECK_EQ_U(f->line, 7);
	CHECK(!f->has_address);
	f = tr->frames[1];
	CHECK_EQ_U(f->kind, PROFD__FRAME_KIND__FRAME_NATIVE);
	CHECK_EQ_U(f->name, 3);
	CHECK_EQ_U(f->module, 4);
	CHECK_EQ_U(f->file, 5);
	CHECK_EQ_U(f->build_id, 6);
	CHECK(f->has_address);
	CHECK_EQ_U(f->address, 0x10);
	f = tr->frames[2];
	CHECK_EQ_U(f->kind, PROFD__FRAME_KIND__FRAME_KERNEL);
	CHECK_EQ_U(f->name, 7);
	CHECK_EQ_U(f->module, 8);
	/* Hidden: the tables were made for a caller who is not root. */
	CHECK(!f->has_address);
	f = tr->frames[3];
	CHECK_EQ_U(f->kind, PROFD__FRAME_KIND__FRAME_GPU);
	CHECK_EQ_U(f->name, 10);
	f = tr->frames[4];
	CHECK_EQ_U(f->kind, PROFD__FRAME_KIND__FRAME_NVTX);
	CHECK_EQ_U(f->name, 11);
	CHECK(!f->has_module);
	CHECK_EQ_U(tr->n_stacks, 3);
	if (tr->n_stacks != 3)
		return;
	CHECK_EQ_U(tr->stacks[0]->n_frames, 2);
	CHECK_EQ_U(tr->stacks[0]->frames[0], 0);
	CHECK_EQ_U(tr->stacks[0]->frames[1], 1);
	CHECK_EQ_U(tr->stacks[1]->n_frames, 2);
	CHECK_EQ_U(tr->stacks[1]->frames[0], 2);
	CHECK_EQ_U(tr->stacks[1]->frames[1], 1);
	CHECK_EQ_U(tr->stacks[2]->n_frames, 3);
	CHECK_EQ_U(tr->stacks[2]->frames[0], 3);
	CHECK_EQ_U(tr->stacks[2]->frames[1], 1);
	CHECK_EQ_U(tr->stacks[2]->frames[2], 4);
	CHECK_STREQ(tstr(tr, tr->frames[tr->stacks[2]->frames[0]]->name), "gemm");
}

static void test_tables(void)
{
	struct fixture fx;
	struct dump_tables *t;
	Profd__Trace tr = PROFD__TRACE__INIT, *u;
	char buf[32];
	uint32_t idx = 99, api, nvtx_frame, gpu_frame, main_frame, gpu_stack;
	uint8_t *packed;
	size_t len;

	CHECK(dump_tables__new(NULL, false) == NULL);
	CHECK_EQ_I(errno, EINVAL);
	fixture_init(&fx);
	t = dump_tables__new(fx.s, true);
	CHECK(t != NULL);
	if (!t)
		return;
	/* strings[0] is "", and so is NULL. */
	CHECK_EQ_I(dump_tables__string(t, "", &idx), 0);
	CHECK_EQ_U(idx, 0);
	idx = 99;
	CHECK_EQ_I(dump_tables__string(t, NULL, &idx), 0);
	CHECK_EQ_U(idx, 0);
	/* Stacks in first-seen order, each once, with their frames and strings. */
	CHECK_EQ_I(dump_tables__stack(t, fx.s2, &idx), 0);
	CHECK_EQ_U(idx, 0);
	CHECK_EQ_I(dump_tables__stack(t, fx.s1, &idx), 0);
	CHECK_EQ_U(idx, 1);
	CHECK_EQ_I(dump_tables__stack(t, fx.s2, &idx), 0);
	CHECK_EQ_U(idx, 0);
	CHECK_EQ_I(dump_tables__stack(t, 0, &idx), -EINVAL);
	CHECK_EQ_I(dump_tables__stack(t, 1000, &idx), -EINVAL);
	CHECK_EQ_I(dump_tables__stack(NULL, fx.s1, &idx), -EINVAL);
	CHECK_EQ_I(dump_tables__string(NULL, "x", &idx), -EINVAL);
	/* A string is copied: the caller's buffer may change. */
	strcpy(buf, "cuLaunchKernel");
	CHECK_EQ_I(dump_tables__string(t, buf, &api), 0);
	CHECK_EQ_U(api, 9);
	strcpy(buf, "changed");
	CHECK_EQ_I(dump_tables__string(t, "cuLaunchKernel", &idx), 0);
	CHECK_EQ_U(idx, 9);
	/* Strings shared with frames are the frames' entries. */
	CHECK_EQ_I(dump_tables__string(t, "main", &idx), 0);
	CHECK_EQ_U(idx, 3);
	/* A stack interned after the tables were made: a kernel over its launch, under an NVTX
	 * range, as the GPU module builds them. */
	nvtx_frame = store__intern_frame(
	    fx.s, &(struct frame_key){.kind = FRAME_KIND_NVTX, .name = "nvtx range"});
	gpu_frame =
	    store__intern_frame(fx.s, &(struct frame_key){.kind = FRAME_KIND_GPU, .name = "gemm"});
	main_frame = store__intern_frame(fx.s, &(struct frame_key){.kind = FRAME_KIND_NATIVE,
								   .name = "main",
								   .module = "/bin/app",
								   .address = 0x10,
								   .file = "app.c",
								   .line = 3,
								   .build_id = "beef"});
	CHECK(nvtx_frame != 0);
	CHECK(gpu_frame != 0);
	gpu_stack = store__intern_stack(fx.s, (uint32_t[]){gpu_frame, main_frame, nvtx_frame}, 3);
	CHECK(gpu_stack != 0);
	CHECK_EQ_I(dump_tables__stack(t, gpu_stack, &idx), 0);
	CHECK_EQ_U(idx, 2);
	CHECK_EQ_I(dump_tables__finish_trace(t, &tr), 0);
	/* The trace owns its tables: it outlives both the tables and the store. */
	dump_tables__free(t);
	dump_tables__free(NULL);
	store__free(fx.s);
	check_trace_tables(&tr);

	len = profd__trace__get_packed_size(&tr);
	packed = malloc(len);
	CHECK_EQ_U(profd__trace__pack(&tr, packed), len);
	u = profd__trace__unpack(NULL, len, packed);
	CHECK(u != NULL);
	if (u) {
		check_trace_tables(u);
		profd__trace__free_unpacked(u, NULL);
	}
	free(packed);
	dump_tables__free_trace(&tr);
	CHECK_EQ_U(tr.n_strings, 0);
	CHECK(tr.strings == NULL);
	CHECK_EQ_U(tr.n_frames, 0);
	CHECK(tr.frames == NULL);
	CHECK_EQ_U(tr.n_stacks, 0);
	CHECK(tr.stacks == NULL);
	dump_tables__free_trace(&tr);
	dump_tables__free_trace(NULL);
}

/* Tables of a store with nothing numbered: one string, "". */
static void test_tables_empty(void)
{
	struct store *s = store__new(NULL);
	struct dump_tables *t = dump_tables__new(s, false);
	Profd__Trace tr = PROFD__TRACE__INIT;

	CHECK(t != NULL);
	CHECK_EQ_I(dump_tables__finish_trace(t, &tr), 0);
	CHECK_EQ_U(tr.n_strings, 1);
	if (tr.n_strings == 1)
		CHECK_STREQ(tr.strings[0], "");
	CHECK_EQ_U(tr.n_frames, 0);
	CHECK_EQ_U(tr.n_stacks, 0);
	dump_tables__free_trace(&tr);
	dump_tables__free(t);
	store__free(s);
}

/* The row of stack `stack` (a dense index) in p, or NULL. */
static const Profd__Sample *row_of(const Profd__Profile *p, uint32_t pid, uint32_t stack)
{
	for (size_t i = 0; i < p->n_samples; i++)
		if (p->samples[i]->pid == pid && p->samples[i]->stack == stack)
			return p->samples[i];
	return NULL;
}

/* merge_processes: one row per (process name, stack), every column and thread summed. */
static void test_merged(void)
{
	struct fixture fx;
	struct store_query q = {.start_ns = 0, .end_ns = SEC, .merge_processes = true};
	struct dump_meta meta = {.start_ns = 0, .end_ns = SEC};
	const Profd__Sample *r;
	Profd__Profile *p = NULL;
	uint32_t st1 = UINT32_MAX, st2 = UINT32_MAX;

	fixture_init(&fx);
	/* A second "app" (another run of the program) and its GPU time on the first stack. */
	CHECK_EQ_I(store__set_process(fx.s, 300, 1000, "app"), 0);
	CHECK_EQ_I(store__add(fx.s, 6, 300, 305, fx.s1, STORE_VALUE_CPU_SAMPLES, 4), 0);
	CHECK_EQ_I(store__add(fx.s, 7, 300, 300, fx.s1, STORE_VALUE_GPU_NS, 500), 0);
	CHECK_EQ_I(dump__build(fx.s, &q, &meta, &p), 0);
	CHECK(p != NULL);
	if (!p) {
		store__free(fx.s);
		return;
	}
	CHECK(p->has_merged_processes && p->merged_processes);
	CHECK_EQ_U(p->n_threads, 0);
	/* Two names: "app" (pid 100 speaks for 100 and 300) and pid 200's, which has none. */
	CHECK_EQ_U(p->n_processes, 2);
	CHECK_EQ_U(p->processes[0]->pid, 100);
	CHECK_STREQ(str(p, p->processes[0]->name), "app");
	CHECK_EQ_U(p->processes[1]->pid, 200);
	CHECK_STREQ(str(p, p->processes[1]->name), "");
	for (uint32_t i = 0; i < p->n_stacks; i++) {
		const Profd__Stack *st = p->stacks[i];

		if (st->n_frames == 2 &&
		    !strcmp(str(p, p->frames[st->frames[0]]->name), "schedule"))
			st1 = i;
		if (st->n_frames == 2 && !strcmp(str(p, p->frames[st->frames[0]]->name), "run"))
			st2 = i;
	}
	CHECK(st1 != UINT32_MAX && st2 != UINT32_MAX);
	CHECK_EQ_U(p->n_samples, 3);
	for (size_t i = 0; i < p->n_samples; i++)
		CHECK_EQ_U(p->samples[i]->tid, 0);
	r = row_of(p, 100, st1);
	CHECK(r != NULL);
	if (r) {
		CHECK_EQ_U(r->values[STORE_VALUE_CPU_SAMPLES], 3 + 10 + 4);
		CHECK_EQ_U(r->values[STORE_VALUE_GPU_NS], 500);
	}
	r = row_of(p, 100, st2);
	CHECK(r && r->values[STORE_VALUE_CPU_SAMPLES] == 2 && r->values[STORE_VALUE_GPU_NS] == 0);
	r = row_of(p, 200, st1);
	CHECK(r && r->values[STORE_VALUE_CPU_SAMPLES] == 1);
	dump__free(p);

	/* Without the flag the same store gives a row per process and thread. */
	q.merge_processes = false;
	CHECK_EQ_I(dump__build(fx.s, &q, &meta, &p), 0);
	if (p) {
		CHECK(!p->merged_processes);
		CHECK_EQ_U(p->n_samples, 5);
		CHECK_EQ_U(p->n_processes, 3);
		dump__free(p);
	}
	store__free(fx.s);
}

/*
 * pid 100 exits and another process (a start, another owner) gets its pid: the dump lists pid
 * 100 twice, each with its own name, uid, start (when known) and threads, and the samples and
 * threads of pid 100 say whose they are. pid 200, one process, needs no such reference (the dump
 * stays as small as before for it). merge_processes keeps the two names apart too.
 */
static void test_reused_pid(void)
{
	struct fixture fx;
	struct store_query q = {.start_ns = 0, .end_ns = SEC};
	struct dump_meta meta = {.start_ns = 0, .end_ns = SEC};
	Profd__Profile *p = NULL;
	int seen[2] = {0, 0};

	fixture_init(&fx); /* pid 100 ("app", start unknown) has exited there */
	CHECK_EQ_I(store__process_began(fx.s, 100, 2000), 0);
	CHECK_EQ_I(store__set_process(fx.s, 100, 1001, "newapp"), 0);
	CHECK_EQ_I(store__set_thread(fx.s, 100, 101, "new-worker"), 0);
	CHECK_EQ_I(store__add(fx.s, 8, 100, 101, fx.s2, STORE_VALUE_CPU_SAMPLES, 6), 0);
	CHECK_EQ_I(dump__build(fx.s, &q, &meta, &p), 0);
	CHECK(p != NULL);
	if (!p) {
		store__free(fx.s);
		return;
	}
	CHECK_EQ_U(p->n_processes, 3);
	for (size_t i = 0; i < p->n_samples; i++) {
		const Profd__Sample *sm = p->samples[i];
		const Profd__Process *pr;

		if (sm->pid != 100) {
			CHECK(!sm->has_process && !sm->process);
			continue;
		}
		CHECK(sm->has_process && sm->process >= 1 && sm->process <= p->n_processes);
		if (!sm->process || sm->process > p->n_processes)
			continue;
		pr = p->processes[sm->process - 1];
		CHECK_EQ_U(pr->pid, 100);
		if (!strcmp(str(p, pr->name), "app")) {
			/* The first process: its own samples (3 + 10 and 2) and owner. */
			CHECK_EQ_U(pr->uid, 1000);
			CHECK(!pr->has_start_time);
			CHECK(pr->exited);
			CHECK(sm->values[0] == 13 || sm->values[0] == 2);
			seen[0]++;
		} else {
			CHECK_STREQ(str(p, pr->name), "newapp");
			CHECK_EQ_U(pr->uid, 1001);
			CHECK(pr->has_start_time && pr->start_time == 2000);
			CHECK_EQ_U(sm->values[0], 6);
			seen[1]++;
		}
	}
	CHECK_EQ_I(seen[0], 2);
	CHECK_EQ_I(seen[1], 1);
	/* Thread 101 of each process, under its own name. */
	for (size_t i = 0; i < p->n_threads; i++) {
		const Profd__Thread *t = p->threads[i];

		if (t->pid != 100 || t->tid != 101)
			continue;
		CHECK(t->process >= 1 && t->process <= p->n_processes);
		if (t->process < 1 || t->process > p->n_processes)
			continue;
		CHECK_STREQ(str(p, t->name),
			    strcmp(str(p, p->processes[t->process - 1]->name), "app")
				? "new-worker"
				: "app-worker");
	}
	dump__free(p);

	q.merge_processes = true;
	CHECK_EQ_I(dump__build(fx.s, &q, &meta, &p), 0);
	if (p) {
		CHECK_EQ_U(p->n_processes, 3); /* app, newapp and pid 200's nameless one */
		dump__free(p);
	}
	store__free(fx.s);
}

int main(void)
{
	test_full();
	test_merged();
	test_reused_pid();
	test_filtered();
	test_nodata();
	test_columns();
	test_tables();
	test_tables_empty();
	return CHECK_DONE();
}
