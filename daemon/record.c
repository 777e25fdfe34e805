// SPDX-License-Identifier: BSD-2-Clause
/* profd --record: a private socket and profctl record run against it (record.h). */
#include "record.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* profctl record's options before "--", then the command. */
#define RECORD_FIXED_ARGS 12

struct record {
	char dir[PATH_MAX]; /* "" when --socket was given */
	char socket[PATH_MAX];
	char profctl[PATH_MAX];
	uv_process_t proc;
	bool running;
	void (*done)(void *ctx, int exit_code);
	void *ctx;
};

struct record *record__new(struct config *cfg)
{
	const char *tmp = getenv("TMPDIR");
	struct record *r = calloc(1, sizeof(*r));
	int n;

	if (!r)
		return NULL;
	if (!cfg->socket_given) {
		if (!tmp || tmp[0] != '/' || strlen(tmp) > 64)
			tmp = "/tmp";
		snprintf(r->dir, sizeof(r->dir), "%s/profd-record-XXXXXX", tmp);
		if (!mkdtemp(r->dir)) {
			int err = errno;

			pr_err("record: cannot make a directory for the socket in %s: %s", tmp,
			       strerror(err));
			free(r);
			errno = err;
			return NULL;
		}
		n = snprintf(r->socket, sizeof(r->socket), "%s/profd.sock", r->dir);
		if (n < 0 || (size_t)n >= 108) {
			pr_err("record: %s: the socket path would be too long", r->dir);
			rmdir(r->dir);
			free(r);
			errno = ENAMETOOLONG;
			return NULL;
		}
		cfg->socket_path = r->socket;
	}
	return r;
}

/* The profctl installed beside this profd, or the one on $PATH. */
static void find_profctl(struct record *r)
{
	char self[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			if ((size_t)snprintf(r->profctl, sizeof(r->profctl), "%s/profctl", self) <
				sizeof(r->profctl) &&
			    access(r->profctl, X_OK) == 0)
				return;
		}
	}
	snprintf(r->profctl, sizeof(r->profctl), "profctl");
}

static void on_exit_cb(uv_process_t *p, int64_t status, int signum)
{
	struct record *r = p->data;
	int code = signum ? 128 + signum : (int)status;

	r->running = false;
	uv_close((uv_handle_t *)p, NULL);
	if (signum)
		pr_warn("record: profctl record died of signal %d", signum);
	r->done(r->ctx, code);
}

int record__start(struct record *r, uv_loop_t *loop, const struct config *cfg,
		  void (*done)(void *ctx, int exit_code), void *ctx)
{
	uv_process_options_t o = {0};
	uv_stdio_container_t stdio[3];
	size_t ncmd = 0, k = 0;
	char **args;
	int err;

	while (cfg->record_argv[ncmd])
		ncmd++;
	args = calloc(RECORD_FIXED_ARGS + ncmd + 1, sizeof(*args));
	if (!args)
		return -ENOMEM;
	find_profctl(r);
	args[k++] = r->profctl;
	args[k++] = "--socket";
	args[k++] = (char *)cfg->socket_path;
	args[k++] = "record";
	if (cfg->record_output) {
		args[k++] = "-o";
		args[k++] = (char *)cfg->record_output;
	}
	if (cfg->record_format) {
		args[k++] = "--format";
		args[k++] = (char *)cfg->record_format;
	}
	if (cfg->record_duration) {
		args[k++] = "--duration";
		args[k++] = (char *)cfg->record_duration;
	}
	args[k++] = "--";
	for (size_t i = 0; i < ncmd; i++)
		args[k++] = cfg->record_argv[i];
	args[k] = NULL;

	for (int i = 0; i < 3; i++) {
		stdio[i].flags = UV_INHERIT_FD;
		stdio[i].data.fd = i;
	}
	o.file = r->profctl;
	o.args = args;
	o.stdio = stdio;
	o.stdio_count = 3;
	o.exit_cb = on_exit_cb;
	r->proc.data = r;
	r->done = done;
	r->ctx = ctx;
	err = uv_spawn(loop, &r->proc, &o);
	free(args);
	if (err) {
		pr_err("record: cannot run %s: %s", r->profctl, uv_strerror(err));
		uv_close((uv_handle_t *)&r->proc, NULL);
		return err;
	}
	r->running = true;
	return 0;
}

void record__free(struct record *r)
{
	if (!r)
		return;
	/* profd was stopped first: its profctl record has nothing to talk to any more. */
	if (r->running && r->proc.pid > 0)
		kill(r->proc.pid, SIGTERM);
	if (r->dir[0]) {
		unlink(r->socket);
		rmdir(r->dir);
	}
	free(r);
}
