/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The sender's spool folder: one file per request holding its body as sent, named
 * "<created_ns>-<seq>.req" with both numbers zero-padded to 20 digits, so that a plain sort of
 * the names is oldest first. The two halves of a split request are "<base>-0.req" and
 * "<base>-1.req": they sort where the original did, first half first. Files are written to a
 * ".tmp-" name, fsync'd and renamed, then the folder is fsync'd, so a crash leaves either the
 * whole request or none. quarantine/ holds the requests a backend refused, each with a
 * "<name>.reply" file: "HTTP <status>", an empty line and the reply's body.
 */
#ifndef PROFD_EXPORT_SPOOL_H
#define PROFD_EXPORT_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room for any request file name, split halves included (deeper splits are refused). */
#define SPOOL_NAME_MAX 128

/* The name of a new request in buf (at least SPOOL_NAME_MAX bytes). */
void spool_name(char *buf, uint64_t created_ns, uint64_t seq);
/* The name of half 0 or 1 of name in buf. Returns 0, or -ENAMETOOLONG past SPOOL_NAME_MAX. */
int spool_name_half(const char *name, int half, char *buf);
/* Whether name is a request file's name; its creation time and sequence number when it is. */
bool spool_name_parse(const char *name, uint64_t *created_ns, uint64_t *seq);

/*
 * Create path (0700, parents too) and open it. Returns a directory fd, or -errno: the folder
 * cannot be made or opened, or is not writable.
 */
int spool_open(const char *path);

struct spool_file {
	char name[SPOOL_NAME_MAX];
	uint64_t created_ns;
	uint64_t seq;
	uint64_t size;
};

/*
 * The requests a previous run left in the folder, oldest first (*files malloc'd, the caller
 * frees it). Leftover temp files are deleted; other files are left alone. Returns 0 or -errno.
 */
int spool_scan(int dirfd, struct spool_file **files, size_t *n);

/* Write body as the file name, durably (temp file, fsync, rename, fsync the folder). 0 or -errno.
 */
int spool_write(int dirfd, const char *name, const uint8_t *body, size_t len);
/* Read the file name, at most max bytes, into *body (malloc'd). 0, -EFBIG or -errno. */
int spool_read(int dirfd, const char *name, size_t max, uint8_t **body, size_t *len);
/* Delete the file name. 0 or -errno. */
int spool_remove(int dirfd, const char *name);
/*
 * Move a refused request to quarantine/ with the reply saved beside it as "<name>.reply". body
 * NULL: the request is the spool file name (renamed); else body is written there. Returns 0 or
 * -errno.
 */
int spool_quarantine(int dirfd, const char *name, const uint8_t *body, size_t len, long status,
		     const uint8_t *reply, size_t reply_len);

#endif
