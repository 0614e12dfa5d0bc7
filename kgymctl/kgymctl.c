/*
 * kgymctl.c -- the command-line client of kgymd: options, commands, exit
 * status.
 *
 * Each command is one protocol request (submit may be several batches on
 * one connection) whose reply is shown by output.c, or printed raw with
 * --json.  Tasks that end are followed through a `struct watch`, shared by
 * `submit --wait` and `wait`: it prints a line per task for scripts (with
 * --json, one JSON object per task), or a progress bar and a table when a
 * person is watching a terminal, then a summary of a batch on stderr that
 * counts incorrect tasks apart from failed ones.
 *
 * Exit status (kgymctl(1)): 0 success; 1 a task failed, was cancelled or
 * incorrect, some were rejected, or were still pending; 2 usage, connection
 * or protocol errors, an ok:false reply, or every submitted task rejected.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "client.h"
#include "output.h"
#include "watch.h"

#define KGYMCTL_DEFAULT_SOCKET "/run/kgym/kgymd.sock"
#define KGYMCTL_BATCH 1000 /* tasks per submit request */

enum {
	KGYMCTL_OK = 0,
	KGYMCTL_TASK_FAILED = 1,
	KGYMCTL_ERROR = 2,
};

/* The one piece of global state: what the options said. */
static struct {
	const char *socket;
	bool json;
} opts;

struct command {
	const char *name;
	const char *synopsis; /* arguments after the name */
	const char *help;
	int (*run)(const struct command *cmd, int argc, char **argv);
	const char *op;		       /* the request, for the generic runners */
	void (*show)(json_t *reply);   /* human view of an ok reply */
	int (*verdict)(json_t *reply); /* exit status of an ok reply; NULL: 0 */
};

static int cmd_plain(const struct command *cmd, int argc, char **argv);
static int cmd_task(const struct command *cmd, int argc, char **argv);
static int cmd_list(const struct command *cmd, int argc, char **argv);
static int cmd_submit(const struct command *cmd, int argc, char **argv);
static int cmd_wait(const struct command *cmd, int argc, char **argv);
static int verdict_status(json_t *reply);
static int verdict_result(json_t *reply);

