/*
 * python.c -- the backend plugin `python`: KernelBench-format candidates
 * (backends "torch", "triton", "cuda") in sandboxed Python processes.
 *
 * A kgymd-worker may not fork or exec once it is sandboxed, and a fresh
 * Python with torch costs seconds per task (about 4 s with CUDA on an H100,
 * 1 s for torch alone on a CI machine).  So prepare(), which runs before the
 * worker's sandbox, fork+execs one long-lived *zygote* per worker: the
 * configured interpreter running kgym_harness.py --zygote, which imports
 * torch (and triton where a GPU is visible) without initialising CUDA and
 * then forks, per job, a sandboxed candidate executor and -- unless the
 * judge server it keeps for the job's reference can serve -- a trusted
 * judge with its reference executor (see the harness's header).  prepare() does
 * not wait for the zygote's imports: the first job does, up to
 * start_timeout, so a worker says HELLO at once.
 *
 * run() talks to the zygote over a socketpair, in length-prefixed JSON
 * frames (4-byte big-endian length): it sends {"type":"job"} with the
 * workflow's request, this plugin's limits and the job's seq (which the
 * result must echo: an answer to another job is a broken protocol, never
 * this job's result), relays the zygote's
 * {"type":"phase"} messages to the worker host (the parent's per-phase
 * deadline; on a GPU worker the exclusive lock for timing) and acks them,
 * forwards {"type":"log"} lines, and returns the {"type":"result"} object,
 * which already has a result's keys (kgymd-protocol(7), RESULTS).  If the
 * zygote dies, the job fails with SYSTEM_ERROR naming how it died, and the result asks for a fresh
 * worker ("recycle_worker"), which starts a fresh zygote.
 *
 * The zygote is outside the worker's seccomp filter and Landlock domain by
 * construction (it was forked before them); it runs only the harness's own
 * code, and each job's children confine themselves before touching the
 * task (libkgym_sandbox.so, the same sandbox.c).  It dies with the worker
 * (PR_SET_PDEATHSIG) and shares its process group, so kgymd's kill of a
 * worker's group takes the zygote and its children too.
 *
 * Configuration, [plugin.python] (sizes take K/M/G, times are seconds):
 *   interpreter         the Python to run (default /usr/bin/python3)
 *   harness             kgym_harness.py (default $(libexecdir)/kgym/...)
 *   sandbox_lib         libkgym_sandbox.so (default beside the harness)
 *   start_timeout       how long the first job waits for the zygote (120)
 *   compile_timeout, correctness_timeout, timing_timeout
 *                       the phase deadlines (180, 100, 250), sent to the
 *                       harness with every job (it relies on no defaults
 *                       of its own) and cut short by the task's deadline
 *                       (request.timeout_s, from the workflow); keep them
 *                       below [workers]'s, so that a slow candidate ends as
 *                       a clean TIMEOUT_ERROR instead of a killed worker
 *   memory              each child's RLIMIT_AS (CPU) / RLIMIT_DATA (GPU)
 *                       (default 16G: torch alone maps ~0.7 GB)
 *   max_files (256), max_processes (1024), max_file_size (64M)
 *   max_output_bytes    the most one call's outputs may take: the judge's
 *                       output area per executor (auto: 4G on a CPU, a
 *                       sixth of the device's memory on a GPU)
 *   round_bytes         on a GPU, what the timing's rounds may hold: a
 *                       round of k calls needs k calls' inputs and three
 *                       copies of their outputs at once (8G)
 *   threads             torch.set_num_threads in the children (0: torch's
 *                       default for CPU jobs, 1 for GPU jobs, whose CPU
 *                       threads only contend with the other jobs')
 *   max_timing_ms       the timing budget per side (10000)
 *   inline_pch_dir      where the zygote of a GPU worker keeps the precompiled
 *                       torch prologue of load_inline candidates ("auto":
 *                       <state_dir>/pch; default "off": none), kgym_inline.py
 *   kprobe_lib          libkgym_kprobe.so (default beside the harness; built
 *                       with CUDA): CUPTI's kernel records of a GPU
 *                       candidate's profiled calls, for decoy, fallback and
 *                       hidden-work detection; where it is missing, GPU
 *                       results say they were not profiled
 *   cupti_library       libcupti to load (default: by soname, torch's copy
 *                       when torch has one mapped)
 *   min_custom_share    below this share of the GPU kernel time in the
 *                       candidate's own kernels, a "triton" or "cuda"
 *                       candidate is a REWARD_HACK pytorch_fallback (0,
 *                       the default: the share is a figure in the
 *                       metadata only; a task's own min_custom_share
 *                       overrides it)
 */
