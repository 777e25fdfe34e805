/* SPDX-License-Identifier: BSD-2-Clause */
/* Assertions for unit tests: print the expression and the values, count failures. */
#ifndef PROFD_CHECK_H
#define PROFD_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		check_count++;                                                                     \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);   \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

#define CHECK_EQ_U(a, b)                                                                           \
	do {                                                                                       \
		unsigned long long va_ = (unsigned long long)(a), vb_ = (unsigned long long)(b);   \
		check_count++;                                                                     \
		if (va_ != vb_) {                                                                  \
			fprintf(stderr, "%s:%d: %s == %s failed: %llu != %llu\n", __FILE__,         \
				__LINE__, #a, #b, va_, vb_);                                       \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

#define CHECK_EQ_I(a, b)                                                                           \
	do {                                                                                       \
		long long va_ = (long long)(a), vb_ = (long long)(b);                              \
		check_count++;                                                                     \
		if (va_ != vb_) {                                                                  \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__,         \
				__LINE__, #a, #b, va_, vb_);                                       \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

#define CHECK_STREQ(a, b)                                                                          \
	do {                                                                                       \
		const char *sa_ = (a), *sb_ = (b);                                                 \
		check_count++;                                                                     \
		if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0) {                                       \
			fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__,     \
				__LINE__, #a, #b, sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");     \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

/* Call at the end of main(): prints a summary, returns the exit code. */
#define CHECK_DONE()                                                                               \
	(fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures),                  \
	 (check_failures || check_count == 0) ? 1 : 0)

#endif
