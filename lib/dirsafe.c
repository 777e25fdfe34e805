// SPDX-License-Identifier: BSD-2-Clause
#include "dirsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int dirsafe_check(const struct stat *st, bool sticky_ok, char *why, size_t size)
{
	if (st->st_uid != 0 && st->st_uid != geteuid()) {
		snprintf(why, size, "belongs to uid %u, not to root or profd's user",
			 (unsigned int)st->st_uid);
		return -EPERM;
	}
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(sticky_ok && (st->st_mode & S_ISVTX))) {
		snprintf(why, size, "is writable by others (mode %04o)%s",
			 (unsigned int)(st->st_mode & 07777), sticky_ok ? " and not sticky" : "");
		return -EPERM;
	}
	return 0;
}

/* The next component of *p (skipping slashes) into buf; false at the end or when too long. */
static bool next_component(const char **p, char *buf, size_t size, size_t *len)
{
	const char *s = *p, *e;

	while (*s == '/')
		s++;
	e = strchr(s, '/');
	if (!e)
		e = s + strlen(s);
	*len = (size_t)(e - s);
	*p = e;
	if (!*len || *len >= size)
		return false;
	memcpy(buf, s, *len);
	buf[*len] = '\0';
	return true;
}

int dirsafe_open(const char *path, mode_t mode, char *why, size_t size)
{
	char name[256], sub[4096], reason[128];
	const char *p = path;
	size_t len, at = 0;
	struct stat st;
	int fd, next, err;

	if (path[0] != '/' || strlen(path) >= sizeof(sub)) {
		snprintf(why, size, "%s: not an absolute path", path);
		return -EINVAL;
	}
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		snprintf(why, size, "/: %s", strerror(-err));
		return err;
	}
	/* "/" itself: on every path */
	if (fstat(fd, &st)) {
		err = -errno;
		snprintf(why, size, "/: %s", strerror(-err));
		goto fail;
	}
	if ((err = dirsafe_check(&st, true, reason, sizeof(reason)))) {
		snprintf(why, size, "/ %s", reason);
		goto fail;
	}
	sub[0] = '\0';
	while (*p) {
		bool last;

		if (!next_component(&p, name, sizeof(name), &len)) {
			if (!len)
				break; /* trailing slashes */
			snprintf(why, size, "%s: a component is too long", path);
			err = -ENAMETOOLONG;
			goto fail;
		}
		at += (size_t)snprintf(sub + at, sizeof(sub) - at, "/%s", name);
		if (!strcmp(name, ".") || !strcmp(name, "..")) {
			snprintf(why, size, "%s: \".\" and \"..\" are not allowed", path);
			err = -EINVAL;
			goto fail;
		}
		while (*p == '/')
			p++;
		last = !*p;
		next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && mode) {
			if (mkdirat(fd, name, mode) && errno != EEXIST) {
				err = -errno;
				snprintf(why, size, "cannot create %s: %s", sub, strerror(-err));
				goto fail;
			}
			next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (next < 0) {
			err = -errno;
			/* O_NOFOLLOW says ELOOP, O_DIRECTORY ENOTDIR: which one it is, in words */
			if (!fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode)) {
				snprintf(why, size, "%s is a symbolic link", sub);
				err = -ELOOP;
			} else if (err == -ENOTDIR) {
				snprintf(why, size, "%s is not a directory", sub);
			} else {
				snprintf(why, size, "%s: %s", sub, strerror(-err));
			}
			goto fail;
		}
		close(fd);
		fd = next;
		if (fstat(fd, &st)) {
			err = -errno;
			snprintf(why, size, "%s: %s", sub, strerror(-err));
			goto fail;
		}
		err = dirsafe_check(&st, !last, reason, sizeof(reason));
		if (err) {
			snprintf(why, size, "%s %s", sub, reason);
			goto fail;
		}
	}
	return fd;
fail:
	close(fd);
	return err;
}
