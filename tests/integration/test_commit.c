/* The group commit of a real gwb-server over a real SQLite file: a batch in which one
 * request is refused and others are replays or conflicts commits the rest; a second process
 * holding the write lock gets 503 answers while /healthz keeps answering; a kill -9 in the
 * middle of a burst of 1,000 submissions loses no acknowledged task and leaves the quota
 * books exact; a client that leaves before its answer harms nothing; a 201 is the task a
 * later GET shows, byte for byte; a decision undone after it wrote makes the batch be decided
 * again with savepoints, with the same answers. SQLite is inspected directly, never through
 * the code under test. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"

static void put_team(const char *url, const char *team, long mem, long core, const char *token)
{
	char path[128], body[256];
	snprintf(path, sizeof path, "/v1/teams/%s", team);
	snprintf(body, sizeof body,
		 "{\"gpu_memory_mib\": %ld, \"gpu_core_percent\": %ld, \"token\": \"%s\"}", mem,
		 core, token);
	struct h_resp r;
	h_req(&r, "PUT", url, path, ADMIN, body, NULL);
	CHECKF(r.status == 201 || r.status == 200, "PUT %s: %ld %s", path, r.status, r.body);
	h_resp_free(&r);
}

static void task_body(char *out, size_t len, const char *team, int mem)
{
	snprintf(out, len,
		 "{\"team\": \"%s\", \"name\": \"c\", \"gpu_memory_mib\": %d, "
		 "\"gpu_core_percent\": 10, \"duration_seconds\": 60}",
		 team, mem);
}



/* A TCP connection to the server of url ("http://127.0.0.1:PORT"). */
static int conn_open(const char *url)
{
	const char *colon = strrchr(url, ':');
	CHECK(colon != NULL);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)strtol(colon + 1, NULL, 10));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	CHECKF(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect %s", url);
	return fd;
}

/* The bytes of one POST /v1/tasks (Connection: close) into out. */
static size_t post_bytes(char *out, size_t len, const char *token, const char *key,
			 const char *body)
{
	char hk[200] = "";
	if (key)
		snprintf(hk, sizeof hk, "Idempotency-Key: %s\r\n", key);
	int n = snprintf(out, len,
			 "POST /v1/tasks HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n"
			 "Content-Type: application/json\r\n%sContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n%s",
			 token, hk, strlen(body), body);
	CHECK(n > 0 && (size_t)n < len);
	return (size_t)n;
}

/* Reads the whole answer (the server closes) and returns its status; *body points into buf. */
static int read_answer(int fd, char *buf, size_t len, const char **body)
{
	size_t n = 0;
	ssize_t k;
	while (n + 1 < len && (k = read(fd, buf + n, len - 1 - n)) > 0)
		n += (size_t)k;
	buf[n] = '\0';
	close(fd);
	int status = 0;
	CHECKF(sscanf(buf, "HTTP/1.1 %d", &status) == 1, "no answer: %s", buf);
	const char *b = strstr(buf, "\r\n\r\n");
	*body = b ? b + 4 : "";
	return status;
}

enum { B_V1, B_KA1, B_KA2, B_OVER, B_NOTEAM, B_CONFLICT, B_INVALID, B_N };

/* One attempt of the mixed batch for team team: returns 1 when the six deferred requests
 * landed in one batch (the answers are checked either way). */
