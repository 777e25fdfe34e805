/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPython support's private half, shared only by its own files:
 *   python.c         the per-process state table, reads of target memory, the code-object
 *                    cache and symbolization, the public API of python.h
 *   python_detect.c  finding CPython in a process (maps, ELF files, version, _PyRuntime) and
 *                    building the per-process layout and sampler configuration
 */
#ifndef PROFD_PYTHON_PRIV_H
#define PROFD_PYTHON_PRIV_H

#include "python.h"
#include "python_offsets.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROC_BUCKETS 1024 /* chains stay short for the tens of thousands of pids a host has */

/* One code object of a process, as read when it was first seen. */
struct py_code {
	uint64_t addr;
	/* Re-read and compared on every hit: a different object at a reused address differs. */
	int32_t first_line;
	uint64_t filename_ptr, name_ptr, qualname_ptr, linetable_ptr;
	char *qualname, *filename;
	uint8_t *linetable; /* NULL: unknown, lines are 0 */
	uint32_t linetable_len;
	bool skip;
	struct py_code *hnext;		     /* hash chain */
	struct py_code *lru_prev, *lru_next; /* most recently used first */
};

struct py_proc {
	uint32_t pid;
	int status; /* enum python_detect */
	uint16_t version;
	struct profd_py_proc cfg;
	struct py_layout layout;
	uint64_t code_type; /* &PyCode_Type in the process */
	struct py_code **buckets;
	size_t nbuckets, ncode;
	struct py_code lru; /* sentinel of the LRU list */
	struct py_proc *next;
};

/* An interpreter reported as not supported: each pid and version is told once (a minute). */
#define PY_LOGGED_MAX 16
struct py_logged {
	uint32_t pid, ver;
	uint64_t ns;
};

struct python {
	char proc_root[PATH_MAX];
	unsigned int max_code;
	python_read_fn read_mem;
	void *read_ctx;
	struct py_proc *procs[PROC_BUCKETS];
	struct py_logged logged[PY_LOGGED_MAX];
	unsigned int logged_next;
	struct mem_usage mem; /* the procs and their code caches: python__memory() */
};

/* Reads len bytes of pid's memory at addr into buf. Returns 0 or a negative errno. */
int python_read_mem(struct python *py, uint32_t pid, uint64_t addr, void *buf, size_t len);

/*
 * Look for CPython in the process p->pid and fill p (version, layout, code_type, cfg) as far as
 * found. Returns an enum python_detect value, or a negative errno (-ESRCH: the process is gone,
 * -EAGAIN: ask again later). p->status is left to the caller.
 */
int python_detect_proc(struct python *py, struct py_proc *p);

#endif
