/*
 * store.c -- the durable task store.
 *
 * Every accepted task is a row of one SQLite database under state_dir; the
 * row is committed before the client hears "accepted", and every state
 * change is a write, so a restart (or a crash) finds each task where it
 * was.  store_recover() turns that into work again at start-up.
 *
 * The database runs in WAL mode.  synchronous=NORMAL (the default) makes a
 * commit survive the death of the process, kill -9 included, though not a
 * power cut; store_sync = full adds an fsync per commit for that.
 *
 * Every statement is prepared once in store_open() and reused, which is
 * what lets one transaction take tens of thousands of inserts a second.
 * SQLite's result codes stop here: callers see 0 or -errno, and the
 * SQLite message goes to the log.
 *
 * The database and its -wal/-shm files hold candidates' source code and
 * results, so they are the daemon's alone (mode 0600): the database file
 * is created here with that mode before SQLite opens it, and SQLite gives
 * its -wal and -shm files the mode of the database file.
 */
#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "kgymd.h"

#define STORE_SCHEMA_VERSION	3
#define STORE_BUSY_TIMEOUT_MS	5000
/* Shrink the WAL back to this after a checkpoint (a big batch grows it). */
#define STORE_WAL_LIMIT_BYTES	(64 * 1024 * 1024)
/* Checkpoint when the WAL holds this many pages (see store_set_journal). */
#define STORE_CHECKPOINT_PAGES	8192

/* The SQL below spells task states as numbers. */
_Static_assert(TASK_QUEUED == 0 && TASK_RUNNING == 1 && TASK_COMPLETED == 2 &&
    TASK_FAILED == 3 && TASK_CANCELLED == 4 && TASK__STATE_COUNT == 5,
    "store.c SQL hard-codes the task state numbers");

/*
 * One index for owners: (owner, state, seq) would serve a non-admin's
 * listing by state better, but every state change would write it, and
 * each index written costs every commit.
 */
#define STORE_OWNER_INDEXES \
	"CREATE INDEX IF NOT EXISTS tasks_owner_seq ON tasks (owner, seq);"

/*
 * A task's payload (a candidate's source, tens of KiB) has a table of its
 * own, keyed by the task's seq and written once: SQLite rewrites a whole
 * row, overflow pages included, on every UPDATE, and a task's row is
 * updated twice more (running, ended).  With the payload in the row, an
 * 8 KiB task cost three 8 KiB writes to the WAL and three to the database
 * (measured: bench/control's 8 KiB phase spent most of its time in the
 * writer).  The trigger keeps the two tables in step on every delete.
 */
#define STORE_PAYLOADS \
	"CREATE TABLE IF NOT EXISTS payloads (" \
	" seq INTEGER PRIMARY KEY, payload TEXT NOT NULL);" \
	"CREATE TRIGGER IF NOT EXISTS tasks_payload_gone AFTER DELETE ON tasks" \
	" BEGIN DELETE FROM payloads WHERE seq = old.seq; END;"

/*
 * Terminal rows are those with state >= 2; the partial index and prune
 * spell the condition the same way so that SQLite may use the index.
 */
static const char store_schema[] =
	"CREATE TABLE IF NOT EXISTS tasks ("
	" seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	" id TEXT NOT NULL UNIQUE,"
	" workflow TEXT,"
	" priority INTEGER NOT NULL,"
	" state INTEGER NOT NULL,"
	" timeout_s REAL NOT NULL DEFAULT 0,"
	" gpu_memory_bytes INTEGER NOT NULL DEFAULT 0,"
	" attempt INTEGER NOT NULL DEFAULT 0,"
	" created_ms INTEGER NOT NULL DEFAULT 0,"
	" started_ms INTEGER NOT NULL DEFAULT 0,"
	" finished_ms INTEGER NOT NULL DEFAULT 0,"
	" error_code TEXT,"
	" error_message TEXT,"
	" result TEXT,"
	" owner TEXT NOT NULL DEFAULT '');"
	"CREATE INDEX IF NOT EXISTS tasks_state_seq ON tasks (state, seq);"
	"CREATE INDEX IF NOT EXISTS tasks_finished ON tasks (finished_ms)"
	" WHERE state >= 2;"
	STORE_OWNER_INDEXES
	STORE_PAYLOADS;

/*
 * Version 2 adds the owner (kgymd-protocol(7), "Ownership") and the indexes
 * a non-admin's listing walks.  Rows of version 1 belong to nobody: only
 * admins see them.
 */
static const char store_migrate_v1[] =
	"ALTER TABLE tasks ADD COLUMN owner TEXT NOT NULL DEFAULT '';"
	STORE_OWNER_INDEXES;

/*
 * Version 3 moves payloads to their own table (STORE_PAYLOADS).  The old
 * column stays, emptied: no statement reads it.
 */
static const char store_migrate_v2[] =
	STORE_PAYLOADS
	"INSERT INTO payloads (seq, payload)"
	" SELECT seq, payload FROM tasks WHERE payload IS NOT NULL;"
	"UPDATE tasks SET payload = NULL WHERE payload IS NOT NULL;";

/* Column order of every SELECT that fills a struct store_row. */
enum store_col {
	COL_SEQ, COL_ID, COL_WORKFLOW, COL_PRIORITY, COL_STATE, COL_TIMEOUT,
	COL_GPU_MEMORY, COL_PAYLOAD, COL_ATTEMPT, COL_CREATED, COL_STARTED, COL_FINISHED,
	COL_ERROR_CODE, COL_ERROR_MESSAGE, COL_RESULT, COL_OWNER
};

