/*
 * notify.c -- telling systemd how the daemon is doing (sd_notify(3)).
 *
 * kgymd runs as a Type=notify unit: READY=1 once the socket listens and the
 * store is recovered, STOPPING=1 when shutdown begins, RELOADING=1 around a
 * SIGHUP reload, STATUS= with the queue figures.  Without libsystemd (or
 * outside systemd, where NOTIFY_SOCKET is unset) these do nothing.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "kgymd.h"

static void
notify_send(const char *state)
{
#ifdef HAVE_SYSTEMD
	if (sd_notify(0, state) < 0)
		log_debug("sd_notify(%s) failed", state);
#else
	(void)state;
#endif
}

void
notify_ready(void)
{
	notify_send("READY=1");
}

void
notify_stopping(void)
{
	notify_send("STOPPING=1");
}

void
notify_reloading(void)
{
	notify_send("RELOADING=1");
}

void
notify_status(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof buf, "STATUS=");
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	va_end(ap);
	notify_send(buf);
}