static int mixed_batch(const char *url, const char *db, int attempt)
{
	char team[32], token[64], body[512], keya[64], keyc[64];
	snprintf(team, sizeof team, "mix%d", attempt);
	snprintf(token, sizeof token, "mix-token-%d-abcdef", attempt);
	snprintf(keya, sizeof keya, "ka-%d", attempt);
	snprintf(keyc, sizeof keyc, "kc-%d", attempt);
	/* Room for three tasks of 1024: the one made now and two of the batch. */
	put_team(url, team, 3072, 1000, token);
	task_body(body, sizeof body, team, 1024);
	struct h_resp r;
	char kh[96];
	snprintf(kh, sizeof kh, "Idempotency-Key: %s", keyc);
	const char *hs[] = { kh, NULL };
	h_req(&r, "POST", url, "/v1/tasks", token, body, hs);
	CHECK_INT(r.status, 201);
	h_resp_free(&r);

	static char req[B_N][1024], ans[B_N][16384];
	size_t len[B_N];
	char other[512], over[512], noteam[512];
	task_body(other, sizeof other, team, 2048);
	task_body(over, sizeof over, team, 8192);
	task_body(noteam, sizeof noteam, "no-such-team", 1024);
	len[B_V1] = post_bytes(req[B_V1], sizeof req[0], token, NULL, body);
	len[B_KA1] = post_bytes(req[B_KA1], sizeof req[0], token, keya, body);
	len[B_KA2] = post_bytes(req[B_KA2], sizeof req[0], token, keya, body);
	len[B_OVER] = post_bytes(req[B_OVER], sizeof req[0], token, NULL, over);
	len[B_NOTEAM] = post_bytes(req[B_NOTEAM], sizeof req[0], ADMIN, NULL, noteam);
	len[B_CONFLICT] = post_bytes(req[B_CONFLICT], sizeof req[0], token, keyc, other);
	len[B_INVALID] = post_bytes(req[B_INVALID], sizeof req[0], token, NULL, "{\"team\": 7}");

	double batches0 = h_metric(url, "gwb_store_batches_total", NULL);
	double held0 = h_metric(url, "gwb_store_batch_requests_total", NULL);
	double syncs0 = h_metric(url, "gwb_store_wal_syncs_total", NULL);
	/* Every connection is open before the first byte goes: the server reads them in one
	 * or two loop turns. */
	int fds[B_N];
	for (int i = 0; i < B_N; i++)
		fds[i] = conn_open(url);
	for (int i = 0; i < B_N; i++)
		CHECK(write(fds[i], req[i], len[i]) == (ssize_t)len[i]);
	int st[B_N];
	const char *bodies[B_N];
	for (int i = 0; i < B_N; i++)
		st[i] = read_answer(fds[i], ans[i], sizeof ans[i], &bodies[i]);
	double batches = h_metric(url, "gwb_store_batches_total", NULL) - batches0;
	double held = h_metric(url, "gwb_store_batch_requests_total", NULL) - held0;
	/* The answers came after the sync thread's fdatasync of the WAL, not before it. */
	CHECK(h_metric(url, "gwb_store_wal_syncs_total", NULL) - syncs0 >= 1);
	CHECK_INT((long long)h_metric(url, "gwb_store_commits_not_durable", NULL), 0);

	CHECKF(st[B_V1] == 201, "plain: %d %s", st[B_V1], bodies[B_V1]);
	/* Two with one key: the first creates, the second replays it. */
	int ka_created = (st[B_KA1] == 201) + (st[B_KA2] == 201);
	int ka_replayed = (st[B_KA1] == 200) + (st[B_KA2] == 200);
	CHECKF(ka_created == 1 && ka_replayed == 1, "same key: %d and %d", st[B_KA1], st[B_KA2]);
	CHECKF(st[B_OVER] == 403 && strstr(bodies[B_OVER], "quota_exceeded"), "over: %d %s",
	       st[B_OVER], bodies[B_OVER]);
	CHECKF(st[B_NOTEAM] == 404 && strstr(bodies[B_NOTEAM], "team_not_found"), "no team: %d %s",
	       st[B_NOTEAM], bodies[B_NOTEAM]);
	CHECKF(st[B_CONFLICT] == 409 && strstr(bodies[B_CONFLICT], "idempotency_key_reused"),
	       "conflict: %d %s", st[B_CONFLICT], bodies[B_CONFLICT]);
	CHECKF(st[B_INVALID] == 400, "invalid: %d %s", st[B_INVALID], bodies[B_INVALID]);
	/* The store holds exactly what was acknowledged: three tasks, the quota full. */
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT count(*) FROM tasks WHERE team = '%s'", team);
	CHECK_INT(h_sql_int(db, sql), 3);
	snprintf(sql, sizeof sql, "SELECT reserved_mem_mib FROM teams WHERE name = '%s'", team);
	CHECK_INT(h_sql_int(db, sql), 3072);
	snprintf(sql, sizeof sql,
		 "SELECT count(*) FROM idempotency_keys WHERE team = '%s' AND key = '%s'", team,
		 keya);
	CHECK_INT(h_sql_int(db, sql), 1);
	t_log("attempt %d: %.0f batch(es) held %.0f decisions", attempt, batches, held);
	/* The invalid body is refused before the batch: six decisions were deferred. */
	CHECK_INT((long long)held, 6);
	return batches == 1;
}

