// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl diff: folded and pprof inputs (good files and every kind of bad line), the merged
 * table and its two-column folded output, the colours of the differential SVG, the windows.
 */
#define _GNU_SOURCE /* open_memstream */
#include "check.h"
#include "cmd_diff.h"
#include "diff.h"
#include "format.h"
#include "stacks.h"

#include <errno.h>
#include <unistd.h>
#include <zlib.h>

#include "profile.pb-c.h"

static char err[512];

/* The stacks of s as "STACK COUNT\n" lines, for exact comparison. */
static char *dump_stacks(const struct stacks *s)
{
	const struct stack_count *v;
	char *buf = NULL;
	size_t len = 0, n;
	FILE *f = open_memstream(&buf, &len);

	v = stacks__items(s, &n);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s %llu\n", v[i].stack, (unsigned long long)v[i].count);
	fclose(f);
	return buf;
}

static struct stacks *folded(const char *text)
{
	err[0] = '\0';
	return stacks__from_folded("in.folded", text, strlen(text), err, sizeof(err));
}

static void test_folded_good(void)
{
	struct stacks *s;
	char *out;

	/* Duplicates sum, CRLF and empty lines are fine, a last line may lack its newline. */
	s = folded("main;run;work_b;spin_b 25\r\n"
		   "\n"
		   "main;run;work_a;spin_a 70\n"
		   "[unknown] (libc.so.6+0x29d90);start (train.py:42) 3\n"
		   "main;run;work_a;spin_a 5\n"
		   "main;zero 0");
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_U(stacks__total(s), 103);
	out = dump_stacks(s);
	CHECK_STREQ(out, "[unknown] (libc.so.6+0x29d90);start (train.py:42) 3\n"
			 "main;run;work_a;spin_a 75\n"
			 "main;run;work_b;spin_b 25\n"
			 "main;zero 0\n");
	free(out);
	stacks__free(s);

	s = folded("");
	CHECK(s != NULL);
	if (s)
		CHECK_EQ_U(stacks__total(s), 0);
	stacks__free(s);
}

static void check_bad(const char *text, int want_errno, const char *want)
{
	struct stacks *s;

	errno = 0;
	s = stacks__from_folded("in.folded", text, strlen(text), err, sizeof(err));
	CHECK(s == NULL);
	CHECK_EQ_I(errno, want_errno);
	CHECK_STREQ(err, want);
	stacks__free(s);
}

static void test_folded_bad(void)
{
	char *deep;
	size_t n = 0;

	check_bad("main;a\n", EINVAL,
		  "in.folded:1: no sample count at the end (expected 'STACK COUNT')");
	check_bad("main;a 5 \n", EINVAL,
		  "in.folded:1: no sample count at the end (expected 'STACK COUNT')");
	check_bad("ok 1\nmain;a x\n", EINVAL,
		  "in.folded:2: sample count 'x' is not a whole number");
	check_bad("main;a -5\n", EINVAL, "in.folded:1: sample count '-5' is not a whole number");
	check_bad("main;a 1.5\n", EINVAL, "in.folded:1: sample count '1.5' is not a whole number");
	check_bad("main;a 99999999999999999999\n", EINVAL,
		  "in.folded:1: sample count '99999999999999999999' is too large");
	check_bad("main;a 123456789012345678901234567890\n", EINVAL,
		  "in.folded:1: sample count '12345678901234567890...' is too long");
	check_bad(" 5\n", EINVAL, "in.folded:1: no stack before the count");
	check_bad("main;a  5\n", EINVAL, "in.folded:1: more than one space before the count");
	check_bad("\n\nmain;;a 5\n", EINVAL, "in.folded:3: frame 2 is empty");
	check_bad(";a 5\n", EINVAL, "in.folded:1: frame 1 is empty");
	check_bad("main;a; 5\n", EINVAL, "in.folded:1: frame 3 is empty");
	check_bad("main;a\tb 5\n", EINVAL, "in.folded:1: control character 0x09 in column 7");
	check_bad("main;a 3 4\n", EINVAL,
		  "in.folded:1: two counts at the end: this is diff output ('STACK A B'), not a "
		  "profile");
	check_bad("a 18446744073709551615\nb 1\n", EOVERFLOW,
		  "in.folded: sample counts add up past 2^64");

	/* A NUL byte: binary data, whatever the lines look like. */
	errno = 0;
	CHECK(stacks__from_folded("in.folded", "a 1\n\0b 2\n", 9, err, sizeof(err)) == NULL);
	CHECK_EQ_I(errno, EINVAL);
	CHECK_STREQ(err,
		    "in.folded: binary data: neither folded stacks nor a gzip-compressed pprof "
		    "profile");

	/* DIFF_MAX_DEPTH frames pass, one more fails. */
	deep = malloc(2 * (DIFF_MAX_DEPTH + 1) + 8);
	for (int i = 0; i < DIFF_MAX_DEPTH; i++) {
		deep[n++] = 'f';
		deep[n++] = ';';
	}
	memcpy(deep + n - 1, " 1", 3);
	{
		struct stacks *s = folded(deep);

		CHECK(s != NULL);
		stacks__free(s);
	}
	memcpy(deep + n - 1, ";f 1", 5);
	check_bad(deep, EINVAL, "in.folded:1: more than 4096 frames");
	free(deep);
}

