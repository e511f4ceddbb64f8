/* Unit tests of lib/: allocation accounting, errors, log escaping, JSON helpers and the JSON
 * text writer, time. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/jsonw.h"
#include "lib/jsonx.h"
#include "lib/log.h"
#include "tests/harness/t.h"

TEST(alloc_counts_live_bytes)
{
	size_t before = gwb_alloc_bytes();
	char *p = gwb_malloc(1000);
	CHECK_INT(gwb_alloc_bytes() - before, 1000);
	p = gwb_realloc(p, 10);
	CHECK_INT(gwb_alloc_bytes() - before, 10);
	gwb_free(p);
	CHECK_INT(gwb_alloc_bytes(), before);
	gwb_free(NULL);
}

TEST(alloc_fail_nth_fails_exactly_that_one)
{
	gwb_alloc_fail_nth(2);
	void *a = gwb_try_malloc(8);
	void *b = gwb_try_malloc(8);
	void *c = gwb_try_malloc(8);
	CHECK(a != NULL);
	CHECK(b == NULL);
	CHECK(c != NULL);
	gwb_free(a);
	gwb_free(c);
}

TEST(err_names_and_strings)
{
	CHECK_STR(err_name(GWB_ENOTFOUND), "GWB_ENOTFOUND");
	CHECK_STR(err_str(GWB_EQUOTA), "quota exceeded");
	CHECK_STR(err_name(12345), "GWB_UNKNOWN");
	CHECK(GWB_ENOMEM < 0 && GWB_ESTATE < 0);
}

TEST(log_q_escapes_outside_data)
{
	CHECK_STR(log_q("plain"), "plain");
	CHECK_STR(log_q("a b"), "\"a b\"");
	CHECK_STR(log_q("x=\"y\"\n"), "\"x=\\\"y\\\"\\x0a\"");
	CHECK_STR(log_q(NULL), "-");
	CHECK_STR(log_q(""), "\"\"");
}

TEST(utf8_validation)
{
	size_t off = 99;
	CHECK(jx_utf8_valid("h\xc3\xa9llo", 6, NULL));
	CHECK(jx_utf8_valid("\xe4\xb8\xad\xf0\x9f\x98\x80", 7, NULL));
	CHECK(!jx_utf8_valid("ab\xff", 3, &off));
	CHECK_INT(off, 2);
	CHECK(!jx_utf8_valid("\xc0\xaf", 2, NULL));         /* overlong '/' */
	CHECK(!jx_utf8_valid("\xed\xa0\x80", 3, NULL));     /* surrogate */
	CHECK(!jx_utf8_valid("\xe4\xb8", 2, NULL));         /* truncated */
	CHECK(!jx_utf8_valid("\xf4\x90\x80\x80", 4, NULL)); /* above U+10FFFF */
}

TEST(jx_parse_reports_position)
{
	struct jx_parse_err e;
	json_t *v = jx_parse("{\"a\": 1,\n \"b\": }", 16, &e);
	CHECK(v == NULL);
	CHECK_STR(e.code, "invalid_json");
	CHECK_INT(e.line, 2);
	CHECK(strstr(e.message, "line 2") != NULL);
	v = jx_parse("{\"a\":1,\"a\":2}", 13, &e);
	CHECK(v == NULL);
	v = jx_parse("{\"a\":\"\xff\"}", 9, &e);
	CHECK(v == NULL);
	CHECK_STR(e.code, "invalid_utf8");
	CHECK_INT(e.position, 6);
	v = jx_parse("{\"a\":1}", 7, &e);
	CHECK(v != NULL);
	json_decref(v);
}

