/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * User stacks from CFI, included by sample.bpf.c. The daemon describes each sampled process's
 * executable mappings (unwind_procs) and loads one table of rows per ELF file (unwind_tables,
 * shared by every process that maps the file; rows built by daemon/unwind/cfi.c from .eh_frame
 * and .debug_frame). A walk starts from the registers the thread had in user mode and steps one
 * frame per bpf_loop iteration: find the mapping of the pc, the last row at or below its ELF
 * address, compute the CFA, read the return address (and rbp where the row says it was saved).
 * Code without CFI (JIT code, anonymous memory, gaps between FDEs) is stepped with frame
 * pointers, with checks; CFI takes over again in the next frame that has it. A process the
 * daemon has not described yet gets the kernel's frame-pointer walk, flagged as such.
 * Every walk says how it ended (enum profd_unwind_end), counted per reason.
 */
#ifndef PROFD_UNWIND_BPF_H
#define PROFD_UNWIND_BPF_H

/* Set before load: false keeps the frame-pointer walk for every process. */
const volatile bool unwind_cfi = true;
/*
 * Set before load with unwind_procs' value size: the slots of a description's maps[] less one,
 * a power of two less one (PROFD_UNWIND_PROC_SIZE(unwind_maps_mask + 1) bytes). A read-only
 * global is a known number to the verifier: an index masked with it stays within the value.
 */
const volatile __u32 unwind_maps_mask = PROFD_UNWIND_MAX_MAPS - 1;

struct unwind_rows {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* each file's array has its own size */
	/* sizes, not types: clang emits only a forward declaration of a type seen this deep */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct profd_unwind_row));
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, PROFD_UNWIND_MAX_TABLES);
	__type(key, __u32);
	__array(values, struct unwind_rows);
} unwind_tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096); /* resized by the daemon before load */
	/* sizes, not types: the daemon sets the value's for --unwind-max-mappings before load */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, PROFD_UNWIND_PROC_SIZE(PROFD_UNWIND_MAX_MAPS));
} unwind_procs SEC(".maps");

/* DWARF register numbers of x86-64 (System V psABI, figure 3.36). */
enum {
	UW_RAX = 0,
	UW_RDX = 1,
	UW_RCX = 2,
	UW_RBX = 3,
	UW_RSI = 4,
	UW_RDI = 5,
	UW_RBP = 6,
	UW_RSP = 7,
	UW_R8 = 8,
	UW_RIP = 16,
	UW_NREGS = 17,
};

/* Stack words a scan out of JIT code reads with one bpf_probe_read_user (uw_scan_word). */
#define UW_SCAN_CHUNK 64

/* A walk in progress; one per scratch slot and CPU, like the sample it fills. */
struct uw_state {
	__u64 regs[UW_NREGS]; /* every register: valid while `exact` (frame 0, after a signal) */
	__u64 pc, sp, bp;
	__u64 ips[PROFD_MAX_STACK + 1]; /* one spare slot: indexes are masked with 127 */
	__u32 tgid;
	__u32 n;	 /* frames in ips */
	__u32 end;	 /* enum profd_unwind_end; 0 while walking */
	__u32 last_map;	 /* index of the mapping found last: the next pc is often in it */
	__u32 lo, hi;	 /* a binary search's bounds */
	__u8 exact;	 /* pc is the interrupted instruction, not a return address */
	__u8 in_syscall; /* frame 0 stopped in a system call: pc follows the syscall */
	__u16 scans;	 /* frames left by a stack scan (uw_step_nocfi): a heuristic was used */
	__u16 rejects;	 /* return addresses the scan passed over: no caller frame fit */
	__u8 __pad[2];
	__u64 words[UW_SCAN_CHUNK]; /* the stack words a scan (uw_step_nocfi) reads at once */
	__u8 chunk_ok;		    /* words holds the scan's current chunk */
	__u8 __pad2[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLOT__COUNT);
	__type(key, __u32);
	__type(value, struct uw_state);
} unwind_state_map SEC(".maps");

/*
 * Copy the user-mode registers of struct pt_regs lvalue r into st. The entry frame on the task's
 * kernel stack holds them whatever brought the thread into the kernel: a system call, a fault,
 * or the interrupt that runs the sampler (then they are the perf context's registers too).
 */
