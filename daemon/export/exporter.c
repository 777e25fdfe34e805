// SPDX-License-Identifier: BSD-2-Clause
#include "exporter.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "dump.h"
#include "labels.h"
#include "log.h"
#include "otlp.h"
#include "ptrmap.h"
#include "pyroscope.h"
#include "sender.h"
#include "series.h"
#include "timeutil.h"

/* A process not seen for this many flushes loses its cached labels. */
#define LABELS_KEEP_FLUSHES 20
/* Labels a series can carry: profd's six and the static ones. */
#define SERIES_LABELS (6 + CONFIG_MAX_LABELS)

enum backend_kind { BACKEND_PYROSCOPE, BACKEND_OTLP };

struct backend {
	enum backend_kind kind;
	const char *name;
	char *url;
	struct sender *sender;
	uint64_t samples_exported;
	uint64_t requests_built;
	uint64_t encode_errors;
};

struct cached_labels {
	struct proc_labels l;
	uint64_t seen_flush;
	uint64_t exe_hash; /* of /proc/PID/exe when resolved: an exec changes it, not the pid */
	uint64_t peeked;   /* the exporter's peek that last looked at it */
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

struct jrow {
	uint32_t pid;
	uint32_t tid;
	uint32_t stack;
	uint32_t col;
	uint64_t v;
};

/* One label set of this flush: the series of each kind share it. */
struct group {
	struct export_label labels[SERIES_LABELS];
	size_t nlabels;
	char pid_buf[16];
	char tid_buf[16];
	struct dump_rows *rows[EXPORT_KIND__COUNT];
	uint32_t pid_key; /* with sample_labels = pid */
	uint32_t tid_key; /* with sample_labels = tid */
	const struct cached_labels *who;
};

struct exporter {
	const struct export_config *cfg;
	struct store *store;
	uint32_t frequency_hz;
	const char *proc_root;
	char host[256];
	struct backend b[2];
	size_t nb;
	uint64_t window_start; /* mono ns: the journal holds what came since */
	uint64_t flushes;
	uint64_t peeks;
	struct ptrmap labels; /* pid -> struct cached_labels */
	uint64_t journal_lost;
	struct jrow *rows;
	size_t nrows, rows_cap;
};

static int kind_of(enum store_value col)
{
	switch (col) {
	case STORE_VALUE_CPU_SAMPLES:
		return EXPORT_CPU;
	case STORE_VALUE_GPU_NS:
	case STORE_VALUE_GPU_KERNELS:
		return EXPORT_GPU;
	case STORE_VALUE_OFFCPU_NS:
		return EXPORT_OFFCPU;
	default:
		return -1; /* the rest are views of these (idle shares, copies): not exported */
	}
}

/* The columns a kind's profile keeps and what they are called in the backends. */
static const struct {
	size_t n;
	enum store_value col[2];
	const char *type[2];
	const char *unit[2];
} kind_cols[EXPORT_KIND__COUNT] = {
    [EXPORT_CPU] = {1, {STORE_VALUE_CPU_SAMPLES}, {"samples"}, {"count"}},
    [EXPORT_GPU] = {2,
		    {STORE_VALUE_GPU_NS, STORE_VALUE_GPU_KERNELS},
		    {"gpu_kernel_time", "gpu_kernel_launches"},
		    {"nanoseconds", "count"}},
    [EXPORT_OFFCPU] = {1, {STORE_VALUE_OFFCPU_NS}, {"off_cpu"}, {"nanoseconds"}},
};

static char *join_url(const char *base, const char *path)
{
	size_t n = strlen(base);
	char *u;

	while (n && base[n - 1] == '/')
		n--;
	u = malloc(n + strlen(path) + 1);
	if (u) {
		memcpy(u, base, n);
		strcpy(u + n, path);
	}
	return u;
}

static int start_backend(struct exporter *e, enum backend_kind kind, const char *base)
{
	const struct export_config *c = e->cfg;
	struct backend *b = &e->b[e->nb];
	char spool[4096];
	struct sender_opts o = {
	    .max_bytes = c->spool_max_size,
	    .max_age_ns = c->spool_max_age_ns,
	    .timeout_ns = c->timeout_ns,
	    .retry_max_ns = c->retry_max_ns,
	    .ca_file = c->ca_file,
	    .cert_file = c->cert_file,
	    .key_file = c->key_file,
	    .bearer_token_file = c->bearer_token_file,
	    .basic_auth_file = c->basic_auth_file,
	    .headers = c->headers,
	    .nheaders = c->nheaders,
	};

	b->kind = kind;
	if (kind == BACKEND_PYROSCOPE) {
		b->name = "pyroscope";
		b->url = join_url(base, "/push.v1.PusherService/Push");
		o.content_type = "application/proto";
		o.split = pyroscope__split;
		o.count = pyroscope__count;
	} else {
		b->name = "otlp";
		b->url = join_url(base, "/v1development/profiles");
		o.content_type = "application/x-protobuf";
		o.content_encoding = "gzip";
		o.split = otlp__split;
		o.count = otlp__count;
	}
	if (!b->url)
		return -ENOMEM;
	snprintf(spool, sizeof(spool), "%s/%s", c->spool, b->name);
	o.name = b->name;
	o.url = b->url;
	o.spool_dir = spool;
	b->sender = sender__new(&o);
	if (!b->sender) {
		int err = errno ? -errno : -EIO;

		free(b->url);
		b->url = NULL;
		return err;
	}
	pr_info("export: %s: pushing to %s every %.0f s (spool %s)", b->name, b->url,
		(double)c->interval_ns / 1e9, spool);
	e->nb++;
	return 0;
}

struct exporter *exporter__new(const struct exporter_opts *opts)
{
	const struct export_config *c = opts->cfg;
	struct exporter *e;
	int err = 0;

