/* The lab's reports in English and Chinese. The texts of each experiment (what it shows, the
 * guide's check question and its answer) follow docs/lab/lab-guide.{en,zh}.md; the rest is
 * generated from the records: prediction beside observation, the evidence file, the tasks with
 * their Jobs, Pods and releases, and for LS/BE the latency table. */
#include "tools/gwb-lab/report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"

struct text {
	const char *name;
	const char *title[2];
	const char *shows[2];
	const char *question[2]; /* NULL: the guide asks none for this step */
	const char *answer[2];
};

static const struct text texts[] = {
    {"idempotent-submission",
     {"Idempotent submission", "幂等提交"},
     {"The same key and parameters return the first task (200, `Idempotent-Replayed: true`); "
      "other parameters with that key get 409 `idempotency_key_reused`. A client whose answer "
      "was lost and who retries with a new key creates a second task and a second reservation.",
      "同一个键、同样的参数返回第一个任务（200，`Idempotent-Replayed: "
      "true`）；同一个键换了参数得到 "
      "409 `idempotency_key_reused`。响应丢失后换新键重试的客户端，会造成第二个任务和第二份预留。"},
     {"A client got a time-out. May it retry with a new idempotency key?",
      "客户端超时了，能否换一个新的幂等键直接重试？"},
     {"No. Request 1 (`key=a`) reached the server, which committed the task and reserved its "
      "quota, but the answer was lost. Request 2 with `key=b` is, for the server, a different "
      "submission: a second task and a second reservation. Retrying with `key=a` returns the "
      "first task (200), whatever happened to the first answer.",
      "不能。请求 1（`key=a`）其实已到达服务器，任务已提交、配额已预留，只是响应丢了。请求 2 用 "
      "`key=b`，对服务器而言是另一次提交：第二个任务、第二份预留。用 `key=a` 重试则无论第一次响应"
      "发生了什么，都会拿回第一个任务（200）。"}},
    {"same-card-sharing",
     {"Same-card sharing", "同卡共享"},
     {"Three 1024 MiB tasks on two cards: at least two share a card (`minor` in their "
      "allocation), and each Pod carries the annotation the task shows.",
      "三个 1024 MiB 的任务放在两张卡上：至少有两个共享同一张卡（看 allocation 里的 `minor`），"
      "每个 Pod 上的注解就是任务显示的那一份。"},
     {"Why is the Node's total remaining GPU not enough to look at? Which data tells which "
      "card was allocated?",
      "为什么只看 Node 上 GPU 的总剩余量不够？哪份数据说明分配了哪张卡？"},
     {"The Node's allocatable sums all cards; a Pod needs its share on one card (per-card "
      "request). Only the Pod's `scheduling.koordinator.sh/device-allocated` annotation says "
      "which card (`minor`, `id`) and how much of it.",
      "Node 的可分配量是所有卡的总和；而 Pod 需要在一张卡上拿到自己的份额（按卡计算的请求）。只有 "
      "Pod 的 `scheduling.koordinator.sh/device-allocated` 注解说明了是哪张卡（`minor`、`id`）"
      "以及分了多少。"}},
    {"over-limit",
     {"Over-limit failure", "显存超限"},
     {"The worker books budget + 128 MiB in its ledger and refuses the allocation that passes "
      "the budget (exit 42, `simulated_limit_rejected`); the Job fails at once and the "
      "reservation is released (`job_failed`). Its `isolation` event does not say `enforced`.",
      "worker 在账本里申请“预算 + 128 MiB”，拒绝越过预算的那次分配（退出码 42，"
      "`simulated_limit_rejected`）；Job 立即失败，配额释放（`job_failed`）。它的 `isolation` "
      "事件不会是 `enforced`。"},
     {"Why does the annotation, or even `LD_PRELOAD`, not prove real GPU isolation?",
      "为什么看到分配注解、甚至看到 `LD_PRELOAD`，都不能证明真实的 GPU 隔离生效？"},
     {"They say what was decided and what was asked to be loaded, not what runs. The worker's "
      "`isolation` event reports what it can observe: whether `libvgpu.so` is really mapped "
      "(`/proc/self/maps`), and, when a CUDA driver loads, whether an over-limit allocation is "
      "actually refused. Only a refused over-limit call with the library mapped gives "
      "`enforced`; here it says `not_enforced` or `unknown` with the reason.",
      "它们说明的是“决定了什么”和“要求加载什么”，不是“实际在运行什么”。worker 启动时的 "
      "`isolation` 事件报告它能观察到的事实：`libvgpu.so` 是否真的映射进了进程"
      "（`/proc/self/maps`），以及在能加载 CUDA 驱动时，一次超限分配是否真的被拒绝。只有库已映射"
      "且超限调用确实被拒绝，才判为 `enforced`；这里它会给出 `not_enforced` 或 `unknown` "
      "以及原因。"}},
    {"insufficient-capacity",
     {"Insufficient capacity", "容量不足"},
     {"A request above what the quota leaves is refused at the door (403 `quota_exceeded` with "
      "requested, reserved and quota). A request the quota holds but no card can hold is "
      "accepted and waits: `card_capacity`.",
      "超过配额余量的请求在入口就被拒绝（403 `quota_exceeded`，带 requested、reserved、quota）。"
      "配额装得下、但没有一张卡装得下的请求被接受后一直等待：`card_capacity`。"},
     {"The team still has 10 GiB of quota; why may a 9 GiB request still fail to run?",
      "团队还有 10 GiB 配额，为什么一个 9 GiB 的请求仍可能跑不起来？"},
     {"The team quota admitted it (201: the quota is a budget). No single card has 9216 MiB "
      "(the largest has 8192), so it can never be placed: `card_capacity`. With smaller "
      "requests, free memory split across cards gives `fragmentation`. More quota would not "
      "help in either case.",
      "团队配额放行了它（返回 201：配额只是预算）。但没有任何一张卡有 9216 MiB（最大的卡只有 "
      "8192），所以它永远放不下：`card_capacity`（单卡容量）。请求更小时，空闲显存分散在几张卡上，"
      "就是 `fragmentation`（碎片）。两种情况下加配额都没用。"}},
    {"cancel-and-reclaim",
     {"Cancel and reclaim", "取消与回收"},
     {"Cancel writes the intent in SQLite (202, `cancelling`), then suspends the Job; the quota "
      "comes back only when the Job's `Suspended` condition is set and no Pod of the task "
      "runs. Cancelled before its Job exists, the task leaves a suspended Job (the cancel "
      "marker) and no Pod ever runs.",
      "取消先把意图写进 SQLite（202，`cancelling`），再挂起 Job；只有当 Job 的 `Suspended` "
      "条件成立、且该任务没有 Pod 在运行时配额才归还。在 Job 还不存在时取消，会留下一个挂起的 "
      "Job（取消标记），从未有 Pod 运行。"},
     {NULL, NULL},
     {"The guide's question for this step (may the quota be released while a Pod is "
      "Terminating, the API is unreachable, or a Pod runs without its Job?) is answered by "
      "no-release-cases.",
      "本节的思考题（Pod Terminating、API 不可达、Job 没了但 Pod 还在跑时能否释放配额）由 "
      "no-release-cases 回答。"}},
    {"restart-recovery",
     {"Restart recovery", "重启恢复"},
     {"gwb-server killed with `kill -9` and started again: the running task keeps the same Job "
      "UID, a task submitted just before the kill gets exactly one Job, nothing is released.",
      "用 `kill -9` 杀掉 gwb-server 再启动：运行中的任务 Job UID 不变，杀掉前刚提交的任务恰好只有"
      "一个 Job，没有任何释放。"},
     {NULL, NULL},
     {"Job names are a function of the task (`gwb-<task id>`), the reconciler observes before "
      "it creates, intents not yet acknowledged are delivered again, and every active task is "
      "reconciled after the restart.",
      "Job 名是任务的函数（`gwb-<任务 ID>`），控制器先观察再创建，尚未确认（ACK）的意图会被重新"
      "投递，重启后每个活动任务都会被重新调和。"}},
    {"fragmentation-resolved",
     {"Fragmentation resolved", "碎片与化解"},
     {"Two 5120 MiB tasks on two cards leave 3072 MiB on each: a 4096 MiB task waits with "
      "`fragmentation` (6144 MiB free in total), the scheduler's `0/1 nodes are available` and "
      "the tasks whose end would unblock it; cancelling A lets it run on A's card.",
      "两个 5120 MiB 的任务各占一张卡，每张只剩 3072 MiB：4096 MiB 的任务以 `fragmentation` "
      "等待（总共空闲 6144 MiB），带有调度器的 `0/1 nodes are available` 以及哪些任务结束就能解除"
      "阻塞；取消 A 后它就在 A 的卡上运行。"},
     {"Would more team quota solve this? Would a multi-card request change how the "
      "application parallelises?",
      "加团队配额能解决吗？多卡请求会如何改变应用的并行方式？"},
     {"No: the quota already admitted C; the cards are fragmented. A request with `--count 2` "
      "asks for its share on each of two cards; the application must split its work and "
      "memory across two devices, which single-card code does not do.",
      "不能：配额早已放行了 C，问题在于卡上的碎片。`--count 2` 的请求要求在两张卡上各拿一份；"
      "应用必须把计算和显存拆到两块设备上，单卡代码做不到。"}},
    {"device-health-change",
     {"Device health change", "设备健康变化"},
     {"Card 1 reported unhealthy (Xid 79): it gets nothing, a task that only card 1 could "
      "hold waits with `device_unhealthy`, and runs on card 1 once it is healthy again.",
      "卡 1 报告不健康（Xid 79）：它不再分到任何任务，只有卡 1 放得下的任务以 "
      "`device_unhealthy` 等待，卡 1 恢复健康后就在卡 1 上运行。"},
     {NULL, NULL},
     {"The scheduler follows the Device's health; the diagnosis names the card and says the "
      "task runs once that card is healthy again.",
      "调度器跟随 Device 的健康状态；诊断会指出是哪张卡，并说明该卡恢复健康后任务才会运行。"}},
    {"ls-be",
     {"LS and BE", "LS 与 BE"},
     {"BE tasks become Koordinator batch pods (`koord-batch`, `kubernetes.io/batch-cpu`); LS "
      "pods keep plain cpu and memory. An LS probe's latency was measured at a fixed rate "
      "alone and with BE neighbours on the same node; the raw samples are in the record.",
      "BE 任务变成 Koordinator 的 batch Pod（`koord-batch`、`kubernetes.io/batch-cpu`）；LS 的 "
      "Pod 保留普通的 cpu 和 memory。LS 探针的延迟以固定速率分别在单独运行、以及同节点有 BE 邻居时"
      "测量；原始样本在记录里。"},
     {"Why can an LS label on a Pod not guarantee P99 latency on a shared GPU card?",
      "为什么给 Pod 打上 LS 标签也无法保证共享 GPU 卡上的 P99 延迟？"},
     {"LS/BE govern the host's CPU and memory. The GPU share is a scheduling budget: nothing "
      "here isolates the card's compute or memory bandwidth between Pods on the same card, and "
      "a latency claim needs a fixed load, raw samples and a side-by-side comparison. The "
      "simulated core share is a CPU duty cycle only.",
      "LS/BE 管的是宿主机的 CPU 和内存。GPU 份额只是调度预算：这里没有任何机制在同一张卡上的 Pod "
      "之间隔离算力或显存带宽；要下延迟结论，需要固定负载、原始样本和并排对比。模拟的算力份额只是 "
      "CPU 占空比演示。"}},
    {"no-release-cases",
     {"The no-release cases", "不能释放的三种情况"},
     {"A Pod stuck Terminating, an API that refuses, a Job deleted with its Pod still running: "
      "in each the reservation was held while the fault lasted and released only afterwards, "
      "with the reason that proved the stop.",
      "Pod 卡在 Terminating、API 拒绝连接、Job 被删而 Pod 仍在运行：每种情况下故障期间预留都被"
      "保留，故障过后才释放，并记录证明停止的原因。"},
     {"A Pod shows Terminating; the cluster API is unreachable; the Job is gone but its Pod "
      "still runs. May the quota be released?",
      "Pod 显示 Terminating；集群 API 不可达；Job 没了但 Pod 还在跑。这三种情况下能否释放配额？"},
     {"No, in all three cases. A Terminating Pod may still run; an unreachable API proves "
      "nothing; a Pod without its Job still runs. The quota is released only on proof that "
      "every Pod of the task stopped.",
      "都不能。Terminating 的 Pod 可能仍在运行；API 不可达什么也证明不了；Job 没了的 Pod 仍在运行。"
      "只有证明该任务的每一个 Pod 都已停止，配额才会释放。"}},
    {"timeout-after-create",
     {"Time-out after create", "创建后超时"},
     {"kubesim stored the Job but never answered the create: the task went `unknown` with its "
      "quota kept, and exactly one Job exists afterwards, the one the task records.",
      "kubesim 保存了 Job 却从不回应创建请求：任务进入 `unknown`，配额保留；事后恰好只有一个 Job，"
      "就是任务记录的那个。"},
     {NULL, NULL},
     {"The create's answer is lost: the task is `unknown`, its quota kept, and the next "
      "attempt observes before it creates, so exactly one Job exists afterwards.",
      "创建请求的响应丢失：任务处于 `unknown`，配额保留；下一次尝试先观察再创建，所以事后恰好只有"
      "一个 Job。"}},
};

