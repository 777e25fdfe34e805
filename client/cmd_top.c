// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl top: the hottest functions of a sliding window, refreshed in place like top(1).
 * On a terminal it takes the alternate screen and reads single keys; into a pipe or a file it
 * prints the table once.
 */
#define _GNU_SOURCE /* ppoll */
#include "commands.h"
#include "conn.h"
#include "fetch.h"
#include "functable.h"
#include "opts.h"
#include "flame.h"
#include "value.h"
#include "view.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "timeutil.h"
#include "wire.h"

#define TOP_DEFAULT_INTERVAL_NS (1000ull * NSEC_PER_MSEC)
#define TOP_MIN_INTERVAL_NS (100ull * NSEC_PER_MSEC)
#define TOP_MAX_INTERVAL_NS (3600ull * NSEC_PER_SEC)
#define TOP_DEFAULT_WINDOW_NS (5ull * NSEC_PER_SEC)
/* The daemon keeps samples in 1 s buckets: a shorter window would often be empty. */
#define TOP_MIN_WINDOW_NS (1ull * NSEC_PER_SEC)
#define TOP_MAX_WINDOW_NS (86400ull * NSEC_PER_SEC)
#define TOP_PLAIN_LIMIT 20
/* Lines above the table: three of status, one blank. */
#define TOP_HEADER_LINES 4

void cmd_top_usage(FILE *f)
{
	fputs("Usage: profctl [--socket PATH] top [--pid N]... [--interval DURATION]\n"
	      "               [--window DURATION] [--sort self|total] [--limit N]\n"
	      "               [--function | --no-lineno | --lines]\n"
	      "               [--native | --python-only | --all-frames] [--per-thread]\n"
	      "               [--value VALUE] [--timeout DURATION]\n"
	      "\n"
	      "Show the hottest functions of the last few seconds, refreshed in place like top.\n"
	      "Each refresh asks the daemon for the samples of a sliding window (--window) and\n"
	      "sums them per function: Self % and Self are the samples whose innermost frame is\n"
	      "the function, Total % and Total those with the function anywhere on the stack.\n"
	      "GPU columns appear once the daemon records GPU values.\n"
	      "\n"
	      "In stacks with Python frames, the native frames above the newest Python frame\n"
	      "(the interpreter's own, C extensions, libc) count as that Python function's\n"
	      "self time, as py-spy counts it; kernel and GPU frames stay. --native shows them.\n"
	      "The interpreter's own frames between two Python frames (CPython's call\n"
	      "machinery) are left out; --all-frames keeps them.\n"
	      "\n"
	      "Keys: q (or Ctrl-C) quits, s switches between sorting by self and by total.\n"
	      "When standard output is not a terminal, top prints the table once and exits.\n"
	      "\n"
	      "Options:\n"
	      "  --pid N               only process N (repeat for more); default: every process\n"
	      "                        you may see\n"
	      "  --interval DURATION   time between refreshes (default 1s, at least 100ms)\n"
	      "  --window DURATION     how far back each refresh looks (default 5s, at least 1s:\n"
	      "                        the daemon keeps samples in 1 s steps)\n"
	      "  --sort self|total     the order to start with (default self)\n"
	      "  --value VALUE         the column to order by: cpu (default), gpu, gpu-kernels,\n"
	      "                        copy, copy-bytes, launches, off-cpu or wall (profd\n"
	      "                        --off-cpu; a window without it is ordered by CPU),\n"
	      "                        gpu-memory or gpu-memory-live (bytes allocated in\n"
	      "                        the window, or still allocated at its end)\n"
	      "  --limit N             at most N rows (default: what fits the terminal; 20 when\n"
	      "                        not on a terminal)\n"
	      "  --function            a row per function, NAME (FILE) (the default)\n"
	      "  --no-lineno           no line numbers in names (here the same as --function)\n"
	      "  --lines               a row per Python line, NAME (FILE:LINE)\n"
	      "  --native              native frames above Python frames are rows of their own\n"
	      "  --python-only         no native frames between Python frames either\n"
	      "  --all-frames          the interpreter's frames between Python frames too\n"
	      "  --per-thread          a row per thread and function, with a Thread column\n"
	      "                        (TID COMM, the thread's kernel name)\n"
	      "  --timeout DURATION    how long to wait for the daemon each refresh (default 10s)\n"
	      "  -h, --help            show this help\n"
	      "\n"
	      "Examples:\n"
	      "  profctl top --pid 1234\n"
	      "  profctl top --pid 1234 --interval 300ms --window 10s --sort total\n"
	      "  profctl top --pid 1234 | head -5\n"
	      "  profctl top --pid 1234 --value wall\n",
	      f);
}

