/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The profile as a view shows it: a copy of a checked profile with frames renamed or dropped
 * the way py-spy's options do, then compacted, so frames, stacks and samples that became equal
 * are one (their values summed) and every format and table sees the same merged data.
 *
 * What each option does to a stack (leaf first) that holds Python frames; a stack without one
 * (a C program, a kernel thread) is left as it is:
 *   fold_native:  the native frames above the newest Python frame go, so the time spent in
 *                 them (the interpreter's own functions, C extensions, libc) is that Python
 *                 frame's self time, as py-spy counts it without --native. Kernel frames and
 *                 GPU frames stay: they are the kernel's and the GPU's time, not Python's.
 *   python_only:  fold_native, and the native frames between Python frames go too.
 *   hide_interp:  the interpreter's own native frames between two Python frames go: CPython's
 *                 call machinery (_PyObject_MakeTpCall, slot_tp_call, method_vectorcall, the
 *                 eval loop's leftovers...), which repeats between every two Python frames.
 *                 The interpreter is told by module, not by a list of names: a module whose
 *                 file name starts with "libpython", or a process's executable when the stack
 *                 has no libpython frame (a static interpreter; a program that links libpython
 *                 keeps its own frames). Only frames between Python frames go, so what the
 *                 newest Python frame runs (a C extension through the call machinery, a static
 *                 interpreter's built-in module such as zlib, the GC) and the frames below the
 *                 oldest (main, Py_RunMain) stay; so do libraries' frames between Python
 *                 frames (torch's C++ calling back into Python).
 * And to every frame:
 *   function:     Python frames lose their line ("NAME (FILE)"), and frames without a symbol
 *                 their address ("[unknown] (MODULE)"): every line or address of one function
 *                 is one frame.
 *   no_lineno:    Python frames lose their line; nothing else changes.
 *   per_thread:   each stack gets a root frame naming its thread, "thread TID (COMM)" (COMM
 *                 from Profile.threads; "thread TID" when the profile does not name it), of
 *                 kind FRAME_UNKNOWN. Under a process root it sits below the process's frame.
 */
#ifndef PROFCTL_RESHAPE_H
#define PROFCTL_RESHAPE_H

#include <stdbool.h>

#include "profd.pb-c.h"

struct reshape_opts {
	bool fold_native;
	bool python_only;
	bool hide_interp;
	bool function;
	bool no_lineno;
	bool per_thread;
};

/* True when o asks for no change at all. */
bool reshape_is_noop(const struct reshape_opts *o);

/*
 * The profile src (already checked with profile_check) reshaped by o. Returns a new profile
 * that passes profile_check, free it with reshape_free (never with protobuf-c); it borrows
 * src's strings, processes and threads, so keep src until then. NULL with errno set when out
 * of memory.
 */
Profd__Profile *reshape(const Profd__Profile *src, const struct reshape_opts *o);
void reshape_free(Profd__Profile *p);

/*
 * The root frame's name for sample s's thread: "thread TID (COMM)", or "thread TID". Returns
 * buf.
 */
char *reshape_thread_name(const Profd__Profile *p, const Profd__Sample *s, char *buf, size_t len);

#endif
