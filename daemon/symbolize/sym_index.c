// SPDX-License-Identifier: BSD-2-Clause
/* Compact symbol indexes with names read on demand, and their name cache: see sym_index.h. */
#include "sym_index.h"

#include "demangle.h"
#include "fdio.h"
#include "grow.h"
#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Longest name read; a longer one is shown as no name. */
#define SYM_NAME_MAX 8192
/* Bytes read first for a name: most are shorter, a long C++ name needs a second read. */
#define NAME_FIRST_READ 256
#define SYMS_PER_FILE_MAX (16u << 20)
/* Symbols converted per read while the table is streamed. */
#define SYMS_PER_CHUNK 2048
/* How many preceding functions a lookup looks through for one enclosing a nested symbol. */
#define SYM_ENCLOSE_LOOKBACK 4

/* 12 bytes: what the index keeps of one function. */
struct sym_ix_ent {
	uint32_t off;  /* start - base */
	uint32_t size; /* 0: unknown, covers up to the next; clamped to 4 GiB */
	uint32_t name; /* offset in the string table */
};

/* A symbol while the index is built: sorted by address, then rank, then order. */
struct sym_build {
	uint64_t addr;
	uint32_t size, name;
	uint32_t key; /* rank << 24 | order of the symbol in the table */
};

/*
 * The descriptor names are read through, shared by the indexes of one file (its functions and
 * its PLT stubs): a daemon with 256 files cached keeps 256 descriptors, not twice as many.
 */
struct sym_file {
	int fd;
	unsigned int refs;
};

struct sym_index {
	uint64_t serial; /* never reused: the name cache's key */
	uint64_t base;
	struct sym_ix_ent *e;
	size_t n;
	struct sym_file *file; /* NULL when the names are in memory */
	int fd;		       /* file->fd, or -1 */
	const char *mem;
	uint64_t src_size;
	uint64_t str_off, str_size;
	bool plt; /* names are shown as "NAME@plt" */
};

static atomic_uint_fast64_t index_serial;

/* Read up to len bytes at off. Returns the bytes read (short at the end) or a negative errno. */
static ssize_t src_read(int fd, const char *mem, uint64_t size, void *buf, size_t len, uint64_t off)
{
	if (off >= size)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	if (mem) {
		memcpy(buf, mem + off, len);
		return (ssize_t)len;
	}
	/* Short when the file shrank since it was opened. */
	return fd_pread_full(fd, buf, len, off);
}

static int build_cmp(const void *pa, const void *pb)
{
	const struct sym_build *a = pa, *b = pb;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return a->key < b->key ? -1 : a->key > b->key;
}

/* The symbol section of type and its string table, both inside the source. */
static int find_tables(Elf *e, unsigned int type, uint64_t size, GElf_Shdr *sym, GElf_Shdr *str)
{
	Elf_Scn *scn = NULL, *s;

	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, sym))
			return -EINVAL;
		if (sym->sh_type == type && sym->sh_size)
			break;
	}
	if (!scn)
		return -ENOENT;
	s = elf_getscn(e, sym->sh_link);
	if (!s || !gelf_getshdr(s, str) || str->sh_type != SHT_STRTAB)
		return -EINVAL;
	if (sym->sh_offset > size || sym->sh_size > size - sym->sh_offset ||
	    str->sh_offset > size || str->sh_size > size - str->sh_offset)
		return -EINVAL;
	return 0;
}

/* Append the function symbols of n converted entries (class 32 or 64) to *v. */
static int take_syms(const void *conv, size_t n, bool is64, uint64_t str_size, size_t first,
		     struct sym_build **v, size_t *nv, size_t *cap)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t value, size;
		uint32_t name;
		unsigned char info;
		uint16_t shndx;
		int type, bind, rank;

		if (is64) {
			const Elf64_Sym *s = (const Elf64_Sym *)conv + i;

			value = s->st_value, size = s->st_size, name = s->st_name;
			info = s->st_info, shndx = s->st_shndx;
		} else {
			const Elf32_Sym *s = (const Elf32_Sym *)conv + i;

			value = s->st_value, size = s->st_size, name = s->st_name;
			info = s->st_info, shndx = s->st_shndx;
		}
		type = GELF_ST_TYPE(info);
		bind = GELF_ST_BIND(info);
		if (first + i == 0 || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    shndx == SHN_UNDEF || !value || !name || name >= str_size)
			continue;
		if (*nv >= SYMS_PER_FILE_MAX)
			return -E2BIG;
		if (GROW(*v, *cap, *nv + 1))
			return -ENOMEM;
		rank = (bind == STB_GLOBAL ? 3 : bind == STB_WEAK ? 2 : 1) * 2 + (size != 0);
		(*v)[*nv] = (struct sym_build){
		    .addr = value,
		    .size = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size,
		    .name = name,
		    .key = (uint32_t)rank << 24 | (uint32_t)*nv,
		};
		(*nv)++;
	}
	return 0;
}

