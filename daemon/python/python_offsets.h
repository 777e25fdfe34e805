/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the CPython module: where each version keeps the fields profd reads. 3.8 to 3.12
 * come from tables compiled from the versions' headers; 3.13 and later from _Py_DebugOffsets,
 * the table CPython itself keeps at the start of _PyRuntime, read from the process.
 * Every offset is in bytes; PROFD_PY_NO_FIELD marks a field the version lacks.
 */
#ifndef PROFD_PYTHON_OFFSETS_H
#define PROFD_PYTHON_OFFSETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi.h"
#include "python_lines.h"

#define PY_VER(major, minor) ((uint16_t)((major) << 8 | (minor)))
#define PY_VER_MIN PY_VER(3, 8)
#define PY_VER_MAX PY_VER(3, 14)

struct py_layout {
	uint16_t version; /* PY_VER() */
	/* What the sampler needs, copied into struct profd_py_proc. */
	uint16_t rt_interp_head, interp_next, interp_threads_head, ts_next, ts_thread_id;
	uint16_t ts_frame, cframe_current;
	uint16_t fr_code, fr_back, fr_lasti, fr_owner, fr_is_entry;
	uint8_t lasti_kind, boundary_owner, code_tag_mask;
	/* The GIL (see enum profd_py_gil_kind): where, and last_holder inside it. */
	uint8_t gil_kind;
	uint16_t gil_off, ts_interp, gil_holder;
	/* Code objects. */
	uint16_t ob_type;
	uint16_t co_firstlineno, co_filename, co_name, co_qualname, co_linetable;
	uint16_t co_code_adaptive; /* 3.11+: lasti - this = byte offset of the instruction */
	enum py_line_format line_format;
	/* str: state bits and where the characters of a compact string start. */
	uint16_t str_state, str_length, str_ascii_data, str_compact_data;
	/* bytes */
	uint16_t bytes_size, bytes_data;
};

/* The most bytes of _Py_DebugOffsets any known version has (3.14). */
#define PY_DEBUG_OFFSETS_MAX 760

/*
 * The compiled layout of version (PY_VER(3, 8) .. PY_VER(3, 12)) into *out. Returns 0, or
 * -ENOTSUP for a version that has no compiled table.
 */
int py_layout_static(uint16_t version, struct py_layout *out);

/*
 * Parse _Py_DebugOffsets read from the start of _PyRuntime (buf, len bytes; len should be
 * PY_DEBUG_OFFSETS_MAX). *hexversion gets its PY_VERSION_HEX and *free_threaded its flag as
 * soon as the cookie matched. Returns 0 with *out filled (3.13, 3.14), -EPROTO when the cookie
 * is not there, -ENOTSUP for a minor version whose layout is unknown or a free-threaded build,
 * -EINVAL when the offsets are not plausible (a wrong layout guess must not produce garbage).
 */
int py_layout_from_debug(const void *buf, size_t len, uint32_t *hexversion, bool *free_threaded,
			 struct py_layout *out);

/* Fill the sampler's view from a layout (fr_size computed to cover every frame field read). */
/* Bytes of a frame, a code object head and a string header the daemon reads at most. */
#define PY_LAYOUT_FRAME_MAX 128 /* PY_FRAME_BUF in bpf/python.bpf.h */
#define PY_LAYOUT_CODE_MAX 256
#define PY_LAYOUT_STR_HDR_MAX 96
/*
 * Whether every field of l lies inside what the daemon reads of the object holding it. A layout
 * read from a process (3.13+) that fails this is refused: the process gets native frames only.
 */
bool py_layout_plausible(const struct py_layout *l);
void py_layout_to_cfg(const struct py_layout *l, uint64_t runtime_addr, struct profd_py_proc *cfg);

/* Bytes of a code object to read to cover every field the layout names. */
size_t py_layout_code_span(const struct py_layout *l);

#endif
