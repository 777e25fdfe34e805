// SPDX-License-Identifier: BSD-2-Clause
/* The daemon's command line: the defaults that depend on the machine, and given sizes. */
#include "check.h"
#include "config.h"

#include <errno.h>
#include <stdio.h>
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

int main(void)
{
	test_children_and_record();
	test_ringbuf_default();
	test_sizes();
	return CHECK_DONE();
}
