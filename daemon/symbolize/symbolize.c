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

#include "grow.h"
#include "hash.h"
#include "perf_map.h"
#include "procfs.h"
#include "symbolize_elf.h"
#include "elf_worker.h"
#include "sym_index.h"
#include "cfi.h"
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
/*
 * Symbol indexes kept at most (one very large library still fits: the newest is never evicted).
 * An index holds 12 bytes a function, names stay in the files: libtorch_cpu.so's 352,824
 * functions and its PLT stubs take 4.4 MiB.
 */
#define DEFAULT_MAX_SYM_BYTES (32ull << 20)
/* Files up to this size are indexed on the caller's thread (a few ms); larger ones off it. */
#define DEFAULT_ELF_SYNC_MAX (16ull << 20)
/* Names read and demangled, kept for the addresses samples keep hitting. */
#define NAME_CACHE_SLOTS 16384
#define NAME_CACHE_BYTES (4u << 20)
#define PID_BUCKETS 1024
/* A miss re-reads maps (or stats the perf map) at most this often per pid. */
#define REREAD_INTERVAL_NS (100 * NSEC_PER_MSEC)
/*
 * A re-read that did not find the address doubles the wait before the next, up to this: the
 * stacks of a process can hold addresses no mapping covers (a stale frame pointer), and its
 * maps (thousands of lines in a PyTorch process, ~5 ms of the kernel's time to print) were
 * read again ten times a second, a fifth of the loop's time with four such processes.
 */
#define REREAD_MAX_NS (1600 * NSEC_PER_MSEC)
/* Bytes of a perf map read at most (JITs append: what lies past this is not seen). */
#define PERF_MAP_READ_MAX (256ull << 20)
/* Perf maps up to this size are read on the caller's thread (a few ms); larger ones off it. */
#define PERF_MAP_SYNC_MAX (1u << 20)
/* Symbol bytes of all perf maps (opts.max_perf_map_bytes); one map gets at most a quarter. */
#define DEFAULT_MAX_PERF_MAP_BYTES (64ull << 20)
/* What a map may always keep for the addresses samples hit, whatever the others hold. */
#define PERF_MAP_FLOOR_BYTES (256u << 10)
/* Addresses waiting for a scan, and addresses a scan did not find, per map. */
#define PERF_MAP_WANTED_MAX 1024
#define PERF_MAP_ABSENT_MAX 4096
/* A map scanned off the thread waits this many times its last scan before the next one. */
#define PERF_MAP_SCAN_GAP 10

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

/* The version of a perf map file a table was read from. */
struct perf_map_version {
	bool valid;
	uint64_t ino;
	off_t size;
	struct timespec mtime;
};

/*
 * A process's perf map. The table holds all the file's entries when they fit the budget, else
 * (sparse) only those covering addresses samples hit: each miss is noted in wanted, and the
 * next scan looks for it. An address a scan of this version of the file did not find goes to
 * absent, so that it does not cause another scan until the file changes.
 */
struct perf_map {
	struct sym_table syms;
	uint64_t bytes;	  /* perf_map__table_bytes(&syms), counted in symbolizer.perf_bytes */
	uint64_t dropped; /* entries the last scan left out, counted in symbolizer.perf_dropped */
	char display[40]; /* "/tmp/perf-NSPID.map", as the process names it */
	struct perf_map_version ver, scan_ver;
	bool sparse;
	bool queued;   /* in symbolizer.pm_queue */
	bool scanning; /* the worker scans it: scan_tag, scan_ver */
	uint64_t scan_tag;
	uint64_t checked_ns;   /* last stat */
	uint64_t next_scan_ns; /* no scan off the thread before this */
	uint64_t *wanted, *absent;
	size_t n_wanted, n_absent, cap_wanted, cap_absent;
};

