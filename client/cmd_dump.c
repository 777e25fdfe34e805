// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl dump flamegraph: ask the daemon for a profile and render it as folded stacks, SVG,
 * pprof, speedscope or JSON. profctl dump trace: ask for the raw events of a recent window and
 * write them as Chrome trace event JSON.
 */
#define _GNU_SOURCE /* asprintf */
#include "cli.h"
#include "conn.h"
#include "format.h"
#include "profile.h"
#include "trace.h"
#include "value.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parse.h"
#include "wire.h"

#define MAX_SINCE_NS (365ull * 86400 * 1000000000ull)

void cmd_dump_usage(FILE *f)
{
	fputs("Usage: profctl [--socket PATH] dump flamegraph [--pid N]... [--tid N]\n"
	      "               [--since DURATION] [--format FORMAT] [-o FILE] [--python-only]\n"
	      "               [--value VALUE | --gpu-idle] [--nvtx] [--timeout DURATION]\n"
	      "       profctl [--socket PATH] dump trace [--pid N]... [--since DURATION]\n"
	      "               [-o FILE] [--timeout DURATION]\n"
	      "\n"
	      "flamegraph: fetch the samples the daemon holds and render them as a flame graph,\n"
	      "or write them in a format other tools read.\n"
	      "trace: fetch the raw events of a recent window (CPU samples, CUDA calls, kernels,\n"
	      "copies, NVTX ranges, launches) as Chrome trace event JSON for Perfetto\n"
	      "(ui.perfetto.dev) and chrome://tracing.\n"
	      "\n"
	      "Options:\n"
	      "  --pid N              only process N (repeat for more); without it every process\n"
	      "                       you may see, each under its own root frame (its name)\n"
	      "  --tid N              only thread N\n"
	      "  --since DURATION     only the last DURATION (30s, 5m, 1h, 500ms; bare number: s)\n"
	      "  --format FORMAT      one of:\n"
	      "                         folded      folded stacks for flamegraph.pl and inferno\n"
	      "                         svg         interactive flame graph\n"
	      "                         pprof       gzipped profile.proto for go tool pprof,\n"
	      "                                     Pyroscope, Parca, Grafana\n"
	      "                         speedscope  speedscope's JSON, one profile per thread\n"
	      "                         json        the whole profile as JSON, for scripts\n"
	      "                       default: from FILE's suffix (.svg, .pb.gz or .pprof,\n"
	      "                       .speedscope.json, .json), else folded\n"
	      "  -o, --output FILE    write FILE (atomically: a temporary file, then rename)\n"
	      "                       instead of standard output\n"
	      "  --python-only        hide the native frames between Python frames (the\n"
	      "                       interpreter's); C extensions above and main below stay\n"
	      "  --value VALUE        what the widths measure, one of:\n"
	      "                         cpu          CPU samples (default)\n"
	      "                         gpu          GPU kernel time by launching stack\n"
	      "                         gpu-kernels  kernels by launching stack\n"
	      "                         copy         memcpy/memset time by launching stack\n"
	      "                         copy-bytes   bytes copied by launching stack\n"
	      "                         launches     launches seen by the libcuda uprobes\n"
	      "                                      (processes without the CUPTI library)\n"
	      "  --gpu-idle           only CPU samples taken while none of the process's GPU\n"
	      "                       kernels ran: what the host did while the GPU starved\n"
	      "  --nvtx               keep NVTX ranges as frames at the root ([nvtx] NAME)\n"
	      "  --timeout DURATION   how long to wait for the daemon (default 60s)\n"
	      "  -h, --help           show this help\n"
	      "\n"
	      "Frame names: kernel frames end in _[k], GPU frames (a kernel or [memcpy HtoD]\n"
	      "above its launching stack) in _[g], Python frames read NAME (FILE:LINE), NVTX\n"
	      "ranges read [nvtx] NAME, frames without a symbol read [unknown] (MODULE+0xADDR).\n"
	      "\n"
	      "Examples:\n"
	      "  profctl dump flamegraph --pid 1234 --since 30s -o cpu.svg\n"
	      "  profctl dump flamegraph --pid 1234 --python-only --format folded\n"
	      "  profctl dump flamegraph --since 5m > all.folded\n"
	      "  profctl dump flamegraph --pid 1234 --format folded | flamegraph.pl > cpu.svg\n"
	      "  profctl dump flamegraph --pid 1234 -o cpu.pb.gz && go tool pprof -top cpu.pb.gz\n"
	      "  profctl dump flamegraph --since 1m -o cpu.speedscope.json\n"
	      "  profctl dump flamegraph --format json | jq '.samples | length'\n"
	      "  profctl dump flamegraph --pid 1234 --value gpu -o gpu.svg\n"
	      "  profctl dump flamegraph --pid 1234 --gpu-idle --nvtx -o idle.svg\n"
	      "  profctl dump trace --pid 1234 --since 10s -o trace.json\n",
	      f);
}

