// SPDX-License-Identifier: BSD-2-Clause
/*
 * The unwind table builder (daemon/unwind/cfi.c) on fixtures built with the tests:
 *   CFI_ASM     hand-written CFI (tests/fixtures/cfi/cfi_asm.c): every row kind, at labels
 *   CFI_DBG*    a library built with -g -fno-asynchronous-unwind-tables (CFI in .debug_frame
 *               only): the unstripped file, its stripped copy and the separate debug file
 *   CFI_DRAP    gcc's realigned frame (DRAP), tests/fixtures/unwind_drap.c
 *   CFI_INSN*   kernels in assembly (tests/fixtures/cfi/insn_asm.c) with exact CFI, and a copy
 *               without .eh_frame whose rows come from the machine code
 * and on damaged copies of CFI_ASM: truncated and corrupted .eh_frame, no section headers.
 * readelf's view of the big system libraries is checked by check_cfi_readelf.py.
 */
#include "check.h"

#include "cfi.h"

#include <capstone/capstone.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <unistd.h>

struct elf_file {
	int fd;
	Elf *e;
};

static bool elf_open(struct elf_file *f, const char *path)
{
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	f->e = f->fd >= 0 ? elf_begin(f->fd, ELF_C_READ, NULL) : NULL;
	if (!f->e)
		fprintf(stderr, "cannot open %s as ELF\n", path);
	return f->e;
}

static void elf_close(struct elf_file *f)
{
	if (f->e)
		elf_end(f->e);
	if (f->fd >= 0)
		close(f->fd);
}

/* The value of a symbol in .symtab or .dynsym; 0 when absent. */
static uint64_t sym(Elf *e, const char *name)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	GElf_Sym s;

	while ((scn = elf_nextscn(e, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++) {
			const char *n;

			if (!gelf_getsym(d, (int)i, &s))
				continue;
			n = elf_strptr(e, sh.sh_link, s.st_name);
			if (n && !strcmp(n, name) && s.st_value)
				return s.st_value;
		}
	}
	fprintf(stderr, "no symbol %s\n", name);
	return 0;
}

/* The row the walker applies at pc: the last one at or below it. */
static const struct profd_unwind_row *lookup(const struct cfi_table *t, uint64_t pc)
{
	size_t lo = 0, hi = t->nrows;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->rows[mid].pc <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &t->rows[lo - 1] : NULL;
}

/* Rows strictly increasing, no two neighbours with one rule, FDEs sorted. */
static bool table_sane(const struct cfi_table *t)
{
	for (size_t i = 1; i < t->nrows; i++) {
		const struct profd_unwind_row *a = &t->rows[i - 1], *b = &t->rows[i];

		if (a->pc >= b->pc || (a->kind == b->kind && a->reg == b->reg && a->cfa == b->cfa))
			return false;
	}
	for (size_t i = 1; i < t->nfdes; i++)
		if (t->fdes[i - 1].start > t->fdes[i].start)
			return false;
	return t->stats.rows == t->nrows;
}

