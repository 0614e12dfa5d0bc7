/*
 * plugin_util.h -- small helpers the shipped plugins share: a monotonic
 * clock, host-freeable error causes, and the parsing of config values.
 *
 * Compiled into each plugin .so that uses it (plugins link nothing of one
 * another).  Ownership: pu_cause stores a string allocated with host->alloc
 * in *ret_cause, for the host to free; the rest allocate nothing.
 */
#ifndef KGYM_PLUGIN_UTIL_H
#define KGYM_PLUGIN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <kgym/plugin.h>

/* CLOCK_MONOTONIC in milliseconds. */
double	pu_now_ms(void);
/* A copy of s made with host->alloc, or NULL. */
char	*pu_strdup_host(const struct kgym_host *host, const char *s);
/* *ret_cause (unless NULL) = the formatted message, host-freeable; returns `error`. */
int	pu_cause(const struct kgym_host *host, char **ret_cause, int error, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));
/* The formatted message into err; returns -EINVAL. */
int	pu_err(char *err, size_t errlen, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
/* "64M"-style sizes: digits with an optional K, M, G or T (powers of 1024). */
int	pu_parse_size(const char *s, uint64_t *ret);
/* A finite number within [lo, hi]. */
int	pu_parse_double(const char *s, double lo, double hi, double *ret);

#endif /* KGYM_PLUGIN_UTIL_H */