static int bad_value(struct cli_error *e, const char *opt, const char *val, const char *what)
{
	return cli_bad_value(e, "dump", opt, val, what);
}

static int parse_id(const char *opt, const char *val, uint32_t *out, struct cli_error *e)
{
	int err = parse_u32(val, 1, INT32_MAX, out);

	if (err == -ERANGE)
		return bad_value(e, opt, val, "is out of range (1 to 2147483647)");
	if (err)
		return bad_value(e, opt, val, "is not a positive integer");
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The format a file name asks for; folded when its suffix says nothing. */
static enum dump_format format_for_file(const char *path)
{
	if (ends_with(path, ".svg"))
		return DUMP_FORMAT_SVG;
	if (ends_with(path, ".pb.gz") || ends_with(path, ".pprof"))
		return DUMP_FORMAT_PPROF;
	/* Before plain .json, which it also ends in. */
	if (ends_with(path, ".speedscope.json"))
		return DUMP_FORMAT_SPEEDSCOPE;
	if (ends_with(path, ".json"))
		return DUMP_FORMAT_JSON;
	return DUMP_FORMAT_FOLDED;
}

static const struct {
	const char *name;
	enum dump_format format;
} formats[] = {
    {"folded", DUMP_FORMAT_FOLDED}, {"svg", DUMP_FORMAT_SVG},
    {"pprof", DUMP_FORMAT_PPROF},   {"speedscope", DUMP_FORMAT_SPEEDSCOPE},
    {"json", DUMP_FORMAT_JSON},
};

int dump_parse_args(int argc, char **argv, struct dump_args *a, struct cli_error *e)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},    {"tid", required_argument, NULL, 'T'},
	    {"since", required_argument, NULL, 's'},  {"format", required_argument, NULL, 'f'},
	    {"output", required_argument, NULL, 'o'}, {"timeout", required_argument, NULL, 't'},
	    {"python-only", no_argument, NULL, 'P'},  {"help", no_argument, NULL, 'h'},
	    {"value", required_argument, NULL, 'v'},  {"gpu-idle", no_argument, NULL, 'I'},
	    {"nvtx", no_argument, NULL, 'N'},	      {0},
	};
	const char *value_opt = NULL;
	uint32_t id;
	int opt, err;

	*a = (struct dump_args){0};
	if (argc < 2) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "dump: say what to dump (flamegraph or trace); see 'profctl dump "
			      "--help'");
		return -EINVAL;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		a->help = true;
		return 0;
	}
	if (strcmp(argv[1], "trace") == 0) {
		a->kind = DUMP_KIND_TRACE;
	} else if (strcmp(argv[1], "flamegraph") != 0) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "dump: unknown kind '%s' (flamegraph or trace); see 'profctl dump "
			      "--help'",
			      argv[1]);
		return -EINVAL;
	}
	argc--;
	argv++;
	optind = 0;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:o:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			err = parse_id("--pid", optarg, &id, e);
			if (err)
				return err;
			for (size_t i = 0; i < a->n_pids; i++)
				if (a->pids[i] == id)
					goto next;
			if (a->n_pids == DUMP_MAX_PIDS) {
				cli_error_set(e, PROFCTL_EXIT_USAGE,
					      "dump: more than %d --pid options; see 'profctl dump "
					      "--help'",
					      DUMP_MAX_PIDS);
				return -EINVAL;
			}
			a->pids[a->n_pids++] = id;
			break;
		case 'T':
			if (a->has_tid)
				return bad_value(e, "--tid", optarg, "comes after another --tid");
			err = parse_id("--tid", optarg, &a->tid, e);
			if (err)
				return err;
			a->has_tid = true;
			break;
		case 's':
			err = parse_duration_ns(optarg, 1, MAX_SINCE_NS, &a->since_ns);
			if (err == -ERANGE)
				return bad_value(e, "--since", optarg,
						 "is out of range (more than 0, at most 365d)");
			if (err)
				return bad_value(e, "--since", optarg,
						 "is not a duration (like 30s, 5m, 1h)");
			a->has_since = true;
			break;
		case 'f':
			a->format = DUMP_FORMAT_DEFAULT;
			for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
				if (strcmp(optarg, formats[i].name) == 0)
					a->format = formats[i].format;
			if (a->format == DUMP_FORMAT_DEFAULT)
				return bad_value(e, "--format", optarg,
						 "is not folded, svg, pprof, speedscope or json");
			break;
		case 'o':
			if (!*optarg)
				return bad_value(e, "--output", optarg, "is an empty file name");
			a->output = optarg;
			break;
		case 't':
			err = cli_parse_timeout("dump", optarg, &a->timeout_ns, e);
			if (err)
				return err;
			break;
		case 'P':
			a->python_only = true;
			break;
		case 'v': {
			enum value_kind k;

			if (value_parse(optarg, &k))
				return bad_value(e, "--value", optarg, "is not " VALUE_OPTION_LIST);
			a->value = k;
			value_opt = optarg;
			break;
		}
		case 'I':
			a->gpu_idle = true;
			break;
		case 'N':
			a->nvtx = true;
			break;
		case 'h':
			a->help = true;
			return 0;
		default:
			return cli_bad_option(opt, argv, longopts, "dump", e);
		}
	next:;
	}
	if (optind < argc) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "dump: unexpected argument '%s'; see 'profctl dump --help'",
			      argv[optind]);
		return -EINVAL;
	}
	if (a->gpu_idle && value_opt && a->value != VALUE_CPU) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "dump: --gpu-idle selects CPU samples, it cannot go with --value %s; "
			      "see 'profctl dump --help'",
			      value_opt);
		return -EINVAL;
	}
	if (a->gpu_idle)
		a->value = VALUE_GPU_IDLE;
	if (a->kind == DUMP_KIND_TRACE) {
		const char *bad = a->has_tid		  ? "--tid"
				  : a->format != DUMP_FORMAT_DEFAULT ? "--format"
				  : a->python_only		  ? "--python-only"
				  : value_opt			  ? "--value"
				  : a->gpu_idle			  ? "--gpu-idle"
				  : a->nvtx			  ? "--nvtx"
								  : NULL;

		if (bad) {
			cli_error_set(e, PROFCTL_EXIT_USAGE,
				      "dump: %s is for flame graphs, not traces; see 'profctl dump "
				      "--help'",
				      bad);
			return -EINVAL;
		}
		return 0;
	}
	if (a->format == DUMP_FORMAT_DEFAULT)
		a->format = a->output ? format_for_file(a->output) : DUMP_FORMAT_FOLDED;
	return 0;
}

