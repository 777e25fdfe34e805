// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl's wall-clock column and thread state frames: profile_add_wall on a profile as
 * profd__response__unpack gives it (packed and unpacked here, so its arrays are the
 * allocator's and growing them is checked by the sanitizers) adds "wall_time" = samples x
 * period + off_cpu per sample, once; refuses a profile without off-CPU time or without a
 * period; profile_strip_states drops FRAME_STATE frames and nothing else.
 */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "profile_fixture.h"
#include "value.h"

/* The fixture through the wire: a profile whose every part is malloc'd. */
static Profd__Profile *roundtrip(struct fixture *fx)
{
	size_t len = profd__profile__get_packed_size(&fx->p);
	uint8_t *buf = malloc(len ? len : 1);
	Profd__Profile *p;

	if (!buf)
		return NULL;
	profd__profile__pack(&fx->p, buf);
	p = profd__profile__unpack(NULL, len, buf);
	free(buf);
	return p;
}

static void test_wall(void)
{
	struct fixture fx;
	Profd__Profile *p;
	uint32_t st, sr, k, f[3], wi = 99, again = 99;
	const uint64_t run[] = {3, 0}, off[] = {0, 2500}, both[] = {1, 100};

	fx_init_samples(&fx, 10000000); /* 100 Hz */
	fx_value_type(&fx, "off_cpu", "nanoseconds");
	f[0] = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	f[1] = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_STATE, "[off-cpu: futex]");
	f[2] = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_STATE, "[running]");
	k = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_KERNEL, "futex_wait");
	st = fx_stack(&fx, 3, (uint32_t[]){f[1], f[0], k});
	sr = fx_stack(&fx, 2, (uint32_t[]){f[2], f[0]});
	fx_sample_values(&fx, sr, 10, 10, 2, run);
	fx_sample_values(&fx, st, 10, 11, 2, off);
	fx_sample_values(&fx, sr, 10, 11, 2, both);
	p = roundtrip(&fx);
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ_I(profile_add_wall(p, false, &wi), 0);
	CHECK_EQ_U(wi, 2);
	CHECK_EQ_U(p->n_value_types, 3);
	CHECK_STREQ(profile_value_type(p, wi), "wall_time");
	CHECK_STREQ(profile_value_unit(p, wi), "nanoseconds");
	CHECK_EQ_U(p->samples[0]->n_values, 3);
	CHECK_EQ_U(p->samples[0]->values[2], 30000000);
	CHECK_EQ_U(p->samples[1]->values[2], 2500);
	CHECK_EQ_U(p->samples[2]->values[2], 10000100);
	CHECK_EQ_U(profile_value_total(p, wi), 30000000 + 2500 + 10000100);
	/* Once only. */
	CHECK_EQ_I(profile_add_wall(p, false, &again), 0);
	CHECK_EQ_U(again, wi);
	CHECK_EQ_U(p->n_value_types, 3);

	profile_strip_states(p);
	CHECK_EQ_U(p->stacks[st]->n_frames, 2);
	CHECK_EQ_U(p->stacks[st]->frames[0], k); /* leaf first */
	CHECK_EQ_U(p->stacks[st]->frames[1], f[0]);
	CHECK_EQ_U(p->stacks[sr]->n_frames, 1);
	profd__profile__free_unpacked(p, NULL);

	/* No off-CPU column (a daemon without --off-cpu): nothing to add. */
	fx_init_samples(&fx, 10000000);
	sr = fx_stack(&fx, 1, (uint32_t[]){fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "m")});
	fx_sample(&fx, sr, 10, 4);
	p = roundtrip(&fx);
	CHECK(p != NULL);
	if (p) {
		CHECK_EQ_I(profile_add_wall(p, false, &wi), -ENODATA);
		CHECK_EQ_U(p->n_value_types, 1);
		profd__profile__free_unpacked(p, NULL);
	}

	/* CPU samples without a period cannot be turned into time. */
	fx_init_samples(&fx, 0);
	fx_value_type(&fx, "off_cpu", "nanoseconds");
	sr = fx_stack(&fx, 1, (uint32_t[]){fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "m")});
	fx_sample_values(&fx, sr, 10, 10, 2, run);
	p = roundtrip(&fx);
	CHECK(p != NULL);
	if (p) {
		CHECK_EQ_I(profile_add_wall(p, false, &wi), -ENODATA);
		profd__profile__free_unpacked(p, NULL);
	}
}

