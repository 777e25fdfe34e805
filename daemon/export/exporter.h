/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The fleet export: on the daemon's loop, every interval (+-20% jitter), drain what the store
 * collected since the last flush (its journal), group it by series (label set and kind), encode
 * it for each configured backend (Pyroscope push, OTLP profiles) and hand the requests to that
 * backend's sender, which spools and delivers them on its own thread.
 */
#ifndef PROFD_EXPORT_EXPORTER_H
#define PROFD_EXPORT_EXPORTER_H

#include <stdint.h>

#include "config.h"
#include "memuse.h"
#include "profd.pb-c.h"
#include "store.h"

struct exporter_opts {
	const struct export_config *cfg; /* copied what it needs: may go away after new */
	struct store *store;		 /* the daemon's; its journal is turned on */
	uint32_t frequency_hz;
	const char *proc_root; /* NULL: /proc */
};

struct exporter;

/*
 * Start exporting: senders for each configured backend (their spools resumed). Returns NULL
 * with errno set (one line logged) when a sender cannot start; NULL with errno 0 when no backend
 * is configured (nothing to do).
 */
struct exporter *exporter__new(const struct exporter_opts *opts);
/* Drain the journal into requests for every backend; now is mono_ns(). Never blocks on I/O. */
void exporter__flush(struct exporter *e, uint64_t now);
/*
 * Resolve the labels of processes new in the journal now, while /proc still has them: a process
 * that exits before the flush keeps the service name of its environment. Cheap (one lookup per
 * journal row); the daemon calls it a few times a second.
 */
void exporter__peek(struct exporter *e);
/* Milliseconds until the next flush: the interval with +-20% jitter. */
uint64_t exporter__next_ms(struct exporter *e);
/*
 * Fill StatusReply.export (one ExportStatus per backend; freed by exporter__status_free).
 * Returns 0 or -ENOMEM.
 */
int exporter__status(struct exporter *e, Profd__StatusReply *st);
void exporter__status_free(Profd__StatusReply *st);
/*
 * Memory held: the labels of the processes in the last flushes (count: how many), the
 * journal's rows and the requests handed to the senders and not written to their spools yet.
 */
void exporter__memory(const struct exporter *e, struct mem_usage *out);
/* Stop: the last flush should be done before; requests not sent stay in the spool. */
void exporter__free(struct exporter *e);

#endif