#define UW_LOAD_REGS(st, r)                                                                        \
	do {                                                                                       \
		(st)->regs[UW_RAX] = (r).ax;                                                       \
		(st)->regs[UW_RDX] = (r).dx;                                                       \
		(st)->regs[UW_RCX] = (r).cx;                                                       \
		(st)->regs[UW_RBX] = (r).bx;                                                       \
		(st)->regs[UW_RSI] = (r).si;                                                       \
		(st)->regs[UW_RDI] = (r).di;                                                       \
		(st)->regs[UW_RBP] = (r).bp;                                                       \
		(st)->regs[UW_RSP] = (r).sp;                                                       \
		(st)->regs[UW_R8 + 0] = (r).r8;                                                    \
		(st)->regs[UW_R8 + 1] = (r).r9;                                                    \
		(st)->regs[UW_R8 + 2] = (r).r10;                                                   \
		(st)->regs[UW_R8 + 3] = (r).r11;                                                   \
		(st)->regs[UW_R8 + 4] = (r).r12;                                                   \
		(st)->regs[UW_R8 + 5] = (r).r13;                                                   \
		(st)->regs[UW_R8 + 6] = (r).r14;                                                   \
		(st)->regs[UW_R8 + 7] = (r).r15;                                                   \
		(st)->regs[UW_RIP] = (r).ip;                                                       \
		(st)->in_syscall = (long)(r).orig_ax >= 0; /* or a fault's error code */           \
	} while (0)

static __always_inline struct uw_state *unwind_slot(__u32 slot)
{
	return bpf_map_lookup_elem(&unwind_state_map, &slot);
}

/*
 * The registers the current thread had when it left user mode: its entry frame on the kernel
 * stack. Returns the state of slot with them loaded, or NULL.
 */
static __always_inline struct uw_state *unwind_regs_task(__u32 slot)
{
	struct uw_state *st = unwind_slot(slot);
	struct pt_regs *r;

	if (!st)
		return NULL;
	r = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!r)
		return NULL;
	UW_LOAD_REGS(st, *r);
	return st;
}

/* What ended the walk, and stop the loop. */
static __always_inline long uw_stop(struct uw_state *st, __u32 why)
{
	st->end = why;
	return 1;
}

/*
 * The binary searches keep their bounds in st, a map value: the verifier then sees unknown
 * numbers, not constants, and the halving step converges at once.
 */

/* A binary search's halving steps run as bpf_loop callbacks: verified once, not unrolled. */
struct uw_search {
	struct uw_state *st;
	const struct profd_unwind_proc *proc; /* mappings: proc->maps[] by start */
	void *rows;			      /* rows: an inner array of unwind_tables */
	__u64 key;			      /* the pc (mappings) or ELF address (rows) */
	__u32 err;			      /* a row look-up failed */
};

static long uw_map_half(__u64 i, void *data)
{
	struct uw_search *c = data;
	struct uw_state *st = c->st;
	__u32 mid;

	if (st->lo >= st->hi)
		return 1;
	mid = ((st->lo + st->hi) / 2) & unwind_maps_mask;
	if (c->proc->maps[mid].start <= c->key)
		st->lo = mid + 1;
	else
		st->hi = mid;
	return 0;
}

static long uw_row_half(__u64 i, void *data)
{
	struct uw_search *c = data;
	struct uw_state *st = c->st;
	const struct profd_unwind_row *r;
	__u32 mid;

	if (st->lo >= st->hi)
		return 1;
	mid = (st->lo + st->hi) / 2;
	r = bpf_map_lookup_elem(c->rows, &mid);
	if (!r) {
		c->err = 1;
		return 1;
	}
	if (r->pc <= c->key)
		st->lo = mid + 1;
	else
		st->hi = mid;
	return 0;
}

