// SPDX-License-Identifier: BSD-2-Clause
/*
 * The symbolizer: per-pid executable mappings (re-read on a miss, rate limited), an LRU cache of
 * ELF images keyed by the file (not the pid), perf maps for JIT code, the vdso and kallsyms.
 *
 * The hot path (maps and image cached) is a pid hash lookup, two binary searches and an LRU
 * touch: no syscalls, no allocation (a C++ name is demangled once, on its first use).
 *
 * Exited processes: their cached mappings keep resolving addresses they cover (samples are often
 * processed after the exit) until symbolizer__forget_pid(); an address they do not cover, or a
 * pid never seen, gives -ESRCH.
 */
#include "symbolize.h"

#include "hash.h"
#include "procfs.h"
#include "symbolize_elf.h"
#include "log.h"
#include "parse.h"
#include "timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_MAX_ELF_FILES 256
/* How often /proc/modules is compared, at most: kernel symbols of new modules show then. */
#define KSYMS_RECHECK_NS (10ull * 1000000000ull)
/* Symbol tables kept at most (one very large library still fits: the newest is never evicted). */
#define DEFAULT_MAX_SYM_BYTES (96ull << 20)

static uint64_t sym_table_bytes(const struct sym_table *t)
{
	return (uint64_t)t->cap * sizeof(*t->syms) + t->pool_cap;
}
#define PID_BUCKETS 1024
/* A miss re-reads maps (or stats the perf map) at most this often per pid. */
#define REREAD_INTERVAL_NS (100 * NSEC_PER_MSEC)
#define PERF_MAP_MAX (256u << 20)
#define PERF_MAP_NAME_MAX 4096

static const char module_unknown[] = "[unknown]";
static const char module_kernel[] = "[kernel.kallsyms]";
static const char module_vdso[] = "[vdso]";
static const char module_anon[] = "[anon]";

enum umap_kind {
	UMAP_FILE, /* a file we can read an ELF image from */
	UMAP_ANON, /* anonymous (JIT code): perf map */
	UMAP_VDSO,
	UMAP_SPECIAL, /* [vsyscall], anon_inode:...: nothing to read */
};

struct umap {
	uint64_t start, end, offset, inode;
	uint32_t dev_major, dev_minor;
	uint32_t gen; /* generation of slot when it was resolved */
	int32_t slot; /* ELF cache slot, -1 unresolved */
	uint8_t kind; /* enum umap_kind */
	bool deleted;
	bool open_failed; /* could not open the file: not retried until maps are re-read */
	char *path;
};

struct perf_map {
	struct sym_table syms;
	char display[40]; /* "/tmp/perf-NSPID.map", as the process names it */
	bool have_stat;
	off_t size;
	struct timespec mtime;
	uint64_t checked_ns;
};

struct pid_state {
	struct pid_state *next;
	uint32_t pid;
	int maps_err; /* the last read of maps failed with this */
	struct umap *maps;
	size_t n_maps;
	uint64_t maps_read_ns;
	struct perf_map *perf;
};

struct elf_slot {
	struct elf_image img;
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	/* Size and mtime tell a file rewritten in place (same inode) from the one we parsed. */
	uint64_t size;
	struct timespec mtime;
	uint32_t gen;	/* bumped on eviction: umaps holding an older one re-resolve */
	uint64_t bytes; /* memory of its symbol table, counted in symbolizer.bytes */
	bool used;
	bool failed; /* not a usable ELF file: a negative entry */
	int prev, next;
	char *path;
};

struct symbolizer {
	char *proc_root;
	char *debug_root;
	unsigned int max_elf;
	uint64_t max_bytes; /* symbol tables kept, in bytes, across the ELF cache */
	uint64_t bytes;	    /* symbol table bytes of the slots in use */
	struct elf_slot *slots;
	unsigned int n_used;
	int lru_head, lru_tail; /* most recently used at head */
	struct pid_state *pids[PID_BUCKETS];
	struct pid_state *last;
	struct ksyms *ksyms;
	/* Modules come and go: kallsyms is read again when /proc/modules changes. */
	uint64_t modules_sum;
	uint64_t modules_checked_ns;
	uint64_t modules_recheck_ns;
	uint64_t kernel_gen; /* bumped when kernel symbols were read again */
	bool vdso_tried, vdso_ok;
	uint64_t vdso_size;
	struct elf_image vdso;
};

