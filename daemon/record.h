/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * profd --record: the daemon serves a private socket in a directory of its own, and `profctl
 * record` (the profctl next to profd's executable) runs the command against it, follows it and
 * its children, writes the profile and exits with the command's status, which profd then
 * returns. One way to record, whether through a running daemon or standalone.
 */
#ifndef PROFD_RECORD_H
#define PROFD_RECORD_H

#include <uv.h>

#include "config.h"

struct record;

/*
 * Make the private socket's directory (mode 0700 under $TMPDIR or /tmp) and point
 * cfg->socket_path at a socket in it, unless --socket was given. Returns a record or NULL with
 * errno set (logged).
 */
struct record *record__new(struct config *cfg);
/*
 * Start profctl record for cfg's command; done(ctx, exit_code) runs on the loop when it exits
 * (its exit code, or 128 + signal). Returns 0 or a negative errno (logged).
 */
int record__start(struct record *r, uv_loop_t *loop, const struct config *cfg,
		  void (*done)(void *ctx, int exit_code), void *ctx);
/* Remove the private directory. Accepts NULL. */
void record__free(struct record *r);

#endif
