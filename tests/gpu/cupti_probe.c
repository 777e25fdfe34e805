// SPDX-License-Identifier: BSD-2-Clause
/*
 * The device kit's CUPTI probe: a second injection library (CUDA_INJECTION64_PATH) that makes
 * the CUPTI calls libprofd_cupti's core__enable makes, in the same order (cupti/core.c), and
 * writes what CUPTI hands back, raw, to a text file. The kit's checks read that file to settle
 * what the library assumes of real CUPTI (correlation ids, clocks, graphs, NVTX, delivery),
 * on a machine where the daemon may not run at all.
 *
 * Environment:
 *   PROFD_PROBE_OUT       the dump file (required; without it the probe stays out of the way)
 *   PROFD_PROBE_DELAY_MS  enable this long after CUDA called InitializeInjection (a late
 *                         attach); 0 (default) enables inside InitializeInjection
 *   PROFD_PROBE_BUFFERS   activity buffers of 1 MiB (default 8, 1..256), as PROFD_CUPTI_BUFFERS
 *   PROFD_PROBE_CALLBACKS 0: count callbacks without a line each (overhead runs)
 *   PROFD_PROBE_FLUSH_MS  the flush period (default 250, profd's)
 *   PROFD_PROBE_CUPTI     the libcupti to load when the process has none loaded
 *
 * Lines (space separated, times CLOCK_MONOTONIC ns, a name always last):
 *   L path                          the libcupti used
 *   V version                       cuptiGetVersion
 *   S mono session result oldname   cuptiSubscribe_v2 (result 0: the slot is ours)
 *   P apis kinds                    the calls and kinds this session enables (from cupti/'s lists)
 *   E mono result call              a failed call of the enable sequence
 *   T mono cupti_ts                 cuptiGetTimestamp against CLOCK_MONOTONIC
 *   C mono tid domain cbid site corr depth   a callback (site 0 enter, 1 exit)
 *   K deliver kind corr start end device stream graphId graphNodeId name
 *   M deliver kind corr start end bytes      memcpy / memset
 *   A deliver kind corr cbid tid start end   runtime / driver API record
 *   N deliver flags id tid ts name           NVTX marker
 *   G deliver op corr bytes ts mkind pool addr   memory (MEMORY2: op 1 allocation, 2 release;
 *                                            pool: the memory pool's type, 0 none)
 *   O deliver other_kind                     any other record
 *   B mono valid records dropped             a completed buffer
 *   D mono                                   a buffer request declined (pool empty)
 *   W mono text                              probe_mark() from the application
 *   X mono callbacks records                 totals at disable (probe_stop, a new session)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#define EXPORT __attribute__((visibility("default")))
#define BUF_SIZE (1u << 20)
#define BUF_MAX 256

EXPORT int InitializeInjection(void);
EXPORT void probe_mark(const char *text);
EXPORT int probe_restart(void);
EXPORT void probe_flush(int forced);
EXPORT int probe_enabled(void);
EXPORT void probe_stop(void);

/* The functions core.c resolves (its syms[] table), resolved the same way: dlsym. */
static struct {
	CUptiResult (*GetVersion)(uint32_t *);
	CUptiResult (*Subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
				    CUpti_SubscriberParams *);
	CUptiResult (*Subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
	CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle);
	CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
				      CUpti_CallbackId);
	CUptiResult (*ActivityEnable)(CUpti_ActivityKind);
	CUptiResult (*ActivityDisable)(CUpti_ActivityKind);
	CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
						 CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*ActivityGetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t *);
	CUptiResult (*ActivityFlushAll)(uint32_t);
	CUptiResult (*GetTimestamp)(uint64_t *);
	CUptiResult (*SetThreadIdType)(CUpti_ActivityThreadIdType);
	CUptiResult (*ActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc);
	CUptiResult (*ActivityEnableRuntimeApi)(CUpti_CallbackId, uint8_t);
	CUptiResult (*ActivityEnableDriverApi)(CUpti_CallbackId, uint8_t);
} fn;

/*
 * The calls and kinds libprofd_cupti enables, from the lists it builds its own tables from
 * (cupti/traced_apis.def, cupti/wanted_kinds.def), in its order: probe true gets a callback
 * and an API record, false an API record only.
 */
