// SPDX-License-Identifier: BSD-2-Clause
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "parse.h"
#include "timeutil.h"
#include "wire.h"

/* The kernel caps perf sampling (kernel.perf_event_max_sample_rate, 100 kHz by default). */
#define MAX_FREQUENCY 10000

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: profd [OPTIONS]\n"
	    "Sampling profiler daemon: samples CPU stacks with eBPF and serves profiles on a Unix\n"
	    "socket to profctl.\n"
	    "\n"
	    "  -p, --pid N             profile process N (all its threads) and the processes\n"
	    "                          it starts; repeatable. Without --pid every process on\n"
	    "                          the machine is sampled.\n"
	    "      --no-children       with --pid: not the processes the targets start\n"
	    "      --record [-o FILE] [--format FORMAT] [--duration D] -- CMD [ARG]...\n"
	    "                          run CMD, profile it and the processes it starts until\n"
	    "                          it exits (or Ctrl-C, or D), write the profile to FILE\n"
	    "                          (format by its extension: .svg, .folded, .pb.gz,\n"
	    "                          .speedscope.json, .json) and exit with CMD's status\n"
	    "  -F, --frequency HZ      samples per second per CPU (default 99, max %d)\n"
	    "      --off-cpu           also record off-CPU time: where sampled threads waited\n"
	    "                          (kernel, native and Python stacks) and for how long\n"
	    "      --off-cpu-min DURATION  waits at least this long are recorded with their\n"
	    "                          stacks; shorter ones only summed per thread (default\n"
	    "                          10us, from 1us to 1s)\n"
	    "  -s, --socket PATH       socket to serve on (default %s, or $%s)\n"
	    "      --socket-group GROUP  let members of GROUP connect (socket mode 0660)\n"
	    "      --memory-cap SIZE   memory for profile data, oldest evicted first\n"
	    "                          (default 256M; K, M, G suffixes)\n"
	    "      --ringbuf-size SIZE kernel-to-daemon ring buffer, a power of two (default:\n"
	    "                          512K per CPU, from 4M to 32M)\n"
	    "      --bucket DURATION   time resolution of stored data (default 1s)\n"
	    "      --gpu-ring-size SIZE  recent raw events kept for traces (CPU samples, CUDA\n"
	    "                          calls, kernels, copies, NVTX; default 8M)\n"
	    "      --libcuda PATH      count kernel launches of processes without the CUPTI\n"
	    "                          library through uprobes on this libcuda (repeatable: the\n"
	    "                          first that can be probed is used; default: libcuda.so.1\n"
	    "                          in the usual library directories; 'none': no uprobes)\n"
	    "      --log stderr|journal  where log lines go (default stderr)\n"
	    "  -v, --verbose           debug log output\n"
	    "  -q, --quiet             only errors\n"
	    "  -h, --help              this text\n"
	    "  -V, --version           print the version\n"
	    "\n"
	    "Needs root, or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE (and CAP_SYSLOG for kernel\n"
	    "symbols).\n"
	    "\n"
	    "Examples:\n"
	    "  sudo profd --pid 1234 --frequency 99\n"
	    "  sudo profd --record -o train.svg -- python train.py --epochs 1\n"
	    "  sudo profd --socket /tmp/profd.sock --memory-cap 64M\n",
	    MAX_FREQUENCY, PROFD_DEFAULT_SOCKET, PROFD_SOCKET_ENV);
}

static int bad(const char *opt, const char *val, const char *why)
{
	fprintf(stderr, "profd: %s '%s': %s (see profd --help)\n", opt, val, why);
	return -EINVAL;
}

