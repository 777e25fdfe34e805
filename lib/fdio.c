// SPDX-License-Identifier: BSD-2-Clause
#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "timeutil.h"

int fd_wait(int fd, short events, uint64_t deadline_ns)
{
	struct pollfd pfd = {.fd = fd, .events = events};
	int n;

	for (;;) {
		n = poll(&pfd, 1, ms_until(deadline_ns));
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

int fd_send_all(int fd, const uint8_t *buf, size_t len, uint64_t deadline_ns)
{
	while (len) {
		ssize_t n;
		int err = fd_wait(fd, POLLOUT, deadline_ns);

		if (err)
			return err;
		n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int fd_open_regular(const char *path, int flags)
{
	struct stat st;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | flags);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EINVAL;
		goto fail;
	}
	/* Reads of a regular file do not block anyway; callers expect a plain fd. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
		err = -errno;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return err;
}

long fd_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (long)got;
}
