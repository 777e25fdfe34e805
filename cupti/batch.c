// SPDX-License-Identifier: BSD-2-Clause
#include "batch.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "uplink.h"

/* Worst case encoding of one event of any type, with its field tags and length prefix. */
#define EV_MAX_BYTES 80

/* The connection's string table: interned pointer -> index. */
struct strtab {
	const char **keys;
	uint32_t *idx;
	size_t nslots, count;
};

static size_t ptr_hash(const char *p, size_t nslots)
{
	uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) & (nslots - 1);
}

static void strtab_free(struct strtab *t)
{
	free(t->keys);
	free(t->idx);
	memset(t, 0, sizeof(*t));
}

static int strtab_grow(struct strtab *t)
{
	size_t nslots = t->nslots ? t->nslots * 2 : 1024;
	const char **keys = calloc(nslots, sizeof(*keys));
	uint32_t *idx = calloc(nslots, sizeof(*idx));

	if (!keys || !idx) {
		free(keys);
		free(idx);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->nslots; i++) {
		size_t j;

		if (!t->keys[i])
			continue;
		for (j = ptr_hash(t->keys[i], nslots); keys[j]; j = (j + 1) & (nslots - 1))
			;
		keys[j] = t->keys[i];
		idx[j] = t->idx[i];
	}
	free(t->keys);
	free(t->idx);
	t->keys = keys;
	t->idx = idx;
	t->nslots = nslots;
	return 0;
}

/* The index of s on this connection; *is_new when s gets it now and must be sent. 0: none. */
static uint32_t strtab_get(struct strtab *t, const char *s, bool *is_new)
{
	size_t j;

	*is_new = false;
	if (!s)
		return 0;
	if (t->nslots) {
		for (j = ptr_hash(s, t->nslots); t->keys[j]; j = (j + 1) & (t->nslots - 1))
			if (t->keys[j] == s)
				return t->idx[j];
	}
	if ((t->count + 1) * 2 > t->nslots && strtab_grow(t))
		return 0;
	for (j = ptr_hash(s, t->nslots); t->keys[j]; j = (j + 1) & (t->nslots - 1))
		;
	t->keys[j] = s;
	/* The first string of a connection is 1: 0 means none. */
	t->idx[j] = (uint32_t)++t->count;
	*is_new = true;
	return t->idx[j];
}

/* s, or a copy cut below UPLINK_MAX_STRING at a UTF-8 boundary (*copy to free). */
static char *wire_string(const char *s, char **copy)
{
	size_t len = strlen(s), cut;

	*copy = NULL;
	if (len < UPLINK_MAX_STRING)
		return (char *)s;
	cut = UPLINK_MAX_STRING - 1;
	while (cut && ((unsigned char)s[cut] & 0xc0) == 0x80)
		cut--;
	*copy = strndup(s, cut);
	return *copy ? *copy : "";
}

/* A message under construction: arrays sized for UPLINK_BATCH_EVENTS events. */
struct gpubatch {
	Profd__GpuBatch msg;
	struct strtab st;
	char **strings;
	char **copies; /* cut strings to free */
	size_t ncopies;
	Profd__GpuKernel *k, **kp;
	Profd__GpuCopy *c, **cp;
	Profd__GpuApiCall *a, **ap;
	Profd__GpuNvtxRange *n, **np;
	Profd__GpuMemory *m, **mp;
	size_t bytes;	/* worst case encoded size so far */
	size_t nevents; /* of every type */
};

static void batch_reset(struct gpubatch *b);

void gpubatch__free(struct gpubatch *b)
{
	if (!b)
		return;
	batch_reset(b);
	strtab_free(&b->st);
	free(b->strings);
	free(b->copies);
	free(b->k);
	free(b->kp);
	free(b->c);
	free(b->cp);
	free(b->a);
	free(b->ap);
	free(b->n);
	free(b->np);
	free(b->m);
	free(b->mp);
	free(b);
}

struct gpubatch *gpubatch__new(void)
{
	size_t n = UPLINK_BATCH_EVENTS;
	struct gpubatch *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	/* Each event brings at most two new strings (name, domain). */
	b->strings = calloc(2 * n, sizeof(*b->strings));
	b->copies = calloc(2 * n, sizeof(*b->copies));
	b->k = calloc(n, sizeof(*b->k));
	b->kp = calloc(n, sizeof(*b->kp));
	b->c = calloc(n, sizeof(*b->c));
	b->cp = calloc(n, sizeof(*b->cp));
	b->a = calloc(n, sizeof(*b->a));
	b->ap = calloc(n, sizeof(*b->ap));
	b->n = calloc(n, sizeof(*b->n));
	b->np = calloc(n, sizeof(*b->np));
	b->m = calloc(n, sizeof(*b->m));
	b->mp = calloc(n, sizeof(*b->mp));
	if (!b->strings || !b->copies || !b->k || !b->kp || !b->c || !b->cp || !b->a || !b->ap ||
	    !b->n || !b->np || !b->m || !b->mp) {
		gpubatch__free(b);
		errno = ENOMEM;
		return NULL;
	}
	batch_reset(b);
	return b;
}

void gpubatch__forget_strings(struct gpubatch *b)
{
	strtab_free(&b->st);
}

void gpubatch__begin(struct gpubatch *b)
{
	batch_reset(b);
}

Profd__GpuBatch *gpubatch__msg(struct gpubatch *b)
{
	return &b->msg;
}

