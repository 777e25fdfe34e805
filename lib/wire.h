/* SPDX-License-Identifier: BSD-2-Clause */
/* The protocol's constants and helpers shared by the daemon, the client and the CUPTI library. */
#ifndef PROFD_WIRE_H
#define PROFD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "profd.pb-c.h"

#define PROFD_PROTOCOL_VERSION 1
#define PROFD_DEFAULT_SOCKET "/run/profd/profd.sock"
#define PROFD_SOCKET_ENV "PROFD_SOCKET"
#define PROFD_VERSION "0.1.0"

/*
 * Encode a message with its 4-byte header into a new malloc'd buffer. Returns 0 and sets *out
 * (caller frees) and *out_len, -EMSGSIZE if the frame would exceed max_len, -ENOMEM.
 */
int wire_pack_request(const Profd__Request *req, size_t max_len, uint8_t **out, size_t *out_len);
int wire_pack_response(const Profd__Response *resp, size_t max_len, uint8_t **out, size_t *out_len);
/* The socket path: the argument if set, else $PROFD_SOCKET, else the default. */
const char *wire_socket_path(const char *arg);
/* Name of an error code, e.g. "permission denied". */
const char *wire_error_name(Profd__ErrorCode code);

#endif
