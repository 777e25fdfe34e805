/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GpuBatch messages for the uplink: events converted to their protobuf form, names replaced by
 * indices into the connection's string table (each name sent once per connection, the first
 * as 1), and every message kept under UPLINK_BATCH_BUDGET encoded bytes.
 */
#ifndef PROFD_CUPTI_BATCH_H
#define PROFD_CUPTI_BATCH_H

#include <stdbool.h>

#include "events.h"
#include "profd.pb-c.h"

struct gpubatch;

/* Room for UPLINK_BATCH_EVENTS events. Returns NULL with errno set. */
struct gpubatch *gpubatch__new(void);
void gpubatch__free(struct gpubatch *b);
/* A new connection: the daemon knows no strings yet. */
void gpubatch__forget_strings(struct gpubatch *b);
/* Start an empty message (dropping the previous one). */
void gpubatch__begin(struct gpubatch *b);
/*
 * Add e (open: an NVTX range still open, GpuNvtxRange.open). Returns false, adding nothing,
 * when the message is full; an empty message takes any event.
 */
bool gpubatch__add(struct gpubatch *b, const struct ev *e, bool open);
/* The message being built: valid until the next gpubatch__begin or __free. */
Profd__GpuBatch *gpubatch__msg(struct gpubatch *b);

#endif
