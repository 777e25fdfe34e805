// SPDX-License-Identifier: BSD-2-Clause
#include "python_offsets.h"

#include <errno.h>
#include <string.h>

#define NF PROFD_PY_NO_FIELD

/*
 * 3.8 to 3.12, x86_64, default (GIL) builds. Every number was printed with offsetof()/sizeof()
 * by a program compiled against each version's own headers (Py_BUILD_CORE, internal/ headers
 * included), and the live frames of real interpreters were walked with them.
 * One group of fields per line, hence no clang-format here.
 *
 * The GIL, struct _gil_runtime_state (Include/internal/pycore_gil.h, the same in 3.8 to 3.12):
 * interval (unsigned long) at 0, last_holder at 8, locked (an int) at 16. Where it lives:
 *   3.8      _PyRuntime.ceval.gil (pycore_pystate.h: struct _ceval_runtime_state after
 *            recursion_limit, tracing_possible, eval_breaker, gil_drop_request, pending,
 *            signals_pending)
 *   3.9-3.11 _PyRuntime.ceval.gil (pycore_runtime.h: struct _ceval_runtime_state
 *            {signals_pending; gil}; 3.10's EXPERIMENTAL_ISOLATED_SUBINTERPRETERS builds, which
 *            move it into the interpreter, are not a release configuration)
 *   3.12     PyInterpreterState.ceval.gil, a pointer (pycore_ceval_state.h: struct _ceval_state;
 *            pycore_interp.h: the storage is PyInterpreterState._gil, the main interpreter's
 *            own, shared by subinterpreters that have no GIL of their own)
 * Offsets below from offsetof(_PyRuntimeState, ceval.gil) and offsetof(PyInterpreterState,
 * ceval.gil) compiled against 3.8.18, 3.9.18, 3.10.13, 3.11.7 and 3.12.1.
 */
