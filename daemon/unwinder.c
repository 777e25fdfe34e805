// SPDX-License-Identifier: BSD-2-Clause
/*
 * Unwind tables for the BPF stack walker: see unwinder.h. One mutex guards the state; the
 * worker drops it while it reads /proc, opens files, builds tables and hands them to the kernel,
 * so the loop's calls (want, forget, stats) wait at most for a hash map update.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "abi.h"
#include "cfi.h"
#include "grow.h"
#include "log.h"
#include "procfs.h"
#include "ptrmap.h"
#include "symbolize_elf.h"
#include "timeutil.h"
#include "unwinder.h"

/* A process is described again at most this often (a dlopen, an evicted table). */
#define REFRESH_NS (1000ull * 1000 * 1000)
/*
 * A described process whose mappings did not change is described again for its walks' misses
 * only this long after the last time: it heals what the kernel side does not see (code replaced
 * by as much code in one call, a record lost to a full ring buffer) at a sixtieth of the cost.
 */
#define BACKOFF_NS (60ull * 1000 * 1000 * 1000)
/* After the kernel's map of processes refused one, it is not tried again for this long. */
#define RETRY_FULL_NS (30ull * 1000 * 1000 * 1000)
/* How often described processes are checked for being alive (lost exit records). */
#define SWEEP_NS (10ull * 1000 * 1000 * 1000)
/* A description taking longer than this is published in parts this often. */
#define PARTIAL_NS (500ull * 1000 * 1000)
/* A description taking longer than this logs its progress. */
#define PROGRESS_NS (2000ull * 1000 * 1000)
/* Files larger than this are not parsed (the biggest CUDA libraries are ~1 GiB). */
#define CFI_FILE_MAX (4ull << 30)
/* A table id never loaded: the walk stops with PROFD_UNWIND_NO_TABLE. */
#define TABLE_NONE UINT32_MAX
/* A process whose tables did not all fit the bound is described again after this long. */
#define RETRY_OVER_NS (10ull * 1000 * 1000 * 1000)
/* A build of this many rows (2 MiB of them) or more gives freed heap pages back at once. */
#define TRIM_ROWS_MIN (1u << 18)
/* Kernel bytes of one loaded table beyond its rows (the map itself); a rough figure. */
#define TABLE_OVERHEAD 512

/* What a table slot knows of one ELF file. */
struct table {
	/* identity: build-id when the file has one, else device, inode, size and mtime */
	char build_id[2 * BUILD_ID_MAX + 1];
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	bool vdso;
	/* PT_LOAD headers: a mapping's file offset to ELF addresses */
	struct elf_load *loads;
	size_t nloads;
	uint32_t id; /* key in unwind_tables while loaded; ids are never reused */
	uint32_t nrows;
	uint64_t bytes;	   /* kernel bytes while loaded */
	uint64_t last_use; /* use clock of the last process described with it */
	uint32_t refs;	   /* described processes whose mappings name it */
	bool loaded;	   /* in unwind_tables now */
	bool fp_only;	   /* no usable CFI: its code is stepped with frame pointers */
};

enum proc_state { PROC_IDLE = 0, PROC_QUEUED, PROC_RUNNING };

struct proc {
	uint32_t pid;
	enum proc_state state;
	bool described; /* unwind_procs holds it */
	bool gone;	/* forgotten while being described: drop when the worker is done */
	uint64_t done_ns;
	uint32_t *tables; /* slots its description refers to (refs held) */
	size_t ntables;
	/* While it is described: the slots its new description takes (refs held too). */
	const uint32_t *pending;
	size_t npending;
	uint64_t retry_ns; /* no new description before this (the kernel refused the last) */
	bool over;	   /* its description left mappings out: over the bound */
	bool stale;	   /* it mapped code since its description began */
};

struct unwinder {
	struct unwinder_opts o;
	char proc_root[256];
	char debug_root[PATH_MAX];
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* work queued, or stop */
	pthread_cond_t idle; /* the queue ran empty */
	bool stop;
	/* guarded by lock: */
	struct ptrmap procs; /* pid -> struct proc * */
	uint32_t *queue;     /* pids, FIFO ring */
	size_t q_head, q_len, q_cap;
	struct table *tables;
	size_t ntables, cap_tables;
	uint32_t next_id;
	uint64_t use_clock;
	uint64_t swept_ns; /* last sweep() */
	struct unwinder_stats st;
	/* Running counts for unwinder__memory(): the slots' PT_LOAD copies, the procs' refs */
	uint64_t loads_bytes, refs_bytes;
	/*
	 * The worker's alone: tables loaded but not yet in unwind_tables, and tables evicted but
	 * not yet out of it. An update of a map of maps waits for an RCU grace period (~10 ms)
	 * after the call; a batch waits once: flush_tables() sends them before a description.
	 */
	uint32_t *batch_ids, *evict_ids;
	int *batch_fds;
	size_t nbatch, cap_batch, cap_batch_fds, nevict, cap_evict;
	/* vDSO image of this kernel (the same in every process), read once */
	void *vdso;
	size_t vdso_size;
};

