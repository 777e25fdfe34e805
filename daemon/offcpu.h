/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Thread states as frames: the name of the FRAME_KIND_STATE frame ingest puts at the root of a
 * stack. Off-CPU waits are named by the state the thread left the CPU in and by its kernel
 * frames (what it waited in); CPU samples by the GIL flags the sampler set.
 */
#ifndef PROFD_OFFCPU_H
#define PROFD_OFFCPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Why a thread waited: "preempted" when it left runnable (state PROFD_TASK_RUNNING), else the
 * first of its kernel frames (names[0 .. n), leaf first) that says ("futex", "sleep", "epoll",
 * "poll", "select", "pipe", "socket", "disk", "tty", "child", "signal", "kernel lock", "read",
 * "write"), else by the state ("disk" for an uninterruptible wait, "sleeping", "stopped",
 * "traced", "unknown"). A NULL name is skipped. Returns a static string.
 */
const char *offcpu_reason(uint32_t state, const char *const *names, size_t n);

/*
 * The state frame's name of a wait ("[off-cpu: futex]") into buf; "[waiting for GIL]" when
 * waiting_for_gil (a native frame of the thread is CPython's take_gil). Returns buf.
 */
const char *offcpu_state_name(uint32_t state, const char *const *kernel_names, size_t n,
			      bool waiting_for_gil, char *buf, size_t len);

/*
 * The state frame's name of a CPU sample with flags (PROFD_SAMPLE_GIL_*): "[running]",
 * "[running, holds GIL]", "[running without GIL]", "[running, no GIL]" (a free-threaded
 * build), or "[waiting for GIL]" when waiting_for_gil. Returns a static string.
 */
const char *oncpu_state_name(uint32_t flags, bool waiting_for_gil);

/* Whether a native frame's symbol is where CPython waits for the GIL. */
bool is_gil_wait_symbol(const char *name);

/*
 * Whether a native frame's symbol is a CUDA call that blocks the host until the GPU is done
 * (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize and their driver API and
 * per-thread-stream forms): the thread's state is then "[off-cpu: CUDA sync]" while it sleeps
 * in it, "[running: CUDA sync]" while it spins.
 */
bool is_cuda_sync_symbol(const char *name);

#endif
