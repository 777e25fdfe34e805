/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An interning table: each distinct key (any bytes) gets a dense index, in the order keys were
 * first added. The output formats and the export encoders use it for string tables and to merge
 * frames, functions and locations that share a key.
 */
#ifndef PROFD_INTERN_H
#define PROFD_INTERN_H

#include <stddef.h>
#include <stdint.h>

struct intern;

/* Returns an empty table (free with intern__free) or NULL with errno set. */
struct intern *intern__new(void);
void intern__free(struct intern *t);
/*
 * The index of the len bytes at key, adding a copy if they are new; *added (may be NULL) says
 * which. Returns the index or a negative errno (-ENOMEM, -E2BIG past UINT32_MAX - 1 keys).
 */
int64_t intern__add(struct intern *t, const void *key, size_t len, int *added);
/* intern__add of a NUL-terminated string. */
int64_t intern__str(struct intern *t, const char *s);
size_t intern__count(const struct intern *t);
/*
 * The keys in index order, each copy NUL-terminated (so string keys read as C strings). Owned
 * by t, valid until the next intern__add.
 */
char **intern__keys(const struct intern *t);
/* The length of key idx (without the NUL added after it); idx must be below the count. */
size_t intern__key_len(const struct intern *t, size_t idx);

#endif
