/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The sender's spool folder: one file per request, named "<created_ns>-<seq>.req" with both
 * numbers zero-padded to 20 digits, so that a plain sort of the names is oldest first. The two
 * halves of a split request are "<base>-0.req" and "<base>-1.req": they sort where the original
 * did, first half first. Files are written to a ".tmp-" name, fsync'd and renamed, then the
 * folder is fsync'd, so a crash leaves either the whole request or none.
 *
 * The folder is a trust boundary: a file in it is POSTed with the node's credentials. The folder
 * is opened through dirsafe_open (no component a link or writable by another user) and
 * everything beneath it without following links; a request file counts only when it is a
 * regular file of the daemon's uid whose header verifies. The header (little-endian, before the
 * body):
 *
 *	0   8  magic "PROFDSPL"
 *	8   4  format version (1)
 *	12  4  header length (56)
 *	16  16 the exporter it belongs to ("pyroscope", "otlp"), NUL-padded
 *	32  8  body length
 *	40  8  CPU samples the body carries (the exporter's count)
 *	48  4  CRC-32 (zlib's) of the body
 *	52  4  CRC-32 of bytes 0-51
 *
 * quarantine/ holds the requests that must not be sent as they are, each with a note beside it:
 * "<name>.reply" for one a backend refused ("HTTP <status>", an empty line and the reply's body,
 * at most 64 KiB), "<name>.invalid" for a file that did not verify (one line: why). A refused
 * request keeps its header; a file that did not verify is moved as it was found.
 */
#ifndef PROFD_EXPORT_SPOOL_H
#define PROFD_EXPORT_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room for any request file name, split halves included (deeper splits are refused). */
#define SPOOL_NAME_MAX 128
#define SPOOL_HDR_LEN 56
#define SPOOL_EXPORTER_MAX 16 /* the exporter's name, its NUL included */
#define SPOOL_WHY_MAX 160

/* The name of a new request in buf (at least SPOOL_NAME_MAX bytes). */
void spool_name(char *buf, uint64_t created_ns, uint64_t seq);
/* The name of half 0 or 1 of name in buf. Returns 0, or -ENAMETOOLONG past SPOOL_NAME_MAX. */
int spool_name_half(const char *name, int half, char *buf);
/* Whether name is a request file's name; its creation time and sequence number when it is. */
bool spool_name_parse(const char *name, uint64_t *created_ns, uint64_t *seq);

/*
 * Open the folder path (made 0700 with its parents when missing) through dirsafe_open. Returns a
 * directory fd, or -errno with why in buf (a component that is a link or another user can
 * write, or the folder cannot be made or written).
 */
int spool_open(const char *path, char *why, size_t size);

struct stat;
/* What a file costs the disk: its size, or what is allocated when less (a sparse file). */
uint64_t spool_disk_bytes(const struct stat *st);

struct spool_file {
	char name[SPOOL_NAME_MAX];
	uint64_t created_ns;
	uint64_t seq;
	uint64_t size; /* spool_disk_bytes; in quarantine/, the request's notes included */
};

/*
 * The requests in the folder, oldest first (*files malloc'd, the caller frees it), without
 * opening them. In the spool (quarantine false) leftover temp files are deleted; in quarantine/
 * a request's notes are counted with it. Other names are left alone. Returns 0 or -errno.
 */
int spool_scan(int dirfd, bool quarantine, struct spool_file **files, size_t *n);

/*
 * Write the request name durably (temp file, fsync, rename, fsync the folder) with a header for
 * exporter, body and samples. 0 or -errno.
 */
int spool_write(int dirfd, const char *name, const char *exporter, const uint8_t *body, size_t len,
		uint64_t samples);

struct spool_info {
	uint64_t len;	  /* the body's length */
	uint64_t samples; /* what the header says the body carries */
	uint64_t size;	  /* the file's */
};

/*
 * Check the request file name without reading its body: a regular file of this uid (opened
 * without following links, without blocking), a header that verifies and names exporter, a body
 * of at most max_len bytes that the file's size and allocated blocks match (a sparse file is
 * refused before it is read). With body non-NULL the body is read too (*body malloc'd) and its
 * CRC checked; with body NULL and verify_body the CRC is checked reading it in pieces. Returns 0;
 * -EBADMSG with why in buf (the file must be quarantined, never sent); or -errno (-ENOENT: gone).
 */
int spool_read(int dirfd, const char *name, const char *exporter, uint64_t max_len,
	       bool verify_body, uint8_t **body, struct spool_info *info, char *why, size_t size);
/* Delete the file name. 0 or -errno. */
int spool_remove(int dirfd, const char *name);

/*
 * quarantine/ under dirfd: made 0700 when missing, opened without following links and refused
 * when another user can write it. Returns its fd or -errno (why in buf).
 */
int spool_quarantine_open(int dirfd, char *why, size_t size);
/*
 * Move the request name to quarantine/ (qfd) with the note "<name><suffix>" (".reply",
 * ".invalid") holding note. body NULL: the spool file name is renamed as it is; else body is
 * written there with its header (exporter, samples). Returns 0 or -errno.
 */
int spool_quarantine(int dirfd, int qfd, const char *name, const char *exporter,
		     const uint8_t *body, size_t len, uint64_t samples, const char *suffix,
		     const uint8_t *note, size_t note_len);
/* Delete the request name and its notes from quarantine/ (qfd). */
void spool_quarantine_remove(int qfd, const char *name);

#endif
