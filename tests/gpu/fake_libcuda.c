// SPDX-License-Identifier: BSD-2-Clause
/*
 * The dry run's libcuda, in the same library as kit_fake.c (apart: cuda.h's prototypes of these
 * names would clash). Copied as libcuda.so.1, its launch functions are what the daemon's libcuda
 * uprobes watch (B3); cuGetProcAddress_v2 answers the address check (D7) as a driver that hands
 * out its exported functions does, or with an internal entry point under the fault "proc".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* Distinct bodies: identical functions could be folded into one address by the linker. */
#define ENTRY(name, n)                                                                             \
	EXPORT int name(void)                                                                      \
	{                                                                                          \
		return n;                                                                          \
	}
ENTRY(cuLaunchKernel, 1)
ENTRY(cuLaunchKernel_ptsz, 2)
ENTRY(cuLaunchKernelEx, 3)
ENTRY(cuLaunchKernelEx_ptsz, 4)
ENTRY(cuGraphLaunch, 5)
ENTRY(cuGraphLaunch_ptsz, 6)

/* What a driver that hands out internal entry points would return (fault "proc"). */
static int internal_entry(void)
{
	return 0;
}

EXPORT int cuInit(unsigned flags)
{
	(void)flags;
	return 0;
}

/* cuGetProcAddress_v2: flags 2 (per-thread default stream) gives the _ptsz variant. */
EXPORT int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
			       int *status)
{
	const char *fault = getenv("PROFD_KIT_FAKE_FAULT");
	char name[128];

	(void)version;
	snprintf(name, sizeof(name), "%s%s", symbol, flags == 2 ? "_ptsz" : "");
	*pfn = dlsym(RTLD_DEFAULT, name);
	if (fault && !strcmp(fault, "proc"))
		*pfn = (void *)internal_entry;
	if (status)
		*status = *pfn ? 1 : 0;
	return *pfn ? 0 : 500;
}