/* gzip data into a malloc'd buffer. */
static uint8_t *gzip(const uint8_t *in, size_t len, size_t *out_len)
{
	z_stream z = {0};
	size_t cap = len + 1024;
	uint8_t *out = malloc(cap);

	deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	CHECK_EQ_I(deflate(&z, Z_FINISH), Z_STREAM_END);
	*out_len = z.total_out;
	deflateEnd(&z);
	return out;
}

/*
 * A small pprof profile as Go and profctl write them:
 *   strings, two sample types (samples/count, cpu/nanoseconds; the default is cpu),
 *   mappings: 1 /app/bin (0x400000), 2 [kernel.kallsyms], 3 /usr/lib/libfoo.so (0x7f0000000000)
 *   functions: 1 main, 2 run, 3 helper (inlined into run), 4 step (train.py), 5 schedule,
 *              6 "a;b" (a name with the separator)
 *   locations: 1 main, 2 run+helper inlined, 3 step line 42, 4 schedule (kernel),
 *              5 unsymbolized in libfoo at 0x7f0000001a2b, 6 "a;b", 7 no mapping, no address
 *   samples (leaf first): [2,1] 3/30, [4,2,1] 2/20, [3,1] 4/40, [5,1] 1/10, [6] 5/50, [1] 0/0,
 *                         [7,1] 2/20
 */
