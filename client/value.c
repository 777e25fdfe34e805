// SPDX-License-Identifier: BSD-2-Clause
#include "value.h"
#include "flame.h"
#include "satmath.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *option;
	const char *column;
} kinds[VALUE__COUNT] = {
    [VALUE_CPU] = {"cpu", "samples"},
    [VALUE_GPU_IDLE] = {"gpu-idle", "gpu_idle_samples"},
    [VALUE_GPU] = {"gpu", "gpu_time"},
    [VALUE_GPU_KERNELS] = {"gpu-kernels", "gpu_kernels"},
    [VALUE_COPY] = {"copy", "copy_time"},
    [VALUE_COPY_BYTES] = {"copy-bytes", "copy_bytes"},
    [VALUE_LAUNCHES] = {"launches", "uprobe_launches"},
    [VALUE_OFFCPU] = {"off-cpu", "off_cpu"},
    [VALUE_WALL] = {"wall", "wall_time"},
    [VALUE_GPU_IDLE_OFFCPU] = {"gpu-idle off-cpu", "gpu_idle_off_cpu"},
    [VALUE_GPU_IDLE_WALL] = {"gpu-idle wall", "gpu_idle_wall_time"},
    [VALUE_GPU_MEMORY] = {"gpu-memory", "gpu_memory"},
    [VALUE_GPU_MEMORY_LIVE] = {"gpu-memory-live", "gpu_memory_live"},
};

