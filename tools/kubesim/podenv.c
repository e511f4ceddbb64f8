/* The pod folder, the downward-API files and the container environment (podenv.h). */
#include "tools/kubesim/podenv.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/devalloc.h"
#include "lib/jsonx.h"
#include "lib/podinfo.h"
#include "tools/kubesim/obj.h"

#define HAMI_LIBRARY "/usr/local/vgpu/libvgpu.so"

void podenv_dir(const char *state_dir, const char *uid, char *buf, size_t len)
{
	snprintf(buf, len, "%s/pods/%s", state_dir, uid);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* The kubelet removes a deleted pod's folder (logs, volumes) once its containers are gone. */
void podenv_remove_dir(const char *state_dir, const char *uid)
{
	char dir[PATH_MAX];
	podenv_dir(state_dir, uid, dir, sizeof dir);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* mkdir -p. The folder usually exists already (every pass over a running pod), or only its
 * last component is missing: one mkdir answers those, before the walk from the root. */
int podenv_mkdirs(const char *path)
{
	if (mkdir(path, 0755) == 0 || errno == EEXIST)
		return 0;
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* Writes data atomically (temp file + rename), as the kubelet's atomic writer does. */
static int write_file(const char *path, const char *data, size_t len)
{
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	if (!f)
		return -1;
	size_t n = fwrite(data, 1, len, f);
	if (fclose(f) != 0 || n != len) {
		unlink(tmp);
		return -1;
	}
	return rename(tmp, path);
}

/* ---- downward API ---- */

static char *map_file(const json_t *map)
{
	size_t n = json_object_size(map);
	const char **keys = gwb_calloc(n ? n : 1, sizeof *keys);
	const char **vals = gwb_calloc(n ? n : 1, sizeof *vals);
	size_t i = 0;
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)map, k, v)
	{
		if (!json_is_string(v))
			continue;
		keys[i] = k;
		vals[i++] = json_string_value(v);
	}
	char *out = podinfo_format(keys, vals, i);
	gwb_free(keys);
	gwb_free(vals);
	return out;
}

/* The value a fieldRef names, in a gwb_malloc'd string (NULL when unsupported). */
static char *field_ref(const json_t *pod, const char *path)
{
	char key[256];
	if (!strcmp(path, "metadata.annotations"))
		return map_file(obj_path(pod, "metadata.annotations"));
	if (!strcmp(path, "metadata.labels"))
		return map_file(obj_path(pod, "metadata.labels"));
	if (sscanf(path, "metadata.annotations['%255[^']']", key) == 1) {
		const char *v = obj_annotation(pod, key);
		return gwb_strdup(v ? v : "");
	}
	if (sscanf(path, "metadata.labels['%255[^']']", key) == 1) {
		const char *v = obj_label(pod, key);
		return gwb_strdup(v ? v : "");
	}
	static const struct {
		const char *field, *path;
	} simple[] = { { "metadata.name", "metadata.name" },
		       { "metadata.namespace", "metadata.namespace" },
		       { "metadata.uid", "metadata.uid" },
		       { "spec.nodeName", "spec.nodeName" },
		       { "spec.serviceAccountName", "spec.serviceAccountName" },
		       { "status.hostIP", "status.hostIP" },
		       { "status.podIP", "status.podIP" } };
	for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++)
		if (!strcmp(path, simple[i].field)) {
			const char *v = obj_str(pod, simple[i].path);
			return gwb_strdup(v ? v : "");
		}
	return NULL;
}

/* Writes every downwardAPI volume of the pod under <poddir>/volumes/<name>/. */
void podenv_write_downward(const char *state_dir, const json_t *pod)
{
	char dir[PATH_MAX];
	podenv_dir(state_dir, obj_uid(pod), dir, sizeof dir);
	size_t i;
	json_t *vol;
	json_array_foreach(obj_path(pod, "spec.volumes"), i, vol)
	{
		json_t *items = obj_path(vol, "downwardAPI.items");
		const char *vname = obj_str(vol, "name");
		if (!json_is_array(items) || !vname)
			continue;
		char vdir[PATH_MAX + 300];
		snprintf(vdir, sizeof vdir, "%s/volumes/%s", dir, vname);
		podenv_mkdirs(vdir);
		size_t j;
		json_t *it;
		json_array_foreach(items, j, it)
		{
			const char *path = obj_str(it, "path");
			const char *fp = obj_str(it, "fieldRef.fieldPath");
			if (!path || !fp || strstr(path, ".."))
				continue;
			char *val = field_ref(pod, fp);
			if (!val)
				continue;
			char file[PATH_MAX + 600];
			snprintf(file, sizeof file, "%s/%s", vdir, path);
			char *slash = strrchr(file, '/');
			if (slash) {
				*slash = '\0';
				podenv_mkdirs(file);
				*slash = '/';
			}
			/* Only rewrite on change: readers may poll the file. */
			FILE *f = fopen(file, "rb");
			int same = 0;
			if (f) {
				char buf[65536];
				size_t n = fread(buf, 1, sizeof buf, f);
				fclose(f);
				same = n == strlen(val) && !memcmp(buf, val, n);
			}
			if (!same)
				write_file(file, val, strlen(val));
			gwb_free(val);
		}
	}
}

