// SPDX-License-Identifier: BSD-2-Clause
/*
 * Loads for the churn soak (bench/run.py churn), one mode per process. Each mode runs until it
 * is killed and rewrites COUNTS (a JSON object of what it did so far) about once a second.
 *
 *   churn threads RATE COUNTS     start and join RATE short threads a second that burn CPU
 *   churn forks RATE COUNTS       fork RATE children a second (no exec) that burn CPU and exit;
 *                                 one in ten forks a grandchild and exits before it
 *   churn victim MS               burn MS ms of CPU and exit (the binary that gets replaced)
 *   churn elf LIB DIR COUNTS      copy the library LIB (bench/churn_lib.c) into DIR with its
 *                                 bytes flipped, headers garbled or its tail cut off, map the
 *                                 copy as the dynamic loader would and run its spin loop in it;
 *                                 now and then also map a corrupted copy of the system's libm
 *   churn jit MIB COUNTS          run code from anonymous executable memory, named by a
 *                                 /tmp/perf-PID.map of MIB MiB (valid lines for code that is
 *                                 not there, garbage lines, and the real entries at its start,
 *                                 middle and end); every 2 s append lines and a new function
 *   churn jitlink TARGET COUNTS   the same code, but /tmp/perf-PID.map is a symbolic link to
 *                                 TARGET (a file only root may read)
 *
 * Built by bench/run.py (cc -O1 -g -fno-omit-frame-pointer ... -pthread -ldl); a second build
 * with -DCHURN_VARIANT=2 gives the victim different code under other names.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

/* The counter on the stack gives this leaf a frame (see bench/work.c). */
__attribute__((noinline)) static void burn(unsigned long n)
{
	for (volatile unsigned long i = 0; i < n; i++)
		sink += i;
}

static unsigned long burn_per_us;

static void calibrate(void)
{
	unsigned long n = 1000;
	double t;

	for (;;) {
		t = now_s();
		burn(n);
		t = now_s() - t;
		if (t > 0.01)
			break;
		n *= 4;
	}
	burn_per_us = (unsigned long)((double)n / (t * 1e6)) + 1;
}

static void burn_us(double us)
{
	burn((unsigned long)(us * (double)burn_per_us));
}

/* Sleep until `done` units are due at `rate` a second since *t0; never catch up more than 1 s. */
static void pace(double *t0, double done, double rate)
{
	double due = *t0 + done / rate, now = now_s();

	if (now - due > 1.0)
		*t0 += now - due - 1.0;
	else
		sleep_s(due - now);
}

static const char *counts_path;
static double counts_last;

