// SPDX-License-Identifier: BSD-2-Clause
/* The frame reader: frames come out whole and in order however the bytes are cut. */
#include "check.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "frame.h"

#define MAX_SEEN 64

/* Every frame handed out, copied, in order. */
struct seen {
	size_t n;
	size_t len[MAX_SEEN];
	uint8_t *body[MAX_SEEN];
	int fail_at; /* frame index whose callback fails, -1: none */
};

static int record(const uint8_t *body, size_t len, void *ctx)
{
	struct seen *s = ctx;

	if ((int)s->n == s->fail_at) {
		s->n++;
		return -ECANCELED;
	}
	if (s->n >= MAX_SEEN)
		return -ENOSPC;
	s->len[s->n] = len;
	s->body[s->n] = malloc(len ? len : 1);
	memcpy(s->body[s->n], body, len);
	s->n++;
	return 0;
}

static void seen_reset(struct seen *s)
{
	for (size_t i = 0; i < s->n && i < MAX_SEEN; i++)
		free(s->body[i]);
	memset(s, 0, sizeof(*s));
	s->fail_at = -1;
}

/* Append a frame whose body is len bytes of (seed + i); returns the new end. */
static size_t put_frame(uint8_t *buf, size_t off, uint32_t len, uint8_t seed)
{
	frame_put_header(buf + off, len);
	for (uint32_t i = 0; i < len; i++)
		buf[off + FRAME_HDR_SIZE + i] = (uint8_t)(seed + i);
	return off + FRAME_HDR_SIZE + len;
}

static bool body_is(const struct seen *s, size_t i, uint32_t len, uint8_t seed)
{
	if (i >= s->n || s->len[i] != len)
		return false;
	for (uint32_t k = 0; k < len; k++)
		if (s->body[i][k] != (uint8_t)(seed + k))
			return false;
	return true;
}

static void test_header(void)
{
	uint8_t hdr[FRAME_HDR_SIZE];

	frame_put_header(hdr, 0x01020304);
	CHECK(hdr[0] == 1 && hdr[1] == 2 && hdr[2] == 3 && hdr[3] == 4);
	CHECK_EQ_U(frame_get_header(hdr), 0x01020304);
	frame_put_header(hdr, 0xffffffffu);
	CHECK_EQ_U(frame_get_header(hdr), 0xffffffffu);
	frame_put_header(hdr, 0);
	CHECK_EQ_U(frame_get_header(hdr), 0);
}

/* Three frames (one empty) fed one byte at a time. */
static void test_byte_by_byte(void)
{
	uint8_t buf[256];
	struct seen s = {.fail_at = -1};
	struct frame_reader *r = frame_reader__new(100);
	size_t end = 0;
	int err = 0;

	seen_reset(&s);
	end = put_frame(buf, end, 5, 10);
	end = put_frame(buf, end, 0, 0);
	end = put_frame(buf, end, 100, 200);
	for (size_t i = 0; i < end && !err; i++) {
		err = frame_reader__feed(r, buf + i, 1, record, &s);
		/* pending counts the bytes of the frame under way, header included. */
		if (i == 2)
			CHECK_EQ_U(frame_reader__pending(r), 3);
		if (i == 6)
			CHECK_EQ_U(frame_reader__pending(r), 7);
		if (i == 8)
			CHECK_EQ_U(frame_reader__pending(r), 0); /* first frame done */
	}
	CHECK_EQ_I(err, 0);
	CHECK_EQ_U(s.n, 3);
	CHECK(body_is(&s, 0, 5, 10));
	CHECK(body_is(&s, 1, 0, 0));
	CHECK(body_is(&s, 2, 100, 200));
	CHECK_EQ_U(frame_reader__pending(r), 0);
	frame_reader__free(r);
	seen_reset(&s);
}

