// SPDX-License-Identifier: BSD-2-Clause
#define _GNU_SOURCE /* O_PATH */
#include "procfs.h"

#include "parse.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Biggest maps file we read: ~64 MiB is several hundred thousand mappings. */
#define MAPS_FILE_MAX (64u << 20)
#define STATUS_FILE_MAX (64u << 10)

int procfs_open_regular(const char *path, uint64_t max_size, struct stat *st)
{
	char self[64];
	struct stat tmp, again;
	int pfd, fd, err;

	if (!st)
		st = &tmp;
	/*
	 * Look before opening: an O_PATH descriptor opens nothing, so a device swapped in under
	 * the name is never opened (opening some, a watchdog, has effects of its own).
	 */
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, st)) {
		err = -errno;
		close(pfd);
		return err;
	}
	if (!S_ISREG(st->st_mode) || (max_size && (uint64_t)st->st_size > max_size)) {
		close(pfd);
		return S_ISREG(st->st_mode) ? -EFBIG : -EINVAL;
	}
	/* Open that very file, not whatever the name points at by now. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	err = fd < 0 ? -errno : 0;
	close(pfd);
	if (err)
		return err;
	if (fstat(fd, &again) || again.st_ino != st->st_ino || again.st_dev != st->st_dev ||
	    !S_ISREG(again.st_mode)) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

int procfs_read_fd(int fd, size_t max, char **buf, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b, *nb;
	ssize_t r;
	int err = 0;

	b = malloc(cap);
	if (!b)
		return -ENOMEM;
	for (;;) {
		if (cap - n < 2) {
			if (cap > max) {
				err = -EFBIG;
				goto out;
			}
			nb = realloc(b, cap * 2);
			if (!nb) {
				err = -ENOMEM;
				goto out;
			}
			b = nb;
			cap *= 2;
		}
		r = read(fd, b + n, cap - n - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > max) {
			err = -EFBIG;
			goto out;
		}
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	b = NULL;
out:
	free(b);
	return err;
}

int procfs_read_file(const char *path, size_t max, char **buf, size_t *len)
{
	int fd, err;

	/* /proc files are regular files of size 0; anything else here is not ours to read. */
	fd = procfs_open_regular(path, 0, NULL);
	if (fd < 0)
		return fd;
	err = procfs_read_fd(fd, max, buf, len);
	close(fd);
	return err;
}

/* 1..16 hex digits followed by the byte stop; *p moves past stop. */
static int take_hex(char **p, char stop, uint64_t *out)
{
	uint64_t v = 0;
	char *s = *p;
	int i, d;

	for (i = 0; (d = parse_hex_digit(s[i])) >= 0; i++) {
		if (i == 16)
			return -EINVAL;
		v = v << 4 | (uint64_t)d;
	}
	if (i == 0 || s[i] != stop)
		return -EINVAL;
	*p = s + i + 1;
	*out = v;
	return 0;
}

