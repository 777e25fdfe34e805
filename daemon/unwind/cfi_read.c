// SPDX-License-Identifier: BSD-2-Clause
/*
 * The input side of the CFI builder: a byte reader that stops at its end, the CFI sections of an
 * ELF file (.eh_frame, found by section header or PT_GNU_EH_FRAME, and .debug_frame), and the
 * CIE and FDE headers. Lengths, offsets and CIE pointers from the file never reach memory
 * outside their section.
 */
#include "cfi_priv.h"

#include <errno.h>
#include <string.h>

/* --- bounded reads ---------------------------------------------------------------------------- */

bool cfi_cur_need(struct cur *c, size_t n)
{
	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		return false;
	}
	return true;
}

uint64_t cfi_rd_u(struct cur *c, size_t n)
{
	uint64_t v = 0;

	if (!cfi_cur_need(c, n))
		return 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += n;
	return v;
}

uint8_t cfi_rd_u8(struct cur *c)
{
	return (uint8_t)cfi_rd_u(c, 1);
}

/* A LEB128 number; sign: sign-extend it (SLEB128). Marks c bad when it does not fit 64 bits. */
static uint64_t rd_leb(struct cur *c, bool sign)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (!cfi_cur_need(c, 1))
			return 0;
		b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		else if (!sign && (b & 0x7f))
			c->bad = true;
		shift += 7;
	} while (b & 0x80);
	if (sign && shift < 64 && (b & 0x40))
		v |= ~0ull << shift;
	return v;
}

uint64_t cfi_rd_uleb(struct cur *c)
{
	return rd_leb(c, false);
}

int64_t cfi_rd_sleb(struct cur *c)
{
	return (int64_t)rd_leb(c, true);
}

void cfi_skip(struct cur *c, uint64_t n)
{
	if (n > (uint64_t)(c->end - c->p)) {
		c->bad = true;
		return;
	}
	c->p += n;
}

/* --- sections ------------------------------------------------------------------------------- */

/*
 * Read a pointer of encoding enc. rel: apply the application part (pcrel, ...); false for
 * lengths. Returns false (c->bad may stay clear) for an encoding we do not follow.
 */
bool cfi_rd_enc(struct cur *c, uint8_t enc, const struct frame_sec *s, bool rel, uint64_t *out)
{
	uint64_t pos = s->vaddr + (uint64_t)(c->p - s->data);
	uint64_t v;

	if (enc == PE_omit)
		return false;
	switch (enc & 0x0f) {
	case PE_absptr:
	case PE_udata8:
	case PE_sdata8:
		v = cfi_rd_u(c, 8);
		break;
	case PE_uleb128:
		v = cfi_rd_uleb(c);
		break;
	case PE_udata2:
		v = cfi_rd_u(c, 2);
		break;
	case PE_sdata2:
		v = (uint64_t)(int64_t)(int16_t)cfi_rd_u(c, 2);
		break;
	case PE_udata4:
		v = cfi_rd_u(c, 4);
		break;
	case PE_sdata4:
		v = (uint64_t)(int64_t)(int32_t)cfi_rd_u(c, 4);
		break;
	case PE_sleb128:
		v = (uint64_t)cfi_rd_sleb(c);
		break;
	default:
		c->bad = true;
		return false;
	}
	if (c->bad)
		return false;
	if (!rel)
		goto out;
	switch (enc & 0x70) {
	case 0:
		break;
	case PE_pcrel:
		v += pos;
		break;
	case PE_datarel:
		if (!s->has_data)
			return false;
		v += s->data_base;
		break;
	case PE_textrel:
		if (!s->has_text)
			return false;
		v += s->text_base;
		break;
	default:
		return false;
	}
	/* An address of the address: only personality routines use it, and those are skipped. */
	if (enc & PE_indirect)
		return false;
out:
	*out = v;
	return true;
}

/* --- CIE and FDE headers ---------------------------------------------------------------------- */

/* One entry's bounds: [*body, *end) after the length; *id_pos: where the CIE id/pointer is. */

/*
 * Read the entry at *pos and move *pos past it. Returns 1, 2 for an empty one (padding: e is not
 * set), 0 at the end (terminator), -1 when malformed.
 */
int cfi_entry_read(const struct frame_sec *s, size_t *pos, struct entry *e)
{
	struct cur c = {s->data + *pos, s->data + s->size, false};
	uint64_t len;

	if (*pos >= s->size)
		return 0;
	e->off = *pos;
	len = cfi_rd_u(&c, 4);
	e->is64 = len == 0xffffffffu;
	if (e->is64)
		len = cfi_rd_u(&c, 8);
	if (c.bad)
		return -1;
	if (len == 0) { /* .eh_frame's terminator; in .debug_frame: padding */
		if (s->eh)
			return 0;
		*pos = (size_t)(c.p - s->data);
		return 2;
	}
	if (len > (uint64_t)(c.end - c.p) || len < (e->is64 ? 8u : 4u))
		return -1;
	e->id_pos = c.p;
	e->end = c.p + len;
	e->id = cfi_rd_u(&c, e->is64 ? 8 : 4);
	*pos = (size_t)(e->end - s->data);
	return 1;
}

