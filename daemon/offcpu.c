// SPDX-License-Identifier: BSD-2-Clause
#include "offcpu.h"

#include <stdio.h>
#include <string.h>

#include "abi.h"

/*
 * Kernel functions that name a wait, matched as substrings of a frame's symbol, first frame
 * (from the leaf) first. Generic ones (vfs_read) come last in their frame's chain anyway: the
 * leaf-first walk meets pipe_read before vfs_read.
 */
static const struct {
	const char *needle;
	const char *reason;
} rules[] = {
    {"futex", "futex"},	      {"nanosleep", "sleep"},	     {"ep_poll", "epoll"},
    {"epoll_wait", "epoll"},  {"do_sys_poll", "poll"},	     {"do_poll", "poll"},
    {"do_select", "select"},  {"core_sys_select", "select"}, {"pipe_read", "pipe"},
    {"pipe_write", "pipe"},   {"pipe_wait", "pipe"},	     {"unix_stream", "socket"},
    {"unix_dgram", "socket"}, {"sk_wait", "socket"},	     {"skb_wait", "socket"},
    {"skb_recv", "socket"},   {"inet_csk_accept", "socket"}, {"tcp_", "socket"},
    {"udp_", "socket"},	      {"sock_", "socket"},	     {"io_schedule", "disk"},
    {"blk_", "disk"},	      {"folio_wait", "disk"},	     {"wait_on_page", "disk"},
    {"bit_wait_io", "disk"},  {"n_tty_read", "tty"},	     {"tty_", "tty"},
    {"do_wait", "child"},     {"kernel_wait4", "child"},     {"sigtimedwait", "signal"},
    {"sigsuspend", "signal"}, {"sys_pause", "signal"},	     {"mutex_lock", "kernel lock"},
    {"rwsem", "kernel lock"}, {"down_read", "kernel lock"},  {"down_write", "kernel lock"},
    {"vfs_read", "read"},     {"ksys_read", "read"},	     {"vfs_write", "write"},
    {"ksys_write", "write"},
};

const char *offcpu_reason(uint32_t state, const char *const *names, size_t n)
{
	if (state == PROFD_TASK_RUNNING)
		return "preempted";
	for (size_t i = 0; i < n; i++) {
		if (!names[i])
			continue;
		for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++)
			if (strstr(names[i], rules[r].needle))
				return rules[r].reason;
	}
	switch (state) {
	case PROFD_TASK_DISK_SLEEP:
		return "disk";
	case PROFD_TASK_SLEEPING:
		return "sleeping";
	case PROFD_TASK_STOPPED:
		return "stopped";
	case PROFD_TASK_TRACED:
		return "traced";
	default:
		return "unknown";
	}
}

const char *offcpu_state_name(uint32_t state, const char *const *kernel_names, size_t n,
			      bool waiting_for_gil, char *buf, size_t len)
{
	if (waiting_for_gil && state != PROFD_TASK_RUNNING)
		snprintf(buf, len, "[waiting for GIL]");
	else
		snprintf(buf, len, "[off-cpu: %s]", offcpu_reason(state, kernel_names, n));
	return buf;
}

const char *oncpu_state_name(uint32_t flags, bool waiting_for_gil)
{
	if (waiting_for_gil)
		return "[waiting for GIL]";
	if (flags & PROFD_SAMPLE_NO_GIL)
		return "[running, no GIL]";
	if (flags & PROFD_SAMPLE_GIL_HELD)
		return "[running, holds GIL]";
	if (flags & PROFD_SAMPLE_GIL_FREE)
		return "[running without GIL]";
	return "[running]";
}

bool is_gil_wait_symbol(const char *name)
{
	/* take_gil (3.8-3.14), static in ceval_gil.c: its own symbol where .symtab is kept. */
	return name && (strcmp(name, "take_gil") == 0 || strncmp(name, "take_gil.", 9) == 0);
}

bool is_cuda_sync_symbol(const char *name)
{
	static const char *const calls[] = {
	    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
	    "cudaThreadSynchronize", "cuCtxSynchronize",      "cuStreamSynchronize",
	    "cuEventSynchronize",
	};

	if (!name)
		return false;
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		size_t n = strlen(calls[i]);

		/* cuStreamSynchronize_ptsz, cudaStreamSynchronize_v2, ...: the same call. */
		if (!strncmp(name, calls[i], n) && (name[n] == '\0' || name[n] == '_'))
			return true;
	}
	return false;
}
