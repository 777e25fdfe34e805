// SPDX-License-Identifier: BSD-2-Clause
/*
 * The launch callback. It runs synchronously inside every traced CUDA call, on the calling
 * thread, so it must stay cheap: no allocation, no lock, no CUDA call, a few thread-local
 * fields and two relaxed stores. At API enter of the outermost traced call of the thread it
 * fires the USDT probe profd:cuda_launch(corr, cbid), from which the daemon's eBPF takes the
 * launching stack, unless the thread's token bucket says to skip this one. The weight table
 * tells the buffer decoder how many launches each probed one stands for; the outstanding
 * table tells the flush which launches still wait for their record.
 */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#include <errno.h>
#include <string.h>

#include "core_priv.h"
#include "timeutil.h"

/* sys/sdt.h names the semaphore <provider>_<name>_semaphore; the kernel counts tracers in it. */
__attribute__((section(".probes"), used)) volatile unsigned short profd_cuda_launch_semaphore;

struct core_stats core_stats;

/* clang-format off */
#define RT(id, nm, pr) { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##id, nm, pr },
#define DRV(id, nm, pr) { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##id, nm, pr },

/* The list is shared with the device kit's probe (traced_apis.def). */
const struct traced_api traced_apis[] = {
#include "traced_apis.def"
};
#undef RT
#undef DRV
/* clang-format on */
const size_t traced_apis_nr = sizeof(traced_apis) / sizeof(traced_apis[0]);

const char *traced_api_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	size_t i;

	for (i = 0; i < traced_apis_nr; i++)
		if (traced_apis[i].domain == domain && traced_apis[i].cbid == cbid)
			return traced_apis[i].name;
	return NULL;
}

/*
 * weight[corr & 0xffff]: (corr >> 16) in the high half tells a slot written for this corr from
 * one left by a launch 65536 ids earlier; the low half is weight + 1, so 0 means never written.
 *
 * Aliasing: the table holds the last 65536 correlation ids. When more launches than that are
 * in flight at once (launched, record not yet decoded), launch N + 65536 overwrites launch N's
 * slot before N's record is decoded, and N's record then reads weight 1 (the tag differs)
 * instead of its own. The sum of weights stays close to the number of launches but is no
 * longer exact. CUPTI's own buffers hold about 300K records per context, so a process can
 * reach that; the outstanding table below has the same limit (N is then no longer waited for).
 */
#define WEIGHT_SLOTS (1u << 16)
#define WEIGHT_MAX 0xfffeu
static _Atomic uint32_t weights[WEIGHT_SLOTS];

static inline void weight_store(uint32_t corr, uint32_t w)
{
	if (w > WEIGHT_MAX)
		w = WEIGHT_MAX;
	atomic_store_explicit(&weights[corr & (WEIGHT_SLOTS - 1)], (corr & 0xffff0000u) | (w + 1),
			      memory_order_relaxed);
}

uint32_t launch_weight(uint32_t corr)
{
	uint32_t e =
	    atomic_load_explicit(&weights[corr & (WEIGHT_SLOTS - 1)], memory_order_relaxed);

	if (!(e & 0xffff) || (e & 0xffff0000u) != (corr & 0xffff0000u))
		return 1;
	return (e & 0xffff) - 1;
}

/*
 * Outstanding launches, for the flush's watermark: out[corr & 0xffff] holds (corr >> 16) in
 * the top 16 bits and the launch's API-enter time in microseconds + 1 in the low 48 (0: empty;
 * 2^48 us is 8.9 years of uptime). Set at API enter of every traced launch, probed or not;
 * cleared by the decoder when the kernel, copy or memset record of that id arrives. A graph
 * launch's id is cleared by its first kernel's record. Launches whose record never comes (a
 * failed launch, a record CUPTI dropped) age out in launch_oldest_ns.
 */
#define OUT_TAG_SHIFT 48
#define OUT_TIME_MASK ((1ull << OUT_TAG_SHIFT) - 1)
static _Atomic uint64_t outstanding[WEIGHT_SLOTS];

static inline void out_store(uint32_t corr, uint64_t now_ns)
{
	uint64_t e =
	    ((uint64_t)(corr >> 16) << OUT_TAG_SHIFT) | ((now_ns / 1000 + 1) & OUT_TIME_MASK);

	atomic_store_explicit(&outstanding[corr & (WEIGHT_SLOTS - 1)], e, memory_order_relaxed);
}

void launch_done(uint32_t corr)
{
	_Atomic uint64_t *slot = &outstanding[corr & (WEIGHT_SLOTS - 1)];
	uint64_t e = atomic_load_explicit(slot, memory_order_relaxed);

	/* Only this launch's entry: a newer launch 65536 ids later keeps its own. */
	if (e && (e >> OUT_TAG_SHIFT) == (corr >> 16))
		atomic_compare_exchange_strong_explicit(slot, &e, 0, memory_order_release,
							memory_order_relaxed);
}

