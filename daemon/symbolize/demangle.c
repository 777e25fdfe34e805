// SPDX-License-Identifier: BSD-2-Clause
#include "demangle.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* libstdc++'s entry point (C linkage in namespace abi); no C header declares it. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

static bool is_seq_digit(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z');
}

/*
 * Back-references of a mangled name: substitutions (S_, S<seq-id>_) and template parameters
 * (T_, T<number>_). Counted on the raw bytes, so a few identifiers that happen to contain such
 * a sequence count too: that only makes the limit stricter.
 */
static size_t backrefs(const char *name)
{
	size_t n = 0;

	for (const char *p = name; *p; p++) {
		const char *q = p + 1;

		if (*p == 'S')
			while (is_seq_digit(*q))
				q++;
		else if (*p == 'T')
			while (*q >= '0' && *q <= '9')
				q++;
		else
			continue;
		if (*q == '_')
			n++;
	}
	return n;
}

char *demangle(const char *name)
{
	char *out;
	int status = 0;

	if (!demangle_is_mangled(name)) {
		errno = EINVAL;
		return NULL;
	}
	/*
	 * Each back-reference expands to a whole earlier component, which may itself hold
	 * back-references: a name of a few hundred bytes can demangle to hundreds of megabytes
	 * over seconds (each level doubles the output). Names come from profiled processes (ELF
	 * symbols, CUDA kernel names sent by the CUPTI library), so they are not trusted: past
	 * these bounds the name stays as it is.
	 */
	if (strnlen(name, DEMANGLE_MAX_LEN + 1) > DEMANGLE_MAX_LEN ||
	    backrefs(name) > DEMANGLE_MAX_BACKREFS) {
		errno = E2BIG;
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
