// SPDX-License-Identifier: BSD-2-Clause
#include "config.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "abi.h"
#include "config_file.h"
#include "dirsafe.h"
#include "fdio.h"
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
	    "      --unwind-memory SIZE  kernel memory for the unwind tables of mapped files\n"
	    "                          (native stacks without frame pointers), least recently\n"
	    "                          used evicted first (default 256M, from 1M to 64G)\n"
	    "      --unwind-max-mappings N  executable mappings of a process the unwinder\n"
	    "                          describes; walks into the others stop (default 512,\n"
	    "                          from 16 to 8192; kernel memory: 32 bytes per mapping\n"
	    "                          per described process)\n"
	    "      --ringbuf-size SIZE kernel-to-daemon ring buffer, a power of two (default:\n"
	    "                          512K per CPU, from 4M to 32M)\n"
	    "      --bucket DURATION   time resolution of stored data (default 1s)\n"
	    "      --gpu-ring-size SIZE  recent raw events kept for traces (CPU samples, CUDA\n"
	    "                          calls, kernels, copies, NVTX; default 8M)\n"
	    "      --gpu-uplink-rate N  records a second one CUDA process's library may send\n"
	    "                          (and 160 bytes each; a user's processes together twice\n"
	    "                          that; more is refused and counted; default 200000)\n"
	    "      --libcuda PATH      count kernel launches of processes without the CUPTI\n"
	    "                          library through uprobes on this libcuda (repeatable: the\n"
	    "                          first that can be probed is used; default: libcuda.so.1\n"
	    "                          in the usual library directories; 'none': no uprobes)\n"
	    "      --log stderr|journal  where log lines go (default stderr)\n"
	    "      --config FILE       read options from FILE (default /etc/profd/profd.conf\n"
	    "                          when it exists); the command line wins\n"
	    "\n"
	    "Fleet export (the [export] section of the file; each key K is --export-K):\n"
	    "      --pyroscope URL     push profiles to a Grafana Pyroscope server\n"
	    "      --otlp URL          push OTLP profiles to a collector (experimental)\n"
	    "      --export-interval DURATION  how often (default 15s, +-20%% jitter)\n"
	    "      --export-spool DIR  requests wait here until sent (default\n"
	    "                          /var/lib/profd/spool)\n"
	    "      --export-spool-max-size SIZE  oldest dropped beyond (default 1G)\n"
	    "      --export-spool-max-age DURATION  older requests expire (default 1h)\n"
	    "      --export-retry-max DURATION  longest wait between retries (default 5m)\n"
	    "      --export-timeout DURATION  per request (default 30s)\n"
	    "      --export-labels K=V,...  static labels of every series (repeatable)\n"
	    "      --export-sample-labels pid,tid  also split series by process / thread\n"
	    "      --export-host NAME  the host label (default: the host name)\n"
	    "      --export-service NAME=GLOB  name the service of matching processes\n"
	    "                          (executable path, comm or command line; repeatable)\n"
	    "      --export-ca-file, --export-cert-file, --export-key-file FILE  TLS\n"
	    "      --export-bearer-token-file, --export-basic-auth-file FILE  credentials\n"
	    "      --export-header 'NAME: VALUE'  an extra header (repeatable)\n"
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
	    "  sudo profd --socket /tmp/profd.sock --memory-cap 64M\n"
	    "  sudo profd --pyroscope http://pyroscope:4040 --export-labels cluster=a\n",
	    MAX_FREQUENCY, PROFD_DEFAULT_SOCKET, PROFD_SOCKET_ENV);
}

/* Where a value came from: the command line (file NULL) or a line of the configuration file. */
struct origin {
	const char *file;
	unsigned line;
	const char *key; /* the key as written in the file */
};

static int bad_at(const struct origin *o, const char *opt, const char *val, const char *why)
{
	if (o && o->file)
		fprintf(stderr, "profd: %s:%u: %s '%s': %s\n", o->file, o->line, o->key, val, why);
	else
		fprintf(stderr, "profd: %s '%s': %s (see profd --help)\n", opt, val, why);
	return -EINVAL;
}