#include "config.h"

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <arpa/inet.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kgym/plugin.h>

#include "plugin_util.h"

#ifndef KGYM_LIBEXECDIR
#define KGYM_LIBEXECDIR "/usr/local/libexec/kgym"
#endif

#define PY_DEFAULT_INTERPRETER	"/usr/bin/python3"
#define PY_DEFAULT_HARNESS	KGYM_LIBEXECDIR "/kgym_harness.py"
#define PY_DEFAULT_SANDBOX_LIB	KGYM_LIBEXECDIR "/libkgym_sandbox.so"
#define PY_DEFAULT_KPROBE_LIB	KGYM_LIBEXECDIR "/libkgym_kprobe.so"
#define PY_MAX_FRAME		(64u << 20)
/* Beyond the harness's own deadlines: how long run() waits for a zygote
 * that has stopped answering before it gives up on it. */
#define PY_BACKSTOP_S		30.0

extern char **environ;

static const struct kgym_host *host;
static const struct kgym_plugin_handle *self;

static struct {
	char interpreter[1024];
	char harness[1024];
	char sandbox_lib[1024];
	char kprobe_lib[1024];		/* "" where it is not installed */
	char cupti_library[1024];	/* "" for libcupti's soname */
	char inline_pch_dir[1024];	/* "" for <state_dir>/pch, "off" for none */
	double min_custom_share;
	double start_timeout;
	double compile_timeout;
	double correctness_timeout;
	double timing_timeout;
	double max_timing_ms;
	uint64_t memory;
	uint64_t max_file_size;
	uint64_t max_output_bytes;
	uint64_t round_bytes;
	long max_files;
	long max_processes;
	long threads;
} cfg;

enum py_state { PY_NONE, PY_STARTING, PY_READY, PY_DEAD };

static struct {
	enum py_state state;
	pid_t pid;
	int fd;
	bool gpu;			/* a GPU worker (CUDA_VISIBLE_DEVICES set) */
	json_t *hello;			/* the zygote's facts, once READY */
	char *dead;			/* why it is DEAD (host-freeable copy made on use) */
	bool recycle;			/* DEAD by dying, not by refusing to start */
	unsigned long jobs;
	double lock_wait_s;		/* this job's time waiting for the GPU lock */
} zy = { .fd = -1 };

/* ------------------------------------------------------------ helpers */