/* --- ELF cache -------------------------------------------------------------------------------- */

static void lru_unlink(struct symbolizer *s, int i)
{
	struct elf_slot *e = &s->slots[i];

	if (e->prev >= 0)
		s->slots[e->prev].next = e->next;
	else
		s->lru_head = e->next;
	if (e->next >= 0)
		s->slots[e->next].prev = e->prev;
	else
		s->lru_tail = e->prev;
	e->prev = e->next = -1;
}

static void lru_push_head(struct symbolizer *s, int i)
{
	struct elf_slot *e = &s->slots[i];

	e->prev = -1;
	e->next = s->lru_head;
	if (s->lru_head >= 0)
		s->slots[s->lru_head].prev = i;
	s->lru_head = i;
	if (s->lru_tail < 0)
		s->lru_tail = i;
}

static void lru_touch(struct symbolizer *s, int i)
{
	if (s->lru_head == i)
		return;
	lru_unlink(s, i);
	lru_push_head(s, i);
}

static void slot_clear(struct symbolizer *s, struct elf_slot *e)
{
	s->bytes -= e->bytes;
	e->bytes = 0;
	elf_image__fini(&e->img);
	free(e->path);
	e->path = NULL;
	e->used = false;
	e->failed = false;
	e->gen++;
}

/* A free slot, evicting the least recently used when the cache is full. */
static int slot_take(struct symbolizer *s)
{
	unsigned int i;
	int victim;

	if (s->n_used < s->max_elf) {
		for (i = 0; i < s->max_elf; i++)
			if (!s->slots[i].used)
				break;
		s->n_used++;
		return (int)i;
	}
	victim = s->lru_tail;
	lru_unlink(s, victim);
	pr_debug("symbolize: %s: evicted from the ELF cache", s->slots[victim].path);
	slot_clear(s, &s->slots[victim]);
	return victim;
}

static int slot_find_file(struct symbolizer *s, const struct umap *m)
{
	for (unsigned int i = 0; i < s->max_elf; i++) {
		struct elf_slot *e = &s->slots[i];

		if (e->used && e->inode == m->inode && e->dev_major == m->dev_major &&
		    e->dev_minor == m->dev_minor)
			return (int)i;
	}
	return -1;
}

/*
 * An image of the same build-id with full symbols. One with only .dynsym is not shared: this
 * file may be the unstripped twin and have better ones.
 */
static int slot_find_build_id(struct symbolizer *s, const char *build_id)
{
	for (unsigned int i = 0; i < s->max_elf; i++) {
		struct elf_slot *e = &s->slots[i];

		if (e->used && !e->failed && !strcmp(e->img.build_id, build_id) &&
		    (e->img.source == ELF_SYMS_SYMTAB || e->img.source == ELF_SYMS_DEBUG_SYMTAB))
			return (int)i;
	}
	return -1;
}

/*
 * Open the file behind a mapping of pid: through the process's root (containers) when it is
 * still the same inode, else through map_files (deleted or replaced files).
 */