int config_parse(int argc, char **argv, struct config *cfg)
{
	enum {
		OPT_MEMCAP = 256,
		OPT_RINGBUF,
		OPT_BUCKET,
		OPT_LOG,
		OPT_GROUP,
		OPT_GPU_RING,
		OPT_LIBCUDA,
		OPT_NO_CHILDREN,
		OPT_RECORD,
		OPT_FORMAT,
		OPT_DURATION,
		OPT_OFF_CPU,
		OPT_OFF_CPU_MIN
	};
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"frequency", required_argument, NULL, 'F'},
	    {"socket", required_argument, NULL, 's'},
	    {"memory-cap", required_argument, NULL, OPT_MEMCAP},
	    {"ringbuf-size", required_argument, NULL, OPT_RINGBUF},
	    {"bucket", required_argument, NULL, OPT_BUCKET},
	    {"log", required_argument, NULL, OPT_LOG},
	    {"socket-group", required_argument, NULL, OPT_GROUP},
	    {"gpu-ring-size", required_argument, NULL, OPT_GPU_RING},
	    {"libcuda", required_argument, NULL, OPT_LIBCUDA},
	    {"no-children", no_argument, NULL, OPT_NO_CHILDREN},
	    {"record", no_argument, NULL, OPT_RECORD},
	    {"output", required_argument, NULL, 'o'},
	    {"format", required_argument, NULL, OPT_FORMAT},
	    {"duration", required_argument, NULL, OPT_DURATION},
	    {"off-cpu", no_argument, NULL, OPT_OFF_CPU},
	    {"off-cpu-min", required_argument, NULL, OPT_OFF_CPU_MIN},
	    {"verbose", no_argument, NULL, 'v'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {0},
	};
	int c, verbose = 0;
	bool quiet = false;

	memset(cfg, 0, sizeof(*cfg));
	cfg->frequency_hz = 99;
	cfg->mem_cap = 256ull << 20;
	cfg->ringbuf_size = 0; /* set by the CPU count below unless given */
	cfg->bucket_ns = NSEC_PER_SEC;
	cfg->gpu_ring_size = 8ull << 20;
	cfg->off_cpu_min_ns = 10 * NSEC_PER_USEC;
	cfg->socket_path = wire_socket_path(NULL);

	opterr = 0;
	optind = 1;
	/* "+": options end at the first operand, so a recorded command keeps its own. */
	while ((c = getopt_long(argc, argv, "+:p:F:s:o:vqhV", longopts, NULL)) != -1) {
		uint64_t v;
		uint32_t pid;

		switch (c) {
		case 'p':
			if (parse_u32(optarg, 1, 0x3fffffff, &pid))
				return bad("--pid", optarg, "not a process id");
			if (cfg->npids == CONFIG_MAX_PIDS)
				return bad("--pid", optarg, "too many --pid options (max 1024)");
			cfg->pids[cfg->npids++] = pid;
			break;
		case 'F':
			if (parse_u32(optarg, 1, MAX_FREQUENCY, &cfg->frequency_hz))
				return bad("--frequency", optarg,
					   "expected a whole number of Hz from 1 to 10000");
			break;
		case 's':
			if (!*optarg || strlen(optarg) >= 108)
				return bad("--socket", optarg,
					   "a socket path must be 1 to 107 bytes");
			cfg->socket_path = optarg;
			cfg->socket_given = true;
			break;
		case OPT_NO_CHILDREN:
			cfg->no_children = true;
			break;
		case OPT_OFF_CPU:
			cfg->off_cpu = true;
			break;
		case OPT_OFF_CPU_MIN:
			if (parse_duration_ns(optarg, NSEC_PER_USEC, NSEC_PER_SEC,
					      &cfg->off_cpu_min_ns))
				return bad("--off-cpu-min", optarg,
					   "expected a duration from 1us to 1s, such as 10us");
			break;
		case OPT_RECORD:
			cfg->record = true;
			break;
		case 'o':
			if (!*optarg)
				return bad("--output", optarg, "expected a file name");
			cfg->record_output = optarg;
			break;
		case OPT_FORMAT:
			if (!*optarg)
				return bad("--format", optarg, "expected a format name");
			cfg->record_format = optarg;
			break;
		case OPT_DURATION:
			if (parse_duration_ns(optarg, NSEC_PER_MSEC, 366ull * 86400 * NSEC_PER_SEC,
					      &v))
				return bad("--duration", optarg,
					   "expected a duration such as 30s, 5m or 1h");
			cfg->record_duration = optarg;
			break;
		case OPT_MEMCAP:
			if (parse_size(optarg, 4ull << 20, 1ull << 40, &cfg->mem_cap))
				return bad("--memory-cap", optarg,
					   "expected a size from 4M to 1024G");
			break;
		case OPT_RINGBUF:
			if (parse_size(optarg, 64ull << 10, 1ull << 30, &v) || (v & (v - 1)))
				return bad("--ringbuf-size", optarg,
					   "expected a power of two from 64K to 1G");
			cfg->ringbuf_size = v;
			break;
		case OPT_BUCKET:
			if (parse_duration_ns(optarg, NSEC_PER_MSEC * 10, 3600 * NSEC_PER_SEC,
					      &cfg->bucket_ns))
				return bad("--bucket", optarg,
					   "expected a duration from 10ms to 1h");
			break;
		case OPT_GPU_RING:
			if (parse_size(optarg, 1ull << 20, 16ull << 30, &cfg->gpu_ring_size))
				return bad("--gpu-ring-size", optarg,
					   "expected a size from 1M to 16G");
			break;
		case OPT_LIBCUDA:
			if (!strcmp(optarg, "none")) {
				cfg->libcuda_none = true;
				break;
			}
			if (optarg[0] != '/' || strlen(optarg) >= 4096)
				return bad("--libcuda", optarg,
					   "expected an absolute path or 'none'");
			if (cfg->nlibcuda == CONFIG_MAX_LIBCUDA)
				return bad("--libcuda", optarg,
					   "too many --libcuda options (max 8)");
			cfg->libcuda[cfg->nlibcuda++] = optarg;
			break;
		case OPT_GROUP:
			if (!*optarg)
				return bad("--socket-group", optarg, "expected a group name");
			cfg->socket_group = optarg;
			break;
		case OPT_LOG:
			if (!strcmp(optarg, "stderr"))
				cfg->log_journal = false;
			else if (!strcmp(optarg, "journal"))
				cfg->log_journal = true;
			else
				return bad("--log", optarg, "expected stderr or journal");
			break;
		case 'v':
			verbose++;
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			usage(stdout);
			return CONFIG_EXIT;
		case 'V':
			printf("profd %s\n", PROFD_VERSION);
			return CONFIG_EXIT;
		case ':':
			fprintf(stderr, "profd: option '%s' needs a value (see profd --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		default:
			fprintf(stderr, "profd: unknown option '%s' (see profd --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (cfg->record) {
		if (optind >= argc || strcmp(argv[optind - 1], "--") != 0) {
			fprintf(stderr, "profd: --record needs the command after '--', as in "
					"profd --record -- python train.py (see profd --help)\n");
			return -EINVAL;
		}
		if (cfg->npids) {
			fprintf(stderr, "profd: --record and --pid contradict each other: --record "
					"profiles the command it starts (see profd --help)\n");
			return -EINVAL;
		}
		cfg->record_argv = argv + optind;
	} else if (cfg->record_output || cfg->record_format || cfg->record_duration) {
		fprintf(stderr, "profd: --output, --format and --duration go with --record (see "
				"profd --help)\n");
		return -EINVAL;
	} else if (optind < argc) {
		fprintf(stderr, "profd: unexpected argument '%s' (see profd --help)\n",
			argv[optind]);
		return -EINVAL;
	}
	if (cfg->no_children && !cfg->npids && !cfg->record) {
		fprintf(stderr, "profd: --no-children goes with --pid: without it every process "
				"is sampled (see profd --help)\n");
		return -EINVAL;
	}
	if (cfg->libcuda_none && cfg->nlibcuda) {
		fprintf(stderr, "profd: --libcuda none and --libcuda PATH contradict each other "
				"(see profd --help)\n");
		return -EINVAL;
	}
	if (!cfg->ringbuf_size)
		cfg->ringbuf_size = config_default_ringbuf(sysconf(_SC_NPROCESSORS_CONF));
	/* --record shares the terminal with the command: only what needs saying. */
	cfg->log_level = quiet	       ? LOG_LVL_ERROR
			 : verbose     ? LOG_LVL_DEBUG
			 : cfg->record ? LOG_LVL_WARN
				       : LOG_LVL_INFO;
	return CONFIG_RUN;
}

uint64_t config_default_ringbuf(long ncpus)
{
	uint64_t want = (uint64_t)(ncpus > 0 ? ncpus : 1) * (512ull << 10), size = 4ull << 20;

	/* 512 KiB a CPU as a power of two, from 4 MiB (a burst of launch records) to 32 MiB. */
	while (size < want && size < (32ull << 20))
		size <<= 1;
	return size;
}