/* The mapping of pc in proc, or NULL. */
static __always_inline const struct profd_unwind_map *
uw_find_map(struct uw_state *st, const struct profd_unwind_proc *proc, __u64 pc)
{
	struct uw_search c = {.st = st, .proc = proc, .key = pc};
	__u32 n = proc->nr_maps, i = st->last_map & unwind_maps_mask;

	if (n > unwind_maps_mask + 1)
		n = unwind_maps_mask + 1;
	if (i < n && proc->maps[i].start <= pc && pc < proc->maps[i].end)
		return &proc->maps[i];
	/* The first mapping that starts above pc; 14 halvings cover PROFD_UNWIND_MAPS_LIMIT. */
	st->lo = 0;
	st->hi = n;
	bpf_loop(14, uw_map_half, &c, 0);
	if (st->lo == 0 || st->lo > n)
		return NULL;
	i = (st->lo - 1) & unwind_maps_mask;
	if (pc >= proc->maps[i].end)
		return NULL;
	st->last_map = i;
	return &proc->maps[i];
}

/* The last row of rows[0 .. n) at or below addr, or NULL; 24 halvings cover under 2^24 rows. */
static __always_inline const struct profd_unwind_row *uw_find_row(struct uw_state *st, void *rows,
								  __u32 n, __u32 addr)
{
	struct uw_search c = {.st = st, .rows = rows, .key = addr};
	__u32 k;

	st->lo = 0;
	st->hi = n;
	bpf_loop(24, uw_row_half, &c, 0);
	if (c.err || st->lo == 0 || st->lo > n)
		return NULL;
	k = st->lo - 1;
	return bpf_map_lookup_elem(rows, &k);
}

/*
 * One frame-pointer step: rbp points at the saved rbp, the return address above it. The frame
 * must lie above the stack pointer, aligned, within 8 MiB; saved frames must grow up.
 */
static __always_inline long uw_step_fp(struct uw_state *st)
{
	__u64 fr[2];

	if (st->bp < st->sp || (st->bp & 7) || st->bp - st->sp > (8u << 20))
		return uw_stop(st, PROFD_UNWIND_BAD_FRAME);
	if (bpf_probe_read_user(fr, sizeof(fr), (void *)st->bp))
		return uw_stop(st, PROFD_UNWIND_READ_FAULT);
	if (fr[0] && fr[0] <= st->bp)
		return uw_stop(st, PROFD_UNWIND_BAD_FRAME);
	st->sp = st->bp + 16;
	st->bp = fr[0];
	st->pc = fr[1];
	st->exact = 0;
	if (!st->pc)
		return uw_stop(st, PROFD_UNWIND_BOTTOM);
	return 0;
}

/*
 * Leaving code without CFI whose frame pointer is no frame pointer (JIT kernels: oneDNN's Xbyak
 * preamble is `push rbp; mov rbp, rsp; push rbx; push r12-r15`, after which the kernel loads a
 * constant into ebp and uses it as a general register): scan the stack from rsp up for a word
 * that is a return address into code with CFI, and take it only when the caller's row at it can
 * be applied: the frame that row describes must end in a return address too. For a caller
 * whose CFA is rbp-based (oneDNN's C++ callers keep frame pointers) this needs the caller's
 * rbp, which the generated code saved: it is looked for among rbp's value at the scan's start
 * and the words just below the return address (the callee-saved pushes of the preamble).
 */
#define UW_SCAN_WORDS 256 /* 2 KiB of stack: a generated kernel's frame and spills */
#define UW_SCAN_SAVED 6	  /* words below a return address that may hold the caller's rbp */

struct uw_scan {
	struct uw_state *st;
	const struct profd_unwind_proc *proc;
	__u64 sp;    /* where the scan starts: the frame's rsp */
	__u64 lo_pc; /* the described mappings' span: most words fail this at once */
	__u64 hi_pc;
	__u64 bp0;  /* rbp when the scan started: the caller's, if the code left it alone */
	__u64 slot; /* the return address's slot, once found */
	__u64 ra;
	__u64 bp; /* the caller's rbp so found */
	/* the caller's row at a candidate: its CFA is rbp + 8 * cfa_rbp when cfa_rbp is set */
	__u64 cfa_rbp;
	__u64 lower; /* a candidate rbp lies at or above this */
};

/*
 * The length of a `call r/m64` (ff /2) from its ModRM byte and the byte after it (a SIB when
 * rm = 4), or 0 when the ModRM byte is no ff /2 (Intel SDM vol. 2, tables 2-2 and 2-3).
 */