static void proc_release(struct unwinder *u, struct proc *p)
{
	for (size_t i = 0; i < p->ntables; i++)
		if (u->tables[p->tables[i]].refs)
			u->tables[p->tables[i]].refs--;
	mem_sub(&u->refs_bytes, p->ntables * sizeof(*p->tables));
	free(p->tables);
	p->tables = NULL;
	p->ntables = 0;
}

/* Drop pid's description from the kernel and its table references. Locked. */
static void proc_undescribe(struct unwinder *u, struct proc *p)
{
	if (p->described) {
		bpf_map_delete_elem(u->o.procs_fd, &p->pid);
		p->described = false;
		u->st.procs--;
	}
	if (p->over) {
		p->over = false;
		u->st.over_bound--;
	}
	proc_release(u, p);
}

static int queue_push(struct unwinder *u, uint32_t pid)
{
	if (u->q_len == u->q_cap) {
		size_t cap = u->q_cap ? 2 * u->q_cap : 64;
		uint32_t *q = malloc(cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		for (size_t i = 0; i < u->q_len; i++)
			q[i] = u->queue[(u->q_head + i) % u->q_cap];
		free(u->queue);
		u->queue = q;
		u->q_head = 0;
		u->q_cap = cap;
	}
	u->queue[(u->q_head + u->q_len) % u->q_cap] = pid;
	u->q_len++;
	return 0;
}

/* Whether p may be queued now: idle, and not described or refused in the last while. Locked. */
static bool proc_due(const struct proc *p, uint64_t now)
{
	return p->state == PROC_IDLE && !(p->done_ns && now - p->done_ns < REFRESH_NS) &&
	       now >= p->retry_ns;
}

/* Queue p (PROC_IDLE) for a description. Returns 0 or -ENOMEM. Locked. */
static int proc_queue(struct unwinder *u, struct proc *p)
{
	int err = queue_push(u, p->pid);

	if (err)
		return err;
	p->state = PROC_QUEUED;
	u->st.queued = u->q_len;
	pthread_cond_signal(&u->wake);
	return 0;
}

void unwinder__want(struct unwinder *u, uint32_t pid, uint32_t why)
{
	struct proc *p;
	uint64_t now = mono_ns();

	if (!u || !pid)
		return;
	pthread_mutex_lock(&u->lock);
	p = ptrmap_get(&u->procs, pid);
	if (p && p->state != PROC_IDLE)
		goto out; /* what it is being described with is not out yet */
	/*
	 * A pc outside the mappings of a described process whose mappings did not change: left
	 * out for the bound, or not code at all (a walk gone astray). Describing it again would
	 * find the same; a change of its mappings comes as unwinder__maps_changed.
	 */
	if (p && u->o.sees_maps && why == PROFD_UNWIND_NO_MAPPING && p->described && !p->stale &&
	    now - p->done_ns < BACKOFF_NS) {
		u->st.backoffs++;
		goto out;
	}
	if (p && !proc_due(p, now))
		goto out;
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			goto out;
		p->pid = pid;
		if (ptrmap_put(&u->procs, pid, p)) {
			free(p);
			goto out;
		}
	}
	proc_queue(u, p);
out:
	pthread_mutex_unlock(&u->lock);
}

void unwinder__maps_changed(struct unwinder *u, uint32_t pid)
{
	struct proc *p;

	if (!u || !pid)
		return;
	pthread_mutex_lock(&u->lock);
	p = ptrmap_get(&u->procs, pid);
	if (p) {
		/* Queued now, or by the worker once a second has passed since the last one. */
		p->stale = true;
		if (p->described && proc_due(p, mono_ns()))
			proc_queue(u, p);
		else
			pthread_cond_signal(&u->wake);
	}
	pthread_mutex_unlock(&u->lock);
}

void unwinder__forget(struct unwinder *u, uint32_t pid)
{
	struct proc *p;

	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	p = ptrmap_get(&u->procs, pid);
	if (p) {
		if (p->state == PROC_RUNNING) {
			p->gone = true; /* the worker finishes with it, then drops it */
		} else {
			/* a queued pid is skipped by the worker once its entry is gone */
			proc_undescribe(u, p);
			ptrmap_del(&u->procs, pid);
			free(p);
		}
	}
	pthread_mutex_unlock(&u->lock);
}

void unwinder__stats(struct unwinder *u, struct unwinder_stats *out)
{
	pthread_mutex_lock(&u->lock);
	*out = u->st;
	out->queued = u->q_len;
	pthread_mutex_unlock(&u->lock);
}

void unwinder__memory(struct unwinder *u, struct mem_usage *tables, struct mem_usage *procs)
{
	pthread_mutex_lock(&u->lock);
	*tables = (struct mem_usage){
	    .bytes = u->cap_tables * sizeof(*u->tables) + u->loads_bytes + u->vdso_size,
	    .count = u->ntables,
	};
	*procs = (struct mem_usage){
	    .bytes = sizeof(*u) + ptrmap_slots(&u->procs) * (sizeof(uint64_t) + sizeof(void *)) +
		     u->procs.n * sizeof(struct proc) + u->refs_bytes +
		     u->q_cap * sizeof(*u->queue),
	    .count = u->procs.n,
	};
	pthread_mutex_unlock(&u->lock);
}

void unwinder__settle(struct unwinder *u)
{
	pthread_mutex_lock(&u->lock);
	while (u->q_len || u->st.busy_pid)
		pthread_cond_wait(&u->idle, &u->lock);
	pthread_mutex_unlock(&u->lock);
}

