// SPDX-License-Identifier: BSD-2-Clause
#include "demangle.h"

#include <errno.h>
#include <stddef.h>

/* libstdc++'s entry point (C linkage in namespace abi); no C header declares it. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *demangle(const char *name)
{
	char *out;
	int status = 0;

	if (!demangle_is_mangled(name)) {
		errno = EINVAL;
		return NULL;
	}
	out = __cxa_demangle(name, NULL, NULL, &status);
	if (!out || status) {
		/* status -1 is an allocation failure; -2 a name that is not valid mangling */
		errno = status == -1 ? ENOMEM : EINVAL;
		return NULL;
	}
	return out;
}
