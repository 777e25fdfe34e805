// SPDX-License-Identifier: BSD-2-Clause
/*
 * Output files: written beside the target and renamed over it, so a reader never sees half a
 * flame graph and a failed run leaves the old file in place.
 */
#define _GNU_SOURCE /* asprintf */
#include "output.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

enum dump_format output_format_for_file(const char *path)
{
	if (ends_with(path, ".svg"))
		return DUMP_FORMAT_SVG;
	if (ends_with(path, ".pb.gz") || ends_with(path, ".pprof"))
		return DUMP_FORMAT_PPROF;
	/* Before plain .json, which it also ends in. */
	if (ends_with(path, ".speedscope.json"))
		return DUMP_FORMAT_SPEEDSCOPE;
	if (ends_with(path, ".json"))
		return DUMP_FORMAT_JSON;
	return DUMP_FORMAT_FOLDED;
}

/* A temporary file beside path, opened for writing with the mode a plain open() would give. */
static int open_temp(const char *path, char **tmp_out, FILE **out, struct cli_error *e)
{
	const char *slash = strrchr(path, '/');
	char *tmp = NULL;
	mode_t mask;
	int fd, err;

	if (asprintf(&tmp, "%.*s.%s.XXXXXX", slash ? (int)(slash - path + 1) : 0, path,
		     slash ? slash + 1 : path) < 0) {
		cli_error_set(e, PROFCTL_EXIT_ERROR, "out of memory");
		return -ENOMEM;
	}
	fd = mkstemp(tmp);
	if (fd < 0) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "cannot create %s: %s", path, strerror(-err));
		free(tmp);
		return err;
	}
	/* mkstemp makes 0600. */
	mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask) < 0) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "chmod %s: %s", tmp, strerror(-err));
		goto fail;
	}
	*out = fdopen(fd, "w");
	if (!*out) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "%s: %s", tmp, strerror(-err));
		goto fail;
	}
	*tmp_out = tmp;
	return 0;
fail:
	close(fd);
	unlink(tmp);
	free(tmp);
	return err;
}

int output_write_file(const char *path, output_render_fn render, void *ctx, struct cli_error *e)
{
	FILE *out = NULL;
	char *tmp = NULL;
	int err;

	err = open_temp(path, &tmp, &out, e);
	if (err)
		return err;
	err = render(out, ctx);
	if (!err && fsync(fileno(out)) < 0 && errno != EINVAL)
		err = -errno;
	if (err) {
		cli_error_set(e, PROFCTL_EXIT_ERROR, "writing %s: %s", path, strerror(-err));
		fclose(out);
		goto out;
	}
	err = fclose(out) ? -errno : 0;
	if (err) {
		cli_error_set(e, PROFCTL_EXIT_ERROR, "writing %s: %s", path, strerror(-err));
		goto out;
	}
	if (rename(tmp, path) < 0) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "cannot replace %s: %s", path, strerror(-err));
	}
out:
	if (err)
		unlink(tmp);
	free(tmp);
	return err;
}

int output_write(const char *path, output_render_fn render, void *ctx, struct cli_error *e)
{
	int err;

	if (path)
		return output_write_file(path, render, ctx, e);
	err = render(stdout, ctx);
	if (err)
		cli_error_set(e, PROFCTL_EXIT_ERROR, "writing to standard output: %s",
			      strerror(-err));
	return err;
}