struct pid_state {
	struct pid_state *next;
	uint32_t pid;
	int maps_err; /* the last read of maps failed with this */
	struct umap *maps;
	size_t n_maps;
	uint64_t maps_read_ns;
	uint64_t reread_ns; /* wait before a miss re-reads maps: REREAD_INTERVAL_NS and up */
	bool maps_stale;    /* code was mapped since maps were read: read them before a look-up */
	struct perf_map *perf;
	uint64_t bytes; /* counted in symbolizer.pid_mem: itself, its maps, its perf map's head */
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
	bool failed;	   /* not a usable ELF file: a negative entry */
	bool loading;	   /* the ELF worker loads its image: no names until it is done */
	bool fdes_loading; /* the ELF worker reads its CFI ranges */
	int prev, next;
	char *path;
};

struct symbolizer {
	char *proc_root;
	char *debug_root;
	unsigned int max_elf;
	uint64_t max_bytes; /* symbol tables kept, in bytes, across the ELF cache */
	uint64_t bytes;	    /* symbol table bytes of the slots in use */
	uint64_t sync_max;  /* files larger than this are loaded by the ELF worker */
	struct elf_worker *elf_worker;
	struct name_cache *names;
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
	/* Perf maps: tables within max_perf_bytes, large files scanned by the worker, one a time.
	 */
	uint64_t max_perf_bytes;
	uint64_t perf_bytes;   /* table bytes of every perf map */
	uint64_t perf_dropped; /* entries their last scans left out */
	uint64_t perf_scans, perf_scan_ns;
	uint32_t perf_sparse; /* maps holding only the entries samples hit */
	uint32_t scan_serial;
	struct perf_map_worker *worker;
	uint32_t *pm_queue; /* pids whose map waits for the worker (may be stale) */
	size_t n_pm_queue, cap_pm_queue;
	struct mem_usage pid_mem; /* the pid_states: symbolizer__memory() */
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
	e->loading = false;
	e->fdes_loading = false;
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
		    (e->loading || e->img.source == ELF_SYMS_SYMTAB ||
		     e->img.source == ELF_SYMS_DEBUG_SYMTAB))
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

/*
 * The image of slot i was loaded (err: elf_image__load's): account for it and keep the symbol
 * bytes within the bound, slot i aside.
 */
static void elf_install(struct symbolizer *s, int i, int err)
{
	struct elf_slot *e = &s->slots[i];

	e->loading = false;
	if (err) {
		/* Kept as a negative entry so that we do not parse it again for every sample. */
		pr_info("symbolize: %s: not a usable ELF file (%s)", e->path ? e->path : "?",
			strerror(-err));
		e->failed = true;
	}
	s->bytes -= e->bytes;
	e->bytes = elf_image__bytes(&e->img);
	s->bytes += e->bytes;
	if (e->prev < 0 && s->lru_head != i)
		lru_push_head(s, i);
	/* Big symbol tables (a libLLVM, a libtorch) are what the memory bound is about. */
	while (s->bytes > s->max_bytes && s->lru_tail >= 0 && s->lru_tail != i) {
		int victim = s->lru_tail;

		lru_unlink(s, victim);
		pr_debug("symbolize: %s: evicted from the ELF cache (%llu bytes of symbols kept)",
			 s->slots[victim].path, (unsigned long long)s->bytes);
		slot_clear(s, &s->slots[victim]);
		s->n_used--;
	}
}

/* Hand slot i's file (fd, taken on success) to the ELF worker. Returns 0 or a negative errno. */
static int elf_start_load(struct symbolizer *s, int i, int fd, const struct elf_debug_ctx *dbg)
{
	struct elf_slot *e = &s->slots[i];
	int err;

	if (!s->elf_worker && !(s->elf_worker = elf_worker__new()))
		return -ENOMEM;
	err = elf_worker__start(s->elf_worker, fd, dbg, (uint64_t)e->gen << 32 | (uint32_t)i);
	if (err)
		return err;
	e->loading = true;
	return 0;
}