TEST(commit_batch_with_refusals_commits_the_others)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	int one = 0;
	/* The six requests usually land in one loop turn; when the loop happened to wake
	 * between two of them, the same checks run again on a fresh team. */
	for (int attempt = 0; attempt < 20 && !one; attempt++)
		one = mixed_batch(s.proc.url, s.db, attempt);
	CHECKF(one, "the requests never landed in one batch");
	h_server_stop(&s);
}

/* Holds SQLite's write lock on db from another connection (this process). */
static sqlite3 *lock_db(const char *db)
{
	sqlite3 *h;
	CHECK(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
	sqlite3_busy_timeout(h, 10000);
	CHECKF(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK, "lock: %s",
	       sqlite3_errmsg(h));
	return h;
}

TEST(commit_write_lock_held_elsewhere_gives_503_and_healthz_answers)
{
	struct h_server s;
	h_server_init(&s);
	s.env[0] = "GWB_STORE_BUSY_TIMEOUT_MS=3000"; /* at open only: never on the loop */
	s.env[1] = "GWB_HTTP_RATE_LIMIT_PER_S=0";    /* one token's burst, faster than the limit */
	s.env[2] = NULL;
	h_server_start(&s);
	put_team(s.proc.url, "alpha", 1 << 20, 100000, "alpha-token-123");
	char body[512];
	task_body(body, sizeof body, "alpha", 1024);
	struct h_resp r;
	h_req(&r, "POST", s.proc.url, "/v1/tasks", "alpha-token-123", body, NULL);
	CHECK_INT(r.status, 201);
	char id[32];
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(r.json, "id")));
	h_resp_free(&r);

	sqlite3 *lock = lock_db(s.db);
	/* While this process holds the lock (3 s of rounds), every probe is answered and
	 * every write is refused with a retry hint: each answer came while the lock was held,
	 * since it is only let go after the loop. */
	int rounds = 0, busy = 0;
	for (int64_t end = clock_mono_ms() + 3000; clock_mono_ms() < end; rounds++) {
		h_req(&r, "GET", s.proc.url, "/healthz", NULL, NULL, NULL);
		CHECK_INT(r.status, 200);
		h_resp_free(&r);
		h_req(&r, "POST", s.proc.url, "/v1/tasks", "alpha-token-123", body, NULL);
		CHECKF(r.status == 503, "submit under the lock: %ld %s", r.status, r.body);
		CHECK_STR(h_err_code(&r), "busy");
		CHECK_STR(h_header(&r, "Retry-After"), "1");
		h_resp_free(&r);
		char path[96];
		snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
		h_req(&r, "POST", s.proc.url, path, "alpha-token-123", NULL, NULL);
		CHECKF(r.status == 503, "cancel under the lock: %ld %s", r.status, r.body);
		CHECK(h_header(&r, "Retry-After") != NULL);
		h_resp_free(&r);
		busy++;
	}
	CHECK(sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(lock);
	t_log("%d rounds under the lock, each answered", rounds);
	CHECK(busy >= 1);
	CHECK(h_metric(s.proc.url, "gwb_store_batches_failed_total", NULL) >= busy);
	/* Let go: the same submission now goes through. */
	h_req(&r, "POST", s.proc.url, "/v1/tasks", "alpha-token-123", body, NULL);
	CHECK_INT(r.status, 201);
	h_resp_free(&r);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM tasks"), 2);
	h_server_stop(&s);
}