/* The oldest and newest launch times of the table, UINT64_MAX and 0 when none. */
static void launch_range(uint64_t now_ns, uint64_t max_age_ns, uint64_t *oldest_ns,
			 uint64_t *newest_ns)
{
	uint64_t oldest = UINT64_MAX, newest = 0;
	size_t i;

	for (i = 0; i < WEIGHT_SLOTS; i++) {
		uint64_t e = atomic_load_explicit(&outstanding[i], memory_order_acquire);
		uint64_t ns;

		if (!e)
			continue;
		ns = ((e & OUT_TIME_MASK) - 1) * 1000;
		if (ns + max_age_ns < now_ns)
			continue;
		if (ns < oldest)
			oldest = ns;
		if (ns > newest)
			newest = ns;
	}
	*oldest_ns = oldest;
	*newest_ns = newest;
}

uint64_t launch_oldest_ns(uint64_t now_ns, uint64_t max_age_ns)
{
	uint64_t oldest, newest;

	launch_range(now_ns, max_age_ns, &oldest, &newest);
	return oldest;
}

uint64_t launch_newest_ns(uint64_t now_ns, uint64_t max_age_ns)
{
	uint64_t oldest, newest;

	launch_range(now_ns, max_age_ns, &oldest, &newest);
	return newest;
}

/*
 * Whether cbid allocates memory: its probe gives the allocation a stack, but it is not a
 * launch, so it neither carries nor resets the weight of skipped launches (no kernel or copy
 * record reads it). A switch, as the callback runs in every traced call.
 */
static bool is_alloc(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
		switch (cbid) {
		case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020:
		case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020:
		case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020:
		case CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020:
		case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3DArray_v3020:
		case CUPTI_RUNTIME_TRACE_CBID_cudaMallocMipmappedArray_v5000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
		case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020:
		case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
		case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020:
			return true;
		default:
			return false;
		}
	}
	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
		return true;
	default:
		return false;
	}
}

/*
 * The token bucket: one token per launch, refilled at rate/s, holding 100 ms worth. Written by
 * launch_reset on the uplink thread while callbacks of an earlier session may still run:
 * relaxed atomics, read once per callback.
 */
static _Atomic uint32_t rate;
static _Atomic uint64_t cost_ns, cap_ns;

/*
 * The process's own bucket, PROC_RATE_FACTOR times the thread rate with a tenth of a second of
 * burst: many launching threads must not together exceed what the daemon's BPF side keeps for
 * one process (5000 a second, burst 1000), because launches the BPF side drops carry no
 * weight and their kernels lose their stacks. Kept as the time at which it is full again, so
 * one compare-and-swap takes a token from any thread.
 */
#define PROC_RATE_FACTOR 4
static _Atomic uint64_t proc_full_at, proc_cost_ns, proc_cap_ns;
/* Bumped by every enable, so thread state from an earlier session starts over. */
static _Atomic uint32_t generation;

struct launch_tls {
	uint32_t gen;
	uint32_t depth;	  /* traced calls in progress on this thread */
	uint32_t skipped; /* launches skipped since the last probed one */
	bool primed;
	uint64_t credit_ns;
	uint64_t last_ns;
};
/*
 * initial-exec: the library is dlopened, so the default model would reach this through
 * __tls_get_addr on the launch path (and allocate the block on a thread's first launch).
 * It is a few dozen bytes of glibc's static TLS surplus.
 */
static __thread struct launch_tls tls __attribute__((tls_model("initial-exec")));

void launch_reset(uint32_t rate_per_sec)
{
	uint32_t burst = rate_per_sec / 10 ? rate_per_sec / 10 : 1;
	uint64_t cost = rate_per_sec ? NSEC_PER_SEC / rate_per_sec : 0;
	size_t i;

	uint64_t prate = (uint64_t)rate_per_sec * PROC_RATE_FACTOR;
	uint64_t pcost = prate ? NSEC_PER_SEC / prate : 0;
	uint64_t pburst = prate / 10 ? prate / 10 : 1;

	atomic_store_explicit(&rate, rate_per_sec, memory_order_relaxed);
	atomic_store_explicit(&cost_ns, cost, memory_order_relaxed);
	atomic_store_explicit(&cap_ns, cost * burst, memory_order_relaxed);
	atomic_store_explicit(&proc_cost_ns, pcost, memory_order_relaxed);
	atomic_store_explicit(&proc_cap_ns, pcost * pburst, memory_order_relaxed);
	atomic_store_explicit(&proc_full_at, 0, memory_order_relaxed);
	/* Launches of an earlier session whose records were lost at disable. */
	for (i = 0; i < WEIGHT_SLOTS; i++)
		atomic_store_explicit(&outstanding[i], 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&generation, 1, memory_order_release);
}

