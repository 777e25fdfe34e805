/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The kernel side's lifecycle: open the sample.bpf.c skeleton, set the read-only globals and map
 * sizes, load, fill the target pid filter, open a cpu-clock perf event on every online CPU and
 * attach the program to each, attach the exec/exit tracepoints, and expose the ring buffer.
 * Launch probes (USDT in the CUPTI library, uprobes on libcuda) are attached on demand later.
 */
#ifndef PROFD_SAMPLER_H
#define PROFD_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi.h"

/* Called for each ring buffer record; a negative return stops the current drain. */
typedef int (*sampler_record_fn)(void *ctx, const void *data, size_t size);

struct sampler_opts {
	const uint32_t *pids; /* NULL / 0: every process, unless `targets_only` */
	size_t npids;
	/* Sample only the target list even while it is empty (it grows by sampler__follow). */
	bool targets_only;
	/* The processes the targets start are not followed (--no-children). */
	bool no_children;
	uint32_t frequency_hz;
	uint64_t ringbuf_size; /* power of two */
	sampler_record_fn on_record;
	void *ctx;
	/*
	 * Launch records (USDT and libcuda uprobes) a process may send per second, and how many
	 * at once; 0: SAMPLER_LAUNCH_RATE, SAMPLER_LAUNCH_BURST. Launches over the limit are
	 * counted in PROFD_CNT_LAUNCH_LIMITED.
	 */
	uint32_t launch_rate;
	uint32_t launch_burst;
	/*
	 * Off-CPU time (tp_btf/sched_switch): waits of off_cpu_min_ns or more come as
	 * PROFD_REC_OFFCPU records with their stacks, shorter ones summed per thread
	 * (PROFD_REC_OFFCPU_AGG).
	 */
	bool off_cpu;
	uint64_t off_cpu_min_ns;
	/* The most executable mappings a process's description holds; 0: PROFD_UNWIND_MAX_MAPS. */
	uint32_t unwind_max_maps;
};

/*
 * unwind_procs holds at most this many processes, and fewer where their descriptions are so
 * large that it would pass SAMPLER_UNWIND_PROCS_BYTES of kernel memory (each holds 32 bytes per
 * mapping of the bound, rounded up to a power of two: 16 KiB at 512, 256 KiB at 8192).
 */
#define SAMPLER_UNWIND_PROCS_MAX 4096
#define SAMPLER_UNWIND_PROCS_BYTES (64u << 20)

/*
 * Per process. The CUPTI library probes at most 1000 launches a second per thread, plus a burst
 * of 100 (its default): five launching threads at that rate pass whole. A launch record costs
 * the launching thread 2-9 us (the stack walk) and the daemon 1-2 us, so a process that
 * launches without end costs itself at most 1-5% of a CPU in records and the daemon 1% (a libcuda
 * uprobe's trap, about 1 us, is paid by every launch still). A burst of 1000 records of up to
 * 3 KiB fits the smallest default ring buffer (4 MiB).
 */
#define SAMPLER_LAUNCH_RATE 5000
#define SAMPLER_LAUNCH_BURST 1000
/* The most profd:cuda_launch probe sites a library may have (the CUPTI library has one). */
#define SAMPLER_MAX_LAUNCH_NOTES 16
/* The largest library file a launch probe is attached to. */
#define SAMPLER_MAX_LAUNCH_LIB (256ull << 20)

struct sampler;

/*
 * Returns a running sampler or NULL with errno set; what failed has been logged with the
 * privilege or kernel feature that is missing.
 */
struct sampler *sampler__new(const struct sampler_opts *opts);
/* Detaches every program and closes the perf events. Accepts NULL. */
void sampler__free(struct sampler *s);
/*
 * The ring buffer's epoll fd: readable when a quarter of the ring buffer is waiting. Records are
 * not announced one by one (that would interrupt every sampled thread): drain on a timer too.
 */
int sampler__fd(const struct sampler *s);
/* Drain the ring buffer. Returns the number of records or a negative errno. */
int sampler__drain(struct sampler *s);
/* Sum of the per-CPU counters, indexed by enum profd_counter. */
int sampler__counters(const struct sampler *s, uint64_t out[PROFD_CNT__MAX]);
/*
 * Tell the kernel side where pid's CPython keeps its threads and frames (NULL: stop reading
 * Python frames for pid). Returns 0 or a negative errno.
 */
