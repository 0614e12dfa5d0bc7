/*
 * collector.h -- the cupti toolkit's API table, for its plugin entry
 * (cupti.c).  collector.c is the only file that speaks to libcupti.
 * Ownership: the sink handed to start() is borrowed until stop().
 */
#ifndef KGYM_CUPTI_COLLECTOR_H
#define KGYM_CUPTI_COLLECTOR_H

#include "kgym/cupti.h"

/* The "cupti" API, version KGYM_CUPTI_VERSION (collector.c). */
extern const struct kgym_cupti_api collector_api;

#endif /* KGYM_CUPTI_COLLECTOR_H */
