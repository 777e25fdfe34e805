/* SPDX-License-Identifier: BSD-2-Clause */
/* C++ (Itanium ABI) name demangling through libstdc++'s __cxa_demangle. */
#ifndef PROFD_DEMANGLE_H
#define PROFD_DEMANGLE_H

/*
 * Longest name and most back-references (S_, S<seq-id>_, T_, T<n>_) demangled: beyond them a
 * name may demangle to an output exponential in its length, so it is shown as it is.
 */
#define DEMANGLE_MAX_LEN 1024
#define DEMANGLE_MAX_BACKREFS 24

/* Whether name looks like an Itanium-mangled C++ name ("_Z..."); only those are demangled. */
static inline int demangle_is_mangled(const char *name)
{
	return name && name[0] == '_' && name[1] == 'Z';
}

/*
 * Returns the demangled form of name (malloc'd; the caller frees), or NULL with errno set:
 * EINVAL when name is not a mangled C++ name or does not demangle, E2BIG when it is over
 * DEMANGLE_MAX_LEN bytes or DEMANGLE_MAX_BACKREFS back-references (the caller shows it as it
 * is), ENOMEM.
 */
char *demangle(const char *name);

#endif
