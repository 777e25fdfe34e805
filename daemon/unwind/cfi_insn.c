// SPDX-License-Identifier: BSD-2-Clause
/*
 * Unwind rows from machine code, for functions that a symbol names and no FDE covers: BLAS and
 * MKL kernels written in assembly, built without CFI, which use rbp as a general register.
 *
 * Each function is decoded (Capstone) from its first instruction to its end, in address order,
 * following what the stack pointer does: push/pop, sub/add rsp with an immediate, lea rsp
 * relative to rsp or rbp, enter/leave, mov rbp,rsp and mov rsp,rbp, and where rbp is saved
 * (push rbp, or mov rbp to [rsp + N] after a sub rsp), and a copy of rsp kept in another
 * register while rsp is aligned (OpenBLAS's mov %rsp,%rbx; and $-4096,%rsp). Every instruction
 * boundary gets the rule of the state before it, as an RSP, RBP or CFA_REG row (bpf/abi.h; the
 * last only in the first frame, as the walker has registers only there). An epilogue (pops, stack
 * loads, add rsp, leave) ending in a ret or an unconditional jmp leaves the state it undid for the
 * code after it: as LLDB's x86 assembly inspection does, the state from before the epilogue
 * is taken up again there, since that code is reached by a jump from the body (an early
 * return in the middle of a function). A conditional jump or a call changes nothing.
 *
 * What the analysis cannot follow (rsp moved by a register amount or aligned without a frame
 * pointer, the frame pointer overwritten, bytes that do not decode) ends it: the rest of the
 * function keeps a GAP row, the frame-pointer step, as before. Functions over FUNC_MAX bytes
 * and what comes after the file's INSN_BUDGET instructions are left out, so a library of half
 * a gigabyte cannot hold the table builder up (docs/unwinding.md has the figures).
 */
#include "cfi_priv.h"

#include "fdio.h"
#include "grow.h"

#include <capstone/capstone.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of one function at most (MKL's sgemm kernels have 7 KiB). */
#define FUNC_MAX (256u << 10)
/* Instructions decoded per file at most (a few seconds: Capstone decodes about 1 M a second with
 * details). */
#define INSN_BUDGET (4u << 20)

struct fn {
	uint64_t start, end;
};

struct fn_list {
	struct fn *v;
	size_t n, cap;
};

/*
 * The frame as the analysis knows it: CFA = rsp + sp (when sp_ok) and CFA = rbp + fp (when
 * fp_ok, rbp set up as a frame pointer); rbp saved at CFA + rbp (0: it holds the caller's).
 */
struct ax_state {
	bool sp_ok, fp_ok;
	int64_t sp, fp;
	int64_t rbp;
	/*
	 * A copy of rsp in another register (OpenBLAS: mov %rsp,%rbx before aligning rsp):
	 * CFA = alt + alt_off, a CFA_REG row (the first frame only) while rsp is not known.
	 * alt: its DWARF number, -1 none.
	 */
	int alt;
	int64_t alt_off;
	bool rbp_lost; /* rbp written before it was saved: a later save holds no caller's value */
};

static bool is_rsp(unsigned int r)
{
	return r == X86_REG_RSP || r == X86_REG_ESP || r == X86_REG_SP || r == X86_REG_SPL;
}

static bool is_rbp(unsigned int r)
{
	return r == X86_REG_RBP || r == X86_REG_EBP || r == X86_REG_BP || r == X86_REG_BPL;
}

static bool op_reg(const cs_x86_op *o, unsigned int reg)
{
	return o->type == X86_OP_REG && o->reg == reg;
}

/* [base + disp], no index, no segment. */
static bool op_mem(const cs_x86_op *o, unsigned int base, int64_t *disp)
{
	if (o->type != X86_OP_MEM || o->mem.base != base || o->mem.index != X86_REG_INVALID ||
	    o->mem.segment != X86_REG_INVALID)
		return false;
	*disp = o->mem.disp;
	return true;
}

