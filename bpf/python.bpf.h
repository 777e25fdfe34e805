/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CPython frames, read from the sampled thread's interpreter state. Only raw values leave the
 * kernel: (code object address, instruction offset, flags) per frame, newest first. The thread
 * is found without glibc internals: PyThreadState.thread_id equals pthread_self(), which on
 * x86_64 is the thread pointer in fsbase. Included by sample.bpf.c (the CPU sampler and the
 * launch probes: they read the current thread's memory) and by stacks.bpf.c (a sleepable task
 * iterator that reads another thread's: it defines PY_READ_TASK first, and the walk then goes
 * through bpf_copy_from_user_task of the task in the loop context). With the frames, whether the
 * thread holds its interpreter's GIL (PROFD_SAMPLE_GIL_*): one more read per sample.
 */
#ifndef PROFD_PYTHON_BPF_H
#define PROFD_PYTHON_BPF_H

#ifndef PY_MAX_THREADS_WALK
#define PY_MAX_THREADS_WALK 1024 /* threads (across interpreters) examined to find a tstate */
#endif
#define PY_FRAME_BUF 128 /* bytes read per frame, at most */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct profd_py_proc);
} py_procs SEC(".maps");

/*
 * A thread's PyThreadState and, once read, the GIL of its interpreter (3.12+: the GIL is behind
 * two pointers, tstate->interp->ceval.gil, read once per thread instead of on every sample).
 */
struct py_ts_ent {
	__u64 ts;
	__u64 gil; /* PROFD_PY_GIL_INTERP: &struct _gil_runtime_state; 0: not read yet */
};

/* tid -> its thread state, revalidated on every use (tids and tstates are reused). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct py_ts_ent);
} py_tstates SEC(".maps");

/*
 * Per-CPU state of one walk. Loop state lives here, not on the stack: the verifier tracks stack
 * scalars precisely and would explore every iteration count of a bpf_loop callback separately,
 * while map contents are plain unknown scalars whose states converge after one pass.
 */
struct py_scratch {
	struct profd_py_frame frames[PROFD_MAX_PY_FRAMES];
	__u8 buf[PY_FRAME_BUF];
	__u64 frame;
	__u64 interp;
	__u64 ts;
	__u64 found;
	__u64 fsbase;
	__u32 n;
	__u32 interps;
	__u32 read_err;
	__u32 __pad;
	/* The futex word the thread waited on (off-CPU records; 0: none): inside the GIL? */
	__u64 futex_uaddr;
};

/* One per scratch slot of sample.bpf.c, for the same reason: programs that interrupt others. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct py_scratch);
} py_scratch_map SEC(".maps");

struct py_loop_ctx {
	const struct profd_py_proc *py;
	struct py_scratch *s;
#ifdef PY_READ_TASK
	struct task_struct *task; /* whose memory is read */
	__u32 tgid;
#endif
};

#ifdef PY_READ_TASK
/*
 * Every thread state a search walked past, by (process, thread_id): a dump reads all threads of
 * a process, and without this each would walk the interpreter's list again (quadratic in the
 * threads; 3000 threads took seconds). Revalidated on use like py_tstates.
 */
struct py_ts_key {
	__u64 thread_id;
	__u32 tgid;
	__u32 __pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct py_ts_key);
	__type(value, __u64);
} py_ts_seen SEC(".maps");

/*
 * The process whose thread states were all walked past already in this dump (reset by the
 * daemon before each): a thread missing from py_ts_seen is then out of reach, not walked for.
 */
__u32 py_walked_tgid = 0;
#endif

/* Read interpreter memory of the thread the walk is for: 0 or a negative error. */
#ifdef PY_READ_TASK
#define PY_READ(c, dst, size, src)                                                                 \
	bpf_copy_from_user_task(dst, size, (const void *)(src), (c)->task, 0)
#else
#define PY_READ(c, dst, size, src) bpf_probe_read_user(dst, size, (const void *)(src))
#endif

