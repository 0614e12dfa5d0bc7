/*
 * main.c -- kgymd: start-up, signals, reload, drain and shutdown.
 *
 * Start-up order matters for durability: the store is opened and recovered
 * (running tasks of a crashed daemon requeued or failed) before the socket
 * listens, so no client can see a task in a state that recovery is about to
 * change.  Then the loop runs until SIGTERM/SIGINT or the shutdown op; at
 * shutdown the socket stops accepting, no new task starts, running tasks get
 * shutdown_grace seconds to end and are then requeued for the next start.
 *
 * The daemon never initialises CUDA: GPU work happens in fork+exec'd
 * workers (ARCHITECTURE.md, "Processes").
 */
#include "config.h"

#include <sys/prctl.h>
#include <sys/resource.h>

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "queue.h"

#define KGYMD_DEFAULT_CONFIG	KGYM_SYSCONFDIR "/kgymd.conf"
#define KGYMD_PRUNE_INTERVAL_S	60
/* Descriptors beyond max_connections: workers, the store, refused clients. */
#define KGYMD_SPARE_FDS		1024

struct event_base *kgymd_base;
struct config *kgymd_config;
struct store *kgymd_store;
char *kgymd_worker_config;

static bool kgymd_is_draining;
static bool kgymd_is_stopping;
static struct event *kgymd_grace_ev;
static struct event *kgymd_prune_ev;

static void kgymd_raise_nofile(void);

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: kgymd [-FnVh] [-f FILE]\n"
	    "  -F       run in the foreground (log to stderr)\n"
	    "  -f FILE  configuration file (default " KGYMD_DEFAULT_CONFIG ")\n"
	    "  -n       check the configuration and exit\n"
	    "  -V       print version and build options\n"
	    "  -h       this help\n");
}

static void
print_version(void)
{
	printf("kgymd %s (plugin ABI %d.%d, protocol %d)\n", PACKAGE_VERSION,
	    KGYM_PLUGIN_ABI_MAJOR, KGYM_PLUGIN_ABI_MINOR, KGYM_PROTOCOL_VERSION);
	printf("build options:");
#ifdef HAVE_SYSTEMD
	printf(" +systemd");
#else
	printf(" -systemd");
#endif
#ifdef KGYM_SANDBOX_DISABLED
	printf(" -sandbox\nWARNING: built with --disable-sandbox: candidate code runs UNSANDBOXED (debugging only)");
#else
	printf(" +sandbox");
#endif
	printf("\nplugin dir: %s\nconfig:     %s\n", KGYM_PLUGINDIR, KGYMD_DEFAULT_CONFIG);
}

bool
kgymd_draining(void)
{
	return kgymd_is_draining || kgymd_is_stopping;
}

void
kgymd_drain(void)
{
	if (kgymd_is_draining)
		return;
	kgymd_is_draining = true;
	notify_status("draining: %zu queued, %zu running", sched_queued(), sched_running());
}

static void
kgymd_loopbreak(void)
{
	event_base_loopbreak(kgymd_base);
}

/* Leave the loop once every client has its last replies (at most 2 s). */
static void
kgymd_stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { .tv_sec = 2 };

	event_base_loopexit(kgymd_base, &tv);
	control_flush_and_close(kgymd_loopbreak);
}

/*
 * Stopping frees connections, so it never runs inside a request (a cancel
 * or the shutdown op may be what ends the last task): it runs from an event
 * of its own, on the next pass of the loop.
 */
static void
kgymd_stop_now(void)
{
	static bool scheduled;
	struct timeval now = { 0 };

	if (scheduled)
		return;
	scheduled = true;
	if (event_base_once(kgymd_base, -1, EV_TIMEOUT, kgymd_stop_cb, NULL, &now) < 0)
		event_base_loopbreak(kgymd_base);
}

static void
kgymd_grace_over(evutil_socket_t fd, short what, void *arg)
{
	log_info("shutdown grace over: requeueing %zu running tasks", sched_running());
	sched_requeue_running();
	kgymd_stop_now();
}