/* ---- the worker ------------------------------------------------------------------------- */

/* What the worker learned about one mapping before the table look-up. */
struct file_id {
	char build_id[2 * BUILD_ID_MAX + 1];
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	bool vdso;
};

static bool table_is(const struct table *t, const struct file_id *f)
{
	if (t->vdso || f->vdso)
		return t->vdso && f->vdso;
	if (f->build_id[0] || t->build_id[0])
		return !strcmp(t->build_id, f->build_id);
	return t->dev == f->dev && t->ino == f->ino && t->size == f->size &&
	       t->mtime_ns == f->mtime_ns;
}

/* The table slot of file f, or -1. Locked. */
static long table_find(struct unwinder *u, const struct file_id *f)
{
	for (size_t i = 0; i < u->ntables; i++)
		if (table_is(&u->tables[i], f))
			return (long)i;
	return -1;
}

/*
 * Make room for bytes more within the budget, evicting least recently used tables (their ids
 * go to u->evict_ids, out of the kernel at the next flush_tables()). Locked.
 */
static void make_room(struct unwinder *u, uint64_t bytes, const struct proc *keep)
{
	while (u->st.table_bytes + bytes > u->st.memory ||
	       u->st.tables >= PROFD_UNWIND_MAX_TABLES) {
		long victim = -1;

		/* Tables no process refers to first, then any but those of the process at hand. */
		for (int pass = 0; pass < 2 && victim < 0; pass++) {
			for (size_t i = 0; i < u->ntables; i++) {
				struct table *t = &u->tables[i];
				bool mine = false;

				if (!t->loaded || (pass == 0 && t->refs))
					continue;
				for (size_t k = 0; keep && k < keep->ntables; k++)
					mine |= keep->tables[k] == i;
				for (size_t k = 0; keep && k < keep->npending; k++)
					mine |= keep->pending[k] == i;
				if (mine)
					continue;
				if (victim < 0 || t->last_use < u->tables[victim].last_use)
					victim = (long)i;
			}
		}
		if (victim < 0 || grow_array((void **)&u->evict_ids, &u->cap_evict, u->nevict + 1,
					     sizeof(*u->evict_ids)))
			return;
		u->evict_ids[u->nevict++] = u->tables[victim].id;
		u->tables[victim].loaded = false;
		u->st.table_bytes -= u->tables[victim].bytes;
		u->st.tables--;
		u->st.evictions++;
	}
}

/*
 * Load rows into a new inner map under a new id. Returns 0 (*id, *bytes set) or a negative
 * errno. Not locked: only the map update that publishes the table is made under the lock.
 */
static int table_load(const struct profd_unwind_row *rows, size_t n, int *fd_out)
{
	LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	size_t len = (n * sizeof(*rows) + 4095) & ~(size_t)4095;
	void *mem;
	int fd;

	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "profd_uw_rows", sizeof(__u32), sizeof(*rows),
			    (__u32)n, &mo);
	if (fd < 0)
		return -errno;
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED) {
		int err = -errno;

		close(fd);
		return err;
	}
	memcpy(mem, rows, n * sizeof(*rows));
	munmap(mem, len);
	*fd_out = fd;
	return 0;
}

static int use_debug_build(void *arg, Elf *debug, int fd)
{
	(void)fd;
	void **a = arg;

	return cfi_table__build_fd(a[0], *(int *)a[2], debug, a[1]);
}

/*
 * The executable PT_LOAD headers of e (all of them if none is) into *loads (malloc'd): only
 * executable mappings are described, and a read-only segment may end in the page where the
 * executable one starts (lld, numpy's OpenBLAS), which would give that page's mapping the
 * wrong bias. Returns 0 or a negative errno.
 */
static int read_loads(Elf *e, struct elf_load **loads, size_t *n)
{
	size_t phnum, k = 0;
	bool any_x = false;
	GElf_Phdr ph;

	if (elf_getphdrnum(e, &phnum) || phnum == 0 || phnum > 256)
		return -EINVAL;
	*loads = calloc(phnum, sizeof(**loads));
	if (!*loads)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++)
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
			any_x = true;
	for (size_t i = 0; i < phnum; i++) {
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    (any_x && !(ph.p_flags & PF_X)))
			continue;
		(*loads)[k++] = (struct elf_load){.offset = ph.p_offset,
						  .filesz = ph.p_filesz,
						  .memsz = ph.p_memsz,
						  .vaddr = ph.p_vaddr};
	}
	*n = k;
	if (!k) {
		free(*loads);
		*loads = NULL;
		return -EINVAL;
	}
	return 0;
}

/*
 * The bias of a mapping at start of file offset off: ELF address = runtime address - bias. The
 * loader maps each PT_LOAD from its page-aligned offset to its page-aligned address. Returns 0
 * or -ENOENT when no PT_LOAD covers off.
 */