static __always_inline __u64 read_ptr(struct py_loop_ctx *c, __u64 addr)
{
	__u64 v = 0;

	if (PY_READ(c, &v, sizeof(v), addr))
		return 0;
	return v;
}

static long py_find_cb(__u32 i, void *arg)
{
	struct py_loop_ctx *c = arg;
	const struct profd_py_proc *py = c->py;
	struct py_scratch *s = c->s;
	__u64 thread_id;

	if (!s->ts) {
		/* This interpreter's threads are done: on to the next interpreter. */
		if (++s->interps > 8)
			return 1;
		s->interp = read_ptr(c, s->interp + py->interp_next);
		if (!s->interp)
			return 1;
		s->ts = read_ptr(c, s->interp + py->interp_threads_head);
		return 0;
	}
	thread_id = read_ptr(c, s->ts + py->ts_thread_id);
#ifdef PY_READ_TASK
	if (thread_id) {
		struct py_ts_key key = {.thread_id = thread_id, .tgid = c->tgid};

		bpf_map_update_elem(&py_ts_seen, &key, &s->ts, BPF_ANY);
	}
#endif
	if (thread_id == s->fsbase) {
		s->found = s->ts;
		return 1;
	}
	s->ts = read_ptr(c, s->ts + py->ts_next);
	return 0;
}

/* The thread state of the thread tid (fsbase: its thread pointer), 0 if none; *gil as cached. */
static __always_inline __u64 py_find_tstate(struct py_loop_ctx *c, __u32 tid, __u64 fsbase,
					    __u64 *gil)
{
	const struct profd_py_proc *py = c->py;
	struct py_scratch *s = c->s;
	struct py_ts_ent *cached = bpf_map_lookup_elem(&py_tstates, &tid);
	struct py_ts_ent ent = {};
	__u64 found;

	*gil = 0;
	if (cached && cached->ts && read_ptr(c, cached->ts + py->ts_thread_id) == fsbase) {
		*gil = cached->gil;
		return cached->ts;
	}
#ifdef PY_READ_TASK
	{
		struct py_ts_key key = {.thread_id = fsbase, .tgid = c->tgid};
		__u64 *seen = bpf_map_lookup_elem(&py_ts_seen, &key);

		found = seen ? *seen : 0;
		if (found && read_ptr(c, found + py->ts_thread_id) == fsbase) {
			ent.ts = found;
			bpf_map_update_elem(&py_tstates, &tid, &ent, BPF_ANY);
			return found;
		}
		if (py_walked_tgid == c->tgid)
			return 0;
	}
#endif
	s->fsbase = fsbase;
	s->found = 0;
	s->interps = 0;
	s->interp = read_ptr(c, py->runtime_addr + py->rt_interp_head);
	if (!s->interp)
		return 0;
	s->ts = read_ptr(c, s->interp + py->interp_threads_head);
	bpf_loop(PY_MAX_THREADS_WALK, py_find_cb, c, 0);
	found = s->found;
	ent.ts = found;
	if (found)
		bpf_map_update_elem(&py_tstates, &tid, &ent, BPF_ANY);
#ifdef PY_READ_TASK
	else
		py_walked_tgid = c->tgid;
#endif
	return found;
}

/* A field of the frame just read into s->buf, at a daemon-supplied offset. */
static __always_inline __u64 buf_u64(const struct py_scratch *s, __u16 off)
{
	if (off > PY_FRAME_BUF - 8)
		return 0;
	return *(const __u64 *)&s->buf[off];
}

static __always_inline __u32 buf_u32(const struct py_scratch *s, __u16 off)
{
	if (off > PY_FRAME_BUF - 4)
		return 0;
	return *(const __u32 *)&s->buf[off];
}

static __always_inline __u8 buf_u8(const struct py_scratch *s, __u16 off)
{
	if (off > PY_FRAME_BUF - 1)
		return 0;
	return s->buf[off];
}

