/*
 * test_gateway.c -- unit tests of kgymd-http's pure parts: its config
 * section (conf.c), the token file (tokens.c) and KernelGYM's shapes
 * (shape.c).  Each error names the field or key and the line; a token is
 * found by its secret only, whatever its length; a token file others may
 * read is refused.
 */
#include "config.h"

#include <sys/stat.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../kgymd-http/gateway.h"

static char dir[] = "/tmp/kgym-test-gateway.XXXXXX";

/* conf.c and tokens.c log nothing here, but link against main.c's gw_log. */
void
gw_log(const char *fmt, ...)
{
	(void)fmt;
}

static char *
write_file(const char *name, const char *text, mode_t mode)
{
	char *path;
	FILE *fp;

	assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

static void
expect_conf_error(const char *text, const char *needle)
{
	struct gw_config *c = NULL;
	char *path = write_file("kgymd.conf", text, 0644), *cause = NULL;

	assert_true(conf_load(path, &c, &cause) < 0);
	assert_non_null(cause);
	if (strstr(cause, needle) == NULL)
		fail_msg("\"%s\" does not say \"%s\"", cause, needle);
	free(cause);
	free(path);
}

static void
test_conf(void **state)
{
	struct gw_config *c = NULL;
	char *path, *cause = NULL;

	(void)state;
	/* Defaults; kgymd's other keys and sections are not ours. */
	path = write_file("kgymd.conf",
	    "[kgymd]\nsocket = /run/x.sock\nworkers_per_gpu = 2\n"
	    "[workers]\ncpu_workers = 1\n[plugin.python]\nx = y\n",
	    0644);
	assert_int_equal(conf_load(path, &c, &cause), 0);
	assert_string_equal(c->socket, "/run/x.sock");
	assert_string_equal(c->listen_host, "127.0.0.1");
	assert_int_equal(c->listen_port, 10907);
	assert_true(c->loopback);
	assert_null(c->token_file);
	assert_int_equal(c->max_body_bytes, 4 * 1024 * 1024);
	assert_int_equal(c->max_inflight, 10000);
	assert_int_equal(c->max_reply_backlog, 16 * 1024 * 1024);
	assert_int_equal(c->max_request_bytes, 4 * 1024 * 1024);
	conf_free(c);
	free(path);
	path = write_file("kgymd.conf",
	    "[kgymd]\nmax_request_bytes = 64K\n"
	    "[http]\nlisten = [::1]:8080\nmax_body_bytes = 64K\n"
	    "max_inflight = 7\ntoken_file = /etc/tokens\nmax_reply_backlog = 1M\n",
	    0644);
	assert_int_equal(conf_load(path, &c, &cause), 0);
	assert_string_equal(c->listen_host, "::1");
	assert_int_equal(c->listen_port, 8080);
	assert_true(c->loopback);
	assert_int_equal(c->max_body_bytes, 65536);
	assert_int_equal(c->max_inflight, 7);
	assert_int_equal(c->max_reply_backlog, 1024 * 1024);
	assert_int_equal(c->max_request_bytes, 65536);
	assert_string_equal(c->token_file, "/etc/tokens");
	conf_free(c);
	free(path);

	expect_conf_error("[http]\nlisten = 10.0.0.1:80\n", "token_file");
	expect_conf_error("[http]\nlisten = 10.0.0.1\n", ":2: listen:");
	expect_conf_error("[http]\nlisten = example.org:80\n", "numeric");
	expect_conf_error("[http]\nlisten = 127.0.0.1:65536\n", "port");
	expect_conf_error("[http]\nmax_body_bytes = 2G\n", "max_body_bytes");
	expect_conf_error("[http]\nmax_body_bytes = -1\n", "max_body_bytes");
	expect_conf_error("[http]\nmax_inflight = many\n", "max_inflight");
	expect_conf_error("[http]\nmax_reply_backlog = 64K\n", "max_reply_backlog");
	expect_conf_error(
	    "[http]\n\nmax_inflight = 1\nmax_inflight = 2\n", ":4: duplicate key");
	expect_conf_error("[http]\nlisten_port = 1\n", "unknown key \"listen_port\"");
	expect_conf_error("[kgymd]\nsocket = relative.sock\n", "socket");
	expect_conf_error("[kgymd]\nmax_request_bytes = 4T\n", "max_request_bytes");
}

#define ALICE "alice-0123456789abcdef"

static void
test_tokens(void **state)
{
	struct token_set *set = NULL;
	const struct token *t;
	char *path, *cause = NULL;

	(void)state;
	path = write_file("tokens",
	    "# comment\n\nalice " ALICE "\nops ops-0123456789abcdef admin\n", 0600);
	assert_int_equal(tokens_load(path, &set, &cause), 0);
	assert_int_equal(tokens_count(set), 2);
	t = tokens_find(set, ALICE, strlen(ALICE));
	assert_non_null(t);
	assert_string_equal(t->name, "alice");
	assert_false(t->admin);
	t = tokens_find(set, "ops-0123456789abcdef", 20);
	assert_non_null(t);
	assert_true(t->admin);
	/* A prefix, an extension, another case: not the token. */
	assert_null(tokens_find(set, ALICE, strlen(ALICE) - 1));
	assert_null(tokens_find(set, ALICE "x", strlen(ALICE) + 1));
	assert_null(tokens_find(set, "ALICE-0123456789abcdef", strlen(ALICE)));
	assert_null(tokens_find(set, "", 0));
	tokens_free(set);
	free(path);

	static const struct {
		const char *text;
		mode_t mode;
		const char *needle;
	} bad[] = {
		{ "alice " ALICE "\n", 0644, "chmod 600" },
		{ "alice short\n", 0600, ":1: expected NAME TOKEN" },
		{ "alice " ALICE " admin more\n", 0600, "only the word admin" },
		{ "alice " ALICE " root\n", 0600, "only the word admin" },
		{ "al/ice " ALICE "\n", 0600, "a name is" },
		{ "alice " ALICE "\nalice bob-0123456789abcdef\n", 0600,
		    ":2: a name appears twice" },
		{ "alice " ALICE "\nbob " ALICE "\n", 0600,
		    ":2: a token appears twice" },
		{ "# nothing\n", 0600, "no tokens" },
	};
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		path = write_file("tokens", bad[i].text, bad[i].mode);
		set = NULL;
		assert_true(tokens_load(path, &set, &cause) < 0);
		assert_null(set);
		if (cause == NULL || strstr(cause, bad[i].needle) == NULL)
			fail_msg("case %zu: \"%s\" does not say \"%s\"", i, cause,
			    bad[i].needle);
		free(cause);
		cause = NULL;
		free(path);
	}
}