static uint8_t *make_pprof(size_t *len, bool break_location)
{
	static char *strs[] = {"",
			       "samples",
			       "count",
			       "cpu",
			       "nanoseconds",
			       "main",
			       "run",
			       "helper",
			       "step",
			       "/app/train.py",
			       "schedule",
			       "[kernel.kallsyms]",
			       "/app/bin",
			       "/usr/lib/libfoo.so",
			       "a;b"};
	Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType vt[2], *vtp[2];
	Perftools__Profiles__Mapping m[3], *mp[3];
	Perftools__Profiles__Function fn[6], *fnp[6];
	Perftools__Profiles__Location loc[7], *locp[7];
	Perftools__Profiles__Line ln[7], *lnp[7];
	Perftools__Profiles__Sample smp[7], *smpp[7];
	static const int64_t fn_names[6] = {5, 6, 7, 8, 10, 14};
	static uint64_t stacks[7][3] = {{2, 1}, {4, 2, 1}, {3, 1}, {5, 1}, {6}, {1}, {7, 1}};
	static const size_t depth[7] = {2, 3, 2, 2, 1, 1, 2};
	static int64_t vals[7][2] = {{3, 30}, {2, 20}, {4, 40}, {1, 10}, {5, 50}, {0, 0}, {2, 20}};
	uint8_t *raw, *gz;
	size_t raw_len;

	p.string_table = strs;
	p.n_string_table = sizeof(strs) / sizeof(strs[0]);
	for (int i = 0; i < 2; i++) {
		perftools__profiles__value_type__init(&vt[i]);
		vt[i].type = i ? 3 : 1;
		vt[i].unit = i ? 4 : 2;
		vtp[i] = &vt[i];
	}
	p.sample_type = vtp;
	p.n_sample_type = 2;
	p.default_sample_type = 3;
	for (int i = 0; i < 3; i++) {
		perftools__profiles__mapping__init(&m[i]);
		m[i].id = (uint64_t)i + 1;
		mp[i] = &m[i];
	}
	m[0].filename = 12;
	m[0].memory_start = 0x400000;
	m[1].filename = 11;
	m[2].filename = 13;
	m[2].memory_start = 0x7f0000000000ull;
	p.mapping = mp;
	p.n_mapping = 3;
	for (int i = 0; i < 6; i++) {
		perftools__profiles__function__init(&fn[i]);
		fn[i].id = (uint64_t)i + 1;
		fn[i].name = fn_names[i];
		fnp[i] = &fn[i];
	}
	fn[3].filename = 9;
	p.function = fnp;
	p.n_function = 6;
	for (int i = 0; i < 7; i++) {
		perftools__profiles__line__init(&ln[i]);
		lnp[i] = &ln[i];
	}
	for (int i = 0; i < 7; i++) {
		perftools__profiles__location__init(&loc[i]);
		loc[i].id = (uint64_t)i + 1;
		loc[i].mapping_id = 1;
		locp[i] = &loc[i];
	}
	/* main */
	ln[0].function_id = 1;
	loc[0].line = &lnp[0];
	loc[0].n_line = 1;
	/* helper inlined into run: the inlined function first, its caller last */
	ln[1].function_id = 3;
	ln[2].function_id = 2;
	loc[1].line = &lnp[1];
	loc[1].n_line = 2;
	/* step (train.py:42) */
	ln[3].function_id = 4;
	ln[3].line = 42;
	loc[2].line = &lnp[3];
	loc[2].n_line = 1;
	loc[2].mapping_id = 0;
	/* schedule in the kernel */
	ln[4].function_id = 5;
	loc[3].line = &lnp[4];
	loc[3].n_line = 1;
	loc[3].mapping_id = 2;
	/* no symbol, in libfoo */
	loc[4].mapping_id = 3;
	loc[4].address = 0x7f0000001a2bull;
	/* a name with ';' */
	ln[5].function_id = break_location ? 99 : 6;
	loc[5].line = &lnp[5];
	loc[5].n_line = 1;
	/* no mapping and address 0: profd's folded output names it a bare "[unknown]" */
	loc[6].mapping_id = 0;
	p.location = locp;
	p.n_location = 7;
	for (int i = 0; i < 7; i++) {
		perftools__profiles__sample__init(&smp[i]);
		smp[i].location_id = stacks[i];
		smp[i].n_location_id = depth[i];
		smp[i].value = vals[i];
		smp[i].n_value = 2;
		smpp[i] = &smp[i];
	}
	p.sample = smpp;
	p.n_sample = 7;

	raw_len = perftools__profiles__profile__get_packed_size(&p);
	raw = malloc(raw_len);
	perftools__profiles__profile__pack(&p, raw);
	gz = gzip(raw, raw_len, len);
	free(raw);
	return gz;
}