static void batch_reset(struct gpubatch *b)
{
	for (size_t i = 0; i < b->ncopies; i++)
		free(b->copies[i]);
	b->ncopies = 0;
	profd__gpu_batch__init(&b->msg);
	b->msg.strings = b->strings;
	b->msg.kernels = b->kp;
	b->msg.copies = b->cp;
	b->msg.api_calls = b->ap;
	b->msg.nvtx = b->np;
	b->msg.memory = b->mp;
	/* Request and GpuBatch wrappers, dropped, complete_until_ns. */
	b->bytes = 32;
	b->nevents = 0;
}

/* Worst case bytes a string adds to the batch: tag, length, text. */
static size_t string_cost(const char *s)
{
	size_t len = strlen(s);

	return 6 + (len < UPLINK_MAX_STRING ? len : UPLINK_MAX_STRING);
}

/* The index of s, appending it to the batch when new on this connection. */
static uint32_t batch_string(struct gpubatch *b, const char *s)
{
	bool is_new;
	uint32_t idx = strtab_get(&b->st, s, &is_new);
	char *copy;

	if (!is_new)
		return idx;
	b->strings[b->msg.n_strings++] = wire_string(s, &copy);
	if (copy)
		b->copies[b->ncopies++] = copy;
	return idx;
}

/* Whether e fits in b; counts its cost in when it does. */
static bool batch_room(struct gpubatch *b, const struct ev *e)
{
	size_t cost = EV_MAX_BYTES;

	/* Strings already on the connection cost nothing; counting them anyway is safe. */
	if (e->name)
		cost += string_cost(e->name);
	if (e->domain)
		cost += string_cost(e->domain);
	/* The arrays hold UPLINK_BATCH_EVENTS; any single event fits an empty batch. */
	if (b->nevents == UPLINK_BATCH_EVENTS ||
	    (b->nevents && b->bytes + cost > UPLINK_BATCH_BUDGET))
		return false;
	b->bytes += cost;
	b->nevents++;
	return true;
}

bool gpubatch__add(struct gpubatch *b, const struct ev *e, bool open)
{
	if (!batch_room(b, e))
		return false;
	switch (e->type) {
	case EV_KERNEL: {
		Profd__GpuKernel *k = &b->k[b->msg.n_kernels];

		profd__gpu_kernel__init(k);
		k->start_ns = e->start_ns;
		k->end_ns = e->end_ns;
		k->correlation_id = e->corr;
		k->name = batch_string(b, e->name);
		k->has_name = k->name != 0;
		k->has_device = k->has_stream = k->has_grid = k->has_block = true;
		k->device = e->device;
		k->stream = e->stream;
		k->has_graph_id = e->graph_id != 0;
		k->graph_id = e->graph_id;
		k->grid = e->grid;
		k->block = e->block;
		/* 1 is the field's default: leave it out, most launches have it. */
		k->has_weight = e->weight != 1;
		k->weight = e->weight;
		b->kp[b->msg.n_kernels++] = k;
		break;
	}
	case EV_COPY: {
		Profd__GpuCopy *c = &b->c[b->msg.n_copies];

		profd__gpu_copy__init(c);
		c->start_ns = e->start_ns;
		c->end_ns = e->end_ns;
		c->correlation_id = e->corr;
		c->kind = (Profd__GpuCopyKind)e->copy_kind;
		c->has_bytes = c->has_device = c->has_stream = true;
		c->bytes = e->bytes;
		c->device = e->device;
		c->stream = e->stream;
		c->has_weight = e->weight != 1;
		c->weight = e->weight;
		b->cp[b->msg.n_copies++] = c;
		break;
	}
	case EV_API: {
		Profd__GpuApiCall *a = &b->a[b->msg.n_api_calls];

		profd__gpu_api_call__init(a);
		a->start_ns = e->start_ns;
		a->end_ns = e->end_ns;
		a->correlation_id = e->corr;
		a->tid = e->tid;
		a->name = batch_string(b, e->name);
		a->has_name = a->name != 0;
		b->ap[b->msg.n_api_calls++] = a;
		break;
	}
	case EV_NVTX: {
		Profd__GpuNvtxRange *n = &b->n[b->msg.n_nvtx];

		profd__gpu_nvtx_range__init(n);
		n->start_ns = e->start_ns;
		n->end_ns = e->end_ns;
		n->tid = e->tid;
		n->name = batch_string(b, e->name);
		n->domain = batch_string(b, e->domain);
		n->has_domain = n->domain != 0;
		n->has_depth = true;
		n->depth = e->depth;
		n->has_open = open;
		n->open = open;
		b->np[b->msg.n_nvtx++] = n;
		break;
	}
	case EV_MEM: {
		Profd__GpuMemory *m = &b->m[b->msg.n_memory];

		profd__gpu_memory__init(m);
		m->ts_ns = e->start_ns;
		m->correlation_id = e->corr;
		m->release = (e->mem_flags & EV_MEM_RELEASE) != 0;
		m->address = e->addr;
		m->bytes = e->bytes;
		m->has_device = true;
		m->device = e->device;
		m->has_stream = e->stream != 0;
		m->stream = e->stream;
		m->has_managed = m->managed = (e->mem_flags & EV_MEM_MANAGED) != 0;
		m->has_pool = m->pool = (e->mem_flags & EV_MEM_POOL) != 0;
		b->mp[b->msg.n_memory++] = m;
		break;
	}
	default:
		/* Not a type this library makes: nothing to send. */
		break;
	}
	return true;
}