/* What the flame graph's title calls the value drawn. */
static const char *value_title(int v)
{
	switch (v) {
	case VALUE_GPU_IDLE:
		return "GPU-idle CPU";
	case VALUE_GPU:
		return "GPU time";
	case VALUE_GPU_KERNELS:
		return "GPU kernels";
	case VALUE_COPY:
		return "GPU copy time";
	case VALUE_COPY_BYTES:
		return "GPU copy bytes";
	case VALUE_LAUNCHES:
		return "GPU launches (uprobe)";
	default:
		return "CPU";
	}
}

static int render(const Profd__Profile *p, const struct dump_args *a, uint32_t value_index,
		  FILE *out)
{
	struct render_opts ro = {.process_root = a->n_pids == 0, .value_index = value_index};
	const char *what = value_title(a->value);
	char title[160];
	size_t pos;

	if (a->n_pids == 0) {
		pos = (size_t)snprintf(title, sizeof(title), "%s flame graph: all processes", what);
	} else {
		pos = (size_t)snprintf(title, sizeof(title), "%s flame graph: pid", what);
		for (size_t i = 0; i < a->n_pids && pos < sizeof(title); i++) {
			const char *name = profile_process_name(p, a->pids[i]);

			pos +=
			    (size_t)snprintf(title + pos, sizeof(title) - pos,
					     "%s %" PRIu32 "%s%.32s%s", i ? "," : "", a->pids[i],
					     name ? " (" : "", name ? name : "", name ? ")" : "");
		}
	}
	if (a->has_tid && pos < sizeof(title))
		snprintf(title + pos, sizeof(title) - pos, ", tid %" PRIu32, a->tid);
	ro.title = title;
	switch (a->format) {
	case DUMP_FORMAT_SVG:
		return format_svg(p, &ro, out);
	case DUMP_FORMAT_PPROF:
		return format_pprof(p, &ro, out);
	case DUMP_FORMAT_SPEEDSCOPE:
		return format_speedscope(p, &ro, out);
	case DUMP_FORMAT_JSON:
		return format_json(p, &ro, out);
	default:
		return format_folded(p, &ro, out);
	}
}

