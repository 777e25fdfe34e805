/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Readers for /proc files the daemon needs: whole-file reads with a bound, /proc/PID/maps lines
 * and the NSpid of /proc/PID/status. Everything read is treated as untrusted and validated.
 */
#ifndef PROFD_PROCFS_H
#define PROFD_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* The longest maps line we accept: a path of PATH_MAX plus the fixed columns. */
#define PROCFS_MAPS_LINE_MAX 4352

struct proc_map {
	uint64_t start;	 /* first address */
	uint64_t end;	 /* one past the last address */
	uint64_t offset; /* file offset of start */
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	bool readable, writable, executable, shared;
	bool deleted; /* the path ended in " (deleted)"; path has that suffix removed */
	char *path;   /* "" for anonymous mappings; owned by the caller of procfs_read_maps() */
};

/*
 * Open a file whose path a profiled process controls (its binaries, debug links, perf maps) so
 * that it cannot stall or flood the daemon: never blocks on a FIFO or device, only regular files
 * of at most max_size bytes (0: no limit). Returns the fd (st filled when not NULL) or a negative
 * errno (-EINVAL: not a regular file, -EFBIG: too large).
 */
int procfs_open_regular(const char *path, uint64_t max_size, struct stat *st);
/*
 * The same for a path in a process's own file system, as it sees it (its root, for processes in
 * containers), following no link of any kind: a file a user linked to another one is refused
 * (-ELOOP), whatever the link points at. Returns the fd or a negative errno.
 */
int procfs_open_in_root(const char *proc_root, uint32_t pid, const char *path, uint64_t max_size,
			struct stat *st);

/*
 * Read all of fd (at most max bytes) into a NUL-terminated buffer; the fd stays open. Returns 0
 * with *buf (caller frees) and *len, -EFBIG when longer than max, or a negative errno.
 */
int procfs_read_fd(int fd, size_t max, char **buf, size_t *len);

/*
 * Read a whole file (proc files report size 0, so read until EOF) of at most max bytes into a
 * NUL-terminated buffer. Returns 0 with *buf (caller frees) and *len, -EFBIG when the file is
 * longer than max, or a negative errno from open/read.
 */
int procfs_read_file(const char *path, size_t max, char **buf, size_t *len);

/*
 * Parse one maps line (without its newline; the line is modified in place) into *out; out->path
 * points into the line. Returns 0, or -EINVAL for a malformed line.
 */
int procfs_parse_maps_line(char *line, struct proc_map *out);

/*
 * Read PROC_ROOT/PID/maps and return its mappings (all of them, or only the executable ones
 * when exec_only), sorted by start, in *maps (caller frees with procfs_free_maps()). Malformed
 * lines and overlapping mappings are skipped. Returns 0, -ESRCH when the process is gone, or a
 * negative errno.
 */
int procfs_read_maps(const char *proc_root, uint32_t pid, bool exec_only, struct proc_map **maps,
		     size_t *n);
void procfs_free_maps(struct proc_map *maps, size_t n);

/*
 * Open the file PID has mapped under the name path, through PROC_ROOT/PID/map_files: the mapping
 * itself, not the name, so whatever the name points to by now, in whichever root, with whatever
 * symlinks, does not matter. path must equal a mapping's pathname in PROC_ROOT/PID/maps exactly.
 * Refused without blocking: anything but a regular file of at most max_size bytes (0: no limit),
 * and files on FUSE or on a mount listed in neither PID's nor this process's mountinfo (a FUSE
 * server is a process, and it could stall every open and read of the file). Returns the fd (st
 * filled when not NULL) or a negative errno: -ENOENT (no such mapping), -EINVAL (not a regular
 * file), -EXDEV (on FUSE or on an unknown mount), -EFBIG, -EPERM (map_files needs CAP_SYS_ADMIN
 * or CAP_CHECKPOINT_RESTORE), -ESRCH.
 */
int procfs_open_mapped(const char *proc_root, uint32_t pid, const char *path, uint64_t max_size,
		       struct stat *st);

/*
 * The pid of PID in its innermost pid namespace (last column of "NSpid:" in PROC_ROOT/PID/status;
 * PID itself on kernels without that line). Returns 0, -ESRCH when gone, or a negative errno.
 */
int procfs_read_nspid(const char *proc_root, uint32_t pid, uint32_t *nspid);

/*
 * The first number of the line "KEY:" of PROC_ROOT/PID/status (Tgid, Uid: the real uid, ...).
 * Returns 0, -ESRCH when the process is gone, -EINVAL when the line is missing or malformed,
 * or a negative errno.
 */
int procfs_status_u32(const char *proc_root, uint32_t pid, const char *key, uint32_t *out);

/*
 * The owner of PID's /proc files: its effective uid while it is dumpable, root otherwise, as
 * ptrace decides. Returns 0 or -ESRCH.
 */
int procfs_owner_uid(const char *proc_root, uint32_t pid, uint32_t *uid);

/*
 * The parent process of PID (the 4th field of PROC_ROOT/PID/stat, read after the last ')' since
 * the name may hold any byte). Returns 0, -ESRCH when gone, -EINVAL for a malformed file, or
 * a negative errno.
 */
int procfs_read_ppid(const char *proc_root, uint32_t pid, uint32_t *ppid);

/*
 * The state letter of PID (the 3rd field of PROC_ROOT/PID/stat: R, S, D, Z, X, ...). Returns 0,
 * -ESRCH when gone, -EINVAL for a malformed file, or a negative errno.
 */
int procfs_read_state(const char *proc_root, uint32_t pid, char *state);

/*
 * When PID started: the 22nd field of PROC_ROOT/PID/stat (starttime, clock ticks after boot), the
 * same for the process's whole life and different for the next process of its pid, unless both
 * start within one tick. Returns 0, -ESRCH when gone, -EINVAL for a malformed file, or a negative
 * errno.
 */
int procfs_read_start(const char *proc_root, uint32_t pid, uint64_t *start);

/*
 * The processes of PROC_ROOT descended from roots[0 .. nroots), roots left out, as the
 * parent links read now give them: *out (free()) holds *nout pids and, when parents is not
 * NULL, *parents (free()) the parent of each. Processes that vanish during the scan are
 * skipped. Returns 0 or a negative errno (-ENOMEM, or opendir's).
 */
int procfs_descendants(const char *proc_root, const uint32_t *roots, size_t nroots, uint32_t **out,
		       uint32_t **parents, size_t *nout);

#endif