/* --gpu-idle --value wall: gpu_idle_samples x period + gpu_idle_off_cpu, beside wall_time. */
static void test_gpu_idle_wall(void)
{
	struct fixture fx;
	Profd__Profile *p;
	uint32_t sr, st, m, wi = 99, gi = 99;
	/* samples, gpu_idle_samples, off_cpu, gpu_idle_off_cpu */
	const uint64_t a[] = {4, 1, 0, 0}, b[] = {0, 0, 9000, 6000};

	fx_init_samples(&fx, 1000000); /* 1 kHz */
	fx_value_type(&fx, "gpu_idle_samples", "count");
	fx_value_type(&fx, "off_cpu", "nanoseconds");
	fx_value_type(&fx, "gpu_idle_off_cpu", "nanoseconds");
	m = fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "main");
	sr = fx_stack(&fx, 1, (uint32_t[]){m});
	st = fx_stack(&fx, 2, (uint32_t[]){fx_frame(&fx, PROFD__FRAME_KIND__FRAME_KERNEL, "f"), m});
	fx_sample_values(&fx, sr, 10, 10, 4, a);
	fx_sample_values(&fx, st, 10, 10, 4, b);
	p = roundtrip(&fx);
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ_I(profile_add_wall(p, true, &gi), 0);
	CHECK_EQ_U(gi, 4);
	CHECK_STREQ(profile_value_type(p, gi), "gpu_idle_wall_time");
	CHECK_STREQ(profile_value_unit(p, gi), "nanoseconds");
	CHECK_EQ_U(p->samples[0]->values[gi], 1000000);
	CHECK_EQ_U(p->samples[1]->values[gi], 6000);
	/* The plain one beside it, from the plain columns. */
	CHECK_EQ_I(profile_add_wall(p, false, &wi), 0);
	CHECK_EQ_U(wi, 5);
	CHECK_EQ_U(p->samples[0]->values[wi], 4000000);
	CHECK_EQ_U(p->samples[1]->values[wi], 9000);
	CHECK_EQ_I(profile_add_wall(p, true, &wi), 0);
	CHECK_EQ_U(wi, gi);
	profd__profile__free_unpacked(p, NULL);

	/* A daemon that sends no gpu_idle_off_cpu: nothing to add. */
	fx_init_samples(&fx, 1000000);
	fx_value_type(&fx, "gpu_idle_samples", "count");
	fx_value_type(&fx, "off_cpu", "nanoseconds");
	sr = fx_stack(&fx, 1, (uint32_t[]){fx_frame(&fx, PROFD__FRAME_KIND__FRAME_NATIVE, "m")});
	fx_sample_values(&fx, sr, 10, 10, 3, a);
	p = roundtrip(&fx);
	CHECK(p != NULL);
	if (p) {
		CHECK_EQ_I(profile_add_wall(p, true, &gi), -ENODATA);
		profd__profile__free_unpacked(p, NULL);
	}
}

/* --gpu-idle goes with cpu, off-cpu and wall only. */
static void test_gpu_idle_kinds(void)
{
	enum value_kind k = VALUE__COUNT;

	CHECK_EQ_I(value_gpu_idle(VALUE_CPU, &k), 0);
	CHECK_EQ_I(k, VALUE_GPU_IDLE);
	CHECK_EQ_I(value_gpu_idle(VALUE_OFFCPU, &k), 0);
	CHECK_EQ_I(k, VALUE_GPU_IDLE_OFFCPU);
	CHECK_STREQ(value_column_name(k), "gpu_idle_off_cpu");
	CHECK_EQ_I(value_gpu_idle(VALUE_WALL, &k), 0);
	CHECK_EQ_I(k, VALUE_GPU_IDLE_WALL);
	CHECK_STREQ(value_column_name(k), "gpu_idle_wall_time");
	CHECK_EQ_I(value_gpu_idle(VALUE_GPU, &k), -EINVAL);
	CHECK_EQ_I(value_gpu_idle(VALUE_COPY_BYTES, &k), -EINVAL);
	/* Not spellable with --value. */
	CHECK_EQ_I(value_parse("gpu-idle wall", &k), -EINVAL);
	CHECK_EQ_I(value_parse("gpu-idle", &k), -EINVAL);
}

int main(void)
{
	test_wall();
	test_gpu_idle_wall();
	test_gpu_idle_kinds();
	return CHECK_DONE();
}
