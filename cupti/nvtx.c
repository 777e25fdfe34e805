// SPDX-License-Identifier: BSD-2-Clause
/*
 * The NVTX entry point. With NVTX_INJECTION64_PATH pointing at this library, the first NVTX
 * call of each module loads it and calls InitializeInjectionNvtx2; CUPTI then turns NVTX
 * calls into MARKER activity records. That may happen before CUDA initialises, so CUPTI is
 * looked up here on its own. Unlike core__init it may load the system's libcupti at once:
 * whoever set NVTX_INJECTION64_PATH to this library asked for CUPTI to handle NVTX.
 *
 * Fleets set the variable for every job, CPU-only ones on nodes without a GPU included, so
 * CUPTI is handed NVTX only where it can take it; elsewhere NVTX stays a no-op (we return 0).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "core_priv.h"
#include "nvtx_init.h"

/*
 * CUPTI 13.0 GA: its version is 130000 (cupti_version.h of 13.0 Update 1 and later, "v130000 :
 * CUDA Toolkit 13.0"), and the CUPTI release notes, "Updates in CUDA 13.0 Update 1", list "Fixed
 * the crash when NVTX API is called before the CUPTI API. This issue was introduced in the CUDA
 * 13.0 GA release."
 */
#define CUPTI_VERSION_NVTX_CRASH 130000

/* NVTX's NvtxGetExportTableFunc_t. */
typedef const void *(*nvtx_get_export_table_fn)(uint32_t id);
/* Exported by libcupti, not declared in its headers. */
typedef CUptiResult (*cupti_nvtx_init2_fn)(nvtx_get_export_table_fn get_export_table);
typedef CUptiResult (*cupti_get_version_fn)(uint32_t *version);
typedef CUresult (*cu_driver_get_version_fn)(int *version);

static const char *driver_name = NVTX_DRIVER_NAME;

void nvtx__test_set_driver(const char *name)
{
	driver_name = name ? name : NVTX_DRIVER_NAME;
}

/*
 * Say once per process why NVTX stays a no-op, with PROFD_CUPTI_VERBOSE=1 only (and never
 * with PROFD_CUPTI_QUIET): a CPU-only job is expected to have no driver, as a process with no
 * daemon is expected to be idle. Written here, on the application thread of the first NVTX
 * call, because no uplink thread may ever start to write it (without a driver CUDA never
 * calls InitializeInjection). So it takes the uplink writer's care (uplink__write_logs): one
 * write() of a short line, none when stderr would block, and SIGPIPE blocked around it, the
 * one it raised taken back, so a closed pipe cannot kill the application.
 */
static void say_no_op(const char *fmt, ...)
{
	static atomic_bool said;
	const char *verbose = getenv("PROFD_CUPTI_VERBOSE"), *quiet = getenv("PROFD_CUPTI_QUIET");
	struct pollfd pfd = {.fd = STDERR_FILENO, .events = POLLOUT};
	const struct timespec zero = {0};
	int saved_errno = errno, n;
	sigset_t pipe_set, old, pending;
	bool was_pending;
	char line[320];
	va_list ap;

	/* The values read as the uplink and InitializeInjection read them. */
	if (!verbose || strcmp(verbose, "1") != 0 || (quiet && *quiet && strcmp(quiet, "0") != 0) ||
	    atomic_exchange(&said, true))
		return;
	n = snprintf(line, sizeof(line), "profd_cupti: NVTX is not collected: ");
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (poll(&pfd, 1, 0) != 1 || (pfd.revents & (POLLERR | POLLNVAL)))
		goto out;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	if (write(STDERR_FILENO, line, (size_t)n) < 0 && errno == EPIPE && !was_pending)
		sigtimedwait(&pipe_set, NULL, &zero);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
out:
	errno = saved_errno;
}