/* An explicit operand that writes rsp (wsp) or rbp (!wsp). */
/* The DWARF number (x86-64 psABI) of a general register or any part of it; -1 for others. */
static int dwarf_reg(unsigned int r)
{
	static const unsigned int fam[][5] = {
	    {X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL, X86_REG_AH},
	    {X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL, X86_REG_DH},
	    {X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL, X86_REG_CH},
	    {X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL, X86_REG_BH},
	    {X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL, X86_REG_SIL},
	    {X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL, X86_REG_DIL},
	    {X86_REG_RBP, X86_REG_EBP, X86_REG_BP, X86_REG_BPL, X86_REG_BPL},
	    {X86_REG_RSP, X86_REG_ESP, X86_REG_SP, X86_REG_SPL, X86_REG_SPL},
	    {X86_REG_R8, X86_REG_R8D, X86_REG_R8W, X86_REG_R8B, X86_REG_R8B},
	    {X86_REG_R9, X86_REG_R9D, X86_REG_R9W, X86_REG_R9B, X86_REG_R9B},
	    {X86_REG_R10, X86_REG_R10D, X86_REG_R10W, X86_REG_R10B, X86_REG_R10B},
	    {X86_REG_R11, X86_REG_R11D, X86_REG_R11W, X86_REG_R11B, X86_REG_R11B},
	    {X86_REG_R12, X86_REG_R12D, X86_REG_R12W, X86_REG_R12B, X86_REG_R12B},
	    {X86_REG_R13, X86_REG_R13D, X86_REG_R13W, X86_REG_R13B, X86_REG_R13B},
	    {X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B, X86_REG_R14B},
	    {X86_REG_R15, X86_REG_R15D, X86_REG_R15W, X86_REG_R15B, X86_REG_R15B},
	};

	for (int i = 0; i < 16; i++)
		for (int k = 0; k < 5; k++)
			if (fam[i][k] == r)
				return i;
	return -1;
}

/* An explicit operand that writes the register of DWARF number reg. */
static bool writes_dwarf(const cs_x86 *x, int reg)
{
	for (int i = 0; i < x->op_count; i++) {
		const cs_x86_op *o = &x->operands[i];

		if (o->type == X86_OP_REG && (o->access & CS_AC_WRITE) && dwarf_reg(o->reg) == reg)
			return true;
	}
	return false;
}

static bool writes(const cs_x86 *x, bool wsp)
{
	for (int i = 0; i < x->op_count; i++) {
		const cs_x86_op *o = &x->operands[i];

		if (o->type == X86_OP_REG && (o->access & CS_AC_WRITE) &&
		    (wsp ? is_rsp(o->reg) : is_rbp(o->reg)))
			return true;
	}
	return false;
}

/*
 * What may stand in an epilogue without ending it: loads from the stack into registers
 * (callee-saved restores, MKL's mov (%rsp),%rbx), vzeroupper, nops.
 */
static bool epilogue_neutral(const cs_insn *in)
{
	const cs_x86 *x = &in->detail->x86;
	int64_t d;

	switch (in->id) {
	case X86_INS_NOP:
	case X86_INS_VZEROUPPER:
	case X86_INS_ENDBR64:
		return true;
	default:
		break;
	}
	return x->op_count == 2 && x->operands[0].type == X86_OP_REG &&
	       !is_rsp(x->operands[0].reg) && !is_rbp(x->operands[0].reg) &&
	       (op_mem(&x->operands[1], X86_REG_RSP, &d) ||
		op_mem(&x->operands[1], X86_REG_RBP, &d));
}

/* rsp moves by delta (a push: -8). */
static void sp_move(struct ax_state *s, int64_t delta)
{
	s->sp -= delta;
}

/*
 * Apply one instruction to s. Returns 1 when it undoes part of the frame (an epilogue step),
 * 0 otherwise. What cannot be followed clears sp_ok or fp_ok.
 */
static int ax_step(struct ax_state *s, const cs_insn *in);

static int ax_apply(struct ax_state *s, const cs_insn *in)
{
	bool saved = s->rbp != 0;
	int r = ax_step(s, in);

	if (!saved && !s->rbp && writes(&in->detail->x86, false))
		s->rbp_lost = true;
	return r;
}

