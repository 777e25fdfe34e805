// SPDX-License-Identifier: BSD-2-Clause
/*
 * Whether a reloaded configuration exports as the running one does: then a SIGHUP leaves the
 * exporter (its timer, its sender's backoff, its open connections) as it is.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_file.h"
#include "fdio.h"
#include "hash.h"

static bool str_same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

bool config_export_same(const struct export_config *a, const struct export_config *b)
{
	if (!str_same(a->pyroscope, b->pyroscope) || !str_same(a->otlp, b->otlp) ||
	    a->interval_ns != b->interval_ns || !str_same(a->spool, b->spool) ||
	    a->spool_max_size != b->spool_max_size || a->spool_max_age_ns != b->spool_max_age_ns ||
	    a->retry_max_ns != b->retry_max_ns || a->timeout_ns != b->timeout_ns ||
	    a->nlabels != b->nlabels || a->label_pid != b->label_pid ||
	    a->label_tid != b->label_tid || !str_same(a->host, b->host) ||
	    !str_same(a->ca_file, b->ca_file) || !str_same(a->cert_file, b->cert_file) ||
	    !str_same(a->key_file, b->key_file) ||
	    !str_same(a->bearer_token_file, b->bearer_token_file) ||
	    !str_same(a->basic_auth_file, b->basic_auth_file) || a->nheaders != b->nheaders ||
	    a->nservices != b->nservices)
		return false;
	for (size_t i = 0; i < a->nlabels; i++)
		if (!str_same(a->labels[i].name, b->labels[i].name) ||
		    !str_same(a->labels[i].value, b->labels[i].value))
			return false;
	for (size_t i = 0; i < a->nheaders; i++)
		if (!str_same(a->headers[i], b->headers[i]))
			return false;
	for (size_t i = 0; i < a->nservices; i++)
		if (!str_same(a->services[i].name, b->services[i].name) ||
		    !str_same(a->services[i].glob, b->services[i].glob))
			return false;
	return true;
}

/* Mix the bytes of path (at most CONFIG_FILE_MAX of them) into h; what cannot be read, a mark. */
static uint64_t mix_file(uint64_t h, const char *path)
{
	char buf[4096];
	size_t total = 0;
	ssize_t r;
	int fd;

	if (!path)
		return hash_mix64(h ^ 1);
	fd = fd_open_regular(path, 0);
	if (fd < 0)
		return hash_mix64(h ^ 2 ^ ((uint64_t)-fd << 8));
	while (total < CONFIG_FILE_MAX && (r = read(fd, buf, sizeof(buf))) != 0) {
		if (r < 0) {
			h ^= 3;
			break;
		}
		h = hash_mix64(h ^ hash_bytes(buf, (size_t)r));
		total += (size_t)r;
	}
	close(fd);
	return hash_mix64(h ^ total);
}

uint64_t config_export_files_hash(const struct export_config *x)
{
	const char *files[] = {x->ca_file, x->cert_file, x->key_file, x->bearer_token_file,
			       x->basic_auth_file};
	uint64_t h = 0;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		h = mix_file(h, files[i]);
	return h;
}
