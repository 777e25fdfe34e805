/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Choosing which value column of a profile a view draws (--value, --gpu-idle), stripping NVTX
 * frames, and printing a value in its unit.
 *
 * Columns are found by the name in Profile.value_types, never by position: a daemon may send
 * any subset of them in any order, and an older one sends only "samples".
 */
#ifndef PROFCTL_VALUE_H
#define PROFCTL_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profd.pb-c.h"

/* What --value and --gpu-idle select. */
enum value_kind {
	VALUE_CPU = 0,	   /* "samples": CPU samples */
	VALUE_GPU_IDLE,	   /* "gpu_idle_samples": CPU samples while no kernel of the process ran */
	VALUE_GPU,	   /* "gpu_time" ns: kernel time by launching stack */
	VALUE_GPU_KERNELS, /* "gpu_kernels": kernels by launching stack */
	VALUE_COPY,	   /* "copy_time" ns */
	VALUE_COPY_BYTES,  /* "copy_bytes" bytes */
	VALUE_LAUNCHES,	   /* "uprobe_launches": launches seen by the libcuda uprobes */
	VALUE_OFFCPU,	   /* "off_cpu" ns: time off the CPU, by the stack the thread waited in */
	VALUE_WALL,	   /* "wall_time" ns: CPU samples x period + off_cpu (profile_add_wall) */
	/* --gpu-idle with --value off-cpu / wall: the part of those while no kernel ran */
	VALUE_GPU_IDLE_OFFCPU, /* "gpu_idle_off_cpu" ns */
	VALUE_GPU_IDLE_WALL,   /* "gpu_idle_wall_time" ns: gpu_idle_samples x period +
				* gpu_idle_off_cpu (profile_add_wall) */
	VALUE_GPU_MEMORY,      /* "gpu_memory" bytes: GPU memory allocated in the window */
	VALUE_GPU_MEMORY_LIVE, /* "gpu_memory_live" bytes: still allocated at the window's end */
	VALUE__COUNT,
};

/*
 * The kind an option value names ("cpu", "gpu", "gpu-kernels", "copy", "copy-bytes",
 * "launches", "off-cpu", "wall", "gpu-memory", "gpu-memory-live"; gpu-idle is its own option).
 * Returns 0 or -EINVAL.
 */
int value_parse(const char *s, enum value_kind *out);
/*
 * What --gpu-idle makes of k: cpu -> gpu-idle CPU samples, off-cpu -> gpu-idle off-CPU time,
 * wall -> gpu-idle wall-clock time. Returns 0 or -EINVAL for a kind it does not go with.
 */
int value_gpu_idle(enum value_kind k, enum value_kind *out);
/* The option spelling of k ("cpu"), for messages. */
const char *value_option_name(enum value_kind k);
/* The column name the daemon gives k ("samples", "gpu_time"). */
const char *value_column_name(enum value_kind k);
/* "cpu, gpu, gpu-kernels, copy, copy-bytes or launches": for usage messages. */
#define VALUE_OPTION_LIST                                                                          \
	"cpu, gpu, gpu-kernels, copy, copy-bytes, launches, off-cpu, wall, gpu-memory or "         \
	"gpu-memory-live"

/*
 * Index of the value type named type in p, or -1 when p has none of that name. A profile with
 * no value types at all has "samples" at 0.
 */
int profile_value_index(const Profd__Profile *p, const char *type);
/* The unit p gives column idx ("count" when it gives none). Owned by p. */
const char *profile_value_unit(const Profd__Profile *p, uint32_t idx);
/* The type p gives column idx ("samples" when it gives none). Owned by p. */
const char *profile_value_type(const Profd__Profile *p, uint32_t idx);
/* Sum of column idx over every sample, saturating. */
uint64_t profile_value_total(const Profd__Profile *p, uint32_t idx);

/*
 * Drop the NVTX frames from every stack of p (checked with profile_check), in place, so flame
 * graphs without --nvtx look as they did before NVTX labels existed.
 */
void profile_strip_nvtx(Profd__Profile *p);
/*
 * Drop the thread state frames ("[running]", "[off-cpu: futex]") from every stack of p, in
 * place: views show them only with --thread-state.
 */
void profile_strip_states(Profd__Profile *p);

/*
 * Wall-clock time as a column of its own: append "wall_time" (nanoseconds) to p's value types,
 * each sample's value its CPU samples times p's sampling period plus its off_cpu nanoseconds,
 * so a thread's stacks add up to the time it lived in the window. With gpu_idle set, the same
 * of the parts taken while none of the process's kernels ran: "gpu_idle_wall_time" from
 * gpu_idle_samples and gpu_idle_off_cpu. p must come from profd__response__unpack with the
 * default allocator (its arrays are grown with realloc). Returns 0 with *index the column (the
 * existing one when p has it already), -ENODATA when p has no off_cpu column (the daemon runs
 * without --off-cpu) or CPU samples but no period, or -ENOMEM (p is then unchanged but for
 * spare room).
 */
int profile_add_wall(Profd__Profile *p, bool gpu_idle, uint32_t *index);

/*
 * v in unit, short and human: nanoseconds as "850 ns", "12.5 us", "3.25 ms", "1.500 s"; bytes
 * as "512 B", "1.5 KiB", "2.0 MiB"; anything else as the bare number. Returns buf.
 */
char *fmt_value(uint64_t v, const char *unit, char *buf, size_t len);
/*
 * What one unit of column type counts, for "12 samples" style labels: "samples" for the CPU
 * columns, "kernels", "launches", else the type itself. For time and byte units the label is
 * not used (the unit is printed by fmt_value).
 */
const char *value_noun(const char *type);
/* Whether unit is a time (nanoseconds) or a size (bytes): values fmt_value prints with units. */
bool value_unit_is_ns(const char *unit);
bool value_unit_is_bytes(const char *unit);

#endif