/* clang-format off */
#define RT(id, nm, pr) { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##id, pr },
#define DRV(id, nm, pr) { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##id, pr },
static const struct {
	CUpti_CallbackDomain domain;
	CUpti_CallbackId cbid;
	bool probe;
} apis[] = {
#include "traced_apis.def"
};
/* clang-format on */
#undef RT
#undef DRV
#define NR_APIS (sizeof(apis) / sizeof(apis[0]))

/* The first is the one that must succeed. */
static const CUpti_ActivityKind kinds[] = {
#define KIND(k) CUPTI_ACTIVITY_KIND_##k,
#include "wanted_kinds.def"
#undef KIND
};
#define NR_KINDS (sizeof(kinds) / sizeof(kinds[0]))

static FILE *out;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_SubscriberHandle sub;
static atomic_bool enabled;
static int session;
static bool log_callbacks = true;
static unsigned flush_ms = 250, delay_ms;
static atomic_ulong nr_callbacks, nr_records;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *pool[BUF_MAX];
static unsigned pool_free_nr;

static __thread int depth;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t CUPTIAPI ts_callback(void)
{
	return mono_ns();
}

static void emit(const char *fmt, ...)
{
	va_list ap;

	if (!out)
		return;
	pthread_mutex_lock(&out_lock);
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&out_lock);
}

static void out_flush(void)
{
	if (!out)
		return;
	pthread_mutex_lock(&out_lock);
	fflush(out);
	pthread_mutex_unlock(&out_lock);
}

/* A name on one line: CUPTI's names are C strings that could hold anything. */
static const char *clean(const char *s, char *buf, size_t len)
{
	size_t i;

	if (!s || !*s)
		return "-";
	for (i = 0; s[i] && i + 1 < len; i++)
		buf[i] = (s[i] == '\n' || s[i] == '\r') ? ' ' : s[i];
	buf[i] = 0;
	return buf;
}

static unsigned env_uint(const char *name, unsigned def, unsigned min, unsigned max)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n < min || n > max) {
		fprintf(stderr, "cupti_probe: %s=%s is not a number in [%u, %u]; using %u\n", name,
			v, min, max, def);
		return def;
	}
	return (unsigned)n;
}

/* ---- libcupti ------------------------------------------------------------------------------ */

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *base;

	(void)size;
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0;
	base = strrchr(info->dlpi_name, '/');
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "libcupti", strlen("libcupti")) != 0)
		return 0;
	*(void **)arg = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
	return *(void **)arg != NULL;
}

/* As cupti/loader.c: the process's own libcupti first, then a configured one, the system's. */
static void *find_cupti(void)
{
	static const char *const names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
	const char *env = getenv("PROFD_PROBE_CUPTI");
	void *h = NULL;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]) && !h; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		dl_iterate_phdr(scan_one, &h);
	if (!h && env && *env)
		h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
	return h;
}

static int resolve(void *h)
{
	/* clang-format off */
	static const struct { void **slot; const char *name; int required; } syms[] = {
		{ (void **)&fn.GetVersion, "cuptiGetVersion", 1 },
		{ (void **)&fn.Subscribe, "cuptiSubscribe", 1 },
		{ (void **)&fn.Unsubscribe, "cuptiUnsubscribe", 1 },
		{ (void **)&fn.EnableCallback, "cuptiEnableCallback", 1 },
		{ (void **)&fn.ActivityEnable, "cuptiActivityEnable", 1 },
		{ (void **)&fn.ActivityDisable, "cuptiActivityDisable", 1 },
		{ (void **)&fn.ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks", 1 },
		{ (void **)&fn.ActivityGetNextRecord, "cuptiActivityGetNextRecord", 1 },
		{ (void **)&fn.ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords", 1 },
		{ (void **)&fn.ActivityFlushAll, "cuptiActivityFlushAll", 1 },
		{ (void **)&fn.GetTimestamp, "cuptiGetTimestamp", 1 },
		{ (void **)&fn.SetThreadIdType, "cuptiSetThreadIdType", 1 },
		{ (void **)&fn.Subscribe_v2, "cuptiSubscribe_v2", 0 },
		{ (void **)&fn.ActivityRegisterTimestampCallback,
		  "cuptiActivityRegisterTimestampCallback", 0 },
		{ (void **)&fn.ActivityEnableRuntimeApi, "cuptiActivityEnableRuntimeApi", 0 },
		{ (void **)&fn.ActivityEnableDriverApi, "cuptiActivityEnableDriverApi", 0 },
	};
	/* clang-format on */
	size_t i;

	for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(h, syms[i].name);
		if (!*syms[i].slot && syms[i].required) {
			emit("E %llu -1 dlsym:%s\n", (unsigned long long)mono_ns(), syms[i].name);
			return -1;
		}
	}
	return 0;
}

/* ---- callbacks ----------------------------------------------------------------------------- */

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
				 const void *data)
{
	const CUpti_CallbackData *cb = data;
	int d;

	(void)ud;
	if ((domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) || !cb)
		return;
	/* Depth as launch.c counts it: 0 at ENTER marks the outermost traced call. */
	if (cb->callbackSite == CUPTI_API_EXIT)
		d = depth ? --depth : 0;
	else
		d = depth++;
	atomic_fetch_add_explicit(&nr_callbacks, 1, memory_order_relaxed);
	if (log_callbacks)
		emit("C %llu %d %d %u %d %u %d\n", (unsigned long long)mono_ns(), (int)gettid(),
		     (int)domain, (unsigned)cbid, (int)cb->callbackSite, cb->correlationId, d);
}

