/* Task ids and seqs: a new task's seq (time and random bits, above every seq and outbox id),
 * its id, the intent ids drawn from the same counter, and the gwb_task_seq SQL function. */
#include <errno.h>
#include <pthread.h>
#include <sys/random.h>

#include "lib/err.h"
#include "server/store/store_internal.h"

/* gwb_task_seq(id): the seq a task id encodes, or NULL for a text that is not one. */
static void sql_task_seq(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
	(void)argc;
	int64_t v = store_task_id_seq((const char *)sqlite3_value_text(argv[0]));
	if (v < 0)
		sqlite3_result_null(cx);
	else
		sqlite3_result_int64(cx, v);
}

int store_ids_setup(struct store *s)
{
	/* Task ids to seqs, for the statements that find a task by its id (STORE_SQL_TASK_IS)
	 * and for migration 13. Nothing in the schema calls it: other programs read the file
	 * without it. */
	return sqlite3_create_function_v2(s->db, "gwb_task_seq", 1,
					  SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
					  sql_task_seq, NULL, NULL, NULL) == SQLITE_OK
		   ? 0
		   : GWB_EDB;
}

int store_ids_open(struct store *s)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT EXISTS (SELECT 1 FROM task_legacy_ids)", -1, &st,
			       NULL) != SQLITE_OK)
		return GWB_EDB;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		s->ids.has_legacy = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : GWB_EDB;
}

/* Random words for task ids, fetched ID_RANDOM_POOL at a time: one getrandom call per 64
 * ids, not a system call per id. A forked child starts with an empty pool, so two processes
 * never hand out the same words. */
#define ID_RANDOM_POOL 64
static uint32_t id_random[ID_RANDOM_POOL];
static size_t id_random_left;

static void id_random_forget(void)
{
	id_random_left = 0;
}

static void id_random_at_fork(void)
{
	pthread_atfork(NULL, NULL, id_random_forget);
}

/* The next random word (0 when the system has none to give, as before the pool). */
static uint32_t id_random_next(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, id_random_at_fork);
	if (id_random_left == 0) {
		size_t got = 0;
		while (got < sizeof id_random) {
			ssize_t k = getrandom((char *)id_random + got, sizeof id_random - got, 0);
			if (k > 0)
				got += (size_t)k;
			else if (errno != EINTR)
				break;
		}
		id_random_left = got / sizeof id_random[0];
		if (id_random_left == 0)
			return 0;
	}
	uint32_t r = id_random[--id_random_left];
	id_random[id_random_left] = 0; /* a word is handed out once */
	return r;
}

/* Base32 digits in ASCII order, so that ids sort as the numbers they encode. */
static const char id_digits[] = "234567abcdefghijklmnopqrstuvwxyz";

void store_task_id_encode(int64_t seq, char out[16])
{
	uint64_t v = (uint64_t)seq;
	out[0] = 't';
	out[1] = '-';
	for (int i = 11; i >= 0; i--) {
		out[2 + i] = id_digits[v & 31];
		v >>= 5;
	}
	out[14] = '\0';
}

int64_t store_task_id_seq(const char *id)
{
	if (!id || id[0] != 't' || id[1] != '-')
		return -1;
	uint64_t v = 0;
	for (int i = 2; i < 14; i++) {
		char c = id[i];
		int d = c >= '2' && c <= '7' ? c - '2' : c >= 'a' && c <= 'z' ? c - 'a' + 6 : -1;
		if (d < 0)
			return -1;
		v = v << 5 | (uint64_t)d;
	}
	return id[14] == '\0' ? (int64_t)v : -1;
}

/* 1 when seq's id is a legacy task's, 0 when not, -1 on a read error. */
static int legacy_taken(struct store *s, int64_t seq)
{
	char id[16];
	store_task_id_encode(seq, id);
	sqlite3_stmt *st = store_stmt(s, "SELECT 1 FROM task_legacy_ids WHERE id = ?");
	if (!st)
		return -1;
	store_bind_text(st, 1, id);
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

void store_ids_forget(struct store *s)
{
	s->ids.next_seq = 0;
}

/* Reads next_seq when it is not known: one more than every task seq and outbox id. */
static int next_seq_read(struct store *s)
{
	if (s->ids.next_seq)
		return 0;
	int rc = store_one_int(store_stmt(s, "SELECT MAX((SELECT COALESCE(MAX(seq), 0) FROM "
					     "tasks), (SELECT COALESCE(MAX(id), 0) FROM outbox)) + 1"),
			       &s->ids.next_seq);
	if (rc || !s->ids.next_seq) {
		s->ids.next_seq = 0;
		return GWB_EDB;
	}
	return 0;
}

int store_intent_id_new(struct store *s, int64_t *id)
{
	int rc = next_seq_read(s);
	if (rc)
		return rc;
	if (s->ids.next_seq >= STORE_TASK_SEQ_END)
		return GWB_EDB;
	*id = s->ids.next_seq++;
	return 0;
}

int store_task_seq_new(struct store *s, int64_t now_ms, int64_t *seq)
{
	int rc = next_seq_read(s);
	if (rc)
		return rc;
	/* The millisecond (its low 40 bits: they wrap every 34.8 years), then 20 random bits:
	 * ids made close in time sort together, so a batch's inserts into the indexes keyed by
	 * task id (the events, the outcomes) touch the same few pages; one more than the last
	 * when that is larger (several in a millisecond, a clock set back, the wrap), so that
	 * seqs only grow and none is handed out twice. */
	uint64_t ms = (uint64_t)now_ms & ((UINT64_C(1) << 40) - 1);
	int64_t v = (int64_t)(ms << 20 | (id_random_next() & 0xfffff));
	if (v < s->ids.next_seq)
		v = s->ids.next_seq;
	/* Nor the id of a task made before schema 13 (the lookup would find that one first). */
	int taken;
	while (s->ids.has_legacy && (taken = legacy_taken(s, v)) != 0) {
		if (taken < 0)
			return GWB_EDB;
		v++;
	}
	if (v >= STORE_TASK_SEQ_END)
		return GWB_EDB; /* 2^60 tasks: never */
	s->ids.next_seq = v + 1;
	*seq = v;
	return 0;
}
