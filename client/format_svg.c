// SPDX-License-Identifier: BSD-2-Clause
/*
 * A flame graph as one SVG file that works offline: rects and labels drawn here, a small script
 * inside the file for hover details, click to zoom and regex search.
 */
#include "format.h"
#include "profile.h"

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
    "})();\n";

static void put_subtitle(FILE *out, const Profd__Profile *p, uint64_t total)
{
	char dur[48], from[48], to[48];

	fprintf(out, "%" PRIu64 " samples", total);
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
}

static void put_frame(FILE *out, const struct flame_node *n, uint64_t start, uint64_t total,
		      int height)
{
	double span = SVG_WIDTH - 2 * SVG_XPAD;
	double x = SVG_XPAD + (double)start / (double)total * span;
	double w = (double)n->value / (double)total * span;
	int y = height - SVG_BOTTOM - (int)(n->depth + 1) * FRAME_H;

	fprintf(out,
		"<g class=\"f\" data-s=\"%" PRIu64 "\" data-v=\"%" PRIu64 "\" data-d=\"%" PRIu32
		"\"><title>",
		start, n->value, n->depth);
	put_text(out, n->name, SIZE_MAX);
	fprintf(out,
		" (%" PRIu64 " samples, %.2f%%)</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
		"height=\"%d\" rx=\"2\" fill=\"",
		n->value, 100.0 * (double)n->value / (double)total, x, y, w, FRAME_H - 1);
	put_colour(out, n);
	fprintf(out, "\"/><text x=\"%.2f\" y=\"%d\">", x + 3, y + FRAME_H - 4);
	put_label(out, n->name, w);
	fputs("</text></g>\n", out);
}

int format_svg(const Profd__Profile *p, const struct render_opts *o, FILE *out)
{
	struct flame_opts fo = {.process_root = o->process_root};
	const struct flame_node *nodes;
	uint64_t *start = NULL, total;
	uint32_t *todo = NULL;
	size_t n_nodes, n_todo = 0;
	struct flame *f;
	int height, err = 0;

	f = flame__new(p, &fo);
	if (!f)
		return -errno;
	nodes = flame__nodes(f, &n_nodes);
	total = nodes[0].value;
	height = SVG_TOP + (int)(flame__max_depth(f) + 1) * FRAME_H + SVG_BOTTOM;
	start = calloc(n_nodes, sizeof(*start));
	todo = calloc(n_nodes, sizeof(*todo));
	if (!start || !todo) {
		err = -ENOMEM;
		goto out;
	}

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
	put_text(out, o->title ? o->title : "Flame Graph", SIZE_MAX);
	fprintf(out, "</text>\n<text id=\"subtitle\" x=\"%d\" y=\"44\">", SVG_WIDTH / 2);
	put_subtitle(out, p, total);
	fprintf(out, "</text>\n");
	fprintf(out, "<text id=\"reset\" class=\"btn hide\" x=\"%d\" y=\"24\">Reset zoom</text>\n",
		SVG_XPAD);
	fprintf(out, "<text id=\"search\" class=\"btn\" x=\"%d\" y=\"24\">Search</text>\n",
		SVG_WIDTH - SVG_XPAD);
	fprintf(out, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", SVG_XPAD, height - 12);
	fprintf(out, "<text id=\"matched\" x=\"%d\" y=\"%d\"> </text>\n", SVG_WIDTH - SVG_XPAD,
		height - 12);

	/* Depth first from the root; each child starts where its previous sibling ended. */
	if (total) {
		todo[n_todo++] = 0;
		while (n_todo) {
			uint32_t i = todo[--n_todo];
			uint64_t s = start[i];
			double w =
			    (double)nodes[i].value / (double)total * (SVG_WIDTH - 2 * SVG_XPAD);

			if (i != 0 && w < MIN_WIDTH_PX)
				continue;
			put_frame(out, &nodes[i], s, total, height);
			for (uint32_t c = nodes[i].first_child; c != FLAME_NONE;
			     c = nodes[c].next_sibling) {
				start[c] = s;
				s += nodes[c].value;
				todo[n_todo++] = c;
			}
		}
	}

	fprintf(out,
		"<script type=\"text/ecmascript\"><![CDATA[\n"
		"var W = %d, XPAD = %d, CW = %.2f, TOTAL = %" PRIu64 ";\n%s]]></script>\n",
		SVG_WIDTH, SVG_XPAD, CHAR_W, total, svg_script);
	fputs("</svg>\n", out);
	if (fflush(out) || ferror(out))
		err = -EIO;
out:
	free(todo);
	free(start);
	flame__free(f);
	return err;
}