#define STORE_PAYLOAD_OF_ROW \
	"(SELECT payload FROM payloads WHERE payloads.seq = tasks.seq)"
#define STORE_COLS_FULL \
	"seq, id, workflow, priority, state, timeout_s, gpu_memory_bytes," \
	" " STORE_PAYLOAD_OF_ROW "," \
	" attempt," \
	" created_ms, started_ms, finished_ms, error_code, error_message, result, owner"
/* Listings leave the two big texts out. */
#define STORE_COLS_BRIEF \
	"seq, id, workflow, priority, state, timeout_s, gpu_memory_bytes, NULL," \
	" attempt," \
	" created_ms, started_ms, finished_ms, error_code, error_message, NULL, owner"

enum store_sql {
	SQL_BEGIN, SQL_COMMIT, SQL_ROLLBACK,
	SQL_INSERT, SQL_INSERT_PAYLOAD, SQL_GET, SQL_STATE, SQL_PAYLOAD,
	SQL_RUNNING, SQL_RUNNING_PAYLOAD, SQL_QUEUED, SQL_DONE,
	SQL_STALE, SQL_FAIL_STALE, SQL_REQUEUE, SQL_SCAN_QUEUED,
	SQL_LIST_ALL, SQL_LIST_STATE, SQL_LIST_OWNER, SQL_LIST_OWNER_STATE,
	SQL_PRUNE, SQL_PRUNE_COUNT, SQL_COUNT,
	SQL__COUNT
};

static const char *const store_sql_text[SQL__COUNT] = {
	/* IMMEDIATE: take the write lock now, never fail on upgrading it. */
	[SQL_BEGIN] = "BEGIN IMMEDIATE",
	[SQL_COMMIT] = "COMMIT",
	[SQL_ROLLBACK] = "ROLLBACK",
	[SQL_INSERT] = "INSERT INTO tasks (id, workflow, priority, state,"
	    " timeout_s, attempt, created_ms, started_ms, finished_ms,"
	    " error_code, error_message, result, gpu_memory_bytes, owner)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"
	    " ?14)",
	[SQL_INSERT_PAYLOAD] = "INSERT INTO payloads (seq, payload) VALUES (?1, ?2)",
	[SQL_GET] = "SELECT " STORE_COLS_FULL " FROM tasks WHERE id = ?1",
	[SQL_STATE] = "SELECT state FROM tasks WHERE id = ?1",
	[SQL_PAYLOAD] = "SELECT " STORE_PAYLOAD_OF_ROW " FROM tasks WHERE id = ?1",
	/* A terminal row is final: no statement below may bring it back. */
	[SQL_RUNNING] = "UPDATE tasks SET state = 1, attempt = ?2,"
	    " started_ms = ?3 WHERE id = ?1 AND state IN (0, 1)",
	/*
	 * RETURNING: a dispatcher that did not keep the payload needs it; one
	 * statement, not two.  Only then: RETURNING reads the payload's
	 * overflow pages and copies it into a temporary table, which cost
	 * every running mark of an 8 KiB task about 10 us when the
	 * scheduler had kept the payload anyway (bench/control).
	 */
	[SQL_RUNNING_PAYLOAD] = "UPDATE tasks SET state = 1, attempt = ?2,"
	    " started_ms = ?3 WHERE id = ?1 AND state IN (0, 1)"
	    " RETURNING " STORE_PAYLOAD_OF_ROW,
	[SQL_QUEUED] = "UPDATE tasks SET state = 0"
	    " WHERE id = ?1 AND state IN (0, 1)",
	[SQL_DONE] = "UPDATE tasks SET state = ?2, error_code = ?3,"
	    " error_message = ?4, result = ?5, finished_ms = ?6"
	    " WHERE id = ?1 AND state IN (0, 1)",
	[SQL_STALE] = "SELECT id, attempt FROM tasks"
	    " WHERE state = 1 AND attempt >= ?1 ORDER BY seq",
	[SQL_FAIL_STALE] = "UPDATE tasks SET state = 3,"
	    " error_code = 'SYSTEM_ERROR', error_message = ?2, result = ?3,"
	    " finished_ms = ?4 WHERE id = ?1 AND state = 1",
	[SQL_REQUEUE] = "UPDATE tasks SET state = 0"
	    " WHERE state = 1 AND attempt < ?1",
	[SQL_SCAN_QUEUED] = "SELECT " STORE_COLS_FULL " FROM tasks"
	    " WHERE state = 0 ORDER BY seq",
	/*
	 * LIMIT -1 is no limit.  Pages go backwards from seq ?2 (exclusive),
	 * each walking an index: a page costs its length, not the store's.
	 */
	[SQL_LIST_ALL] = "SELECT " STORE_COLS_BRIEF " FROM tasks"
	    " WHERE seq < ?2 ORDER BY seq DESC LIMIT ?1",
	[SQL_LIST_STATE] = "SELECT " STORE_COLS_BRIEF " FROM tasks"
	    " WHERE state = ?3 AND seq < ?2 ORDER BY seq DESC LIMIT ?1",
	[SQL_LIST_OWNER] = "SELECT " STORE_COLS_BRIEF " FROM tasks"
	    " WHERE owner = ?4 AND seq < ?2 ORDER BY seq DESC LIMIT ?1",
	[SQL_LIST_OWNER_STATE] = "SELECT " STORE_COLS_BRIEF " FROM tasks"
	    " WHERE owner = ?4 AND state = ?3 AND seq < ?2 ORDER BY seq DESC LIMIT ?1",
	[SQL_PRUNE] = "DELETE FROM tasks WHERE state >= 2 AND finished_ms < ?1",
	[SQL_PRUNE_COUNT] = "SELECT state, count(*) FROM tasks"
	    " WHERE state >= 2 AND finished_ms < ?1 GROUP BY state",
	[SQL_COUNT] = "SELECT state, count(*) FROM tasks GROUP BY state",
};

