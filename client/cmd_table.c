// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl table: the hottest functions as one table, laid out like the PyTorch profiler's
 * key_averages().table().
 */
#include "commands.h"
#include "conn.h"
#include "fetch.h"
#include "functable.h"
#include "opts.h"
#include "value.h"
#include "view.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "wire.h"

#define TABLE_DEFAULT_LIMIT 20

void cmd_table_usage(FILE *f)
{
	fputs(
	    "Usage: profctl [--socket PATH] table [--pid N]... [--tid N] [--since DURATION]\n"
	    "               [--sort self|total] [--limit N] [--function | --no-lineno | --lines]\n"
	    "               [--native | --python-only | --all-frames] [--per-thread]\n"
	    "               [--value VALUE] [--timeout DURATION]\n"
	    "\n"
	    "Print the hottest functions of the samples the daemon holds as one table, laid\n"
	    "out like the PyTorch profiler's key_averages().table(). A function is its display\n"
	    "name without the line: all its lines, addresses and call paths add up.\n"
	    "\n"
	    "In stacks with Python frames, the native frames above the newest Python frame\n"
	    "(the interpreter's own, like _PyEval_EvalFrameDefault or PyFloat_FromDouble, C\n"
	    "extensions, libc) are not rows: their time is that Python function's self time,\n"
	    "as py-spy counts it. Kernel and GPU frames stay rows. --native shows the native\n"
	    "frames as rows of their own. The interpreter's own frames between two Python\n"
	    "frames (CPython's call machinery) are left out; --all-frames keeps them. Stacks\n"
	    "without Python frames are as sampled.\n"
	    "\n"
	    "Columns:\n"
	    "  Self CPU %, Self CPU    samples whose innermost frame is the function, as a share\n"
	    "                          of all samples and as CPU time (samples x period)\n"
	    "  CPU total %, CPU total  samples with the function anywhere on the stack (once per\n"
	    "                          sample, even when it recurses)\n"
	    "  # Samples               that number of samples\n"
	    "  GPU columns             the same pairs for each GPU value the daemon records\n"
	    "  off_cpu, wall_time      with profd --off-cpu: time off the CPU, and wall-clock\n"
	    "                          time (CPU samples x period + off-CPU time)\n"
	    "The footer gives the totals the percentages are of.\n"
	    "\n"
	    "Options:\n"
	    "  --pid N              only process N (repeat for more); default: every process\n"
	    "                       you may see\n"
	    "  --tid N              only thread N\n"
	    "  --since DURATION     only the last DURATION (30s, 5m, 1h, 500ms; bare number: s)\n"
	    "  --sort self|total    order by self time (default) or total time\n"
	    "  --value VALUE        the column to order by: cpu (default), gpu, gpu-kernels,\n"
	    "                       copy, copy-bytes, launches, off-cpu, wall, gpu-memory\n"
	    "                       or gpu-memory-live\n"
	    "  --limit N            at most N rows (default 20; 0: all)\n"
	    "  --function           a row per function, NAME (FILE) (the default)\n"
	    "  --no-lineno          no line numbers in names (here the same as --function)\n"
	    "  --lines              a row per Python line, NAME (FILE:LINE), and per address of\n"
	    "                       frames without a symbol, as flame graphs show them\n"
	    "  --native             native frames above Python frames are rows of their own\n"
	    "  --python-only        no native frames between Python frames either\n"
	    "  --all-frames         the interpreter's frames between Python frames too\n"
	    "  --per-thread         a row per thread and function, with a Thread column\n"
	    "                       (TID COMM, the thread's kernel name)\n"
	    "  --timeout DURATION   how long to wait for the daemon (default 60s)\n"
	    "  -h, --help           show this help\n"
	    "\n"
	    "Names are cut to the terminal's width; into a pipe or a file they are printed whole.\n"
	    "\n"
	    "Examples:\n"
	    "  profctl table --pid 1234\n"
	    "  profctl table --pid 1234 --since 30s --sort total --limit 50\n"
	    "  profctl table --since 5m --limit 0 > functions.txt\n"
	    "  profctl table --pid 1234 --per-thread --lines\n"
	    "  profctl table --pid 1234 --value wall\n",
	    f);
}