void
kgymd_shutdown(const char *why)
{
	struct timeval tv = { .tv_sec = kgymd_config->shutdown_grace_s };

	if (kgymd_is_stopping)
		return;
	kgymd_is_stopping = true;
	log_info("stopping: %s (%zu queued, %zu running)", why, sched_queued(),
	    sched_running());
	notify_stopping();
	control_close();
	sched_pause();
	if (sched_running() == 0) {
		kgymd_stop_now();
		return;
	}
	/* Let running work end on its own, then requeue what is left. */
	sched_on_idle(kgymd_stop_now);
	kgymd_grace_ev = evtimer_new(kgymd_base, kgymd_grace_over, NULL);
	if (kgymd_grace_ev == NULL || evtimer_add(kgymd_grace_ev, &tv) < 0)
		kgymd_grace_over(-1, 0, NULL);
}

static void
kgymd_reload(const char *path)
{
	struct config *next;
	char *cause = NULL;

	notify_reloading();
	if (config_load(path, &next, &cause) < 0) {
		log_errorx("reload refused, keeping the running configuration: %s", cause);
		free(cause);
		notify_ready();
		return;
	}
	config_apply_reload(kgymd_config, next);
	kgymd_raise_nofile();
	config_free(next);
	log_set_level(kgymd_config->log_level);
	log_info("configuration reloaded from %s", path);
	notify_ready();
	sched_kick();	/* max_running_tasks may have grown */
}

static void
kgymd_signal(evutil_socket_t sig, short what, void *arg)
{
	switch (sig) {
	case SIGTERM:
	case SIGINT:
		kgymd_shutdown(sig == SIGTERM ? "SIGTERM" : "SIGINT");
		break;
	case SIGHUP:
		kgymd_reload(arg);
		break;
	}
}

/*
 * Each client is a descriptor: lift the soft RLIMIT_NOFILE (1024 under
 * systemd) so that max_connections clients, the refused ones being told
 * why, the workers' channels and the store fit, or say how many fit.
 */
static void
kgymd_raise_nofile(void)
{
	rlim_t want = (rlim_t)kgymd_config->max_connections + KGYMD_SPARE_FDS;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		log_warn("getrlimit(RLIMIT_NOFILE)");
		return;
	}
	if (rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		log_warn("setrlimit(RLIMIT_NOFILE, %llu)", (unsigned long long)rl.rlim_cur);
	if (rl.rlim_cur < want)
		log_warnx("the open-file limit (%llu) is below max_connections (%d) + %d: "
		    "clients past it are refused with too_many_connections",
		    (unsigned long long)rl.rlim_cur, kgymd_config->max_connections,
		    KGYMD_SPARE_FDS);
}

static void
kgymd_prune(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { .tv_sec = KGYMD_PRUNE_INTERVAL_S };
	int64_t before = stats_wall_ms() - kgymd_config->result_ttl_s * 1000;
	int64_t by_state[TASK__STATE_COUNT];
	int n = 0;

	if (queue->prune(before, &n, by_state) < 0)
		log_warnx("pruning old results failed");
	else {
		stats_pruned(by_state);
		if (n > 0)
			log_info("pruned %d results older than result_ttl", n);
	}
	notify_status("%zu queued, %zu running", sched_queued(), sched_running());
	evtimer_add(kgymd_prune_ev, &tv);
}

/*
 * Workers read their settings from a copy of the configuration kgymd
 * started with, not from the file: a later edit (half-written, or of keys
 * that need a restart) must not reach workers started after it.
 */
