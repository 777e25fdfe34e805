// SPDX-License-Identifier: BSD-2-Clause
/*
 * The NVTX entry point (cupti/nvtx.c) against the fake libcupti and a fake CUDA driver: NVTX
 * goes to CUPTI only when the driver answers (asked before any CUPTI call, since the 13.2
 * libcupti overflows its stack in cuptiGetVersion without one) and CUPTI is not 13.0 GA; else
 * NVTX stays a no-op, and with PROFD_CUPTI_VERBOSE=1 one line says why. Each case runs in its
 * own child process: the entry point says why only once per process.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fake_cuda.h"
#include "fake_cupti.h"
#include "nvtx_init.h"

int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t));

static const void *fake_export_table(uint32_t id)
{
	return NULL;
}

/* Every call the fake libcupti saw. */
static size_t cupti_calls(void)
{
	const struct fake_call *calls;

	return fake_cupti_calls(&calls);
}

/* stderr goes to a file until end_capture, which returns what was written (static buffer). */
static int saved_stderr = -1, capture_fd = -1;

static void begin_capture(void)
{
	char path[] = "/tmp/profd-test-nvtx-XXXXXX";

	fflush(stderr);
	capture_fd = mkstemp(path);
	CHECK(capture_fd >= 0);
	unlink(path);
	saved_stderr = dup(STDERR_FILENO);
	dup2(capture_fd, STDERR_FILENO);
}

static const char *end_capture(void)
{
	static char buf[4096];
	ssize_t n;

	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	n = pread(capture_fd, buf, sizeof(buf) - 1, 0);
	close(capture_fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/*
 * Calls the entry point twice with stderr captured: both refuse, one line says why, and CUPTI
 * was asked to take NVTX inits times in all.
 */
static void check_refused(const char *why, size_t inits)
{
	const char *out, *nl;

	setenv("PROFD_CUPTI_VERBOSE", "1", 1);
	begin_capture();
	CHECK_EQ_I(InitializeInjectionNvtx2(fake_export_table), 0);
	CHECK_EQ_I(InitializeInjectionNvtx2(fake_export_table), 0);
	out = end_capture();
	nl = strchr(out, '\n');
	CHECK(strncmp(out, "profd_cupti: NVTX is not collected: ", 36) == 0);
	CHECK(strstr(out, why) != NULL);
	if (!CHECK(nl && nl[1] == '\0'))
		fprintf(stderr, "stderr: %s\n", out);
	CHECK_EQ_U(fake_cupti_call_count("cuptiNvtxInitialize2"), inits);
}

static void case_no_driver(void)
{
	nvtx__test_set_driver("libprofd-test-no-such-driver.so.1");
	check_refused("no CUDA driver (libprofd-test-no-such-driver.so.1: ", 0);
	/* Not one CUPTI call: the 13.2 libcupti recurses in cuptiGetVersion without a driver. */
	CHECK_EQ_U(cupti_calls(), 0);
}

static void case_stub_driver(void)
{
	fake_cuda_set_result(CUDA_ERROR_STUB_LIBRARY);
	check_refused("is not a working CUDA driver (cuDriverGetVersion: error 34)", 0);
	CHECK_EQ_U(cupti_calls(), 0);
}

/* A library of that name without the driver's entry points (the fake libcupti here). */
static void case_not_a_driver(void)
{
	nvtx__test_set_driver(FAKE_CUPTI_PATH);
	check_refused("is not a CUDA driver (no cuDriverGetVersion)", 0);
	CHECK_EQ_U(cupti_calls(), 0);
}

static void case_cupti_13_0_ga(void)
{
	fake_cupti_set_version(130000);
	check_refused("is CUPTI 130000 (CUDA 13.0 GA), which crashes on NVTX", 0);
	CHECK_EQ_U(fake_cupti_call_count("cuptiGetVersion"), 2);
}

static void case_get_version_fails(void)
{
	fake_cupti_set_result("cuptiGetVersion", CUPTI_ERROR_UNKNOWN);
	check_refused("cuptiGetVersion failed (CUPTI error 999)", 0);
}

static void case_no_cupti(void)
{
	setenv("PROFD_CUPTI_PATH", "/nonexistent/libcupti.so", 1);
	check_refused("PROFD_CUPTI_PATH: /nonexistent/libcupti.so", 0);
	CHECK_EQ_I(fake_cupti_call_count("cuptiGetVersion"), 0);
}

/* 13.0 Update 1 and later take NVTX; the driver and the version are asked first, quietly. */
static void case_taken(void)
{
	int ver, init;

	fake_cupti_set_version(130001);
	begin_capture();
	CHECK_EQ_I(InitializeInjectionNvtx2(fake_export_table), 1);
	CHECK_STREQ(end_capture(), "");
	CHECK(fake_cuda_calls() >= 1);
	ver = fake_cupti_call_index("cuptiGetVersion", false, 0);
	init = fake_cupti_call_index("cuptiNvtxInitialize2", true,
				     (uint64_t)(uintptr_t)fake_export_table);
	CHECK(ver >= 0 && init > ver);
	/* CUPTI refusing it leaves NVTX a no-op too. */
	fake_cupti_set_result("cuptiNvtxInitialize2", CUPTI_ERROR_NOT_INITIALIZED);
	check_refused("cuptiNvtxInitialize2 failed (CUPTI error 15)", 3);
}

/* Not verbose, or quiet: nothing on stderr. */
static void case_silent(void)
{
	nvtx__test_set_driver("libprofd-test-no-such-driver.so.1");
	begin_capture();
	CHECK_EQ_I(InitializeInjectionNvtx2(fake_export_table), 0);
	setenv("PROFD_CUPTI_VERBOSE", "1", 1);
	setenv("PROFD_CUPTI_QUIET", "1", 1);
	CHECK_EQ_I(InitializeInjectionNvtx2(fake_export_table), 0);
	CHECK_STREQ(end_capture(), "");
}

/* stderr a pipe nobody reads any more: the line is lost, the application lives on. */
static void case_closed_stderr(void)
{
	int p[2], saved;

	CHECK_EQ_I(pipe(p), 0);
	close(p[0]);
	saved = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	close(p[1]);
	setenv("PROFD_CUPTI_VERBOSE", "1", 1);
	nvtx__test_set_driver("libprofd-test-no-such-driver.so.1");
	CHECK_EQ_I(InitializeInjectionNvtx2(fake_export_table), 0);
	dup2(saved, STDERR_FILENO);
	close(saved);
}

/* -------------------------------------------------------------------------------------------- */

/* Each case in a child: the library keeps its state in globals. */
static void child_setup(void)
{
	setenv("PROFD_CUPTI_PATH", FAKE_CUPTI_PATH, 1);
	nvtx__test_set_driver(FAKE_CUDA_PATH);
}

#define RUN(fn) CHECK_EQ_I(check_run_forked(#fn, child_setup, fn), 0)

int main(void)
{
	unsetenv("PROFD_CUPTI_VERBOSE");
	unsetenv("PROFD_CUPTI_QUIET");
	RUN(case_no_driver);
	RUN(case_stub_driver);
	RUN(case_not_a_driver);
	RUN(case_cupti_13_0_ga);
	RUN(case_get_version_fails);
	RUN(case_no_cupti);
	RUN(case_taken);
	RUN(case_silent);
	RUN(case_closed_stderr);
	return CHECK_DONE();
}