enum { BURST_PROCS = 40, BURST_EACH = 25 }; /* 1,000 submissions, 40 at a time */

/* One submitter of the burst: its acknowledged ids, one a line, into file; stops at the
 * first request that gets no answer (the server was killed). */
static void burst_child(const char *url, const char *file)
{
	FILE *f = fopen(file, "w");
	if (!f)
		_exit(20);
	char body[512], full[300];
	task_body(body, sizeof body, "alpha", 64);
	snprintf(full, sizeof full, "%s/v1/tasks", url);
	for (int i = 0; i < BURST_EACH; i++) {
		struct h_resp r;
		if (h_http(&r, "POST", full, "alpha-token-123", body, NULL) < 0)
			break;
		if (r.status == 201)
			fprintf(f, "%s\n", json_string_value(json_object_get(r.json, "id")));
		fflush(f);
		h_resp_free(&r);
	}
	fclose(f);
	_exit(0);
}

TEST_T(commit_kill9_mid_burst_keeps_every_201_and_exact_books, 300)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	put_team(s.proc.url, "alpha", 1 << 20, 1000000, "alpha-token-123");
	int gate[2];
	CHECK(pipe(gate) == 0);
	pid_t pids[BURST_PROCS];
	char files[BURST_PROCS][300];
	for (int i = 0; i < BURST_PROCS; i++) {
		char name[32];
		snprintf(name, sizeof name, "acks-%d", i);
		snprintf(files[i], sizeof files[i], "%s", h_path(name));
		pids[i] = fork();
		if (pids[i] == 0) {
			close(gate[1]);
			char b;
			if (read(gate[0], &b, 1) < 0)
				_exit(21);
			burst_child(s.proc.url, files[i]);
		}
	}
	close(gate[0]);
	close(gate[1]); /* all start together */
	/* The middle of the burst: some tasks are in, the burst is not over. */
	int64_t deadline = clock_mono_ms() + 120000;
	while (h_metric(s.proc.url, "gwb_store_batch_requests_total", NULL) < 200 &&
	       clock_mono_ms() < deadline)
		h_sleep_ms(5);
	h_server_kill9(&s);
	for (int i = 0; i < BURST_PROCS; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	long long stored_before = h_sql_int(s.db, "SELECT count(*) FROM tasks");
	h_server_start(&s);
	int acked = 0;
	for (int i = 0; i < BURST_PROCS; i++) {
		FILE *f = fopen(files[i], "r");
		CHECK(f != NULL);
		char line[64];
		while (fgets(line, sizeof line, f)) {
			line[strcspn(line, "\n")] = '\0';
			char sql[160];
			snprintf(sql, sizeof sql, "SELECT count(*) FROM tasks WHERE id = '%s'", line);
			CHECKF(h_sql_int(s.db, sql) == 1, "acknowledged %s lost after kill -9", line);
			acked++;
		}
		fclose(f);
	}
	long long stored = h_sql_int(s.db, "SELECT count(*) FROM tasks");
	t_log("%d acknowledged before the kill, %lld stored (%lld before the restart) of %d",
	      acked, stored, stored_before, BURST_PROCS * BURST_EACH);
	CHECK(acked > 0);
	CHECK(stored >= acked);
	/* Every stored task has its reservation, and the team's books are their sum. */
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM tasks t LEFT JOIN reservations r ON "
				"r.task_id = t.id WHERE r.task_id IS NULL"),
		  0);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM reservations"), stored);
	CHECK_INT(h_sql_int(s.db, "SELECT reserved_mem_mib - (SELECT total(gpu_memory_mib) FROM "
				"reservations WHERE team = 'alpha' AND released = 0) FROM teams "
				"WHERE name = 'alpha'"),
		  0);
	CHECK_INT(h_sql_int(s.db, "SELECT reserved_core_pct - (SELECT total(gpu_core_percent) FROM "
				"reservations WHERE team = 'alpha' AND released = 0) FROM teams "
				"WHERE name = 'alpha'"),
		  0);
	/* Every stored task is its own create intent, waiting (no Redis here) above the cursor. */
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM tasks WHERE seq > (SELECT create_seq FROM "
				"intent_cursor)"),
		  stored);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM outbox"), 0);
	/* The counters kept in memory start from the store. */
	CHECK_INT((long long)h_metric(s.proc.url, "gwb_tasks", NULL), stored);
	CHECK_INT((long long)h_metric(s.proc.url, "gwb_outbox_unpublished", NULL), stored);
	h_server_stop(&s);
}

