// SPDX-License-Identifier: BSD-2-Clause
/* The daemon's command line: the defaults that depend on the machine, and given sizes. */
#include "check.h"
#include "config.h"
#include "timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static int parse(struct config *cfg, int argc, char **argv)
{
	FILE *saved = stderr;
	int r;

	/* Refusals print a line: keep the test's output quiet. */
	stderr = fopen("/dev/null", "w");
	r = config_parse(argc, argv, cfg);
	fclose(stderr);
	stderr = saved;
	return r;
}

/* parse() with the refusal's line captured in err (size n). */
static int parse_err(struct config *cfg, int argc, char **argv, char *err, size_t n)
{
	FILE *saved = stderr;
	int r;

	stderr = fmemopen(err, n, "w");
	r = config_parse(argc, argv, cfg);
	fclose(stderr);
	stderr = saved;
	return r;
}

static const char *write_file(const char *text)
{
	static char path[] = "/tmp/profd-test-config-XXXXXX";
	int fd;

	strcpy(path, "/tmp/profd-test-config-XXXXXX");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_EQ_I(write(fd, text, strlen(text)), (int)strlen(text));
	close(fd);
	return path;
}

/* The configuration file: keys, sections, comments, the command line winning, errors by line. */
static void test_file(void)
{
	const char *good = "# a fleet node\n"
			   "frequency = 49\n"
			   "off_cpu = true\n"
			   "memory_cap = 64M   # comment after a value\n"
			   "\n"
			   "[export]\n"
			   "pyroscope = https://pyroscope.example:4040\n"
			   "otlp = http://collector:4318/\n"
			   "interval = 20s\n"
			   "spool = /var/tmp/spool\n"
			   "labels = cluster=train-a, region=eu\n"
			   "labels = rack=r7\n"
			   "sample_labels = pid\n"
			   "header = X-Scope-OrgID: team-a\n"
			   "[services]\n"
			   "trainer = *train.py*\n";
	char err[512];
	struct config cfg;
	const char *path = write_file(good);
	char *argv[] = {"profd", "--config", (char *)path, "--frequency", "19", NULL};

	CHECK_EQ_I(parse(&cfg, 5, argv), CONFIG_RUN);
	CHECK_EQ_U(cfg.frequency_hz, 19); /* the command line wins */
	CHECK(cfg.off_cpu);
	CHECK_EQ_U(cfg.mem_cap, 64u << 20);
	CHECK_STREQ(cfg.export.pyroscope, "https://pyroscope.example:4040");
	CHECK_STREQ(cfg.export.otlp, "http://collector:4318/");
	CHECK_EQ_U(cfg.export.interval_ns, 20 * NSEC_PER_SEC);
	CHECK_STREQ(cfg.export.spool, "/var/tmp/spool");
	CHECK_EQ_U(cfg.export.nlabels, 3);
	CHECK_STREQ(cfg.export.labels[0].name, "cluster");
	CHECK_STREQ(cfg.export.labels[0].value, "train-a");
	CHECK_STREQ(cfg.export.labels[1].name, "region");
	CHECK_STREQ(cfg.export.labels[1].value, "eu");
	CHECK_STREQ(cfg.export.labels[2].value, "r7");
	CHECK(cfg.export.label_pid && !cfg.export.label_tid);
	CHECK_EQ_U(cfg.export.nheaders, 1);
	CHECK_STREQ(cfg.export.headers[0], "X-Scope-OrgID: team-a");
	CHECK_EQ_U(cfg.export.nservices, 1);
	CHECK_STREQ(cfg.export.services[0].name, "trainer");
	CHECK_STREQ(cfg.export.services[0].glob, "*train.py*");
	config_free(&cfg);
	unlink(path);

	/* Each mistake: one line naming the file and the line. */
	static const struct {
		const char *text, *want;
	} bad[] = {
	    {"frequency = 49\nbogus = 1\n", ":2: unknown key 'bogus'"},
	    {"[export]\npyroscope = not a url\n", ":2: pyroscope 'not a url': not a URL"},
	    {"[export]\notlp = ftp://x/\n", ":2: otlp 'ftp://x/': expected an http"},
	    {"[export]\nbearer_token_file = /nonexistent/token\n",
	     ":2: bearer_token_file '/nonexistent/token': cannot read it"},
	    {"pyroscope = http://x:4040\n", ":1: unknown key 'pyroscope'"},
	    {"[exports]\n", ":1: unknown section [exports]"},
	    {"frequency 49\n", ":1: expected 'key = value'"},
	    {"\n\n[export]\ninterval = 0s\n", ":4: interval '0s': expected a duration"},
	    {"[export]\nlabels = host=x\n", ":2: labels 'host=x': service_name, host"},
	    {"off_cpu = maybe\n", ":1: off_cpu 'maybe': expected true or false"},
	    {"record = true\n", ":1: 'record' is a command-line option only"},
	    {"[export]\nheader = NoColon\n", ":2: header 'NoColon': expected 'Name: value'"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *a[] = {"profd", "--config", NULL, NULL};

		a[2] = (char *)write_file(bad[i].text);
		memset(err, 0, sizeof(err));
		CHECK_EQ_I(parse_err(&cfg, 3, a, err, sizeof(err)), -EINVAL);
		if (!strstr(err, bad[i].want) || !strstr(err, a[2]) ||
		    strchr(err, '\n') != err + strlen(err) - 1)
			fprintf(stderr, "case %zu: got '%s', want '%s'\n", i, err, bad[i].want);
		CHECK(strstr(err, bad[i].want) != NULL);
		CHECK(strstr(err, a[2]) == err + strlen("profd: "));
		config_free(&cfg);
		unlink(a[2]);
	}
	/* A missing file given with --config is an error; flags check URLs as well. */
	memset(err, 0, sizeof(err));
	CHECK_EQ_I(parse_err(&cfg, 3, (char *[]){"profd", "--config", "/nonexistent.conf", NULL},
			     err, sizeof(err)),
		   -EINVAL);
	CHECK(strstr(err, "/nonexistent.conf: No such file") != NULL);
	config_free(&cfg);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--pyroscope", "localhost", NULL}), -EINVAL);
	config_free(&cfg);
	CHECK_EQ_I(parse(&cfg, 5,
			 (char *[]){"profd", "--otlp", "http://127.0.0.1:4318", "--export-labels",
				    "a=1,b=2", NULL}),
		   CONFIG_RUN);
	CHECK_EQ_U(cfg.export.nlabels, 2);
	CHECK_EQ_U(cfg.export.interval_ns, 15 * NSEC_PER_SEC);
	config_free(&cfg);
}

static void test_ringbuf_default(void)
{
	/* 512 KiB a CPU, as a power of two, within 4 and 32 MiB. */
	CHECK_EQ_U(config_default_ringbuf(0), 4u << 20);
	CHECK_EQ_U(config_default_ringbuf(1), 4u << 20);
	CHECK_EQ_U(config_default_ringbuf(2), 4u << 20);
	CHECK_EQ_U(config_default_ringbuf(8), 4u << 20);
	CHECK_EQ_U(config_default_ringbuf(9), 8u << 20);
	CHECK_EQ_U(config_default_ringbuf(16), 8u << 20);
	CHECK_EQ_U(config_default_ringbuf(48), 32u << 20);
	CHECK_EQ_U(config_default_ringbuf(64), 32u << 20);
	CHECK_EQ_U(config_default_ringbuf(4096), 32u << 20);
}

static void test_sizes(void)
{
	struct config cfg;

	CHECK_EQ_I(parse(&cfg, 1, (char *[]){"profd", NULL}), CONFIG_RUN);
	CHECK_EQ_U(cfg.ringbuf_size, config_default_ringbuf(sysconf(_SC_NPROCESSORS_CONF)));
	CHECK_EQ_U(cfg.gpu_ring_size, 8u << 20);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--ringbuf-size", "1M", NULL}), CONFIG_RUN);
	CHECK_EQ_U(cfg.ringbuf_size, 1u << 20);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--ringbuf-size", "3M", NULL}), -EINVAL);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--gpu-ring-size", "64M", NULL}), CONFIG_RUN);
	CHECK_EQ_U(cfg.gpu_ring_size, 64u << 20);
	/* Records a second an uplink may send: a plain number in range, nothing else. */
	CHECK_EQ_I(parse(&cfg, 1, (char *[]){"profd", NULL}), CONFIG_RUN);
	CHECK_EQ_U(cfg.gpu_uplink_rate, 200000);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--gpu-uplink-rate", "5000", NULL}),
		   CONFIG_RUN);
	CHECK_EQ_U(cfg.gpu_uplink_rate, 5000);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--gpu-uplink-rate", "99", NULL}), -EINVAL);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--gpu-uplink-rate", "1e5", NULL}), -EINVAL);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--gpu-uplink-rate", "100000001", NULL}),
		   -EINVAL);
}