static int ax_step(struct ax_state *s, const cs_insn *in)
{
	const cs_x86 *x = &in->detail->x86;
	const cs_x86_op *a = &x->operands[0], *b = &x->operands[1];
	bool one = x->op_count == 1, two = x->op_count == 2;
	int64_t d = 0;

	switch (in->id) {
	case X86_INS_PUSH:
	case X86_INS_PUSHFQ:
		sp_move(s, -8);
		if (one && op_reg(a, X86_REG_RBP) && !s->rbp && !s->rbp_lost && s->sp_ok &&
		    !s->fp_ok)
			s->rbp = -s->sp;
		return 0;
	case X86_INS_POP:
	case X86_INS_POPFQ:
		if (one && a->type == X86_OP_REG && dwarf_reg(a->reg) == s->alt)
			s->alt = -1;
		if (one && is_rbp(a->reg)) {
			s->fp_ok = false;
			if (s->sp_ok && s->rbp == -s->sp)
				s->rbp = 0;
		}
		sp_move(s, 8);
		return 1;
	case X86_INS_SUB:
	case X86_INS_ADD:
		if (!two || !op_reg(a, X86_REG_RSP))
			break;
		if (b->type != X86_OP_IMM) {
			s->sp_ok = false;
			return 0;
		}
		sp_move(s, in->id == X86_INS_SUB ? -b->imm : b->imm);
		return in->id == X86_INS_ADD && b->imm > 0;
	case X86_INS_LEA:
		if (!two || !op_reg(a, X86_REG_RSP))
			break;
		if (op_mem(b, X86_REG_RSP, &d)) {
			sp_move(s, d);
			return d > 0;
		}
		/* rsp = rbp + d, as before a GCC epilogue's pops */
		s->sp_ok = op_mem(b, X86_REG_RBP, &d) && s->fp_ok;
		s->sp = s->fp - d;
		return 1;
	case X86_INS_MOV:
		if (!two)
			break;
		if (op_reg(a, X86_REG_RBP) && op_reg(b, X86_REG_RSP)) {
			s->fp_ok = s->sp_ok;
			s->fp = s->sp;
			return 0;
		}
		if (op_reg(a, X86_REG_RSP) && op_reg(b, X86_REG_RBP)) {
			s->sp_ok = s->fp_ok;
			s->sp = s->fp;
			return 1;
		}
		/* rsp kept in another register, and taken back from it */
		if (b->type == X86_OP_REG && b->reg == X86_REG_RSP && a->type == X86_OP_REG &&
		    dwarf_reg(a->reg) >= 0 && dwarf_reg(a->reg) != 6 && a->size == 8) {
			s->alt = s->sp_ok ? dwarf_reg(a->reg) : -1;
			s->alt_off = s->sp;
			return 0;
		}
		if (op_reg(a, X86_REG_RSP) && b->type == X86_OP_REG && s->alt >= 0 &&
		    dwarf_reg(b->reg) == s->alt) {
			s->sp_ok = true;
			s->sp = s->alt_off;
			return 1;
		}
		/* MKL saves rbp into the frame it made with sub rsp: mov %rbp,N(%rsp). */
		if (op_reg(b, X86_REG_RBP) && op_mem(a, X86_REG_RSP, &d) && s->sp_ok && !s->rbp &&
		    !s->rbp_lost && !s->fp_ok) {
			s->rbp = d - s->sp;
			return 0;
		}
		if (op_reg(a, X86_REG_RBP) && op_mem(b, X86_REG_RSP, &d)) {
			s->fp_ok = false;
			if (s->sp_ok && s->rbp && s->rbp == d - s->sp)
				s->rbp = 0;
			return 1;
		}
		break;
	case X86_INS_LEAVE:
		/* rsp = rbp, then the pop of the saved rbp */
		s->sp_ok = s->fp_ok;
		s->sp = s->fp - 8;
		s->fp_ok = false;
		s->rbp = 0;
		return 1;
	case X86_INS_ENTER:
		sp_move(s, -8);
		if (!s->rbp && !s->rbp_lost && s->sp_ok)
			s->rbp = -s->sp;
		s->fp_ok = s->sp_ok;
		s->fp = s->sp;
		if (!one && a->type == X86_OP_IMM)
			sp_move(s, -a->imm);
		else
			s->sp_ok = false;
		return 0;
	default:
		break;
	}
	/* Anything else that writes rsp or rbp: that base is lost (and rsp realigned with it). */
	if (writes(x, true))
		s->sp_ok = false;
	if (writes(x, false))
		s->fp_ok = false;
	if (s->alt >= 0 && writes_dwarf(x, s->alt))
		s->alt = -1;
	return 0;
}