static int open_mapped_file(struct symbolizer *s, uint32_t pid, const struct umap *m)
{
	char path[PATH_MAX];
	struct stat st;
	int fd = -1, fd_root = -1, n;

	if (!m->deleted) {
		n = snprintf(path, sizeof(path), "%s/%u/root%s", s->proc_root, pid, m->path);
		if (n > 0 && (size_t)n < sizeof(path))
			fd_root = procfs_open_regular(path, ELF_FILE_MAX, &st);
		if (fd_root >= 0 && (uint64_t)st.st_ino == m->inode)
			return fd_root;
	}
	n = snprintf(path, sizeof(path), "%s/%u/map_files/%llx-%llx", s->proc_root, pid,
		     (unsigned long long)m->start, (unsigned long long)m->end);
	if (n > 0 && (size_t)n < sizeof(path))
		fd = procfs_open_regular(path, ELF_FILE_MAX, NULL);
	if (fd >= 0) {
		if (fd_root >= 0)
			close(fd_root);
		return fd;
	}
	/* Same path, other inode (overlay file systems report either): the best we have. */
	if (fd_root >= 0)
		return fd_root;
	if (fd_root >= 0)
		close(fd_root);
	return -ENOENT;
}

/* Find or load the ELF image of a file mapping. Returns the slot or -1. */
static int resolve_slot(struct symbolizer *s, uint32_t pid, struct umap *m)
{
	char build_id[2 * BUILD_ID_MAX + 1], root[PATH_MAX];
	struct elf_debug_ctx dbg;
	struct elf_slot *e;
	int i, fd, err;

	struct stat st;

	fd = open_mapped_file(s, pid, m);
	if (fd < 0 || fstat(fd, &st)) {
		pr_debug("symbolize: %s: cannot open for pid %u", m->path, pid);
		if (fd >= 0)
			close(fd);
		m->open_failed = true;
		return -1;
	}
	i = slot_find_file(s, m);
	if (i >= 0) {
		e = &s->slots[i];
		if (e->size == (uint64_t)st.st_size && e->mtime.tv_sec == st.st_mtim.tv_sec &&
		    e->mtime.tv_nsec == st.st_mtim.tv_nsec) {
			close(fd);
			goto found;
		}
		/* Rewritten in place since we parsed it: those symbols are stale. */
		pr_debug("symbolize: %s: changed on disk, reloading", m->path);
		lru_unlink(s, i);
		slot_clear(s, e);
		s->n_used--;
	}
	if (!elf_read_build_id_fd(fd, build_id)) {
		i = slot_find_build_id(s, build_id);
		if (i >= 0) {
			close(fd);
			goto found;
		}
	}
	i = slot_take(s);
	e = &s->slots[i];
	e->used = true;
	e->inode = m->inode;
	e->dev_major = m->dev_major;
	e->dev_minor = m->dev_minor;
	e->size = (uint64_t)st.st_size;
	e->mtime = st.st_mtim;
	e->path = strdup(m->path);
	snprintf(root, sizeof(root), "%s/%u/root", s->proc_root, pid);
	dbg = (struct elf_debug_ctx){
	    .debug_root = s->debug_root,
	    .fs_root = root,
	    .path = m->path,
	};
	err = elf_image__load(&e->img, fd, &dbg);
	close(fd);
	if (err) {
		/* Kept as a negative entry so that we do not parse it again for every sample. */
		pr_info("symbolize: %s: not a usable ELF file (%s)", m->path, strerror(-err));
		e->failed = true;
	}
	e->bytes = sym_table_bytes(&e->img.syms);
	s->bytes += e->bytes;
	lru_push_head(s, i);
	/* Big symbol tables (a libLLVM, a libtorch) are what the memory bound is about. */
	while (s->bytes > s->max_bytes && s->lru_tail != i) {
		int victim = s->lru_tail;

		lru_unlink(s, victim);
		pr_debug("symbolize: %s: evicted from the ELF cache (%llu bytes of symbols kept)",
			 s->slots[victim].path, (unsigned long long)s->bytes);
		slot_clear(s, &s->slots[victim]);
		s->n_used--;
	}
found:
	m->slot = i;
	m->gen = s->slots[i].gen;
	return i;
}

/* --- pids and maps ---------------------------------------------------------------------------- */

static void free_umaps(struct umap *maps, size_t n)
{
	for (size_t i = 0; i < n && maps; i++)
		free(maps[i].path);
	free(maps);
}

