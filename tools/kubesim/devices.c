/* Node, Device and the Device -> Node resource sync. The sync is level-triggered: every pass
 * recomputes the Node's GPU resources from the Device and writes only when they differ (the
 * real plugin's resourceDiffThreshold is 0 here: every change shows at once). */
#include "tools/kubesim/devices.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/quantity.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/registry.h"
#include "tools/kubesim/store.h"

#define RES_GPU_CORE "koordinator.sh/gpu-core"
#define RES_GPU_MEM "koordinator.sh/gpu-memory"
#define RES_GPU_RATIO "koordinator.sh/gpu-memory-ratio"
#define RES_GPU "koordinator.sh/gpu"
#define RES_GPU_SHARED "koordinator.sh/gpu.shared"

static const char *const gpu_names[] = { RES_GPU_CORE, RES_GPU_MEM, RES_GPU_RATIO, RES_GPU,
					 RES_GPU_SHARED };
static const char *const device_labels[] = { "node.koordinator.sh/gpu-vendor",
					     "node.koordinator.sh/gpu-model",
					     "node.koordinator.sh/gpu-driver-version" };

static uint64_t mix64(uint64_t x)
{
	/* splitmix64's finaliser: spreads every input bit over the output. */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* A stable fake NVML UUID per node and minor (the same on every run). */
static void card_uuid(const char *node, int minor, char *out, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (const char *p = node; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	uint64_t a = mix64(h + (uint64_t)minor * 2), b = mix64(h + (uint64_t)minor * 2 + 1);
	snprintf(out, len, "GPU-%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%012" PRIx64,
		 (uint64_t)(a >> 32), (uint64_t)((a >> 16) & 0xffff), (uint64_t)(a & 0xffff),
		 (uint64_t)(b >> 48), (uint64_t)(b & 0xffffffffffffULL));
}

json_t *devices_default_device(const struct ks *ks, const char *node)
{
	char mem[QUANTITY_BUF], core[QUANTITY_BUF], model[64];
	quantity_format_binary(ks->cfg.card_memory, mem, sizeof mem);
	quantity_format_decimal(ks->cfg.card_core, core, sizeof core);
	/* koordlet writes the NVML name without "NVIDIA " and with '-' for spaces. */
	snprintf(model, sizeof model, "Simulated-GPU-%s", mem);
	json_t *devs = json_array();
	for (int i = 0; i < ks->cfg.cards; i++) {
		char id[64], bus[32];
		card_uuid(node, i, id, sizeof id);
		snprintf(bus, sizeof bus, "0000:00:%02x.0", 7 + i);
		json_array_append_new(
			devs,
			json_pack("{s:s, s:s, s:i, s:b, s:{s:s, s:s, s:s}, s:{s:i, s:i, s:s, s:s}}",
				  "type", "gpu", "id", id, "minor", i, "health", 1, "resources",
				  RES_GPU_CORE, core, RES_GPU_MEM, mem, RES_GPU_RATIO, "100",
				  "topology", "socketID", -1, "nodeID", 0, "pcieID", "pci0000:00",
				  "busID", bus));
	}
	return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s}}, s:{s:o}, s:{}}", "apiVersion",
			 "scheduling.koordinator.sh/v1alpha1", "kind", "Device", "metadata", "name",
			 node, "labels", device_labels[0], "nvidia", device_labels[1],
			 model, device_labels[2], "550.54.15", "spec", "devices", devs, "status");
}

static void read_os_image(char *buf, size_t len)
{
	snprintf(buf, len, "Linux");
	FILE *f = fopen("/etc/os-release", "r");
	if (!f)
		return;
	char line[256];
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "PRETTY_NAME=", 12) != 0)
			continue;
		char *v = line + 12;
		v[strcspn(v, "\n")] = '\0';
		if (*v == '"') {
			v++;
			v[strcspn(v, "\"")] = '\0';
		}
		snprintf(buf, len, "%s", v);
	}
	fclose(f);
}