/* The row of a state (rbp-based first, as compilers' CFI has it); GAP when neither is known. */
static struct profd_unwind_row ax_row(const struct ax_state *s)
{
	static const struct profd_unwind_row gap = {.kind = PROFD_UW_GAP};
	int64_t off = s->fp_ok ? s->fp : s->sp;

	if (s->rbp % 8 || s->rbp / 8 < INT8_MIN || s->rbp / 8 > INT8_MAX)
		return gap;
	if (!s->fp_ok && !s->sp_ok) {
		/* CFA = reg + 8 * (cfa & 0xff), rbp at CFA + 8 * (s8)(cfa >> 8) */
		if (s->alt < 0 || s->alt_off < 8 || s->alt_off % 8 || s->alt_off / 8 > UINT8_MAX)
			return gap;
		return (struct profd_unwind_row){
		    .kind = PROFD_UW_CFA_REG,
		    .reg = (int8_t)s->alt,
		    .cfa = (uint16_t)((uint64_t)(s->alt_off / 8) |
				      (uint64_t)(uint8_t)(int8_t)(s->rbp / 8) << 8)};
	}
	if (off < 8 || off % 8 || off / 8 > UINT16_MAX)
		return gap;
	return (struct profd_unwind_row){.kind = s->fp_ok ? PROFD_UW_RBP : PROFD_UW_RSP,
					 .reg = (int8_t)(s->rbp / 8),
					 .cfa = (uint16_t)(off / 8)};
}

static bool is_branch_away(const cs_insn *in)
{
	return in->id == X86_INS_RET || in->id == X86_INS_JMP || in->id == X86_INS_UD2;
}

/*
 * Forward jumps of one function remembered with their state: the code after a ret may be one's
 * target (an early exit taken before the prologue), better known than by the LLDB rule.
 */
#define TARGETS_MAX 64

struct target {
	uint64_t pc;
	struct ax_state st;
};

/*
 * Decode one function's code (at vaddr start) into out. Returns 0 (followed to the end), 1 (it
 * stopped: a GAP follows) or -ENOMEM. *budget: instructions still allowed in this file.
 */
static int analyse(csh h, cs_insn *in, const uint8_t *code, size_t size, uint64_t start,
		   struct rows *out, uint64_t *budget, struct cfi_stats *st)
{
	struct ax_state s = {.sp_ok = true, .sp = 8, .alt = -1}, pre = s;
	struct target tg[TARGETS_MAX];
	size_t ntg = 0;
	bool in_epi = false, after_exit = false;
	uint64_t addr = start;
	struct profd_unwind_row row;
	int err;

	static const struct profd_unwind_row gap = {.kind = PROFD_UW_GAP};