static void test_unwind_memory(void)
{
	static const char *const bad[] = {"0", "12Q", "65G", "1023K", "-1M", "", "1M5"};
	struct config cfg;
	char err[512];

	CHECK_EQ_I(parse(&cfg, 1, (char *[]){"profd", NULL}), CONFIG_RUN);
	CHECK_EQ_U(cfg.unwind_memory, 256ull << 20);
	config_free(&cfg);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--unwind-memory", "1M", NULL}), CONFIG_RUN);
	CHECK_EQ_U(cfg.unwind_memory, 1ull << 20);
	config_free(&cfg);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--unwind-memory", "64G", NULL}), CONFIG_RUN);
	CHECK_EQ_U(cfg.unwind_memory, 64ull << 30);
	config_free(&cfg);
	/* Out of 1M..64G or not a size: one line naming the option, the value and the range. */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[128];

		snprintf(want, sizeof(want),
			 "profd: --unwind-memory '%s': expected a size from 1M to 64G", bad[i]);
		memset(err, 0, sizeof(err));
		CHECK_EQ_I(parse_err(&cfg, 3,
				     (char *[]){"profd", "--unwind-memory", (char *)bad[i], NULL},
				     err, sizeof(err)),
			   -EINVAL);
		if (strncmp(err, want, strlen(want)))
			fprintf(stderr, "--unwind-memory '%s': got '%s'\n", bad[i], err);
		CHECK(strncmp(err, want, strlen(want)) == 0);
		CHECK(strchr(err, '\n') == err + strlen(err) - 1);
		config_free(&cfg);
	}
	/* The same key in the configuration file, named by file and line. */
	{
		char *a[] = {"profd", "--config", NULL, NULL};
		const char *want = ":2: unwind_memory 'x': expected a size from 1M to 64G";

		a[2] = (char *)write_file("frequency = 49\nunwind_memory = x\n");
		memset(err, 0, sizeof(err));
		CHECK_EQ_I(parse_err(&cfg, 3, a, err, sizeof(err)), -EINVAL);
		if (!strstr(err, want))
			fprintf(stderr, "unwind_memory = x: got '%s'\n", err);
		CHECK(strstr(err, want) != NULL);
		CHECK(strstr(err, a[2]) == err + strlen("profd: "));
		CHECK(strchr(err, '\n') == err + strlen(err) - 1);
		config_free(&cfg);
		unlink(a[2]);
		a[2] = (char *)write_file("unwind_memory = 2G\n");
		CHECK_EQ_I(parse(&cfg, 3, a), CONFIG_RUN);
		CHECK_EQ_U(cfg.unwind_memory, 2ull << 30);
		config_free(&cfg);
		unlink(a[2]);
	}
}