bool cfi_entry_is_cie(const struct frame_sec *s, const struct entry *e)
{
	if (s->eh)
		return e->id == 0;
	return e->is64 ? e->id == ~0ull : e->id == 0xffffffffu;
}

/* Parse the CIE at section offset off. Returns 0 or -EINVAL. */
int cfi_cie_parse(const struct frame_sec *s, uint64_t off, struct cie *cie)
{
	size_t pos = (size_t)off;
	struct entry e;
	const char *aug;
	size_t aug_len;
	uint8_t version;
	struct cur c;

	if (off >= s->size || cfi_entry_read(s, &pos, &e) != 1 || !cfi_entry_is_cie(s, &e))
		return -EINVAL;
	c = (struct cur){e.id_pos + (e.is64 ? 8 : 4), e.end, false};
	memset(cie, 0, sizeof(*cie));
	cie->fde_enc = PE_absptr;
	cie->addr_size = 8;
	version = cfi_rd_u8(&c);
	if (version != 1 && version != 3 && version != 4)
		return -EINVAL;
	aug = (const char *)c.p;
	aug_len = strnlen(aug, (size_t)(c.end - c.p));
	if (aug_len == (size_t)(c.end - c.p))
		return -EINVAL;
	c.p += aug_len + 1;
	if (version == 4) {
		cie->addr_size = cfi_rd_u8(&c);
		if (cfi_rd_u8(&c) != 0 || (cie->addr_size != 4 && cie->addr_size != 8))
			return -EINVAL; /* segment selectors: not on x86-64 */
	}
	if (aug[0] == 'e' && aug[1] == 'h') { /* old GCC: a pointer to the EH data */
		cfi_skip(&c, 8);
		aug += 2;
	}
	cie->code_align = cfi_rd_uleb(&c);
	cie->data_align = cfi_rd_sleb(&c);
	cie->ra = version == 1 ? cfi_rd_u8(&c) : cfi_rd_uleb(&c);
	if (c.bad || cie->code_align == 0)
		return -EINVAL;
	if (aug[0] == 'z') {
		uint64_t alen = cfi_rd_uleb(&c);
		struct cur a;

		if (c.bad || alen > (uint64_t)(c.end - c.p))
			return -EINVAL;
		a = (struct cur){c.p, c.p + alen, false};
		c.p += alen;
		cie->aug_z = true;
		for (const char *p = aug + 1; *p && !a.bad; p++) {
			uint64_t unused;
			uint8_t enc;

			switch (*p) {
			case 'R':
				cie->fde_enc = cfi_rd_u8(&a);
				break;
			case 'L':
				cfi_rd_u8(&a);
				break;
			case 'P':
				enc = cfi_rd_u8(&a);
				/* Only its size matters: read it without applying the base. */
				if (!cfi_rd_enc(&a, enc & 0x0f, s, false, &unused))
					return -EINVAL;
				break;
			case 'S':
				cie->signal = true;
				break;
			default:
				/* The data is sized by 'z': the letters after this one are not
				 * ours. */
				p = aug + strlen(aug) - 1;
				break;
			}
		}
		if (a.bad)
			return -EINVAL;
	} else if (aug[0]) {
		return -EINVAL; /* unknown augmentation without a size: the rest cannot be read */
	}
	if (!s->eh && !aug[0])
		cie->fde_enc = cie->addr_size == 4 ? PE_udata4 : PE_absptr;
	cie->insns = c.p;
	cie->insns_end = c.end;
	return c.bad ? -EINVAL : 0;
}

/*
 * Parse an FDE header: its CIE, range and instructions. Returns 0, -EINVAL (the range is
 * known, the rest is not usable: *bad_range set) or -ENOENT (not even the range).
 */
int cfi_fde_parse(const struct frame_sec *s, const struct entry *e, struct cie *cie,
		  uint64_t *start, uint64_t *end, struct cur *insns)
{
	struct cur c = {e->id_pos + (e->is64 ? 8 : 4), e->end, false};
	uint64_t cie_off, range;

	if (s->eh) {
		/* The CIE pointer counts back from the pointer itself. */
		cie_off = (uint64_t)(e->id_pos - s->data) - e->id;
		if (e->id > (uint64_t)(e->id_pos - s->data))
			return -ENOENT;
	} else {
		cie_off = e->id;
	}
	if (cfi_cie_parse(s, cie_off, cie))
		return -ENOENT;
	if (!cfi_rd_enc(&c, cie->fde_enc, s, true, start) ||
	    !cfi_rd_enc(&c, cie->fde_enc & 0x0f, s, false, &range))
		return -ENOENT;
	if (range > UINT64_MAX - *start)
		return -ENOENT;
	*end = *start + range;
	if (cie->aug_z)
		cfi_skip(&c, cfi_rd_uleb(&c));
	if (c.bad)
		return -EINVAL;
	*insns = c;
	return 0;
}

