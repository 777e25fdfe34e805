// SPDX-License-Identifier: BSD-2-Clause
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NUM_DIGITS 20
#define SUFFIX ".req"
#define TMP_PREFIX ".tmp-"
#define QUARANTINE "quarantine"

void spool_name(char *buf, uint64_t created_ns, uint64_t seq)
{
	snprintf(buf, SPOOL_NAME_MAX, "%020" PRIu64 "-%020" PRIu64 SUFFIX, created_ns, seq);
}

int spool_name_half(const char *name, int half, char *buf)
{
	size_t base = strlen(name) - strlen(SUFFIX);
	int n;

	n = snprintf(buf, SPOOL_NAME_MAX, "%.*s-%d" SUFFIX, (int)base, name, half ? 1 : 0);
	return n < 0 || n >= SPOOL_NAME_MAX ? -ENAMETOOLONG : 0;
}

/* NUM_DIGITS decimal digits at s into *out. */
static bool parse_digits(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	for (int i = 0; i < NUM_DIGITS; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return true;
}

bool spool_name_parse(const char *name, uint64_t *created_ns, uint64_t *seq)
{
	size_t len = strlen(name), sfx = strlen(SUFFIX);
	const char *p;

	if (len >= SPOOL_NAME_MAX || len < 2 * NUM_DIGITS + 1 + sfx)
		return false;
	if (!parse_digits(name, created_ns) || name[NUM_DIGITS] != '-' ||
	    !parse_digits(name + NUM_DIGITS + 1, seq))
		return false;
	/* then any number of "-0" or "-1" (split halves) and the suffix */
	for (p = name + 2 * NUM_DIGITS + 1; p[0] == '-' && (p[1] == '0' || p[1] == '1'); p += 2)
		;
	return strcmp(p, SUFFIX) == 0;
}

int spool_open(const char *path)
{
	char buf[4096];
	size_t len = strlen(path);
	int fd, err;

	if (!len || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	/* mkdir -p: every prefix ending before a '/', then the whole path */
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0700) && errno != EEXIST)
			return -errno;
		buf[i] = i < len ? '/' : '\0';
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

static int cmp_files(const void *a, const void *b)
{
	return strcmp(((const struct spool_file *)a)->name, ((const struct spool_file *)b)->name);
}

int spool_scan(int dirfd, struct spool_file **files, size_t *n)
{
	struct spool_file *arr = NULL, *na;
	size_t cnt = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int fd, err = 0;

	*files = NULL;
	*n = 0;
	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		err = -errno;
		close(fd);
		return err;
	}
	while ((errno = 0, de = readdir(d))) {
		struct spool_file f;
		struct stat st;

		if (!strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX))) {
			/* a write that a crash interrupted: never renamed, never complete */
			unlinkat(dirfd, de->d_name, 0);
			continue;
		}
		if (!spool_name_parse(de->d_name, &f.created_ns, &f.seq))
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		/* spool_name_parse() checked it fits */
		memcpy(f.name, de->d_name, strlen(de->d_name) + 1);
		f.size = (uint64_t)st.st_size;
		if (cnt == cap) {
			cap = cap ? 2 * cap : 64;
			na = realloc(arr, cap * sizeof(*arr));
			if (!na) {
				err = -ENOMEM;
				break;
			}
			arr = na;
		}
		arr[cnt++] = f;
	}
	if (!err && errno)
		err = -errno;
	closedir(d);
	if (err) {
		free(arr);
		return err;
	}
	if (cnt)
		qsort(arr, cnt, sizeof(*arr), cmp_files);
	*files = arr;
	*n = cnt;
	return 0;
}

static int write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t w = write(fd, buf, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

int spool_write(int dirfd, const char *name, const uint8_t *body, size_t len)
{
	char tmp[SPOOL_NAME_MAX + sizeof(TMP_PREFIX)];
	int fd, err;

	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s", name);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	err = write_all(fd, body, len);
	if (!err && fsync(fd))
		err = -errno;
	if (close(fd) && !err && errno != EINTR)
		err = -errno;
	if (!err && renameat(dirfd, tmp, dirfd, name))
		err = -errno;
	if (err) {
		unlinkat(dirfd, tmp, 0);
		return err;
	}
	/* the rename itself must reach the disk before the request counts as spooled */
	if (fsync(dirfd))
		return -errno;
	return 0;
}

int spool_read(int dirfd, const char *name, size_t max, uint8_t **body, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	size_t size, got = 0;
	int fd, err = 0;

	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto out;
	}
	if ((uint64_t)st.st_size > max) {
		err = -EFBIG;
		goto out;
	}
	size = (size_t)st.st_size;
	buf = malloc(size ? size : 1);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	while (got < size) {
		ssize_t r = read(fd, buf + got, size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			/* shorter than its size said: someone else changed the file */
			err = r < 0 ? -errno : -EIO;
			free(buf);
			goto out;
		}
		got += (size_t)r;
	}
	*body = buf;
	*len = size;
out:
	close(fd);
	return err;
}

int spool_remove(int dirfd, const char *name)
{
	return unlinkat(dirfd, name, 0) ? -errno : 0;
}

int spool_quarantine(int dirfd, const char *name, const uint8_t *body, size_t len, long status,
		     const uint8_t *reply, size_t reply_len)
{
	char rname[SPOOL_NAME_MAX + 16], head[32];
	uint8_t *rbuf;
	size_t hlen;
	int qfd, err;

	if (mkdirat(dirfd, QUARANTINE, 0700) && errno != EEXIST)
		return -errno;
	qfd = openat(dirfd, QUARANTINE, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (qfd < 0)
		return -errno;
	hlen = (size_t)snprintf(head, sizeof(head), "HTTP %ld\n\n", status);
	rbuf = malloc(hlen + reply_len);
	if (!rbuf) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(rbuf, head, hlen);
	if (reply_len)
		memcpy(rbuf + hlen, reply, reply_len);
	snprintf(rname, sizeof(rname), "%s.reply", name);
	/* the reply first: a request in quarantine/ always has the reason beside it */
	err = spool_write(qfd, rname, rbuf, hlen + reply_len);
	free(rbuf);
	if (err)
		goto out;
	if (body) {
		err = spool_write(qfd, name, body, len);
	} else if (renameat(dirfd, name, qfd, name)) {
		err = -errno;
	} else if (fsync(qfd) || fsync(dirfd)) {
		err = -errno;
	}
out:
	close(qfd);
	return err;
}
