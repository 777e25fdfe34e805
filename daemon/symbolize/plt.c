// SPDX-License-Identifier: BSD-2-Clause
/*
 * Names for the stubs of the procedure linkage table. A PLT stub has no symbol of its own: the
 * nearest symbol before it is whatever precedes .plt (_init, mostly), and a call through the
 * PLT to a cheap function (a long-integer loop calling memcpy) showed as time in _init. Each
 * stub jumps through one GOT slot, and the dynamic relocation of that slot names the function
 * it reaches: the stub is "TARGET@plt", as objdump calls it.
 *
 * The layouts (x86_64, GNU ld): .plt holds a 16-byte header, then one 16-byte entry per
 * function, "jmp *SLOT(%rip); push INDEX; jmp .plt" (lazy binding), or, with IBT
 * (-fcf-protection), "endbr64; push INDEX; jmp .plt" with the jumps through the slots in
 * .plt.sec ("endbr64; bnd jmp *SLOT(%rip)"); .plt.got holds 8- or 16-byte entries
 * "[endbr64;] jmp *SLOT(%rip)" for functions whose address is also taken (GLOB_DAT slots in
 * .got). The slot order need not follow .rela.plt's (libc's IRELATIVE slots come first), so
 * each entry is decoded for the slot it jumps through, and a lazy IBT entry for the index it
 * pushes. Other machines get "[plt]" for every address in those sections.
 */
#include "symbolize_elf.h"

#include "demangle.h"
#include "grow.h"
#include "sym_index.h"

#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLT_NAME_UNKNOWN "[plt]"
/* "TARGET@plt"; a longer (demangled) name gets "[plt]". */
#define PLT_NAME_MAX 4096
/* Bounds on what one file may make us hold: a big library has a few thousand entries. */
#define PLT_RELOCS_MAX (1u << 22)
#define PLT_ENTRIES_MAX (1u << 20)

#ifndef R_X86_64_IRELATIVE
#define R_X86_64_IRELATIVE 37
#endif

struct plt_reloc {
	uint64_t slot;	   /* address of the GOT slot */
	const char *name;  /* symbol (in libelf's data), or NULL */
	uint32_t name_off; /* of name, in the string table of section strndx */
	uint32_t strndx;
	uint64_t addend; /* IRELATIVE: the ifunc resolver */
	uint32_t index;	 /* order of addition: file order, for ties */
	bool jmprel;	 /* from .rela.plt */
	bool irelative;
};

/*
 * Stubs named from one string table (.dynstr), their names read when a lookup needs them: a
 * big C++ library has tens of thousands of stubs with long names.
 */
struct plt_lazy {
	struct sym_list_ent *v;
	size_t n, cap;
	uint32_t strndx; /* 0 until the first stub picks it */
};

struct plt_relocs {
	struct plt_reloc *r;
	size_t n, cap;
	/* .rela.plt in its own order, for the index a lazy entry pushes. */
	size_t *jmprel;
	size_t n_jmprel, cap_jmprel;
};

static int reloc_cmp(const void *pa, const void *pb)
{
	const struct plt_reloc *a = pa, *b = pb;

	if (a->slot != b->slot)
		return a->slot < b->slot ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

static int slot_cmp(const void *pa, const void *pb)
{
	const struct plt_reloc *a = pa, *b = pb;

	return a->slot < b->slot ? -1 : a->slot > b->slot;
}

static const char *scn_name(Elf *e, size_t shstrndx, const GElf_Shdr *sh)
{
	const char *n = elf_strptr(e, shstrndx, sh->sh_name);

	return n ? n : "";
}

/* The relocations of one SHT_RELA section that fill GOT slots of functions. */
static int add_relocs(struct plt_relocs *rs, Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, bool jmprel)
{
	size_t i, n, entsize = gelf_fsize(e, ELF_T_RELA, 1, EV_CURRENT);
	Elf_Data *d = elf_getdata(scn, NULL), *symd;
	Elf_Scn *symscn = elf_getscn(e, sh->sh_link);
	GElf_Shdr symsh;
	GElf_Rela r;
	GElf_Sym sym;
	uint32_t type, si;

	if (!d || !d->d_buf || !entsize || !symscn || !gelf_getshdr(symscn, &symsh) ||
	    (symsh.sh_type != SHT_DYNSYM && symsh.sh_type != SHT_SYMTAB))
		return 0;
	symd = elf_getdata(symscn, NULL);
	n = d->d_size / entsize;
	if (n > PLT_RELOCS_MAX)
		n = PLT_RELOCS_MAX;
	for (i = 0; i < n; i++) {
		struct plt_reloc *p;

		if (!gelf_getrela(d, (int)i, &r))
			break;
		type = (uint32_t)GELF_R_TYPE(r.r_info);
		if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT &&
		    type != R_X86_64_IRELATIVE)
			continue;
		if (GROW(rs->r, rs->cap, rs->n + 1))
			return -ENOMEM;
		p = &rs->r[rs->n];
		*p = (struct plt_reloc){.slot = r.r_offset,
					.addend = (uint64_t)r.r_addend,
					.index = (uint32_t)rs->n,
					.jmprel = jmprel,
					.irelative = type == R_X86_64_IRELATIVE};
		si = (uint32_t)GELF_R_SYM(r.r_info);
		/* gelf_getsym checks the index against the section; elf_strptr the offset. */
		if (si && symd && gelf_getsym(symd, (int)si, &sym) && sym.st_name) {
			p->name = elf_strptr(e, symsh.sh_link, sym.st_name);
			p->name_off = sym.st_name;
			p->strndx = symsh.sh_link;
		}
		if (jmprel) {
			if (GROW(rs->jmprel, rs->cap_jmprel, rs->n_jmprel + 1))
				return -ENOMEM;
			rs->jmprel[rs->n_jmprel++] = rs->n;
		}
		rs->n++;
	}
	return 0;
}