int sampler__set_python(struct sampler *s, uint32_t pid, const struct profd_py_proc *cfg);
/*
 * Add pid to the target filter for as long as it lives, and the processes it starts from now
 * on (their processes too) unless the sampler was made with no_children. A sampler of every
 * process samples them anyway, and reports their forks (PROFD_REC_FORK) all the same.
 * Returns 0, -ENOSPC when the filter holds PROFD_MAX_TARGETS processes, or the kernel's error.
 */
int sampler__follow(struct sampler *s, uint32_t pid);
/* True when pid is sampled: every process, or one in the target filter now. */
bool sampler__covers(const struct sampler *s, uint32_t pid);
/* True when the sampler covers only its target list. */
bool sampler__filtered(const struct sampler *s);
/* True when targets' new processes are followed. */
bool sampler__follows_children(const struct sampler *s);
/*
 * The fds of the kernel side's Python maps (py_procs: the layouts sampler__set_python installs,
 * py_tstates: the thread-state cache), for another BPF object to share (bpf_map__reuse_fd).
 * Owned by the sampler: valid until sampler__free.
 */
void sampler__python_maps(const struct sampler *s, int *procs_fd, int *tstates_fd);
/*
 * The fds of the CFI unwinder's maps (unwind_tables, unwind_procs: bpf/unwind.bpf.h), for
 * daemon/unwinder.c. Owned by the sampler: valid until sampler__free.
 */
void sampler__unwind_maps(const struct sampler *s, int *tables_fd, int *procs_fd);
/*
 * True when the kernel side reports code mapped into a sampled process (PROFD_REC_MAPS): one
 * record, then none for that process until sampler__maps_seen(pid), which the daemon calls
 * once it has acted on the record (a change after the call sends the next record).
 */
bool sampler__sees_maps(const struct sampler *s);
/* Slots of maps[] in unwind_procs' values: a power of two, at least the bound asked for. */
uint32_t sampler__unwind_slots(const struct sampler *s);
void sampler__maps_seen(struct sampler *s, uint32_t pid);
/* CPUs with an attached perf event. */
unsigned int sampler__ncpus(const struct sampler *s);

/*
 * Attach the USDT probe profd:cuda_launch of the CUPTI injection library at library_path for pid
 * alone, and mark pid so the libcuda uprobes skip its launches. Launch records of pid then
 * arrive with correlation ids. A pid outside the target filter still records nothing.
 * Attaching a pid that is attached already does nothing.
 *
 * library_path comes from the process and is trusted in nothing: it only selects one of pid's
 * own file mappings by its exact name, and that mapped file is what is opened (never the name:
 * see procfs_open_mapped) and attached to, once it proves a regular file under
 * SAMPLER_MAX_LAUNCH_LIB bytes with 1 to SAMPLER_MAX_LAUNCH_NOTES profd:cuda_launch notes.
 * Never blocks. Returns 0 or a negative errno: -ENOENT (no such mapping, or no probe in it),
 * -EINVAL (not a regular file, on FUSE, too many probes), -EFBIG, -EPERM, or the kernel's.
 * Failures are logged once per pid; the daemon carries on.
 */
int sampler__attach_launch_probe(struct sampler *s, uint32_t pid, const char *library_path);
/*
 * The profd:cuda_launch notes (.note.stapsdt) in the ELF file at fd: their number, -EINVAL
 * when fd is not an ELF file, or -EFBIG when its notes are over 1 MiB. Reads with pread only:
 * a file truncated meanwhile cannot fault.
 */
int sampler__count_launch_notes(int fd);
/*
 * Undo sampler__attach_launch_probe for pid (nothing if it is not attached); a later failure for
 * pid is logged again.
 */
void sampler__detach_launch_probe(struct sampler *s, uint32_t pid);
/*
 * Entry uprobes on libcuda's launch functions (cuLaunchKernel, cuLaunchKernelEx, cuGraphLaunch
 * and their _ptsz variants, those the file has) in the target processes, or in every process
 * when the sampler has no target list, once they map the file at path (breakpoints go only
 * into processes a probe is for: other CUDA processes pay nothing).
 * path NULL: the first libcuda.so.1 found in the driver's usual directories. Launches of
 * processes without the CUPTI library then arrive as PROFD_REC_LAUNCH with
 * PROFD_SAMPLE_UPROBE. A second call replaces the first's probes. Returns 0 when at least one
 * function is probed, -ENOENT when there is no such file or none of the functions, or another
 * negative errno; what happened is logged, and a failure need not stop the daemon.
 */
int sampler__attach_libcuda(struct sampler *s, const char *path);

#endif