/*
 * Sort, keep the preferred alias at each address (the best ranked, then the later), and pack
 * into 12-byte entries in the same memory. Returns the entries kept.
 */
static size_t pack(struct sym_build *v, size_t n, uint64_t *base)
{
	struct sym_ix_ent *out = (struct sym_ix_ent *)v;
	size_t i, k = 0;

	qsort(v, n, sizeof(*v), build_cmp);
	*base = n ? v[0].addr : 0;
	for (i = 0; i < n; i++) {
		struct sym_build b = v[i];
		struct sym_ix_ent x;

		if (i + 1 < n && v[i + 1].addr == b.addr)
			continue;
		if (b.addr - *base > UINT32_MAX)
			break; /* a file spanning over 4 GiB of addresses: the rest is left out */
		x = (struct sym_ix_ent){(uint32_t)(b.addr - *base), b.size, b.name};
		/* Entry k ends at 12 (k + 1) <= 24 i: below v[i], which is already read. */
		memcpy(&out[k++], &x, sizeof(x));
	}
	return k;
}

/*
 * The index of the n symbols of v (taken: freed or kept), names in the string table at str_off
 * (str_size bytes) of src. Returns 0 with *out (NULL when n is 0) or a negative errno.
 */
static int finish(struct sym_index **out, struct sym_build *v, size_t n,
		  const struct sym_source *src, uint64_t str_off, uint64_t str_size,
		  const struct sym_index *same_file)
{
	struct sym_index *ix;
	uint64_t base;

	if (!n) {
		free(v);
		return 0;
	}
	ix = calloc(1, sizeof(*ix));
	if (!ix) {
		free(v);
		return -ENOMEM;
	}
	ix->n = pack(v, n, &base);
	ix->e = realloc(v, ix->n * sizeof(*ix->e));
	if (!ix->e)
		ix->e = (struct sym_ix_ent *)v; /* the shrink failed: keep the bigger block */
	ix->base = base;
	ix->serial = atomic_fetch_add(&index_serial, 1) + 1;
	ix->mem = src->mem;
	ix->src_size = src->size;
	ix->str_off = str_off;
	ix->str_size = str_size;
	ix->fd = -1;
	if (src->fd >= 0 && same_file && same_file->file) {
		ix->file = same_file->file;
		ix->file->refs++;
	} else if (src->fd >= 0) {
		ix->file = malloc(sizeof(*ix->file));
		if (!ix->file) {
			sym_index__free(ix);
			return -ENOMEM;
		}
		*ix->file = (struct sym_file){fcntl(src->fd, F_DUPFD_CLOEXEC, 3), 1};
		if (ix->file->fd < 0) {
			int err = -errno;

			sym_index__free(ix);
			return err;
		}
	}
	if (ix->file)
		ix->fd = ix->file->fd;
	*out = ix;
	return 0;
}