/* clang-format off */
static const struct py_layout layouts[] = {
	{
		.version = PY_VER(3, 8),
		.rt_interp_head = 32, .interp_next = 0, .interp_threads_head = 8,
		.ts_next = 8, .ts_thread_id = 176, .ts_frame = 24, .cframe_current = NF,
		.fr_code = 32, .fr_back = 24, .fr_lasti = 104, .fr_owner = NF, .fr_is_entry = NF,
		.lasti_kind = PROFD_PY_LASTI_INT,
		.gil_kind = PROFD_PY_GIL_RUNTIME, .gil_off = 1152, .ts_interp = NF, .gil_holder = 8,
		.ob_type = 8, .co_firstlineno = 40, .co_filename = 104, .co_name = 112,
		.co_qualname = NF, .co_linetable = 120, .co_code_adaptive = NF,
		.line_format = PY_LINES_LNOTAB,
		.str_state = 32, .str_length = 16, .str_ascii_data = 48, .str_compact_data = 72,
		.bytes_size = 16, .bytes_data = 32,
	},
	{
		.version = PY_VER(3, 9),
		.rt_interp_head = 32, .interp_next = 0, .interp_threads_head = 8,
		.ts_next = 8, .ts_thread_id = 176, .ts_frame = 24, .cframe_current = NF,
		.fr_code = 32, .fr_back = 24, .fr_lasti = 104, .fr_owner = NF, .fr_is_entry = NF,
		.lasti_kind = PROFD_PY_LASTI_INT,
		.gil_kind = PROFD_PY_GIL_RUNTIME, .gil_off = 352, .ts_interp = NF, .gil_holder = 8,
		.ob_type = 8, .co_firstlineno = 40, .co_filename = 104, .co_name = 112,
		.co_qualname = NF, .co_linetable = 120, .co_code_adaptive = NF,
		.line_format = PY_LINES_LNOTAB,
		.str_state = 32, .str_length = 16, .str_ascii_data = 48, .str_compact_data = 72,
		.bytes_size = 16, .bytes_data = 32,
	},
	{
		/* f_lasti counts code units from here on. */
		.version = PY_VER(3, 10),
		.rt_interp_head = 32, .interp_next = 0, .interp_threads_head = 8,
		.ts_next = 8, .ts_thread_id = 176, .ts_frame = 24, .cframe_current = NF,
		.fr_code = 32, .fr_back = 24, .fr_lasti = 96, .fr_owner = NF, .fr_is_entry = NF,
		.lasti_kind = PROFD_PY_LASTI_INT,
		.gil_kind = PROFD_PY_GIL_RUNTIME, .gil_off = 352, .ts_interp = NF, .gil_holder = 8,
		.ob_type = 8, .co_firstlineno = 40, .co_filename = 104, .co_name = 112,
		.co_qualname = NF, .co_linetable = 120, .co_code_adaptive = NF,
		.line_format = PY_LINES_LINETABLE,
		.str_state = 32, .str_length = 16, .str_ascii_data = 48, .str_compact_data = 72,
		.bytes_size = 16, .bytes_data = 32,
	},
	{
		/* _PyInterpreterFrame behind tstate->cframe; no C-stack owner value yet. */
		.version = PY_VER(3, 11),
		.rt_interp_head = 40, .interp_next = 0, .interp_threads_head = 16,
		.ts_next = 8, .ts_thread_id = 152, .ts_frame = 56, .cframe_current = 8,
		.fr_code = 32, .fr_back = 48, .fr_lasti = 56, .fr_owner = 69, .fr_is_entry = 68,
		.lasti_kind = PROFD_PY_LASTI_PTR,
		.gil_kind = PROFD_PY_GIL_RUNTIME, .gil_off = 360, .ts_interp = NF, .gil_holder = 8,
		.ob_type = 8, .co_firstlineno = 72, .co_filename = 112, .co_name = 120,
		.co_qualname = 128, .co_linetable = 136, .co_code_adaptive = 184,
		.line_format = PY_LINES_LOCATIONS,
		.str_state = 32, .str_length = 16, .str_ascii_data = 48, .str_compact_data = 72,
		.bytes_size = 16, .bytes_data = 32,
	},
	{
		/* Shim frames: owner FRAME_OWNED_BY_CSTACK (3); wstr gone from str. */
		.version = PY_VER(3, 12),
		.rt_interp_head = 40, .interp_next = 0, .interp_threads_head = 72,
		.ts_next = 8, .ts_thread_id = 136, .ts_frame = 56, .cframe_current = 0,
		.fr_code = 0, .fr_back = 8, .fr_lasti = 56, .fr_owner = 70, .fr_is_entry = NF,
		.lasti_kind = PROFD_PY_LASTI_PTR, .boundary_owner = 3,
		.gil_kind = PROFD_PY_GIL_INTERP, .gil_off = 384, .ts_interp = 16, .gil_holder = 8,
		.ob_type = 8, .co_firstlineno = 68, .co_filename = 112, .co_name = 120,
		.co_qualname = 128, .co_linetable = 136, .co_code_adaptive = 192,
		.line_format = PY_LINES_LOCATIONS,
		.str_state = 32, .str_length = 16, .str_ascii_data = 40, .str_compact_data = 56,
		.bytes_size = 16, .bytes_data = 32,
	},
};
/* clang-format on */

int py_layout_static(uint16_t version, struct py_layout *out)
{
	size_t i;

	for (i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
		if (layouts[i].version == version) {
			*out = layouts[i];
			return 0;
		}
	}
	return -ENOTSUP;
}

/*
 * _Py_DebugOffsets is a cookie, then only uint64_t values, grouped in sub-structs whose
 * membership changes between minor versions. These are the indices (in uint64_t units from the
 * start, the cookie being index 0) of the values profd uses, per minor version. 3.13 was
 * checked against its header and a live process; 3.14 follows its header (interpreter_state
 * gained threads_main, code_object_generation, tlbc_generation; interpreter_frame stackpointer
 * and tlbc_index; code_object co_tlbc; a set_object block follows list_object).
 * The GIL: interpreter_state.{ceval_gil, gil_runtime_state, gil_runtime_state_locked,
 * gil_runtime_state_holder} (3.13: 14, 15, 17, 18; 3.14: 15, 16, 18, 19, after threads_main)
 * and thread_state.interp (22; 25), as read from live processes: 3.13.0 ceval.gil at 16, _gil
 * at 7752, _gil.last_holder 7760, _gil.locked 7768; 3.14.10 16, 7784, 7792, 7800; interp at 16.
 */