#define CHECK_ROW(t, e, name, off, k, c, r)                                                        \
	do {                                                                                       \
		uint64_t pc_ = sym(e, name) + (off);                                               \
		const struct profd_unwind_row *row_ = lookup(t, pc_);                              \
		if (CHECK(row_ != NULL)) {                                                         \
			if (!CHECK_STREQ(cfi_kind_name(row_->kind), #k) ||                         \
			    !CHECK_EQ_U(row_->cfa, c) || !CHECK_EQ_I(row_->reg, r))                \
				fprintf(stderr, "  at %s+%d (0x%llx)\n", name, (int)(off),         \
					(unsigned long long)pc_);                                  \
		}                                                                                  \
	} while (0)

static void test_kinds(void)
{
	struct elf_file f;
	struct cfi_table t;
	struct cfi_fde *fdes;
	const struct cfi_fde *fde;
	size_t n;
	Elf *e;

	if (!CHECK(elf_open(&f, CFI_ASM)))
		return;
	e = f.e;
	if (!CHECK_EQ_I(cfi_table__build(e, NULL, &t), 0))
		goto out;
	CHECK(table_sane(&t));
	/* Pushes; rbp saved at CFA-24; a 64 KiB frame; remember/restore_state. */
	CHECK_ROW(&t, e, "cfi_plain", 0, RSP, 1, 0);
	CHECK_ROW(&t, e, "cfi_plain_1", 0, RSP, 2, 0);
	CHECK_ROW(&t, e, "cfi_plain_2", 0, RSP, 3, -3);
	CHECK_ROW(&t, e, "cfi_plain_big", 0, RSP, (65600 + 24) / 8, -3);
	CHECK_ROW(&t, e, "cfi_plain_3", 0, RSP, 3, -3);
	CHECK_ROW(&t, e, "cfi_plain_4", 0, RSP, 2, 0);
	CHECK_ROW(&t, e, "cfi_plain_epi", 0, RSP, 1, 0);
	CHECK_ROW(&t, e, "cfi_plain_after", 0, RSP, (65600 + 24) / 8, -3);
	/* Frame pointer, then less than 16 bytes to the next FDE: no GAP between. */
	CHECK_ROW(&t, e, "cfi_fp_1", 0, RSP, 2, -2);
	CHECK_ROW(&t, e, "cfi_fp_2", 0, RBP, 2, -2);
	CHECK_ROW(&t, e, "cfi_fp_end", 0, RBP, 2, -2);
	/* __vfork: return address in rdi (5); then 64 bytes without CFI: GAP. */
	CHECK_ROW(&t, e, "cfi_vfork", 0, RSP, 1, 0);
	CHECK_ROW(&t, e, "cfi_vfork_1", 0, RA_REG, 0, 5);
	CHECK_ROW(&t, e, "cfi_vfork_end", 0, GAP, 0, 0);
	CHECK_ROW(&t, e, "cfi_vfork_end", 40, GAP, 0, 0);
	CHECK_ROW(&t, e, "cfi_start", 0, STOP, 0, 0);
	CHECK_ROW(&t, e, "cfi_plt", 0, PLT, 0, 11);
	CHECK_ROW(&t, e, "cfi_plt12", 0, INVALID, 0, 0);
	CHECK_ROW(&t, e, "cfi_reg", 0, RSP, 1, 0);
	/* CFA = rax + 8, rbp at CFA + 16: cfa = 1 | 2 << 8. */
	CHECK_ROW(&t, e, "cfi_reg_1", 0, CFA_REG, 1 | 2 << 8, 0);
	/* CFA = *(rsp + 40) + 8: cfa = 5 | 1 << 8. */
	CHECK_ROW(&t, e, "cfi_deref", 0, DEREF, 5 | 1 << 8, 0);
	CHECK_ROW(&t, e, "cfi_odd", 0, RSP, 1, 0);
	CHECK_ROW(&t, e, "cfi_odd_1", 0, INVALID, 0, 0);
	CHECK_ROW(&t, e, "cfi_odd_1", 4, RSP, 1, 0);
	CHECK_ROW(&t, e, "cfi_expr", 0, INVALID, 0, 0);
	/*
	 * A DRAP frame: CFA = *(rbp - 8), rbp at rbp + 0 (cfa = SAVED | 0), then at rbp + 8; around
	 * it the DRAP register's rows with rbp taken as unchanged; an rbp-based CFA without deref
	 * is not DRAP.
	 */
	CHECK_ROW(&t, e, "cfi_drap_1", 0, CFA_REG, 0, 10);
	CHECK_ROW(&t, e, "cfi_drap_2", 0, CFA_REG, 0, 10);
	CHECK_ROW(&t, e, "cfi_drap_3", 0, DRAP, PROFD_UW_DRAP_SAVED, -1);
	CHECK_ROW(&t, e, "cfi_drap_4", 0, DRAP, PROFD_UW_DRAP_SAVED | 1, -1);
	CHECK_ROW(&t, e, "cfi_drap_5", 0, INVALID, 0, 0);
	CHECK_ROW(&t, e, "cfi_drap_6", 0, CFA_REG, 0, 10);
	CHECK_ROW(&t, e, "cfi_drap_7", 0, RSP, 1, 0);
	/* The signal FDE starts on the nop before the label: a pc-1 look-up still finds it. */
	CHECK_ROW(&t, e, "cfi_signal", -1, SIGNAL, 0, 0);
	CHECK_ROW(&t, e, "cfi_signal", 3, SIGNAL, 0, 0);
	CHECK_ROW(&t, e, "cfi_last_end", 0, GAP, 0, 0);
	CHECK_EQ_U(t.stats.fdes_invalid, 0);
	CHECK_EQ_U(t.stats.rows_invalid, 4);
	CHECK(t.stats.fdes >= 12);

	/* FDE ranges: what the symbolizer names unnamed code by. */
	fde = cfi_fde_find(t.fdes, t.nfdes, sym(e, "cfi_plain_big"));
	CHECK(fde && fde->start == sym(e, "cfi_plain"));
	fde = cfi_fde_find(t.fdes, t.nfdes, sym(e, "cfi_signal"));
	CHECK(fde && fde->start == sym(e, "cfi_signal") - 1);
	CHECK(!cfi_fde_find(t.fdes, t.nfdes, sym(e, "cfi_vfork_end") + 8));
	CHECK(!cfi_fde_find(t.fdes, t.nfdes, 0));
	if (CHECK_EQ_I(cfi_fdes(e, NULL, &fdes, &n), 0)) {
		CHECK(n == t.nfdes && !memcmp(fdes, t.fdes, n * sizeof(*fdes)));
		free(fdes);
	}
	cfi_table__fini(&t);
	cfi_table__fini(&t); /* a zeroed table */
out:
	elf_close(&f);
}

/* CFI only in .debug_frame, found in the separate debug file of a stripped library. */
static void test_debug_frame(void)
{
	struct elf_file full, stripped, dbg;
	struct cfi_table a = {0}, b = {0}, c = {0};
	uint64_t mid;
	int err;

	if (!CHECK(elf_open(&full, CFI_DBG)) | !CHECK(elf_open(&stripped, CFI_DBG_STRIPPED)) |
	    !CHECK(elf_open(&dbg, CFI_DBG_DEBUG)))
		goto out;
	mid = sym(full.e, "cfi_dbg_mid");
	CHECK(mid != 0);
	/* Without its debug file the function has no FDE (the crt objects may have some). */
	err = cfi_table__build(stripped.e, NULL, &a);
	CHECK(err == 0 || err == -ENOENT);
	CHECK(!cfi_fde_find(a.fdes, a.nfdes, mid));
	CHECK_EQ_U(a.stats.fdes_debug_frame, 0);

	if (!CHECK_EQ_I(cfi_table__build(stripped.e, dbg.e, &b), 0) ||
	    !CHECK_EQ_I(cfi_table__build(full.e, NULL, &c), 0))
		goto out;
	CHECK(table_sane(&b));
	CHECK(b.stats.fdes_debug_frame >= 2);
	CHECK(cfi_fde_find(b.fdes, b.nfdes, mid) &&
	      cfi_fde_find(b.fdes, b.nfdes, mid)->start == mid);
	CHECK_ROW(&b, full.e, "cfi_dbg_mid", 0, RSP, 1, 0);
	/* Somewhere inside, the 200-byte buffer's frame: CFA above rsp + 200. */
	{
		const struct cfi_fde *f = cfi_fde_find(b.fdes, b.nfdes, mid);
		bool big = false;

		for (size_t i = 0; f && i < b.nrows; i++)
			if (b.rows[i].pc >= f->start && b.rows[i].pc < f->end &&
			    b.rows[i].kind == PROFD_UW_RSP && b.rows[i].cfa * 8 > 200)
				big = true;
		CHECK(big);
	}
	/* The stripped file and its debug file give the table of the unstripped file. */
	CHECK_EQ_U(b.nrows, c.nrows);
	CHECK(b.nrows == c.nrows && !memcmp(b.rows, c.rows, b.nrows * sizeof(*b.rows)));
out:
	cfi_table__fini(&a);
	cfi_table__fini(&b);
	cfi_table__fini(&c);
	elf_close(&full);
	elf_close(&stripped);
	elf_close(&dbg);
}

/* gcc's own DRAP frame (c3 of tests/fixtures/unwind_drap.c): DRAP rows, none INVALID. */
static void test_drap_gcc(void)
{
	struct elf_file f;
	struct cfi_table t = {0};
	const struct cfi_fde *fde;
	size_t drap = 0, invalid = 0;

	if (!CFI_DRAP[0]) {
		fprintf(stderr, "no gcc: gcc's DRAP frames not checked\n");
		return;
	}
	if (!CHECK(elf_open(&f, CFI_DRAP)))
		return;
	if (!CHECK_EQ_I(cfi_table__build(f.e, NULL, &t), 0))
		goto out;
	CHECK(table_sane(&t));
	fde = cfi_fde_find(t.fdes, t.nfdes, sym(f.e, "c3"));
	if (!CHECK(fde != NULL))
		goto out;
	for (size_t i = 0; i < t.nrows; i++) {
		const struct profd_unwind_row *r = &t.rows[i];

		if (r->pc < fde->start || r->pc >= fde->end)
			continue;
		invalid += r->kind == PROFD_UW_INVALID;
		/* rbp restored from rbp + 0, the CFA read below rbp where the DRAP reg was pushed
		 */
		drap += r->kind == PROFD_UW_DRAP && r->cfa == PROFD_UW_DRAP_SAVED && r->reg < 0;
	}
	CHECK(drap >= 1);
	CHECK_EQ_U(invalid, 0);
	CHECK_EQ_U(t.stats.rows_invalid, 0);
out:
	cfi_table__fini(&t);
	elf_close(&f);
}

/* The value and size of a function symbol; false when absent. */
static bool func_sym(Elf *e, const char *name, uint64_t *start, uint64_t *size)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	GElf_Sym s;

	while ((scn = elf_nextscn(e, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			const char *n;

			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC)
				continue;
			n = elf_strptr(e, sh.sh_link, s.st_name);
			if (n && !strcmp(n, name)) {
				*start = s.st_value;
				*size = s.st_size;
				return true;
			}
		}
	}
	fprintf(stderr, "no function %s\n", name);
	return false;
}