static json_t *node_doc(const struct ks *ks, const char *name)
{
	char cpu[QUANTITY_BUF], mem[QUANTITY_BUF], bcpu[QUANTITY_BUF], pods[QUANTITY_BUF];
	char osimg[128], now[32];
	struct utsname u;
	uname(&u);
	read_os_image(osimg, sizeof osimg);
	obj_now(now, sizeof now);
	if (ks->cfg.node_cpu_milli % 1000 == 0)
		quantity_format_decimal(ks->cfg.node_cpu_milli / 1000, cpu, sizeof cpu);
	else
		snprintf(cpu, sizeof cpu, "%" PRId64 "m", ks->cfg.node_cpu_milli);
	quantity_format_binary(ks->cfg.node_memory, mem, sizeof mem);
	/* Batch allocatable is in milli-cores as an integer quantity (16000 -> "16k"). */
	quantity_format_decimal(ks->cfg.node_cpu_milli, bcpu, sizeof bcpu);
	quantity_format_decimal(ks->cfg.node_pods, pods, sizeof pods);
	json_t *res = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "cpu", cpu, "memory", mem, "pods",
				pods, "ephemeral-storage", "100Gi", "kubernetes.io/batch-cpu", bcpu,
				"kubernetes.io/batch-memory", mem);
	json_t *labels = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kubernetes.io/hostname",
				   name, "kubernetes.io/os", "linux", "kubernetes.io/arch",
				   "amd64", "beta.kubernetes.io/os", "linux",
				   "beta.kubernetes.io/arch", "amd64",
				   "node-role.kubernetes.io/control-plane", "");
	if (ks->cfg.hami_label)
		json_object_set_new(labels, "koordinator.sh/gpu-isolation-provider",
				    json_string("HAMi-core"));
	json_t *cond = json_pack("[{s:s, s:s, s:s, s:s, s:s, s:s}]", "type", "Ready", "status",
				 "True", "reason", "KubeletReady", "message",
				 "kubelet is posting ready status", "lastHeartbeatTime", now,
				 "lastTransitionTime", now);
	json_t *info = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
				 "kubeletVersion", "v1.32.4", "containerRuntimeVersion",
				 "kubesim://1.0", "osImage", osimg, "kernelVersion", u.release,
				 "architecture", "amd64", "operatingSystem", "linux", "machineID", "",
				 "systemUUID", "", "bootID", "", "kubeProxyVersion", "");
	json_t *addrs = json_pack("[{s:s, s:s}, {s:s, s:s}]", "type", "InternalIP", "address",
				  "127.0.0.1", "type", "Hostname", "address", name);
	return json_pack("{s:s, s:s, s:{s:s, s:o}, s:{}, s:{s:O, s:o, s:o, s:o, s:o}}",
			 "apiVersion", "v1", "kind", "Node", "metadata", "name", name,
			 "labels", labels, "spec", "status", "capacity", res, "allocatable", res,
			 "conditions", cond, "nodeInfo", info, "addresses", addrs);
}

static int create(struct ks *ks, enum res_id id, const char *ns, json_t *doc)
{
	struct kerr e = { 0 };
	int rc = registry_create(ks->registry, res_get(id), ns, doc, 0, NULL, &e);
	if (rc < 0)
		log_error("devices", "bootstrap_failed", "kind=%s msg=%s", res_get(id)->kind,
			  log_q(e.message));
	kerr_clear(&e);
	return rc;
}

static json_t *nodeslo_doc(const struct ks *ks)
{
	return json_pack(
		"{s:s, s:s, s:{s:s}, s:{s:{s:b, s:i, s:s, s:i}, s:{s:{s:{s:b}}, s:{s:{s:b}}}, "
		"s:{s:s}}, s:{}}",
		"apiVersion", "slo.koordinator.sh/v1alpha1", "kind", "NodeSLO", "metadata", "name",
		ks->cfg.node, "spec", "resourceUsedThresholdWithBE", "enable", 1,
		"cpuSuppressThresholdPercent", 65, "cpuSuppressPolicy", "cpuset",
		"memoryEvictThresholdPercent", 70, "resourceQOSStrategy", "lsClass", "cpuQOS",
		"enable", 0, "beClass", "cpuQOS", "enable", 0, "cpuBurstStrategy", "policy", "none",
		"status");
}