/* Many frames in one buffer, then the same bytes cut at every possible point. */
static void test_many_and_splits(void)
{
	uint8_t buf[4096];
	struct seen s = {.fail_at = -1};
	size_t end = 0;
	int err;

	for (int i = 0; i < 20; i++)
		end = put_frame(buf, end, (uint32_t)(i * 7), (uint8_t)i);
	seen_reset(&s);
	{
		struct frame_reader *r = frame_reader__new(1024);

		CHECK_EQ_I(frame_reader__feed(r, buf, end, record, &s), 0);
		CHECK_EQ_U(s.n, 20);
		for (int i = 0; i < 20; i++)
			CHECK(body_is(&s, (size_t)i, (uint32_t)(i * 7), (uint8_t)i));
		frame_reader__free(r);
	}
	for (size_t cut = 0; cut <= end; cut++) {
		struct frame_reader *r = frame_reader__new(1024);
		bool all = true;

		seen_reset(&s);
		err = frame_reader__feed(r, buf, cut, record, &s);
		if (!err)
			err = frame_reader__feed(r, buf + cut, end - cut, record, &s);
		for (int i = 0; i < 20; i++)
			all = all && body_is(&s, (size_t)i, (uint32_t)(i * 7), (uint8_t)i);
		if (err || s.n != 20 || !all) {
			fprintf(stderr, "cut at %zu: err %d, %zu frames\n", cut, err, s.n);
			CHECK(!"split feed");
		}
		frame_reader__free(r);
	}
	seen_reset(&s);
	/* Zero bytes is a no-op. */
	{
		struct frame_reader *r = frame_reader__new(16);

		CHECK_EQ_I(frame_reader__feed(r, buf, 0, record, &s), 0);
		CHECK_EQ_U(s.n, 0);
		frame_reader__free(r);
	}
}

static void test_max_boundary(void)
{
	enum { MAX = 70000 }; /* more than the reader's first allocation */
	uint8_t *buf = malloc(2 * (MAX + 1 + FRAME_HDR_SIZE));
	struct frame_reader *r;
	struct seen s = {.fail_at = -1};
	size_t end;

	seen_reset(&s);
	/* Exactly the maximum, in one piece and in pieces. */
	end = put_frame(buf, 0, MAX, 3);
	r = frame_reader__new(MAX);
	CHECK_EQ_I(frame_reader__feed(r, buf, end, record, &s), 0);
	CHECK(body_is(&s, 0, MAX, 3));
	for (size_t off = 0; off < end; off += 1000) {
		size_t n = end - off < 1000 ? end - off : 1000;

		CHECK_EQ_I(frame_reader__feed(r, buf + off, n, record, &s), 0);
	}
	CHECK_EQ_U(s.n, 2);
	CHECK(body_is(&s, 1, MAX, 3));
	frame_reader__free(r);

	/* One byte more fails on the header, before any body byte; and stays failed. */
	end = put_frame(buf, 0, MAX + 1, 3);
	r = frame_reader__new(MAX);
	CHECK_EQ_I(frame_reader__feed(r, buf, 3, record, &s), 0);
	CHECK_EQ_I(frame_reader__feed(r, buf + 3, 1, record, &s), -EMSGSIZE);
	CHECK_EQ_I(frame_reader__feed(r, buf + 4, end - 4, record, &s), -EMSGSIZE);
	CHECK_EQ_U(s.n, 2);
	frame_reader__free(r);

	/* A frame before the oversized one is still delivered. */
	end = put_frame(buf, 0, 10, 1);
	frame_put_header(buf + end, 0xffffffffu);
	end += FRAME_HDR_SIZE;
	r = frame_reader__new(MAX);
	CHECK_EQ_I(frame_reader__feed(r, buf, end, record, &s), -EMSGSIZE);
	CHECK_EQ_U(s.n, 3);
	CHECK(body_is(&s, 2, 10, 1));
	frame_reader__free(r);

	/* A maximum of zero takes only empty frames. */
	r = frame_reader__new(0);
	end = put_frame(buf, 0, 0, 0);
	end = put_frame(buf, end, 0, 0);
	CHECK_EQ_I(frame_reader__feed(r, buf, end, record, &s), 0);
	CHECK_EQ_U(s.n, 5);
	CHECK_EQ_U(s.len[3], 0);
	CHECK_EQ_U(s.len[4], 0);
	end = put_frame(buf, 0, 1, 0);
	CHECK_EQ_I(frame_reader__feed(r, buf, end, record, &s), -EMSGSIZE);
	frame_reader__free(r);
	seen_reset(&s);
	free(buf);
}