	out->n = 0;
	while (size) {
		int epi;

		/* Over the budget: the rest is left as it was, a GAP. */
		row = *budget ? ax_row(&s) : gap;
		err = cfi_rows_push(out, addr, &row);
		if (err)
			return err;
		if (row.kind == PROFD_UW_GAP)
			return 1;
		if (!cs_disasm_iter(h, &code, &size, &addr, in))
			/* bytes that are not an instruction (data): a GAP from them on */
			return cfi_rows_push(out, addr, &gap) ?: 1;
		(*budget)--;
		st->insn_insns++;
		if (after_exit) {
			/* Code after a ret or jmp: a forward jump's target takes that jump's state.
			 */
			for (size_t k = 0; k < ntg; k++)
				if (tg[k].pc == in->address) {
					s = tg[k].st;
					row = ax_row(&s);
					err = cfi_rows_push(out, in->address, &row);
					if (err)
						return err;
					break;
				}
			/* padding between the exit and the next code */
			after_exit = in->id == X86_INS_NOP || in->id == X86_INS_INT3;
		}
		if (cs_insn_group(h, in, CS_GRP_JUMP) && in->detail->x86.op_count == 1 &&
		    in->detail->x86.operands[0].type == X86_OP_IMM &&
		    (uint64_t)in->detail->x86.operands[0].imm > in->address && ntg < TARGETS_MAX)
			tg[ntg++] = (struct target){(uint64_t)in->detail->x86.operands[0].imm, s};
		if (is_branch_away(in)) {
			/* The code after it is reached from the body: its state before the
			 * epilogue. */
			if (in_epi)
				s = pre;
			in_epi = false;
			after_exit = true;
			continue;
		}
		{
			struct ax_state before = s;

			epi = ax_apply(&s, in);
			if (epi && !in_epi) {
				pre = before;
				in_epi = true;
			} else if (!epi && !epilogue_neutral(in)) {
				in_epi = false;
			}
		}
	}
	return size ? 1 : 0;
}

static int fn_cmp(const void *pa, const void *pb)
{
	const struct fn *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->end > b->end ? -1 : a->end < b->end; /* the longest first */
}

/* Keeps sym when it is a defined function below 4 GiB that no FDE covers. */
static int keep_uncovered(const GElf_Sym *sym, const struct cfi_fde *fdes, size_t nfdes,
			  struct fn_list *l)
{
	int type = GELF_ST_TYPE(sym->st_info);

	if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym->st_shndx == SHN_UNDEF ||
	    !sym->st_value || sym->st_value >= UINT32_MAX ||
	    cfi_fde_find(fdes, nfdes, sym->st_value))
		return 0;
	if (GROW(l->v, l->cap, l->n + 1))
		return -ENOMEM;
	l->v[l->n++] = (struct fn){sym->st_value, sym->st_value + sym->st_size};
	return 0;
}

/*
 * The symbols of one table read from fd in blocks (an x86-64 file: ELF64, the host's byte
 * order), so that libelf does not keep a copy: libtorch_cpu.so's .symtab is 12.8 MB. Returns 0,
 * -ENOMEM, or -EIO when the file cannot be read as its header says (the caller then asks libelf).
 */
static int uncovered_syms_fd(int fd, const GElf_Shdr *sh, const struct cfi_fde *fdes, size_t nfdes,
			     struct fn_list *l)
{
	Elf64_Sym block[1024];
	uint64_t n = sh->sh_size / sizeof(Elf64_Sym);

	for (uint64_t i = 0; i < n;) {
		size_t want = n - i < 1024 ? (size_t)(n - i) : 1024;
		long r = fd_pread_full(fd, block, want * sizeof(*block),
				       sh->sh_offset + i * sizeof(*block));

		if (r != (long)(want * sizeof(*block)))
			return -EIO;
		for (size_t k = 0; k < want; k++) {
			GElf_Sym sym = block[k];
			int err;

			if (i + k == 0) /* the null symbol */
				continue;
			err = keep_uncovered(&sym, fdes, nfdes, l);
			if (err)
				return err;
		}
		i += want;
	}
	return 0;
}

