/*
 * proc.c -- worker processes: spawn, talk, watch, reap, write obituaries.
 *
 * Each worker slot has one kgymd-worker process at a time.  We fork+exec it
 * with a minimal environment (CUDA_VISIBLE_DEVICES pinned before anything in
 * it can touch CUDA), its own process group, the socketpair on fd 3 and
 * nothing else open.  Then we keep a small state machine per worker:
 *
 *   STARTING --HELLO--> IDLE --JOB--> BUSY --RESULT--> IDLE ...
 *                                      |  \--LOCK--> LOCK_WAIT --GRANTED--> BUSY
 *   (any) --BYE/kill--> STOPPING --reaped--> respawned
 *
 * and a table of the message types each state accepts (ipc.c, whose
 * ipc_decode() reads every frame a worker sends).  Anything else from
 * a worker -- a bad header, an unknown or untimely type, an oversized or
 * non-JSON payload, a result for another job -- is a protocol violation:
 * the worker is killed at once, since a job runs candidate code in the
 * worker and may have forged what it sent.
 *
 * Every phase of a job has a deadline (SIGTERM, then SIGKILL after
 * kill_grace).  SIGCHLD drives reaping; every reaped worker gets an
 * obituary that becomes its job's outcome (SIGSYS: SANDBOX_VIOLATION;
 * deadline: TIMEOUT_ERROR naming the phase; an unexplained SIGKILL:
 * RESOURCE_ERROR; other signals: RUNTIME_ERROR), and the slot gets a fresh
 * worker.  The parent never waits on a child synchronously except at exit.
 */
#include "config.h"

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "kgymd.h"

#define PROC_ARGV_MAX	32
#define PROC_ENV_MAX	16
#define PROC_RESPAWN_MAX_S	30

static TAILQ_HEAD(, worker) proc_all = TAILQ_HEAD_INITIALIZER(proc_all);
static struct event *proc_sigchld;

static void proc_spawn(struct worker *w);
static void proc_spawn_cb(evutil_socket_t, short, void *);
static void proc_reap_all(evutil_socket_t, short, void *);

/* ------------------------------------------------------------ helpers */

static void
proc_signal_group(struct worker *w, int sig)
{
	/* The worker leads its own group: this reaches anything it started. */
	if (w->pid > 0 && kill(-w->pid, sig) < 0 && errno != ESRCH)
		log_warn("worker %s: kill(%d)", w->name, sig);
}

static void
proc_close_channel(struct worker *w)
{
	if (w->bev != NULL) {
		bufferevent_free(w->bev);
		w->bev = NULL;
	}
}

static void
proc_send(struct worker *w, unsigned int type, json_t *payload)
{
	size_t len;
	char *frame;

	if (w->bev != NULL && (frame = ipc_frame(type, payload, &len)) != NULL) {
		bufferevent_write(w->bev, frame, len);
		free(frame);
	}
	json_decref(payload);
}

static double
proc_phase_deadline(const char *phase)
{
	if (phase != NULL && strcmp(phase, "compile") == 0)
		return kgymd_config->compile_deadline_s;
	if (phase != NULL && strcmp(phase, "correctness") == 0)
		return kgymd_config->correctness_deadline_s;
	if (phase != NULL && strcmp(phase, "timing") == 0)
		return kgymd_config->timing_deadline_s;
	return kgymd_config->job_deadline_s;
}

static struct timeval
proc_tv(double s)
{
	struct timeval tv;

	tv.tv_sec = (time_t)s;
	tv.tv_usec = (suseconds_t)((s - (double)tv.tv_sec) * 1e6);
	return tv;
}