static int bad(const char *opt, const char *val, const char *why)
{
	return bad_at(NULL, opt, val, why);
}

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
	OPT_OFF_CPU_MIN,
	OPT_CONFIG,
	OPT_PYROSCOPE,
	OPT_OTLP,
	OPT_EX_INTERVAL,
	OPT_EX_SPOOL,
	OPT_EX_SPOOL_MAX_SIZE,
	OPT_EX_SPOOL_MAX_AGE,
	OPT_EX_RETRY_MAX,
	OPT_EX_TIMEOUT,
	OPT_EX_LABELS,
	OPT_EX_SAMPLE_LABELS,
	OPT_EX_HOST,
	OPT_EX_CA_FILE,
	OPT_EX_CERT_FILE,
	OPT_EX_KEY_FILE,
	OPT_EX_BEARER,
	OPT_EX_BASIC,
	OPT_EX_HEADER,
	OPT_EX_SERVICE,
	OPT_UNWIND_MEMORY,
	OPT_UNWIND_MAX_MAPPINGS,
	OPT_GPU_UPLINK_RATE,
	OPT_VERBOSE = 'v',
	OPT_QUIET = 'q',
};

static const struct option longopts[] = {
    {"pid", required_argument, NULL, 'p'},
    {"frequency", required_argument, NULL, 'F'},
    {"socket", required_argument, NULL, 's'},
    {"memory-cap", required_argument, NULL, OPT_MEMCAP},
    {"ringbuf-size", required_argument, NULL, OPT_RINGBUF},
    {"unwind-memory", required_argument, NULL, OPT_UNWIND_MEMORY},
    {"unwind-max-mappings", required_argument, NULL, OPT_UNWIND_MAX_MAPPINGS},
    {"bucket", required_argument, NULL, OPT_BUCKET},
    {"log", required_argument, NULL, OPT_LOG},
    {"socket-group", required_argument, NULL, OPT_GROUP},
    {"gpu-ring-size", required_argument, NULL, OPT_GPU_RING},
    {"gpu-uplink-rate", required_argument, NULL, OPT_GPU_UPLINK_RATE},
    {"libcuda", required_argument, NULL, OPT_LIBCUDA},
    {"no-children", no_argument, NULL, OPT_NO_CHILDREN},
    {"record", no_argument, NULL, OPT_RECORD},
    {"output", required_argument, NULL, 'o'},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"off-cpu", no_argument, NULL, OPT_OFF_CPU},
    {"off-cpu-min", required_argument, NULL, OPT_OFF_CPU_MIN},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"pyroscope", required_argument, NULL, OPT_PYROSCOPE},
    {"otlp", required_argument, NULL, OPT_OTLP},
    {"export-pyroscope", required_argument, NULL, OPT_PYROSCOPE},
    {"export-otlp", required_argument, NULL, OPT_OTLP},
    {"export-interval", required_argument, NULL, OPT_EX_INTERVAL},
    {"export-spool", required_argument, NULL, OPT_EX_SPOOL},
    {"export-spool-max-size", required_argument, NULL, OPT_EX_SPOOL_MAX_SIZE},
    {"export-spool-max-age", required_argument, NULL, OPT_EX_SPOOL_MAX_AGE},
    {"export-retry-max", required_argument, NULL, OPT_EX_RETRY_MAX},
    {"export-timeout", required_argument, NULL, OPT_EX_TIMEOUT},
    {"export-labels", required_argument, NULL, OPT_EX_LABELS},
    {"export-sample-labels", required_argument, NULL, OPT_EX_SAMPLE_LABELS},
    {"export-host", required_argument, NULL, OPT_EX_HOST},
    {"export-ca-file", required_argument, NULL, OPT_EX_CA_FILE},
    {"export-cert-file", required_argument, NULL, OPT_EX_CERT_FILE},
    {"export-key-file", required_argument, NULL, OPT_EX_KEY_FILE},
    {"export-bearer-token-file", required_argument, NULL, OPT_EX_BEARER},
    {"export-basic-auth-file", required_argument, NULL, OPT_EX_BASIC},
    {"export-header", required_argument, NULL, OPT_EX_HEADER},
    {"export-service", required_argument, NULL, OPT_EX_SERVICE},
    {"verbose", no_argument, NULL, 'v'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {0},
};

