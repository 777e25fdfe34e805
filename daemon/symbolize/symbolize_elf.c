// SPDX-License-Identifier: BSD-2-Clause
#include "symbolize_elf.h"
#include "cfi.h"
#include "grow.h"
#include "procfs.h"
#include "sym_index.h"

#include "demangle.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Bounds on what one file may make us hold. */
#define SYM_NAME_MAX 8192
#define SYMS_PER_FILE_MAX (16u << 20)
#define LOADS_MAX 1024

/* --- symbol tables ---------------------------------------------------------------------------- */

int sym_table__add(struct sym_table *t, uint64_t addr, uint64_t size, const char *name,
		   uint8_t rank)
{
	size_t len = strnlen(name, SYM_NAME_MAX + 1);
	struct sym_entry *e;

	if (len == 0 || len > SYM_NAME_MAX)
		return -EINVAL;
	if (t->n >= SYMS_PER_FILE_MAX || t->pool_len + len + 1 > UINT32_MAX)
		return -E2BIG;
	if (GROW(t->syms, t->cap, t->n + 1) || GROW(t->pool, t->pool_cap, t->pool_len + len + 1))
		return -ENOMEM;
	e = &t->syms[t->n];
	e->addr = addr;
	e->size = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
	e->name = (uint32_t)t->pool_len;
	e->seq = (uint32_t)t->n;
	e->rank = rank;
	e->dm = SYM_DM_TODO;
	e->demangled = NULL;
	memcpy(t->pool + t->pool_len, name, len + 1);
	t->pool_len += len + 1;
	t->n++;
	return 0;
}

static int sym_cmp(const void *pa, const void *pb)
{
	const struct sym_entry *a = pa, *b = pb;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

void sym_table__finish(struct sym_table *t)
{
	size_t i, out = 0;
	void *p;

	if (!t->n)
		return;
	qsort(t->syms, t->n, sizeof(*t->syms), sym_cmp);
	/* The last of each run of equal addresses is the preferred alias. */
	for (i = 0; i < t->n; i++) {
		if (i + 1 < t->n && t->syms[i + 1].addr == t->syms[i].addr)
			continue;
		t->syms[out++] = t->syms[i];
	}
	t->n = out;
	p = realloc(t->syms, t->n * sizeof(*t->syms));
	if (p) {
		t->syms = p;
		t->cap = t->n;
	}
}

/* How many preceding symbols we look through for one whose size encloses a nested symbol. */
#define SYM_ENCLOSE_LOOKBACK 4

struct sym_entry *sym_table__find(const struct sym_table *t, uint64_t addr)
{
	size_t lo = 0, hi = t->n, mid, i, stop;
	struct sym_entry *e;

	/* Find the first symbol above addr; the one before it is the candidate. */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (t->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	e = &t->syms[lo - 1];
	if (e->size == 0 || addr - e->addr < e->size)
		return e;
	/* A local label inside a bigger function must not hide that function. */
	stop = lo - 1 > SYM_ENCLOSE_LOOKBACK ? lo - 1 - SYM_ENCLOSE_LOOKBACK : 0;
	for (i = lo - 1; i-- > stop;) {
		e = &t->syms[i];
		if (e->size && addr - e->addr < e->size)
			return e;
	}
	return NULL;
}

const char *sym_table__name(const struct sym_table *t, struct sym_entry *e)
{
	const char *raw = t->pool + e->name;

	if (e->dm == SYM_DM_DONE)
		return e->demangled;
	if (e->dm == SYM_DM_TODO) {
		e->demangled = demangle_is_mangled(raw) ? demangle(raw) : NULL;
		e->dm = e->demangled ? SYM_DM_DONE : SYM_DM_NONE;
		if (e->demangled)
			return e->demangled;
	}
	return raw;
}

void sym_table__fini(struct sym_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->syms[i].demangled);
	free(t->syms);
	free(t->pool);
	memset(t, 0, sizeof(*t));
}

/* --- ELF -------------------------------------------------------------------------------------- */

static pthread_mutex_t big_read_lock = PTHREAD_MUTEX_INITIALIZER;

void elf_big_read_begin(void)
{
	pthread_mutex_lock(&big_read_lock);
}

void elf_big_read_end(void)
{
	pthread_mutex_unlock(&big_read_lock);
}

static void elf_version_once(void)
{
	elf_version(EV_CURRENT);
}

/* Images load on the event loop and on the ELF worker's thread: libelf is set up once. */
static void elf_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, elf_version_once);
}

static Elf_Scn *find_scn_name(Elf *e, const char *name, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;
	const char *n;
	size_t shstrndx;

	if (elf_getshdrstrndx(e, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, sh))
			return NULL;
		n = elf_strptr(e, shstrndx, sh->sh_name);
		if (n && !strcmp(n, name))
			return scn;
	}
	return NULL;
}

