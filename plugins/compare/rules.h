/*
 * rules.h -- the compare toolkit's API table, for its plugin entry
 * (compare.c) and for unit tests that link the rules without loading the
 * plugin.  kernel.c gives the device half of the rule, rules.c the host
 * half and the words.  Ownership: nothing here allocates.
 */
#ifndef KGYM_COMPARE_RULES_H
#define KGYM_COMPARE_RULES_H

#include "kgym/compare.h"

/* The "compare" API, version KGYM_COMPARE_VERSION (rules.c). */
extern const struct kgym_compare_api rules_api;

/* The CUDA C text of KGYM_COMPARE_KERNEL (kernel.c). */
const char *kernel_source(void);

#endif /* KGYM_COMPARE_RULES_H */
