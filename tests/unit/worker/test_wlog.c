/* Unit tests of worker/wlog and worker/wconf: the JSON line shape and the settings table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "tests/harness/t.h"
#include "worker/wconf.h"
#include "worker/wlog.h"

TEST(wlog_line_shape)
{
	char *s = wlog_format(0, "progress",
	                      json_pack("{s:i,s:s,s:s}", "n", 3, "event", "forged", "ts", "x"));
	CHECK_STR(s, "{\"ts\":\"1970-01-01T00:00:00.000Z\",\"event\":\"progress\",\"n\":3}");
	gwb_free(s);
	s = wlog_format(1500, "start", NULL);
	CHECK_STR(s, "{\"ts\":\"1970-01-01T00:00:01.500Z\",\"event\":\"start\"}");
	gwb_free(s);
	json_t *v = wlog_str("a\xff"
	                     "b");
	CHECK_STR(json_string_value(v), "a?b");
	json_decref(v);
	v = wlog_str(NULL);
	CHECK(json_is_null(v));
	json_decref(v);
}

TEST(wlog_emit_writes_one_line)
{
	FILE *f = tmpfile();
	CHECK(f != NULL);
	wlog_set_stream(f);
	wlog_emit("a", json_pack("{s:s}", "k", "line\nbreak"));
	wlog_emit("b", NULL);
	wlog_set_stream(NULL);
	rewind(f);
	char line[256];
	int n = 0;
	while (fgets(line, sizeof line, f))
		n++;
	fclose(f);
	CHECK_INT(n, 2);
}

static char *argv_none[] = {"gwb-worker", NULL};

TEST(wconf_defaults_env_and_flags)
{
	unsetenv("GWB_ANNOTATIONS_FILE");
	unsetenv("GWB_EXPERIMENT");
	unsetenv("GWB_DURATION_SECONDS");
	struct wconf c;
	char err[256];
	CHECK_INT(wconf_load(&c, 1, argv_none, err, sizeof err), 0);
	CHECK_STR(c.annotations_file, "/etc/podinfo/annotations");
	CHECK_STR(c.experiment, "normal");
	CHECK_INT(c.period_ms, 100);
	CHECK_STR(c.proc_maps, "/proc/self/maps");
	setenv("GWB_EXPERIMENT", "overlimit", 1);
	setenv("GWB_DURATION_SECONDS", "1.5", 1);
	CHECK_INT(wconf_load(&c, 1, argv_none, err, sizeof err), 0);
	CHECK_STR(c.experiment, "overlimit");
	CHECK(c.duration_s == 1.5);
	char *args[] = {"gwb-worker", "--experiment", "normal", "--duration-seconds=3", NULL};
	CHECK_INT(wconf_load(&c, 4, args, err, sizeof err), 0);
	CHECK_STR(c.experiment, "normal");
	CHECK(c.duration_s == 3);
	char *help[] = {"gwb-worker", "--help", NULL};
	CHECK_INT(wconf_load(&c, 2, help, err, sizeof err), 1);
}

static void check_bad(int argc, char **argv, const char *env, const char *val, const char *name)
{
	struct wconf c;
	char err[256];
	if (env)
		setenv(env, val, 1);
	CHECK_INT(wconf_load(&c, argc, argv, err, sizeof err), GWB_EINVAL);
	CHECKF(strncmp(err, name, strlen(name)) == 0, "error \"%s\" does not start with %s", err,
	       name);
	if (env)
		unsetenv(env);
}

TEST(wconf_rejects_bad_settings)
{
	check_bad(1, argv_none, "GWB_EXPERIMENT", "fast", "GWB_EXPERIMENT");
	check_bad(1, argv_none, "GWB_DURATION_SECONDS", "-1", "GWB_DURATION_SECONDS");
	check_bad(1, argv_none, "GWB_DURATION_SECONDS", "ten", "GWB_DURATION_SECONDS");
	check_bad(1, argv_none, "GWB_DURATION_SECONDS", "nan", "GWB_DURATION_SECONDS");
	check_bad(1, argv_none, "GWB_PERIOD_MS", "5", "GWB_PERIOD_MS");
	check_bad(1, argv_none, "GWB_PERIOD_MS", "100x", "GWB_PERIOD_MS");
	check_bad(1, argv_none, "GWB_ANNOTATIONS_FILE", "", "GWB_ANNOTATIONS_FILE");
	char *unknown[] = {"gwb-worker", "--nope", "1", NULL};
	check_bad(3, unknown, NULL, NULL, "--nope");
	char *novalue[] = {"gwb-worker", "--experiment", NULL};
	check_bad(2, novalue, NULL, NULL, "--experiment");
}
