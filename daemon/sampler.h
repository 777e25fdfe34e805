/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The kernel side's lifecycle: open the sample.bpf.c skeleton, set the read-only globals and map
 * sizes, load, fill the target pid filter, open a cpu-clock perf event on every online CPU and
 * attach the program to each, attach the exec/exit tracepoints, and expose the ring buffer.
 * Launch probes (USDT in the CUPTI library, uprobes on libcuda) are attached on demand later.
 */
#ifndef PROFD_SAMPLER_H
#define PROFD_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "abi.h"

/* Called for each ring buffer record; a negative return stops the current drain. */
typedef int (*sampler_record_fn)(void *ctx, const void *data, size_t size);

struct sampler_opts {
	const uint32_t *pids; /* NULL / 0: every process */
	size_t npids;
	uint32_t frequency_hz;
	uint64_t ringbuf_size; /* power of two */
	sampler_record_fn on_record;
	void *ctx;
};

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
/* CPUs with an attached perf event. */
unsigned int sampler__ncpus(const struct sampler *s);

/*
 * Attach the USDT probe profd:cuda_launch of the CUPTI injection library at library_path (an
 * absolute path as pid sees it; it is opened through /proc/PID/root) for pid alone, and mark pid
 * so the libcuda uprobes skip its launches. Launch records of pid then arrive with correlation
 * ids. A pid outside the target filter still records nothing. Attaching a pid that is attached
 * already does nothing. Returns 0 or a negative errno (logged; the daemon carries on).
 */
int sampler__attach_launch_probe(struct sampler *s, uint32_t pid, const char *library_path);
/* Undo sampler__attach_launch_probe for pid (nothing if it is not attached). */
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
