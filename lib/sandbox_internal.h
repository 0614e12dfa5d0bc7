/*
 * sandbox_internal.h -- what the sandbox library's own files share
 * (sandbox.c, sandbox_landlock.c); never included by its users, who see
 * include/kgym/sandbox.h.  Messages and causes are malloc'd as there.
 */
#ifndef KGYM_SANDBOX_INTERNAL_H
#define KGYM_SANDBOX_INTERNAL_H

#include "kgym/sandbox.h"

#define nitems(a) (sizeof(a) / sizeof((a)[0]))

/* A message to the user's log callback (sandbox_set_log()), if any. */
void	sandbox_log(enum sandbox_log_level level, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* *ret_cause (unless NULL) = the formatted message. */
void	sandbox_cause(char **ret_cause, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

#endif /* KGYM_SANDBOX_INTERNAL_H */