static double
py_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A result of kgymd-protocol(7)'s shape for a job the zygote could not judge. */
static json_t *
py_failure(const char *code, bool recycle, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static json_t *
py_failure(const char *code, bool recycle, const char *fmt, ...)
{
	char buf[2048];
	json_t *r;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	r = json_pack("{s:s, s:b, s:b, s:b, s:f, s:f, s:f, s:s, s:s, s:{s:s}}",
	    "status", "failed", "compiled", 0, "correctness", 0, "decoy_kernel", 0,
	    "kernel_runtime", -1.0, "reference_runtime", -1.0, "speedup", -1.0,
	    "error_code", code, "error_message", buf, "metadata", "backend_plugin", "python");
	if (r != NULL && recycle)
		json_object_set_new(r, "recycle_worker", json_true());
	return r;
}

static void
py_set_dead(bool recycle, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
py_set_dead(bool recycle, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	free(zy.dead);
	zy.dead = s;
	zy.state = PY_DEAD;
	zy.recycle = recycle;
	if (zy.fd >= 0)
		close(zy.fd);
	zy.fd = -1;
	if (s != NULL)
		host->log(self, KGYM_LOG_WARN, "%s", s);
}

/* How the zygote ended, once its socket says it has: reaps it. */
static void
py_exit_status(char *buf, size_t len)
{
	int status, n;

	if (zy.pid <= 0) {
		snprintf(buf, len, "it is gone");
		return;
	}
	do
		n = (int)waitpid(zy.pid, &status, 0);
	while (n < 0 && errno == EINTR);
	if (n != zy.pid)
		snprintf(buf, len, "its exit status is unknown (%s)", strerror(errno));
	else if (WIFEXITED(status))
		snprintf(buf, len, "it exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "it was killed by signal %d (%s)", WTERMSIG(status),
		    strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "it ended with status 0x%x", status);
	zy.pid = 0;
}

/* ------------------------------------------------------------ frames */

static int
py_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len > 0) {
		/* MSG_NOSIGNAL: a dead zygote is an error here, not our SIGPIPE. */
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int
py_send(const json_t *msg)
{
	char *text;
	uint32_t be;
	size_t len;
	int r;

	if ((text = json_dumps(msg, JSON_COMPACT)) == NULL)
		return -ENOMEM;
	len = strlen(text);
	if (len > PY_MAX_FRAME) {
		free(text);
		return -E2BIG;
	}
	be = htonl((uint32_t)len);
	if ((r = py_write_all(zy.fd, &be, sizeof be)) == 0)
		r = py_write_all(zy.fd, text, len);
	free(text);
	return r;
}

/* Read exactly len bytes before `deadline` (monotonic seconds).
 * 0, -EPIPE at EOF, -ETIMEDOUT, or -errno. */
static int
py_read_exact(void *buf, size_t len, double deadline)
{
	struct pollfd pfd = { .fd = zy.fd, .events = POLLIN };
	char *p = buf;
	ssize_t n;
	double left;
	int r;

	while (len > 0) {
		left = deadline - py_now();
		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, left > 3600 ? 3600000 : (int)ceil(left * 1000));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			continue;
		n = recv(zy.fd, p, len, 0);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The next frame as a JSON object.  0, -EPIPE, -ETIMEDOUT, -EPROTO. */
static int
py_recv(double deadline, json_t **ret_msg)
{
	json_error_t jerr;
	uint32_t be;
	size_t len;
	json_t *msg;
	char *buf;
	int r;

	if ((r = py_read_exact(&be, sizeof be, deadline)) < 0)
		return r;
	len = ntohl(be);
	if (len > PY_MAX_FRAME)
		return -EPROTO;
	if ((buf = malloc(len > 0 ? len : 1)) == NULL)
		return -ENOMEM;
	if ((r = py_read_exact(buf, len, deadline)) < 0) {
		free(buf);
		return r;
	}
	msg = json_loadb(buf, len, 0, &jerr);
	free(buf);
	if (!json_is_object(msg)) {
		json_decref(msg);
		return -EPROTO;
	}
	*ret_msg = msg;
	return 0;
}

/* ------------------------------------------------------------ config */

static int
py_cfg_path(const char *key, const char *def, char *dst, size_t len, char **ret_cause)
{
	const char *v = host->config_get(self, key);

	if (v == NULL)
		v = def;
	if (v[0] != '/' || strlen(v) >= len)
		return pu_cause(host, ret_cause, -EINVAL, "%s = %s: expected an absolute path", key, v);
	snprintf(dst, len, "%s", v);
	return 0;
}

static int
py_cfg_number(const char *key, double def, double lo, double hi, double *ret, char **ret_cause)
{
	const char *v = host->config_get(self, key);
	char *end;
	double d;

	if (v == NULL) {
		*ret = def;
		return 0;
	}
	errno = 0;
	d = strtod(v, &end);
	if (errno != 0 || end == v || *end != '\0' || !isfinite(d) || d < lo || d > hi)
		return pu_cause(host, ret_cause, -EINVAL, "%s = %s: expected a number from %g to %g",
		    key, v, lo, hi);
	*ret = d;
	return 0;
}

static int
py_cfg_size(const char *key, uint64_t def, uint64_t lo, uint64_t hi, uint64_t *ret,
    char **ret_cause)
{
	const char *v = host->config_get(self, key);
	uint64_t u;

	if (v == NULL) {
		*ret = def;
		return 0;
	}
	if (pu_parse_size(v, &u) < 0 || u < lo || u > hi)
		return pu_cause(host, ret_cause, -EINVAL, "%s = %s: expected a number or a size from "
		    "%" PRIu64 " to %" PRIu64, key, v, lo, hi);
	*ret = u;
	return 0;
}

/*
 * max_output_bytes: a size, or "auto" (the default), passed on as 0: the
 * judge then allows 4G on a CPU and a sixth of the device's memory on a
 * GPU -- one call's outputs are held about six times over there (the two
 * executors' areas and arenas, the judge's copy, the expected outputs), and
 * level-1 problems of KernelBench return 6 GiB.
 */
static int
py_cfg_output_bytes(uint64_t *ret, char **ret_cause)
{
	const char *v = host->config_get(self, "max_output_bytes");

	if (v == NULL || strcmp(v, "auto") == 0) {
		*ret = 0;
		return 0;
	}
	return py_cfg_size("max_output_bytes", 0, UINT64_C(1) << 20, UINT64_C(1) << 40, ret,
	    ret_cause);
}

static int
py_read_config(char **ret_cause)
{
	const char *v;
	uint64_t u;
	int r;

	if ((r = py_cfg_path("interpreter", PY_DEFAULT_INTERPRETER, cfg.interpreter,
	    sizeof cfg.interpreter, ret_cause)) < 0 ||
	    (r = py_cfg_path("harness", PY_DEFAULT_HARNESS, cfg.harness, sizeof cfg.harness,
	    ret_cause)) < 0 ||
	    (r = py_cfg_path("sandbox_lib", PY_DEFAULT_SANDBOX_LIB, cfg.sandbox_lib,
	    sizeof cfg.sandbox_lib, ret_cause)) < 0 ||
	    (r = py_cfg_path("kprobe_lib", PY_DEFAULT_KPROBE_LIB, cfg.kprobe_lib,
	    sizeof cfg.kprobe_lib, ret_cause)) < 0 ||
	    (r = py_cfg_number("min_custom_share", 0, 0, 1, &cfg.min_custom_share,
	    ret_cause)) < 0 ||
	    (r = py_cfg_number("start_timeout", 120, 1, 3600, &cfg.start_timeout,
	    ret_cause)) < 0 ||
	    /* load_inline builds take about a minute (measured 52-56 s on an H100). */
	    (r = py_cfg_number("compile_timeout", 180, 1, 86400, &cfg.compile_timeout,
	    ret_cause)) < 0 ||
	    (r = py_cfg_number("correctness_timeout", 100, 1, 86400, &cfg.correctness_timeout,
	    ret_cause)) < 0 ||
	    (r = py_cfg_number("timing_timeout", 250, 1, 86400, &cfg.timing_timeout,
	    ret_cause)) < 0 ||
	    (r = py_cfg_number("max_timing_ms", 10000, 1, 3600e3, &cfg.max_timing_ms,
	    ret_cause)) < 0 ||
	    (r = py_cfg_size("memory", UINT64_C(16) << 30, UINT64_C(256) << 20,
	    UINT64_C(1) << 44, &cfg.memory, ret_cause)) < 0 ||
	    (r = py_cfg_size("max_file_size", UINT64_C(64) << 20, UINT64_C(1) << 20,
	    UINT64_C(1) << 40, &cfg.max_file_size, ret_cause)) < 0 ||
	    (r = py_cfg_output_bytes(&cfg.max_output_bytes, ret_cause)) < 0 ||
	    (r = py_cfg_size("round_bytes", UINT64_C(8) << 30, 0,
	    UINT64_C(1) << 40, &cfg.round_bytes, ret_cause)) < 0)
		return r;
	if ((r = py_cfg_size("max_files", 256, 16, 65536, &u, ret_cause)) < 0)
		return r;
	cfg.max_files = (long)u;
	if ((r = py_cfg_size("max_processes", 1024, 16, 1 << 20, &u, ret_cause)) < 0)
		return r;
	cfg.max_processes = (long)u;
	if ((r = py_cfg_size("threads", 0, 0, 1024, &u, ret_cause)) < 0)
		return r;
	cfg.threads = (long)u;
	/*
	 * Off unless asked for: the zygote's cold start (four variants, ~650 MB
	 * each) has not been measured on a GPU machine yet.
	 */
	v = host->config_get(self, "inline_pch_dir");
	if (v != NULL && strcmp(v, "off") != 0 && strcmp(v, "auto") != 0 &&
	    (r = py_cfg_path("inline_pch_dir", "", cfg.inline_pch_dir, sizeof cfg.inline_pch_dir,
	    ret_cause)) < 0)
		return r;
	if (v == NULL || strcmp(v, "off") == 0)
		snprintf(cfg.inline_pch_dir, sizeof cfg.inline_pch_dir, "off");
	else if (strcmp(v, "auto") == 0)
		cfg.inline_pch_dir[0] = '\0';
	if (host->config_get(self, "cupti_library") != NULL &&
	    (r = py_cfg_path("cupti_library", "", cfg.cupti_library, sizeof cfg.cupti_library,
	    ret_cause)) < 0)
		return r;
	/* Without the probe (a build without CUDA) GPU jobs run unprofiled,
	 * and their results say so. */
	if (access(cfg.kprobe_lib, R_OK) < 0) {
		host->log(self, KGYM_LOG_INFO, "kprobe_lib %s: %s; GPU candidates will not be "
		    "profiled (no decoy or fallback detection)", cfg.kprobe_lib, strerror(errno));
		cfg.kprobe_lib[0] = '\0';
	}
	return 0;
}

/* ------------------------------------------------------------ the zygote */

/* Only async-signal-safe calls between fork and exec: the worker may have
 * the CUDA driver's threads by now. */
static void __attribute__((noreturn))
py_zygote_child(int fd, char *const argv[])
{
	sigset_t none;
	int devnull;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	/* fd 3 becomes the zygote's socket: the worker's own channel to kgymd
	 * (also fd 3) must not survive into it. */
	if (fd == 3) {
		if (fcntl(3, F_SETFD, 0) < 0)
			_exit(126);
	} else if (dup2(fd, 3) < 0) {
		_exit(126);
	}
	if ((devnull = open("/dev/null", O_RDWR)) < 0 || dup2(devnull, 0) < 0 ||
	    dup2(devnull, 1) < 0)
		_exit(126);
	/* stderr stays the worker's (kgymd's log) for a dying zygote's last words. */
	close_range(4, ~0u, 0);
	execve(argv[0], argv, environ);
	_exit(127);
}

static int
py_prepare(char **ret_cause)
{
	char started[32];
	char *argv[] = { cfg.interpreter, "-I", "-B", cfg.harness, "--zygote", "--fd", "3",
	    "--sandbox-lib", cfg.sandbox_lib, "--started-at", started,
	    "--pch-dir", cfg.inline_pch_dir[0] ? cfg.inline_pch_dir : "auto", NULL };
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	struct timespec ts;
	int sv[2];
	pid_t pid;

	if (zy.state != PY_NONE)
		return 0;
	zy.gpu = cvd != NULL && cvd[0] != '\0';
	if (access(cfg.interpreter, X_OK) < 0)
		return pu_cause(host, ret_cause, -errno, "interpreter %s: %s", cfg.interpreter,
		    strerror(errno));
	if (access(cfg.harness, R_OK) < 0)
		return pu_cause(host, ret_cause, -errno, "harness %s: %s", cfg.harness, strerror(errno));
	/* The children need it; missing, every job would fail closed anyway. */
	if (access(cfg.sandbox_lib, R_OK) < 0)
		return pu_cause(host, ret_cause, -errno, "sandbox_lib %s: %s", cfg.sandbox_lib,
		    strerror(errno));
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(started, sizeof started, "%lld.%09ld", (long long)ts.tv_sec, ts.tv_nsec);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return pu_cause(host, ret_cause, -errno, "socketpair: %s", strerror(errno));
	if ((pid = fork()) < 0) {
		close(sv[0]);
		close(sv[1]);
		return pu_cause(host, ret_cause, -errno, "fork: %s", strerror(errno));
	}
	if (pid == 0)
		py_zygote_child(sv[1], argv);
	close(sv[1]);
	zy.pid = pid;
	zy.fd = sv[0];
	zy.state = PY_STARTING;
	host->log(self, KGYM_LOG_DEBUG, "zygote %ld started: %s %s", (long)pid, cfg.interpreter,
	    cfg.harness);
	return 0;
}

/* Wait for the zygote's hello (the first job only). */
static void
py_await_hello(void)
{
	char how[256];
	json_t *msg = NULL;
	const char *type;
	int r;

	r = py_recv(py_now() + cfg.start_timeout, &msg);
	if (r == -ETIMEDOUT) {
		py_set_dead(true, "the python zygote did not start within start_timeout = %g s",
		    cfg.start_timeout);
		return;
	}
	if (r < 0) {
		py_exit_status(how, sizeof how);
		py_set_dead(false, "the python zygote (%s %s) did not start: %s", cfg.interpreter,
		    cfg.harness, r == -EPIPE ? how : strerror(-r));
		return;
	}
	type = json_string_value(json_object_get(msg, "type"));
	if (type != NULL && strcmp(type, "hello") == 0) {
		zy.hello = msg;
		zy.state = PY_READY;
		host->log(self, KGYM_LOG_INFO, "zygote %ld ready: torch %s, triton %s, ready %.0f ms "
		    "after fork (imports %.0f ms)", (long)zy.pid,
		    json_string_value(json_object_get(msg, "torch")) ?: "?",
		    json_string_value(json_object_get(msg, "triton")) ?: "none",
		    json_number_value(json_object_get(msg, "ready_ms")),
		    json_number_value(json_object_get(msg, "import_ms")));
		if (json_string_value(json_object_get(msg, "triton")) != NULL) {
			char *done = json_dumps(json_object_get(msg, "triton_prewarm"), JSON_COMPACT);
			char *seed = json_dumps(json_object_get(msg, "triton_seed"), JSON_COMPACT);

			host->log(self, KGYM_LOG_INFO, "zygote %ld: Triton prewarmed %s in %.0f ms, "
			    "cache seed %s in %.0f ms", (long)zy.pid, done ?: "null",
			    json_number_value(json_object_get(msg, "triton_prewarm_ms")), seed ?: "null",
			    json_number_value(json_object_get(msg, "triton_seed_ms")));
			free(done);
			free(seed);
		}
		return;
	}
	py_set_dead(false, "the python zygote cannot serve: %s",
	    json_string_value(json_object_get(msg, "message")) ?: "it said no hello");
	json_decref(msg);
}

static json_t *
py_limits(void)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:s, s:s, s:f}",
	    "memory_bytes", (json_int_t)cfg.memory, "max_files", (json_int_t)cfg.max_files,
	    "max_processes", (json_int_t)cfg.max_processes,
	    "max_file_bytes", (json_int_t)cfg.max_file_size,
	    "max_output_bytes", (json_int_t)cfg.max_output_bytes,
	    "round_bytes", (json_int_t)cfg.round_bytes,
	    "threads", (json_int_t)cfg.threads,
	    "compile_timeout", cfg.compile_timeout, "correctness_timeout", cfg.correctness_timeout,
	    "timing_timeout", cfg.timing_timeout, "max_timing_ms", cfg.max_timing_ms,
	    "kprobe_lib", cfg.kprobe_lib, "cupti_library", cfg.cupti_library,
	    "min_custom_share", cfg.min_custom_share);
}