static int hex_encode(const unsigned char *b, size_t n, char *hex)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		hex[2 * i] = digits[b[i] >> 4];
		hex[2 * i + 1] = digits[b[i] & 15];
	}
	hex[2 * n] = '\0';
	return 0;
}

static int notes_build_id(Elf_Data *d, char *hex)
{
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	while (off < d->d_size && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		/* gelf_getnote checked that name and descriptor lie inside d. */
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    !memcmp((char *)d->d_buf + name_off, "GNU", 4) && nh.n_descsz > 0 &&
		    nh.n_descsz <= BUILD_ID_MAX)
			return hex_encode((unsigned char *)d->d_buf + desc_off, nh.n_descsz, hex);
		off = next;
	}
	return -ENOENT;
}

static int elf_build_id(Elf *e, char *hex)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	GElf_Phdr ph;
	Elf_Data *d;
	size_t i, phnum;

	hex[0] = '\0';
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			break;
		if (sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (d && d->d_buf && !notes_build_id(d, hex))
			return 0;
	}
	/* Files without section headers still have their notes in PT_NOTE. */
	if (elf_getphdrnum(e, &phnum) || phnum > LOADS_MAX)
		return -ENOENT;
	for (i = 0; i < phnum; i++) {
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_NOTE || !ph.p_filesz ||
		    ph.p_filesz > (1u << 20))
			continue;
		d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz,
					 ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
		if (d && d->d_buf && !notes_build_id(d, hex))
			return 0;
	}
	return -ENOENT;
}

int elf_read_build_id_fd(int fd, char *hex)
{
	Elf *e;
	int err;

	elf_init();
	hex[0] = '\0';
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return -EINVAL;
	err = elf_kind(e) == ELF_K_ELF ? elf_build_id(e, hex) : -EINVAL;
	elf_end(e);
	return err;
}

static int file_crc32(int fd, uint32_t *out)
{
	unsigned char buf[65536];
	uLong crc = crc32(0L, Z_NULL, 0);
	ssize_t r;

	for (;;) {
		r = read(fd, buf, sizeof(buf));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		crc = crc32(crc, buf, (uInt)r);
	}
	*out = (uint32_t)crc;
	return 0;
}

/*
 * Open a debug file candidate and hand it to use(). want_build_id (hex) or, when NULL, want_crc
 * must match. Returns use()'s return, or a negative errno when the file is not the one.
 */
static int try_debug_file(const char *path, const char *want_build_id, uint32_t want_crc,
			  elf_debug_use_fn use, void *arg)
{
	char hex[2 * BUILD_ID_MAX + 1];
	Elf *e = NULL;
	uint32_t crc;
	int fd, err;

	/* A debug link names any path the profiled user likes: no FIFOs, no endless files. */
	fd = procfs_open_regular(path, ELF_FILE_MAX, NULL);
	if (fd < 0)
		return fd;
	if (!want_build_id) {
		err = file_crc32(fd, &crc);
		if (err)
			goto out;
		if (crc != want_crc) {
			pr_debug("symbolize: %s: debug link CRC mismatch, ignored", path);
			err = -EINVAL;
			goto out;
		}
	}
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		err = -EINVAL;
		goto out;
	}
	if (want_build_id && (elf_build_id(e, hex) || strcmp(hex, want_build_id))) {
		pr_debug("symbolize: %s: build-id mismatch, ignored", path);
		err = -EINVAL;
		goto out;
	}
	err = use(arg, e, fd);
out:
	if (e)
		elf_end(e);
	close(fd);
	return err;
}

/* The .gnu_debuglink of e: file name (no directories) and CRC. Returns 0 or -ENOENT. */
static int read_debuglink(Elf *e, char *name, size_t name_sz, uint32_t *crc)
{
	Elf_Data *d;
	GElf_Shdr sh;
	Elf_Scn *scn;
	size_t len, crc_off;
	unsigned char *b;

	scn = find_scn_name(e, ".gnu_debuglink", &sh);
	if (!scn || sh.sh_type == SHT_NOBITS)
		return -ENOENT;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < 8)
		return -ENOENT;
	b = d->d_buf;
	len = strnlen((char *)b, d->d_size);
	crc_off = (len + 4) & ~(size_t)3;
	if (len == 0 || len >= name_sz || crc_off + 4 > d->d_size || memchr(b, '/', len))
		return -ENOENT;
	memcpy(name, b, len + 1);
	/* elf_getdata converted nothing here (the section is bytes): read in the file's order. */
	if (elf_getident(e, NULL)[EI_DATA] == ELFDATA2MSB)
		*crc = (uint32_t)b[crc_off] << 24 | (uint32_t)b[crc_off + 1] << 16 |
		       (uint32_t)b[crc_off + 2] << 8 | b[crc_off + 3];
	else
		*crc = (uint32_t)b[crc_off + 3] << 24 | (uint32_t)b[crc_off + 2] << 16 |
		       (uint32_t)b[crc_off + 1] << 8 | b[crc_off];
	return 0;
}