/* A token from the process's bucket. Lock-free: a CAS loop that only retries on contention. */
static bool proc_take(uint64_t now)
{
	uint64_t cost = atomic_load_explicit(&proc_cost_ns, memory_order_relaxed);
	uint64_t cap = atomic_load_explicit(&proc_cap_ns, memory_order_relaxed);
	uint64_t old = atomic_load_explicit(&proc_full_at, memory_order_relaxed), next;

	if (!cost)
		return true;
	do {
		next = (old > now ? old : now) + cost;
		if (next - now > cap)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(
	    &proc_full_at, &old, next, memory_order_relaxed, memory_order_relaxed));
	return true;
}

/*
 * A token from the thread's bucket and, only if there is one, from the process's: a launch
 * the process's bucket refuses leaves the thread's token for its next launch.
 */
static bool bucket_take(struct launch_tls *t, uint64_t now)
{
	uint64_t el, cost_ns_, cap_ns_;

	if (!atomic_load_explicit(&rate, memory_order_relaxed))
		return true;
	cost_ns_ = atomic_load_explicit(&cost_ns, memory_order_relaxed);
	cap_ns_ = atomic_load_explicit(&cap_ns, memory_order_relaxed);
	if (!t->primed) {
		t->primed = true;
		t->credit_ns = cap_ns_;
	} else {
		el = now - t->last_ns;
		/* A new session's smaller cap: clamp, never let the subtraction wrap. */
		if (t->credit_ns > cap_ns_)
			t->credit_ns = cap_ns_;
		t->credit_ns = el >= cap_ns_ - t->credit_ns ? cap_ns_ : t->credit_ns + el;
	}
	t->last_ns = now;
	if (t->credit_ns < cost_ns_ || !proc_take(now))
		return false;
	t->credit_ns -= cost_ns_;
	return true;
}

void CUPTIAPI launch_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			      const void *cbdata)
{
	const CUpti_CallbackData *cb = cbdata;
	struct launch_tls *t = &tls;
	uint32_t gen, corr;
	uint64_t now;
	int saved_errno;
	bool alloc;

	if (atomic_load_explicit(&core_forked, memory_order_relaxed))
		return;
	if ((domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) || !cb)
		return;
	gen = atomic_load_explicit(&generation, memory_order_acquire);
	if (t->gen != gen) {
		/* A call that began before this session would otherwise leave depth stuck. */
		memset(t, 0, sizeof(*t));
		t->gen = gen;
	}
	if (cb->callbackSite == CUPTI_API_EXIT) {
		if (t->depth)
			t->depth--;
		/*
		 * A launch that failed makes no record: not outstanding, so the flush neither waits
		 * for it nor takes its missing record for records going elsewhere. Both the
		 * runtime's cudaError_t and the driver's CUresult are int-sized enums, 0 for
		 * success.
		 */
		if (!t->depth && cb->functionReturnValue &&
		    *(const int *)cb->functionReturnValue != 0)
			launch_done(cb->correlationId);
		return;
	}
	/* A driver launch inside a runtime launch shares its correlation id: skip it. */
	if (t->depth++)
		return;
	/* The application's errno survives us (a clock read may touch it on some systems). */
	saved_errno = errno;
	corr = cb->correlationId;
	/*
	 * The coarse clock lags the real one by at most a tick: the launch looks older than it
	 * is, which only holds the flush's watermark back a little.
	 */
	now = core_bucket_ns();
	alloc = is_alloc(domain, cbid);
	/*
	 * An allocation runs no kernel and its record labels no sample: the watermark does not
	 * wait for it (nor, where CUPTI lacks MEMORY2, for a record that never comes).
	 */
	if (!alloc)
		out_store(corr, now);
	/* One probe site for both: the daemon attaches to every site of the probe's name. */
	if (!bucket_take(t, now)) {
		if (!alloc) {
			t->skipped++;
			weight_store(corr, 0);
		}
		errno = saved_errno;
		return;
	}
	if (!alloc) {
		weight_store(corr, 1 + t->skipped);
		t->skipped = 0;
	}
	if (__builtin_expect(profd_cuda_launch_semaphore != 0, 0)) {
		STAP_PROBE2(profd, cuda_launch, corr, (uint32_t)cbid);
		atomic_fetch_add_explicit(&core_stats.probes_fired, 1, memory_order_relaxed);
	}
	errno = saved_errno;
}