/* A phase message: the worker's deadline, and the GPU lock for timing. */
static int
py_on_phase(const json_t *msg)
{
	const char *phase = json_string_value(json_object_get(msg, "phase"));
	const char *lock = json_string_value(json_object_get(msg, "lock"));
	char why[256] = "";
	double t0 = py_now();
	json_t *ack;
	int r = 0;

	if (phase == NULL)
		snprintf(why, sizeof why, "phase without a name");
	else if (host->phase != NULL && (r = host->phase(phase)) < 0)
		snprintf(why, sizeof why, "phase %s: %s", phase, strerror(-r));
	else if (lock != NULL && zy.gpu && host->gpu_lock != NULL &&
	    (r = host->gpu_lock(strcmp(lock, "exclusive") == 0 ? KGYM_GPU_EXCLUSIVE :
	    KGYM_GPU_SHARED)) < 0)
		snprintf(why, sizeof why, "GPU lock: %s", strerror(-r));
	zy.lock_wait_s += py_now() - t0;
	ack = why[0] == '\0' ? json_pack("{s:s, s:b}", "type", "ack", "ok", 1) :
	    json_pack("{s:s, s:b, s:s}", "type", "ack", "ok", 0, "message", why);
	r = ack != NULL ? py_send(ack) : -ENOMEM;
	json_decref(ack);
	return r;
}