static void test_pprof(void)
{
	struct stacks *s;
	uint8_t *gz;
	size_t len;
	char *out;

	gz = make_pprof(&len, false);
	s = stacks__from_pprof("in.pb.gz", gz, len, err, sizeof(err));
	CHECK(s != NULL);
	if (!s) {
		fprintf(stderr, "pprof: %s\n", err);
		free(gz);
		return;
	}
	/* The "samples" column, not the default cpu one: counts compare with folded files. */
	CHECK_EQ_U(stacks__total(s), 17);
	out = dump_stacks(s);
	CHECK_STREQ(out, "a_b 5\n"
			 "main;[unknown] 2\n"
			 "main;[unknown] (libfoo.so+0x1a2b) 1\n"
			 "main;run;helper 3\n"
			 "main;run;helper;schedule_[k] 2\n"
			 "main;step (train.py:42) 4\n");
	free(out);
	stacks__free(s);

	/* The same bytes through the file reader: gzip magic means pprof. */
	{
		char path[] = "/tmp/test_diff_pprof_XXXXXX";
		int fd = mkstemp(path);

		CHECK(fd >= 0);
		CHECK_EQ_I(write(fd, gz, len), (long long)len);
		close(fd);
		s = stacks__read_file(path, err, sizeof(err));
		CHECK(s != NULL);
		if (s)
			CHECK_EQ_U(stacks__total(s), 17);
		stacks__free(s);
		unlink(path);
	}

	/* Cut short, and not a profile inside the gzip, and a dangling function id. */
	errno = 0;
	CHECK(stacks__from_pprof("in.pb.gz", gz, len - 10, err, sizeof(err)) == NULL);
	CHECK_EQ_I(errno, EINVAL);
	CHECK_STREQ(err, "in.pb.gz: the gzip stream is cut short");
	free(gz);
	{
		static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
		size_t gl;
		uint8_t *g = gzip(junk, sizeof(junk), &gl);

		errno = 0;
		CHECK(stacks__from_pprof("in.pb.gz", g, gl, err, sizeof(err)) == NULL);
		CHECK_EQ_I(errno, EINVAL);
		CHECK_STREQ(err, "in.pb.gz: gzip data that is not a pprof profile");
		free(g);
	}
	gz = make_pprof(&len, true);
	errno = 0;
	CHECK(stacks__from_pprof("in.pb.gz", gz, len, err, sizeof(err)) == NULL);
	CHECK_EQ_I(errno, ENOENT);
	CHECK_STREQ(err,
		    "in.pb.gz: sample 4: names a location, function or mapping not in the profile");
	free(gz);
}

static char *render_folded(const struct diff *d)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK_EQ_I(diff__write_folded(d, f), 0);
	fclose(f);
	return buf;
}

static char *render_svg(const struct diff *d)
{
	struct diff_svg_opts o = {.name_a = "a<1>.folded", .name_b = "b.folded"};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK_EQ_I(format_svg_diff(d, &o, f), 0);
	fclose(f);
	return buf;
}

static void test_diff_folded(void)
{
	struct stacks *a = folded("main;x 5\nmain;y 3\nmain;gone 2\n");
	struct stacks *b = folded("main;y 4\nmain;new 1\nmain;x 5\n");
	struct diff *d;
	char *out;

	CHECK(a && b);
	if (!a || !b)
		goto out;
	d = diff__new(a, b);
	CHECK(d != NULL);
	if (!d)
		goto out;
	CHECK_EQ_U(diff__total_a(d), 10);
	CHECK_EQ_U(diff__total_b(d), 10);
	out = render_folded(d);
	CHECK_STREQ(out, "main;gone 2 0\n"
			 "main;new 0 1\n"
			 "main;x 5 5\n"
			 "main;y 3 4\n");
	free(out);
	diff__free(d);
out:
	stacks__free(a);
	stacks__free(b);
}

/* The fill of the frame whose tooltip starts with title; 0 when found. */
static int fill_of(const char *svg, const char *title, int rgb[3])
{
	const char *t = strstr(svg, title), *f;

	if (!t)
		return -1;
	f = strstr(t, "fill=\"rgb(");
	if (!f || sscanf(f, "fill=\"rgb(%d,%d,%d)\"", &rgb[0], &rgb[1], &rgb[2]) != 3)
		return -1;
	return 0;
}

/* Set when a check could not run: the test then ends in CHECK_SKIP, never a pass. */
static const char *skipped;

static int xmllint_ok(const char *text)
{
	char path[] = "/tmp/test_diff_svg_XXXXXX", cmd[128];
	int fd = mkstemp(path), rc;
	FILE *f;

	if (fd < 0)
		return 0;
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	if (system("command -v xmllint >/dev/null 2>&1") != 0) {
		skipped = "xmllint not installed: the diff SVG was not validated as XML";
		unlink(path);
		return 1;
	}
	snprintf(cmd, sizeof(cmd), "xmllint --noout %s", path);
	rc = system(cmd);
	unlink(path);
	return rc == 0;
}

