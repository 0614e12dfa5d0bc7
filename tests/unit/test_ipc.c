/*
 * test_ipc.c -- unit tests of the worker<->daemon frames (kgymd/ipc.c).
 *
 * ipc_decode() is the parent's only reader of bytes that sandboxed code
 * may have forged, so these tests hold it to its contract: every frame
 * type a worker may send decodes in the states that accept it and is
 * refused (-EPERM) in the others; a partial frame asks for exactly the
 * bytes it still needs; an oversized or overflowing length is -EMSGSIZE
 * before a byte of payload is waited for; a bad magic, version or type,
 * and a payload that is not one JSON object, are -EPROTO; and each refusal
 * says why in words that name what was wrong.  The blocking helpers of the
 * worker side are driven over a socketpair.
 */
#include "config.h"

#include <sys/socket.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kgymd.h"

#define MAX_LEN		4096

/* A frame with a hand-made header: magic, version, type, length. */
static size_t
raw_frame(unsigned char *buf, uint32_t magic, uint16_t version, uint16_t type,
    uint32_t len, const char *body)
{
	size_t n = body != NULL ? strlen(body) : 0;

	buf[0] = magic >> 24;
	buf[1] = magic >> 16;
	buf[2] = magic >> 8;
	buf[3] = magic;
	buf[4] = version >> 8;
	buf[5] = version;
	buf[6] = type >> 8;
	buf[7] = type;
	buf[8] = len >> 24;
	buf[9] = len >> 16;
	buf[10] = len >> 8;
	buf[11] = len;
	if (n > 0)
		memcpy(buf + IPC_HEADER_LEN, body, n);
	return IPC_HEADER_LEN + n;
}

/* A good frame of `type` around `body`, its length right. */
static size_t
good_frame(unsigned char *buf, unsigned int type, const char *body)
{
	return raw_frame(buf, IPC_MAGIC, IPC_VERSION, (uint16_t)type,
	    (uint32_t)strlen(body), body);
}

/* The decode must fail with `want`, and why must hold `word`. */
static void
expect_error(const unsigned char *buf, size_t n, size_t max_len, enum worker_state st,
    ssize_t want, const char *word)
{
	struct ipc_msg msg;
	char why[256] = "";
	ssize_t rc;

	rc = ipc_decode(buf, n, max_len, st, &msg, why, sizeof why);
	if (rc != want)
		fail_msg("expected %zd, got %zd (%s)", want, rc, why);
	assert_null(msg.payload);
	if (strstr(why, word) == NULL)
		fail_msg("reason '%s' lacks '%s'", why, word);
}

/* --- well-formed frames */

static const struct {
	unsigned int type;
	const char *body;
	enum worker_state state;	/* one state that accepts it */
} sent_by_worker[] = {
	{ IPC_HELLO, "{\"pid\":42,\"slot\":0,\"sandbox\":{\"seccomp\":true}}", W_STARTING },
	{ IPC_RESULT, "{\"job\":7,\"result\":{\"correct\":true}}", W_BUSY },
	{ IPC_LOG, "{\"level\":3,\"message\":\"h\\u00e9llo\"}", W_IDLE },
	{ IPC_LOCK, "{\"mode\":\"exclusive\"}", W_BUSY },
	{ IPC_PHASE, "{\"phase\":\"timing\"}", W_BUSY },
	{ IPC_FATAL, "{\"message\":\"cuda context lost\"}", W_STOPPING },
};

static void
test_every_worker_type(void **state)
{
	unsigned char buf[512];
	struct ipc_msg msg;
	char why[256];
	json_t *want;
	size_t i, n;
	ssize_t rc;

	(void)state;
	for (i = 0; i < sizeof sent_by_worker / sizeof sent_by_worker[0]; i++) {
		n = good_frame(buf, sent_by_worker[i].type, sent_by_worker[i].body);
		rc = ipc_decode(buf, n, MAX_LEN, sent_by_worker[i].state, &msg, why,
		    sizeof why);
		if (rc != (ssize_t)n)
			fail_msg("%s: expected %zu, got %zd (%s)",
			    ipc_type_name(sent_by_worker[i].type), n, rc, why);
		assert_int_equal(msg.type, sent_by_worker[i].type);
		want = json_loads(sent_by_worker[i].body, 0, NULL);
		assert_true(json_equal(msg.payload, want));
		json_decref(want);
		json_decref(msg.payload);
	}
}

