// SPDX-License-Identifier: BSD-2-Clause
/*
 * The rules of one CFA machine state (cfi.c) to the row kind the BPF walker applies (bpf/abi.h,
 * docs/unwinding.md): rsp- and rbp-based CFAs, the PLT and dereferencing expressions, GCC's
 * realigned frames (DRAP); what the walker cannot apply becomes INVALID.
 */
#include "cfi_priv.h"

static const struct profd_unwind_row row_invalid = {.kind = PROFD_UW_INVALID};

/* A byte offset in units of 8 within [lo, hi]. */
static bool units8(int64_t off, int64_t lo, int64_t hi, int64_t *out)
{
	if (off % 8)
		return false;
	*out = off / 8;
	return *out >= lo && *out <= hi;
}

/* rbp's save slot, CFA + 8 * *slot; 0 unchanged. false: a rule the walker cannot apply. */
static bool rbp_slot(const struct rule *r, int8_t *slot)
{
	int64_t u;

	switch (r->type) {
	case R_UNSET:
	case R_SAME:
	case R_UNDEF:
		*slot = 0;
		return true;
	case R_OFFSET:
		if (!units8(r->off, INT8_MIN, INT8_MAX, &u) || u == 0)
			return false;
		*slot = (int8_t)u;
		return true;
	default:
		return false;
	}
}

/*
 * .plt's CFA: rsp + 8 + (((rip & 15) >= T) << 3), the bytes gcc and ld emit for T 10 or 11:
 * breg7 8; breg16 0; lit15; and; litT; ge; lit3; shl; plus.
 */
static bool plt_threshold(const uint8_t *e, uint64_t len, uint8_t *thr)
{
	static const uint8_t pat[] = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a,
				      0x00, 0x2a, 0x33, 0x24, 0x22};

	if (len != sizeof(pat))
		return false;
	for (size_t i = 0; i < sizeof(pat); i++)
		if (i != 6 && e[i] != pat[i])
			return false;
	if (e[6] != 0x30 + 10 && e[6] != 0x30 + 11)
		return false;
	*thr = e[6] - 0x30;
	return true;
}

/* breg7 N; deref[; plus_uconst M]: CFA = *(rsp + N) + M. */
static bool deref_expr(const uint8_t *e, uint64_t len, int64_t *n, int64_t *m)
{
	struct cur c = {e, e + len, false};

	if (cfi_rd_u8(&c) != 0x77)
		return false;
	*n = cfi_rd_sleb(&c);
	if (cfi_rd_u8(&c) != 0x06)
		return false;
	*m = 0;
	if (c.p < c.end) {
		uint64_t v;

		if (cfi_rd_u8(&c) != 0x23)
			return false;
		v = cfi_rd_uleb(&c);
		if (v > INT32_MAX)
			return false;
		*m = (int64_t)v;
	}
	return !c.bad && c.p == c.end;
}

/* breg6 N[; deref]: rbp + N, read from memory when deref. */
static bool rbp_expr(const uint8_t *e, uint64_t len, bool deref, int64_t *n)
{
	struct cur c = {e, e + len, false};

	if (!e || cfi_rd_u8(&c) != 0x76)
		return false;
	*n = cfi_rd_sleb(&c);
	if (deref && cfi_rd_u8(&c) != 0x06)
		return false;
	return !c.bad && c.p == c.end;
}

/*
 * GCC's dynamically realigned frames (DRAP): CFA = *(rbp + N), the pointer to the incoming
 * arguments that the prologue saved below the new frame; rbp saved at rbp + M
 * (DW_CFA_expression r6: breg6 M), or unchanged. See docs/unwinding.md.
 */
static bool drap_row(const struct vm_state *st, struct profd_unwind_row *row)
{
	int64_t n, m = 0;
	bool saved = false;

	if (!rbp_expr(st->expr, st->expr_len, true, &n) || !units8(n, INT8_MIN, INT8_MAX, &n))
		return false;
	switch (st->rbp.type) {
	case R_UNSET:
	case R_SAME:
	case R_UNDEF:
		break;
	case R_EXPR:
		if (!rbp_expr(st->rbp.expr, st->rbp.expr_len, false, &m) ||
		    !units8(m, INT8_MIN, INT8_MAX, &m))
			return false;
		saved = true;
		break;
	default:
		return false;
	}
	*row = (struct profd_unwind_row){
	    .kind = PROFD_UW_DRAP,
	    .reg = (int8_t)n,
	    .cfa = (uint16_t)((uint8_t)(int8_t)m | (saved ? PROFD_UW_DRAP_SAVED : 0))};
	return true;
}