static json_t *
task_of(const char *json, bool workflow_form, struct shape_error *err)
{
	json_t *body = json_loads(json, 0, NULL), *task;

	assert_non_null(body);
	task = shape_task(body, workflow_form, "", err);
	json_decref(body);
	return task;
}

static void
expect_shape_error(const char *json, bool workflow_form, const char *field)
{
	struct shape_error err;

	if (task_of(json, workflow_form, &err) != NULL)
		fail_msg("%s: accepted", json);
	assert_string_equal(err.field, field);
	if (strstr(err.message, field) == NULL)
		fail_msg("\"%s\" does not name %s", err.message, field);
}

static void
test_shape(void **state)
{
	struct shape_error err;
	json_t *task, *payload;
	char *s;

	(void)state;
	task = task_of(
	    "{\"task_id\":\"t1\",\"reference_code\":\"r\",\"kernel_code\":\"k\","
	    "\"num_correct_trials\":5,\"timeout\":60,\"priority\":\"high\",\"enable_profiling\":null,"
	    "\"resources\":{\"gpus\":2,\"gpu_memory_bytes\":1024}}",
	    false, &err);
	assert_non_null(task);
	assert_string_equal(json_string_value(json_object_get(task, "task_id")), "t1");
	assert_string_equal(
	    json_string_value(json_object_get(task, "workflow")), "kernelbench");
	assert_string_equal(
	    json_string_value(json_object_get(task, "priority")), "high");
	assert_true(json_number_value(json_object_get(task, "timeout_s")) == 60.0);
	assert_int_equal(json_integer_value(json_object_get(
			     json_object_get(task, "resources"), "gpu_memory_bytes")),
	    1024);
	payload = json_object_get(task, "payload");
	/* KernelGYM's default backend; nulls dropped; the task's own fields lifted out. */
	assert_string_equal(
	    json_string_value(json_object_get(payload, "backend")), "triton");
	assert_null(json_object_get(payload, "enable_profiling"));
	assert_null(json_object_get(payload, "task_id"));
	assert_null(json_object_get(payload, "timeout"));
	assert_int_equal(
	    json_integer_value(json_object_get(payload, "num_correct_trials")), 5);
	json_decref(task);

	/* nvrtc needs no kernel_code: the plugin checks problem and solution. */
	task = task_of(
	    "{\"task_id\":\"n\",\"backend\":\"nvrtc\",\"problem\":{}}", false, &err);
	assert_non_null(task);
	json_decref(task);
	task = task_of(
	    "{\"workflow\":\"selftest\",\"payload\":{\"a\":1},\"force_refresh\":true}",
	    true, &err);
	assert_non_null(task);
	assert_null(json_object_get(task, "task_id"));
	assert_true(json_is_true(
	    json_object_get(json_object_get(task, "payload"), "force_refresh")));
	json_decref(task);

	expect_shape_error("[]", false, "body");
	expect_shape_error("{\"kernel_code\":\"k\"}", false, "task_id");
	expect_shape_error(
	    "{\"task_id\":\"a b\",\"kernel_code\":\"k\"}", false, "task_id");
	expect_shape_error(
	    "{\"task_id\":\"t\",\"reference_code\":\"r\"}", false, "kernel_code");
	expect_shape_error(
	    "{\"task_id\":\"t\",\"kernel_code\":\"k\"}", false, "reference_code");
	expect_shape_error(
	    "{\"task_id\":\"t\",\"kernel_code\":1,\"reference_code\":\"r\"}", false,
	    "kernel_code");
	expect_shape_error(
	    "{\"task_id\":\"t\",\"backend\":\"cobol\"}", false, "backend");
	expect_shape_error(
	    "{\"task_id\":\"t\",\"workflow\":\"x\",\"priority\":\"now\"}", false,
	    "priority");
	expect_shape_error(
	    "{\"task_id\":\"t\",\"workflow\":\"x\",\"timeout\":0}", false, "timeout");
	expect_shape_error("{\"task_id\":\"t\",\"workflow\":\"x\",\"timeout\":\"1\"}",
	    false, "timeout");
	expect_shape_error("{\"task_id\":\"t\",\"workflow\":\"x\",\"resources\":[]}",
	    false, "resources");
	expect_shape_error("{\"payload\":[]}", true, "payload");
	expect_shape_error(
	    "{\"payload\":{},\"force_refresh\":1}", true, "force_refresh");

	assert_string_equal(shape_status("queued"), "pending");
	assert_string_equal(shape_status("running"), "processing");
	assert_string_equal(shape_status("cancelled"), "cancelled");
	assert_true(shape_task_id_ok("a.b_c:d-1"));
	assert_false(shape_task_id_ok(""));
	assert_false(shape_task_id_ok("a/b"));
	payload = shape_time(1795633293086);
	s = json_dumps(payload, JSON_ENCODE_ANY);
	assert_string_equal(s, "\"2026-11-25T19:01:33.086Z\"");
	free(s);
	json_decref(payload);
}

static int
setup(void **state)
{
	(void)state;
	return mkdtemp(dir) != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conf),
		cmocka_unit_test(test_tokens),
		cmocka_unit_test(test_shape),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