int cli_write_file(const char *path, int (*render_fn)(FILE *out, void *ctx), void *ctx,
		   struct cli_error *e)
{
	const char *slash = strrchr(path, '/');
	char *tmp = NULL;
	FILE *out = NULL;
	mode_t mask;
	int fd = -1, err = 0;

	if (asprintf(&tmp, "%.*s.%s.XXXXXX", slash ? (int)(slash - path + 1) : 0, path,
		     slash ? slash + 1 : path) < 0) {
		tmp = NULL;
		err = -ENOMEM;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "out of memory");
		goto out;
	}
	fd = mkstemp(tmp);
	if (fd < 0) {
		err = -errno;
		free(tmp);
		tmp = NULL;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "cannot create %s: %s", path,
			      strerror(-err));
		goto out;
	}
	/* mkstemp makes 0600; give the file the mode a plain open() would. */
	mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask) < 0) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "chmod %s: %s", tmp, strerror(-err));
		goto out;
	}
	out = fdopen(fd, "w");
	if (!out) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "%s: %s", tmp, strerror(-err));
		goto out;
	}
	fd = -1;
	err = render_fn(out, ctx);
	if (err) {
		cli_error_set(e, PROFCTL_EXIT_ERROR, "writing %s: %s", path, strerror(-err));
		goto out;
	}
	if (fsync(fileno(out)) < 0 && errno != EINVAL) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "writing %s: %s", path, strerror(-err));
		goto out;
	}
	err = fclose(out) ? -errno : 0;
	out = NULL;
	if (err) {
		cli_error_set(e, PROFCTL_EXIT_ERROR, "writing %s: %s", path, strerror(-err));
		goto out;
	}
	if (rename(tmp, path) < 0) {
		err = -errno;
		cli_error_set(e, PROFCTL_EXIT_ERROR, "cannot replace %s: %s", path,
			      strerror(-err));
		goto out;
	}