/* clang-format off */
static const struct command commands[] = {
	{ "hello", "", "daemon version, protocol versions and plugins",
	    cmd_plain, "hello", output_show_hello, NULL },
	{ "health", "", "is kgymd healthy; queued and running counts",
	    cmd_plain, "health", output_show_health, NULL },
	{ "submit", "[--wait] [--priority high|normal|low] FILE...",
	    "submit the tasks in FILEs ('-': stdin)",
	    cmd_submit, "submit", NULL, NULL },
	{ "wait", "[--timeout SEC] ID...", "wait for tasks to end and show how they did",
	    cmd_wait, "wait", NULL, NULL },
	{ "status", "ID", "a task's state and timestamps",
	    cmd_task, "status", output_show_status, verdict_status },
	{ "result", "ID", "the result of a task that ended",
	    cmd_task, "result", output_show_result, verdict_result },
	{ "cancel", "ID", "cancel a queued or running task",
	    cmd_task, "cancel", output_show_cancel, NULL },
	{ "list", "[--state S] [--limit N]", "recent tasks, newest first",
	    cmd_list, "list", output_show_list, NULL },
	{ "workers", "", "GPUs, their workers and timing locks",
	    cmd_plain, "workers", output_show_workers, NULL },
	{ "plugins", "", "loaded plugins and refused ones",
	    cmd_plain, "plugins", output_show_plugins, NULL },
	{ "stats", "", "counts, throughput, queue depth, latencies",
	    cmd_plain, "stats", output_show_stats, NULL },
	{ "drain", "", "stop taking tasks, finish queued ones (admin)",
	    cmd_plain, "drain", output_show_drain, NULL },
	{ "shutdown", "", "stop kgymd (admin)",
	    cmd_plain, "shutdown", output_show_shutdown, NULL },
	{ NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};
/* clang-format on */

/* ------------------------------------------------------------ usage */

static void
command_usage(const struct command *cmd, FILE *fp)
{
	fprintf(fp, "usage: kgymctl [-s PATH] [--json] %s%s%s\n", cmd->name,
	    cmd->synopsis[0] ? " " : "", cmd->synopsis);
	fprintf(fp, "%s\n", cmd->help);
}

static void
usage(FILE *fp)
{
	const struct command *cmd;
	char left[128];

	fputs("usage: kgymctl [-s PATH] [--json] [-h] [-V] COMMAND [ARGS]\n\n"
	      "Commands:\n",
	    fp);
	for (cmd = commands; cmd->name != NULL; cmd++) {
		snprintf(left, sizeof left, "%s%s%s", cmd->name, cmd->synopsis[0] ? " " : "",
		    cmd->synopsis);
		if (strlen(left) > 30)
			fprintf(fp, "  %s\n  %-30s  %s\n", left, "", cmd->help);
		else
			fprintf(fp, "  %-30s  %s\n", left, cmd->help);
	}
	fputs("\nOptions (-s, --json and -h may also follow COMMAND):\n"
	      "  -s, --socket PATH   kgymd's control socket (default: $KGYM_SOCKET,\n"
	      "                      else " KGYMCTL_DEFAULT_SOCKET ")\n"
	      "      --json          submit, wait: one JSON object per task and line;\n"
	      "                      other commands: the reply line as received\n"
	      "  -h, --help          show this help\n"
	      "  -V, --version       show the version\n"
	      "\nExit status:\n"
	      "  0  success\n"
	      "  1  a task failed, was cancelled or incorrect, some tasks were\n"
	      "     rejected, or tasks were still pending when wait timed out\n"
	      "  2  usage, connection or protocol error, kgymd answered an error,\n"
	      "     or every submitted task was rejected\n",
	    fp);
}

static void usage_error(const struct command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

static void
usage_error(const struct command *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("kgymctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (cmd != NULL)
		command_usage(cmd, stderr);
	else
		fputs("Try 'kgymctl --help'.\n", stderr);
	exit(KGYMCTL_ERROR);
}

/* ------------------------------------------------------------ options */

#define COMMON_SHORTOPTS "hs:"
/* clang-format off */
#define COMMON_LONGOPTS						\
	{ "help", no_argument, NULL, 'h' },			\
	{ "json", no_argument, NULL, 'j' },			\
	{ "socket", required_argument, NULL, 's' }
/* clang-format on */

/* The options every command also takes after its name; exits on -h or '?'. */
static void
common_option(const struct command *cmd, int ch)
{
	switch (ch) {
	case 'h':
		command_usage(cmd, stdout);
		exit(KGYMCTL_OK);
	case 'j':
		opts.json = true;
		return;
	case 's':
		opts.socket = optarg;
		return;
	default:
		/* getopt has said what was wrong. */
		command_usage(cmd, stderr);
		exit(KGYMCTL_ERROR);
	}
}

/* Parse only the common options; returns the index of the first operand. */
static int
command_options(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS,
		{ 0 },
	};
	int ch;

	while ((ch = getopt_long(argc, argv, COMMON_SHORTOPTS, longopts, NULL)) != -1)
		common_option(cmd, ch);
	return optind;
}

static long
parse_long(const struct command *cmd, const char *what, const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		usage_error(
		    cmd, "%s must be an integer from %ld to %ld, not '%s'", what, min, max, s);
	return v;
}

/* ------------------------------------------------------------ requests */

/* Report a failure of the client layer; returns KGYMCTL_ERROR. */
static int
fail_cause(char *cause)
{
	output_warnx("%s", cause != NULL ? cause : "out of memory");
	free(cause);
	return KGYMCTL_ERROR;
}

static struct client *
session_open(void)
{
	struct client *c;
	char *cause = NULL;

	c = client_connect(opts.socket, &cause);
	if (c == NULL) {
		output_warnx("%s (is kgymd running? set -s or KGYM_SOCKET)",
		    cause != NULL ? cause : "out of memory");
		free(cause);
		return NULL;
	}
	if (opts.json)
		client_set_tap(c, output_json_line, NULL);
	return c;
}

/* Is the reply ok?  If not, say why on stderr. */
static bool
reply_check(json_t *reply)
{
	if (client_msg_ok(reply))
		return true;
	output_error(client_error_code(reply), client_error_message(reply));
	return false;
}

/*
 * One request on a connection of its own.  Consumes args (may be NULL).
 * Returns KGYMCTL_OK with the ok reply in ret_reply, or KGYMCTL_ERROR after
 * saying what went wrong.
 */
static int
call_once(const char *op, json_t *args, json_t **ret_reply)
{
	struct client *c;
	json_t *reply;
	char *cause = NULL;
	int r;

	c = session_open();
	if (c == NULL) {
		json_decref(args);
		return KGYMCTL_ERROR;
	}
	r = client_call(c, op, args, NULL, NULL, &reply, &cause);
	json_decref(args);
	client_free(c);
	if (r < 0)
		return fail_cause(cause);
	if (!reply_check(reply)) {
		json_decref(reply);
		return KGYMCTL_ERROR;
	}
	*ret_reply = reply;
	return KGYMCTL_OK;
}

/* ------------------------------------------------------------ task files */

/* The whole of fp, NUL-terminated (not counted in ret_len). */
static int
read_all(FILE *fp, char **ret_buf, size_t *ret_len)
{
	char *buf = NULL, *p;
	size_t len = 0, cap = 0, n;

	for (;;) {
		if (cap - len < 65536) {
			cap = cap ? cap * 2 : 131072;
			p = realloc(buf, cap);
			if (p == NULL) {
				free(buf);
				return -ENOMEM;
			}
			buf = p;
		}
		n = fread(buf + len, 1, cap - len, fp);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(fp)) {
		free(buf);
		return -EIO;
	}
	/* The last read left room: terminate for the string functions. */
	buf[len] = '\0';
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

static int
task_append(json_t *into, json_t *task, const char *name, size_t line, char **ret_cause)
{
	if (!json_is_object(task)) {
		if (asprintf(ret_cause, "%s:%zu: a task must be a JSON object", name, line) < 0)
			*ret_cause = NULL;
		return -EINVAL;
	}
	return json_array_append(into, task) < 0 ? -ENOMEM : 0;
}

/* JSON lines: one task object per non-blank line. */
static int
tasks_from_lines(const char *name, const char *buf, size_t len, json_t *into, char **ret_cause)
{
	const char *p = buf, *end = buf + len, *nl;
	json_error_t jerr;
	size_t lineno = 0, n;
	json_t *task;
	int r;

	for (; p < end; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		lineno++;
		n = (size_t)(nl - p);
		if (strspn(p, " \t\r") >= n)
			continue;
		task = json_loadb(p, n, 0, &jerr);
		if (task == NULL) {
			if (asprintf(ret_cause, "%s:%zu: %s", name, lineno, jerr.text) < 0)
				*ret_cause = NULL;
			return -EINVAL;
		}
		r = task_append(into, task, name, lineno, ret_cause);
		json_decref(task);
		if (r < 0)
			return r;
	}
	return 0;
}

/* One task object, an array of them, or JSON lines: tell them apart. */
static int
tasks_from_text(const char *name, const char *buf, size_t len, json_t *into, char **ret_cause)
{
	json_error_t jerr;
	json_t *doc, *task;
	size_t i;
	int r = 0;

	doc = json_loadb(buf, len, 0, &jerr);
	if (doc == NULL) {
		/* A whole value followed by more: several values, i.e. JSON lines. */
		if (json_error_code(&jerr) == json_error_end_of_input_expected)
			return tasks_from_lines(name, buf, len, into, ret_cause);
		if (asprintf(ret_cause, "%s:%d: %s", name, jerr.line, jerr.text) < 0)
			*ret_cause = NULL;
		return -EINVAL;
	}
	if (json_is_array(doc)) {
		json_array_foreach(doc, i, task) {
			if (!json_is_object(task)) {
				if (asprintf(ret_cause,
					"%s: element %zu of the array is not "
					"a task object",
					name, i) < 0)
					*ret_cause = NULL;
				r = -EINVAL;
				break;
			}
			if (json_array_append(into, task) < 0) {
				r = -ENOMEM;
				break;
			}
		}
	} else {
		r = task_append(into, doc, name, 1, ret_cause);
	}
	json_decref(doc);
	return r;
}

static int
tasks_load(const char *path, json_t *into, char **ret_cause)
{
	const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
	size_t len, before = json_array_size(into);
	FILE *fp;
	char *buf;
	int r;

	fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	if (fp == NULL) {
		r = -errno;
		if (asprintf(ret_cause, "%s: %s", name, strerror(-r)) < 0)
			*ret_cause = NULL;
		return r;
	}
	r = read_all(fp, &buf, &len);
	if (fp != stdin)
		fclose(fp);
	if (r < 0) {
		if (asprintf(ret_cause, "%s: %s", name, strerror(-r)) < 0)
			*ret_cause = NULL;
		return r;
	}
	/* Blank input parses as an error; say what is really wrong with it. */
	if (strspn(buf, " \t\r\n") >= len)
		r = 0;
	else
		r = tasks_from_text(name, buf, len, into, ret_cause);
	free(buf);
	if (r == 0 && json_array_size(into) == before) {
		if (asprintf(ret_cause, "%s: no tasks", name) < 0)
			*ret_cause = NULL;
		r = -ENODATA;
	}
	return r;
}

/* ------------------------------------------------------------ submit */

struct batch {
	json_int_t id;
	size_t first; /* index of its first task among all */
	bool done;    /* nothing more will come for it */
};

struct submit {
	json_t *tasks;
	bool wait;
	struct batch *batches;
	size_t nbatches; /* sent so far */
	size_t nrejected;
	bool failed; /* an error reply: exit 2 */
	struct watch watch;
};

static struct batch *
submit_batch(struct submit *s, json_int_t id)
{
	size_t i;

	for (i = 0; i < s->nbatches; i++)
		if (s->batches[i].id == id)
			return &s->batches[i];
	return NULL;
}

/* The first reply to a batch: which of its tasks were taken. */
static void
submit_accepted(struct submit *s, struct batch *b, json_t *reply)
{
	json_t *item, *err, *rec, *line;
	size_t i, naccepted = 0;
	json_int_t index;
	const char *id;
	bool existing;

	json_array_foreach(json_object_get(reply, "accepted"), i, item) {
		id = output_str(item, "task_id");
		existing = json_is_true(json_object_get(item, "existing"));
		naccepted++;
		if (s->wait) {
			rec = watch_add(&s->watch, id, output_str(item, "state"));
			if (rec != NULL && existing)
				json_object_set_new(rec, "existing", json_true());
		} else if (opts.json) {
			line = json_pack("{s:s, s:s, s:b}", "task_id", id, "state",
			    output_str(item, "state"), "existing", existing);
			print_json_object(line);
			json_decref(line);
		} else {
			printf("%s %s%s\n", id, output_str(item, "state"),
			    existing ? " (existing)" : "");
		}
		/* Idempotent ids: the task already there stands, result included. */
		if (existing && !opts.json)
			watch_note(&s->watch, "kgymctl: %s was submitted before: kgymd keeps "
			    "that task (%s)%s", id, output_str(item, "state"),
			    s->wait ? " and this is its earlier result" : ", not a new one");
	}
	json_array_foreach(json_object_get(reply, "rejected"), i, item) {
		err = json_object_get(item, "error");
		index = (json_int_t)b->first + json_integer_value(json_object_get(item, "index"));
		s->nrejected++;
		if (opts.json) {
			line = json_pack("{s:I, s:s, s:O}", "index", index, "state", "rejected",
			    "error", err);
			print_json_object(line);
			json_decref(line);
		}
		watch_note(&s->watch, "%" JSON_INTEGER_FORMAT " rejected: %s: %s", index,
		    output_str(err, "code"), output_str(err, "message"));
	}
	fflush(stdout);
	/* With nothing accepted there is nothing to wait for. */
	if (!s->wait || naccepted == 0)
		b->done = true;
	watch_draw(&s->watch);
}

/* Lines that are not the reply being awaited: events, final replies. */
static void
submit_other(json_t *msg, void *arg)
{
	struct submit *s = arg;
	struct batch *b;

	if (client_msg_is_event(msg)) {
		if (strcmp(output_str(msg, "event"), "result") == 0)
			watch_event(&s->watch, msg);
		return;
	}
	b = submit_batch(s, client_msg_id(msg));
	if (b == NULL || b->done)
		return;
	b->done = true;
	if (!reply_check(msg))
		s->failed = true;
}

static bool
submit_all_done(const struct submit *s)
{
	size_t i;

	for (i = 0; i < s->nbatches; i++)
		if (!s->batches[i].done)
			return false;
	return true;
}

/* Send one batch and wait for its reply (earlier batches' events meanwhile). */
static int
submit_send_batch(struct submit *s, struct client *c, size_t first)
{
	size_t n = json_array_size(s->tasks) - first, i;
	json_t *args, *slice, *reply;
	struct batch *b;
	char *cause = NULL;
	json_int_t id;
	int r;

	if (n > KGYMCTL_BATCH)
		n = KGYMCTL_BATCH;
	slice = json_array();
	for (i = 0; slice != NULL && i < n; i++)
		json_array_append(slice, json_array_get(s->tasks, first + i));
	args = json_pack("{s:o, s:b}", "tasks", slice, "wait", s->wait);
	if (args == NULL)
		return fail_cause(NULL);
	r = client_send(c, "submit", args, &id, &cause);
	json_decref(args);
	if (r < 0)
		return fail_cause(cause);
	b = &s->batches[s->nbatches++];
	b->id = id;
	b->first = first;
	b->done = false;
	r = client_await(c, id, submit_other, s, &reply, &cause);
	if (r < 0)
		return fail_cause(cause);
	if (!reply_check(reply)) {
		json_decref(reply);
		return KGYMCTL_ERROR;
	}
	submit_accepted(s, b, reply);
	json_decref(reply);
	return KGYMCTL_OK;
}

static int
submit_run(struct submit *s, struct client *c)
{
	size_t first, ntasks = json_array_size(s->tasks);
	char *cause = NULL;
	json_t *msg;
	int r;

	s->batches = calloc(ntasks / KGYMCTL_BATCH + 1, sizeof *s->batches);
	if (s->batches == NULL)
		return fail_cause(NULL);
	for (first = 0; first < ntasks; first += KGYMCTL_BATCH) {
		r = submit_send_batch(s, c, first);
		if (r != KGYMCTL_OK)
			return r;
	}
	while (!submit_all_done(s)) {
		r = client_read(c, &msg, &cause);
		if (r < 0)
			return fail_cause(cause);
		submit_other(msg, s);
		json_decref(msg);
	}
	watch_finish(&s->watch);
	if (s->wait)
		watch_summary(&s->watch, s->nrejected);
	if (s->failed || s->nrejected == ntasks)
		return KGYMCTL_ERROR;
	if (s->nrejected > 0 || s->watch.bad > 0)
		return KGYMCTL_TASK_FAILED;
	return KGYMCTL_OK;
}

static void
set_priority(json_t *tasks, const char *priority)
{
	json_t *task;
	size_t i;

	json_array_foreach(tasks, i, task)
		json_object_set_new(task, "priority", json_string(priority));
}

static int
cmd_submit(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS,
		{ "wait", no_argument, NULL, 'w' },
		{ "priority", required_argument, NULL, 'p' },
		{ 0 },
	};
	struct submit s = { 0 };
	const char *priority = NULL;
	struct client *c;
	bool interactive;
	char *cause = NULL;
	int ch, i, status;

	while ((ch = getopt_long(argc, argv, COMMON_SHORTOPTS "wp:", longopts, NULL)) != -1) {
		if (ch == 'w')
			s.wait = true;
		else if (ch == 'p')
			priority = optarg;
		else
			common_option(cmd, ch);
	}
	if (optind == argc)
		usage_error(cmd, "submit needs at least one task FILE ('-' for stdin)");
	if (priority != NULL && strcmp(priority, "high") != 0 && strcmp(priority, "normal") != 0 &&
	    strcmp(priority, "low") != 0)
		usage_error(cmd, "--priority must be high, normal or low, not '%s'", priority);

	s.tasks = json_array();
	if (s.tasks == NULL)
		return fail_cause(NULL);
	for (i = optind; i < argc; i++) {
		if (tasks_load(argv[i], s.tasks, &cause) < 0) {
			json_decref(s.tasks);
			return fail_cause(cause);
		}
	}
	if (priority != NULL)
		set_priority(s.tasks, priority);
	interactive = s.wait && isatty(STDOUT_FILENO) && json_array_size(s.tasks) > 1;
	if (watch_init(&s.watch, interactive, opts.json) < 0) {
		json_decref(s.tasks);
		return fail_cause(NULL);
	}
	c = session_open();
	/* --json: one line per task (submit_accepted, watch_event), not the raw lines. */
	if (c != NULL)
		client_set_tap(c, NULL, NULL);
	status = c != NULL ? submit_run(&s, c) : KGYMCTL_ERROR;
	client_free(c);
	watch_clear(&s.watch);
	free(s.batches);
	json_decref(s.tasks);
	return status;
}

/* ------------------------------------------------------------ wait */

static void
wait_other(json_t *msg, void *arg)
{
	struct watch *w = arg;

	if (client_msg_is_event(msg) && strcmp(output_str(msg, "event"), "result") == 0)
		watch_event(w, msg);
}

static json_int_t
parse_timeout_ms(const struct command *cmd, const char *s)
{
	char *end;
	double sec;

	errno = 0;
	sec = strtod(s, &end);
	/* Written so that NaN fails too. */
	if (errno != 0 || end == s || *end != '\0' || !(sec >= 0 && sec <= 1e9))
		usage_error(cmd, "--timeout must be a number of seconds >= 0, not '%s'", s);
	return (json_int_t)(sec * 1000 + 0.5);
}

static int
wait_run(struct watch *w, json_t *args)
{
	struct client *c;
	json_t *reply, *pending, *not_found;
	char *cause = NULL;
	int r, status;

	c = session_open();
	if (c == NULL)
		return KGYMCTL_ERROR;
	client_set_tap(c, NULL, NULL);	/* --json: one line per task, as submit */
	r = client_call(c, "wait", args, wait_other, w, &reply, &cause);
	client_free(c);
	if (r < 0)
		return fail_cause(cause);
	if (!reply_check(reply)) {
		json_decref(reply);
		watch_finish(w);
		return KGYMCTL_ERROR;
	}
	pending = json_object_get(reply, "pending");
	not_found = json_object_get(reply, "not_found");
	watch_mark(w, pending, "pending");
	watch_mark(w, not_found, "not found");
	watch_finish(w);
	watch_summary(w, 0);
	status = KGYMCTL_OK;
	if (w->bad > 0 || json_array_size(pending) > 0)
		status = KGYMCTL_TASK_FAILED;
	if (json_array_size(not_found) > 0)
		status = KGYMCTL_ERROR;
	json_decref(reply);
	return status;
}

static int
cmd_wait(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS,
		{ "timeout", required_argument, NULL, 't' },
		{ 0 },
	};
	json_int_t timeout_ms = -1;
	struct watch w;
	json_t *args, *ids;
	int ch, i, status;

	while ((ch = getopt_long(argc, argv, COMMON_SHORTOPTS "t:", longopts, NULL)) != -1) {
		if (ch == 't')
			timeout_ms = parse_timeout_ms(cmd, optarg);
		else
			common_option(cmd, ch);
	}
	if (optind == argc)
		usage_error(cmd, "wait needs at least one task ID");
	if (watch_init(&w, isatty(STDOUT_FILENO) && argc - optind > 1, opts.json) < 0)
		return fail_cause(NULL);
	ids = json_array();
	for (i = optind; ids != NULL && i < argc; i++) {
		json_array_append_new(ids, json_string(argv[i]));
		watch_add(&w, argv[i], "pending");
	}
	args = json_pack("{s:o}", "task_ids", ids);
	if (args != NULL && timeout_ms >= 0)
		json_object_set_new(args, "timeout_ms", json_integer(timeout_ms));
	status = args != NULL ? wait_run(&w, args) : fail_cause(NULL);
	json_decref(args);
	watch_clear(&w);
	return status;
}

/* ------------------------------------------------------------ verdicts */

static int
verdict_status(json_t *reply)
{
	const char *state = output_str(reply, "state");

	if (strcmp(state, "failed") == 0 || strcmp(state, "cancelled") == 0)
		return KGYMCTL_TASK_FAILED;
	return KGYMCTL_OK;
}

static int
verdict_result(json_t *reply)
{
	if (task_outcome(output_str(reply, "state"), json_object_get(reply, "result")) !=
	    OUTCOME_CORRECT)
		return KGYMCTL_TASK_FAILED;
	return KGYMCTL_OK;
}

/* ------------------------------------------------------------ runners */

static int
finish_reply(const struct command *cmd, json_t *reply)
{
	int status;

	if (!opts.json)
		cmd->show(reply);
	status = cmd->verdict != NULL ? cmd->verdict(reply) : KGYMCTL_OK;
	json_decref(reply);
	return status;
}

/* A command that takes no arguments. */
static int
cmd_plain(const struct command *cmd, int argc, char **argv)
{
	json_t *reply;
	int status;

	if (command_options(cmd, argc, argv) != argc)
		usage_error(cmd, "%s takes no arguments", cmd->name);
	status = call_once(cmd->op, NULL, &reply);
	if (status != KGYMCTL_OK)
		return status;
	return finish_reply(cmd, reply);
}

/* A command that takes one task ID. */
static int
cmd_task(const struct command *cmd, int argc, char **argv)
{
	json_t *reply, *args;
	int first, status;

	first = command_options(cmd, argc, argv);
	if (argc - first != 1)
		usage_error(cmd, "%s takes exactly one task ID", cmd->name);
	args = json_pack("{s:s}", "task_id", argv[first]);
	if (args == NULL)
		return fail_cause(NULL);
	status = call_once(cmd->op, args, &reply);
	if (status != KGYMCTL_OK)
		return status;
	return finish_reply(cmd, reply);
}

static int
cmd_list(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS,
		{ "state", required_argument, NULL, 'S' },
		{ "limit", required_argument, NULL, 'n' },
		{ 0 },
	};
	json_t *args, *reply;
	int ch, status;

	args = json_object();
	if (args == NULL)
		return fail_cause(NULL);
	while ((ch = getopt_long(argc, argv, COMMON_SHORTOPTS "n:", longopts, NULL)) != -1) {
		if (ch == 'S')
			json_object_set_new(args, "state", json_string(optarg));
		else if (ch == 'n')
			json_object_set_new(args, "limit",
			    json_integer(parse_long(cmd, "--limit", optarg, 1, 1000)));
		else
			common_option(cmd, ch);
	}
	if (optind != argc)
		usage_error(cmd, "list takes no arguments besides its options");
	status = call_once("list", args, &reply);
	if (status != KGYMCTL_OK)
		return status;
	return finish_reply(cmd, reply);
}

