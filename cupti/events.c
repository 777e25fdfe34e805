// SPDX-License-Identifier: BSD-2-Clause
#include "events.h"
#include "grow.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/*
 * The queue is a ring that grows by doubling up to its cap: a process that launches little
 * keeps a small footprint, and one whose daemon falls behind stops at the cap instead of
 * growing without bound.
 */
#define EVQ_INITIAL_SLOTS 1024

struct evq {
	pthread_mutex_t lock;
	struct ev *ring;
	size_t slots; /* allocated */
	size_t cap;   /* never more than this many queued */
	size_t head;  /* oldest */
	size_t len;
	uint64_t dropped;
	uint64_t pushed; /* events ever queued */
};

struct evq *evq__new(size_t cap)
{
	struct evq *q;

	if (!cap) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->cap = cap;
	q->slots = cap < EVQ_INITIAL_SLOTS ? cap : EVQ_INITIAL_SLOTS;
	q->ring = malloc(q->slots * sizeof(*q->ring));
	if (!q->ring) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&q->lock, NULL);
	return q;
}

void evq__free(struct evq *q)
{
	if (!q)
		return;
	pthread_mutex_destroy(&q->lock);
	free(q->ring);
	free(q);
}

/*
 * Double the ring, unwrapping it. Called locked with the ring full and below its cap. The ring
 * is copied in two pieces into a new array rather than realloc'ed, so only its size comes from
 * grow_cap(). Returns 0, -EOVERFLOW or -ENOMEM.
 */
static int evq_grow(struct evq *q)
{
	size_t first = q->slots - q->head; /* entries from head to the end of the old ring */
	struct ev *ring;
	size_t slots;
	int err;

	err = grow_cap(q->slots, q->slots + 1, sizeof(*ring), q->cap, &slots);
	if (err)
		return err;
	ring = malloc(slots * sizeof(*ring));
	if (!ring)
		return -ENOMEM;
	if (first > q->len)
		first = q->len;
	memcpy(ring, q->ring + q->head, first * sizeof(*ring));
	memcpy(ring + first, q->ring, (q->len - first) * sizeof(*ring));
	free(q->ring);
	q->ring = ring;
	q->slots = slots;
	q->head = 0;
	return 0;
}

int evq__push(struct evq *q, const struct ev *e)
{
	int err = 0;

	pthread_mutex_lock(&q->lock);
	if (q->len == q->slots && (q->len >= q->cap || evq_grow(q))) {
		/* Full, or no memory to grow: the event is lost either way. */
		q->dropped++;
		err = -ENOSPC;
		goto out;
	}
	q->ring[(q->head + q->len) % q->slots] = *e;
	q->len++;
	q->pushed++;
out:
	pthread_mutex_unlock(&q->lock);
	return err;
}

size_t evq__drain(struct evq *q, struct ev *out, size_t max)
{
	size_t n;

	pthread_mutex_lock(&q->lock);
	n = q->len < max ? q->len : max;
	for (size_t i = 0; i < n; i++)
		out[i] = q->ring[(q->head + i) % q->slots];
	q->head = (q->head + n) % q->slots;
	q->len -= n;
	pthread_mutex_unlock(&q->lock);
	return n;
}

void evq__add_dropped(struct evq *q, uint64_t n)
{
	pthread_mutex_lock(&q->lock);
	q->dropped += n;
	pthread_mutex_unlock(&q->lock);
}

uint64_t evq__take_dropped(struct evq *q)
{
	uint64_t n;

	pthread_mutex_lock(&q->lock);
	n = q->dropped;
	q->dropped = 0;
	pthread_mutex_unlock(&q->lock);
	return n;
}

uint64_t evq__pushed(struct evq *q)
{
	uint64_t n;

	pthread_mutex_lock(&q->lock);
	n = q->pushed;
	pthread_mutex_unlock(&q->lock);
	return n;
}

size_t evq__len(struct evq *q)
{
	size_t n;

	pthread_mutex_lock(&q->lock);
	n = q->len;
	pthread_mutex_unlock(&q->lock);
	return n;
}

/*
 * The intern table: open addressing over pointers to strings that live in never-freed chunks.
 * Kernel, API and NVTX names repeat endlessly and their number is small in any real program;
 * the caps stop a program that makes up names (an NVTX range per request id) from growing the
 * library without bound. Once a cap is reached new names come back NULL and events go unnamed.
 */
#define NAMES_MAX_COUNT (1u << 16)
#define NAMES_MAX_BYTES (32u << 20)
#define NAMES_CHUNK (64u << 10)

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static const char **names_slots; /* power of two, at most half full */
static size_t names_nslots, names_count, names_bytes;
static char *names_chunk; /* bump allocator for the strings */
static size_t names_chunk_left;

static uint64_t names_hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static int names_rehash(size_t nslots)
{
	const char **slots = calloc(nslots, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < names_nslots; i++) {
		const char *s = names_slots[i];
		size_t j;

		if (!s)
			continue;
		j = names_hash(s, strlen(s)) & (nslots - 1);
		while (slots[j])
			j = (j + 1) & (nslots - 1);
		slots[j] = s;
	}
	/* Only the slot array goes: the strings it pointed at stay where callers hold them. */
	free(names_slots);
	names_slots = slots;
	names_nslots = nslots;
	return 0;
}

/* Copy s (len bytes and a NUL) into chunk memory. Called locked. */
static char *names_store(const char *s, size_t len)
{
	char *p;

	if (len + 1 > names_chunk_left) {
		size_t sz = len + 1 > NAMES_CHUNK ? len + 1 : NAMES_CHUNK;

		p = malloc(sz);
		if (!p)
			return NULL;
		names_bytes += sz;
		if (sz > NAMES_CHUNK) {
			/* A huge name gets its own block; the current chunk keeps its room. */
			memcpy(p, s, len + 1);
			return p;
		}
		names_chunk = p;
		names_chunk_left = sz;
	}
	p = names_chunk;
	memcpy(p, s, len + 1);
	names_chunk += len + 1;
	names_chunk_left -= len + 1;
	return p;
}

const char *names__intern(const char *s)
{
	const char *found = NULL;
	size_t len, j;
	uint64_t h;

	if (!s)
		return NULL;
	len = strlen(s);
	h = names_hash(s, len);
	pthread_mutex_lock(&names_lock);
	if (names_nslots) {
		for (j = h & (names_nslots - 1); names_slots[j]; j = (j + 1) & (names_nslots - 1)) {
			if (strcmp(names_slots[j], s) == 0) {
				found = names_slots[j];
				goto out;
			}
		}
	}
	if (names_count >= NAMES_MAX_COUNT || names_bytes + len + 1 > NAMES_MAX_BYTES)
		goto out;
	if ((names_count + 1) * 2 > names_nslots &&
	    names_rehash(names_nslots ? names_nslots * 2 : 256))
		goto out;
	found = names_store(s, len);
	if (!found)
		goto out;
	for (j = h & (names_nslots - 1); names_slots[j]; j = (j + 1) & (names_nslots - 1))
		;
	names_slots[j] = found;
	names_count++;
out:
	pthread_mutex_unlock(&names_lock);
	return found;
}
