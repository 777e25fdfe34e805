// SPDX-License-Identifier: BSD-2-Clause
/*
 * The file a launch probe goes into, without root. The path comes from the profiled process, so
 * the daemon opens none of it by name: procfs_open_mapped() takes the mapping of that exact name
 * from PROC_ROOT/PID/maps and opens PROC_ROOT/PID/map_files/START-END. Here PROC_ROOT is made up:
 * its map_files entries are symlinks to a FIFO, a device, a big sparse file, a file on a mount
 * said to be FUSE, and each is refused without blocking or opening it for reading. Then the
 * profd:cuda_launch notes the daemon counts before attaching, in real ELF files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "procfs.h"
#include "sampler.h"

#define PID 4242
#define LIB "/usr/lib/libprofd_cupti.so"
#define MAX (256ull << 20)

static char root[64];

static void put(const char *rel, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	if (!CHECK(f != NULL))
		return;
	fputs(text, f);
	fclose(f);
}

/* PROC_ROOT/PID/map_files/START-END -> target, as the kernel's magic link would lead there. */
static void map_file(uint64_t start, uint64_t end, const char *target)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%d/map_files/%" PRIx64 "-%" PRIx64, root, PID, start, end);
	unlink(path);
	CHECK_EQ_I(symlink(target, path), 0);
}

/* The mount id statx reports for path: what mountinfo lines must name. */
static uint64_t mnt_id(const char *path)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, 0, STATX_MNT_ID, &stx) || !(stx.stx_mask & STATX_MNT_ID))
		return 0;
	return stx.stx_mnt_id;
}

static void mountinfo(const char *who, uint64_t id, const char *fstype)
{
	char text[512], rel[64];

	snprintf(rel, sizeof(rel), "%s/mountinfo", who);
	/* Another mount first, and optional fields before the separator, as the kernel writes. */
	snprintf(text, sizeof(text),
		 "1 0 0:1 / / rw,relatime - tmpfs none rw\n"
		 "%" PRIu64 " 1 8:1 / /data rw,relatime shared:7 master:2 - %s /dev/sda1 rw\n",
		 id, fstype);
	put(rel, text);
}

