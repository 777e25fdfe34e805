/* SPDX-License-Identifier: BSD-2-Clause */
/* The commands main() dispatches to, one file each (cmd_NAME.c). */
#ifndef PROFCTL_COMMANDS_H
#define PROFCTL_COMMANDS_H

#include <stdio.h>

#include "cli.h"

/*
 * Commands: argv[0] is the command name. Each returns an exit code (enum profctl_exit) and has
 * printed any error already.
 */
int cmd_status(int argc, char **argv, const struct global_opts *g);
int cmd_dump(int argc, char **argv, const struct global_opts *g);
int cmd_top(int argc, char **argv, const struct global_opts *g);
int cmd_table(int argc, char **argv, const struct global_opts *g);
int cmd_diff(int argc, char **argv, const struct global_opts *g);
int cmd_report(int argc, char **argv, const struct global_opts *g);
int cmd_record(int argc, char **argv, const struct global_opts *g);
/* Each command's --help text, written to f. */
void cmd_status_usage(FILE *f);
void cmd_dump_usage(FILE *f);
void cmd_top_usage(FILE *f);
void cmd_table_usage(FILE *f);
void cmd_diff_usage(FILE *f);
void cmd_report_usage(FILE *f);
void cmd_record_usage(FILE *f);

#endif