static void test_unwind_max_mappings(void)
{
	static const char *const bad[] = {"0", "15", "8193", "512x", "-1", "", "1e3"};
	struct config cfg;
	char err[512];

	CHECK_EQ_I(parse(&cfg, 1, (char *[]){"profd", NULL}), CONFIG_RUN);
	CHECK_EQ_U(cfg.unwind_max_maps, 512);
	config_free(&cfg);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--unwind-max-mappings", "16", NULL}),
		   CONFIG_RUN);
	CHECK_EQ_U(cfg.unwind_max_maps, 16);
	config_free(&cfg);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--unwind-max-mappings", "8192", NULL}),
		   CONFIG_RUN);
	CHECK_EQ_U(cfg.unwind_max_maps, 8192);
	config_free(&cfg);
	/* Out of 16..8192 or not a whole number: one line naming the option, value and range. */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[128];

		snprintf(
		    want, sizeof(want),
		    "profd: --unwind-max-mappings '%s': expected a whole number from 16 to 8192",
		    bad[i]);
		memset(err, 0, sizeof(err));
		CHECK_EQ_I(
		    parse_err(&cfg, 3,
			      (char *[]){"profd", "--unwind-max-mappings", (char *)bad[i], NULL},
			      err, sizeof(err)),
		    -EINVAL);
		if (strncmp(err, want, strlen(want)))
			fprintf(stderr, "--unwind-max-mappings '%s': got '%s'\n", bad[i], err);
		CHECK(strncmp(err, want, strlen(want)) == 0);
		CHECK(strchr(err, '\n') == err + strlen(err) - 1);
		config_free(&cfg);
	}
	/* The same key in the configuration file; the command line wins over it. */
	{
		char *a[] = {"profd", "--config", NULL, NULL, NULL};

		a[2] = (char *)write_file("unwind_max_mappings = 2048\n");
		CHECK_EQ_I(parse(&cfg, 3, a), CONFIG_RUN);
		CHECK_EQ_U(cfg.unwind_max_maps, 2048);
		config_free(&cfg);
		a[3] = "--unwind-max-mappings=100";
		CHECK_EQ_I(parse(&cfg, 4, a), CONFIG_RUN);
		CHECK_EQ_U(cfg.unwind_max_maps, 100);
		config_free(&cfg);
		unlink(a[2]);
	}
}