/* A frame followed by the next: only the first is consumed. */
static void
test_back_to_back(void **state)
{
	unsigned char buf[256];
	struct ipc_msg msg;
	char why[256];
	size_t n1, n2;
	ssize_t rc;

	(void)state;
	n1 = good_frame(buf, IPC_LOG, "{\"level\":4,\"message\":\"a\"}");
	n2 = good_frame(buf + n1, IPC_RESULT, "{\"job\":1,\"result\":{}}");
	rc = ipc_decode(buf, n1 + n2, MAX_LEN, W_BUSY, &msg, why, sizeof why);
	assert_int_equal(rc, n1);
	assert_int_equal(msg.type, IPC_LOG);
	json_decref(msg.payload);
	rc = ipc_decode(buf + n1, n2, MAX_LEN, W_BUSY, &msg, why, sizeof why);
	assert_int_equal(rc, n2);
	assert_int_equal(msg.type, IPC_RESULT);
	json_decref(msg.payload);
}

/* The frames the parent sends, and the worker's reader of them. */
static void
test_frame_roundtrip(void **state)
{
	static const unsigned int types[] = { IPC_JOB, IPC_GRANTED, IPC_BYE, IPC_HELLO };
	unsigned int type;
	json_t *payload, *got;
	char why[256];
	size_t i, len;
	char *frame;
	uint32_t plen;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	for (i = 0; i < sizeof types / sizeof types[0]; i++) {
		payload = json_pack("{s:I, s:s}", "job", (json_int_t)i, "mode", "shared");
		frame = ipc_frame(types[i], payload, &len);
		assert_non_null(frame);
		assert_int_equal(ipc_header_decode((unsigned char *)frame, MAX_LEN, &type,
		    &plen, why, sizeof why), 0);
		assert_int_equal(type, types[i]);
		assert_int_equal(plen + IPC_HEADER_LEN, len);
		free(frame);
		assert_int_equal(ipc_send(sv[0], types[i], payload), 0);
		assert_int_equal(ipc_recv(sv[1], MAX_LEN, &type, &got, why, sizeof why), 0);
		assert_int_equal(type, types[i]);
		assert_true(json_equal(got, payload));
		json_decref(got);
		json_decref(payload);
	}
	close(sv[0]);
	close(sv[1]);
}

/* --- truncated */

static void
test_truncated(void **state)
{
	unsigned char buf[256];
	struct ipc_msg msg;
	char why[256];
	size_t i, n;
	ssize_t rc;

	(void)state;
	n = good_frame(buf, IPC_RESULT, "{\"job\":1,\"result\":{\"x\":1}}");
	for (i = 0; i < n; i++) {
		rc = ipc_decode(buf, i, MAX_LEN, W_BUSY, &msg, why, sizeof why);
		if (rc != 0)
			fail_msg("%zu of %zu bytes: expected 0, got %zd (%s)", i, n, rc, why);
		assert_null(msg.payload);
		/* Until the header is whole it asks for the header, then the frame. */
		assert_int_equal(msg.need, i < IPC_HEADER_LEN ? IPC_HEADER_LEN : n);
	}
}

/* A peer that hangs up mid-frame: the worker's reader says so. */
static void
test_recv_truncated(void **state)
{
	unsigned char buf[256];
	unsigned int type;
	json_t *got = NULL;
	char why[256] = "";
	size_t n;
	int sv[2];

	(void)state;
	n = good_frame(buf, IPC_JOB, "{\"job\":1,\"request\":{}}");
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[0], buf, n - 3), (ssize_t)(n - 3));
	close(sv[0]);
	assert_int_equal(ipc_recv(sv[1], MAX_LEN, &type, &got, why, sizeof why), -EPIPE);
	assert_null(got);
	assert_non_null(strstr(why, "reading a JOB payload"));
	close(sv[1]);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[0], buf, 5), 5);
	close(sv[0]);
	assert_int_equal(ipc_recv(sv[1], MAX_LEN, &type, &got, why, sizeof why), -EPIPE);
	assert_non_null(strstr(why, "reading a frame header"));
	close(sv[1]);
}

/* --- oversized and overflowing lengths */

static void
test_oversized(void **state)
{
	unsigned char buf[64];

	(void)state;
	/* One byte over: refused from the header alone, payload not waited for. */
	raw_frame(buf, IPC_MAGIC, IPC_VERSION, IPC_RESULT, MAX_LEN + 1, NULL);
	expect_error(buf, IPC_HEADER_LEN, MAX_LEN, W_BUSY, -EMSGSIZE,
	    "RESULT message of 4097 bytes exceeds the limit of 4096 bytes");
	/* Exactly the limit is allowed: it waits for the payload. */
	{
		struct ipc_msg msg;
		char why[256];

		raw_frame(buf, IPC_MAGIC, IPC_VERSION, IPC_RESULT, MAX_LEN, NULL);
		assert_int_equal(ipc_decode(buf, IPC_HEADER_LEN, MAX_LEN, W_BUSY, &msg, why,
		    sizeof why), 0);
		assert_int_equal(msg.need, IPC_HEADER_LEN + MAX_LEN);
	}
}