/* Kill now, remembering why: the obituary reports `code` and `why`. */
static void
proc_violation(struct worker *w, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
proc_violation(struct worker *w, const char *code, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	if (w->kill_code == NULL) {
		w->kill_code = code;
		free(w->kill_reason);
		w->kill_reason = strdup(why);
	}
	log_warnx("worker %s (pid %ld): %s; killing it", w->name, (long)w->pid, why);
	w->killed_by_us = true;
	w->state = W_STOPPING;
	pool_worker_dying(w);
	proc_close_channel(w);
	proc_signal_group(w, SIGKILL);
}

/* ------------------------------------------------------------ deadlines */

static void
proc_killer(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	w->killed_by_us = true;
	proc_signal_group(w, SIGKILL);
}

static void
proc_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	const char *phase = pool_job_phase(w);
	struct timeval tv = proc_tv(kgymd_config->kill_grace_s);

	if (!w->hello_seen) {
		log_warnx("worker %s (pid %ld) did not report ready within start_timeout "
		    "(%g s); killing it", w->name, (long)w->pid,
		    kgymd_config->worker_start_timeout_s);
		w->killed_by_us = true;
		proc_signal_group(w, SIGKILL);
		return;
	}
	free(w->timed_out_phase);
	w->timed_out_phase = strdup(phase != NULL ? phase : "run");
	w->timed_out_after = proc_phase_deadline(phase);
	log_warnx("worker %s (pid %ld): task %s ran past the %s deadline (%g s); "
	    "terminating it", w->name, (long)w->pid, pool_job_task_id(w) ?: "-",
	    w->timed_out_phase, w->timed_out_after);
	w->state = W_STOPPING;
	pool_worker_dying(w);
	proc_signal_group(w, SIGTERM);
	evtimer_add(w->killer, &tv);
}

static void
proc_arm_deadline(struct worker *w)
{
	struct timeval tv = proc_tv(proc_phase_deadline(pool_job_phase(w)));

	evtimer_add(w->deadline, &tv);
}

/* ------------------------------------------------------------ messages */

static void
proc_on_hello(struct worker *w, json_t *msg)
{
	const json_t *sb = json_object_get(msg, "sandbox");

	evtimer_del(w->deadline);
	w->state = W_IDLE;
	w->hello_seen = true;
	w->start_failures = 0;
	log_info("worker %s ready (pid %ld%s%s, seccomp %s, landlock %s)", w->name,
	    (long)w->pid, w->gpu >= 0 ? ", " : "",
	    w->gpu >= 0 ? (json_string_value(json_object_get(json_object_get(msg, "gpu"),
	    "name")) ?: "no CUDA device") : "",
	    json_is_true(json_object_get(sb, "seccomp")) ? "on" : "OFF",
	    json_integer_value(json_object_get(sb, "landlock_abi")) > 0 ? "on" : "off");
	json_decref(w->hello);
	w->hello = json_incref(msg);
	pool_worker_ready(w, msg);
}

static void
proc_on_log(struct worker *w, json_t *msg)
{
	const char *text = json_string_value(json_object_get(msg, "message"));
	json_int_t level = json_integer_value(json_object_get(msg, "level"));

	if (text == NULL)
		return;
	/* Warnings and errors are what an obituary should quote. */
	if (level <= KGYM_LOG_WARN)
		snprintf(w->last_log, sizeof w->last_log, "%s", text);
	log_tagged((int)level, w->name, "%s", text);
}

static void
proc_retire(struct worker *w, const char *why)
{
	log_debug("worker %s: retiring (%s)", w->name, why);
	w->state = W_STOPPING;
	proc_send(w, IPC_BYE, json_object());
	evtimer_add(w->killer, &(struct timeval){ .tv_sec = 5 });
}

static void
proc_on_result(struct worker *w, json_t *msg)
{
	struct kgym_job_outcome out = { .worker = w->name };
	json_int_t id = json_integer_value(json_object_get(msg, "job"));
	const json_t *result = json_object_get(msg, "result");

	if ((uint64_t)id != pool_job_id(w)) {
		proc_violation(w, "SANDBOX_VIOLATION", "result for job %lld, but it runs job %llu",
		    (long long)id, (unsigned long long)pool_job_id(w));
		return;
	}
	evtimer_del(w->deadline);
	out.phase = pool_job_phase(w);
	if (json_is_object(result)) {
		out.ok = 1;
		out.result = result;
	} else {
		out.error_code = json_string_value(json_object_get(msg, "error_code")) ?:
		    "SYSTEM_ERROR";
		out.error_message = json_string_value(json_object_get(msg, "error_message")) ?:
		    "the backend returned no result";
	}
	w->jobs_done++;
	if (w->recycle || w->jobs_done >= (unsigned)kgymd_config->max_jobs_per_worker)
		proc_retire(w, w->recycle ? "asked to be replaced" : "max_jobs_per_worker");
	else
		w->state = W_IDLE;
	pool_job_end(w, &out);
}