TEST(commit_client_gone_before_its_answer)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	put_team(s.proc.url, "alpha", 1 << 20, 1000000, "alpha-token-123");
	char body[512], req[1024];
	task_body(body, sizeof body, "alpha", 64);
	size_t len = post_bytes(req, sizeof req, "alpha-token-123", NULL, body);
	enum { N = 50 };
	for (int i = 0; i < N; i++) {
		int fd = conn_open(s.proc.url);
		CHECK(write(fd, req, len) == (ssize_t)len);
		/* Reset, not a polite close: the server's next write or read fails. */
		struct linger lg = { 1, 0 };
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
		close(fd);
	}
	/* The server goes on: it answers, and every submission it took is whole. */
	struct h_resp r;
	h_req(&r, "POST", s.proc.url, "/v1/tasks", "alpha-token-123", body, NULL);
	CHECK_INT(r.status, 201);
	h_resp_free(&r);
	long long stored = h_sql_int(s.db, "SELECT count(*) FROM tasks");
	t_log("%lld of %d stored; %.0f answers found their client gone", stored - 1, N,
	      h_metric(s.proc.url, "gwb_http_replies_client_gone_total", NULL));
	CHECK(stored >= 1 && stored <= N + 1);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM reservations"), stored);
	CHECK_INT((long long)h_metric(s.proc.url, "gwb_tasks", NULL), stored);
	h_server_stop(&s);
}

TEST(commit_wal_stays_bounded_and_readyz_shows_it)
{
	struct h_server s;
	h_server_init(&s);
	/* The smallest bound, and no housekeeping tick in the way: only the bound checkpoints. */
	s.env[0] = "GWB_STORE_WAL_MAX_BYTES=1048576";
	s.env[1] = "GWB_HOUSEKEEPING_INTERVAL_MS=600000";
	s.env[2] = "GWB_HTTP_RATE_LIMIT_PER_S=0"; /* one token's burst, faster than the limit */
	s.env[3] = NULL;
	h_server_start(&s);
	put_team(s.proc.url, "alpha", 1 << 20, 1000000, "alpha-token-123");
	char body[512], wal[600];
	task_body(body, sizeof body, "alpha", 1);
	snprintf(wal, sizeof wal, "%s-wal", s.db);
	long long most = 0;
	for (int i = 0; i < 600; i++) {
		struct h_resp r;
		h_req(&r, "POST", s.proc.url, "/v1/tasks", "alpha-token-123", body, NULL);
		CHECK_INT(r.status, 201);
		h_resp_free(&r);
		FILE *f = fopen(wal, "r");
		CHECK(f != NULL);
		fseek(f, 0, SEEK_END);
		long long size = ftell(f);
		fclose(f);
		if (size > most)
			most = size;
	}
	struct h_resp r;
	h_req(&r, "GET", s.proc.url, "/readyz", H_METRICS_TOKEN, NULL, NULL);
	CHECK_INT(r.status, 200);
	json_t *w = json_object_get(json_object_get(json_object_get(r.json, "dependencies"),
						    "store"),
				    "wal");
	CHECK(w != NULL);
	CHECK_INT(json_integer_value(json_object_get(w, "max_bytes")), 1048576);
	long long ckpts = json_integer_value(json_object_get(w, "checkpoints"));
	long long bytes = json_integer_value(json_object_get(w, "bytes"));
	h_resp_free(&r);
	t_log("largest WAL file %lld bytes (bound 1048576), %lld checkpoints, %lld bytes now",
	      most, ckpts, bytes);
	/* The bound held: a commit above it checkpointed, and the next one started the WAL
	 * over (one commit of a few pages may sit above the bound meanwhile). */
	CHECK(ckpts >= 1);
	CHECK(most <= 1048576 + 256 * 1024);
	CHECK(bytes <= 1048576 + 256 * 1024);
	h_server_stop(&s);
}