/* A failing callback stops the feed with its error; the reader goes on at the next frame. */
static void test_cb_error(void)
{
	uint8_t buf[256];
	struct frame_reader *r = frame_reader__new(64);
	struct seen s = {.fail_at = -1};
	size_t end = 0;

	seen_reset(&s);
	s.fail_at = 1;
	end = put_frame(buf, end, 4, 1);
	end = put_frame(buf, end, 5, 2);
	end = put_frame(buf, end, 6, 3);
	CHECK_EQ_I(frame_reader__feed(r, buf, end, record, &s), -ECANCELED);
	/* The first was delivered, the second failed, the third was never looked at. */
	CHECK_EQ_U(s.n, 2);
	CHECK(body_is(&s, 0, 4, 1));
	CHECK_EQ_U(frame_reader__pending(r), 0);
	/* Feeding the third frame again works. */
	CHECK_EQ_I(frame_reader__feed(r, buf + 8 + 9, end - 17, record, &s), 0);
	CHECK_EQ_U(s.n, 3);
	CHECK(body_is(&s, 2, 6, 3));

	/* The same through the buffered path: the failing frame arrives in pieces. */
	s.fail_at = 3;
	end = put_frame(buf, 0, 30, 9);
	CHECK_EQ_I(frame_reader__feed(r, buf, 10, record, &s), 0);
	CHECK_EQ_I(frame_reader__feed(r, buf + 10, end - 10, record, &s), -ECANCELED);
	CHECK_EQ_U(s.n, 4);
	CHECK_EQ_U(frame_reader__pending(r), 0);
	end = put_frame(buf, 0, 7, 5);
	CHECK_EQ_I(frame_reader__feed(r, buf, end, record, &s), 0);
	CHECK_EQ_U(s.n, 5);
	CHECK(body_is(&s, 4, 7, 5));
	frame_reader__free(r);
	seen_reset(&s);
	frame_reader__free(NULL);
}

/*
 * A large frame that came in pieces leaves no large buffer behind: an idle connection costs
 * little however big its last request was (a megabyte each before, for up to a thousand
 * uplinks).
 */
static void test_buffer_released(void)
{
	enum { LEN = 1 << 20 };
	uint8_t *buf = malloc(LEN + FRAME_HDR_SIZE);
	struct frame_reader *r = frame_reader__new(LEN);
	struct seen s = {.fail_at = -1};
	size_t end = put_frame(buf, 0, LEN, 5);

	CHECK(buf && r);
	CHECK_EQ_U(frame_reader__bytes(r), 0);
	CHECK_EQ_I(frame_reader__feed(r, buf, end / 2, record, &s), 0);
	CHECK(frame_reader__bytes(r) >= end / 2 - FRAME_HDR_SIZE);
	CHECK_EQ_I(frame_reader__feed(r, buf + end / 2, end - end / 2, record, &s), 0);
	CHECK(body_is(&s, 0, LEN, 5));
	CHECK(frame_reader__bytes(r) <= FRAME_KEEP_BYTES);
	/* Small frames in pieces keep their small buffer. */
	end = put_frame(buf, 0, 1000, 1);
	CHECK_EQ_I(frame_reader__feed(r, buf, 10, record, &s), 0);
	CHECK_EQ_I(frame_reader__feed(r, buf + 10, end - 10, record, &s), 0);
	CHECK(body_is(&s, 1, 1000, 1));
	CHECK(frame_reader__bytes(r) > 0 && frame_reader__bytes(r) <= FRAME_KEEP_BYTES);
	frame_reader__free(r);
	seen_reset(&s);
	free(buf);
}

int main(void)
{
	test_buffer_released();
	test_header();
	test_byte_by_byte();
	test_many_and_splits();
	test_max_boundary();
	test_cb_error();
	return CHECK_DONE();
}