static void test_diff_svg(void)
{
	/* grow: 10% -> 90%, shrink: 75% -> 10%; gone is only in A; main keeps 100%. */
	struct stacks *a = folded("main;grow 1\nmain;shrink 9\nmain;gone 2\n");
	struct stacks *b = folded("main;grow 9\nmain;shrink 1\n");
	struct diff *d = NULL;
	int rgb[3];
	char *svg;

	CHECK(a && b);
	if (!a || !b)
		goto out;
	d = diff__new(a, b);
	svg = d ? render_svg(d) : NULL;
	CHECK(svg != NULL);
	if (!svg)
		goto out;
	CHECK(xmllint_ok(svg));
	/* Growth: red. The largest change gets the full colour. */
	CHECK_EQ_I(fill_of(svg, "<title>grow (", rgb), 0);
	CHECK(rgb[0] > rgb[2] && rgb[0] > rgb[1]);
	CHECK(rgb[0] == 255 && rgb[1] == 40 && rgb[2] == 40);
	/* Shrinkage: blue, weaker (0.65 of a 0.82 change). */
	CHECK_EQ_I(fill_of(svg, "<title>shrink (", rgb), 0);
	CHECK(rgb[2] > rgb[0] && rgb[2] > rgb[1]);
	CHECK(rgb[0] == 80 && rgb[1] == 80 && rgb[2] == 251);
	/* No change: grey. */
	CHECK_EQ_I(fill_of(svg, "<title>main (", rgb), 0);
	CHECK(rgb[0] == 235 && rgb[1] == 235 && rgb[2] == 235);
	CHECK(strstr(svg, "<title>grow (A: 1 samples, 8.33%; B: 9 samples, 90.00%; +81.67 "
			  "points)</title>") != NULL);
	CHECK(strstr(svg, "<title>shrink (A: 9 samples, 75.00%; B: 1 samples, 10.00%; -65.00 "
			  "points)</title>") != NULL);
	/* Widths from B: grow has 9 of B's 10 samples. */
	CHECK(strstr(svg, "<title>grow (") &&
	      strstr(strstr(svg, "<title>grow ("), "width=\"1062.00\""));
	/* Frames only in A are not drawn; the legend counts them. */
	CHECK(strstr(svg, "<title>gone (") == NULL);
	CHECK(strstr(svg, "Not drawn: frames only in A (2 of 12 samples of A).") != NULL);
	CHECK(strstr(svg, ">A: a&lt;1&gt;.folded, 12 samples; B: b.folded, 10 samples<") != NULL);
	CHECK(strstr(svg, "TOTAL = 10;") != NULL);
	free(svg);
out:
	diff__free(d);
	stacks__free(a);
	stacks__free(b);
}

/*
 * Stacks whose frames sort differently from the whole lines ("a-x" < "a;..." bytewise) still
 * merge into one node per path.
 */
static void test_diff_tree_order(void)
{
	struct stacks *a = folded("a 1\na-x;y 1\na;b 1\n");
	struct stacks *b = folded("a 2\na-x;y 2\na;b 2\na;c 1\n");
	struct diff *d = NULL;
	char *svg = NULL;
	size_t n = 0;

	CHECK(a && b);
	if (!a || !b)
		goto out;
	d = diff__new(a, b);
	svg = d ? render_svg(d) : NULL;
	CHECK(svg != NULL);
	if (!svg)
		goto out;
	for (const char *p = svg; (p = strstr(p, "<title>a (")); p++)
		n++;
	CHECK_EQ_U(n, 1);
	CHECK(strstr(svg, "<title>a (A: 2 samples, 66.67%; B: 5 samples, 71.43%;") != NULL);
	CHECK(strstr(svg, "<title>all (A: 3 samples, 100.00%; B: 7 samples, 100.00%; +0.00 "
			  "points)</title>") != NULL);
out:
	free(svg);
	diff__free(d);
	stacks__free(a);
	stacks__free(b);
}