/* Install the images the worker finished; with wait, wait for all of them (tests). */
static void elf_pump(struct symbolizer *s, bool wait)
{
	struct elf_worker_result res;
	struct elf_slot *e;
	uint32_t i;

	while (elf_worker__collect(s->elf_worker, &res, wait)) {
		i = (uint32_t)res.tag;
		e = i < s->max_elf ? &s->slots[i] : NULL;
		/* Evicted or replaced while it loaded: the image is nobody's. */
		if (!e || !e->used || (!e->loading && !e->fdes_loading) ||
		    e->gen != (uint32_t)(res.tag >> 32)) {
			elf_image__fini(&res.img);
			continue;
		}
		if (e->fdes_loading) {
			e->fdes_loading = false;
			e->img.fdes = res.img.fdes;
			e->img.n_fdes = res.img.n_fdes;
			res.img.fdes = NULL;
			elf_image__fini(&res.img);
			elf_install(s, (int)i, 0);
			continue;
		}
		pr_debug("symbolize: %s: %zu functions indexed (%llu KiB with the PLT's names) in "
			 "%.1f ms off the loop",
			 e->path, sym_index__count(res.img.ix),
			 (unsigned long long)(elf_image__bytes(&res.img) >> 10), res.wall_ns / 1e6);
		e->img = res.img;
		elf_install(s, (int)i, res.err);
	}
}

/* Find or load the ELF image of a file mapping. Returns the slot or -1. */
static int resolve_slot(struct symbolizer *s, uint32_t pid, struct umap *m)
{
	char build_id[2 * BUILD_ID_MAX + 1] = "", root[PATH_MAX];
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
	/*
	 * A big library (libtorch_cpu.so maps in every PyTorch process) is indexed off the loop:
	 * its addresses have no name for the half second that takes, rather than every sample
	 * and dump waiting for it (samples are symbolized as they are read from the ring buffer;
	 * the caller's address cache asks again about unnamed addresses a second later). The image
	 * keeps its build-id meanwhile, so that other processes mapping the same file share the
	 * load.
	 */
	memcpy(e->img.build_id, build_id, sizeof(build_id));
	if ((uint64_t)st.st_size > s->sync_max && elf_start_load(s, i, fd, &dbg) == 0) {
		lru_push_head(s, i);
		goto found;
	}
	err = elf_image__load(&e->img, fd, &dbg);
	close(fd);
	elf_install(s, i, err);
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

static void perf_map_free(struct symbolizer *s, struct perf_map *pm)
{
	if (!pm)
		return;
	s->perf_bytes -= pm->bytes;
	s->perf_dropped -= pm->dropped;
	s->perf_sparse -= pm->sparse;
	sym_table__fini(&pm->syms);
	free(pm->wanted);
	free(pm->absent);
	free(pm);
}

/* Count ps->bytes anew as bytes in s->pid_mem. */
static void pid_bytes_set(struct symbolizer *s, struct pid_state *ps, uint64_t bytes)
{
	mem_sub(&s->pid_mem.bytes, ps->bytes);
	ps->bytes = bytes;
	s->pid_mem.bytes += bytes;
}

static uint64_t pid_bytes(const struct pid_state *ps)
{
	uint64_t n = sizeof(*ps) + ps->n_maps * sizeof(*ps->maps);

	for (size_t i = 0; i < ps->n_maps; i++)
		n += ps->maps[i].path ? strlen(ps->maps[i].path) + 1 : 0;
	return n + (ps->perf ? sizeof(*ps->perf) : 0);
}

static void pid_state_free(struct symbolizer *s, struct pid_state *ps)
{
	if (!ps)
		return;
	mem_sub(&s->pid_mem.bytes, ps->bytes);
	mem_sub(&s->pid_mem.count, 1);
	free_umaps(ps->maps, ps->n_maps);
	perf_map_free(s, ps->perf);
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
	pid_bytes_set(s, ps, pid_bytes(ps));
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
	s->pid_mem.count++;
	pid_bytes_set(s, ps, pid_bytes(ps));
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
			pid_state_free(s, ps);
			return;
		}
	}
}

void symbolizer__maps_changed(struct symbolizer *s, uint32_t pid)
{
	struct pid_state *ps;

	if (!s)
		return;
	ps = pid_find(s, pid);
	if (ps)
		ps->maps_stale = true;
}