/* Options a configuration file may not set: one-shot actions of the command line. */
static bool command_line_only(int c)
{
	return c == 'h' || c == 'V' || c == OPT_RECORD || c == 'o' || c == OPT_FORMAT ||
	       c == OPT_DURATION || c == OPT_CONFIG;
}

struct parse_state {
	struct config *cfg;
	int verbose;
	bool quiet;
	bool spool_checked; /* the spool folder in cfg was checked where it was given */
};

static int check_url(const struct origin *o, const char *opt, const char *url)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL;
	int err = 0;

	if (!u)
		return -ENOMEM;
	if (strlen(url) > 2048 || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host) {
		err = bad_at(o, opt, url, "not a URL such as https://pyroscope.example:4040");
		goto out;
	}
	if (strcmp(scheme, "http") && strcmp(scheme, "https"))
		err = bad_at(o, opt, url, "expected an http:// or https:// URL");
out:
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return err;
}

/* A file the exporter reads later must be readable now, so the mistake is found at start-up. */
static int check_readable(const struct origin *o, const char *opt, const char *path)
{
	char why[160];
	int fd;

	if (!*path)
		return bad_at(o, opt, path, "expected a file name");
	/* Root opens anything; a directory, a device or a FIFO is still not a credentials file. */
	fd = fd_open_regular(path, 0);
	if (fd == -EINVAL)
		return bad_at(o, opt, path, "cannot read it: not a regular file");
	if (fd < 0) {
		snprintf(why, sizeof(why), "cannot read it: %s", strerror(-fd));
		return bad_at(o, opt, path, why);
	}
	close(fd);
	return 0;
}

/*
 * The spool is a trust boundary: what is in it is sent with the node's credentials. The folder
 * and each backend's subfolder must not be, or pass through, a symbolic link, and no other user
 * may be able to write the folder or anything on its path (a sticky folder on the way, like
 * /tmp, is fine). Missing parts are fine: profd makes them, private. The sender checks again,
 * without following links, when it opens the folder.
 */
static int check_spool(const struct origin *o, const char *opt, const char *path)
{
	static const char *const subs[] = {"", "/pyroscope", "/otlp"};
	char sub[4096], why[4200];
	int fd;

	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		snprintf(sub, sizeof(sub), "%s%s", path, subs[i]);
		fd = dirsafe_open(sub, 0, why, sizeof(why) - 16);
		if (fd >= 0) {
			close(fd);
			continue;
		}
		if (fd == -ENOENT)
			break;
		strcat(why, ": refusing it");
		return bad_at(o, opt, path, why);
	}
	return 0;
}