int elf_find_debug(Elf *e, const char *build_id, const struct elf_debug_ctx *dbg,
		   elf_debug_use_fn use, void *arg, char *found, size_t found_sz)
{
	char link[NAME_MAX + 1], dir[PATH_MAX];
	uint32_t crc;
	char *slash;
	int i, n;

	if (!dbg || !dbg->debug_root)
		return -ENOENT;
	if (build_id[0] && build_id[1] && build_id[2]) {
		n = snprintf(found, found_sz, "%s/.build-id/%.2s/%s.debug", dbg->debug_root,
			     build_id, build_id + 2);
		if (n > 0 && (size_t)n < found_sz && !try_debug_file(found, build_id, 0, use, arg))
			return 0;
	}
	if (!dbg->path || dbg->path[0] != '/' || read_debuglink(e, link, sizeof(link), &crc))
		return -ENOENT;
	if (strlen(dbg->path) >= sizeof(dir))
		return -ENOENT;
	strcpy(dir, dbg->path);
	slash = strrchr(dir, '/');
	*slash = '\0'; /* "" for a file in "/" */
	for (i = 0; i < 3; i++) {
		if (i == 0)
			n = snprintf(found, found_sz, "%s%s/%s", dbg->fs_root ? dbg->fs_root : "",
				     dir, link);
		else if (i == 1)
			n = snprintf(found, found_sz, "%s%s/.debug/%s",
				     dbg->fs_root ? dbg->fs_root : "", dir, link);
		else
			n = snprintf(found, found_sz, "%s%s/%s", dbg->debug_root, dir, link);
		if (n > 0 && (size_t)n < found_sz && !try_debug_file(found, NULL, crc, use, arg))
			return 0;
	}
	return -ENOENT;
}

/* The size of the file open on fd, for the index's bounds. */
static int fd_source(int fd, struct sym_source *src)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	*src = (struct sym_source){.fd = fd, .size = (uint64_t)st.st_size};
	return 0;
}

/* elf_debug_use_fn of the symbolizer: an index of the debug file's .symtab into arg. */
static int use_debug_symtab(void *arg, Elf *e, int fd)
{
	struct sym_index **ix = arg;
	struct sym_source src;
	int err;

	err = fd_source(fd, &src);
	if (!err)
		err = sym_index__build(ix, e, SHT_SYMTAB, &src);
	if (!err && !*ix)
		err = -ENOENT;
	return err;
}

static int load_phdrs(struct elf_image *img, Elf *e)
{
	size_t i, phnum;
	GElf_Phdr ph;

	if (elf_getphdrnum(e, &phnum) || phnum > LOADS_MAX)
		return -EINVAL;
	img->loads = calloc(phnum ? phnum : 1, sizeof(*img->loads));
	if (!img->loads)
		return -ENOMEM;
	for (i = 0; i < phnum; i++) {
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (ph.p_offset + ph.p_filesz < ph.p_offset || ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
			continue;
		img->loads[img->n_loads++] = (struct elf_load){
		    .offset = ph.p_offset,
		    .filesz = ph.p_filesz,
		    .memsz = ph.p_memsz,
		    .vaddr = ph.p_vaddr,
		};
	}
	return img->n_loads ? 0 : -EINVAL;
}

static int image_from_elf(struct elf_image *img, Elf *e, const struct elf_debug_ctx *dbg,
			  const char *name, const struct sym_source *src)
{
	char found[PATH_MAX];
	GElf_Ehdr eh;
	int err;

	memset(img, 0, sizeof(*img));
	if (elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN))
		return -EINVAL;
	err = load_phdrs(img, e);
	if (err)
		goto err;
	elf_build_id(e, img->build_id);

	err = sym_index__build(&img->ix, e, SHT_SYMTAB, src);
	if (err == -ENOMEM || err == -E2BIG)
		goto err;
	if (!err && img->ix) {
		img->source = ELF_SYMS_SYMTAB;
		pr_debug("symbolize: %s: using .symtab", name);
		goto done;
	}
	if (!elf_find_debug(e, img->build_id, dbg, use_debug_symtab, &img->ix, found,
			    sizeof(found))) {
		img->source = ELF_SYMS_DEBUG_SYMTAB;
		img->debug_path = strdup(found); /* for its .debug_frame, later; NULL is fine */
		pr_info("symbolize: %s: no .symtab, using .symtab of %s", name, found);
		goto done;
	}
	err = sym_index__build(&img->ix, e, SHT_DYNSYM, src);
	if (err == -ENOMEM || err == -E2BIG)
		goto err;
	if (!err && img->ix) {
		img->source = ELF_SYMS_DYNSYM;
		pr_info("symbolize: %s: no .symtab, using .dynsym", name);
		goto done;
	}
	pr_info("symbolize: %s: no symbols", name);
done:
	/* From the file itself: a debug file's .plt has no contents. */
	err = elf_add_plt_syms(&img->plt, &img->plt_ix, e, img->ix,
			       img->source != ELF_SYMS_DEBUG_SYMTAB, src);
	if (err < 0)
		goto err;
	if (err > 0)
		sym_table__finish(&img->plt);
	return 0;
err:
	elf_image__fini(img);
	return err;
}

