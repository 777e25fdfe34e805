// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl dump flamegraph: ask the daemon for a profile and render it as folded stacks, SVG,
 * pprof, speedscope or JSON. profctl dump trace: ask for the raw events of a recent window and
 * write them as Chrome trace event JSON. profctl dump stacks: the current stack of every thread
 * of one process, read on demand, like py-spy dump.
 */
#include "cmd_dump.h"
#include "commands.h"
#include "conn.h"
#include "fetch.h"
#include "format.h"
#include "opts.h"
#include "output.h"
#include "flame.h"
#include "reshape.h"
#include "trace.h"
#include "value.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "parse.h"
#include "wire.h"

void cmd_dump_usage(FILE *f)
{
	fputs("Usage: profctl [--socket PATH] dump flamegraph [--pid N]... [--tid N]\n"
	      "               [--since DURATION] [--format FORMAT] [-o FILE]\n"
	      "               [--python-only | --all-frames] [--function | --no-lineno]\n"
	      "               [--per-thread] [--children]\n"
	      "               [--value VALUE] [--gpu-idle] [--nvtx] [--thread-state]\n"
	      "               [--timeout DURATION]\n"
	      "       profctl [--socket PATH] dump trace [--pid N]... [--since DURATION]\n"
	      "               [-o FILE] [--timeout DURATION]\n"
	      "       profctl [--socket PATH] dump stacks --pid N [--json] [-o FILE]\n"
	      "               [--timeout DURATION]\n"
	      "\n"
	      "flamegraph: fetch the samples the daemon holds and render them as a flame graph,\n"
	      "or write them in a format other tools read.\n"
	      "trace: fetch the raw events of a recent window (CPU samples, CUDA calls, kernels,\n"
	      "copies, NVTX ranges, launches) as Chrome trace event JSON for Perfetto\n"
	      "(ui.perfetto.dev) and chrome://tracing.\n"
	      "stacks: the current stack of every thread of process N, read now (threads that\n"
	      "are blocked included): each thread's name and state, then its frames newest\n"
	      "first, Python frames NAME (FILE:LINE), native func (module), kernel func [k].\n"
	      "\n"
	      "Options:\n"
	      "  --pid N              only process N (repeat for more); without it every process\n"
	      "                       you may see, each under its own root frame (its name);\n"
	      "                       stacks: the one process to dump (required)\n"
	      "  --tid N              only thread N\n"
	      "  --children           with --pid: the processes they started too (and theirs,\n"
	      "                       alive or exited), each under a root frame 'pid N (NAME)'\n"
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
	      "  --python-only        in stacks with Python frames, hide the native frames\n"
	      "                       between Python frames (the interpreter's) and above the\n"
	      "                       newest one (their time is its self time); kernel and GPU\n"
	      "                       frames above, and native frames below (main), stay\n"
	      "  --all-frames         every frame as sampled: without it, the interpreter's own\n"
	      "                       native frames between two Python frames (CPython's call\n"
	      "                       machinery: libpython's, or a static python's) are hidden\n"
	      "  --function           one frame per Python function, NAME (FILE), its lines\n"
	      "                       merged; frames without a symbol merge per module,\n"
	      "                       [unknown] (MODULE)\n"
	      "  --no-lineno          Python frames without line numbers, NAME (FILE)\n"
	      "  --per-thread         each stack's root frame names its thread,\n"
	      "                       thread TID (COMM), COMM the thread's kernel name\n"
	      "  --value VALUE        what the widths measure, one of:\n"
	      "                         cpu          CPU samples (default)\n"
	      "                         gpu          GPU kernel time by launching stack\n"
	      "                         gpu-kernels  kernels by launching stack\n"
	      "                         copy         memcpy/memset time by launching stack\n"
	      "                         copy-bytes   bytes copied by launching stack\n"
	      "                         launches     launches seen by the libcuda uprobes\n"
	      "                                      (processes without the CUPTI library)\n"
	      "                         off-cpu      time off the CPU (profd --off-cpu), by\n"
	      "                                      the stack each thread waited in\n"
	      "                         wall         wall-clock time: CPU samples times the\n"
	      "                                      sampling period plus off-CPU time\n"
	      "                         gpu-memory   GPU memory allocated in the window, by\n"
	      "                                      allocating stack (cudaMalloc, cuMemAlloc)\n"
	      "                         gpu-memory-live  GPU memory still allocated at the\n"
	      "                                      window's end, by allocating stack\n"
	      "  --gpu-idle           only what happened while none of the process's GPU\n"
	      "                       kernels ran: what the host did while the GPU starved;\n"
	      "                       CPU samples, or with --value off-cpu or wall the time\n"
	      "                       waited or spent while the GPU was idle\n"
	      "  --nvtx               keep NVTX ranges as frames at the root ([nvtx] NAME)\n"
	      "  --thread-state       keep the thread's state as a frame at the root:\n"
	      "                       [running], [off-cpu: futex], [off-cpu: preempted], ...\n"
	      "                       (profd --off-cpu)\n"
	      "  --json               stacks: write JSON for scripts instead of text\n"
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
	      "  profctl dump flamegraph --pid 1234 --function --per-thread -o threads.svg\n"
	      "  profctl dump flamegraph --since 5m > all.folded\n"
	      "  profctl dump flamegraph --pid 1234 --format folded | flamegraph.pl > cpu.svg\n"
	      "  profctl dump flamegraph --pid 1234 -o cpu.pb.gz && go tool pprof -top cpu.pb.gz\n"
	      "  profctl dump flamegraph --since 1m -o cpu.speedscope.json\n"
	      "  profctl dump flamegraph --format json | jq '.samples | length'\n"
	      "  profctl dump flamegraph --pid 1234 --value gpu -o gpu.svg\n"
	      "  profctl dump flamegraph --pid 1234 --gpu-idle --nvtx -o idle.svg\n"
	      "  profctl dump flamegraph --pid 1234 --gpu-idle --value wall --thread-state\n"
	      "      -o idle-wall.svg\n"
	      "  profctl dump flamegraph --pid 1234 --value off-cpu -o waits.svg\n"
	      "  profctl dump flamegraph --pid 1234 --value wall --thread-state --format folded\n"
	      "  profctl dump trace --pid 1234 --since 10s -o trace.json\n"
	      "  profctl dump stacks --pid 1234\n",
	      f);
}

