// SPDX-License-Identifier: BSD-2-Clause
/*
 * The timeline's two rings: CPU samples kept compact beside the other events, read back whole,
 * and the byte bound dropping the oldest events of either ring first.
 */
#include "check.h"
#include "timeline.h"

#include <string.h>

static struct tl_event sample(uint64_t ts, uint32_t stack)
{
	return (struct tl_event){.type = TL_SAMPLE,
				 .pid = 10,
				 .tid = 11,
				 .uid = 1000,
				 .stack = stack,
				 .start = ts,
				 .end = ts};
}

static struct tl_event kernel(uint64_t start, const char *name)
{
	return (struct tl_event){.type = TL_KERNEL,
				 .pid = 10,
				 .corr = 7,
				 .device = 1,
				 .stream = 2,
				 .start = start,
				 .end = start + 5,
				 .grid = 64,
				 .block = 128,
				 .name = name};
}

/* Both kinds read back with every field; samples cost 24 bytes, other events their slot. */
static void test_read_back(void)
{
	struct timeline *t = timeline__new(&(struct timeline_opts){.bytes = 1 << 20});
	struct timeline_stats st;
	struct tl_event e, k = kernel(200, "gemm"), s = sample(100, 3);

	CHECK(t != NULL);
	if (!t)
		return;
	CHECK_EQ_I(timeline__push(t, &s), 0);
	CHECK_EQ_I(timeline__push(t, &k), 0);
	s = sample(300, 4);
	CHECK_EQ_I(timeline__push(t, &s), 0);
	CHECK_EQ_U(timeline__count(t), 3);
	/* The events' ring first, then the samples, each in arrival order. */
	CHECK(timeline__get(t, 0, &e));
	CHECK_EQ_I(e.type, TL_KERNEL);
	CHECK_STREQ(e.name, "gemm");
	CHECK(e.name != k.name); /* the timeline's own copy */
	CHECK_EQ_U(e.start, 200);
	CHECK_EQ_U(e.end, 205);
	CHECK_EQ_U(e.grid, 64);
	CHECK_EQ_U(e.block, 128);
	CHECK_EQ_U(e.corr, 7);
	CHECK(timeline__get(t, 1, &e));
	CHECK_EQ_I(e.type, TL_SAMPLE);
	CHECK_EQ_U(e.start, 100);
	CHECK_EQ_U(e.end, 100);
	CHECK_EQ_U(e.pid, 10);
	CHECK_EQ_U(e.tid, 11);
	CHECK_EQ_U(e.uid, 1000);
	CHECK_EQ_U(e.stack, 3);
	CHECK(e.name == NULL);
	CHECK(timeline__get(t, 2, &e));
	CHECK_EQ_U(e.start, 300);
	CHECK_EQ_U(e.stack, 4);
	CHECK(!timeline__get(t, 3, &e));
	timeline__stats(t, &st);
	CHECK_EQ_U(st.events, 3);
	CHECK_EQ_U(st.overwritten, 0);
	/* Two samples at 24 bytes, one event's slot, and the name once. */
	CHECK(st.bytes > 2 * 24 + sizeof(struct tl_event));
	CHECK(st.bytes < 2 * 24 + sizeof(struct tl_event) + 128);
	timeline__free(t);
}

/*
 * Pushed in time order, samples and kernels interleaved: whatever ring the next drop comes from,
 * what stays is always the newest pushes, and the bound holds.
 */
static void test_oldest_first(void)
{
	const size_t limit = 16 << 10, n = 4000;
	struct timeline *t = timeline__new(&(struct timeline_opts){.bytes = limit});
	struct timeline_stats st;
	uint64_t oldest = UINT64_MAX, newest = 0;
	size_t kernels = 0;
	struct tl_event e;

	CHECK(t != NULL);
	if (!t)
		return;
	for (uint64_t i = 1; i <= n; i++) {
		/* One kernel per four samples, its name from a small set. */
		struct tl_event ev = i % 5 == 0 ? kernel(i, i % 10 ? "k_a" : "k_b") : sample(i, 1);

		CHECK_EQ_I(timeline__push(t, &ev), 0);
	}
	timeline__stats(t, &st);
	CHECK(st.overwritten > 0);
	CHECK_EQ_U(st.events + st.overwritten, n);
	CHECK(st.bytes <= limit);
	for (size_t i = 0; i < timeline__count(t); i++) {
		CHECK(timeline__get(t, i, &e));
		if (e.start < oldest)
			oldest = e.start;
		if (e.start > newest)
			newest = e.start;
		kernels += e.type == TL_KERNEL;
	}
	/* Exactly the newest st.events pushes are left, from both rings. */
	CHECK_EQ_U(newest, n);
	CHECK_EQ_U(oldest, st.overwritten + 1);
	CHECK(kernels > 0 && kernels < st.events);
	timeline__free(t);
}

int main(void)
{
	test_read_back();
	test_oldest_first();
	return CHECK_DONE();
}