static void test_windows(void)
{
	struct diff_window w;

	CHECK_EQ_I(diff_parse_window("10m..5m", &w), 0);
	CHECK_EQ_U(w.from_ns, 600000000000ull);
	CHECK_EQ_U(w.to_ns, 300000000000ull);
	CHECK_EQ_I(diff_parse_window("5m..now", &w), 0);
	CHECK_EQ_U(w.from_ns, 300000000000ull);
	CHECK_EQ_U(w.to_ns, 0);
	CHECK_EQ_I(diff_parse_window("90s", &w), 0);
	CHECK_EQ_U(w.from_ns, 90000000000ull);
	CHECK_EQ_U(w.to_ns, 0);
	CHECK_EQ_I(diff_parse_window("5m..10m", &w), -ERANGE);
	CHECK_EQ_I(diff_parse_window("now..5m", &w), -ERANGE);
	CHECK_EQ_I(diff_parse_window("5m..5m", &w), -ERANGE);
	CHECK_EQ_I(diff_parse_window("now", &w), -ERANGE);
	CHECK_EQ_I(diff_parse_window("400d..1d", &w), -ERANGE);
	CHECK_EQ_I(diff_parse_window("..5m", &w), -EINVAL);
	CHECK_EQ_I(diff_parse_window("5m..", &w), -EINVAL);
	CHECK_EQ_I(diff_parse_window("x..5m", &w), -EINVAL);
	CHECK_EQ_I(diff_parse_window("10m..5m..1m", &w), -EINVAL);
}

static int parse(struct diff_args *a, struct cli_error *e, int argc, ...)
{
	static char *argv[16];
	va_list ap;

	va_start(ap, argc);
	argv[0] = "diff";
	for (int i = 1; i < argc; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	argv[argc] = NULL;
	e->msg[0] = '\0';
	return diff_parse_args(argc, argv, a, e);
}

static void test_args(void)
{
	struct diff_args a;
	struct cli_error e;

	CHECK_EQ_I(parse(&a, &e, 5, "old.folded", "-o", "d.svg", "new.pb.gz"), 0);
	CHECK_EQ_U(a.n_files, 2);
	CHECK_STREQ(a.files[0], "old.folded");
	CHECK_STREQ(a.files[1], "new.pb.gz");
	CHECK_EQ_I(a.format, DUMP_FORMAT_SVG);
	CHECK(!a.windows);

	CHECK_EQ_I(parse(&a, &e, 7, "--pid", "42", "--before", "10m..5m", "--after", "5m"), 0);
	CHECK(a.windows);
	CHECK_EQ_U(a.n_pids, 1);
	CHECK_EQ_U(a.before.from_ns, 600000000000ull);
	CHECK_EQ_U(a.after.to_ns, 0);
	CHECK_EQ_I(a.format, DUMP_FORMAT_FOLDED);

	CHECK_EQ_I(parse(&a, &e, 4, "a", "--before", "1m"), -EINVAL);
	CHECK_STREQ(e.msg, "diff: give two files or --before and --after, not both; see 'profctl "
			   "diff --help'");
	CHECK_EQ_I(parse(&a, &e, 3, "--after", "1m"), -EINVAL);
	CHECK_STREQ(e.msg, "diff: --after needs --before too; see 'profctl diff --help'");
	CHECK_EQ_I(parse(&a, &e, 2, "a"), -EINVAL);
	CHECK_STREQ(e.msg, "diff: give two profiles to compare (A B), or --before and --after; "
			   "see 'profctl diff --help'");
	CHECK_EQ_I(parse(&a, &e, 4, "a", "b", "c"), -EINVAL);
	CHECK_STREQ(e.msg, "diff: unexpected argument 'c': give two profiles, A and B; see "
			   "'profctl diff --help'");
	CHECK_EQ_I(parse(&a, &e, 5, "--before", "5m..10m", "--after", "1m"), -EINVAL);
	CHECK_EQ_I(e.code, PROFCTL_EXIT_USAGE);
	CHECK_STREQ(e.msg, "diff: --before '5m..10m' is empty or reversed, or reaches back more "
			   "than 365d (write the older point first, like 10m..5m); see 'profctl "
			   "diff --help'");
	CHECK_EQ_I(parse(&a, &e, 3, "-", "-"), -EINVAL);
	CHECK_EQ_I(parse(&a, &e, 5, "a", "b", "--format", "png"), -EINVAL);
	CHECK_STREQ(e.msg, "diff: --format 'png' is not svg or folded; see 'profctl diff --help'");
}

int main(void)
{
	test_folded_good();
	test_folded_bad();
	test_pprof();
	test_diff_folded();
	test_diff_svg();
	test_diff_tree_order();
	test_windows();
	test_args();
	return skipped ? CHECK_SKIP(skipped) : CHECK_DONE();
}
