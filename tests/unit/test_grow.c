// SPDX-License-Identifier: BSD-2-Clause
/* lib/grow: capacities, overflow refusals, and arrays that keep their contents. */
#include "check.h"
#include "grow.h"

#include <errno.h>

static void test_cap(void)
{
	size_t n = 0;

	CHECK_EQ_I(grow_cap(0, 1, 4, SIZE_MAX, &n), 0);
	CHECK_EQ_U(n, 8);
	CHECK_EQ_I(grow_cap(8, 9, 4, SIZE_MAX, &n), 0);
	CHECK_EQ_U(n, 16);
	CHECK_EQ_I(grow_cap(16, 100, 4, SIZE_MAX, &n), 0);
	CHECK_EQ_U(n, 100);
	CHECK_EQ_I(grow_cap(32, 10, 4, SIZE_MAX, &n), 0);
	CHECK_EQ_U(n, 32);
	/* Doubling clamps to the maximum instead of passing it. */
	CHECK_EQ_I(grow_cap(600, 601, 1, 1000, &n), 0);
	CHECK_EQ_U(n, 1000);
	CHECK_EQ_I(grow_cap(1000, 1001, 1, 1000, &n), -EOVERFLOW);
	/* need * elem past SIZE_MAX is refused, not wrapped into a small allocation. */
	CHECK_EQ_I(grow_cap(0, SIZE_MAX / 8 + 1, 8, SIZE_MAX, &n), -EOVERFLOW);
	CHECK_EQ_I(grow_cap(SIZE_MAX / 16, SIZE_MAX / 16 + 1, 16, SIZE_MAX, &n), -EOVERFLOW);
	/* Doubling near the top clamps to the largest count whose bytes fit. */
	CHECK_EQ_I(grow_cap(SIZE_MAX / 16 - 1, SIZE_MAX / 16, 16, SIZE_MAX, &n), 0);
	CHECK_EQ_U(n, SIZE_MAX / 16);
}

static void test_array(void)
{
	uint64_t *a = NULL;
	size_t cap = 0;
	uint32_t *b = NULL;
	uint32_t cap32 = 0;

	for (size_t i = 0; i < 1000; i++) {
		if (GROW(a, cap, i + 1)) {
			CHECK(0);
			break;
		}
		a[i] = i * 3;
	}
	CHECK(cap >= 1000);
	CHECK_EQ_U(a[999], 2997);
	CHECK_EQ_U(a[0], 0);
	/* A refused growth leaves the array as it was. */
	uint64_t *before = a;
	CHECK_EQ_I(GROW(a, cap, SIZE_MAX / 4), -EOVERFLOW);
	CHECK(a == before);
	CHECK(cap >= 1000);
	CHECK_EQ_I(GROW32(b, cap32, 5), 0);
	CHECK_EQ_U(cap32, 8);
	CHECK_EQ_I(GROW32(b, cap32, (size_t)UINT32_MAX + 1), -EOVERFLOW);
	CHECK_EQ_U(cap32, 8);
	free(a);
	free(b);
}

int main(void)
{
	test_cap();
	test_array();
	return CHECK_DONE();
}