/*
 * The few instructions of a DRAP frame around its body: the CFA is the DRAP register (r10 + 0)
 * or rsp + 8 at the ret, and rbp's rule still says "at rbp + M". GCC never withdraws that rule
 * after the epilogue's pop %rbp, so at the ret it is stale; there, and wherever the CFA is not
 * rbp-based, rbp is taken as unchanged. It is wrong only between the prologue's mov %rsp,%rbp
 * and the push of the DRAP register (and the matching pops): the caller's own CFI then goes on,
 * and a caller that needs rbp stops there (bad frame).
 */
static bool drap_edge(const struct vm_state *st, int8_t *slot)
{
	int64_t m;

	if (st->rbp.type != R_EXPR || !rbp_expr(st->rbp.expr, st->rbp.expr_len, false, &m) ||
	    st->cfa_type != CFA_REGOFF || st->cfa_reg == REG_RBP)
		return false;
	*slot = 0;
	return true;
}

/* The row for one state (a signal FDE is handled by the caller). */
struct profd_unwind_row cfi_rule_row(const struct vm_state *st)
{
	struct profd_unwind_row row = {0};
	int64_t u, n, m;
	int8_t slot;
	uint8_t thr;

	if (st->ra.type == R_UNDEF)
		return (struct profd_unwind_row){.kind = PROFD_UW_STOP};
	if (st->ra.type == R_REG) {
		/* __vfork: the return address waits in a register, the CFA is rsp + N. */
		if (st->cfa_type != CFA_REGOFF || st->cfa_reg != REG_RSP || st->ra.reg > REG_RIP ||
		    !units8(st->cfa_off, 0, UINT16_MAX, &u) || !rbp_slot(&st->rbp, &slot) || slot)
			return row_invalid;
		return (struct profd_unwind_row){
		    .kind = PROFD_UW_RA_REG, .reg = (int8_t)st->ra.reg, .cfa = (uint16_t)u};
	}
	if (st->ra.type != R_OFFSET || st->ra.off != -8)
		return row_invalid;
	if (st->cfa_type == CFA_EXPR && drap_row(st, &row))
		return row;
	if (!rbp_slot(&st->rbp, &slot) && !drap_edge(st, &slot))
		return row_invalid;
	if (st->cfa_type == CFA_REGOFF) {
		if (st->cfa_reg == REG_RSP || st->cfa_reg == REG_RBP) {
			if (!units8(st->cfa_off, 0, UINT16_MAX, &u))
				return row_invalid;
			row.kind = st->cfa_reg == REG_RSP ? PROFD_UW_RSP : PROFD_UW_RBP;
			row.reg = slot;
			row.cfa = (uint16_t)u;
			return row;
		}
		if (st->cfa_reg > REG_RIP || !units8(st->cfa_off, 0, UINT8_MAX, &u))
			return row_invalid;
		row.kind = PROFD_UW_CFA_REG;
		row.reg = (int8_t)st->cfa_reg;
		row.cfa = (uint16_t)((uint64_t)u | (uint64_t)(uint8_t)slot << 8);
		return row;
	}
	if (st->cfa_type != CFA_EXPR)
		return row_invalid;
	if (plt_threshold(st->expr, st->expr_len, &thr)) {
		if (slot)
			return row_invalid;
		return (struct profd_unwind_row){.kind = PROFD_UW_PLT, .reg = (int8_t)thr};
	}
	if (deref_expr(st->expr, st->expr_len, &n, &m)) {
		if (!units8(n, 0, UINT8_MAX, &n) || !units8(m, INT8_MIN, INT8_MAX, &m))
			return row_invalid;
		row.kind = PROFD_UW_DEREF;
		row.reg = slot;
		row.cfa = (uint16_t)((uint64_t)n | (uint64_t)(uint8_t)(int8_t)m << 8);
		return row;
	}
	return row_invalid;
}