static int bad_value(struct cli_error *e, const char *opt, const char *val, const char *what)
{
	return opt_bad_value(e, "dump", opt, val, what);
}

static const struct {
	const char *name;
	enum dump_format format;
} formats[] = {
    {"folded", DUMP_FORMAT_FOLDED}, {"svg", DUMP_FORMAT_SVG},
    {"pprof", DUMP_FORMAT_PPROF},   {"speedscope", DUMP_FORMAT_SPEEDSCOPE},
    {"json", DUMP_FORMAT_JSON},
};

static const struct option dump_longopts[] = {
    {"pid", required_argument, NULL, 'p'},
    {"tid", required_argument, NULL, 'T'},
    {"since", required_argument, NULL, 's'},
    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    {"timeout", required_argument, NULL, 't'},
    {"help", no_argument, NULL, 'h'},
    {"value", required_argument, NULL, 'v'},
    {"gpu-idle", no_argument, NULL, 'I'},
    {"nvtx", no_argument, NULL, 'N'},
    {"thread-state", no_argument, NULL, 'S'},
    {"children", no_argument, NULL, 'C'},
    VIEW_LONGOPTS_DUMP,
    {"json", no_argument, NULL, 'J'},
    {0},
};

/* The word after "dump": flamegraph, trace or stacks. Returns 0, 1 for --help, or -EINVAL. */
static int parse_kind(int argc, char **argv, struct dump_args *a, struct cli_error *e)
{
	if (argc < 2) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "dump: say what to dump (flamegraph, trace or stacks); see 'profctl "
			      "dump --help'");
		return -EINVAL;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
		return 1;
	if (strcmp(argv[1], "trace") == 0) {
		a->kind = DUMP_KIND_TRACE;
	} else if (strcmp(argv[1], "stacks") == 0) {
		a->kind = DUMP_KIND_STACKS;
	} else if (strcmp(argv[1], "flamegraph") != 0) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "dump: unknown kind '%s' (flamegraph, trace or stacks); see 'profctl "
			      "dump --help'",
			      argv[1]);
		return -EINVAL;
	}
	return 0;
}

static int parse_since(const char *val, struct fetch_query *q, struct cli_error *e)
{
	int err = parse_duration_ns(val, 1, OPT_MAX_SINCE_NS, &q->since_ns);

	if (err == -ERANGE)
		return bad_value(e, "--since", val, "is out of range (more than 0, at most 365d)");
	if (err)
		return bad_value(e, "--since", val, "is not a duration (like 30s, 5m, 1h)");
	q->has_since = true;
	return 0;
}

