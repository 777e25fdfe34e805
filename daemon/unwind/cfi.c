// SPDX-License-Identifier: BSD-2-Clause
/*
 * CFI to compact unwind rows. Two passes: the FDEs of .eh_frame (and of .debug_frame for ranges
 * .eh_frame lacks) are collected and sorted by start; then each one's CIE and CFA program run
 * on a small machine that tracks only what the BPF walker uses (the CFA, rbp and the return
 * address), and each state maps to one row kind (cfi_rule.c, docs/unwinding.md). Functions
 * without an FDE get rows from their machine code (cfi_insn.c).
 *
 * Every read goes through struct cur, which stops at its end: lengths, offsets and CIE
 * pointers from the file never reach memory outside their section.
 */
#include "cfi.h"
#include "cfi_priv.h"

#include "grow.h"

#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Saved states one FDE may stack with DW_CFA_remember_state. */
#define STATE_STACK_MAX 32
/* Next FDE more than this many bytes after one's end: a GAP row at the end (alignment pads). */
#define GAP_MIN 16
/* FDEs of one file at most (the biggest libraries have ~10^5). */
#define FDES_MAX (8u << 20)

/* --- the CFA machine -------------------------------------------------------------------------- */

struct vm {
	const struct cie *cie;
	const struct frame_sec *sec;
	struct vm_state st, init;
	struct vm_state stack[STATE_STACK_MAX];
	unsigned int depth;
	uint64_t loc, end;
};

static struct rule *vm_rule(struct vm *m, uint64_t reg)
{
	if (reg == REG_RBP)
		return &m->st.rbp;
	if (reg == m->cie->ra)
		return &m->st.ra;
	return NULL; /* a register the walker does not restore */
}

static void set_rule(struct vm *m, uint64_t reg, uint8_t type, int64_t off, uint64_t r2)
{
	struct rule *r = vm_rule(m, reg);

	if (r)
		*r = (struct rule){type, off, r2, NULL, 0};
}