static void test_open_mapped(void)
{
	char dir[] = "/tmp/test_launch_file_XXXXXX", real[128], fifo[128], big[128], text[1024];
	char buf[16];
	struct stat st;
	uint64_t id;
	int fd;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(root, sizeof(root), "%s/proc", dir);
	CHECK_EQ_I(mkdir(root, 0700), 0);
	snprintf(text, sizeof(text), "%s/%d", root, PID);
	CHECK_EQ_I(mkdir(text, 0700), 0);
	snprintf(text, sizeof(text), "%s/%d/map_files", root, PID);
	CHECK_EQ_I(mkdir(text, 0700), 0);
	snprintf(text, sizeof(text), "%s/self", root);
	CHECK_EQ_I(mkdir(text, 0700), 0);

	/* The library's real bytes live elsewhere: only the mapping leads there. */
	snprintf(real, sizeof(real), "%s/the-mapped-file", dir);
	fd = open(real, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	CHECK_EQ_I(write(fd, "mapped", 6), 6);
	close(fd);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	CHECK_EQ_I(mkfifo(fifo, 0600), 0);
	snprintf(big, sizeof(big), "%s/big", dir);
	fd = open(big, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	CHECK_EQ_I(ftruncate(fd, (off_t)MAX + 1), 0);
	close(fd);
	id = mnt_id(real);
	CHECK(id != 0);

	put("4242/maps", "00400000-00401000 r-xp 00000000 08:01 11 /usr/bin/app\n"
			 "7f0000000000-7f0000001000 r--p 00000000 08:01 12 " LIB "\n"
			 "7f0000001000-7f0000003000 r-xp 00001000 08:01 12 " LIB "\n"
			 "7f0000010000-7f0000011000 rw-p 00000000 08:01 13 /tmp/fifo\n"
			 "7f0000020000-7f0000021000 rw-s 00000000 00:05 14 /dev/null\n"
			 "7f0000030000-7f0000031000 r--p 00000000 08:01 15 /big.so\n"
			 "7f0000040000-7f0000041000 r--p 00000000 08:01 16 /gone.so (deleted)\n"
			 "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]\n");
	map_file(0x7f0000000000, 0x7f0000001000, real);
	map_file(0x7f0000001000, 0x7f0000003000, "/nonexistent");
	map_file(0x7f0000010000, 0x7f0000011000, fifo);
	map_file(0x7f0000020000, 0x7f0000021000, "/dev/null");
	map_file(0x7f0000030000, 0x7f0000031000, big);
	map_file(0x7f0000040000, 0x7f0000041000, real);
	mountinfo("4242", id, "ext4");
	put("self/mountinfo", "1 0 0:1 / / rw - tmpfs none rw\n");

	/* The first mapping of that exact name is opened: the mapped file, for reading. */
	memset(buf, 0, sizeof(buf));
	fd = procfs_open_mapped(root, PID, LIB, MAX, &st);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_EQ_I(read(fd, buf, sizeof(buf) - 1), 6);
		CHECK_STREQ(buf, "mapped");
		CHECK(S_ISREG(st.st_mode));
		CHECK_EQ_U(st.st_size, 6);
		CHECK_EQ_I(fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_RDONLY | O_NONBLOCK);
		CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
		close(fd);
	}
	/* A deleted file still mapped is that file. */
	fd = procfs_open_mapped(root, PID, "/gone.so", MAX, NULL);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);

	/* Only an exact mapping name selects anything: no resolving, no normalizing. */
	CHECK_EQ_I(procfs_open_mapped(root, PID, "/usr/lib/other.so", MAX, NULL), -ENOENT);
	CHECK_EQ_I(procfs_open_mapped(root, PID, "/usr/lib//libprofd_cupti.so", MAX, NULL),
		   -ENOENT);
	CHECK_EQ_I(procfs_open_mapped(root, PID, "/usr/lib/../lib/libprofd_cupti.so", MAX, NULL),
		   -ENOENT);
	CHECK_EQ_I(procfs_open_mapped(root, PID, LIB "/", MAX, NULL), -ENOENT);
	CHECK_EQ_I(procfs_open_mapped(root, PID, "/gone.so (deleted)", MAX, NULL), -ENOENT);
	CHECK_EQ_I(procfs_open_mapped(root, PID, "[stack]", MAX, NULL), -EINVAL);
	CHECK_EQ_I(procfs_open_mapped(root, PID, "", MAX, NULL), -EINVAL);
	CHECK_EQ_I(procfs_open_mapped(root, PID + 1, LIB, MAX, NULL), -ESRCH);

	/* A FIFO would block open() for good, a device would be opened: refused first. */
	alarm(10);
	CHECK_EQ_I(procfs_open_mapped(root, PID, "/tmp/fifo", MAX, NULL), -EINVAL);
	alarm(0);
	CHECK_EQ_I(procfs_open_mapped(root, PID, "/dev/null", MAX, NULL), -EINVAL);
	CHECK_EQ_I(procfs_open_mapped(root, PID, "/big.so", MAX, NULL), -EFBIG);

	/* The mount: FUSE is refused, and so is a mount neither namespace lists. */
	mountinfo("4242", id, "fuse.sshfs");
	CHECK_EQ_I(procfs_open_mapped(root, PID, LIB, MAX, NULL), -EXDEV);
	mountinfo("4242", id, "fuseblk");
	CHECK_EQ_I(procfs_open_mapped(root, PID, LIB, MAX, NULL), -EXDEV);
	mountinfo("4242", id + 1, "ext4");
	CHECK_EQ_I(procfs_open_mapped(root, PID, LIB, MAX, NULL), -EXDEV);
	/* Listed by the daemon's own namespace only (an overlay's lower layer): fine. */
	mountinfo("self", id, "xfs");
	fd = procfs_open_mapped(root, PID, LIB, MAX, NULL);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	/* A mountinfo line without its separator is not trusted. */
	snprintf(text, sizeof(text), "%" PRIu64 " 1 8:1 / /data rw ext4 /dev/sda1 rw\n", id);
	put("4242/mountinfo", text);
	put("self/mountinfo", text);
	CHECK_EQ_I(procfs_open_mapped(root, PID, LIB, MAX, NULL), -EINVAL);

	snprintf(text, sizeof(text), "rm -rf '%s'", dir);
	CHECK_EQ_I(system(text), 0);
}

static int count_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), n;

	CHECK(fd >= 0);
	if (fd < 0)
		return -1000;
	n = sampler__count_launch_notes(fd);
	close(fd);
	return n;
}

static void test_count_notes(void)
{
	const char *many = getenv("PROFD_MANY_NOTES"), *caller = getenv("PROFD_USDT_CALLER");

	if (!CHECK(many != NULL && caller != NULL))
		return;
	/* 20 sites, and one each of another name and another provider that do not count. */
	CHECK_EQ_I(count_file(many), 20);
	CHECK_EQ_I(count_file(caller), 1);
	/* An ELF file without USDT notes, and files that are not ELF at all. */
	CHECK_EQ_I(count_file("/proc/self/exe"), 0);
	CHECK_EQ_I(count_file("/proc/self/status"), -EINVAL);
	CHECK_EQ_I(count_file("/dev/null"), -EINVAL);
}

int main(void)
{
	test_open_mapped();
	test_count_notes();
	return CHECK_DONE();
}