struct dbg_layout {
	uint8_t minor;
	uint8_t n; /* uint64_t values in the whole struct */
	uint8_t rt_interp_head;
	uint8_t interp_size, interp_next, interp_threads_head;
	uint8_t ts_size, ts_next, ts_current_frame, ts_thread_id, ts_interp;
	/* ceval.gil (the pointer), _gil, _gil.locked, _gil.last_holder: all in the interpreter */
	uint8_t interp_ceval_gil, interp_gil, interp_gil_locked, interp_gil_holder;
	uint8_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_owner;
	uint8_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno;
	uint8_t co_code_adaptive;
	uint8_t obj_size, obj_ob_type;
	uint8_t bytes_ob_size, bytes_ob_sval;
	uint8_t str_state, str_length, str_ascii_size;
	uint8_t code_tag_mask;
};

/* clang-format off */
static const struct dbg_layout dbg_layouts[] = {
	{
		.minor = 13, .n = 73, .rt_interp_head = 5,
		.interp_size = 6, .interp_next = 8, .interp_threads_head = 9,
		.interp_ceval_gil = 14, .interp_gil = 15, .interp_gil_locked = 17,
		.interp_gil_holder = 18,
		.ts_size = 19, .ts_next = 21, .ts_interp = 22, .ts_current_frame = 23,
		.ts_thread_id = 24,
		.fr_size = 28, .fr_previous = 29, .fr_executable = 30, .fr_instr_ptr = 31,
		.fr_owner = 33,
		.co_size = 34, .co_filename = 35, .co_name = 36, .co_qualname = 37,
		.co_linetable = 38, .co_firstlineno = 39, .co_code_adaptive = 43,
		.obj_size = 44, .obj_ob_type = 45,
		.bytes_ob_size = 65, .bytes_ob_sval = 66,
		.str_state = 68, .str_length = 69, .str_ascii_size = 70,
		.code_tag_mask = 0,
	},
	{
		/* f_executable is a _PyStackRef: its low bit is a tag. */
		.minor = 14, .n = 95, .rt_interp_head = 5,
		.interp_size = 6, .interp_next = 8, .interp_threads_head = 9,
		.interp_ceval_gil = 15, .interp_gil = 16, .interp_gil_locked = 18,
		.interp_gil_holder = 19,
		.ts_size = 22, .ts_next = 24, .ts_interp = 25, .ts_current_frame = 26,
		.ts_thread_id = 27,
		.fr_size = 31, .fr_previous = 32, .fr_executable = 33, .fr_instr_ptr = 34,
		.fr_owner = 36,
		.co_size = 39, .co_filename = 40, .co_name = 41, .co_qualname = 42,
		.co_linetable = 43, .co_firstlineno = 44, .co_code_adaptive = 48,
		.obj_size = 50, .obj_ob_type = 51,
		.bytes_ob_size = 75, .bytes_ob_sval = 76,
		.str_state = 78, .str_length = 79, .str_ascii_size = 80,
		.code_tag_mask = 1,
	},
};
/* clang-format on */

_Static_assert(PY_DEBUG_OFFSETS_MAX == 95 * 8, "PY_DEBUG_OFFSETS_MAX covers 3.14");

#define DEBUG_COOKIE "xdebugpy"
/*
 * Sizes beyond this are not CPython's structs (PyInterpreterState is ~190 KiB in 3.13): a wrong
 * index picked some other value. Offsets must also fit the sampler's u16 fields.
 */
#define DBG_STRUCT_MAX (1u << 24)

static bool field_ok(uint64_t off, uint64_t size, unsigned int width)
{
	return size > 0 && size < DBG_STRUCT_MAX && off + width <= size && off < PROFD_PY_NO_FIELD;
}

/*
 * The GIL's place from _Py_DebugOffsets: interp->ceval.gil points to a struct
 * _gil_runtime_state, whose fields the table gives as offsets of the interpreter's own one
 * (_gil.locked, _gil.last_holder). Left PROFD_PY_GIL_UNKNOWN when they do not make sense: the
 * frames are read all the same.
 */
static void gil_from_debug(const struct dbg_layout *dl, const uint64_t *v, struct py_layout *out)
{
	uint64_t isize = v[dl->interp_size], base = v[dl->interp_gil];
	uint64_t holder = v[dl->interp_gil_holder], locked = v[dl->interp_gil_locked];

	out->gil_kind = PROFD_PY_GIL_UNKNOWN;
	out->gil_off = out->ts_interp = out->gil_holder = NF;
	if (!field_ok(v[dl->interp_ceval_gil], isize, 8) ||
	    !field_ok(v[dl->ts_interp], v[dl->ts_size], 8) || !field_ok(holder, isize, 16) ||
	    holder < base || holder - base > 64 || locked != holder + 8)
		return;
	out->gil_kind = PROFD_PY_GIL_INTERP;
	out->gil_off = v[dl->interp_ceval_gil];
	out->ts_interp = v[dl->ts_interp];
	out->gil_holder = holder - base;
}

