/*
 * log.c -- the daemon's log.
 *
 * kgymd logs one line per message.  In the foreground (-F) it writes to
 * stderr: with a time stamp for a person at a terminal, or with sd-daemon
 * priority prefixes when stderr is the journal (JOURNAL_STREAM is set, as
 * systemd does for Type=notify units), which adds time itself.  Detached
 * (no -F) it logs to syslog.  Workers send their lines to the parent
 * (log_set_sink).  Plugin messages come through log_emit() with the
 * plugin's name as tag.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>

#include "kgymd.h"

static int log_threshold = KGYM_LOG_INFO;
static enum { LOG_TO_TERMINAL, LOG_TO_JOURNAL, LOG_TO_SYSLOG } log_target = LOG_TO_TERMINAL;
static void (*log_sink)(int, const char *, const char *);

static const char *const log_names[] = {
	[KGYM_LOG_ERROR] = "error",
	[KGYM_LOG_WARN] = "warning",
	[KGYM_LOG_INFO] = "info",
	[KGYM_LOG_DEBUG] = "debug",
};

/* sd-daemon(3) priority prefixes, so journald files lines by level. */
static const char *const log_journal_prefix[] = {
	[KGYM_LOG_ERROR] = "<3>",
	[KGYM_LOG_WARN] = "<4>",
	[KGYM_LOG_INFO] = "<6>",
	[KGYM_LOG_DEBUG] = "<7>",
};

static const int log_syslog_priority[] = {
	[KGYM_LOG_ERROR] = LOG_ERR,
	[KGYM_LOG_WARN] = LOG_WARNING,
	[KGYM_LOG_INFO] = LOG_INFO,
	[KGYM_LOG_DEBUG] = LOG_DEBUG,
};

void
log_init(int level, bool foreground)
{
	log_threshold = level;
	if (!foreground) {
		log_target = LOG_TO_SYSLOG;
		openlog("kgymd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	} else if (getenv("JOURNAL_STREAM") != NULL) {
		log_target = LOG_TO_JOURNAL;
	} else {
		log_target = LOG_TO_TERMINAL;
	}
}

void
log_set_sink(void (*sink)(int level, const char *tag, const char *msg))
{
	log_sink = sink;
}

void
log_set_level(int level)
{
	log_threshold = level;
}

int
log_level_parse(const char *name)
{
	int i;

	for (i = 0; i <= KGYM_LOG_DEBUG; i++)
		if (strcasecmp(name, log_names[i]) == 0)
			return i;
	if (strcasecmp(name, "warn") == 0)
		return KGYM_LOG_WARN;
	return -EINVAL;
}

const char *
log_level_name(int level)
{
	if (level < 0 || level > KGYM_LOG_DEBUG)
		return "unknown";
	return log_names[level];
}

void
log_emit(int level, const char *tag, const char *fmt, va_list ap)
{
	char msg[2048];
	struct timespec ts;
	struct tm tm;
	char when[32] = "";

	if (level > log_threshold)
		return;
	if (level < 0)
		level = KGYM_LOG_ERROR;
	if (level > KGYM_LOG_DEBUG)
		level = KGYM_LOG_DEBUG;
	vsnprintf(msg, sizeof msg, fmt, ap);
	if (log_sink != NULL) {
		log_sink(level, tag, msg);
		return;
	}
	switch (log_target) {
	case LOG_TO_SYSLOG:
		syslog(log_syslog_priority[level], "%s%s%s", tag ? tag : "", tag ? ": " : "", msg);
		return;
	case LOG_TO_JOURNAL:
		fprintf(stderr, "%s%s%s%s\n", log_journal_prefix[level], tag ? tag : "",
		    tag ? ": " : "", msg);
		break;
	case LOG_TO_TERMINAL:
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof when, "%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ld %s: %s%s%s\n", when, ts.tv_nsec / 1000000,
		    log_names[level], tag ? tag : "", tag ? ": " : "", msg);
		break;
	}
	fflush(stderr);
}

#define LOG_FORWARD(level) do {				\
	va_list ap;					\
	va_start(ap, fmt);				\
	log_emit((level), NULL, fmt, ap);		\
	va_end(ap);					\
} while (0)

void
log_tagged(int level, const char *tag, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit(level, tag, fmt, ap);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	LOG_FORWARD(KGYM_LOG_DEBUG);
}

void
log_info(const char *fmt, ...)
{
	LOG_FORWARD(KGYM_LOG_INFO);
}

void
log_warnx(const char *fmt, ...)
{
	LOG_FORWARD(KGYM_LOG_WARN);
}

void
log_errorx(const char *fmt, ...)
{
	LOG_FORWARD(KGYM_LOG_ERROR);
}

static void
log_printf(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit(level, NULL, fmt, ap);
	va_end(ap);
}

static void
log_with_errno(int level, int saved, const char *fmt, va_list ap)
{
	char buf[1024];

	vsnprintf(buf, sizeof buf, fmt, ap);
	log_printf(level, "%s: %s", buf, strerror(saved));
}

void
log_warn(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_with_errno(KGYM_LOG_WARN, saved, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_with_errno(KGYM_LOG_ERROR, saved, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	LOG_FORWARD(KGYM_LOG_ERROR);
	exit(1);
}