	if (!c->pyroscope && !c->otlp) {
		errno = 0;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		errno = ENOMEM;
		return NULL;
	}
	e->cfg = c;
	e->store = opts->store;
	e->frequency_hz = opts->frequency_hz;
	e->proc_root = opts->proc_root;
	if (c->host)
		snprintf(e->host, sizeof(e->host), "%s", c->host);
	else if (gethostname(e->host, sizeof(e->host) - 1) || !e->host[0])
		snprintf(e->host, sizeof(e->host), "localhost");
	if (c->pyroscope)
		err = start_backend(e, BACKEND_PYROSCOPE, c->pyroscope);
	if (!err && c->otlp)
		err = start_backend(e, BACKEND_OTLP, c->otlp);
	if (err) {
		exporter__free(e);
		errno = -err;
		return NULL;
	}
	e->window_start = mono_ns();
	store__journal_enable(e->store, true);
	return e;
}

uint64_t exporter__next_ms(struct exporter *e)
{
	uint64_t ms = e->cfg->interval_ns / NSEC_PER_MSEC, r = 0;

	/* +-20%: nodes started together do not push together. */
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint64_t)rand();
	return ms - ms / 5 + (ms ? r % (2 * (ms / 5) + 1) : 0);
}

static int collect(uint32_t pid, uint32_t tid, uint32_t stack, enum store_value col, uint64_t value,
		   void *ctx)
{
	struct exporter *e = ctx;
	struct jrow *r;

	if (kind_of(col) < 0 || !value)
		return 0;
	if (e->nrows == e->rows_cap) {
		size_t cap = e->rows_cap ? 2 * e->rows_cap : 1024;
		void *nr = realloc(e->rows, cap * sizeof(*e->rows));

		if (!nr)
			return -ENOMEM;
		e->rows = nr;
		e->rows_cap = cap;
	}
	r = &e->rows[e->nrows++];
	/* Threads apart only when they are a label: else a stack's rows merge across threads. */
	*r = (struct jrow){pid, e->cfg->label_tid ? tid : 0, stack, col, value};
	return 0;
}

static int jrow_cmp(const void *pa, const void *pb)
{
	const struct jrow *a = pa, *b = pb;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->stack != b->stack)
		return a->stack < b->stack ? -1 : 1;
	if (a->col != b->col)
		return a->col < b->col ? -1 : 1;
	return 0;
}