static const struct text *text_of(const char *name)
{
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
		if (strcmp(texts[i].name, name) == 0)
			return &texts[i];
	return NULL;
}

static void dumpv(FILE *f, json_t *v)
{
	char *d = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	fprintf(f, "`%s`", d ? d : "—");
	gwb_free(d);
}

static void latency_table(FILE *f, json_t *rec, int zh)
{
	json_t *lat = json_object_get(json_object_get(rec, "measurements"), "latency");
	if (!lat)
		return;
	json_t *a = json_object_get(lat, "alone"), *b = json_object_get(lat, "with_be");
	fprintf(f, "\n| %s | %s | %s |\n|---|---|---|\n", zh ? "LS 探针延迟" : "LS probe latency",
	        zh ? "单独" : "alone", zh ? "有 BE 邻居" : "with BE neighbours");
	const char *keys[] = {"samples", "p50_us", "p99_us"};
	const char *en[] = {"samples", "P50 (µs)", "P99 (µs)"};
	const char *cn[] = {"样本数", "P50（微秒）", "P99（微秒）"};
	for (int i = 0; i < 3; i++)
		fprintf(f, "| %s | %lld | %lld |\n", zh ? cn[i] : en[i],
		        (long long)json_integer_value(json_object_get(a, keys[i])),
		        (long long)json_integer_value(json_object_get(b, keys[i])));
	fprintf(
	    f, "\n%s\n",
	    zh ? "探针是在节点宿主机上（与 Pod 同机）以固定速率执行的一段固定 CPU 计算；这里的 GPU "
	         "份额"
	         "只是 CPU 占空比，没有任何机制隔离一张卡，所以这组数字只反映宿主机 CPU "
	         "的争用。一次在"
	         "共享机器上的运行不能证明任何延迟结论；原始样本见 "
	         "`measurements.latency.raw_samples_us`，"
	         "LS worker 自己每秒的 CPU 份额见 `ls_worker_cpu_share_percent`。"
	       : "The probe is a fixed piece of CPU work at a fixed rate on the node's host, "
	         "beside "
	         "the Pods; the GPU share here is a CPU duty cycle and nothing isolates a card, so "
	         "these figures show host CPU contention only. One run on a shared machine proves "
	         "no latency claim; the raw samples are in `measurements.latency.raw_samples_us`, "
	         "the LS worker's own per-second CPU share in `ls_worker_cpu_share_percent`.");
}