/*
 * A result answers the job just sent: its seq is this job's.  The zygote's
 * own answer for a supervisor that died carries none (the zygote never
 * reads a job).
 */
static bool
py_result_is_ours(const json_t *msg)
{
	const json_t *seq = json_object_get(msg, "seq");

	return !json_is_integer(seq) || json_integer_value(seq) == (json_int_t)zy.jobs;
}

static int
py_run(const json_t *request, json_t **ret_result, char **ret_cause)
{
	double deadline, budget, t0 = py_now();
	char how[256];
	json_t *msg, *result, *meta;
	const char *type, *text;
	int r;

	if (zy.state == PY_STARTING)
		py_await_hello();
	if (zy.state != PY_READY) {
		*ret_result = py_failure("SYSTEM_ERROR", zy.recycle, "%s",
		    zy.dead != NULL ? zy.dead : "the python zygote is not running");
		return *ret_result != NULL ? 0 : pu_cause(host, ret_cause, -ENOMEM, "out of memory");
	}
	zy.jobs++;
	zy.lock_wait_s = 0;
	/* The result echoes seq: an answer to another job is a broken protocol. */
	msg = json_pack("{s:s, s:I, s:O, s:o}", "type", "job", "seq", (json_int_t)zy.jobs,
	    "request", request, "limits", py_limits());
	if (msg == NULL)
		return pu_cause(host, ret_cause, -ENOMEM, "out of memory building the job");
	r = py_send(msg);
	json_decref(msg);
	/* The harness ends the job by the phases' sum or the task's time, if less. */
	budget = cfg.compile_timeout + cfg.correctness_timeout + cfg.timing_timeout;
	if (json_number_value(json_object_get(request, "timeout_s")) > 0 &&
	    json_number_value(json_object_get(request, "timeout_s")) < budget)
		budget = json_number_value(json_object_get(request, "timeout_s"));
	deadline = py_now() + budget + PY_BACKSTOP_S;
	while (r == 0) {
		if ((r = py_recv(deadline, &msg)) < 0)
			break;
		type = json_string_value(json_object_get(msg, "type"));
		if (type != NULL && strcmp(type, "phase") == 0) {
			r = py_on_phase(msg);
		} else if (type != NULL && strcmp(type, "log") == 0) {
			text = json_string_value(json_object_get(msg, "message"));
			host->log(self, KGYM_LOG_INFO, "zygote: %s", text ?: "");
		} else if (type != NULL && strcmp(type, "result") == 0 &&
		    json_is_object(result = json_object_get(msg, "result")) && py_result_is_ours(msg)) {
			json_incref(result);
			json_decref(msg);
			if (!json_is_object(meta = json_object_get(result, "metadata"))) {
				meta = json_object();
				json_object_set_new(result, "metadata", meta);
			}
			json_object_set_new(meta, "zygote_start_ms",
			    json_copy(json_object_get(zy.hello, "ready_ms")));
			/* The job's service time in this worker, without queueing. */
			json_object_set_new(meta, "backend_ms", json_real((py_now() - t0) * 1e3));
			json_object_set_new(meta, "gpu_lock_wait_ms", json_real(zy.lock_wait_s * 1e3));
			*ret_result = result;
			return 0;
		} else {
			r = -EPROTO;
		}
		json_decref(msg);
	}
	/* The zygote died, hung or broke the protocol: this worker needs a new one. */
	if (r == -EPIPE || r == -ECONNRESET) {
		py_exit_status(how, sizeof how);
		py_set_dead(true, "the python zygote died during the job: %s", how);
	} else if (r == -ETIMEDOUT) {
		py_set_dead(true, "the python zygote stopped answering (%.0f s past the harness's "
		    "deadlines)", PY_BACKSTOP_S);
	} else {
		py_set_dead(true, "the python zygote broke the protocol: %s", strerror(-r));
	}
	*ret_result = py_failure("SYSTEM_ERROR", true, "%s", zy.dead != NULL ? zy.dead :
	    "the python zygote failed");
	return *ret_result != NULL ? 0 : pu_cause(host, ret_cause, -ENOMEM, "out of memory");
}

