// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl record: start a command, have the daemon follow it and the processes it starts from
 * its first instruction, wait for it (or Ctrl-C, or --duration), then write its profile and
 * exit with the command's status. The command runs as profctl's user: the daemon accepts
 * the request for processes of the caller's own uid.
 */
#define _GNU_SOURCE
#include "commands.h"
#include "cmd_dump.h"
#include "conn.h"
#include "opts.h"
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "parse.h"
#include "timeutil.h"
#include "wire.h"

/* After Ctrl-C, how long the command may take to exit before its profile is written anyway. */
#define INTERRUPT_GRACE_NS (2 * NSEC_PER_SEC)
/* The daemon drains the kernel's ring buffer every 100 ms: wait for the last samples. */
#define DRAIN_WAIT_NS (300 * NSEC_PER_MSEC)
#define POLL_NS (20 * NSEC_PER_MSEC)

struct record_args {
	bool help;
	const char *output;
	enum dump_format format;
	bool has_duration;
	uint64_t duration_ns;
	uint64_t timeout_ns;
	bool python_only;
	bool all_frames;
	char **cmd; /* NULL-terminated, argv's */
};

void cmd_record_usage(FILE *f)
{
	fputs("Usage: profctl [--socket PATH] record [-o FILE] [--format FORMAT]\n"
	      "               [--duration DURATION] [--python-only | --all-frames]\n"
	      "               [--timeout DURATION]\n"
	      "               [--] COMMAND [ARG]...\n"
	      "\n"
	      "Run COMMAND, profile it and every process it starts until it exits, then write\n"
	      "its flame graph and exit with COMMAND's exit status (128+N when killed by signal\n"
	      "N; when COMMAND succeeded but the profile could not be written, profctl's error\n"
	      "code). Ctrl-C stops the command and still writes the profile. The daemon must be\n"
	      "running; it follows COMMAND for you when COMMAND runs as your user (root may\n"
	      "record anything). Without a daemon, 'sudo profd --record -- COMMAND' does the\n"
	      "same on its own.\n"
	      "\n"
	      "Options:\n"
	      "  -o, --output FILE      where the profile goes (default: NAME-PID.svg in the\n"
	      "                         current directory, NAME the command's file name)\n"
	      "  --format FORMAT        folded, svg, pprof, speedscope or json (default: from\n"
	      "                         FILE's suffix, else svg)\n"
	      "  --duration DURATION    profile only the first DURATION (30s, 5m); the command\n"
	      "                         runs on and profctl still waits for it\n"
	      "  --python-only          hide the native frames between Python frames\n"
	      "  --all-frames           keep every frame: without it, the interpreter's own\n"
	      "                         frames between two Python frames (CPython's call\n"
	      "                         machinery) are hidden\n"
	      "  --timeout DURATION     how long to wait for the daemon's answers (default 60s)\n"
	      "  -h, --help             show this help\n"
	      "\n"
	      "Each process is a root frame 'pid N (NAME)' with its stacks above it.\n"
	      "\n"
	      "Examples:\n"
	      "  profctl record -o train.svg -- python train.py --epochs 1\n"
	      "  profctl record --format pprof -o cpu.pb.gz -- ./build/bench\n"
	      "  profctl record --duration 30s -- python serve.py\n",
	      f);
}

static const struct option record_longopts[] = {
    {"output", required_argument, NULL, 'o'},
    {"format", required_argument, NULL, 'f'},
    {"duration", required_argument, NULL, 'd'},
    {"timeout", required_argument, NULL, 't'},
    {"python-only", no_argument, NULL, 'P'},
    {"all-frames", no_argument, NULL, 'A'}, /* dump's view option, which record passes on */
    {"help", no_argument, NULL, 'h'},
    {0},
};

