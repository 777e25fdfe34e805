// SPDX-License-Identifier: BSD-2-Clause
#define _GNU_SOURCE /* O_PATH */
#include "procfs.h"
#include "grow.h"

#include "parse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

/* Biggest maps file we read: ~64 MiB is several hundred thousand mappings. */
#define MAPS_FILE_MAX (64u << 20)
#define STATUS_FILE_MAX (64u << 10)
/* A host with containers lists thousands of mounts, ~200 bytes each. */
#define MOUNTINFO_FILE_MAX (16u << 20)

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x1000U
#endif

/* The regular file an O_PATH descriptor names, opened for reading; pfd is closed. */
static int open_checked(int pfd, uint64_t max_size, struct stat *st)
{
	char self[64];
	struct stat again;
	int fd, err;

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

int procfs_open_regular(const char *path, uint64_t max_size, struct stat *st)
{
	struct stat tmp;
	int pfd;

	/*
	 * Look before opening: an O_PATH descriptor opens nothing, so a device swapped in under
	 * the name is never opened (opening some, a watchdog, has effects of its own).
	 */
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	return open_checked(pfd, max_size, st ? st : &tmp);
}

int procfs_open_in_root(const char *proc_root, uint32_t pid, const char *path, uint64_t max_size,
			struct stat *st)
{
	struct open_how how = {
	    .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
	    /* The process's "/" is the root; no link of any kind is followed. */
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	char root[PATH_MAX];
	struct stat tmp;
	int rfd, pfd, n;

	n = snprintf(root, sizeof(root), "%s/%u/root", proc_root ? proc_root : "/proc", pid);
	if (n <= 0 || (size_t)n >= sizeof(root))
		return -ENAMETOOLONG;
	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return -errno;
	while (*path == '/')
		path++;
	pfd = (int)syscall(SYS_openat2, rfd, path, &how, sizeof(how));
	n = pfd < 0 ? -errno : 0;
	close(rfd);
	if (n)
		return n;
	return open_checked(pfd, max_size, st ? st : &tmp);
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
	struct proc_map *v = NULL, m;
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
		if (GROW(v, cap, cnt + 1)) {
			err = -ENOMEM;
			goto err;
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

/*
 * The filesystem type of the mount mnt_id in a mountinfo file ("36 35 98:0 / /mnt rw shared:1 -
 * ext4 /dev/sda1 rw"): 0 with the type in type[len], -ENOENT when the mount is not listed, or a
 * negative errno. Spaces inside fields are escaped (\040), so " - " ends the optional fields.
 */
static int mount_fstype(const char *path, uint64_t mnt_id, char *type, size_t len)
{
	char *buf, *line, *nl, *sp, *sep;
	size_t n, tlen;
	uint64_t id;
	int err;

	err = procfs_read_file(path, MOUNTINFO_FILE_MAX, &buf, &n);
	if (err)
		return err;
	err = -ENOENT;
	for (line = buf; line < buf + n; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(buf + n - line));
		if (!nl)
			nl = buf + n;
		*nl = '\0';
		sp = strchr(line, ' ');
		if (!sp)
			continue;
		*sp = '\0';
		if (parse_u64(line, 0, UINT64_MAX, &id) || id != mnt_id)
			continue;
		sep = strstr(sp + 1, " - ");
		tlen = sep ? strcspn(sep + 3, " ") : 0;
		if (!tlen || tlen >= len) {
			err = -EINVAL;
			break;
		}
		memcpy(type, sep + 3, tlen);
		type[tlen] = '\0';
		err = 0;
		break;
	}
	free(buf);
	return err;
}

int procfs_open_mapped(const char *proc_root, uint32_t pid, const char *path, uint64_t max_size,
		       struct stat *st)
{
	char link[PATH_MAX], self[64], type[64];
	struct proc_map *maps = NULL;
	const struct proc_map *m = NULL;
	struct statx stx;
	size_t n = 0;
	int pfd = -1, err;

	if (path[0] != '/')
		return -EINVAL;
	err = procfs_read_maps(proc_root, pid, false, &maps, &n);
	if (err)
		return err;
	for (size_t i = 0; i < n && !m; i++)
		if (!strcmp(maps[i].path, path))
			m = &maps[i];
	if (!m) {
		err = -ENOENT;
		goto out;
	}
	if ((size_t)snprintf(link, sizeof(link), "%s/%u/map_files/%" PRIx64 "-%" PRIx64, proc_root,
			     pid, m->start, m->end) >= sizeof(link)) {
		err = -ENAMETOOLONG;
		goto out;
	}
	/*
	 * O_PATH follows the link to the mapped file and opens nothing: no driver's open for a
	 * device, no request to a FUSE server. The attributes are the cached ones for the same
	 * reason, until the mount is known not to be FUSE.
	 */
	pfd = open(link, O_PATH | O_CLOEXEC);
	if (pfd < 0) {
		err = -errno; /* ENOENT: unmapped meanwhile, or the process is gone */
		goto out;
	}
	if (statx(pfd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_MNT_ID, &stx)) {
		err = -errno;
		goto out;
	}
	if (!S_ISREG(stx.stx_mode) || !(stx.stx_mask & STATX_MNT_ID)) {
		err = -EINVAL;
		goto out;
	}
	/*
	 * The mount is the process's own (its libraries), or the daemon's (an overlay's lower
	 * layer). One in neither was mounted somewhere private and the file handed over.
	 */
	snprintf(self, sizeof(self), "%u/mountinfo", pid);
	if ((size_t)snprintf(link, sizeof(link), "%s/%s", proc_root, self) >= sizeof(link)) {
		err = -ENAMETOOLONG;
		goto out;
	}
	err = mount_fstype(link, stx.stx_mnt_id, type, sizeof(type));
	if (err == -ENOENT) {
		snprintf(link, sizeof(link), "%s/self/mountinfo", proc_root);
		err = mount_fstype(link, stx.stx_mnt_id, type, sizeof(type));
	}
	if (err == -ENOENT || (!err && !strncmp(type, "fuse", 4)))
		err = -EXDEV;
	if (err)
		goto out;
	/* Open that very file: the descriptor names it, whatever its name says by now. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	err = procfs_open_regular(self, max_size, st);
out:
	if (pfd >= 0)
		close(pfd);
	procfs_free_maps(maps, n);
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

/*
 * PROC_ROOT/PID/stat read whole (*buf, freed by the caller) and *fields pointing just past
 * "PID (COMM) ", at field 3 (STATE): COMM may hold spaces and parentheses, so fields are counted
 * from the last ')' (proc_pid_stat(5)). -ESRCH for a process gone.
 */
static int read_stat(const char *proc_root, uint32_t pid, char **buf, char **fields)
{
	char path[PATH_MAX], *p;
	size_t len;
	int err;

	*buf = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s/%u/stat", proc_root, pid) >= sizeof(path))
		return -ENAMETOOLONG;
	err = procfs_read_file(path, STATUS_FILE_MAX, buf, &len);
	if (err == -ENOENT)
		err = -ESRCH;
	if (err)
		return err;
	p = strrchr(*buf, ')');
	if (!p || p[1] != ' ' || !p[2]) {
		free(*buf);
		*buf = NULL;
		return -EINVAL;
	}
	*fields = p + 2;
	return 0;
}

/* The state letter and parent of PROC_ROOT/PID/stat (either may be NULL). */
static int read_stat_head(const char *proc_root, uint32_t pid, char *state, uint32_t *ppid)
{
	char *buf, *f;
	int err = read_stat(proc_root, pid, &buf, &f);

	if (err)
		return err;
	/* "STATE PPID ..." */
	err = -EINVAL;
	if (f[1] == ' ') {
		char *end = strchr(f + 2, ' ');

		if (end) {
			*end = '\0';
			err = ppid ? parse_u32(f + 2, 0, UINT32_MAX, ppid) : 0;
			if (!err && state)
				*state = f[0];
		}
	}
	free(buf);
	return err;
}

int procfs_read_ppid(const char *proc_root, uint32_t pid, uint32_t *ppid)
{
	return read_stat_head(proc_root, pid, NULL, ppid);
}

int procfs_read_state(const char *proc_root, uint32_t pid, char *state)
{
	return read_stat_head(proc_root, pid, state, NULL);
}

int procfs_read_start(const char *proc_root, uint32_t pid, uint64_t *start)
{
	char *buf, *f, *tok, *save = NULL;
	int field = 3, err = read_stat(proc_root, pid, &buf, &f);

	if (err)
		return err;
	/* STATE is field 3, starttime field 22. */
	for (tok = strtok_r(f, " \n", &save); tok && field < 22; tok = strtok_r(NULL, " \n", &save))
		field++;
	err = tok ? parse_u64(tok, 0, UINT64_MAX, start) : -EINVAL;
	free(buf);
	return err;
}

static int cmp_rel(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;

	return x[1] < y[1] ? -1 : x[1] > y[1];
}

int procfs_descendants(const char *proc_root, const uint32_t *roots, size_t nroots, uint32_t **out,
		       uint32_t **parents, size_t *nout)
{
	uint32_t(*rel)[2] = NULL, (*grown)[2], *list = NULL, *par = NULL;
	size_t n = 0, cap = 0, nlist = 0, head = 0;
	struct dirent *de;
	DIR *dir;
	int err = 0;

	*out = NULL;
	if (parents)
		*parents = NULL;
	*nout = 0;
	dir = opendir(proc_root);
	if (!dir)
		return -errno;
	while ((de = readdir(dir))) {
		uint32_t pid, ppid;

		if (parse_u32(de->d_name, 1, UINT32_MAX, &pid) ||
		    procfs_read_ppid(proc_root, pid, &ppid) || !ppid)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			grown = realloc(rel, cap * sizeof(*rel));
			if (!grown) {
				err = -ENOMEM;
				goto out;
			}
			rel = grown;
		}
		rel[n][0] = pid;
		rel[n][1] = ppid;
		n++;
	}
	/* Sorted by parent: a breadth-first walk from the roots finds each generation. */
	qsort(rel, n, sizeof(*rel), cmp_rel);
	list = malloc((nroots + n + 1) * sizeof(*list));
	par = parents ? malloc((nroots + n + 1) * sizeof(*par)) : NULL;
	if (!list || (parents && !par)) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(list, roots, nroots * sizeof(*list));
	nlist = nroots;
	for (head = 0; head < nlist; head++) {
		size_t lo = 0, hi = n;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (rel[mid][1] < list[head])
				lo = mid + 1;
			else
				hi = mid;
		}
		/*
		 * Each pid has one parent, so a pid is listed once, but a scan racing with pid
		 * reuse can read a loop: the list never outgrows one entry per process.
		 */
		for (; lo < n && rel[lo][1] == list[head] && nlist < nroots + n; lo++) {
			if (rel[lo][0] == list[head])
				continue;
			if (par)
				par[nlist] = list[head];
			list[nlist++] = rel[lo][0];
		}
	}
	memmove(list, list + nroots, (nlist - nroots) * sizeof(*list));
	*out = list;
	if (par) {
		memmove(par, par + nroots, (nlist - nroots) * sizeof(*par));
		*parents = par;
		par = NULL;
	}
	*nout = nlist - nroots;
	list = NULL;
out:
	free(list);
	free(par);
	free(rel);
	closedir(dir);
	return err;
}

int procfs_status_u32(const char *proc_root, uint32_t pid, const char *key, uint32_t *out)
{
	char path[PATH_MAX], *buf = NULL, *line, *end, want[32];
	size_t len, klen;
	int err;

	klen = (size_t)snprintf(want, sizeof(want), "\n%s:", key);
	if (klen >= sizeof(want))
		return -EINVAL;
	if ((size_t)snprintf(path, sizeof(path), "%s/%u/status", proc_root ? proc_root : "/proc",
			     pid) >= sizeof(path))
		return -ENAMETOOLONG;
	err = procfs_read_file(path, STATUS_FILE_MAX, &buf, &len);
	if (err)
		return err == -ENOENT ? -ESRCH : err;
	err = -EINVAL;
	/* "Name:" comes first, so every key of interest follows a newline. */
	line = strstr(buf, want);
	if (line) {
		line += klen;
		while (*line == '\t' || *line == ' ')
			line++;
		end = line + strspn(line, "0123456789");
		if (end != line && (*end == '\t' || *end == ' ' || *end == '\n')) {
			*end = '\0';
			err = parse_u32(line, 0, UINT32_MAX, out);
		}
	}
	free(buf);
	return err;
}

int procfs_owner_uid(const char *proc_root, uint32_t pid, uint32_t *uid)
{
	char path[PATH_MAX];
	struct stat st;

	/* A file in it: the directory's own owner is not updated when dumpability changes. */
	if ((size_t)snprintf(path, sizeof(path), "%s/%u/stat", proc_root ? proc_root : "/proc",
			     pid) >= sizeof(path))
		return -ENAMETOOLONG;
	if (stat(path, &st))
		return -ESRCH;
	*uid = (uint32_t)st.st_uid;
	return 0;
}
