/* The front door's framing reader: where heads and bodies begin and end (by Content-Length,
 * by chunks, pipelined), the same answer whether the bytes come at once or one by one, and
 * every framing a second reader could take another way refused with its status and code. */
#include <stdio.h>
#include <string.h>

#include "lib/framing.h"
#include "tests/harness/t.h"

#define MAX_HEAD 1024
#define MAX_BODY 100

/* Feeds text in pieces of step bytes (0: all at once) and writes the events seen as letters:
 * B(egan) E(nded head) D(one body) R(efused). Returns the refusal's status (0: none). */
static int run(const char *text, size_t step, char *events, size_t cap, struct framing *out)
{
	struct framing f;
	framing_init(&f, MAX_HEAD, MAX_BODY);
	size_t len = strlen(text), at = 0, ne = 0;
	while (at < len) {
		size_t piece = step ? (len - at < step ? len - at : step) : len - at;
		size_t done = 0;
		while (done < piece) {
			enum framing_event ev;
			size_t k = framing_feed(&f, text + at + done, piece - done, &ev);
			static const char letters[] = { '-', 'B', 'E', 'D', 'R' };
			if (ev != FRAMING_NONE && ne + 1 < cap)
				events[ne++] = letters[ev];
			if (ev == FRAMING_REFUSED)
				goto done;
			CHECKF(k > 0, "no progress at %zu", at + done);
			done += k;
		}
		at += piece;
	}
done:
	events[ne] = '\0';
	if (out)
		*out = f;
	return framing_refusal(&f)->status;
}

static void expect(const char *text, const char *events, int status, const char *code)
{
	static const size_t steps[] = { 0, 1, 2, 7 };
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		char got[64];
		struct framing f;
		int st = run(text, steps[i], got, sizeof got, &f);
		CHECKF(strcmp(got, events) == 0, "%s (step %zu): events %s, want %s", text, steps[i],
		       got, events);
		CHECKF(st == status, "%s (step %zu): status %d, want %d", text, steps[i], st, status);
		if (code)
			CHECKF(strcmp(framing_refusal(&f)->code, code) == 0, "%s: code %s, want %s",
			       text, framing_refusal(&f)->code, code);
	}
}