int procfs_parse_maps_line(char *line, struct proc_map *out)
{
	static const char deleted[] = " (deleted)";
	uint64_t maj, min, ino = 0;
	char *p = line;
	size_t len;
	int i;

	memset(out, 0, sizeof(*out));
	if (take_hex(&p, '-', &out->start) || take_hex(&p, ' ', &out->end))
		return -EINVAL;
	if (out->start >= out->end)
		return -EINVAL;
	if ((p[0] != 'r' && p[0] != '-') || (p[1] != 'w' && p[1] != '-') ||
	    (p[2] != 'x' && p[2] != '-') || (p[3] != 'p' && p[3] != 's') || p[4] != ' ')
		return -EINVAL;
	out->readable = p[0] == 'r';
	out->writable = p[1] == 'w';
	out->executable = p[2] == 'x';
	out->shared = p[3] == 's';
	p += 5;
	if (take_hex(&p, ' ', &out->offset) || take_hex(&p, ':', &maj) || take_hex(&p, ' ', &min))
		return -EINVAL;
	if (maj > UINT32_MAX || min > UINT32_MAX)
		return -EINVAL;
	out->dev_major = (uint32_t)maj;
	out->dev_minor = (uint32_t)min;
	for (i = 0; p[i] >= '0' && p[i] <= '9'; i++) {
		if (i == 20 || ino > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		ino = ino * 10 + (uint64_t)(p[i] - '0');
	}
	if (i == 0 || (p[i] != ' ' && p[i] != '\0'))
		return -EINVAL;
	out->inode = ino;
	p += i;
	while (*p == ' ')
		p++;
	len = strlen(p);
	if (len >= PATH_MAX)
		return -EINVAL;
	if (len >= sizeof(deleted) - 1 && !strcmp(p + len - (sizeof(deleted) - 1), deleted)) {
		out->deleted = true;
		p[len - (sizeof(deleted) - 1)] = '\0';
	}
	out->path = p;
	return 0;
}

void procfs_free_maps(struct proc_map *maps, size_t n)
{
	for (size_t i = 0; i < n && maps; i++)
		free(maps[i].path);
	free(maps);
}

int procfs_read_maps(const char *proc_root, uint32_t pid, bool exec_only, struct proc_map **maps,
		     size_t *n)
{
	struct proc_map *v = NULL, *nv, m;
	size_t cnt = 0, cap = 0, len;
	char path[PATH_MAX], *buf = NULL, *line, *nl;
	int err;

	if ((size_t)snprintf(path, sizeof(path), "%s/%u/maps", proc_root, pid) >= sizeof(path))
		return -ENAMETOOLONG;
	err = procfs_read_file(path, MAPS_FILE_MAX, &buf, &len);
	if (err == -ENOENT)
		err = -ESRCH;
	if (err)
		return err;
	for (line = buf; line < buf + len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(buf + len - line));
		if (!nl)
			nl = buf + len;
		*nl = '\0';
		if ((size_t)(nl - line) > PROCFS_MAPS_LINE_MAX || procfs_parse_maps_line(line, &m))
			continue;
		if (exec_only && !m.executable)
			continue;
		/* The kernel lists mappings in order; anything else is not a maps file we trust. */
		if (cnt && m.start < v[cnt - 1].end)
			continue;
		if (cnt == cap) {
			cap = cap ? cap * 2 : 32;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				err = -ENOMEM;
				goto err;
			}
			v = nv;
		}
		m.path = strdup(m.path);
		if (!m.path) {
			err = -ENOMEM;
			goto err;
		}
		v[cnt++] = m;
	}
	free(buf);
	*maps = v;
	*n = cnt;
	return 0;
err:
	procfs_free_maps(v, cnt);
	free(buf);
	return err;
}

int procfs_read_nspid(const char *proc_root, uint32_t pid, uint32_t *nspid)
{
	char path[PATH_MAX], *buf = NULL, *line, *end, *last = NULL, *tok, *save;
	size_t len;
	int err;

	if ((size_t)snprintf(path, sizeof(path), "%s/%u/status", proc_root, pid) >= sizeof(path))
		return -ENAMETOOLONG;
	err = procfs_read_file(path, STATUS_FILE_MAX, &buf, &len);
	if (err == -ENOENT)
		err = -ESRCH;
	if (err)
		return err;
	*nspid = pid;
	for (line = buf; *line; line = end + 1) {
		end = strchr(line, '\n');
		if (end)
			*end = '\0';
		if (!strncmp(line, "NSpid:", 6)) {
			for (tok = strtok_r(line + 6, " \t", &save); tok;
			     tok = strtok_r(NULL, " \t", &save))
				last = tok;
			err = last ? parse_u32(last, 1, UINT32_MAX, nspid) : -EINVAL;
			break;
		}
		if (!end)
			break;
	}
	free(buf);
	return err;
}