static __always_inline __u32 uw_call_rm_len(__u8 modrm, __u8 sib)
{
	__u8 mod = modrm >> 6, rm = modrm & 7;

	if (((modrm >> 3) & 7) != 2)
		return 0;
	if (mod == 3)
		return 2;
	if (mod == 1)
		return rm == 4 ? 4 : 3;
	if (mod == 2)
		return rm == 4 ? 7 : 6;
	if (rm == 5)
		return 6; /* rip + disp32 */
	if (rm == 4)
		return (sib & 7) == 5 ? 7 : 3; /* SIB, with a disp32 when its base is 5 */
	return 2;
}

/*
 * Whether the code before ra ends with a call: an indirect one (ff /2 of 2 to 7 bytes, the
 * length checked from ModRM), or with direct too, e8 rel32.
 */
static __always_inline bool uw_after_call(__u64 ra, bool direct)
{
	__u8 b[8];

	if (bpf_probe_read_user(b, sizeof(b), (void *)(ra - 8)))
		return false;
	if (direct && b[3] == 0xe8)
		return true;
	/* b[8 - k] is the ff of a k-byte call: its ModRM byte and the one after it follow. */
	if (b[6] == 0xff && uw_call_rm_len(b[7], 0) == 2)
		return true;
	if (b[5] == 0xff && uw_call_rm_len(b[6], b[7]) == 3)
		return true;
	if (b[4] == 0xff && uw_call_rm_len(b[5], b[6]) == 4)
		return true;
	if (b[2] == 0xff && uw_call_rm_len(b[3], b[4]) == 6)
		return true;
	return b[1] == 0xff && uw_call_rm_len(b[2], b[3]) == 7;
}

/* Whether the word at p is a return address: in a described mapping, right after a call. */
static __always_inline bool uw_ra_at(struct uw_scan *c, __u64 p)
{
	__u64 w;

	if (bpf_probe_read_user(&w, sizeof(w), (void *)p))
		return false;
	if (w <= c->lo_pc || w > c->hi_pc)
		return false;
	return uw_find_map(c->st, c->proc, w - 1) && uw_after_call(w, true);
}

/* Whether bp can be the frame pointer of a frame whose stack pointer is at or below lower. */
static __always_inline bool uw_frame_above(__u64 bp, __u64 lower)
{
	return bp >= lower && !(bp & 7) && bp - lower <= (8u << 20);
}

/*
 * Candidate i for the caller's rbp: rbp at the scan's start (i = 0), else the word i below the
 * return address. Taken (stop) when the caller's rbp-based CFA it gives ends in a return address.
 */
static long uw_scan_bp(__u64 i, void *data)
{
	struct uw_scan *c = data;
	__u64 bp = c->bp0;

	if (i && bpf_probe_read_user(&bp, sizeof(bp), (void *)(c->slot - 8 * i)))
		return 1;
	if (!uw_frame_above(bp, c->lower) || !uw_ra_at(c, bp + 8 * c->cfa_rbp - 8))
		return 0;
	c->bp = bp;
	return 1;
}

/*
 * Whether the caller's row r at the return address in slot can be applied: its CFA (rsp-based:
 * from the slot; rbp-based: from a saved rbp found by uw_scan_bp) must hold a return address
 * below it. Sets c->bp to the caller's rbp (rbp-based), else leaves it at rbp's value.
 */
static __always_inline bool uw_scan_caller_ok(struct uw_scan *c, __u64 slot,
					      const struct profd_unwind_row *r)
{
	__u64 cfa;

	c->bp = c->bp0;
	switch (r->kind) {
	case PROFD_UW_RSP:
		cfa = slot + 8 + 8 * (__u64)r->cfa;
		return cfa > slot + 8 && uw_ra_at(c, cfa - 8);
	case PROFD_UW_RBP:
		if (!r->cfa)
			return false;
		c->slot = slot;
		c->cfa_rbp = r->cfa;
		c->lower = slot + 8;
		c->bp = 0;
		bpf_loop(UW_SCAN_SAVED + 1, uw_scan_bp, c, 0);
		return c->bp != 0;
	default:
		/* A caller's row after a call is rsp- or rbp-based (DRAP: rbp-based, unchecked). */
		return r->kind == PROFD_UW_DRAP;
	}
}