/*
 * A length near 2^32 with no configured limit in the way: the hard cap
 * refuses it, so len + 1 (ipc_recv's buffer) and header + len cannot wrap.
 */
static void
test_length_overflow(void **state)
{
	static const uint32_t lens[] = { UINT32_MAX, UINT32_MAX - IPC_HEADER_LEN + 1,
	    IPC_MAX_PAYLOAD + 1 };
	unsigned char buf[64];
	unsigned int type;
	uint32_t len;
	json_t *got = NULL;
	char why[256];
	size_t i;
	int sv[2];

	(void)state;
	for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		raw_frame(buf, IPC_MAGIC, IPC_VERSION, IPC_LOG, lens[i], NULL);
		expect_error(buf, IPC_HEADER_LEN, SIZE_MAX, W_IDLE, -EMSGSIZE,
		    "exceeds the limit of 1073741824 bytes");
		assert_int_equal(ipc_header_decode(buf, SIZE_MAX, &type, &len, why,
		    sizeof why), -EMSGSIZE);
	}
	/* The worker's reader too, before it allocates anything. */
	raw_frame(buf, IPC_MAGIC, IPC_VERSION, IPC_JOB, UINT32_MAX, NULL);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[0], buf, IPC_HEADER_LEN), IPC_HEADER_LEN);
	assert_int_equal(ipc_recv(sv[1], SIZE_MAX, &type, &got, why, sizeof why), -EMSGSIZE);
	assert_null(got);
	close(sv[0]);
	close(sv[1]);
}

/* --- wrong type for the state */

static void
test_wrong_state(void **state)
{
	static const enum worker_state states[] = { W_STARTING, W_IDLE, W_BUSY,
	    W_LOCK_WAIT, W_STOPPING, W_DOWN };
	/* The protocol's table, written out: proc.c's handlers rely on it. */
	static const char *const accepts[] = {
		[W_STARTING] = "HELLO LOG FATAL",
		[W_IDLE] = "LOG",
		[W_BUSY] = "RESULT LOG LOCK PHASE FATAL",
		[W_LOCK_WAIT] = "LOG",
		[W_STOPPING] = "LOG FATAL",
		[W_DOWN] = "",
	};
	unsigned char buf[256];
	struct ipc_msg msg;
	char why[256], word[32], expected[64];
	const char *name;
	unsigned int type;
	size_t i, n;
	ssize_t rc;

	(void)state;
	for (i = 0; i < sizeof states / sizeof states[0]; i++) {
		for (type = 1; type < IPC__TYPE_COUNT; type++) {
			name = ipc_type_name(type);
			n = good_frame(buf, type, "{}");
			rc = ipc_decode(buf, n, MAX_LEN, states[i], &msg, why, sizeof why);
			/* a whole word of the list: LOG must not match in LOCK */
			snprintf(expected, sizeof expected, " %s ", accepts[states[i]]);
			snprintf(word, sizeof word, " %s ", name);
			if (strstr(expected, word) != NULL) {
				if (rc != (ssize_t)n)
					fail_msg("%s while %s: expected it accepted, got %zd (%s)",
					    name, ipc_state_name(states[i]), rc, why);
				assert_true(ipc_allowed(states[i], type));
				json_decref(msg.payload);
				continue;
			}
			assert_false(ipc_allowed(states[i], type));
			if (rc != -EPERM)
				fail_msg("%s while %s: expected -EPERM, got %zd", name,
				    ipc_state_name(states[i]), rc);
			snprintf(expected, sizeof expected, "%s is not allowed while %s", name,
			    ipc_state_name(states[i]));
			if (strcmp(why, expected) != 0)
				fail_msg("reason '%s', expected '%s'", why, expected);
			/* refused from the header alone */
			assert_int_equal(ipc_decode(buf, IPC_HEADER_LEN, MAX_LEN, states[i],
			    &msg, why, sizeof why), -EPERM);
		}
	}
	assert_false(ipc_allowed((enum worker_state)99, IPC_LOG));
	assert_string_equal(ipc_state_name((enum worker_state)99), "invalid");
}

/* --- garbage */