/* The function symbols of e (open on fd, or -1) whose start no FDE covers. */
static int uncovered_syms(Elf *e, int fd, const struct cfi_fde *fdes, size_t nfdes,
			  struct fn_list *l)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while (e && (scn = elf_nextscn(e, scn))) {
		Elf_Data *d;
		size_t n, had = l->n;
		int err;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize)
			continue;
		if (fd >= 0 && gelf_getclass(e) == ELFCLASS64 &&
		    sh.sh_entsize == sizeof(Elf64_Sym)) {
			err = uncovered_syms_fd(fd, &sh, fdes, nfdes, l);
			if (!err)
				continue;
			if (err != -EIO)
				return err;
			l->n = had; /* unreadable as the header says: as libelf reads it */
		}
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		n = d->d_size / sh.sh_entsize;
		for (size_t i = 1; i < n; i++) {
			GElf_Sym sym;

			if (!gelf_getsym(d, (int)i, &sym))
				break;
			err = keep_uncovered(&sym, fdes, nfdes, l);
			if (err)
				return err;
		}
	}
	return 0;
}

/* The executable section of e that holds [start, start + 1), or NULL. */
static Elf_Scn *code_scn(Elf *e, uint64_t start, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, sh) && sh->sh_type == SHT_PROGBITS &&
		    (sh->sh_flags & SHF_EXECINSTR) && start >= sh->sh_addr &&
		    start - sh->sh_addr < sh->sh_size)
			return scn;
	return NULL;
}

/*
 * Each function's end: its symbol's size, else the next function or FDE; never past the next
 * FDE's start, the next function's start or its section's end. Overlapping symbols (aliases)
 * give one function.
 */
static void fn_bounds(Elf *elf, struct fn_list *l, const struct cfi_fde *fdes, size_t nfdes)
{
	size_t k = 0, f = 0;
	GElf_Shdr sh;

	qsort(l->v, l->n, sizeof(*l->v), fn_cmp);
	for (size_t i = 0; i < l->n; i++) {
		struct fn c = l->v[i];
		uint64_t lim;

		if (k && c.start < l->v[k - 1].end)
			continue; /* an alias, or inside the previous one */
		if (!code_scn(elf, c.start, &sh))
			continue;
		lim = sh.sh_addr + sh.sh_size;
		while (f < nfdes && fdes[f].start <= c.start)
			f++;
		if (f < nfdes && fdes[f].start < lim)
			lim = fdes[f].start;
		for (size_t j = i + 1; j < l->n; j++)
			if (l->v[j].start > c.start) {
				if (l->v[j].start < lim)
					lim = l->v[j].start;
				break;
			}
		if (c.end <= c.start || c.end > lim)
			c.end = lim;
		l->v[k++] = c;
	}
	l->n = k;
}

/* Append to a final table: one row per pc (the later wins), equal neighbours merged. */
static void out_push(struct profd_unwind_row *o, size_t *n, uint64_t pc,
		     const struct profd_unwind_row *row)
{
	struct profd_unwind_row r = *row;

	r.pc = (uint32_t)pc;
	if (*n && o[*n - 1].pc == r.pc)
		(*n)--;
	if (*n && o[*n - 1].kind == r.kind && o[*n - 1].reg == r.reg && o[*n - 1].cfa == r.cfa)
		return;
	o[(*n)++] = r;
}

int cfi_insn_merge(const struct profd_unwind_row *t, size_t tn, const struct rows *a,
		   const struct cfi_fde *fns, size_t nfns, struct profd_unwind_row **out,
		   size_t *nout)
{
	static const struct profd_unwind_row gap = {.kind = PROFD_UW_GAP};
	size_t i = 0, j = 0, n = 0;
	struct profd_unwind_row *o;

	*out = NULL;
	*nout = 0;
	if (!tn && !a->n)
		return 0;
	o = malloc((tn + a->n + nfns) * sizeof(*o));
	if (!o)
		return -ENOMEM;
	for (size_t r = 0; r < nfns; r++) {
		const struct profd_unwind_row *prev = NULL;

		for (; i < tn && t[i].pc < fns[r].start; i++)
			out_push(o, &n, t[i].pc, &t[i]);
		if (i)
			prev = &t[i - 1];
		for (; i < tn && t[i].pc < fns[r].end; i++)
			prev = &t[i];
		for (; j < a->n && a->v[j].pc < fns[r].end; j++)
			if (a->v[j].pc >= fns[r].start)
				out_push(o, &n, a->v[j].pc, &a->v[j].row);
		/* At the function's end the rule the CFI gave there holds again. */
		if (i == tn || t[i].pc != fns[r].end)
			out_push(o, &n, fns[r].end, prev ? prev : &gap);
	}
	for (; i < tn; i++)
		out_push(o, &n, t[i].pc, &t[i]);
	*out = o;
	*nout = n;
	return 0;
}