struct store {
	sqlite3 *db;
	char *path;
	sqlite3_stmt *sql[SQL__COUNT];
	int wal_frames;			/* after the last commit, with store_checkpoint_apart() */
};

static void
store_set_cause(char **ret_cause, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
store_set_cause(char **ret_cause, const char *fmt, ...)
{
	va_list ap;
	char *s;

	if (ret_cause == NULL)
		return;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		s = NULL;
	va_end(ap);
	*ret_cause = s;
}

/*
 * The one place SQLite's result codes become -errno.  Must run before the
 * statement is reset, while sqlite3_errmsg() still describes the failure.
 */
static int
store_error(struct store *store, int rc, const char *what)
{
	int err;

	switch (rc & 0xff) {
	case SQLITE_CONSTRAINT:
		/* The only unique key a caller can hit is the task id. */
		if (rc == SQLITE_CONSTRAINT_UNIQUE ||
		    rc == SQLITE_CONSTRAINT_PRIMARYKEY)
			err = -EEXIST;
		else
			err = -EINVAL;
		break;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		err = -EBUSY;
		break;
	case SQLITE_FULL:
		err = -ENOSPC;
		break;
	case SQLITE_NOMEM:
		err = -ENOMEM;
		break;
	default:
		err = -EIO;
		break;
	}
	/* A duplicate id is a resubmission, which the protocol allows. */
	if (err == -EEXIST)
		log_debug("store: %s: %s", what, sqlite3_errmsg(store->db));
	else
		log_warnx("store %s: %s: %s", store->path, what,
		    sqlite3_errmsg(store->db));
	return err;
}

/* Make a used statement ready for the next call and drop its bindings. */
static void
store_stmt_done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/*
 * Bind helpers that keep the first failure in *rc, so a run of binds is
 * checked once.  Strings are SQLITE_STATIC: every statement is stepped and
 * reset before the function that bound it returns.
 */
static void
store_bind_text(sqlite3_stmt *st, int i, const char *s, int *rc)
{
	if (*rc != SQLITE_OK)
		return;
	if (s == NULL)
		*rc = sqlite3_bind_null(st, i);
	else
		*rc = sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

static void
store_bind_int64(sqlite3_stmt *st, int i, int64_t v, int *rc)
{
	if (*rc == SQLITE_OK)
		*rc = sqlite3_bind_int64(st, i, v);
}

static void
store_bind_double(sqlite3_stmt *st, int i, double v, int *rc)
{
	if (*rc == SQLITE_OK)
		*rc = sqlite3_bind_double(st, i, v);
}

/* Step a statement that returns no rows we need; resets it. */
static int
store_step_done(struct store *store, sqlite3_stmt *st, const char *what)
{
	int rc, err = 0;

	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		err = store_error(store, rc, what);
	store_stmt_done(st);
	return err;
}

static int
store_bind_failed(struct store *store, sqlite3_stmt *st, int rc,
    const char *what)
{
	int err;

	err = store_error(store, rc, what);
	store_stmt_done(st);
	return err;
}

static int
store_strdup_col(sqlite3_stmt *st, int col, char **ret)
{
	const unsigned char *s;

	s = sqlite3_column_text(st, col);
	if (s == NULL) {
		/* NULL text, or no memory to convert the value to text. */
		if (sqlite3_column_type(st, col) != SQLITE_NULL)
			return -ENOMEM;
		*ret = NULL;
		return 0;
	}
	if ((*ret = strdup((const char *)s)) == NULL)
		return -ENOMEM;
	return 0;
}

/* The current result row of `st` (columns in enum store_col order). */
static int
store_row_read(sqlite3_stmt *st, struct store_row **ret_row)
{
	struct store_row *row;
	int err;

	if ((row = calloc(1, sizeof *row)) == NULL)
		return -ENOMEM;
	row->seq = sqlite3_column_int64(st, COL_SEQ);
	row->prio = (enum task_prio)sqlite3_column_int(st, COL_PRIORITY);
	row->state = (enum task_state)sqlite3_column_int(st, COL_STATE);
	row->timeout_s = sqlite3_column_double(st, COL_TIMEOUT);
	row->gpu_memory_bytes = sqlite3_column_int64(st, COL_GPU_MEMORY);
	row->attempt = sqlite3_column_int(st, COL_ATTEMPT);
	row->created_ms = sqlite3_column_int64(st, COL_CREATED);
	row->started_ms = sqlite3_column_int64(st, COL_STARTED);
	row->finished_ms = sqlite3_column_int64(st, COL_FINISHED);
	if ((err = store_strdup_col(st, COL_ID, &row->id)) != 0 ||
	    (err = store_strdup_col(st, COL_WORKFLOW, &row->workflow)) != 0 ||
	    (err = store_strdup_col(st, COL_PAYLOAD, &row->payload)) != 0 ||
	    (err = store_strdup_col(st, COL_ERROR_CODE, &row->error_code)) != 0 ||
	    (err = store_strdup_col(st, COL_ERROR_MESSAGE,
	    &row->error_message)) != 0 ||
	    (err = store_strdup_col(st, COL_RESULT, &row->result)) != 0 ||
	    (err = store_strdup_col(st, COL_OWNER, &row->owner)) != 0) {
		store_row_free(row);
		return err;
	}
	if (row->id == NULL) {
		/* The schema forbids it; a row without id is corruption. */
		store_row_free(row);
		return -EIO;
	}
	*ret_row = row;
	return 0;
}

void
store_row_free(struct store_row *row)
{
	if (row == NULL)
		return;
	free(row->id);
	free(row->workflow);
	free(row->payload);
	free(row->error_code);
	free(row->error_message);
	free(row->owner);
	free(row->result);
	free(row);
}

/*
 * Create the database file 0600 before SQLite sees it (SQLite would create
 * it through the umask), and take group and other bits off files an older
 * run or an administrator left wider.  SQLite copies the database file's
 * mode to the -wal and -shm files it creates.
 */
static int
store_prepare_files(const char *path, char **ret_cause)
{
	static const char *const suffixes[] = { "-wal", "-shm" };
	struct stat sb;
	char *side;
	size_t i;
	int fd, err;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd == -1) {
		err = -errno;
		store_set_cause(ret_cause, "%s: unable to open database file: %s",
		    path, strerror(-err));
		return err;
	}
	if (fstat(fd, &sb) == -1) {
		err = -errno;
		store_set_cause(ret_cause, "%s: %s", path, strerror(-err));
		close(fd);
		return err;
	}
	if (!S_ISREG(sb.st_mode)) {
		store_set_cause(ret_cause, "%s: not a regular file", path);
		close(fd);
		return -EINVAL;
	}
	if ((sb.st_mode & 077) != 0) {
		log_warnx("store %s: mode %03o is too open, setting 0600", path,
		    (unsigned int)(sb.st_mode & 0777));
		if (fchmod(fd, 0600) == -1) {
			err = -errno;
			store_set_cause(ret_cause, "%s: chmod 0600: %s", path,
			    strerror(-err));
			close(fd);
			return err;
		}
	}
	close(fd);

	for (i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
		if (asprintf(&side, "%s%s", path, suffixes[i]) == -1)
			return -ENOMEM;
		if (lstat(side, &sb) == 0 && S_ISREG(sb.st_mode) &&
		    (sb.st_mode & 077) != 0) {
			log_warnx("store %s: mode %03o is too open, setting 0600",
			    side, (unsigned int)(sb.st_mode & 0777));
			if (chmod(side, 0600) == -1) {
				err = -errno;
				store_set_cause(ret_cause, "%s: chmod 0600: %s",
				    side, strerror(-err));
				free(side);
				return err;
			}
		}
		free(side);
	}
	return 0;
}

/* Run a statement that yields one integer (PRAGMA user_version). */
static int
store_query_int(struct store *store, const char *sql, int64_t *ret,
    char **ret_cause)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(store->db, sql, -1, &st, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			*ret = sqlite3_column_int64(st, 0);
			rc = SQLITE_OK;
		}
	}
	if (rc != SQLITE_OK) {
		store_set_cause(ret_cause, "%s: %s: %s", store->path, sql,
		    sqlite3_errmsg(store->db));
		sqlite3_finalize(st);
		return -EIO;
	}
	sqlite3_finalize(st);
	return 0;
}

