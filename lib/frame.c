// SPDX-License-Identifier: BSD-2-Clause
#include "frame.h"
#include "grow.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct frame_reader {
	size_t max_len;
	uint8_t hdr[FRAME_HDR_SIZE];
	size_t hdr_have;
	uint8_t *body;
	size_t body_len; /* length announced by the current header */
	size_t body_have;
	size_t body_cap;
	bool broken;
};

void frame_put_header(uint8_t hdr[FRAME_HDR_SIZE], uint32_t len)
{
	hdr[0] = len >> 24;
	hdr[1] = len >> 16;
	hdr[2] = len >> 8;
	hdr[3] = len;
}

uint32_t frame_get_header(const uint8_t hdr[FRAME_HDR_SIZE])
{
	return (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
}

struct frame_reader *frame_reader__new(size_t max_len)
{
	struct frame_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->max_len = max_len;
	return r;
}

void frame_reader__free(struct frame_reader *r)
{
	if (!r)
		return;
	free(r->body);
	free(r);
}

size_t frame_reader__pending(const struct frame_reader *r)
{
	return r->hdr_have + r->body_have;
}

size_t frame_reader__bytes(const struct frame_reader *r)
{
	return r ? r->body_cap : 0;
}

int frame_reader__feed(struct frame_reader *r, const void *buf, size_t len, frame_cb cb, void *ctx)
{
	const uint8_t *p = buf;
	int err;

	if (r->broken)
		return -EMSGSIZE;
	while (len) {
		if (r->hdr_have < FRAME_HDR_SIZE) {
			size_t n = FRAME_HDR_SIZE - r->hdr_have;

			if (n > len)
				n = len;
			memcpy(r->hdr + r->hdr_have, p, n);
			r->hdr_have += n;
			p += n;
			len -= n;
			if (r->hdr_have < FRAME_HDR_SIZE)
				break;
			r->body_len = frame_get_header(r->hdr);
			r->body_have = 0;
			if (r->body_len > r->max_len) {
				r->broken = true;
				return -EMSGSIZE;
			}
		}
		/* Fast path: the whole body is in this buffer, hand it out without copying. */
		if (r->body_have == 0 && len >= r->body_len) {
			size_t n = r->body_len;

			r->hdr_have = 0;
			err = cb(p, n, ctx);
			if (err < 0)
				return err;
			p += n;
			len -= n;
			continue;
		}
		/* Only the header came: no body bytes to store (and body may still be NULL). */
		if (!len)
			break;
		if (r->body_cap < r->body_len) {
			/*
			 * Grow only as far as bytes actually arrive, not to the announced length,
			 * and never past it: grow_cap() with the frame's length as the maximum
			 * (grow_array() would double beyond it).
			 */
			size_t want = r->body_have + len, cap;
			uint8_t *nb;

			if (want > r->body_len)
				want = r->body_len;
			err = grow_cap(r->body_cap, want, 1, r->body_len, &cap);
			if (err)
				return err;
			if (cap > r->body_cap) {
				nb = realloc(r->body, cap);
				if (!nb)
					return -ENOMEM;
				r->body = nb;
				r->body_cap = cap;
			}
		}
		{
			size_t n = r->body_len - r->body_have;

			if (n > len)
				n = len;
			memcpy(r->body + r->body_have, p, n);
			r->body_have += n;
			p += n;
			len -= n;
		}
		if (r->body_have == r->body_len) {
			r->hdr_have = 0;
			r->body_have = 0;
			err = cb(r->body, r->body_len, ctx);
			/*
			 * Do not keep a large buffer around after a big frame: a daemon with a
			 * thousand idle uplinks would hold a megabyte for each.
			 */
			if (r->body_cap > FRAME_KEEP_BYTES) {
				free(r->body);
				r->body = NULL;
				r->body_cap = 0;
			}
			if (err < 0)
				return err;
		}
	}
	return 0;
}