/* Write the counts file (atomically) at most once a second, or now with force. */
static void counts(int force, const char *fmt, ...)
{
	char tmp[4096];
	va_list ap;
	FILE *f;

	if (!force && now_s() - counts_last < 1.0)
		return;
	counts_last = now_s();
	snprintf(tmp, sizeof(tmp), "%s.tmp", counts_path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	if (fclose(f) == 0)
		rename(tmp, counts_path);
}

/* --- threads ------------------------------------------------------------------------------ */

__attribute__((noinline)) static void *thread_body(void *arg)
{
	(void)arg;
	burn_us(20);
	return NULL;
}

static int mode_threads(double rate)
{
	pthread_t t[16];
	pthread_attr_t attr;
	unsigned long long started = 0, failed = 0;
	double t0 = now_s();
	int i, n;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	for (;;) {
		for (n = 0, i = 0; i < 16; i++) {
			if (pthread_create(&t[n], &attr, thread_body, NULL))
				failed++;
			else
				n++;
		}
		for (i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		started += (unsigned long long)n;
		counts(0, "{\"threads\": %llu, \"failed\": %llu}", started, failed);
		pace(&t0, (double)started + (double)failed, rate);
	}
	return 0;
}

/* --- forks -------------------------------------------------------------------------------- */

__attribute__((noinline)) static void child_body(double us)
{
	burn_us(us);
}

static int mode_forks(double rate)
{
	unsigned long long forks = 0, grandchildren = 0, failed = 0;
	double t0 = now_s();
	pid_t pid;

	for (;;) {
		int grand = forks % 10 == 9;

		pid = fork();
		if (pid == 0) {
			if (grand && fork() == 0) {
				/* Orphaned at once: reparented while it runs. */
				child_body(1000);
				_exit(0);
			}
			child_body(2000);
			_exit(0);
		}
		if (pid < 0) {
			failed++;
			sleep_s(0.01);
		} else {
			forks++;
			grandchildren += grand;
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
		}
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		counts(0, "{\"forks\": %llu, \"grandchildren\": %llu, \"failed\": %llu}", forks,
		       grandchildren, failed);
		pace(&t0, (double)(forks + failed), rate);
	}
}

/* --- victim ------------------------------------------------------------------------------- */

#if CHURN_VARIANT == 2
#define VICTIM_SPIN victim_spin_b
#else
#define VICTIM_SPIN victim_spin_a
#endif

__attribute__((noinline)) static void VICTIM_SPIN(double ms)
{
	double end = now_s() + ms / 1000;

	while (now_s() < end)
#if CHURN_VARIANT == 2
		burn(20000);
#else
		burn(10000);
#endif
}

static int mode_victim(double ms)
{
	VICTIM_SPIN(ms);
	return 0;
}

/* --- elf ---------------------------------------------------------------------------------- */

struct blob {
	unsigned char *p;
	size_t n;
};

static int read_file(const char *path, struct blob *b)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	b->n = (size_t)st.st_size;
	b->p = malloc(b->n);
	if (!b->p || pread(fd, b->p, b->n, 0) != (ssize_t)b->n) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Layout of the pristine library, used to map and run every copy whatever its headers say. */
static struct {
	Elf64_Phdr load[8];
	int nload;
	uint64_t span;		   /* bytes of address space all PT_LOADs need */
	uint64_t fn_vaddr;	   /* churn_lib_spin */
	uint64_t text_lo, text_hi; /* file range of the executable segment: never corrupted */
} lib;

static int in_text(size_t off)
{
	return off >= lib.text_lo && off < lib.text_hi;
}

static void flip_outside_text(struct blob *b, int count)
{
	size_t off;

	while (count-- > 0) {
		off = rnd() % b->n;
		if (!in_text(off))
			b->p[off] ^= (unsigned char)(1 + rnd() % 255);
	}
}

static Elf64_Shdr *shdrs(struct blob *b, int *n)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)b->p;

	*n = 0;
	if (eh->e_shoff == 0 || eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > b->n)
		return NULL;
	*n = eh->e_shnum;
	return (Elf64_Shdr *)(b->p + eh->e_shoff);
}

static uint64_t garbage64(void)
{
	switch (rnd() % 4) {
	case 0:
		return ~0ull - rnd() % 64;
	case 1:
		return 1ull << (rnd() % 64);
	case 2:
		return rnd();
	default:
		return rnd() % 4096;
	}
}

static const char *const kinds[] = {
    "flip",
    "ehdr",
    "shdrs",
    "strtabs",
    "symtabs",
    "notes",
    "compressed",
    "cut_text",
    "cut_tail",
    "random",
    "class",
    "dynamic",
    "changed_while_mapped",
};
#define NKINDS (int)(sizeof(kinds) / sizeof(kinds[0]))

