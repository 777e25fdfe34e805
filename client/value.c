// SPDX-License-Identifier: BSD-2-Clause
#include "value.h"
#include "profile.h"
#include "satmath.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
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
};

int value_parse(const char *s, enum value_kind *out)
{
	for (size_t i = 0; i < VALUE__COUNT; i++) {
		/* gpu-idle has its own option, --gpu-idle: it changes the samples, not the unit. */
		if (i == VALUE_GPU_IDLE)
			continue;
		if (strcmp(s, kinds[i].option) == 0) {
			*out = (enum value_kind)i;
			return 0;
		}
	}
	return -EINVAL;
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

void profile_strip_nvtx(Profd__Profile *p)
{
	for (size_t i = 0; i < p->n_stacks; i++) {
		Profd__Stack *st = p->stacks[i];
		size_t n = 0;

		for (size_t j = 0; j < st->n_frames; j++)
			if (p->frames[st->frames[j]]->kind != PROFD__FRAME_KIND__FRAME_NVTX)
				st->frames[n++] = st->frames[j];
		st->n_frames = n;
	}
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