/* The name a relocation gives its stub: "memcpy@plt", NULL when it names nothing. */
static int reloc_name(const struct sym_index *ix, const struct plt_reloc *r, char *buf, size_t size)
{
	const char *target = r->name;
	char resolver[PLT_NAME_MAX];
	char *dm = NULL;
	long i;
	int n;

	if (r->irelative) {
		/* An ifunc of this file: the addend is its resolver, whose symbol is its name. */
		i = sym_index__find(ix, r->addend);
		target = i >= 0 && sym_index__addr(ix, (size_t)i) == r->addend &&
				 !sym_index__name(ix, (size_t)i, resolver, sizeof(resolver))
			     ? resolver
			     : NULL;
	}
	if (!target || !target[0])
		return -ENOENT;
	if (demangle_is_mangled(target))
		dm = demangle(target);
	n = snprintf(buf, size, "%s@plt", dm ? dm : target);
	free(dm);
	return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

static const struct plt_reloc *reloc_by_slot(const struct plt_relocs *rs, uint64_t slot)
{
	struct plt_reloc key = {.slot = slot};
	const struct plt_reloc *r;

	if (!rs->n)
		return NULL;
	r = bsearch(&key, rs->r, rs->n, sizeof(*rs->r), slot_cmp);
	if (!r)
		return NULL;
	/* Several relocations of one slot (unusual): the first in file order. */
	while (r > rs->r && r[-1].slot == slot)
		r--;
	return r;
}

int plt_decode_x86_64(const uint8_t *b, size_t len, uint64_t addr, uint64_t *slot, uint32_t *index)
{
	size_t off = 0;
	int32_t disp;

	if (len >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa)
		off = 4; /* endbr64 */
	if (off < len && b[off] == 0xf2)
		off++; /* bnd */
	if (off + 6 <= len && b[off] == 0xff && b[off + 1] == 0x25) {
		memcpy(&disp, b + off + 2, 4);
		*slot = addr + off + 6 + (uint64_t)(int64_t)disp;
		return PLT_ENTRY_SLOT;
	}
	if (off + 5 <= len && b[off] == 0x68) {
		memcpy(index, b + off + 1, 4);
		return PLT_ENTRY_INDEX;
	}
	return -ENOENT;
}

static int add_entries(struct sym_table *t, struct plt_lazy *lazy, const struct sym_index *ix,
		       Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, bool has_header,
		       const struct plt_relocs *rs)
{
	char name[PLT_NAME_MAX];
	Elf_Data *d = elf_getdata(scn, NULL);
	uint64_t entsize = sh->sh_entsize, off, slot;
	const struct plt_reloc *r;
	uint32_t index;
	size_t n = 0;
	int kind, err;

	if (!d || !d->d_buf || d->d_size < sh->sh_size)
		return 0;
	if (entsize != 8 && entsize != 16)
		entsize = 16;
	for (off = has_header ? 16 : 0; off + entsize <= sh->sh_size && n < PLT_ENTRIES_MAX;
	     off += entsize, n++) {
		r = NULL;
		kind = plt_decode_x86_64((const uint8_t *)d->d_buf + off, entsize,
					 sh->sh_addr + off, &slot, &index);
		if (kind == PLT_ENTRY_SLOT)
			r = reloc_by_slot(rs, slot);
		else if (kind == PLT_ENTRY_INDEX && index < rs->n_jmprel)
			r = &rs->r[rs->jmprel[index]];
		if (lazy && r && !r->irelative && r->name && r->name[0] &&
		    (!lazy->strndx || lazy->strndx == r->strndx)) {
			if (GROW(lazy->v, lazy->cap, lazy->n + 1))
				return -ENOMEM;
			lazy->strndx = r->strndx;
			lazy->v[lazy->n++] = (struct sym_list_ent){sh->sh_addr + off,
								   (uint32_t)entsize, r->name_off};
			continue;
		}
		if (!r || reloc_name(ix, r, name, sizeof(name)))
			strcpy(name, PLT_NAME_UNKNOWN);
		err = sym_table__add(t, sh->sh_addr + off, entsize, name, 0);
		if (err == -ENOMEM || err == -E2BIG)
			return err;
	}
	if (has_header && sh->sh_size >= 16) {
		/* The lazy binder's trampoline. */
		err = sym_table__add(t, sh->sh_addr, 16, PLT_NAME_UNKNOWN, 0);
		if (err == -ENOMEM || err == -E2BIG)
			return err;
	}
	return 0;
}

/* Sort by slot for lookups: jmprel follows its entries to their new places. */
static int sort_relocs(struct plt_relocs *rs)
{
	size_t *pos;

	if (!rs->n)
		return 0;
	pos = malloc(rs->n * sizeof(*pos));
	if (!pos)
		return -ENOMEM;
	qsort(rs->r, rs->n, sizeof(*rs->r), reloc_cmp);
	/* index is the order of addition: 0 .. n - 1. */
	for (size_t i = 0; i < rs->n; i++)
		pos[rs->r[i].index] = i;
	for (size_t i = 0; i < rs->n_jmprel; i++)
		rs->jmprel[i] = pos[rs->jmprel[i]];
	free(pos);
	return 0;
}

static bool is_plt_name(const char *n)
{
	return !strcmp(n, ".plt") || !strcmp(n, ".plt.sec") || !strcmp(n, ".plt.got") ||
	       !strcmp(n, ".plt.bnd");
}

/* The index of the lazily named stubs. Returns 0 or a negative errno. */
static int lazy_index(struct plt_lazy *lazy, Elf *e, const struct sym_source *src,
		      const struct sym_index *same_file, struct sym_index **out)
{
	Elf_Scn *scn = elf_getscn(e, lazy->strndx);
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB)
		return -EINVAL;
	return sym_index__from_list(out, lazy->v, lazy->n, src, sh.sh_offset, sh.sh_size,
				    same_file);
}

