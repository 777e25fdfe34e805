// SPDX-License-Identifier: BSD-2-Clause
#include "memory.h"

#include <stdbool.h>

#include "exporter.h"
#include "unwinder.h"

static const struct {
	const char *name;
	bool counts;
} owners[MEM__COUNT] = {
    [MEM_STORE] = {"store", true},		   /* processes it keeps */
    [MEM_SYMBOLS] = {"symbols", true},		   /* ELF files cached */
    [MEM_UNWIND_TABLES] = {"unwind_tables", true}, /* files described */
    [MEM_INGEST] = {"ingest", true},		   /* processes alive or not exited yet */
    [MEM_PYTHON] = {"python", true},
    [MEM_UNWINDER] = {"unwinder", true},
    [MEM_SYMBOLIZER] = {"symbolizer", true},
    [MEM_GPU] = {"gpu", true},
    [MEM_EXPORT] = {"export", true},
    [MEM_CLIENTS] = {"clients", true},
    [MEM_TRACE_RING] = {"trace_ring", false},
    [MEM_OTHER] = {"other", false},
};

const char *memory_owner_name(enum memory_owner_id id)
{
	return id < MEM__COUNT ? owners[id].name : "?";
}

bool memory_owner_counts(enum memory_owner_id id)
{
	return id < MEM__COUNT && owners[id].counts;
}

void memory_owners(struct daemon *d, uint64_t rss, struct mem_usage *out)
{
	struct timeline_stats tls;
	struct store_stats ss;
	uint64_t sum = 0;

	for (size_t i = 0; i < MEM__COUNT; i++)
		out[i] = (struct mem_usage){0};
	store__stats(d->store, &ss);
	out[MEM_STORE] = (struct mem_usage){.bytes = ss.bytes, .count = ss.processes};
	if (d->sym)
		symbolizer__memory(d->sym, &out[MEM_SYMBOLS], &out[MEM_SYMBOLIZER]);
	if (d->unwinder)
		unwinder__memory(d->unwinder, &out[MEM_UNWIND_TABLES], &out[MEM_UNWINDER]);
	ingest__memory(d->ingest, &out[MEM_INGEST]);
	python__memory(d->py, &out[MEM_PYTHON]);
	if (d->gpu) {
		struct gpu_stats gs;

		gpu__stats(d->gpu, &gs);
		out[MEM_GPU] = (struct mem_usage){.bytes = gs.bytes, .count = gs.processes};
	}
	exporter__memory(d->exporter, &out[MEM_EXPORT]);
	server__memory(d->server, &out[MEM_CLIENTS]);
	timeline__stats(d->timeline, &tls);
	out[MEM_TRACE_RING].bytes = tls.bytes;
	for (size_t i = 0; i < MEM_OTHER; i++)
		sum += out[i].bytes;
	out[MEM_OTHER].bytes = rss > sum ? rss - sum : 0;
}

void memory_status(struct daemon *d, uint64_t rss, Profd__StatusReply *st, Profd__MemoryOwner *msgs,
		   Profd__MemoryOwner **ptrs)
{
	struct mem_usage m[MEM__COUNT];

	memory_owners(d, rss, m);
	for (size_t i = 0; i < MEM__COUNT; i++) {
		profd__memory_owner__init(&msgs[i]);
		msgs[i].name = (char *)memory_owner_name(i);
		msgs[i].has_bytes = true;
		msgs[i].bytes = m[i].bytes;
		msgs[i].has_count = memory_owner_counts(i);
		msgs[i].count = m[i].count;
		ptrs[i] = &msgs[i];
	}
	st->n_memory = MEM__COUNT;
	st->memory = ptrs;
}