static bool mul_ok(int64_t a, int64_t b, int64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

static int vm_emit(struct rows *out, uint64_t pc, const struct profd_unwind_row *row);

/*
 * Run a CFA program. init: the CIE's instructions (no rows, no location). Rows go to out (NULL
 * for the CIE). Returns 0 or -EINVAL (an op the machine does not know or a malformed one),
 * -ENOMEM.
 */
static int vm_run(struct vm *m, struct cur c, struct rows *out)
{
	struct profd_unwind_row row;
	int64_t soff;
	uint64_t reg, v, delta;
	struct rule *r;
	int err;

	while (c.p < c.end) {
		uint8_t op = cfi_rd_u8(&c);
		uint8_t low = op & 0x3f;

		delta = 0;
		switch (op & 0xc0) {
		case 0x40: /* advance_loc */
			delta = low;
			goto advance;
		case 0x80: /* offset */
			if (!mul_ok((int64_t)cfi_rd_uleb(&c), m->cie->data_align, &soff))
				return -EINVAL;
			set_rule(m, low, R_OFFSET, soff, 0);
			continue;
		case 0xc0: /* restore */
			reg = low;
			goto restore;
		}
		switch (op) {
		case 0x00: /* nop */
			break;
		case 0x01: /* set_loc */
			if (!out || !cfi_rd_enc(&c, m->cie->fde_enc, m->sec, true, &v) ||
			    v < m->loc)
				return -EINVAL;
			delta = 0;
			if (m->loc < m->end) {
				row = cfi_rule_row(&m->st);
				err = vm_emit(out, m->loc, &row);
				if (err)
					return err;
			}
			m->loc = v;
			break;
		case 0x02: /* advance_loc1 */
			delta = cfi_rd_u(&c, 1);
			goto advance;
		case 0x03:
			delta = cfi_rd_u(&c, 2);
			goto advance;
		case 0x04:
			delta = cfi_rd_u(&c, 4);
			goto advance;
		case 0x1d: /* MIPS_advance_loc8 (a GNU extension) */
			delta = cfi_rd_u(&c, 8);
			goto advance;
		case 0x05: /* offset_extended */
			reg = cfi_rd_uleb(&c);
			if (!mul_ok((int64_t)cfi_rd_uleb(&c), m->cie->data_align, &soff))
				return -EINVAL;
			set_rule(m, reg, R_OFFSET, soff, 0);
			break;
		case 0x06: /* restore_extended */
			reg = cfi_rd_uleb(&c);
			goto restore;
		case 0x07: /* undefined */
			set_rule(m, cfi_rd_uleb(&c), R_UNDEF, 0, 0);
			break;
		case 0x08: /* same_value */
			set_rule(m, cfi_rd_uleb(&c), R_SAME, 0, 0);
			break;
		case 0x09: /* register */
			reg = cfi_rd_uleb(&c);
			set_rule(m, reg, R_REG, 0, cfi_rd_uleb(&c));
			break;
		case 0x0a: /* remember_state */
			if (m->depth >= STATE_STACK_MAX)
				return -EINVAL;
			m->stack[m->depth++] = m->st;
			break;
		case 0x0b: /* restore_state: the CFA too, as GCC's epilogues expect */
			if (!m->depth)
				return -EINVAL;
			m->st = m->stack[--m->depth];
			break;
		case 0x0c: /* def_cfa */
			m->st.cfa_type = CFA_REGOFF;
			m->st.cfa_reg = cfi_rd_uleb(&c);
			v = cfi_rd_uleb(&c);
			m->st.cfa_off = v > INT64_MAX ? 0 : (int64_t)v;
			if (v > INT64_MAX)
				m->st.cfa_type = CFA_BAD;
			break;
		case 0x12: /* def_cfa_sf */
			m->st.cfa_type = CFA_REGOFF;
			m->st.cfa_reg = cfi_rd_uleb(&c);
			if (!mul_ok(cfi_rd_sleb(&c), m->cie->data_align, &m->st.cfa_off))
				m->st.cfa_type = CFA_BAD;
			break;
		case 0x0d: /* def_cfa_register */
			m->st.cfa_reg = cfi_rd_uleb(&c);
			if (m->st.cfa_type != CFA_REGOFF)
				m->st.cfa_type = CFA_BAD;
			break;
		case 0x0e: /* def_cfa_offset */
			v = cfi_rd_uleb(&c);
			m->st.cfa_off = (int64_t)v;
			if (m->st.cfa_type != CFA_REGOFF || v > INT64_MAX)
				m->st.cfa_type = CFA_BAD;
			break;
		case 0x13: /* def_cfa_offset_sf */
			if (!mul_ok(cfi_rd_sleb(&c), m->cie->data_align, &m->st.cfa_off) ||
			    m->st.cfa_type != CFA_REGOFF)
				m->st.cfa_type = CFA_BAD;
			break;
		case 0x0f: /* def_cfa_expression */
			v = cfi_rd_uleb(&c);
			m->st.cfa_type = CFA_EXPR;
			m->st.expr = c.p;
			m->st.expr_len = v;
			cfi_skip(&c, v);
			break;
		case 0x10: /* expression */
		case 0x16: /* val_expression */
			reg = cfi_rd_uleb(&c);
			v = cfi_rd_uleb(&c);
			set_rule(m, reg, op == 0x10 ? R_EXPR : R_VAL_EXPR, 0, 0);
			/* Kept for the shapes cfi_rule_row() knows (GCC's realigned frames). */
			r = vm_rule(m, reg);
			if (r && op == 0x10 && v <= (uint64_t)(c.end - c.p)) {
				r->expr = c.p;
				r->expr_len = v;
			}
			cfi_skip(&c, v);
			break;
		case 0x11: /* offset_extended_sf */
			reg = cfi_rd_uleb(&c);
			if (!mul_ok(cfi_rd_sleb(&c), m->cie->data_align, &soff))
				return -EINVAL;
			set_rule(m, reg, R_OFFSET, soff, 0);
			break;
		case 0x14: /* val_offset */
			reg = cfi_rd_uleb(&c);
			if (!mul_ok((int64_t)cfi_rd_uleb(&c), m->cie->data_align, &soff))
				return -EINVAL;
			set_rule(m, reg, R_VAL_OFFSET, soff, 0);
			break;
		case 0x15: /* val_offset_sf */
			reg = cfi_rd_uleb(&c);
			if (!mul_ok(cfi_rd_sleb(&c), m->cie->data_align, &soff))
				return -EINVAL;
			set_rule(m, reg, R_VAL_OFFSET, soff, 0);
			break;
		case 0x2e: /* GNU_args_size: the walker does not need it */
			cfi_rd_uleb(&c);
			break;
		case 0x2f: /* GNU_negative_offset_extended */
			reg = cfi_rd_uleb(&c);
			if (!mul_ok(-(int64_t)cfi_rd_uleb(&c), m->cie->data_align, &soff))
				return -EINVAL;
			set_rule(m, reg, R_OFFSET, soff, 0);
			break;
		default:
			return -EINVAL;
		}
		if (c.bad)
			return -EINVAL;
		continue;
advance:
		if (c.bad || !out)
			return -EINVAL; /* a CIE has no location */
		if (m->loc < m->end) {
			row = cfi_rule_row(&m->st);
			err = vm_emit(out, m->loc, &row);
			if (err)
				return err;
		}
		if (__builtin_mul_overflow(delta, m->cie->code_align, &delta) ||
		    __builtin_add_overflow(m->loc, delta, &m->loc))
			return -EINVAL;
		continue;
restore:
		if (c.bad)
			return -EINVAL;
		r = vm_rule(m, reg);
		if (r)
			*r = r == &m->st.rbp ? m->init.rbp : m->init.ra;
		continue;
	}
	return c.bad ? -EINVAL : 0;
}

/* --- rows ---------------------------------------------------------------------------------- */

static const struct profd_unwind_row row_invalid = {.kind = PROFD_UW_INVALID};

static bool row_eq(const struct profd_unwind_row *a, const struct profd_unwind_row *b)
{
	return a->kind == b->kind && a->reg == b->reg && a->cfa == b->cfa;
}

/* Append a row to one FDE's rows: a row at the pc of the last one replaces it. */
static int vm_emit(struct rows *out, uint64_t pc, const struct profd_unwind_row *row)
{
	if (out->n && out->v[out->n - 1].pc == pc) {
		out->v[out->n - 1].row = *row;
		return 0;
	}
	if (GROW(out->v, out->cap, out->n + 1))
		return -ENOMEM;
	out->v[out->n++] = (struct prow){pc, *row};
	return 0;
}

int cfi_rows_push(struct rows *t, uint64_t pc, const struct profd_unwind_row *row)
{
	if (t->n && t->v[t->n - 1].pc == pc) {
		t->n--;
		if (t->n && row_eq(&t->v[t->n - 1].row, row))
			return 0;
		t->v[t->n++].row = *row;
		return 0;
	}
	if (t->n && row_eq(&t->v[t->n - 1].row, row))
		return 0;
	if (GROW(t->v, t->cap, t->n + 1))
		return -ENOMEM;
	t->v[t->n++] = (struct prow){pc, *row};
	return 0;
}

/* --- pass one: the FDEs ----------------------------------------------------------------------- */

struct fde_list {
	struct fde_ref *v;
	size_t n, cap;
};

static int fde_ref_cmp(const void *pa, const void *pb)
{
	const struct fde_ref *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* An .eh_frame FDE covering [start, end)? eh sorted by start, FDEs not nested. */
static bool covered(const struct fde_ref *eh, size_t n, uint64_t start)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (eh[mid].start <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && start < eh[lo - 1].end;
}

/*
 * Collect the FDEs of one section into l. Returns 0, -ERANGE or -ENOMEM; damaged entries are
 * counted in st.
 */
static int collect(const struct frame_sec *s, struct fde_list *l, size_t n_eh, struct cfi_stats *st)
{
	size_t pos = 0;
	struct entry e;
	struct cie cie;
	struct cur insns;
	uint64_t start, end;
	int r, err;

	while ((r = cfi_entry_read(s, &pos, &e)) != 0) {
		if (r < 0) {
			st->fdes_invalid++; /* the rest of the section cannot be delimited */
			break;
		}
		if (r == 2)
			continue;
		if (cfi_entry_is_cie(s, &e)) {
			st->cies++;
			continue;
		}
		err = cfi_fde_parse(s, &e, &cie, &start, &end, &insns);
		if (err == -ENOENT) {
			st->fdes_invalid++;
			continue;
		}
		if (start == end)
			continue;
		if (!s->eh && covered(l->v, n_eh, start))
			continue;
		if (end > UINT32_MAX)
			return -ERANGE;
		if (l->n >= FDES_MAX)
			return -ERANGE;
		if (GROW(l->v, l->cap, l->n + 1))
			return -ENOMEM;
		l->v[l->n] = (struct fde_ref){start, end, s, e.off, (uint32_t)l->n, err != 0};
		l->n++;
		if (!s->eh)
			st->fdes_debug_frame++;
	}
	return 0;
}

static int collect_all(Elf *elf, Elf *debug, struct sources *src, struct fde_list *l,
		       struct cfi_stats *st)
{
	size_t n_eh = 0;
	int err;

	memset(src, 0, sizeof(*src));
	cfi_find_sources(elf, false, src);
	cfi_find_sources(debug, true, src);
	if (!src->n)
		return -ENOENT;
	for (size_t i = 0; i < src->n; i++) {
		if (!src->sec[i].eh && l->n > n_eh) {
			/* Sort what .eh_frame gave so .debug_frame can be checked against it. */
			qsort(l->v, l->n, sizeof(*l->v), fde_ref_cmp);
			n_eh = l->n;
		}
		err = collect(&src->sec[i], l, n_eh, st);
		if (err)
			return err;
	}
	if (!l->n)
		return st->fdes_invalid ? -EINVAL : -ENOENT; /* sections with nothing in them */
	qsort(l->v, l->n, sizeof(*l->v), fde_ref_cmp);
	return 0;
}

static int fdes_out(const struct fde_list *l, struct cfi_fde **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!l->n)
		return 0;
	*out = malloc(l->n * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < l->n; i++)
		(*out)[i] = (struct cfi_fde){(uint32_t)l->v[i].start, (uint32_t)l->v[i].end};
	*n = l->n;
	return 0;
}

/* --- pass two: the rows ----------------------------------------------------------------------- */

/* Run one FDE's program into tmp. Returns 0, -EINVAL (unusable) or -ENOMEM. */
static int fde_rows(const struct fde_ref *f, struct rows *tmp, struct cfi_stats *st)
{
	const struct frame_sec *s = f->sec;
	struct vm *m;
	struct cie cie;
	struct entry e;
	struct cur insns;
	size_t pos = f->off;
	uint64_t start, end;
	struct profd_unwind_row row;
	int err;

	tmp->n = 0;
	if (f->bad || cfi_entry_read(s, &pos, &e) != 1 ||
	    cfi_fde_parse(s, &e, &cie, &start, &end, &insns))
		return -EINVAL;
	if (cie.signal) {
		row = (struct profd_unwind_row){.kind = PROFD_UW_SIGNAL};
		return vm_emit(tmp, start, &row);
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->cie = &cie;
	m->sec = s;
	m->st.cfa_type = CFA_BAD;
	err = vm_run(m, (struct cur){cie.insns, cie.insns_end, false}, NULL);
	if (err)
		goto out;
	m->init = m->st;
	m->depth = 0;
	m->loc = start;
	m->end = end;
	err = vm_run(m, insns, tmp);
	if (err)
		goto out;
	if (m->loc < end) {
		row = cfi_rule_row(&m->st);
		err = vm_emit(tmp, m->loc, &row);
	}
out:
	free(m);
	(void)st;
	return err;
}

static int build_rows(const struct fde_list *l, struct rows *t, struct cfi_stats *st)
{
	struct rows tmp = {0};
	int err = 0;

	for (size_t i = 0; i < l->n; i++) {
		const struct fde_ref *f = &l->v[i];
		uint64_t eff_end = f->end;
		bool gap = true;

		if (i + 1 < l->n) {
			uint64_t next = l->v[i + 1].start;

			if (next < eff_end)
				eff_end = next;
			gap = next > f->end && next - f->end >= GAP_MIN;
		}
		if (eff_end <= f->start)
			continue; /* a later FDE at the same start wins */
		st->fdes++;
		err = fde_rows(f, &tmp, st);
		if (err == -ENOMEM)
			goto out;
		if (err || !tmp.n || tmp.v[0].pc != f->start) {
			/* The whole range: no rule of this FDE can be trusted. */
			st->fdes_invalid++;
			tmp.n = 0;
			err = vm_emit(&tmp, f->start, &row_invalid);
			if (err)
				goto out;
		}
		for (size_t k = 0; k < tmp.n && tmp.v[k].pc < eff_end; k++) {
			err = cfi_rows_push(t, tmp.v[k].pc, &tmp.v[k].row);
			if (err)
				goto out;
		}
		if (gap) {
			static const struct profd_unwind_row g = {.kind = PROFD_UW_GAP};

			err = cfi_rows_push(t, f->end, &g);
			if (err)
				goto out;
		}
	}
out:
	free(tmp.v);
	return err;
}

/* --- API -------------------------------------------------------------------------------------- */

int cfi_fdes(Elf *elf, Elf *debug, struct cfi_fde **out, size_t *n)
{
	struct cfi_stats st = {0};
	struct fde_list l = {0};
	struct sources src;
	int err;

	*out = NULL;
	*n = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	err = collect_all(elf, debug, &src, &l, &st);
	if (!err)
		err = fdes_out(&l, out, n);
	free(l.v);
	return err;
}

/*
 * Hands t's rows over as the table, compacted in place from 16-byte rows in the making to the
 * 8-byte rows (row i is written at 8i, below the 16i it is read from): a file's rows are never
 * held twice at 16 bytes (libtorch_cpu.so's 2.3 million rows are 37 MB so, 19 MB compacted).
 */
static void rows_hand_over(struct rows *t, struct profd_unwind_row **out, size_t *nout)
{
	struct profd_unwind_row *o = (struct profd_unwind_row *)t->v, *shrunk;
	size_t n = t->n;

	for (size_t i = 0; i < n; i++) {
		struct profd_unwind_row r = t->v[i].row;

		r.pc = (uint32_t)t->v[i].pc;
		o[i] = r;
	}
	t->v = NULL;
	t->n = t->cap = 0;
	if (!n) {
		free(o);
		o = NULL;
	} else {
		shrunk = realloc(o, n * sizeof(*o));
		if (shrunk)
			o = shrunk;
	}
	*out = o;
	*nout = n;
}

int cfi_table__build(Elf *elf, Elf *debug, struct cfi_table *out)
{
	return cfi_table__build_fd(elf, -1, debug, out);
}

int cfi_table__build_fd(Elf *elf, int fd, Elf *debug, struct cfi_table *out)
{
	struct fde_list l = {0};
	struct rows t = {0}, a = {0};
	struct sources src;
	int err;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	err = collect_all(elf, debug, &src, &l, &out->stats);
	if (err && err != -ENOENT)
		goto out;
	if (!err) {
		err = build_rows(&l, &t, &out->stats);
		if (err)
			goto out;
		err = fdes_out(&l, &out->fdes, &out->nfdes);
		if (err)
			goto out;
	}
	/* The FDE list is done with (40 bytes an FDE, 14 MB for libtorch_cpu.so): gone before the
	 * rows peak. */
	free(l.v);
	l.v = NULL;
	/* Functions without CFI, from their code: also in a file with no CFI at all. */
	err = cfi_insn_add(elf, fd, debug, out->fdes, out->nfdes, &a, &out->insn, &out->ninsn,
			   &out->stats);
	if (err)
		goto out;
	rows_hand_over(&t, &out->rows, &out->nrows);
	if (out->ninsn) {
		struct profd_unwind_row *cfi_rows = out->rows;

		/* Merged from the compacted rows: 8 bytes a row held twice, not 16 + 8. */
		err = cfi_insn_merge(cfi_rows, out->nrows, &a, out->insn, out->ninsn, &out->rows,
				     &out->nrows);
		free(cfi_rows);
		if (err)
			goto out;
	}
	if (!out->nrows) {
		err = -ENOENT;
		goto out;
	}
	for (size_t i = 0; i < out->nrows; i++) {
		out->stats.rows_invalid += out->rows[i].kind == PROFD_UW_INVALID;
		out->stats.insn_rows += !!cfi_fde_find(out->insn, out->ninsn, out->rows[i].pc);
	}
	out->stats.rows = (uint32_t)out->nrows;
out:
	free(l.v);
	free(t.v);
	free(a.v);
	if (err) {
		struct cfi_stats st = out->stats;

		cfi_table__fini(out);
		out->stats = st;
	}
	return err;
}

void cfi_table__fini(struct cfi_table *t)
{
	free(t->rows);
	free(t->fdes);
	free(t->insn);
	memset(t, 0, sizeof(*t));
}

const struct cfi_fde *cfi_fde_find(const struct cfi_fde *fdes, size_t n, uint64_t vaddr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (fdes[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && vaddr < fdes[lo - 1].end)
		return &fdes[lo - 1];
	return NULL;
}

const char *cfi_kind_name(unsigned int kind)
{
	static const char *const names[] = {
	    [PROFD_UW_INVALID] = "INVALID", [PROFD_UW_RSP] = "RSP",
	    [PROFD_UW_RBP] = "RBP",	    [PROFD_UW_PLT] = "PLT",
	    [PROFD_UW_SIGNAL] = "SIGNAL",   [PROFD_UW_STOP] = "STOP",
	    [PROFD_UW_CFA_REG] = "CFA_REG", [PROFD_UW_RA_REG] = "RA_REG",
	    [PROFD_UW_DEREF] = "DEREF",	    [PROFD_UW_GAP] = "GAP",
	    [PROFD_UW_DRAP] = "DRAP",
	};

	return kind < sizeof(names) / sizeof(names[0]) && names[kind] ? names[kind] : "?";
}
