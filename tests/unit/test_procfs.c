// SPDX-License-Identifier: BSD-2-Clause
/*
 * Files a profiled user controls (debug links, perf maps, binaries) are opened without letting
 * them stall or flood the daemon: a FIFO is refused at once instead of blocking in open(), and so
 * are directories and files over the size limit.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "procfs.h"

/* PROC/PID/stat with the given parent; comm holds ") (" as a hostile name would. */
static void fake_proc(const char *root, uint32_t pid, uint32_t ppid)
{
	check_fake_proc_file(root, pid, "stat", "%u (a) S 9 (b) R %u 1 1 0 -1 4194560 0 0\n", pid,
			     ppid);
}

static bool listed(const uint32_t *v, size_t n, uint32_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* Parent links read from a /proc tree, and the descendants they give. */
static void test_family(const char *dir)
{
	char root[256], path[300];
	uint32_t ppid = 0, *kids = NULL, *parents = NULL;
	size_t n = 0;
	FILE *f;

	snprintf(root, sizeof(root), "%s/proc", dir);
	mkdir(root, 0755);
	fake_proc(root, 10, 1);
	fake_proc(root, 11, 10);
	fake_proc(root, 12, 11);
	fake_proc(root, 13, 10);
	fake_proc(root, 20, 1);
	fake_proc(root, 21, 20);
	/* A loop, as a scan racing with pid reuse can read: it must end. */
	fake_proc(root, 30, 31);
	fake_proc(root, 31, 30);
	/* Malformed: no parent field, and not a number. */
	snprintf(path, sizeof(path), "%s/40", root);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/40/stat", root);
	f = fopen(path, "w");
	fputs("40 (x) S\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/41", root);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/41/stat", root);
	f = fopen(path, "w");
	fputs("41 (x) S -5 1\n", f);
	fclose(f);

	CHECK_EQ_I(procfs_read_ppid(root, 12, &ppid), 0);
	CHECK_EQ_U(ppid, 11);
	CHECK_EQ_I(procfs_read_ppid(root, 99, &ppid), -ESRCH);
	CHECK_EQ_I(procfs_read_ppid(root, 40, &ppid), -EINVAL);
	CHECK_EQ_I(procfs_read_ppid(root, 41, &ppid), -EINVAL);

	/* status lines: the first number of a key, a missing key, a malformed one. */
	snprintf(path, sizeof(path), "%s/10/status", root);
	f = fopen(path, "w");
	fputs("Name:\tUid: 5\nTgid:\t10\nUid:\t1000\t0\t0\t0\nGid: x\n", f);
	fclose(f);
	CHECK_EQ_I(procfs_status_u32(root, 10, "Tgid", &ppid), 0);
	CHECK_EQ_U(ppid, 10);
	CHECK_EQ_I(procfs_status_u32(root, 10, "Uid", &ppid), 0);
	CHECK_EQ_U(ppid, 1000);
	CHECK_EQ_I(procfs_status_u32(root, 10, "Gid", &ppid), -EINVAL);
	CHECK_EQ_I(procfs_status_u32(root, 10, "NSpid", &ppid), -EINVAL);
	CHECK_EQ_I(procfs_status_u32(root, 99, "Tgid", &ppid), -ESRCH);
	CHECK_EQ_I(procfs_owner_uid(root, 10, &ppid), 0);
	CHECK_EQ_U(ppid, (uint32_t)getuid());
	CHECK_EQ_I(procfs_owner_uid(root, 99, &ppid), -ESRCH);

	CHECK_EQ_I(procfs_descendants(root, (uint32_t[]){10}, 1, &kids, &parents, &n), 0);
	CHECK_EQ_U(n, 3);
	CHECK(listed(kids, n, 11) && listed(kids, n, 12) && listed(kids, n, 13));
	CHECK(!listed(kids, n, 10) && !listed(kids, n, 21));
	/* Each with the parent its stat names: 11 and 13 of 10, 12 of 11. */
	for (size_t i = 0; i < n; i++)
		CHECK_EQ_U(parents[i], kids[i] == 12 ? 11u : 10u);
	free(kids);
	free(parents);
	CHECK_EQ_I(procfs_descendants(root, (uint32_t[]){12, 20}, 2, &kids, NULL, &n), 0);
	CHECK_EQ_U(n, 1);
	CHECK(listed(kids, n, 21));
	free(kids);
	CHECK_EQ_I(procfs_descendants(root, (uint32_t[]){30}, 1, &kids, NULL, &n), 0);
	CHECK(n <= 10 && listed(kids, n, 31));
	free(kids);

	/* The real /proc: this process is a descendant of its parent. */
	CHECK_EQ_I(
	    procfs_descendants("/proc", (uint32_t[]){(uint32_t)getppid()}, 1, &kids, NULL, &n), 0);
	CHECK(listed(kids, n, (uint32_t)getpid()));
	free(kids);
	snprintf(path, sizeof(path), "rm -rf '%s'", root);
	CHECK_EQ_I(system(path), 0);
}

/* A process's start time from its stat: fields counted after a hostile name, cut files refused. */
static void test_start(const char *dir)
{
	char root[256], path[300];
	uint64_t start = 0, mine = 0, again = 0;
	FILE *f;

	snprintf(root, sizeof(root), "%s/sproc", dir);
	mkdir(root, 0755);
	fake_proc(root, 10, 1); /* ends before field 22 */
	CHECK_EQ_I(procfs_read_start(root, 10, &start), -EINVAL);
	CHECK_EQ_I(procfs_read_start(root, 11, &start), -ESRCH);
	snprintf(path, sizeof(path), "%s/10/stat", root);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		/* Field 22 is 987654; the name holds ") 5 6 " to shift a naive count. */
		fprintf(f, "10 (x) 5 6 ) S 1 10 10 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 987654 "
			   "1000 200 18446744073709551615\n");
		fclose(f);
	}
	CHECK_EQ_I(procfs_read_start(root, 10, &start), 0);
	CHECK_EQ_U(start, 987654);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "10 (x) S 1 10 10 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 98x7654 1\n");
		fclose(f);
	}
	CHECK_EQ_I(procfs_read_start(root, 10, &start), -EINVAL);
	/* The real /proc: this process's start is stable, and after the init's. */
	CHECK_EQ_I(procfs_read_start("/proc", (uint32_t)getpid(), &mine), 0);
	CHECK_EQ_I(procfs_read_start("/proc", (uint32_t)getpid(), &again), 0);
	CHECK_EQ_U(mine, again);
	CHECK_EQ_I(procfs_read_start("/proc", 1, &start), 0);
	CHECK(start <= mine);
	snprintf(path, sizeof(path), "rm -rf '%s'", root);
	CHECK_EQ_I(system(path), 0);
}

int main(void)
{
	char dir[] = "/tmp/test_procfs_XXXXXX", path[256];
	struct stat st;
	char *buf;
	size_t len;
	int fd;

	if (!mkdtemp(dir))
		return CHECK_SKIP("mkdtemp failed: no temporary directory to work in");
	test_start(dir);

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

	test_family(dir);
	rmdir(dir);
	return CHECK_DONE();
}
