/* SPDX-License-Identifier: BSD-2-Clause */
/* C++ (Itanium ABI) name demangling through libstdc++'s __cxa_demangle. */
#ifndef PROFD_DEMANGLE_H
#define PROFD_DEMANGLE_H

/* Whether name looks like an Itanium-mangled C++ name ("_Z..."); only those are demangled. */
static inline int demangle_is_mangled(const char *name)
{
	return name && name[0] == '_' && name[1] == 'Z';
}

/*
 * Returns the demangled form of name (malloc'd; the caller frees), or NULL with errno set:
 * EINVAL when name is not a mangled C++ name or does not demangle, ENOMEM.
 */
char *demangle(const char *name);

#endif
