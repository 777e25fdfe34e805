// SPDX-License-Identifier: BSD-2-Clause
/*
 * The daemon's readers of files a profiled process controls: its ELF images (symbols, program
 * headers, build-id, debug links, the stapsdt notes of a launch probe library), its
 * /proc/PID/maps lines and its perf map. The first byte of an input picks the reader, the rest
 * is the file:
 *
 *	0  ELF image from memory (elf_image__load_mem, as the vdso), then lookups and names
 *	1  ELF file on a memfd: build-id, elf_image__load with an empty debug directory, and
 *	   sampler__count_launch_notes
 *	2  maps: each line through procfs_parse_maps_line, then the file as PROC/PID/maps
 *	   through procfs_read_maps
 *	3  perf map on a memfd through perf_map__scan; the first byte after the selector picks
 *	   the budget and the read bound, the next the number of wanted addresses (8 bytes
 *	   each, little-endian) that follow
 *	4  /proc/PID/cgroup text through the export's labels_from_cgroup (container, pod)
 *	5  /proc/PID/environ bytes through labels_service_from_environ
 *	6  a configuration file on the memfd through config_parse (--config); the file is the
 *	   administrator's, but a crash on a typo is still a crash
 *	7  a spooled request through pyroscope__count and pyroscope__split (the spool is on disk:
 *	   a torn or foreign file must be refused, not trusted); the same bytes as a spool file
 *	   through spool_read, whose header must verify before the body is read, and counted
 *
 * Files are written only under a temporary directory and into a memfd; nothing is kept
 * between inputs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "labels.h"
#include "log.h"
#include "perf_map.h"
#include "pyroscope.h"
#include "procfs.h"
#include "spool.h"
#include "sampler.h"
#include "symbolize_elf.h"
#include "sym_index.h"

#define MAPS_PID 4242

static char tmp_root[64], maps_path[128], debug_root[128];
static int memfd = -1, spool_fd = -1;

static void log_discard(enum log_level level, const char *msg, void *ctx)
{
}

static void cleanup(void)
{
	char path[160];

	unlink(maps_path);
	if (spool_fd >= 0)
		unlinkat(spool_fd, "x.req", 0);
	snprintf(path, sizeof(path), "%s/spool", tmp_root);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/%u", tmp_root, MAPS_PID);
	rmdir(path);
	rmdir(debug_root);
	rmdir(tmp_root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[160];

	log_set_level(LOG_LVL_DEBUG);
	log_set_sink(log_discard, NULL);
	snprintf(tmp_root, sizeof(tmp_root), "%s/profd-fuzz-parsers-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp_root)) {
		perror("fuzz_parsers: mkdtemp");
		abort();
	}
	snprintf(path, sizeof(path), "%s/%u", tmp_root, MAPS_PID);
	snprintf(maps_path, sizeof(maps_path), "%s/maps", path);
	snprintf(debug_root, sizeof(debug_root), "%s/debug", tmp_root);
	if (mkdir(path, 0755) || mkdir(debug_root, 0755))
		abort();
	snprintf(path, sizeof(path), "%s/spool", tmp_root);
	if (mkdir(path, 0700))
		abort();
	spool_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (spool_fd < 0)
		abort();
	atexit(cleanup);
	memfd = memfd_create("profd-fuzz", MFD_CLOEXEC);
	if (memfd < 0) {
		perror("fuzz_parsers: memfd_create");
		abort();
	}
	return 0;
}

/* The memfd holds exactly data, read from its start. */
static int memfd_fill(const uint8_t *data, size_t size)
{
	if (ftruncate(memfd, 0) || (size && pwrite(memfd, data, size, 0) != (ssize_t)size) ||
	    lseek(memfd, 0, SEEK_SET))
		abort();
	return memfd;
}

/* What the symbolizer does with an image once loaded: look addresses up, name them. */
static void use_image(struct elf_image *img)
{
	static struct name_cache *names;
	struct sym_index *ixs[] = {img->ix, img->plt_ix};
	uint64_t vaddr;

	if (!names && !(names = name_cache__new(256, 1u << 20)))
		abort();
	/* Every function the index holds is found at its start, and named (or not) from the file.
	 */
	for (size_t k = 0; k < 2; k++) {
		for (size_t i = 0; i < sym_index__count(ixs[k]) && i < 64; i++) {
			if (sym_index__find(ixs[k], sym_index__addr(ixs[k], i)) < 0)
				abort();
			elf_image__symbol(img, names, sym_index__addr(ixs[k], i));
		}
	}
	for (size_t i = 0; i < img->plt.n && i < 64; i++)
		elf_image__symbol(img, names, img->plt.syms[i].addr);
	elf_image__symbol(img, names, 0);
	elf_image__symbol(img, names, UINT64_MAX);
	for (size_t i = 0; i < img->n_loads; i++)
		elf_image__vaddr(img, img->loads[i].offset + img->loads[i].filesz / 2, &vaddr);
	elf_image__vaddr(img, 0x1000, &vaddr);
}

static void fuzz_elf_mem(const uint8_t *data, size_t size)
{
	struct elf_image img;

	if (!elf_image__load_mem(&img, data, size, "[fuzz]"))
		use_image(&img);
	elf_image__fini(&img);
}

static void fuzz_elf_fd(const uint8_t *data, size_t size)
{
	struct elf_debug_ctx dbg = {
	    .debug_root = debug_root, .fs_root = tmp_root, .path = "/usr/lib/libfuzz.so"};
	char hex[2 * BUILD_ID_MAX + 1];
	struct elf_image img;
	int fd = memfd_fill(data, size);

	elf_read_build_id_fd(fd, hex);
	if (!elf_image__load(&img, fd, &dbg))
		use_image(&img);
	elf_image__fini(&img);
	sampler__count_launch_notes(fd);
}

