/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Message framing on the socket: a 4-byte big-endian length, then that many bytes of an encoded
 * protobuf message. A reader accumulates bytes from any number of partial reads and hands out
 * whole frames; a length above its maximum is an error before any byte of the body is stored.
 */
#ifndef PROFD_FRAME_H
#define PROFD_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define FRAME_HDR_SIZE 4
/* Requests are small; anything bigger is garbage or abuse. */
#define FRAME_MAX_REQUEST (1u << 20)
/* Replies carry whole profiles. */
#define FRAME_MAX_REPLY (256u << 20)

/* Called once per complete frame; a negative return stops feeding and is returned. */
typedef int (*frame_cb)(const uint8_t *body, size_t len, void *ctx);

struct frame_reader;

/* Returns a reader that accepts frames up to max_len bytes, or NULL with errno set. */
struct frame_reader *frame_reader__new(size_t max_len);
void frame_reader__free(struct frame_reader *r);
/*
 * Feed bytes; cb runs for each frame completed by them (the body is valid during the call only).
 * Returns 0, -EMSGSIZE for a frame longer than the maximum (the reader is then unusable),
 * -ENOMEM, or the first negative value returned by cb.
 */
int frame_reader__feed(struct frame_reader *r, const void *buf, size_t len, frame_cb cb, void *ctx);
/* Bytes of an incomplete frame held right now (0 between frames). */
size_t frame_reader__pending(const struct frame_reader *r);
/*
 * Bytes of buffer the reader holds (a frame's body in pieces): at most FRAME_KEEP_BYTES between
 * frames, so an idle connection that once sent a large frame costs little.
 */
size_t frame_reader__bytes(const struct frame_reader *r);
#define FRAME_KEEP_BYTES (64u << 10)

void frame_put_header(uint8_t hdr[FRAME_HDR_SIZE], uint32_t len);
uint32_t frame_get_header(const uint8_t hdr[FRAME_HDR_SIZE]);

#endif
