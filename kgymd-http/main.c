/*
 * main.c -- kgymd-http: start-up, signals, the event loop.
 *
 * kgymd-http [-Fnvh] [-f FILE]: read kgymd.conf's [kgymd] socket and [http]
 * section (conf.c), the token file (tokens.c), listen (server.c), connect
 * to kgymd (upstream.c) and run one libevent loop.  SIGTERM and SIGINT
 * stop it; tasks in flight are kgymd's and go on.  -n checks the
 * configuration and exits.
 */
#include "config.h"

#include <sys/resource.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "gateway.h"

#ifndef KGYM_SYSCONFDIR
#define KGYM_SYSCONFDIR "/usr/local/etc"
#endif

int gw_verbose;

void
gw_log(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	fprintf(stderr, "kgymd-http: %s\n", buf);
}

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: kgymd-http [-FnvVh] [-f FILE]\n"
	    "  -F       run in the foreground (kgymd-http always does; for symmetry with kgymd)\n"
	    "  -f FILE  configuration file (default %s/kgymd.conf)\n"
	    "  -n       check the configuration (and the token file) and exit\n"
	    "  -v, -V   print the version and exit\n"
	    "  -h       this help\n",
	    KGYM_SYSCONFDIR);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct event_base *base = arg;

	gw_log("stopping on signal %d; tasks in flight go on in kgymd", (int)sig);
	event_base_loopbreak(base);
}

/*
 * Every held request is a socket: thousands of synchronous /evaluate need
 * more descriptors than the usual soft limit of 1024.
 */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			gw_log("cannot raise the open file limit: %s", strerror(errno));
	}
}

int
main(int argc, char **argv)
{
	const char *path = KGYM_SYSCONFDIR "/kgymd.conf";
	struct event *ev_term = NULL, *ev_int = NULL;
	struct token_set *tokens = NULL;
	struct gw_config *config = NULL;
	struct event_base *base = NULL;
	bool check = false;
	char *cause = NULL;
	int ch, rc = 1;

	while ((ch = getopt(argc, argv, "Ff:nvVh")) != -1) {
		switch (ch) {
		case 'F':
			break;
		case 'f':
			path = optarg;
			break;
		case 'n':
			check = true;
			break;
		case 'v':
		case 'V':
			printf("kgymd-http %s\n", PACKAGE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (conf_load(path, &config, &cause) < 0) {
		fprintf(stderr, "%s\n",
		    cause != NULL ? cause : "cannot load the configuration");
		free(cause);
		return 1;
	}
	if (config->token_file != NULL &&
	    tokens_load(config->token_file, &tokens, &cause) < 0) {
		fprintf(stderr, "%s\n",
		    cause != NULL ? cause : "cannot load the token file");
		free(cause);
		conf_free(config);
		return 1;
	}
	if (check) {
		printf("configuration OK\n");
		tokens_free(tokens);
		conf_free(config);
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	if ((base = event_base_new()) == NULL) {
		gw_log("cannot create the event loop");
		goto out;
	}
	if (server_start(base, config, tokens, &cause) < 0) {
		gw_log("%s", cause != NULL ? cause : "cannot listen");
		free(cause);
		goto out;
	}
	if (up_init(base, config->socket, config->max_request_bytes) < 0 ||
	    coalesce_init(base) < 0) {
		gw_log("out of memory");
		goto out;
	}
	ev_term = evsignal_new(base, SIGTERM, on_signal, base);
	ev_int = evsignal_new(base, SIGINT, on_signal, base);
	if (ev_term == NULL || ev_int == NULL || evsignal_add(ev_term, NULL) < 0 ||
	    evsignal_add(ev_int, NULL) < 0) {
		gw_log("cannot install the signal handlers");
		goto out;
	}
	gw_log("kgymd-http %s: kgymd at %s, %zu token%s", PACKAGE_VERSION,
	    config->socket, tokens_count(tokens), tokens_count(tokens) == 1 ? "" : "s");
	event_base_dispatch(base);
	rc = 0;
out:
	if (ev_term != NULL)
		event_free(ev_term);
	if (ev_int != NULL)
		event_free(ev_int);
	server_stop();
	coalesce_free();
	up_free();
	if (base != NULL)
		event_base_free(base);
	tokens_free(tokens);
	conf_free(config);
	return rc;
}