static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	uint8_t *b = NULL;

	*max_records = 0;
	pthread_mutex_lock(&pool_lock);
	if (pool_free_nr)
		b = pool[--pool_free_nr];
	pthread_mutex_unlock(&pool_lock);
	*buf = b;
	*size = b ? BUF_SIZE : 0;
	if (!b)
		emit("D %llu\n", (unsigned long long)mono_ns());
}

static void record(uint64_t now, CUpti_Activity *r)
{
	char name[512];

	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)r;

		emit("K %llu %d %u %llu %llu %u %u %u %llu %s\n", (unsigned long long)now,
		     (int)r->kind, k->correlationId, (unsigned long long)k->start,
		     (unsigned long long)k->end, k->deviceId, k->streamId, k->graphId,
		     (unsigned long long)k->graphNodeId, clean(k->name, name, sizeof(name)));
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)r;

		emit("M %llu %d %u %llu %llu %llu\n", (unsigned long long)now, (int)r->kind,
		     m->correlationId, (unsigned long long)m->start, (unsigned long long)m->end,
		     (unsigned long long)m->bytes);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)r;

		emit("M %llu %d %u %llu %llu %llu\n", (unsigned long long)now, (int)r->kind,
		     m->correlationId, (unsigned long long)m->start, (unsigned long long)m->end,
		     (unsigned long long)m->bytes);
		break;
	}
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: {
		const CUpti_ActivityAPI *a = (const void *)r;

		emit("A %llu %d %u %u %u %llu %llu\n", (unsigned long long)now, (int)r->kind,
		     a->correlationId, (unsigned)a->cbid, a->threadId, (unsigned long long)a->start,
		     (unsigned long long)a->end);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MARKER: {
		const CUpti_ActivityMarker2 *m = (const void *)r;

		emit("N %llu %u %u %u %llu %s\n", (unsigned long long)now, (unsigned)m->flags,
		     m->id, m->objectId.pt.threadId, (unsigned long long)m->timestamp,
		     clean(m->name, name, sizeof(name)));
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMORY2: {
		const CUpti_ActivityMemory4 *m = (const void *)r;

		emit("G %llu %d %u %llu %llu %d %d %llu\n", (unsigned long long)now,
		     (int)m->memoryOperationType, m->correlationId, (unsigned long long)m->bytes,
		     (unsigned long long)m->timestamp, (int)m->memoryKind,
		     (int)m->memoryPoolConfig.memoryPoolType, (unsigned long long)m->address);
		break;
	}
	default:
		emit("O %llu %d\n", (unsigned long long)now, (int)r->kind);
	}
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
				   size_t valid)
{
	uint64_t now = mono_ns();
	CUpti_Activity *r = NULL;
	size_t n = 0, dropped = 0;

	(void)size;
	if (buf) {
		while (fn.ActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
			record(now, r);
			n++;
		}
	}
	fn.ActivityGetNumDroppedRecords(ctx, stream, &dropped);
	atomic_fetch_add_explicit(&nr_records, n, memory_order_relaxed);
	emit("B %llu %zu %zu %zu\n", (unsigned long long)now, valid, n, dropped);
	out_flush();
	if (buf) {
		pthread_mutex_lock(&pool_lock);
		if (pool_free_nr < BUF_MAX)
			pool[pool_free_nr++] = buf;
		pthread_mutex_unlock(&pool_lock);
	}
}