struct top_args {
	struct fetch_query q;
	uint64_t interval_ns;
	uint64_t window_ns;
	enum functable_sort sort;
	int value;	/* --value: enum value_kind, the column rows are ranked by */
	uint32_t limit; /* 0: fit the screen */
	uint64_t timeout_ns;
	bool live; /* refreshing on a terminal: conn must not draw on it */
	struct view_opts v;
};

/* Returns 0, 1 for --help, or -EINVAL with e filled. */
static int parse_args(int argc, char **argv, struct top_args *a, struct cli_error *e)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"interval", required_argument, NULL, 'i'},
	    {"window", required_argument, NULL, 'w'},
	    {"sort", required_argument, NULL, 'S'},
	    {"limit", required_argument, NULL, 'l'},
	    {"timeout", required_argument, NULL, 't'},
	    {"value", required_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    VIEW_LONGOPTS_TABLE,
	    {0},
	};
	int opt, err;

	a->interval_ns = TOP_DEFAULT_INTERVAL_NS;
	a->window_ns = TOP_DEFAULT_WINDOW_NS;
	optind = 0;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			err = opt_parse_pid("top", optarg, a->q.pids, &a->q.n_pids, e);
			break;
		case 'i':
			err = opt_parse_duration("top", "--interval", optarg, TOP_MIN_INTERVAL_NS,
						 TOP_MAX_INTERVAL_NS, "100ms to 1h",
						 &a->interval_ns, e);
			break;
		case 'v':
			err = view_parse_value("top", optarg, &a->value, e);
			break;
		case 'w':
			err = opt_parse_duration("top", "--window", optarg, TOP_MIN_WINDOW_NS,
						 TOP_MAX_WINDOW_NS, "1s to 1d", &a->window_ns, e);
			break;
		case 'S':
			err = view_parse_sort("top", optarg, &a->sort, e);
			break;
		case 'l':
			err = opt_parse_count("top", "--limit", optarg, 1, 100000, &a->limit, e);
			break;
		case 't':
			err = opt_parse_duration("top", "--timeout", optarg, 1000000ull,
						 PROFCTL_MAX_TIMEOUT_NS, "1ms to 24h",
						 &a->timeout_ns, e);
			break;
		case 'h':
			return 1;
		default:
			err = view_opt(opt, &a->v) ? 0
						   : opt_bad_option(opt, argv, longopts, "top", e);
			break;
		}
		if (err)
			return err;
	}
	err = opt_no_operands("top", argc, argv, e);
	if (!err)
		err = view_check("top", &a->v, e);
	if (err)
		return err;
	a->q.has_since = true;
	a->q.since_ns = a->window_ns;
	return 0;
}

/* ---- one refresh: status and the window's table --------------------------------------------- */

struct snapshot {
	Profd__Response *status;  /* NULL until the first refresh */
	Profd__Response *profile; /* NULL when the window held no samples */
	struct functable *table;
	uint64_t rate; /* samples/s the daemon received since the last refresh; 0: unknown */
	char when[16]; /* local time of the refresh */
};

static void snapshot_clear(struct snapshot *s)
{
	if (s->status)
		profd__response__free_unpacked(s->status, NULL);
	if (s->profile)
		profd__response__free_unpacked(s->profile, NULL);
	functable__free(s->table);
	*s = (struct snapshot){0};
}

