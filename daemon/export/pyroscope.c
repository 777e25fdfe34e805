// SPDX-License-Identifier: BSD-2-Clause
#include "pyroscope.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "pprof.h"
#include "gz.h"
#include "log.h"
#include "profile.pb-c.h"
#include "pyroscope/push.pb-c.h"

/* A pprof larger than this unpacked is not one profd made (count reads its own requests). */
#define PPROF_MAX_UNPACKED (256u << 20)

const char *export_kind_name(enum export_kind k)
{
	switch (k) {
	case EXPORT_CPU:
		return "process_cpu";
	case EXPORT_GPU:
		return "gpu";
	case EXPORT_OFFCPU:
		return "off_cpu";
	default:
		return "unknown";
	}
}

/* A random (version 4) UUID: the sample's ID, kept in the spooled bytes for every retry. */
static void uuid4(char out[37])
{
	uint8_t b[16];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		/* Only before the entropy pool is up; unique enough for an ingestion id. */
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (uint8_t)rand();
	}
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

/* The series' profile as gzipped pprof. Returns 0 and *out (malloc'd) / *len. */
static int series_pprof(const struct export_series *s, uint8_t **out, size_t *len)
{
	struct render_opts ro = {.no_sample_labels = true};
	char *buf = NULL;
	size_t n = 0;
	FILE *f;
	int err;

	f = open_memstream(&buf, &n);
	if (!f)
		return -errno;
	err = format_pprof(s->profile, &ro, f);
	if (fclose(f) && !err)
		err = -EIO;
	if (err) {
		free(buf);
		return err;
	}
	*out = (uint8_t *)buf;
	*len = n;
	return 0;
}

struct pending {
	Push__V1__RawProfileSeries **series;
	size_t n, cap;
	size_t bytes;
	uint64_t samples;
};

static void pending_clear(struct pending *p)
{
	for (size_t i = 0; i < p->n; i++) {
		Push__V1__RawProfileSeries *rs = p->series[i];

		for (size_t k = 0; k < rs->n_labels; k++)
			free(rs->labels[k]);
		free(rs->labels);
		if (rs->n_samples) {
			free(rs->samples[0]->raw_profile.data);
			free(rs->samples[0]->id);
			free(rs->samples[0]);
		}
		free(rs->samples);
		free(rs);
	}
	p->n = 0;
	p->bytes = 0;
	p->samples = 0;
}

static int pending_flush(struct pending *p, pyroscope_emit_fn emit, void *ctx)
{
	Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
	uint8_t *body;
	size_t len;
	int err;

	if (!p->n)
		return 0;
	req.n_series = p->n;
	req.series = p->series;
	len = push__v1__push_request__get_packed_size(&req);
	body = malloc(len ? len : 1);
	if (!body) {
		pending_clear(p);
		return -ENOMEM;
	}
	push__v1__push_request__pack(&req, body);
	err = emit(body, len, p->samples, ctx);
	pending_clear(p);
	return err;
}

static Push__V1__LabelPair *label(const char *name, const char *value)
{
	Push__V1__LabelPair *l = malloc(sizeof(*l));

	if (!l)
		return NULL;
	push__v1__label_pair__init(l);
	/* The strings belong to the series; pack only reads them. */
	l->name = (char *)name;
	l->value = (char *)value;
	return l;
}

/* The samples/count total of a CPU series' profile. */
static uint64_t cpu_samples(const struct export_series *s)
{
	uint64_t t = 0;

	if (s->kind != EXPORT_CPU)
		return 0;
	for (size_t i = 0; i < s->profile->n_samples; i++)
		if (s->profile->samples[i]->n_values)
			t += s->profile->samples[i]->values[0];
	return t;
}

static int add_series(struct pending *p, const struct export_series *s, uint8_t *pprof, size_t plen)
{
	Push__V1__RawProfileSeries *rs = calloc(1, sizeof(*rs));
	Push__V1__RawSample *smp = calloc(1, sizeof(*smp));
	char *id = malloc(37);

	if (!rs || !smp || !id)
		goto nomem;
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 16;
		void *ns = realloc(p->series, cap * sizeof(*p->series));

		if (!ns)
			goto nomem;
		p->series = ns;
		p->cap = cap;
	}
	push__v1__raw_profile_series__init(rs);
	push__v1__raw_sample__init(smp);
	rs->labels = calloc(s->nlabels + 1, sizeof(*rs->labels));
	if (!rs->labels)
		goto nomem;
	rs->labels[rs->n_labels] = label("__name__", export_kind_name(s->kind));
	if (!rs->labels[rs->n_labels++])
		goto nomem_series;
	for (size_t k = 0; k < s->nlabels; k++) {
		rs->labels[rs->n_labels] = label(s->labels[k].name, s->labels[k].value);
		if (!rs->labels[rs->n_labels++])
			goto nomem_series;
	}
	uuid4(id);
	smp->id = id;
	smp->raw_profile.data = pprof;
	smp->raw_profile.len = plen;
	rs->samples = malloc(sizeof(*rs->samples));
	if (!rs->samples)
		goto nomem_series;
	rs->samples[0] = smp;
	rs->n_samples = 1;
	p->series[p->n++] = rs;
	p->bytes += plen + 64 + 40 * s->nlabels;
	p->samples += cpu_samples(s);
	return 0;