static int record_parse_args(int argc, char **argv, struct record_args *a, struct cli_error *e)
{
	int opt, err;

	*a = (struct record_args){0};
	optind = 0;
	opterr = 0;
	/* "+": the options end at the command, whose own options stay its. */
	while ((opt = getopt_long(argc, argv, "+:o:h", record_longopts, NULL)) != -1) {
		switch (opt) {
		case 'o':
			err = opt_parse_output("record", optarg, &a->output, e);
			break;
		case 'f':
			err = dump_format_parse(optarg, &a->format)
				  ? opt_bad_value(e, "record", "--format", optarg,
						  "is not folded, svg, pprof, speedscope or json")
				  : 0;
			break;
		case 'd':
			err = parse_duration_ns(optarg, NSEC_PER_MSEC, OPT_MAX_SINCE_NS,
						&a->duration_ns);
			if (err)
				err = opt_bad_value(e, "record", "--duration", optarg,
						    "is not a duration from 1ms to 365d (30s, 5m)");
			a->has_duration = true;
			break;
		case 't':
			err = opt_parse_timeout("record", optarg, &a->timeout_ns, e);
			break;
		case 'P':
			a->python_only = true;
			err = 0;
			break;
		case 'A':
			a->all_frames = true;
			err = 0;
			break;
		case 'h':
			a->help = true;
			return 0;
		default:
			return opt_bad_option(opt, argv, record_longopts, "record", e);
		}
		if (err)
			return err;
	}
	if (a->python_only && a->all_frames) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "record: --all-frames cannot go with --python-only; see 'profctl "
			      "record --help'");
		return -EINVAL;
	}
	if (optind >= argc) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "record: say which command to run, as in 'profctl record -- python "
			      "train.py'; see 'profctl record --help'");
		return -EINVAL;
	}
	a->cmd = argv + optind;
	/* By the file's suffix; one that says nothing gets the SVG people expect from record. */
	if (a->format == DUMP_FORMAT_DEFAULT && a->output) {
		size_t n = strlen(a->output);

		a->format = output_format_for_file(a->output);
		if (a->format == DUMP_FORMAT_FOLDED &&
		    (n < 7 || strcmp(a->output + n - 7, ".folded") != 0))
			a->format = DUMP_FORMAT_SVG;
	}
	if (a->format == DUMP_FORMAT_DEFAULT)
		a->format = DUMP_FORMAT_SVG;
	return 0;
}

static const char *format_suffix(enum dump_format f)
{
	switch (f) {
	case DUMP_FORMAT_FOLDED:
		return ".folded";
	case DUMP_FORMAT_PPROF:
		return ".pb.gz";
	case DUMP_FORMAT_SPEEDSCOPE:
		return ".speedscope.json";
	case DUMP_FORMAT_JSON:
		return ".json";
	default:
		return ".svg";
	}
}

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	interrupted = sig;
}

/*
 * Fork the command, held before its exec until *go_fd is written (or closed: it then exits
 * 127 without running anything). *err_fd then reads the exec's errno, or end of file once it
 * ran. Returns the pid or a negative errno.
 */
static pid_t fork_held(char **cmd, int *go_fd, int *err_fd)
{
	int go[2], ep[2];
	pid_t pid;

	if (pipe2(go, O_CLOEXEC))
		return -errno;
	if (pipe2(ep, O_CLOEXEC)) {
		int err = -errno;

		close(go[0]);
		close(go[1]);
		return err;
	}
	pid = fork();
	if (pid == 0) {
		char c;
		ssize_t n;
		int err;

		close(go[1]);
		close(ep[0]);
		do
			n = read(go[0], &c, 1);
		while (n < 0 && errno == EINTR);
		if (n != 1)
			_exit(127);
		execvp(cmd[0], cmd);
		err = errno;
		if (write(ep[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(err == ENOENT ? 127 : 126);
	}
	close(go[0]);
	close(ep[1]);
	if (pid < 0) {
		int err = -errno;

		close(go[1]);
		close(ep[0]);
		return err;
	}
	*go_fd = go[1];
	*err_fd = ep[0];
	return pid;
}

/* Let the held child go; returns the exec's errno, or 0 once it ran. */
static int release(int go_fd, int err_fd)
{
	int child_err = 0;
	ssize_t n;

	n = write(go_fd, "g", 1);
	close(go_fd);
	if (n != 1) {
		close(err_fd);
		return EPIPE;
	}
	do
		n = read(err_fd, &child_err, sizeof(child_err));
	while (n < 0 && errno == EINTR);
	close(err_fd);
	return n == (ssize_t)sizeof(child_err) ? child_err : 0;
}

static int exit_code_of(int status)
{
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* Ask the daemon to follow pid. Returns 0 with *start_ns set, or an exit code (printed). */
static int follow(const char *socket, uint64_t timeout_ns, uint32_t pid, uint64_t *start_ns)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__FollowRequest fr = PROFD__FOLLOW_REQUEST__INIT;
	Profd__Response *resp = NULL;
	struct cli_error e = {0};
	struct conn *c;

	c = conn__open(socket, timeout_ns, &e);
	if (!c)
		return cli_error_print(&e);
	fr.pid = pid;
	req.msg_case = PROFD__REQUEST__MSG_FOLLOW;
	req.follow = &fr;
	if (conn__call(c, &req, PROFD__RESPONSE__MSG_FOLLOW, &resp, &e)) {
		conn__free(c);
		return cli_error_print(&e);
	}
	*start_ns = resp->follow->has_now_ns ? resp->follow->now_ns : 0;
	if (resp->follow->has_children && !resp->follow->children)
		fprintf(stderr, "profctl: record: the daemon runs with --no-children: the "
				"processes the command starts are not profiled\n");
	profd__response__free_unpacked(resp, NULL);
	conn__free(c);
	return 0;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / NSEC_PER_SEC), (long)(ns % NSEC_PER_SEC)};

	nanosleep(&ts, NULL);
}

/*
 * Wait for pid until it exits, Ctrl-C (then at most INTERRUPT_GRACE_NS more), or deadline_ns.
 * Returns true with *status set when it exited.
 */
static bool wait_command(pid_t pid, uint64_t deadline_ns, int *status)
{
	uint64_t grace_end = 0;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		uint64_t now = mono_ns();

		if (r == pid)
			return true;
		if (r < 0 && errno != EINTR)
			return false;
		if (interrupted && !grace_end)
			grace_end = now + INTERRUPT_GRACE_NS;
		if ((grace_end && now >= grace_end) || now >= deadline_ns)
			return false;
		sleep_ns(POLL_NS);
	}
}