/*
 * One fixture kernel: at each of its instruction boundaries, the row analysed from the copy
 * without CFI (b) equals the CFI row of the original (a), or is a GAP (not followed). Returns
 * the number of GAP boundaries.
 */
static size_t insn_vs_cfi(csh h, Elf *e, const struct cfi_table *a, const struct cfi_table *b,
			  const char *name)
{
	uint64_t start, size, addr;
	const uint8_t *code;
	size_t csize, gaps = 0, n = 0;
	cs_insn *in = cs_malloc(h);
	uint8_t buf[512];
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	if (!CHECK(in != NULL) || !CHECK(func_sym(e, name, &start, &size)) ||
	    !CHECK(size > 0 && size <= sizeof(buf)))
		goto out;
	/* the function's bytes, from its section */
	while ((scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS && start >= sh.sh_addr &&
		    start + size <= sh.sh_addr + sh.sh_size) {
			Elf_Data *d = elf_getdata(scn, NULL);

			if (CHECK(d && d->d_size == sh.sh_size))
				memcpy(buf, (const uint8_t *)d->d_buf + (start - sh.sh_addr), size);
			break;
		}
	CHECK(cfi_fde_find(b->insn, b->ninsn, start) != NULL);
	CHECK(cfi_fde_find(a->insn, a->ninsn, start) == NULL);
	code = buf;
	csize = size;
	addr = start;
	while (csize) {
		const struct profd_unwind_row *ra = lookup(a, addr), *rb = lookup(b, addr);
		uint64_t at = addr;

		if (!CHECK(ra && rb))
			break;
		n++;
		if (rb->kind == PROFD_UW_GAP)
			gaps++;
		else if (!CHECK_STREQ(cfi_kind_name(rb->kind), cfi_kind_name(ra->kind)) ||
			 !CHECK_EQ_U(rb->cfa, ra->cfa) || !CHECK_EQ_I(rb->reg, ra->reg))
			fprintf(stderr,
				"  %s+%u: analysed %s cfa=%u reg=%d, CFI %s cfa=%u reg=%d\n", name,
				(unsigned)(at - start), cfi_kind_name(rb->kind), rb->cfa, rb->reg,
				cfi_kind_name(ra->kind), ra->cfa, ra->reg);
		if (!CHECK(cs_disasm_iter(h, &code, &csize, &addr, in)))
			break;
	}
	CHECK(n >= 4);
out:
	if (in)
		cs_free(in, 1);
	return gaps;
}

/* Rows from machine code where no FDE is, checked against the CFI the same code has. */
static void test_insn(void)
{
	static const char *const whole[] = {"insn_mkl",	 "insn_openblas", "insn_early",
					    "insn_back", "insn_realign",  "insn_enter",
					    "insn_regsp"};
	struct elf_file fa, fb;
	struct cfi_table a = {0}, b = {0};
	csh h = 0;

	if (!CHECK(elf_open(&fa, CFI_INSN)) | !CHECK(elf_open(&fb, CFI_INSN_NOCFI)))
		goto out;
	if (!CHECK_EQ_I(cfi_table__build(fa.e, NULL, &a), 0) ||
	    !CHECK_EQ_I(cfi_table__build(fb.e, NULL, &b), 0) ||
	    !CHECK(cs_open(CS_ARCH_X86, CS_MODE_64, &h) == CS_ERR_OK))
		goto out;
	CHECK(table_sane(&b));
	CHECK_EQ_U(b.stats.fdes, 0);
	CHECK(b.stats.insn_functions >= 6);
	CHECK(b.stats.insn_rows > 30);
	CHECK(b.stats.insn_partial >= 1); /* insn_lost */
	CHECK_EQ_U(b.stats.insn_skipped, 0);
	/* every boundary of these is followed, and agrees with the CFI */
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
		CHECK_EQ_U(insn_vs_cfi(h, fa.e, &a, &b, whole[i]), 0);
	/* rsp moved by a register, no frame pointer, no copy: a GAP from there, no wrong rule */
	CHECK_ROW(&b, fa.e, "insn_lost", 0, RSP, 1, 0);
	CHECK_ROW(&b, fa.e, "insn_lost_1", 0, GAP, 0, 0);
	CHECK_ROW(&b, fa.e, "insn_lost_1", 4, GAP, 0, 0);
	/* a store of an rbp already overwritten is not its save slot */
	CHECK_ROW(&b, fa.e, "insn_clobber_1", 0, RSP, 4, 0);
	/* OpenBLAS: after and rsp, CFA = rbx + 16 (cfa = 2, rbp unchanged) */
	CHECK_ROW(&b, fa.e, "insn_regsp", 11, CFA_REG, 2, 3);
	/* the MKL frame: CFA = rsp + 0x88, rbp at CFA - 0x80 */
	CHECK_ROW(&b, fa.e, "insn_mkl", 20, RSP, 0x88 / 8, -0x80 / 8);
out:
	if (h)
		cs_close(&h);
	cfi_table__fini(&a);
	cfi_table__fini(&b);
	elf_close(&fa);
	elf_close(&fb);
}

static bool read_file(const char *path, uint8_t **buf, size_t *size)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok = false;

	if (fd < 0 || fstat(fd, &st))
		goto out;
	*size = (size_t)st.st_size;
	*buf = malloc(*size);
	ok = *buf && read(fd, *buf, *size) == (ssize_t)*size;
out:
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Build from an image in memory; the result must be an allowed one and a sane table. */
static int build_mem(uint8_t *img, size_t size, struct cfi_table *t)
{
	Elf *e = elf_memory((char *)img, size);
	struct cfi_fde *f;
	size_t n;
	int err, err2;

	if (!e)
		return -EINVAL;
	err = cfi_table__build(e, NULL, t);
	err2 = cfi_fdes(e, NULL, &f, &n);
	elf_end(e);
	if (!err2)
		free(f);
	if (err != 0 && err != -ENOENT && err != -EINVAL && err != -ERANGE)
		CHECK_EQ_I(err, 0);
	if (!err)
		CHECK(table_sane(t));
	return err;
}

static uint32_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 33);
}

