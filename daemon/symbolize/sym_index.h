/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the symbolizer: the function symbols of one ELF symbol table as a compact sorted
 * index (12 bytes a function: start, size, name offset), whose names stay in the file's string
 * table and are read when a lookup first needs one.
 *
 * A big C++ library's string table is most of its symbol bytes (libtorch_cpu.so: 78 MB of names
 * for 13 MB of symbols), and a profile names a few thousand of its functions at most, so the
 * names are never copied in. They are read with pread(2) from a descriptor the index keeps, not
 * through a mapping of the file: the file belongs to whoever installed it, and a mapping of a
 * file that is truncated under it faults (SIGBUS) on the next access, which a multi-threaded
 * daemon could only survive with a process-wide signal handler. A read of a shrunken file is
 * merely short: the name is missing, nothing crashes. The pages read are the kernel's page
 * cache (clean, reclaimable, not in the daemon's RSS), and the table itself is streamed through
 * a small buffer while the index is built, never held whole.
 */
#ifndef PROFD_SYM_INDEX_H
#define PROFD_SYM_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct Elf;
struct sym_index;

/* Where an index reads its table and names: a file (the index keeps a dup of fd) or memory. */
struct sym_source {
	int fd;		 /* -1 when mem is used */
	const void *mem; /* an image that outlives the index (the daemon's own vdso) */
	uint64_t size;	 /* bytes of the file or image; reads past it are refused */
};

/*
 * Index the function symbols of e's first section of type (SHT_SYMTAB or SHT_DYNSYM), reading
 * from src. Returns 0 with *out (NULL when the section has no function symbol), -ENOENT when e
 * has no such section, -ENOMEM, -E2BIG (over 16 Mi symbols) or -EINVAL (a section that lies
 * outside the file).
 */
int sym_index__build(struct sym_index **out, struct Elf *e, unsigned int type,
		     const struct sym_source *src);
/* A symbol for sym_index__from_list(). */
struct sym_list_ent {
	uint64_t addr;
	uint32_t size;
	uint32_t name; /* offset in the string table */
};
/*
 * Index the n stubs of l (any order; of two at one address the later wins) of a procedure
 * linkage table, named "NAME@plt" from the string table at str_off (str_size bytes) of src.
 * same_file (may be NULL): an index built from the same file as src, whose descriptor the new
 * index shares instead of keeping one more (indexes are used from one thread). Returns 0 with
 * *out (NULL when n is 0), -EINVAL (a table outside the source), -E2BIG or -ENOMEM.
 */
int sym_index__from_list(struct sym_index **out, const struct sym_list_ent *l, size_t n,
			 const struct sym_source *src, uint64_t str_off, uint64_t str_size,
			 const struct sym_index *same_file);
void sym_index__free(struct sym_index *ix);

/* Functions indexed, and the bytes the index holds. Accept NULL. */
size_t sym_index__count(const struct sym_index *ix);
uint64_t sym_index__bytes(const struct sym_index *ix);

/*
 * The function covering addr: the nearest one at or below it whose size holds addr (size 0
 * covers up to the next), or an enclosing bigger one a few entries back. Returns its position
 * or -1.
 */
long sym_index__find(const struct sym_index *ix, uint64_t addr);
/* The start address of the function at position i. */
uint64_t sym_index__addr(const struct sym_index *ix, size_t i);
/*
 * Read the name of the function at position i into buf (len bytes), without the symbol
 * version ("memcpy@@GLIBC_2.14" is "memcpy"). Returns 0, -ENOENT (empty, unterminated within
 * the bound, or past the end of a file that shrank) or -EIO.
 */
int sym_index__name(const struct sym_index *ix, size_t i, char *buf, size_t len);

/*
 * Names as a dump shows them (C++ names demangled), cached by index and position: a bounded
 * direct-mapped cache, so that a name is read and demangled once per address a profile keeps
 * hitting, and memory stays flat whatever the libraries' sizes.
 */
struct name_cache;

/* Returns a cache of slots entries holding at most max_bytes of names, or NULL (ENOMEM). */
struct name_cache *name_cache__new(size_t slots, size_t max_bytes);
void name_cache__free(struct name_cache *c);
/*
 * The display name of the function at position i of ix, or NULL when it has none. Owned by
 * the cache, valid until the next call.
 */
const char *name_cache__get(struct name_cache *c, const struct sym_index *ix, size_t i);
/* Bytes of names held now. */
uint64_t name_cache__bytes(const struct name_cache *c);

#endif
