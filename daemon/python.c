// SPDX-License-Identifier: BSD-2-Clause
#define _GNU_SOURCE /* process_vm_readv */
#include "python.h"

#include "log.h"
#include "procfs.h"
#include "python_lines.h"
#include "python_offsets.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define DEFAULT_MAX_CODE 4096
#define PROC_BUCKETS 1024 /* chains stay short for the tens of thousands of pids a host has */
/* Names are cut at this many characters, line tables over this size are not read. */
#define STR_MAX_CHARS 1024
#define LINETABLE_MAX (64u << 10)
/* Enough for any known code object head (3.13: up to co_linetable + 8 = 144). */
#define CODE_HEAD_MAX 256
#define MAX_LOADS 16
#define SYM_NAME_MAX 64

/* One code object of a process, as read when it was first seen. */
struct py_code {
	uint64_t addr;
	/* Re-read and compared on every hit: a different object at a reused address differs. */
	int32_t first_line;
	uint64_t filename_ptr, name_ptr, linetable_ptr;
	char *qualname, *filename;
	uint8_t *linetable; /* NULL: unknown, lines are 0 */
	uint32_t linetable_len;
	bool skip;
	struct py_code *hnext;		     /* hash chain */
	struct py_code *lru_prev, *lru_next; /* most recently used first */
};

struct py_proc {
	uint32_t pid;
	int status; /* enum python_detect */
	uint16_t version;
	struct profd_py_proc cfg;
	struct py_layout layout;
	uint64_t code_type; /* &PyCode_Type in the process */
	struct py_code **buckets;
	size_t nbuckets, ncode;
	struct py_code lru; /* sentinel of the LRU list */
	struct py_proc *next;
};

struct python {
	char proc_root[PATH_MAX];
	unsigned int max_code;
	python_read_fn read_mem;
	void *read_ctx;
	struct py_proc *procs[PROC_BUCKETS];
};

/* --- target memory ------------------------------------------------------------------------- */