static void perf_map_free(struct perf_map *pm)
{
	if (!pm)
		return;
	sym_table__fini(&pm->syms);
	free(pm);
}

static void pid_state_free(struct pid_state *ps)
{
	if (!ps)
		return;
	free_umaps(ps->maps, ps->n_maps);
	perf_map_free(ps->perf);
	free(ps);
}

static enum umap_kind classify(const struct proc_map *pm)
{
	if (!strcmp(pm->path, "[vdso]"))
		return UMAP_VDSO;
	if (pm->path[0] == '\0' || !strncmp(pm->path, "[anon:", 6) ||
	    !strncmp(pm->path, "/memfd:", 7))
		return UMAP_ANON;
	if (pm->path[0] == '/' && pm->inode)
		return UMAP_FILE;
	return UMAP_SPECIAL;
}

/* Re-read the executable mappings of ps. On failure the old ones stay. */
static int read_maps(struct symbolizer *s, struct pid_state *ps, uint64_t now)
{
	struct proc_map *pm = NULL;
	struct umap *um;
	size_t n = 0, i;
	int err;

	ps->maps_read_ns = now;
	err = procfs_read_maps(s->proc_root, ps->pid, true, &pm, &n);
	ps->maps_err = err;
	if (err)
		return err;
	um = calloc(n ? n : 1, sizeof(*um));
	if (!um) {
		procfs_free_maps(pm, n);
		ps->maps_err = -ENOMEM;
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		um[i] = (struct umap){
		    .start = pm[i].start,
		    .end = pm[i].end,
		    .offset = pm[i].offset,
		    .inode = pm[i].inode,
		    .dev_major = pm[i].dev_major,
		    .dev_minor = pm[i].dev_minor,
		    .slot = -1,
		    .kind = (uint8_t)classify(&pm[i]),
		    .deleted = pm[i].deleted,
		    .path = pm[i].path,
		};
		pm[i].path = NULL;
	}
	procfs_free_maps(pm, n);
	free_umaps(ps->maps, ps->n_maps);
	ps->maps = um;
	ps->n_maps = n;
	return 0;
}

static struct pid_state *pid_find(struct symbolizer *s, uint32_t pid)
{
	struct pid_state *ps;

	if (s->last && s->last->pid == pid)
		return s->last;
	for (ps = s->pids[pid % PID_BUCKETS]; ps; ps = ps->next)
		if (ps->pid == pid)
			break;
	if (ps)
		s->last = ps;
	return ps;
}

static struct pid_state *pid_new(struct symbolizer *s, uint32_t pid)
{
	struct pid_state *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	ps->pid = pid;
	ps->next = s->pids[pid % PID_BUCKETS];
	s->pids[pid % PID_BUCKETS] = ps;
	read_maps(s, ps, mono_ns());
	s->last = ps;
	return ps;
}

static struct umap *map_find(struct pid_state *ps, uint64_t addr)
{
	size_t lo = 0, hi = ps->n_maps, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ps->maps[mid].end <= addr)
			lo = mid + 1;
		else if (ps->maps[mid].start > addr)
			hi = mid;
		else
			return &ps->maps[mid];
	}
	return NULL;
}

void symbolizer__forget_pid(struct symbolizer *s, uint32_t pid)
{
	struct pid_state **pp, *ps;

	if (!s)
		return;
	for (pp = &s->pids[pid % PID_BUCKETS]; (ps = *pp); pp = &ps->next) {
		if (ps->pid == pid) {
			*pp = ps->next;
			if (s->last == ps)
				s->last = NULL;
			pid_state_free(ps);
			return;
		}
	}
}

/* --- perf maps -------------------------------------------------------------------------------- */

