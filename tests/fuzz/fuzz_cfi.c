// SPDX-License-Identifier: BSD-2-Clause
/*
 * The unwind table builder (daemon/unwind/cfi.c) on call frame information a profiled process
 * controls. The first byte of an input picks the layout, the rest is:
 *
 *	0  a whole ELF file (.eh_frame by section or by PT_GNU_EH_FRAME, .debug_frame)
 *	1  the bytes of an .eh_frame, put into a small x86-64 ELF file as its only section
 *	2  the bytes of a .debug_frame, likewise
 *	3  .eh_frame of a file whose separate debug file has the same bytes as .debug_frame
 *
 * Each goes through cfi_table__build and cfi_fdes; the table's promises (rows strictly
 * increasing, FDEs sorted, counts that add up) are checked and a broken one aborts.
 */
#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cfi.h"

#define EH_ADDR 0x1000

/* An ELF64 file with one section named name holding data, at address EH_ADDR. */
static char *wrap(const uint8_t *data, size_t size, const char *name, size_t *out_size)
{
	static const char shstr_fmt[] = "\0.shstrtab\0";
	size_t name_len = strlen(name) + 1, shstr_size = sizeof(shstr_fmt) - 1 + name_len;
	size_t data_off = sizeof(Elf64_Ehdr), shstr_off = data_off + size;
	size_t sh_off = (shstr_off + shstr_size + 7) & ~(size_t)7;
	size_t total = sh_off + 3 * sizeof(Elf64_Shdr);
	Elf64_Ehdr *eh;
	Elf64_Shdr *sh;
	char *img = calloc(1, total);

	if (!img)
		return NULL;
	eh = (Elf64_Ehdr *)img;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shoff = sh_off;
	eh->e_shnum = 3;
	eh->e_shstrndx = 2;
	memcpy(img + data_off, data, size);
	memcpy(img + shstr_off, shstr_fmt, sizeof(shstr_fmt) - 1);
	memcpy(img + shstr_off + sizeof(shstr_fmt) - 1, name, name_len);
	sh = (Elf64_Shdr *)(img + sh_off);
	sh[1] = (Elf64_Shdr){.sh_name = sizeof(shstr_fmt) - 1,
			     .sh_type = SHT_PROGBITS,
			     .sh_flags = SHF_ALLOC,
			     .sh_addr = strcmp(name, ".debug_frame") ? EH_ADDR : 0,
			     .sh_offset = data_off,
			     .sh_size = size,
			     .sh_addralign = 8};
	sh[2] = (Elf64_Shdr){.sh_name = 1,
			     .sh_type = SHT_STRTAB,
			     .sh_offset = shstr_off,
			     .sh_size = shstr_size,
			     .sh_addralign = 1};
	*out_size = total;
	return img;
}

static void check_table(const struct cfi_table *t)
{
	uint32_t invalid = 0;

	if (t->stats.rows != t->nrows || (t->nrows && !t->rows) || (t->nfdes && !t->fdes))
		abort();
	for (size_t i = 0; i < t->nrows; i++) {
		if (i && t->rows[i - 1].pc >= t->rows[i].pc)
			abort();
		if (t->rows[i].kind > PROFD_UW_GAP)
			abort();
		invalid += t->rows[i].kind == PROFD_UW_INVALID;
	}
	if (invalid != t->stats.rows_invalid)
		abort();
	for (size_t i = 0; i < t->nfdes; i++) {
		if ((i && t->fdes[i - 1].start > t->fdes[i].start) ||
		    t->fdes[i].start >= t->fdes[i].end)
			abort();
		if (cfi_fde_find(t->fdes, t->nfdes, t->fdes[i].start) == NULL)
			abort();
	}
}

static void run(Elf *e, Elf *d)
{
	struct cfi_table t;
	struct cfi_fde *f;
	size_t n;
	int err;

	err = cfi_table__build(e, d, &t);
	if (err != 0 && err != -ENOENT && err != -EINVAL && err != -ERANGE)
		abort();
	if (!err)
		check_table(&t);
	else if (t.rows || t.fdes)
		abort();
	cfi_table__fini(&t);
	if (!cfi_fdes(e, d, &f, &n)) {
		for (size_t i = 0; i < n; i++)
			cfi_fde_find(f, n, f[i].end - 1);
		free(f);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *img = NULL, *dimg = NULL;
	Elf *e = NULL, *d = NULL;
	size_t n = 0, dn = 0;

	if (size < 1)
		return 0;
	elf_version(EV_CURRENT);
	switch (data[0] & 3) {
	case 0:
		/* libelf wants writable memory. */
		img = malloc(size - 1 ? size - 1 : 1);
		if (!img)
			return 0;
		memcpy(img, data + 1, size - 1);
		n = size - 1;
		break;
	case 1:
		img = wrap(data + 1, size - 1, ".eh_frame", &n);
		break;
	case 2:
		img = wrap(data + 1, size - 1, ".debug_frame", &n);
		break;
	case 3:
		img = wrap(data + 1, size - 1, ".eh_frame", &n);
		dimg = wrap(data + 1, size - 1, ".debug_frame", &dn);
		break;
	}
	if (img)
		e = elf_memory(img, n);
	if (dimg)
		d = elf_memory(dimg, dn);
	if (e)
		run(e, d);
	if (d)
		elf_end(d);
	if (e)
		elf_end(e);
	free(dimg);
	free(img);
	return 0;
}