static int read_mem(struct python *py, uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	ssize_t n;

	if (py->read_mem)
		return py->read_mem(py->read_ctx, pid, addr, buf, len);
	n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* --- process table ------------------------------------------------------------------------- */

static struct py_proc **proc_slot(struct python *py, uint32_t pid)
{
	struct py_proc **pp = &py->procs[pid % PROC_BUCKETS];

	while (*pp && (*pp)->pid != pid)
		pp = &(*pp)->next;
	return pp;
}

static void code_free(struct py_code *c)
{
	if (!c)
		return;
	free(c->qualname);
	free(c->filename);
	free(c->linetable);
	free(c);
}

static void proc_free(struct py_proc *p)
{
	struct py_code *c, *n;

	if (!p)
		return;
	if (p->buckets) {
		for (c = p->lru.lru_next; c != &p->lru; c = n) {
			n = c->lru_next;
			code_free(c);
		}
	}
	free(p->buckets);
	free(p);
}

/* --- code cache ---------------------------------------------------------------------------- */

static size_t code_hash(const struct py_proc *p, uint64_t addr)
{
	/* Objects are 16-byte aligned; mix the rest (Fibonacci hashing). */
	return (size_t)(((addr >> 4) * 0x9e3779b97f4a7c15ull) >> 32) & (p->nbuckets - 1);
}

static struct py_code *code_find(struct py_proc *p, uint64_t addr)
{
	struct py_code *c;

	if (!p->buckets)
		return NULL;
	for (c = p->buckets[code_hash(p, addr)]; c; c = c->hnext)
		if (c->addr == addr)
			return c;
	return NULL;
}

static void lru_unlink(struct py_code *c)
{
	c->lru_prev->lru_next = c->lru_next;
	c->lru_next->lru_prev = c->lru_prev;
}

static void lru_push_front(struct py_proc *p, struct py_code *c)
{
	c->lru_next = p->lru.lru_next;
	c->lru_prev = &p->lru;
	p->lru.lru_next->lru_prev = c;
	p->lru.lru_next = c;
}

static void code_drop(struct py_proc *p, struct py_code *c)
{
	struct py_code **cp = &p->buckets[code_hash(p, c->addr)];

	while (*cp != c)
		cp = &(*cp)->hnext;
	*cp = c->hnext;
	lru_unlink(c);
	p->ncode--;
	code_free(c);
}

/* Insert c, evicting the least recently used entry when full. Returns 0 or -ENOMEM. */
static int code_insert(struct python *py, struct py_proc *p, struct py_code *c)
{
	size_t h;

	if (!p->buckets) {
		p->nbuckets = 1;
		while (p->nbuckets < py->max_code)
			p->nbuckets <<= 1;
		p->buckets = calloc(p->nbuckets, sizeof(*p->buckets));
		if (!p->buckets)
			return -ENOMEM;
		p->lru.lru_next = p->lru.lru_prev = &p->lru;
	}
	if (p->ncode >= py->max_code)
		code_drop(p, p->lru.lru_prev);
	h = code_hash(p, c->addr);
	c->hnext = p->buckets[h];
	p->buckets[h] = c;
	lru_push_front(p, c);
	p->ncode++;
	return 0;
}

/* --- strings and bytes of the target ------------------------------------------------------- */

static size_t utf8_put(char *out, uint32_t cp)
{
	/* Lone surrogates and NULs cannot travel in a C string of UTF-8. */
	if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		cp = 0xfffd;
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * Read a str object as UTF-8 (cut at STR_MAX_CHARS characters). Only compact strings, which
 * is what code objects hold. Returns 0 with *out (caller frees), -EINVAL for a string we cannot
 * read, or a read error.
 */
static int read_str(struct python *py, struct py_proc *p, uint64_t addr, char **out)
{
	const struct py_layout *l = &p->layout;
	uint8_t hdr[96], *data = NULL;
	uint32_t state, kind, cp;
	int64_t length;
	size_t n, i, o = 0;
	uint64_t dptr;
	char *s = NULL;
	int err;

	if (!addr || l->str_compact_data > sizeof(hdr))
		return -EINVAL;
	err = read_mem(py, p->pid, addr, hdr, l->str_compact_data);
	if (err)
		return err;
	state = get_u32(hdr + l->str_state);
	memcpy(&length, hdr + l->str_length, sizeof(length));
	kind = (state >> 2) & 7;
	if (!((state >> 5) & 1) || length < 0)
		return -EINVAL; /* not compact */
	if ((state >> 6) & 1) {
		if (kind != 1)
			return -EINVAL;
		dptr = addr + l->str_ascii_data;
	} else {
		if (kind != 1 && kind != 2 && kind != 4)
			return -EINVAL;
		dptr = addr + l->str_compact_data;
	}
	n = length > STR_MAX_CHARS ? STR_MAX_CHARS : (size_t)length;
	data = malloc(n * kind + 1);
	s = malloc(n * 4 + 1);
	if (!data || !s) {
		err = -ENOMEM;
		goto out;
	}
	if (n) {
		err = read_mem(py, p->pid, dptr, data, n * kind);
		if (err)
			goto out;
	}
	for (i = 0; i < n; i++) {
		if (kind == 1) {
			cp = data[i];
		} else if (kind == 2) {
			uint16_t u;

			memcpy(&u, data + 2 * i, 2);
			cp = u;
		} else {
			cp = get_u32(data + 4 * i);
		}
		o += utf8_put(s + o, cp);
	}
	s[o] = '\0';
	*out = s;
	s = NULL;
out:
	free(data);
	free(s);
	return err;
}

/* Read a bytes object of at most LINETABLE_MAX bytes. Returns 0, -E2BIG, -EINVAL or an error. */
static int read_bytes(struct python *py, struct py_proc *p, uint64_t addr, uint8_t **out,
		      uint32_t *len)
{
	const struct py_layout *l = &p->layout;
	uint8_t hdr[8], *b;
	int64_t size;
	int err;

	if (!addr)
		return -EINVAL;
	err = read_mem(py, p->pid, addr + l->bytes_size, hdr, sizeof(hdr));
	if (err)
		return err;
	memcpy(&size, hdr, sizeof(size));
	if (size < 0)
		return -EINVAL;
	if (size > LINETABLE_MAX)
		return -E2BIG;
	b = malloc(size ? (size_t)size : 1);
	if (!b)
		return -ENOMEM;
	if (size) {
		err = read_mem(py, p->pid, addr + l->bytes_data, b, (size_t)size);
		if (err) {
			free(b);
			return err;
		}
	}
	*out = b;
	*len = (uint32_t)size;
	return 0;
}

/* --- symbolization ------------------------------------------------------------------------- */

/* A new cache entry for the code object at addr whose head was just read and validated. */
static int code_load(struct python *py, struct py_proc *p, uint64_t addr, const uint8_t *head,
		     struct py_code **out)
{
	const struct py_layout *l = &p->layout;
	struct py_code *c;
	uint64_t qual;
	int err;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->addr = addr;
	c->first_line = (int32_t)get_u32(head + l->co_firstlineno);
	c->filename_ptr = get_u64(head + l->co_filename);
	c->name_ptr = get_u64(head + l->co_name);
	c->linetable_ptr = get_u64(head + l->co_linetable);
	qual = l->co_qualname != PROFD_PY_NO_FIELD ? get_u64(head + l->co_qualname) : c->name_ptr;
	err = read_str(py, p, qual, &c->qualname);
	if (err)
		goto fail;
	err = read_str(py, p, c->filename_ptr, &c->filename);
	if (err)
		goto fail;
	/* A table we cannot read costs the line only, not the frame. */
	err = read_bytes(py, p, c->linetable_ptr, &c->linetable, &c->linetable_len);
	if (err == -ENOMEM || err == -ESRCH)
		goto fail;
	/* 3.12's C-to-Python trampoline: a real code object, but no user code. */
	c->skip = strcmp(c->filename, "<shim>") == 0;
	err = code_insert(py, p, c);
	if (err)
		goto fail;
	*out = c;
	return 0;
fail:
	code_free(c);
	return err;
}

static uint32_t code_line(const struct py_layout *l, const struct py_code *c, uint32_t lasti)
{
	int32_t slasti = (int32_t)lasti;
	uint64_t addr;
	int line;

	switch (l->line_format) {
	case PY_LINES_LNOTAB:
	case PY_LINES_LINETABLE:
		/* f_lasti is -1 before the first instruction: CPython reports the first line. */
		if (slasti < 0)
			return c->first_line > 0 ? (uint32_t)c->first_line : 0;
		addr = (uint64_t)slasti;
		if (l->line_format == PY_LINES_LINETABLE)
			addr *= 2; /* code units to bytes */
		break;
	case PY_LINES_LOCATIONS:
		/* 3.11/3.12 prev_instr of a frame that has not started points one unit before. */
		if ((uint64_t)lasti + 2 == l->co_code_adaptive)
			return c->first_line > 0 ? (uint32_t)c->first_line : 0;
		if (lasti < l->co_code_adaptive)
			return 0;
		addr = (lasti - l->co_code_adaptive) / 2;
		break;
	default:
		return 0;
	}
	if (!c->linetable)
		return 0;
	line = py_line_at(l->line_format, c->linetable, c->linetable_len, c->first_line, addr);
	return line < 0 ? 0 : (uint32_t)line;
}

int python__symbolize(struct python *py, uint32_t pid, const struct profd_py_frame *frame,
		      struct py_frame_sym *out)
{
	struct profd_py_proc cfg;
	const struct py_layout *l;
	uint8_t head[CODE_HEAD_MAX];
	struct py_code *c;
	struct py_proc *p;
	uint64_t addr;
	size_t span;
	int err;

	p = *proc_slot(py, pid);
	if (!p) {
		err = python__detect(py, pid, &cfg);
		if (err < 0)
			return err;
		p = *proc_slot(py, pid);
	}
	if (!p || p->status != PYTHON_SUPPORTED)
		return -EOPNOTSUPP;
	l = &p->layout;
	addr = frame->code & ~(uint64_t)l->code_tag_mask;
	if (!addr)
		return -ENOENT;
	span = py_layout_code_span(l);
	if (span > sizeof(head))
		return -EINVAL;
	/* One read per frame: the type and every field the cache entry depends on. */
	err = read_mem(py, pid, addr, head, span);
	if (err == -EFAULT || err == -EIO)
		err = -ENOENT; /* unmapped: a stale or torn frame */
	c = code_find(p, addr);
	if (!err && get_u64(head + l->ob_type) != p->code_type)
		err = -ENOENT;
	if (err) {
		if (c)
			code_drop(p, c);
		return err;
	}
	if (c && (c->first_line != (int32_t)get_u32(head + l->co_firstlineno) ||
		  c->filename_ptr != get_u64(head + l->co_filename) ||
		  c->name_ptr != get_u64(head + l->co_name) ||
		  c->linetable_ptr != get_u64(head + l->co_linetable))) {
		code_drop(p, c); /* the address now holds another code object */
		c = NULL;
	}
	if (c) {
		lru_unlink(c);
		lru_push_front(p, c);
	} else {
		err = code_load(py, p, addr, head, &c);
		if (err == -EFAULT || err == -EINVAL || err == -EIO)
			return -ENOENT; /* freed while we read it */
		if (err)
			return err;
	}
	out->qualname = c->qualname;
	out->filename = c->filename;
	out->first_line = c->first_line > 0 ? (uint32_t)c->first_line : 0;
	out->line = code_line(l, c, frame->lasti);
	out->skip = c->skip || (frame->flags & PROFD_PYF_BOUNDARY);
	return 0;
}

/* --- detection ----------------------------------------------------------------------------- */

struct elf_load_seg {
	uint64_t offset, filesz, vaddr;
};

/* What one ELF file tells about CPython in it. Addresses are link-time (before the bias). */
struct py_elf {
	uint64_t runtime, py_version, code_type, runtime_scn;
	bool has_runtime, has_version, has_code_type, has_runtime_scn;
	bool has_interp;      /* PT_INTERP: dynamically linked */
	bool needs_libpython; /* DT_NEEDED names a libpython */
	struct elf_load_seg loads[MAX_LOADS];
	size_t n_loads;
};

/*
 * "libpython3.11.so.1.0", "libpython3.13t.so", "libpython3.7m.so" -> major, minor and whether
 * the ABI flags say free-threaded. Returns true when name is a libpython.
 */
static bool parse_libpython(const char *name, unsigned int *major, unsigned int *minor, bool *ft)
{
	const char *s = name;
	unsigned int mi = 0;

	if (strncmp(s, "libpython", 9) != 0)
		return false;
	s += 9;
	if (*s < '2' || *s > '3' || s[1] != '.')
		return false;
	*major = (unsigned int)(*s - '0');
	s += 2;
	if (*s < '0' || *s > '9')
		return false;
	while (*s >= '0' && *s <= '9' && mi < 1000)
		mi = mi * 10 + (unsigned int)(*s++ - '0');
	*ft = false;
	while (*s == 'd' || *s == 'm' || *s == 't' || *s == 'u') {
		if (*s == 't')
			*ft = true;
		s++;
	}
	if (strncmp(s, ".so", 3) != 0 || (s[3] != '\0' && s[3] != '.'))
		return false;
	*minor = mi;
	return true;
}

/* "python3.11", "python3.13t": the name of an interpreter executable. */
static bool parse_exe_name(const char *name, unsigned int *major, unsigned int *minor, bool *ft)
{
	const char *s = name;
	unsigned int mi = 0;

	if (strncmp(s, "python", 6) != 0)
		return false;
	s += 6;
	if (*s < '2' || *s > '3' || s[1] != '.')
		return false;
	*major = (unsigned int)(*s - '0');
	s += 2;
	if (*s < '0' || *s > '9')
		return false;
	while (*s >= '0' && *s <= '9' && mi < 1000)
		mi = mi * 10 + (unsigned int)(*s++ - '0');
	*ft = false;
	while (*s == 'd' || *s == 'm' || *s == 't' || *s == 'u') {
		if (*s == 't')
			*ft = true;
		s++;
	}
	if (*s)
		return false;
	*minor = mi;
	return true;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static void scan_symbols(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, struct py_elf *pe)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t i, n;
	GElf_Sym sym;
	const char *name;

	if (!data || !sh->sh_entsize)
		return;
	n = sh->sh_size / sh->sh_entsize;
	for (i = 0; i < n; i++) {
		if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(e, sh->sh_link, sym.st_name);
		if (!name || name[0] == '\0')
			continue;
		if (!pe->has_runtime && strcmp(name, "_PyRuntime") == 0) {
			pe->runtime = sym.st_value;
			pe->has_runtime = true;
		} else if (!pe->has_version && strcmp(name, "Py_Version") == 0) {
			pe->py_version = sym.st_value;
			pe->has_version = true;
		} else if (!pe->has_code_type && strcmp(name, "PyCode_Type") == 0) {
			pe->code_type = sym.st_value;
			pe->has_code_type = true;
		}
	}
}

static void scan_needed(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, struct py_elf *pe)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	unsigned int ma, mi;
	const char *name;
	GElf_Dyn dyn;
	size_t i, n;
	bool ft;

	if (!data || !sh->sh_entsize)
		return;
	n = sh->sh_size / sh->sh_entsize;
	for (i = 0; i < n; i++) {
		if (!gelf_getdyn(data, (int)i, &dyn) || dyn.d_tag == DT_NULL)
			break;
		if (dyn.d_tag != DT_NEEDED)
			continue;
		name = elf_strptr(e, sh->sh_link, dyn.d_un.d_val);
		if (name && parse_libpython(name, &ma, &mi, &ft))
			pe->needs_libpython = true;
	}
}

/*
 * Read what CPython detection needs from the ELF file at path in pid's root: PT_LOADs,
 * PT_INTERP, DT_NEEDED, the .PyRuntime section and the _PyRuntime, Py_Version and PyCode_Type
 * symbols (.dynsym, then .symtab for what is still missing). Returns 0 or a negative errno.
 */
static int scan_elf(struct python *py, uint32_t pid, const char *path, struct py_elf *pe)
{
	char full[PATH_MAX];
	Elf_Scn *scn = NULL, *symtab = NULL;
	GElf_Shdr sh, symtab_sh;
	size_t shstrndx, nph, i;
	GElf_Phdr ph;
	const char *sname;
	Elf *e = NULL;
	int fd, err = 0;

	memset(pe, 0, sizeof(*pe));
	if ((size_t)snprintf(full, sizeof(full), "%s/%u/root%s", py->proc_root, pid, path) >=
	    sizeof(full))
		return -ENAMETOOLONG;
	fd = open(full, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64 ||
	    elf_getphdrnum(e, &nph) || elf_getshdrstrndx(e, &shstrndx)) {
		err = -ENOEXEC;
		goto out;
	}
	for (i = 0; i < nph; i++) {
		if (!gelf_getphdr(e, (int)i, &ph))
			continue;
		if (ph.p_type == PT_INTERP)
			pe->has_interp = true;
		if (ph.p_type == PT_LOAD && pe->n_loads < MAX_LOADS) {
			pe->loads[pe->n_loads].offset = ph.p_offset;
			pe->loads[pe->n_loads].filesz = ph.p_filesz;
			pe->loads[pe->n_loads].vaddr = ph.p_vaddr;
			pe->n_loads++;
		}
	}
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM) {
			scan_symbols(e, scn, &sh, pe);
		} else if (sh.sh_type == SHT_SYMTAB) {
			symtab = scn;
			symtab_sh = sh;
		} else if (sh.sh_type == SHT_DYNAMIC) {
			scan_needed(e, scn, &sh, pe);
		} else {
			sname = elf_strptr(e, shstrndx, sh.sh_name);
			if (sname && strcmp(sname, ".PyRuntime") == 0 && sh.sh_addr) {
				pe->runtime_scn = sh.sh_addr;
				pe->has_runtime_scn = true;
			}
		}
	}
	/* .symtab can be large: only for an interpreter that hides symbols from .dynsym. */
	if (symtab && (pe->has_runtime || pe->has_runtime_scn) &&
	    (!pe->has_code_type || !pe->has_version))
		scan_symbols(e, symtab, &symtab_sh, pe);