int py_layout_from_debug(const void *buf, size_t len, uint32_t *hexversion, bool *free_threaded,
			 struct py_layout *out)
{
	const struct dbg_layout *dl = NULL;
	uint64_t v[PY_DEBUG_OFFSETS_MAX / 8];
	unsigned int minor;
	size_t i;

	if (len < 24 || memcmp(buf, DEBUG_COOKIE, 8) != 0)
		return -EPROTO;
	memset(v, 0, sizeof(v));
	memcpy(v, buf, len < sizeof(v) ? len : sizeof(v));
	*hexversion = (uint32_t)v[1];
	*free_threaded = v[2] != 0;
	if ((v[1] >> 24) != 3)
		return -ENOTSUP;
	minor = (v[1] >> 16) & 0xff;
	for (i = 0; i < sizeof(dbg_layouts) / sizeof(dbg_layouts[0]); i++)
		if (dbg_layouts[i].minor == minor)
			dl = &dbg_layouts[i];
	/* Free-threaded builds shift every object field and keep per-thread bytecode. */
	if (!dl || *free_threaded)
		return -ENOTSUP;
	if (len < (size_t)dl->n * 8)
		return -EINVAL;

	/* Anchors: a PyObject of a GIL build is 16 bytes with ob_type at 8. */
	if (v[dl->obj_size] != 16 || v[dl->obj_ob_type] != 8)
		return -EINVAL;
	if (!field_ok(v[dl->interp_next], v[dl->interp_size], 8) ||
	    !field_ok(v[dl->interp_threads_head], v[dl->interp_size], 8) ||
	    !field_ok(v[dl->ts_next], v[dl->ts_size], 8) ||
	    !field_ok(v[dl->ts_current_frame], v[dl->ts_size], 8) ||
	    !field_ok(v[dl->ts_thread_id], v[dl->ts_size], 8) ||
	    !field_ok(v[dl->fr_previous], v[dl->fr_size], 8) ||
	    !field_ok(v[dl->fr_executable], v[dl->fr_size], 8) ||
	    !field_ok(v[dl->fr_instr_ptr], v[dl->fr_size], 8) ||
	    !field_ok(v[dl->fr_owner], v[dl->fr_size], 1) ||
	    !field_ok(v[dl->co_filename], v[dl->co_size], 8) ||
	    !field_ok(v[dl->co_name], v[dl->co_size], 8) ||
	    !field_ok(v[dl->co_qualname], v[dl->co_size], 8) ||
	    !field_ok(v[dl->co_linetable], v[dl->co_size], 8) ||
	    !field_ok(v[dl->co_firstlineno], v[dl->co_size], 4) ||
	    /* co_code_adaptive is the last member, a one-element array */
	    v[dl->co_code_adaptive] >= v[dl->co_size] ||
	    v[dl->co_size] - v[dl->co_code_adaptive] > 8 ||
	    v[dl->rt_interp_head] >= PROFD_PY_NO_FIELD || v[dl->bytes_ob_size] >= 64 ||
	    v[dl->bytes_ob_sval] >= 64 || v[dl->str_state] >= 64 || v[dl->str_length] >= 64 ||
	    (v[dl->str_ascii_size] != 40 && v[dl->str_ascii_size] != 48))
		return -EINVAL;