/* ---- enable / disable (core__enable's order) ----------------------------------------------- */

static void failed(const char *call, CUptiResult r)
{
	emit("E %llu %d %s\n", (unsigned long long)mono_ns(), (int)r, call);
}

static void timestamp_line(void)
{
	uint64_t t = 0, m = mono_ns();

	if (fn.GetTimestamp(&t) == CUPTI_SUCCESS)
		emit("T %llu %llu\n", (unsigned long long)m, (unsigned long long)t);
}

/* Called with ctl_lock held. */
static int enable_locked(void)
{
	char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
	CUpti_SubscriberParams p;
	CUptiResult r;
	size_t i;

	if (atomic_load(&enabled))
		return 0;
	session++;
	if (fn.Subscribe_v2) {
		memset(&p, 0, sizeof(p));
		p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
		p.subscriberName = "profd-probe";
		p.oldSubscriberName = old;
		p.oldSubscriberSize = sizeof(old);
		r = fn.Subscribe_v2(&sub, on_callback, NULL, &p);
	} else {
		r = fn.Subscribe(&sub, on_callback, NULL);
	}
	old[sizeof(old) - 1] = 0;
	emit("S %llu %d %d %s\n", (unsigned long long)mono_ns(), session, (int)r,
	     old[0] ? old : "-");
	if (r != CUPTI_SUCCESS)
		return -1;
	emit("P %zu %zu\n", NR_APIS, NR_KINDS);
	if (fn.ActivityRegisterTimestampCallback) {
		r = fn.ActivityRegisterTimestampCallback(ts_callback);
		if (r != CUPTI_SUCCESS)
			failed("cuptiActivityRegisterTimestampCallback", r);
	}
	timestamp_line();
	r = fn.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	if (r != CUPTI_SUCCESS)
		failed("cuptiSetThreadIdType", r);
	r = fn.ActivityRegisterCallbacks(buf_requested, buf_completed);
	if (r != CUPTI_SUCCESS)
		failed("cuptiActivityRegisterCallbacks", r);
	for (i = 0; i < NR_KINDS; i++) {
		r = fn.ActivityEnable(kinds[i]);
		if (r != CUPTI_SUCCESS)
			failed(i ? "cuptiActivityEnable" : "cuptiActivityEnable(CONCURRENT_KERNEL)",
			       r);
	}
	for (i = 0; fn.ActivityEnableRuntimeApi && fn.ActivityEnableDriverApi && i < NR_APIS; i++) {
		r = apis[i].domain == CUPTI_CB_DOMAIN_RUNTIME_API
			? fn.ActivityEnableRuntimeApi(apis[i].cbid, 1)
			: fn.ActivityEnableDriverApi(apis[i].cbid, 1);
		if (r != CUPTI_SUCCESS)
			failed("cuptiActivityEnable*Api", r);
	}
	for (i = 0; i < NR_APIS; i++) {
		if (!apis[i].probe)
			continue;
		r = fn.EnableCallback(1, sub, apis[i].domain, apis[i].cbid);
		if (r != CUPTI_SUCCESS)
			failed("cuptiEnableCallback", r);
	}
	atomic_store(&enabled, true);
	out_flush();
	return 0;
}

/* core__disable's order: kinds, API records, callbacks off, a forced flush, unsubscribe. */
static void disable_locked(void)
{
	size_t i;

	if (!atomic_load(&enabled))
		return;
	atomic_store(&enabled, false);
	for (i = NR_KINDS; i > 0; i--)
		fn.ActivityDisable(kinds[i - 1]);
	for (i = 0; i < NR_APIS; i++) {
		if (apis[i].domain == CUPTI_CB_DOMAIN_RUNTIME_API && fn.ActivityEnableRuntimeApi)
			fn.ActivityEnableRuntimeApi(apis[i].cbid, 0);
		if (apis[i].domain == CUPTI_CB_DOMAIN_DRIVER_API && fn.ActivityEnableDriverApi)
			fn.ActivityEnableDriverApi(apis[i].cbid, 0);
		if (apis[i].probe)
			fn.EnableCallback(0, sub, apis[i].domain, apis[i].cbid);
	}
	fn.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	fn.Unsubscribe(sub);
	sub = NULL;
	emit("X %llu %lu %lu\n", (unsigned long long)mono_ns(), atomic_load(&nr_callbacks),
	     atomic_load(&nr_records));
	out_flush();
}