static int
store_exec_sql(struct store *store, const char *sql, char **ret_cause)
{
	char *msg = NULL;
	int rc;

	rc = sqlite3_exec(store->db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		store_set_cause(ret_cause, "%s: %s", store->path,
		    msg != NULL ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return (rc & 0xff) == SQLITE_BUSY ? -EBUSY : -EIO;
	}
	return 0;
}

static int
store_set_journal(struct store *store, bool sync_full, char **ret_cause)
{
	sqlite3_stmt *st;
	const unsigned char *mode;
	char sql[256];
	int rc, err;

	rc = sqlite3_prepare_v2(store->db, "PRAGMA journal_mode = WAL", -1,
	    &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		store_set_cause(ret_cause, "%s: cannot set WAL mode: %s",
		    store->path, sqlite3_errmsg(store->db));
		sqlite3_finalize(st);
		return (rc & 0xff) == SQLITE_BUSY ? -EBUSY : -EIO;
	}
	/* SQLite answers with the mode it kept when it cannot use WAL. */
	mode = sqlite3_column_text(st, 0);
	if (mode == NULL || strcmp((const char *)mode, "wal") != 0) {
		store_set_cause(ret_cause, "%s: cannot use WAL mode"
		    " (journal_mode stays %s)", store->path,
		    mode != NULL ? (const char *)mode : "unknown");
		sqlite3_finalize(st);
		return -EIO;
	}
	sqlite3_finalize(st);

	/*
	 * A 16 MiB page cache keeps the hot index pages in memory, and
	 * checkpointing every 8192 pages instead of 1000 lets the hot index
	 * pages that every commit rewrites reach the database file once per
	 * checkpoint instead of many times (measured: bench/control).
	 */
	snprintf(sql, sizeof sql, "PRAGMA synchronous = %s;"
	    " PRAGMA journal_size_limit = %d; PRAGMA cache_size = -16384;"
	    " PRAGMA wal_autocheckpoint = %d; PRAGMA temp_store = MEMORY;",
	    sync_full ? "FULL" : "NORMAL", STORE_WAL_LIMIT_BYTES, STORE_CHECKPOINT_PAGES);
	if ((err = store_exec_sql(store, sql, ret_cause)) != 0)
		return err;
	return 0;
}

/*
 * Create the schema of a new database, accept a current one, refuse one
 * written by a newer kgymd (we cannot know what its rows mean).  Inside
 * one transaction so that two openers cannot both create it.
 */
static int
store_check_schema(struct store *store, char **ret_cause)
{
	int64_t version = 0;
	char sql[64];
	int err;

	if ((err = store_exec_sql(store, "BEGIN IMMEDIATE", ret_cause)) != 0)
		return err;
	if ((err = store_query_int(store, "PRAGMA user_version", &version,
	    ret_cause)) != 0)
		goto rollback;
	if (version > STORE_SCHEMA_VERSION) {
		store_set_cause(ret_cause, "%s: task store schema version %lld"
		    " is newer than this kgymd understands (%d); refusing to"
		    " use it", store->path, (long long)version,
		    STORE_SCHEMA_VERSION);
		err = -EPROTONOSUPPORT;
		goto rollback;
	}
	if (version == 1 || version == 2) {
		snprintf(sql, sizeof sql, "PRAGMA user_version = %d",
		    STORE_SCHEMA_VERSION);
		if ((version == 1 &&
		    (err = store_exec_sql(store, store_migrate_v1, ret_cause)) != 0) ||
		    (err = store_exec_sql(store, store_migrate_v2, ret_cause)) != 0 ||
		    (err = store_exec_sql(store, sql, ret_cause)) != 0)
			goto rollback;
		log_info("store %s: schema version %lld upgraded to %d (%spayloads in a "
		    "table of their own)", store->path, (long long)version,
		    STORE_SCHEMA_VERSION, version == 1 ? "task owners, " : "");
	} else if (version < STORE_SCHEMA_VERSION) {
		snprintf(sql, sizeof sql, "PRAGMA user_version = %d",
		    STORE_SCHEMA_VERSION);
		if ((err = store_exec_sql(store, store_schema, ret_cause)) != 0 ||
		    (err = store_exec_sql(store, sql, ret_cause)) != 0)
			goto rollback;
		log_info("store %s: created schema version %d", store->path,
		    STORE_SCHEMA_VERSION);
	}
	if ((err = store_exec_sql(store, "COMMIT", ret_cause)) != 0)
		goto rollback;
	return 0;

rollback:
	sqlite3_exec(store->db, "ROLLBACK", NULL, NULL, NULL);
	return err;
}

static int
store_prepare_all(struct store *store, char **ret_cause)
{
	int i, rc;

	for (i = 0; i < SQL__COUNT; i++) {
		rc = sqlite3_prepare_v3(store->db, store_sql_text[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &store->sql[i], NULL);
		if (rc != SQLITE_OK) {
			store_set_cause(ret_cause, "%s: preparing \"%s\": %s",
			    store->path, store_sql_text[i],
			    sqlite3_errmsg(store->db));
			return -EIO;
		}
	}
	return 0;
}

struct store *
store_open(const char *path, bool sync_full, char **ret_cause)
{
	struct store *store;
	char *cause = NULL;
	int rc;

	if ((store = calloc(1, sizeof *store)) == NULL ||
	    (store->path = strdup(path)) == NULL) {
		store_set_cause(&cause, "%s: out of memory", path);
		goto free_store;
	}
	if (store_prepare_files(path, &cause) != 0)
		goto free_store;

	/* The file exists now: no SQLITE_OPEN_CREATE, no mode left to SQLite. */
	rc = sqlite3_open_v2(path, &store->db,
	    SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		store_set_cause(&cause, "%s: %s", path, store->db != NULL ?
		    sqlite3_errmsg(store->db) : sqlite3_errstr(rc));
		goto free_store;
	}
	sqlite3_extended_result_codes(store->db, 1);
	sqlite3_busy_timeout(store->db, STORE_BUSY_TIMEOUT_MS);

	if (store_set_journal(store, sync_full, &cause) != 0 ||
	    store_check_schema(store, &cause) != 0 ||
	    store_prepare_all(store, &cause) != 0)
		goto free_store;
	log_debug("store %s: open (synchronous=%s)", path,
	    sync_full ? "full" : "normal");
	return store;

free_store:
	if (ret_cause != NULL)
		*ret_cause = cause;
	else
		free(cause);
	store_free(store);
	return NULL;
}

/* In the committing thread: SQLite's WAL hook, instead of its autocheckpoint. */
static int
store_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct store *store = arg;

	store->wal_frames = frames;
	return SQLITE_OK;
}

void
store_checkpoint_apart(struct store *store)
{
	/* Replaces the wal_autocheckpoint hook of this connection. */
	sqlite3_wal_hook(store->db, store_wal_hook, store);
}

int
store_wal_frames(const struct store *store)
{
	return store->wal_frames;
}

int
store_checkpoint_pages(void)
{
	return STORE_CHECKPOINT_PAGES;
}

int
store_checkpoint(struct store *store, int *ret_frames)
{
	int rc, log = 0, done = 0;

	rc = sqlite3_wal_checkpoint_v2(store->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
	if ((rc & 0xff) == SQLITE_BUSY)
		return -EBUSY;
	if (rc != SQLITE_OK)
		return store_error(store, rc, "checkpoint");
	if (ret_frames != NULL)
		*ret_frames = done;
	return 0;
}

void
store_free(struct store *store)
{
	int i;

	if (store == NULL)
		return;
	for (i = 0; i < SQL__COUNT; i++)
		sqlite3_finalize(store->sql[i]);
	/* An open transaction is rolled back by the close. */
	if (store->db != NULL && sqlite3_close(store->db) != SQLITE_OK)
		log_warnx("store %s: close: %s", store->path,
		    sqlite3_errmsg(store->db));
	free(store->path);
	free(store);
}

bool
store_in_transaction(const struct store *store)
{
	return !sqlite3_get_autocommit(store->db);
}

int
store_begin(struct store *store)
{
	/* Transactions do not nest; a second begin is a caller's bug. */
	if (!sqlite3_get_autocommit(store->db))
		return -EALREADY;
	return store_step_done(store, store->sql[SQL_BEGIN], "begin");
}

int
store_commit(struct store *store)
{
	/*
	 * No transaction: none was begun, or SQLite already rolled it back
	 * after an error (a full disk does that).  Either way the writes the
	 * caller meant to commit are not there, which must not look like
	 * success.
	 */
	if (sqlite3_get_autocommit(store->db)) {
		log_warnx("store %s: commit without an open transaction",
		    store->path);
		return -EINVAL;
	}
	return store_step_done(store, store->sql[SQL_COMMIT], "commit");
}

int
store_rollback(struct store *store)
{
	/* Already rolled back (by SQLite after an error): nothing to undo. */
	if (sqlite3_get_autocommit(store->db))
		return 0;
	return store_step_done(store, store->sql[SQL_ROLLBACK], "rollback");
}

int
store_insert(struct store *store, const struct store_row *row, int64_t *ret_seq)
{
	sqlite3_stmt *st = store->sql[SQL_INSERT];
	int rc = SQLITE_OK, err;
	int64_t seq;

	if (row->id == NULL || (int)row->prio < 0 || row->prio >= PRIO__COUNT ||
	    (int)row->state < 0 || row->state >= TASK__STATE_COUNT)
		return -EINVAL;
	store_bind_text(st, 1, row->id, &rc);
	store_bind_text(st, 2, row->workflow, &rc);
	store_bind_int64(st, 3, row->prio, &rc);
	store_bind_int64(st, 4, row->state, &rc);
	store_bind_double(st, 5, row->timeout_s, &rc);
	store_bind_int64(st, 6, row->attempt, &rc);
	store_bind_int64(st, 7, row->created_ms, &rc);
	store_bind_int64(st, 8, row->started_ms, &rc);
	store_bind_int64(st, 9, row->finished_ms, &rc);
	store_bind_text(st, 10, row->error_code, &rc);
	store_bind_text(st, 11, row->error_message, &rc);
	store_bind_text(st, 12, row->result, &rc);
	store_bind_int64(st, 13, row->gpu_memory_bytes, &rc);
	store_bind_text(st, 14, row->owner != NULL ? row->owner : "", &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, "insert");
	if ((err = store_step_done(store, st, "insert")) != 0)
		return err;
	seq = sqlite3_last_insert_rowid(store->db);
	if (row->payload != NULL) {
		st = store->sql[SQL_INSERT_PAYLOAD];
		store_bind_int64(st, 1, seq, &rc);
		store_bind_text(st, 2, row->payload, &rc);
		if (rc != SQLITE_OK)
			return store_bind_failed(store, st, rc, "insert payload");
		if ((err = store_step_done(store, st, "insert payload")) != 0)
			return err;
	}
	if (ret_seq != NULL)
		*ret_seq = seq;
	return 0;
}

int
store_get(struct store *store, const char *id, struct store_row **ret_row)
{
	sqlite3_stmt *st = store->sql[SQL_GET];
	struct store_row *row;
	int rc = SQLITE_OK, err;

	if (id == NULL)
		return -EINVAL;
	store_bind_text(st, 1, id, &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, "get");
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		err = store_row_read(st, &row);
	else if (rc == SQLITE_DONE)
		err = -ENOENT;
	else
		err = store_error(store, rc, "get");
	store_stmt_done(st);
	if (err == 0)
		*ret_row = row;
	return err;
}

int
store_get_payload(struct store *store, const char *id, char **ret_payload)
{
	sqlite3_stmt *st = store->sql[SQL_PAYLOAD];
	char *payload = NULL;
	int rc = SQLITE_OK, err;

	if (id == NULL)
		return -EINVAL;
	store_bind_text(st, 1, id, &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, "get payload");
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		err = store_strdup_col(st, 0, &payload);
	else if (rc == SQLITE_DONE)
		err = -ENOENT;
	else
		err = store_error(store, rc, "get payload");
	store_stmt_done(st);
	if (err == 0)
		*ret_payload = payload;
	return err;
}

/*
 * An update of one task changed nothing: say whether the task is absent
 * (-ENOENT) or already terminal (-EALREADY).
 */
static int
store_why_unchanged(struct store *store, const char *id, const char *what)
{
	sqlite3_stmt *st = store->sql[SQL_STATE];
	int rc = SQLITE_OK, err;

	store_bind_text(st, 1, id, &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, what);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		err = -EALREADY;
	else if (rc == SQLITE_DONE)
		err = -ENOENT;
	else
		err = store_error(store, rc, what);
	store_stmt_done(st);
	return err;
}

/* Step an update of the row `id`; the *_unchanged rule when none matched. */
static int
store_update_one(struct store *store, sqlite3_stmt *st, const char *id,
    const char *what)
{
	int err;

	if ((err = store_step_done(store, st, what)) != 0)
		return err;
	if (sqlite3_changes(store->db) == 0)
		return store_why_unchanged(store, id, what);
	return 0;
}

int
store_mark_running(struct store *store, const char *id, int attempt, int64_t now_ms,
    char **ret_payload)
{
	sqlite3_stmt *st = store->sql[ret_payload != NULL ? SQL_RUNNING_PAYLOAD : SQL_RUNNING];
	char *payload = NULL;
	int rc = SQLITE_OK, err;

	if (id == NULL)
		return -EINVAL;
	store_bind_text(st, 1, id, &rc);
	store_bind_int64(st, 2, attempt, &rc);
	store_bind_int64(st, 3, now_ms, &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, "mark running");
	if (ret_payload == NULL)
		return store_update_one(store, st, id, "mark running");
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if ((err = store_strdup_col(st, 0, &payload)) != 0) {
			store_stmt_done(st);
			return err;
		}
		/* Step to the end so the update is complete. */
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			;
		if (rc != SQLITE_DONE) {
			err = store_error(store, rc, "mark running");
			store_stmt_done(st);
			free(payload);
			return err;
		}
		store_stmt_done(st);
		*ret_payload = payload;
		return 0;
	}
	if (rc != SQLITE_DONE) {
		err = store_error(store, rc, "mark running");
		store_stmt_done(st);
		return err;
	}
	store_stmt_done(st);
	return store_why_unchanged(store, id, "mark running");
}

int
store_mark_queued(struct store *store, const char *id)
{
	sqlite3_stmt *st = store->sql[SQL_QUEUED];
	int rc = SQLITE_OK;

	if (id == NULL)
		return -EINVAL;
	store_bind_text(st, 1, id, &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, "mark queued");
	return store_update_one(store, st, id, "mark queued");
}

int
store_mark_done(struct store *store, const char *id, enum task_state state,
    const char *error_code, const char *error_message, const char *result,
    int64_t now_ms)
{
	sqlite3_stmt *st = store->sql[SQL_DONE];
	int rc = SQLITE_OK;

	if (id == NULL || state < TASK_COMPLETED || state >= TASK__STATE_COUNT)
		return -EINVAL;
	store_bind_text(st, 1, id, &rc);
	store_bind_int64(st, 2, state, &rc);
	store_bind_text(st, 3, error_code, &rc);
	store_bind_text(st, 4, error_message, &rc);
	store_bind_text(st, 5, result, &rc);
	store_bind_int64(st, 6, now_ms, &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, "mark done");
	return store_update_one(store, st, id, "mark done");
}

/* The result a client gets for a task that kept dying with the daemon. */
static int
store_fail_stale(struct store *store, const char *id, int attempt, int64_t now_ms)
{
	sqlite3_stmt *st = store->sql[SQL_FAIL_STALE];
	json_t *result;
	char msg[128], *text;
	int rc = SQLITE_OK, err;

	snprintf(msg, sizeof msg,
	    "daemon stopped while the task was running (%d attempt%s)",
	    attempt, attempt == 1 ? "" : "s");
	result = json_pack("{s:s, s:b, s:b, s:s, s:s, s:s}",
	    "status", "failed", "compiled", 0, "correctness", 0,
	    "error_code", "SYSTEM_ERROR", "error_message", msg, "task_id", id);
	if (result == NULL)
		return -ENOMEM;
	text = json_dumps(result, JSON_COMPACT);
	json_decref(result);
	if (text == NULL)
		return -ENOMEM;

	store_bind_text(st, 1, id, &rc);
	store_bind_text(st, 2, msg, &rc);
	store_bind_text(st, 3, text, &rc);
	store_bind_int64(st, 4, now_ms, &rc);
	if (rc != SQLITE_OK)
		err = store_bind_failed(store, st, rc, "recover");
	else
		err = store_step_done(store, st, "recover");
	free(text);
	if (err == 0)
		log_warnx("store: task %s failed: %s", id, msg);
	return err;
}

struct store_stale {
	char *id;
	int attempt;
};

/*
 * Running rows out of attempts.  Read in full before any is updated, since
 * each update moves its row within the index the scan walks.
 */
static int
store_collect_stale(struct store *store, int max_attempts,
    struct store_stale **ret_stale, size_t *ret_n)
{
	sqlite3_stmt *st = store->sql[SQL_STALE];
	struct store_stale *v = NULL, *nv;
	size_t n = 0, cap = 0, i;
	int rc = SQLITE_OK, err = 0;

	store_bind_int64(st, 1, max_attempts, &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, "recover");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			if ((nv = reallocarray(v, cap, sizeof *v)) == NULL) {
				err = -ENOMEM;
				break;
			}
			v = nv;
		}
		if (store_strdup_col(st, 0, &v[n].id) != 0 || v[n].id == NULL) {
			err = -ENOMEM;
			break;
		}
		v[n].attempt = sqlite3_column_int(st, 1);
		n++;
	}
	if (err == 0 && rc != SQLITE_DONE)
		err = store_error(store, rc, "recover");
	store_stmt_done(st);
	if (err != 0) {
		for (i = 0; i < n; i++)
			free(v[i].id);
		free(v);
		return err;
	}
	*ret_stale = v;
	*ret_n = n;
	return 0;
}

