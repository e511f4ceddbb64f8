/* HTTP/1.1 framing as the front door reads it (lib/framing.h): one state machine over
 * the connection's bytes, a request line, header lines, then a body by Content-Length or by
 * chunks. Line ends are CRLF or a bare LF (as libevent reads them); a bare CR is refused. */
#include "lib/framing.h"

#include <string.h>
#include <strings.h>

enum phase {
	P_IDLE,       /* between requests */
	P_METHOD,
	P_TARGET,
	P_VERSION,
	P_NAME,       /* a header line's name, or the blank line */
	P_VALUE,
	P_BODY,       /* Content-Length bytes */
	P_CHUNK_SIZE, /* a chunk's size line: hex digits (libevent reads no extensions) */
	P_CHUNK_DATA,
	P_CHUNK_END,  /* the CRLF after a chunk's data */
	P_TRAILER,    /* a trailer line, or the blank line that ends the body */
	P_REFUSED,
};

/* The methods whose body libevent 2.1 reads (evhttp_method_may_have_body); any other's body
 * would be read as the next request. */
enum { M_OTHER, M_BODY };

/* A chunk's size line's digits (leading zeros included). */
#define CHUNK_LINE_MAX 64

static const char *const methods_with_body[] = { "GET",     "POST",    "PUT", "PATCH",
						  "DELETE",  "OPTIONS", "CONNECT" };

void framing_init(struct framing *f, int64_t max_head, int64_t max_body)
{
	memset(f, 0, sizeof *f);
	f->max_head = max_head;
	f->max_body = max_body;
	f->phase = P_IDLE;
}

int framing_in_body(const struct framing *f)
{
	return f->phase >= P_BODY && f->phase <= P_TRAILER;
}

int framing_in_head(const struct framing *f)
{
	return f->phase >= P_METHOD && f->phase <= P_VALUE;
}

int64_t framing_body_read(const struct framing *f)
{
	return f->chunked ? f->body_bytes : f->length - f->left;
}

const struct framing_refusal *framing_refusal(const struct framing *f)
{
	return &f->refusal;
}

static enum framing_event refuse(struct framing *f, int status, const char *code,
				 const char *message, const char *field)
{
	f->phase = P_REFUSED;
	f->refusal = (struct framing_refusal){ status, code, message, field };
	return FRAMING_REFUSED;
}

static enum framing_event refuse_header(struct framing *f, const char *message,
					const char *field)
{
	return refuse(f, 400, "invalid_header", message, field);
}

