// SPDX-License-Identifier: BSD-2-Clause
#include "labels.h"
#include "procfs.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An environment can be large (a training job's); service names sit anywhere in it. */
#define ENVIRON_MAX (1u << 20)
#define CMDLINE_MAX 4096

static void copy_str(char *dst, size_t n, const char *src, size_t len)
{
	if (len >= n)
		len = n - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* "PREFIX<64 hex>.scope" or a bare 64-hex component: the id. */
static const char *container_id(const char *comp, size_t len)
{
	static const char *const prefixes[] = {"docker-", "cri-containerd-", "crio-", "libpod-"};

	if (len == 64 && all_hex(comp, 64))
		return comp;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i]);

		if (len == pl + 64 + 6 && !strncmp(comp, prefixes[i], pl) &&
		    !strncmp(comp + pl + 64, ".scope", 6) && all_hex(comp + pl, 64))
			return comp + pl;
	}
	return NULL;
}

/* "kubepods-burstable-pod<uid with _>.slice" or "pod<uid>": the pod uid, dashes restored. */
static bool pod_uid(const char *comp, size_t len, char *out, size_t n)
{
	const char *p = NULL;
	size_t ulen;

	for (size_t i = 0; i + 3 <= len; i++)
		if (!strncmp(comp + i, "pod", 3) && (i == 0 || comp[i - 1] == '-')) {
			p = comp + i + 3;
			break;
		}
	if (!p)
		return false;
	ulen = (size_t)(comp + len - p);
	if (ulen > 6 && !strncmp(p + ulen - 6, ".slice", 6))
		ulen -= 6;
	if (ulen != 36 || ulen >= n)
		return false;
	for (size_t i = 0; i < ulen; i++) {
		char c = p[i] == '_' ? '-' : p[i];

		if (!isxdigit((unsigned char)c) && c != '-')
			return false;
		out[i] = c;
	}
	out[ulen] = '\0';
	return true;
}

static void from_path(const char *path, size_t plen, struct proc_labels *out)
{
	const char *end = path + plen;
	char unit[128] = "";

	for (const char *c = path; c < end;) {
		const char *slash = memchr(c, '/', (size_t)(end - c));
		size_t len = (size_t)((slash ? slash : end) - c);
		const char *id = container_id(c, len);

		if (id)
			copy_str(out->container, sizeof(out->container), id, 12);
		else if (!out->pod_uid[0] && pod_uid(c, len, out->pod_uid, sizeof(out->pod_uid)))
			;
		else if (len > 8 && !strncmp(c + len - 8, ".service", 8))
			copy_str(unit, sizeof(unit), c, len);
		c = slash ? slash + 1 : end;
	}
	if (!out->container[0] && unit[0])
		snprintf(out->container, sizeof(out->container), "%s", unit);
}

