// SPDX-License-Identifier: BSD-2-Clause
/* profctl: the command-line client of profd. Global options, then one command. */
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include <string.h>

#include "parse.h"
#include "wire.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv, const struct global_opts *g);
	void (*usage)(FILE *f);
	const char *summary;
};

static const struct command commands[] = {
    {"status", cmd_status, cmd_status_usage, "what the daemon is doing"},
    {"dump", cmd_dump, cmd_dump_usage, "fetch samples and render a flame graph"},
    {"top", cmd_top, cmd_top_usage, "live table of the hottest functions"},
    {"table", cmd_table, cmd_table_usage, "one-shot table of the hottest functions"},
    {"diff", cmd_diff, cmd_diff_usage, "differential flame graph of two profiles"},
    {"report", cmd_report, cmd_report_usage, "GPU busy time, top kernels, idle CPU stacks"},
    {"record", cmd_record, cmd_record_usage, "run a command and write its profile"},
};

static void usage(FILE *f)
{
	fputs("Usage: profctl [--socket PATH] [--timeout DURATION] COMMAND [OPTIONS]\n"
	      "       profctl --help | --version\n"
	      "\n"
	      "Talk to the profd sampling profiler daemon.\n"
	      "\n"
	      "Commands:\n",
	      f);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s%s\n", commands[i].name, commands[i].summary);
	fputs("\n"
	      "Options:\n"
	      "  --socket PATH       the daemon's socket (default: $" PROFD_SOCKET_ENV ", else\n"
	      "                      " PROFD_DEFAULT_SOCKET ")\n"
	      "  --timeout DURATION  how long to wait for the daemon (default: 10s for status,\n"
	      "                      60s for dump and report)\n"
	      "  -h, --help          show this help; 'profctl help COMMAND' for a command\n"
	      "  -V, --version       show the version\n"
	      "\n"
	      "Exit codes:\n"
	      "  0  success\n"
	      "  1  other error (writing the output, a failure inside the daemon)\n"
	      "  2  bad command line\n"
	      "  3  no daemon at the socket, or it closed the connection\n"
	      "  4  permission denied (by the socket's file mode or by the daemon)\n"
	      "  5  no samples matched (--pid, --tid, --since), or no --value column\n"
	      "  6  protocol error: profd and profctl versions do not match\n"
	      "  7  timeout: the daemon did not answer in time\n"
	      "\n"
	      "Examples:\n"
	      "  profctl status\n"
	      "  profctl dump flamegraph --pid 1234 --since 30s -o cpu.svg\n"
	      "  profctl dump flamegraph --pid 1234 --value gpu -o gpu.svg\n"
	      "  profctl dump trace --pid 1234 --since 10s -o trace.json\n"
	      "  profctl report --pid 1234\n"
	      "  profctl top --pid 1234\n"
	      "  profctl table --pid 1234 --since 30s\n"
	      "  profctl record -o train.svg -- python train.py\n"
	      "  PROFD_SOCKET=/tmp/profd.sock profctl status --json\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"socket", required_argument, NULL, 'S'},
	    {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {0},
	};
	struct global_opts g = {0};
	struct cli_error e = {0};
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'S':
			if (!*optarg) {
				cli_error_set(&e, PROFCTL_EXIT_USAGE,
					      "--socket needs a path; see 'profctl --help'");
				return cli_error_print(&e);
			}
			g.socket = optarg;
			break;
		case 't':
			if (opt_parse_timeout("profctl", optarg, &g.timeout_ns, &e))
				return cli_error_print(&e);
			break;
		case 'h':
			usage(stdout);
			return PROFCTL_EXIT_OK;
		case 'V':
			printf("profctl %s (protocol %d)\n", PROFD_VERSION, PROFD_PROTOCOL_VERSION);
			return PROFCTL_EXIT_OK;
		default:
			opt_bad_option(opt, argv, longopts, "profctl", &e);
			return cli_error_print(&e);
		}
	}
	if (optind >= argc) {
		cli_error_set(&e, PROFCTL_EXIT_USAGE,
			      "no command given (status, dump, report, ...); see 'profctl --help'");
		return cli_error_print(&e);
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[optind], commands[i].name) == 0)
			return commands[i].run(argc - optind, argv + optind, &g);
	if (strcmp(argv[optind], "help") == 0) {
		/* "profctl help dump" is what many people type first. */
		for (size_t i = 0; optind + 1 < argc && i < sizeof(commands) / sizeof(commands[0]);
		     i++) {
			if (strcmp(argv[optind + 1], commands[i].name) == 0) {
				commands[i].usage(stdout);
				return PROFCTL_EXIT_OK;
			}
		}
		usage(stdout);
		return PROFCTL_EXIT_OK;
	}
	cli_error_set(&e, PROFCTL_EXIT_USAGE, "unknown command '%s'; see 'profctl --help'",
		      argv[optind]);
	return cli_error_print(&e);
}