out:
	if (e)
		elf_end(e);
	close(fd);
	return err;
}

/* bias = where the mapping starts - the link-time address of its file offset. */
static int load_bias(const struct py_elf *pe, const struct proc_map *m, uint64_t *bias)
{
	uint64_t page = 4096, lo;
	size_t i;

	for (i = 0; i < pe->n_loads; i++) {
		lo = pe->loads[i].offset & ~(page - 1);
		if (m->offset >= lo && m->offset < pe->loads[i].offset + pe->loads[i].filesz) {
			*bias = m->start - (pe->loads[i].vaddr - pe->loads[i].offset + m->offset);
			return 0;
		}
	}
	return -ENOEXEC;
}

/* A mapped file that may hold the interpreter, with its lowest-offset mapping. */
struct py_candidate {
	const struct proc_map *map;
	unsigned int major, minor; /* from the name; 0 when the name says nothing */
	bool ft;
	bool libpython;
};

#define MAX_CANDIDATES 8

static int exe_path(struct python *py, uint32_t pid, char *buf, size_t size)
{
	char link[PATH_MAX];
	ssize_t n;
	size_t dl = strlen(" (deleted)");

	if ((size_t)snprintf(link, sizeof(link), "%s/%u/exe", py->proc_root, pid) >= sizeof(link))
		return -ENAMETOOLONG;
	n = readlink(link, buf, size - 1);
	if (n < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	buf[n] = '\0';
	if ((size_t)n > dl && strcmp(buf + n - dl, " (deleted)") == 0)
		buf[n - dl] = '\0';
	return 0;
}

static size_t find_candidates(const struct proc_map *maps, size_t n, const char *exe,
			      struct py_candidate *cand)
{
	struct py_candidate c;
	size_t i, j, nc = 0;
	const char *b;

	for (i = 0; i < n; i++) {
		if (!maps[i].path[0] || maps[i].path[0] != '/')
			continue;
		memset(&c, 0, sizeof(c));
		c.map = &maps[i];
		b = base_name(maps[i].path);
		if (parse_libpython(b, &c.major, &c.minor, &c.ft))
			c.libpython = true;
		else if (!parse_exe_name(b, &c.major, &c.minor, &c.ft) &&
			 !(exe[0] && strcmp(maps[i].path, exe) == 0))
			continue;
		for (j = 0; j < nc; j++) {
			if (strcmp(cand[j].map->path, maps[i].path) == 0)
				break;
		}
		if (j < nc) {
			if (maps[i].offset < cand[j].map->offset)
				cand[j].map = &maps[i];
			continue;
		}
		if (nc == MAX_CANDIDATES)
			continue;
		/* A libpython holds the interpreter even when the executable links it: first. */
		if (c.libpython) {
			memmove(cand + 1, cand, nc * sizeof(*cand));
			cand[0] = c;
		} else {
			cand[nc] = c;
		}
		nc++;
	}
	return nc;
}

static void log_unsupported(uint32_t pid, unsigned int major, unsigned int minor, bool ft,
			    const char *why)
{
	if (major)
		pr_info("python: pid %u: CPython %u.%u%s is not supported%s%s: native frames only",
			pid, major, minor, ft ? "t (free-threaded)" : "", why ? ": " : "",
			why ? why : "");
	else
		pr_info("python: pid %u: CPython of unknown version%s%s: native frames only", pid,
			why ? ": " : "", why ? why : "");
}

/*
 * Decide for one candidate that holds _PyRuntime. Returns an enum python_detect value with
 * p filled, or a negative errno when the process could not be read.
 */
static int detect_in(struct python *py, struct py_proc *p, const struct py_candidate *cand,
		     const struct py_elf *pe)
{
	uint8_t dbg[PY_DEBUG_OFFSETS_MAX];
	unsigned int major = cand->major, minor = cand->minor;
	uint32_t hex = 0, dbg_hex = 0;
	uint64_t bias, runtime, v64;
	bool ft = cand->ft, dbg_ft = false;
	int err, dbg_err = -EPROTO;

	err = load_bias(pe, cand->map, &bias);
	if (err) {
		pr_warn("python: pid %u: %s: mapping not covered by a PT_LOAD", p->pid,
			cand->map->path);
		return PYTHON_NOT_PYTHON;
	}
	runtime = (pe->has_runtime ? pe->runtime : pe->runtime_scn) + bias;
	if (pe->has_version) {
		err = read_mem(py, p->pid, pe->py_version + bias, &v64, sizeof(v64));
		if (err)
			return err == -EFAULT ? -EAGAIN : err;
		hex = (uint32_t)v64;
		if ((hex >> 24) == 3) {
			major = 3;
			minor = (hex >> 16) & 0xff;
		}
	}
	/* 3.13+: the table of offsets CPython keeps for out-of-process readers. */
	if (major == 0 || (major == 3 && minor >= 13)) {
		err = read_mem(py, p->pid, runtime, dbg, sizeof(dbg));
		if (err)
			return err == -EFAULT ? -EAGAIN : err;
		dbg_err = py_layout_from_debug(dbg, sizeof(dbg), &dbg_hex, &dbg_ft, &p->layout);
		if (dbg_err != -EPROTO && major == 0 && (dbg_hex >> 24) == 3) {
			major = 3;
			minor = (dbg_hex >> 16) & 0xff;
		}
		ft = ft || dbg_ft;
	}
	if (major)
		p->version = PY_VER(major, minor);
	if (ft) {
		log_unsupported(p->pid, major, minor, true, NULL);
		return PYTHON_UNSUPPORTED;
	}
	if (!major) {
		log_unsupported(p->pid, 0, 0, false, "no Py_Version and no usable file name");
		return PYTHON_UNSUPPORTED;
	}
	if (p->version < PY_VER_MIN || p->version > PY_VER_MAX) {
		log_unsupported(p->pid, major, minor, false, NULL);
		return PYTHON_UNSUPPORTED;
	}
	if (minor >= 13) {
		if (dbg_err == 0 && (dbg_hex >> 16) != (uint32_t)(0x0300 | minor)) {
			log_unsupported(p->pid, major, minor, false,
					"_Py_DebugOffsets names another version");
			return PYTHON_UNSUPPORTED;
		}
		if (dbg_err) {
			log_unsupported(p->pid, major, minor, false,
					dbg_err == -EPROTO ? "no _Py_DebugOffsets cookie"
							   : "implausible _Py_DebugOffsets");
			return PYTHON_UNSUPPORTED;
		}
	} else if (py_layout_static(p->version, &p->layout)) {
		log_unsupported(p->pid, major, minor, false, NULL);
		return PYTHON_UNSUPPORTED;
	}
	if (!pe->has_code_type) {
		log_unsupported(p->pid, major, minor, false, "no PyCode_Type symbol");
		return PYTHON_UNSUPPORTED;
	}
	p->code_type = pe->code_type + bias;
	py_layout_to_cfg(&p->layout, runtime, &p->cfg);
	pr_debug("python: pid %u: CPython %u.%u in %s, _PyRuntime at %#llx", p->pid, major, minor,
		 cand->map->path, (unsigned long long)runtime);
	return PYTHON_SUPPORTED;
}

/* Returns an enum python_detect value with p filled, or a negative errno. */
static int detect(struct python *py, struct py_proc *p)
{
	struct py_candidate cand[MAX_CANDIDATES];
	struct proc_map *maps = NULL;
	char exe[PATH_MAX] = "";
	struct py_elf pe;
	size_t n = 0, nc, i;
	bool exe_needs_libpython = false, libpython_mapped = false;
	int err, ret = PYTHON_NOT_PYTHON;

	err = procfs_read_maps(py->proc_root, p->pid, false, &maps, &n);
	if (err)
		return err;
	err = exe_path(py, p->pid, exe, sizeof(exe));
	if (err == -ESRCH)
		goto out_err;
	nc = find_candidates(maps, n, exe, cand);
	for (i = 0; i < nc; i++)
		libpython_mapped = libpython_mapped || cand[i].libpython;
	for (i = 0; i < nc; i++) {
		if (scan_elf(py, p->pid, cand[i].map->path, &pe))
			continue;
		if (!cand[i].libpython && strcmp(cand[i].map->path, exe) == 0)
			exe_needs_libpython = pe.needs_libpython;
		if (pe.has_runtime || pe.has_runtime_scn) {
			ret = detect_in(py, p, &cand[i], &pe);
			goto out;
		}
		/* Before 3.7 there is no _PyRuntime; the name still tells the version. */
		if (cand[i].libpython || (cand[i].major && !pe.needs_libpython)) {
			p->version = PY_VER(cand[i].major, cand[i].minor);
			log_unsupported(p->pid, cand[i].major, cand[i].minor, cand[i].ft,
					"no _PyRuntime");
			ret = PYTHON_UNSUPPORTED;
			goto out;
		}
	}
	/* Caught between exec and the loader mapping libpython: ask again later. */
	if (exe_needs_libpython && !libpython_mapped)
		ret = -EAGAIN;
out:
	procfs_free_maps(maps, n);
	return ret;
out_err:
	procfs_free_maps(maps, n);
	return err;
}

int python__detect(struct python *py, uint32_t pid, struct profd_py_proc *cfg)
{
	struct py_proc **slot = proc_slot(py, pid), *p = *slot;
	int ret;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		p->pid = pid;
		ret = detect(py, p);
		if (ret < 0) {
			proc_free(p);
			return ret;
		}
		p->status = ret;
		*slot = p;
	}
	if (p->status == PYTHON_SUPPORTED)
		*cfg = p->cfg;
	else
		memset(cfg, 0, sizeof(*cfg));
	return p->status;
}