/* Corrupt copy b (of the pristine library) the kind'th way; returns the length to write. */
static size_t corrupt(struct blob *b, int kind)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)b->p;
	Elf64_Shdr *sh;
	size_t i, j;
	int n;

	sh = shdrs(b, &n);
	switch (kind) {
	case 0:
	case 12:
		flip_outside_text(b, 64);
		break;
	case 1:
		eh->e_shoff = garbage64();
		eh->e_shnum = (Elf64_Half)rnd();
		eh->e_shstrndx = (Elf64_Half)rnd();
		eh->e_shentsize = (Elf64_Half)(rnd() % 3 ? sizeof(Elf64_Shdr) : rnd());
		if (rnd() % 2) {
			eh->e_phoff = garbage64();
			eh->e_phnum = (Elf64_Half)rnd();
		}
		break;
	case 2:
		for (i = 0; sh && i < (size_t)n; i++) {
			if (rnd() % 2)
				sh[i].sh_offset = garbage64();
			if (rnd() % 2)
				sh[i].sh_size = garbage64();
			if (rnd() % 3 == 0)
				sh[i].sh_link = (Elf64_Word)(rnd() % 3 ? i : rnd());
			if (rnd() % 3 == 0)
				sh[i].sh_entsize = garbage64();
			if (rnd() % 4 == 0)
				sh[i].sh_name = (Elf64_Word)rnd();
		}
		break;
	case 3:
		for (i = 0; sh && i < (size_t)n; i++)
			if (sh[i].sh_type == SHT_STRTAB && sh[i].sh_offset + sh[i].sh_size <= b->n)
				for (j = 0; j < sh[i].sh_size; j++)
					if (!b->p[sh[i].sh_offset + j])
						b->p[sh[i].sh_offset + j] = 'A';
		break;
	case 4:
		for (i = 0; sh && i < (size_t)n; i++) {
			Elf64_Sym *sym;
			size_t k, ns;

			if ((sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) ||
			    sh[i].sh_offset + sh[i].sh_size > b->n)
				continue;
			sym = (Elf64_Sym *)(b->p + sh[i].sh_offset);
			ns = sh[i].sh_size / sizeof(*sym);
			for (k = 0; k < ns; k++) {
				if (rnd() % 2)
					sym[k].st_name = (Elf64_Word)garbage64();
				if (rnd() % 2)
					sym[k].st_value = garbage64();
				if (rnd() % 2)
					sym[k].st_size = garbage64();
				if (rnd() % 4 == 0)
					sym[k].st_shndx = (Elf64_Section)rnd();
			}
		}
		break;
	case 5:
		for (i = 0; sh && i < (size_t)n; i++) {
			if (sh[i].sh_offset + sh[i].sh_size > b->n || sh[i].sh_size < 12)
				continue;
			if (sh[i].sh_type == SHT_NOTE) {
				Elf64_Nhdr *nh = (Elf64_Nhdr *)(b->p + sh[i].sh_offset);

				nh->n_namesz = (Elf64_Word)garbage64();
				nh->n_descsz = (Elf64_Word)garbage64();
			}
		}
		/* A debug link whose name never ends. */
		for (i = 0; sh && i < (size_t)n; i++)
			if (sh[i].sh_type == SHT_PROGBITS && !(sh[i].sh_flags & SHF_ALLOC) &&
			    sh[i].sh_offset + sh[i].sh_size <= b->n)
				memset(b->p + sh[i].sh_offset, 'D', sh[i].sh_size);
		break;
	case 6:
		/* Compressed debug sections whose header promises a terabyte. */
		for (i = 0; sh && i < (size_t)n; i++) {
			Elf64_Chdr *ch;

			if (sh[i].sh_type != SHT_PROGBITS || (sh[i].sh_flags & SHF_ALLOC) ||
			    sh[i].sh_offset + sh[i].sh_size > b->n || sh[i].sh_size < sizeof(*ch))
				continue;
			sh[i].sh_flags |= SHF_COMPRESSED;
			ch = (Elf64_Chdr *)(b->p + sh[i].sh_offset);
			ch->ch_type = rnd() % 4 ? ELFCOMPRESS_ZLIB : (Elf64_Word)rnd();
			ch->ch_size = rnd() % 2 ? 1ull << 40 : garbage64();
			ch->ch_addralign = rnd() % 2 ? 8 : garbage64();
			for (j = sizeof(*ch); j < sh[i].sh_size; j++)
				b->p[sh[i].sh_offset + j] = (unsigned char)rnd();
		}
		break;
	case 7:
		return lib.text_hi;
	case 8:
		return lib.text_hi + rnd() % (b->n - lib.text_hi + 1);
	case 9:
		for (i = 0; i < b->n; i++)
			if (!in_text(i))
				b->p[i] = (unsigned char)rnd();
		break;
	case 10:
		eh->e_ident[EI_CLASS] = rnd() % 2 ? ELFCLASS32 : (unsigned char)rnd();
		eh->e_ident[EI_DATA] = rnd() % 2 ? ELFDATA2MSB : (unsigned char)rnd();
		break;
	case 11:
		for (i = 0; i < (size_t)lib.nload + 8 &&
			    eh->e_phoff + (i + 1) * sizeof(Elf64_Phdr) <= b->n && i < eh->e_phnum;
		     i++) {
			Elf64_Phdr *ph = (Elf64_Phdr *)(b->p + eh->e_phoff) + i;
			Elf64_Dyn *dyn;
			size_t k;

			if (ph->p_type != PT_DYNAMIC || ph->p_offset + ph->p_filesz > b->n)
				continue;
			dyn = (Elf64_Dyn *)(b->p + ph->p_offset);
			for (k = 0; k < ph->p_filesz / sizeof(*dyn); k++)
				if (dyn[k].d_tag == DT_STRTAB || dyn[k].d_tag == DT_SYMTAB ||
				    dyn[k].d_tag == DT_STRSZ || dyn[k].d_tag == DT_GNU_HASH ||
				    dyn[k].d_tag == DT_HASH || dyn[k].d_tag == DT_SYMENT)
					dyn[k].d_un.d_val = garbage64();
		}
		break;
	}
	return b->n;
}