/*
 * The n bytes at file offset off into *buf (grown as needed, the caller frees it). Returns the
 * bytes or NULL: a short read (the file changed) leaves the function out.
 */
static const uint8_t *read_code(int fd, uint64_t off, size_t n, uint8_t **buf, size_t *cap)
{
	if (n > *cap) {
		uint8_t *b = realloc(*buf, n);

		if (!b)
			return NULL;
		*buf = b;
		*cap = n;
	}
	return fd_pread_full(fd, *buf, n, off) == (long)n ? *buf : NULL;
}

int cfi_insn_add(Elf *elf, int fd, Elf *debug, const struct cfi_fde *fdes, size_t nfdes,
		 struct rows *a, struct cfi_fde **ranges, size_t *nranges, struct cfi_stats *st)
{
	uint8_t *code = NULL;
	size_t code_cap = 0;
	struct fn_list l = {0};
	struct rows tmp = {0};
	uint64_t budget = INSN_BUDGET;
	size_t done = 0;
	cs_insn *in = NULL;
	csh h = 0;
	int err;

	*ranges = NULL;
	*nranges = 0;
	err = uncovered_syms(elf, fd, fdes, nfdes, &l);
	if (!err)
		err = uncovered_syms(debug, -1, fdes, nfdes, &l);
	if (err || !l.n)
		goto out;
	fn_bounds(elf, &l, fdes, nfdes);
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK) {
		h = 0;
		goto out; /* no disassembler: the table stays as the CFI made it */
	}
	cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
	in = cs_malloc(h);
	if (!in)
		goto out;
	for (size_t i = 0; i < l.n; i++) {
		struct fn f = l.v[i];
		const uint8_t *bytes;
		GElf_Shdr sh;
		Elf_Data *d;
		int r;

		if (f.end - f.start > FUNC_MAX || !budget || !code_scn(elf, f.start, &sh)) {
			st->insn_skipped++;
			continue;
		}
		/*
		 * Only the function's bytes, not the whole (huge) .text; from fd into one buffer
		 * where the file is at hand, as libelf keeps each chunk it reads until elf_end().
		 */
		if (fd >= 0) {
			bytes = read_code(fd, sh.sh_offset + (f.start - sh.sh_addr),
					  f.end - f.start, &code, &code_cap);
		} else {
			d = elf_getdata_rawchunk(elf,
						 (int64_t)(sh.sh_offset + (f.start - sh.sh_addr)),
						 f.end - f.start, ELF_T_BYTE);
			bytes = d && d->d_buf && d->d_size == f.end - f.start ? d->d_buf : NULL;
		}
		if (!bytes) {
			st->insn_skipped++;
			continue;
		}
		r = analyse(h, in, bytes, f.end - f.start, f.start, &tmp, &budget, st);
		if (r < 0 || GROW(a->v, a->cap, a->n + tmp.n)) {
			err = r < 0 ? r : -ENOMEM;
			goto out;
		}
		/* Appended as they are: merged with the previous function's, a first row would go.
		 */
		memcpy(a->v + a->n, tmp.v, tmp.n * sizeof(*tmp.v));
		a->n += tmp.n;
		st->insn_functions++;
		st->insn_partial += r;
		l.v[done++] = f;
	}
	if (done) {
		*ranges = malloc(done * sizeof(**ranges));
		if (!*ranges) {
			err = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < done; i++)
			(*ranges)[i] =
			    (struct cfi_fde){(uint32_t)l.v[i].start, (uint32_t)l.v[i].end};
		*nranges = done;
	}
out:
	if (in)
		cs_free(in, 1);
	if (h)
		cs_close(&h);
	free(l.v);
	free(tmp.v);
	free(code);
	return err;
}