/*
 * Replace *s with a fresh status and table. A window without samples is not an error: the
 * target may be idle for a while. Returns 0 or a negative errno with e filled.
 */
static int refresh(const char *path, const struct top_args *a, struct snapshot *s,
		   struct cli_error *e)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__StatusRequest sreq = PROFD__STATUS_REQUEST__INIT;
	struct snapshot n = {0};
	struct conn *c;
	struct tm tm;
	time_t now;
	int err;

	/* A connection per refresh: the daemon closes idle ones, and intervals may be long. */
	c = conn__open(path, a->timeout_ns, e);
	if (!c)
		return errno ? -errno : -EIO;
	conn__set_quiet(c, a->live);
	req.msg_case = PROFD__REQUEST__MSG_STATUS;
	req.status = &sreq;
	err = conn__call(c, &req, PROFD__RESPONSE__MSG_STATUS, &n.status, e);
	if (err)
		goto out;
	err = view_fetch(c, &a->q, &a->v, &n.table, &n.profile, e);
	if (err == -EREMOTEIO && e->code == PROFCTL_EXIT_NO_SAMPLES)
		err = 0;
	if (err)
		goto out;
	if (s->status) {
		const Profd__StatusReply *o = s->status->status, *st = n.status->status;

		if (st->now_ns > o->now_ns && st->samples_received >= o->samples_received)
			n.rate = (uint64_t)((double)(st->samples_received - o->samples_received) *
					    1e9 / (double)(st->now_ns - o->now_ns));
	}
	now = time(NULL);
	if (!localtime_r(&now, &tm) || !strftime(n.when, sizeof(n.when), "%H:%M:%S", &tm))
		snprintf(n.when, sizeof(n.when), "?");
	snapshot_clear(s);
	*s = n;
	n = (struct snapshot){0};
out:
	snapshot_clear(&n);
	conn__free(c);
	return err;
}

/* ---- drawing -------------------------------------------------------------------------------- */

/* A name for a terminal line: printable ASCII only, at most 32 bytes. */
static void safe_name(const char *in, char *out, size_t len)
{
	size_t i = 0;

	for (; in && *in && i + 1 < len && i < 32; in++)
		out[i++] = (unsigned char)*in < 0x20 || (unsigned char)*in >= 0x7f ? '?' : *in;
	out[i] = '\0';
}

static void print_target(FILE *out, const struct top_args *a, const struct snapshot *s)
{
	char name[40];

	if (!a->q.n_pids) {
		fputs("all processes", out);
		return;
	}
	fputs(a->q.n_pids == 1 ? "pid" : "pids", out);
	for (size_t i = 0; i < a->q.n_pids; i++) {
		const char *pn =
		    s->profile ? profile_process_name(s->profile->profile, a->q.pids[i]) : NULL;

		if (i == 4) {
			fprintf(out, " and %zu more", a->q.n_pids - i);
			break;
		}
		safe_name(pn, name, sizeof(name));
		fprintf(out, "%s %" PRIu32 "%s%s%s", i ? "," : "", a->q.pids[i], *name ? " (" : "",
			name, *name ? ")" : "");
	}
}