void python__forget_pid(struct python *py, uint32_t pid)
{
	struct py_proc **slot = proc_slot(py, pid), *p = *slot;

	if (!p)
		return;
	*slot = p->next;
	proc_free(p);
}

uint16_t python__version(const struct python *py, uint32_t pid)
{
	const struct py_proc *p = py->procs[pid % PROC_BUCKETS];

	while (p && p->pid != pid)
		p = p->next;
	return p ? p->version : 0;
}

struct python *python__new(const struct python_opts *opts)
{
	const char *root = opts && opts->proc_root ? opts->proc_root : "/proc";
	struct python *py;

	if (strlen(root) >= sizeof(py->proc_root)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	py = calloc(1, sizeof(*py));
	if (!py)
		return NULL;
	strcpy(py->proc_root, root);
	py->max_code = opts && opts->max_code_per_pid ? opts->max_code_per_pid : DEFAULT_MAX_CODE;
	if (py->max_code > (1u << 20))
		py->max_code = 1u << 20;
	if (opts) {
		py->read_mem = opts->read_mem;
		py->read_ctx = opts->read_ctx;
	}
	elf_version(EV_CURRENT);
	return py;
}

void python__free(struct python *py)
{
	struct py_proc *p, *n;
	size_t i;

	if (!py)
		return;
	for (i = 0; i < PROC_BUCKETS; i++) {
		for (p = py->procs[i]; p; p = n) {
			n = p->next;
			proc_free(p);
		}
	}
	free(py);
}