/* Rows that differ only in a thread nobody asked for become one: smaller profiles. */
static void merge_rows(struct exporter *e)
{
	size_t out = 0;

	if (!e->nrows)
		return;
	qsort(e->rows, e->nrows, sizeof(*e->rows), jrow_cmp);
	for (size_t i = 1; i < e->nrows; i++) {
		if (!jrow_cmp(&e->rows[out], &e->rows[i]))
			e->rows[out].v = e->rows[out].v + e->rows[i].v < e->rows[out].v
					     ? UINT64_MAX
					     : e->rows[out].v + e->rows[i].v;
		else
			e->rows[++out] = e->rows[i];
	}
	e->nrows = out + 1;
}

/* /proc/PID/exe now, into buf (size n); "" when the process is gone or has no executable. */
static const char *live_exe(const struct exporter *e, uint32_t pid, char *buf, size_t n)
{
	char path[64];
	ssize_t r;

	snprintf(path, sizeof(path), "%s/%u/exe", e->proc_root ? e->proc_root : "/proc", pid);
	r = readlink(path, buf, n - 1);
	buf[r > 0 ? r : 0] = '\0';
	return buf;
}

static void resolve(struct exporter *e, struct cached_labels *c, uint32_t pid, const char *exe)
{
	struct store_process_info pi = {0};

	store__process(e->store, pid, &pi);
	labels_resolve(e->proc_root, pid, e->cfg, pi.comm, exe[0] ? exe : pi.exe, &c->l);
	c->exe_hash = str_hash(exe);
	c->seen_flush = e->flushes;
}

/*
 * pid's labels, cached while the process is the one they were read for: same start time (a
 * reused pid differs) and same executable (an exec changes the name and often the service).
 * A process that is gone keeps what was read while it ran.
 */
static const struct cached_labels *labels_of(struct exporter *e, uint32_t pid)
{
	struct cached_labels *c = ptrmap_get(&e->labels, pid);
	char exe[4096];

	if (c && c->seen_flush == e->flushes)
		return c;
	live_exe(e, pid, exe, sizeof(exe));
	if (c && (!exe[0] || (c->exe_hash == str_hash(exe) &&
			      labels_start_ticks(e->proc_root, pid) == c->l.start_ticks))) {
		c->seen_flush = e->flushes;
		return c;
	}
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c || ptrmap_put(&e->labels, pid, c)) {
			free(c);
			return NULL;
		}
	}
	resolve(e, c, pid, exe);
	return c;
}

static int peek_row(uint32_t pid, uint32_t tid, uint32_t stack, enum store_value col,
		    uint64_t value, void *ctx)
{
	struct exporter *e = ctx;
	struct cached_labels *c;
	char exe[4096];

	if (kind_of(col) < 0)
		return 0;
	c = ptrmap_get(&e->labels, pid);
	if (!c) {
		labels_of(e, pid);
		return 0;
	}
	/* Known: only an exec since (one readlink a process a peek) means reading it again. */
	if (c->peeked == e->peeks)
		return 0;
	c->peeked = e->peeks;
	if (live_exe(e, pid, exe, sizeof(exe))[0] && str_hash(exe) != c->exe_hash)
		resolve(e, c, pid, exe);
	return 0;
}

void exporter__peek(struct exporter *e)
{
	if (!e)
		return;
	e->peeks++;
	store__journal_each(e->store, peek_row, e);
}

static void labels_sweep(struct exporter *e)
{
	for (size_t i = 0; e->labels.mask && i <= e->labels.mask; i++) {
		struct cached_labels *c = e->labels.vals[i];

		if (c && c->seen_flush + LABELS_KEEP_FLUSHES < e->flushes) {
			free(c);
			ptrmap_del_slot(&e->labels, i);
			i--;
		}
	}
}

