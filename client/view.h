/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What `profctl top` and `profctl table` share: their common options and fetching a profile
 * as a function table. Implemented in cmd_table.c.
 */
#ifndef PROFCTL_VIEW_H
#define PROFCTL_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "conn.h"
#include "functable.h"

#define VIEW_MAX_SINCE_NS (365ull * 86400 * 1000000000ull)

/* The filter of one dump. */
struct view_query {
	uint32_t pids[DUMP_MAX_PIDS];
	size_t n_pids;
	bool has_tid;
	uint32_t tid;
	bool has_since;
	uint64_t since_ns;
};

/*
 * Option values shared by the views; cmd names the command in messages. Each returns 0 or
 * -EINVAL with e filled (code PROFCTL_EXIT_USAGE).
 */
int view_parse_pid(const char *cmd, const char *val, struct view_query *q, struct cli_error *e);
int view_parse_tid(const char *cmd, const char *val, struct view_query *q, struct cli_error *e);
int view_parse_sort(const char *cmd, const char *val, enum functable_sort *out,
		    struct cli_error *e);
/* A duration in [min_ns, max_ns], which range ("100ms to 1h") says in the message. */
int view_parse_duration(const char *cmd, const char *opt, const char *val, uint64_t min_ns,
			uint64_t max_ns, const char *range, uint64_t *out, struct cli_error *e);
/* A count in [min, max]. */
int view_parse_count(const char *cmd, const char *opt, const char *val, uint32_t min, uint32_t max,
		     uint32_t *out, struct cli_error *e);

/*
 * Ask the daemon on c for the profile q selects and sum it per function. Returns 0 with *out
 * (free with functable__free) and, when resp is not NULL, *resp the reply holding the profile
 * (free with profd__response__free_unpacked); or a negative errno with e filled: -EREMOTEIO
 * with code PROFCTL_EXIT_NO_SAMPLES when nothing matched, and what conn__call returns
 * otherwise.
 */
int view_fetch(struct conn *c, const struct view_query *q, struct functable **out,
	       Profd__Response **resp, struct cli_error *e);

/* The width of the terminal on fd, 0 when fd is not one. */
unsigned view_term_cols(int fd);

#endif
