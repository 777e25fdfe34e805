// SPDX-License-Identifier: BSD-2-Clause
/*
 * Files a profiled user controls (debug links, perf maps, binaries) are opened without letting
 * them stall or flood the daemon: a FIFO is refused at once instead of blocking in open(), and so
 * are directories and files over the size limit.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "procfs.h"

int main(void)
{
	char dir[] = "/tmp/test_procfs_XXXXXX", path[256];
	struct stat st;
	char *buf;
	size_t len;
	int fd;

	if (!mkdtemp(dir))
		return CHECK_SKIP("mkdtemp failed: no temporary directory to work in");

	/* A FIFO with no writer: a plain open() would block forever here. */
	snprintf(path, sizeof(path), "%s/fifo", dir);
	CHECK_EQ_I(mkfifo(path, 0600), 0);
	alarm(10); /* a regression hangs: let the alarm fail the test instead */
	CHECK_EQ_I(procfs_open_regular(path, 0, NULL), -EINVAL);
	CHECK_EQ_I(procfs_read_file(path, 1024, &buf, &len), -EINVAL);
	alarm(0);
	unlink(path);

	CHECK_EQ_I(procfs_open_regular(dir, 0, NULL), -EINVAL);
	CHECK_EQ_I(procfs_open_regular("/dev/zero", 0, NULL), -EINVAL);

	/* A sparse file bigger than the limit is refused from its size alone. */
	snprintf(path, sizeof(path), "%s/big", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	CHECK_EQ_I(ftruncate(fd, 1ll << 33), 0);
	close(fd);
	CHECK_EQ_I(procfs_open_regular(path, 1ull << 32, NULL), -EFBIG);
	fd = procfs_open_regular(path, 0, &st);
	CHECK(fd >= 0);
	CHECK_EQ_U(st.st_size, 1ull << 33);
	close(fd);
	unlink(path);

	/* A regular file reads whole; a longer one than max is -EFBIG. */
	snprintf(path, sizeof(path), "%s/small", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	CHECK_EQ_I(write(fd, "1 2 x\n", 6), 6);
	close(fd);
	CHECK_EQ_I(procfs_read_file(path, 1024, &buf, &len), 0);
	CHECK_EQ_U(len, 6);
	CHECK_STREQ(buf, "1 2 x\n");
	free(buf);
	CHECK_EQ_I(procfs_read_file(path, 3, &buf, &len), -EFBIG);
	unlink(path);

	/* /proc files report size 0 and still read whole. */
	CHECK_EQ_I(procfs_read_file("/proc/self/status", 1 << 20, &buf, &len), 0);
	CHECK(len > 0 && strstr(buf, "Pid:") != NULL);
	free(buf);

	rmdir(dir);
	return CHECK_DONE();
}