	memset(out, 0, sizeof(*out));
	out->version = PY_VER(3, minor);
	out->rt_interp_head = v[dl->rt_interp_head];
	out->interp_next = v[dl->interp_next];
	out->interp_threads_head = v[dl->interp_threads_head];
	out->ts_next = v[dl->ts_next];
	out->ts_thread_id = v[dl->ts_thread_id];
	out->ts_frame = v[dl->ts_current_frame];
	out->cframe_current = NF;
	out->fr_code = v[dl->fr_executable];
	out->fr_back = v[dl->fr_previous];
	out->fr_lasti = v[dl->fr_instr_ptr];
	out->fr_owner = v[dl->fr_owner];
	out->fr_is_entry = NF;
	out->lasti_kind = PROFD_PY_LASTI_PTR;
	/* C-stack entry frames: owner FRAME_OWNED_BY_CSTACK (3.13) / INTERPRETER (3.14), both 3. */
	out->boundary_owner = 3;
	out->code_tag_mask = dl->code_tag_mask;
	gil_from_debug(dl, v, out);
	out->ob_type = v[dl->obj_ob_type];
	out->co_firstlineno = v[dl->co_firstlineno];
	out->co_filename = v[dl->co_filename];
	out->co_name = v[dl->co_name];
	out->co_qualname = v[dl->co_qualname];
	out->co_linetable = v[dl->co_linetable];
	out->co_code_adaptive = v[dl->co_code_adaptive];
	out->line_format = PY_LINES_LOCATIONS;
	out->str_state = v[dl->str_state];
	out->str_length = v[dl->str_length];
	out->str_ascii_data = v[dl->str_ascii_size];
	/* PyCompactUnicodeObject adds utf8_length and utf8 to PyASCIIObject. */
	out->str_compact_data = v[dl->str_ascii_size] + 16;
	out->bytes_size = v[dl->bytes_ob_size];
	out->bytes_data = v[dl->bytes_ob_sval];
	return 0;
}

/* The end of field off (width bytes) or cur, whichever is further; in size_t: no wrap. */
static size_t span(size_t cur, uint16_t off, unsigned int width)
{
	if (off == NF)
		return cur;
	return (size_t)off + width > cur ? (size_t)off + width : cur;
}

static size_t frame_span(const struct py_layout *l)
{
	size_t sz = 0;

	sz = span(sz, l->fr_code, 8);
	sz = span(sz, l->fr_back, 8);
	sz = span(sz, l->fr_lasti, l->lasti_kind == PROFD_PY_LASTI_INT ? 4 : 8);
	sz = span(sz, l->fr_owner, 1);
	sz = span(sz, l->fr_is_entry, 1);
	return sz;
}

void py_layout_to_cfg(const struct py_layout *l, uint64_t runtime_addr, struct profd_py_proc *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->runtime_addr = runtime_addr;
	cfg->version = l->version;
	cfg->rt_interp_head = l->rt_interp_head;
	cfg->interp_next = l->interp_next;
	cfg->interp_threads_head = l->interp_threads_head;
	cfg->ts_next = l->ts_next;
	cfg->ts_thread_id = l->ts_thread_id;
	cfg->ts_frame = l->ts_frame;
	cfg->cframe_current = l->cframe_current;
	cfg->fr_code = l->fr_code;
	cfg->fr_back = l->fr_back;
	cfg->fr_lasti = l->fr_lasti;
	cfg->fr_owner = l->fr_owner;
	cfg->fr_is_entry = l->fr_is_entry;
	/* py_layout_plausible() bounded it to PY_LAYOUT_FRAME_MAX. */
	cfg->fr_size = (uint16_t)frame_span(l);
	cfg->lasti_kind = l->lasti_kind;
	cfg->boundary_owner = l->boundary_owner;
	cfg->code_tag_mask = l->code_tag_mask;
	cfg->gil_kind = l->gil_kind;
	cfg->gil_off = l->gil_off;
	cfg->ts_interp = l->ts_interp;
	cfg->gil_holder = l->gil_holder;
	cfg->co_filename = l->co_name == l->co_filename + 8 ? l->co_filename : PROFD_PY_NO_FIELD;
}

size_t py_layout_code_span(const struct py_layout *l)
{
	size_t sz = 0;

	sz = span(sz, l->ob_type, 8);
	sz = span(sz, l->co_firstlineno, 4);
	sz = span(sz, l->co_filename, 8);
	sz = span(sz, l->co_name, 8);
	sz = span(sz, l->co_qualname, 8);
	sz = span(sz, l->co_linetable, 8);
	return sz;
}

bool py_layout_plausible(const struct py_layout *l)
{
	/*
	 * The layout of 3.13+ comes from the target's own memory: whatever it says, the daemon
	 * reads at most these many bytes of a frame (the sampler's buffer) and of a code object
	 * and string header (user space buffers).
	 */
	return frame_span(l) <= PY_LAYOUT_FRAME_MAX &&
	       py_layout_code_span(l) <= PY_LAYOUT_CODE_MAX &&
	       (size_t)l->str_state + 4 <= l->str_compact_data &&
	       (size_t)l->str_length + 8 <= l->str_compact_data &&
	       l->str_compact_data <= PY_LAYOUT_STR_HDR_MAX;
}