static int lib_layout(const char *path, const struct blob *b)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b->p;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(b->p + eh->e_phoff);
	void *h, *fn;
	Dl_info info;
	int i;

	for (i = 0; i < eh->e_phnum && lib.nload < 8; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		lib.load[lib.nload++] = ph[i];
		if (ph[i].p_vaddr + ph[i].p_memsz > lib.span)
			lib.span = ph[i].p_vaddr + ph[i].p_memsz;
		if (ph[i].p_flags & PF_X) {
			lib.text_lo = ph[i].p_offset;
			lib.text_hi = ph[i].p_offset + ph[i].p_filesz;
		}
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	fn = h ? dlsym(h, "churn_lib_spin") : NULL;
	if (!fn || !dladdr(fn, &info) || !lib.text_hi) {
		fprintf(stderr, "churn: %s: no churn_lib_spin or no text segment\n", path);
		return -1;
	}
	lib.fn_vaddr = (uint64_t)((char *)fn - (char *)info.dli_fbase);
	lib.span = (lib.span + 4095) & ~4095ull;
	return 0;
}

/* Map the file as ld.so would (each PT_LOAD of the pristine layout, as far as the file goes). */
static char *map_lib(int fd, size_t size)
{
	char *base = mmap(NULL, lib.span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int i;

	if (base == MAP_FAILED)
		return NULL;
	for (i = 0; i < lib.nload; i++) {
		const Elf64_Phdr *ph = &lib.load[i];
		uint64_t off = ph->p_offset & ~4095ull, va = ph->p_vaddr & ~4095ull;
		uint64_t len = ph->p_offset + ph->p_filesz - off;
		int prot = PROT_READ;

		if (off >= size || !ph->p_filesz)
			continue;
		if (ph->p_flags & PF_X)
			prot |= PROT_EXEC;
		if (ph->p_flags & PF_W)
			prot |= PROT_WRITE;
		if (mmap(base + va, len, prot, MAP_PRIVATE | MAP_FIXED, fd, (off_t)off) ==
		    MAP_FAILED) {
			munmap(base, lib.span);
			return NULL;
		}
	}
	return base;
}

static int write_copy(const char *path, const unsigned char *p, size_t n)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	if (write(fd, p, n) != (ssize_t)n) {
		close(fd);
		unlink(path);
		return -1;
	}
	return fd;
}