TEST(framing_heads_and_bodies_begin_and_end)
{
	expect("GET / HTTP/1.1\r\nHost: x\r\n\r\n", "BE", 0, NULL);
	/* HTTP/1.0 needs no Host; bare LF line ends are read as libevent reads them. */
	expect("GET /a HTTP/1.0\n\n", "BE", 0, NULL);
	expect("POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
	       "BED", 0, NULL);
	/* Pipelined: the body's end is the next request's start. */
	expect("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhiGET / HTTP/1.1\r\n"
	       "Host: x\r\n\r\n", "BEDBE", 0, NULL);
	expect("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "5\r\nhello\r\na\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n"
	       "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "BEDBE", 0, NULL);
	/* Values are trimmed; case does not matter in names or in "chunked". */
	expect("PUT / HTTP/1.1\r\nhost: x\r\nCONTENT-LENGTH:  3  \r\n\r\nabc", "BED", 0, NULL);
	expect("PATCH / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n",
	       "BED", 0, NULL);
	/* Content-Length: 0 on HEAD is no body; a long value of another header is fine. */
	expect("HEAD / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nCookie: "
	       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
	       "BE", 0, NULL);
}

TEST(framing_in_head_and_in_body_follow_the_bytes)
{
	struct framing f;
	framing_init(&f, MAX_HEAD, MAX_BODY);
	enum framing_event ev;
	const char *head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n";
	CHECK_INT(framing_feed(&f, head, 3, &ev), 1);
	CHECK_INT(ev, FRAMING_HEAD_BEGAN);
	CHECK(framing_in_head(&f) && !framing_in_body(&f));
	size_t k = framing_feed(&f, head + 1, strlen(head) - 1, &ev);
	CHECK_INT(k, strlen(head) - 1);
	CHECK_INT(ev, FRAMING_HEAD_ENDED);
	CHECK(!framing_in_head(&f) && framing_in_body(&f));
	CHECK_INT(framing_feed(&f, "ab", 2, &ev), 2);
	CHECK_INT(ev, FRAMING_NONE);
	CHECK_INT(framing_feed(&f, "cdGET", 5, &ev), 2);
	CHECK_INT(ev, FRAMING_BODY_ENDED);
	CHECK(!framing_in_head(&f) && !framing_in_body(&f));
}

TEST(framing_refuses_what_another_reader_could_frame_otherwise)
{
	/* Request smuggling's classics. */
	expect("GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 91\r\n\r\n",
	       "BR", 400, "invalid_header");
	expect("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
	       "BR", 400, "invalid_header");
	expect("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +96\r\n\r\n", "BR", 400,
	       "invalid_header");
	expect("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x10\r\n\r\n", "BR", 400,
	       "invalid_header");
	expect("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\n", "BR", 400,
	       "invalid_header");
	expect("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "BR", 400,
	       "unsupported_transfer_encoding");
	expect("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
	       "Transfer-Encoding: chunked\r\n\r\n", "BR", 400, "invalid_header");
	expect("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n"
	       "\r\n", "BR", 400, "ambiguous_framing");
	/* Bytes a reader could cut or join differently. */
	static const char nul[] = "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\0junk\r\n\r\n";
	struct framing f;
	framing_init(&f, MAX_HEAD, MAX_BODY);
	enum framing_event ev = FRAMING_NONE;
	for (size_t at = 0; at < sizeof nul - 1 && ev != FRAMING_REFUSED;)
		at += framing_feed(&f, nul + at, sizeof nul - 1 - at, &ev);
	CHECK_INT(ev, FRAMING_REFUSED);
	CHECK_INT(framing_refusal(&f)->status, 400);
	expect("GET / HTTP/1.1\r\nHost: x\rX-A: 1\r\n\r\n", "BR", 400, "invalid_header");
	expect("GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n", "BR", 400,
	       "invalid_header");
	expect("GET / HTTP/1.1\r\nHost : x\r\n\r\n", "BR", 400, "invalid_header");
	expect("GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", "BR", 400, "invalid_header");
	expect("GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n"
	       "\r\n", "BR", 400, "invalid_header");
	expect("GET / HTTP/1.1\r\n\r\n", "BR", 400, "missing_host");
	expect("GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", "BR", 400, "invalid_header");
	expect("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01z\r\n\r\n", "BR", 400, "invalid_header");
	/* Request lines. */
	expect("\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", "BR", 400, "invalid_request_line");
	expect("GET /\r\n\r\n", "BR", 400, "invalid_request_line");
	expect("GET  / HTTP/1.1\r\nHost: x\r\n\r\n", "BR", 400, "invalid_request_line");
	expect("GET / HTTP/2.0\r\nHost: x\r\n\r\n", "BR", 505, "unsupported_version");
	expect("G(T / HTTP/1.1\r\nHost: x\r\n\r\n", "BR", 400, "invalid_request_line");
	/* A body on a method libevent reads none for would be the next request. */
	expect("HEAD / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "BR", 400,
	       "body_not_allowed");
	expect("TRACE / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", "BR", 400,
	       "body_not_allowed");
	/* Chunks. */
	expect("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "BER", 400,
	       "invalid_chunk");
	expect("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX", "BER",
	       400, "invalid_chunk");
	expect("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", "BER", 400,
	       "invalid_chunk");
	/* libevent reads no chunk extension: one would end its chunk size elsewhere. */
	expect("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello"
	       "\r\n0\r\n\r\n", "BER", 400, "invalid_chunk");
	expect("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\n", "BER",
	       400, "invalid_chunk");
}

TEST(framing_caps_the_head_and_the_body)
{
	char big[MAX_HEAD + 64];
	snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: %0*d\r\n\r\n",
		 MAX_HEAD - 30, 0);
	expect(big, "BR", 431, "headers_too_large");
	expect("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", "BR", 413,
	       "body_too_large");
	expect("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", "BE", 0, NULL);
	expect("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999999999999999\r\n\r\n", "BR",
	       400, "invalid_header");
	/* Chunks add up against the same cap. */
	char chunks[512];
	snprintf(chunks, sizeof chunks,
		 "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
		 "32\r\n%050d\r\n33\r\n", 0);
	expect(chunks, "BER", 413, "body_too_large");
	expect("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\n",
	       "BER", 413, "body_too_large");
}

TEST(framing_after_a_refusal_reads_nothing)
{
	struct framing f;
	framing_init(&f, MAX_HEAD, MAX_BODY);
	enum framing_event ev;
	const char *bad = "GET / HTTP/9.9\r\n";
	size_t at = 0;
	do
		at += framing_feed(&f, bad + at, strlen(bad) - at, &ev);
	while (ev != FRAMING_REFUSED && at < strlen(bad));
	CHECK_INT(ev, FRAMING_REFUSED);
	CHECK_INT(framing_feed(&f, "GET / HTTP/1.1\r\n", 16, &ev), 0);
	CHECK_INT(ev, FRAMING_REFUSED);
}
