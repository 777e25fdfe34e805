// SPDX-License-Identifier: BSD-2-Clause
/*
 * Reading OTLP request bodies back, for the sender: gzip in and out, splitting a request the
 * backend refused as too large (413) into two, and counting the samples a request carries.
 *
 * A split keeps every half self-contained: each half gets its own ProfilesDictionary with only
 * the entries its profiles reach (stacks, then locations, mappings, functions, attributes,
 * links, strings), renumbered in the order they are reached, so that two halves together are
 * about the size of the whole instead of each carrying the whole dictionary. It splits at the
 * outermost level that has two or more entries: resources, then the scopes of the one resource,
 * then the profiles of its one scope, then the samples of its one profile.
 */
#include "otlp.h"
#include "gz.h"
#include "otlp_pb.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define REQ(fn)                                                                                    \
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__##fn

int otlp_pack_gzip(const OtRequest *req, uint8_t **out, size_t *len)
{
	size_t n = REQ(get_packed_size)(req);
	uint8_t *raw, *gz = NULL;
	z_stream zs;
	uLong bound;
	int err = 0;

	*out = NULL;
	*len = 0;
	if (n > UINT_MAX / 2)
		return -E2BIG;
	raw = malloc(n ? n : 1);
	if (!raw)
		return -ENOMEM;
	REQ(pack)(req, raw);
	memset(&zs, 0, sizeof(zs));
	/* 16 + 15: a gzip header and trailer around a 32 KiB-window deflate stream. */
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK) {
		free(raw);
		return -ENOMEM;
	}
	bound = deflateBound(&zs, (uLong)n);
	gz = malloc(bound);
	if (!gz) {
		err = -ENOMEM;
		goto out;
	}
	zs.next_in = raw;
	zs.avail_in = (uInt)n;
	zs.next_out = gz;
	zs.avail_out = (uInt)bound;
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END) {
		err = -EIO; /* cannot happen with deflateBound's room */
		goto out;
	}
	*out = gz;
	*len = zs.total_out;
	gz = NULL;
out:
	deflateEnd(&zs);
	free(gz);
	free(raw);
	return err;
}

OtRequest *otlp_unpack_gzip(const uint8_t *body, size_t len)
{
	uint8_t *buf;
	size_t used;
	OtRequest *r;
	int err;

	err = export_gunzip(body, len, OTLP_MAX_INFLATED, &buf, &used);
	if (err) {
		errno = -err;
		return NULL;
	}
	r = REQ(unpack)(NULL, used, buf);
	free(buf);
	if (!r)
		errno = EBADMSG;
	return r;
}

void otlp_request_free(OtRequest *r)
{
	if (r)
		REQ(free_unpacked)(r, NULL);
}

/* One dictionary table being cut down: old index -> new index, and the new table. */
struct cut {
	size_t n_old;
	void **old;
	int32_t *map; /* new index, 0: not kept (or the zero entry) */
	void **kept;
	size_t n_kept;
};

static int cut_init(struct cut *c, void *old, size_t n_old)
{
	c->n_old = n_old;
	c->old = old;
	c->map = calloc(n_old ? n_old : 1, sizeof(*c->map));
	c->kept = calloc(n_old ? n_old : 1, sizeof(*c->kept));
	if (!c->map || !c->kept)
		return -ENOMEM;
	if (n_old) {
		c->kept[0] = c->old[0];
		c->n_kept = 1;
	}
	return 0;
}

static void cut_fini(struct cut *c)
{
	free(c->map);
	free(c->kept);
}

/* The new index of old entry i, keeping it; -EBADMSG when i is out of the table. */
static int keep(struct cut *c, int32_t *i)
{
	if (*i == 0)
		return 0;
	if (*i < 0 || (size_t)*i >= c->n_old)
		return -EBADMSG;
	if (!c->map[*i]) {
		c->map[*i] = (int32_t)c->n_kept;
		c->kept[c->n_kept++] = c->old[*i];
	}
	*i = c->map[*i];
	return 0;
}

static int keep_all(struct cut *c, int32_t *idx, size_t n)
{
	int err = 0;

	for (size_t i = 0; i < n && !err; i++)
		err = keep(c, &idx[i]);
	return err;
}

enum { T_STR, T_ATTR, T_MAP, T_LOC, T_FN, T_STACK, T_LINK, T__COUNT };

static int keep_value_type(struct cut *t, OtValueType *vt)
{
	int err;

	if (!vt)
		return 0;
	err = keep(&t[T_STR], &vt->type_strindex);
	return err ? err : keep(&t[T_STR], &vt->unit_strindex);
}

