/* SPDX-License-Identifier: BSD-2-Clause */
/* Blocking I/O on a non-blocking socket, bounded by a mono_ns() deadline. */
#ifndef PROFD_FDIO_H
#define PROFD_FDIO_H

#include <stddef.h>
#include <stdint.h>

/* Wait until fd is ready for events (POLLIN, POLLOUT). Returns 0, -ETIMEDOUT or -errno. */
int fd_wait(int fd, short events, uint64_t deadline_ns);
/*
 * Send all of buf before the deadline, without SIGPIPE. Returns 0, -ETIMEDOUT or -errno
 * (-EPIPE, -ECONNRESET when the peer went away).
 */
int fd_send_all(int fd, const uint8_t *buf, size_t len, uint64_t deadline_ns);

#endif