/*
 * Mark f with a fingerprint of its code object as it is now (PROFD_PYF_CHECKED): one 16-byte
 * read, so the daemon, which reads the code object later, can tell it was freed and its
 * address reused.
 */
static __always_inline void py_fingerprint(struct py_loop_ctx *c, struct profd_py_frame *f)
{
	const struct profd_py_proc *py = c->py;
	__u64 fn[2];

	if (!py->co_filename || py->co_filename == PROFD_PY_NO_FIELD || !f->code)
		return;
	if (!PY_READ(c, fn, sizeof(fn), f->code + py->co_filename))
		f->flags |= PROFD_PYF_CHECKED | PROFD_PY_CODE_CHECK(fn[0], fn[1])
						    << PROFD_PYF_CHECK_SHIFT;
}

static long py_walk_cb(__u32 i, void *arg)
{
	struct py_loop_ctx *c = arg;
	const struct profd_py_proc *py = c->py;
	struct py_scratch *s = c->s;
	struct profd_py_frame *out;
	__u32 size = py->fr_size, n = s->n;
	__u64 code, ptr;
	__u32 flags = 0;

	if (!s->frame || n >= PROFD_MAX_PY_FRAMES)
		return 1;
	if (size > PY_FRAME_BUF)
		size = PY_FRAME_BUF;
	if (PY_READ(c, s->buf, size, s->frame)) {
		s->read_err = 1;
		return 1;
	}
	code = buf_u64(s, py->fr_code) & ~(__u64)py->code_tag_mask;
	if (py->lasti_kind == PROFD_PY_LASTI_PTR) {
		ptr = buf_u64(s, py->fr_lasti);
		ptr = ptr > code ? ptr - code : 0;
		if (ptr > 0xffffffffull)
			ptr = 0;
	} else {
		ptr = buf_u32(s, py->fr_lasti);
	}
	if (py->fr_is_entry != PROFD_PY_NO_FIELD && buf_u8(s, py->fr_is_entry))
		flags |= PROFD_PYF_ENTRY;
	if (py->fr_owner != PROFD_PY_NO_FIELD && py->boundary_owner &&
	    buf_u8(s, py->fr_owner) >= py->boundary_owner)
		flags |= PROFD_PYF_BOUNDARY;

	out = &s->frames[n & (PROFD_MAX_PY_FRAMES - 1)];
	out->code = code;
	out->lasti = (__u32)ptr;
	out->flags = flags;
	/*
	 * Code objects freed soon after they ran (a module's top level, exec and eval) run as the
	 * first frame of an eval activation: 3.11's entry frame, the frame newer than 3.12+'s
	 * boundary frame. Other code lives as long as its function. Up to 3.10 any frame may be.
	 */
	if (py->version < 0x030b || (flags & PROFD_PYF_ENTRY))
		py_fingerprint(c, out);
	else if ((flags & PROFD_PYF_BOUNDARY) && n > 0)
		py_fingerprint(c, &s->frames[(n - 1) & (PROFD_MAX_PY_FRAMES - 1)]);
	s->n = n + 1;
	s->frame = buf_u64(s, py->fr_back);
	return 0;
}

/*
 * Whether thread tid (thread state ts) holds its interpreter's GIL: sets PROFD_SAMPLE_GIL_HELD or
 * PROFD_SAMPLE_GIL_FREE in rec, or neither when the GIL cannot be read. One 16-byte read once the
 * GIL's address is known (3.12+: cached per thread in py_tstates).
 */