int cmd_record(int argc, char **argv, const struct global_opts *g)
{
	struct sigaction sa = {.sa_handler = on_interrupt}, old_int, old_term;
	const char *socket = wire_socket_path(g->socket);
	struct record_args a;
	struct dump_args d = {0};
	struct cli_error e = {0};
	uint64_t timeout, start_ns = 0;
	int go_fd = -1, err_fd = -1, status = 0, ret, child_err;
	char outbuf[128];
	struct conn *c;
	bool exited;
	pid_t pid;

	if (record_parse_args(argc, argv, &a, &e))
		return cli_error_print(&e);
	if (a.help) {
		cmd_record_usage(stdout);
		return PROFCTL_EXIT_OK;
	}
	timeout = cli_timeout_ns(a.timeout_ns, g, PROFCTL_DUMP_TIMEOUT_NS);

	pid = fork_held(a.cmd, &go_fd, &err_fd);
	if (pid < 0) {
		cli_error_set(&e, PROFCTL_EXIT_ERROR, "record: cannot start a process: %s",
			      strerror((int)-pid));
		return cli_error_print(&e);
	}
	ret = follow(socket, timeout, (uint32_t)pid, &start_ns);
	if (ret) {
		/* Closing the pipe makes the held child exit without running the command. */
		close(go_fd);
		close(err_fd);
		waitpid(pid, NULL, 0);
		return ret;
	}
	/* The command gets Ctrl-C from the terminal; profctl only stops waiting. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	child_err = release(go_fd, err_fd);
	if (child_err) {
		waitpid(pid, &status, 0);
		cli_error_set(&e, child_err == ENOENT ? 127 : 126, "record: cannot run '%s': %s",
			      a.cmd[0], strerror(child_err));
		return cli_error_print(&e);
	}

	exited =
	    wait_command(pid, a.has_duration ? mono_ns() + a.duration_ns : UINT64_MAX, &status);
	sleep_ns(DRAIN_WAIT_NS);

	d.kind = DUMP_KIND_FLAMEGRAPH;
	d.q.pids[0] = (uint32_t)pid;
	d.q.n_pids = 1;
	d.q.children = true;
	d.q.has_start = start_ns != 0;
	d.q.start_ns = start_ns;
	d.children = true;
	d.format = a.format;
	d.v.python_only = a.python_only;
	d.v.all_frames = a.all_frames;
	d.nvtx = true;
	d.output = a.output;
	if (!d.output) {
		const char *base = strrchr(a.cmd[0], '/');

		base = base ? base + 1 : a.cmd[0];
		snprintf(outbuf, sizeof(outbuf), "%.64s-%d%s", *base ? base : "record", (int)pid,
			 format_suffix(a.format));
		d.output = outbuf;
	}
	c = conn__open(socket, timeout, &e);
	if (!c) {
		ret = cli_error_print(&e);
	} else {
		ret = dump_flamegraph(c, &d);
		conn__free(c);
	}
	if (ret == PROFCTL_EXIT_OK)
		fprintf(stderr, "profctl: record: wrote %s\n", d.output);

	if (!exited && !interrupted) {
		/* --duration ended the profile, not the command: it still runs as ours. */
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGTERM, &old_term, NULL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		exited = true;
	}
	/* The command's failure is the news; else the profile's, if it could not be written. */
	status = exited ? exit_code_of(status) : 128 + (int)interrupted;
	return status ? status : ret;
}