static int
store_recover_running(struct store *store, int max_attempts, int64_t now_ms,
    int *ret_failed)
{
	struct store_stale *stale = NULL;
	sqlite3_stmt *st = store->sql[SQL_REQUEUE];
	size_t nstale = 0, i;
	int rc = SQLITE_OK, err;

	if ((err = store_collect_stale(store, max_attempts, &stale, &nstale)) != 0)
		return err;
	for (i = 0; i < nstale && err == 0; i++)
		err = store_fail_stale(store, stale[i].id, stale[i].attempt, now_ms);
	for (i = 0; i < nstale; i++)
		free(stale[i].id);
	free(stale);
	if (err != 0)
		return err;

	store_bind_int64(st, 1, max_attempts, &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, "recover");
	if ((err = store_step_done(store, st, "recover")) != 0)
		return err;
	if (sqlite3_changes(store->db) > 0)
		log_info("store: requeued %d task(s) that were running",
		    sqlite3_changes(store->db));
	*ret_failed = (int)nstale;
	return 0;
}

/*
 * Call cb for each row `st` yields; a non-zero cb return stops the walk
 * and is returned.  The row is freed after the call (cb borrows it).
 */
static int
store_walk(struct store *store, sqlite3_stmt *st, const char *what,
    int (*cb)(const struct store_row *row, void *arg), void *arg)
{
	struct store_row *row;
	int rc, err = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((err = store_row_read(st, &row)) != 0)
			break;
		err = cb(row, arg);
		store_row_free(row);
		if (err != 0)
			break;
	}
	if (err == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		err = store_error(store, rc, what);
	store_stmt_done(st);
	return err;
}