int elf_image__load(struct elf_image *img, int fd, const struct elf_debug_ctx *dbg)
{
	struct sym_source src;
	Elf *e;
	int err;

	elf_init();
	memset(img, 0, sizeof(*img));
	err = fd_source(fd, &src);
	if (err)
		return err;
	/* ELF_C_READ reads on demand with pread: a file truncated under us fails reads, whereas a
	 * mapping of it would fault. Only headers go through libelf; the symbols are streamed. */
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return -EINVAL;
	err = image_from_elf(img, e, dbg, dbg && dbg->path ? dbg->path : "?", &src);
	elf_end(e);
	return err;
}

int elf_image__load_mem(struct elf_image *img, const void *mem, size_t size, const char *name)
{
	struct sym_source src = {.fd = -1, .mem = mem, .size = size};
	char *copy;
	Elf *e;
	int err;

	elf_init();
	memset(img, 0, sizeof(*img));
	/* libelf wants writable memory; the vdso is not. Names are read from mem itself. */
	copy = malloc(size);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, mem, size);
	e = elf_memory(copy, size);
	if (!e) {
		free(copy);
		return -EINVAL;
	}
	err = image_from_elf(img, e, NULL, name, &src);
	elf_end(e);
	free(copy);
	return err;
}

const char *elf_image__symbol(const struct elf_image *img, struct name_cache *names, uint64_t vaddr)
{
	struct sym_entry *p = sym_table__find(&img->plt, vaddr);
	long i;

	if (p)
		return sym_table__name(&img->plt, p);
	i = sym_index__find(img->plt_ix, vaddr);
	if (i >= 0)
		return name_cache__get(names, img->plt_ix, (size_t)i);
	i = sym_index__find(img->ix, vaddr);
	return i >= 0 ? name_cache__get(names, img->ix, (size_t)i) : NULL;
}

uint64_t elf_image__bytes(const struct elf_image *img)
{
	return sym_index__bytes(img->ix) + sym_index__bytes(img->plt_ix) +
	       (uint64_t)img->plt.cap * sizeof(*img->plt.syms) + img->plt.pool_cap +
	       (uint64_t)img->n_fdes * sizeof(*img->fdes);
}

int elf_image__vaddr(const struct elf_image *img, uint64_t file_off, uint64_t *vaddr)
{
	const struct elf_load *l;
	size_t i;

	for (i = 0; i < img->n_loads; i++) {
		l = &img->loads[i];
		if (file_off >= l->offset && file_off - l->offset < l->filesz) {
			*vaddr = file_off - l->offset + l->vaddr;
			return 0;
		}
	}
	/* The tail of the segment's last page is mapped too. */
	for (i = 0; i < img->n_loads; i++) {
		l = &img->loads[i];
		if (file_off >= l->offset && file_off - l->offset < l->memsz) {
			*vaddr = file_off - l->offset + l->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

int elf_image__load_fdes(struct elf_image *img, int fd)
{
	Elf *e, *d = NULL;
	int dfd = -1, err;

	if (img->fdes_tried)
		return img->fdes ? 0 : -ENOENT;
	img->fdes_tried = true;
	elf_init();
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return -EINVAL;
	if (img->debug_path) {
		dfd = procfs_open_regular(img->debug_path, ELF_FILE_MAX, NULL);
		if (dfd >= 0)
			d = elf_begin(dfd, ELF_C_READ, NULL);
	}
	err = cfi_fdes(e, d, &img->fdes, &img->n_fdes);
	if (d)
		elf_end(d);
	if (dfd >= 0)
		close(dfd);
	elf_end(e);
	return err;
}

bool elf_image__fde_start(const struct elf_image *img, uint64_t vaddr, uint64_t *start)
{
	const struct cfi_fde *f = cfi_fde_find(img->fdes, img->n_fdes, vaddr);

	if (!f)
		return false;
	*start = f->start;
	return true;
}

void elf_image__fini(struct elf_image *img)
{
	sym_index__free(img->ix);
	sym_index__free(img->plt_ix);
	sym_table__fini(&img->plt);
	free(img->debug_path);
	free(img->fdes);
	free(img->loads);
	memset(img, 0, sizeof(*img));
}
