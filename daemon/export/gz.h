/* SPDX-License-Identifier: BSD-2-Clause */
/* Reading back what the export gzipped itself (spooled requests, their pprofs): one inflater. */
#ifndef PROFD_EXPORT_GZ_H
#define PROFD_EXPORT_GZ_H

#include <stddef.h>
#include <stdint.h>

/*
 * Inflate one gzip member of in[0..len) into *out (malloc'd) / *out_len, at most max bytes.
 * Returns 0, -EBADMSG (not gzip, truncated, or bytes after the member), -EFBIG (past max),
 * or -ENOMEM.
 */
int export_gunzip(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *out_len);

#endif
