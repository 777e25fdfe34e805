/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Helpers over a decoded Profd__Profile: checks of every index in it, display names of frames,
 * and the merged call tree ("flame") the output formats are drawn from.
 *
 * Display names, the same in every format: kernel frames end in "_[k]", GPU frames in "_[g]",
 * native frames are the bare function name, Python frames are "NAME (FILE:LINE)" with the file's
 * base name, NVTX ranges are "[nvtx] NAME", and a frame without a symbol is
 * "[unknown] (MODULE+0xADDR)".
 */
#ifndef PROFCTL_PROFILE_H
#define PROFCTL_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profd.pb-c.h"

/*
 * Check that every index in p (strings, frames, stacks) is in range, so the rest of the client
 * may follow them. Returns 0 or -EPROTO with a reason in err.
 */
int profile_check(const Profd__Profile *p, char *err, size_t err_len);
/* The string at idx, "" when out of range. Owned by p. */
const char *profile_string(const Profd__Profile *p, uint32_t idx);
/*
 * Write the display name of frame f into buf (always NUL-terminated, truncated to fit).
 * Returns the length of the whole name, like snprintf.
 */
size_t profile_frame_name(const Profd__Profile *p, const Profd__Frame *f, char *buf, size_t len);
/*
 * The function a frame belongs to, for per-function tables: like profile_frame_name but without
 * the Python line ("NAME (FILE)") and, for frames without a symbol, without the address
 * ("[unknown] (MODULE)"), so every line or address of one function counts together.
 */
size_t profile_function_name(const Profd__Profile *p, const Profd__Frame *f, char *buf, size_t len);
/*
 * The thread state a stack carries as its root frame ("[off-cpu: futex]", "[running]"), or NULL
 * when its root frame is not a state. Owned by p.
 */
const char *profile_stack_state(const Profd__Profile *p, const Profd__Stack *st);
/* The name of process pid from p->processes, or NULL when p does not list it. Owned by p. */
const char *profile_process_name(const Profd__Profile *p, uint32_t pid);
/* The name (comm) of thread tid of pid from p->threads, or NULL when p does not list it. */
const char *profile_thread_name(const Profd__Profile *p, uint32_t pid, uint32_t tid);

/* "1h 2m 3s", "2.5 s", "750 ms": a short human duration. Returns buf. */
char *fmt_duration(uint64_t ns, char *buf, size_t len);
/* "12.3 MiB". Returns buf. */
char *fmt_bytes(uint64_t bytes, char *buf, size_t len);
/* A CLOCK_MONOTONIC stamp as local wall-clock time "2024-05-01 12:00:00". Returns buf. */
char *fmt_mono_as_wall(uint64_t mono_ns, int64_t realtime_offset_ns, char *buf, size_t len);

/* What a node of the call tree stands for; picks its colour. */
enum flame_kind {
	FLAME_ROOT,
	FLAME_PROCESS,
	FLAME_NATIVE,
	FLAME_KERNEL,
	FLAME_PYTHON,
	FLAME_GPU,
	FLAME_NVTX,
	FLAME_UNKNOWN,
};

#define FLAME_NONE UINT32_MAX

/*
 * One node: a frame reached through one sequence of names from the root. Node 0 is the root
 * ("all"); children are linked in name order.
 */
struct flame_node {
	const char *name; /* owned by the flame */
	uint64_t value;	  /* samples in this node and below */
	uint64_t self;	  /* samples whose stack ends here */
	uint32_t parent;
	uint32_t first_child;
	uint32_t next_sibling;
	uint32_t depth; /* root 0 */
	enum flame_kind kind;
};

/*
 * Rename each process "pid PID (NAME)", so that a view that puts processes at the root
 * (--children) tells a parent from its workers of the same name. Returns 0 or -ENOMEM (p is
 * unchanged then).
 */
int profile_name_processes_by_pid(Profd__Profile *p);

struct flame_opts {
	bool process_root;    /* put each sample's process name under the root */
	uint32_t value_index; /* which column of Sample.values to sum */
};

struct flame;

/*
 * Merge the samples of p (already checked with profile_check) into a call tree, root first.
 * Frames with the same display names along the same path merge. Returns the tree (free with
 * flame__free; it does not point into p) or NULL with errno set.
 */
struct flame *flame__new(const Profd__Profile *p, const struct flame_opts *opts);
void flame__free(struct flame *f);
/* The nodes, node 0 being the root; *n gets the count. Owned by f. */
const struct flame_node *flame__nodes(const struct flame *f, size_t *n);
/* The deepest node's depth. */
uint32_t flame__max_depth(const struct flame *f);

#endif
