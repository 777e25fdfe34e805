/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One side of a diff: folded stacks with counts, read from folded text, from pprof files or
 * from daemon profiles.
 *
 * A stack is "root;...;leaf" with the frame names profctl prints everywhere else, so a folded
 * dump, a pprof dump and a live window of the same program line up frame by frame.
 */
#ifndef PROFCTL_STACKS_H
#define PROFCTL_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profd.pb-c.h"

#define DIFF_MAX_INPUT (256u << 20) /* bytes of a file, and of a pprof file decompressed */
/*
 * A decompressed pprof profile: protobuf-c's decoded form is many times the encoded bytes (an
 * empty Sample is 2 bytes on the wire, 80 in memory), so this bounds what a crafted file costs.
 */
#define DIFF_MAX_PPROF (64u << 20)
#define DIFF_MAX_LINE (1u << 20) /* bytes of one folded line */
#define DIFF_MAX_DEPTH 4096	 /* frames in one stack */

struct stack_count {
	char *stack; /* root first, frames joined by ';' */
	uint64_t count;
};

/* One side: unique stacks in bytewise order with their summed counts. */
struct stacks;

/*
 * Parse folded text (flamegraph.pl's input: "frame;frame;frame COUNT" per line) of len bytes,
 * NUL bytes included. Empty lines and a "\r" before each newline are accepted; anything else
 * that is not a stack of non-empty frames, one space and a decimal count fails with a one-line
 * reason in err naming "name:LINE". Returns the stacks (free with stacks__free) or NULL with
 * errno set: EINVAL for malformed text, EOVERFLOW when counts add up past 2^64, ENOMEM.
 */
struct stacks *stacks__from_folded(const char *name, const char *text, size_t len, char *err,
				   size_t err_len);
/*
 * Parse a gzip-compressed pprof profile (profile.proto) of len bytes. The values summed are
 * those of the sample type "samples" when the profile has one, else of its default sample
 * type, else of its last, as pprof itself picks. Frame names follow profctl's rules where the
 * file tells: Python files give "NAME (FILE:LINE)", kernel mappings "NAME_[k]". Returns the
 * stacks or NULL with errno set (EINVAL, EFBIG, EOVERFLOW, ENOMEM) and a reason in err.
 */
struct stacks *stacks__from_pprof(const char *name, const uint8_t *data, size_t len, char *err,
				  size_t err_len);
/*
 * Stacks of a profile from the daemon (already checked with profile_check), named as
 * format_folded names them; process_root puts each process name under the root. Returns the
 * stacks or NULL with errno set.
 */
struct stacks *stacks__from_profile(const Profd__Profile *p, bool process_root);
/*
 * Read the file at path (at most DIFF_MAX_INPUT bytes) and parse it by its content: gzip magic
 * means pprof, anything else must be folded text. Returns the stacks or NULL with errno set
 * and a reason in err naming the file.
 */
struct stacks *stacks__read_file(const char *path, char *err, size_t err_len);
void stacks__free(struct stacks *s);
/* The stacks, *n set to their number. Owned by s. */
const struct stack_count *stacks__items(const struct stacks *s, size_t *n);
/* The sum of all counts. */
uint64_t stacks__total(const struct stacks *s);

#endif
