/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Who a process is, for the series it is exported in: its service name, container, Kubernetes
 * pod, read from /proc (cgroup path, environment, command line) and the [services] rules.
 */
#ifndef PROFD_EXPORT_LABELS_H
#define PROFD_EXPORT_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct proc_labels {
	char service[257];    /* never empty: a rule, the environment, container, executable */
	char container[128];  /* "" when none: a container id (12 hex) or "NAME.service" */
	char pod_uid[40];     /* "" when none */
	uint64_t start_ticks; /* /proc/PID/stat starttime: a reused pid reads differently */
};

/*
 * From a /proc/PID/cgroup text (either hierarchy version): the container (docker, containerd,
 * CRI-O and podman scopes give their id's first 12 hex digits; a systemd service its unit name)
 * and the Kubernetes pod uid, into out->container and out->pod_uid ("" when none).
 */
void labels_from_cgroup(const char *text, struct proc_labels *out);

/*
 * The service name of an environment block (NUL-separated NAME=VALUE entries, len bytes):
 * OTEL_SERVICE_NAME, else PYROSCOPE_APPLICATION_NAME. Copies it into out (size n) and returns
 * true; false when neither is set (or empty).
 */
bool labels_service_from_environ(const char *env, size_t len, char *out, size_t n);

/*
 * Resolve pid's labels: the first [services] rule whose glob matches its executable path, comm
 * or command line (arguments joined by spaces); else OTEL_SERVICE_NAME or
 * PYROSCOPE_APPLICATION_NAME of its environment; else its container; else the executable's file
 * name (comm and exe are the store's, used when /proc has no more to say). proc_root: NULL for
 * "/proc". Returns 0; -ESRCH when the process is gone and nothing was known (out still gets the
 * fallbacks).
 */
int labels_resolve(const char *proc_root, uint32_t pid, const struct export_config *cfg,
		   const char *comm, const char *exe, struct proc_labels *out);

/* /proc/PID/stat's starttime, or 0 when it cannot be read. */
uint64_t labels_start_ticks(const char *proc_root, uint32_t pid);

#endif