/* A 201 is shaped from the task as its decision inserted it, not read back: it must be the
 * task a later GET shows. Every field is compared; while the task is still queued (no queue
 * and no cluster here: nothing moves it), the whole body too, byte for byte. Only the fields
 * a later state change rewrites may differ, and only once the state did. */
TEST(commit_201_body_equals_a_later_get)
{
	static const char *const movable[] = { "state", "reason", "updated_at", "job", "pod",
					       "allocation", "pending", "reservation",
					       "cancel_requested_at", NULL };
	static const struct {
		const char *key, *body;
	} cases[] = {
		{ NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}" },
		{ "same-201-k1", "{\"team\": \"alpha\", \"name\": \"n\\u00e9e \\u4e2d \\\"q\\\"\", "
				 "\"gpu_memory_mib\": 300, \"gpu_core_percent\": 7, \"gpu_count\": 3, "
				 "\"duration_seconds\": 86400, \"qos\": \"BE\", "
				 "\"experiment\": \"overlimit\"}" },
		{ "~!@#$%^&*()_+`-={}[]|:;'<>?,./", "{\"team\": \"alpha\", \"name\": \"x\", "
						  "\"gpu_memory_mib\": 1048576, "
						  "\"gpu_core_percent\": 100}" },
	};
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	put_team(s.proc.url, "alpha", 1 << 30, 1000000, "alpha-token-123");
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char hk[200];
		const char *hdrs[] = { hk, NULL };
		snprintf(hk, sizeof hk, "Idempotency-Key: %s", cases[i].key ? cases[i].key : "");
		struct h_resp post, get;
		h_req(&post, "POST", s.proc.url, "/v1/tasks", "alpha-token-123", cases[i].body,
		      cases[i].key ? hdrs : NULL);
		CHECKF(post.status == 201 && post.json, "case %zu: %ld %s", i, post.status,
		       post.body);
		char path[96];
		snprintf(path, sizeof path, "/v1/tasks/%s",
			 json_string_value(json_object_get(post.json, "id")));
		CHECK_STR(h_header(&post, "Location"), path);
		h_req(&get, "GET", s.proc.url, path, "alpha-token-123", NULL, NULL);
		CHECK_INT(get.status, 200);
		CHECK(get.json != NULL);
		int moved = strcmp(json_string_value(json_object_get(get.json, "state")), "queued");
		CHECK_STR(json_string_value(json_object_get(post.json, "state")), "queued");
		CHECK_INT(json_object_size(post.json), json_object_size(get.json));
		const char *k;
		json_t *v;
		json_object_foreach(get.json, k, v) {
			int may = 0;
			for (const char *const *m = movable; *m; m++)
				may |= moved && strcmp(*m, k) == 0;
			json_t *p = json_object_get(post.json, k);
			CHECKF(p != NULL, "case %zu: the 201 lacks %s", i, k);
			CHECKF(may || json_equal(p, v), "case %zu: %s differs", i, k);
		}
		if (!moved)
			CHECKF(strcmp(post.body, get.body) == 0, "case %zu:\n201 %s\nGET %s", i,
			       post.body, get.body);
		t_log("case %zu: %s, %zu bytes, %s", i, path, strlen(post.body),
		      moved ? "moved on" : "byte-identical");
		/* A replay answers 200 with the same task (read, since it may have moved on). */
		if (cases[i].key) {
			struct h_resp again;
			h_req(&again, "POST", s.proc.url, "/v1/tasks", "alpha-token-123",
			      cases[i].body, hdrs);
			CHECK_INT(again.status, 200);
			CHECK_STR(h_header(&again, "Idempotent-Replayed"), "true");
			CHECK_STR(json_string_value(json_object_get(again.json, "id")),
				  json_string_value(json_object_get(post.json, "id")));
			h_resp_free(&again);
		}
		h_resp_free(&get);
		h_resp_free(&post);
	}
	h_server_stop(&s);
}

