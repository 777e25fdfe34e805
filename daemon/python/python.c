// SPDX-License-Identifier: BSD-2-Clause
/*
 * CPython support: the per-process state table, reads of the target's memory, the code-object
 * cache and symbolization of sampled frames (see python_priv.h for how the files divide).
 */
#define _GNU_SOURCE /* process_vm_readv */
#include "python_priv.h"

#include "python_lines.h"

#include <errno.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define DEFAULT_MAX_CODE 4096
/* Names are cut at this many characters, line tables over this size are not read. */
#define STR_MAX_CHARS 1024
#define LINETABLE_MAX (64u << 10)
/* Enough for any known code object head (3.13: up to co_linetable + 8 = 144). */
#define CODE_HEAD_MAX 256

/* --- target memory ------------------------------------------------------------------------- */

int python_read_mem(struct python *py, uint32_t pid, uint64_t addr, void *buf, size_t len)
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

/* What a cached code object holds, for python.mem (its strings are set before insertion). */
static uint64_t code_bytes(const struct py_code *c)
{
	return sizeof(*c) + (c->qualname ? strlen(c->qualname) + 1 : 0) +
	       (c->filename ? strlen(c->filename) + 1 : 0) + c->linetable_len;
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

/* Free p, which py holds (counted in py->mem) when held is true. */
static void proc_free(struct python *py, struct py_proc *p, bool held)
{
	struct py_code *c, *n;

	if (!p)
		return;
	if (p->buckets) {
		for (c = p->lru.lru_next; c != &p->lru; c = n) {
			n = c->lru_next;
			if (held)
				mem_sub(&py->mem.bytes, code_bytes(c));
			code_free(c);
		}
		if (held)
			mem_sub(&py->mem.bytes, p->nbuckets * sizeof(*p->buckets));
	}
	if (held) {
		mem_sub(&py->mem.bytes, sizeof(*p));
		mem_sub(&py->mem.count, 1);
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

static void code_drop(struct python *py, struct py_proc *p, struct py_code *c)
{
	struct py_code **cp = &p->buckets[code_hash(p, c->addr)];

	while (*cp != c)
		cp = &(*cp)->hnext;
	*cp = c->hnext;
	lru_unlink(c);
	p->ncode--;
	mem_sub(&py->mem.bytes, code_bytes(c));
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
		py->mem.bytes += p->nbuckets * sizeof(*p->buckets);
	}
	if (p->ncode >= py->max_code)
		code_drop(py, p, p->lru.lru_prev);
	h = code_hash(p, c->addr);
	c->hnext = p->buckets[h];
	p->buckets[h] = c;
	lru_push_front(p, c);
	p->ncode++;
	py->mem.bytes += code_bytes(c);
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
	err = python_read_mem(py, p->pid, addr, hdr, l->str_compact_data);
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
		err = python_read_mem(py, p->pid, dptr, data, n * kind);
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
	err = python_read_mem(py, p->pid, addr + l->bytes_size, hdr, sizeof(hdr));
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
		err = python_read_mem(py, p->pid, addr + l->bytes_data, b, (size_t)size);
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
	c->qualname_ptr = qual;
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

/*
 * Whether a code object whose co_filename and co_name are these is the one the sampler saw
 * (PROFD_PYF_CHECKED): when the frame was fingerprinted, the fingerprints must agree.
 */
static bool code_matches(const struct profd_py_frame *frame, uint64_t filename, uint64_t name)
{
	if (!(frame->flags & PROFD_PYF_CHECKED))
		return true;
	return frame->flags >> PROFD_PYF_CHECK_SHIFT == PROFD_PY_CODE_CHECK(filename, name);
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
	c = code_find(p, addr);
	/* One read per frame: the type and every field the cache entry depends on. */
	err = python_read_mem(py, pid, addr, head, span);
	if (err == -ESRCH) {
		/*
		 * The process exited after the sample was taken (samples arrive up to a drain
		 * interval late) and its code objects went with it. The one the cache holds for the
		 * address is what the frame pointed at when last checked, and a process that exited
		 * changed nothing since.
		 */
		if (!c)
			return -ENODATA;
		if (!code_matches(frame, c->filename_ptr, c->name_ptr))
			return -ENOENT; /* the cache holds a later code object at the address */
		lru_unlink(c);
		lru_push_front(p, c);
		goto found;
	}
	if (err == -EFAULT || err == -EIO)
		err = -ENOENT; /* unmapped: a stale or torn frame */
	if (!err && get_u64(head + l->ob_type) != p->code_type)
		err = -ENOENT;
	/* Freed since the sample, and the address holds another code object now: the frame's
	 * own is gone (the cache entry, if any, may still be right for later samples). */
	if (!err &&
	    !code_matches(frame, get_u64(head + l->co_filename), get_u64(head + l->co_name)))
		return -ENOENT;
	if (err) {
		if (c)
			code_drop(py, p, c);
		return err;
	}
	if (c && (c->first_line != (int32_t)get_u32(head + l->co_firstlineno) ||
		  c->filename_ptr != get_u64(head + l->co_filename) ||
		  c->name_ptr != get_u64(head + l->co_name) ||
		  (l->co_qualname != PROFD_PY_NO_FIELD &&
		   c->qualname_ptr != get_u64(head + l->co_qualname)) ||
		  c->linetable_ptr != get_u64(head + l->co_linetable))) {
		code_drop(py, p, c); /* the address now holds another code object */
		c = NULL;
	}
	if (c) {
		lru_unlink(c);
		lru_push_front(p, c);
	} else {
		err = code_load(py, p, addr, head, &c);
		if (err == -EFAULT || err == -EINVAL || err == -EIO)
			return -ENOENT; /* freed while we read it */
		if (err == -ESRCH)
			return -ENODATA; /* exited while we read it */
		if (err)
			return err;
	}
found:
	out->qualname = c->qualname;
	out->filename = c->filename;
	out->first_line = c->first_line > 0 ? (uint32_t)c->first_line : 0;
	out->line = code_line(l, c, frame->lasti);
	out->skip = c->skip || (frame->flags & PROFD_PYF_BOUNDARY);
	return 0;
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
		ret = python_detect_proc(py, p);
		if (ret < 0) {
			proc_free(py, p, false);
			return ret;
		}
		p->status = ret;
		*slot = p;
		py->mem.bytes += sizeof(*p);
		py->mem.count++;
	}
	if (p->status == PYTHON_SUPPORTED || p->cfg.gil_kind == PROFD_PY_GIL_DISABLED)
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
	proc_free(py, p, true);
}

uint16_t python__version(const struct python *py, uint32_t pid)
{
	const struct py_proc *p = py->procs[pid % PROC_BUCKETS];

	while (p && p->pid != pid)
		p = p->next;
	return p ? p->version : 0;
}

void python__memory(const struct python *py, struct mem_usage *out)
{
	*out = py ? py->mem : (struct mem_usage){0};
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
			proc_free(py, p, true);
		}
	}
	free(py);
}
