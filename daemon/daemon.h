/* SPDX-License-Identifier: BSD-2-Clause */
/* The daemon's parts, owned by main.c and read by the request handlers. */
#ifndef PROFD_DAEMON_H
#define PROFD_DAEMON_H

#include <stdint.h>

#include "config.h"
#include "ingest.h"
#include "python.h"
#include "sampler.h"
#include "server.h"
#include "store.h"
#include "symbolize.h"

struct daemon {
	const struct config *cfg;
	struct store *store;
	struct symbolizer *sym;
	struct python *py;
	struct ingest *ingest;
	struct sampler *sampler;
	struct server *server;
	uint64_t start_ns;
};

/* server_handle_fn for status and dump requests; ctx is the struct daemon. */
int handlers__handle(void *ctx, const struct server_peer *peer, const Profd__Request *req,
		     uint8_t **frame, size_t *frame_len);

#endif