/* ------------------------------------------------------------ life cycle */

/* Exit statuses of PY_CHECK_SCRIPT. */
#define PY_CHECK_NO_TORCH	3
#define PY_CHECK_TOO_OLD	4
/* Cheap: finds torch without importing it (tens of milliseconds). */
#define PY_CHECK_SCRIPT \
	"import sys, importlib.util\n" \
	"if sys.version_info < (3, 8): sys.exit(4)\n" \
	"sys.exit(0 if importlib.util.find_spec('torch') else 3)\n"

/*
 * Is [plugin.python] interpreter a Python 3 with torch?  Checked when the
 * plugin loads, so that a wrong path shows at start (kgymd's log, `kgymctl
 * plugins`) and not as every KernelBench-format task failing.  A missing
 * or non-executable interpreter refuses the plugin; in the daemon (deep),
 * the interpreter is also run once: not Python 3.8 or later refuses it,
 * no torch is a warning (torch may be installed later; jobs then fail
 * with the zygote's reason).  The usual cause is a venv or conda env under
 * /home, which the systemd unit's ProtectHome=yes hides from kgymd.
 */
static int
py_check_interpreter(bool deep, char **ret_cause)
{
	static const char hint[] = "set [plugin.python] interpreter to a Python 3 with torch, "
	    "e.g. a venv's bin/python outside /home (kgymd.service has ProtectHome=yes)";
	char *argv[] = { cfg.interpreter, "-I", "-c", PY_CHECK_SCRIPT, NULL };
	posix_spawn_file_actions_t fa;
	int status, r;
	pid_t pid;

	if (access(cfg.interpreter, X_OK) < 0)
		return pu_cause(host, ret_cause, -errno, "interpreter = %s: %s; %s",
		    cfg.interpreter, strerror(errno), hint);
	if (!deep)
		return 0;
	if ((r = posix_spawn_file_actions_init(&fa)) != 0)
		return pu_cause(host, ret_cause, -r, "interpreter check: %s", strerror(r));
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	r = posix_spawn(&pid, cfg.interpreter, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return pu_cause(host, ret_cause, -r, "interpreter = %s: cannot run it: %s; %s",
		    cfg.interpreter, strerror(r), hint);
	while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	if (r < 0)
		return pu_cause(host, ret_cause, -errno, "interpreter check: %s", strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == PY_CHECK_NO_TORCH) {
		host->log(self, KGYM_LOG_WARN, "interpreter = %s has no torch: every "
		    "KernelBench-format task will fail; %s", cfg.interpreter, hint);
		return 0;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == PY_CHECK_TOO_OLD)
		return pu_cause(host, ret_cause, -EINVAL, "interpreter = %s: Python older than "
		    "3.8; %s", cfg.interpreter, hint);
	return pu_cause(host, ret_cause, -EINVAL, "interpreter = %s does not run as Python "
	    "(exit %d); %s", cfg.interpreter, WIFEXITED(status) ? WEXITSTATUS(status) : -1, hint);
}

static int
py_init(const struct kgym_host *h, const struct kgym_plugin_handle *s, char **ret_cause)
{
	int r;

	host = h;
	self = s;
	if (h->struct_size < offsetof(struct kgym_host, phase) + sizeof h->phase)
		return pu_cause(host, ret_cause, -ENOTSUP, "python needs plugin ABI 1.1");
	if ((r = py_read_config(ret_cause)) < 0)
		return r;
	/* Run it in the daemon only (no phase hook there): workers start often. */
	return py_check_interpreter(h->phase == NULL, ret_cause);
}

static void
py_fini(void)
{
	/* EOF on its socket ends the zygote (and it ends its children). */
	if (zy.fd >= 0)
		close(zy.fd);
	zy.fd = -1;
	json_decref(zy.hello);
	zy.hello = NULL;
	free(zy.dead);
	zy.dead = NULL;
	zy.state = PY_NONE;
}

static const char *const py_serves[] = { "torch", "triton", "cuda", NULL };

/*
 * Beyond the worker's common set: wait4, to reap a dead zygote and say how
 * it died.  It reaps only this process's own children.
 */
static const char *const py_syscalls[] = { "wait4", NULL };

const struct kgym_plugin kgym_plugin = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_plugin),
	.build_signature = KGYM_BUILD_SIGNATURE,
	.name = "python",
	.kind = KGYM_PLUGIN_BACKEND,
	.version = "0.1.0",
	.serves = py_serves,
	.init = py_init,
	.fini = py_fini,
	.prepare = py_prepare,
	.run = py_run,
	.syscalls = py_syscalls,
};