static long uw_scan_word(__u64 i, void *data)
{
	struct uw_scan *c = data;
	struct uw_state *st = c->st;
	const struct profd_unwind_map *m;
	const struct profd_unwind_row *r;
	__u64 slot = c->sp + 8 * i, w, addr;
	void *rows;

	/*
	 * One read per chunk of words, not per word: most words are data. A chunk that runs past
	 * the end of the stack's mapping cannot be read whole: its words are read one by one.
	 */
	if (!(i & (UW_SCAN_CHUNK - 1)))
		st->chunk_ok = !bpf_probe_read_user(st->words, sizeof(st->words), (void *)slot);
	if (!st->chunk_ok &&
	    bpf_probe_read_user(&st->words[i & (UW_SCAN_CHUNK - 1)], sizeof(w), (void *)slot))
		return 1; /* the end of the stack's mapping */
	w = st->words[i & (UW_SCAN_CHUNK - 1)];
	if (w <= c->lo_pc || w > c->hi_pc)
		return 0;
	m = uw_find_map(st, c->proc, w - 1);
	if (!m || m->table == PROFD_UNWIND_FP_ONLY)
		return 0;
	addr = w - 1 - m->bias;
	if (addr >> 32)
		return 0;
	rows = bpf_map_lookup_elem(&unwind_tables, &m->table);
	if (!rows)
		return 0;
	r = uw_find_row(st, rows, m->nrows, (__u32)addr);
	if (!r || r->kind == PROFD_UW_INVALID || r->kind == PROFD_UW_GAP)
		return 0;
	/*
	 * Compiled code reaches generated code through a pointer: a return address after a direct
	 * call is a stale one (a frame of an earlier call, left where the JIT frame is now).
	 */
	if (!uw_after_call(w, false))
		return 0;
	if (!uw_scan_caller_ok(c, slot, r)) {
		st->rejects++;
		return 0; /* a stale return address, or one whose caller's frame cannot be found */
	}
	c->slot = slot;
	c->ra = w;
	return 1;
}

/*
 * One step out of code without CFI (a mapping described as PROFD_UNWIND_FP_ONLY): the
 * frame-pointer step when its frame lands in code with a table, else a stack scan.
 */
static __always_inline long uw_step_nocfi(struct uw_state *st, const struct profd_unwind_proc *proc)
{
	__u64 sp = st->sp, bp = st->bp;
	__u32 n = proc->nr_maps;
	struct uw_scan c = {.st = st, .proc = proc, .sp = sp, .bp0 = bp};
	const struct profd_unwind_map *m;
	long ret;

	ret = uw_step_fp(st);
	if (!ret) {
		m = uw_find_map(st, proc, st->pc - 1);
		if (m && m->table != PROFD_UNWIND_FP_ONLY)
			return 0;
	}
	if (n > unwind_maps_mask + 1)
		n = unwind_maps_mask + 1;
	if (!n || (sp & 7))
		return ret;
	c.lo_pc = proc->maps[0].start;
	c.hi_pc = proc->maps[(n - 1) & unwind_maps_mask].end;
	bpf_loop(UW_SCAN_WORDS, uw_scan_word, &c, 0);
	if (!c.ra)
		return ret; /* nothing found: the frame-pointer step's result stands */
	/*
	 * Continue from the return address with rsp just above its slot and the caller's rbp as
	 * uw_scan_caller_ok found it (rbp-based callers); rsp-based callers restore rbp from their
	 * own frame if they saved it, else it stays rbp's value (a wrong one is caught by the next
	 * steps' checks: above rsp, growing up).
	 */
	st->sp = c.slot + 8;
	st->bp = c.bp;
	st->pc = c.ra;
	st->exact = 0;
	st->end = 0;
	st->scans++;
	return 0;
}