int sym_index__build(struct sym_index **out, Elf *e, unsigned int type,
		     const struct sym_source *src)
{
	size_t entsize = gelf_fsize(e, ELF_T_SYM, 1, EV_CURRENT), nsyms, done, chunk, n = 0,
	       cap = 0;
	bool is64 = gelf_getclass(e) == ELFCLASS64;
	void *raw = NULL, *conv = NULL;
	struct sym_build *v = NULL;
	GElf_Shdr sym, str;
	ssize_t r;
	int err;

	*out = NULL;
	if (!entsize || (src->fd < 0 && !src->mem))
		return -EINVAL;
	err = find_tables(e, type, src->size, &sym, &str);
	if (err)
		return err;
	nsyms = (size_t)(sym.sh_size / entsize);
	raw = malloc(SYMS_PER_CHUNK * entsize);
	conv = malloc(SYMS_PER_CHUNK * entsize);
	if (!raw || !conv) {
		err = -ENOMEM;
		goto out;
	}
	/* Streamed a chunk at a time: the table is never held whole. */
	for (done = 0; done < nsyms; done += chunk) {
		Elf_Data d_src = {.d_type = ELF_T_SYM, .d_version = EV_CURRENT, .d_buf = raw};
		Elf_Data d_dst = {.d_type = ELF_T_SYM, .d_version = EV_CURRENT, .d_buf = conv};

		chunk = nsyms - done < SYMS_PER_CHUNK ? nsyms - done : SYMS_PER_CHUNK;
		r = src_read(src->fd, src->mem, src->size, raw, chunk * entsize,
			     sym.sh_offset + done * entsize);
		if (r < 0 || (size_t)r != chunk * entsize) {
			err = r < 0 ? (int)r : -EIO;
			goto out;
		}
		d_src.d_size = d_dst.d_size = chunk * entsize;
		if (!gelf_xlatetom(e, &d_dst, &d_src, elf_getident(e, NULL)[EI_DATA])) {
			err = -EINVAL;
			goto out;
		}
		err = take_syms(conv, chunk, is64, str.sh_size, done, &v, &n, &cap);
		if (err)
			goto out;
	}
	err = finish(out, v, n, src, str.sh_offset, str.sh_size, NULL);
	v = NULL;
out:
	free(v);
	free(raw);
	free(conv);
	return err;
}

int sym_index__from_list(struct sym_index **out, const struct sym_list_ent *l, size_t n,
			 const struct sym_source *src, uint64_t str_off, uint64_t str_size,
			 const struct sym_index *same_file)
{
	struct sym_build *v;
	int err;

	*out = NULL;
	if (!n)
		return 0;
	if ((src->fd < 0 && !src->mem) || str_off > src->size || str_size > src->size - str_off)
		return -EINVAL;
	if (n > SYMS_PER_FILE_MAX)
		return -E2BIG;
	v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i] = (struct sym_build){l[i].addr, l[i].size, l[i].name, (uint32_t)i};
	err = finish(out, v, n, src, str_off, str_size, same_file);
	if (!err && *out)
		(*out)->plt = true;
	return err;
}

void sym_index__free(struct sym_index *ix)
{
	if (!ix)
		return;
	if (ix->file && !--ix->file->refs) {
		if (ix->file->fd >= 0)
			close(ix->file->fd);
		free(ix->file);
	}
	free(ix->e);
	free(ix);
}

size_t sym_index__count(const struct sym_index *ix)
{
	return ix ? ix->n : 0;
}

uint64_t sym_index__bytes(const struct sym_index *ix)
{
	return ix ? sizeof(*ix) + (uint64_t)ix->n * sizeof(*ix->e) : 0;
}

uint64_t sym_index__addr(const struct sym_index *ix, size_t i)
{
	return ix->base + ix->e[i].off;
}

long sym_index__find(const struct sym_index *ix, uint64_t addr)
{
	size_t lo = 0, hi, mid, i, stop;
	const struct sym_ix_ent *e;
	uint64_t off;

	if (!ix || addr < ix->base || addr - ix->base > UINT32_MAX)
		return -1;
	off = addr - ix->base;
	hi = ix->n;
	/* The first function above addr; the one before it is the candidate. */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ix->e[mid].off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	e = &ix->e[lo - 1];
	if (e->size == 0 || off - e->off < e->size)
		return (long)(lo - 1);
	/* A local label inside a bigger function must not hide that function. */
	stop = lo - 1 > SYM_ENCLOSE_LOOKBACK ? lo - 1 - SYM_ENCLOSE_LOOKBACK : 0;
	for (i = lo - 1; i-- > stop;) {
		e = &ix->e[i];
		if (e->size && off - e->off < e->size)
			return (long)i;
	}
	return -1;
}

