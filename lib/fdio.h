/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Blocking I/O on a non-blocking socket, bounded by a mono_ns() deadline; and opening a file the
 * daemon reads without letting what sits at its name (a FIFO, a device) block it.
 */
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

/*
 * Open path to read, only if it is a regular file. The open itself does not block (O_NONBLOCK:
 * a FIFO with no writer would hang it), and the type is taken from the opened fd, so nothing
 * can be swapped in between. flags adds to O_RDONLY | O_CLOEXEC | O_NOCTTY (O_NOFOLLOW, say).
 * Returns a blocking fd the caller closes, -EINVAL when it is not a regular file (a FIFO, a
 * socket, a device, a directory), or -errno of open/fstat.
 */
int fd_open_regular(const char *path, int flags);

/*
 * Read len bytes at off, through short reads and EINTR. Returns the bytes read, fewer than len
 * only at the end of the file (a file that shrank), or -errno.
 */
long fd_pread_full(int fd, void *buf, size_t len, uint64_t off);

#endif