/* --- finding the sections --------------------------------------------------------------------- */

static Elf_Scn *scn_by_name(Elf *e, const char *name, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	const char *n;

	if (elf_getshdrstrndx(e, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, sh))
			continue;
		n = elf_strptr(e, shstrndx, sh->sh_name);
		if (n && !strcmp(n, name))
			return scn;
	}
	return NULL;
}

/* The bytes of a section with contents; a compressed .debug_frame is inflated. */
static bool scn_bytes(Elf_Scn *scn, GElf_Shdr *sh, const uint8_t **data, size_t *size)
{
	Elf_Data *d;

	if (sh->sh_type == SHT_NOBITS)
		return false;
	if ((sh->sh_flags & SHF_COMPRESSED) &&
	    (elf_compress(scn, 0, 0) < 0 || !gelf_getshdr(scn, sh)))
		return false;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || !d->d_size)
		return false;
	*data = d->d_buf;
	*size = d->d_size;
	return true;
}

/* .eh_frame from PT_GNU_EH_FRAME when there are no section headers. */
static bool eh_from_phdrs(Elf *e, struct frame_sec *s)
{
	GElf_Phdr ph, hdr = {0};
	size_t nph, raw_size;
	const uint8_t *raw;
	uint64_t ptr;
	bool found = false;
	struct cur c;

	if (elf_getphdrnum(e, &nph) || !(raw = (const uint8_t *)elf_rawfile(e, &raw_size)))
		return false;
	for (size_t i = 0; i < nph; i++)
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME) {
			hdr = ph;
			found = true;
		}
	if (!found || hdr.p_offset > raw_size || hdr.p_filesz > raw_size - hdr.p_offset)
		return false;
	c = (struct cur){raw + hdr.p_offset, raw + hdr.p_offset + hdr.p_filesz, false};
	if (cfi_rd_u8(&c) != 1)
		return false;
	{
		uint8_t enc = cfi_rd_u8(&c);
		struct frame_sec h = {.data = raw + hdr.p_offset,
				      .size = hdr.p_filesz,
				      .vaddr = hdr.p_vaddr,
				      .eh = true,
				      .has_data = true,
				      .data_base = hdr.p_vaddr};

		cfi_rd_u8(&c);
		cfi_rd_u8(&c);
		if (!cfi_rd_enc(&c, enc, &h, true, &ptr))
			return false;
	}
	for (size_t i = 0; i < nph; i++) {
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || ptr < ph.p_vaddr ||
		    ptr - ph.p_vaddr >= ph.p_filesz)
			continue;
		if (ph.p_offset > raw_size || ph.p_filesz > raw_size - ph.p_offset)
			return false;
		s->data = raw + ph.p_offset + (ptr - ph.p_vaddr);
		s->size = ph.p_filesz - (ptr - ph.p_vaddr);
		s->vaddr = ptr;
		s->eh = true;
		s->has_data = true;
		s->data_base = hdr.p_vaddr;
		return true;
	}
	return false;
}

void cfi_find_sources(Elf *e, bool is_debug, struct sources *src)
{
	struct frame_sec s = {.debug = is_debug};
	GElf_Ehdr eh_hdr;
	GElf_Shdr sh, hsh;
	Elf_Scn *scn;
	size_t nscn = 0;

	if (!e || elf_kind(e) != ELF_K_ELF)
		return;
	/* The rules are x86-64's (register numbers, pointer size). */
	if (!gelf_getehdr(e, &eh_hdr) || eh_hdr.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh_hdr.e_machine != EM_X86_64)
		return;
	if (scn_by_name(e, ".eh_frame_hdr", &hsh)) {
		s.has_data = true;
		s.data_base = hsh.sh_addr;
	} else if ((scn = scn_by_name(e, ".got", &hsh))) {
		s.has_data = true;
		s.data_base = hsh.sh_addr;
	}
	if (scn_by_name(e, ".text", &hsh)) {
		s.has_text = true;
		s.text_base = hsh.sh_addr;
	}
	if (!is_debug) {
		struct frame_sec eh = s;

		scn = scn_by_name(e, ".eh_frame", &sh);
		if (scn && scn_bytes(scn, &sh, &eh.data, &eh.size)) {
			eh.vaddr = sh.sh_addr;
			eh.eh = true;
			src->sec[src->n++] = eh;
		} else if ((elf_getshdrnum(e, &nscn) || nscn <= 1) && eh_from_phdrs(e, &eh)) {
			src->sec[src->n++] = eh;
		}
	}
	scn = scn_by_name(e, ".debug_frame", &sh);
	if (scn && scn_bytes(scn, &sh, &s.data, &s.size)) {
		s.vaddr = 0;
		s.eh = false;
		src->sec[src->n++] = s;
	}
}