/* The status lines above the table. */
static void print_header(FILE *out, const struct top_args *a, const struct snapshot *s,
			 bool interactive)
{
	const Profd__StatusReply *st = s->status ? s->status->status : NULL;
	uint64_t window_samples = 0, period = 0;
	char d1[32], d2[32], rate[32];

	if (s->table) {
		window_samples = functable__sum(s->table, functable__cpu_index(s->table));
		period = functable__period_ns(s->table);
	}
	fputs("profctl top: ", out);
	print_target(out, a, s);
	fprintf(out, " - %s\n", s->when);

	if (s->rate)
		snprintf(rate, sizeof(rate), "%" PRIu64, s->rate);
	else
		snprintf(rate, sizeof(rate), "-");
	if (st)
		fprintf(out,
			"daemon: %" PRIu32 " Hz on %" PRIu32 " CPUs, %s samples/s, %" PRIu64
			" lost, %" PRIu64 " evicted\n",
			st->frequency_hz, st->ncpus, rate, st->samples_lost_ringbuf,
			st->samples_evicted);
	else
		fputs("daemon: -\n", out);

	fprintf(out, "window: last %s, %" PRIu64 " samples",
		fmt_duration(a->window_ns, d1, sizeof(d1)), window_samples);
	if (period && window_samples)
		fprintf(out, " (%s CPU)",
			functable_fmt_time(window_samples > UINT64_MAX / period
					       ? UINT64_MAX
					       : window_samples * period,
					   d2, sizeof(d2)));
	fprintf(out, ", sort: %s", a->sort == FUNCTABLE_SORT_SELF ? "self" : "total");
	if (interactive)
		fprintf(out, ", every %s; q quits, s sorts",
			fmt_duration(a->interval_ns, d2, sizeof(d2)));
	fputs("\n\n", out);
}

/* Print one screen into out; returns 0 or -EIO. */
static int draw(FILE *out, const struct top_args *a, const struct snapshot *s, unsigned cols,
		unsigned rows, bool interactive)
{
	struct functable_print_opts po = {.width = cols, .ansi = interactive};

	print_header(out, a, s, interactive);
	if (interactive) {
		/* What fits below the header and the column header. */
		po.limit = rows > TOP_HEADER_LINES + 1 ? rows - TOP_HEADER_LINES - 1 : 1;
		if (a->limit && a->limit < po.limit)
			po.limit = a->limit;
	} else {
		po.limit = a->limit ? a->limit : TOP_PLAIN_LIMIT;
	}
	if (s->table) {
		long vi = view_value_index(s->table, a->value);

		functable__sort(s->table, a->sort,
				vi < 0 ? functable__cpu_index(s->table) : (size_t)vi);
		return functable__print_top(s->table, &po, out);
	}
	fputs("(no samples in the window: is the target idle?)\n", out);
	return ferror(out) ? -EIO : 0;
}

/*
 * Copy the frame in buf to the terminal: from the top left, each line cut to cols columns
 * (escape sequences take none) and cleared to its end, at most rows lines so the screen never
 * scrolls, then the rest of the screen cleared. One write, so the screen does not flicker.
 */
static int paint(const char *buf, size_t len, unsigned cols, unsigned rows)
{
	size_t cap = len + 64, n = 0, col = 0, line = 0;
	bool in_esc = false, cut = false;
	int err = 0;
	char *o;

	/* Each line break gains a reset and a clear. */
	for (size_t i = 0; i < len; i++)
		cap += buf[i] == '\n' ? 16 : 0;
	o = malloc(cap);
	if (!o)
		return -ENOMEM;
	n += (size_t)snprintf(o, cap, "\033[H");
	for (size_t i = 0; i < len && line < rows; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (n + 16 > cap)
			break;
		if (c == '\n') {
			n += (size_t)snprintf(o + n, cap - n, "\033[0m\033[K");
			if (++line < rows)
				o[n++] = '\n';
			col = 0;
			cut = false;
			continue;
		}
		if (c == 0x1b)
			in_esc = true;
		if (in_esc) {
			o[n++] = (char)c;
			if (c >= 0x40 && c <= 0x7e && c != '[')
				in_esc = false;
			continue;
		}
		if (cut)
			continue;
		if ((c & 0xc0) != 0x80 && cols && col++ >= cols) {
			cut = true;
			continue;
		}
		o[n++] = (char)c;
	}
	n += (size_t)snprintf(o + n, cap - n, "\033[J");
	for (size_t off = 0; off < n;) {
		ssize_t w = write(STDOUT_FILENO, o + off, n - off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		off += (size_t)w;
	}
	free(o);
	return err;
}

/* ---- the terminal --------------------------------------------------------------------------- */

static volatile sig_atomic_t got_signal; /* the signal that asks us to stop, 0: none */
static volatile sig_atomic_t got_winch;

static void on_signal(int sig)
{
	if (sig == SIGWINCH)
		got_winch = 1;
	else
		got_signal = sig;
}

struct term {
	bool raw;    /* stdin's settings are changed and saved in saved */
	bool screen; /* the alternate screen is on */
	struct termios saved;
	sigset_t old_mask;
	struct sigaction old_act[4];
};

static const int term_signals[4] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};

