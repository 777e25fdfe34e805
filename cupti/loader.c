// SPDX-License-Identifier: BSD-2-Clause
/*
 * Finding libcupti. The library never links CUPTI: a CUDA process already has the one that
 * matches its runtime (torch wheels ship their own libcupti.so.12 or .13), and a second copy
 * in the same process would fight the first over the driver's callback slot. So the one
 * already loaded wins; only when there is none do we load one ourselves.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_priv.h"

/* Sonames tried with RTLD_NOLOAD, newest first. */
static const char *const loaded_names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
/*
 * What we load ourselves when the process has none and no path is configured: only at the
 * first enable, so a process that is never profiled does not get a CUPTI it never asked for.
 */
static const char *const default_system_names[] = {"libcupti.so.13", "libcupti.so"};
static const char *test_system_name;

void cupti_test_set_system_name(const char *name)
{
	test_system_name = name;
}

static void copy_str(char *dst, size_t len, const char *src)
{
	if (len)
		snprintf(dst, len, "%s", src ? src : "");
}

/* The file behind a handle: the link map's name, else dladdr of one of its symbols. */
static void handle_path(void *h, char *path, size_t len)
{
	struct link_map *lm = NULL;
	Dl_info di;
	void *sym;

	copy_str(path, len, "");
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0]) {
		copy_str(path, len, lm->l_name);
		return;
	}
	sym = dlsym(h, "cuptiGetVersion");
	if (sym && dladdr(sym, &di) && di.dli_fname)
		copy_str(path, len, di.dli_fname);
}

struct scan {
	char path[4096];
	bool found;
};

/*
 * A libcupti loaded under a name no soname lookup matches (a wheel's private copy opened by
 * path, a renamed file): any object whose basename starts with "libcupti.so".
 */
static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scan *s = arg;
	const char *base;

	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0;
	base = strrchr(info->dlpi_name, '/');
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "libcupti.so", strlen("libcupti.so")) != 0)
		return 0;
	copy_str(s->path, sizeof(s->path), info->dlpi_name);
	s->found = true;
	return 1;
}

static void *find_loaded(void)
{
	struct scan s = {.found = false};
	size_t i;
	void *h;

	for (i = 0; i < sizeof(loaded_names) / sizeof(loaded_names[0]); i++) {
		h = dlopen(loaded_names[i], RTLD_NOW | RTLD_NOLOAD);
		if (h)
			return h;
	}
	dl_iterate_phdr(scan_one, &s);
	if (!s.found)
		return NULL;
	return dlopen(s.path, RTLD_NOW | RTLD_NOLOAD);
}

void *cupti_find(bool allow_system, char *path, size_t path_len, char *why, size_t why_len)
{
	const char *env = getenv("PROFD_CUPTI_PATH");
	const char *const *system_names = default_system_names;
	size_t nr_system = sizeof(default_system_names) / sizeof(default_system_names[0]);
	const char *err;
	void *h;
	size_t i;

	copy_str(why, why_len, "");
	h = find_loaded();
	if (h)
		goto found;
	if (env && env[0]) {
		h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
		if (h)
			goto found;
		err = dlerror();
		snprintf(why, why_len, "PROFD_CUPTI_PATH: %s", err ? err : env);
		return NULL;
	}
	if (!allow_system)
		return NULL;
	if (test_system_name) {
		system_names = &test_system_name;
		nr_system = 1;
	}
	for (i = 0; i < nr_system; i++) {
		h = dlopen(system_names[i], RTLD_NOW | RTLD_LOCAL);
		if (h)
			goto found;
	}
	err = dlerror();
	snprintf(why, why_len, "no libcupti in the process or on the library path (%s)",
		 err ? err : "dlopen failed");
	return NULL;
found:
	handle_path(h, path, path_len);
	return h;
}

const char *cupti_result_str(const struct cupti_fns *f, CUptiResult r)
{
	/* initial-exec: no __tls_get_addr anywhere in the library (see launch.c). */
	static __thread char buf[32] __attribute__((tls_model("initial-exec")));
	const char *s = NULL;

	if (f && f->GetResultString && f->GetResultString(r, &s) == CUPTI_SUCCESS && s)
		return s;
	snprintf(buf, sizeof(buf), "CUPTI error %d", (int)r);
	return buf;
}