out:
	if (out)
		fclose(out);
	if (fd >= 0)
		close(fd);
	if (err && tmp)
		unlink(tmp);
	free(tmp);
	return err;
}

struct render_ctx {
	const Profd__Profile *p;
	const struct dump_args *a;
	uint32_t value_index;
};

static int render_to(FILE *out, void *ctx)
{
	const struct render_ctx *rc = ctx;

	return render(rc->p, rc->a, rc->value_index, out);
}

static int trace_to(FILE *out, void *ctx)
{
	return format_trace(ctx, out);
}

/* Whether any sample carries a value in any column: a profile of only GPU time counts. */
static bool profile_has_values(const Profd__Profile *p)
{
	for (size_t i = 0; i < p->n_samples; i++)
		for (size_t j = 0; j < p->samples[i]->n_values; j++)
			if (p->samples[i]->values[j])
				return true;
	return false;
}

void cli_note_filtered(const Profd__Profile *p)
{
	if (p && p->has_only_uid)
		fprintf(stderr,
			"profctl: note: only processes of uid %u are shown; root sees every "
			"process\n",
			p->only_uid);
}

int dump_fetch(struct conn *c, const Profd__DumpRequest *dreq, Profd__Response **out,
	       struct cli_error *e)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__Response *resp = NULL;
	char why[256];
	int err;

	req.msg_case = PROFD__REQUEST__MSG_DUMP;
	req.dump = (Profd__DumpRequest *)dreq;
	err = conn__call(c, &req, PROFD__RESPONSE__MSG_PROFILE, &resp, e);
	if (err)
		return err;
	if (profile_check(resp->profile, why, sizeof(why))) {
		cli_error_set(e, PROFCTL_EXIT_PROTOCOL,
			      "the daemon sent an inconsistent profile (%s): are profd and profctl "
			      "the same version?",
			      why);
		err = -EPROTO;
	} else if (!profile_has_values(resp->profile)) {
		cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES,
			      "no samples: the daemon returned an empty profile; widen --since or "
			      "check the --pid");
		err = -ENODATA;
	}
	if (err) {
		profd__response__free_unpacked(resp, NULL);
		return err;
	}
	*out = resp;
	return 0;
}

int dump_select_value(const Profd__Profile *p, int value, uint32_t *index, struct cli_error *e)
{
	const char *col = value_column_name((enum value_kind)value);
	int idx = profile_value_index(p, col);

	if (idx < 0) {
		cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES,
			      "the profile has no %s values: the daemon does not collect them (GPU "
			      "support missing, or a daemon older than profctl)",
			      col);
		return -ENODATA;
	}
	if (!profile_value_total(p, (uint32_t)idx)) {
		cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES,
			      "no %s in the window: widen --since or check the --pid%s", col,
			      value == VALUE_CPU ? "" : " (is the process's GPU library attached?)");
		return -ENODATA;
	}
	*index = (uint32_t)idx;
	return 0;
}

