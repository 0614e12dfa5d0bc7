/*
 * test_cupti.c -- unit tests of the cupti toolkit's collector
 * (plugins/cupti/collector.c, kgym/cupti.h) where no GPU is needed: the
 * API head, a sink that lacks a function refused, a libcupti that is not
 * there refused with the path's error, and every function safe before a
 * successful start().  What CUPTI itself reports is checked on a GPU
 * (tests/gpu/cupti_report.py, and the self-test of the nvrtc backend's
 * prepare(), which fails profiling closed when attribution does not work).
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collector.h"

static void sink_lock(void *arg) { }
static void sink_unlock(void *arg) { }
static void sink_launch(void *arg, uint32_t c, const void *fn) { }
static void sink_launch_failed(void *arg, uint32_t c) { }
static void sink_kernel(void *arg, const struct kgym_cupti_kernel *k) { }
static void sink_copy(void *arg, const struct kgym_cupti_copy *c) { }
static void sink_dropped(void *arg, uint64_t n) { }

static const struct kgym_cupti_sink good_sink = {
	.struct_size = sizeof(struct kgym_cupti_sink),
	.lock = sink_lock, .unlock = sink_unlock, .launch = sink_launch,
	.launch_failed = sink_launch_failed, .kernel = sink_kernel, .copy = sink_copy,
	.dropped = sink_dropped,
};

static const struct kgym_cupti_api *api = &collector_api;

static void
test_head(void **state)
{
	assert_int_equal(api->head.version, KGYM_CUPTI_VERSION);
	assert_int_equal(api->head.struct_size, sizeof(struct kgym_cupti_api));
	assert_true(KGYM_TOOLKIT_HAS(api, stop));
}

static void
test_bad_sink(void **state)
{
	struct kgym_cupti_sink s = good_sink;
	char *cause = NULL;

	s.kernel = NULL;
	assert_int_equal(api->start("/nonexistent/libcupti.so", &s, &cause), -EINVAL);
	assert_non_null(strstr(cause, "sink lacks a function"));
	free(cause);
	cause = NULL;
	s = good_sink;
	s.struct_size = 8;
	assert_int_equal(api->start(NULL, &s, &cause), -EINVAL);
	free(cause);
	assert_int_equal(api->start(NULL, NULL, NULL), -EINVAL);
}

static void
test_no_library(void **state)
{
	char *cause = NULL;

	assert_int_equal(api->start("/nonexistent/libcupti.so.99", &good_sink, &cause),
	    -ENOENT);
	assert_non_null(cause);
	if (strstr(cause, "no libcupti (") == NULL || strstr(cause, "/nonexistent") == NULL)
		fail_msg("cause: %s", cause);
	free(cause);
}

/* Before a start that worked, nothing reaches CUPTI and nothing crashes. */
static void
test_not_started(void **state)
{
	uint32_t c = 7, s = 7;
	char *cause = NULL;

	assert_int_equal(api->ids(NULL, NULL, &c, &s, &cause), -EIO);
	assert_non_null(strstr(cause, "not started"));
	free(cause);
	assert_true(c == 7 && s == 7);
	assert_int_equal(api->collect(1, NULL), -EIO);
	api->flush(1);
	assert_int_equal(api->timestamp(), 0);
	api->stop();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head),
		cmocka_unit_test(test_bad_sink),
		cmocka_unit_test(test_no_library),
		cmocka_unit_test(test_not_started),
	};

	return cmocka_run_group_tests_name("cupti toolkit (no GPU)", tests, NULL, NULL);
}
