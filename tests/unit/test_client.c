/*
 * test_client.c -- unit tests of the client library (kgymctl/client.c),
 * which kgymctl and bench/control share (cmocka).
 *
 * A thread plays kgymd on a temporary Unix socket: it accepts one
 * connection, reads what the client sends, and writes a scripted answer --
 * an event before the reply, a line that is not JSON, a reply to another
 * id, or nothing at all before closing.  The client must match replies to
 * its requests, hand everything else to the caller, and turn each fault
 * into its documented -errno with a cause.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"

static char sock_dir[] = "/tmp/kgym-test-client.XXXXXX";
static char sock_path[sizeof(sock_dir) + 16];

struct server {
	int lfd;
	const char *answer;	/* written after the first request line */
	char request[1024];	/* that line, as received */
};

static void *
server_main(void *arg)
{
	struct server *s = arg;
	size_t len = 0;
	ssize_t n;
	int fd;

	if ((fd = accept(s->lfd, NULL, NULL)) < 0)
		return NULL;
	while (len < sizeof(s->request) - 1 && memchr(s->request, '\n', len) == NULL) {
		n = read(fd, s->request + len, sizeof(s->request) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	s->request[len] = '\0';
	if (s->answer != NULL && write(fd, s->answer, strlen(s->answer)) < 0)
		s->request[0] = '\0';
	close(fd);
	return NULL;
}

static void
server_start(struct server *s, pthread_t *th, const char *answer)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	memset(s, 0, sizeof *s);
	s->answer = answer;
	unlink(sock_path);
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", sock_path);
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->lfd >= 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&sun, sizeof sun), 0);
	assert_int_equal(listen(s->lfd, 1), 0);
	assert_int_equal(pthread_create(th, NULL, server_main, s), 0);
}

static void
server_join(struct server *s, pthread_t th)
{
	pthread_join(th, NULL);
	close(s->lfd);
}

static void
count_other(json_t *msg, void *arg)
{
	(*(int *)arg)++;
	assert_true(client_msg_is_event(msg));
}

/* A reply after an event: the event goes to on_other, the reply back. */
static void
test_call(void **state)
{
	struct server s;
	pthread_t th;
	struct client *c;
	json_t *reply = NULL, *args, *req;
	char *cause = NULL;
	int others = 0;

	server_start(&s, &th, "{\"v\":1,\"event\":\"result\",\"id\":1}\n"
	    "{\"v\":1,\"id\":1,\"ok\":true,\"version\":\"x\"}\n");
	c = client_connect(sock_path, &cause);
	assert_non_null(c);
	assert_int_equal(client_peer_pid(c), getpid());
	args = json_pack("{s:s}", "task_id", "t-1");
	assert_int_equal(client_call(c, "status", args, count_other, &others, &reply,
	    &cause), 0);
	json_decref(args);
	assert_int_equal(others, 1);
	assert_true(client_msg_ok(reply));
	assert_int_equal(client_msg_id(reply), 1);
	assert_string_equal(json_string_value(json_object_get(reply, "version")), "x");
	json_decref(reply);
	client_free(c);
	server_join(&s, th);

	/* What went on the wire: one protocol v1 line, the args merged in. */
	req = json_loads(s.request, JSON_DISABLE_EOF_CHECK, NULL);
	assert_non_null(req);
	assert_int_equal(json_integer_value(json_object_get(req, "v")), CLIENT_PROTOCOL_VERSION);
	assert_int_equal(json_integer_value(json_object_get(req, "id")), 1);
	assert_string_equal(json_string_value(json_object_get(req, "op")), "status");
	assert_string_equal(json_string_value(json_object_get(req, "task_id")), "t-1");
	json_decref(req);
}

/* An error reply ends the wait too, with its code and message readable. */
static void
test_error_reply(void **state)
{
	struct server s;
	pthread_t th;
	struct client *c;
	json_t *reply = NULL;
	char *cause = NULL;

	server_start(&s, &th, "{\"v\":1,\"id\":1,\"ok\":false,\"error\":"
	    "{\"code\":\"not_found\",\"message\":\"no task\"}}\n");
	c = client_connect(sock_path, &cause);
	assert_non_null(c);
	assert_int_equal(client_call(c, "status", NULL, NULL, NULL, &reply, &cause), 0);
	assert_false(client_msg_ok(reply));
	assert_string_equal(client_error_code(reply), "not_found");
	assert_string_equal(client_error_message(reply), "no task");
	json_decref(reply);
	client_free(c);
	server_join(&s, th);
}

/* A line that is not a protocol object: -EPROTO, with a cause. */
static void
test_not_json(void **state)
{
	struct server s;
	pthread_t th;
	struct client *c;
	json_t *reply = NULL;
	char *cause = NULL;

	server_start(&s, &th, "this is not json\n");
	c = client_connect(sock_path, &cause);
	assert_non_null(c);
	assert_int_equal(client_call(c, "hello", NULL, NULL, NULL, &reply, &cause), -EPROTO);
	assert_non_null(cause);
	assert_null(reply);
	free(cause);
	client_free(c);
	server_join(&s, th);
}

/* The daemon closes before answering: -ECONNRESET. */
static void
test_closed(void **state)
{
	struct server s;
	pthread_t th;
	struct client *c;
	json_t *reply = NULL;
	char *cause = NULL;

	server_start(&s, &th, NULL);
	c = client_connect(sock_path, &cause);
	assert_non_null(c);
	assert_int_equal(client_call(c, "hello", NULL, NULL, NULL, &reply, &cause),
	    -ECONNRESET);
	assert_null(reply);
	free(cause);
	client_free(c);
	server_join(&s, th);
}

/* No daemon: NULL, and the cause names the socket. */
static void
test_no_daemon(void **state)
{
	char *cause = NULL;
	char missing[sizeof(sock_dir) + 16];

	snprintf(missing, sizeof missing, "%s/none.sock", sock_dir);
	assert_null(client_connect(missing, &cause));
	assert_non_null(cause);
	assert_non_null(strstr(cause, missing));
	free(cause);
}

static int
setup(void **state)
{
	if (mkdtemp(sock_dir) == NULL)
		return -1;
	snprintf(sock_path, sizeof sock_path, "%s/s.sock", sock_dir);
	return 0;
}

static int
teardown(void **state)
{
	unlink(sock_path);
	rmdir(sock_dir);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_call),
		cmocka_unit_test(test_error_reply),
		cmocka_unit_test(test_not_json),
		cmocka_unit_test(test_closed),
		cmocka_unit_test(test_no_daemon),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