static void group_labels(struct exporter *e, struct group *g)
{
	const struct proc_labels *l = &g->who->l;
	size_t n = 0;

	g->labels[n++] = (struct export_label){"service_name", l->service};
	g->labels[n++] = (struct export_label){"host", e->host};
	if (l->container[0])
		g->labels[n++] = (struct export_label){"container", l->container};
	if (l->pod_uid[0])
		g->labels[n++] = (struct export_label){"pod_uid", l->pod_uid};
	for (size_t k = 0; k < e->cfg->nlabels; k++)
		g->labels[n++] =
		    (struct export_label){e->cfg->labels[k].name, e->cfg->labels[k].value};
	if (e->cfg->label_pid) {
		snprintf(g->pid_buf, sizeof(g->pid_buf), "%u", g->pid_key);
		g->labels[n++] = (struct export_label){"pid", g->pid_buf};
	}
	if (e->cfg->label_tid) {
		snprintf(g->tid_buf, sizeof(g->tid_buf), "%u", g->tid_key);
		g->labels[n++] = (struct export_label){"tid", g->tid_buf};
	}
	g->nlabels = n;
}

static bool same_group(const struct exporter *e, const struct group *g,
		       const struct cached_labels *who, uint32_t pid, uint32_t tid)
{
	const struct proc_labels *a = &g->who->l, *b = &who->l;

	if ((e->cfg->label_pid && g->pid_key != pid) || (e->cfg->label_tid && g->tid_key != tid))
		return false;
	return !strcmp(a->service, b->service) && !strcmp(a->container, b->container) &&
	       !strcmp(a->pod_uid, b->pod_uid);
}

struct emit_ctx {
	struct exporter *e;
	struct backend *b;
	uint64_t created_ns;
};

static int emit(uint8_t *body, size_t len, uint64_t samples, void *ctx)
{
	struct emit_ctx *ec = ctx;

	ec->b->requests_built++;
	ec->b->samples_exported += samples;
	/* A full hand-over queue drops the request; the sender counts it. */
	sender__submit(ec->b->sender, body, len, ec->created_ns, samples);
	return 0;
}

/* Keep only the kind's columns, under their export names (the Profile is one editable block). */
static void narrow(Profd__Profile *p, enum export_kind k, const uint32_t type_idx[2],
		   const uint32_t unit_idx[2])
{
	size_t n = kind_cols[k].n;

	for (size_t i = 0; i < p->n_samples; i++) {
		Profd__Sample *s = p->samples[i];
		uint64_t v[2] = {0, 0};

		for (size_t c = 0; c < n; c++)
			v[c] =
			    kind_cols[k].col[c] < s->n_values ? s->values[kind_cols[k].col[c]] : 0;
		for (size_t c = 0; c < n; c++)
			s->values[c] = v[c];
		s->n_values = n;
	}
	for (size_t c = 0; c < n; c++) {
		p->value_types[c]->type = type_idx[c];
		p->value_types[c]->unit = unit_idx[c];
	}
	p->n_value_types = n;
}

