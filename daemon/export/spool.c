// SPDX-License-Identifier: BSD-2-Clause
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dirsafe.h"

#define NUM_DIGITS 20
#define SUFFIX ".req"
#define TMP_PREFIX ".tmp-"
#define QUARANTINE "quarantine"
#define MAGIC "PROFDSPL"
#define FORMAT_VERSION 1
#define NOTE_SUFFIXES                                                                              \
	{                                                                                          \
		".reply", ".invalid"                                                               \
	}

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

int spool_open(const char *path, char *why, size_t size)
{
	int fd, err;

	fd = dirsafe_open(path, 0700, why, size);
	if (fd < 0)
		return fd;
	if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS)) {
		err = -errno;
		snprintf(why, size, "%s: %s", path, strerror(-err));
		close(fd);
		return err;
	}
	return fd;
}

uint64_t spool_disk_bytes(const struct stat *st)
{
	uint64_t alloc = (uint64_t)st->st_blocks * 512;

	return alloc < (uint64_t)st->st_size ? alloc : (uint64_t)st->st_size;
}

static int cmp_files(const void *a, const void *b)
{
	return strcmp(((const struct spool_file *)a)->name, ((const struct spool_file *)b)->name);
}

/* In quarantine/: the request a note belongs to ("X.req.reply" -> "X.req") into buf. */
static bool note_base(const char *name, char *buf)
{
	static const char *const sfx[] = NOTE_SUFFIXES;
	size_t len = strlen(name);

	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		size_t n = strlen(sfx[i]);

		if (len > n && len - n < SPOOL_NAME_MAX && !strcmp(name + len - n, sfx[i])) {
			memcpy(buf, name, len - n);
			buf[len - n] = '\0';
			return true;
		}
	}
	return false;
}

int spool_scan(int dirfd, bool quarantine, struct spool_file **files, size_t *n)
{
	struct spool_file *arr = NULL, *na;
	size_t cnt = 0, cap = 0, out = 0;
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
		const char *req = de->d_name;
		char base[SPOOL_NAME_MAX];
		struct spool_file f;
		struct stat st;

		if (!quarantine && !strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX))) {
			/* a write that a crash interrupted: never renamed, never complete */
			unlinkat(dirfd, de->d_name, 0);
			continue;
		}
		if (quarantine && note_base(de->d_name, base))
			req = base;
		if (!spool_name_parse(req, &f.created_ns, &f.seq))
			continue;
		/* what it is is checked when it is opened; here only what it costs */
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		/* spool_name_parse() checked it fits */
		memcpy(f.name, req, strlen(req) + 1);
		f.size = spool_disk_bytes(&st);
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
	/* a request and its notes: one entry */
	for (size_t i = 0; i < cnt; i++) {
		if (out && !strcmp(arr[out - 1].name, arr[i].name))
			arr[out - 1].size += arr[i].size;
		else
			arr[out++] = arr[i];
	}
	*files = arr;
	*n = out;
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

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* zlib's crc32 takes an unsigned int length: larger bodies in pieces. */
static uint32_t crc_of(uint32_t crc, const uint8_t *buf, size_t len)
{
	while (len) {
		unsigned int n = len > (1u << 30) ? 1u << 30 : (unsigned int)len;

		crc = (uint32_t)crc32(crc, buf, n);
		buf += n;
		len -= n;
	}
	return crc;
}

static void make_header(uint8_t *h, const char *exporter, const uint8_t *body, size_t len,
			uint64_t samples)
{
	memset(h, 0, SPOOL_HDR_LEN);
	memcpy(h, MAGIC, 8);
	put32(h + 8, FORMAT_VERSION);
	put32(h + 12, SPOOL_HDR_LEN);
	strncpy((char *)h + 16, exporter, SPOOL_EXPORTER_MAX - 1);
	put64(h + 32, len);
	put64(h + 40, samples);
	put32(h + 48, crc_of((uint32_t)crc32(0, NULL, 0), body, len));
	put32(h + 52, crc_of((uint32_t)crc32(0, NULL, 0), h, 52));
}