int sym_index__name(const struct sym_index *ix, size_t i, char *buf, size_t len)
{
	uint64_t name = ix->e[i].name, max;
	size_t have;
	ssize_t r;
	char *nul, *at;

	if (len < 2 || name >= ix->str_size)
		return -ENOENT;
	/* The name ends inside the string table, within the bound and the buffer. */
	max = ix->str_size - name;
	if (max > SYM_NAME_MAX + 1)
		max = SYM_NAME_MAX + 1;
	if (max > len - 1)
		max = len - 1;
	r = src_read(ix->fd, ix->mem, ix->src_size, buf,
		     max < NAME_FIRST_READ ? (size_t)max : NAME_FIRST_READ, ix->str_off + name);
	if (r < 0)
		return -EIO;
	have = (size_t)r;
	nul = memchr(buf, '\0', have);
	if (!nul && have == NAME_FIRST_READ && max > have) {
		r = src_read(ix->fd, ix->mem, ix->src_size, buf + have, (size_t)max - have,
			     ix->str_off + name + have);
		if (r < 0)
			return -EIO;
		nul = memchr(buf + have, '\0', (size_t)r);
	}
	if (!nul || nul == buf)
		return -ENOENT;
	/*
	 * glibc's debug files name versioned functions "clock_nanosleep@@GLIBC_2.17": the version
	 * is the linker's business, not the reader's.
	 */
	at = strchr(buf, '@');
	if (at && at != buf)
		*at = '\0';
	return 0;
}

/* --- the name cache --------------------------------------------------------------------------- */

struct name_slot {
	uint64_t serial; /* 0: empty */
	uint32_t pos;
	char *name; /* NULL: the function has no readable name */
	size_t bytes;
};

struct name_cache {
	struct name_slot *slots;
	size_t nslots; /* a power of two */
	uint64_t bytes, max_bytes;
	char scratch[SYM_NAME_MAX + 2];
};

struct name_cache *name_cache__new(size_t slots, size_t max_bytes)
{
	struct name_cache *c = calloc(1, sizeof(*c));
	size_t n = 1;

	while (n < slots)
		n <<= 1;
	if (!c || !(c->slots = calloc(n, sizeof(*c->slots)))) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->nslots = n;
	c->max_bytes = max_bytes;
	return c;
}

static void slot_drop(struct name_cache *c, struct name_slot *s)
{
	c->bytes -= s->bytes;
	free(s->name);
	memset(s, 0, sizeof(*s));
}

void name_cache__free(struct name_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nslots; i++)
		free(c->slots[i].name);
	free(c->slots);
	free(c);
}

uint64_t name_cache__bytes(const struct name_cache *c)
{
	return c ? c->bytes : 0;
}

const char *name_cache__get(struct name_cache *c, const struct sym_index *ix, size_t i)
{
	struct name_slot *s =
	    &c->slots[hash_mix64(ix->serial * 0x9e3779b97f4a7c15ull ^ i) & (c->nslots - 1)];
	char *name = NULL;
	size_t bytes;

	if (s->serial == ix->serial && s->pos == i)
		return s->name;
	slot_drop(c, s);
	if (!sym_index__name(ix, i, c->scratch, sizeof(c->scratch))) {
		char *dm = demangle_is_mangled(c->scratch) ? demangle(c->scratch) : NULL;
		const char *n = dm ? dm : c->scratch;
		size_t len = strlen(n);

		/* A PLT stub is its target's name and "@plt", as objdump shows it. */
		name = malloc(len + (ix->plt ? 5 : 1));
		if (name) {
			memcpy(name, n, len + 1);
			if (ix->plt)
				memcpy(name + len, "@plt", 5);
		}
		free(dm);
		if (!name)
			return NULL; /* out of memory: shown unnamed, not cached */
	}
	bytes = name ? strlen(name) + 1 : 0;
	/* Over the bound: start afresh rather than track ages (a rare, cheap event). */
	if (c->bytes + bytes > c->max_bytes) {
		for (size_t k = 0; k < c->nslots; k++)
			slot_drop(c, &c->slots[k]);
	}
	*s = (struct name_slot){
	    .serial = ix->serial, .pos = (uint32_t)i, .name = name, .bytes = bytes};
	c->bytes += bytes;
	return name;
}