/* ------------------------------------------------------------ main */

static const struct command *
command_find(const char *name)
{
	const struct command *cmd;

	for (cmd = commands; cmd->name != NULL; cmd++)
		if (strcmp(cmd->name, name) == 0)
			return cmd;
	return NULL;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS,
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	const struct command *cmd;
	char prog[64];
	int ch;

	opts.socket = getenv("KGYM_SOCKET");
	if (opts.socket == NULL || opts.socket[0] == '\0')
		opts.socket = KGYMCTL_DEFAULT_SOCKET;

	/* '+': options after COMMAND belong to the command. */
	while ((ch = getopt_long(argc, argv, "+" COMMON_SHORTOPTS "V", longopts, NULL)) != -1) {
		switch (ch) {
		case 'h':
			usage(stdout);
			return KGYMCTL_OK;
		case 'V':
			printf("kgymctl %s (control protocol %d)\n", PACKAGE_VERSION,
			    CLIENT_PROTOCOL_VERSION);
			return KGYMCTL_OK;
		case 'j':
			opts.json = true;
			break;
		case 's':
			opts.socket = optarg;
			break;
		default:
			fputs("Try 'kgymctl --help'.\n", stderr);
			return KGYMCTL_ERROR;
		}
	}
	if (optind == argc)
		usage_error(NULL, "no command given");
	cmd = command_find(argv[optind]);
	if (cmd == NULL)
		usage_error(NULL, "unknown command '%s'", argv[optind]);

	/* The command parses its own options; getopt names it in messages. */
	argc -= optind;
	argv += optind;
	snprintf(prog, sizeof prog, "kgymctl %s", cmd->name);
	argv[0] = prog;
	optind = 0;
	return cmd->run(cmd, argc, argv);
}
