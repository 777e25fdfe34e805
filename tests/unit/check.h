/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Assertions for unit tests: print the expression and the values, count failures. Each check is
 * an expression that is true when it passed, so a test can stop early where going on would only
 * dereference what just failed:
 *
 *	if (!CHECK(p != NULL))
 *		return;
 *
 * and still a statement of its own everywhere else.
 */
#ifndef PROFD_CHECK_H
#define PROFD_CHECK_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                                                \
	({                                                                                         \
		bool ok_ = (cond);                                                                 \
		check_count++;                                                                     \
		if (!ok_) {                                                                        \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);   \
			check_failures++;                                                          \
		}                                                                                  \
		ok_;                                                                               \
	})

#define CHECK_EQ_U(a, b)                                                                           \
	({                                                                                         \
		unsigned long long va_ = (unsigned long long)(a), vb_ = (unsigned long long)(b);   \
		check_count++;                                                                     \
		if (va_ != vb_) {                                                                  \
			fprintf(stderr, "%s:%d: %s == %s failed: %llu != %llu\n", __FILE__,        \
				__LINE__, #a, #b, va_, vb_);                                       \
			check_failures++;                                                          \
		}                                                                                  \
		va_ == vb_;                                                                        \
	})

#define CHECK_EQ_I(a, b)                                                                           \
	({                                                                                         \
		long long va_ = (long long)(a), vb_ = (long long)(b);                              \
		check_count++;                                                                     \
		if (va_ != vb_) {                                                                  \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__,        \
				__LINE__, #a, #b, va_, vb_);                                       \
			check_failures++;                                                          \
		}                                                                                  \
		va_ == vb_;                                                                        \
	})

#define CHECK_STREQ(a, b)                                                                          \
	({                                                                                         \
		const char *sa_ = (a), *sb_ = (b);                                                 \
		bool ok_ = sa_ && sb_ && strcmp(sa_, sb_) == 0;                                    \
		check_count++;                                                                     \
		if (!ok_) {                                                                        \
			fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__,    \
				__LINE__, #a, #b, sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");     \
			check_failures++;                                                          \
		}                                                                                  \
		ok_;                                                                               \
	})

/* Call at the end of main(): prints a summary, returns the exit code. */
#define CHECK_DONE()                                                                               \
	(fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures),                   \
	 (check_failures || check_count == 0) ? 1 : 0)

/*
 * Return from main() with this when the test cannot run here: the exit code, 77 (skip) only
 * when nothing failed so far and CI is not "true". A skip after a failed check would hide the
 * failure, and CI runs where everything a test needs is installed, so a skip there is a defect.
 */
#define CHECK_SKIP(reason)                                                                         \
	({                                                                                         \
		const char *ci_ = getenv("CI");                                                    \
		int rc_ = 77;                                                                      \
		fprintf(stderr, "SKIP: %s\n", (reason));                                           \
		if (check_failures) {                                                              \
			fprintf(stderr, "%d checks, %d failed: not a skip\n", check_count,         \
				check_failures);                                                   \
			rc_ = 1;                                                                   \
		} else if (ci_ && !strcmp(ci_, "true")) {                                          \
			fprintf(stderr, "FAIL: a skip in CI (CI=true)\n");                         \
			rc_ = 1;                                                                   \
		}                                                                                  \
		rc_;                                                                               \
	})

/*
 * A file of a fake /proc: ROOT/PID (made if missing) and ROOT/PID/NAME written with the
 * formatted text, for the tests of code that reads a proc_root.
 */
static inline __attribute__((format(printf, 4, 5))) void
check_fake_proc_file(const char *root, uint32_t pid, const char *name, const char *fmt, ...)
{
	char path[512];
	va_list ap;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%u", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/%s", root, pid, name);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

/*
 * Runs fn in a child process of its own, for tests of code that keeps global state (the CUPTI
 * library's), after setup (when not NULL) in that child. Returns 0 when the child made checks
 * and all passed, else 1, having said which test failed.
 */
static inline int check_run_forked(const char *name, void (*setup)(void), void (*fn)(void))
{
	int status = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		check_count = check_failures = 0;
		if (setup)
			setup();
		fn();
		fprintf(stderr, "%s: %d checks, %d failed\n", name, check_count, check_failures);
		fflush(NULL);
		_exit(check_failures || !check_count ? 1 : 0);
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "%s: FAILED (status 0x%x)\n", name, status);
		return 1;
	}
	return 0;
}

#endif