void exporter__flush(struct exporter *e, uint64_t now)
{
	struct group *groups = NULL;
	struct export_series *series = NULL;
	Profd__Profile **profiles = NULL;
	size_t ngroups = 0, gcap = 0, nseries = 0;
	struct dump_meta meta = {0};
	uint64_t lost = 0;
	int64_t offset = realtime_offset_ns();
	int err;

	if (!e)
		return;
	e->flushes++;
	e->nrows = 0;
	err = store__journal_drain(e->store, collect, e, &lost);
	e->journal_lost += lost;
	if (err)
		pr_warn("export: %s: this interval's data is lost", strerror(-err));
	meta.start_ns = e->window_start;
	meta.end_ns = now;
	meta.frequency_hz = e->frequency_hz;
	meta.realtime_offset_ns = offset;
	e->window_start = now;
	if (err || !e->nrows)
		goto done;
	merge_rows(e);

	for (size_t i = 0, last = SIZE_MAX, last_pid = 0, last_tid = 0; i < e->nrows; i++) {
		const struct jrow *r = &e->rows[i];
		const struct cached_labels *who;
		uint64_t values[STORE_VALUE__COUNT] = {0};
		int kind = kind_of(r->col);
		struct group *g = NULL;

		/* Rows are sorted by process and thread: most go to the group of the row before. */
		if (last != SIZE_MAX && last_pid == r->pid &&
		    (!e->cfg->label_tid || last_tid == r->tid)) {
			g = &groups[last];
			who = g->who;
		} else {
			who = labels_of(e, r->pid);
		}
		if (!who)
			continue;
		for (size_t k = 0; k < ngroups && !g; k++)
			if (same_group(e, &groups[k], who, r->pid, r->tid))
				g = &groups[k];
		if (!g) {
			if (ngroups == gcap) {
				size_t cap = gcap ? 2 * gcap : 16;
				void *ng = realloc(groups, cap * sizeof(*groups));

				if (!ng)
					goto out;
				groups = ng;
				gcap = cap;
			}
			g = &groups[ngroups++];
			memset(g, 0, sizeof(*g));
			g->who = who;
			g->pid_key = r->pid;
			g->tid_key = r->tid;
		}
		if (!g->rows[kind]) {
			g->rows[kind] = dump_rows__new(e->store, &meta);
			if (!g->rows[kind])
				goto out;
		}
		values[r->col] = r->v;
		if (dump_rows__add(g->rows[kind], r->pid, r->tid, r->stack, values))
			goto out;
		last = (size_t)(g - groups);
		last_pid = r->pid;
		last_tid = r->tid;
	}

	series = calloc(ngroups * EXPORT_KIND__COUNT, sizeof(*series));
	profiles = calloc(ngroups * EXPORT_KIND__COUNT, sizeof(*profiles));
	if (!series || !profiles)
		goto out;
	for (size_t k = 0; k < ngroups; k++) {
		struct group *g = &groups[k];

		group_labels(e, g);
		for (int kind = 0; kind < EXPORT_KIND__COUNT; kind++) {
			uint32_t ti[2] = {0, 0}, ui[2] = {0, 0};
			Profd__Profile *p;

			if (!g->rows[kind])
				continue;
			for (size_t c = 0; c < kind_cols[kind].n; c++)
				if (dump_rows__string(g->rows[kind], kind_cols[kind].type[c],
						      &ti[c]) ||
				    dump_rows__string(g->rows[kind], kind_cols[kind].unit[c],
						      &ui[c]))
					goto out;
			if (dump_rows__finish(g->rows[kind], &p))
				continue;
			narrow(p, kind, ti, ui);
			profiles[nseries] = p;
			series[nseries++] = (struct export_series){
			    .labels = g->labels,
			    .nlabels = g->nlabels,
			    .kind = kind,
			    .profile = p,
			    .time_unix_ns = (uint64_t)((int64_t)meta.start_ns + offset),
			    .duration_ns = meta.end_ns - meta.start_ns,
			};
		}
	}

	for (size_t k = 0; k < e->nb; k++) {
		struct backend *b = &e->b[k];
		struct emit_ctx ec = {e, b, (uint64_t)((int64_t)now + offset)};
		uint64_t t0 = mono_ns(), built = b->requests_built;

		if (b->kind == BACKEND_PYROSCOPE) {
			err = pyroscope__encode(series, nseries, PYROSCOPE_MAX_REQUEST, emit, &ec);
		} else {
			uint8_t *body = NULL;
			size_t len = 0;
			uint64_t samples = 0;

			for (size_t i = 0; i < nseries; i++)
				for (size_t j = 0; series[i].kind == EXPORT_CPU &&
						   j < series[i].profile->n_samples;
				     j++)
					samples += series[i].profile->samples[j]->values[0];
			err = otlp__encode(series, nseries, &body, &len);
			if (!err)
				err = emit(body, len, samples, &ec);
		}
		if (err) {
			b->encode_errors++;
			pr_warn("export: %s: this interval could not be encoded: %s", b->name,
				strerror(-err));
		}
		/* Encoding runs on the loop: how long it held it is worth seeing. */
		pr_debug("export: %s: %zu series, %zu rows in %" PRIu64
			 " requests, encoded in %.1f ms",
			 b->name, nseries, e->nrows, b->requests_built - built,
			 (double)(mono_ns() - t0) / 1e6);
	}
	goto done;
out:
	if (e->nrows)
		pr_warn("export: out of memory: this interval (%zu rows) is not exported",
			e->nrows);
done:
	for (size_t k = 0; k < ngroups; k++)
		for (int kind = 0; kind < EXPORT_KIND__COUNT; kind++)
			dump_rows__free(groups[k].rows[kind]);
	for (size_t k = 0; k < nseries; k++)
		dump__free(profiles[k]);
	free(profiles);
	free(series);
	free(groups);
	labels_sweep(e);
}

