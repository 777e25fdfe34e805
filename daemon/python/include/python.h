/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPython support in user space: find the interpreter in a process (executable or libpython,
 * version, &_PyRuntime with its load bias, the offsets the sampler needs), and turn the raw
 * frames the sampler read (code object address, instruction offset) into qualified names, files
 * and lines, reading the target's memory with process_vm_readv. Code objects are cached per
 * process by address and every hit is validated (type pointer, first line), since addresses are
 * reused.
 *
 * Not thread-safe: one owner thread.
 */
#ifndef PROFD_PYTHON_H
#define PROFD_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi.h"
#include "memuse.h"

/* Reads len bytes of pid's memory at addr into buf. Returns 0 or a negative errno. */
typedef int (*python_read_fn)(void *ctx, uint32_t pid, uint64_t addr, void *buf, size_t len);

struct python_opts {
	const char *proc_root; /* NULL: "/proc" */
	/* Code objects cached per process; 0: a default (4096). */
	unsigned int max_code_per_pid;
	/* How target memory is read; NULL: process_vm_readv(). Tests inject faults here. */
	python_read_fn read_mem;
	void *read_ctx;
};

enum python_detect {
	PYTHON_NOT_PYTHON = 0,	/* no CPython in the process */
	PYTHON_SUPPORTED = 1,	/* *cfg filled */
	PYTHON_UNSUPPORTED = 2, /* CPython found, but a version or build profd cannot read
				 * (logged once with the reason, e.g. free-threaded 3.13t) */
};

/* One symbolized Python frame; strings owned by the cache, valid until the next call. */
struct py_frame_sym {
	const char *qualname; /* co_qualname (3.11+) or co_name */
	const char *filename; /* co_filename, full path as the code object holds it */
	uint32_t line;	      /* from the line table at the instruction; 0 if unknown */
	uint32_t first_line;  /* co_firstlineno */
	bool skip;	      /* not user code: shim / entry / trampoline frames, to be dropped */
};

struct python;

/* Returns a new instance or NULL with errno set. */
struct python *python__new(const struct python_opts *opts);
void python__free(struct python *py);

/*
 * Look for CPython in pid (through /proc/PID/root for containers). Returns an enum
 * python_detect value (>= 0) or a negative errno (the process is gone: -ESRCH; -EAGAIN: the
 * executable needs a libpython that the loader has not mapped yet, ask again at a later
 * sample). The result is remembered until python__forget_pid(); a second call returns it
 * without new work. cfg is zeroed unless PYTHON_SUPPORTED, but for a free-threaded build
 * (PYTHON_UNSUPPORTED): then it has gil_kind PROFD_PY_GIL_DISABLED, runtime_addr and version
 * only, an entry for the sampler that reads no frames and marks samples PROFD_SAMPLE_NO_GIL.
 */
int python__detect(struct python *py, uint32_t pid, struct profd_py_proc *cfg);

/*
 * Symbolize one frame of pid (detected first if it was not). Once pid's memory cannot be read
 * any more (it exited before its last samples were handled), frames are named from the code
 * objects read while it lived. Returns 0 (out filled), -ENOENT when the address does not hold a
 * code object (stale or torn frame, 3.13+ entry frame) or holds another than the sampler saw
 * (PROFD_PYF_CHECKED: freed and reused since), -ENODATA when pid has exited
 * and its code object at the address was never read, -ESRCH when pid is gone and was never
 * detected, -EOPNOTSUPP when pid is not a supported CPython process, or another negative errno.
 */
int python__symbolize(struct python *py, uint32_t pid, const struct profd_py_frame *frame,
		      struct py_frame_sym *out);

/* The process exec'd or exited: drop its state and cached code objects. */
void python__forget_pid(struct python *py, uint32_t pid);

/* The version found in pid as (major << 8 | minor), 0 if none; for logs and tests. */
uint16_t python__version(const struct python *py, uint32_t pid);

/* The per-process state held (every process looked at and not forgotten) and its bytes. */
void python__memory(const struct python *py, struct mem_usage *out);

#endif