static bool label_name_ok(const char *s, size_t n)
{
	if (!n || n > 64 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return false;
	if (n >= 2 && s[0] == '_' && s[1] == '_')
		return false; /* __name__ and friends are the backend's */
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	return true;
}

/* Labels the exporter sets itself; a static label may not take their names. */
static bool label_reserved(const char *s, size_t n)
{
	static const char *const names[] = {"service_name", "host", "container", "pod_uid",
					    "namespace",    "pid",  "tid"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && !memcmp(names[i], s, n))
			return true;
	return false;
}

static char *own(struct config *cfg, const char *s, size_t n)
{
	char **o, *c;

	c = strndup(s, n);
	if (!c)
		return NULL;
	o = realloc(cfg->owned, (cfg->nowned + 1) * sizeof(*o));
	if (!o) {
		free(c);
		return NULL;
	}
	cfg->owned = o;
	cfg->owned[cfg->nowned++] = c;
	return c;
}

/* "k=v, k2=v2": static labels. */
static int add_labels(struct config *cfg, const struct origin *o, const char *opt, const char *arg)
{
	struct export_config *ex = &cfg->export;
	const char *p = arg;

	while (*p) {
		const char *item, *end, *eq, *ke, *vs, *ve;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (!*p)
			break;
		item = p;
		end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		p = end;
		eq = memchr(item, '=', (size_t)(end - item));
		if (!eq)
			return bad_at(o, opt, arg, "expected name=value pairs separated by commas");
		ke = eq;
		while (ke > item && (ke[-1] == ' ' || ke[-1] == '\t'))
			ke--;
		vs = eq + 1;
		while (vs < end && (*vs == ' ' || *vs == '\t'))
			vs++;
		ve = end;
		while (ve > vs && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		if (!label_name_ok(item, (size_t)(ke - item)))
			return bad_at(o, opt, arg,
				      "a label name is a letter or '_', then letters, digits "
				      "or '_' (64 at most, not starting with '__')");
		if (label_reserved(item, (size_t)(ke - item)))
			return bad_at(o, opt, arg,
				      "service_name, host, container, pod_uid, pid and tid are "
				      "set by profd (service names: [services] or "
				      "--export-service)");
		if (ve == vs || ve - vs > 1024)
			return bad_at(o, opt, arg, "a label value is 1 to 1024 bytes");
		if (ex->nlabels == CONFIG_MAX_LABELS)
			return bad_at(o, opt, arg, "too many labels (max 24)");
		ex->labels[ex->nlabels].name = own(cfg, item, (size_t)(ke - item));
		ex->labels[ex->nlabels].value = own(cfg, vs, (size_t)(ve - vs));
		if (!ex->labels[ex->nlabels].name || !ex->labels[ex->nlabels].value)
			return -ENOMEM;
		ex->nlabels++;
	}
	return 0;
}

static int sample_labels(struct config *cfg, const struct origin *o, const char *opt,
			 const char *arg)
{
	char buf[64];
	char *save = NULL, *tok;

	if (strlen(arg) >= sizeof(buf))
		return bad_at(o, opt, arg, "expected pid, tid, both or none");
	strcpy(buf, arg);
	cfg->export.label_pid = cfg->export.label_tid = false;
	for (tok = strtok_r(buf, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		if (!strcmp(tok, "pid"))
			cfg->export.label_pid = true;
		else if (!strcmp(tok, "tid"))
			cfg->export.label_tid = true;
		else if (strcmp(tok, "none"))
			return bad_at(o, opt, arg, "expected pid, tid, both or none");
	}
	return 0;
}

/* NAME=GLOB: a [services] rule. */
static int add_service(struct config *cfg, const struct origin *o, const char *opt, const char *arg)
{
	struct export_config *ex = &cfg->export;
	const char *eq = strchr(arg, '=');

	if (!eq || eq == arg || !eq[1])
		return bad_at(o, opt, arg, "expected NAME=GLOB");
	if (eq - arg > 256)
		return bad_at(o, opt, arg, "a service name is at most 256 bytes");
	for (const char *c = arg; c < eq; c++)
		if ((unsigned char)*c < 0x20 || *c == '"' || *c == '\\')
			return bad_at(o, opt, arg, "a service name has no quotes or control bytes");
	if (ex->nservices == CONFIG_MAX_SERVICES)
		return bad_at(o, opt, arg, "too many service rules (max 64)");
	ex->services[ex->nservices].name = own(cfg, arg, (size_t)(eq - arg));
	ex->services[ex->nservices].glob = eq + 1;
	if (!ex->services[ex->nservices].name)
		return -ENOMEM;
	ex->nservices++;
	return 0;
}

static int set_header(struct config *cfg, const struct origin *o, const char *opt, const char *arg)
{
	const char *colon = strchr(arg, ':');

	if (!colon || colon == arg)
		return bad_at(o, opt, arg, "expected 'Name: value'");
	for (const char *c = arg; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return bad_at(o, opt, arg, "a header has no control bytes");
		if (c < colon && !(isalnum((unsigned char)*c) || *c == '-' || *c == '_'))
			return bad_at(o, opt, arg, "a header name is letters, digits, '-', '_'");
	}
	if (cfg->export.nheaders == CONFIG_MAX_HEADERS)
		return bad_at(o, opt, arg, "too many headers (max 16)");
	cfg->export.headers[cfg->export.nheaders++] = arg;
	return 0;
}

static int apply(struct parse_state *st, int c, const char *optarg, const struct origin *o)
{
	struct config *cfg = st->cfg;
	uint64_t v;
	uint32_t pid;

	switch (c) {
	case 'p':
		if (parse_u32(optarg, 1, 0x3fffffff, &pid))
			return bad_at(o, "--pid", optarg, "not a process id");
		if (cfg->npids == CONFIG_MAX_PIDS)
			return bad_at(o, "--pid", optarg, "too many --pid options (max 1024)");
		cfg->pids[cfg->npids++] = pid;
		break;
	case 'F':
		if (parse_u32(optarg, 1, MAX_FREQUENCY, &cfg->frequency_hz))
			return bad_at(o, "--frequency", optarg,
				      "expected a whole number of Hz from 1 to 10000");
		break;
	case 's':
		if (!*optarg || strlen(optarg) >= 108)
			return bad_at(o, "--socket", optarg,
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
		if (parse_duration_ns(optarg, NSEC_PER_USEC, NSEC_PER_SEC, &cfg->off_cpu_min_ns))
			return bad_at(o, "--off-cpu-min", optarg,
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
		if (parse_duration_ns(optarg, NSEC_PER_MSEC, 366ull * 86400 * NSEC_PER_SEC, &v))
			return bad("--duration", optarg,
				   "expected a duration such as 30s, 5m or 1h");
		cfg->record_duration = optarg;
		break;
	case OPT_CONFIG:
		break; /* read before the other options */
	case OPT_MEMCAP:
		if (parse_size(optarg, 4ull << 20, 1ull << 40, &cfg->mem_cap))
			return bad_at(o, "--memory-cap", optarg,
				      "expected a size from 4M to 1024G");
		break;
	case OPT_UNWIND_MEMORY:
		if (parse_size(optarg, 1ull << 20, 64ull << 30, &cfg->unwind_memory))
			return bad_at(o, "--unwind-memory", optarg,
				      "expected a size from 1M to 64G");
		break;
	case OPT_UNWIND_MAX_MAPPINGS:
		if (parse_u32(optarg, 16, PROFD_UNWIND_MAPS_LIMIT, &cfg->unwind_max_maps))
			return bad_at(o, "--unwind-max-mappings", optarg,
				      "expected a whole number from 16 to 8192");
		break;
	case OPT_RINGBUF:
		if (parse_size(optarg, 64ull << 10, 1ull << 30, &v) || (v & (v - 1)))
			return bad_at(o, "--ringbuf-size", optarg,
				      "expected a power of two from 64K to 1G");
		cfg->ringbuf_size = v;
		break;
	case OPT_BUCKET:
		if (parse_duration_ns(optarg, NSEC_PER_MSEC * 10, 3600 * NSEC_PER_SEC,
				      &cfg->bucket_ns))
			return bad_at(o, "--bucket", optarg, "expected a duration from 10ms to 1h");
		break;
	case OPT_GPU_RING:
		if (parse_size(optarg, 1ull << 20, 16ull << 30, &cfg->gpu_ring_size))
			return bad_at(o, "--gpu-ring-size", optarg,
				      "expected a size from 1M to 16G");
		break;
	case OPT_GPU_UPLINK_RATE:
		if (parse_u32(optarg, 100, 100000000, &cfg->gpu_uplink_rate))
			return bad_at(o, "--gpu-uplink-rate", optarg,
				      "expected records a second from 100 to 100000000");
		break;
	case OPT_LIBCUDA:
		if (!strcmp(optarg, "none")) {
			cfg->libcuda_none = true;
			break;
		}
		if (optarg[0] != '/' || strlen(optarg) >= 4096)
			return bad_at(o, "--libcuda", optarg,
				      "expected an absolute path or 'none'");
		if (cfg->nlibcuda == CONFIG_MAX_LIBCUDA)
			return bad_at(o, "--libcuda", optarg, "too many --libcuda options (max 8)");
		cfg->libcuda[cfg->nlibcuda++] = optarg;
		break;
	case OPT_GROUP:
		if (!*optarg)
			return bad_at(o, "--socket-group", optarg, "expected a group name");
		cfg->socket_group = optarg;
		break;
	case OPT_LOG:
		if (!strcmp(optarg, "stderr"))
			cfg->log_journal = false;
		else if (!strcmp(optarg, "journal"))
			cfg->log_journal = true;
		else
			return bad_at(o, "--log", optarg, "expected stderr or journal");
		break;
	case OPT_PYROSCOPE:
		if (check_url(o, "--export-pyroscope", optarg))
			return -EINVAL;
		cfg->export.pyroscope = optarg;
		break;
	case OPT_OTLP:
		if (check_url(o, "--export-otlp", optarg))
			return -EINVAL;
		cfg->export.otlp = optarg;
		break;
	case OPT_EX_INTERVAL:
		if (parse_duration_ns(optarg, NSEC_PER_SEC, 3600 * NSEC_PER_SEC,
				      &cfg->export.interval_ns))
			return bad_at(o, "--export-interval", optarg,
				      "expected a duration from 1s to 1h, such as 15s");
		break;
	case OPT_EX_SPOOL:
		if (optarg[0] != '/' || strlen(optarg) >= 3072)
			return bad_at(o, "--export-spool", optarg, "expected an absolute path");
		if (check_spool(o, "--export-spool", optarg))
			return -EINVAL;
		cfg->export.spool = optarg;
		st->spool_checked = true;
		break;
	case OPT_EX_SPOOL_MAX_SIZE:
		if (parse_size(optarg, 1ull << 20, 1ull << 40, &cfg->export.spool_max_size))
			return bad_at(o, "--export-spool-max-size", optarg,
				      "expected a size from 1M to 1024G");
		break;
	case OPT_EX_SPOOL_MAX_AGE:
		if (parse_duration_ns(optarg, 60 * NSEC_PER_SEC, 30 * 86400 * NSEC_PER_SEC,
				      &cfg->export.spool_max_age_ns))
			return bad_at(o, "--export-spool-max-age", optarg,
				      "expected a duration from 1m to 30d, such as 1h");
		break;
	case OPT_EX_RETRY_MAX:
		if (parse_duration_ns(optarg, NSEC_PER_SEC, 3600 * NSEC_PER_SEC,
				      &cfg->export.retry_max_ns))
			return bad_at(o, "--export-retry-max", optarg,
				      "expected a duration from 1s to 1h, such as 5m");
		break;
	case OPT_EX_TIMEOUT:
		if (parse_duration_ns(optarg, NSEC_PER_SEC, 600 * NSEC_PER_SEC,
				      &cfg->export.timeout_ns))
			return bad_at(o, "--export-timeout", optarg,
				      "expected a duration from 1s to 10m, such as 30s");
		break;
	case OPT_EX_LABELS:
		return add_labels(cfg, o, "--export-labels", optarg);
	case OPT_EX_SAMPLE_LABELS:
		return sample_labels(cfg, o, "--export-sample-labels", optarg);
	case OPT_EX_HOST:
		if (!*optarg || strlen(optarg) > 255)
			return bad_at(o, "--export-host", optarg, "expected a host name");
		cfg->export.host = optarg;
		break;
	case OPT_EX_CA_FILE:
		if (check_readable(o, "--export-ca-file", optarg))
			return -EINVAL;
		cfg->export.ca_file = optarg;
		break;
	case OPT_EX_CERT_FILE:
		if (check_readable(o, "--export-cert-file", optarg))
			return -EINVAL;
		cfg->export.cert_file = optarg;
		break;
	case OPT_EX_KEY_FILE:
		if (check_readable(o, "--export-key-file", optarg))
			return -EINVAL;
		cfg->export.key_file = optarg;
		break;
	case OPT_EX_BEARER:
		if (check_readable(o, "--export-bearer-token-file", optarg))
			return -EINVAL;
		cfg->export.bearer_token_file = optarg;
		break;
	case OPT_EX_BASIC:
		if (check_readable(o, "--export-basic-auth-file", optarg))
			return -EINVAL;
		cfg->export.basic_auth_file = optarg;
		break;
	case OPT_EX_HEADER:
		return set_header(cfg, o, "--export-header", optarg);
	case OPT_EX_SERVICE:
		return add_service(cfg, o, "--export-service", optarg);
	case 'v':
		st->verbose++;
		break;
	case 'q':
		st->quiet = true;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

static bool parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(s, yes[i]))
			return *out = true, true;
		if (!strcasecmp(s, no[i]))
			return *out = false, true;
	}
	return false;
}

struct file_ctx {
	struct parse_state *st;
	const char *path;
};

/* One entry of the file: the key names a long option (top level) or --export-KEY. */
static int file_entry(void *ctx, const char *section, const char *key, const char *value,
		      unsigned line)
{
	struct file_ctx *fc = ctx;
	struct config *cfg = fc->st->cfg;
	struct origin o = {.file = fc->path, .line = line, .key = key};
	const struct option *opt = NULL;
	char name[96];
	const char *prefix, *arg;
	size_t n;

	if (!strcmp(section, "services")) {
		char rule[1400];

		if (snprintf(rule, sizeof(rule), "%s=%s", key, value) >= (int)sizeof(rule)) {
			fprintf(stderr, "profd: %s:%u: a service rule is at most 1400 bytes\n",
				fc->path, line);
			return -EINVAL;
		}
		arg = own(cfg, rule, strlen(rule));
		return arg ? apply(fc->st, OPT_EX_SERVICE, arg, &o) : -ENOMEM;
	}
	if (!strcmp(section, "export"))
		prefix = "export-";
	else if (!*section)
		prefix = "";
	else {
		fprintf(stderr,
			"profd: %s:%u: unknown section [%s] (sections: [export], "
			"[services])\n",
			fc->path, line, section);
		return -EINVAL;
	}
	n = (size_t)snprintf(name, sizeof(name), "%s%s", prefix, key);
	for (size_t i = strlen(prefix); i < n && i < sizeof(name); i++)
		if (name[i] == '_')
			name[i] = '-';
	for (size_t i = 0; n < sizeof(name) && longopts[i].name; i++)
		if (!strcmp(longopts[i].name, name)) {
			opt = &longopts[i];
			break;
		}
	/* Keys of [export] live there: `pyroscope` at the top level is a misplaced line. */
	if (!opt || (!*section && !strncmp(name, "export-", 7)) ||
	    (!*section && (opt->val == OPT_PYROSCOPE || opt->val == OPT_OTLP))) {
		fprintf(stderr, "profd: %s:%u: unknown key '%s'%s%s%s\n", fc->path, line, key,
			*section ? " in [" : "", section, *section ? "]" : "");
		return -EINVAL;
	}
	if (command_line_only(opt->val)) {
		fprintf(stderr, "profd: %s:%u: '%s' is a command-line option only\n", fc->path,
			line, key);
		return -EINVAL;
	}
	if (opt->has_arg == no_argument) {
		bool on;

		if (!parse_bool(value, &on)) {
			fprintf(stderr, "profd: %s:%u: %s '%s': expected true or false\n", fc->path,
				line, key, value);
			return -EINVAL;
		}
		return on ? apply(fc->st, opt->val, NULL, &o) : 0;
	}
	if (!*value) {
		fprintf(stderr, "profd: %s:%u: %s: a value is missing\n", fc->path, line, key);
		return -EINVAL;
	}
	arg = own(cfg, value, strlen(value));
	return arg ? apply(fc->st, opt->val, arg, &o) : -ENOMEM;
}

/* --config FILE (or --config=FILE) before any operand or "--"; NULL when not given. */
static const char *find_config(int argc, char **argv, bool *given)
{
	const char *path = NULL;

	*given = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--config") && i + 1 < argc) {
			path = argv[++i];
			*given = true;
		} else if (!strncmp(argv[i], "--config=", 9)) {
			path = argv[i] + 9;
			*given = true;
		}
	}
	return path;
}

void config_free(struct config *cfg)
{
	for (size_t i = 0; i < cfg->nowned; i++)
		free(cfg->owned[i]);
	free(cfg->owned);
	cfg->owned = NULL;
	cfg->nowned = 0;
}

int config_parse(int argc, char **argv, struct config *cfg)
{
	struct parse_state st = {.cfg = cfg};
	bool config_given;
	const char *path;
	int c, err;

	memset(cfg, 0, sizeof(*cfg));
	cfg->frequency_hz = 99;
	cfg->mem_cap = 256ull << 20;
	cfg->ringbuf_size = 0; /* set by the CPU count below unless given */
	cfg->bucket_ns = NSEC_PER_SEC;
	cfg->gpu_ring_size = 8ull << 20;
	cfg->gpu_uplink_rate = 200000;
	cfg->unwind_memory = 256ull << 20;
	cfg->unwind_max_maps = PROFD_UNWIND_MAX_MAPS;
	cfg->off_cpu_min_ns = 10 * NSEC_PER_USEC;
	cfg->socket_path = wire_socket_path(NULL);
	cfg->export.interval_ns = 15 * NSEC_PER_SEC;
	cfg->export.spool = "/var/lib/profd/spool";
	cfg->export.spool_max_size = 1ull << 30;
	cfg->export.spool_max_age_ns = 3600 * NSEC_PER_SEC;
	cfg->export.retry_max_ns = 300 * NSEC_PER_SEC;
	cfg->export.timeout_ns = 30 * NSEC_PER_SEC;

	path = find_config(argc, argv, &config_given);
	if (!config_given && access(CONFIG_FILE_DEFAULT, F_OK) == 0)
		path = CONFIG_FILE_DEFAULT;
	if (config_given && !*path) {
		fprintf(stderr, "profd: --config '': expected a file name (see profd --help)\n");
		return -EINVAL;
	}
	if (path) {
		struct file_ctx fc = {.st = &st, .path = path};

		static const char *const sections[] = {"export", "services", NULL};

		err = config_file_read(path, sections, file_entry, &fc);
		if (err)
			return -EINVAL;
		cfg->config_file = path;
	}

	opterr = 0;
	optind = 1;
	/* "+": options end at the first operand, so a recorded command keeps its own. */
	while ((c = getopt_long(argc, argv, "+:p:F:s:o:vqhV", longopts, NULL)) != -1) {
		switch (c) {
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
		case '?':
			fprintf(stderr, "profd: unknown option '%s' (see profd --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		default:
			err = apply(&st, c, optarg, NULL);
			if (err)
				return err;
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
	/* the default folder is used only when something is exported */
	if ((cfg->export.pyroscope || cfg->export.otlp) && !st.spool_checked &&
	    check_spool(NULL, "--export-spool", cfg->export.spool))
		return -EINVAL;
	if (!cfg->ringbuf_size)
		cfg->ringbuf_size = config_default_ringbuf(sysconf(_SC_NPROCESSORS_CONF));
	/* --record shares the terminal with the command: only what needs saying. */
	cfg->log_level = st.quiet      ? LOG_LVL_ERROR
			 : st.verbose  ? LOG_LVL_DEBUG
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
