/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The client's side of the socket: connect, exchange Hello, then one request and one framed
 * response at a time. Blocking I/O, each step bounded by a deadline.
 */
#ifndef PROFCTL_CONN_H
#define PROFCTL_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "profd.pb-c.h"

struct conn;

/*
 * Connect to the daemon at path and check its protocol version, all within timeout_ns.
 * Returns a connection (free with conn__free), or NULL with errno set and e filled with the
 * exit code and message for the user.
 */
struct conn *conn__open(const char *path, uint64_t timeout_ns, struct cli_error *e);
void conn__free(struct conn *c);

/*
 * Send req and read one response within the connection's timeout. Returns 0 with *out set
 * (the caller frees it with profd__response__free_unpacked(*out, NULL)) when the reply is of
 * kind want; otherwise a negative errno with e filled: -EREMOTEIO for an Error reply (its code
 * mapped by cli_exit_for_error), -EPROTO for a reply we cannot use, -ETIMEDOUT, -ECONNRESET.
 */
int conn__call(struct conn *c, const Profd__Request *req, Profd__Response__MsgCase want,
	       Profd__Response **out, struct cli_error *e);

/*
 * While a reply takes longer than half a second, conn__call shows "receiving profile: 12.3 MiB
 * of 40.0 MiB" on stderr, in place, cleared at the end; only when stderr is a terminal. quiet
 * turns that off, for callers that own the screen (a full-screen view).
 */
void conn__set_quiet(struct conn *c, bool quiet);

#endif