/* "START SIZE NAME" in hex (0x optional). Returns 0 or -EINVAL. */
static int perf_map_line(char *line, uint64_t *start, uint64_t *size, char **name)
{
	char *p = line, *sp;
	int i;

	for (i = 0; i < 2; i++) {
		sp = strchr(p, ' ');
		if (!sp)
			return -EINVAL;
		*sp = '\0';
		if (parse_hex_u64(p, i ? size : start))
			return -EINVAL;
		p = sp + 1;
	}
	sp = p + strlen(p);
	while (sp > p && (sp[-1] == '\r' || sp[-1] == ' ' || sp[-1] == '\t'))
		*--sp = '\0';
	if (!*p || sp - p > PERF_MAP_NAME_MAX || !*size || *start + *size < *start)
		return -EINVAL;
	*name = p;
	return 0;
}

static int perf_map_load(struct perf_map *pm, int fd)
{
	struct sym_table t = {0};
	uint64_t start, size;
	char *buf, *line, *nl, *name;
	size_t len;
	int err;

	err = procfs_read_fd(fd, PERF_MAP_MAX, &buf, &len);
	if (err)
		return err;
	for (line = buf; line < buf + len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(buf + len - line));
		if (!nl)
			nl = buf + len;
		*nl = '\0';
		if (perf_map_line(line, &start, &size, &name))
			continue;
		err = sym_table__add(&t, start, size, name, 0);
		if (err == -ENOMEM || err == -E2BIG)
			break;
		err = 0;
	}
	free(buf);
	if (err) {
		sym_table__fini(&t);
		return err;
	}
	/* A later line for the same start is newer code: sym_table keeps the later one. */
	sym_table__finish(&t);
	sym_table__fini(&pm->syms);
	pm->syms = t;
	return 0;
}

/*
 * Open the perf map of ps as the process names it, in its own root, following no link (a user
 * could link it to a file only root may read), and trust it only when the process's own user
 * owns it: the daemon runs as root and must not read what another user planted under that name.
 */
static int perf_map_open(struct symbolizer *s, struct pid_state *ps, const char *name, uid_t owner,
			 struct stat *st)
{
	int fd = procfs_open_in_root(s->proc_root, ps->pid, name, PERF_MAP_MAX, st);