static void section(FILE *f, json_t *rec, json_t *entry, int zh)
{
	const char *name = json_string_value(json_object_get(rec, "name"));
	const struct text *t = text_of(name);
	json_t *passed = json_object_get(rec, "passed");
	fprintf(f, "\n## %02lld %s — %s\n\n",
	        (long long)json_integer_value(json_object_get(rec, "order")), name,
	        t ? t->title[zh] : name);
	const char *verdict = json_is_true(passed)    ? (zh ? "通过" : "passed")
	                      : json_is_false(passed) ? (zh ? "失败" : "FAILED")
	                                              : (zh ? "跳过" : "skipped");
	fprintf(f, "%s: **%s**", zh ? "结果" : "Result", verdict);
	if (json_object_get(rec, "skipped"))
		fprintf(f, " (%s)", json_string_value(json_object_get(rec, "skipped")));
	if (json_object_get(rec, "failure"))
		fprintf(f, " — %s", json_string_value(json_object_get(rec, "failure")));
	fprintf(f, "  \n%s: `%s`\n\n", zh ? "证据" : "Evidence",
	        json_string_value(json_object_get(entry, "file")));
	if (t)
		fprintf(f, "%s\n\n", t->shows[zh]);
	json_t *pred = json_object_get(rec, "prediction"), *obs = json_object_get(rec, "observed");
	if (json_object_size(obs) || json_object_size(pred)) {
		fprintf(f, "| %s | %s | %s | %s |\n|---|---|---|---|\n", zh ? "字段" : "field",
		        zh ? "预测（行动前）" : "predicted (before acting)",
		        zh ? "观察" : "observed", zh ? "一致" : "agree");
		const char *k;
		json_t *v;
		json_object_foreach (obs, k, v) {
			fprintf(f, "| `%s` | ", k);
			dumpv(f, json_object_get(pred, k));
			fprintf(f, " | ");
			dumpv(f, v);
			json_t *ag = json_object_get(json_object_get(rec, "agreement"), k);
			fprintf(f, " | %s |\n",
			        !ag ? (zh ? "未检查（无预测）" : "not checked (no prediction)")
			        : json_is_true(ag) ? (zh ? "是" : "yes")
			                           : (zh ? "**否**" : "**no**"));
		}
	}
	size_t i;
	json_t *task;
	json_t *tasks = json_object_get(rec, "tasks");
	if (json_array_size(tasks)) {
		fprintf(f, "\n%s\n\n", zh ? "任务（`tasks`）：" : "Tasks (`tasks`):");
		json_array_foreach (tasks, i, task) {
			json_t *job = json_object_get(task, "job"),
			       *pod = json_object_get(task, "pod");
			json_t *res = json_object_get(task, "reservation");
			fprintf(f, "- `%s`: %s ", json_string_value(json_object_get(task, "id")),
			        zh ? "最终状态" : "final state");
			dumpv(f, json_object_get(task, "final_state"));
			fprintf(f, ", Job ");
			dumpv(f, json_object_get(job, "uid"));
			fprintf(f, ", Pod ");
			dumpv(f, json_object_get(pod, "name"));
			fprintf(f, " (uid ");
			dumpv(f, json_object_get(pod, "uid"));
			fprintf(f, "), %s ", zh ? "释放原因" : "release reason");
			dumpv(f, json_object_get(res, "release_reason"));
			json_t *result = json_object_get(task, "result");
			fprintf(f, ", %s ", zh ? "结果" : "result");
			dumpv(f, json_is_object(result) ? json_object_get(result, "exit_reason")
			                                : result);
			fprintf(f, ", %s ", zh ? "隔离判断" : "isolation verdict");
			dumpv(f, json_object_get(json_object_get(task, "isolation"), "verdict"));
			fprintf(f, "\n");
		}
	}
	latency_table(f, rec, zh);
	if (t && t->question[zh])
		fprintf(f, "\n**%s%s**\n\n%s\n", zh ? "思考：" : "Check: ", t->question[zh],
		        t->answer[zh]);
	else if (t)
		fprintf(f, "\n%s%s\n",
		        zh ? "（本节没有思考题。）" : "(The guide asks no check question here.) ",
		        t->answer[zh]);
}

