// SPDX-License-Identifier: BSD-2-Clause
/*
 * A flame graph as one SVG file that works offline: rects and labels drawn here, a small script
 * inside the file for hover details, click to zoom and regex search.
 */
#include "diff.h"
#include "format.h"
#include "grow.h"
#include "flame.h"
#include "value.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SVG_WIDTH 1200
#define SVG_XPAD 10
#define SVG_TOP 70    /* title, subtitle, controls */
#define SVG_BOTTOM 34 /* details line */
#define FRAME_H 16
#define FONT_PX 11
#define CHAR_W (FONT_PX * 0.6) /* monospace advance, so labels can be cut to fit */
#define MIN_WIDTH_PX 0.1       /* narrower frames are left out, as they cannot be seen */

/* Decode one UTF-8 sequence at s; returns its length in bytes, 0 if it is not valid XML text. */
static size_t utf8_seq(const unsigned char *s)
{
	unsigned char c = s[0];

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return 0;
		if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f))
			return 0; /* overlong, surrogate */
		if (c == 0xef && s[1] == 0xbf && (s[2] == 0xbe || s[2] == 0xbf))
			return 0; /* U+FFFE, U+FFFF are not XML characters */
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
			return 0;
		if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
			return 0;
		return 4;
	}
	return 0;
}

/* Characters in s, an invalid byte counting as one (it is written as U+FFFD). */
static size_t text_chars(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = 0;

	while (*p) {
		size_t k = utf8_seq(p);

		p += k ? k : 1;
		n++;
	}
	return n;
}

/*
 * Write at most max characters of s as XML character data: markup characters as entities,
 * control characters as '?', bytes that are not UTF-8 as U+FFFD, so any name gives valid XML.
 */
static void put_text(FILE *out, const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t n = 0; *p && n < max; n++) {
		size_t k = utf8_seq(p);

		if (!k) {
			fputs("\xef\xbf\xbd", out);
			p++;
			continue;
		}
		if (k > 1) {
			fwrite(p, 1, k, out);
		} else if (*p == '&') {
			fputs("&amp;", out);
		} else if (*p == '<') {
			fputs("&lt;", out);
		} else if (*p == '>') {
			fputs("&gt;", out);
		} else if (*p == '"') {
			fputs("&quot;", out);
		} else if (*p == '\'') {
			fputs("&apos;", out);
		} else if (*p < 0x20) {
			fputc('?', out);
		} else {
			fputc(*p, out);
		}
		p += k;
	}
}

/* The label that fits in w pixels: the name, or its start and "..", or nothing. */
static void put_label(FILE *out, const char *name, double w)
{
	double fit = floor((w - 6) / CHAR_W);
	size_t len;

	if (fit < 3)
		return;
	len = text_chars(name);
	if ((double)len <= fit) {
		put_text(out, name, len);
		return;
	}
	put_text(out, name, (size_t)fit - 2);
	fputs("..", out);
}