void labels_from_cgroup(const char *text, struct proc_labels *out)
{
	const char *line = text, *v1 = NULL, *v2 = NULL;
	size_t v1len = 0, v2len = 0;

	out->container[0] = out->pod_uid[0] = '\0';
	/* "ID:CONTROLLERS:PATH" per line; v2 is "0::PATH", v1's systemd line names the unit. */
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		const char *c1 = memchr(line, ':', len), *c2;

		if (c1 && (c2 = memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)))) {
			const char *path = c2 + 1;
			size_t pl = len - (size_t)(path - line);

			if (c1 - line == 1 && line[0] == '0' && c2 == c1 + 1) {
				v2 = path;
				v2len = pl;
			} else if (!v1 || !strncmp(c1 + 1, "name=systemd", 12)) {
				v1 = path;
				v1len = pl;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	if (v2 && v2len > 1)
		from_path(v2, v2len, out);
	else if (v1)
		from_path(v1, v1len, out);
}

bool labels_service_from_environ(const char *env, size_t len, char *out, size_t n)
{
	static const char *const keys[] = {"OTEL_SERVICE_NAME=", "PYROSCOPE_APPLICATION_NAME="};

	for (size_t k = 0; k < 2; k++) {
		size_t kl = strlen(keys[k]);

		for (const char *p = env; p < env + len;) {
			const char *nul = memchr(p, '\0', (size_t)(env + len - p));
			size_t el = nul ? (size_t)(nul - p) : (size_t)(env + len - p);

			if (el > kl && !memcmp(p, keys[k], kl)) {
				const char *v = p + kl;
				size_t vl = el - kl;
				bool ok = true;

				for (size_t i = 0; i < vl; i++)
					ok &= (unsigned char)v[i] >= 0x20 && v[i] != 0x7f;
				if (ok) {
					copy_str(out, n, v, vl);
					return true;
				}
			}
			p += el + 1;
		}
	}
	return false;
}

/* Read up to max bytes of a /proc file. Returns the length (>= 0) or a negative errno. */
static ssize_t read_proc(const char *proc_root, uint32_t pid, const char *what, char *buf,
			 size_t max)
{
	char path[128];
	size_t n = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%u/%s", proc_root ? proc_root : "/proc", pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (n < max) {
		ssize_t r = read(fd, buf + n, max - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	return (ssize_t)n;
}

uint64_t labels_start_ticks(const char *proc_root, uint32_t pid)
{
	uint64_t start;

	/* The field the ingest tells processes apart by, read by the one parser of it. */
	return procfs_read_start(proc_root ? proc_root : "/proc", pid, &start) ? 0 : start;
}

static bool rule_matches(const char *glob, const char *comm, const char *exe, const char *cmdline)
{
	return (exe && *exe && !fnmatch(glob, exe, 0)) ||
	       (comm && *comm && !fnmatch(glob, comm, 0)) ||
	       (cmdline && *cmdline && !fnmatch(glob, cmdline, 0));
}

int labels_resolve(const char *proc_root, uint32_t pid, const struct export_config *cfg,
		   const char *comm, const char *exe, struct proc_labels *out)
{
	char cmdline[CMDLINE_MAX + 1], cg[4096], *env = NULL;
	char exe_buf[4096];
	ssize_t n;
	bool gone = false;

	memset(out, 0, sizeof(*out));
	out->start_ticks = labels_start_ticks(proc_root, pid);
	if (!out->start_ticks)
		gone = true;
	if (!exe || !*exe) {
		char path[128];

		snprintf(path, sizeof(path), "%s/%u/exe", proc_root ? proc_root : "/proc", pid);
		n = readlink(path, exe_buf, sizeof(exe_buf) - 1);
		if (n > 0) {
			exe_buf[n] = '\0';
			exe = exe_buf;
		}
	}
	n = read_proc(proc_root, pid, "cmdline", cmdline, CMDLINE_MAX);
	if (n < 0)
		n = 0;
	cmdline[n] = '\0';
	for (ssize_t i = 0; i + 1 < n; i++)
		if (!cmdline[i])
			cmdline[i] = ' ';
	n = read_proc(proc_root, pid, "cgroup", cg, sizeof(cg) - 1);
	cg[n > 0 ? n : 0] = '\0';
	labels_from_cgroup(cg, out);

	for (size_t i = 0; i < cfg->nservices; i++)
		if (rule_matches(cfg->services[i].glob, comm, exe, cmdline)) {
			snprintf(out->service, sizeof(out->service), "%s", cfg->services[i].name);
			return 0;
		}
	env = malloc(ENVIRON_MAX);
	if (env) {
		n = read_proc(proc_root, pid, "environ", env, ENVIRON_MAX);
		if (n > 0 && labels_service_from_environ(env, (size_t)n, out->service,
							 sizeof(out->service))) {
			free(env);
			return 0;
		}
		free(env);
	}
	if (out->container[0]) {
		size_t l = strlen(out->container);

		/* A systemd service is named by its unit, less the suffix. */
		if (l > 8 && !strcmp(out->container + l - 8, ".service"))
			l -= 8;
		copy_str(out->service, sizeof(out->service), out->container, l);
		return 0;
	}
	if (exe && *exe) {
		const char *base = strrchr(exe, '/');

		const char *name = base ? base + 1 : exe;

		copy_str(out->service, sizeof(out->service), name, strlen(name));
	} else if (comm && *comm) {
		snprintf(out->service, sizeof(out->service), "%s", comm);
	} else {
		snprintf(out->service, sizeof(out->service), "unknown");
	}
	/* " (deleted)" of a replaced executable is not part of its name. */
	n = (ssize_t)strlen(out->service);
	if (n > 10 && !strcmp(out->service + n - 10, " (deleted)"))
		out->service[n - 10] = '\0';
	return gone && !(comm && *comm) ? -ESRCH : 0;
}