static int map_bias(const struct elf_load *loads, size_t n, uint64_t start, uint64_t off,
		    uint64_t *bias)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t lo = loads[i].offset & ~4095ull;

		if (off >= lo && off < loads[i].offset + loads[i].filesz) {
			*bias = start - off + loads[i].offset - loads[i].vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

/*
 * Whether ct's FDEs cover at least half of e's executable sections. A stripped binary built
 * without .eh_frame keeps the start-up code's (crt1.o, the PLT) and nothing else: its functions'
 * CFI is in the debug file's .debug_frame.
 */
static bool covers_code(Elf *e, const struct cfi_table *ct)
{
	uint64_t code = 0, covered = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR) &&
		    sh.sh_type == SHT_PROGBITS)
			code += sh.sh_size;
	for (size_t i = 0; i < ct->nfdes; i++)
		covered += ct->fdes[i].end - ct->fdes[i].start;
	return !code || 2 * covered >= code;
}

/*
 * The CFI table of the file e (build_id: its hex build-id or ""; path: its name in the process,
 * fs_root: that process's root, for the debug file search and the log) into ct. Where the file's
 * own CFI (.eh_frame, .debug_frame) leaves most of its code out, the .debug_frame of its separate
 * debug file fills in. Returns 0, -ENOENT when neither has CFI, or another negative errno.
 */
static int table_build(struct unwinder *u, Elf *e, int fd, const char *build_id, const char *path,
		       const char *fs_root, struct cfi_table *ct)
{
	struct elf_debug_ctx dbg = {.debug_root = u->debug_root, .fs_root = fs_root, .path = path};
	struct cfi_table own = {0};
	char found[PATH_MAX];
	void *arg[3] = {e, ct, &fd};
	int err;

	err = cfi_table__build_fd(e, fd, NULL, &own);
	if (err && err != -ENOENT)
		return err;
	if (!err && covers_code(e, &own)) {
		*ct = own;
		return 0;
	}
	if (elf_find_debug(e, build_id, &dbg, use_debug_build, arg, found, sizeof(found))) {
		/* No debug file: what the file has, if anything. */
		*ct = own;
		return err;
	}
	cfi_table__fini(&own);
	pr_info("unwind: %s: CFI from the .debug_frame of %s", path, found);
	return 0;
}