int dump_format_parse(const char *val, enum dump_format *out)
{
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		if (strcmp(val, formats[i].name) == 0) {
			*out = formats[i].format;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_format(const char *val, enum dump_format *out, struct cli_error *e)
{
	if (dump_format_parse(val, out))
		return bad_value(e, "--format", val,
				 "is not folded, svg, pprof, speedscope or json");
	return 0;
}

/*
 * One option getopt_long returned, optarg its value. *value_opt keeps --value's text for
 * the checks after the loop. Returns 0, 1 for --help, or -EINVAL with e filled.
 */
static int parse_option(int opt, char **argv, struct dump_args *a, const char **value_opt,
			struct cli_error *e)
{
	enum value_kind k;

	switch (opt) {
	case 'p':
		return opt_parse_pid("dump", optarg, a->q.pids, &a->q.n_pids, e);
	case 'T':
		return opt_parse_tid("dump", optarg, &a->q.has_tid, &a->q.tid, e);
	case 's':
		return parse_since(optarg, &a->q, e);
	case 'f':
		return parse_format(optarg, &a->format, e);
	case 'o':
		return opt_parse_output("dump", optarg, &a->output, e);
	case 't':
		return opt_parse_timeout("dump", optarg, &a->timeout_ns, e);
	case 'v':
		if (value_parse(optarg, &k))
			return bad_value(e, "--value", optarg, "is not " VALUE_OPTION_LIST);
		a->value = k;
		*value_opt = optarg;
		return 0;
	case 'I':
		a->gpu_idle = true;
		return 0;
	case 'N':
		a->nvtx = true;
		return 0;
	case 'S':
		a->thread_state = true;
		return 0;
	case 'C':
		a->children = true;
		a->q.children = true;
		return 0;
	case 'J':
		a->json = true;
		return 0;
	case 'h':
		return 1;
	default:
		if (view_opt(opt, &a->v))
			return 0;
		return opt_bad_option(opt, argv, dump_longopts, "dump", e);
	}
}

/* The first option given that only flame graphs take (the first the checks below name). */
static const char *flamegraph_option(const struct dump_args *a, const char *value_opt)
{
	return a->format != DUMP_FORMAT_DEFAULT ? "--format"
	       : a->v.python_only		? "--python-only"
	       : a->v.all_frames		? "--all-frames"
	       : a->v.function			? "--function"
	       : a->v.no_lineno			? "--no-lineno"
	       : a->v.per_thread		? "--per-thread"
	       : value_opt			? "--value"
	       : a->gpu_idle			? "--gpu-idle"
	       : a->nvtx			? "--nvtx"
	       : a->thread_state		? "--thread-state"
	       : a->children			? "--children"
						: NULL;
}

/* dump stacks: one process, and none of the options of flame graphs and traces. */
static int check_stacks_options(const struct dump_args *a, const char *value_opt,
				struct cli_error *e)
{
	const char *bad = a->q.has_tid	   ? "--tid"
			  : a->q.has_since ? "--since"
					   : flamegraph_option(a, value_opt);

	if (bad) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "dump: %s is not for stacks, which shows every thread of one process "
			      "now; see 'profctl dump --help'",
			      bad);
		return -EINVAL;
	}
	if (a->q.n_pids != 1) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "dump: stacks needs exactly one --pid; see 'profctl dump --help'");
		return -EINVAL;
	}
	return 0;
}

/* Options that each parse but do not go together. Returns 0 or -EINVAL with e filled. */
static int check_options(struct dump_args *a, const char *value_opt, struct cli_error *e)
{
	const char *bad;
	enum value_kind idle;

	if (a->gpu_idle && value_gpu_idle((enum value_kind)a->value, &idle)) {
		cli_error_set(
		    e, PROFCTL_EXIT_USAGE,
		    "dump: --gpu-idle goes with --value cpu, off-cpu or wall, not %s; see "
		    "'profctl dump --help'",
		    value_opt);
		return -EINVAL;
	}
	if (a->gpu_idle)
		a->value = idle;
	if (a->kind == DUMP_KIND_STACKS)
		return check_stacks_options(a, value_opt, e);
	if (a->json) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "dump: --json is for stacks (flame graphs take --format json); see "
			      "'profctl dump --help'");
		return -EINVAL;
	}
	if (a->children && !a->q.n_pids) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "dump: --children goes with --pid (without --pid every process is in "
			      "the dump); see 'profctl dump --help'");
		return -EINVAL;
	}
	if (a->kind != DUMP_KIND_TRACE)
		return 0;
	bad = a->q.has_tid ? "--tid" : flamegraph_option(a, value_opt);
	if (bad) {
		cli_error_set(e, PROFCTL_EXIT_USAGE,
			      "dump: %s is for flame graphs, not traces; see 'profctl dump --help'",
			      bad);
		return -EINVAL;
	}
	return 0;
}

