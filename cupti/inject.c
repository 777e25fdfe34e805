// SPDX-License-Identifier: BSD-2-Clause
/*
 * The entry point CUDA calls. With CUDA_INJECTION64_PATH naming this library, CUDA loads it at
 * initialization and calls InitializeInjection on the application thread that initialized CUDA.
 * Nothing here may block or fail that thread: set up the queue and the core, start the uplink
 * thread, return. Everything slow (the daemon, CUPTI subscription) happens on the uplink thread.
 *
 * The variable is not consulted: CUDA calls this only when it names this library, and the
 * "unset or none" convention of libraries that also live in the application (a profiler linked
 * into a framework) does not apply to a library that exists only to be injected.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "events.h"
#include "uplink.h"

/* Events waiting for the uplink. At about 80 bytes each this caps the queue at 20 MiB; it only
 * grows that far when the daemon falls behind, and drops (counted) beyond it. */
#define INJECT_QUEUE_EVENTS (256u << 10)

__attribute__((visibility("default"))) int InitializeInjection(void);

static void on_exit_process(void)
{
	uplink__exiting();
}

static void on_fork_child(void)
{
	/*
	 * A forked child has no uplink thread, and CUDA does not work in it anyway until it
	 * execs, when CUDA loads this library afresh. It stays silent.
	 */
	uplink__forked_child();
}

/* Keep this library mapped for the life of the process: the uplink thread runs its code. */
static void pin_self(void)
{
	Dl_info di;

	if (dladdr((void *)InitializeInjection, &di) && di.dli_fname)
		dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

static bool env_quiet(void)
{
	const char *v = getenv("PROFD_CUPTI_QUIET");

	return v && *v && strcmp(v, "0") != 0;
}

int InitializeInjection(void)
{
	static atomic_bool called;
	struct uplink_opts opts = {0};
	struct core_info info;
	struct evq *q;

	/* CUDA calls it once per process; anything calling it again gets the same answer. */
	if (atomic_exchange(&called, true))
		return 1;
	pin_self();
	opts.quiet = env_quiet();
	uplink__set_quiet(opts.quiet);
	q = evq__new(INJECT_QUEUE_EVENTS);
	if (!q) {
		uplink__log("out of memory: GPU activity is not collected");
		return 1;
	}
	memset(&info, 0, sizeof(info));
	/* A failure leaves info saying why; the uplink reports it and the library stays idle. */
	core__init(q, &info);
	pthread_atfork(NULL, NULL, on_fork_child);
	atexit(on_exit_process);
	uplink__start(q, &info, &opts);
	/* The application's CUDA initialization goes on whatever happened here. */
	return 1;
}
