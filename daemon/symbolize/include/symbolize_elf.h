/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the symbolizer: sorted symbol tables, ELF images (program headers, build-id and the
 * chosen symbol table, with separate debug files), and the kernel's kallsyms table.
 */
#ifndef PROFD_SYMBOLIZE_ELF_H
#define PROFD_SYMBOLIZE_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Biggest ELF or debug file the symbolizer opens (a debug file of a big library is ~1 GiB). */
#define ELF_FILE_MAX (4ull << 30)

/* A NT_GNU_BUILD_ID longer than this is not one we accept (real ones are 16 or 20 bytes). */
#define BUILD_ID_MAX 64

/* 32 bytes: tables of the big libraries hold hundreds of thousands of these. */
struct sym_entry {
	uint64_t addr;
	uint32_t size;	 /* 0: unknown size, covers up to the next symbol; clamped to 4 GiB */
	uint32_t name;	 /* offset into the table's pool */
	uint32_t seq;	 /* order of addition, to break ties while sorting */
	uint8_t rank;	 /* preference among aliases at one address; higher wins */
	uint8_t dm;	 /* demangle state: SYM_DM_* */
	char *demangled; /* owned; set once SYM_DM_DONE */
};

enum { SYM_DM_TODO = 0, SYM_DM_NONE = 1, SYM_DM_DONE = 2 };

/* Symbols sorted by address with their names in one pool; entries are appended then finished. */
struct sym_table {
	struct sym_entry *syms;
	size_t n, cap;
	char *pool;
	size_t pool_len, pool_cap;
};

/* Append a symbol (name copied). Returns 0 or -ENOMEM, -E2BIG when the pool is full. */
int sym_table__add(struct sym_table *t, uint64_t addr, uint64_t size, const char *name,
		   uint8_t rank);
/* Sort by address; of the entries at one address keep the best ranked, then the later added. */
void sym_table__finish(struct sym_table *t);
/*
 * The symbol covering addr: the nearest one at or below addr, if addr is inside its size (or its
 * size is 0). Returns NULL otherwise.
 */
struct sym_entry *sym_table__find(const struct sym_table *t, uint64_t addr);
/* The name to show: demangled once, lazily, for C++ names. Owned by the table. */
const char *sym_table__name(const struct sym_table *t, struct sym_entry *e);
void sym_table__fini(struct sym_table *t);

struct elf_load {
	uint64_t offset, filesz, memsz, vaddr;
};

enum elf_sym_source {
	ELF_SYMS_NONE = 0,
	ELF_SYMS_SYMTAB,       /* the file's own .symtab */
	ELF_SYMS_DEBUG_SYMTAB, /* .symtab of a separate debug file */
	ELF_SYMS_DYNSYM,       /* the file's .dynsym only */
};

struct cfi_fde;
struct sym_index;
struct name_cache;

struct elf_image {
	/* Function symbols, their names read from the file when a lookup needs them. */
	struct sym_index *ix;
	/* PLT stubs named from the dynamic string table, read when a lookup needs them. */
	struct sym_index *plt_ix;
	/* The other PLT stubs' names (ifunc stubs, "[plt]"), made when the image is loaded. */
	struct sym_table plt;
	struct elf_load *loads; /* PT_LOAD headers of the main file */
	size_t n_loads;
	char build_id[2 * BUILD_ID_MAX + 1]; /* hex, "" if none */
	enum elf_sym_source source;
	char *debug_path; /* the separate debug file the symbols came from, NULL if none */
	/* Function ranges from the CFI, loaded on the first address no symbol covers. */
	struct cfi_fde *fdes;
	size_t n_fdes;
	bool fdes_tried;
};

/* Where to look for separate debug files of one binary. */
struct elf_debug_ctx {
	const char *debug_root; /* "/usr/lib/debug" or a test directory */
	const char *fs_root;	/* the process's root ("/proc/PID/root"), prefixed to its paths */
	const char *path; /* the binary's path as the process sees it ("/usr/lib/libc.so.6") */
};

struct Elf;
/*
 * Given a candidate debug file (valid for the call only), open on fd (the caller's: dup it to
 * keep it): 0 to take it, else a negative errno.
 */
typedef int (*elf_debug_use_fn)(void *arg, struct Elf *debug, int fd);
/*
 * Find the separate debug file of e (build_id: its hex build-id, "" if none): by build-id
 * under dbg->debug_root, else by its .gnu_debuglink (CRC checked) next to the binary, in .debug/
 * there, or under debug_root. Each candidate that matches is handed to use() until one is
 * taken. Returns 0 (found holds its path) or -ENOENT.
 */
int elf_find_debug(struct Elf *e, const char *build_id, const struct elf_debug_ctx *dbg,
		   elf_debug_use_fn use, void *arg, char *found, size_t found_sz);