static void fuzz_maps(const uint8_t *data, size_t size)
{
	struct proc_map *maps = NULL, m;
	char *text = malloc(size + 1), *line, *next;
	size_t n = 0;
	FILE *f;

	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	for (line = text; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		procfs_parse_maps_line(line, &m);
	}
	free(text);

	f = fopen(maps_path, "w");
	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f))
		abort();
	if (!procfs_read_maps(tmp_root, MAPS_PID, size & 1, &maps, &n)) {
		for (size_t i = 1; i < n; i++)
			if (maps[i].start < maps[i - 1].end) /* sorted, no overlaps: as promised */
				abort();
		procfs_free_maps(maps, n);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void fuzz_perf_map(const uint8_t *data, size_t size)
{
	static const uint64_t budgets[4] = {0, 256, 64 << 10, UINT64_MAX};
	static const uint64_t reads[4] = {UINT64_MAX, 17, 4096, 100000};
	struct perf_map_scan_opts o = {0};
	struct perf_map_scan_stats st;
	struct sym_table t = {0};
	uint64_t wanted[8];
	size_t nw;
	int err;

	if (size < 2)
		return;
	o.budget = budgets[data[0] & 3];
	o.max_read = reads[(data[0] >> 2) & 3];
	nw = data[1] & 7;
	data += 2;
	size -= 2;
	if (size < nw * 8)
		nw = size / 8;
	memcpy(wanted, data, nw * 8);
	qsort(wanted, nw, sizeof(wanted[0]), cmp_u64);
	data += nw * 8;
	size -= nw * 8;
	o.wanted = wanted;
	o.n_wanted = nw;

	err = perf_map__scan(memfd_fill(data, size), &o, &t, &st);
	if (!err) {
		for (size_t i = 0; i < nw; i++) {
			struct sym_entry *e = sym_table__find(&t, wanted[i]);

			if (e)
				sym_table__name(&t, e);
		}
		for (size_t i = 0; i < t.n && i < 64; i++)
			sym_table__name(&t, &t.syms[i]);
		perf_map__table_bytes(&t);
	}
	sym_table__fini(&t);
}

static void fuzz_cgroup(const uint8_t *data, size_t size)
{
	struct proc_labels l;
	char *text = malloc(size + 1);

	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = '\0';
	labels_from_cgroup(text, &l);
	if (strlen(l.container) >= sizeof(l.container) || strlen(l.pod_uid) >= sizeof(l.pod_uid))
		abort();
	free(text);
}

static void fuzz_environ(const uint8_t *data, size_t size)
{
	char out[257];
	char *copy = malloc(size ? size : 1);

	/* An exact-size copy: ASan sees a read past the environment's end. */
	if (!copy)
		return;
	memcpy(copy, data, size);
	if (labels_service_from_environ(copy, size, out, sizeof(out)) && strlen(out) >= sizeof(out))
		abort();
	free(copy);
}

static void fuzz_config(const uint8_t *data, size_t size)
{
	char path[64];
	struct config cfg;
	FILE *saved = stderr;

	if (ftruncate(memfd, 0) || pwrite(memfd, data, size, 0) != (ssize_t)size)
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	stderr = fopen("/dev/null", "w");
	config_parse(3, (char *[]){"profd", "--config", path, NULL}, &cfg);
	fclose(stderr);
	stderr = saved;
	config_free(&cfg);
}

/* The bytes as a spool file: refused, or a body of the header's length whose CRC matched. */
static void fuzz_spool_file(const uint8_t *data, size_t size)
{
	char why[SPOOL_WHY_MAX];
	struct spool_info info;
	uint8_t *body = NULL;
	int fd, err;

	fd = openat(spool_fd, "x.req", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	close(fd);
	err = spool_read(spool_fd, "x.req", "pyroscope", 1 << 20, true, &body, &info, why,
			 sizeof(why));
	if (!err) {
		if (info.len + SPOOL_HDR_LEN != size ||
		    memcmp(body, data + SPOOL_HDR_LEN, info.len))
			abort();
		pyroscope__count(body, info.len);
		free(body);
	} else if (err != -EBADMSG || !why[0] || body) {
		abort();
	}
}

static void fuzz_spooled(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1), *a = NULL, *b = NULL;
	size_t alen, blen;

	fuzz_spool_file(data, size);
	if (!copy)
		return;
	memcpy(copy, data, size);
	pyroscope__count(copy, size);
	if (!pyroscope__split(copy, size, &a, &alen, &b, &blen)) {
		/* Both halves are requests again, with the whole's samples between them. */
		if (pyroscope__count(a, alen) + pyroscope__count(b, blen) !=
		    pyroscope__count(copy, size))
			abort();
		free(a);
		free(b);
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] & 7) {
	case 4:
		fuzz_cgroup(data + 1, size - 1);
		return 0;
	case 5:
		fuzz_environ(data + 1, size - 1);
		return 0;
	case 6:
		fuzz_config(data + 1, size - 1);
		return 0;
	case 7:
		fuzz_spooled(data + 1, size - 1);
		return 0;
	}
	switch (data[0] & 3) {
	case 0:
		fuzz_elf_mem(data + 1, size - 1);
		break;
	case 1:
		fuzz_elf_fd(data + 1, size - 1);
		break;
	case 2:
		fuzz_maps(data + 1, size - 1);
		break;
	case 3:
		fuzz_perf_map(data + 1, size - 1);
		break;
	}
	return 0;
}