static void
proc_on_lock(struct worker *w, json_t *msg)
{
	const char *mode = json_string_value(json_object_get(msg, "mode"));

	if (w->gpuset == NULL) {
		proc_violation(w, "SANDBOX_VIOLATION", "a CPU worker asked for a GPU lock");
		return;
	}
	if (mode == NULL || (strcmp(mode, "exclusive") != 0 && strcmp(mode, "shared") != 0)) {
		proc_violation(w, "SANDBOX_VIOLATION", "LOCK with mode '%s'", mode ?: "(none)");
		return;
	}
	/* Waiting for the lock is not the job's time: the deadline pauses. */
	evtimer_del(w->deadline);
	w->state = W_LOCK_WAIT;
	w->lock_asked_us = stats_now_us();
	pool_lock_request(w, strcmp(mode, "exclusive") == 0 ? KGYM_GPU_EXCLUSIVE :
	    KGYM_GPU_SHARED);
}

void
proc_lock_granted(struct worker *w)
{
	w->state = W_BUSY;
	proc_send(w, IPC_GRANTED, json_pack("{s:s, s:f}", "mode",
	    w->lock_held == KGYM_GPU_EXCLUSIVE ? "exclusive" : "shared",
	    "waited_ms", (double)(stats_now_us() - w->lock_asked_us) / 1000.0));
	proc_arm_deadline(w);
}

static void
proc_on_phase(struct worker *w, json_t *msg)
{
	const char *phase = json_string_value(json_object_get(msg, "phase"));

	if (phase == NULL || strlen(phase) > KGYM_NAME_MAX) {
		proc_violation(w, "SANDBOX_VIOLATION", "PHASE without a valid phase name");
		return;
	}
	pool_job_set_phase(w, phase);
	proc_arm_deadline(w);
}

static void
proc_on_fatal(struct worker *w, json_t *msg)
{
	const char *text = json_string_value(json_object_get(msg, "message"));

	log_warnx("worker %s: %s; it will be replaced", w->name, text ?: "fatal error");
	w->recycle = true;
}

static void (*const proc_handlers[IPC__TYPE_COUNT])(struct worker *, json_t *) = {
	[IPC_HELLO] = proc_on_hello,
	[IPC_RESULT] = proc_on_result,
	[IPC_LOG] = proc_on_log,
	[IPC_LOCK] = proc_on_lock,
	[IPC_PHASE] = proc_on_phase,
	[IPC_FATAL] = proc_on_fatal,
};

static void
proc_read(struct bufferevent *bev, void *arg)
{
	struct worker *w = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	unsigned char hdr[IPC_HEADER_LEN];
	struct ipc_msg msg;
	const void *frame;
	char why[256];
	size_t avail;
	ssize_t n;

	while (w->bev != NULL && (avail = evbuffer_get_length(in)) >= IPC_HEADER_LEN) {
		/* The header first: a refused frame is refused before it is buffered. */
		evbuffer_copyout(in, hdr, sizeof hdr);
		n = ipc_decode(hdr, sizeof hdr, kgymd_config->max_message_bytes, w->state,
		    &msg, why, sizeof why);
		if (n == 0 && avail >= msg.need) {
			if ((frame = evbuffer_pullup(in, (ev_ssize_t)msg.need)) == NULL) {
				proc_violation(w, "SYSTEM_ERROR", "out of memory reading a frame");
				return;
			}
			n = ipc_decode(frame, msg.need, kgymd_config->max_message_bytes,
			    w->state, &msg, why, sizeof why);
		}
		if (n == -EMSGSIZE) {
			proc_violation(w, "RESOURCE_ERROR", "%s (max_message_bytes)", why);
			return;
		}
		if (n < 0) {
			proc_violation(w, "SANDBOX_VIOLATION", "broke the worker protocol: %s", why);
			return;
		}
		if (n == 0)
			return;
		evbuffer_drain(in, (size_t)n);
		if (proc_handlers[msg.type] == NULL) {
			/* ipc_decode's table and the handlers disagree: our bug. */
			proc_violation(w, "SYSTEM_ERROR", "no handler for %s",
			    ipc_type_name(msg.type));
		} else
			proc_handlers[msg.type](w, msg.payload);
		json_decref(msg.payload);
	}
}

