/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the CPython module: decoders of the tables that map an instruction to its source
 * line, one per format. They work on a copy of the table read from the target and trust none
 * of its bytes: every step is bounded by the table's length.
 */
#ifndef PROFD_PYTHON_LINES_H
#define PROFD_PYTHON_LINES_H

#include <stddef.h>
#include <stdint.h>

enum py_line_format {
	PY_LINES_LNOTAB = 0,	/* 3.8, 3.9 co_lnotab: (byte delta, line delta) pairs */
	PY_LINES_LINETABLE = 1, /* 3.10 co_linetable: (byte delta, line delta or -128) ranges */
	PY_LINES_LOCATIONS = 2, /* 3.11+ co_linetable: the location table, in code units */
};

/*
 * The line of the instruction at addr: a byte offset into co_code for PY_LINES_LNOTAB and
 * PY_LINES_LINETABLE (3.10's f_lasti is in code units: pass 2 * f_lasti), a code unit index for
 * PY_LINES_LOCATIONS. Returns the line (>= 0), or -ENOENT when the table gives the instruction
 * no line (an artificial instruction, or addr past the table's end).
 */
int py_line_at(enum py_line_format fmt, const uint8_t *tab, size_t len, int first_line,
	       uint64_t addr);

#endif
