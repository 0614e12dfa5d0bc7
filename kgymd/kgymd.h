/*
 * kgymd.h -- the daemon's internal interfaces, one section per file.
 *
 * Read this first: the sections below are the process design of the parent
 * (see ARCHITECTURE.md).  Every function of a file carries that file's prefix.
 *
 * Conventions (STYLE.md): functions return 0 or a negative errno, predicates
 * return bool, constructors return NULL on failure.  Human-readable detail
 * travels in a `char **ret_cause` (malloc'd, the caller frees it) or a
 * `struct proto_error`.  x_new() returns an owned object, x_free(NULL) is a
 * no-op, out-parameters are named ret_* and written only on success.
 */
#ifndef KGYMD_H
#define KGYMD_H

#include <sys/types.h>
#include <sys/queue.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kgym/plugin.h"

struct event_base;
struct event;
struct evbuffer;

#define KGYM_PROTOCOL_VERSION	1
#define KGYM_TASK_ID_MAX	128	/* bytes; [A-Za-z0-9._:-] */
#define KGYM_NAME_MAX		64	/* workflow / plugin names */
#define KGYM_OWNER_MAX		200	/* "uid:N" or "uid:N:identity" */
#define KGYM_PRINCIPAL_MAX	64	/* an on_behalf_of name (ops.c) */
#define PROTO_TIMEOUT_MIN_S	0.001	/* the shortest timeout_s a task may ask */

/* ------------------------------------------------------------------ log.c */
/* Logging to stderr (foreground / journald) with a level filter. */