static void put(const char *s)
{
	size_t len = strlen(s);

	while (len) {
		ssize_t w = write(STDOUT_FILENO, s, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		len -= (size_t)w;
	}
}

/*
 * Take the terminal: signals that end us are held back except while waiting (so the screen
 * is always restored), keys arrive one by one without echo, the alternate screen is on.
 */
static int term_enter(struct term *t)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigset_t block;
	int err;

	sigemptyset(&block);
	for (size_t i = 0; i < 4; i++)
		sigaddset(&block, term_signals[i]);
	if (sigprocmask(SIG_BLOCK, &block, &t->old_mask) < 0)
		return -errno;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < 4; i++)
		sigaction(term_signals[i], &sa, &t->old_act[i]);
	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t->saved) == 0) {
		struct termios raw = t->saved;

		/* No ISIG: Ctrl-C and Ctrl-Z arrive as keys, so a stop never leaves raw mode. */
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
		raw.c_cc[VMIN] = 1;
		raw.c_cc[VTIME] = 0;
		if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) < 0) {
			err = -errno;
			return err;
		}
		t->raw = true;
	}
	/* Alternate screen, cursor hidden, cleared. */
	put("\033[?1049h\033[?25l\033[H\033[2J");
	t->screen = true;
	return 0;
}

static void term_leave(struct term *t)
{
	if (t->screen)
		put("\033[0m\033[?25h\033[?1049l");
	if (t->raw)
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &t->saved);
	for (size_t i = 0; i < 4; i++)
		sigaction(term_signals[i], &t->old_act[i], NULL);
	sigprocmask(SIG_SETMASK, &t->old_mask, NULL);
	t->screen = t->raw = false;
}

static void term_size(unsigned *cols, unsigned *rows)
{
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		*cols = ws.ws_col;
		*rows = ws.ws_row;
	} else {
		*cols = 80;
		*rows = 24;
	}
}

enum key_action {
	KEY_NONE,
	KEY_QUIT,
	KEY_SORT,
};

static enum key_action read_keys(int fd, bool *eof)
{
	enum key_action act = KEY_NONE;
	char buf[64];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
		*eof = true;
		return KEY_NONE;
	}
	for (ssize_t i = 0; i < n; i++) {
		switch (buf[i]) {
		case 'q':
		case 'Q':
		case 0x03: /* Ctrl-C */
			return KEY_QUIT;
		case 's':
		case 'S':
			act = KEY_SORT;
			break;
		default:
			break;
		}
	}
	return act;
}

static int render_screen(const struct top_args *a, const struct snapshot *s)
{
	unsigned cols, rows;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int err;

	term_size(&cols, &rows);
	f = open_memstream(&buf, &len);
	if (!f)
		return -errno;
	err = draw(f, a, s, cols, rows, true);
	if (fclose(f) && !err)
		err = -EIO;
	if (!err)
		err = paint(buf, len, cols, rows);
	free(buf);
	return err;
}

