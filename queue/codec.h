/* The Job intent codec: the msgpack body of a stream entry (with a version number) and the
 * stream key names. It owns no state; every buffer has a fixed cap so a hostile or broken
 * payload can neither crash the decoder nor make it allocate more than a few times its size. */
#ifndef GWB_QUEUE_CODEC_H
#define GWB_QUEUE_CODEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define Q_INTENT_VERSION 1
/* A body is a dozen short fields (~300 bytes); 4 KiB leaves room and bounds a bad one. */
#define Q_BODY_MAX 4096
/* Nesting allowed in a body before it is refused (the real one is flat). */
#define Q_BODY_MAX_DEPTH 8
/* The consumer group every gwb-server reads the intent stream with. */
#define Q_GROUP "reconcilers"

/* One Job intent: what the reconciler must make true for a task. Fixed-size strings so the
 * struct can be copied and kept without ownership questions. */
struct q_intent {
	int64_t version;          /* Q_INTENT_VERSION when encoded by this build */
	int64_t id;               /* the outbox row id: unique per intent, stable across re-publish */
	char kind[8];             /* "create" | "cancel" */
	char task[32];
	char job[48];             /* Kubernetes Job name: "gwb-" + task */
	char team[64];
	int64_t attempt;          /* 1 for the first intent of this kind for the task */
	int64_t created_at;       /* ms since the epoch, when the intent was written */
	/* The submitted parameters (present for both kinds, so a cancel can create the Job
	 * already suspended when it does not exist yet). */
	char name[129];
	int64_t gpu_memory_mib, gpu_core_percent, gpu_count, duration_seconds;
	char qos[4];
	char experiment[16];
};

/* Stream key names derived from the configured prefix ("gwb" -> "gwb:intents",
 * "gwb:intents:dead"). */
struct q_keys {
	char stream[96];
	char dead[112];
};
/* Fills k from prefix (truncated to fit). */
void q_keys_init(struct q_keys *k, const char *prefix);

/* Encodes in as a msgpack map into buf (cap bytes). Returns 0 and *len, GWB_EINVAL when a
 * field is invalid (unknown kind, empty task...), or GWB_ETOOBIG when it does not fit. */
int q_intent_encode(const struct q_intent *in, char *buf, size_t cap, size_t *len);

/* Decodes a body. Refuses (GWB_EPROTO, with the reason in err) anything that is not exactly
 * one msgpack map of this version with every required field well typed and in range; refuses
 * payloads over Q_BODY_MAX with GWB_ETOOBIG. Never reads past len, never crashes, and every
 * msgpack_unpacked it makes is destroyed before it returns. *out is zeroed first. */
int q_intent_decode(const char *buf, size_t len, struct q_intent *out, char *err, size_t errlen);

/* Checks that buf[0..len) is exactly one well-formed msgpack value nested at most max_depth
 * deep, each container's declared size fitting in the bytes left. 0 or GWB_EPROTO. */
int q_msgpack_check(const char *buf, size_t len, int max_depth);

/* The intent as a JSON object (a new reference), for gwbctl and logs. */
json_t *q_intent_json(const struct q_intent *in);

/* A stream entry id "ms-seq" parsed for comparison. */
struct q_id {
	uint64_t ms, seq;
};
/* Parses "ms-seq" (or "ms"). 0 or GWB_EINVAL. */
int q_id_parse(const char *s, struct q_id *id);
/* <0, 0, >0 as a is before, equal to, after b. */
int q_id_cmp(struct q_id a, struct q_id b);
/* The smallest id after a. */
struct q_id q_id_next(struct q_id a);
/* Writes "ms-seq" into buf. Returns buf. */
char *q_id_fmt(struct q_id a, char *buf, size_t len);

#endif
