// The workbench page: talks to this server's HTTP API with the token kept in the browser's
// storage, and follows GET /v1/stream (Server-Sent Events read with fetch, so the token goes in
// the Authorization header, resumed with Last-Event-ID). Plain JavaScript, no library.
"use strict";

(function () {
  // ---- words, in English and Chinese ----
  const WORDS = {
    en: {
      "skip": "Skip to the submit form",
      "title": "GPU workbench",
      "lang.other": "中文",
      "token.title": "Token", "token.label": "Bearer token", "token.save": "Save",
      "token.clear": "Forget",
      "token.none": "Enter the token your administrator gave you (a team token, or the admin token).",
      "token.bad": "The server refused this token (401). Check it and save it again.",
      "token.admin": "Signed in as the administrator: every team.",
      "token.team": "Signed in as team {team}.",
      "token.saved": "Token saved in this browser.", "token.cleared": "Token removed from this browser.",
      "token.remember": "Remember in this browser",
      "token.saved.session": "Token kept in this tab until it is closed.",
      "down": "The server does not answer ({why}). The page keeps what it showed and tries again in {s} s.",
      "down.retrying": "The server does not answer ({why}). Trying again…",
      "conn.live": "live", "conn.connecting": "connecting…", "conn.idle": "", "conn.down": "offline",
      "conn.held": "stream paused",
      "team.title": "Team quota", "team.memory": "GPU memory", "team.core": "GPU core",
      "team.line": "{reserved} reserved of {quota} ({avail} available)",
      "team.active": "{n} active task(s)",
      "team.waiting": "{n} waiting for quota",
      "queue.entry": "#{pos} {id} {name} · {mem} MiB · admitted ~{at}",
      "queue.never": "never (asks more than the quota)",
      "submit.title": "Submit a task", "submit.key": "Idempotency-Key of this form:",
      "submit.newkey": "New key", "submit.send": "Send",
      "submit.resend": "Send again with the same key", "submit.predict": "Predict",
      "f.team": "Team", "f.name": "Name", "f.mem": "GPU memory per card (MiB)",
      "f.core": "GPU core per card (%)", "f.count": "Cards", "f.duration": "Duration (s)",
      "f.qos": "QoS", "f.experiment": "Experiment", "f.memtotal": "GPU memory (MiB)",
      "f.coretotal": "GPU core (%)",
      "exp.normal": "normal", "exp.overlimit": "overlimit (tries 128 MiB over its budget)",
      "res.created": "Accepted: a new task, its quota reserved.",
      "res.replayed": "Replayed: the same key and parameters give the first task back, unchanged.",
      "res.conflict": "This key was already used with other parameters: nothing was submitted.",
      "res.error": "Refused.", "res.sentkey": "Sent with Idempotency-Key {key}.",
      "res.open": "Open task {id}", "res.body": "Answer body",
      "predict.title": "Prediction (dry run, nothing is written)",
      "predict.bind": "It would run now on {node}, card(s) {cards}.",
      "predict.pending": "It would wait: {kind}.",
      "predict.quota": "The team quota would refuse it ({code}).",
      "predict.unsupported": "This server does not predict yet: it took the request as a real submission (status {status}, task {id}). The page cancelled that task at once.",
      "predict.error": "The server could not predict:",
      "tasks.title": "Tasks", "tasks.filter": "State", "tasks.all": "all", "tasks.id": "Task",
      "tasks.state": "State", "tasks.team": "Team", "tasks.size": "Size", "tasks.age": "Age",
      "tasks.empty": "No tasks yet.", "tasks.open": "Open task {id}",
      "detail.title": "Task", "detail.cancel": "Cancel task", "detail.close": "Close",
      "detail.pending": "Why it waits", "detail.allocation": "Allocation (the scheduler's annotation)",
      "detail.usage": "Usage", "detail.timeline": "Timeline",
      "detail.log": "Log (its last lines)", "detail.logrefresh": "Refresh the log",
      "log.empty": "(the log is empty)", "log.read": "The last {n} lines, read {at}; refreshed every few seconds while it runs.",
      "detail.noalloc": "(no allocation yet: the scheduler has not placed the Pod)",
      "detail.nopending": "It is not waiting.",
      "detail.cancelled": "Cancel requested ({status}: {what}).",
      "usage.unknown": "unknown",
      "usage.measured": "measured", "usage.simulated": "simulated (not a measurement)", "usage.stale": "stale",
      "usage.figures": "{mem} MiB, SM {sm}% at {at} ({source})",
      "usage.why": "Nothing measures what the process really uses on the GPU here: the quota and the allocation are budgets (what it may use), not measurements.",
      "k.runs": "Runs", "k.worker": "the simulated worker (gwb-worker)", "k.entrypoint": "(the image's entrypoint)",
      "k.waiting": "Container waiting",
      "k.team": "Team", "k.name": "Name", "k.request": "Request", "k.reservation": "Reservation",
      "k.released": "released {at} ({reason})", "k.held": "held",
      "k.job": "Job", "k.pod": "Pod", "k.exit": "Exit", "k.key": "Idempotency-Key",
      "k.created": "Created", "k.updated": "Updated", "k.isolation": "Isolation",
      "k.cancel": "Cancel requested", "k.reason": "Reason",
      "k.noisolation": "not known yet: the worker gives its verdict in its termination message when its container ends",
      "k.noisolation.workload": "not known: a team's own container gives no isolation verdict",
      "k.isoline": "{verdict} — {reason} (the worker's verdict, from its termination message)",
      "k.result": "Result", "k.resultline": "{reason}, exit {code}",
      "k.resultledger": "simulated ledger peak {peak} of {budget} MiB (bookkeeping, not a GPU measurement)",
      "k.resultwork": "duty {got}% of {want}%",
      "req.line": "{mem} MiB and {core}% on each of {count} card(s), {dur} s, {qos}, {exp}",
      "pend.message": "Scheduler:", "pend.kind": "Diagnosis:", "pend.unblock": "Would unblock it:",
      "pend.unblockline": "{node} card {minor}: when {tasks} end(s), {free} MiB are free there",
      "pend.quota": "Team quota:", "pend.numbers": "Cards: {fit} fit now, {large} large enough, largest {largest} MiB, {free} MiB free in total",
      "devices.title": "Devices", "devices.memory": "memory", "devices.core": "core",
      "devices.free": "free", "devices.others": "other teams", "devices.healthy": "healthy", "devices.unhealthy": "unhealthy",
      "devices.card": "{node} · GPU {minor}",
      "devices.line": "{used} of {total} {unit} allocated, {free} free",
      "devices.stale": "The cluster picture is stale: these numbers may be old.",
      "devices.none": "No Kubernetes API is configured: there are no cards to show.",
      "devices.waiting": "Waiting for a card",
      "devices.note": "Allocated is what the scheduler gave each task (a budget), not what it uses.",
      "admin.title": "Administration", "admin.team": "Team", "admin.quota": "Quota",
      "admin.reserved": "Reserved", "admin.active": "Active", "admin.token": "Token",
      "admin.set": "Set a team's quota and token", "admin.newtoken": "New token (optional)",
      "admin.save": "Save team", "admin.has": "set", "admin.hasnot": "none",
      "admin.created": "Team created.", "admin.changed": "Team changed.",
      "ev.submitted": "submitted", "ev.state": "state", "ev.released": "released",
      "ev.scheduler_event": "scheduler", "ev.intent_received": "intent received",
      "ev.cancel_requested": "cancel requested",
      "stream.events": "{n} live event(s)",
    },
    "zh-CN": {
      "skip": "跳到提交表单",
      "title": "GPU 工作台",
      "lang.other": "English",
      "token.title": "令牌", "token.label": "Bearer 令牌", "token.save": "保存",
      "token.clear": "清除",
      "token.none": "请输入管理员发给你的令牌（团队令牌或管理员令牌）。",
      "token.bad": "服务器拒绝了这个令牌（401）。请检查后重新保存。",
      "token.admin": "以管理员身份登录：可见所有团队。",
      "token.team": "以团队 {team} 的身份登录。",
      "token.saved": "令牌已保存在此浏览器中。", "token.cleared": "已从此浏览器中删除令牌。",
      "token.remember": "在此浏览器中记住",
      "token.saved.session": "令牌仅保存在此标签页中，关闭后即删除。",
      "down": "服务器没有响应（{why}）。页面保留已显示的内容，{s} 秒后重试。",
      "down.retrying": "服务器没有响应（{why}）。正在重试……",
      "conn.live": "实时", "conn.connecting": "连接中……", "conn.idle": "", "conn.down": "离线",
      "conn.held": "事件流已暂停",
      "team.title": "团队配额", "team.memory": "GPU 显存", "team.core": "GPU 算力",
      "team.line": "已预留 {reserved} / 配额 {quota}（可用 {avail}）",
      "team.active": "{n} 个活动任务",
      "team.waiting": "{n} 个任务等待配额",
      "queue.entry": "#{pos} {id} {name} · {mem} MiB · 预计 {at} 准入",
      "queue.never": "永不（超出配额）",
      "submit.title": "提交任务", "submit.key": "本表单的 Idempotency-Key：",
      "submit.newkey": "新的键", "submit.send": "提交",
      "submit.resend": "用同一个键再次提交", "submit.predict": "预测",
      "f.team": "团队", "f.name": "名称", "f.mem": "每卡显存（MiB）",
      "f.core": "每卡算力（%）", "f.count": "卡数", "f.duration": "时长（秒）",
      "f.qos": "QoS", "f.experiment": "实验", "f.memtotal": "GPU 显存（MiB）",
      "f.coretotal": "GPU 算力（%）",
      "exp.normal": "normal（正常）", "exp.overlimit": "overlimit（超出预算 128 MiB）",
      "res.created": "已接受：新任务，配额已预留。",
      "res.replayed": "重放：相同的键和参数返回第一次的任务，未作改动。",
      "res.conflict": "这个键已用于参数不同的提交：没有提交任何内容。",
      "res.error": "被拒绝。", "res.sentkey": "使用 Idempotency-Key {key} 发送。",
      "res.open": "打开任务 {id}", "res.body": "响应内容",
      "predict.title": "预测（dry run，不写入任何内容）",
      "predict.bind": "现在即可在 {node} 的卡 {cards} 上运行。",
      "predict.pending": "将会等待：{kind}。",
      "predict.quota": "团队配额会拒绝它（{code}）。",
      "predict.unsupported": "此服务器尚不支持预测：它把请求当作真实提交（状态 {status}，任务 {id}）。页面已立即取消该任务。",
      "predict.error": "服务器无法预测：",
      "tasks.title": "任务", "tasks.filter": "状态", "tasks.all": "全部", "tasks.id": "任务",
      "tasks.state": "状态", "tasks.team": "团队", "tasks.size": "规格", "tasks.age": "时长",
      "tasks.empty": "还没有任务。", "tasks.open": "打开任务 {id}",
      "detail.title": "任务", "detail.cancel": "取消任务", "detail.close": "关闭",
      "detail.pending": "为什么在等待", "detail.allocation": "分配（调度器的注解）",
      "detail.usage": "使用量", "detail.timeline": "时间线",
      "detail.log": "日志（最后几行）", "detail.logrefresh": "刷新日志",
      "log.empty": "（日志为空）", "log.read": "最后 {n} 行，读取于 {at}；运行期间每隔几秒刷新。",
      "detail.noalloc": "（尚无分配：调度器还没有放置 Pod）",
      "detail.nopending": "没有在等待。",
      "detail.cancelled": "已请求取消（{status}：{what}）。",
      "usage.unknown": "未知",
      "usage.measured": "已测量", "usage.simulated": "模拟（不是测量值）", "usage.stale": "已过时",
      "usage.figures": "{mem} MiB，SM {sm}%，于 {at}（{source}）",
      "usage.why": "这里没有任何东西测量进程在 GPU 上的真实使用量：配额和分配都是预算（允许使用多少），不是测量值。",
      "k.runs": "运行", "k.worker": "模拟 worker（gwb-worker）", "k.entrypoint": "（镜像的入口）",
      "k.waiting": "容器等待中",
      "k.team": "团队", "k.name": "名称", "k.request": "请求", "k.reservation": "预留",
      "k.released": "已于 {at} 释放（{reason}）", "k.held": "持有中",
      "k.job": "Job", "k.pod": "Pod", "k.exit": "退出", "k.key": "Idempotency-Key",
      "k.created": "创建", "k.updated": "更新", "k.isolation": "隔离",
      "k.cancel": "已请求取消", "k.reason": "原因",
      "k.noisolation": "尚未知道：worker 在容器结束时把判断写进终止消息",
      "k.noisolation.workload": "未知：团队自己的容器不给出隔离判断",
      "k.isoline": "{verdict} — {reason}（worker 的判断，来自其终止消息）",
      "k.result": "结果", "k.resultline": "{reason}，退出码 {code}",
      "k.resultledger": "模拟账本峰值 {peak} / {budget} MiB（记账，不是 GPU 测量）",
      "k.resultwork": "占空比 {got}% / {want}%",
      "req.line": "每卡 {mem} MiB、{core}%，共 {count} 张卡，{dur} 秒，{qos}，{exp}",
      "pend.message": "调度器：", "pend.kind": "诊断：", "pend.unblock": "可解除阻塞：",
      "pend.unblockline": "{node} 的卡 {minor}：{tasks} 结束后，该卡空出 {free} MiB",
      "pend.quota": "团队配额：", "pend.numbers": "卡：现在能放下 {fit} 张，足够大的 {large} 张，最大 {largest} MiB，总空闲 {free} MiB",
      "devices.title": "设备", "devices.memory": "显存", "devices.core": "算力",
      "devices.free": "空闲", "devices.others": "其他团队", "devices.healthy": "健康", "devices.unhealthy": "不健康",
      "devices.card": "{node} · GPU {minor}",
      "devices.line": "已分配 {used} / {total} {unit}，空闲 {free}",
      "devices.stale": "集群视图已过期：这些数字可能是旧的。",
      "devices.none": "未配置 Kubernetes API：没有可显示的卡。",
      "devices.waiting": "正在等待卡",
      "devices.note": "“已分配”是调度器给每个任务的预算，不是实际使用量。",
      "admin.title": "管理", "admin.team": "团队", "admin.quota": "配额",
      "admin.reserved": "已预留", "admin.active": "活动", "admin.token": "令牌",
      "admin.set": "设置团队的配额和令牌", "admin.newtoken": "新令牌（可选）",
      "admin.save": "保存团队", "admin.has": "已设置", "admin.hasnot": "无",
      "admin.created": "团队已创建。", "admin.changed": "团队已修改。",
      "ev.submitted": "已提交", "ev.state": "状态", "ev.released": "已释放",
      "ev.scheduler_event": "调度器", "ev.intent_received": "收到意图",
      "ev.cancel_requested": "请求取消",
      "stream.events": "{n} 个实时事件",
    },
  };
  const STATES = ["waiting", "queued", "creating", "pending", "running", "succeeded", "failed",
    "cancelling", "cancelled", "unknown"];
  const STATE_ZH = { waiting: "等待配额", queued: "排队", creating: "创建中", pending: "等待调度", running: "运行中",
    succeeded: "成功", failed: "失败", cancelling: "取消中", cancelled: "已取消", unknown: "未知" };
  const FINAL = new Set(["succeeded", "failed", "cancelled"]);
  const FIELDS = ["team", "name", "gpu_memory_mib", "gpu_core_percent", "gpu_count",
    "duration_seconds", "qos", "experiment"];
  const NUMERIC = new Set(["gpu_memory_mib", "gpu_core_percent", "gpu_count", "duration_seconds"]);
  const RETRY_S = 3;

  // ---- state ----
  const S = {
    lang: "en",
    token: "",
    me: null,             // {admin, team} from /v1/info
    info: null,
    tasks: new Map(),     // id -> {id, team, name, state, mem, core, count, created_at, states[]}
    teams: new Map(),     // name -> team JSON
    devices: null,        // /v1/devices answer
    pendingWhy: new Map(), // task id -> pending JSON
    queues: new Map(),    // team -> the first of its line (GET /v1/teams/T/queue)
    selected: null,
    selectedTask: null,
    lastEventId: null,
    stream: null,         // {ctl: AbortController}
    streamHeld: false,
    streamEvents: 0,
    down: false,
    formKey: "",
    lastKey: "",
    lastAnswer: null,
  };

  const $ = (id) => document.getElementById(id);
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") e.textContent = v;
      else if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  function t(key, vars) {
    const d = WORDS[S.lang] || WORDS.en;
    let s = key in d ? d[key] : key in WORDS.en ? WORDS.en[key] : key;
    for (const [k, v] of Object.entries(vars || {})) s = s.split("{" + k + "}").join(String(v));
    return s;
  }
  const stateName = (s) => (S.lang === "zh-CN" && STATE_ZH[s] ? STATE_ZH[s] + " " + s : s || "?");
  function fmtTime(iso) {
    if (!iso) return "—";
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString(S.lang === "zh-CN" ? "zh-CN" : "en-GB");
  }
  function age(iso) {
    const ms = Date.now() - new Date(iso).getTime();
    if (!(ms >= 0)) return "—";
    const s = Math.floor(ms / 1000);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 86400) return Math.floor(s / 3600) + "h";
    return Math.floor(s / 86400) + "d";
  }
  function newKey() {
    const b = new Uint8Array(9);
    crypto.getRandomValues(b);
    return "page-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  // ---- the API ----
  class Down extends Error {}
  async function api(method, path, body, headers) {
    const h = Object.assign({}, headers || {});
    if (S.token) h["Authorization"] = "Bearer " + S.token;
    if (body !== undefined) h["Content-Type"] = "application/json";
    let resp;
    try {
      resp = await fetch(path, { method, headers: h, cache: "no-store",
        body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      setDown(true, e && e.message ? e.message : "network error");
      throw new Down("down");
    }
    const text = await resp.text().catch(() => "");
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
    if (resp.status >= 500 && resp.status !== 503 && !json) {
      setDown(true, "HTTP " + resp.status);
      throw new Down("down");
    }
    if (S.down) setDown(false);
    if (resp.status === 401 && S.token) showWho("bad");
    return { status: resp.status, headers: resp.headers, json, text };
  }

  // ---- server down: say so, keep what was shown, retry ----
  let downTimer = null;
  function setDown(down, why) {
    if (down) {
      S.down = true;
      const b = $("banner");
      b.hidden = false;
      b.dataset.why = why || "";
      b.textContent = t("down", { why: why || "?", s: RETRY_S });
      setConn("down");
      if (!downTimer) downTimer = setTimeout(probe, RETRY_S * 1000);
    } else if (S.down) {
      S.down = false;
      $("banner").hidden = true;
      if (downTimer) { clearTimeout(downTimer); downTimer = null; }
      // Back: load everything again; the stream resumes by itself.
      if (S.token) connect();
    }
  }
  async function probe() {
    downTimer = null;
    $("banner").textContent = t("down.retrying", { why: $("banner").dataset.why || "?" });
    try {
      const r = await fetch("/healthz", { cache: "no-store" });
      if (r.ok) { setDown(false); return; }
    } catch (e) { /* still down */ }
    setDown(true, $("banner").dataset.why);
  }
  function setConn(what) {
    const c = $("conn");
    c.dataset.state = what;
    c.textContent = t("conn." + what);
  }

  // ---- language ----
  function applyLang() {
    document.documentElement.lang = S.lang;
    document.title = t("title");
    for (const e of document.querySelectorAll("[data-i18n]")) e.textContent = t(e.dataset.i18n);
    $("lang-toggle").textContent = t("lang.other");
    const f = $("state-filter");
    for (const o of f.options) if (o.value) o.textContent = stateName(o.value);
    if (S.me) showWho(); else showWho("none");
    setConn($("conn").dataset.state || "idle");
    if (S.down) $("banner").textContent = t("down", { why: $("banner").dataset.why || "?", s: RETRY_S });
    renderAll();
  }

  // ---- token ----
  function showWho(what) {
    const w = $("whoami");
    w.dataset.state = what || (S.me ? (S.me.admin ? "admin" : "team") : "none");
    if (what === "bad") w.textContent = t("token.bad");
    else if (what === "none" || !S.me) w.textContent = t("token.none");
    else w.textContent = S.me.admin ? t("token.admin") : t("token.team", { team: S.me.team });
  }

  async function connect() {
    stopStream();
    let r;
    try { r = await api("GET", "/v1/info"); } catch (e) { return; }
    if (r.status !== 200) {
      S.me = null;
      for (const id of ["team-section", "submit-section", "tasks-section", "devices-section",
        "admin-section", "detail-section"]) $(id).hidden = true;
      showWho(r.status === 401 ? "bad" : "none");
      return;
    }
    S.info = r.json;
    S.me = { admin: !!r.json.admin, team: r.json.team || "" };
    $("mode").textContent = (r.json.mode || "") + " · " + (r.json.version || "");
    showWho();
    $("team-section").hidden = false;
    $("submit-section").hidden = false;
    $("tasks-section").hidden = false;
    $("devices-section").hidden = false;
    $("admin-section").hidden = !S.me.admin;
    if (!S.me.admin && !$("f-team").value) $("f-team").value = S.me.team;
    await loadAll();
    startStream();
  }

  async function loadAll() {
    try {
      await Promise.all([loadTeams(), loadTasks(), loadDevices()]);
      await loadQueues();
    } catch (e) { if (!(e instanceof Down)) throw e; }
    renderAll();
  }
  async function loadTeams() {
    const r = await api("GET", S.me.admin ? "/v1/teams" : "/v1/teams/" + encodeURIComponent(S.me.team));
    if (r.status !== 200) return;
    S.teams.clear();
    for (const tm of (S.me.admin ? r.json.teams : [r.json])) S.teams.set(tm.team, tm);
    if (S.me.admin && !$("f-team").value && S.teams.size) $("f-team").value = S.teams.keys().next().value;
  }
  async function loadTasks() {
    const r = await api("GET", "/v1/tasks?limit=200");
    if (r.status !== 200) return;
    S.tasks.clear();
    for (const x of r.json.tasks) upsertTask(x.id, {
      team: x.team, name: x.name, state: x.state, reason: x.reason,
      mem: x.request ? x.request.gpu_memory_mib : x.gpu_memory_mib,
      core: x.request ? x.request.gpu_core_percent : x.gpu_core_percent,
      count: x.request ? x.request.gpu_count : x.gpu_count,
      created_at: x.created_at, updated_at: x.updated_at,
    });
    refreshPendingWhy();
  }
  // Each shown team's line (GET /v1/teams/T/queue): its first 20 with their predictions.
  async function loadQueues() {
    for (const tm of S.teams.values()) {
      if (!tm.waiting_tasks) { S.queues.delete(tm.team); continue; }
      const r = await api("GET", "/v1/teams/" + encodeURIComponent(tm.team) + "/queue?limit=20");
      if (r.status === 200) S.queues.set(tm.team, r.json.tasks);
    }
  }
  let queueTimer = null;
  function scheduleQueues() {
    if (queueTimer) return;
    queueTimer = setTimeout(async () => {
      queueTimer = null;
      try { await loadTeams(); await loadQueues(); } catch (e) { return; }
      renderTeams();
    }, 200);
  }
  async function loadDevices() {
    const r = await api("GET", "/v1/devices");
    S.devices = r.status === 200 ? r.json : { cards: [], none: r.status === 503 };
  }

  function upsertTask(id, f) {
    const cur = S.tasks.get(id) || { id, states: [] };
    for (const [k, v] of Object.entries(f)) if (v !== undefined) cur[k] = v;
    S.tasks.set(id, cur);
    return cur;
  }

  // ---- the live stream ----
  function stopStream() {
    if (S.stream) S.stream.ctl.abort();
    S.stream = null;
  }
  let streamRetry = null;
  function startStream() {
    if (streamRetry) { clearTimeout(streamRetry); streamRetry = null; }
    if (S.streamHeld || !S.token || !S.me) return;
    stopStream();
    const ctl = new AbortController();
    const me = { ctl };
    S.stream = me;
    setConn("connecting");
    runStream(me).catch(() => {}).finally(() => {
      if (S.stream !== me) return; // replaced or stopped on purpose
      S.stream = null;
      if (S.streamHeld) { setConn("held"); return; }
      setConn(S.down ? "down" : "connecting");
      streamRetry = setTimeout(startStream, S.down ? RETRY_S * 1000 : 1000);
    });
  }
  async function runStream(me) {
    const h = { "Authorization": "Bearer " + S.token, "Accept": "text/event-stream" };
    if (S.lastEventId !== null) h["Last-Event-ID"] = String(S.lastEventId);
    let resp;
    try {
      resp = await fetch("/v1/stream", { headers: h, signal: me.ctl.signal, cache: "no-store" });
    } catch (e) {
      if (!me.ctl.signal.aborted) setDown(true, e && e.message ? e.message : "network error");
      return;
    }
    if (resp.status !== 200) {
      // A refused token is not retried until a new one is saved.
      if (resp.status === 401) { showWho("bad"); S.streamHeld = true; }
      return;
    }
    if (S.down) setDown(false);
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let at;
      while ((at = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, at);
        buf = buf.slice(at + 2);
        if (S.stream === me) onBlock(block);
      }
    }
  }
  function onBlock(block) {
    let id = null, type = "message", data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const c = line.indexOf(":");
      const k = c < 0 ? line : line.slice(0, c);
      const v = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
      if (k === "id") id = v;
      else if (k === "event") type = v;
      else if (k === "data") data += (data ? "\n" : "") + v;
    }
    if (id !== null && /^\d+$/.test(id)) S.lastEventId = Number(id);
    let d = null;
    try { d = data ? JSON.parse(data) : null; } catch (e) { return; }
    if (type === "hello") { setConn("live"); return; }
    if (type === "resync") { setConn("live"); loadAll(); return; }
    if (type === "task" && d) return onTaskEvent(d);
    if (type === "team" && d) {
      const cur = S.teams.get(d.team) || { team: d.team };
      S.teams.set(d.team, Object.assign(cur, d));
      if (d.waiting_tasks || (S.queues && S.queues.has(d.team))) scheduleQueues();
      renderTeams();
      renderAdmin();
      return;
    }
    if (type === "device" && d) scheduleDevices();
  }
  function onTaskEvent(d) {
    S.streamEvents++;
    const was = (S.tasks.get(d.id) || {}).state;
    const task = upsertTask(d.id, { team: d.team, name: d.name, mem: d.gpu_memory_mib,
      core: d.gpu_core_percent, count: d.gpu_count, created_at: d.created_at,
      updated_at: d.updated_at });
    if (d.state) {
      if (task.states[task.states.length - 1] !== d.state) task.states.push(d.state);
      task.state = d.state;
      task.reason = d.reason;
    }
    renderTasks();
    if (d.state === "pending" || task.state === "pending") refreshPendingWhy();
    if (was === "waiting" || d.state === "waiting") scheduleQueues(); // the line moved
    if (S.selected === d.id) scheduleDetail();
    $("stream-state").textContent = t("stream.events", { n: S.streamEvents });
  }
  let devTimer = null;
  function scheduleDevices() {
    if (devTimer) return;
    devTimer = setTimeout(async () => {
      devTimer = null;
      try { await loadDevices(); } catch (e) { return; }
      renderDevices();
    }, 200);
  }
  let detailTimer = null;
  function scheduleDetail() {
    if (detailTimer) return;
    detailTimer = setTimeout(() => { detailTimer = null; loadDetail(); }, 150);
  }
  async function refreshPendingWhy() {
    for (const [id, x] of S.tasks) {
      if (x.state !== "pending") { S.pendingWhy.delete(id); continue; }
      try {
        const r = await api("GET", "/v1/tasks/" + encodeURIComponent(id));
        if (r.status === 200) S.pendingWhy.set(id, r.json.pending);
      } catch (e) { return; }
    }
    renderDevices();
  }

  // ---- rendering ----
  function renderAll() {
    renderTeams();
    renderTasks();
    renderDevices();
    renderAdmin();
    if (S.selectedTask) renderDetail(S.selectedTask.task, S.selectedTask.events);
    if (S.lastAnswer) renderAnswer(S.lastAnswer);
  }

  function bar(label, used, total, extraClass) {
    const pct = total > 0 ? Math.min(100, (used / total) * 100) : 0;
    const fill = el("span", { class: "fill " + (extraClass || "") });
    fill.style.width = pct.toFixed(1) + "%";
    return el("div", { class: "bar", role: "meter", "aria-label": label, "aria-valuemin": 0,
      "aria-valuemax": total, "aria-valuenow": used }, fill);
  }
  function renderTeams() {
    const box = $("teams");
    box.textContent = "";
    if (!S.me) return;
    for (const tm of S.teams.values()) {
      if (!S.me.admin && tm.team !== S.me.team) continue;
      const q = tm.quota || {}, r = tm.reserved || {}, a = tm.available || {};
      const card = el("div", { class: "team", "data-team": tm.team },
        el("h3", { text: tm.team }));
      for (const [k, unit, key] of [["team.memory", "MiB", "gpu_memory_mib"], ["team.core", "%", "gpu_core_percent"]]) {
        const line = t("team.line", { reserved: (r[key] || 0) + " " + unit, quota: (q[key] || 0) + " " + unit,
          avail: (a[key] || 0) + " " + unit });
        card.append(el("div", { class: "quota", "data-dim": key },
          el("span", { class: "qlabel", text: t(k) }),
          bar(t(k) + ": " + line, r[key] || 0, q[key] || 0, (a[key] || 0) <= 0 ? "full" : ""),
          el("span", { class: "qline", "data-reserved": r[key] || 0, text: line })));
      }
      card.append(el("p", { class: "muted", text: t("team.active", { n: tm.active_tasks || 0 }) }));
      if (tm.waiting_tasks) {
        const line = el("ol", { class: "queue", "data-team": tm.team });
        for (const w of (S.queues && S.queues.get(tm.team)) || [])
          line.append(el("li", { "data-task-id": w.id, "data-position": w.position,
            text: t("queue.entry", { pos: w.position, id: w.id, name: w.name || "",
              mem: w.requested ? w.requested.gpu_memory_mib : "?",
              at: w.predicted_admit_at ? fmtTime(w.predicted_admit_at) : t("queue.never") }) }));
        card.append(el("p", { class: "muted", "data-waiting": tm.waiting_tasks,
          text: t("team.waiting", { n: tm.waiting_tasks }) }), line);
      }
      box.append(card);
    }
  }

  function renderTasks() {
    const body = $("task-list");
    const filter = $("state-filter").value;
    const list = Array.from(S.tasks.values())
      .filter((x) => !filter || x.state === filter)
      .sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)));
    body.textContent = "";
    for (const x of list) {
      const open = el("button", { type: "button", class: "link", text: x.id,
        "aria-label": t("tasks.open", { id: x.id }), onclick: () => openTask(x.id) });
      body.append(el("tr", { "data-testid": "task-row", "data-task-id": x.id, "data-state": x.state,
        "data-states": x.states.join(" "), class: x.id === S.selected ? "sel" : "" },
        el("td", {}, open, x.name && x.name !== "task" ? el("span", { class: "muted", text: " " + x.name }) : null),
        el("td", {}, el("span", { class: "state s-" + x.state, text: stateName(x.state) })),
        el("td", { text: x.team || "" }),
        el("td", { text: (x.mem || "?") + " MiB · " + (x.core || "?") + "% × " + (x.count || 1) }),
        el("td", { class: "age", "data-created": x.created_at || "", text: age(x.created_at) })));
    }
    $("tasks-empty").hidden = list.length > 0;
  }

  function renderDevices() {
    const box = $("devices");
    box.textContent = "";
    const dv = S.devices;
    $("devices-note").textContent = dv && dv.none ? t("devices.none")
      : (dv && dv.fresh === false ? t("devices.stale") + " " : "") + t("devices.note");
    if (!dv) return;
    for (const c of dv.cards || []) {
      const healthy = c.healthy !== false;
      const card = el("div", { class: "card" + (healthy ? "" : " unhealthy"), "data-testid": "device-card",
        "data-minor": c.minor, "data-node": c.node, "data-healthy": healthy ? "true" : "false" },
        el("h3", {}, t("devices.card", { node: c.node, minor: c.minor }), " ",
          el("span", { class: "health " + (healthy ? "ok" : "bad"),
            text: healthy ? t("devices.healthy") : t("devices.unhealthy") + (c.health_reason ? ": " + c.health_reason : "") })),
        el("p", { class: "muted small", text: c.id || "" }));
      for (const [dim, unit, key] of [["devices.memory", "MiB", "gpu_memory_mib"], ["devices.core", "%", "gpu_core_percent"]]) {
        const total = (c.total || {})[key] || 0;
        const stack = el("div", { class: "stack", role: "img" });
        const parts = [];
        for (const tk of c.tasks || []) {
          const v = tk[key] || 0;
          const seg = el("span", { class: "seg", "data-task": tk.task, title: tk.task + ": " + v + " " + unit, text: tk.task.slice(-4) });
          seg.style.width = (total ? (v / total) * 100 : 0).toFixed(1) + "%";
          seg.style.backgroundColor = colorOf(tk.task);
          stack.append(seg);
          parts.push(tk.task + " " + v + " " + unit);
        }
        // A team's token sees other teams' tasks as one total per card, without ids.
        const others = (c.others || {})[key] || 0;
        if (others) {
          const oseg = el("span", { class: "seg others", title: t("devices.others") + ": " + others + " " + unit });
          oseg.style.width = (total ? (others / total) * 100 : 0).toFixed(1) + "%";
          stack.append(oseg);
          parts.push(t("devices.others") + " " + others + " " + unit);
        }
        const free = (c.free || {})[key] || 0;
        const fseg = el("span", { class: "seg free", title: t("devices.free") + ": " + free + " " + unit });
        fseg.style.width = (total ? (free / total) * 100 : 0).toFixed(1) + "%";
        stack.append(fseg);
        const line = t("devices.line", { used: (c.allocated || {})[key] || 0, total, unit, free: free + " " + unit });
        stack.setAttribute("aria-label", t(dim) + ": " + line + (parts.length ? " — " + parts.join(", ") : ""));
        card.append(el("div", { class: "dim", "data-dim": key }, el("span", { class: "qlabel", text: t(dim) }), stack,
          el("span", { class: "qline", text: line })));
      }
      box.append(card);
    }
    // Tasks that wait for a card, with the diagnosis: what fragmentation looks like in words.
    const waiting = Array.from(S.pendingWhy.entries()).filter(([id]) => (S.tasks.get(id) || {}).state === "pending");
    if (waiting.length) {
      const ul = el("ul", { class: "waiting" });
      for (const [id, p] of waiting) {
        const dg = p && p.diagnosis;
        const x = S.tasks.get(id);
        ul.append(el("li", { "data-task-id": id, "data-kind": dg ? dg.kind : "" },
          el("button", { type: "button", class: "link", text: id, onclick: () => openTask(id) }),
          " " + (x ? x.mem + " MiB · " + x.core + "% × " + x.count : "") + " — ",
          el("strong", { text: dg ? dg.kind : "" }), dg && dg.summary ? ": " + dg.summary : (p && (p.scheduler_message || p.message) ? ": " + (p.scheduler_message || p.message) : "")));
      }
      box.append(el("div", { class: "card wide" }, el("h3", { text: t("devices.waiting") }), ul));
    }
  }
  function colorOf(s) {
    let h = 0;
    for (const ch of s) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    return "hsl(" + (h % 360) + " 55% 55%)";
  }

  function renderAdmin() {
    const body = $("admin-teams");
    body.textContent = "";
    if (!S.me || !S.me.admin) return;
    for (const tm of S.teams.values()) {
      const q = tm.quota || {}, r = tm.reserved || {};
      body.append(el("tr", { "data-team": tm.team },
        el("td", { text: tm.team }),
        el("td", { text: (q.gpu_memory_mib || 0) + " MiB · " + (q.gpu_core_percent || 0) + "%" }),
        el("td", { text: (r.gpu_memory_mib || 0) + " MiB · " + (r.gpu_core_percent || 0) + "%" }),
        el("td", { text: String(tm.active_tasks || 0) }),
        el("td", { text: tm.has_token === undefined ? "" : (tm.has_token ? t("admin.has") : t("admin.hasnot")) })));
    }
  }

  // ---- task details ----
  async function openTask(id) {
    S.selected = id;
    S.selectedTask = null;
    $("detail-section").hidden = false;
    $("d-id").textContent = id;
    $("d-cancel-msg").textContent = "";
    renderTasks();
    $("d-log").textContent = "";
    $("d-log-msg").textContent = "";
    await loadDetail();
    loadLog();
    watchLog();
    $("detail-section").focus();
  }
  async function loadDetail() {
    const id = S.selected;
    if (!id) return;
    let a, b;
    try {
      [a, b] = await Promise.all([api("GET", "/v1/tasks/" + encodeURIComponent(id)),
        api("GET", "/v1/tasks/" + encodeURIComponent(id) + "/events")]);
    } catch (e) { return; }
    if (S.selected !== id || a.status !== 200) return;
    const was = S.selectedTask && S.selectedTask.task.id === id ? S.selectedTask.task.state : null;
    S.selectedTask = { task: a.json, events: b.status === 200 ? b.json.events : [] };
    const tk = a.json;
    if (was === "running" && tk.state !== "running") loadLog(); /* its last lines */
    upsertTask(tk.id, { state: tk.state, reason: tk.reason });
    renderDetail(S.selectedTask.task, S.selectedTask.events);
  }
  // The log's last lines (GET /v1/tasks/{id}/logs), as text; an error says what the API said.
  const LOG_TAIL = 50, LOG_EVERY_MS = 3000;
  let logTimer = null;
  async function loadLog() {
    const id = S.selected;
    if (!id) return;
    let r;
    try { r = await api("GET", "/v1/tasks/" + encodeURIComponent(id) + "/logs?tail=" + LOG_TAIL); } catch (e) { return; }
    if (S.selected !== id) return;
    const pre = $("d-log"), msg = $("d-log-msg");
    pre.dataset.status = String(r.status);
    if (r.status === 200) {
      pre.textContent = r.text || t("log.empty");
      msg.textContent = t("log.read", { n: LOG_TAIL, at: fmtTime(new Date().toISOString()) });
    } else {
      pre.textContent = "";
      msg.textContent = r.json && r.json.error ? r.status + " " + r.json.error.code + ": " + r.json.error.message
        : "HTTP " + r.status;
    }
  }
  // While the selected task runs, its log is read again every few seconds.
  function watchLog() {
    if (logTimer) return;
    logTimer = setInterval(() => {
      const sel = S.selectedTask && S.selectedTask.task;
      if (!S.selected) { clearInterval(logTimer); logTimer = null; return; }
      if (sel && sel.id === S.selected && sel.state === "running") loadLog();
    }, LOG_EVERY_MS);
  }
  function kv(dl, key, ...vals) {
    dl.append(el("dt", { text: t(key) }), el("dd", {}, ...vals));
  }
  function renderDetail(tk, events) {
    const sec = $("detail-section");
    sec.dataset.taskId = tk.id;
    sec.dataset.state = tk.state;
    $("d-id").textContent = tk.id;
    const st = $("d-state");
    st.className = "state s-" + tk.state;
    st.textContent = stateName(tk.state);
    $("cancel").disabled = FINAL.has(tk.state) || tk.state === "cancelling";
    const dl = $("d-kv");
    dl.textContent = "";
    const q = tk.request || {};
    kv(dl, "k.team", tk.team || "");
    kv(dl, "k.name", tk.name || "");
    kv(dl, "k.request", t("req.line", { mem: q.gpu_memory_mib, core: q.gpu_core_percent, count: q.gpu_count,
      dur: q.duration_seconds, qos: q.qos, exp: q.experiment }));
    const rv = tk.reservation || {};
    kv(dl, "k.reservation", (rv.gpu_memory_mib || 0) + " MiB · " + (rv.gpu_core_percent || 0) + "% — " +
      (rv.released ? t("k.released", { at: fmtTime(rv.released_at), reason: rv.release_reason || "?" }) : t("k.held")));
    // What runs: the team's container (image and command line) or the simulated worker.
    const wl = tk.workload;
    if (wl) {
      const line = (wl.command || []).concat(wl.args || []).join(" ");
      kv(dl, "k.runs", el("code", { "data-field": "image", text: wl.image }), " ",
        el("code", { "data-field": "command", text: line || t("k.entrypoint") }),
        " · cpu " + (wl.cpu || "—") + " · memory " + (wl.memory || "—"));
    } else kv(dl, "k.runs", t("k.worker"));
    const job = tk.job || {}, pod = tk.pod || {};
    // A container that cannot start: the kubelet's reason and message, not just "pending".
    if (pod.waiting) kv(dl, "k.waiting", el("span", { "data-field": "waiting" },
      el("code", { text: pod.waiting.reason || "" }), pod.waiting.message ? ": " + pod.waiting.message : ""));
    kv(dl, "k.job", el("code", { text: job.name || "—" }), " uid ", el("code", { text: job.uid || "—" }),
      job.suspended ? " (suspended)" : "");
    kv(dl, "k.pod", el("code", { text: pod.name || "—" }), " uid ", el("code", { text: pod.uid || "—" }),
      pod.node ? " @ " + pod.node : "", pod.phase ? " · " + pod.phase : "");
    if (pod.exit_code !== null && pod.exit_code !== undefined || pod.reason || tk.reason)
      kv(dl, "k.exit", el("span", { "data-field": "exit", text: (pod.exit_code !== null && pod.exit_code !== undefined ? "exit " + pod.exit_code + " " : "") + (pod.reason || tk.reason || "") }));
    const iso = tk.isolation;
    kv(dl, "k.isolation", el("span", { "data-field": "isolation", "data-verdict": iso ? iso.verdict : "",
      text: iso ? t("k.isoline", { verdict: iso.verdict, reason: iso.reason || "" })
        : t(tk.workload ? "k.noisolation.workload" : "k.noisolation") }));
    // The container's termination message: the worker's verdict in a line, a workload's text.
    const res = tk.result;
    if (res !== null && res !== undefined) {
      let line;
      if (typeof res === "string") line = res;
      else if (res.worker === "gwb-worker") {
        const parts = [t("k.resultline", { reason: res.exit_reason, code: res.exit_code })];
        if (res.ledger) parts.push(t("k.resultledger", { peak: Math.floor(res.ledger.peak_bytes / 1048576),
          budget: Math.floor(res.ledger.budget_bytes / 1048576) }));
        if (res.work) parts.push(t("k.resultwork", { got: res.work.achieved_duty_percent, want: res.work.duty_percent }));
        line = parts.join(" · ");
      } else line = JSON.stringify(res);
      kv(dl, "k.result", el("span", { "data-field": "result", text: line }));
    }
    if (tk.idempotency_key) kv(dl, "k.key", el("code", { text: tk.idempotency_key }));
    if (tk.cancel_requested_at) kv(dl, "k.cancel", fmtTime(tk.cancel_requested_at));
    kv(dl, "k.created", fmtTime(tk.created_at));
    kv(dl, "k.updated", fmtTime(tk.updated_at));

    // Pending: the scheduler's message, our diagnosis with numbers, what would unblock it.
    const pd = $("d-pending");
    pd.textContent = "";
    const p = tk.pending;
    if (!p) pd.textContent = t("detail.nopending");
    else {
      const msg = p.scheduler_message || p.message;
      if (msg) pd.append(el("p", { "data-field": "scheduler-message" }, el("strong", { text: t("pend.message") + " " }), msg));
      const dg = p.diagnosis;
      if (dg) {
        pd.append(el("p", { "data-kind": dg.kind }, el("strong", { text: t("pend.kind") + " " }),
          el("code", { text: dg.kind }), dg.summary ? " — " + dg.summary : ""));
        if (dg.cards) pd.append(el("p", { text: t("pend.numbers", { fit: dg.cards.fit_now, large: dg.cards.large_enough,
          largest: dg.cards.largest_card_mib, free: dg.cards.total_free_mib }) }));
        if (dg.team_quota) {
          const rs = dg.team_quota.reserved || {}, qt = dg.team_quota.quota || {};
          pd.append(el("p", {}, el("strong", { text: t("pend.quota") + " " }),
            t("team.line", { reserved: rs.gpu_memory_mib + " MiB · " + rs.gpu_core_percent + "%",
              quota: qt.gpu_memory_mib + " MiB · " + qt.gpu_core_percent + "%",
              avail: (qt.gpu_memory_mib - rs.gpu_memory_mib) + " MiB · " + (qt.gpu_core_percent - rs.gpu_core_percent) + "%" }) +
            (dg.team_quota.note ? " — " + dg.team_quota.note : "")));
        }
        if (dg.unblock && dg.unblock.length) {
          const ul = el("ul", { class: "unblock" });
          for (const u of dg.unblock) ul.append(el("li", { text: t("pend.unblockline", { node: u.node, minor: u.minor,
            tasks: (u.release_tasks || []).join(", "), free: u.free_after_mib }) }));
          pd.append(el("p", {}, el("strong", { text: t("pend.unblock") })), ul);
        }
      }
    }

    // The raw annotation, and the cards parsed from it.
    const al = tk.allocation;
    $("d-annotation").textContent = al && al.annotation ? al.annotation : t("detail.noalloc");
    const cards = $("d-cards");
    cards.textContent = "";
    if (al && al.cards && al.cards.length) {
      const tb = el("tbody");
      for (const c of al.cards) tb.append(el("tr", {}, el("td", { text: String(c.minor) }), el("td", {}, el("code", { text: c.id || "" })),
        el("td", { text: c.gpu_memory_mib + " MiB" }), el("td", { text: c.gpu_core_percent + "%" }),
        el("td", { text: c.gpu_memory_ratio !== undefined ? c.gpu_memory_ratio + "%" : "" })));
      cards.append(el("table", { class: "cards" }, el("thead", {}, el("tr", {},
        el("th", { scope: "col", text: "minor" }), el("th", { scope: "col", text: "id" }),
        el("th", { scope: "col", text: "gpu-memory" }), el("th", { scope: "col", text: "gpu-core" }),
        el("th", { scope: "col", text: "gpu-memory-ratio" }))), tb));
    }

    // Usage: unknown, and why.
    const u = tk.usage || { status: "unknown" };
    const us = $("d-usage");
    us.dataset.status = u.status || "unknown";
    us.textContent = "";
    if (u.status === "measured" || u.status === "simulated" || u.status === "stale")
      us.append(el("strong", { text: t("usage." + u.status) }), " — " +
        t("usage.figures", { mem: u.gpu_memory_mib, sm: u.sm_percent === null || u.sm_percent === undefined ? "—" : u.sm_percent,
          at: fmtTime(u.at), source: u.source || "" }) + " — " + (u.reason || ""));
    else
      us.append(el("strong", { text: t("usage.unknown") }),
        " — " + (u.reason && u.reason.indexOf("no usage collector") < 0 ? u.reason : t("usage.why")));

    // Timeline.
    const ol = $("d-timeline");
    ol.textContent = "";
    for (const e of events || []) {
      let what = t("ev." + e.type);
      if (e.from || e.to) what += ": " + (e.from || "·") + " → " + (e.to || "·");
      const dt = e.detail || {};
      let extra = "";
      if (e.type === "scheduler_event") extra = (dt.reason ? dt.reason + ": " : "") + (dt.message || "");
      else if (e.type === "released") extra = JSON.stringify(dt);
      else if (dt && Object.keys(dt).length) extra = JSON.stringify(dt);
      ol.append(el("li", { "data-type": e.type, "data-to": e.to || "" },
        el("time", { datetime: e.ts, text: fmtTime(e.ts) }), " ", el("strong", { text: what }),
        extra ? el("span", { class: "muted", text: " " + extra }) : null));
    }
  }

  async function cancelSelected() {
    const id = S.selected;
    if (!id) return;
    let r;
    try { r = await api("POST", "/v1/tasks/" + encodeURIComponent(id) + "/cancel"); } catch (e) { return; }
    $("d-cancel-msg").textContent = r.json && r.json.error
      ? r.status + " " + r.json.error.code + ": " + r.json.error.message
      : t("detail.cancelled", { status: r.status, what: (r.json && r.json.cancel) || "" });
    loadDetail();
  }

  // ---- submitting ----
  function formBody() {
    const f = $("submit-form");
    const body = {};
    for (const name of FIELDS) {
      const v = f.elements[name].value.trim();
      if (v === "") continue;
      body[name] = NUMERIC.has(name) && /^-?\d+$/.test(v) ? Number(v) : v;
    }
    return body;
  }
  function clearFieldErrors(form) {
    for (const e of form.querySelectorAll("[data-error-for]")) e.textContent = "";
    for (const e of form.querySelectorAll("[aria-invalid]")) e.removeAttribute("aria-invalid");
  }
  function showFieldError(form, err) {
    if (!err || !err.field) return false;
    const span = form.querySelector('[data-error-for="' + CSS.escape(err.field) + '"]');
    if (!span) return false;
    span.textContent = err.code + ": " + err.message;
    const input = form.elements[err.field];
    if (input) { input.setAttribute("aria-invalid", "true"); input.focus(); }
    return true;
  }
  async function send(key) {
    const form = $("submit-form");
    clearFieldErrors(form);
    let r;
    try { r = await api("POST", "/v1/tasks", formBody(), { "Idempotency-Key": key }); } catch (e) { return; }
    const answer = { status: r.status, key, replayed: r.headers.get("Idempotent-Replayed") === "true",
      location: r.headers.get("Location"), json: r.json, text: r.text };
    S.lastAnswer = answer;
    S.lastKey = key;
    $("resend").disabled = false;
    if (r.status === 201) { S.formKey = newKey(); $("idem-key").textContent = S.formKey; }
    renderAnswer(answer);
    if (r.json && r.json.error) showFieldError(form, r.json.error);
    if (r.json && r.json.id) {
      // The live stream may have moved the task on before this answer was read (its Job is
      // created within milliseconds of the commit): a state it brought is newer than the
      // answer's, which is only ever the first one.
      const seen = S.tasks.get(r.json.id);
      upsertTask(r.json.id, { team: r.json.team, name: r.json.name,
        state: seen && seen.state ? undefined : r.json.state,
        mem: (r.json.request || {}).gpu_memory_mib, core: (r.json.request || {}).gpu_core_percent,
        count: (r.json.request || {}).gpu_count, created_at: r.json.created_at });
      renderTasks();
    }
  }
  function renderAnswer(a) {
    const box = $("submit-result");
    box.hidden = false;
    box.dataset.status = a.status;
    const tid = (a.json && a.json.id) || (a.json && a.json.error && a.json.error.task_id) || "";
    box.dataset.taskId = tid;
    box.textContent = "";
    const err = a.json && a.json.error;
    let head;
    if (a.status === 201) head = t("res.created");
    else if (a.status === 200 && a.replayed) head = t("res.replayed");
    else if (a.status === 409 && err && err.code === "idempotency_key_reused") head = t("res.conflict");
    else head = t("res.error");
    box.className = "result " + (a.status < 300 ? "ok" : "bad");
    box.append(el("p", {}, el("strong", { class: "status", text: "HTTP " + a.status }), " " + head),
      el("p", { class: "muted small", text: t("res.sentkey", { key: a.key }) +
        (a.replayed ? " · Idempotent-Replayed: true" : "") + (a.location ? " · Location: " + a.location : "") }));
    if (tid) box.append(el("p", {}, el("button", { type: "button", class: "link", text: t("res.open", { id: tid }),
      onclick: () => openTask(tid) })));
    box.append(el("details", { open: a.status >= 300 }, el("summary", { text: t("res.body") }),
      el("pre", { class: "raw body", text: a.json ? JSON.stringify(a.json, null, 2) : a.text })));
  }

  async function predict() {
    const form = $("submit-form");
    clearFieldErrors(form);
    const box = $("predict");
    let r;
    try { r = await api("POST", "/v1/tasks?dry_run=true", formBody()); } catch (e) { return; }
    box.hidden = false;
    box.textContent = "";
    box.dataset.status = r.status;
    box.append(el("h3", { text: t("predict.title") }), el("p", {}, el("strong", { text: "HTTP " + r.status })));
    const j = r.json;
    if (r.status === 200 && j && j.dry_run === true) {
      if (j.quota && j.quota.admitted === false) box.append(el("p", { text: t("predict.quota", { code: j.quota.code || "quota_exceeded" }) }));
      const pl = j.placement;
      if (pl && pl.outcome === "bind") box.append(el("p", { "data-outcome": "bind", text: t("predict.bind", { node: pl.node, cards: (pl.cards || []).join(", ") }) }));
      if (pl && pl.outcome === "pending") {
        box.append(el("p", { "data-outcome": "pending", text: t("predict.pending", { kind: pl.diagnosis ? pl.diagnosis.kind : "?" }) +
          (pl.diagnosis && pl.diagnosis.summary ? " " + pl.diagnosis.summary : "") }));
        for (const u of pl.unblock || []) box.append(el("p", { class: "muted", text: JSON.stringify(u) }));
      }
    } else if (r.status >= 200 && r.status < 300 && j && j.id) {
      // A server without the dry run took it as a submission: say so and undo it.
      try { await api("POST", "/v1/tasks/" + encodeURIComponent(j.id) + "/cancel"); } catch (e) { /* shown below */ }
      box.append(el("p", { class: "warn", text: t("predict.unsupported", { status: r.status, id: j.id }) }));
    } else {
      box.append(el("p", { text: t("predict.error") }));
      if (j && j.error) showFieldError(form, j.error);
    }
    box.append(el("pre", { class: "raw body", text: j ? JSON.stringify(j, null, 2) : r.text }));
  }

  // ---- admin ----
  async function saveTeam(ev) {
    ev.preventDefault();
    const form = $("team-form");
    clearFieldErrors(form);
    const name = form.elements.team.value.trim();
    const body = {};
    for (const k of ["gpu_memory_mib", "gpu_core_percent", "token"]) {
      const v = form.elements[k].value.trim();
      if (v === "") continue;
      body[k] = k !== "token" && /^-?\d+$/.test(v) ? Number(v) : v;
    }
    let r;
    try { r = await api("PUT", "/v1/teams/" + encodeURIComponent(name || "-"), body); } catch (e) { return; }
    const box = $("team-result");
    box.hidden = false;
    box.dataset.status = r.status;
    box.className = "result " + (r.status < 300 ? "ok" : "bad");
    box.textContent = "";
    box.append(el("p", {}, el("strong", { text: "HTTP " + r.status }), " " +
      (r.status === 201 ? t("admin.created") : r.status === 200 ? t("admin.changed") : t("res.error"))));
    if (r.json && r.json.error) {
      showFieldError(form, r.json.error);
      box.append(el("pre", { class: "raw body", text: JSON.stringify(r.json, null, 2) }));
    } else {
      form.elements.token.value = "";
      try { await loadTeams(); } catch (e) { return; }
      renderTeams();
      renderAdmin();
    }
  }

  // ---- the token's storage ----
  // sessionStorage (gone with the tab) unless "remember" is ticked, then localStorage. A token an
  // earlier page left in localStorage still signs in, but stays there only if remember is set.
  function tokenLoad() {
    const remember = localStorage.getItem("gwb.remember") === "1";
    const token = sessionStorage.getItem("gwb.token") || localStorage.getItem("gwb.token") || "";
    tokenStore(token, remember);
    $("token-remember").checked = remember;
    return token;
  }

  function tokenStore(token, remember) {
    sessionStorage.removeItem("gwb.token");
    localStorage.removeItem("gwb.token");
    if (remember) localStorage.setItem("gwb.remember", "1");
    else localStorage.removeItem("gwb.remember");
    if (token) (remember ? localStorage : sessionStorage).setItem("gwb.token", token);
  }

  // ---- wiring ----
  function init() {
    const saved = localStorage.getItem("gwb.lang");
    S.lang = saved === "en" || saved === "zh-CN" ? saved
      : (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh-CN" : "en";
    const f = $("state-filter");
    for (const s of STATES) f.append(el("option", { value: s, text: s }));
    S.formKey = newKey();
    $("idem-key").textContent = S.formKey;
    S.token = tokenLoad();
    $("token").value = S.token;

    $("lang-toggle").addEventListener("click", () => {
      S.lang = S.lang === "en" ? "zh-CN" : "en";
      localStorage.setItem("gwb.lang", S.lang);
      applyLang();
    });
    $("token-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      S.token = $("token").value.trim();
      const remember = $("token-remember").checked;
      tokenStore(S.token, remember);
      S.lastEventId = null;
      S.streamHeld = false;
      S.tasks.clear();
      S.selected = null;
      $("detail-section").hidden = true;
      $("whoami").textContent = t(remember ? "token.saved" : "token.saved.session");
      if (S.token) connect();
    });
    $("token-clear").addEventListener("click", () => {
      tokenStore("", false);
      $("token-remember").checked = false;
      S.token = "";
      S.me = null;
      $("token").value = "";
      stopStream();
      S.tasks.clear();
      S.teams.clear();
      S.selected = null;
      for (const id of ["team-section", "submit-section", "tasks-section", "devices-section",
        "admin-section", "detail-section"]) $(id).hidden = true;
      $("whoami").textContent = t("token.cleared");
    });
    $("submit-form").addEventListener("submit", (ev) => { ev.preventDefault(); send(S.formKey); });
    $("resend").addEventListener("click", () => send(S.lastKey || S.formKey));
    $("dry-run").addEventListener("click", predict);
    $("new-key").addEventListener("click", () => { S.formKey = newKey(); $("idem-key").textContent = S.formKey; });
    $("state-filter").addEventListener("change", renderTasks);
    $("cancel").addEventListener("click", cancelSelected);
    $("d-log-refresh").addEventListener("click", loadLog);
    $("d-close").addEventListener("click", () => { S.selected = null; S.selectedTask = null; $("detail-section").hidden = true; renderTasks(); });
    $("team-form").addEventListener("submit", saveTeam);
    // Escape closes the opened task and puts the focus back on its row.
    $("detail-section").addEventListener("keydown", (ev) => {
      if (ev.key !== "Escape" || !S.selected) return;
      const id = S.selected;
      $("d-close").click();
      const b = document.querySelector('[data-testid="task-row"][data-task-id="' + CSS.escape(id) + '"] button');
      if (b) b.focus();
    });
    setInterval(() => { for (const c of document.querySelectorAll("td.age")) c.textContent = age(c.dataset.created); }, 5000);
    window.addEventListener("online", () => { if (S.down) probe(); });

    // Hooks for the browser tests and for curious people: hold the live stream (as a network
    // drop would) and let it resume from the last event id it saw.
    window.gwb = {
      holdStream() { S.streamHeld = true; stopStream(); setConn("held"); },
      resumeStream() { S.streamHeld = false; startStream(); },
      lastEventId() { return S.lastEventId; },
    };

    applyLang();
    if (S.token) connect();
    else setConn("idle");
  }
  document.addEventListener("DOMContentLoaded", init);
})();