/*
 * Whether the CUDA driver is there, asked before any CUPTI call: without libcuda.so.1 the
 * 13.2 libcupti (a torch wheel's) recurses until the stack overflows, in cuptiNvtxInitialize2
 * and in cuptiGetVersion alike, each level retrying dlopen("libcuda.so.1").
 *
 * RTLD_NOLOAD alone would refuse NVTX on GPU nodes: NVTX is often called before CUDA
 * initialises, and the runtime loads the driver only then. So the driver is loaded as the
 * runtime and CUPTI load it (a plain dlopen of the same name, same search path), which adds
 * nothing CUPTI's own NVTX initialisation would not do next. It is asked only
 * cuDriverGetVersion, which needs no cuInit (cuda.h documents CUDA_SUCCESS and
 * CUDA_ERROR_INVALID_VALUE only, no CUDA_ERROR_NOT_INITIALIZED); the toolkit's stub libcuda,
 * installed as libcuda.so.1 in build images, answers CUDA_ERROR_STUB_LIBRARY, and the 13.2
 * libcupti overflows its stack on it as without a driver. A
 * working driver stays loaded (CUPTI uses it; unloading a driver is never safe), a stub is
 * let go. Writes the reason to why when it returns false.
 */
static bool driver_present(char *why, size_t why_len)
{
	cu_driver_get_version_fn get_version;
	CUresult r = CUDA_ERROR_NOT_FOUND; /* when it has no cuDriverGetVersion */
	int version = 0;
	const char *err;
	void *h;

	h = dlopen(driver_name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		err = dlerror();
		snprintf(why, why_len, "no CUDA driver (%s)", err ? err : driver_name);
		return false;
	}
	get_version = (cu_driver_get_version_fn)dlsym(h, "cuDriverGetVersion");
	if (get_version)
		r = get_version(&version);
	if (r == CUDA_SUCCESS)
		return true;
	if (get_version)
		snprintf(why, why_len,
			 "%s is not a working CUDA driver (cuDriverGetVersion: error %d)",
			 driver_name, (int)r);
	else
		snprintf(why, why_len, "%s is not a CUDA driver (no cuDriverGetVersion)",
			 driver_name);
	dlclose(h);
	return false;
}

/* Returns 1 when CUPTI took over NVTX, 0 when it did not: NVTX stays a no-op. */
__attribute__((visibility("default"))) int
InitializeInjectionNvtx2(nvtx_get_export_table_fn get_export_table)
{
	char path[256], why[256];
	cupti_get_version_fn get_version;
	cupti_nvtx_init2_fn init;
	uint32_t version = 0;
	CUptiResult r;
	void *h;

	/* First: on the 13.2 libcupti even cuptiGetVersion overflows the stack without one. */
	if (!driver_present(why, sizeof(why))) {
		say_no_op("%s", why);
		return 0;
	}
	h = cupti_find(true, path, sizeof(path), why, sizeof(why));
	if (!h) {
		say_no_op("%s", why[0] ? why : "no libcupti");
		return 0;
	}
	get_version = (cupti_get_version_fn)dlsym(h, "cuptiGetVersion");
	init = (cupti_nvtx_init2_fn)dlsym(h, "cuptiNvtxInitialize2");
	if (!get_version || !init) {
		say_no_op("%s: no cuptiGetVersion or cuptiNvtxInitialize2", path);
		return 0;
	}
	r = get_version(&version);
	if (r != CUPTI_SUCCESS) {
		say_no_op("%s: cuptiGetVersion failed (CUPTI error %d)", path, (int)r);
		return 0;
	}
	if (version == CUPTI_VERSION_NVTX_CRASH) {
		say_no_op("%s is CUPTI %u (CUDA 13.0 GA), which crashes on NVTX; 13.0 Update 1 "
			  "or later takes it",
			  path, version);
		return 0;
	}
	r = init(get_export_table);
	if (r != CUPTI_SUCCESS) {
		say_no_op("%s: cuptiNvtxInitialize2 failed (CUPTI error %d)", path, (int)r);
		return 0;
	}
	return 1;
}