static uint32_t hash_name(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* HSL (h in degrees, s and l in [0,1]) to "rgb(r,g,b)". */
static void put_hsl(FILE *out, double h, double s, double l)
{
	double c = (1 - fabs(2 * l - 1)) * s, hp = h / 60, x = c * (1 - fabs(fmod(hp, 2) - 1));
	double r = 0, g = 0, b = 0, m = l - c / 2;

	if (hp < 1)
		r = c, g = x;
	else if (hp < 2)
		r = x, g = c;
	else if (hp < 3)
		g = c, b = x;
	else if (hp < 4)
		g = x, b = c;
	else if (hp < 5)
		r = x, b = c;
	else
		r = c, b = x;
	fprintf(out, "rgb(%d,%d,%d)", (int)lround((r + m) * 255), (int)lround((g + m) * 255),
		(int)lround((b + m) * 255));
}

/* One hue family per kind of frame; within it the name picks the shade, the same every time. */
static void put_colour(FILE *out, const struct flame_node *n)
{
	uint32_t h = hash_name(n->name);
	double a = (h & 0xffff) / 65535.0, b = (h >> 16) / 65535.0;

	switch (n->kind) {
	case FLAME_NATIVE:
		put_hsl(out, 0 + 45 * a, 0.80, 0.55 + 0.10 * b); /* red to orange */
		break;
	case FLAME_KERNEL:
		put_hsl(out, 190 + 25 * a, 0.60, 0.58 + 0.10 * b); /* blue */
		break;
	case FLAME_PYTHON:
		put_hsl(out, 85 + 50 * a, 0.55, 0.50 + 0.10 * b); /* green */
		break;
	case FLAME_GPU:
		put_hsl(out, 265 + 35 * a, 0.55, 0.62 + 0.10 * b); /* purple */
		break;
	case FLAME_NVTX:
		put_hsl(out, 170 + 15 * a, 0.45, 0.60 + 0.10 * b); /* teal */
		break;
	case FLAME_PROCESS:
		put_hsl(out, 45, 0.15, 0.68 + 0.08 * b); /* warm grey */
		break;
	default:
		put_hsl(out, 0, 0, 0.72 + 0.06 * b); /* grey: root, unknown */
		break;
	}
}

static const char svg_script[] =
    "(function () {\n"
    "\"use strict\";\n"
    "var doc = document, root = doc.documentElement, frames = [], searching = null;\n"
    "var details = doc.getElementById(\"details\"), matched = doc.getElementById(\"matched\");\n"
    "var reset = doc.getElementById(\"reset\"), search = doc.getElementById(\"search\");\n"
    "var gs = doc.getElementsByTagName(\"g\");\n"
    "for (var i = 0; i < gs.length; i++) {\n"
    "\tvar g = gs[i];\n"
    "\tif (g.getAttribute(\"class\") !== \"f\") continue;\n"
    "\tvar info = g.getElementsByTagName(\"title\")[0].textContent;\n"
    "\tvar f = { g: g, info: info, name: info.substring(0, info.lastIndexOf(\" (\")),\n"
    "\t\trect: g.getElementsByTagName(\"rect\")[0], text: g.getElementsByTagName(\"text\")[0],\n"
    "\t\ts: +g.getAttribute(\"data-s\"), v: +g.getAttribute(\"data-v\"),\n"
    "\t\td: +g.getAttribute(\"data-d\") };\n"
    "\tf.fill = f.rect.getAttribute(\"fill\");\n"
    "\tg.profdFrame = f;\n"
    "\tframes.push(f);\n"
    "}\n"
    "function label(name, w) {\n"
    "\tvar fit = Math.floor((w - 6) / CW);\n"
    "\tif (fit < 3) return \"\";\n"
    "\treturn name.length <= fit ? name : name.substring(0, fit - 2) + \"..\";\n"
    "}\n"
    "function place(f, x, w) {\n"
    "\tf.rect.setAttribute(\"x\", x.toFixed(2));\n"
    "\tf.rect.setAttribute(\"width\", w.toFixed(2));\n"
    "\tf.text.setAttribute(\"x\", (x + 3).toFixed(2));\n"
    "\tf.text.textContent = label(f.name, w);\n"
    "}\n"
    "function frameOf(e) {\n"
    "\tfor (var n = e.target; n && n !== root; n = n.parentNode)\n"
    "\t\tif (n.profdFrame) return n.profdFrame;\n"
    "\treturn null;\n"
    "}\n"
    "/* Zoom: z fills the width, its ancestors span it dimmed, everything beside it hides. */\n"
    "function zoom(z) {\n"
    "\tvar zs = z ? z.s : 0, zv = z ? z.v : TOTAL, zd = z ? z.d : 0, span = W - 2 * XPAD;\n"
    "\tframes.forEach(function (f) {\n"
    "\t\tvar cls = \"f\";\n"
    "\t\tif (f.d < zd) {\n"
    "\t\t\tif (f.s <= zs && f.s + f.v >= zs + zv) { cls = \"f dim\"; place(f, XPAD, span); }\n"
    "\t\t\telse cls = \"f hide\";\n"
    "\t\t} else if (f.s >= zs && f.s + f.v <= zs + zv && zv > 0) {\n"
    "\t\t\tplace(f, XPAD + (f.s - zs) / zv * span, f.v / zv * span);\n"
    "\t\t} else cls = \"f hide\";\n"
    "\t\tf.g.setAttribute(\"class\", cls);\n"
    "\t});\n"
    "\treset.setAttribute(\"class\", z ? \"btn\" : \"btn hide\");\n"
    "}\n"
    "function clearSearch() {\n"
    "\tframes.forEach(function (f) { f.rect.setAttribute(\"fill\", f.fill); });\n"
    "\tsearching = null;\n"
    "\tmatched.textContent = \" \";\n"
    "\tsearch.textContent = \"Search\";\n"
    "}\n"
    "/* Highlight frames whose name matches; the matched share counts nested matches once. */\n"
    "function doSearch(term) {\n"
    "\tvar re, iv = [], sum = 0, end = -1;\n"
    "\tif (term === null) return;\n"
    "\tif (term === \"\") { clearSearch(); return; }\n"
    "\ttry { re = new RegExp(term); } catch (err) {\n"
    "\t\tmatched.textContent = \"Bad regular expression: \" + err.message; return; }\n"
    "\tframes.forEach(function (f) {\n"
    "\t\tif (re.test(f.name)) {\n"
    "\t\t\tf.rect.setAttribute(\"fill\", \"rgb(230,0,230)\");\n"
    "\t\t\tiv.push([f.s, f.s + f.v]);\n"
    "\t\t} else f.rect.setAttribute(\"fill\", f.fill);\n"
    "\t});\n"
    "\tiv.sort(function (a, b) { return a[0] - b[0]; });\n"
    "\tiv.forEach(function (r) {\n"
    "\t\tif (r[1] <= end) return;\n"
    "\t\tsum += r[1] - Math.max(r[0], end);\n"
    "\t\tend = r[1];\n"
    "\t});\n"
    "\tsearching = term;\n"
    "\tsearch.textContent = \"Reset search\";\n"
    "\tmatched.textContent = \"Matched: \" + (TOTAL ? (100 * sum / TOTAL).toFixed(2) : \"0.00\") "
    "+\n"
    "\t\t\"% of samples for /\" + term + \"/\";\n"
    "}\n"
    "function ask() { doSearch(prompt(\"Search frames (regular expression):\", searching || "
    "\"\")); }\n"
    "root.addEventListener(\"mouseover\", function (e) {\n"
    "\tvar f = frameOf(e); if (f) details.textContent = f.info; });\n"
    "root.addEventListener(\"mouseout\", function (e) {\n"
    "\tif (frameOf(e)) details.textContent = \" \"; });\n"
    "root.addEventListener(\"click\", function (e) {\n"
    "\tvar f = frameOf(e); if (f) zoom(f.d === 0 ? null : f); });\n"
    "reset.addEventListener(\"click\", function () { zoom(null); });\n"
    "search.addEventListener(\"click\", function () { if (searching !== null) clearSearch(); else "
    "ask(); });\n"
    "window.addEventListener(\"keydown\", function (e) {\n"
    "\tif (((e.ctrlKey || e.metaKey) && (e.key === \"f\" || e.key === \"F\")) || e.key === \"F3\") "
    "{\n"
    "\t\te.preventDefault(); ask();\n"
    "\t} else if (e.key === \"Escape\") { zoom(null); clearSearch(); }\n"
    "});\n"
    "/* A search in the address (file.svg?s=TERM or file.svg#s=TERM) runs on load, so a link\n"
    " * can point at the frames it is about. */\n"
    "var q = /[?#&]s=([^&#]*)/.exec(window.location.search + window.location.hash);\n"
    "if (q) { try { doSearch(decodeURIComponent(q[1].replace(/\\+/g, \" \"))); }\n"
    "\tcatch (err) { matched.textContent = \"Bad search in the address\"; } }\n"
    "})();\n";

/* How the chosen column's values read: "12 samples", "3.25 ms", "1.5 MiB". */
struct svg_value {
	const char *type; /* the column's type, "samples" */
	const char *unit; /* its unit, "count" */
};

static void put_amount(FILE *out, const struct svg_value *sv, uint64_t v)
{
	char buf[64];

	if (value_unit_is_ns(sv->unit) || value_unit_is_bytes(sv->unit))
		fputs(fmt_value(v, sv->unit, buf, sizeof(buf)), out);
	else
		fprintf(out, "%" PRIu64 " %s", v, value_noun(sv->type));
}

static void put_subtitle(FILE *out, const Profd__Profile *p, const struct svg_value *sv,
			 uint64_t total)
{
	char dur[48], from[48], to[48];

	put_amount(out, sv, total);
	if (strcmp(sv->type, "samples") != 0)
		fprintf(out, " of %s", sv->type);
	if (p->has_start_ns && p->has_end_ns && p->end_ns > p->start_ns) {
		fprintf(out, " in %s", fmt_duration(p->end_ns - p->start_ns, dur, sizeof(dur)));
		if (p->has_realtime_offset_ns)
			fprintf(out, ", %s to %s",
				fmt_mono_as_wall(p->start_ns, p->realtime_offset_ns, from,
						 sizeof(from)),
				fmt_mono_as_wall(p->end_ns, p->realtime_offset_ns, to, sizeof(to)));
	}
	if (p->has_frequency_hz && p->frequency_hz)
		fprintf(out, ", sampled at %" PRIu32 " Hz", p->frequency_hz);
	if (p->has_samples_lost && p->samples_lost)
		fprintf(out, ", %" PRIu64 " samples lost", p->samples_lost);
}

/* Open frame n's group and its tooltip with the name; the caller writes the rest of it. */
static void frame_begin(FILE *out, const struct flame_node *n, uint64_t start)
{
	fprintf(out,
		"<g class=\"f\" data-s=\"%" PRIu64 "\" data-v=\"%" PRIu64 "\" data-d=\"%" PRIu32
		"\"><title>",
		start, n->value, n->depth);
	put_text(out, n->name, SIZE_MAX);
}

/* Close the tooltip and draw the rect up to its fill, which the caller writes. */
static void frame_rect(FILE *out, double x, int y, double w)
{
	fprintf(out,
		"</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" rx=\"2\" fill=\"",
		x, y, w, FRAME_H - 1);
}

/* End the fill, write the label and close the group. */
static void frame_end(FILE *out, const struct flame_node *n, double x, int y, double w)
{
	fprintf(out, "\"/><text x=\"%.2f\" y=\"%d\">", x + 3, y + FRAME_H - 4);
	put_label(out, n->name, w);
	fputs("</text></g>\n", out);
}

static void put_frame(FILE *out, const struct flame_node *n, uint64_t start, uint64_t total,
		      int height, const struct svg_value *sv)
{
	double span = SVG_WIDTH - 2 * SVG_XPAD;
	double x = SVG_XPAD + (double)start / (double)total * span;
	double w = (double)n->value / (double)total * span;
	int y = height - SVG_BOTTOM - (int)(n->depth + 1) * FRAME_H;

	frame_begin(out, n, start);
	fputs(" (", out);
	put_amount(out, sv, n->value);
	fprintf(out, ", %.2f%%)", 100.0 * (double)n->value / (double)total);
	frame_rect(out, x, y, w);
	put_colour(out, n);
	frame_end(out, n, x, y, w);
}

/* Everything up to the subtitle's text: the document, its style, background and title. */
static void put_head(FILE *out, int height, const char *title)
{
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n", out);
	fprintf(out,
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		"height=\"%d\" viewBox=\"0 0 %d %d\">\n",
		SVG_WIDTH, height, SVG_WIDTH, height);
	fprintf(out,
		"<style type=\"text/css\"><![CDATA[\n"
		"text { font-family: monospace; font-size: %dpx; fill: #000; }\n"
		"g.f { cursor: pointer; }\n"
		"g.f text { pointer-events: none; }\n"
		"g.f:hover rect { stroke: #000; stroke-width: 0.5; }\n"
		".hide { display: none; }\n"
		".dim rect { opacity: 0.55; }\n"
		".btn { cursor: pointer; fill: #226; text-decoration: underline; }\n"
		"#title { font-size: %dpx; text-anchor: middle; }\n"
		"#subtitle { text-anchor: middle; fill: #444; }\n"
		"#matched, #search { text-anchor: end; }\n"
		"]]></style>\n",
		FONT_PX, FONT_PX + 6);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f6f6f0\"/>\n",
		SVG_WIDTH, height);
	fprintf(out, "<text id=\"title\" x=\"%d\" y=\"24\">", SVG_WIDTH / 2);
	put_text(out, title, SIZE_MAX);
	fprintf(out, "</text>\n<text id=\"subtitle\" x=\"%d\" y=\"44\">", SVG_WIDTH / 2);
}

