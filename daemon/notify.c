// SPDX-License-Identifier: BSD-2-Clause
#include "notify.h"

#ifdef PROFD_HAVE_SYSTEMD
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

void notify_ready(const char *status)
{
	sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void notify_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

bool notify_have_journal(void)
{
	return true;
}

void notify_journal_sink(enum log_level level, const char *msg, void *ctx)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};

	(void)ctx;
	sd_journal_print(prio[level], "%s", msg);
}
#else
void notify_ready(const char *status)
{
	(void)status;
}

void notify_stopping(void)
{
}

bool notify_have_journal(void)
{
	return false;
}

void notify_journal_sink(enum log_level level, const char *msg, void *ctx)
{
	log_sink_stderr(level, msg, ctx);
}
#endif
