/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to daemon/unwind: the bounded byte reader, the CFI sections of an ELF file, and the
 * CIE and FDE headers (cfi_read.c), which the CFA machine and the table builder (cfi.c) use.
 */
#ifndef PROFD_UNWIND_CFI_PRIV_H
#define PROFD_UNWIND_CFI_PRIV_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfi.h"

struct cur {
	const uint8_t *p, *end;
	bool bad;
};

struct frame_sec {
	const uint8_t *data;
	size_t size;
	uint64_t vaddr; /* of data[0]: the base of pcrel pointers */
	bool eh;	/* .eh_frame (else .debug_frame) */
	bool debug;	/* from the separate debug file */
	bool has_data, has_text;
	uint64_t data_base; /* .eh_frame_hdr (datarel) */
	uint64_t text_base; /* .text (textrel) */
};

enum {
	PE_omit = 0xff,
	PE_absptr = 0x00,
	PE_uleb128 = 0x01,
	PE_udata2 = 0x02,
	PE_udata4 = 0x03,
	PE_udata8 = 0x04,
	PE_sleb128 = 0x09,
	PE_sdata2 = 0x0a,
	PE_sdata4 = 0x0b,
	PE_sdata8 = 0x0c,
	PE_pcrel = 0x10,
	PE_textrel = 0x20,
	PE_datarel = 0x30,
	PE_indirect = 0x80,
};

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra;
	uint8_t fde_enc;
	uint8_t addr_size; /* .debug_frame v4 */
	bool aug_z;
	bool signal;
	const uint8_t *insns, *insns_end;
};

struct entry {
	size_t off; /* of the length field */
	const uint8_t *id_pos, *end;
	uint64_t id;
	bool is64;
};

/* An FDE found in pass one. */
struct fde_ref {
	uint64_t start, end;
	const struct frame_sec *sec;
	size_t off; /* of its entry in sec */
	uint32_t seq;
	bool bad; /* header unusable beyond its range */
};

struct sources {
	struct frame_sec sec[3];
	size_t n;
};

/* DWARF register numbers (x86-64 psABI). */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RIP 16

/* The CFA machine's state (cfi.c): what the walker uses, the CFA, rbp and the return address. */
enum { CFA_REGOFF, CFA_EXPR, CFA_BAD };
enum { R_UNSET, R_SAME, R_UNDEF, R_OFFSET, R_VAL_OFFSET, R_REG, R_EXPR, R_VAL_EXPR };

struct rule {
	uint8_t type;
	int64_t off;	     /* R_OFFSET, R_VAL_OFFSET */
	uint64_t reg;	     /* R_REG */
	const uint8_t *expr; /* R_EXPR: into the section */
	uint64_t expr_len;
};

struct vm_state {
	uint8_t cfa_type;
	uint64_t cfa_reg;
	int64_t cfa_off;
	const uint8_t *expr; /* CFA_EXPR: into the section */
	uint64_t expr_len;
	struct rule rbp, ra;
};

/* The row of one state (cfi_rule.c; a signal FDE is handled by the caller). */
struct profd_unwind_row cfi_rule_row(const struct vm_state *st);

/* One row in the making: its pc and rule. */
struct prow {
	uint64_t pc;
	struct profd_unwind_row row;
};

struct rows {
	struct prow *v;
	size_t n, cap;
};

/*
 * Append to a table: one row per pc (the later wins), equal neighbours merged. pc must not be
 * below the last row's. Returns 0 or -ENOMEM.
 */
int cfi_rows_push(struct rows *t, uint64_t pc, const struct profd_unwind_row *row);

/*
 * Rows from machine code for the functions that a symbol of elf or debug names and no FDE
 * covers (cfi_insn.c), their bytes read from fd (elf's file) or, when fd < 0, through libelf.
 * fdes: the FDE ranges, sorted. a gets the analysed rows, sorted, and
 * *ranges (malloc'd, sorted) the analysed functions' ranges; counts go to st. Returns 0 or
 * -ENOMEM; what cannot be analysed is left out.
 */
int cfi_insn_add(Elf *elf, int fd, Elf *debug, const struct cfi_fde *fdes, size_t nfdes,
		 struct rows *a, struct cfi_fde **ranges, size_t *nranges, struct cfi_stats *st);
/*
 * The final table (*out malloc'd, *nout rows): t's tn rows with a's in place of t's within the
 * ranges fns; at each range's end t's rule there holds again. Returns 0 or -ENOMEM.
 */
int cfi_insn_merge(const struct profd_unwind_row *t, size_t tn, const struct rows *a,
		   const struct cfi_fde *fns, size_t nfns, struct profd_unwind_row **out,
		   size_t *nout);

bool cfi_cur_need(struct cur *c, size_t n);
uint8_t cfi_rd_u8(struct cur *c);
uint64_t cfi_rd_uleb(struct cur *c);
int64_t cfi_rd_sleb(struct cur *c);
uint64_t cfi_rd_u(struct cur *c, size_t n);
void cfi_skip(struct cur *c, uint64_t n);
/*
 * Read a pointer of encoding enc. rel: apply the application part (pcrel, ...); false for
 * lengths. Returns false (c->bad may stay clear) for an encoding we do not follow.
 */
bool cfi_rd_enc(struct cur *c, uint8_t enc, const struct frame_sec *s, bool rel, uint64_t *out);
/*
 * Read the entry at *pos and move *pos past it. Returns 1, 2 for an empty one (padding: e is not
 * set), 0 at the end (terminator), -1 when malformed.
 */
int cfi_entry_read(const struct frame_sec *s, size_t *pos, struct entry *e);
bool cfi_entry_is_cie(const struct frame_sec *s, const struct entry *e);
/* Parse the CIE at section offset off. Returns 0 or -EINVAL. */
int cfi_cie_parse(const struct frame_sec *s, uint64_t off, struct cie *cie);
/*
 * Parse an FDE header: its CIE, range and instructions. Returns 0, -EINVAL (the range is
 * known, the rest is not usable: *bad_range set) or -ENOENT (not even the range).
 */
int cfi_fde_parse(const struct frame_sec *s, const struct entry *e, struct cie *cie,
		  uint64_t *start, uint64_t *end, struct cur *insns);
void cfi_find_sources(Elf *e, bool is_debug, struct sources *src);

#endif