static void
proc_event(struct bufferevent *bev, short what, void *arg)
{
	struct worker *w = arg;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	proc_close_channel(w);
	/* A worker that is not stopping has no business closing its channel. */
	if (w->state != W_STOPPING && w->state != W_DOWN) {
		w->state = W_STOPPING;
		evtimer_add(w->killer, &(struct timeval){ .tv_sec = 1 });
	}
}

/* ------------------------------------------------------------ life and death */

struct worker *
proc_new(int gpu, int slot, struct gpu_slotset *gpuset)
{
	struct worker *w;

	if ((w = calloc(1, sizeof *w)) == NULL)
		fatalx("out of memory");
	w->gpu = gpu;
	w->slot = slot;
	w->gpuset = gpuset;
	if (gpu >= 0)
		snprintf(w->name, sizeof w->name, "gpu%d.%d", gpu, slot);
	else
		snprintf(w->name, sizeof w->name, "cpu%d", slot);
	w->deadline = evtimer_new(kgymd_base, proc_deadline, w);
	w->killer = evtimer_new(kgymd_base, proc_killer, w);
	w->respawn = evtimer_new(kgymd_base, proc_spawn_cb, w);
	if (w->deadline == NULL || w->killer == NULL || w->respawn == NULL)
		fatalx("out of memory");
	TAILQ_INSERT_TAIL(&proc_all, w, entry);
	if (proc_sigchld == NULL) {
		proc_sigchld = evsignal_new(kgymd_base, SIGCHLD, proc_reap_all, NULL);
		if (proc_sigchld == NULL || evsignal_add(proc_sigchld, NULL) < 0)
			fatalx("cannot watch SIGCHLD");
	}
	proc_spawn(w);
	return w;
}

static void
proc_spawn_cb(evutil_socket_t fd, short what, void *arg)
{
	proc_spawn(arg);
}

static int
proc_wipe_open_up(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	/* A job may leave directories it made unreadable (mkdir mode 0). */
	if (flag == FTW_D || flag == FTW_DNR)
		chmod(path, 0700);
	return 0;
}

static int
proc_wipe_remove(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (ftw->level > 0 && remove(path) < 0 && errno != ENOENT)
		log_warn("cannot remove %s", path);
	return 0;
}

/*
 * Empty a worker's private directory before a new worker gets it.  The
 * worker empties it itself between jobs, but cannot undo everything a job
 * may do there (its sandbox forbids chmod): the parent can.
 */
static void
proc_wipe(const char *dir)
{
	nftw(dir, proc_wipe_open_up, 16, FTW_PHYS);
	nftw(dir, proc_wipe_remove, 16, FTW_DEPTH | FTW_PHYS);
}

/* Only async-signal-safe calls between fork and exec. */
static void __attribute__((noreturn))
proc_child(int chan, char *const argv[], char *const envp[])
{
	sigset_t none;
	int devnull, sig;

	setpgid(0, 0);
	/* If kgymd dies (kill -9), its workers die with it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);	/* SIGPIPE was ignored in the parent */
	if (chan == 3) {
		if (fcntl(3, F_SETFD, 0) < 0)
			_exit(126);
	} else if (dup2(chan, 3) < 0) {
		_exit(126);
	}
	if ((devnull = open("/dev/null", O_RDWR)) < 0 || dup2(devnull, 0) < 0 ||
	    dup2(devnull, 1) < 0)
		_exit(126);
	/* stderr stays the daemon's, for a dying worker's last words. */
	close_range(4, ~0u, 0);
	execve(argv[0], argv, envp);
	_exit(127);
}