int
store_recover(struct store *store, int max_attempts, int64_t now_ms,
    int (*cb)(const struct store_row *row, void *arg), void *arg,
    int *ret_failed)
{
	bool own;
	int failed = 0, err;

	/* Join the caller's transaction if there is one, else make our own. */
	own = sqlite3_get_autocommit(store->db);
	if (own && (err = store_begin(store)) != 0)
		return err;
	err = store_recover_running(store, max_attempts, now_ms, &failed);
	if (own) {
		if (err == 0)
			err = store_commit(store);
		if (err != 0)
			store_rollback(store);
	}
	if (err != 0)
		return err;

	if (cb != NULL &&
	    (err = store_walk(store, store->sql[SQL_SCAN_QUEUED], "recover",
	    cb, arg)) != 0)
		return err;
	if (ret_failed != NULL)
		*ret_failed = failed;
	return 0;
}

int
store_list(struct store *store, int state, const char *owner, int64_t before_seq,
    int limit, int (*cb)(const struct store_row *row, void *arg), void *arg)
{
	sqlite3_stmt *st;
	int rc = SQLITE_OK;

	if (state < -1 || state >= TASK__STATE_COUNT || cb == NULL)
		return -EINVAL;
	/* A negative limit is no limit, as in SQL. */
	if (limit < 0)
		limit = -1;
	if (before_seq <= 0)
		before_seq = INT64_MAX;
	if (owner == NULL)
		st = store->sql[state == -1 ? SQL_LIST_ALL : SQL_LIST_STATE];
	else
		st = store->sql[state == -1 ? SQL_LIST_OWNER : SQL_LIST_OWNER_STATE];
	store_bind_int64(st, 1, limit, &rc);
	store_bind_int64(st, 2, before_seq, &rc);
	if (state != -1)
		store_bind_int64(st, 3, state, &rc);
	if (owner != NULL)
		store_bind_text(st, 4, owner, &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, "list");
	return store_walk(store, st, "list", cb, arg);
}