int devices_bootstrap(struct ks *ks)
{
	const char *nss[] = { "default", "kube-system", "kube-public", "kube-node-lease",
			      "gpu-workbench", "koordinator-system" };
	for (size_t i = 0; i < sizeof nss / sizeof nss[0]; i++)
		if (create(ks, RES_NAMESPACES, NULL,
			   json_pack("{s:{s:s}}", "metadata", "name", nss[i])) < 0)
			return GWB_EINVAL;
	for (int i = 0; i < ks->cfg.nodes; i++) {
		char name[80];
		ks_node_name(ks, i, name, sizeof name);
		if (create(ks, RES_NODES, NULL, node_doc(ks, name)) < 0)
			return GWB_EINVAL;
	}
	/* The priority classes the koordinator chart creates (koordinator.md §6.4). */
	struct {
		const char *name;
		int value;
	} pcs[] = { { "koord-prod", 9000 }, { "koord-mid", 7000 }, { "koord-batch", 5000 },
		    { "koord-free", 3000 } };
	for (size_t i = 0; i < sizeof pcs / sizeof pcs[0]; i++)
		if (create(ks, RES_PRIORITYCLASSES, NULL,
			   json_pack("{s:{s:s}, s:i, s:s, s:s}", "metadata", "name", pcs[i].name,
				     "value", pcs[i].value, "preemptionPolicy",
				     "PreemptLowerPriority", "description",
				     "koordinator priority class")) < 0)
			return GWB_EINVAL;
	if (create(ks, RES_NODESLOS, NULL, nodeslo_doc(ks)) < 0)
		return GWB_EINVAL;
	if (create(ks, RES_NODEMETRICS, NULL,
		   json_pack("{s:{s:s}, s:{s:{s:i, s:i}}}", "metadata", "name", ks->cfg.node,
			     "spec", "metricCollectPolicy", "aggregateDurationSeconds", 300,
			     "reportIntervalSeconds", 60)) < 0)
		return GWB_EINVAL;
	for (int i = 0; i < ks->cfg.nodes && ks->cfg.create_device; i++) {
		char name[80];
		ks_node_name(ks, i, name, sizeof name);
		json_t *dev = devices_default_device(ks, name);
		json_t *node = store_get(ks->store, RES_NODES, NULL, name);
		obj_set(dev, "metadata.ownerReferences",
			json_pack("[{s:s, s:s, s:s, s:s, s:b, s:b}]", "apiVersion", "v1", "kind",
				  "Node", "name", name, "uid", obj_uid(node), "controller", 1,
				  "blockOwnerDeletion", 1));
		if (create(ks, RES_DEVICES, NULL, dev) < 0)
			return GWB_EINVAL;
	}
	devices_sync(ks);
	return 0;
}

/* A quantity string of map res, 0 when absent or malformed. */
static int64_t qty(const json_t *res, const char *name)
{
	const char *s = json_string_value(json_object_get(res, name));
	int64_t v;
	return s && quantity_parse(s, &v) == 0 ? v : 0;
}

/* The Node resources the GPUDeviceResource plugin derives from a Device: sums over healthy
 * `type: gpu` entries; nothing when there is none. */