/* --- perf maps -------------------------------------------------------------------------------- */

static bool addr_in(const uint64_t *a, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] == x)
			return true;
	return false;
}

/* Add x to a small set of at most max addresses; a full set takes no more. */
static void addr_note(uint64_t **a, size_t *n, size_t *cap, size_t max, uint64_t x)
{
	if (*n >= max || addr_in(*a, *n, x) || grow_array((void **)a, cap, *n + 1, sizeof(**a)))
		return;
	(*a)[(*n)++] = x;
}

static int cmp_u64(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;

	return a < b ? -1 : a > b;
}

static void version_set(struct perf_map_version *v, const struct stat *st)
{
	*v = (struct perf_map_version){
	    .valid = true,
	    .ino = (uint64_t)st->st_ino,
	    .size = st->st_size,
	    .mtime = st->st_mtim,
	};
}

static bool version_eq(const struct perf_map_version *a, const struct perf_map_version *b)
{
	return a->valid && b->valid && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Whether the file st describes is the version v was read from. */
static bool version_same(const struct perf_map_version *v, const struct stat *st)
{
	struct perf_map_version now;

	version_set(&now, st);
	return version_eq(v, &now);
}

/* A quarter of the whole budget, less when the others hold the rest, never below the floor. */
static uint64_t perf_map_budget(const struct symbolizer *s, const struct perf_map *pm)
{
	uint64_t others = s->perf_bytes - pm->bytes, b = s->max_perf_bytes / 4;

	if (s->max_perf_bytes < others + b)
		b = s->max_perf_bytes > others ? s->max_perf_bytes - others : 0;
	return b < PERF_MAP_FLOOR_BYTES ? PERF_MAP_FLOOR_BYTES : b;
}

/*
 * The addresses a scan looks for, sorted and unique (malloc'd, NULL when none): the misses
 * noted, in a sparse table the entries it holds (found again unless the file dropped them),
 * and, when the file changed, the addresses earlier versions did not have.
 */
static uint64_t *scan_wanted(const struct perf_map *pm, bool with_absent, size_t *n)
{
	size_t cap =
	    pm->n_wanted + (pm->sparse ? pm->syms.n : 0) + (with_absent ? pm->n_absent : 0);
	size_t i, k = 0, out = 0;
	uint64_t *w;

	*n = 0;
	if (!cap || !(w = malloc(cap * sizeof(*w))))
		return NULL;
	for (i = 0; i < pm->n_wanted; i++)
		w[k++] = pm->wanted[i];
	for (i = 0; pm->sparse && i < pm->syms.n; i++)
		w[k++] = pm->syms.syms[i].addr;
	for (i = 0; with_absent && i < pm->n_absent; i++)
		w[k++] = pm->absent[i];
	qsort(w, k, sizeof(*w), cmp_u64);
	for (i = 0; i < k; i++)
		if (!out || w[out - 1] != w[i])
			w[out++] = w[i];
	*n = out;
	return w;
}

/* Put a scan's table in place of pm's; what it looked for and did not find becomes absent. */
static void perf_map_install(struct symbolizer *s, uint32_t pid, struct perf_map *pm,
			     struct perf_map_result *res, const struct perf_map_version *ver)
{
	size_t i, k = 0;

	s->perf_scans++;
	s->perf_scan_ns += res->wall_ns;
	if (res->err) {
		pr_debug("symbolize: %s of pid %u: %s", pm->display, pid, strerror(-res->err));
		return;
	}
	if (res->stats.sparse && !pm->sparse)
		pr_info("symbolize: %s of pid %u: %llu entries do not fit its %llu KiB of the "
			"perf-map budget; keeping only those that samples hit",
			pm->display, pid, (unsigned long long)res->stats.lines,
			(unsigned long long)(perf_map_budget(s, pm) >> 10));
	s->perf_bytes -= pm->bytes;
	s->perf_dropped -= pm->dropped;
	s->perf_sparse -= pm->sparse;
	sym_table__fini(&pm->syms);
	pm->syms = res->table;
	res->table = (struct sym_table){0};
	pm->bytes = perf_map__table_bytes(&pm->syms);
	pm->dropped = res->stats.dropped;
	pm->sparse = res->stats.sparse;
	s->perf_bytes += pm->bytes;
	s->perf_dropped += pm->dropped;
	s->perf_sparse += pm->sparse;

	if (!version_eq(&pm->ver, ver))
		pm->n_absent = 0;
	pm->ver = *ver;
	for (i = 0; i < res->n_wanted; i++)
		if (!sym_table__find(&pm->syms, res->wanted[i]))
			addr_note(&pm->absent, &pm->n_absent, &pm->cap_absent, PERF_MAP_ABSENT_MAX,
				  res->wanted[i]);
	/* Misses noted while the scan ran stay wanted; the ones it looked for are settled. */
	for (i = 0; i < pm->n_wanted; i++)
		if (!bsearch(&pm->wanted[i], res->wanted, res->n_wanted, sizeof(uint64_t), cmp_u64))
			pm->wanted[k++] = pm->wanted[i];
	pm->n_wanted = k;
}

/*
 * Open the perf map of ps as the process names it, in its own root, following no link (a user
 * could link it to a file only root may read), and trust it only when the process's owner owns
 * it: the daemon runs as root and must not read what another user planted under that name.
 * The owner of /proc/PID's files is the process's effective uid while it is dumpable, else root.
 */
static int perf_map_open(struct symbolizer *s, struct pid_state *ps, struct stat *st)
{
	char path[PATH_MAX];
	struct stat pst;
	int n, fd;

	n = snprintf(path, sizeof(path), "%s/%u/stat", s->proc_root, ps->pid);
	if (n <= 0 || (size_t)n >= sizeof(path) || stat(path, &pst))
		return -ESRCH;
	fd = procfs_open_in_root(s->proc_root, ps->pid, ps->perf->display, UINT64_MAX, st);
	if (fd >= 0 && st->st_uid != pst.st_uid) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

static void perf_map_enqueue(struct symbolizer *s, struct pid_state *ps)
{
	if (ps->perf->queued || GROW(s->pm_queue, s->cap_pm_queue, s->n_pm_queue + 1))
		return;
	s->pm_queue[s->n_pm_queue++] = ps->pid;
	ps->perf->queued = true;
}

/* Hand the map of ps to the worker. Returns 0 or a negative errno (then nothing runs). */
static int perf_map_start(struct symbolizer *s, struct pid_state *ps)
{
	struct perf_map *pm = ps->perf;
	uint64_t *wanted, tag;
	struct stat st;
	size_t n;
	int fd, err;

	if (!s->worker && !(s->worker = perf_map_worker__new()))
		return -ENOMEM;
	fd = perf_map_open(s, ps, &st);
	if (fd < 0)
		return fd;
	wanted = scan_wanted(pm, !version_same(&pm->ver, &st), &n);
	tag = (uint64_t)++s->scan_serial << 32 | ps->pid;
	err = perf_map_worker__start(s->worker, fd, wanted, n, perf_map_budget(s, pm),
				     PERF_MAP_READ_MAX, tag);
	if (err) {
		close(fd);
		free(wanted);
		return err;
	}
	pm->scanning = true;
	pm->scan_tag = tag;
	version_set(&pm->scan_ver, &st);
	return 0;
}

/* Start the first queued map that may be scanned now, if the worker is free. */
static void perf_map_start_next(struct symbolizer *s, uint64_t now)
{
	struct pid_state *ps;
	struct perf_map *pm;
	size_t i = 0;

	if (s->worker && perf_map_worker__busy(s->worker))
		return;
	while (i < s->n_pm_queue) {
		ps = pid_find(s, s->pm_queue[i]);
		pm = ps ? ps->perf : NULL;
		if (pm && pm->queued && now < pm->next_scan_ns) {
			i++;
			continue;
		}
		memmove(&s->pm_queue[i], &s->pm_queue[i + 1],
			(s->n_pm_queue - i - 1) * sizeof(*s->pm_queue));
		s->n_pm_queue--;
		if (!pm || !pm->queued)
			continue; /* forgotten since */
		pm->queued = false;
		if (!perf_map_start(s, ps))
			return;
	}
}

/* Install what the worker finished and start the next scan; with wait, wait for the worker. */
static void perf_map_pump(struct symbolizer *s, bool wait)
{
	struct perf_map_result res;
	struct pid_state *ps;
	struct perf_map *pm;
	uint64_t now = 0;

	if (s->worker && perf_map_worker__collect(s->worker, &res, wait)) {
		now = mono_ns();
		ps = pid_find(s, (uint32_t)res.tag);
		pm = ps ? ps->perf : NULL;
		if (pm && pm->scanning && pm->scan_tag == res.tag) {
			pm->scanning = false;
			perf_map_install(s, ps->pid, pm, &res, &pm->scan_ver);
			/* A large map rescans at most a tenth of the time: its user cannot keep a
			 * core busy by appending to it. */
			pm->next_scan_ns =
			    now + (res.wall_ns * PERF_MAP_SCAN_GAP > REREAD_INTERVAL_NS
				       ? res.wall_ns * PERF_MAP_SCAN_GAP
				       : REREAD_INTERVAL_NS);
			if (pm->n_wanted)
				perf_map_enqueue(s, ps);
		}
		sym_table__fini(&res.table);
		free(res.wanted);
	}
	if (s->n_pm_queue)
		perf_map_start_next(s, now ? now : mono_ns());
}

/* addr, in anonymous memory of ps, has no entry: look at the perf map again (rate limited). */
static void perf_map_miss(struct symbolizer *s, struct pid_state *ps, uint64_t addr, uint64_t now)
{
	struct perf_map_result res = {0};
	struct perf_map_version ver;
	struct perf_map *pm = ps->perf;
	uint32_t nspid = ps->pid;
	struct stat st;
	uint64_t t0;
	bool same;
	int fd;

	if (!pm) {
		pm = calloc(1, sizeof(*pm));
		if (!pm)
			return;
		if (procfs_read_nspid(s->proc_root, ps->pid, &nspid))
			nspid = ps->pid;
		snprintf(pm->display, sizeof(pm->display), "/tmp/perf-%u.map", nspid);
		ps->perf = pm;
		pid_bytes_set(s, ps, pid_bytes(ps));
	}
	if (!addr_in(pm->absent, pm->n_absent, addr))
		addr_note(&pm->wanted, &pm->n_wanted, &pm->cap_wanted, PERF_MAP_WANTED_MAX, addr);
	/* A sparse table looks for new misses at the worker's pace (its gap), not the stat's. */
	if (pm->sparse && pm->n_wanted && !pm->queued && !pm->scanning) {
		perf_map_enqueue(s, ps);
		perf_map_start_next(s, now);
		return;
	}
	if ((pm->checked_ns && now - pm->checked_ns < REREAD_INTERVAL_NS) || pm->queued ||
	    pm->scanning)
		return;
	pm->checked_ns = now;
	fd = perf_map_open(s, ps, &st);
	if (fd < 0)
		return;
	same = version_same(&pm->ver, &st);
	if (same && (!pm->sparse || !pm->n_wanted)) {
		/* All of this version is in the table: what it lacks, the file lacks. */
		close(fd);
		pm->n_wanted = 0;
		return;
	}
	if (st.st_size > PERF_MAP_SYNC_MAX) {
		close(fd);
		perf_map_enqueue(s, ps);
		perf_map_start_next(s, now);
		return;
	}
	/* Small enough to read here and now: the frames are named from this sample on. */
	res.wanted = scan_wanted(pm, !same, &res.n_wanted);
	t0 = mono_ns();
	res.err = perf_map__scan(fd,
				 &(struct perf_map_scan_opts){
				     .wanted = res.wanted,
				     .n_wanted = res.n_wanted,
				     .budget = perf_map_budget(s, pm),
				     .max_read = PERF_MAP_READ_MAX,
				 },
				 &res.table, &res.stats);
	res.wall_ns = mono_ns() - t0;
	close(fd);
	version_set(&ver, &st);
	perf_map_install(s, ps->pid, pm, &res, &ver);
	sym_table__fini(&res.table);
	free(res.wanted);
}

void symbolizer__settle(struct symbolizer *s)
{
	elf_pump(s, true);
	for (;;) {
		for (size_t i = 0; i < s->n_pm_queue; i++) {
			struct pid_state *ps = pid_find(s, s->pm_queue[i]);

			if (ps && ps->perf)
				ps->perf->next_scan_ns = 0;
		}
		if (s->worker && perf_map_worker__busy(s->worker)) {
			perf_map_pump(s, true);
			continue;
		}
		if (!s->n_pm_queue)
			break;
		perf_map_pump(s, false);
		if (!s->worker || !perf_map_worker__busy(s->worker))
			break;
	}
}

void symbolizer__stats(const struct symbolizer *s, struct symbolizer_stats *out)
{
	*out = (struct symbolizer_stats){
	    .perf_map_bytes = s->perf_bytes,
	    .perf_map_budget = s->max_perf_bytes,
	    .perf_map_dropped = s->perf_dropped,
	    .perf_map_sparse = s->perf_sparse,
	    .perf_map_scans = s->perf_scans,
	    .perf_map_scan_ns = s->perf_scan_ns,
	    .elf_bytes = s->bytes + name_cache__bytes(s->names),
	    .elf_budget = s->max_bytes,
	    .elf_files = s->n_used,
	};
}

void symbolizer__memory(const struct symbolizer *s, struct mem_usage *symbols,
			struct mem_usage *procs)
{
	*symbols = (struct mem_usage){
	    .bytes = s->bytes + name_cache__bytes(s->names) + s->perf_bytes +
		     ksyms__bytes(s->ksyms) + s->max_elf * sizeof(*s->slots),
	    .count = s->n_used,
	};
	*procs = s->pid_mem;
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

static void resolve_image(struct symbolizer *s, struct elf_image *img, uint64_t file_off,
			  struct sym_result *out)
{
	uint64_t vaddr;

	if (elf_image__vaddr(img, file_off, &vaddr)) {
		out->address = file_off;
		return;
	}
	out->address = vaddr;
	out->name = elf_image__symbol(img, s->names, vaddr);
	out->build_id = img->build_id[0] ? img->build_id : NULL;
}

/*
 * No symbol covers the address: name it by the start of its function from the file's CFI, so
 * that every sample in one unnamed function is one frame. The FDE ranges are read on the first
 * such address of an image and count in the symbol bytes.
 */
static void name_by_fde(struct symbolizer *s, uint32_t pid, const struct umap *m,
			struct elf_slot *e, uint64_t file_off, struct sym_result *out)
{
	uint64_t vaddr, start;
	int fd;

	if (elf_image__vaddr(&e->img, file_off, &vaddr))
		return;
	if (!e->img.fdes_tried) {
		fd = open_mapped_file(s, pid, m);
		if (fd < 0) /* tried again on the next miss */
			return;
		/* A big file's .eh_frame is read off the loop; its misses are unnamed until then.
		 */
		if (e->size > s->sync_max) {
			if (!s->elf_worker && !(s->elf_worker = elf_worker__new())) {
				close(fd);
				return;
			}
			if (elf_worker__start_fdes(s->elf_worker, fd, e->img.debug_path,
						   (uint64_t)e->gen << 32 |
						       (uint32_t)(e - s->slots))) {
				close(fd);
				return;
			}
			e->img.fdes_tried = true;
			e->fdes_loading = true;
			return;
		}
		if (!elf_image__load_fdes(&e->img, fd))
			pr_debug("symbolize: %s: %zu function ranges from its CFI", m->path,
				 e->img.n_fdes);
		close(fd);
		s->bytes -= e->bytes;
		e->bytes = elf_image__bytes(&e->img);
		s->bytes += e->bytes;
	}
	if (elf_image__fde_start(&e->img, vaddr, &start))
		out->address = start;
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
	/* A perf map the worker finished, or one waiting for it: cheap checks when there is none.
	 */
	if (s->n_pm_queue || (s->worker && perf_map_worker__busy(s->worker)))
		perf_map_pump(s, false);
	if (elf_worker__pending(s->elf_worker))
		elf_pump(s, false);
	ps = pid_find(s, pid);
	if (!ps) {
		ps = pid_new(s, pid);
		if (!ps)
			return -ENOMEM;
		/*
		 * Gone before its first lookup (a thread sampled as its process exited): nothing to
		 * keep, and the exit record that would drop it came already.
		 */
		if (ps->maps_err == -ESRCH) {
			symbolizer__forget_pid(s, pid);
			return -ESRCH;
		}
	}
	/* Once per change, not rate limited: the kernel side sends one per drain at most. */
	if (ps->maps_stale) {
		ps->maps_stale = false;
		read_maps(s, ps, mono_ns());
	}
	m = map_find(ps, addr);
	if (!m) {
		now = mono_ns();
		if (!ps->reread_ns)
			ps->reread_ns = REREAD_INTERVAL_NS;
		if (now - ps->maps_read_ns >= ps->reread_ns) {
			if (!read_maps(s, ps, now))
				m = map_find(ps, addr);
			ps->reread_ns = m ? REREAD_INTERVAL_NS
					  : (ps->reread_ns * 2 > REREAD_MAX_NS ? REREAD_MAX_NS
									       : ps->reread_ns * 2);
		}
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
		if (e->failed || e->loading)
			break;
		resolve_image(s, &e->img, file_off, out);
		if (!out->name)
			name_by_fde(s, pid, m, e, file_off, out);
		break;
	case UMAP_VDSO:
		out->module = module_vdso;
		if (!s->vdso_tried)
			vdso_load(s);
		if (s->vdso_ok && s->vdso_size == m->end - m->start)
			resolve_image(s, &s->vdso, addr - m->start, out);
		else
			out->address = addr - m->start;
		break;
	case UMAP_ANON:
		if (!m->path[0])
			out->module = module_anon;
		se = ps->perf ? sym_table__find(&ps->perf->syms, addr) : NULL;
		if (!se) {
			perf_map_miss(s, ps, addr, mono_ns());
			se = ps->perf ? sym_table__find(&ps->perf->syms, addr) : NULL;
		}
		if (se) {
			out->name = sym_table__name(&ps->perf->syms, se);
			out->module = ps->perf->display;
		} else {
			out->anon_start = m->start;
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
	s->sync_max = o.elf_sync_max ? o.elf_sync_max : DEFAULT_ELF_SYNC_MAX;
	s->names = name_cache__new(NAME_CACHE_SLOTS, NAME_CACHE_BYTES);
	s->modules_recheck_ns = o.kernel_recheck_ns ? o.kernel_recheck_ns : KSYMS_RECHECK_NS;
	s->max_perf_bytes =
	    o.max_perf_map_bytes ? o.max_perf_map_bytes : DEFAULT_MAX_PERF_MAP_BYTES;
	if (s->max_elf > INT32_MAX / 2) {
		err = -EINVAL;
		goto err;
	}
	s->slots = calloc(s->max_elf, sizeof(*s->slots));
	if (!s->proc_root || !s->debug_root || !s->slots || !s->names)
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
	/* First: a scan in progress is abandoned before the tables it reads for go. */
	perf_map_worker__free(s->worker);
	elf_worker__free(s->elf_worker);
	free(s->pm_queue);
	for (size_t b = 0; b < PID_BUCKETS; b++) {
		for (ps = s->pids[b]; ps; ps = next) {
			next = ps->next;
			pid_state_free(s, ps);
		}
	}
	for (unsigned int i = 0; s->slots && i < s->max_elf; i++)
		if (s->slots[i].used)
			slot_clear(s, &s->slots[i]);
	free(s->slots);
	ksyms__free(s->ksyms);
	elf_image__fini(&s->vdso);
	name_cache__free(s->names);
	free(s->proc_root);
	free(s->debug_root);
	free(s);
}