static void test_children_and_record(void)
{
	char *record_argv[] = {"profd",	 "--record", "-o",    "x.svg", "--",
			       "python", "-v",	     "--pid", NULL};
	struct config cfg;

	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--pid", "12", NULL}), CONFIG_RUN);
	CHECK(!cfg.no_children && !cfg.record);
	CHECK_EQ_I(parse(&cfg, 4, (char *[]){"profd", "--pid", "12", "--no-children", NULL}),
		   CONFIG_RUN);
	CHECK(cfg.no_children);
	/* Without --pid every process is sampled: nothing to leave out. */
	CHECK_EQ_I(parse(&cfg, 2, (char *[]){"profd", "--no-children", NULL}), -EINVAL);

	/* The command keeps its own options (cfg points into argv: it must outlive cfg's use). */
	CHECK_EQ_I(parse(&cfg, 8, record_argv), CONFIG_RUN);
	CHECK(cfg.record);
	CHECK_STREQ(cfg.record_output, "x.svg");
	CHECK_STREQ(cfg.record_argv[0], "python");
	CHECK_STREQ(cfg.record_argv[1], "-v");
	CHECK_STREQ(cfg.record_argv[2], "--pid");
	CHECK(cfg.record_argv[3] == NULL);
	CHECK_EQ_U(cfg.npids, 0);
	CHECK_EQ_I(cfg.log_level, LOG_LVL_WARN);
	CHECK_EQ_I(parse(&cfg, 5, (char *[]){"profd", "--record", "--duration", "2s", "--", NULL}),
		   -EINVAL);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "--record", "ls", NULL}), -EINVAL);
	CHECK_EQ_I(parse(&cfg, 6, (char *[]){"profd", "--record", "--pid", "3", "--", "ls", NULL}),
		   -EINVAL);
	CHECK_EQ_I(
	    parse(&cfg, 6, (char *[]){"profd", "--record", "--duration", "soon", "--", "ls", NULL}),
	    -EINVAL);
	CHECK_EQ_I(parse(&cfg, 3, (char *[]){"profd", "-o", "x.svg", NULL}), -EINVAL);
}

/*
 * The spool is a trust boundary: a folder others can write, or a link on its path, is refused
 * with one line naming it; missing folders (profd makes them) and a sticky /tmp on the way are
 * fine.
 */
static void test_spool(void)
{
	char dir[] = "/tmp/profd-test-spool-XXXXXX", p[96], q[96], err[512];
	struct config cfg;

	if (!CHECK(mkdtemp(dir) != NULL))
		return;
	snprintf(p, sizeof(p), "%s/missing/spool", dir);
	CHECK_EQ_I(parse(&cfg, 5,
			 (char *[]){"profd", "--pyroscope", "http://127.0.0.1:9", "--export-spool",
				    p, NULL}),
		   CONFIG_RUN);
	snprintf(p, sizeof(p), "%s/open", dir);
	CHECK_EQ_I(mkdir(p, 0700), 0);
	CHECK_EQ_I(chmod(p, 0777), 0);
	strcat(p, "/spool");
	err[0] = '\0';
	CHECK_EQ_I(parse_err(&cfg, 5,
			     (char *[]){"profd", "--pyroscope", "http://127.0.0.1:9",
					"--export-spool", p, NULL},
			     err, sizeof(err)),
		   -EINVAL);
	CHECK(strstr(err, "/open is writable by others (mode 0777) and not sticky: refusing it"));
	snprintf(q, sizeof(q), "%s/link", dir);
	snprintf(p, sizeof(p), "%s/missing", dir);
	CHECK_EQ_I(symlink(p, q), 0);
	strcat(q, "/spool");
	err[0] = '\0';
	CHECK_EQ_I(parse_err(&cfg, 5,
			     (char *[]){"profd", "--pyroscope", "http://127.0.0.1:9",
					"--export-spool", q, NULL},
			     err, sizeof(err)),
		   -EINVAL);
	CHECK(strstr(err, "/link is a symbolic link: refusing it"));
	snprintf(p, sizeof(p), "%s/open", dir);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/link", dir);
	unlink(p);
	rmdir(dir);
}