	if (fd >= 0 && st->st_uid != owner) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* Stat the perf map of ps; reload it when it changed. */
static void perf_map_refresh(struct symbolizer *s, struct pid_state *ps, uint64_t now)
{
	char path[PATH_MAX];
	struct perf_map *pm = ps->perf;
	uint32_t nspid = ps->pid;
	struct stat st, pst;
	int n, fd;

	if (!pm) {
		pm = calloc(1, sizeof(*pm));
		if (!pm)
			return;
		if (procfs_read_nspid(s->proc_root, ps->pid, &nspid))
			nspid = ps->pid;
		snprintf(pm->display, sizeof(pm->display), "/tmp/perf-%u.map", nspid);
		ps->perf = pm;
	} else if (now - pm->checked_ns < REREAD_INTERVAL_NS) {
		return;
	}
	pm->checked_ns = now;
	/* The owner of /proc/PID's files: the effective uid while dumpable, else root. */
	n = snprintf(path, sizeof(path), "%s/%u/stat", s->proc_root, ps->pid);
	if (n <= 0 || (size_t)n >= sizeof(path) || stat(path, &pst))
		return;
	fd = perf_map_open(s, ps, pm->display, pst.st_uid, &st);
	if (fd < 0)
		return;
	if (pm->have_stat && st.st_size == pm->size && st.st_mtim.tv_sec == pm->mtime.tv_sec &&
	    st.st_mtim.tv_nsec == pm->mtime.tv_nsec) {
		close(fd);
		return;
	}
	if (!perf_map_load(pm, fd)) {
		pm->have_stat = true;
		pm->size = st.st_size;
		pm->mtime = st.st_mtim;
	}
	close(fd);
}

/* --- lookups ---------------------------------------------------------------------------------- */

static void vdso_load(struct symbolizer *s)
{
	struct proc_map *pm = NULL;
	unsigned long base;
	size_t n = 0, i;

	s->vdso_tried = true;
	base = getauxval(AT_SYSINFO_EHDR);
	if (!base || procfs_read_maps("/proc", (uint32_t)getpid(), false, &pm, &n))
		return;
	/* Every process of our ABI maps the same vdso image; ours is readable without syscalls. */
	for (i = 0; i < n; i++) {
		if (pm[i].start == base && !strcmp(pm[i].path, "[vdso]")) {
			s->vdso_size = pm[i].end - pm[i].start;
			s->vdso_ok = !elf_image__load_mem(&s->vdso, (const void *)base,
							  (size_t)s->vdso_size, module_vdso);
			break;
		}
	}
	procfs_free_maps(pm, n);
}

static void resolve_image(struct elf_image *img, uint64_t file_off, struct sym_result *out)
{
	struct sym_entry *e;
	uint64_t vaddr;

	if (elf_image__vaddr(img, file_off, &vaddr)) {
		out->address = file_off;
		return;
	}
	out->address = vaddr;
	e = sym_table__find(&img->syms, vaddr);
	if (e)
		out->name = sym_table__name(&img->syms, e);
	out->build_id = img->build_id[0] ? img->build_id : NULL;
}

int symbolizer__user(struct symbolizer *s, uint32_t pid, uint64_t addr, struct sym_result *out)
{
	struct pid_state *ps;
	struct elf_slot *e;
	struct sym_entry *se;
	struct umap *m;
	uint64_t now, file_off;
	int i;

	*out = (struct sym_result){.module = module_unknown, .address = addr};
	ps = pid_find(s, pid);
	if (!ps) {
		ps = pid_new(s, pid);
		if (!ps)
			return -ENOMEM;
	}
	m = map_find(ps, addr);
	if (!m) {
		now = mono_ns();
		if (now - ps->maps_read_ns >= REREAD_INTERVAL_NS && !read_maps(s, ps, now))
			m = map_find(ps, addr);
		if (!m)
			return ps->maps_err == -ESRCH ? -ESRCH : 0;
	}
	out->module = m->path;
	file_off = addr - m->start + m->offset;
	switch (m->kind) {
	case UMAP_FILE:
		/* Without an image, module + file offset still names the place. */
		out->address = file_off;
		i = m->slot;
		if (i < 0 || s->slots[i].gen != m->gen) {
			if (m->open_failed)
				break;
			i = resolve_slot(s, pid, m);
			if (i < 0)
				break;
		}
		e = &s->slots[i];
		lru_touch(s, i);
		if (e->failed)
			break;
		resolve_image(&e->img, file_off, out);
		break;
	case UMAP_VDSO:
		out->module = module_vdso;
		if (!s->vdso_tried)
			vdso_load(s);
		if (s->vdso_ok && s->vdso_size == m->end - m->start)
			resolve_image(&s->vdso, addr - m->start, out);
		else
			out->address = addr - m->start;
		break;
	case UMAP_ANON:
		if (!m->path[0])
			out->module = module_anon;
		se = ps->perf ? sym_table__find(&ps->perf->syms, addr) : NULL;
		if (!se) {
			perf_map_refresh(s, ps, mono_ns());
			se = ps->perf ? sym_table__find(&ps->perf->syms, addr) : NULL;
		}
		if (se) {
			out->name = sym_table__name(&ps->perf->syms, se);
			out->module = ps->perf->display;
		}
		break;
	default:
		break;
	}
	return 0;
}

/* A checksum of /proc/modules (names, sizes, load addresses); 0 when unreadable. */
static uint64_t modules_sum(const struct symbolizer *s)
{
	char path[PATH_MAX], *buf;
	uint64_t h;
	size_t len;

	snprintf(path, sizeof(path), "%s/modules", s->proc_root);
	if (procfs_read_file(path, 4u << 20, &buf, &len))
		return 0;
	h = hash_bytes(buf, len);
	free(buf);
	return h;
}

static void kernel_refresh(struct symbolizer *s)
{
	char path[PATH_MAX];
	uint64_t now = mono_ns(), sum;
	struct ksyms *k;

	if (now - s->modules_checked_ns < s->modules_recheck_ns)
		return;
	s->modules_checked_ns = now;
	sum = modules_sum(s);
	if (sum == s->modules_sum)
		return;
	snprintf(path, sizeof(path), "%s/kallsyms", s->proc_root);
	k = ksyms__load(path);
	if (!k)
		return;
	pr_debug("symbolize: kernel modules changed: %zu kernel text symbols", ksyms__count(k));
	ksyms__free(s->ksyms);
	s->ksyms = k;
	s->modules_sum = sum;
	s->kernel_gen++;
}

uint64_t symbolizer__kernel_generation(const struct symbolizer *s)
{
	return s->kernel_gen;
}

int symbolizer__kernel(struct symbolizer *s, uint64_t addr, struct sym_result *out)
{
	if (s->ksyms)
		kernel_refresh(s);
	*out = (struct sym_result){.module = module_kernel, .address = addr};
	if (s->ksyms && ksyms__find(s->ksyms, addr, &out->name, &out->module))
		out->name = NULL;
	return 0;
}

bool symbolizer__has_kernel(const struct symbolizer *s)
{
	return s && ksyms__count(s->ksyms) > 0;
}

/* --- life cycle ------------------------------------------------------------------------------- */

struct symbolizer *symbolizer__new(const struct symbolizer_opts *opts)
{
	struct symbolizer_opts o = opts ? *opts : (struct symbolizer_opts){0};
	char path[PATH_MAX];
	struct symbolizer *s;
	int err = -ENOMEM;

