/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Folders the daemon keeps files in (its socket's, the export spool) are trusted only when no
 * other user can change them: otherwise a user could plant a file there, or put a link where the
 * daemon will write, between the daemon's steps.
 */
#ifndef PROFD_DIRSAFE_H
#define PROFD_DIRSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/*
 * Whether the directory st describes is one no other user can change: owned by root or by the
 * daemon's effective uid, and writable by neither its group nor others. With sticky_ok a sticky
 * one writable by all (like /tmp) is accepted too: there nobody can remove or rename another's
 * entry, but anyone can add one, so it fits a folder on the way, not one whose entries are read.
 * Returns 0, or -EPERM with why in buf ("belongs to uid 1000, not to root or profd's user",
 * "is writable by others (mode 0777) and not sticky").
 */
int dirsafe_check(const struct stat *st, bool sticky_ok, char *why, size_t size);

/*
 * Open the absolute path as a directory, walking it from "/" one component at a time without
 * following links: a component that is a symbolic link is refused, each is checked with
 * dirsafe_check (sticky allowed on every one but the last), and with mode != 0 a missing one is
 * made with that mode (so the last is created private). Returns an O_DIRECTORY | O_CLOEXEC fd, or
 * -errno with why in buf naming the component ("/srv/spool is a symbolic link", "/srv belongs to
 * uid 1000, ..."): -ELOOP (a link), -EPERM (dirsafe_check), -ENOTDIR, -EINVAL (not absolute, or a
 * "." or ".." component), -ENOENT (missing with mode 0) or what the system said.
 */
int dirsafe_open(const char *path, mode_t mode, char *why, size_t size);

#endif