int cmd_table(int argc, char **argv, const struct global_opts *g)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"tid", required_argument, NULL, 'T'},
	    {"since", required_argument, NULL, 's'},
	    {"sort", required_argument, NULL, 'S'},
	    {"limit", required_argument, NULL, 'l'},
	    {"timeout", required_argument, NULL, 't'},
	    {"value", required_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    VIEW_LONGOPTS_TABLE,
	    {0},
	};
	struct view_opts v = {0};
	int value = VALUE_CPU;
	long vi;
	static struct fetch_query q; /* large: keep it off the stack */
	enum functable_sort sort = FUNCTABLE_SORT_SELF;
	struct functable_print_opts po = {.limit = TABLE_DEFAULT_LIMIT};
	uint64_t timeout_ns = 0;
	struct functable *t = NULL;
	struct cli_error e = {0};
	struct conn *c;
	uint32_t limit = TABLE_DEFAULT_LIMIT;
	int opt, err;

	q = (struct fetch_query){0};
	optind = 0;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			err = opt_parse_pid("table", optarg, q.pids, &q.n_pids, &e);
			break;
		case 'T':
			err = opt_parse_tid("table", optarg, &q.has_tid, &q.tid, &e);
			break;
		case 's':
			err = opt_parse_duration("table", "--since", optarg, 1, OPT_MAX_SINCE_NS,
						 "more than 0, at most 365d", &q.since_ns, &e);
			q.has_since = true;
			break;
		case 'S':
			err = view_parse_sort("table", optarg, &sort, &e);
			break;
		case 'v':
			err = view_parse_value("table", optarg, &value, &e);
			break;
		case 'l':
			err = opt_parse_count("table", "--limit", optarg, 0, 1000000, &limit, &e);
			po.limit = limit;
			break;
		case 't':
			err = opt_parse_duration("table", "--timeout", optarg, 1000000ull,
						 PROFCTL_MAX_TIMEOUT_NS, "1ms to 24h", &timeout_ns,
						 &e);
			break;
		case 'h':
			cmd_table_usage(stdout);
			return PROFCTL_EXIT_OK;
		default:
			err = view_opt(opt, &v) ? 0
						: opt_bad_option(opt, argv, longopts, "table", &e);
			break;
		}
		if (err)
			return cli_error_print(&e);
	}
	if (opt_no_operands("table", argc, argv, &e) || view_check("table", &v, &e))
		return cli_error_print(&e);
	c = conn__open(wire_socket_path(g->socket),
		       cli_timeout_ns(timeout_ns, g, PROFCTL_DUMP_TIMEOUT_NS), &e);
	if (!c)
		return cli_error_print(&e);
	err = view_fetch(c, &q, &v, &t, NULL, &e);
	conn__free(c);
	if (err)
		return cli_error_print(&e);
	vi = view_value_index(t, value);
	if (vi < 0) {
		functable__free(t);
		cli_error_set(&e, PROFCTL_EXIT_NO_SAMPLES, "table: the profile has no %s values%s",
			      value_column_name((enum value_kind)value),
			      value == VALUE_OFFCPU || value == VALUE_WALL
				  ? ": run profd with --off-cpu"
				  : "");
		return cli_error_print(&e);
	}
	functable__sort(t, sort, (size_t)vi);
	po.width = view_term_cols(STDOUT_FILENO);
	err = functable__print_table(t, &po, stdout);
	functable__free(t);
	if (err || fflush(stdout) || ferror(stdout)) {
		cli_error_set(&e, PROFCTL_EXIT_ERROR, "writing to standard output: %s",
			      strerror(errno ? errno : EIO));
		return cli_error_print(&e);
	}
	return PROFCTL_EXIT_OK;
}