/* A corrupted copy of the system's libm, mapped executable (never run) while the spin runs. */
static int sys_copy(const char *dir, unsigned long long iter, struct blob *sys, char **base,
		    size_t *len)
{
	char path[4096];
	unsigned char *p;
	size_t n = sys->n, i;
	int fd;

	p = malloc(n);
	if (!p)
		return -1;
	memcpy(p, sys->p, n);
	if (iter % 3 == 0)
		n = n / 2 + rnd() % (n / 2);
	for (i = 0; i < 256; i++)
		p[rnd() % n] ^= (unsigned char)(1 + rnd() % 255);
	snprintf(path, sizeof(path), "%s/libm-churn-%llu.so.6", dir, iter);
	fd = write_copy(path, p, n);
	free(p);
	if (fd < 0)
		return -1;
	*len = n;
	*base = mmap(NULL, n, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	close(fd);
	unlink(path); /* the mapping stays, as "(deleted)" */
	return *base == MAP_FAILED ? -1 : 0;
}

static int mode_elf(const char *libpath, const char *dir)
{
	unsigned long long iter = 0, ran = 0, mapped = 0, sysmaps = 0, per_kind[NKINDS] = {0};
	unsigned long spin_n = 1000;
	struct blob pristine, copy, sys = {0};
	char path[4096], json[4096], *sysbase = NULL;
	size_t syslen = 0;
	unsigned long (*fn)(unsigned long);
	Dl_info info;
	void *h;
	double t;
	int i, k;

	if (read_file(libpath, &pristine) || lib_layout(libpath, &pristine))
		return 1;
	copy.p = malloc(pristine.n);
	if (!copy.p)
		return 1;
	h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
	if (h && dladdr(dlsym(h, "cos"), &info) && info.dli_fname)
		read_file(info.dli_fname, &sys);
	/* Iterations of the pristine spin loop in about 80 ms. */
	fn = (unsigned long (*)(unsigned long))dlsym(dlopen(libpath, RTLD_NOW), "churn_lib_spin");
	for (;;) {
		t = now_s();
		fn(spin_n);
		t = now_s() - t;
		if (t > 0.01) {
			spin_n = (unsigned long)((double)spin_n * 0.08 / t);
			break;
		}
		spin_n *= 4;
	}
	for (;;) {
		int kind = (int)(iter % NKINDS), fd;
		char *base;
		size_t n;

		memcpy(copy.p, pristine.p, pristine.n);
		copy.n = pristine.n;
		n = corrupt(&copy, kind);
		snprintf(path, sizeof(path), "%s/libchurn-%llu.so", dir, iter);
		fd = write_copy(path, copy.p, n);
		iter++;
		per_kind[kind]++;
		if (fd < 0) {
			sleep_s(0.1);
			continue;
		}
		base = map_lib(fd, n);
		if (sys.p && iter % 4 == 0 && !sys_copy(dir, iter, &sys, &sysbase, &syslen))
			sysmaps++;
		if (base) {
			mapped++;
			if (kind == 12) /* changed under the mapping, outside the text */
				for (i = 0; i < 64; i++) {
					unsigned char c = (unsigned char)rnd();
					off_t off = (off_t)(rnd() % lib.text_lo);

					if (pwrite(fd, &c, 1, off) < 0)
						break;
				}
			if (n >= lib.text_hi) {
				((unsigned long (*)(unsigned long))(base + lib.fn_vaddr))(spin_n);
				ran++;
			}
			if (kind == 12) {
				/* Cut while still mapped; burn elsewhere, touch none of it. */
				if (ftruncate(fd, (off_t)(lib.text_lo / 2)) == 0)
					burn_us(30000);
			}
		}
		close(fd);
		sleep_s(0.15); /* still mapped: the daemon may look at it now */
		if (base)
			munmap(base, lib.span);
		if (sysbase) {
			munmap(sysbase, syslen);
			sysbase = NULL;
		}
		unlink(path);
		k = snprintf(
		    json, sizeof(json),
		    "{\"copies\": %llu, \"mapped\": %llu, \"ran\": %llu, \"libm_copies\": %llu",
		    iter, mapped, ran, sysmaps);
		for (i = 0; i < NKINDS && k < (int)sizeof(json) - 64; i++)
			k += snprintf(json + k, sizeof(json) - (size_t)k, ", \"%s\": %llu",
				      kinds[i], per_kind[i]);
		counts(0, "%s}", json);
	}
}

/* --- jit ---------------------------------------------------------------------------------- */

#define JIT_SLOTS 128
#define JIT_REGION (JIT_SLOTS * 4096)

#if defined(__x86_64__)
/* push rbp; mov rbp, rsp; mov rax, rdi; 1: dec rax; jnz 1b; pop rbp; ret */
static const unsigned char jit_code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xf8,
					 0x48, 0xff, 0xc8, 0x75, 0xfb, 0x5d, 0xc3};
#elif defined(__aarch64__)
/* stp x29, x30, [sp, #-16]!; mov x29, sp; 1: subs x0, x0, #1; b.ne 1b; ldp x29, x30, [sp], #16;
 * ret */
static const uint32_t jit_code[] = {0xa9bf7bfd, 0x910003fd, 0xf1000400,
				    0x54ffffe1, 0xa8c17bfd, 0xd65f03c0};
#else
#define JIT_NONE
static const unsigned char jit_code[16];
#endif

static unsigned char *jit_base;
static int jit_n;

static uint64_t jit_addr(int k)
{
	return (uint64_t)(uintptr_t)jit_base + (uint64_t)k * 4096 + (uint64_t)(k * 48 % 2048);
}