static char *dup_or_null(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

int exporter__status(struct exporter *e, Profd__StatusReply *st)
{
	uint64_t real = (uint64_t)((int64_t)mono_ns() + realtime_offset_ns());
	Profd__ExportStatus **v;

	st->n_export = 0;
	st->export = NULL;
	if (!e || !e->nb)
		return 0;
	v = calloc(e->nb, sizeof(*v));
	if (!v)
		return -ENOMEM;
	st->export = v;
	for (size_t k = 0; k < e->nb; k++) {
		struct backend *b = &e->b[k];
		struct sender_stats ss;
		Profd__ExportStatus *x = calloc(1, sizeof(*x));

		if (!x)
			return -ENOMEM;
		profd__export_status__init(x);
		v[st->n_export++] = x;
		sender__stats(b->sender, &ss);
		x->name = strdup(b->name);
		x->url = strdup(b->url);
		x->last_error = dup_or_null(ss.last_error);
		if (!x->name || !x->url)
			return -ENOMEM;
#define SET(f, val) (x->has_##f = 1, x->f = (val))
		SET(requests_sent, ss.requests_sent);
		SET(requests_retried, ss.requests_retried);
		SET(requests_dropped, ss.requests_dropped);
		SET(requests_expired, ss.requests_expired);
		SET(requests_quarantined, ss.requests_quarantined);
		SET(requests_split, ss.requests_split);
		/*
		 * The requests a previous run (or the exporter before a reload) left in the spool
		 * are sent by this one: their samples count as exported here too, or samples_sent
		 * would pass samples_exported.
		 */
		SET(samples_exported, b->samples_exported + ss.samples_resumed);
		SET(samples_sent, ss.samples_sent);
		SET(bytes_sent, ss.bytes_sent);
		SET(spool_bytes, ss.spool_bytes);
		SET(spool_requests, ss.spool_requests);
		SET(oldest_age_ns, ss.oldest_ns && real > ss.oldest_ns ? real - ss.oldest_ns : 0);
		if (ss.last_success_ns)
			SET(last_success_age_ns,
			    real > ss.last_success_ns ? real - ss.last_success_ns : 0);
		if (ss.last_error_ns)
			SET(last_error_age_ns,
			    real > ss.last_error_ns ? real - ss.last_error_ns : 0);
		SET(auth_failing, ss.auth_failing);
		SET(spool_errors, ss.spool_errors);
		SET(requests_built, b->requests_built);
		SET(encode_errors, b->encode_errors);
		SET(quarantine_requests, ss.quarantine_requests);
		SET(quarantine_bytes, ss.quarantine_bytes);
		SET(quarantine_dropped, ss.quarantine_dropped);
		SET(requests_invalid, ss.requests_invalid);
#undef SET
	}
	return 0;
}

void exporter__memory(const struct exporter *e, struct mem_usage *out)
{
	*out = (struct mem_usage){0};
	if (!e)
		return;
	out->bytes =
	    sizeof(*e) +
	    ptrmap_slots(&e->labels) * (sizeof(*e->labels.keys) + sizeof(*e->labels.vals)) +
	    e->labels.n * sizeof(struct cached_labels) + e->rows_cap * sizeof(*e->rows);
	for (size_t i = 0; i < e->nb; i++)
		out->bytes += sender__memory(e->b[i].sender);
	out->count = e->labels.n;
}

void exporter__status_free(Profd__StatusReply *st)
{
	for (size_t k = 0; k < st->n_export; k++) {
		Profd__ExportStatus *x = st->export[k];

		free(x->name);
		free(x->url);
		free(x->last_error);
		free(x);
	}
	free(st->export);
	st->export = NULL;
	st->n_export = 0;
}

void exporter__free(struct exporter *e)
{
	if (!e)
		return;
	store__journal_enable(e->store, false);
	for (size_t k = 0; k < e->nb; k++) {
		sender__free(e->b[k].sender);
		free(e->b[k].url);
	}
	for (size_t i = 0; e->labels.mask && i <= e->labels.mask; i++)
		free(e->labels.vals[i]);
	ptrmap_fini(&e->labels);
	free(e->rows);
	free(e);
}
