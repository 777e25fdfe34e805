/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * systemd integration behind one header: readiness notification and a journal log sink. Built
 * without libsystemd, these are stubs that do nothing (and the journal sink is unavailable).
 */
#ifndef PROFD_NOTIFY_H
#define PROFD_NOTIFY_H

#include <stdbool.h>

#include "log.h"

/* Tell the service manager we are ready / stopping / our status line. No-ops outside systemd. */
void notify_ready(const char *status);
void notify_stopping(void);
/* Whether the journal sink can be used in this build. */
bool notify_have_journal(void);
/* A log_sink_fn writing to the journal with the matching priority. */
void notify_journal_sink(enum log_level level, const char *msg, void *ctx);

#endif
