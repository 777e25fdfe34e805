// SPDX-License-Identifier: BSD-2-Clause
#include "python_lines.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>

/*
 * 3.8/3.9: each pair advances the byte offset, then the line. An instruction belongs to the
 * line reached before the first pair that moves the offset beyond it (CPython's
 * PyCode_Addr2Line of those versions). Line deltas are signed since 3.6.
 */
/* A decoded line as an int, or -ENOENT when a hostile table pushed it out of range. */
static int line_or_none(int64_t line)
{
	return line < 0 || line > INT_MAX ? -ENOENT : (int)line;
}

static int lnotab_line(const uint8_t *tab, size_t len, int first_line, uint64_t addr)
{
	uint64_t off = 0;
	int64_t line =
	    first_line; /* deltas come from the target: no int overflow on a long table */
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		off += tab[i];
		if (off > addr)
			break;
		line += (int8_t)tab[i + 1];
	}
	return line_or_none(line);
}

/*
 * 3.10: each pair is one address range [end, end + delta) whose line is the running line plus
 * the line delta, or none when the delta is -128 (the running line then does not move). Empty
 * ranges only carry line changes.
 */
static int linetable_line(const uint8_t *tab, size_t len, int first_line, uint64_t addr)
{
	uint64_t start, end = 0;
	int64_t line = first_line, cur;
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		start = end;
		end += tab[i];
		if ((int8_t)tab[i + 1] == -128) {
			cur = -1;
		} else {
			line += (int8_t)tab[i + 1];
			cur = line;
		}
		if (start <= addr && addr < end)
			return cur < 0 ? -ENOENT : line_or_none(cur);
	}
	return -ENOENT;
}

/* Location table varints: 6 bits per byte, least significant first, 0x40 continues. */
static bool read_varint(const uint8_t *tab, size_t len, size_t *pos, uint32_t *val)
{
	uint32_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (*pos >= len || shift > 30)
			return false;
		b = tab[(*pos)++];
		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	*val = v;
	return true;
}

static bool read_svarint(const uint8_t *tab, size_t len, size_t *pos, int *val)
{
	uint32_t u;

	if (!read_varint(tab, len, pos, &u))
		return false;
	*val = (u & 1) ? -(int)(u >> 1) : (int)(u >> 1);
	return true;
}

enum {
	LOC_SHORT_MAX = 9,   /* 0-9: same line, one column byte */
	LOC_ONE_LINE0 = 10,  /* 10-12: line delta 0, 1, 2; two column bytes */
	LOC_NO_COLUMNS = 13, /* signed varint line delta */
	LOC_LONG = 14,	     /* signed varint line delta, then end line, columns */
	LOC_NONE = 15,	     /* no location */
};

/*
 * 3.11+: each entry starts with a byte 1cccclll: code c, (l + 1) code units. The entry's line
 * is the running line plus its delta; "none" entries have no line and do not move it.
 * Continuation bytes have the top bit clear, so an entry ends at the next byte that has it set.
 */
static int locations_line(const uint8_t *tab, size_t len, int first_line, uint64_t addr)
{
	uint64_t start, end = 0;
	int64_t line = first_line;
	int delta;
	size_t pos = 0;
	unsigned int code;

	while (pos < len) {
		if (!(tab[pos] & 0x80))
			return -ENOENT; /* not at an entry's first byte: corrupt */
		code = (tab[pos] >> 3) & 15;
		start = end;
		end += (tab[pos] & 7) + 1;
		pos++;
		delta = 0;
		if (code == LOC_NO_COLUMNS || code == LOC_LONG) {
			if (!read_svarint(tab, len, &pos, &delta))
				return -ENOENT;
		} else if (code >= LOC_ONE_LINE0 && code <= LOC_ONE_LINE0 + 2) {
			delta = (int)code - LOC_ONE_LINE0;
		}
		line += delta;
		if (start <= addr && addr < end)
			return code == LOC_NONE ? -ENOENT : line_or_none(line);
		while (pos < len && !(tab[pos] & 0x80))
			pos++;
	}
	return -ENOENT;
}

int py_line_at(enum py_line_format fmt, const uint8_t *tab, size_t len, int first_line,
	       uint64_t addr)
{
	int line;

	switch (fmt) {
	case PY_LINES_LNOTAB:
		line = lnotab_line(tab, len, first_line, addr);
		break;
	case PY_LINES_LINETABLE:
		line = linetable_line(tab, len, first_line, addr);
		break;
	case PY_LINES_LOCATIONS:
		line = locations_line(tab, len, first_line, addr);
		break;
	default:
		return -EINVAL;
	}
	return line < 0 ? -ENOENT : line;
}