static void
proc_spawn(struct worker *w)
{
	char dir[PATH_MAX], gpu[16];
	char e_home[PATH_MAX + 8], e_tmp[PATH_MAX + 16], e_cuda[32], e_cache[PATH_MAX + 40],
	    e_ld[4096];
	char *argv[PROC_ARGV_MAX], *envp[PROC_ENV_MAX];
	const char *ld = getenv("LD_LIBRARY_PATH");
	struct timeval tv = proc_tv(kgymd_config->worker_start_timeout_s);
	int sv[2], n = 0, e = 0;
	pid_t pid;

	snprintf(dir, sizeof dir, "%s/work/%s", kgymd_config->state_dir, w->name);
	proc_wipe(dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		log_warn("worker %s: %s", w->name, dir);
		evtimer_add(w->respawn, &(struct timeval){ .tv_sec = 5 });
		return;
	}
	snprintf(gpu, sizeof gpu, "%d", w->gpu);
	/* The worker reads its settings from the start-up copy (main.c). */
	argv[n++] = kgymd_config->worker_path;
	argv[n++] = "--name";
	argv[n++] = w->name;
	argv[n++] = w->gpu >= 0 ? "--gpu" : "--cpu";
	if (w->gpu >= 0)
		argv[n++] = gpu;
	argv[n++] = "--config";
	argv[n++] = kgymd_worker_config;
	argv[n] = NULL;

	/* A minimal environment: nothing of the daemon's leaks into jobs. */
	snprintf(e_home, sizeof e_home, "HOME=%s", dir);
	snprintf(e_tmp, sizeof e_tmp, "TMPDIR=%s", dir);
	snprintf(e_cache, sizeof e_cache, "CUDA_CACHE_PATH=%s/.nv/ComputeCache", dir);
	if (w->gpu >= 0)
		snprintf(e_cuda, sizeof e_cuda, "CUDA_VISIBLE_DEVICES=%d", w->gpu);
	else
		snprintf(e_cuda, sizeof e_cuda, "CUDA_VISIBLE_DEVICES=");
	envp[e++] = "PATH=/usr/local/bin:/usr/bin:/bin";
	envp[e++] = "LANG=C.UTF-8";
	envp[e++] = "CUDA_DEVICE_ORDER=PCI_BUS_ID";
	envp[e++] = e_cuda;
	envp[e++] = e_home;
	envp[e++] = e_tmp;
	envp[e++] = e_cache;
	if (ld != NULL) {
		/* Needed where libraries are bundled beside the build (device runs). */
		snprintf(e_ld, sizeof e_ld, "LD_LIBRARY_PATH=%s", ld);
		envp[e++] = e_ld;
	}
	envp[e] = NULL;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		log_warn("worker %s: socketpair", w->name);
		evtimer_add(w->respawn, &(struct timeval){ .tv_sec = 5 });
		return;
	}
	if ((pid = fork()) < 0) {
		log_warn("worker %s: fork", w->name);
		close(sv[0]);
		close(sv[1]);
		evtimer_add(w->respawn, &(struct timeval){ .tv_sec = 5 });
		return;
	}
	if (pid == 0)
		proc_child(sv[1], argv, envp);
	close(sv[1]);
	/* Both sides set the group, so kill(-pid) works whoever runs first. */
	setpgid(pid, pid);
	evutil_make_socket_nonblocking(sv[0]);
	w->bev = bufferevent_socket_new(kgymd_base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	if (w->bev == NULL) {
		close(sv[0]);
		kill(-pid, SIGKILL);
	} else {
		bufferevent_setcb(w->bev, proc_read, NULL, proc_event, w);
		bufferevent_setwatermark(w->bev, EV_READ, 0,
		    kgymd_config->max_message_bytes + IPC_HEADER_LEN);
		bufferevent_enable(w->bev, EV_READ | EV_WRITE);
	}
	w->pid = pid;
	w->state = W_STARTING;
	w->hello_seen = false;
	w->recycle = false;
	w->killed_by_us = false;
	w->jobs_done = 0;
	w->kill_code = NULL;
	free(w->kill_reason);
	w->kill_reason = NULL;
	free(w->timed_out_phase);
	w->timed_out_phase = NULL;
	w->last_log[0] = '\0';
	w->started_us = stats_now_us();
	/* The start timeout reuses the deadline timer: no job runs yet. */
	evtimer_add(w->deadline, &tv);
	log_debug("worker %s: started pid %ld", w->name, (long)pid);
}