static json_t *gpu_resources(const struct ks *ks, const json_t *dev)
{
	json_t *out = json_object();
	int64_t core = 0, mem = 0, ratio = 0;
	int healthy = 0;
	size_t i;
	json_t *d;
	json_array_foreach(obj_path(dev, "spec.devices"), i, d)
	{
		const char *type = obj_str(d, "type");
		if (!type || strcmp(type, "gpu") || !obj_true(d, "health"))
			continue;
		json_t *res = json_object_get(d, "resources");
		core += qty(res, RES_GPU_CORE);
		mem += qty(res, RES_GPU_MEM);
		ratio += qty(res, RES_GPU_RATIO);
		healthy++;
	}
	if (!healthy)
		return out;
	char buf[QUANTITY_BUF];
	json_object_set_new(out, RES_GPU_CORE, json_string(quantity_format_decimal(core, buf, sizeof buf)));
	json_object_set_new(out, RES_GPU_MEM, json_string(quantity_format_binary(mem, buf, sizeof buf)));
	json_object_set_new(out, RES_GPU_RATIO, json_string(quantity_format_decimal(ratio, buf, sizeof buf)));
	const char *vendor = obj_label(dev, device_labels[0]);
	if (!vendor || !vendor[0] || !strcmp(vendor, "nvidia"))
		json_object_set_new(out, RES_GPU, json_string(quantity_format_decimal(core, buf, sizeof buf)));
	if (ks->cfg.gpu_shared_sync)
		json_object_set_new(out, RES_GPU_SHARED,
				    json_string(quantity_format_decimal(100 * healthy, buf, sizeof buf)));
	return out;
}

void devices_sync(struct ks *ks)
{
	json_t **nodes = NULL;
	size_t n = store_list(ks->store, RES_NODES, NULL, &nodes);
	for (size_t k = 0; k < n; k++) {
		json_t *node = nodes[k];
		json_t *dev = store_get(ks->store, RES_DEVICES, NULL, obj_name(node));
		json_t *want = gpu_resources(ks, dev);
		json_t *nw = json_deep_copy(node);
		json_t *st = obj_child(nw, "status");
		const char *which[] = { "capacity", "allocatable" };
		for (int w = 0; w < 2; w++) {
			json_t *m = obj_child(st, which[w]);
			for (size_t i = 0; i < sizeof gpu_names / sizeof gpu_names[0]; i++)
				json_object_del(m, gpu_names[i]);
			json_object_update(m, want);
		}
		json_t *labels = obj_child(obj_child(nw, "metadata"), "labels");
		for (size_t i = 0; i < 3; i++) {
			const char *v = dev ? obj_label(dev, device_labels[i]) : NULL;
			if (v)
				json_object_set_new(labels, device_labels[i], json_string(v));
			else
				json_object_del(labels, device_labels[i]);
		}
		json_decref(want);
		if (json_equal(nw, node))
			json_decref(nw);
		else
			registry_commit(ks->registry, RES_NODES, nw);
	}
	gwb_free(nodes);
}

int devices_set_health(struct ks *ks, const char *node, int minor, int healthy, int xid)
{
	json_t *dev = store_get(ks->store, RES_DEVICES, NULL, node);
	if (!dev)
		return GWB_ENOTFOUND;
	json_t *nw = json_deep_copy(dev);
	int found = 0;
	size_t i;
	json_t *d;
	json_array_foreach(obj_path(nw, "spec.devices"), i, d)
	{
		if (obj_int(d, "minor", -1) != minor)
			continue;
		found = 1;
		json_object_set_new(d, "health", json_boolean(healthy));
		if (healthy) {
			json_object_del(d, "conditions");
		} else {
			char now[32], reason[32], msg[96];
			obj_now(now, sizeof now);
			snprintf(reason, sizeof reason, "Xid%d", xid);
			snprintf(msg, sizeof msg, "Xid error detected on device, error code: %d", xid);
			json_object_set_new(d, "conditions",
					    json_pack("[{s:s, s:s, s:s, s:s, s:s}]", "type", "Healthy",
						      "status", "False", "reason", reason, "message",
						      msg, "lastTransitionTime", now));
		}
	}
	if (!found) {
		json_decref(nw);
		return GWB_ENOTFOUND;
	}
	struct kerr e = { 0 };
	int rc = registry_update(ks->registry, res_get(RES_DEVICES), nw, 0, NULL, &e);
	kerr_clear(&e);
	return rc;
}
