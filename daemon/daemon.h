/* SPDX-License-Identifier: BSD-2-Clause */
/* The daemon's parts, owned by main.c and read by the request handlers. */
#ifndef PROFD_DAEMON_H
#define PROFD_DAEMON_H

#include <stdint.h>

#include "config.h"
#include "gpu.h"
#include "ingest.h"
#include "python.h"
#include "sampler.h"
#include "server.h"
#include "snapshot.h"
#include "store.h"
#include "losses.h"
#include "symbolize.h"
#include "timeline.h"

struct daemon {
	const struct config *cfg;
	struct store *store;
	struct symbolizer *sym;
	struct python *py;
	struct ingest *ingest;
	struct sampler *sampler;
	/* Describes sampled processes to the BPF stack walker (unwinder.h). */
	struct unwinder *unwinder;
	struct server *server;
	struct gpu *gpu;
	struct timeline *timeline;
	/* The loss counters over time: what a dump's window lost (losses.h). */
	struct loss_log *losses;
	uint64_t start_ns;
	/* Where /proc is (NULL: "/proc"); tests point it at a tree of their own. */
	const char *proc_root;
	/* Connections whose CUPTI library sent GpuAttach (handlers.c). */
	struct gpu_conn *gpu_conns;
	size_t n_gpu_conns, gpu_conns_cap;
	/* Processes followed for users other than root (FollowRequest), to cap each uid's share. */
	struct follow_root *follow_roots;
	size_t n_follow_roots, follow_roots_cap;
	/*
	 * A large dump or trace was built: its memory goes back to the system (malloc_trim) on
	 * a tick at or after this time, once its reply is written. 0: none pending.
	 */
	uint64_t trim_after_ns;
	/* Live stack dumps (snapshot.h): loaded on the first request; NULL until then. */
	struct snapshot *snapshot;
	/* Why it could not be loaded (answered to every request after); "" while untried. */
	char snapshot_error[192];
	/* The fleet export (daemon/export); NULL when no backend is configured. */
	struct exporter *exporter;
};

/* A process a user asked to follow (profctl record), while it lives. */
struct follow_root {
	uint32_t pid;
	uint32_t uid;
};

/* A connection of a CUPTI library: the process it speaks for and that process's owner. */
struct gpu_conn {
	uint64_t conn_id;
	uint32_t pid;
	uint32_t uid;
};

/*
 * server_handle_fn for status, dump, trace and the CUPTI library's requests; ctx is the struct
 * daemon.
 */
int handlers__handle(void *ctx, const struct server_peer *peer, const Profd__Request *req,
		     uint8_t **frame, size_t *frame_len);
/*
 * A StacksRequest (handle_stacks.c): the live stack dump of one process, answered as a Profile
 * with one sample per thread. As server_handle_fn.
 */
int handlers__stacks(struct daemon *d, const struct server_peer *peer,
		     const Profd__StacksRequest *req, uint8_t **frame, size_t *frame_len);
/* Pack an Error reply (msg: one line) into a malloc'd frame. Returns 0 or a negative errno. */
int handlers__error(Profd__ErrorCode code, const char *msg, uint8_t **frame, size_t *frame_len);
/* server_close_fn: a library's connection going away detaches its process. */
void handlers__closed(void *ctx, const struct server_peer *peer);
/* Release what the handlers keep in d (the connection table, the stack dump's program). */
void handlers__fini(struct daemon *d);

#endif
