/* gwb-server configuration: one declarative table of settings, loaded from a config file, then
 * environment variables, then command-line flags. Any invalid value is fatal at start-up with
 * its origin (file:line, the variable, or the flag) and the reason. Read-only after loading. */
#ifndef GWB_CONFIG_H
#define GWB_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_STR_MAX 512

struct gwb_config {
	char listen[CONFIG_STR_MAX];        /* host:port of the HTTP API; port 0 picks one */
	char db[CONFIG_STR_MAX];            /* SQLite file */
	char redis[CONFIG_STR_MAX];         /* redis://host[:port][/N] or unix:///path; "" = none */
	char kube_server[CONFIG_STR_MAX];   /* API server URL; "" = kubeconfig or in-cluster */
	char kubeconfig[CONFIG_STR_MAX];    /* kubeconfig path; "" = $KUBECONFIG or ~/.kube/config */
	char kube_namespace[64];            /* namespace of the task Jobs */
	char kube_worker_image[256];        /* container image of the worker in each Job */
	char kube_isolation[64];            /* gpu-isolation-provider label value; "" = none */
	int64_t kube_request_timeout_ms;    /* one API request's time-out */
	int64_t kube_job_ttl_seconds;       /* ttlSecondsAfterFinished of task Jobs; 0 = keep */
	int64_t kube_pod_deadline_margin_seconds; /* a task Pod's activeDeadlineSeconds is its
						   * duration plus this */
	int64_t kube_watch_timeout_seconds; /* server-side timeoutSeconds of one watch */
	int64_t kube_watch_idle_seconds;    /* a watch silent this long is broken */
	int64_t kube_max_inflight;          /* API requests in flight at most (watches apart) */
	int64_t kube_qps;                   /* API requests started per second, sustained */
	int64_t kube_burst;                 /* API requests started at once after a quiet time */
	int64_t reconcile_resync_ms;        /* period of the full pass over active tasks */
	int64_t reconcile_queued_grace_ms;  /* a task queued this long is handled without its intent */
	char admin_token[CONFIG_STR_MAX];   /* administrator bearer token; "" = no admin */
	char mode[8];                       /* "sim" (kubesim) or "kube" (a real cluster) */
	char log_level[8];
	char predict_strategy[16];          /* "LeastAllocated" | "MostAllocated" */
	int64_t http_max_body_bytes;        /* request bodies above this get 413 */
	int64_t http_max_header_bytes;
	int64_t http_timeout_seconds;       /* idle/read time-out of one HTTP connection */
	int64_t http_header_timeout_seconds; /* a request's head, from its first byte */
	int64_t http_body_timeout_seconds;  /* a request's body, from its first byte */
	int64_t http_max_connections;       /* open connections in all */
	int64_t http_max_connections_per_address;
	int64_t idempotency_ttl_seconds;    /* how long idempotency keys are kept */
	int64_t store_busy_timeout_ms;      /* SQLITE_BUSY wait for another writer, at open only */
	int64_t store_wal_max_bytes;        /* the WAL's bound */
	int64_t housekeeping_interval_ms;   /* period of the housekeeping timer */
	int64_t audit_interval_s;           /* period of the quota audit */
	int64_t audit_grace_s;              /* a task without Job or Pod younger than this is fine */
	int64_t http_rate_limit_per_s;      /* requests per second per token; 0 = no limit */
	int64_t http_rate_limit_burst;      /* bucket size of the per-token limit */
	int64_t http_rate_limit_admin;      /* 1: the admin token is limited too */
	int64_t http_stream_max_per_token;  /* open streams one team token may hold; 0 = no cap */
	int64_t http_stream_admin_reserved; /* stream places only the admin may take */
	char http_metrics_token[CONFIG_STR_MAX]; /* bearer token for /metrics, /readyz; "" = none */
	char queue_prefix[64];              /* Redis key prefix: <prefix>:intents */
	char queue_consumer[128];           /* consumer name in group "reconcilers"; "" = host-pid */
	int64_t queue_claim_idle_ms;        /* claim others' entries idle longer than this */
	int64_t queue_max_failures;         /* failed handling attempts before a dead letter */
	int64_t queue_command_timeout_ms;   /* one Redis command's time-out */
	int64_t queue_stream_maxlen;        /* approximate trim length of the stream */
	int64_t queue_block_ms;             /* BLOCK time of one read of new entries */
	int64_t queue_handler_delay_ms;     /* the built-in intent handler waits this long */
	int64_t queue_max_skip_seconds;     /* a best_effort line's head may be passed this long */
	int64_t stream_max_clients;         /* open GET /v1/stream connections at most */
	int64_t stream_max_buffer_bytes;    /* unsent bytes one stream may hold before it is dropped */
	int64_t stream_poll_ms;             /* how often the streams read new task events */
	char usage_url[CONFIG_STR_MAX];     /* Prometheus endpoint of a GPU monitor; "" = none */
	char usage_format[16];              /* "hami" or "dcgm" */
	int64_t usage_period_seconds;       /* one scrape per period */
	char config_file[CONFIG_STR_MAX];   /* the file that was loaded, "" if none */
};

/* Fills c with defaults, then applies the file named by -c (if any), the environment, then the
 * flags of argv. Returns 0, 1 when --help was printed to out (the caller exits 0), or
 * GWB_EINVAL with "origin: reason" in err. */
int config_load(struct gwb_config *c, int argc, char **argv, FILE *out, char *err, size_t errlen);

/* 1 when env is the environment variable of a setting (GWB_LISTEN, ...). */
int config_env_known(const char *env);

/* Writes the settings table (name, environment variable, default, meaning) to out. */
void config_usage(FILE *out);

/* Splits "host:port" (IPv4, a name, or [IPv6]; port 0 allowed) into host and port with
 * lib/addr.h's grammar. 0, or GWB_EINVAL (also when the host does not fit in hostlen). */
int config_split_hostport(const char *s, char *host, size_t hostlen, int *port);

#endif