/* Through a signal frame: every register comes back from the ucontext at sp. */
static __always_inline long uw_step_signal(struct uw_state *st)
{
	/* struct sigcontext: r8-r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip (asm/sigcontext.h)
	 */
	__u64 sc[17];

	/* uc_flags, uc_link and uc_stack (8 + 8 + 24 bytes) come before uc_mcontext. */
	if (bpf_probe_read_user(sc, sizeof(sc), (void *)(st->sp + 40)))
		return uw_stop(st, PROFD_UNWIND_READ_FAULT);
	for (int k = 0; k < 8; k++)
		st->regs[UW_R8 + k] = sc[k];
	st->regs[UW_RDI] = sc[8];
	st->regs[UW_RSI] = sc[9];
	st->regs[UW_RBP] = sc[10];
	st->regs[UW_RBX] = sc[11];
	st->regs[UW_RDX] = sc[12];
	st->regs[UW_RAX] = sc[13];
	st->regs[UW_RCX] = sc[14];
	st->regs[UW_RSP] = sc[15];
	st->regs[UW_RIP] = sc[16];
	st->bp = sc[10];
	st->sp = sc[15];
	st->pc = sc[16];
	st->exact = 1;
	st->in_syscall = 0;
	if (!st->pc)
		return uw_stop(st, PROFD_UNWIND_BOTTOM);
	return 0;
}

static __always_inline __u64 uw_reg(struct uw_state *st, __s8 reg)
{
	return st->regs[(__u8)reg < UW_NREGS ? (__u8)reg : UW_RIP];
}

/* One CFI step by the row r that covers the frame's pc. */
static __always_inline long uw_step_row(struct uw_state *st, const struct profd_unwind_row *r)
{
	__u64 cfa, ra, rbp_slot = 0, drap_bp = 0;
	__s8 rbp_off = 0;
	bool drap_saved = false;

	switch (r->kind) {
	case PROFD_UW_RSP:
		cfa = st->sp + 8 * (__u64)r->cfa;
		rbp_off = r->reg;
		break;
	case PROFD_UW_RBP:
		cfa = st->bp + 8 * (__u64)r->cfa;
		rbp_off = r->reg;
		break;
	case PROFD_UW_PLT:
		cfa = st->sp + 8 + ((st->pc & 15) >= (__u8)r->reg ? 8 : 0);
		break;
	case PROFD_UW_DEREF:
		if (bpf_probe_read_user(&cfa, sizeof(cfa), (void *)(st->sp + 8 * (r->cfa & 0xff))))
			return uw_stop(st, PROFD_UNWIND_READ_FAULT);
		cfa += 8 * (__s64)(__s8)(r->cfa >> 8);
		rbp_off = r->reg;
		break;
	case PROFD_UW_DRAP:
		/* Both slots are below this frame's rbp: read them before rbp changes. */
		if (bpf_probe_read_user(&cfa, sizeof(cfa), (void *)(st->bp + 8 * (__s64)r->reg)))
			return uw_stop(st, PROFD_UNWIND_READ_FAULT);
		if (r->cfa & PROFD_UW_DRAP_SAVED) {
			if (bpf_probe_read_user(
				&drap_bp, sizeof(drap_bp),
				(void *)(st->bp + 8 * (__s64)(__s8)(r->cfa & 0xff))))
				return uw_stop(st, PROFD_UNWIND_READ_FAULT);
			drap_saved = true;
		}
		break;
	case PROFD_UW_CFA_REG:
		if (!st->exact)
			return uw_stop(st, PROFD_UNWIND_INVALID);
		cfa = uw_reg(st, r->reg) + 8 * (__u64)(r->cfa & 0xff);
		rbp_off = (__s8)(r->cfa >> 8);
		break;
	case PROFD_UW_RA_REG:
		if (!st->exact)
			return uw_stop(st, PROFD_UNWIND_INVALID);
		st->sp += 8 * (__u64)r->cfa;
		st->pc = uw_reg(st, r->reg);
		st->exact = 0;
		return st->pc ? 0 : uw_stop(st, PROFD_UNWIND_BOTTOM);
	case PROFD_UW_SIGNAL:
		return uw_step_signal(st);
	case PROFD_UW_STOP:
		return uw_stop(st, PROFD_UNWIND_BOTTOM);
	case PROFD_UW_GAP:
		return uw_step_fp(st);
	default:
		return uw_stop(st, PROFD_UNWIND_INVALID);
	}
	/* The caller's stack pointer is the CFA: above this frame's, or the data is not a stack. */
	if (cfa <= st->sp && r->kind != PROFD_UW_CFA_REG)
		return uw_stop(st, PROFD_UNWIND_BAD_FRAME);
	if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa - 8)))
		return uw_stop(st, PROFD_UNWIND_READ_FAULT);
	if (rbp_off) {
		if (bpf_probe_read_user(&rbp_slot, sizeof(rbp_slot),
					(void *)(cfa + 8 * (__s64)rbp_off)))
			return uw_stop(st, PROFD_UNWIND_READ_FAULT);
		st->bp = rbp_slot;
	}
	if (drap_saved)
		st->bp = drap_bp;
	st->sp = cfa;
	st->pc = ra;
	st->exact = 0;
	if (!ra)
		return uw_stop(st, PROFD_UNWIND_BOTTOM);
	return 0;
}

