// SPDX-License-Identifier: BSD-2-Clause
#include "grow.h"

#include <errno.h>
#include <stdlib.h>

int grow_cap(size_t cap, size_t need, size_t elem, size_t max, size_t *ncap)
{
	size_t n;

	if (elem && max > SIZE_MAX / elem)
		max = SIZE_MAX / elem;
	if (need > max)
		return -EOVERFLOW;
	if (cap >= need) {
		*ncap = cap;
		return 0;
	}
	n = cap > max / 2 ? max : cap * 2;
	if (n < 8)
		n = 8 < max ? 8 : max;
	if (n < need)
		n = need;
	*ncap = n;
	return 0;
}

static int grow_to(void **arr, size_t cap, size_t need, size_t elem, size_t max, size_t *ncap)
{
	void *p;
	int err;

	err = grow_cap(cap, need, elem, max, ncap);
	if (err || *ncap == cap)
		return err;
	p = realloc(*arr, *ncap * elem + (*ncap * elem == 0));
	if (!p)
		return -ENOMEM;
	*arr = p;
	return 0;
}

int grow_array(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	int err;

	err = grow_to(arr, *cap, need, elem, SIZE_MAX, &ncap);
	if (!err)
		*cap = ncap;
	return err;
}

int grow_array32(void **arr, uint32_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	int err;

	err = grow_to(arr, *cap, need, elem, UINT32_MAX, &ncap);
	if (!err)
		*cap = (uint32_t)ncap;
	return err;
}