/* Write the parts in order to name, durably. */
static int write_file(int dirfd, const char *name, const uint8_t *a, size_t alen, const uint8_t *b,
		      size_t blen)
{
	char tmp[SPOOL_NAME_MAX + 16 + sizeof(TMP_PREFIX)];
	int fd, err;

	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s", name);
	/* a stale temp file goes first: O_EXCL then never opens anything already there */
	unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	err = write_all(fd, a, alen);
	if (!err && blen)
		err = write_all(fd, b, blen);
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

int spool_write(int dirfd, const char *name, const char *exporter, const uint8_t *body, size_t len,
		uint64_t samples)
{
	uint8_t h[SPOOL_HDR_LEN];

	make_header(h, exporter, body, len, samples);
	return write_file(dirfd, name, h, sizeof(h), body, len);
}

static int bad(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

static int read_full(int fd, uint8_t *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(fd, buf + got, len - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (!r)
			return -ENODATA;
		got += (size_t)r;
	}
	return 0;
}

/* Check a header read from a file of st_size bytes; the body's CRC in *crc. */
static int check_header(const uint8_t *h, const char *exporter, uint64_t max_len,
			struct spool_info *info, uint32_t *crc, char *why, size_t size)
{
	char who[SPOOL_EXPORTER_MAX];

	if (memcmp(h, MAGIC, 8))
		return bad(why, size, "no spool header (an older profd's format, or damaged)");
	if (get32(h + 52) != crc_of((uint32_t)crc32(0, NULL, 0), h, 52))
		return bad(why, size, "the header's checksum does not match");
	if (get32(h + 8) != FORMAT_VERSION || get32(h + 12) != SPOOL_HDR_LEN)
		return bad(why, size, "spool format %u, not %u", get32(h + 8), FORMAT_VERSION);
	memcpy(who, h + 16, SPOOL_EXPORTER_MAX);
	who[SPOOL_EXPORTER_MAX - 1] = '\0';
	for (char *c = who; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	if (strcmp(who, exporter))
		return bad(why, size, "a request for %s, not %s", who, exporter);
	info->len = get64(h + 32);
	info->samples = get64(h + 40);
	*crc = get32(h + 48);
	if (info->len > max_len)
		return bad(why, size, "a body of %llu bytes, over the spool's cap",
			   (unsigned long long)info->len);
	return 0;
}

int spool_read(int dirfd, const char *name, const char *exporter, uint64_t max_len,
	       bool verify_body, uint8_t **body, struct spool_info *info, char *why, size_t size)
{
	uint8_t h[SPOOL_HDR_LEN], *buf = NULL;
	uint32_t want = 0, crc;
	struct stat st;
	int fd, err;

	if (body)
		*body = NULL;
	/* O_NONBLOCK: a FIFO put in its place must not hang the sender */
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		err = -errno;
		if (err == -ELOOP)
			return bad(why, size, "a symbolic link");
		if (err == -ENXIO)
			return bad(why, size, "not a regular file");
		return err;
	}
	if (fstat(fd, &st)) {
		err = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = bad(why, size, "not a regular file (mode %06o)", (unsigned int)st.st_mode);
		goto out;
	}
	if (st.st_uid != geteuid()) {
		err =
		    bad(why, size, "owned by uid %u, not by profd's user", (unsigned int)st.st_uid);
		goto out;
	}
	info->size = (uint64_t)st.st_size;
	if ((uint64_t)st.st_size < SPOOL_HDR_LEN) {
		err = bad(why, size, "%llu bytes, shorter than a header",
			  (unsigned long long)st.st_size);
		goto out;
	}
	err = read_full(fd, h, sizeof(h));
	if (err) {
		if (err == -ENODATA)
			err = bad(why, size, "cut short while read");
		goto out;
	}
	err = check_header(h, exporter, max_len, info, &want, why, size);
	if (err)
		goto out;
	if ((uint64_t)st.st_size != SPOOL_HDR_LEN + info->len) {
		err = bad(why, size, "%llu bytes, its header says %llu",
			  (unsigned long long)st.st_size,
			  (unsigned long long)(SPOOL_HDR_LEN + info->len));
		goto out;
	}
	/*
	 * A file with holes reads as zeros where nothing was written: no request profd wrote has
	 * them, and reading one would cost its whole length. Half its size allocated is far below
	 * what any file system without holes gives, compressed ones included (bodies are gzip).
	 */
	if ((uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size / 2) {
		err = bad(why, size, "a sparse file (%llu bytes, %llu allocated)",
			  (unsigned long long)st.st_size, (unsigned long long)st.st_blocks * 512);
		goto out;
	}
	if (!body && !verify_body)
		goto out;
	crc = (uint32_t)crc32(0, NULL, 0);
	if (body) {
		buf = malloc(info->len ? info->len : 1);
		if (!buf) {
			err = -ENOMEM;
			goto out;
		}
		err = read_full(fd, buf, info->len);
		if (!err)
			crc = crc_of(crc, buf, info->len);
	} else {
		uint8_t piece[65536];

		for (uint64_t left = info->len; left && !err;) {
			size_t n = left < sizeof(piece) ? (size_t)left : sizeof(piece);

			err = read_full(fd, piece, n);
			if (!err)
				crc = crc_of(crc, piece, n);
			left -= n;
		}
	}
	if (err == -ENODATA)
		err = bad(why, size, "cut short while read");
	else if (!err && crc != want)
		err = bad(why, size, "the body's checksum does not match");
	if (err) {
		free(buf);
		goto out;
	}
	if (body)
		*body = buf;
out:
	close(fd);
	return err;
}

int spool_remove(int dirfd, const char *name)
{
	return unlinkat(dirfd, name, 0) ? -errno : 0;
}

int spool_quarantine_open(int dirfd, char *why, size_t size)
{
	char reason[128];
	struct stat st;
	int qfd, err;

	if (mkdirat(dirfd, QUARANTINE, 0700) && errno != EEXIST) {
		err = -errno;
		snprintf(why, size, QUARANTINE ": %s", strerror(-err));
		return err;
	}
	qfd = openat(dirfd, QUARANTINE, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (qfd < 0) {
		err = -errno;
		snprintf(why, size, QUARANTINE ": %s",
			 err == -ELOOP ? "a symbolic link" : strerror(-err));
		return err;
	}
	if (fstat(qfd, &st)) {
		err = -errno;
		snprintf(why, size, QUARANTINE ": %s", strerror(-err));
		close(qfd);
		return err;
	}
	err = dirsafe_check(&st, false, reason, sizeof(reason));
	if (err) {
		snprintf(why, size, QUARANTINE " %s", reason);
		close(qfd);
		return err;
	}
	return qfd;
}

int spool_quarantine(int dirfd, int qfd, const char *name, const char *exporter,
		     const uint8_t *body, size_t len, uint64_t samples, const char *suffix,
		     const uint8_t *note, size_t note_len)
{
	char nname[SPOOL_NAME_MAX + 16];
	int err;

	snprintf(nname, sizeof(nname), "%s%s", name, suffix);
	/* the note first: a request in quarantine/ always has the reason beside it */
	err = write_file(qfd, nname, note, note_len, NULL, 0);
	if (err)
		return err;
	if (body)
		return spool_write(qfd, name, exporter, body, len, samples);
	if (renameat(dirfd, name, qfd, name))
		return -errno;
	if (fsync(qfd) || fsync(dirfd))
		return -errno;
	return 0;
}

void spool_quarantine_remove(int qfd, const char *name)
{
	static const char *const sfx[] = NOTE_SUFFIXES;
	char nname[SPOOL_NAME_MAX + 16];

	unlinkat(qfd, name, 0);
	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(nname, sizeof(nname), "%s%s", name, sfx[i]);
		unlinkat(qfd, nname, 0);
	}
}
