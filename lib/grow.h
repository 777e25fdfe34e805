/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Growing arrays: the one place that turns "make room for need elements" into a capacity and a
 * realloc, with the multiplications checked. Capacity doubles (at least 8) so appends are
 * amortised O(1); a capacity or byte size that would overflow is refused, never wrapped.
 *
 * grow_cap() only computes the next capacity, for callers that allocate through their own
 * accounting (the store's charged allocator, the GPU module's budget). grow_array() and its
 * 32-bit twin also reallocate. On failure *arr and *cap are unchanged and still valid.
 */
#ifndef PROFD_GROW_H
#define PROFD_GROW_H

#include <stddef.h>
#include <stdint.h>

/*
 * The capacity to grow cap to so it holds need elements of elem bytes, at most max elements:
 * cap itself when it already does, else max(need, 2 * cap, 8) clamped to max. Returns 0 and
 * *ncap, or -EOVERFLOW when need exceeds max or need * elem does not fit in size_t.
 */
int grow_cap(size_t cap, size_t need, size_t elem, size_t max, size_t *ncap);

/*
 * Make *arr (of *cap elements of elem bytes) hold at least need elements. Returns 0,
 * -EOVERFLOW or -ENOMEM. New elements are not initialised.
 */
int grow_array(void **arr, size_t *cap, size_t need, size_t elem);
/* The same for a uint32_t capacity: at most UINT32_MAX elements. */
int grow_array32(void **arr, uint32_t *cap, size_t need, size_t elem);

/* Typed forms: GROW(ptr, cap, need) with cap a size_t, GROW32 with a uint32_t. */
#define GROW(arr, cap, need) grow_array((void **)&(arr), &(cap), (need), sizeof(*(arr)))
#define GROW32(arr, cap, need) grow_array32((void **)&(arr), &(cap), (need), sizeof(*(arr)))

#endif