/* Keep what the selected profiles reach, renumbering their index fields in place. */
static int keep_profiles(struct cut *t, OtResourceProfiles **rps, size_t n)
{
	int err = 0;

	for (size_t i = 0; i < n && !err; i++)
		for (size_t j = 0; j < rps[i]->n_scope_profiles && !err; j++) {
			OtScopeProfiles *sp = rps[i]->scope_profiles[j];

			for (size_t k = 0; k < sp->n_profiles && !err; k++) {
				OtProfile *p = sp->profiles[k];

				err = keep_value_type(t, p->sample_type);
				if (!err)
					err = keep_value_type(t, p->period_type);
				if (!err)
					err = keep_all(&t[T_ATTR], p->attribute_indices,
						       p->n_attribute_indices);
				for (size_t s = 0; s < p->n_samples && !err; s++) {
					OtSample *smp = p->samples[s];

					err = keep(&t[T_STACK], &smp->stack_index);
					if (!err)
						err = keep_all(&t[T_ATTR], smp->attribute_indices,
							       smp->n_attribute_indices);
					if (!err)
						err = keep(&t[T_LINK], &smp->link_index);
				}
			}
		}
	return err;
}

/* Then what the kept dictionary entries reach, each entry renumbered once (index 0 is zero). */
static int keep_dictionary(struct cut *t)
{
	int err = 0;

	for (size_t i = 1; i < t[T_STACK].n_kept && !err; i++) {
		OtStack *s = t[T_STACK].kept[i];

		err = keep_all(&t[T_LOC], s->location_indices, s->n_location_indices);
	}
	for (size_t i = 1; i < t[T_LOC].n_kept && !err; i++) {
		OtLocation *l = t[T_LOC].kept[i];

		err = keep(&t[T_MAP], &l->mapping_index);
		if (!err)
			err = keep_all(&t[T_ATTR], l->attribute_indices, l->n_attribute_indices);
		for (size_t j = 0; j < l->n_lines && !err; j++)
			err = keep(&t[T_FN], &l->lines[j]->function_index);
	}
	for (size_t i = 1; i < t[T_MAP].n_kept && !err; i++) {
		OtMapping *m = t[T_MAP].kept[i];

		err = keep(&t[T_STR], &m->filename_strindex);
		if (!err)
			err = keep_all(&t[T_ATTR], m->attribute_indices, m->n_attribute_indices);
	}
	for (size_t i = 1; i < t[T_FN].n_kept && !err; i++) {
		OtFunction *f = t[T_FN].kept[i];

		err = keep(&t[T_STR], &f->name_strindex);
		if (!err)
			err = keep(&t[T_STR], &f->system_name_strindex);
		if (!err)
			err = keep(&t[T_STR], &f->filename_strindex);
	}
	/* Attributes last: the ones above may add to them, and they reach only strings. */
	for (size_t i = 1; i < t[T_ATTR].n_kept && !err; i++) {
		OtKeyValueAndUnit *a = t[T_ATTR].kept[i];

		err = keep(&t[T_STR], &a->key_strindex);
		if (!err)
			err = keep(&t[T_STR], &a->unit_strindex);
		if (!err && a->value && a->value->value_case == OT_STRINDEX)
			err = keep(&t[T_STR], &a->value->string_value_strindex);
	}
	return err;
}

/* Pack the selected resources with a dictionary cut down to what they use. */
static int pack_selection(OtRequest *r, OtResourceProfiles **rps, size_t n, uint8_t **out,
			  size_t *len)
{
	static OtDictionary empty =
	    OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
	OtDictionary *d = r->dictionary ? r->dictionary : &empty, nd;
	struct cut t[T__COUNT];
	OtRequest req;
	int err = 0;

	memset(t, 0, sizeof(t));
	err = cut_init(&t[T_STR], d->string_table, d->n_string_table);
	if (!err)
		err = cut_init(&t[T_ATTR], d->attribute_table, d->n_attribute_table);
	if (!err)
		err = cut_init(&t[T_MAP], d->mapping_table, d->n_mapping_table);
	if (!err)
		err = cut_init(&t[T_LOC], d->location_table, d->n_location_table);
	if (!err)
		err = cut_init(&t[T_FN], d->function_table, d->n_function_table);
	if (!err)
		err = cut_init(&t[T_STACK], d->stack_table, d->n_stack_table);
	if (!err)
		err = cut_init(&t[T_LINK], d->link_table, d->n_link_table);
	if (!err)
		err = keep_profiles(t, rps, n);
	if (!err)
		err = keep_dictionary(t);
	if (err)
		goto out;
	nd = *d;
	nd.n_string_table = t[T_STR].n_kept;
	nd.string_table = (char **)t[T_STR].kept;
	nd.n_attribute_table = t[T_ATTR].n_kept;
	nd.attribute_table = (OtKeyValueAndUnit **)t[T_ATTR].kept;
	nd.n_mapping_table = t[T_MAP].n_kept;
	nd.mapping_table = (OtMapping **)t[T_MAP].kept;
	nd.n_location_table = t[T_LOC].n_kept;
	nd.location_table = (OtLocation **)t[T_LOC].kept;
	nd.n_function_table = t[T_FN].n_kept;
	nd.function_table = (OtFunction **)t[T_FN].kept;
	nd.n_stack_table = t[T_STACK].n_kept;
	nd.stack_table = (OtStack **)t[T_STACK].kept;
	nd.n_link_table = t[T_LINK].n_kept;
	nd.link_table = (OtLink **)t[T_LINK].kept;
	req = *r;
	req.n_resource_profiles = n;
	req.resource_profiles = rps;
	req.dictionary = &nd;
	err = otlp_pack_gzip(&req, out, len);
out:
	for (size_t i = 0; i < T__COUNT; i++)
		cut_fini(&t[i]);
	return err;
}

