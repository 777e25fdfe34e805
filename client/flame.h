/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The client's own side of the profile model (lib/profile/profile.h): the merged call tree
 * ("flame") the output formats are drawn from, the renaming of processes for views that root
 * stacks at them, and short human renderings of durations, sizes and times.
 */
#ifndef PROFCTL_FLAME_H
#define PROFCTL_FLAME_H

#include "profile.h"

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