static __always_inline void py_gil_state(struct py_loop_ctx *c, struct profd_sample_rec *rec,
					 __u64 ts, __u64 gil)
{
	const struct profd_py_proc *py = c->py;
	__u32 tid = rec->tid; /* a map key from the stack */
	struct py_ts_ent ent;
	__u64 w[2] = {};
	__s32 locked;

	if (py->gil_kind == PROFD_PY_GIL_RUNTIME) {
		gil = py->runtime_addr + py->gil_off;
	} else if (py->gil_kind == PROFD_PY_GIL_INTERP) {
		if (!gil) {
			__u64 interp = read_ptr(c, ts + py->ts_interp);

			gil = interp ? read_ptr(c, interp + py->gil_off) : 0;
			if (!gil)
				return; /* no GIL created yet: ask again next time */
			ent.ts = ts;
			ent.gil = gil;
			bpf_map_update_elem(&py_tstates, &tid, &ent, BPF_ANY);
		}
	} else {
		return;
	}
	if (c->s->futex_uaddr && c->s->futex_uaddr - gil < PROFD_GIL_SPAN)
		rec->flags |= PROFD_SAMPLE_GIL_WAIT;
	if (PY_READ(c, w, sizeof(w), gil + py->gil_holder))
		return;
	locked = (__s32)w[1];
	if (locked == 1 && w[0] == ts)
		rec->flags |= PROFD_SAMPLE_GIL_HELD;
	else if (locked == 0 || locked == 1)
		rec->flags |= PROFD_SAMPLE_GIL_FREE;
}

/*
 * Read the Python frames of task (rec->tid: the current thread, or with PY_READ_TASK any thread)
 * into rec after its n_ips addresses, walking in py_scratch_map[slot]. Sets rec->nr_py and
 * rec->py_status; returns the bytes appended.
 */
static __always_inline __u32 py_collect(struct profd_sample_rec *rec, __u32 n_ips, __u32 slot,
					struct task_struct *task)
{
	const struct profd_py_proc *py;
	struct py_loop_ctx c;
	struct py_scratch *s;
	__u32 bytes, n;
	__u64 ts, fsbase, frame, gil;

	py = bpf_map_lookup_elem(&py_procs, &rec->pid);
	if (!py)
		return 0;
	if (py->gil_kind == PROFD_PY_GIL_DISABLED) {
		/* Only registered to say this: the daemon reads no frames of these builds. */
		rec->flags |= PROFD_SAMPLE_NO_GIL;
		return 0;
	}
	s = bpf_map_lookup_elem(&py_scratch_map, &slot);
	if (!s)
		return 0;
#if defined(__TARGET_ARCH_x86)
	fsbase = BPF_CORE_READ(task, thread.fsbase);
#else
	fsbase = 0;
#endif
	c.py = py;
	c.s = s;
#ifdef PY_READ_TASK
	c.task = task;
	c.tgid = rec->pid;
#endif
	ts = fsbase ? py_find_tstate(&c, rec->tid, fsbase, &gil) : 0;
	if (!ts) {
		rec->py_status = PROFD_PY_NO_TSTATE;
		return 0;
	}
	py_gil_state(&c, rec, ts, gil);
	frame = read_ptr(&c, ts + py->ts_frame);
	if (frame && py->cframe_current != PROFD_PY_NO_FIELD)
		frame = read_ptr(&c, frame + py->cframe_current);
	s->frame = frame;
	s->n = 0;
	s->read_err = 0;
	bpf_loop(PROFD_MAX_PY_FRAMES, py_walk_cb, &c, 0);

	n = s->n;
	rec->py_status = s->read_err ? PROFD_PY_READ_ERR : PROFD_PY_OK;
	if (n >= PROFD_MAX_PY_FRAMES && s->frame && !s->read_err)
		rec->flags |= PROFD_SAMPLE_PY_TRUNC;
	if (n > PROFD_MAX_PY_FRAMES)
		n = PROFD_MAX_PY_FRAMES;
	if (n_ips > 2 * PROFD_MAX_STACK)
		n_ips = 2 * PROFD_MAX_STACK;
	bytes = n * sizeof(struct profd_py_frame);
	if (bytes > sizeof(s->frames))
		bytes = sizeof(s->frames);
	if (bytes && bpf_probe_read_kernel(&rec->ips[n_ips], bytes, s->frames))
		return 0;
	rec->nr_py = bytes / sizeof(struct profd_py_frame);
	return bytes;
}

#endif