/* After the subtitle's text: the buttons and the lines the script fills in. */
static void put_controls(FILE *out, int height)
{
	fprintf(out, "</text>\n");
	fprintf(out, "<text id=\"reset\" class=\"btn hide\" x=\"%d\" y=\"24\">Reset zoom</text>\n",
		SVG_XPAD);
	fprintf(out, "<text id=\"search\" class=\"btn\" x=\"%d\" y=\"24\">Search</text>\n",
		SVG_WIDTH - SVG_XPAD);
	fprintf(out, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", SVG_XPAD, height - 12);
	fprintf(out, "<text id=\"matched\" x=\"%d\" y=\"%d\"> </text>\n", SVG_WIDTH - SVG_XPAD,
		height - 12);
}

/* The script and the end of the document. Returns 0 or -EIO. */
static int put_tail(FILE *out, uint64_t total)
{
	fprintf(out,
		"<script type=\"text/ecmascript\"><![CDATA[\n"
		"var W = %d, XPAD = %d, CW = %.2f, TOTAL = %" PRIu64 ";\n%s]]></script>\n",
		SVG_WIDTH, SVG_XPAD, CHAR_W, total, svg_script);
	fputs("</svg>\n", out);
	return fflush(out) || ferror(out) ? -EIO : 0;
}

/* Draws node i of nodes starting at sample offset start. */
typedef void (*draw_fn)(FILE *out, const struct flame_node *nodes, uint32_t i, uint64_t start,
			uint64_t total, int height, void *ctx);

/*
 * Every node wide enough to see, depth first from the root; each child starts where its
 * previous sibling ended. Returns 0 or -ENOMEM.
 */
static int put_frames(FILE *out, const struct flame_node *nodes, size_t n_nodes, uint64_t total,
		      int height, draw_fn draw, void *ctx)
{
	uint64_t *start = NULL;
	uint32_t *todo = NULL;
	size_t n_todo = 0;
	int err = 0;

	if (!total)
		return 0;
	start = calloc(n_nodes, sizeof(*start));
	todo = calloc(n_nodes, sizeof(*todo));
	if (!start || !todo) {
		err = -ENOMEM;
		goto out;
	}
	todo[n_todo++] = 0;
	while (n_todo) {
		uint32_t i = todo[--n_todo];
		uint64_t s = start[i];
		double w = (double)nodes[i].value / (double)total * (SVG_WIDTH - 2 * SVG_XPAD);

		if (i != 0 && w < MIN_WIDTH_PX)
			continue;
		draw(out, nodes, i, s, total, height, ctx);
		for (uint32_t c = nodes[i].first_child; c != FLAME_NONE;
		     c = nodes[c].next_sibling) {
			start[c] = s;
			s += nodes[c].value;
			todo[n_todo++] = c;
		}
	}
out:
	free(todo);
	free(start);
	return err;
}

static void draw_plain(FILE *out, const struct flame_node *nodes, uint32_t i, uint64_t start,
		       uint64_t total, int height, void *ctx)
{
	put_frame(out, &nodes[i], start, total, height, ctx);
}

int format_svg(const Profd__Profile *p, const struct render_opts *o, FILE *out)
{
	struct flame_opts fo = {.process_root = o->process_root, .value_index = o->value_index};
	struct svg_value sv = {profile_value_type(p, o->value_index),
			       profile_value_unit(p, o->value_index)};
	const struct flame_node *nodes;
	size_t n_nodes;
	uint64_t total;
	struct flame *f;
	int height, err;

	f = flame__new(p, &fo);
	if (!f)
		return -errno;
	nodes = flame__nodes(f, &n_nodes);
	total = nodes[0].value;
	height = SVG_TOP + (int)(flame__max_depth(f) + 1) * FRAME_H + SVG_BOTTOM;

	put_head(out, height, o->title ? o->title : "Flame Graph");
	put_subtitle(out, p, &sv, total);
	put_controls(out, height);
	err = put_frames(out, nodes, n_nodes, total, height, draw_plain, &sv);
	if (!err)
		err = put_tail(out, total);
	flame__free(f);
	return err;
}

/*
 * The differential graph: the diff's stacks merged into a call tree whose nodes carry B's
 * samples as their value (so widths, zoom and search work on B as in a plain graph) and A's
 * samples beside them.
 */
struct diff_tree {
	struct flame_node *nodes;
	uint64_t *a;
	uint32_t *last_child;
	size_t n, cap_nodes, cap_a, cap_last_child;
	uint32_t max_depth; /* of the nodes B has samples in */
};

static void diff_tree_free(struct diff_tree *t)
{
	for (size_t i = 0; i < t->n; i++)
		free((char *)t->nodes[i].name);
	free(t->nodes);
	free(t->a);
	free(t->last_child);
}

/*
 * A new last child of parent named by n bytes at name. Returns its index, or -EOVERFLOW,
 * -E2BIG or -ENOMEM.
 */
static int64_t diff_tree_add(struct diff_tree *t, uint32_t parent, const char *name, size_t n,
			     uint32_t depth)
{
	struct flame_node *node;
	uint32_t idx;
	int err;

	err = GROW(t->nodes, t->cap_nodes, t->n + 1);
	if (!err)
		err = GROW(t->a, t->cap_a, t->n + 1);
	if (!err)
		err = GROW(t->last_child, t->cap_last_child, t->n + 1);
	if (err)
		return err;
	if (t->n >= FLAME_NONE)
		return -E2BIG;
	idx = (uint32_t)t->n;
	node = &t->nodes[idx];
	*node = (struct flame_node){.parent = parent,
				    .first_child = FLAME_NONE,
				    .next_sibling = FLAME_NONE,
				    .depth = depth,
				    .kind = depth ? FLAME_NATIVE : FLAME_ROOT};
	node->name = strndup(name, n);
	if (!node->name)
		return -ENOMEM;
	t->a[idx] = 0;
	t->last_child[idx] = FLAME_NONE;
	t->n++;
	if (parent != FLAME_NONE) {
		if (t->last_child[parent] == FLAME_NONE)
			t->nodes[parent].first_child = idx;
		else
			t->nodes[t->last_child[parent]].next_sibling = idx;
		t->last_child[parent] = idx;
	}
	return idx;
}

/* Frame by frame: ';' sorts before every byte of a name, so a node's stacks lie together. */
static int cmp_frames(const void *x, const void *y)
{
	const unsigned char *a = (const unsigned char *)(*(const struct diff_row *const *)x)->stack;
	const unsigned char *b = (const unsigned char *)(*(const struct diff_row *const *)y)->stack;

	for (;; a++, b++) {
		int ca = *a == ';' ? 1 : *a ? *a + 1 : 0, cb = *b == ';' ? 1 : *b ? *b + 1 : 0;

		if (ca != cb)
			return ca - cb;
		if (!ca)
			return 0;
	}
}

static int diff_tree_build(struct diff_tree *t, const struct diff *d)
{
	uint32_t path[DIFF_MAX_DEPTH + 2];
	const struct diff_row *rows = NULL, **order = NULL;
	size_t n_rows, path_len = 1;
	int64_t id;
	int err = 0;

	rows = diff__rows(d, &n_rows);
	order = calloc(n_rows ? n_rows : 1, sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < n_rows; i++)
		order[i] = &rows[i];
	qsort(order, n_rows, sizeof(*order), cmp_frames);
	id = diff_tree_add(t, FLAME_NONE, "all", 3, 0);
	if (id < 0) {
		err = (int)id;
		goto out;
	}
	t->nodes[0].value = diff__total_b(d);
	t->a[0] = diff__total_a(d);
	path[0] = 0;
	for (size_t i = 0; i < n_rows; i++) {
		const struct diff_row *r = order[i];
		const char *p = r->stack;
		uint32_t cur = 0, level = 1;

		while (*p) {
			const char *e = strchr(p, ';');
			size_t n = e ? (size_t)(e - p) : strlen(p);
			const char *have;

			if (level > DIFF_MAX_DEPTH) {
				err = -E2BIG;
				goto out;
			}
			have = level < path_len ? t->nodes[path[level]].name : NULL;
			if (have && strncmp(have, p, n) == 0 && have[n] == '\0') {
				cur = path[level];
			} else {
				id = diff_tree_add(t, cur, p, n, level);
				if (id < 0) {
					err = (int)id;
					goto out;
				}
				cur = (uint32_t)id;
				path[level] = cur;
				path_len = level + 1;
			}
			t->nodes[cur].value += r->b;
			t->a[cur] += r->a;
			if (r->b && level > t->max_depth)
				t->max_depth = level;
			level++;
			p = e ? e + 1 : p + n;
		}
		t->nodes[cur].self += r->b;
	}
out:
	free(order);
	return err;
}

struct diff_draw {
	const uint64_t *a;
	uint64_t total_a;
	double scale; /* the change drawn at full colour */
};

/* The change of node i's share of all samples from A to B, in [-1, 1]. */
static double share_change(const struct flame_node *nodes, const uint64_t *a, uint32_t i,
			   uint64_t total_a, uint64_t total_b)
{
	double sa = total_a ? (double)a[i] / (double)total_a : 0;
	double sb = total_b ? (double)nodes[i].value / (double)total_b : 0;

	return sb - sa;
}

/* Red for growth, blue for shrinkage, from light grey (no change) to full at scale. */
static void put_diff_colour(FILE *out, double change, double scale)
{
	double m = fmin(fabs(change) / scale, 1.0);
	int hi = (int)lround(235 + 20 * m), lo = (int)lround(235 - 195 * m);

	if (change > 0)
		fprintf(out, "rgb(%d,%d,%d)", hi, lo, lo);
	else if (change < 0)
		fprintf(out, "rgb(%d,%d,%d)", lo, lo, hi);
	else
		fputs("rgb(235,235,235)", out);
}

static void draw_diff(FILE *out, const struct flame_node *nodes, uint32_t i, uint64_t start,
		      uint64_t total, int height, void *ctx)
{
	const struct diff_draw *dd = ctx;
	const struct flame_node *n = &nodes[i];
	double span = SVG_WIDTH - 2 * SVG_XPAD;
	double x = SVG_XPAD + (double)start / (double)total * span;
	double w = (double)n->value / (double)total * span;
	double change = share_change(nodes, dd->a, i, dd->total_a, total);
	int y = height - SVG_BOTTOM - (int)(n->depth + 1) * FRAME_H;

	frame_begin(out, n, start);
	fprintf(out,
		" (A: %" PRIu64 " samples, %.2f%%; B: %" PRIu64 " samples, %.2f%%; %+.2f points)",
		dd->a[i], dd->total_a ? 100.0 * (double)dd->a[i] / (double)dd->total_a : 0.0,
		n->value, 100.0 * (double)n->value / (double)total, 100.0 * change);
	frame_rect(out, x, y, w);
	put_diff_colour(out, change, dd->scale);
	frame_end(out, n, x, y, w);
}

int format_svg_diff(const struct diff *d, const struct diff_svg_opts *o, FILE *out)
{
	struct diff_tree t = {0};
	struct diff_draw dd;
	uint64_t total_a = diff__total_a(d), total_b = diff__total_b(d), hidden = 0;
	double biggest = 0;
	int height, err;

	err = diff_tree_build(&t, d);
	if (err)
		goto out;
	for (uint32_t i = 1; i < t.n; i++) {
		const struct flame_node *n = &t.nodes[i];

		if (n->value) {
			biggest =
			    fmax(biggest, fabs(share_change(t.nodes, t.a, i, total_a, total_b)));
		} else if (t.nodes[n->parent].value) {
			/* The topmost frame of a subtree B has nothing in. */
			hidden += t.a[i];
		}
	}
	/* Noise-sized changes should not glow: full colour takes at least one point of share. */
	dd = (struct diff_draw){.a = t.a, .total_a = total_a, .scale = fmax(biggest, 0.01)};
	height = SVG_TOP + (int)(t.max_depth + 1) * FRAME_H + SVG_BOTTOM;

	put_head(out, height, o->title ? o->title : "Differential flame graph");
	fputs("A: ", out);
	put_text(out, o->name_a ? o->name_a : "A", SIZE_MAX);
	fprintf(out, ", %" PRIu64 " samples; B: ", total_a);
	put_text(out, o->name_b ? o->name_b : "B", SIZE_MAX);
	fprintf(out, ", %" PRIu64 " samples", total_b);
	put_controls(out, height);
	fprintf(out,
		"<text id=\"legend\" x=\"%d\" y=\"60\" text-anchor=\"middle\">Width: samples in B. "
		"Colour: change of share from A to B, red grew, blue shrank, grey the same. "
		"Not drawn: frames only in A (%" PRIu64 " of %" PRIu64 " samples of A).</text>\n",
		SVG_WIDTH / 2, hidden, total_a);
	err = put_frames(out, t.nodes, t.n, total_b, height, draw_diff, &dd);
	if (!err)
		err = put_tail(out, total_b);
out:
	diff_tree_free(&t);
	return err;
}