/* dump trace: fetch, check, write. Returns an exit code, any error printed. */
static int dump_trace(struct conn *c, const struct dump_args *a)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__TraceRequest treq = PROFD__TRACE_REQUEST__INIT;
	Profd__Response *resp = NULL;
	struct cli_error e = {0};
	char why[256];
	int err, ret = PROFCTL_EXIT_OK;

	treq.n_pids = a->n_pids;
	treq.pids = (uint32_t *)a->pids;
	treq.has_since_ns = a->has_since;
	treq.since_ns = a->since_ns;
	req.msg_case = PROFD__REQUEST__MSG_TRACE;
	req.trace = &treq;
	err = conn__call(c, &req, PROFD__RESPONSE__MSG_TRACE, &resp, &e);
	if (err)
		return cli_error_print(&e);
	if (trace_check(resp->trace, why, sizeof(why))) {
		cli_error_set(&e, PROFCTL_EXIT_PROTOCOL,
			      "the daemon sent an inconsistent trace (%s): are profd and profctl "
			      "the same version?",
			      why);
		ret = cli_error_print(&e);
		goto out;
	}
	if (!trace_n_events(resp->trace)) {
		cli_error_set(&e, PROFCTL_EXIT_NO_SAMPLES,
			      "no events: the daemon's trace ring holds nothing for this filter; "
			      "widen --since or check the --pid");
		ret = cli_error_print(&e);
		goto out;
	}
	if (resp->trace->has_only_uid)
		fprintf(stderr,
			"profctl: note: only processes of uid %u are shown; root sees every "
			"process\n",
			resp->trace->only_uid);
	if (a->output) {
		if (cli_write_file(a->output, trace_to, resp->trace, &e))
			ret = cli_error_print(&e);
	} else {
		err = format_trace(resp->trace, stdout);
		if (err) {
			cli_error_set(&e, PROFCTL_EXIT_ERROR, "writing to standard output: %s",
				      strerror(-err));
			ret = cli_error_print(&e);
		}
	}
out:
	profd__response__free_unpacked(resp, NULL);
	return ret;
}

int cmd_dump(int argc, char **argv, const struct global_opts *g)
{
	Profd__DumpRequest dreq = PROFD__DUMP_REQUEST__INIT;
	Profd__Response *resp = NULL;
	struct cli_error e = {0};
	struct dump_args a;
	struct conn *c = NULL;
	uint64_t timeout_ns;
	uint32_t vi = 0;
	int err, ret = PROFCTL_EXIT_OK;

	if (dump_parse_args(argc, argv, &a, &e))
		return cli_error_print(&e);
	if (a.help) {
		cmd_dump_usage(stdout);
		return PROFCTL_EXIT_OK;
	}
	/* Gzip on a terminal helps nobody and can upset it; say so before asking the daemon. */
	if (a.kind == DUMP_KIND_FLAMEGRAPH && a.format == DUMP_FORMAT_PPROF && !a.output &&
	    isatty(STDOUT_FILENO)) {
		cli_error_set(&e, PROFCTL_EXIT_USAGE,
			      "dump: pprof output is binary: pass -o FILE or redirect standard "
			      "output");
		return cli_error_print(&e);
	}
	timeout_ns = a.timeout_ns    ? a.timeout_ns
		     : g->timeout_ns ? g->timeout_ns
				     : PROFCTL_DUMP_TIMEOUT_NS;

	c = conn__open(wire_socket_path(g->socket), timeout_ns, &e);
	if (!c)
		return cli_error_print(&e);
	if (a.kind == DUMP_KIND_TRACE) {
		ret = dump_trace(c, &a);
		conn__free(c);
		return ret;
	}
	dreq.n_pids = a.n_pids;
	dreq.pids = a.pids;
	dreq.has_tid = a.has_tid;
	dreq.tid = a.tid;
	dreq.has_since_ns = a.has_since;
	dreq.since_ns = a.since_ns;
	err = dump_fetch(c, &dreq, &resp, &e);
	conn__free(c);
	if (err)
		return cli_error_print(&e);
	if (dump_select_value(resp->profile, a.value, &vi, &e)) {
		ret = cli_error_print(&e);
		goto out;
	}
	cli_note_filtered(resp->profile);
	if (!a.nvtx)
		profile_strip_nvtx(resp->profile);
	if (a.python_only)
		profile_python_only(resp->profile);
	if (a.output) {
		struct render_ctx rc = {resp->profile, &a, vi};

		if (cli_write_file(a.output, render_to, &rc, &e))
			ret = cli_error_print(&e);
	} else {
		err = render(resp->profile, &a, vi, stdout);
		if (err) {
			cli_error_set(&e, PROFCTL_EXIT_ERROR, "writing to standard output: %s",
				      strerror(-err));
			ret = cli_error_print(&e);
		}
	}
out:
	profd__response__free_unpacked(resp, NULL);
	return ret;
}
