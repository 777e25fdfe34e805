/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The reader of profd's configuration file: `key = value` lines, `[section]` headers, `#`
 * comments (whole lines, or after a value when preceded by a space or tab). It only splits
 * lines; config.c gives the keys their meaning.
 */
#ifndef PROFD_CONFIG_FILE_H
#define PROFD_CONFIG_FILE_H

#include <stddef.h>

/* The default configuration file, read when it exists and --config is not given. */
#define CONFIG_FILE_DEFAULT "/etc/profd/profd.conf"
/* Larger files are refused: a configuration is a page of text, not data. */
#define CONFIG_FILE_MAX (1u << 20)

/*
 * Called per entry: section ("" before the first header), key and value (both trimmed, value
 * possibly ""), the line number. Returns 0 to go on, or a negative errno to stop after having
 * printed its one line.
 */
typedef int (*config_entry_fn)(void *ctx, const char *section, const char *key, const char *value,
			       unsigned line);

/*
 * Read path and call fn per entry. sections (NULL-terminated) are the section names allowed:
 * another is refused at its header. A malformed line (no '=', an empty key, a bad section
 * header, a NUL byte, a line over 4096 bytes) prints `profd: PATH:LINE: what is wrong` to
 * stderr and returns -EINVAL; an unreadable file prints `profd: PATH: why` and returns its
 * -errno. Returns 0 or fn's negative value.
 */
int config_file_read(const char *path, const char *const *sections, config_entry_fn fn, void *ctx);

#endif