static void
test_bad_header(void **state)
{
	unsigned char buf[64];

	(void)state;
	raw_frame(buf, 0x48545450u, IPC_VERSION, IPC_LOG, 2, "{}");	/* "HTTP" */
	expect_error(buf, 14, MAX_LEN, W_IDLE, -EPROTO, "bad frame magic 0x48545450");
	raw_frame(buf, IPC_MAGIC, IPC_VERSION + 1, IPC_LOG, 2, "{}");
	expect_error(buf, 14, MAX_LEN, W_IDLE, -EPROTO, "protocol version 2, expected 1");
	raw_frame(buf, IPC_MAGIC, IPC_VERSION, 0, 2, "{}");
	expect_error(buf, 14, MAX_LEN, W_IDLE, -EPROTO, "unknown message type 0");
	raw_frame(buf, IPC_MAGIC, IPC_VERSION, IPC__TYPE_COUNT, 2, "{}");
	expect_error(buf, 14, MAX_LEN, W_IDLE, -EPROTO, "unknown message type 10");
	raw_frame(buf, IPC_MAGIC, IPC_VERSION, 0xffff, 2, "{}");
	expect_error(buf, 14, MAX_LEN, W_IDLE, -EPROTO, "unknown message type 65535");
	/* A bad header wins over a length that is also too long. */
	raw_frame(buf, 0, IPC_VERSION, IPC_LOG, UINT32_MAX, NULL);
	expect_error(buf, IPC_HEADER_LEN, MAX_LEN, W_IDLE, -EPROTO, "bad frame magic");
	assert_string_equal(ipc_type_name(0), "invalid");
	assert_string_equal(ipc_type_name(IPC__TYPE_COUNT), "invalid");
	assert_string_equal(ipc_type_name(IPC_PHASE), "PHASE");
}

static void
test_bad_payload(void **state)
{
	static const struct {
		const char *body;
		const char *word;
	} cases[] = {
		{ "", "empty payload, expected a JSON object" },
		{ "[1,2]", "payload is not a JSON object" },
		/* jansson refuses a bare scalar itself */
		{ "\"text\"", "payload is not JSON: '[' or '{' expected" },
		{ "42", "payload is not JSON: '[' or '{' expected" },
		{ "null", "payload is not JSON: '[' or '{' expected" },
		{ "{\"level\":1", "payload is not JSON" },
		{ "{\"a\":1}{\"b\":2}", "payload is not JSON" },
		{ "{\"a\":1,\"a\":2}", "duplicate object key" },
		{ "{\"a\":\"\xff\xfe\"}", "payload is not JSON" },
		{ "not json at all", "payload is not JSON" },
	};
	unsigned char buf[256];
	size_t i, n;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		n = good_frame(buf, IPC_LOG, cases[i].body);
		expect_error(buf, n, MAX_LEN, W_IDLE, -EPROTO, cases[i].word);
	}
	/* A NUL inside the payload: the length says more than the string. */
	n = raw_frame(buf, IPC_MAGIC, IPC_VERSION, IPC_LOG, 4, "{}");
	buf[n] = '\0';
	buf[n + 1] = ' ';
	expect_error(buf, n + 2, MAX_LEN, W_IDLE, -EPROTO, "payload is not JSON");
}

/* The worker's reader refuses what the parent's does, with the same words. */
static void
test_recv_garbage(void **state)
{
	unsigned char buf[64];
	unsigned int type;
	json_t *got = NULL;
	char why[256] = "";
	size_t n;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	n = good_frame(buf, IPC_JOB, "[]");
	assert_int_equal(write(sv[0], buf, n), (ssize_t)n);
	assert_int_equal(ipc_recv(sv[1], MAX_LEN, &type, &got, why, sizeof why), -EPROTO);
	assert_null(got);
	assert_string_equal(why, "payload is not a JSON object");
	n = raw_frame(buf, IPC_MAGIC, 7, IPC_JOB, 2, "{}");
	assert_int_equal(write(sv[0], buf, n), (ssize_t)n);
	assert_int_equal(ipc_recv(sv[1], MAX_LEN, &type, &got, why, sizeof why), -EPROTO);
	assert_string_equal(why, "protocol version 7, expected 1");
	close(sv[0]);
	close(sv[1]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_worker_type),
		cmocka_unit_test(test_back_to_back),
		cmocka_unit_test(test_frame_roundtrip),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_recv_truncated),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_length_overflow),
		cmocka_unit_test(test_wrong_state),
		cmocka_unit_test(test_bad_header),
		cmocka_unit_test(test_bad_payload),
		cmocka_unit_test(test_recv_garbage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