int elf_add_plt_syms(struct sym_table *t, struct sym_index **lazy_out, Elf *e,
		     const struct sym_index *ix, bool ix_same_file, const struct sym_source *src)
{
	struct plt_lazy lazy = {0}, *lazy_p = lazy_out && src ? &lazy : NULL;
	struct plt_relocs rs = {0};
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	GElf_Shdr sh;
	size_t shstrndx, added = t->n;
	const char *n;
	int err = 0;

	if (!gelf_getehdr(e, &eh) || elf_getshdrstrndx(e, &shstrndx))
		return 0;
	if (eh.e_machine != EM_X86_64) {
		/* Unknown layout: the stubs are at least not the function before them. */
		while ((scn = elf_nextscn(e, scn)) && !err) {
			if (!gelf_getshdr(scn, &sh))
				break;
			if (sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_EXECINSTR) &&
			    sh.sh_size && is_plt_name(scn_name(e, shstrndx, &sh)))
				err =
				    sym_table__add(t, sh.sh_addr, sh.sh_size, PLT_NAME_UNKNOWN, 0);
		}
		goto out;
	}
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			break;
		if (sh.sh_type != SHT_RELA)
			continue;
		n = scn_name(e, shstrndx, &sh);
		err = add_relocs(&rs, e, scn, &sh, !strcmp(n, ".rela.plt"));
		if (err)
			goto out;
	}
	err = sort_relocs(&rs);
	if (err)
		goto out;
	scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			break;
		if (sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_EXECINSTR) || !sh.sh_size)
			continue;
		n = scn_name(e, shstrndx, &sh);
		if (!is_plt_name(n))
			continue;
		/* .plt starts with the lazy binder's header; .plt.sec, .plt.got, .plt.bnd do not.
		 */
		err = add_entries(t, lazy_p, ix, e, scn, &sh, !strcmp(n, ".plt"), &rs);
		if (err)
			goto out;
	}
	if (lazy.n) {
		err = lazy_index(&lazy, e, src, ix_same_file ? ix : NULL, lazy_out);
		if (err)
			goto out;
	}
out:
	free(lazy.v);
	free(rs.r);
	free(rs.jmprel);
	if (err == -ENOMEM || err == -E2BIG)
		return err;
	return t->n > added || (lazy_out && *lazy_out) ? 1 : 0;
}
