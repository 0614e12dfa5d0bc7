/*
 * plugin_util.c -- helpers shared by the shipped plugins (plugin_util.h).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugin_util.h"

double
pu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

char *
pu_strdup_host(const struct kgym_host *host, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = host->alloc(n);

	if (d != NULL)
		memcpy(d, s, n);
	return d;
}

int
pu_cause(const struct kgym_host *host, char **ret_cause, int error, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (ret_cause != NULL)
		*ret_cause = pu_strdup_host(host, buf);
	return error;
}

int
pu_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int
pu_parse_size(const char *s, uint64_t *ret)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	if (s == NULL || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -EINVAL;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	case 'T': case 't': shift = 40; end++; break;
	default: break;
	}
	if (*end != '\0' || (shift > 0 && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*ret = (uint64_t)v << shift;
	return 0;
}

int
pu_parse_double(const char *s, double lo, double hi, double *ret)
{
	char *end;
	double v;

	if (s == NULL || *s == '\0')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || *end != '\0' || !isfinite(v) || v < lo || v > hi)
		return -EINVAL;
	*ret = v;
	return 0;
}
