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
	CHECK_EQ_I(profile_add_wall(p, &wi), 0);
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
	CHECK_EQ_I(profile_add_wall(p, &again), 0);
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
		CHECK_EQ_I(profile_add_wall(p, &wi), -ENODATA);
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
		CHECK_EQ_I(profile_add_wall(p, &wi), -ENODATA);
		profd__profile__free_unpacked(p, NULL);
	}
}

int main(void)
{
	test_wall();
	return CHECK_DONE();
}