static void jit_emit(int k)
{
#ifndef JIT_NONE
	unsigned char *p = (unsigned char *)(uintptr_t)jit_addr(k);

	memcpy(p, jit_code, sizeof(jit_code));
	__builtin___clear_cache((char *)p, (char *)p + sizeof(jit_code));
#else
	(void)k;
#endif
}

struct out {
	int fd;
	char buf[1 << 20];
	size_t n;
	unsigned long long bytes, lines, garbage;
};

static void out_flush(struct out *o)
{
	size_t done = 0;
	ssize_t w;

	while (done < o->n) {
		w = write(o->fd, o->buf + done, o->n - done);
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	o->bytes += done;
	o->n = 0;
}

static void out_put(struct out *o, const char *s, size_t n)
{
	if (o->n + n > sizeof(o->buf))
		out_flush(o);
	memcpy(o->buf + o->n, s, n);
	o->n += n;
}

static void out_line(struct out *o, const char *fmt, ...)
{
	char line[8192];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0)
		out_put(o, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	o->lines++;
}

/* One line the daemon must skip (or, for the last kinds, may take: they are valid). */
static void garbage_line(struct out *o, unsigned long long i)
{
	char long_name[6001];
	unsigned char bin[64];
	size_t k;

	o->garbage++;
	switch (i % 14) {
	case 0:
		out_line(o, "not a perf map line at all\n");
		break;
	case 1:
		out_line(o, "zzzz 10 bad_start\n");
		break;
	case 2:
		out_line(o, "1000 zz bad_size\n");
		break;
	case 3:
		out_line(o, "1000 0 zero_size\n");
		break;
	case 4:
		out_line(o, "ffffffffffffff00 1000 wraps_around\n");
		break;
	case 5:
		out_line(o, "1000\n");
		break;
	case 6:
		out_line(o, "\n");
		break;
	case 7:
		out_line(o, "   2000 10 leading_spaces\n");
		break;
	case 8:
		memset(long_name, 'L', sizeof(long_name) - 1);
		long_name[sizeof(long_name) - 1] = '\0';
		out_line(o, "3000 10 %s\n", long_name);
		break;
	case 9:
		out_put(o, "4000 10 nul\0inside\n", 19);
		o->lines++;
		break;
	case 10:
		out_line(o, "5000 10 crlf_name\r\n");
		break;
	case 11:
		for (k = 0; k < sizeof(bin); k++) {
			bin[k] = (unsigned char)rnd();
			if (bin[k] == '\n')
				bin[k] = 'n';
		}
		out_put(o, (const char *)bin, sizeof(bin));
		out_line(o, "\n");
		break;
	case 12:
		out_line(o, "10000000000000000 10 start_too_wide\n");
		break;
	default:
		out_line(o, "0 7fffffffffff covers_everything_%llu\n", i);
		break;
	}
}

static void filler_line(struct out *o, unsigned long long i)
{
	static const char pad[] =
	    "_LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL"
	    "LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL";

	/* Code that is not there: addresses far from the real region. */
	out_line(o, "%llx %x fake::jit::Method%llu(int, long)%.*s\n", 0x100000000000ull + i * 0x40,
		 0x40, i, (int)(i % 7) * 16, pad);
}

/* A stale entry for the same start first: the later line must win. */
static void real_entry(struct out *o, int k)
{
	out_line(o, "%llx %zx churn_jit_stale_%d\n", (unsigned long long)jit_addr(k),
		 sizeof(jit_code), k);
	out_line(o, "%llx %zx churn_jit_fn_%d\n", (unsigned long long)jit_addr(k), sizeof(jit_code),
		 k);
}

static int mode_jit(double map_mib, const char *link_target)
{
	unsigned long long appends = 0, calls = 0, fn_iters = 1000;
	double next_append, t, slice_start, duty = link_target ? 0.1 : 0.3;
	char path[64];
	struct out *o;
	unsigned long long i, total;
	int k, real_done = 0, initial = 15;

	o = calloc(1, sizeof(*o));
	jit_base = mmap(NULL, JIT_REGION, PROT_READ | PROT_WRITE | PROT_EXEC,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!o || jit_base == MAP_FAILED) {
		perror("churn: jit region");
		return 1;
	}
	for (k = 0; k < initial; k++)
		jit_emit(k);
	jit_n = initial;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	unlink(path); /* one left by an earlier process of this pid, if it is ours */
	if (link_target) {
		if (symlink(link_target, path))
			perror("churn: symlink perf map");
		o->fd = -1;
	} else {
		o->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC,
			     0644);
		if (o->fd < 0) {
			perror("churn: perf map");
			return 1;
		}
		/* MIB of lines; the real entries a third each at the start, middle and end. */
		total = (unsigned long long)(map_mib * 1048576.0);
		for (; real_done < initial / 3; real_done++)
			real_entry(o, real_done);
		for (i = 0; o->bytes + o->n < total; i++) {
			if (real_done < 2 * initial / 3 && o->bytes + o->n >= total / 2)
				for (; real_done < 2 * initial / 3; real_done++)
					real_entry(o, real_done);
			if (i % 997 == 996)
				garbage_line(o, i / 997);
			else
				filler_line(o, i);
		}
		for (; real_done < initial; real_done++)
			real_entry(o, real_done);
		out_flush(o);
	}
	/* Iterations of one function in about 1 ms. */
	for (;;) {
		t = now_s();
		((unsigned long (*)(unsigned long))(uintptr_t)jit_addr(0))(fn_iters);
		t = now_s() - t;
		if (t > 0.005) {
			fn_iters = (unsigned long long)((double)fn_iters * 0.001 / t) + 1;
			break;
		}
		fn_iters *= 4;
	}
#ifdef JIT_NONE
	fprintf(stderr, "churn: no JIT code for this architecture; burning in C instead\n");
#endif
	next_append = now_s() + 2;
	for (;;) {
		/* 100 ms slices, duty of them busy in the JIT code, the rest asleep. */
		slice_start = now_s();
		while (now_s() - slice_start < 0.1 * duty) {
#ifdef JIT_NONE
			burn(fn_iters);
#else
			((unsigned long (*)(unsigned long))(uintptr_t)jit_addr(
			    (int)(calls % (unsigned)jit_n)))(fn_iters);
#endif
			calls++;
		}
		sleep_s(0.1 - (now_s() - slice_start));
		if (o->fd >= 0 && now_s() >= next_append) {
			next_append += 2;
			for (i = 0; i < 2000; i++) {
				if (i % 97 == 96)
					garbage_line(o, i);
				else
					filler_line(o, rnd() % 100000000);
			}
			if (jit_n < JIT_SLOTS) {
				jit_emit(jit_n);
				out_line(o, "%llx %zx churn_jit_late_%d\n",
					 (unsigned long long)jit_addr(jit_n), sizeof(jit_code),
					 jit_n);
				jit_n++;
			}
			out_flush(o);
			appends++;
		}
		counts(0,
		       "{\"jit_calls\": %llu, \"jit_functions\": %d, \"map_bytes\": %llu, "
		       "\"map_lines\": %llu, \"garbage_lines\": %llu, \"appends\": %llu, "
		       "\"symlink\": %d}",
		       calls, jit_n, o->bytes, o->lines, o->garbage, appends, link_target != NULL);
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	char name[16];

	rng_state = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
	if (!rng_state)
		rng_state = 1;
	if (strcmp(mode, "victim") == 0 && argc == 3)
		return mode_victim(atof(argv[2]));
	snprintf(name, sizeof(name), "churn-%s", mode);
	prctl(PR_SET_NAME, name);
	calibrate();
	if (strcmp(mode, "threads") == 0 && argc == 4) {
		counts_path = argv[3];
		return mode_threads(atof(argv[2]));
	}
	if (strcmp(mode, "forks") == 0 && argc == 4) {
		counts_path = argv[3];
		return mode_forks(atof(argv[2]));
	}
	if (strcmp(mode, "elf") == 0 && argc == 5) {
		counts_path = argv[4];
		return mode_elf(argv[2], argv[3]);
	}
	if (strcmp(mode, "jit") == 0 && argc == 4) {
		counts_path = argv[3];
		return mode_jit(atof(argv[2]), NULL);
	}
	if (strcmp(mode, "jitlink") == 0 && argc == 4) {
		counts_path = argv[3];
		return mode_jit(0, argv[2]);
	}
	fprintf(stderr, "usage: churn threads|forks RATE COUNTS | victim MS | elf LIB DIR COUNTS |"
			" jit MIB COUNTS | jitlink TARGET COUNTS\n");
	return 2;
}