/* Bodies the flat readers take, and ones they must hand to jansson. */
static const char *const bodies[] = {
	"{}",
	" { } ",
	"{\"team\": \"bench\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}",
	"{\"a\":\"\",\"\":0,\"b\":true,\"c\":false,\"d\":null}\r\n\t",
	"{\"n\": 999999999999999999}",   /* 18 digits */
	"{\"n\": 9999999999999999999}",  /* 19: too big for jansson */
	"{\"n\": 1234567890123456789}",  /* 19, fits */
	"{\"n\": 01}", "{\"n\": 0}", "{\"n\": -1}", "{\"n\": 1.5}", "{\"n\": 1e3}",
	"{\"n\": 1x}", "{\"n\": truex}", "{\"n\": nul}", "{\"s\": \"a/b c\"}",
	"{\"s\": \"tab\there\"}", "{\"s\": \"q\\\"q\"}", "{\"s\": \"\\u00e9\"}",
	"{\"s\": \"\xc3\xa9\"}", "{\"s\": \"del\x7f\"}", "{\"a\": 1, \"a\": 2}",
	"{\"a\": 1,}", "{\"a\": 1 \"b\": 2}", "{\"a\" 1}", "{\"a\": 1}}", "{\"a\": 1} x",
	"{\"a\": [1]}", "{\"a\": {\"b\": 1}}", "[1]", "\"s\"", "", "   ", "{",
	"{\"a\": \"unterminated}", "{\"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
	"kkkkkkkk\": 1}",
};

/* jx_parse gives what json_loadb (with JSON_REJECT_DUPLICATES) gives, for bodies its flat
 * reading takes and for every one it hands to jansson: the same value, or an error. */
TEST(jx_parse_equals_jansson)
{
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		const char *b = bodies[i];
		struct jx_parse_err e;
		json_t *got = jx_parse(b, strlen(b), &e);
		json_error_t je;
		json_t *want = jx_utf8_valid(b, strlen(b), NULL)
				       ? json_loadb(b, strlen(b), JSON_REJECT_DUPLICATES, &je)
				       : NULL;
		CHECKF((got == NULL) == (want == NULL), "%s: jx_parse %s, jansson %s", b,
		       got ? "parsed" : "refused", want ? "parsed" : "refused");
		if (got)
			CHECKF(json_equal(got, want), "%s: another value than jansson's", b);
		if (!got)
			CHECKF(e.code != NULL, "%s: refused without a code", b);
		json_decref(got);
		json_decref(want);
	}
	/* A NUL inside the body (strlen would stop there) is jansson's to refuse. */
	static const char nul[] = "{\"a\": \"x\0y\"}";
	struct jx_parse_err e;
	json_t *v = jx_parse(nul, sizeof nul - 1, &e);
	CHECK(v == NULL);
	json_decref(v);
}

/* jx_flat_read gives each field what jx_member gives from jx_parse's object, for every body
 * it takes; the others (nested, escaped, duplicated, unknown...) it leaves untouched. */
TEST(jx_flat_read_equals_the_parsed_fields)
{
	static const char *const fields[] = { "a", "", "b", "c", "d", "n", "s", "team",
					      "gpu_memory_mib", "gpu_core_percent", NULL };
	int taken = 0;
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		size_t len = strlen(bodies[i]);
		char buf[256];
		CHECK(len < sizeof buf);
		memcpy(buf, bodies[i], len + 1);
		struct jx_val v[10];
		if (jx_flat_read(buf, len, fields, v) != 0) {
			CHECKF(memcmp(buf, bodies[i], len + 1) == 0, "%s: changed", bodies[i]);
			continue;
		}
		taken++;
		struct jx_parse_err pe;
		struct jx_err e;
		json_t *o = jx_parse(bodies[i], len, &pe);
		CHECKF(json_is_object(o), "%s: taken flat, not an object", bodies[i]);
		CHECKF(jx_only_keys(o, fields, &e) == 0, "%s: taken with a key not listed", bodies[i]);
		for (int f = 0; fields[f]; f++) {
			struct jx_val want = jx_member(o, fields[f]);
			CHECKF(v[f].kind == want.kind, "%s: %s of kind %d, not %d", bodies[i],
			       fields[f], (int)v[f].kind, (int)want.kind);
			if (want.kind == JX_STRING)
				CHECKF(v[f].n == want.n && strcmp(v[f].s, want.s) == 0,
				       "%s: %s is \"%s\"", bodies[i], fields[f], v[f].s);
			if (want.kind == JX_INTEGER)
				CHECKF(v[f].i == want.i, "%s: %s", bodies[i], fields[f]);
		}
		json_decref(o);
	}
	CHECK(taken >= 4);
	/* A key the list does not have, or one given twice: jansson's and jx_only_keys' to say. */
	static const char *const two[] = { "a", NULL };
	char unknown[] = "{\"a\": 1, \"z\": 2}", twice[] = "{\"a\": 1, \"a\": 1}";
	struct jx_val v[1];
	CHECK_INT(jx_flat_read(unknown, strlen(unknown), two, v), -1);
	CHECK_INT(jx_flat_read(twice, strlen(twice), two, v), -1);
	char ok[] = "{\"a\": \"LS\"}";
	CHECK_INT(jx_flat_read(ok, strlen(ok), two, v), 0);
	CHECK_STR(v[0].s, "LS");
}