nomem_series:
	for (size_t k = 0; k < rs->n_labels; k++)
		free(rs->labels[k]);
	free(rs->labels);
nomem:
	free(rs);
	free(smp);
	free(id);
	free(pprof);
	return -ENOMEM;
}

int pyroscope__encode(const struct export_series *series, size_t n, size_t max_bytes,
		      pyroscope_emit_fn emit, void *ctx)
{
	struct pending p = {0};
	int err = 0;

	for (size_t i = 0; i < n && !err; i++) {
		uint8_t *pprof = NULL;
		size_t plen = 0;

		err = series_pprof(&series[i], &pprof, &plen);
		if (err) {
			pr_warn("export: pyroscope: a %s profile could not be encoded: %s",
				export_kind_name(series[i].kind), strerror(-err));
			err = 0;
			continue;
		}
		if (p.n && p.bytes + plen > max_bytes)
			err = pending_flush(&p, emit, ctx);
		if (!err)
			err = add_series(&p, &series[i], pprof, plen);
		else
			free(pprof);
	}
	if (!err)
		err = pending_flush(&p, emit, ctx);
	pending_clear(&p);
	free(p.series);
	return err;
}

int pyroscope__split(const uint8_t *body, size_t len, uint8_t **a, size_t *alen, uint8_t **b,
		     size_t *blen)
{
	Push__V1__PushRequest *req = push__v1__push_request__unpack(NULL, len, body);
	Push__V1__PushRequest half = PUSH__V1__PUSH_REQUEST__INIT;
	size_t mid;
	int err = 0;

	if (!req)
		return -EBADMSG;
	if (req->n_series < 2) {
		err = -E2BIG;
		goto out;
	}
	mid = req->n_series / 2;
	half.series = req->series;
	half.n_series = mid;
	*alen = push__v1__push_request__get_packed_size(&half);
	*a = malloc(*alen ? *alen : 1);
	half.series = req->series + mid;
	half.n_series = req->n_series - mid;
	*blen = push__v1__push_request__get_packed_size(&half);
	*b = malloc(*blen ? *blen : 1);
	if (!*a || !*b) {
		free(*a);
		free(*b);
		*a = *b = NULL;
		err = -ENOMEM;
		goto out;
	}
	push__v1__push_request__pack(&half, *b);
	half.series = req->series;
	half.n_series = mid;
	push__v1__push_request__pack(&half, *a);
out:
	push__v1__push_request__free_unpacked(req, NULL);
	return err;
}

uint64_t pyroscope__count(const uint8_t *body, size_t len)
{
	Push__V1__PushRequest *req = push__v1__push_request__unpack(NULL, len, body);
	uint64_t total = 0;

	if (!req)
		return 0;
	for (size_t i = 0; i < req->n_series; i++) {
		const Push__V1__RawProfileSeries *rs = req->series[i];
		bool cpu = false;

		for (size_t k = 0; k < rs->n_labels; k++)
			cpu |= !strcmp(rs->labels[k]->name, "__name__") &&
			       !strcmp(rs->labels[k]->value, "process_cpu");
		for (size_t k = 0; cpu && k < rs->n_samples; k++) {
			Perftools__Profiles__Profile *pp;
			size_t plen;
			uint8_t *raw;

			if (export_gunzip(rs->samples[k]->raw_profile.data,
					  rs->samples[k]->raw_profile.len, PPROF_MAX_UNPACKED, &raw,
					  &plen))
				continue;
			pp = perftools__profiles__profile__unpack(NULL, plen, raw);
			free(raw);
			if (!pp)
				continue;
			for (size_t j = 0; j < pp->n_sample; j++)
				if (pp->sample[j]->n_value && pp->sample[j]->value[0] > 0)
					total += (uint64_t)pp->sample[j]->value[0];
			perftools__profiles__profile__free_unpacked(pp, NULL);
		}
	}
	push__v1__push_request__free_unpacked(req, NULL);
	return total;
}