struct uw_loop_ctx {
	struct uw_state *st;
	const struct profd_unwind_proc *proc;
};

static long uw_step_cb(__u64 i, void *data)
{
	struct uw_loop_ctx *c = data;
	struct uw_state *st = c->st;
	const struct profd_unwind_map *m;
	const struct profd_unwind_row *r;
	__u64 look, addr;
	void *rows;
	__u32 n = st->n;

	if (n >= PROFD_MAX_STACK)
		return uw_stop(st, PROFD_UNWIND_TRUNCATED);
	st->ips[n & 127] = st->pc;
	st->n = n + 1;
	/*
	 * A return address follows its call, which may be a function's last instruction (a call
	 * that does not return): look up the call. An interrupted instruction is exact, but one
	 * in a system call follows the syscall instruction like a return address.
	 */
	look = st->pc - (!st->exact || st->in_syscall);
	st->in_syscall = 0;
	m = uw_find_map(st, c->proc, look);
	if (!m)
		return uw_stop(st, PROFD_UNWIND_NO_MAPPING);
	if (m->table == PROFD_UNWIND_FP_ONLY)
		return uw_step_nocfi(st, c->proc);
	addr = look - m->bias;
	if (addr >> 32)
		return uw_stop(st, PROFD_UNWIND_NO_ROW);
	rows = bpf_map_lookup_elem(&unwind_tables, &m->table);
	if (!rows)
		return uw_stop(st, PROFD_UNWIND_NO_TABLE);
	r = uw_find_row(st, rows, m->nrows, (__u32)addr);
	if (!r)
		return uw_stop(st, PROFD_UNWIND_NO_ROW);
	return uw_step_row(st, r);
}

/*
 * Walk the user stack of the registers in st (loaded by the caller) for process tgid, whose
 * mappings the daemon described. Returns 0 when it has not (the caller falls back to frame
 * pointers); else 1: st->ips[0 .. st->n) hold the frames and st->end tells how the walk ended.
 * A global function: the verifier checks it once on its own, not once per program and call site
 * with every state of the caller (that multiplied the daemon's start-up by four).
 */
__noinline int unwind_cfi_run(struct uw_state *st, __u32 tgid)
{
	struct uw_loop_ctx c;

	if (!st || !unwind_cfi)
		return 0;
	c.proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
	if (!c.proc)
		return 0;
	c.st = st;
	st->tgid = tgid;
	st->pc = st->regs[UW_RIP];
	st->sp = st->regs[UW_RSP];
	st->bp = st->regs[UW_RBP];
	st->n = 0;
	st->end = 0;
	st->exact = 1;
	st->scans = 0;
	st->rejects = 0;
	if (st->last_map > unwind_maps_mask)
		st->last_map = 0;
	/* A fault's error code looks like a system call number: only a syscall insn says so. */
	if (st->in_syscall) {
		__u8 insn[2] = {};

		if (bpf_probe_read_user(insn, sizeof(insn), (void *)(st->pc - 2)) ||
		    insn[0] != 0x0f || insn[1] != 0x05)
			st->in_syscall = 0;
	}
	bpf_loop(PROFD_MAX_STACK + 1, uw_step_cb, &c, 0);
	if (!st->end)
		st->end = PROFD_UNWIND_TRUNCATED;
	return 1;
}

static __always_inline bool unwind_cfi_walk(struct uw_state *st, __u32 tgid)
{
	return unwind_cfi_run(st, tgid) == 1;
}

#endif