/*
 * A FIFO given as the configuration (or as a credentials file) is refused with one line, at
 * once: opening it to read would wait for a writer forever, at start and on every reload.
 */
static void test_fifo(void)
{
	char dir[] = "/tmp/profd-test-fifo-XXXXXX", fifo[64], text[160], err[512];
	const char *conf;
	struct config cfg;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	CHECK_EQ_I(mkfifo(fifo, 0600), 0);
	/* A hang is the bug: turn it into a failure instead of the test runner's timeout. */
	alarm(10);
	memset(err, 0, sizeof(err));
	CHECK_EQ_I(
	    parse_err(&cfg, 3, (char *[]){"profd", "--config", fifo, NULL}, err, sizeof(err)),
	    -EINVAL);
	CHECK(strstr(err, fifo) == err + strlen("profd: "));
	CHECK(strstr(err, ": not a regular file\n") != NULL);
	CHECK(strchr(err, '\n') == err + strlen(err) - 1);
	config_free(&cfg);

	snprintf(text, sizeof(text), "[export]\nbearer_token_file = %s\n", fifo);
	conf = write_file(text);
	memset(err, 0, sizeof(err));
	CHECK_EQ_I(parse_err(&cfg, 3, (char *[]){"profd", "--config", (char *)conf, NULL}, err,
			     sizeof(err)),
		   -EINVAL);
	CHECK(strstr(err, ":2: bearer_token_file") != NULL);
	CHECK(strstr(err, "cannot read it: not a regular file") != NULL);
	config_free(&cfg);
	alarm(0);
	unlink(conf);
	unlink(fifo);
	rmdir(dir);
}

/*
 * What a SIGHUP compares to keep the exporter running: the [export] settings (a
 * sampling setting is no change) and the bytes of the credentials files (a rotated token is).
 */
static void test_export_same(void)
{
	char tok[] = "/tmp/profd-test-token-XXXXXX", text[512];
	struct config a, b;
	const char *path;
	uint64_t h;
	int fd;

	fd = mkstemp(tok);
	CHECK(fd >= 0);
	CHECK_EQ_I(write(fd, "one\n", 4), 4);
	close(fd);
	snprintf(text, sizeof(text),
		 "frequency = 49\n[export]\npyroscope = http://127.0.0.1:9\ninterval = 2s\n"
		 "labels = a=1, b=2\nheader = X-A: 1\nbearer_token_file = %s\n"
		 "[services]\nt = *train*\n",
		 tok);
	path = write_file(text);
	CHECK_EQ_I(parse(&a, 3, (char *[]){"profd", "--config", (char *)path, NULL}), CONFIG_RUN);
	h = config_export_files_hash(&a.export);

	/* Parsed again, with only the sampling rate changed: the same. */
	CHECK_EQ_I(
	    parse(&b, 5, (char *[]){"profd", "--config", (char *)path, "--frequency", "19", NULL}),
	    CONFIG_RUN);
	CHECK(config_export_same(&a.export, &b.export));
	CHECK(config_export_files_hash(&b.export) == h);
	config_free(&b);

	/* Each setting differs on its own. */
	static const char *const other[] = {
	    "--export-interval=3s",	 "--export-labels=a=1,b=3",    "--export-header=X-A: 2",
	    "--otlp=http://127.0.0.1:9", "--export-sample-labels=pid",
	};
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		CHECK_EQ_I(
		    parse(&b, 4,
			  (char *[]){"profd", "--config", (char *)path, (char *)other[i], NULL}),
		    CONFIG_RUN);
		if (config_export_same(&a.export, &b.export))
			fprintf(stderr, "%s: seen as the same\n", other[i]);
		CHECK(!config_export_same(&a.export, &b.export));
		config_free(&b);
	}

	/* The token file rotated under the same name: the hash differs. */
	fd = open(tok, O_WRONLY | O_TRUNC);
	CHECK(fd >= 0);
	CHECK_EQ_I(write(fd, "two\n", 4), 4);
	close(fd);
	CHECK(config_export_files_hash(&a.export) != h);
	config_free(&a);
	unlink(path);
	unlink(tok);
}

int main(void)
{
	test_file();
	test_fifo();
	test_export_same();
	test_spool();
	test_children_and_record();
	test_ringbuf_default();
	test_sizes();
	test_unwind_memory();
	test_unwind_max_mappings();
	return CHECK_DONE();
}