int dump_parse_args(int argc, char **argv, struct dump_args *a, struct cli_error *e)
{
	const char *value_opt = NULL;
	int opt, err;

	*a = (struct dump_args){0};
	err = parse_kind(argc, argv, a, e);
	if (err) {
		a->help = err > 0;
		return err < 0 ? err : 0;
	}
	argc--;
	argv++;
	optind = 0;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:o:h", dump_longopts, NULL)) != -1) {
		err = parse_option(opt, argv, a, &value_opt, e);
		if (err) {
			a->help = err > 0;
			return err < 0 ? err : 0;
		}
	}
	err = opt_no_operands("dump", argc, argv, e);
	if (!err)
		err = check_options(a, value_opt, e);
	if (!err)
		err = view_check("dump", &a->v, e);
	if (err)
		return err;
	if (a->kind == DUMP_KIND_FLAMEGRAPH && a->format == DUMP_FORMAT_DEFAULT)
		a->format = a->output ? output_format_for_file(a->output) : DUMP_FORMAT_FOLDED;
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
	case VALUE_OFFCPU:
		return "Off-CPU";
	case VALUE_WALL:
		return "Wall-clock";
	case VALUE_GPU_IDLE_OFFCPU:
		return "GPU-idle off-CPU";
	case VALUE_GPU_IDLE_WALL:
		return "GPU-idle wall-clock";
	case VALUE_GPU_MEMORY:
		return "GPU memory allocated";
	case VALUE_GPU_MEMORY_LIVE:
		return "GPU memory live";
	default:
		return "CPU";
	}
}

/*
 * The flame graph's title, from p's process names as the daemon sent them (before --children
 * renames each to its root frame's "pid N (NAME)", which would read "pid N (pid N (NAME))").
 */
static void flame_title(const Profd__Profile *p, const struct dump_args *a, char *title, size_t len)
{
	const char *what = value_title(a->value);
	size_t pos;

	if (a->q.n_pids == 0) {
		pos = (size_t)snprintf(title, len, "%s flame graph: all processes", what);
	} else {
		pos = (size_t)snprintf(title, len, "%s flame graph: pid", what);
		for (size_t i = 0; i < a->q.n_pids && pos < len; i++) {
			const char *name = profile_process_name(p, a->q.pids[i]);

			pos += (size_t)snprintf(title + pos, len - pos, "%s %" PRIu32 "%s%.32s%s",
						i ? "," : "", a->q.pids[i], name ? " (" : "",
						name ? name : "", name ? ")" : "");
		}
	}
	if (a->q.has_tid && pos < len)
		snprintf(title + pos, len - pos, ", tid %" PRIu32, a->q.tid);
}