void	log_init(int level, bool foreground);
void	log_set_level(int level);
/* Send every message to `sink` instead of stderr (workers: to the parent). */
void	log_set_sink(void (*sink)(int level, const char *tag, const char *msg));
int	log_level_parse(const char *name);	/* KGYM_LOG_* or -EINVAL */
const char *log_level_name(int level);
void	log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));	/* + strerror(errno) */
void	log_errorx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_emit(int level, const char *tag, const char *fmt, va_list ap);
void	log_tagged(int level, const char *tag, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
/* Start-up failures and broken invariants only; never reachable from input. */
void	fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void	fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* --------------------------------------------------------------- config.c */
/*
 * The configuration file (inih).  Every key is typed and range-checked; an
 * error is reported as "file:line: reason".  config owns all its strings.
 */

struct config_plugin_kv {
	char *key;
	char *value;
	int line;
};

struct config_plugin_section {
	char *name;			/* NAME of [plugin.NAME] */
	struct config_plugin_kv *kv;
	size_t nkv;
};

struct config {
	char *path;			/* file it was read from */

	/* [kgymd] */
	char *socket;			/* control socket path */
	int socket_mode;		/* octal permissions of the socket */
	char *state_dir;		/* holds the task store */
	char *plugin_dir;		/* colon-separated list of directories */
	bool gpus_all;			/* gpus = all */
	int *gpus;			/* gpus = 0,1,3 (when !gpus_all) */
	size_t ngpus;
	int workers_per_gpu;		/* CONFIG_AUTO: from the CPUs and memory */
	int max_running_tasks;		/* tasks dispatched at once */
	int max_queued_tasks;		/* back-pressure: queue_full beyond this */
	size_t max_request_bytes;	/* one request line */
	size_t max_input_bytes;		/* unfinished input of all connections */
	size_t max_reply_backlog;	/* unsent replies before a client is dropped */
	int max_connections;
	int admin_connections;		/* of max_connections, kept for admins */
	int64_t idle_timeout_s;		/* no request, no wait: closed */
	int max_batch_tasks;		/* tasks in one submit */
	int max_attempts;		/* dispatches before SYSTEM_ERROR */
	int64_t result_ttl_s;		/* terminal tasks pruned after this */
	double default_timeout_s;	/* task timeout when the task sets none */
	double max_timeout_s;		/* largest timeout_s a task may ask */
	int64_t shutdown_grace_s;	/* running tasks may end before requeue */
	int log_level;			/* KGYM_LOG_* */
	bool store_sync_full;		/* store_sync = full | normal */
	uid_t *allow_uids;		/* peers allowed to connect */
	size_t nallow_uids;
	gid_t *allow_gids;
	size_t nallow_gids;
	uid_t *admin_uids;		/* peers allowed drain/shutdown */
	size_t nadmin_uids;
	uid_t *gateway_uids;		/* peers that may act on_behalf_of others */
	size_t ngateway_uids;

	/* [cluster] (DESIGN §12); cluster_redis NULL: a single node */
	char *cluster_redis;		/* redis://host:port/db or a socket path */
	char *cluster_node_id;		/* "": the host name */
	int64_t cluster_lease_s;	/* a claim not renewed this long is reclaimed */
	int cluster_max_attempts;	/* claims of one task before SYSTEM_ERROR */
	int64_t cluster_result_ttl_s;	/* results kept in Redis */
	char *cluster_password_file;	/* Redis AUTH password; NULL: none */

	/* [workers] */
	char *worker_path;		/* the kgymd-worker program */
	int cpu_workers;		/* CONFIG_AUTO: from the CPUs */
	int64_t gpu_memory_bytes;	/* admission capacity per GPU; 0: reported */
	int max_jobs_per_worker;
	size_t max_message_bytes;	/* worker -> parent frame limit */
	double compile_deadline_s;	/* per-phase job deadlines */
	double correctness_deadline_s;
	double timing_deadline_s;
	double job_deadline_s;		/* any other phase */
	double kill_grace_s;		/* SIGTERM -> SIGKILL */
	double worker_start_timeout_s;

	/* [sandbox] */
	bool sandbox_enabled;
	int64_t job_memory_bytes;	/* RLIMIT_AS of a job */
	int job_max_files;		/* RLIMIT_NOFILE */
	int job_max_processes;		/* RLIMIT_NPROC */
	int64_t job_max_file_bytes;	/* RLIMIT_FSIZE */

	/* [plugin.NAME] sections, handed only to that plugin */
	struct config_plugin_section *plugins;
	size_t nplugins;
};

/*
 * Parse `path`.  On error returns -EINVAL (or -errno for I/O) and sets
 * *ret_cause to "path:line: reason" (line 0 when not tied to a line).
 */
int	config_load(const char *path, struct config **ret_config, char **ret_cause);
/* A config with every default and no file (path "(defaults)"). */
struct config *config_defaults(void);
void	config_free(struct config *config);

/*
 * workers_per_gpu = auto and cpu_workers = auto (the defaults): a GPU
 * worker per 4 CPUs of the GPU's share (a worker compiles Triton kernels
 * and builds inputs on the CPU while another times), one per 16 GiB of the
 * smallest GPU's memory when known (0: unknown), 1 to 4 -- past 4 the
 * exclusive timing, not the overlap, bounds a GPU; a CPU worker per 4
 * CPUs, 2 to 16.
 */
#define CONFIG_AUTO	(-1)
int	config_auto_gpu_workers(int cpus, size_t ngpus, uint64_t gpu_memory_bytes);
int	config_auto_cpu_workers(int cpus);

/* Value of key in [plugin.NAME], or NULL. */
const char *config_plugin_get(const struct config *config, const char *plugin,
	    const char *key);
/*
 * config_plugin.c: the [plugin.NAME] sections (config.c's parser fills
 * them, a reload compares and copies them).
 */
bool	config_plugin_name_valid(const char *name, size_t len);
void	config_plugins_free(struct config_plugin_section *plugins, size_t n);
struct config_plugin_section *config_plugin_find(const struct config *config, const char *name);
/* -EEXIST with the line of the first setting when the key is there. */
int	config_plugin_add(struct config *config, const char *plugin, const char *key,
	    const char *value, int line, int *ret_first);
bool	config_plugins_equal(const struct config *a, const struct config *b);
int	config_plugins_copy(struct config *dst, const struct config *src);
bool	config_uid_allowed(const struct config *config, uid_t uid, gid_t gid);
bool	config_uid_admin(const struct config *config, uid_t uid);
/* May this peer name an on_behalf_of principal (gateway_uids)? */
bool	config_uid_gateway(const struct config *config, uid_t uid);
/*
 * Copy the keys that SIGHUP may change from `next` into `cur`, and log each
 * key that differs but needs a restart.
 */
void	config_apply_reload(struct config *cur, const struct config *next);

/* ---------------------------------------------------------- cluster_url.c */
/* The [cluster] redis key: a TCP address (host, port, db) or a Unix socket. */
struct cluster_addr {
	char host[256];			/* "" for a Unix socket */
	int port;
	int db;
	char path[108];			/* the socket; "" for TCP */
};
/* -EINVAL with what was expected in *ret_reason (malloc'd). */
int	cluster_url_parse(const char *url, struct cluster_addr *ret, char **ret_reason);

/* One key of the key table, for the checks that keep the docs true. */
struct config_key_info {
	const char *section;		/* "kgymd", "workers", "sandbox" or "cluster" */
	const char *name;
	const char *default_value;	/* as written in etc/kgymd.conf */
	bool reloadable;		/* SIGHUP applies it */
	const char *doc;		/* one line */
};
/* Key i of the table; -ENOENT past the last one. */
int	config_key_info(size_t i, struct config_key_info *ret_info);

/* ------------------------------------------------------------- protocol.c */
/*
 * Control protocol v1 (kgymd-protocol(7)): parsing requests and tasks into
 * checked values, building replies.  Pure functions, no I/O: the fuzz
 * harness drives them directly.
 */

enum proto_op {
	OP_HELLO, OP_SUBMIT, OP_STATUS, OP_RESULT, OP_WAIT, OP_CANCEL, OP_LIST,
	OP_WORKERS, OP_HEALTH, OP_PLUGINS, OP_STATS, OP_DRAIN, OP_SHUTDOWN,
	OP__COUNT
};

struct proto_error {
	const char *code;		/* bad_json, bad_request, ... (static) */
	char message[512];
};

/*
 * Whom a request acts for: its connection's peer, or the principal that a
 * gateway peer (gateway_uids) named with "on_behalf_of" (ops.c sets it).
 */
struct principal {
	char owner[KGYM_OWNER_MAX + 1];	/* "uid:N" or "uid:N:NAME" */
	bool admin;			/* sees every task */
	bool gateway;			/* a gateway as itself: also sees "uid:N:*" */
};

struct request {
	json_t *root;			/* owned */
	json_t *id;			/* borrowed from root; NULL when absent */
	enum proto_op op;
	struct principal who;		/* set by ops_dispatch() */
};

enum task_prio { PRIO_HIGH = 0, PRIO_NORMAL = 1, PRIO_LOW = 2, PRIO__COUNT };

enum task_state {
	TASK_QUEUED = 0, TASK_RUNNING = 1, TASK_COMPLETED = 2, TASK_FAILED = 3,
	TASK_CANCELLED = 4, TASK__STATE_COUNT
};

/* A task as submitted, checked.  Strings borrowed from the request's JSON. */
struct task_spec {
	const char *id;			/* NULL: the daemon assigns one */
	const char *workflow;
	enum task_prio prio;
	double timeout_s;		/* 0: the configured default */
	int64_t gpu_memory_bytes;	/* resources.gpu_memory_bytes; 0 undeclared */
	json_t *payload;		/* borrowed */
};

/*
 * Parse one request line.  On failure fills *err (bad_json, bad_request,
 * unsupported_version, unknown_op) and, when the line was a JSON object
 * with an "id", sets *ret_id to a new reference to it so the error reply
 * can echo it.
 */
int	proto_parse_request(const char *line, size_t len, struct request *ret_req,
	    json_t **ret_id, struct proto_error *err);
void	proto_request_clear(struct request *req);
/* Check a task object; the error message names the field.  -EINVAL. */
int	proto_parse_task(json_t *task, double max_timeout_s, struct task_spec *ret_spec,
	    struct proto_error *err);
bool	proto_task_id_valid(const char *id);

/* Typed field access: -EINVAL with err naming the field when wrong. */
int	proto_get_string(json_t *obj, const char *field, bool required,
	    const char **ret, struct proto_error *err);
int	proto_get_int(json_t *obj, const char *field, bool required, int64_t min,
	    int64_t max, int64_t *ret, struct proto_error *err);
int	proto_get_bool(json_t *obj, const char *field, bool required, bool *ret,
	    struct proto_error *err);
int	proto_get_array(json_t *obj, const char *field, bool required, json_t **ret,
	    struct proto_error *err);
void	proto_error_set(struct proto_error *err, const char *code, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

const char *proto_op_name(enum proto_op op);
const char *proto_prio_name(enum task_prio prio);
int	proto_prio_parse(const char *name);	/* enum or -EINVAL */
const char *proto_state_name(enum task_state state);
int	proto_state_parse(const char *name);	/* enum or -EINVAL */
bool	proto_state_terminal(enum task_state state);

/* {"v":1,"id":id,"ok":true} -- id may be NULL (becomes null). */
json_t	*proto_reply_ok(json_t *id);
json_t	*proto_reply_error(json_t *id, const char *code, const char *message);
json_t	*proto_event_result(json_t *id, const char *task_id, enum task_state state,
	    json_t *result);
/* One compact line, '\n'-terminated; NULL on allocation failure. */
char	*proto_encode(const json_t *reply, size_t *ret_len);

/* ---------------------------------------------------------------- store.c */
/*
 * The durable task store: one SQLite database in WAL mode.  A task row is
 * committed before the client hears "accepted"; every state change is a
 * write.  A struct store is one SQLite connection, for one thread at a
 * time: kgymd_store is the loop's, the writer (writer.c) has its own.
 */

struct store;

/* A task row.  Strings are owned by the row (store_row_free). */
struct store_row {
	int64_t seq;			/* submission order, unique */
	char *id;
	char *workflow;
	enum task_prio prio;
	enum task_state state;
	double timeout_s;
	int64_t gpu_memory_bytes;	/* resources.gpu_memory_bytes; 0 undeclared */
	char *payload;			/* JSON text */
	int attempt;			/* times dispatched */
	int64_t created_ms;		/* wall clock, ms since the epoch */
	int64_t started_ms;		/* 0 when never started */
	int64_t finished_ms;		/* 0 while not terminal */
	char *error_code;		/* NULL when none */
	char *error_message;
	char *result;			/* JSON text, NULL while not terminal */
	char *owner;			/* "uid:N"; "" for rows older than owners */
};

struct store *store_open(const char *path, bool sync_full, char **ret_cause);
void	store_free(struct store *store);
/*
 * Checkpoints of the WAL done by another connection (writer.c's checkpoint
 * thread): this connection stops checkpointing on its own and records the
 * WAL's size after each of its commits, which store_wal_frames() returns.
 */
void	store_checkpoint_apart(struct store *store);
int	store_wal_frames(const struct store *store);
/* The WAL's size, in pages, past which it is checkpointed (wal_autocheckpoint). */
int	store_checkpoint_pages(void);
/*
 * A passive checkpoint: copies what it can of the WAL into the database
 * without waiting for anyone; the WAL frames now in the database in
 * *ret_frames (may be NULL).  -EBUSY when another checkpoint runs.
 */
int	store_checkpoint(struct store *store, int *ret_frames);
/* Batch several writes in one transaction (submit of many tasks). */
int	store_begin(struct store *store);
int	store_commit(struct store *store);
int	store_rollback(struct store *store);
/* Whether a transaction is open (SQLite may roll one back on its own). */
bool	store_in_transaction(const struct store *store);
/*
 * Insert a new queued task (row->seq is ignored and assigned).  -EEXIST
 * when the id exists.
 */
int	store_insert(struct store *store, const struct store_row *row, int64_t *ret_seq);
/* -ENOENT when absent.  *ret_row is owned by the caller. */
int	store_get(struct store *store, const char *id, struct store_row **ret_row);
/* The payload's JSON text (malloc'd; NULL when the row has none).  -ENOENT. */
int	store_get_payload(struct store *store, const char *id, char **ret_payload);
/*
 * queued -> running, attempt = attempt, started_ms = now; the row's payload
 * in *ret_payload (malloc'd) unless ret_payload is NULL.
 */
int	store_mark_running(struct store *store, const char *id, int attempt, int64_t now_ms,
	    char **ret_payload);
/* running -> queued (shutdown requeue). */
int	store_mark_queued(struct store *store, const char *id);
/* -> terminal state with optional error and result JSON text. */
int	store_mark_done(struct store *store, const char *id, enum task_state state,
	    const char *error_code, const char *error_message, const char *result,
	    int64_t now_ms);
/*
 * Start-up recovery: running rows with attempt < max_attempts become
 * queued; the others fail with SYSTEM_ERROR ("daemon stopped while running,
 * N attempts").  Then `cb` is called for every queued row in seq order.
 * The row passed to cb is borrowed for the call.  *ret_failed counts rows
 * failed here.
 */
int	store_recover(struct store *store, int max_attempts, int64_t now_ms,
	    int (*cb)(const struct store_row *row, void *arg), void *arg,
	    int *ret_failed);
/*
 * Rows newest first (seq descending), all states or one (-1: all), of one
 * owner or all (NULL), with seq below before_seq (<= 0: no bound), at most
 * `limit`.  payload and result are left NULL to keep listings cheap.
 */
int	store_list(struct store *store, int state, const char *owner, int64_t before_seq,
	    int limit, int (*cb)(const struct store_row *row, void *arg), void *arg);
/*
 * Delete terminal rows finished before `before_ms`; *ret_n how many, and
 * ret_by_state[state] how many of each state (either may be NULL).
 */
int	store_prune(struct store *store, int64_t before_ms, int *ret_n,
	    int64_t ret_by_state[TASK__STATE_COUNT]);
/* counts[state] for every state. */
int	store_count(struct store *store, int64_t counts[TASK__STATE_COUNT]);
void	store_row_free(struct store_row *row);

/* ------------------------------------------------------------------ ipc.c */
/*
 * Parent<->worker frames: a 12-byte header (magic, version, type, length)
 * and a JSON object payload.  Shared by kgymd and kgymd-worker.
 */

#define IPC_MAGIC	0x4b47594du	/* "KGYM" */
#define IPC_VERSION	1
#define IPC_HEADER_LEN	12
/* No frame is longer, whatever max_message_bytes says: len + 1 cannot wrap. */
#define IPC_MAX_PAYLOAD	(1024u * 1024u * 1024u)

enum ipc_type {
	IPC_HELLO = 1,		/* w->p: ready: pid, slot, gpu, backends, sandbox */
	IPC_JOB,		/* p->w: {job, backend, phase, request} */
	IPC_RESULT,		/* w->p: {job, result} or {job, error_code, error_message} */
	IPC_LOG,		/* w->p: {level, message} */
	IPC_LOCK,		/* w->p: {mode: "shared"|"exclusive"} */
	IPC_GRANTED,		/* p->w: {mode} */
	IPC_PHASE,		/* w->p: {phase} */
	IPC_FATAL,		/* w->p: {message}: recycle me after this job */
	IPC_BYE,		/* p->w: exit now */
	IPC__TYPE_COUNT
};

const char *ipc_type_name(unsigned int type);
void	ipc_header_encode(unsigned char hdr[IPC_HEADER_LEN], unsigned int type,
	    uint32_t len);
/*
 * -EPROTO (bad magic/version/type) or -EMSGSIZE (over max_len or
 * IPC_MAX_PAYLOAD), with the reason in why.
 */
int	ipc_header_decode(const unsigned char hdr[IPC_HEADER_LEN], size_t max_len,
	    unsigned int *ret_type, uint32_t *ret_len, char *why, size_t whylen);
/* A JSON object from a payload, or NULL with the reason in why. */
json_t	*ipc_payload_decode(const char *buf, size_t len, char *why, size_t whylen);
/* A whole frame, malloc'd. */
char	*ipc_frame(unsigned int type, const json_t *payload, size_t *ret_len);

/* A worker's state as the parent sees it: what it may send (ipc_decode). */
enum worker_state { W_STARTING, W_IDLE, W_BUSY, W_LOCK_WAIT, W_STOPPING, W_DOWN };

const char *ipc_state_name(enum worker_state state);
/* Whether a worker in `state` may send a frame of `type`. */
bool	ipc_allowed(enum worker_state state, unsigned int type);

struct ipc_msg {
	unsigned int type;
	json_t *payload;	/* the caller's once ipc_decode returned > 0 */
	size_t need;		/* with 0 returned: bytes the whole frame needs */
};

/*
 * Decode the frame at the front of buf[0..avail) that a worker in `state`
 * sent: the parent's only reader of bytes from sandboxed code.  Returns the
 * frame's size (> 0) with msg->type and msg->payload set; 0 when it has not
 * all arrived yet (msg->need: the bytes the frame needs, IPC_HEADER_LEN
 * while the header is incomplete); or, with the reason in why,
 * -EMSGSIZE (length over max_len), -EPERM (a type the state does not
 * accept, refused before its payload is waited for) or -EPROTO (bad
 * magic, version or type; a payload that is not one JSON object).
 */
ssize_t	ipc_decode(const void *buf, size_t avail, size_t max_len,
	    enum worker_state state, struct ipc_msg *msg, char *why, size_t whylen);
/* Blocking helpers for the worker side. */
int	ipc_send(int fd, unsigned int type, const json_t *payload);
int	ipc_recv(int fd, size_t max_len, unsigned int *ret_type, json_t **ret_payload,
	    char *why, size_t whylen);

/* --------------------------------------------------------------- plugin.c */
/*
 * The plugin loader: scans plugin_dir, dlopen()s each *.so, checks the ABI
 * guard fields first, then name, kind and required operations, refuses
 * duplicates and files writable by group or others.  Each refusal is
 * logged with its reason and kept in the refusal list; loading the others
 * goes on.
 */

struct plugin {
	char *path;
	void *dl;
	const struct kgym_plugin *p;	/* the plugin's exported struct */
	size_t size;			/* bytes of it we may read */
	bool initialised;
	TAILQ_ENTRY(plugin) entry;
};
TAILQ_HEAD(plugin_list, plugin);

struct plugin_refusal {
	char *path;
	char *reason;
	TAILQ_ENTRY(plugin_refusal) entry;
};
TAILQ_HEAD(plugin_refusal_list, plugin_refusal);

/* Load every plugin in the colon-separated dir list; never fails as a whole. */
void	plugin_load_all(const char *dirs, const struct kgym_host *host);
/* Check and load one file; -errno with reason in *ret_cause (also logged). */
int	plugin_load(const char *path, const struct kgym_host *host, char **ret_cause);
void	plugin_unload_all(void);
/* host->log and host->config_get for a plugin, shared by kgymd and its workers. */
void	plugin_vlog(const struct kgym_plugin_handle *self, int level, const char *fmt,
	    va_list ap);
const char *plugin_config_value(const struct config *config,
	    const struct kgym_plugin_handle *self, const char *key);
/*
 * host->toolkit: the API `name` of a loaded toolkit, at least min_version,
 * or NULL with a malloc'd *ret_cause (kgym/toolkit.h).
 */
const struct kgym_toolkit_api *plugin_toolkit(const char *name, uint32_t min_version,
	    char **ret_cause);
/* Load only plugins of these kinds (bits 1 << KGYM_PLUGIN_*); others are skipped. */
void	plugin_only_kinds(unsigned int mask);
/* A backend's documented seccomp additions (ABI 1.1), or NULL. */
const char *const *plugin_syscalls(const struct plugin *plugin);
/* Workflow plugin serving `workflow`, or NULL. */
struct plugin *plugin_find_workflow(const char *workflow);
struct plugin *plugin_find_backend(const char *backend);
struct plugin *plugin_find(const char *name);
const struct plugin_list *plugin_loaded(void);
const struct plugin_refusal_list *plugin_refused(void);
const char *plugin_kind_name(enum kgym_plugin_kind kind);
/* [{name,kind,version,serves,path}] */
json_t	*plugin_describe(void);
/* The handle the plugin sees as `self`. */
const struct kgym_plugin_handle *plugin_handle(const struct plugin *plugin);
struct plugin *plugin_from_handle(const struct kgym_plugin_handle *self);

/* ----------------------------------------------------------------- host.c */
/* The struct kgym_host table handed to plugins. */

const struct kgym_host *host_table(void);

/* ----------------------------------------------------------------- task.c */
/*
 * In-memory record of every non-terminal task (queued or running), indexed
 * by id.  Terminal tasks live only in the store.  `struct kgym_task` of the
 * plugin ABI is this struct.
 */

struct task {
	char *id;
	int64_t seq;
	enum task_prio prio;
	enum task_state state;		/* TASK_QUEUED or TASK_RUNNING */
	int attempt;
	double timeout_s;
	int64_t gpu_memory_bytes;	/* declared by the task; 0: none */
	int64_t created_ms;		/* wall clock */
	uint64_t enqueued_us;		/* monotonic, for queue latency */
	uint64_t started_us;		/* monotonic */
	uint64_t deadline_us;		/* monotonic: started + timeout_s (sched_start) */
	char *workflow;
	char *owner;			/* "uid:N", who may see and cancel it */
	struct plugin *wf;		/* resolved at dispatch */
	json_t *payload;		/* loaded at dispatch; while queued, NULL or cached */
	size_t payload_cached;		/* while queued: bytes it counts in sched's cache */
	void *plugin_data;
	struct event *plugin_timer;
	void (*plugin_timer_cb)(struct kgym_task *);
	struct event *deadline;
	struct job *job;		/* its sandboxed job, queued or running */
	int gpu;			/* the GPU its last job started on; -1 none */
	bool starting;			/* running, its running mark not yet committed */
	bool marked;			/* queued, but its queue marked it running (claimed) */
	bool finished;			/* ended; freed once its end is committed */
	json_t *result;			/* while finished, until committed */
	TAILQ_ENTRY(task) entry;	/* in a sched queue or the running list */
};
TAILQ_HEAD(task_queue, task);

struct task *task_new(const char *id, int64_t seq, enum task_prio prio,
	    const char *workflow, double timeout_s, int64_t created_ms);
void	task_free(struct task *task);
/* Index (tsearch) of live tasks, and of ended ones until their end is committed. */
int	task_index_add(struct task *task);	/* -EEXIST */
void	task_index_remove(struct task *task);
struct task *task_index_find(const char *id);
size_t	task_index_count(void);
/* A fresh id for a task submitted without one. */
int	task_id_generate(char *buf, size_t len);

/* -------------------------------------------------------------- offload.c */
/*
 * Work off the loop: one thread per struct offload, jobs in a FIFO, done()
 * back on the loop in queue order.  A job is owned by whoever queued it and
 * borrowed by the thread until its done() runs.
 */
struct offload;
struct offload_job {
	void	(*run)(void *arg);	/* in the thread (if the group runner calls it) */
	void	(*done)(void *arg);	/* on the loop; may free the job */
	void	*arg;
	STAILQ_ENTRY(offload_job) entry;
};

/* Start a thread that hands each group of queued jobs to run_group(first, ctx). */
struct offload *offload_new(const char *name,
	    void (*run_group)(struct offload_job *first, void *ctx), void *ctx);
/* Each job's run(), one after the other: a run_group for independent jobs. */
void	offload_run_each(struct offload_job *first, void *ctx);
void	offload_submit(struct offload *o, struct offload_job *job);
/*
 * The "kgymd-parser" thread, started at its first job: control.c parses
 * long lines there, ops.c encodes big submit replies and frees their
 * trees there.  false: no thread could be started (do the work here).
 */
bool	offload_parser_submit(struct offload_job *job);
void	offload_parser_free(void);
/* Wait until every job is done and its done() has run. */
void	offload_sync(struct offload *o);
/* offload_sync(), then end the thread. */
void	offload_free(struct offload *o);

/* --------------------------------------------------------------- writer.c */
/*
 * The store's writer: a thread with its own SQLite connection that runs
 * the daemon's writes in group commits, off the loop.  A job is owned by
 * whoever queued it; the writer borrows it from writer_submit() until it
 * calls done() on the loop.  run() runs in the writer thread, inside a
 * transaction shared with other jobs, and may touch only what the job owns.
 */
struct writer_job {
	int	(*run)(struct store *store, void *arg);	/* 0 or -errno */
	void	(*done)(int error, void *arg);		/* on the loop, after the commit */
	void	*arg;
	int	error;
	struct offload_job o;			/* the writer's */
};

/* Open the writer's connection to `path` and start its thread. */
int	writer_start(const char *path, bool sync_full, char **ret_cause);
/* Queue a job; without a started writer, run it and call done() now. */
void	writer_submit(struct writer_job *job);
/* Wait for every queued job and call their done() (shutdown). */
void	writer_sync(void);
/* Whether jobs go to the thread (else they run at once). */
bool	writer_active(void);
/* writer_sync(), then end the thread; later jobs run at once on kgymd_store. */
void	writer_stop(void);

/* ---------------------------------------------------------------- sched.c */
/*
 * The scheduler: three FIFO queues (high, normal, low), dispatch to the
 * workflow plugin while fewer than max_running_tasks run, completion,
 * cancel, timeouts, and requeue at shutdown.  Submission is batched: the
 * tasks of one submit request are written by the writer (writer.c) in one
 * job and become visible (dispatchable, findable) only once it commits.
 */

struct sched_batch;

void	sched_init(void);
void	sched_free(void);
struct sched_batch *sched_batch_new(void);
/* Free a batch that is not with the writer (never committed, or after done). */
void	sched_batch_free(struct sched_batch *b);
/*
 * Add one checked task of `owner` to the batch.  An existing id returns
 * its current state with *ret_existing = true and its owner in *ret_owner
 * (borrowed until the next call).  -ENOSPC: the queue is full.  ret_id
 * receives the task's id (assigned when the spec has none).  Each new task
 * is the batch's next row (0, 1, ...).
 */
int	sched_submit(struct sched_batch *b, const struct task_spec *spec, const char *owner,
	    char *ret_id, size_t idlen, enum task_state *ret_state, bool *ret_existing,
	    const char **ret_owner, char **ret_cause);
/*
 * Hand the batch to the writer; done() runs on the loop once it is
 * committed (error 0: every row is stored and queued, except rows the
 * store already had, see sched_batch_dup) or failed (none exists).
 * done() may free the batch.  Without a started writer, done() runs now.
 */
void	sched_batch_commit(struct sched_batch *b,
	    void (*done)(struct sched_batch *b, int error, void *arg), void *arg);
size_t	sched_batch_count(const struct sched_batch *b);
/*
 * Row k's id was in the queue when the writer came (another submit of it):
 * that task's state and owner (borrowed until the next call).
 */
bool	sched_batch_dup(const struct sched_batch *b, size_t k, enum task_state *ret_state,
	    const char **ret_owner);
/* Why the queue refused the batch (for the client), or NULL. */
const char *sched_batch_cause(const struct sched_batch *b);
/* A task's state and owner (borrowed until the next call), live or stored. */
int	sched_find(const char *id, enum task_state *ret_state, const char **ret_owner);
/* Queue a row read back from the store at start-up. */
int	sched_restore(const struct store_row *row);
/* Ask for a dispatch pass on the next loop iteration. */
void	sched_kick(void);
/*
 * End a running task with `result` (steals).  The state comes from
 * result.status.  Writes the store, notifies waiters, frees the task.
 */
void	sched_finish(struct task *task, json_t *result);
/* End a task with an error; builds the result object itself. */
void	sched_fail(struct task *task, enum task_state state, const char *error_code,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/*
 * Cancel a queued or running task.  -ENOENT; -EALREADY when terminal, with
 * *ret_state its state.
 */
int	sched_cancel(const char *id, enum task_state *ret_state);
size_t	sched_queued(void);
size_t	sched_running(void);
/* Stop dispatching new tasks (shutdown). */
void	sched_pause(void);
/* Shutdown: cancel plugin work on running tasks and requeue them. */
void	sched_requeue_running(void);
/* Called with the number of running tasks whenever one ends. */
void	sched_on_idle(void (*cb)(void));
/* Terminal result object for an error (status "failed"). */
json_t	*sched_error_result(const char *task_id, const char *error_code,
	    const char *message);

/* ----------------------------------------------------------------- peer.c */
/*
 * A peer: whoever sent a request, whatever transport carried it.  The op
 * handlers (ops.c) and the waits (wait.c) -- and through them the
 * scheduler's end-of-task reports -- know peers only; a transport embeds a
 * struct peer, fills in its identity and says how to reach it.  control.c's
 * Unix-socket connections are one transport.  So nothing below the socket
 * calls back into control.c (tests/unit/check_boundaries.sh keeps it so).
 */

struct ops_pending;
struct waiter;
struct peer;

struct peer_transport {
	/* Queue one reply or event line for the peer (does not steal). */
	void	(*send)(struct peer *peer, const json_t *msg);
	/* The same, already encoded (proto_encode): len bytes ending in '\n'. */
	void	(*send_line)(struct peer *peer, const char *line, size_t len);
	/* A request spread over loop turns has ended: take the peer's next one. */
	void	(*resume)(struct peer *peer);
};

struct peer {
	const struct peer_transport *transport;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	bool admin;
	char owner[KGYM_OWNER_MAX + 1];	/* "uid:N": who its tasks belong to */
	bool gone;			/* the client went away: no replies, no waits */
	struct ops_pending *pending;	/* ops.c's request spread over loop turns */
	int nwaiters;
	TAILQ_HEAD(, waiter) waiters;	/* wait.c's, dropped with the peer */
};

/* A peer of `transport`, no identity yet (the transport fills it in). */
void	peer_init(struct peer *peer, const struct peer_transport *transport);
/* Queue one line for the peer (does not steal); nothing once it is gone. */
void	peer_send(struct peer *peer, const json_t *msg);
void	peer_send_line(struct peer *peer, const char *line, size_t len);
void	peer_resume(struct peer *peer);
/* The transport lets go of the peer: its request in progress and its waiters go. */
void	peer_release(struct peer *peer);

/* ----------------------------------------------------------------- wait.c */
/*
 * Clients waiting for tasks to end (op wait, submit with wait).  A waiter
 * belongs to one peer and is dropped with it; the task is not.
 */

/*
 * Register interest in `ids` for `peer`, answering request `req_id` made
 * for `who` (copied: tasks `who` may not see are not_found).
 * Terminal tasks are answered at once.  timeout_ms < 0: no timeout.
 * The final reply always carries done and pending; `final_done` (op wait)
 * adds not_found, which a submit with wait cannot have.
 */
int	wait_add(struct peer *peer, const struct principal *who, json_t *req_id,
	    const char **ids, size_t nids, int64_t timeout_ms, bool final_done);
/* A task reached a terminal state: tell its waiters. */
void	wait_task_done(const char *id, enum task_state state, json_t *result);
/* The peer is going away. */
void	wait_peer_gone(struct peer *peer);
/* Whether some client waits for task `id`. */
bool	wait_watched(const char *id);
/* cb(id) for every id some client waits for; cb must not change the waits. */
void	wait_foreach_watched(void (*cb)(const char *id));
/*
 * What a shared queue says of a task that is not live here (error 0 and
 * its row, with the result text when final; -ENOENT unknown; other errors
 * leave the waits as they are).
 */
void	wait_task_answer(const char *id, int error, const struct store_row *row);
size_t	wait_count(void);

/* -------------------------------------------------------------- control.c */
/*
 * The control socket: listener, connections, line framing, peer
 * credentials, size limits.  Each connection is a peer (peer.c) whose
 * requests go to ops_dispatch().
 */

int	control_listen(const char *path, int mode, char **ret_cause);
/* control_socket.c: the listening socket at path (a stale one replaced). */
int	ctlsock_bind(const char *path, int mode, int *ret_fd, char **ret_cause);
/* Adopt a socket passed by systemd (LISTEN_FDS). */
int	control_adopt(int fd, char **ret_cause);
void	control_close(void);		/* stop accepting */
void	control_free_all(void);
/*
 * At exit: stop reading, let queued replies drain, close each connection
 * once its output is sent, and call `done` when none is left.
 */
void	control_flush_and_close(void (*done)(void));
size_t	control_connections(void);
/* Unfinished input held for all connections (max_input_bytes). */
size_t	control_input_bytes(void);

/* ------------------------------------------------------------------ ops.c */
/* The op handlers (one per protocol op) and their permission table. */

/*
 * Answer one request of `peer`: 0 when it is answered; 1 when it goes on
 * over later loop turns (a big submit, stored in slices so that no request
 * holds the loop): ops.c then owns *req, the peer should send no further
 * request meanwhile, and ops.c calls peer_resume() once the reply is sent.
 */
int	ops_dispatch(struct peer *peer, struct request *req);
/* May `who` see (wait for, cancel) a task of `owner`? */
bool	ops_may_see(const struct principal *who, const char *owner);
/* The peer is going away: abandon its request in progress. */
void	ops_pending_free(struct peer *peer);
/* The peer is going away: answers still on their way go nowhere. */
void	ops_peer_gone(struct peer *peer);

/* ---------------------------------------------------------------- stats.c */
/* Counters and latency histograms for `stats` and sd_notify STATUS=. */

void	stats_init(void);
/* The store's terminal rows by state, counted once at start-up. */
void	stats_set_stored(const int64_t counts[TASK__STATE_COUNT]);
/* Terminal rows pruned, by state. */
void	stats_pruned(const int64_t counts[TASK__STATE_COUNT]);
void	stats_task_submitted(void);
void	stats_task_done(enum task_state state, uint64_t queue_us, uint64_t run_us);
void	stats_request(enum proto_op op, uint64_t us);
json_t	*stats_describe(void);
uint64_t stats_now_us(void);		/* CLOCK_MONOTONIC */
int64_t	stats_wall_ms(void);		/* CLOCK_REALTIME */

/* ----------------------------------------------------------------- gpus.c */
/* The GPUs kgymd would use, read without touching CUDA (/proc/driver/nvidia). */

struct gpu_info {
	int index;			/* CUDA index in PCI bus order */
	char *name;			/* model, or NULL when unknown; owned */
	bool present;			/* the driver shows it */
	uint64_t memory_bytes;		/* from NVML when it loads; 0: unknown */
};

/*
 * The configured GPUs: gpus = all gives every GPU the driver shows; a list
 * gives those indices, present or not (a GPU-less test machine can still
 * run GPU slots for jobs that need no CUDA).  *ret_info is malloc'd.
 */
void	gpus_enumerate(const struct config *config, struct gpu_info **ret_info,
	    size_t *ret_n);

/* ----------------------------------------------------------------- pool.c */
/*
 * Worker slots, the job queues and the per-GPU readers-writer locks that
 * keep timing exclusive (writer-preferring), with memory-aware admission.
 */

struct worker;
struct job;

struct gpu_slotset {
	int index;
	char *name;
	bool present;
	char arch[16];			/* "sm_90", from a worker's HELLO; "" unknown */
	uint64_t memory_bytes;		/* from a worker's HELLO; 0 unknown */
	uint64_t memory_reserved;	/* declared by the jobs on it */
	int readers;			/* shared holders */
	struct worker *writer;		/* the exclusive holder */
	TAILQ_HEAD(, worker) lock_waiters;
	struct worker **slots;
	size_t nslots;
};

void	pool_init(void);
int	pool_workers_per_gpu(void);	/* auto resolved */
/* Kill every worker (at exit), drop queued jobs. */
void	pool_stop(void);
bool	pool_is_stopping(void);
/* host->job_run. */
int	pool_job_run(struct task *task, const struct kgym_job_spec *spec,
	    void (*done)(struct kgym_task *, const struct kgym_job_outcome *),
	    char **ret_cause);
/* The task ended: drop its queued job or kill its running one. */
void	pool_task_gone(struct task *task);
void	pool_kick(void);
/* From proc.c. */
void	pool_worker_ready(struct worker *w, const json_t *hello);
void	pool_lock_request(struct worker *w, enum kgym_gpu_lock mode);
/* A worker being killed: drop its GPU lock hold or request now. */
void	pool_worker_dying(struct worker *w);
void	pool_job_end(struct worker *w, const struct kgym_job_outcome *outcome);
const char *pool_job_phase(const struct worker *w);
void	pool_job_set_phase(struct worker *w, const char *phase);
const char *pool_job_task_id(const struct worker *w);
uint64_t pool_job_id(const struct worker *w);
json_t	*pool_describe(void);
/* host->gpu_arch: the lowest NVRTC arch among the GPUs, or NULL. */
const char *pool_gpu_arch(void);
/* The name of GPU `index` (nvidia-smi's numbering), or NULL. */
const char *pool_gpu_name(int index);

/* ----------------------------------------------------------------- proc.c */
/*
 * One worker process per slot: fork+exec, the per-state message table,
 * phase deadlines, reaping and obituaries, respawn.
 */

struct worker {
	char name[32];			/* "gpu0.1", "cpu3" */
	int gpu;			/* -1: a CPU worker */
	int slot;
	struct gpu_slotset *gpuset;	/* NULL for CPU workers */
	pid_t pid;			/* 0 while none runs */
	struct bufferevent *bev;	/* the socketpair */
	enum worker_state state;
	struct job *job;		/* the job it runs */
	unsigned int jobs_done;
	char *affinity;			/* its last job's (pool.c); NULL once restarted */
	bool recycle;			/* replace after this job */
	bool hello_seen;		/* it started; a death before is a failed start */
	bool killed_by_us;
	int lock_held;			/* 0 or enum kgym_gpu_lock */
	int lock_wanted;
	uint64_t lock_asked_us;
	const char *kill_code;		/* why we killed it (violation) */
	char *kill_reason;
	char *timed_out_phase;
	double timed_out_after;
	int start_failures;
	int64_t oom_kills;		/* the kernel's OOM kill count when its job began */
	char last_log[256];
	uint64_t started_us;
	json_t *hello;
	struct event *deadline;		/* phase deadline / start timeout */
	struct event *killer;		/* SIGKILL after kill_grace */
	struct event *respawn;
	TAILQ_ENTRY(worker) lock_entry;
	TAILQ_ENTRY(worker) entry;
};

struct worker *proc_new(int gpu, int slot, struct gpu_slotset *gpuset);
void	proc_free(struct worker *w);
void	proc_send_job(struct worker *w, uint64_t id, const char *backend, const char *phase,
	    const json_t *request);
void	proc_lock_granted(struct worker *w);
void	proc_kill(struct worker *w, const char *why);
json_t	*proc_describe(const struct worker *w);

/* --------------------------------------------------------------- notify.c */
/* sd_notify(3) when built with libsystemd; no-ops otherwise. */

void	notify_ready(void);
void	notify_stopping(void);
void	notify_reloading(void);
void	notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ----------------------------------------------------------------- main.c */
/* Process-wide state, set up in main(). */

extern struct event_base *kgymd_base;
extern struct config *kgymd_config;
extern struct store *kgymd_store;
/* The copy of the start-up configuration that workers read. */
extern char *kgymd_worker_config;

/* Begin an orderly shutdown (SIGTERM or the shutdown op). */
void	kgymd_shutdown(const char *why);
/* Stop taking new tasks; existing ones run to the end (drain op). */
void	kgymd_drain(void);
bool	kgymd_draining(void);

#endif /* KGYMD_H */
