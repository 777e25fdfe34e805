// SPDX-License-Identifier: BSD-2-Clause
/* Profiles and traces from the daemon, checked before anything follows their indices. */
#include "fetch.h"
#include "conn.h"
#include "profile.h"
#include "trace.h"
#include "value.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void fetch_dump_request(const struct fetch_query *q, Profd__DumpRequest *d)
{
	d->n_pids = q->n_pids;
	d->pids = (uint32_t *)q->pids;
	d->has_tid = q->has_tid;
	d->tid = q->tid;
	d->has_since_ns = q->has_since;
	d->since_ns = q->since_ns;
	d->has_merge_processes = q->merge_processes;
	d->merge_processes = q->merge_processes;
	d->has_children = q->children;
	d->children = q->children;
	d->has_start_ns = q->has_start;
	d->start_ns = q->start_ns;
}

void fetch_trace_request(const struct fetch_query *q, Profd__TraceRequest *t)
{
	t->n_pids = q->n_pids;
	t->pids = (uint32_t *)q->pids;
	t->has_since_ns = q->has_since;
	t->since_ns = q->since_ns;
}

/* Whether any sample carries a value in any column: a profile of only GPU time counts. */
static bool profile_has_values(const Profd__Profile *p)
{
	for (size_t i = 0; i < p->n_samples; i++)
		for (size_t j = 0; j < p->samples[i]->n_values; j++)
			if (p->samples[i]->values[j])
				return true;
	return false;
}

int fetch_no_samples(struct cli_error *e)
{
	cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES,
		      "no samples: the daemon returned an empty profile; widen --since or check "
		      "the --pid");
	return -ENODATA;
}

/* Both checks tell the user the likely cause: profd and profctl of different versions. */
static int inconsistent(struct cli_error *e, const char *what, const char *why)
{
	cli_error_set(e, PROFCTL_EXIT_PROTOCOL,
		      "the daemon sent an inconsistent %s (%s): are profd and profctl the same "
		      "version?",
		      what, why);
	return -EPROTO;
}

int fetch_profile(struct conn *c, const Profd__DumpRequest *dreq, bool allow_empty,
		  Profd__Response **out, struct cli_error *e)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__Response *resp = NULL;
	char why[256];
	int err;

	req.msg_case = PROFD__REQUEST__MSG_DUMP;
	req.dump = (Profd__DumpRequest *)dreq;
	err = conn__call(c, &req, PROFD__RESPONSE__MSG_PROFILE, &resp, e);
	if (err)
		return err;
	if (profile_check(resp->profile, why, sizeof(why)))
		err = inconsistent(e, "profile", why);
	else if (!allow_empty && !profile_has_values(resp->profile))
		err = fetch_no_samples(e);
	if (err) {
		profd__response__free_unpacked(resp, NULL);
		return err;
	}
	*out = resp;
	return 0;
}

int fetch_stacks(struct conn *c, uint32_t pid, Profd__Response **out, struct cli_error *e)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__StacksRequest sreq = PROFD__STACKS_REQUEST__INIT;
	Profd__Response *resp = NULL;
	char why[256];
	int err;

	sreq.pid = pid;
	req.msg_case = PROFD__REQUEST__MSG_STACKS;
	req.stacks = &sreq;
	err = conn__call(c, &req, PROFD__RESPONSE__MSG_PROFILE, &resp, e);
	if (err)
		return err;
	if (profile_check(resp->profile, why, sizeof(why)))
		err = inconsistent(e, "profile", why);
	else if (!resp->profile->n_samples)
		err = inconsistent(e, "stack dump", "no threads");
	if (err) {
		profd__response__free_unpacked(resp, NULL);
		return err;
	}
	*out = resp;
	return 0;
}

int fetch_trace(struct conn *c, const Profd__TraceRequest *treq, Profd__Response **out,
		struct cli_error *e)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__Response *resp = NULL;
	char why[256];
	int err;

	req.msg_case = PROFD__REQUEST__MSG_TRACE;
	req.trace = (Profd__TraceRequest *)treq;
	err = conn__call(c, &req, PROFD__RESPONSE__MSG_TRACE, &resp, e);
	if (err)
		return err;
	if (trace_check(resp->trace, why, sizeof(why))) {
		profd__response__free_unpacked(resp, NULL);
		return inconsistent(e, "trace", why);
	}
	*out = resp;
	return 0;
}

int fetch_select_value(Profd__Profile *p, int value, uint32_t *index, struct cli_error *e)
{
	const char *col = value_column_name((enum value_kind)value);
	bool off = value == VALUE_OFFCPU || value == VALUE_WALL || value == VALUE_GPU_IDLE_OFFCPU ||
		   value == VALUE_GPU_IDLE_WALL;
	uint32_t wi;
	int idx, err;

	if (value == VALUE_WALL || value == VALUE_GPU_IDLE_WALL) {
		err = profile_add_wall(p, value == VALUE_GPU_IDLE_WALL, &wi);
		if (err == -ENOMEM) {
			cli_error_set(e, PROFCTL_EXIT_ERROR, "adding up wall-clock time: %s",
				      strerror(-err));
			return err;
		}
	}
	idx = profile_value_index(p, col);
	if (idx < 0 && off) {
		cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES,
			      "the profile has no off-CPU time: run profd with --off-cpu");
		return -ENODATA;
	}
	if (idx < 0) {
		cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES,
			      "the profile has no %s values: the daemon does not collect them (GPU "
			      "support missing, or a daemon older than profctl)",
			      col);
		return -ENODATA;
	}
	if (!profile_value_total(p, (uint32_t)idx)) {
		cli_error_set(e, PROFCTL_EXIT_NO_SAMPLES,
			      "no %s in the window: widen --since or check the --pid%s", col,
			      value == VALUE_CPU || value == VALUE_OFFCPU || value == VALUE_WALL
				  ? ""
				  : " (is the process's GPU library attached?)");
		return -ENODATA;
	}
	*index = (uint32_t)idx;
	return 0;
}

void fetch_note_lost(bool has_samples_lost, uint64_t samples_lost)
{
	if (has_samples_lost && samples_lost)
		fprintf(stderr,
			"profctl: note: the daemon lost %" PRIu64 " samples in this window (ring "
			"buffer full or out of memory): the counts are that much short\n",
			samples_lost);
}

void fetch_note_filtered(bool has_only_uid, uint32_t only_uid)
{
	if (has_only_uid)
		fprintf(stderr,
			"profctl: note: only processes of uid %u are shown; root sees every "
			"process\n",
			only_uid);
}