/*
 * How many processes the OOM killer has killed since boot (/proc/vmstat,
 * Linux 4.13 on), or -1: told apart from another process's SIGKILL, an
 * out-of-memory death is the job's fault and an outside kill is not.
 */
static int64_t
proc_oom_kills(void)
{
	char line[128];
	long long n = -1;
	FILE *f;

	if ((f = fopen("/proc/vmstat", "re")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "oom_kill %lld", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* What killed the worker, as an error code and a sentence. */
static void
proc_obituary(struct worker *w, int status, const char **ret_code, char *msg, size_t len)
{
	int sig;

	if (w->timed_out_phase != NULL) {
		*ret_code = "TIMEOUT_ERROR";
		snprintf(msg, len, "the %s phase ran past its deadline of %g s and was killed",
		    w->timed_out_phase, w->timed_out_after);
	} else if (w->kill_code != NULL) {
		*ret_code = w->kill_code;
		snprintf(msg, len, "%s", w->kill_reason ?: "killed by kgymd");
	} else if (WIFSIGNALED(status)) {
		sig = WTERMSIG(status);
		if (sig == SIGSYS) {
			*ret_code = "SANDBOX_VIOLATION";
			snprintf(msg, len, "the job made a system call the sandbox forbids "
			    "(killed by SIGSYS)");
		} else if (sig == SIGKILL && !w->killed_by_us) {
			int64_t oom = proc_oom_kills();

			if (oom >= 0 && w->oom_kills >= 0 && oom == w->oom_kills) {
				/* The OOM killer killed nobody meanwhile: someone else did it. */
				*ret_code = "SYSTEM_ERROR";
				snprintf(msg, len, "the worker was killed by SIGKILL from outside "
				    "kgymd (not the OOM killer)");
			} else {
				*ret_code = "RESOURCE_ERROR";
				snprintf(msg, len, "the job was killed by SIGKILL that kgymd did not "
				    "send%s", oom >= 0 && w->oom_kills >= 0 ?
				    ": the OOM killer, it ran out of memory" :
				    ": most likely it ran out of memory");
			}
		} else if (sig == SIGXFSZ) {
			*ret_code = "RESOURCE_ERROR";
			snprintf(msg, len, "the job wrote past the file size limit "
			    "(sandbox.job_max_file_size)");
		} else if (sig == SIGXCPU) {
			*ret_code = "RESOURCE_ERROR";
			snprintf(msg, len, "the job used up its CPU time limit");
		} else {
			*ret_code = "RUNTIME_ERROR";
			snprintf(msg, len, "the job crashed: killed by SIG%s (%s)",
			    sigabbrev_np(sig) ?: "?", strsignal(sig));
		}
		if (w->last_log[0] != '\0' && strlen(msg) + 20 < len)
			snprintf(msg + strlen(msg), len - strlen(msg), "; last message: %s",
			    w->last_log);
	} else {
		*ret_code = "RUNTIME_ERROR";
		snprintf(msg, len, "the worker exited with status %d%s%s",
		    WEXITSTATUS(status), w->last_log[0] != '\0' ? ": " : "", w->last_log);
	}
}

static void
proc_reaped(struct worker *w, int status)
{
	struct kgym_job_outcome out = { .ok = 0, .worker = w->name };
	char msg[1024];
	const char *code = NULL;
	bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
	    w->kill_code == NULL && w->timed_out_phase == NULL;
	bool in_start = !w->hello_seen;
	struct timeval tv = { 0 };

	evtimer_del(w->deadline);
	evtimer_del(w->killer);
	proc_close_channel(w);
	proc_obituary(w, status, &code, msg, sizeof msg);
	if (pool_job_id(w) != 0) {
		log_warnx("worker %s (pid %ld) died running task %s in its %s phase: %s: %s",
		    w->name, (long)w->pid, pool_job_task_id(w) ?: "(gone)",
		    pool_job_phase(w) ?: "-", code, msg);
		out.error_code = code;
		out.error_message = msg;
		out.phase = pool_job_phase(w);
		w->state = W_DOWN;
		w->pid = 0;
		pool_job_end(w, &out);
	} else if (!clean && !w->killed_by_us) {
		log_warnx("worker %s (pid %ld) died %s: %s", w->name, (long)w->pid,
		    in_start ? "while starting" : "while idle", msg);
	} else {
		log_debug("worker %s (pid %ld) exited", w->name, (long)w->pid);
	}
	w->state = W_DOWN;
	w->pid = 0;
	if (pool_is_stopping())
		return;
	if (in_start) {
		/* A worker that cannot start: back off instead of spinning. */
		w->start_failures++;
		tv.tv_sec = 1 << (w->start_failures < 5 ? w->start_failures : 5);
		if (tv.tv_sec > PROC_RESPAWN_MAX_S)
			tv.tv_sec = PROC_RESPAWN_MAX_S;
		log_errorx("worker %s failed to start (%d in a row); retrying in %ld s",
		    w->name, w->start_failures, (long)tv.tv_sec);
	}
	evtimer_add(w->respawn, &tv);
}

static void
proc_reap_all(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w;
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		TAILQ_FOREACH(w, &proc_all, entry)
			if (w->pid == pid)
				break;
		if (w != NULL)
			proc_reaped(w, status);
	}
}

void
proc_send_job(struct worker *w, uint64_t id, const char *backend, const char *phase,
    const json_t *request)
{
	w->state = W_BUSY;
	w->oom_kills = proc_oom_kills();
	proc_send(w, IPC_JOB, json_pack("{s:I, s:s, s:s, s:O}", "job", (json_int_t)id,
	    "backend", backend, "phase", phase, "request", request));
	proc_arm_deadline(w);
}

void
proc_kill(struct worker *w, const char *why)
{
	log_info("worker %s (pid %ld): killing it: %s", w->name, (long)w->pid, why);
	w->killed_by_us = true;
	w->state = W_STOPPING;
	pool_worker_dying(w);
	proc_close_channel(w);
	proc_signal_group(w, SIGKILL);
}

void
proc_free(struct worker *w)
{
	if (w == NULL)
		return;
	if (w->pid > 0) {
		proc_signal_group(w, SIGKILL);
		waitpid(w->pid, NULL, 0);
	}
	proc_close_channel(w);
	event_free(w->deadline);
	event_free(w->killer);
	event_free(w->respawn);
	TAILQ_REMOVE(&proc_all, w, entry);
	json_decref(w->hello);
	free(w->kill_reason);
	free(w->affinity);
	free(w->timed_out_phase);
	free(w);
	if (TAILQ_EMPTY(&proc_all) && proc_sigchld != NULL) {
		event_free(proc_sigchld);
		proc_sigchld = NULL;
	}
}

json_t *
proc_describe(const struct worker *w)
{
	return json_pack("{s:s, s:I, s:s, s:s?, s:s?, s:i, s:s, s:O?}", "name", w->name,
	    "pid", (json_int_t)w->pid, "state", ipc_state_name(w->state),
	    "task_id", pool_job_task_id(w), "phase", pool_job_phase(w),
	    "jobs_done", (int)w->jobs_done,
	    "lock", w->lock_held == KGYM_GPU_EXCLUSIVE ? "exclusive" :
	    w->lock_held == KGYM_GPU_SHARED ? "shared" : "none",
	    "sandbox", json_object_get(w->hello, "sandbox"));
}