	s = calloc(1, sizeof(*s));
	if (!s)
		goto err;
	s->proc_root = strdup(o.proc_root ? o.proc_root : "/proc");
	s->debug_root = strdup(o.debug_root ? o.debug_root : "/usr/lib/debug");
	s->max_elf = o.max_elf_files ? o.max_elf_files : DEFAULT_MAX_ELF_FILES;
	s->max_bytes = o.max_sym_bytes ? o.max_sym_bytes : DEFAULT_MAX_SYM_BYTES;
	s->modules_recheck_ns = o.kernel_recheck_ns ? o.kernel_recheck_ns : KSYMS_RECHECK_NS;
	if (s->max_elf > INT32_MAX / 2) {
		err = -EINVAL;
		goto err;
	}
	s->slots = calloc(s->max_elf, sizeof(*s->slots));
	if (!s->proc_root || !s->debug_root || !s->slots)
		goto err;
	for (unsigned int i = 0; i < s->max_elf; i++) {
		s->slots[i].prev = s->slots[i].next = -1;
		s->slots[i].gen = 1;
	}
	s->lru_head = s->lru_tail = -1;
	if (!o.no_kernel) {
		snprintf(path, sizeof(path), "%s/kallsyms", s->proc_root);
		s->ksyms = ksyms__load(path);
		if (!s->ksyms)
			pr_info("symbolize: %s: no kernel symbols (%s)", path,
				errno == EPERM ? "addresses hidden by kptr_restrict"
					       : strerror(errno));
		else
			pr_debug("symbolize: %s: %zu kernel text symbols", path,
				 ksyms__count(s->ksyms));
		s->modules_sum = modules_sum(s);
		s->modules_checked_ns = mono_ns();
	}
	return s;
err:
	symbolizer__free(s);
	errno = -err;
	return NULL;
}

void symbolizer__free(struct symbolizer *s)
{
	struct pid_state *ps, *next;

	if (!s)
		return;
	for (size_t b = 0; b < PID_BUCKETS; b++) {
		for (ps = s->pids[b]; ps; ps = next) {
			next = ps->next;
			pid_state_free(ps);
		}
	}
	for (unsigned int i = 0; s->slots && i < s->max_elf; i++)
		if (s->slots[i].used)
			slot_clear(s, &s->slots[i]);
	free(s->slots);
	ksyms__free(s->ksyms);
	elf_image__fini(&s->vdso);
	free(s->proc_root);
	free(s->debug_root);
	free(s);
}
