// SPDX-License-Identifier: BSD-2-Clause
/*
 * profd-cfi: print the unwind table profd builds for an ELF file (tests and debugging).
 *
 *   profd-cfi [--fdes] FILE [DEBUGFILE]
 *
 * One row per line, "0x<pc> <KIND> cfa=<cfa> reg=<reg>" (the raw fields of struct
 * profd_unwind_row), " insn" after a row that comes from the machine code of a function without
 * CFI, then "# " lines with the counts. --fdes prints the FDE ranges instead,
 * "0x<start> 0x<end>". Exits 1 with one line on stderr when a file cannot be used.
 */
#include "cfi.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(FILE *f)
{
	fprintf(f,
		"usage: profd-cfi [--fdes] FILE [DEBUGFILE]\n"
		"Print the unwind rows (or with --fdes the FDE ranges) built from FILE's CFI.\n");
	return f == stdout ? 0 : 2;
}

static Elf *open_elf(const char *path, int *fd)
{
	Elf *e;

	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		fprintf(stderr, "profd-cfi: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	e = elf_begin(*fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		fprintf(stderr, "profd-cfi: %s: not an ELF file\n", path);
		if (e)
			elf_end(e);
		close(*fd);
		*fd = -1;
		return NULL;
	}
	return e;
}

static const char *err_text(int err)
{
	switch (err) {
	case -ENOENT:
		return "no call frame information (.eh_frame, .debug_frame)";
	case -ERANGE:
		return "addresses at or above 4 GiB";
	case -EINVAL:
		return "malformed call frame information";
	default:
		return strerror(-err);
	}
}

int main(int argc, char **argv)
{
	const char *path, *dpath = NULL;
	Elf *e = NULL, *d = NULL;
	int fd = -1, dfd = -1, err, ret = 1, i = 1;
	bool fdes_only = false;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return usage(stdout);
	if (argc > 1 && !strcmp(argv[1], "--fdes")) {
		fdes_only = true;
		i++;
	}
	if (argc - i < 1 || argc - i > 2 || argv[i][0] == '-')
		return usage(stderr);
	path = argv[i];
	if (argc - i == 2)
		dpath = argv[i + 1];
	elf_version(EV_CURRENT);
	e = open_elf(path, &fd);
	if (!e)
		goto out;
	if (dpath && !(d = open_elf(dpath, &dfd)))
		goto out;
	if (fdes_only) {
		struct cfi_fde *f;
		size_t n;

		err = cfi_fdes(e, d, &f, &n);
		if (err) {
			fprintf(stderr, "profd-cfi: %s: %s\n", path, err_text(err));
			goto out;
		}
		for (size_t k = 0; k < n; k++)
			printf("0x%x 0x%x\n", f[k].start, f[k].end);
		printf("# fdes %zu\n", n);
		free(f);
	} else {
		struct cfi_table t;

		err = cfi_table__build_fd(e, fd, d, &t);
		if (err) {
			fprintf(stderr, "profd-cfi: %s: %s\n", path, err_text(err));
			goto out;
		}
		for (size_t k = 0; k < t.nrows; k++)
			printf("0x%x %s cfa=%u reg=%d%s\n", t.rows[k].pc,
			       cfi_kind_name(t.rows[k].kind), t.rows[k].cfa, t.rows[k].reg,
			       cfi_fde_find(t.insn, t.ninsn, t.rows[k].pc) ? " insn" : "");
		printf("# cies %u fdes %u fdes_debug_frame %u fdes_invalid %u rows %u "
		       "rows_invalid %u bytes %zu\n",
		       t.stats.cies, t.stats.fdes, t.stats.fdes_debug_frame, t.stats.fdes_invalid,
		       t.stats.rows, t.stats.rows_invalid, t.nrows * sizeof(*t.rows));
		printf("# insn functions %u rows %u partial %u skipped %u instructions %llu\n",
		       t.stats.insn_functions, t.stats.insn_rows, t.stats.insn_partial,
		       t.stats.insn_skipped, (unsigned long long)t.stats.insn_insns);
		cfi_table__fini(&t);
	}
	ret = 0;
out:
	if (d)
		elf_end(d);
	if (e)
		elf_end(e);
	if (dfd >= 0)
		close(dfd);
	if (fd >= 0)
		close(fd);
	return ret;
}