/* ---- exported controls --------------------------------------------------------------------- */

void probe_mark(const char *text)
{
	char buf[512];

	emit("W %llu %s\n", (unsigned long long)mono_ns(), clean(text, buf, sizeof(buf)));
	out_flush();
}

/* A new CUPTI session, as the daemon's disable then enable makes one. 0 when enabled again. */
int probe_restart(void)
{
	int r;

	pthread_mutex_lock(&ctl_lock);
	disable_locked();
	r = enable_locked();
	pthread_mutex_unlock(&ctl_lock);
	return r;
}

void probe_flush(int forced)
{
	if (atomic_load(&enabled))
		fn.ActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
	out_flush();
}

int probe_enabled(void)
{
	return atomic_load(&enabled);
}

/* core__disable's steps, then nothing more from the flusher: the end of a workload. */
void probe_stop(void)
{
	pthread_mutex_lock(&ctl_lock);
	disable_locked();
	pthread_mutex_unlock(&ctl_lock);
}

/* The uplink thread's part: a late enable, then a flush every period and a clock line a second. */
static void *flusher(void *arg)
{
	struct timespec ts;
	uint64_t last_t = 0;

	(void)arg;
	if (delay_ms) {
		ts.tv_sec = delay_ms / 1000;
		ts.tv_nsec = (long)(delay_ms % 1000) * 1000000L;
		while (nanosleep(&ts, &ts) != 0)
			;
		pthread_mutex_lock(&ctl_lock);
		enable_locked();
		pthread_mutex_unlock(&ctl_lock);
	}
	for (;;) {
		ts.tv_sec = flush_ms / 1000;
		ts.tv_nsec = (long)(flush_ms % 1000) * 1000000L;
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&ctl_lock);
		if (atomic_load(&enabled)) {
			fn.ActivityFlushAll(0);
			if (mono_ns() - last_t >= 1000000000ull) {
				timestamp_line();
				last_t = mono_ns();
			}
		}
		pthread_mutex_unlock(&ctl_lock);
		out_flush();
	}
	return NULL;
}

/*
 * Only the file: CUDA may already be torn down when atexit handlers run, and a crash at exit
 * would fail a check whose records were all in. Workloads call probe_stop before they return.
 */
static void at_exit(void)
{
	out_flush();
}

int InitializeInjection(void)
{
	static atomic_bool called;
	const char *path = getenv("PROFD_PROBE_OUT");
	pthread_t t;
	Dl_info di;
	uint32_t v = 0;
	unsigned i, nbuf;
	void *h;

	if (atomic_exchange(&called, true) || !path || !*path)
		return 1;
	out = fopen(path, "a");
	if (!out) {
		fprintf(stderr, "cupti_probe: %s: %s\n", path, strerror(errno));
		return 1;
	}
	delay_ms = env_uint("PROFD_PROBE_DELAY_MS", 0, 0, 600000);
	flush_ms = env_uint("PROFD_PROBE_FLUSH_MS", 250, 10, 60000);
	nbuf = env_uint("PROFD_PROBE_BUFFERS", 8, 1, BUF_MAX);
	log_callbacks = env_uint("PROFD_PROBE_CALLBACKS", 1, 0, 1) != 0;
	h = find_cupti();
	if (!h) {
		emit("E %llu -1 no-libcupti\n", (unsigned long long)mono_ns());
		out_flush();
		return 1;
	}
	if (resolve(h) < 0) {
		out_flush();
		return 1;
	}
	if (dladdr((void *)fn.GetVersion, &di) && di.dli_fname)
		emit("L %s\n", di.dli_fname);
	if (fn.GetVersion(&v) == CUPTI_SUCCESS)
		emit("V %u\n", v);
	for (i = 0; i < nbuf; i++) {
		pool[i] = aligned_alloc(8, BUF_SIZE);
		if (!pool[i])
			break;
		pool_free_nr++;
	}
	/* Stay mapped: the flusher thread runs our code for the life of the process. */
	if (dladdr((void *)InitializeInjection, &di) && di.dli_fname)
		dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
	if (!delay_ms) {
		pthread_mutex_lock(&ctl_lock);
		enable_locked();
		pthread_mutex_unlock(&ctl_lock);
	}
	atexit(at_exit);
	if (pthread_create(&t, NULL, flusher, NULL) == 0)
		pthread_detach(t);
	out_flush();
	return 1;
}
