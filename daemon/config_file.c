// SPDX-License-Identifier: BSD-2-Clause
#include "config_file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"

#define MAX_LINE 4096

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* Cut a comment: '#' at the start or after a blank, so a value may hold '#' (a URL fragment). */
static void cut_comment(char *s)
{
	for (char *p = s; *p; p++) {
		if (*p == '#' && (p == s || p[-1] == ' ' || p[-1] == '\t')) {
			*p = '\0';
			return;
		}
	}
}

static bool valid_name(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
			return false;
	return true;
}

static int bad_line(const char *path, unsigned line, const char *why)
{
	fprintf(stderr, "profd: %s:%u: %s\n", path, line, why);
	return -EINVAL;
}

static int read_all(const char *path, char **out, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	int fd, err = 0;

	/* A FIFO at the name would hang the start, or the event loop on a reload. */
	fd = fd_open_regular(path, 0);
	if (fd < 0)
		return fd;
	buf = malloc(CONFIG_FILE_MAX + 1);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, CONFIG_FILE_MAX + 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > CONFIG_FILE_MAX) {
			err = -EFBIG;
			goto out;
		}
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return err;
}

int config_file_read(const char *path, const char *const *sections, config_entry_fn fn, void *ctx)
{
	char section[64] = "";
	char *buf = NULL, *p, *end;
	unsigned line = 0;
	size_t len = 0;
	int err;

	err = read_all(path, &buf, &len);
	if (err) {
		if (err == -EFBIG)
			fprintf(stderr,
				"profd: %s: larger than %u bytes: not a configuration file\n", path,
				CONFIG_FILE_MAX);
		else if (err == -EINVAL)
			fprintf(stderr, "profd: %s: not a regular file\n", path);
		else
			fprintf(stderr, "profd: %s: %s\n", path, strerror(-err));
		return err;
	}
	if (memchr(buf, '\0', len)) {
		err = bad_line(path, 1, "a NUL byte: not a text file");
		goto out;
	}
	for (p = buf; p < buf + len; p = end + 1) {
		char *s, *eq, *key, *value;
		size_t vlen, i;

		end = strchr(p, '\n');
		if (!end)
			end = buf + len;
		*end = '\0';
		line++;
		if ((size_t)(end - p) > MAX_LINE) {
			err = bad_line(path, line, "line longer than 4096 bytes");
			goto out;
		}
		cut_comment(p);
		s = trim(p);
		if (!*s)
			continue;
		if (*s == '[') {
			char *close = strchr(s, ']');

			if (!close || trim(close + 1)[0]) {
				err = bad_line(path, line, "a section header is '[name]'");
				goto out;
			}
			*close = '\0';
			s = trim(s + 1);
			if (!valid_name(s) || strlen(s) >= sizeof(section)) {
				err = bad_line(path, line, "bad section name");
				goto out;
			}
			for (i = 0; sections[i] && strcmp(sections[i], s); i++)
				;
			if (!sections[i]) {
				fprintf(stderr, "profd: %s:%u: unknown section [%s]\n", path, line,
					s);
				err = -EINVAL;
				goto out;
			}
			strcpy(section, s);
			continue;
		}
		eq = strchr(s, '=');
		if (!eq) {
			err = bad_line(path, line, "expected 'key = value'");
			goto out;
		}
		*eq = '\0';
		key = trim(s);
		value = trim(eq + 1);
		/* Quotes are allowed around a value, as in systemd's and shell files. */
		vlen = strlen(value);
		if (vlen >= 2 && (value[0] == '"' || value[0] == '\'') &&
		    value[vlen - 1] == value[0]) {
			value[vlen - 1] = '\0';
			value++;
		}
		if (!*key) {
			err = bad_line(path, line, "a key is missing before '='");
			goto out;
		}
		err = fn(ctx, section, key, value, line);
		if (err)
			goto out;
	}
out:
	free(buf);
	return err;
}