int
store_prune(struct store *store, int64_t before_ms, int *ret_n,
    int64_t ret_by_state[TASK__STATE_COUNT])
{
	sqlite3_stmt *st = store->sql[SQL_PRUNE_COUNT];
	int64_t by_state[TASK__STATE_COUNT] = { 0 };
	int rc = SQLITE_OK, err, state;

	/* What goes, by state, so that stats' counters follow without a scan. */
	store_bind_int64(st, 1, before_ms, &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, "prune");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		state = sqlite3_column_int(st, 0);
		if (state >= 0 && state < TASK__STATE_COUNT)
			by_state[state] = sqlite3_column_int64(st, 1);
	}
	err = rc == SQLITE_DONE ? 0 : store_error(store, rc, "prune");
	store_stmt_done(st);
	if (err != 0)
		return err;
	st = store->sql[SQL_PRUNE];
	rc = SQLITE_OK;
	store_bind_int64(st, 1, before_ms, &rc);
	if (rc != SQLITE_OK)
		return store_bind_failed(store, st, rc, "prune");
	if ((err = store_step_done(store, st, "prune")) != 0)
		return err;
	if (ret_n != NULL)
		*ret_n = sqlite3_changes(store->db);
	if (ret_by_state != NULL)
		memcpy(ret_by_state, by_state, sizeof by_state);
	return 0;
}

int
store_count(struct store *store, int64_t counts[TASK__STATE_COUNT])
{
	sqlite3_stmt *st = store->sql[SQL_COUNT];
	int64_t n[TASK__STATE_COUNT] = { 0 };
	int rc, state, err = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		state = sqlite3_column_int(st, 0);
		if (state < 0 || state >= TASK__STATE_COUNT) {
			log_warnx("store %s: %lld row(s) in unknown state %d",
			    store->path, (long long)sqlite3_column_int64(st, 1),
			    state);
			continue;
		}
		n[state] = sqlite3_column_int64(st, 1);
	}
	if (rc != SQLITE_DONE)
		err = store_error(store, rc, "count");
	store_stmt_done(st);
	if (err == 0)
		memcpy(counts, n, sizeof n);
	return err;
}