/* Half h (0 or 1) of the request in body, as a body of its own. */
static int split_half(const uint8_t *body, size_t len, int h, uint8_t **out, size_t *olen)
{
	OtRequest *r = otlp_unpack_gzip(body, len);
	OtResourceProfiles rp, *rp_ptr = &rp, **sel;
	OtScopeProfiles sp, *sp_ptr = &sp;
	OtProfile p, *p_ptr = &p;
	size_t n, lo, hi;
	int err = 0;

	if (!r)
		return -errno;
	if (r->n_resource_profiles >= 2) {
		n = r->n_resource_profiles;
		lo = h ? n / 2 : 0;
		hi = h ? n : n / 2;
		sel = r->resource_profiles + lo;
		err = pack_selection(r, sel, hi - lo, out, olen);
		goto out;
	}
	if (r->n_resource_profiles != 1) {
		err = -E2BIG;
		goto out;
	}
	rp = *r->resource_profiles[0];
	if (rp.n_scope_profiles >= 2) {
		n = rp.n_scope_profiles;
		lo = h ? n / 2 : 0;
		hi = h ? n : n / 2;
		rp.scope_profiles += lo;
		rp.n_scope_profiles = hi - lo;
		err = pack_selection(r, &rp_ptr, 1, out, olen);
		goto out;
	}
	if (rp.n_scope_profiles != 1) {
		err = -E2BIG;
		goto out;
	}
	sp = *rp.scope_profiles[0];
	rp.scope_profiles = &sp_ptr;
	if (sp.n_profiles >= 2) {
		n = sp.n_profiles;
		lo = h ? n / 2 : 0;
		hi = h ? n : n / 2;
		sp.profiles += lo;
		sp.n_profiles = hi - lo;
		err = pack_selection(r, &rp_ptr, 1, out, olen);
		goto out;
	}
	if (sp.n_profiles != 1 || sp.profiles[0]->n_samples < 2) {
		err = -E2BIG; /* one sample alone: nothing to halve */
		goto out;
	}
	p = *sp.profiles[0];
	sp.profiles = &p_ptr;
	n = p.n_samples;
	lo = h ? n / 2 : 0;
	hi = h ? n : n / 2;
	p.samples += lo;
	p.n_samples = hi - lo;
	err = pack_selection(r, &rp_ptr, 1, out, olen);
out:
	otlp_request_free(r);
	return err;
}

int otlp__split(const uint8_t *body, size_t len, uint8_t **a, size_t *alen, uint8_t **b,
		size_t *blen)
{
	int err;

	*a = *b = NULL;
	*alen = *blen = 0;
	/* Each half from its own decoded copy: the cut renumbers indices in place. */
	err = split_half(body, len, 0, a, alen);
	if (!err)
		err = split_half(body, len, 1, b, blen);
	if (err) {
		free(*a);
		*a = NULL;
		*alen = 0;
	}
	return err;
}

/*
 * The first value column of each kind (series.h), which is what the Pyroscope encoder's count
 * (the first value of every sample) adds up: CPU samples, GPU kernel nanoseconds, off-CPU
 * nanoseconds. The other columns (gpu_kernel_launches) travel as Profiles of their own here.
 */
static const char *const first_columns[] = {"samples", "gpu_kernel_time", "off_cpu"};

static bool counted(const OtDictionary *d, const OtProfile *p)
{
	int32_t i = p->sample_type ? p->sample_type->type_strindex : 0;

	if (!d || i <= 0 || (size_t)i >= d->n_string_table)
		return false;
	for (size_t j = 0; j < sizeof(first_columns) / sizeof(first_columns[0]); j++)
		if (strcmp(d->string_table[i], first_columns[j]) == 0)
			return true;
	return false;
}

uint64_t otlp__count(const uint8_t *body, size_t len)
{
	OtRequest *r = otlp_unpack_gzip(body, len);
	uint64_t n = 0;

	if (!r)
		return 0;
	for (size_t i = 0; i < r->n_resource_profiles; i++)
		for (size_t j = 0; j < r->resource_profiles[i]->n_scope_profiles; j++) {
			const OtScopeProfiles *sp = r->resource_profiles[i]->scope_profiles[j];

			for (size_t k = 0; k < sp->n_profiles; k++) {
				const OtProfile *p = sp->profiles[k];

				if (!counted(r->dictionary, p))
					continue;
				for (size_t s = 0; s < p->n_samples; s++) {
					const OtSample *smp = p->samples[s];
					int64_t v = smp->n_values ? smp->values[0] : 0;

					if (v > 0)
						n = n > UINT64_MAX - (uint64_t)v ? UINT64_MAX
										 : n + (uint64_t)v;
				}
			}
		}
	otlp_request_free(r);
	return n;
}