/* 1 when the file at path holds needle. */
static int file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char line[4096];
	int found = 0;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* A batch is decided without a SAVEPOINT per decision; a decision that wrote and then has to
 * be undone (it removed its expired key, then the quota refused it) makes the server decide
 * the batch again with savepoints: that one alone is undone, the others are answered 201
 * and stored, the expired key row is back as it was. */
TEST(commit_undone_decision_redoes_the_batch_with_savepoints)
{
	struct h_server s;
	h_server_init(&s);
	s.env[0] = "GWB_HOUSEKEEPING_INTERVAL_MS=600000"; /* no purge of the expired key */
	s.env[1] = NULL;
	h_server_start(&s);
	put_team(s.proc.url, "alpha", 3072, 1000, "alpha-token-123");
	char body[512], over[512];
	task_body(body, sizeof body, "alpha", 1024);
	task_body(over, sizeof over, "alpha", 8192);
	const char *hs[] = { "Idempotency-Key: old-key", NULL };
	struct h_resp r;
	h_req(&r, "POST", s.proc.url, "/v1/tasks", "alpha-token-123", body, hs);
	CHECK_INT(r.status, 201);
	h_resp_free(&r);
	/* The key expires (written from outside: its time-to-live is a minute at least). */
	sqlite3 *h;
	CHECK(sqlite3_open_v2(s.db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
	sqlite3_busy_timeout(h, 5000);
	CHECK(sqlite3_exec(h, "UPDATE idempotency_keys SET expires_at = 1", NULL, NULL, NULL) ==
	      SQLITE_OK);
	sqlite3_close(h);
	enum { N = 3 };
	static char req[N][1024], ans[N][16384];
	size_t len[N];
	len[0] = post_bytes(req[0], sizeof req[0], "alpha-token-123", NULL, body);
	len[1] = post_bytes(req[1], sizeof req[1], "alpha-token-123", "old-key", over);
	len[2] = post_bytes(req[2], sizeof req[2], "alpha-token-123", NULL, body);
	int fds[N], st[N];
	const char *bodies[N];
	for (int i = 0; i < N; i++)
		fds[i] = conn_open(s.proc.url);
	for (int i = 0; i < N; i++)
		CHECK(write(fds[i], req[i], len[i]) == (ssize_t)len[i]);
	for (int i = 0; i < N; i++)
		st[i] = read_answer(fds[i], ans[i], sizeof ans[i], &bodies[i]);
	CHECKF(st[0] == 201 && st[2] == 201, "plain: %d %d", st[0], st[2]);
	CHECKF(st[1] == 403 && strstr(bodies[1], "quota_exceeded"), "over: %d %s", st[1],
	       bodies[1]);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM tasks"), 3);
	CHECK_INT(h_sql_int(s.db, "SELECT reserved_mem_mib FROM teams WHERE name = 'alpha'"), 3072);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM idempotency_keys WHERE key = 'old-key' "
				  "AND expires_at = 1"),
		  1);
	CHECK(file_has(s.proc.log, "batch_redone"));
	h_server_stop(&s);
}