/* RFC 9110's tchar: the bytes of a method or a header name. */
static const unsigned char tchar[256] = {
	['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
	['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
	['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
};

static int is_tchar(unsigned char c)
{
	return tchar[c];
}

static int is_ctl(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

static void keep(char *buf, int *len, size_t cap, unsigned char c)
{
	if ((size_t)*len < cap - 1)
		buf[*len] = (char)c;
	if ((size_t)*len < cap)
		(*len)++;
}

/* The kept text, or "" when it was cut (longer than anything compared with it). */
static const char *kept(char *buf, int len, size_t cap)
{
	if ((size_t)len >= cap)
		return "";
	buf[len] = '\0';
	return buf;
}

/* The bytes a request target (visible ASCII and obs-text) or a header value (those, a space
 * or a tab) is made of: runs of them are skipped in one loop. */
static const unsigned char target_byte[256] = { [0x21 ... 0x7e] = 1, [0x80 ... 0xff] = 1 };
static const unsigned char value_byte[256] = { ['\t'] = 1, [0x20 ... 0x7e] = 1,
					       [0x80 ... 0xff] = 1 };

/* The length of the run of plain bytes at p in the phase f is in (0: none to skip): a
 * target's, a header name's (kept in lower case), or a value's that is not read. */
static size_t plain_run(struct framing *f, const char *p, size_t n)
{
	size_t i = 0;
	if (f->cr)
		return 0;
	if (f->phase == P_NAME) {
		for (; i < n && tchar[(unsigned char)p[i]]; i++) {
			unsigned char c = (unsigned char)p[i];
			keep(f->name, &f->name_len, sizeof f->name,
			     c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
		}
		return i;
	}
	const unsigned char *table = f->phase == P_TARGET                  ? target_byte
				     : f->phase == P_VALUE && !f->keep_value ? value_byte
									     : NULL;
	if (table)
		while (i < n && table[(unsigned char)p[i]])
			i++;
	return i;
}

static void begin_request(struct framing *f)
{
	int64_t max_head = f->max_head, max_body = f->max_body;
	framing_init(f, max_head, max_body);
	f->phase = P_METHOD;
}

static enum framing_event end_method(struct framing *f)
{
	if (!f->name_len)
		return refuse(f, 400, "invalid_request_line", "the request line has no method",
			      NULL);
	const char *m = kept(f->name, f->name_len, sizeof f->name); /* "" when cut: no match */
	f->method = M_OTHER;
	for (size_t i = 0; i < sizeof methods_with_body / sizeof methods_with_body[0]; i++)
		if (strcmp(m, methods_with_body[i]) == 0)
			f->method = M_BODY;
	f->name_len = 0;
	f->phase = P_TARGET;
	f->step = 0;
	return FRAMING_NONE;
}

static enum framing_event end_request_line(struct framing *f)
{
	const char *v = kept(f->value, f->value_len, sizeof f->value);
	if (strcmp(v, "HTTP/1.1") == 0)
		f->http11 = 1;
	else if (strcmp(v, "HTTP/1.0") != 0)
		return refuse(f, 505, "unsupported_version",
			      "only HTTP/1.0 and HTTP/1.1 are served", NULL);
	f->value_len = 0;
	f->phase = P_NAME;
	return FRAMING_NONE;
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/* A header line is complete: the headers that frame a request are counted and checked. */
static enum framing_event end_header(struct framing *f)
{
	const char *name = kept(f->name, f->name_len, sizeof f->name);
	f->value_len -= f->value_blank;
	const char *value = kept(f->value, f->value_len, sizeof f->value);
	f->name_len = f->value_len = f->value_blank = 0;
	f->phase = P_NAME;
	if (strcmp(name, "content-length") == 0) {
		f->n_length++;
		/* Digits only (no sign, no list); 18 of them stay within int64_t. */
		if (!all_digits(value) || strlen(value) > 18)
			return refuse_header(f, "Content-Length must be a decimal number",
					     "Content-Length");
		f->length = 0;
		for (const char *s = value; *s; s++)
			f->length = f->length * 10 + (*s - '0');
	} else if (strcmp(name, "transfer-encoding") == 0) {
		f->n_te++;
		if (strcasecmp(value, "chunked") != 0)
			return refuse(f, 400, "unsupported_transfer_encoding",
				      "Transfer-Encoding must be exactly chunked",
				      "Transfer-Encoding");
		f->chunked = 1;
	} else if (strcmp(name, "host") == 0) {
		f->n_host++;
	} else if (strcmp(name, "authorization") == 0) {
		f->n_auth++;
	}
	return FRAMING_NONE;
}

/* The blank line: the head is judged as a whole and the body's framing chosen. */
static enum framing_event end_head(struct framing *f)
{
	if (f->n_length > 1)
		return refuse_header(f, "Content-Length is given more than once",
				     "Content-Length");
	if (f->n_te > 1)
		return refuse_header(f, "Transfer-Encoding is given more than once",
				     "Transfer-Encoding");
	if (f->n_length && f->n_te)
		return refuse(f, 400, "ambiguous_framing",
			      "Content-Length and Transfer-Encoding together are refused",
			      "Transfer-Encoding");
	if (f->n_host > 1)
		return refuse_header(f, "Host is given more than once", "Host");
	if (f->n_auth > 1)
		return refuse_header(f, "Authorization is given more than once", "Authorization");
	if (f->http11 && !f->n_host)
		return refuse(f, 400, "missing_host", "an HTTP/1.1 request must name its Host",
			      "Host");
	int has_body = f->chunked || f->length > 0;
	if (has_body && f->method != M_BODY)
		return refuse(f, 400, "body_not_allowed", "this method takes no body",
			      f->chunked ? "Transfer-Encoding" : "Content-Length");
	if (f->length > f->max_body)
		return refuse(f, 413, "body_too_large", "the request body is too large", NULL);
	f->step = 0;
	f->left = f->length;
	f->body_bytes = 0;
	f->phase = f->chunked ? P_CHUNK_SIZE : has_body ? P_BODY : P_IDLE;
	return FRAMING_HEAD_ENDED;
}

static int hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A line ends (LF, after an optional CR) in the phase the reader is in. */
static enum framing_event end_line(struct framing *f)
{
	switch (f->phase) {
	case P_METHOD:
	case P_TARGET:
		return refuse(f, 400, "invalid_request_line",
			      "the request line must be: method, target, HTTP version", NULL);
	case P_VERSION:
		return end_request_line(f);
	case P_NAME:
		if (f->name_len)
			return refuse_header(f, "a header line has no colon", NULL);
		return end_head(f);
	case P_VALUE:
		return end_header(f);
	case P_CHUNK_SIZE:
		if (f->step == 0)
			return refuse(f, 400, "invalid_chunk", "a chunk size is missing", NULL);
		f->step = 0;
		if (f->left == 0) {
			f->phase = P_TRAILER;
			return FRAMING_NONE;
		}
		f->phase = P_CHUNK_DATA;
		return FRAMING_NONE;
	case P_CHUNK_END:
		f->phase = P_CHUNK_SIZE;
		return FRAMING_NONE;
	case P_TRAILER:
		if (f->step == 0) {
			f->phase = P_IDLE;
			return FRAMING_BODY_ENDED;
		}
		f->step = 0;
		return FRAMING_NONE;
	default:
		return FRAMING_NONE;
	}
}

/* One byte of a head, a chunk's size line or a trailer (not of body data). */
static enum framing_event head_byte(struct framing *f, unsigned char c)
{
	if (f->cr && c != '\n')
		return refuse(f, 400, "invalid_header", "a CR must be followed by LF", NULL);
	if (c == '\r') {
		f->cr = 1;
		return FRAMING_NONE;
	}
	if (c == '\n') {
		f->cr = 0;
		return end_line(f);
	}
	if (c == 0)
		return refuse_header(f, "the request's head holds a NUL byte", NULL);
	switch (f->phase) {
	case P_METHOD:
		if (c == ' ')
			return end_method(f);
		if (!is_tchar(c))
			return refuse(f, 400, "invalid_request_line", "the method is not a token",
				      NULL);
		keep(f->name, &f->name_len, sizeof f->name, c);
		return FRAMING_NONE;
	case P_TARGET:
		if (c == ' ' && f->step > 0) {
			f->phase = P_VERSION;
			return FRAMING_NONE;
		}
		if (c <= ' ' || c == 0x7f)
			return refuse(f, 400, "invalid_request_line",
				      "the request target holds a space or control byte", NULL);
		f->step++;
		return FRAMING_NONE;
	case P_VERSION:
		if (is_ctl(c) || c == ' ')
			return refuse(f, 400, "invalid_request_line",
				      "the HTTP version holds a space or control byte", NULL);
		keep(f->value, &f->value_len, sizeof f->value, c);
		return FRAMING_NONE;
	case P_NAME:
		if (c == ' ' || c == '\t')
			return refuse_header(f, f->name_len
				? "a header name must be followed by its colon, no space"
				: "folded header lines are refused", NULL);
		if (c == ':') {
			if (!f->name_len)
				return refuse_header(f, "a header line has no name", NULL);
			const char *name = kept(f->name, f->name_len, sizeof f->name);
			f->keep_value = !strcmp(name, "content-length") ||
					!strcmp(name, "transfer-encoding");
			f->phase = P_VALUE;
			return FRAMING_NONE;
		}
		if (!is_tchar(c))
			return refuse_header(f, "a header name holds a byte that is not a token",
					     NULL);
		keep(f->name, &f->name_len, sizeof f->name,
		     c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
		return FRAMING_NONE;
	case P_VALUE: {
		if (c != '\t' && is_ctl(c))
			return refuse_header(f, "a header value holds a control byte", NULL);
		int blank = c == ' ' || c == '\t';
		/* Leading blanks are not kept, nor blanks past what is kept (a cut value stays
		 * cut); value_blank counts the kept trailing ones. */
		if (blank && (f->value_len == 0 || (size_t)f->value_len >= sizeof f->value - 1))
			return FRAMING_NONE;
		f->value_blank = blank ? f->value_blank + 1 : 0;
		keep(f->value, &f->value_len, sizeof f->value, c);
		return FRAMING_NONE;
	}
	case P_CHUNK_SIZE: {
		int h = hex_value(c);
		if (h < 0 && c == ';')
			return refuse(f, 400, "invalid_chunk", "chunk extensions are not accepted",
				      NULL);
		if (h < 0 || ++f->step > CHUNK_LINE_MAX)
			return refuse(f, 400, "invalid_chunk", "a chunk size must be hexadecimal",
				      NULL);
		f->left = f->left * 16 + h;
		if (f->left > f->max_body || f->body_bytes + f->left > f->max_body)
			return refuse(f, 413, "body_too_large", "the request body is too large",
				      NULL);
		return FRAMING_NONE;
	}
	case P_CHUNK_END:
		return refuse(f, 400, "invalid_chunk", "a chunk's data must end with CRLF", NULL);
	case P_TRAILER:
		if (f->step == 0 && (c == ' ' || c == '\t'))
			return refuse_header(f, "folded trailer lines are refused", NULL);
		if (c != '\t' && is_ctl(c))
			return refuse_header(f, "a trailer holds a control byte", NULL);
		f->step++;
		return FRAMING_NONE;
	default:
		return FRAMING_NONE;
	}
}

size_t framing_feed(struct framing *f, const char *p, size_t n, enum framing_event *event)
{
	size_t i = 0;
	*event = FRAMING_NONE;
	if (f->phase == P_REFUSED) {
		*event = FRAMING_REFUSED;
		return 0;
	}
	while (i < n) {
		if (f->phase == P_BODY || f->phase == P_CHUNK_DATA) {
			size_t take = (uint64_t)f->left < n - i ? (size_t)f->left : n - i;
			i += take;
			f->left -= (int64_t)take;
			if (f->phase == P_CHUNK_DATA)
				f->body_bytes += (int64_t)take;
			if (f->left > 0)
				continue;
			if (f->phase == P_CHUNK_DATA) {
				f->phase = P_CHUNK_END;
				continue;
			}
			f->phase = P_IDLE;
			*event = FRAMING_BODY_ENDED;
			return i;
		}
		size_t run = plain_run(f, p + i, n - i);
		if (run > 0) {
			i += run;
			f->step += f->phase == P_TARGET;
			f->head_bytes += (int64_t)run;
			if (f->head_bytes > f->max_head) {
				*event = refuse(f, 431, "headers_too_large",
						"the request's headers are too large", NULL);
				return i;
			}
			continue;
		}
		int began = f->phase == P_IDLE;
		if (began)
			begin_request(f);
		unsigned char c = (unsigned char)p[i++];
		/* Heads and trailers count against the head's cap; chunk size lines are small. */
		if (f->phase != P_CHUNK_SIZE && f->phase != P_CHUNK_END &&
		    ++f->head_bytes > f->max_head) {
			*event = refuse(f, 431, "headers_too_large",
					"the request's headers are too large", NULL);
			return i;
		}
		*event = head_byte(f, c);
		if (*event == FRAMING_NONE && began)
			*event = FRAMING_HEAD_BEGAN;
		if (*event != FRAMING_NONE)
			return i;
	}
	return i;
}