TEST(jx_field_readers_are_strict)
{
	struct jx_err e;
	json_t *o = json_pack("{s:i, s:f, s:s, s:b}", "n", 5, "r", 1.0, "s", "LS", "b", 1);
	int64_t i;
	const char *s;
	CHECK_INT(jx_int(o, "n", 1, 0, 1, 10, &i, &e), 0);
	CHECK_INT(i, 5);
	CHECK_INT(jx_int(o, "n", 1, 0, 6, 10, &i, &e), GWB_EINVAL);
	CHECK_STR(e.field, "n");
	CHECK_INT(jx_int(o, "r", 1, 0, 0, 10, &i, &e), GWB_EINVAL);
	CHECK_INT(jx_int(o, "b", 1, 0, 0, 10, &i, &e), GWB_EINVAL);
	CHECK_INT(jx_int(o, "missing", 1, 0, 0, 10, &i, &e), GWB_EINVAL);
	CHECK_STR(e.rule, "required");
	CHECK_INT(jx_int(o, "missing", 0, 7, 0, 10, &i, &e), 0);
	CHECK_INT(i, 7);
	static const char *const qos[] = { "LS", "BE", NULL };
	CHECK_INT(jx_enum(o, "s", 1, qos, NULL, &s, &e), 0);
	CHECK_STR(s, "LS");
	CHECK_INT(jx_enum(o, "n", 1, qos, NULL, &s, &e), GWB_EINVAL);
	static const char *const allowed[] = { "n", "r", "s", NULL };
	CHECK_INT(jx_only_keys(o, allowed, &e), GWB_EINVAL);
	CHECK_STR(e.field, "b");
	CHECK_STR(e.rule, "unknown field");
	char *d = jx_dump(o);
	CHECK_STR(d, "{\"b\":true,\"n\":5,\"r\":1.0,\"s\":\"LS\"}");
	gwb_free(d);
	json_decref(o);
}

TEST(jx_gpu_pair_is_the_api_amount)
{
	json_t *p = jx_gpu_pair(40960, 800);
	char *d = jx_dump(p);
	CHECK_STR(d, "{\"gpu_core_percent\":800,\"gpu_memory_mib\":40960}");
	gwb_free(d);
	json_decref(p);
	p = jx_gpu_pair(INT64_MAX, 0);
	CHECK_INT(json_integer_value(json_object_get(p, "gpu_memory_mib")), INT64_MAX);
	CHECK_INT(json_object_size(p), 2);
	json_decref(p);
}

TEST(clock_rfc3339_round_trip)
{
	char buf[40];
	int64_t ms;
	CHECK_STR(clock_fmt_rfc3339(1796013763000LL, buf, sizeof buf), "2026-11-30T04:42:43Z");
	CHECK_INT(clock_parse_rfc3339("2026-11-30T04:42:43Z", &ms), 0);
	CHECK_INT(ms, 1796013763000LL);
	CHECK_INT(clock_parse_rfc3339("2026-11-30T04:42:43.5Z", &ms), 0);
	CHECK_INT(ms, 1796013763500LL);
	CHECK_INT(clock_parse_rfc3339("2026-11-30T04:42:43+01:00", &ms), GWB_EINVAL);
	CHECK_INT(clock_parse_rfc3339("yesterday", &ms), GWB_EINVAL);
}

/* The millisecond form, written digit by digit, equals the format it replaces, across
 * years, months and milliseconds (and round-trips through the parser). */
