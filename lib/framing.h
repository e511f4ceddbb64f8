/* The front door's reading of HTTP/1.1 framing (RFC 9112), fed the bytes of one connection as
 * they arrive and before libevent parses them. It finds where each request's head and body
 * begin and end (for the deadlines) and refuses what libevent would accept but another reader
 * of the same bytes (a proxy in front) could frame differently: request smuggling. It keeps a
 * few hundred bytes per connection, never a whole line. */
#ifndef GWB_LIB_FRAMING_H
#define GWB_LIB_FRAMING_H

#include <stddef.h>
#include <stdint.h>

/* Where the connection is after the bytes consumed by one framing_feed. */
enum framing_event {
	FRAMING_NONE,       /* all bytes consumed, nothing began or ended */
	FRAMING_HEAD_BEGAN, /* the first byte of a request */
	FRAMING_HEAD_ENDED, /* its blank line; framing_in_body says whether a body follows */
	FRAMING_BODY_ENDED, /* the body's last byte (the last chunk's trailers) */
	FRAMING_REFUSED,    /* framing_refusal says why; nothing more is read */
};

/* A refusal: the answer's status, its error code and message, and the field (header) named. */
struct framing_refusal {
	int status;
	const char *code;
	const char *message;
	const char *field;
};

struct framing {
	int64_t max_head;  /* request line and headers, CRLFs included (http.max_header_bytes) */
	int64_t max_body;  /* a body's bytes, chunked or not (http.max_body_bytes) */
	/* below: the reader's own state */
	int phase;
	int step;          /* the position inside the current line */
	int64_t head_bytes;
	int64_t left;      /* bytes of the body or chunk still to come */
	int64_t body_bytes;
	int cr;            /* the last byte was a CR: a LF must follow */
	int lines;         /* lines of this head so far */
	int method;        /* FRAMING_M_* of the request line */
	int http11;
	int n_length, n_te, n_host, n_auth;
	int64_t length;
	int chunked;
	char name[24];     /* the header name so far, lower case (cut: it names no header we read) */
	int name_len;
	char value[24];    /* the value so far without leading blanks (cut: it is no value we accept) */
	int value_len;
	int value_blank;   /* trailing blanks in value, trimmed at the line's end */
	int keep_value;    /* the header's value is read (Content-Length, Transfer-Encoding) */
	struct framing_refusal refusal;
};

/* Starts f for a new connection with the caps given. */
void framing_init(struct framing *f, int64_t max_head, int64_t max_body);
/* Reads up to n bytes of p. Returns how many it consumed and sets *event to what happened at
 * the last byte consumed: call again with the rest after an event. After FRAMING_REFUSED every
 * call consumes nothing and reports it again. */
size_t framing_feed(struct framing *f, const char *p, size_t n, enum framing_event *event);
/* 1 while a request's body is being read (from FRAMING_HEAD_ENDED to FRAMING_BODY_ENDED). */
int framing_in_body(const struct framing *f);
/* 1 between FRAMING_HEAD_BEGAN and FRAMING_HEAD_ENDED. */
int framing_in_head(const struct framing *f);
/* The body's bytes read so far (chunks' data, or of the Content-Length). */
int64_t framing_body_read(const struct framing *f);
/* Why f refused (its status is 0 before any refusal). */
const struct framing_refusal *framing_refusal(const struct framing *f);

#endif
