/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Decoded GPU events waiting for the uplink. The CUPTI side (activity buffers, NVTX pairing)
 * pushes; the uplink thread drains them into GpuBatch messages. Bounded: a push into a full
 * queue drops the event and counts it. Thread-safe; a push never blocks on anything but a
 * short mutex, so it is safe from CUPTI's buffer thread (never from a CUDA API thread's hot
 * path: launches only touch the weight table and the USDT probe).
 */
#ifndef PROFD_CUPTI_EVENTS_H
#define PROFD_CUPTI_EVENTS_H

#include <stddef.h>
#include <stdint.h>

enum ev_type {
	EV_KERNEL = 1,
	EV_COPY = 2, /* memcpy or memset (copy_kind) */
	EV_API = 3,  /* a traced CUDA API call on a CPU thread */
	EV_NVTX = 4, /* a paired NVTX range, or an instant mark (start == end) */
	EV_MEM = 5,  /* a device or managed memory allocation or release (at start_ns) */
};

/* EV_MEM's flags. */
enum {
	EV_MEM_RELEASE = 1 << 0,
	EV_MEM_MANAGED = 1 << 1,
	EV_MEM_POOL = 1 << 2,
};

/* Values of copy_kind: the numbers of proto's GpuCopyKind. */
struct ev {
	uint8_t type;	   /* enum ev_type */
	uint8_t copy_kind; /* EV_COPY: PROFD__GPU_COPY_KIND__* */
	uint8_t mem_flags; /* EV_MEM: EV_MEM_* */
	uint8_t __pad;
	uint32_t corr;	   /* correlation id (kernel, copy, api) */
	uint64_t start_ns; /* CLOCK_MONOTONIC, already converted */
	uint64_t end_ns;
	uint64_t bytes; /* EV_COPY, EV_MEM */
	uint64_t addr;	/* EV_MEM */
	uint32_t tid;	/* EV_API, EV_NVTX: system thread id */
	uint32_t device;
	uint32_t stream;
	uint32_t graph_id;  /* EV_KERNEL: nonzero for graph launches */
	uint32_t grid;	    /* EV_KERNEL: total blocks */
	uint32_t block;	    /* EV_KERNEL: threads per block */
	uint32_t weight;    /* EV_KERNEL, EV_COPY: see GpuKernel.weight */
	uint32_t depth;	    /* EV_NVTX: nesting depth on its thread, 0 outermost */
	const char *name;   /* interned (names__intern): kernel, API or range name; may be NULL */
	const char *domain; /* EV_NVTX: interned domain name or NULL */
};

struct evq;

/* A queue holding at most cap events. Returns NULL with errno set. */
struct evq *evq__new(size_t cap);
void evq__free(struct evq *q);
/* Copy e in. Returns 0, or -ENOSPC when full (the event is counted as dropped). */
int evq__push(struct evq *q, const struct ev *e);
/* Move up to max events, oldest first, into out. Returns how many. */
size_t evq__drain(struct evq *q, struct ev *out, size_t max);
/* Count n events lost elsewhere (CUPTI's own drops, an empty buffer pool). */
void evq__add_dropped(struct evq *q, uint64_t n);
/* The drops counted since the previous call. */
uint64_t evq__take_dropped(struct evq *q);
/* Events queued now. */
size_t evq__len(struct evq *q);
/*
 * Events ever queued (dropped ones not counted). The queue is FIFO: once a reader has drained
 * this many in all, it has every event pushed before it read the count.
 */
uint64_t evq__pushed(struct evq *q);

/*
 * Intern a string for the life of the library (kernel names from CUPTI records live only as
 * long as their buffer). Thread-safe. Returns the interned copy, or NULL when s is NULL or
 * memory ran out (the table is capped; the event then goes without a name).
 */
const char *names__intern(const char *s);

#endif