static void
kgymd_snapshot_config(const char *path)
{
	char *copy, buf[8192];
	FILE *in, *out;
	size_t n;
	int fd;

	if (asprintf(&copy, "%s/worker.conf", kgymd_config->state_dir) < 0)
		fatalx("out of memory");
	if ((in = fopen(path, "re")) == NULL)
		fatal("%s", path);
	if ((fd = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0 ||
	    (out = fdopen(fd, "w")) == NULL)
		fatal("%s", copy);
	while ((n = fread(buf, 1, sizeof buf, in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			fatal("%s", copy);
	if (ferror(in) || fclose(out) != 0)
		fatal("%s", copy);
	fclose(in);
	kgymd_worker_config = copy;
}

/*
 * The queue backend: this machine's store, or the shared queue of
 * [cluster] (with this node's store under it).  Opening it recovers what
 * a crashed daemon left running; from here on every write is off the loop.
 */
static void
kgymd_open_queue(void)
{
	char *cause = NULL;

	queue_select(kgymd_config);
	if (queue->open(kgymd_config->state_dir, &cause) < 0)
		fatalx("task store (%s): %s", queue->name, cause != NULL ? cause : "cannot open");
}

static void
kgymd_listen(void)
{
	char *cause = NULL;
#ifdef HAVE_SYSTEMD
	int n = sd_listen_fds(1);

	if (n > 1)
		fatalx("systemd passed %d sockets; kgymd.socket should pass one", n);
	if (n == 1) {
		if (control_adopt(SD_LISTEN_FDS_START, &cause) < 0)
			fatalx("%s", cause);
		log_info("listening on the socket passed by systemd");
		return;
	}
#endif
	if (control_listen(kgymd_config->socket, kgymd_config->socket_mode, &cause) < 0)
		fatalx("control socket: %s", cause);
	log_info("listening on %s", kgymd_config->socket);
}

int
main(int argc, char **argv)
{
	const char *path = KGYMD_DEFAULT_CONFIG;
	bool foreground = false, check_only = false;
	struct event *sig_term, *sig_int, *sig_hup;
	char *cause = NULL, *abspath = NULL;
	int ch;

	while ((ch = getopt(argc, argv, "Ff:nVh")) != -1) {
		switch (ch) {
		case 'F':
			foreground = true;
			break;
		case 'f':
			path = optarg;
			break;
		case 'n':
			check_only = true;
			break;
		case 'V':
			print_version();
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
	/* Workers re-read the file after we chdir("/"): keep it absolute. */
	if (path[0] != '/' && (abspath = realpath(path, NULL)) != NULL)
		path = abspath;
	if (config_load(path, &kgymd_config, &cause) < 0) {
		fprintf(stderr, "%s\n", cause != NULL ? cause : path);
		return 1;
	}
	if (check_only) {
		printf("configuration OK\n");
		config_free(kgymd_config);
		return 0;
	}
	if (!foreground && daemon(0, 0) < 0) {
		perror("kgymd: daemon");
		return 1;
	}
	log_init(kgymd_config->log_level, foreground);
#ifdef KGYM_SANDBOX_DISABLED
	log_errorx("WARNING: this kgymd was built with --disable-sandbox: candidate code "
	    "runs UNSANDBOXED; never use it for real work");
#endif
	/* A client that goes away mid-write must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	/* Our environment, memory and descriptors are not for processes of
	 * our uid to read through /proc (a candidate, if kgymd runs as the
	 * same user as its workers). */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		log_warn("prctl(PR_SET_DUMPABLE)");

	kgymd_raise_nofile();
	if ((kgymd_base = event_base_new()) == NULL)
		fatalx("cannot create the event loop");
	stats_init();
	sched_init();
	plugin_load_all(kgymd_config->plugin_dir, host_table());
	kgymd_open_queue();
	kgymd_snapshot_config(path);
	pool_init();
	kgymd_listen();

	sig_term = evsignal_new(kgymd_base, SIGTERM, kgymd_signal, NULL);
	sig_int = evsignal_new(kgymd_base, SIGINT, kgymd_signal, NULL);
	sig_hup = evsignal_new(kgymd_base, SIGHUP, kgymd_signal, (void *)path);
	if (sig_term == NULL || sig_int == NULL || sig_hup == NULL ||
	    evsignal_add(sig_term, NULL) < 0 || evsignal_add(sig_int, NULL) < 0 ||
	    evsignal_add(sig_hup, NULL) < 0)
		fatalx("cannot install signal handlers");
	kgymd_prune_ev = evtimer_new(kgymd_base, kgymd_prune, NULL);
	kgymd_prune(-1, 0, NULL);

	log_info("kgymd %s ready: %zu queued tasks, state in %s", PACKAGE_VERSION,
	    sched_queued(), kgymd_config->state_dir);
	notify_ready();
	sched_kick();
	event_base_dispatch(kgymd_base);

	log_info("stopped");
	queue->close();		/* every write done, and each client told */
	control_free_all();
	pool_stop();
	sched_free();
	plugin_unload_all();
	store_free(kgymd_store);
	if (kgymd_grace_ev != NULL)
		event_free(kgymd_grace_ev);
	event_free(kgymd_prune_ev);
	event_free(sig_term);
	event_free(sig_int);
	event_free(sig_hup);
	event_base_free(kgymd_base);
	config_free(kgymd_config);
	free(kgymd_worker_config);
	free(abspath);
	return 0;
}