/* Damaged .eh_frame: errors or INVALID rows, never a crash (run under ASan). */
static void test_damaged(void)
{
	struct cfi_table good = {0}, t = {0};
	uint8_t *orig = NULL, *img = NULL;
	size_t size, eh_off = 0, eh_size = 0;
	uint64_t seed = 42;
	GElf_Ehdr eh;
	GElf_Shdr sh;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *e;

	if (!CHECK(read_file(CFI_ASM, &orig, &size)))
		goto out;
	e = elf_memory((char *)orig, size);
	if (!CHECK(e != NULL))
		goto out;
	elf_getshdrstrndx(e, &shstrndx);
	while ((scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, &sh) &&
		    !strcmp(elf_strptr(e, shstrndx, sh.sh_name), ".eh_frame")) {
			eh_off = sh.sh_offset;
			eh_size = sh.sh_size;
		}
	gelf_getehdr(e, &eh);
	elf_end(e);
	if (!CHECK(eh_size > 64 && eh_off + eh_size <= size))
		goto out;
	img = malloc(size);
	if (!CHECK(img != NULL) || !CHECK_EQ_I(build_mem(orig, size, &good), 0))
		goto out;

	/* No section headers: .eh_frame through PT_GNU_EH_FRAME, the same table. */
	memcpy(img, orig, size);
	if (eh.e_ident[EI_CLASS] == ELFCLASS64) {
		Elf64_Ehdr *h = (Elf64_Ehdr *)img;

		h->e_shoff = 0;
		h->e_shnum = 0;
		h->e_shstrndx = 0;
		/*
		 * The same rules where CFI gives them; without section headers there are no
		 * symbols, so no function is analysed from its code.
		 */
		if (CHECK_EQ_I(build_mem(img, size, &t), 0)) {
			CHECK_EQ_U(t.ninsn, 0);
			CHECK(good.ninsn > 0);
			for (size_t i = 0; i < t.nrows; i++) {
				const struct profd_unwind_row *g = lookup(&good, t.rows[i].pc);

				if (cfi_fde_find(good.insn, good.ninsn, t.rows[i].pc))
					continue;
				if (!CHECK(g && g->kind == t.rows[i].kind &&
					   g->cfa == t.rows[i].cfa && g->reg == t.rows[i].reg))
					fprintf(stderr, "  at 0x%x\n", t.rows[i].pc);
			}
		}
		cfi_table__fini(&t);
	}

	/* The first FDE's length runs past the section: the rest cannot be delimited. */
	memcpy(img, orig, size);
	{
		uint32_t cie_len;

		memcpy(&cie_len, img + eh_off, 4);
		if (CHECK(cie_len + 8 < eh_size)) {
			uint32_t huge = 0x7fffffff;

			memcpy(img + eh_off + 4 + cie_len, &huge, 4);
			build_mem(img, size, &t);
			CHECK(t.stats.fdes_invalid >= 1);
			cfi_table__fini(&t);
		}
	}
	/* The CIE's length is cut: every FDE points at garbage. */
	memcpy(img, orig, size);
	img[eh_off] = 7;
	img[eh_off + 1] = img[eh_off + 2] = img[eh_off + 3] = 0;
	build_mem(img, size, &t);
	cfi_table__fini(&t);

	/* Truncated at every 7th byte of .eh_frame: the rest of the file zeroed. */
	for (size_t cut = 0; cut < eh_size; cut += 7) {
		memcpy(img, orig, size);
		memset(img + eh_off + cut, 0, eh_size - cut);
		build_mem(img, size, &t);
		cfi_table__fini(&t);
		/* ... and the file itself cut there (section headers lost). */
		build_mem(img, eh_off + cut, &t);
		cfi_table__fini(&t);
	}
	/* Random bytes written over .eh_frame. */
	for (int i = 0; i < 3000; i++) {
		int flips = 1 + (int)(rnd(&seed) % 8);

		memcpy(img, orig, size);
		for (int k = 0; k < flips; k++)
			img[eh_off + rnd(&seed) % eh_size] = (uint8_t)rnd(&seed);
		build_mem(img, size, &t);
		cfi_table__fini(&t);
	}
out:
	cfi_table__fini(&good);
	free(img);
	free(orig);
}

int main(void)
{
	elf_version(EV_CURRENT);
	test_kinds();
	test_debug_frame();
	test_drap_gcc();
	test_insn();
	test_damaged();
	return CHECK_DONE();
}