/*
 * Read the hex build-id of the ELF file open on fd into hex (at least 2 * BUILD_ID_MAX + 1
 * bytes). Returns 0, -ENOENT when it has none, -EINVAL when it is not ELF.
 */
int elf_read_build_id_fd(int fd, char *hex);

/*
 * Load the image of the ELF file open on fd (fd stays the caller's; the image keeps a dup of it,
 * or of its debug file's, to read names from): its PT_LOAD headers and an index of its function
 * symbols from .symtab, else a debug file's .symtab, else .dynsym. Logs once which it used.
 * Returns 0 or a negative errno (-EINVAL: not a usable ELF file); on error img is empty.
 */
int elf_image__load(struct elf_image *img, int fd, const struct elf_debug_ctx *dbg);
/*
 * Load from an in-memory ELF image (the vdso), which must outlive img: names are read from it.
 * Returns 0 or a negative errno.
 */
int elf_image__load_mem(struct elf_image *img, const void *mem, size_t size, const char *name);
/*
 * The name of the function covering vaddr, a PLT stub's first: demangled, NULL when no symbol
 * covers it. Owned by img or names, valid until the next call with either.
 */
const char *elf_image__symbol(const struct elf_image *img, struct name_cache *names,
			      uint64_t vaddr);
/* Memory the image's symbols hold (index, PLT names, CFI ranges), in bytes. */
uint64_t elf_image__bytes(const struct elf_image *img);
/* Translate a file offset to the ELF virtual address. Returns 0, or -ENOENT when no PT_LOAD
 * covers it. */
int elf_image__vaddr(const struct elf_image *img, uint64_t file_off, uint64_t *vaddr);
/*
 * Load the FDE ranges of the image's file (open on fd, the caller's) and of its debug file, once:
 * later calls return at once. Returns 0 or a negative errno (-ENOENT: no CFI); img->fdes stays
 * NULL on error.
 */
int elf_image__load_fdes(struct elf_image *img, int fd);
/* The start of the function holding vaddr by the CFI, or false when no FDE covers it. */
bool elf_image__fde_start(const struct elf_image *img, uint64_t vaddr, uint64_t *start);
void elf_image__fini(struct elf_image *img);

struct sym_source;
/*
 * Name every stub of e's PLT sections (.plt, .plt.sec, .plt.got): "TARGET@plt", from the dynamic
 * relocation of the GOT slot it jumps through (x86_64), else "[plt]". With lazy and src, stubs
 * whose target has a name in the dynamic string table go to an index in *lazy, their names read
 * from src when a lookup needs them; the others (ifunc stubs, named by looking up their
 * resolver in ix, which may be NULL; "[plt]") go to t, which must be finished after. With
 * ix_same_file (ix indexes e's own file, not a debug file's), *lazy shares ix's descriptor.
 * Returns 1 when stubs were named, 0 when none, -ENOMEM or -E2BIG.
 */
int elf_add_plt_syms(struct sym_table *t, struct sym_index **lazy, struct Elf *e,
		     const struct sym_index *ix, bool ix_same_file, const struct sym_source *src);

/* What one x86_64 PLT entry holds: the GOT slot it jumps through, or the index it pushes. */
enum { PLT_ENTRY_SLOT = 1, PLT_ENTRY_INDEX = 2 };
/*
 * Decode the len bytes of an x86_64 PLT entry at address addr. Returns PLT_ENTRY_SLOT (*slot
 * set), PLT_ENTRY_INDEX (*index set: a lazy IBT entry's .rela.plt index), or -ENOENT.
 */
int plt_decode_x86_64(const uint8_t *b, size_t len, uint64_t addr, uint64_t *slot, uint32_t *index);

/*
 * One big ELF read at a time across the daemon's threads: the symbolizer's loads of big files
 * and the unwinder's table builds each hold tens of MB while they run (libtorch_cpu.so's table
 * build about 60 MB), and the two at once would add up at the daemon's peak. Only threads that
 * may wait take it, never the event loop.
 */
void elf_big_read_begin(void);
void elf_big_read_end(void);

/* Kernel symbols from a kallsyms file. */
struct ksyms;

/* Returns the table (NULL with errno set: ENOENT, EPERM when every address reads as zero). */
struct ksyms *ksyms__load(const char *path);
/*
 * The kernel text symbol at or below addr, its name and module ("[kernel.kallsyms]" or the
 * module name). Returns 0, or -ENOENT. Strings are owned by the table.
 */
int ksyms__find(const struct ksyms *k, uint64_t addr, const char **name, const char **module);
size_t ksyms__count(const struct ksyms *k);
/* Memory the table holds (fixed once loaded). */
uint64_t ksyms__bytes(const struct ksyms *k);
void ksyms__free(struct ksyms *k);

#endif