/* Host path of a container path that lies in a downwardAPI volume mount, or "" when not. */
static void host_path_of(const char *state_dir, const json_t *pod, const json_t *ctr,
			 const char *cpath, char *out, size_t len)
{
	out[0] = '\0';
	char dir[PATH_MAX];
	podenv_dir(state_dir, obj_uid(pod), dir, sizeof dir);
	size_t i;
	json_t *m;
	json_array_foreach(json_object_get(ctr, "volumeMounts"), i, m)
	{
		const char *mp = obj_str(m, "mountPath"), *vn = obj_str(m, "name");
		if (!mp || !vn)
			continue;
		size_t ml = strlen(mp);
		while (ml > 1 && mp[ml - 1] == '/')
			ml--;
		if (strncmp(cpath, mp, ml) || (cpath[ml] != '/' && cpath[ml] != '\0'))
			continue;
		snprintf(out, len, "%s/volumes/%s%s", dir, vn, cpath + ml);
		return;
	}
}

/* The annotations file of a container's downwardAPI mount, as a container path, or NULL. */
static int annotations_mount(const json_t *pod, const json_t *ctr, char *out, size_t len)
{
	size_t i;
	json_t *m;
	json_array_foreach(json_object_get(ctr, "volumeMounts"), i, m)
	{
		const char *vn = obj_str(m, "name"), *mp = obj_str(m, "mountPath");
		size_t j;
		json_t *vol;
		json_array_foreach(obj_path(pod, "spec.volumes"), j, vol)
		{
			const char *name = obj_str(vol, "name");
			if (!vn || !mp || !name || strcmp(name, vn))
				continue;
			size_t q;
			json_t *it;
			json_array_foreach(obj_path(vol, "downwardAPI.items"), q, it)
			{
				const char *fp = obj_str(it, "fieldRef.fieldPath");
				const char *path = obj_str(it, "path");
				if (fp && path && !strcmp(fp, "metadata.annotations")) {
					snprintf(out, len, "%s/%s", mp, path);
					return 1;
				}
			}
		}
	}
	return 0;
}

/* ---- termination message ---- */

void podenv_termination_path(const char *state_dir, const char *uid, const char *container,
			     char *buf, size_t len)
{
	char dir[PATH_MAX];
	podenv_dir(state_dir, uid, dir, sizeof dir);
	snprintf(buf, len, "%s/%s.termination-log", dir, container);
}

void podenv_termination_reset(const char *state_dir, const char *uid, const char *container)
{
	char path[PATH_MAX + 96];
	podenv_termination_path(state_dir, uid, container, path, sizeof path);
	unlink(path);
}

/* The last max bytes of the file at path into buf (max + 1 bytes): their count, 0 when the
 * file is missing or empty. */
static size_t read_tail(const char *path, char *buf, size_t max)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	struct stat st;
	size_t n = 0;
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		off_t from = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
		if (fseeko(f, from, SEEK_SET) == 0)
			n = fread(buf, 1, max, f);
	}
	fclose(f);
	buf[n] = '\0';
	return n;
}

/* Where the last `lines` lines of buf[0..n) begin (a last newline ends the last line). */
static size_t last_lines(const char *buf, size_t n, int lines)
{
	size_t end = n && buf[n - 1] == '\n' ? n - 1 : n;
	int seen = 0;
	for (size_t i = end; i > 0; i--)
		if (buf[i - 1] == '\n' && ++seen == lines)
			return i;
	return 0;
}

/* A string of s[0..n) with every byte that is not UTF-8 (and NUL) made '?'. */
static char *utf8_clean(char *s, size_t n)
{
	size_t off = 0, bad;
	while (off < n && !jx_utf8_valid(s + off, n - off, &bad)) {
		s[off + bad] = '?';
		off += bad + 1;
	}
	for (size_t i = 0; i < n; i++)
		if (!s[i])
			s[i] = '?';
	return gwb_strdup(s);
}