/* The live view. Returns an exit code; e is filled when it is not 0. */
static int run_live(const char *path, struct top_args *a, struct cli_error *e, int *stop_sig)
{
	struct snapshot s = {0};
	struct term t = {0};
	bool keys = isatty(STDIN_FILENO), eof = false;
	int err, ret = PROFCTL_EXIT_OK;

	err = term_enter(&t);
	if (err) {
		term_leave(&t);
		cli_error_set(e, PROFCTL_EXIT_ERROR, "cannot set up the terminal: %s",
			      strerror(-err));
		return e->code;
	}
	while (!got_signal) {
		uint64_t next = mono_ns() + a->interval_ns;
		bool redraw = true;

		err = refresh(path, a, &s, e);
		if (err) {
			ret = e->code;
			break;
		}
		/* Wait for the next refresh, redrawing at once for a key or a resize. */
		while (!got_signal) {
			struct pollfd pfd = {.fd = keys && !eof ? STDIN_FILENO : -1,
					     .events = POLLIN};
			uint64_t now = mono_ns();
			struct timespec ts;

			if (redraw) {
				err = render_screen(a, &s);
				if (err) {
					cli_error_set(e, PROFCTL_EXIT_ERROR,
						      "writing to the terminal: %s",
						      strerror(-err));
					ret = e->code;
					goto out;
				}
				redraw = false;
			}
			if (now >= next)
				break;
			ts.tv_sec = (time_t)((next - now) / NSEC_PER_SEC);
			ts.tv_nsec = (long)((next - now) % NSEC_PER_SEC);
			/* Signals are let in only here, so none can slip past the check above. */
			if (ppoll(&pfd, 1, &ts, &t.old_mask) < 0) {
				if (errno != EINTR) {
					err = -errno;
					cli_error_set(e, PROFCTL_EXIT_ERROR, "poll: %s",
						      strerror(-err));
					ret = e->code;
					goto out;
				}
			}
			if (got_winch) {
				got_winch = 0;
				redraw = true;
			}
			if (pfd.fd >= 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
				switch (read_keys(STDIN_FILENO, &eof)) {
				case KEY_QUIT:
					goto out;
				case KEY_SORT:
					a->sort = a->sort == FUNCTABLE_SORT_SELF
						      ? FUNCTABLE_SORT_TOTAL
						      : FUNCTABLE_SORT_SELF;
					redraw = true;
					break;
				default:
					break;
				}
			}
		}
	}
out:
	term_leave(&t);
	snapshot_clear(&s);
	/* SIGINT is how people stop a live view: not a failure. */
	if (got_signal && got_signal != SIGINT)
		*stop_sig = got_signal;
	return ret;
}

/* Not a terminal: one table, then exit. */
static int run_plain(const char *path, const struct top_args *a, struct cli_error *e)
{
	struct snapshot s = {0};
	int err;

	err = refresh(path, a, &s, e);
	if (err)
		return e->code;
	if (!s.table) {
		snapshot_clear(&s);
		cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES,
			      "no samples in the last %.3gs: is the target idle? widen --window or "
			      "check the --pid",
			      (double)a->window_ns / 1e9);
		return e->code;
	}
	err = draw(stdout, a, &s, 0, 0, false);
	snapshot_clear(&s);
	if (err || fflush(stdout) || ferror(stdout)) {
		cli_error_set(e, PROFCTL_EXIT_ERROR, "writing to standard output: %s",
			      strerror(errno ? errno : EIO));
		return e->code;
	}
	return PROFCTL_EXIT_OK;
}

int cmd_top(int argc, char **argv, const struct global_opts *g)
{
	static struct top_args a; /* large: keep it off the stack */
	struct cli_error e = {0};
	int err, ret, stop_sig = 0;
	const char *path;

	a = (struct top_args){0};
	err = parse_args(argc, argv, &a, &e);
	if (err < 0)
		return cli_error_print(&e);
	if (err == 1) {
		cmd_top_usage(stdout);
		return PROFCTL_EXIT_OK;
	}
	a.timeout_ns = cli_timeout_ns(a.timeout_ns, g, PROFCTL_STATUS_TIMEOUT_NS);
	path = wire_socket_path(g->socket);
	a.live = isatty(STDOUT_FILENO);
	if (!a.live)
		ret = run_plain(path, &a, &e);
	else
		ret = run_live(path, &a, &e, &stop_sig);
	if (ret != PROFCTL_EXIT_OK)
		return cli_error_print(&e);
	if (stop_sig) {
		/* Die of the signal, now that the terminal is back, so the parent sees it. */
		signal(stop_sig, SIG_DFL);
		raise(stop_sig);
	}
	return PROFCTL_EXIT_OK;
}