static int write_one(const char *dir, json_t *index, json_t *records, int zh)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", dir, zh ? "report.zh.md" : "report.md");
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "gwb-lab: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	json_t *run = json_object_get(index, "run");
	fprintf(f, "# %s\n\n",
	        zh ? "GPU 工作台实验报告（`make lab`）" : "GPU workbench lab report (`make lab`)");
	fprintf(f, "%s `%s` → `%s`, %s `%s`, %s `%s`, %s `%s`, %s: %s.\n\n", zh ? "运行" : "Run",
	        json_string_value(json_object_get(run, "started_at")),
	        json_string_value(json_object_get(run, "finished_at")), zh ? "模式" : "mode",
	        json_string_value(json_object_get(run, "mode")), zh ? "版本" : "version",
	        json_string_value(json_object_get(run, "version")), zh ? "栈" : "stack",
	        json_string_value(json_object_get(run, "stack")), zh ? "dry run" : "dry run",
	        json_string_value(json_object_get(run, "dry_run")));
	fprintf(
	    f, "%s\n",
	    zh ? "每个实验先写下预测（来自 dry run 和规则，在行动之前），再行动、观察，并比较两者。"
	         "证据记录在本目录的 `NN-名字.json` 中（字段见 docs/API.md “Evidence”），索引在 "
	         "`index.json`。"
	       : "Each experiment writes its prediction (from the dry run and the rules, before "
	         "acting), acts, observes, and compares the two. The evidence records are the "
	         "`NN-name.json` files of this folder (fields as docs/API.md \"Evidence\" lists them); "
	         "the index is `index.json`.");
	size_t i;
	json_t *rec;
	json_array_foreach (records, i, rec)
		section(f, rec, json_array_get(json_object_get(index, "experiments"), i), zh);
	if (fclose(f) != 0) {
		fprintf(stderr, "gwb-lab: cannot write %s\n", path);
		return -1;
	}
	return 0;
}

int report_write(const char *dir, json_t *index, json_t *records)
{
	int a = write_one(dir, index, records, 0);
	int b = write_one(dir, index, records, 1);
	return a || b ? -1 : 0;
}