static int render(const Profd__Profile *p, const struct dump_args *a, uint32_t value_index,
		  const char *title, FILE *out)
{
	struct render_opts ro = {.process_root = a->q.n_pids == 0 || a->children,
				 .value_index = value_index,
				 .title = title};

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

struct render_ctx {
	const Profd__Profile *p;
	const struct dump_args *a;
	uint32_t value_index;
	const char *title;
};

static int render_to(FILE *out, void *ctx)
{
	const struct render_ctx *rc = ctx;

	return render(rc->p, rc->a, rc->value_index, rc->title, out);
}

static int trace_to(FILE *out, void *ctx)
{
	return format_trace(ctx, out);
}

/* dump trace: fetch, check, write. Returns an exit code, any error printed. */
static int dump_trace(struct conn *c, const struct dump_args *a)
{
	Profd__TraceRequest treq = PROFD__TRACE_REQUEST__INIT;
	Profd__Response *resp = NULL;
	struct cli_error e = {0};
	int ret = PROFCTL_EXIT_OK;

	fetch_trace_request(&a->q, &treq);
	if (fetch_trace(c, &treq, &resp, &e))
		return cli_error_print(&e);
	if (!trace_n_events(resp->trace)) {
		cli_error_set(&e, PROFCTL_EXIT_NO_SAMPLES,
			      "no events: the daemon's trace ring holds nothing for this filter; "
			      "widen --since or check the --pid");
		ret = cli_error_print(&e);
		goto out;
	}
	fetch_note_filtered(resp->trace->has_only_uid, resp->trace->only_uid);
	fetch_note_lost(resp->trace->has_samples_lost, resp->trace->samples_lost);
	if (output_write(a->output, trace_to, resp->trace, &e))
		ret = cli_error_print(&e);
out:
	profd__response__free_unpacked(resp, NULL);
	return ret;
}

static int stacks_to(FILE *out, void *ctx)
{
	const struct render_ctx *rc = ctx;

	return rc->a->json ? format_stacks_json(rc->p, out) : format_stacks_text(rc->p, out);
}

/* dump stacks: the daemon reads every thread of the process now. Returns an exit code. */
static int dump_stacks(struct conn *c, const struct dump_args *a)
{
	Profd__Response *resp = NULL;
	struct cli_error e = {0};
	struct render_ctx rc;
	int ret = PROFCTL_EXIT_OK;

	if (fetch_stacks(c, a->q.pids[0], &resp, &e))
		return cli_error_print(&e);
	rc = (struct render_ctx){resp->profile, a, 0};
	if (output_write(a->output, stacks_to, &rc, &e))
		ret = cli_error_print(&e);
	profd__response__free_unpacked(resp, NULL);
	return ret;
}

/* dump flamegraph: fetch, pick the column, trim frames, render. Returns an exit code. */
int dump_flamegraph(struct conn *c, const struct dump_args *a)
{
	Profd__DumpRequest dreq = PROFD__DUMP_REQUEST__INIT;
	Profd__Response *resp = NULL;
	struct cli_error e = {0};
	Profd__Profile *shaped = NULL;
	struct reshape_opts ro;
	struct render_ctx rc;
	struct fetch_query q = a->q;
	char title[160];
	uint32_t vi = 0;
	int ret = PROFCTL_EXIT_OK;

	/*
	 * Flame graphs name processes but never tell two of one name apart; with --per-thread
	 * they do tell threads apart, which the merged rows no longer name, and --children
	 * puts each process under a root of its own.
	 */
	q.merge_processes = !a->v.per_thread && !a->children &&
			    (a->format == DUMP_FORMAT_FOLDED || a->format == DUMP_FORMAT_SVG);
	fetch_dump_request(&q, &dreq);
	if (fetch_profile(c, &dreq, false, &resp, &e))
		return cli_error_print(&e);
	if (fetch_select_value(resp->profile, a->value, &vi, &e)) {
		ret = cli_error_print(&e);
		goto out;
	}
	fetch_note_filtered(resp->profile->has_only_uid, resp->profile->only_uid);
	fetch_note_lost(resp->profile->has_samples_lost, resp->profile->samples_lost);
	if (!a->nvtx)
		profile_strip_nvtx(resp->profile);
	if (!a->thread_state)
		profile_strip_states(resp->profile);
	flame_title(resp->profile, a, title, sizeof(title));
	if (a->children && profile_name_processes_by_pid(resp->profile)) {
		cli_error_set(&e, PROFCTL_EXIT_ERROR, "dump: out of memory");
		ret = cli_error_print(&e);
		goto out;
	}
	ro = view_reshape_opts(&a->v, false);
	if (!reshape_is_noop(&ro)) {
		shaped = reshape(resp->profile, &ro);
		if (!shaped) {
			cli_error_set(&e, PROFCTL_EXIT_ERROR, "reshaping the profile: %s",
				      strerror(errno));
			ret = cli_error_print(&e);
			goto out;
		}
	}
	rc = (struct render_ctx){shaped ? shaped : resp->profile, a, vi, title};
	if (output_write(a->output, render_to, &rc, &e))
		ret = cli_error_print(&e);
out:
	reshape_free(shaped);
	profd__response__free_unpacked(resp, NULL);
	return ret;
}

int cmd_dump(int argc, char **argv, const struct global_opts *g)
{
	struct dump_args a;
	struct cli_error e = {0};
	struct conn *c = NULL;
	int ret;

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
	c = conn__open(wire_socket_path(g->socket),
		       cli_timeout_ns(a.timeout_ns, g, PROFCTL_DUMP_TIMEOUT_NS), &e);
	if (!c)
		return cli_error_print(&e);
	if (a.kind == DUMP_KIND_TRACE)
		ret = dump_trace(c, &a);
	else if (a.kind == DUMP_KIND_STACKS)
		ret = dump_stacks(c, &a);
	else
		ret = dump_flamegraph(c, &a);
	conn__free(c);
	return ret;
}
