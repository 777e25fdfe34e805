// SPDX-License-Identifier: BSD-2-Clause
/*
 * What the uplinks may cost, per uplink (one per process) and per user: records and encoded
 * bytes a second, as token buckets, and records waiting for their launch. A member of the
 * socket's group can open many uplinks and send made-up records as fast as the socket takes
 * them; without these bounds one user's uplinks take the module's whole budget (and, through the
 * stand-in stacks, the store) from everyone else.
 *
 * An uplink may send o.uplink_rate records a second and BYTES_PER_RECORD bytes for each, saved
 * up for at most BURST_NS; the uplinks of one uid together UID_FACTOR times that. A batch over
 * either bucket is refused whole (only its strings are kept, so the connection's numbering stays
 * right) and counted; the library is answered with a busy error. What the buckets admit is still
 * bounded by the per-process and per-uid numbers of waiting records and by max_bytes.
 */
#include "gpu_priv.h"

#include <errno.h>
#include <stdlib.h>

#include "log.h"
#include "satmath.h"

#define DEFAULT_UPLINK_RATE 200000u
/* The bytes an uplink may send per record of its rate: a kernel record is 30-60 bytes encoded,
 * and the names in the string table come once. */
#define BYTES_PER_RECORD 160u
#define BURST_NS (2ull * 1000000000ull)
#define UID_FACTOR 2u
/*
 * Records of one uid waiting for their launch: two processes' worth (gpu_join.c). A waiting
 * record costs about 430 bytes (its join, its slot, its array), so 14 MiB a user; bounded per
 * process only (65536), eight uplinks of one user held 56 MiB and could hold 220. Records wait only
 * when they come before their launch, which the ring buffer delivers within a tick, or when the
 * launch probe is missing (then they end on the stand-in stack either way).
 */
#define MAX_WAIT_PER_UID 32768u
/*
 * Bytes of the string tables of one uid's connections, names and their entries counted (a
 * connection's own bound counts only the names' bytes, 4 MiB): eight connections of one user
 * sending short names held some 40 MiB of tables.
 */
#define MAX_STRING_BYTES_PER_UID (16u << 20)

struct gpu_uid {
	struct tbucket records, bytes;
	size_t nwait;	  /* records waiting for their launch */
	size_t str_bytes; /* of its connections' string tables */
};

static uint64_t uplink_rate(const struct gpu *g)
{
	return g->o.uplink_rate ? g->o.uplink_rate : DEFAULT_UPLINK_RATE;
}

uint32_t gpu__uplink_rate(const struct gpu *g)
{
	return g ? (uint32_t)uplink_rate(g) : 0;
}

/* uid's state, made on first use. Returns NULL when out of memory. */
static struct gpu_uid *uid_of(struct gpu *g, uint32_t uid)
{
	struct gpu_uid *u = ptrmap_get(&g->uids, uid);

	if (u)
		return u;
	u = calloc(1, sizeof(*u));
	if (!u || ptrmap_put(&g->uids, uid, u)) {
		free(u);
		return NULL;
	}
	return u;
}

static size_t batch_records(const Profd__GpuBatch *m)
{
	return m->n_kernels + m->n_copies + m->n_api_calls + m->n_nvtx + m->n_memory;
}

bool gpu_rate_admit(struct gpu *g, struct gpu_proc *p, const Profd__GpuBatch *m)
{
	uint64_t rate = uplink_rate(g), brate = sat_mul(rate, BYTES_PER_RECORD);
	uint64_t urate = sat_mul(rate, UID_FACTOR), ubrate = sat_mul(brate, UID_FACTOR);
	uint64_t n = batch_records(m), bytes = profd__gpu_batch__get_packed_size(m);
	struct gpu_uid *u = uid_of(g, p->uid);
	bool fits;

	/* Out of memory for the user's buckets: the uplink's own still hold. */
	fits = tbucket_fits(&p->rate_records, g->now, n, rate, BURST_NS) &&
	       tbucket_fits(&p->rate_bytes, g->now, bytes, brate, BURST_NS) &&
	       (!u || (tbucket_fits(&u->records, g->now, n, urate, BURST_NS) &&
		       tbucket_fits(&u->bytes, g->now, bytes, ubrate, BURST_NS)));
	if (fits) {
		tbucket_take(&p->rate_records, g->now, n, rate);
		tbucket_take(&p->rate_bytes, g->now, bytes, brate);
		if (u) {
			tbucket_take(&u->records, g->now, n, urate);
			tbucket_take(&u->bytes, g->now, bytes, ubrate);
		}
		p->rate_limited = false;
		return true;
	}
	if (!p->rate_limited)
		pr_warn(
		    "gpu: pid %u uid %u: its uplink sends more than %llu records or %llu bytes a "
		    "second (its user's uplinks %llu or %llu): refusing its batches until it "
		    "slows down",
		    p->pid, p->uid, (unsigned long long)rate, (unsigned long long)brate,
		    (unsigned long long)urate, (unsigned long long)ubrate);
	p->rate_limited = true;
	sat_inc(&p->records_refused, n);
	sat_inc(&p->bytes_refused, bytes);
	sat_inc(&g->st.records_refused, n);
	sat_inc(&g->st.bytes_refused, bytes);
	sat_inc(&g->st.batches_refused, 1);
	return false;
}

bool gpu_uid_may_wait(struct gpu *g, uint32_t uid)
{
	const struct gpu_uid *u = ptrmap_get(&g->uids, uid);

	return !u || u->nwait < MAX_WAIT_PER_UID;
}

void gpu_uid_waits(struct gpu *g, uint32_t uid, size_t add, size_t sub)
{
	struct gpu_uid *u = add ? uid_of(g, uid) : ptrmap_get(&g->uids, uid);

	if (!u)
		return; /* out of memory: this user's waits go uncounted, the per-process bound
			   holds */
	u->nwait += add;
	u->nwait -= sub < u->nwait ? sub : u->nwait;
}

bool gpu_uid_string_add(struct gpu *g, uint32_t uid, size_t bytes)
{
	struct gpu_uid *u = uid_of(g, uid);

	if (!u || u->str_bytes + bytes > MAX_STRING_BYTES_PER_UID)
		return false;
	u->str_bytes += bytes;
	return true;
}

void gpu_uid_string_sub(struct gpu *g, uint32_t uid, size_t bytes)
{
	struct gpu_uid *u = ptrmap_get(&g->uids, uid);

	if (u)
		u->str_bytes -= bytes < u->str_bytes ? bytes : u->str_bytes;
}

void gpu_uid_free_all(struct gpu *g)
{
	for (size_t i = 0; g->uids.mask && i <= g->uids.mask; i++)
		free(g->uids.vals[i]);
	ptrmap_fini(&g->uids);
}
