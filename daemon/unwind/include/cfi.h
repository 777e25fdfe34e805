/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Compact unwind tables from an ELF file's call frame information (.eh_frame, .debug_frame):
 * one struct profd_unwind_row per change of rule, sorted by pc, as the BPF walker reads them
 * (bpf/abi.h). Functions that a symbol names and no FDE covers get rows from their machine
 * code. Also the bare FDE ranges, which name functions that have no symbol.
 *
 * The input is a file the profiled user controls: every length and offset is bounded by its
 * section; what cannot be parsed or expressed becomes INVALID rows, never a crash.
 */
#ifndef PROFD_UNWIND_CFI_H
#define PROFD_UNWIND_CFI_H

#include <stddef.h>
#include <stdint.h>

#include "abi.h"

struct Elf;

/* One function's range [start, end) of ELF virtual addresses. */
struct cfi_fde {
	uint32_t start, end;
};

struct cfi_stats {
	uint32_t cies;		   /* CIEs parsed */
	uint32_t fdes;		   /* FDEs with a non-empty range that went into the table */
	uint32_t fdes_debug_frame; /* of those, from .debug_frame (ranges .eh_frame lacks) */
	uint32_t fdes_invalid;	   /* FDEs (or damaged entries) that could not be parsed */
	uint32_t rows;		   /* rows of the table */
	uint32_t rows_invalid;	   /* of those, PROFD_UW_INVALID */
	/* Functions without an FDE, their rows from their machine code (cfi_insn.c): */
	uint32_t insn_functions; /* analysed */
	uint32_t insn_rows;	 /* rows of the table within them */
	uint32_t insn_partial;	 /* stopped at code the analysis cannot follow (GAP after it) */
	uint32_t insn_skipped;	 /* left out: over the size cap or the file's budget */
	uint64_t insn_insns;	 /* instructions decoded */
};

struct cfi_table {
	struct profd_unwind_row *rows; /* malloc'd, sorted by pc, no two with one pc */
	size_t nrows;
	struct cfi_fde *fdes; /* malloc'd, sorted by start */
	size_t nfdes;
	struct cfi_fde *insn; /* malloc'd, sorted: the functions whose rows come from their code */
	size_t ninsn;
	struct cfi_stats stats;
};

/*
 * Build the table of elf (the mapped file) with debug (its separate debug file, or NULL) for
 * .debug_frame ranges .eh_frame does not cover. Returns 0, -ENOENT (no CFI at all), -ERANGE
 * (addresses at or above 4 GiB), -EINVAL (malformed beyond use) or -ENOMEM; on error out is
 * zeroed. The caller owns out's arrays: cfi_table__fini().
 */
int cfi_table__build(struct Elf *elf, struct Elf *debug, struct cfi_table *out);
/*
 * cfi_table__build() for an elf opened on fd (not owned): the bytes of the functions analysed
 * from their machine code are read from fd into one reused buffer. Without it (fd < 0) they are
 * read through libelf, which keeps every chunk until elf_end(): tens of MB for libtorch_cpu.so.
 */
int cfi_table__build_fd(struct Elf *elf, int fd, struct Elf *debug, struct cfi_table *out);
/* Free the arrays of t and zero it. Accepts a zeroed table. */
void cfi_table__fini(struct cfi_table *t);

/*
 * Only the FDE ranges (no CFA program is run), sorted by start, empty ones left out: for the
 * symbolizer. Same returns as cfi_table__build(); *out is malloc'd and the caller's.
 */
int cfi_fdes(struct Elf *elf, struct Elf *debug, struct cfi_fde **out, size_t *n);

/* The FDE whose [start, end) holds vaddr, or NULL. fdes sorted by start. */
const struct cfi_fde *cfi_fde_find(const struct cfi_fde *fdes, size_t n, uint64_t vaddr);

/* The name of a row kind ("RSP", "PLT", ...), "?" for an unknown one. */
const char *cfi_kind_name(unsigned int kind);

#endif