TEST(clock_rfc3339_ms_equals_its_format)
{
	static const int64_t samples[] = { 0,          999,           1000,
					   951782399999LL, 1796013763005LL, 1764540000123LL,
					   4102444799999LL, 253402300799999LL };
	for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
		int64_t ms = samples[i];
		char got[40], want[40];
		time_t sec = (time_t)(ms / 1000);
		struct tm tm;
		gmtime_r(&sec, &tm);
		snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
			 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			 (int)(ms % 1000));
		CHECK_STR(clock_fmt_rfc3339_ms(ms, got, sizeof got), want);
		int64_t back;
		CHECK_INT(clock_parse_rfc3339(got, &back), 0);
		CHECK_INT(back, ms);
	}
}

/* The writer's output equals jansson's compact dump of the same values: integers at their
 * limits, every escape, plain strings (copied as they are) among other values, nested
 * containers, raw values. */
TEST(jsonw_matches_jansson)
{
	struct jw w;
	jw_init(&w);
	jw_obj_begin(&w);
	jw_key(&w, "a");
	jw_arr_begin(&w);
	jw_int(&w, 0);
	jw_int(&w, -1);
	jw_int(&w, INT64_MAX);
	jw_int(&w, INT64_MIN);
	jw_bool(&w, 1);
	jw_bool(&w, 0);
	jw_null(&w);
	jw_obj_begin(&w);
	jw_obj_end(&w);
	jw_arr_begin(&w);
	jw_arr_end(&w);
	jw_raw(&w, "{\"r\":1}", 7);
	jw_str(&w, "t-plain 2026-12-01T00:00:00.000Z");
	jw_str(&w, "");
	jw_str(&w, "x\x7fy");
	jw_arr_end(&w);
	jw_key(&w, "b");
	jw_str(&w, "q\"b\\s/\x01\x1f\b\f\n\r\t\x7f\xc3\xa9\xf0\x9f\x98\x80");
	jw_key(&w, "c");
	jw_text(&w, "");
	jw_obj_end(&w);
	CHECK(jw_ok(&w));
	json_t *v = json_pack("{s:[I,I,I,I,b,b,n,{},[],{s:i},s,s,s], s:s, s:n}", "a",
			      (json_int_t)0, (json_int_t)-1, (json_int_t)INT64_MAX,
			      (json_int_t)INT64_MIN, 1, 0, "r", 1,
			      "t-plain 2026-12-01T00:00:00.000Z", "", "x\x7fy", "b",
			      "q\"b\\s/\x01\x1f\b\f\n\r\t\x7f\xc3\xa9\xf0\x9f\x98\x80", "c");
	CHECK(v != NULL);
	char *want = jx_dump(v);
	json_decref(v);
	CHECKF(w.len == strlen(want) && memcmp(w.buf, want, w.len) == 0, "jansson: %s\nwritten: %.*s",
	       want, (int)w.len, w.buf);
	gwb_free(want);
	jw_free(&w);
	/* A value rewound to its mark (inside an array, after a failure) leaves no trace: the
	 * comma, the partial object and the failure go. */
	jw_init(&w);
	jw_arr_begin(&w);
	jw_int(&w, 1);
	struct jw_mark m = jw_mark(&w);
	jw_obj_begin(&w);
	jw_member_str(&w, "bad", "\xc0\xaf");
	CHECK(!jw_ok(&w));
	jw_rewind(&w, m);
	jw_raw(&w, "{\"ok\":2}", 8);
	jw_arr_end(&w);
	CHECK(jw_ok(&w));
	CHECKF(w.len == 12 && memcmp(w.buf, "[1,{\"ok\":2}]", 12) == 0, "rewound: %.*s",
	       (int)w.len, w.buf);
	jw_free(&w);
	/* Invalid UTF-8 (an overlong, a surrogate, a cut sequence) fails the writer. */
	static const char *const bad[] = { "\xc0\xaf", "\xed\xa0\x80", "ab\xe2\x82" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		jw_init(&w);
		jw_str(&w, bad[i]);
		CHECK(!jw_ok(&w));
		jw_free(&w);
	}
}