int value_parse(const char *s, enum value_kind *out)
{
	for (size_t i = 0; i < VALUE__COUNT; i++) {
		/* --gpu-idle is an option of its own: it changes the samples, not the unit. */
		if (i == VALUE_GPU_IDLE || i == VALUE_GPU_IDLE_OFFCPU || i == VALUE_GPU_IDLE_WALL)
			continue;
		if (strcmp(s, kinds[i].option) == 0) {
			*out = (enum value_kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

int value_gpu_idle(enum value_kind k, enum value_kind *out)
{
	switch (k) {
	case VALUE_CPU:
	case VALUE_GPU_IDLE:
		*out = VALUE_GPU_IDLE;
		return 0;
	case VALUE_OFFCPU:
	case VALUE_GPU_IDLE_OFFCPU:
		*out = VALUE_GPU_IDLE_OFFCPU;
		return 0;
	case VALUE_WALL:
	case VALUE_GPU_IDLE_WALL:
		*out = VALUE_GPU_IDLE_WALL;
		return 0;
	default:
		return -EINVAL;
	}
}

const char *value_option_name(enum value_kind k)
{
	return k < VALUE__COUNT ? kinds[k].option : "?";
}

const char *value_column_name(enum value_kind k)
{
	return k < VALUE__COUNT ? kinds[k].column : "?";
}

int profile_value_index(const Profd__Profile *p, const char *type)
{
	/* A profile that names no columns has the one CPU column (as the first daemons sent). */
	if (!p->n_value_types)
		return strcmp(type, "samples") == 0 ? 0 : -1;
	for (size_t i = 0; i < p->n_value_types && i < INT32_MAX; i++)
		if (strcmp(profile_string(p, p->value_types[i]->type), type) == 0)
			return (int)i;
	return -1;
}

const char *profile_value_unit(const Profd__Profile *p, uint32_t idx)
{
	const char *u = idx < p->n_value_types ? profile_string(p, p->value_types[idx]->unit) : "";

	return *u ? u : "count";
}

const char *profile_value_type(const Profd__Profile *p, uint32_t idx)
{
	const char *t = idx < p->n_value_types ? profile_string(p, p->value_types[idx]->type) : "";

	return *t ? t : "samples";
}

uint64_t profile_value_total(const Profd__Profile *p, uint32_t idx)
{
	uint64_t total = 0;

	for (size_t i = 0; i < p->n_samples; i++) {
		const Profd__Sample *s = p->samples[i];
		uint64_t v = idx < s->n_values ? s->values[idx] : 0;

		total = sat_add(total, v);
	}
	return total;
}

static void strip_kind(Profd__Profile *p, Profd__FrameKind kind)
{
	for (size_t i = 0; i < p->n_stacks; i++) {
		Profd__Stack *st = p->stacks[i];
		size_t n = 0;

		for (size_t j = 0; j < st->n_frames; j++)
			if (p->frames[st->frames[j]]->kind != kind)
				st->frames[n++] = st->frames[j];
		st->n_frames = n;
	}
}

void profile_strip_nvtx(Profd__Profile *p)
{
	strip_kind(p, PROFD__FRAME_KIND__FRAME_NVTX);
}

void profile_strip_states(Profd__Profile *p)
{
	strip_kind(p, PROFD__FRAME_KIND__FRAME_STATE);
}

/* Index of string s in p's table, appended when missing; -1 when out of memory. */
static int64_t string_index(Profd__Profile *p, const char *s)
{
	char **strs;

	for (size_t i = 0; i < p->n_strings; i++)
		if (p->strings[i] && strcmp(p->strings[i], s) == 0)
			return (int64_t)i;
	if (p->n_strings >= UINT32_MAX)
		return -1;
	strs = realloc(p->strings, (p->n_strings + 1) * sizeof(*strs));
	if (!strs)
		return -1;
	p->strings = strs;
	strs[p->n_strings] = strdup(s);
	if (!strs[p->n_strings])
		return -1;
	return (int64_t)p->n_strings++;
}

int profile_add_wall(Profd__Profile *p, bool gpu_idle, uint32_t *index)
{
	const char *name = gpu_idle ? "gpu_idle_wall_time" : "wall_time";
	int ci = profile_value_index(p, gpu_idle ? "gpu_idle_samples" : "samples");
	int oi = profile_value_index(p, gpu_idle ? "gpu_idle_off_cpu" : "off_cpu");
	int wi = profile_value_index(p, name);
	uint64_t period = p->has_period_ns ? p->period_ns : 0;
	Profd__ValueType **vts, *vt;
	size_t nv = p->n_value_types;
	int64_t ts, us;

	if (wi >= 0) {
		*index = (uint32_t)wi;
		return 0;
	}
	if (oi < 0 || !nv || (ci >= 0 && !period && profile_value_total(p, (uint32_t)ci)))
		return -ENODATA;
	ts = string_index(p, name);
	us = ts < 0 ? -1 : string_index(p, "nanoseconds");
	if (us < 0)
		return -ENOMEM;
	/* Each sample's row first: a failure leaves every array as long as its count says. */
	for (size_t i = 0; i < p->n_samples; i++) {
		Profd__Sample *s = p->samples[i];
		uint64_t *v = realloc(s->values, (nv + 1) * sizeof(*v));
		uint64_t cpu, off;

		if (!v)
			return -ENOMEM;
		s->values = v;
		for (size_t k = s->n_values; k < nv; k++)
			v[k] = 0;
		s->n_values = nv;
		cpu = ci >= 0 ? v[ci] : 0;
		off = v[oi];
		v[nv] = sat_add(sat_mul(cpu, period), off);
	}
	vts = realloc(p->value_types, (nv + 1) * sizeof(*vts));
	if (!vts)
		return -ENOMEM;
	p->value_types = vts;
	vt = malloc(sizeof(*vt));
	if (!vt)
		return -ENOMEM;
	profd__value_type__init(vt);
	vt->type = (uint32_t)ts;
	vt->unit = (uint32_t)us;
	vts[nv] = vt;
	p->n_value_types = nv + 1;
	for (size_t i = 0; i < p->n_samples; i++)
		p->samples[i]->n_values = nv + 1;
	*index = (uint32_t)nv;
	return 0;
}

bool value_unit_is_ns(const char *unit)
{
	return strcmp(unit, "nanoseconds") == 0 || strcmp(unit, "ns") == 0;
}

bool value_unit_is_bytes(const char *unit)
{
	return strcmp(unit, "bytes") == 0;
}

char *fmt_value(uint64_t v, const char *unit, char *buf, size_t len)
{
	if (value_unit_is_ns(unit)) {
		if (v < 1000)
			snprintf(buf, len, "%" PRIu64 " ns", v);
		else if (v < 1000000)
			snprintf(buf, len, "%.1f us", (double)v / 1e3);
		else if (v < 1000000000)
			snprintf(buf, len, "%.2f ms", (double)v / 1e6);
		else
			snprintf(buf, len, "%.3f s", (double)v / 1e9);
	} else if (value_unit_is_bytes(unit)) {
		fmt_bytes(v, buf, len);
	} else {
		snprintf(buf, len, "%" PRIu64, v);
	}
	return buf;
}

const char *value_noun(const char *type)
{
	if (strcmp(type, "samples") == 0 || strcmp(type, "gpu_idle_samples") == 0)
		return "samples";
	if (strcmp(type, "gpu_kernels") == 0)
		return "kernels";
	if (strcmp(type, "uprobe_launches") == 0)
		return "launches";
	return type;
}