char *podenv_termination_message(const char *state_dir, const char *uid, const json_t *ctr,
				 int failed)
{
	const char *name = obj_str(ctr, "name");
	if (!name)
		return NULL;
	char path[PATH_MAX + 96], buf[PODENV_TERM_MSG_MAX + 1];
	podenv_termination_path(state_dir, uid, name, path, sizeof path);
	size_t n = read_tail(path, buf, PODENV_TERM_MSG_MAX);
	if (n)
		return utf8_clean(buf, n);
	const char *policy = obj_str(ctr, "terminationMessagePolicy");
	if (!failed || !policy || strcmp(policy, "FallbackToLogsOnError"))
		return NULL;
	char dir[PATH_MAX];
	podenv_dir(state_dir, uid, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/%s.log", dir, name);
	n = read_tail(path, buf, PODENV_TERM_LOG_BYTES);
	if (!n)
		return NULL;
	size_t from = last_lines(buf, n, PODENV_TERM_LOG_LINES);
	return utf8_clean(buf + from, n - from);
}

/* ---- environment ---- */

static void env_set(struct podenv_env *e, const char *name, const char *value)
{
	size_t nl = strlen(name);
	char *kv = gwb_malloc(nl + strlen(value) + 2);
	memcpy(kv, name, nl);
	kv[nl] = '=';
	memcpy(kv + nl + 1, value, strlen(value) + 1);
	for (int i = 0; i < e->n; i++)
		if (!strncmp(e->v[i], name, nl) && e->v[i][nl] == '=') {
			gwb_free(e->v[i]);
			e->v[i] = kv;
			return;
		}
	if (e->n < PODENV_MAX - 1)
		e->v[e->n++] = kv;
	else
		gwb_free(kv);
	e->v[e->n] = NULL;
}

static const char *env_get(const struct podenv_env *e, const char *name)
{
	size_t nl = strlen(name);
	for (int i = 0; i < e->n; i++)
		if (!strncmp(e->v[i], name, nl) && e->v[i][nl] == '=')
			return e->v[i] + nl + 1;
	return NULL;
}

void podenv_env_free(struct podenv_env *e)
{
	for (int i = 0; i < e->n; i++)
		gwb_free(e->v[i]);
	e->n = 0;
}

/* The env koordlet's GPU hook injects (koordinator.md §5.1). */
static void gpu_env(const json_t *pod, struct podenv_env *e)
{
	const char *ann = obj_annotation(pod, DEVALLOC_ANNOTATION);
	struct devalloc a;
	if (!ann || devalloc_parse(ann, strlen(ann), &a, NULL, 0) < 0 || a.ncards == 0)
		return;
	char minors[256] = "";
	size_t o = 0;
	for (int i = 0; i < a.ncards && o < sizeof minors; i++)
		o += (size_t)snprintf(minors + o, sizeof minors - o, "%s%d", i ? "," : "",
				      a.cards[i].minor);
	env_set(e, "NVIDIA_VISIBLE_DEVICES", minors);
	const char *iso = obj_label(pod, "koordinator.sh/gpu-isolation-provider");
	if (!iso || strcmp(iso, "HAMi-core") || !a.cards[0].has_ratio || a.cards[0].ratio >= 100)
		return;
	char buf[32];
	snprintf(buf, sizeof buf, "%" PRId64, a.cards[0].mem_bytes);
	env_set(e, "CUDA_DEVICE_MEMORY_LIMIT", buf);
	if (a.cards[0].has_core) {
		snprintf(buf, sizeof buf, "%" PRId64, a.cards[0].core);
		env_set(e, "CUDA_DEVICE_SM_LIMIT", buf);
	}
	/* Never preload a library that is not there: HAMi-core is installed by a DaemonSet. */
	if (access(HAMI_LIBRARY, R_OK) == 0)
		env_set(e, "LD_PRELOAD", HAMI_LIBRARY);
}

void podenv_env_build(const char *state_dir, const json_t *pod, const json_t *ctr,
		      struct podenv_env *e)
{
	const char *path = getenv("PATH");
	env_set(e, "PATH", path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	env_set(e, "HOSTNAME", obj_name(pod));
	char dir[PATH_MAX];
	podenv_dir(state_dir, obj_uid(pod), dir, sizeof dir);
	env_set(e, "HOME", dir);
	size_t i;
	json_t *ev;
	json_array_foreach(json_object_get(ctr, "env"), i, ev)
	{
		const char *name = obj_str(ev, "name");
		if (!name)
			continue;
		const char *val = obj_str(ev, "value");
		const char *fp = obj_str(ev, "valueFrom.fieldRef.fieldPath");
		if (fp) {
			char *v = field_ref(pod, fp);
			if (v) {
				env_set(e, name, v);
				gwb_free(v);
			}
		} else {
			env_set(e, name, val ? val : "");
		}
	}
	gpu_env(pod, e);
	/* The termination file at its host path, whatever terminationMessagePath says. */
	const char *cname = obj_str(ctr, "name");
	if (cname) {
		char tpath[PATH_MAX + 96];
		podenv_termination_path(state_dir, obj_uid(pod), cname, tpath, sizeof tpath);
		env_set(e, "GWB_TERMINATION_LOG", tpath);
	}
	/* The downward-API annotations file, at its host path (no mount namespaces here). */
	char cpath[PATH_MAX], hpath[PATH_MAX + 700];
	const char *given = env_get(e, "GWB_ANNOTATIONS_FILE");
	if (given) {
		host_path_of(state_dir, pod, ctr, given, hpath, sizeof hpath);
		if (hpath[0])
			env_set(e, "GWB_ANNOTATIONS_FILE", hpath);
	} else if (annotations_mount(pod, ctr, cpath, sizeof cpath)) {
		host_path_of(state_dir, pod, ctr, cpath, hpath, sizeof hpath);
		if (hpath[0])
			env_set(e, "GWB_ANNOTATIONS_FILE", hpath);
	}
}