/* Identity of the file open on fd (its build-id and stat). */
static void file_identify(int fd, const struct stat *sb, struct file_id *f)
{
	memset(f, 0, sizeof(*f));
	if (elf_read_build_id_fd(fd, f->build_id))
		f->build_id[0] = '\0';
	f->dev = sb->st_dev;
	f->ino = sb->st_ino;
	f->size = (uint64_t)sb->st_size;
	f->mtime_ns = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

/*
 * Publish ct's rows as the table of slot t within the budget: a new inner map, in the kernel's
 * unwind_tables at the next flush_tables(). Locked; let go while the map is made and filled.
 */
static int table_publish(struct unwinder *u, struct table *t, const struct cfi_table *ct,
			 const struct proc *keep)
{
	/* A mmapable array's values take whole pages. */
	uint64_t bytes =
	    ((ct->nrows * sizeof(struct profd_unwind_row) + 4095) & ~4095ull) + TABLE_OVERHEAD;
	uint32_t id;
	int fd = -1, err;

	/* The BPF search takes at most 24 halvings: under 2^24 rows (a 128 MiB table). */
	if (bytes > u->st.memory || ct->nrows >= (1u << 24)) {
		u->st.too_big++;
		return -E2BIG;
	}
	make_room(u, bytes, keep);
	/* Everything loaded is the process's own: its walks stop at this file (no-table). */
	if (u->st.table_bytes + bytes > u->st.memory) {
		u->st.over_budget++;
		return -ENOSPC;
	}
	if (grow_array((void **)&u->batch_ids, &u->cap_batch, u->nbatch + 1,
		       sizeof(*u->batch_ids)) ||
	    grow_array((void **)&u->batch_fds, &u->cap_batch_fds, u->nbatch + 1,
		       sizeof(*u->batch_fds)))
		return -ENOMEM;
	pthread_mutex_unlock(&u->lock);
	err = table_load(ct->rows, ct->nrows, &fd);
	pthread_mutex_lock(&u->lock);
	if (err)
		return err;
	id = ++u->next_id;
	while (id == PROFD_UNWIND_FP_ONLY || id == TABLE_NONE)
		id = ++u->next_id;
	u->batch_ids[u->nbatch] = id;
	u->batch_fds[u->nbatch++] = fd;
	/* Only this thread adds slots (and moves the array): t is still the slot. */
	t->id = id;
	t->nrows = (uint32_t)ct->nrows;
	t->bytes = bytes;
	t->loaded = true;
	u->st.tables++;
	u->st.table_bytes += bytes;
	return 0;
}

/* Undo the accounting of a table the kernel refused (id). Locked. */
static void table_refused(struct unwinder *u, uint32_t id, int err)
{
	for (size_t i = 0; i < u->ntables; i++) {
		struct table *t = &u->tables[i];

		if (t->loaded && t->id == id) {
			t->loaded = false;
			u->st.tables--;
			u->st.table_bytes -= t->bytes;
			u->st.build_failed++;
			pr_warn("unwind: a table was refused by the kernel: %s", strerror(-err));
			return;
		}
	}
}

/*
 * Send the worker's pending evictions and new tables to the kernel, each kind in one batch (one
 * RCU grace period), one by one where a batch fails. Not locked: the worker's own lists.
 */
static void flush_tables(struct unwinder *u)
{
	__u32 count;

	if (u->nevict) {
		count = (__u32)u->nevict;
		if (bpf_map_delete_batch(u->o.tables_fd, u->evict_ids, &count, NULL))
			for (size_t i = count; i < u->nevict; i++)
				bpf_map_delete_elem(u->o.tables_fd, &u->evict_ids[i]);
		u->nevict = 0;
	}
	if (u->nbatch) {
		count = (__u32)u->nbatch;
		if (bpf_map_update_batch(u->o.tables_fd, u->batch_ids, u->batch_fds, &count,
					 NULL)) {
			for (size_t i = count; i < u->nbatch; i++) {
				if (!bpf_map_update_elem(u->o.tables_fd, &u->batch_ids[i],
							 &u->batch_fds[i], BPF_ANY))
					continue;
				pthread_mutex_lock(&u->lock);
				table_refused(u, u->batch_ids[i], -errno);
				pthread_mutex_unlock(&u->lock);
			}
		}
		for (size_t i = 0; i < u->nbatch; i++)
			close(u->batch_fds[i]);
		u->nbatch = 0;
	}
}

/*
 * The slot of the table of file f (open on fd, or the vDSO), built and loaded now unless it is
 * cached; keep: the process being described (its tables are not evicted for this one).
 * *built is set when a build ran. Returns the slot or a negative errno (-ENOMEM).
 */
static long table_get(struct unwinder *u, const struct file_id *f, int fd, const char *path,
		      const char *fs_root, const struct proc *keep, bool *built)
{
	struct cfi_table ct = {0};
	struct elf_load *loads = NULL;
	size_t nloads = 0;
	uint64_t t0 = mono_ns();
	char *copy = NULL;
	struct table *t;
	Elf *e = NULL;
	long i;
	int err;

	*built = false;
	pthread_mutex_lock(&u->lock);
	i = table_find(u, f);
	if (i >= 0 && (u->tables[i].loaded || u->tables[i].fp_only)) {
		u->tables[i].last_use = ++u->use_clock;
		u->st.cache_hits++;
		pthread_mutex_unlock(&u->lock);
		return i;
	}
	pthread_mutex_unlock(&u->lock);

	*built = true;
	elf_big_read_begin();
	if (f->vdso) {
		/* libelf may write to an image it was given: hand it a copy. */
		copy = malloc(u->vdso_size);
		if (copy) {
			memcpy(copy, u->vdso, u->vdso_size);
			e = elf_memory(copy, u->vdso_size);
		}
	} else {
		/* ELF_C_READ reads with pread: a file truncated meanwhile fails reads, no fault. */
		e = elf_begin(fd, ELF_C_READ, NULL);
	}
	if (!e || elf_kind(e) != ELF_K_ELF)
		err = -EINVAL;
	else
		err = read_loads(e, &loads, &nloads);
	if (!err)
		err = table_build(u, e, f->vdso ? -1 : fd, f->build_id, path, fs_root, &ct);
	if (!err && !ct.nrows)
		err = -ENOENT;
	/*
	 * libelf's copies of the sections (.eh_frame: 18 MB of libtorch_cpu.so) go before the rows
	 * are copied into the kernel's map, and the freed pages back to the system: what the
	 * daemon keeps is not the peak of its biggest build.
	 */
	if (e)
		elf_end(e);
	e = NULL;
	free(copy);
	copy = NULL;
	/* Walking the heap costs a little: only after builds big enough to have grown it. */
	if (ct.nrows >= TRIM_ROWS_MIN)
		malloc_trim(0);
	elf_big_read_end();

	pthread_mutex_lock(&u->lock);
	i = table_find(u, f);
	if (i < 0) {
		if (u->ntables == u->cap_tables) {
			size_t cap = u->cap_tables ? 2 * u->cap_tables : 64;
			struct table *nt = realloc(u->tables, cap * sizeof(*nt));

			if (!nt) {
				i = -ENOMEM;
				goto unlock;
			}
			u->tables = nt;
			u->cap_tables = cap;
		}
		i = (long)u->ntables++;
		t = &u->tables[i];
		memset(t, 0, sizeof(*t));
		memcpy(t->build_id, f->build_id, sizeof(t->build_id));
		t->dev = f->dev;
		t->ino = f->ino;
		t->size = f->size;
		t->mtime_ns = f->mtime_ns;
		t->vdso = f->vdso;
	}
	t = &u->tables[i];
	if (!t->loads && loads) {
		t->loads = loads;
		t->nloads = nloads;
		u->loads_bytes += nloads * sizeof(*loads);
		loads = NULL;
	}
	t->last_use = ++u->use_clock;
	if (!err && !t->loads)
		err = -EINVAL;
	if (!err)
		err = table_publish(u, t, &ct, keep);
	if (err == -ENOENT) {
		u->st.no_cfi++;
		t->fp_only = true;
		pr_info("unwind: %s: no CFI, its code is stepped with frame pointers", path);
	} else if (err == -ENOSPC) {
		/* Not for good: tried again when the process is described again. */
		pr_debug("unwind: %s: no room within --unwind-memory beside its process's tables",
			 path);
	} else if (err == -E2BIG) {
		t->fp_only = true;
		pr_warn("unwind: %s: its table alone is larger than --unwind-memory or 2^24 rows, "
			"its code is stepped with frame pointers",
			path);
	} else if (err) {
		u->st.build_failed++;
		t->fp_only = true;
		pr_warn("unwind: %s: %s, its code is stepped with frame pointers", path,
			strerror(-err));
	} else {
		u->st.builds++;
		u->st.build_ns += mono_ns() - t0;
		u->st.insn_functions += ct.stats.insn_functions;
		u->st.insn_rows += ct.stats.insn_rows;
		u->st.insn_partial += ct.stats.insn_partial;
		u->st.insn_skipped += ct.stats.insn_skipped;
		u->st.insn_insns += ct.stats.insn_insns;
		pr_debug("unwind: %s: %zu rows (%u FDEs, %u invalid) in %.1f ms", path, ct.nrows,
			 ct.stats.fdes, ct.stats.fdes_invalid, (mono_ns() - t0) / 1e6);
	}
unlock:
	pthread_mutex_unlock(&u->lock);
	cfi_table__fini(&ct);
	free(loads);
	if (e)
		elf_end(e);
	free(copy);
	return i;
}

/* Whether a mapping has no file: anonymous memory (JIT code), [stack], [heap] and such. */
static bool map_is_anon(const struct proc_map *m)
{
	return !m->path[0] || (m->path[0] == '[' && strcmp(m->path, "[vdso]"));
}

/* Write p's description val (its mappings so far) to the kernel. Locked. */
static void publish(struct unwinder *u, struct proc *p, const struct profd_unwind_proc *val)
{
	if (p->gone)
		return;
	if (bpf_map_update_elem(u->o.procs_fd, &p->pid, val, BPF_ANY)) {
		/* unwind_procs is full: frame pointers for this one for a while */
		pr_debug("unwind: pid %u: %s", p->pid, strerror(errno));
		p->retry_ns = mono_ns() + RETRY_FULL_NS;
		return;
	}
	if (!p->described)
		u->st.procs++;
	p->described = true;
}

/* How much a mapping's description is worth to the walk, best first (enum order). */
enum map_rank {
	RANK_TABLE = 0, /* its file's CFI is loaded: walked exactly */
	RANK_FILE = 1, /* a file's code without a table (no CFI, over the budget): frame pointers */
	RANK_ANON = 2, /* anonymous code (JIT): frame pointers */
	RANK__COUNT = 3,
};

/*
 * The mappings of all[0 .. n) (rank[k]: enum map_rank) a description of at most max keeps, into
 * val, in address order: the best ranks first, and within the rank that does not fit whole, the
 * lowest addresses. Returns the mappings left out.
 */
static size_t select_maps(const struct profd_unwind_map *all, const uint8_t *rank, size_t n,
			  size_t max, struct profd_unwind_proc *val)
{
	size_t per[RANK__COUNT] = {0}, room = max, last = 0;
	int cut = RANK__COUNT;

	for (size_t k = 0; k < n; k++)
		per[rank[k]]++;
	for (int r = 0; r < RANK__COUNT; r++) {
		if (per[r] > room) {
			cut = r;
			last = room; /* of rank cut, this many, the lowest first */
			break;
		}
		room -= per[r];
	}
	val->nr_maps = 0;
	for (size_t k = 0; k < n; k++) {
		if (rank[k] > cut || (rank[k] == cut && !last))
			continue;
		if (rank[k] == cut)
			last--;
		val->maps[val->nr_maps++] = all[k];
	}
	return n - val->nr_maps;
}

/*
 * Describe p's process to the kernel: each executable mapping with its file's table. The
 * worker's; p stays valid (PROC_RUNNING is not freed by others).
 */
static void describe(struct unwinder *u, struct proc *p)
{
	struct profd_unwind_proc *val = NULL;
	uint32_t *refs = NULL, nrefs = 0, built = 0, pid = p->pid;
	char fs_root[PATH_MAX];
	struct proc_map *maps = NULL;
	struct profd_unwind_map *all = NULL;
	uint64_t t0 = mono_ns(), last_log = t0, last_pub = t0;
	bool over = false;
	uint8_t *rank = NULL;
	size_t n = 0, dropped = 0;
	int err;

	/* Changes from now on are seen by the read below, or mark it stale again. */
	pthread_mutex_lock(&u->lock);
	p->stale = false;
	pthread_mutex_unlock(&u->lock);
	/* Gone (its exit record will come), or unreadable: its walks stay on frame pointers. */
	err = procfs_read_maps(u->proc_root, pid, true, &maps, &n);
	if (err)
		return;
	val = calloc(1, PROFD_UNWIND_PROC_SIZE(u->o.map_slots));
	refs = calloc(n ? n : 1, sizeof(*refs));
	/* Every mapping is looked at; which of them fit the bound is decided at the end. */
	all = calloc(n ? n : 1, sizeof(*all));
	rank = calloc(n ? n : 1, sizeof(*rank));
	if (!val || !refs || !all || !rank)
		goto out;
	snprintf(fs_root, sizeof(fs_root), "%s/%u/root", u->proc_root, pid);
	pthread_mutex_lock(&u->lock);
	u->st.busy_files = (uint32_t)n;
	u->st.busy_done = 0;
	pthread_mutex_unlock(&u->lock);

	for (size_t k = 0; k < n; k++) {
		const struct proc_map *m = &maps[k];
		struct profd_unwind_map *um;
		struct file_id f = {0};
		bool b = false;
		long slot = -1;
		struct stat sb;
		int fd = -1;

		pthread_mutex_lock(&u->lock);
		u->st.busy_done = (uint32_t)k;
		pthread_mutex_unlock(&u->lock);
		um = &all[k];
		um->start = m->start;
		um->end = m->end;
		um->table = PROFD_UNWIND_FP_ONLY;
		rank[k] = RANK_ANON;
		if (map_is_anon(m))
			continue;
		rank[k] = RANK_FILE;
		if (!strcmp(m->path, "[vdso]")) {
			if (!u->vdso)
				continue;
			f.vdso = true;
		} else {
			fd = procfs_open_mapped(u->proc_root, pid, m->path, CFI_FILE_MAX, &sb);
			if (fd < 0)
				continue;
			file_identify(fd, &sb, &f);
		}
		slot = table_get(u, &f, fd, m->path, fs_root, p, &b);
		if (fd >= 0)
			close(fd);
		built += b;
		if (slot < 0)
			continue;
		pthread_mutex_lock(&u->lock);
		{
			struct table *t = &u->tables[slot];
			uint64_t bias;

			if (t->loaded && !t->fp_only &&
			    !map_bias(t->loads, t->nloads, m->start, m->offset, &bias)) {
				um->bias = bias;
				um->table = t->id;
				um->nrows = t->nrows;
				rank[k] = RANK_TABLE;
				t->refs++;
				refs[nrefs++] = (uint32_t)slot;
				p->pending = refs;
				p->npending = nrefs;
			} else if (!t->loaded && !t->fp_only) {
				/*
				 * CFI that did not fit the bound: a walk stops here and says so
				 * (no-table), rather than guess with frame pointers; tried again
				 * after a while.
				 */
				um->table = TABLE_NONE;
				over = true;
			}
		}
		pthread_mutex_unlock(&u->lock);
		/*
		 * A process that maps hundreds of libraries: what is described so far goes to the
		 * kernel now and then (its walks stop, marked, at a mapping not described yet).
		 */
		if (mono_ns() - last_pub > PARTIAL_NS) {
			last_pub = mono_ns();
			flush_tables(u);
			select_maps(all, rank, k + 1, u->o.max_maps, val);
			pthread_mutex_lock(&u->lock);
			publish(u, p, val);
			pthread_mutex_unlock(&u->lock);
		}
		if (mono_ns() - last_log > PROGRESS_NS) {
			last_log = mono_ns();
			pr_info("unwind: pid %u: %zu of %zu mappings, %u tables built so far", pid,
				k + 1, n, built);
		}
	}

	flush_tables(u);
	dropped = select_maps(all, rank, n, u->o.max_maps, val);
	pthread_mutex_lock(&u->lock);
	p->pending = NULL;
	p->npending = 0;
	if (over)
		p->retry_ns = mono_ns() + RETRY_OVER_NS;
	publish(u, p, val);
	u->st.described++;
	u->st.maps_dropped += dropped;
	if ((dropped > 0) != p->over) {
		p->over = dropped > 0;
		if (p->over)
			u->st.over_bound++;
		else
			u->st.over_bound--;
	}
	/* The new references replace the old ones (a refresh keeps what it still maps). */
	proc_release(u, p);
	p->tables = refs;
	p->ntables = nrefs;
	u->refs_bytes += nrefs * sizeof(*refs);
	refs = NULL;
	pthread_mutex_unlock(&u->lock);
	if (built)
		pr_info("unwind: pid %u: %u mappings described, %u tables built, in %.1f ms", pid,
			val->nr_maps, built, (mono_ns() - t0) / 1e6);
out:
	free(rank);
	free(all);
	free(refs);
	free(val);
	procfs_free_maps(maps, n);
}

/*
 * Drop the descriptions of processes that are gone without their exit record reaching the
 * daemon (a full ring buffer): their entries would fill unwind_procs. Locked.
 */
static void sweep(struct unwinder *u)
{
	char path[300];

	u->swept_ns = mono_ns();
	for (size_t i = 0; u->procs.mask && i <= u->procs.mask; i++) {
		struct proc *p = u->procs.vals[i];

		if (!p || p->state != PROC_IDLE)
			continue;
		snprintf(path, sizeof(path), "%s/%u", u->proc_root, p->pid);
		if (access(path, F_OK) == 0 || errno != ENOENT)
			continue;
		proc_undescribe(u, p);
		free(p);
		ptrmap_del_slot(&u->procs, i);
		i--; /* a later entry of the cluster may have moved into slot i */
	}
}

/*
 * Queue the described processes that mapped code and whose last description is a second old
 * by now. Returns the nanoseconds until the next of the others is, or SWEEP_NS. Locked.
 */
static uint64_t requeue_stale(struct unwinder *u)
{
	uint64_t now = mono_ns(), wait = SWEEP_NS;

	for (size_t i = 0; u->procs.mask && i <= u->procs.mask; i++) {
		struct proc *p = u->procs.vals[i];

		if (!p || !p->stale || !p->described || p->state != PROC_IDLE)
			continue;
		if (proc_due(p, now)) {
			proc_queue(u, p);
			continue;
		}
		if (p->done_ns && now - p->done_ns < REFRESH_NS &&
		    REFRESH_NS - (now - p->done_ns) < wait)
			wait = REFRESH_NS - (now - p->done_ns);
		if (now < p->retry_ns && p->retry_ns - now < wait)
			wait = p->retry_ns - now;
	}
	return wait;
}

static void *worker(void *arg)
{
	struct unwinder *u = arg;

	pthread_mutex_lock(&u->lock);
	while (!u->stop) {
		struct proc *p;
		uint32_t pid;

		if (!u->q_len) {
			struct timespec ts;
			uint64_t wait;

			wait = requeue_stale(u);
			if (u->q_len)
				continue;
			pthread_cond_broadcast(&u->idle);
			if (mono_ns() - u->swept_ns >= SWEEP_NS) {
				sweep(u);
				continue;
			}
			clock_gettime(CLOCK_MONOTONIC, &ts);
			wait += (uint64_t)ts.tv_nsec;
			ts.tv_sec += (time_t)(wait / 1000000000);
			ts.tv_nsec = (long)(wait % 1000000000);
			pthread_cond_timedwait(&u->wake, &u->lock, &ts);
			continue;
		}
		pid = u->queue[u->q_head];
		u->q_head = (u->q_head + 1) % u->q_cap;
		u->q_len--;
		u->st.queued = u->q_len;
		p = ptrmap_get(&u->procs, pid);
		if (!p || p->state != PROC_QUEUED)
			continue;
		p->state = PROC_RUNNING;
		u->st.busy_pid = pid;
		pthread_mutex_unlock(&u->lock);

		describe(u, p);

		pthread_mutex_lock(&u->lock);
		p->state = PROC_IDLE;
		p->done_ns = mono_ns();
		u->st.busy_pid = 0;
		u->st.busy_done = u->st.busy_files = 0;
		if (p->gone) {
			proc_undescribe(u, p);
			ptrmap_del(&u->procs, pid);
			free(p);
		}
	}
	pthread_cond_broadcast(&u->idle);
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

/* A copy of this process's vDSO: every process of this kernel maps the same image. */
static void vdso_read(struct unwinder *u)
{
	struct proc_map *maps = NULL;
	size_t n = 0;

	if (!getauxval(AT_SYSINFO_EHDR) ||
	    procfs_read_maps("/proc", (uint32_t)getpid(), false, &maps, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(maps[i].path, "[vdso]") || maps[i].end - maps[i].start > (1u << 20))
			continue;
		u->vdso = malloc(maps[i].end - maps[i].start);
		if (u->vdso) {
			u->vdso_size = maps[i].end - maps[i].start;
			memcpy(u->vdso, (void *)maps[i].start, u->vdso_size);
		}
		break;
	}
	procfs_free_maps(maps, n);
}

struct unwinder *unwinder__new(const struct unwinder_opts *opts)
{
	struct unwinder *u = calloc(1, sizeof(*u));
	int err;

	if (!u)
		return NULL;
	u->o = *opts;
	u->st.memory = opts->memory ? opts->memory : UNWINDER_DEFAULT_MEMORY;
	if (!u->o.max_maps)
		u->o.max_maps = PROFD_UNWIND_MAX_MAPS;
	if (u->o.map_slots < u->o.max_maps) {
		free(u);
		errno = EINVAL;
		return NULL;
	}
	u->st.max_maps = u->o.max_maps;
	snprintf(u->proc_root, sizeof(u->proc_root), "%s",
		 opts->proc_root ? opts->proc_root : "/proc");
	snprintf(u->debug_root, sizeof(u->debug_root), "%s",
		 opts->debug_root ? opts->debug_root : "/usr/lib/debug");
	elf_version(EV_CURRENT);
	vdso_read(u);
	pthread_mutex_init(&u->lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&u->wake, &ca);
		pthread_condattr_destroy(&ca);
	}
	pthread_cond_init(&u->idle, NULL);
	err = pthread_create(&u->thread, NULL, worker, u);
	if (err) {
		unwinder__free(u);
		errno = err;
		return NULL;
	}
	u->thread_started = true;
	return u;
}

void unwinder__free(struct unwinder *u)
{
	if (!u)
		return;
	if (u->thread_started) {
		pthread_mutex_lock(&u->lock);
		u->stop = true;
		pthread_cond_signal(&u->wake);
		pthread_mutex_unlock(&u->lock);
		pthread_join(u->thread, NULL);
	}
	for (size_t i = 0; u->procs.mask && i <= u->procs.mask; i++) {
		struct proc *p = u->procs.vals[i];

		if (p) {
			free(p->tables);
			free(p);
		}
	}
	ptrmap_fini(&u->procs);
	for (size_t i = 0; i < u->ntables; i++)
		free(u->tables[i].loads);
	free(u->tables);
	free(u->queue);
	free(u->vdso);
	for (size_t i = 0; i < u->nbatch; i++)
		close(u->batch_fds[i]);
	free(u->batch_ids);
	free(u->batch_fds);
	free(u->evict_ids);
	pthread_cond_destroy(&u->idle);
	pthread_cond_destroy(&u->wake);
	pthread_mutex_destroy(&u->lock);
	free(u);
}
