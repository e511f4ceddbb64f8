#!/usr/bin/python3
"""Browser tests of the workbench page: Debian's chromium, driven by chromium-driver through
Debian's python3-selenium, headless, against a real redis-server, kubesim (whose kubelet runs
the real gwb-worker) and gwb-server, started here on loopback in a temp folder and stopped by
PID. One stack and one browser serve every case; each case works in its own team.

Usage: test_page [FILTER]   (cases whose "test_page.NAME" contains FILTER)
Prints one line per case and `N passed, N failed` last; exits non-zero on a failure. A failed
case keeps its screenshots (one per step) and the processes' logs; their folder is printed.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gwb_openapi import Contract  # noqa: E402 (installed beside this file)

ADMIN = "admin-secret-page"
# Generous: the machine is shared. Waits end as soon as the condition holds.
WAIT_S = 25


def bin_dir():
    env = os.environ.get("GWB_BIN")
    if env:
        return env
    # Installed as BIN/tests/e2e/test_page.
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def wait_for(what, fn, timeout=WAIT_S):
    """Polls fn until it returns a true value, which is returned; fails naming what."""
    deadline = time.monotonic() + timeout
    last_err = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except Failure:
            raise
        except Exception as e:  # a stale element while the page re-renders, say
            last_err = e
        if time.monotonic() > deadline:
            raise Failure("timed out waiting for %s%s" % (what, " (%s)" % last_err if last_err else ""))
        time.sleep(0.1)


# ---- the stack ----

class Proc:
    def __init__(self, name, argv, env, log, ready=None):
        self.name = name
        self.log = log
        e = dict(os.environ)
        e.update(env or {})
        self.f = open(log, "ab")
        self.p = subprocess.Popen(argv, env=e, stdout=self.f, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
        self.url = None
        if ready:
            deadline = time.monotonic() + 20
            while self.url is None:
                with open(log, "r", errors="replace") as r:
                    for line in r:
                        if ready in line:
                            self.url = line.split(ready, 1)[1].strip().split()[0]
                if self.url is None:
                    if self.p.poll() is not None or time.monotonic() > deadline:
                        raise Failure("%s did not start; see %s" % (name, log))
                    time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.f.close()
        return self.p.returncode


class Stack:
    def __init__(self, tmp):
        self.tmp = tmp
        b = bin_dir()
        self.bin = b
        self.procs = []
        sock = os.path.join(tmp, "redis.sock")
        self.redis = Proc("redis-server", ["redis-server", "--port", "0", "--unixsocket", sock,
                                           "--unixsocketperm", "700", "--save", "", "--appendonly",
                                           "no", "--dir", tmp], None, os.path.join(tmp, "redis.log"))
        self.procs.append(self.redis)
        deadline = time.monotonic() + 10
        while not os.path.exists(sock):
            if time.monotonic() > deadline:
                raise Failure("redis-server did not start")
            time.sleep(0.05)
        self.kubesim = Proc("kubesim", [os.path.join(b, "kubesim"), "--listen", "127.0.0.1:0",
                                        "--state-dir", os.path.join(tmp, "state"),
                                        "--control-socket", os.path.join(tmp, "ks.sock"),
                                        "--worker", os.path.join(b, "gwb-worker")],
                            None, os.path.join(tmp, "kubesim.log"), "kubesim listening on")
        self.procs.append(self.kubesim)
        self.server_env = {
            "GWB_DB": os.path.join(tmp, "gwb.db"), "GWB_ADMIN_TOKEN": ADMIN,
            "GWB_REDIS": "unix://" + sock, "GWB_KUBE_SERVER": self.kubesim.url,
            "GWB_HOUSEKEEPING_INTERVAL_MS": "100", "GWB_RECONCILE_RESYNC_MS": "500",
            "GWB_STREAM_POLL_MS": "100", "GWB_LISTEN": "127.0.0.1:0",
        }
        self.server = None
        self.start_server()

    def start_server(self, listen=None):
        env = dict(self.server_env)
        if listen:
            env["GWB_LISTEN"] = listen
        self.server = Proc("gwb-server", [os.path.join(self.bin, "gwb-server")], env,
                           os.path.join(self.tmp, "gwb-server.log"), "gwb-server listening on")
        self.url = self.server.url

    def stop(self):
        rc = {}
        for p in [self.server] + list(reversed(self.procs)):
            if p:
                rc[p.name] = p.stop()
        return rc

    # The API, as a script would use it (to set up and to check what the page shows). Every
    # answer is held to the API's OpenAPI document (tests/e2e/gwb_openapi.py).
    def api(self, method, path, token=ADMIN, body=None, headers=None):
        h = {"Authorization": "Bearer " + token} if token else {}
        h.update(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                status, hd, raw = r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            status, hd, raw = e.code, e.headers, e.read()
        bad = self.contract().answer_violations(method, path, status, {k.lower(): v for k, v in hd.items()}, raw)
        check(not bad, "the answer breaks docs/openapi.yaml: %s" % "; ".join(bad))
        return status, json.loads(raw or b"null")

    def contract(self):
        if getattr(self, "_contract", None) is None or self._contract_url != self.url:
            with urllib.request.urlopen(self.url + "/v1/openapi.json", timeout=20) as r:
                self._contract = Contract(json.loads(r.read()))
            self._contract_url = self.url
        return self._contract

    def team(self, name, mem=20480, core=800):
        token = "tok-" + name + "-0123456789"
        st, body = self.api("PUT", "/v1/teams/" + name, body={
            "gpu_memory_mib": mem, "gpu_core_percent": core, "token": token})
        check(st in (200, 201), "PUT team %s: %s %s" % (name, st, body))
        return token

    def submit(self, team, token, mem, core, secs=300, name="api"):
        st, body = self.api("POST", "/v1/tasks", token, {
            "team": team, "name": name, "gpu_memory_mib": mem, "gpu_core_percent": core,
            "duration_seconds": secs})
        check(st == 201, "submit: %s %s" % (st, body))
        return body["id"]

    def task(self, tid):
        st, body = self.api("GET", "/v1/tasks/" + tid)
        check(st == 200, "GET task %s: %s" % (tid, st))
        return body

    def wait_task(self, tid, pred, what):
        return wait_for("%s: %s" % (tid, what), lambda: (lambda t: t if pred(t) else None)(self.task(tid)))

    def quiesce(self):
        """Cancels every active task and waits until every card is free."""
        st, body = self.api("GET", "/v1/tasks?limit=500")
        for t in body["tasks"]:
            if t["state"] not in ("succeeded", "failed", "cancelled", "cancelling"):
                self.api("POST", "/v1/tasks/%s/cancel" % t["id"])

        def free():
            s, d = self.api("GET", "/v1/devices")
            return s == 200 and all(c["allocated"]["gpu_memory_mib"] == 0 for c in d["cards"])
        wait_for("every card free", free)


# ---- the browser ----

def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,1000", "--lang=en-US", "--disable-extensions",
              "--no-first-run", "--disable-background-networking"]:
        o.add_argument(a)
    o.add_experimental_option("prefs", {"intl.accept_languages": "en-US,en"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)


class Case:
    """What one case works with: the stack, the browser, and its folder for screenshots."""

    def __init__(self, name, stack, drv, folder):
        self.name = name
        self.stack = stack
        self.d = drv
        self.folder = folder
        self.step = 0

    def shot(self, label):
        self.step += 1
        try:
            self.d.save_screenshot(os.path.join(self.folder, "%02d-%s.png" % (self.step, label)))
        except Exception:
            pass

    def q(self, sel):
        from selenium.webdriver.common.by import By
        return self.d.find_element(By.CSS_SELECTOR, sel)

    def qq(self, sel):
        from selenium.webdriver.common.by import By
        return self.d.find_elements(By.CSS_SELECTOR, sel)

    def tid(self, testid):
        return self.q('[data-testid="%s"]' % testid)

    def open_page(self, token):
        self.d.get(self.stack.url + "/")
        self.d.execute_script("localStorage.clear(); sessionStorage.clear()")
        self.d.get(self.stack.url + "/")
        self.shot("loaded")
        if token:
            box = self.tid("token")
            box.clear()
            box.send_keys(token)
            self.tid("token-save").click()
            wait_for("the signed-in view", lambda: self.q("#submit-section").is_displayed())
            wait_for("the live stream", lambda: self.q("#conn").get_attribute("data-state") == "live")
            self.shot("signed-in")

    def field(self, name, value):
        f = self.q('[data-testid="submit-form"] [name="%s"]' % name)
        if f.tag_name == "select":
            from selenium.webdriver.support.ui import Select
            Select(f).select_by_value(value)
        else:
            f.clear()
            f.send_keys(str(value))

    def fill(self, **kw):
        for k, v in kw.items():
            self.field(k, v)

    def result(self, after_status=None):
        """Waits for the submit-result to show an answer; returns (status, task id, text)."""
        def got():
            r = self.tid("submit-result")
            st = r.get_attribute("data-status")
            if not r.is_displayed() or not st or st == after_status:
                return None
            return int(st), r.get_attribute("data-task-id"), r.text
        return wait_for("an answer in submit-result", got)

    def clear_result(self):
        self.d.execute_script(
            "const r = document.querySelector('[data-testid=submit-result]');"
            "r.removeAttribute('data-status'); r.hidden = true;")

    def stable(self, fn):
        """Runs fn again when the page re-rendered what it held (lists are redrawn on events)."""
        from selenium.common.exceptions import StaleElementReferenceException
        for _ in range(50):
            try:
                return fn()
            except StaleElementReferenceException:
                time.sleep(0.05)
        return fn()

    def row(self, task_id):
        rows = self.qq('[data-testid="task-row"][data-task-id="%s"]' % task_id)
        return rows[0] if rows else None

    def row_attr(self, task_id, attr):
        return self.stable(lambda: (lambda r: r.get_attribute(attr) if r is not None else None)(self.row(task_id)))

    def open_row(self, task_id):
        self.stable(lambda: self.row(task_id).find_element("css selector", "button").click())

    def wait_row_state(self, task_id, state):
        return wait_for("row %s %s" % (task_id, state),
                        lambda: self.row_attr(task_id, "data-state") == state)

    def reserved(self, team, dim="gpu_memory_mib"):
        sel = '#teams .team[data-team="%s"] .quota[data-dim="%s"] .qline' % (team, dim)
        return self.stable(lambda: int(self.q(sel).get_attribute("data-reserved")))


# ---- cases ----

def case_submit_flow(c):
    """token -> submit -> running -> details (annotation, usage unknown) -> same key again: 200,
    same task -> changed field, same key: 409 -> cancel -> cancelled, quota back."""
    s = c.stack
    tok = s.team("flow")
    c.open_page(tok)
    check(c.reserved("flow") == 0, "flow starts with nothing reserved")
    c.fill(gpu_memory_mib=1024, gpu_core_percent=25, duration_seconds=300, name="page-flow")
    c.tid("submit-button").click()
    st, tid, _ = c.result()
    c.shot("submitted")
    check(st == 201, "first send: status %s" % st)
    check(tid.startswith("t-"), "task id %r" % tid)
    wait_for("the reservation in the team bars", lambda: c.reserved("flow") == 1024)
    c.wait_row_state(tid, "running")
    c.shot("running")
    c.open_row(tid)
    det = c.tid("task-detail")
    wait_for("the details of the task", lambda: det.is_displayed() and
             det.get_attribute("data-task-id") == tid)
    ann = wait_for("the annotation", lambda: (lambda t: t if '"gpu"' in t else None)(
        c.q('[data-testid="task-detail"] [data-testid="annotation"]').text))
    api_task = s.task(tid)
    check(ann == api_task["allocation"]["annotation"], "the raw annotation as the API has it")
    usage = c.q('[data-testid="task-detail"] [data-testid="usage"]')
    check("unknown" in usage.text and usage.get_attribute("data-status") == "unknown",
          "usage says unknown: %r" % usage.text)
    check(len(c.qq('[data-testid="timeline"] li')) >= 3, "a timeline with the state changes")
    c.shot("details")
    # The log's last lines, read through the API (the worker's JSON lines), and its refresh.
    log_sel = '[data-testid="task-detail"] [data-testid="log"]'
    wait_for("the worker's log in the details", lambda: '"work_started"' in c.q(log_sel).text)
    check(c.q(log_sel).get_attribute("data-status") == "200", "the log was read: 200")
    c.q("#d-log-refresh").click()
    wait_for("the log after a refresh", lambda: '"work_started"' in c.q(log_sel).text)

    # The same key and the same fields: the first task, 200.
    c.clear_result()
    c.tid("resend-button").click()
    st2, tid2, text = c.result()
    c.shot("replayed")
    check(st2 == 200, "same key again: status %s" % st2)
    check(tid2 == tid, "same key again: task %s, not %s" % (tid2, tid))
    # A changed field with the same key: 409, naming the first task.
    c.clear_result()
    c.fill(name="page-flow-changed")
    c.tid("resend-button").click()
    st3, tid3, text = c.result()
    c.shot("conflict")
    check(st3 == 409, "changed field, same key: status %s" % st3)
    check("idempotency_key_reused" in text, "the 409's error body is shown")
    check(tid3 == tid, "the 409 names the first task")
    _, body = s.api("GET", "/v1/tasks?team=flow")
    check(len(body["tasks"]) == 1, "still one task for the team")

    c.tid("cancel-button").click()
    c.wait_row_state(tid, "cancelled")
    wait_for("the quota back", lambda: c.reserved("flow") == 0 and c.reserved("flow", "gpu_core_percent") == 0)
    wait_for("the details show cancelled", lambda: det.get_attribute("data-state") == "cancelled")
    c.shot("cancelled")


def case_fragmentation(c):
    """Two tasks on two cards leave enough free in total but not on one card: the devices
    view draws both cards with their tasks, and the waiting task with its reason."""
    s = c.stack
    s.quiesce()
    tok = s.team("frag")
    a = s.submit("frag", tok, 5120, 60)
    b = s.submit("frag", tok, 5120, 60)
    ta = s.wait_task(a, lambda t: t["state"] == "running", "running")
    tb = s.wait_task(b, lambda t: t["state"] == "running", "running")
    check(ta["allocation"]["cards"][0]["minor"] != tb["allocation"]["cards"][0]["minor"],
          "a and b on different cards")
    cc = s.submit("frag", tok, 4096, 25, secs=5)
    s.wait_task(cc, lambda t: ((t.get("pending") or {}).get("diagnosis") or {}).get("kind") == "fragmentation",
                "diagnosed as fragmentation")
    c.open_page(tok)

    def drawn():
        cards = c.qq('[data-testid="device-card"]')
        if len(cards) != 2:
            return None
        segs = {}
        for card in cards:
            for seg in card.find_elements("css selector", '[data-dim="gpu_memory_mib"] .seg[data-task]'):
                segs[seg.get_attribute("data-task")] = card.get_attribute("data-minor")
        return segs if a in segs and b in segs else None
    segs = wait_for("both cards drawn with a and b", drawn)
    check(segs[a] != segs[b], "a and b drawn on different cards")
    nodes = c.stable(lambda: [k.get_attribute("data-node") for k in c.qq('[data-testid="device-card"]')])
    check(nodes == ["colima-gwb", "colima-gwb"], "the cards' node: %s" % nodes)
    # The list is redrawn on events: its text is read in the wait, which tries again when the
    # element it found was replaced before its text was read.
    sel = '#devices .waiting li[data-task-id="%s"][data-kind="fragmentation"]' % cc
    text = wait_for("the waiting task with its reason",
                    lambda: "".join(e.text for e in c.qq(sel)))
    check("fragmentation" in text, "the reason is written out: %r" % text)
    c.shot("devices")
    for t in (a, b, cc):
        s.api("POST", "/v1/tasks/%s/cancel" % t)


def case_language_toggle(c):
    """The toggle switches between English and Chinese and <html lang> follows; the choice is
    kept across a reload."""
    s = c.stack
    tok = s.team("lang")
    c.open_page(tok)
    html = c.q("html")
    check(html.get_attribute("lang") == "en", "English first (the browser asks for en-US)")
    title_en = c.q("#submit-h").text
    c.tid("lang-toggle").click()
    wait_for("Chinese", lambda: html.get_attribute("lang") == "zh-CN")
    check(c.q("#submit-h").text == "提交任务", "the heading in Chinese: %r" % c.q("#submit-h").text)
    check(c.tid("submit-button").text == "提交", "the button in Chinese")
    c.shot("chinese")
    c.d.refresh()
    wait_for("Chinese kept after a reload", lambda: c.q("html").get_attribute("lang") == "zh-CN")
    c.tid("lang-toggle").click()
    wait_for("English again", lambda: c.q("html").get_attribute("lang") == "en")
    check(c.q("#submit-h").text == title_en, "the heading in English again")
    # Works by keyboard: the toggle is a button reached with Tab and pressed with Enter.
    from selenium.webdriver.common.keys import Keys
    c.tid("lang-toggle").send_keys(Keys.ENTER)
    wait_for("Chinese by keyboard", lambda: c.q("html").get_attribute("lang") == "zh-CN")
    c.tid("lang-toggle").send_keys(Keys.ENTER)
    wait_for("English by keyboard", lambda: c.q("html").get_attribute("lang") == "en")
    # With no choice kept, the default follows the browser's language.
    ua = c.d.execute_script("return navigator.userAgent")
    c.d.execute_script("localStorage.removeItem('gwb.lang')")
    try:
        c.d.execute_cdp_cmd("Emulation.setUserAgentOverride", {"userAgent": ua, "acceptLanguage": "zh-CN,zh"})
        c.d.refresh()
        wait_for("Chinese for a Chinese browser", lambda: c.q("html").get_attribute("lang") == "zh-CN")
        c.shot("browser-chinese")
    finally:
        c.d.execute_cdp_cmd("Emulation.setUserAgentOverride", {"userAgent": ua, "acceptLanguage": "en-US,en"})
        c.d.execute_script("localStorage.removeItem('gwb.lang')")


def case_frontdoor_token_storage(c):
    """The token is kept in sessionStorage unless "remember" is ticked (then localStorage);
    a reload keeps the user signed in; Forget clears both; an older page's localStorage token
    still signs in but is moved to sessionStorage."""
    s = c.stack
    tok = s.team("store")
    stored = lambda: c.d.execute_script(
        "return [sessionStorage.getItem('gwb.token'), localStorage.getItem('gwb.token')]")
    signed_in = lambda: c.q("#submit-section").is_displayed()
    c.open_page(tok)
    check(not c.tid("token-remember").is_selected(), "remember is off by default")
    check(stored() == [tok, None], "without remember: sessionStorage only, got %r" % stored())
    c.d.refresh()
    wait_for("still signed in after a reload", signed_in)
    check(stored() == [tok, None], "after a reload: sessionStorage only, got %r" % stored())
    # With remember: localStorage only, and the box stays ticked after a reload.
    c.tid("token-remember").click()
    c.tid("token-save").click()
    wait_for("remembered", lambda: stored() == [None, tok])
    c.d.refresh()
    wait_for("signed in from localStorage", signed_in)
    check(c.tid("token-remember").is_selected(), "remember kept ticked")
    check(stored() == [None, tok], "after a reload: localStorage only, got %r" % stored())
    c.shot("remembered")
    # Forget clears both.
    c.q("#token-clear").click()
    wait_for("forgotten", lambda: stored() == [None, None])
    check(not c.tid("token-remember").is_selected(), "remember unticked by Forget")
    # A token an older page left in localStorage still signs in, moved to sessionStorage.
    c.d.execute_script("localStorage.setItem('gwb.token', arguments[0])", tok)
    c.d.refresh()
    wait_for("signed in with the older page's token", signed_in)
    check(stored() == [tok, None], "older token moved to sessionStorage, got %r" % stored())
    c.d.execute_script("localStorage.clear(); sessionStorage.clear()")


def case_stream_resume(c):
    """The page's stream drops; changes made meanwhile all arrive, in order, when it resumes
    from its Last-Event-ID (the page does not reload the list)."""
    s = c.stack
    tok = s.team("resume")
    c.open_page(tok)
    a = s.submit("resume", tok, 512, 10)
    c.wait_row_state(a, "running")
    c.d.execute_script("window.gwb.holdStream()")
    held_at = c.d.execute_script("return window.gwb.lastEventId()")
    check(isinstance(held_at, int), "the page has a last event id: %r" % held_at)
    wait_for("the stream held", lambda: c.q("#conn").get_attribute("data-state") == "held")
    # Meanwhile: a is cancelled and b is submitted and starts.
    s.api("POST", "/v1/tasks/%s/cancel" % a, tok)
    s.wait_task(a, lambda t: t["state"] == "cancelled", "cancelled")
    b = s.submit("resume", tok, 512, 10)
    s.wait_task(b, lambda t: t["state"] == "running", "running")
    check(c.row_attr(a, "data-state") == "running", "while held, the page knew nothing new")
    check(c.row(b) is None, "while held, b was not shown")
    c.shot("held")
    c.d.execute_script("window.gwb.resumeStream()")
    c.wait_row_state(a, "cancelled")
    c.wait_row_state(b, "running")
    c.shot("resumed")
    # Every state change recorded after the hold point reached the page, in order.
    for tid in (a, b):
        _, ev = s.api("GET", "/v1/tasks/%s/events" % tid, tok)
        want = [e["to"] for e in ev["events"] if e["seq"] > held_at and e["to"]]
        seen = c.row_attr(tid, "data-states").split()
        check(seen[-len(want):] == want or _subseq(want, seen),
              "%s: states after the hold %s, page saw %s" % (tid, want, seen))
    s.api("POST", "/v1/tasks/%s/cancel" % b, tok)


def _subseq(want, seen):
    it = iter(seen)
    return all(w in it for w in want)


def case_bad_input(c):
    """A bad field gets the API's own error next to that field, with the status shown."""
    s = c.stack
    tok = s.team("bad")
    c.open_page(tok)
    c.fill(gpu_core_percent=150)
    c.tid("submit-button").click()
    st, _, text = c.result()
    c.shot("core-150")
    check(st == 400, "status %s" % st)
    err = c.q('[data-error-for="gpu_core_percent"]')
    check(err.is_displayed() and "invalid_field" in err.text, "error next to the field: %r" % err.text)
    _, direct = s.api("POST", "/v1/tasks", tok, {"team": "bad", "gpu_memory_mib": 1024, "gpu_core_percent": 150})
    check(direct["error"]["message"] in err.text, "the API's own message: %r" % err.text)
    check(c.q('[name="gpu_core_percent"]').get_attribute("aria-invalid") == "true", "marked invalid")
    check("invalid_field" in text, "the error body in the answer")
    # Not a number at all: the API says so, next to that field; the other error is gone.
    c.clear_result()
    c.fill(gpu_core_percent=25, gpu_memory_mib="lots")
    c.tid("submit-button").click()
    st, _, _ = c.result()
    c.shot("mem-text")
    check(st == 400, "status %s" % st)
    check("gpu_memory_mib" in c.q('[data-error-for="gpu_memory_mib"]').text, "memory's error shown")
    check(c.q('[data-error-for="gpu_core_percent"]').text == "", "core's old error cleared")
    # Another team's name: 403 from the API, shown as the answer.
    c.clear_result()
    c.fill(gpu_memory_mib=1024, team="flow")
    c.tid("submit-button").click()
    st, _, text = c.result()
    check(st == 403 and "forbidden" in text, "another team: %s %r" % (st, text[:80]))
    # Predict: the dry run's answer (or its honest error) is shown; nothing stays reserved.
    c.fill(team="bad")
    c.tid("dry-run-button").click()
    pr = wait_for("the prediction", lambda: (lambda p: p if p.is_displayed() and p.get_attribute("data-status") else None)(c.q("#predict")))
    c.shot("predict")
    wait_for("nothing reserved after predict", lambda: s.api("GET", "/v1/teams/bad")[1]["reserved"]["gpu_memory_mib"] == 0)
    check(pr.text.strip() != "", "the prediction says something")


def case_narrow_and_admin(c):
    """At 360 px nothing needs sideways scrolling; the admin token shows the admin view, which
    sets a team's quota and token."""
    s = c.stack
    c.d.set_window_size(360, 800)
    try:
        c.open_page(ADMIN)
        wait_for("the admin view", lambda: c.q("#admin-section").is_displayed())
        width = c.d.execute_script("return document.documentElement.clientWidth")
        scroll = c.d.execute_script("return document.documentElement.scrollWidth")
        c.shot("narrow-admin")
        check(scroll <= width + 1, "no sideways scrolling at 360 px: %s > %s" % (scroll, width))
        # Every control has a label.
        unlabelled = c.d.execute_script(
            "return Array.from(document.querySelectorAll('input, select')).filter(e => "
            "!(e.labels && e.labels.length) && !e.getAttribute('aria-label')).map(e => e.id || e.name)")
        check(not unlabelled, "controls without a label: %s" % unlabelled)
    finally:
        c.d.set_window_size(1280, 1000)
    form = c.q("#team-form")
    form.find_element("css selector", '[name="team"]').send_keys("newteam")
    form.find_element("css selector", '[name="gpu_memory_mib"]').send_keys("4096")
    form.find_element("css selector", '[name="gpu_core_percent"]').send_keys("200")
    form.find_element("css selector", '[name="token"]').send_keys("tok-newteam-0123456789")
    form.find_element("css selector", 'button[type="submit"]').click()
    wait_for("the team created", lambda: c.q("#team-result").get_attribute("data-status") == "201")
    wait_for("the team listed", lambda: c.qq('#admin-teams tr[data-team="newteam"]'))
    st, body = s.api("GET", "/v1/teams/newteam", "tok-newteam-0123456789")
    check(st == 200 and body["quota"]["gpu_memory_mib"] == 4096, "the new team works with its token")
    c.shot("team-set")


def case_server_down(c):
    """The server goes away: the page says so (no blank screen) and, when it is back, recovers
    by itself."""
    s = c.stack
    tok = s.team("down")
    c.open_page(tok)
    port = s.url.rsplit(":", 1)[1]
    rc = s.server.stop()
    check(rc == 0, "gwb-server stopped cleanly (exit %s)" % rc)
    banner = c.q("#banner")
    wait_for("the server-down message", lambda: banner.is_displayed() and banner.text.strip())
    c.shot("down")
    check(c.q("#tasks-section").is_displayed(), "what was shown stays")
    check("TypeError" not in banner.text and ".js:" not in banner.text, "no raw stack: %r" % banner.text)
    s.start_server("127.0.0.1:" + port)
    wait_for("the message gone after the server is back", lambda: not banner.is_displayed(), timeout=40)
    wait_for("live again", lambda: c.q("#conn").get_attribute("data-state") == "live", timeout=40)
    c.shot("back")


def case_workload_details(c):
    """a workload task's details say what runs (image, command) and, once its Pod reports a
    container that cannot start, the kubelet's reason and message; a cancel releases it."""
    s = c.stack
    token = "tok-wl-0123456789"
    st, body = s.api("PUT", "/v1/teams/wl", body={
        "gpu_memory_mib": 20480, "gpu_core_percent": 800, "token": token,
        "workload_policy": {"allowed_images": ["busybox"]}})
    check(st in (200, 201), "PUT team wl: %s %s" % (st, body))
    # Above one card: the Pod stays unscheduled; its container status is set below as a
    # kubelet that cannot create the container would.
    st, body = s.api("POST", "/v1/tasks", token, {
        "team": "wl", "gpu_memory_mib": 9000, "gpu_core_percent": 10,
        "workload": {"image": "busybox:1.36", "command": ["/opt/not-allowed", "--epochs", "3"]}})
    check(st == 201, "submit: %s %s" % (st, body))
    tid = body["id"]

    def pod_name():
        q = urllib.parse.quote("gwb.io/task=" + tid)
        with urllib.request.urlopen(s.kubesim.url + "/api/v1/namespaces/gpu-workbench/pods"
                                    "?labelSelector=" + q, timeout=10) as r:
            items = json.loads(r.read())["items"]
        return items[0]["metadata"]["name"] if items else None
    name = wait_for("the task's Pod", pod_name)
    patch = {"status": {"containerStatuses": [{
        "name": "worker", "ready": False, "restartCount": 0, "image": "busybox:1.36",
        "imageID": "", "state": {"waiting": {"reason": "CreateContainerError",
                                             "message": "/opt/not-allowed is not allowed"}}}]}}
    req = urllib.request.Request(
        s.kubesim.url + "/api/v1/namespaces/gpu-workbench/pods/%s/status" % name,
        data=json.dumps(patch).encode(), method="PATCH",
        headers={"Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        check(r.status == 200, "PATCH the Pod's status: %s" % r.status)
    c.open_page(token)
    c.wait_row_state(tid, "pending")
    c.open_row(tid)
    det = c.tid("task-detail")
    wait_for("the details of the task", lambda: det.is_displayed() and
             det.get_attribute("data-task-id") == tid)
    image = wait_for("the image", lambda: (c.qq('[data-testid="task-detail"] [data-field="image"]') or [None])[0])
    check(image.text == "busybox:1.36", "the image shown: %r" % image.text)
    cmd = c.q('[data-testid="task-detail"] [data-field="command"]').text
    check(cmd == "/opt/not-allowed --epochs 3", "the command shown: %r" % cmd)
    waiting = wait_for("the waiting reason", lambda: (lambda e: e if e and "CreateContainerError" in e.text else None)(
        (c.qq('[data-testid="task-detail"] [data-field="waiting"]') or [None])[0]))
    check("/opt/not-allowed is not allowed" in waiting.text, "the message shown: %r" % waiting.text)
    c.shot("waiting")
    c.tid("cancel-button").click()
    c.wait_row_state(tid, "cancelled")
    wait_for("the quota back", lambda: c.reserved("wl") == 0)


def case_waiting_line(c):
    """A team's line on the page: two tasks waiting for quota shown in order with their
    predictions; a cancel that frees the quota admits the head, and the line follows live."""
    s = c.stack
    tok = s.team("line", mem=1024, core=100)
    a = s.submit("line", tok, 1024, 25)
    waiting = []
    for n in ("first", "second"):
        st, body = s.api("POST", "/v1/tasks", tok, {
            "team": "line", "name": n, "gpu_memory_mib": 1024, "gpu_core_percent": 25,
            "duration_seconds": 300, "on_quota_full": "wait"})
        check(st == 201 and body["state"] == "waiting", "wait: %s %s" % (st, body))
        waiting.append(body["id"])
    c.open_page(tok)
    sel = '#teams .team[data-team="line"] ol.queue li'

    def line():
        return c.stable(lambda: [(e.get_attribute("data-position"), e.get_attribute("data-task-id"))
                                 for e in c.qq(sel)])
    wait_for("the line of two", lambda: line() == [("1", waiting[0]), ("2", waiting[1])])
    c.shot("line")
    s.api("POST", "/v1/tasks/%s/cancel" % a)
    wait_for("the head admitted, the line moved up", lambda: line() == [("1", waiting[1])])
    c.shot("line-moved")
    for t in waiting:
        s.api("POST", "/v1/tasks/%s/cancel" % t)


CASES = [
    ("submit_flow", case_submit_flow),
    ("workload_details", case_workload_details),
    ("fragmentation", case_fragmentation),
    ("language_toggle", case_language_toggle),
    ("frontdoor_token_storage", case_frontdoor_token_storage),
    ("stream_resume", case_stream_resume),
    ("bad_input", case_bad_input),
    ("narrow_and_admin", case_narrow_and_admin),
    ("server_down", case_server_down),
    ("waiting_line", case_waiting_line),
]


def main():
    flt = sys.argv[1] if len(sys.argv) > 1 else ""
    chosen = [(n, f) for n, f in CASES if flt in "test_page." + n]
    if not chosen:
        print("0 passed, 0 failed")
        return 0
    tmp = tempfile.mkdtemp(prefix="gwbpage.")
    passed = failed = 0
    stack = drv = None
    try:
        stack = Stack(tmp)
        drv = browser()
        drv.set_page_load_timeout(30)
        for name, fn in chosen:
            folder = os.path.join(tmp, name)
            os.makedirs(folder)
            c = Case(name, stack, drv, folder)
            t0 = time.monotonic()
            try:
                fn(c)
                ok = True
            except Exception as e:
                ok = False
                c.shot("failed")
                why = str(e) if isinstance(e, Failure) else traceback.format_exc()
            ms = int((time.monotonic() - t0) * 1000)
            if ok:
                passed += 1
                shutil.rmtree(folder, ignore_errors=True)
                print("ok   test_page.%s (%d ms)" % (name, ms))
            else:
                failed += 1
                print("FAIL test_page.%s (%d ms)" % (name, ms))
                print("    %s" % why.strip().replace("\n", "\n    "))
                print("    screenshots: %s" % folder)
                # A fresh browser for the next case, whatever state this one left.
                try:
                    drv.quit()
                except Exception:
                    pass
                drv = browser()
                drv.set_page_load_timeout(30)
            sys.stdout.flush()
            if stack.server.p.poll() is not None and name != "server_down":
                print("    gwb-server died (exit %s); log: %s" % (stack.server.p.returncode, stack.server.log))
                stack.start_server()
    except Exception:
        failed += 1
        print("FAIL test_page: the stack or the browser did not start")
        print("    " + traceback.format_exc().strip().replace("\n", "\n    "))
    finally:
        if drv:
            try:
                drv.quit()
            except Exception:
                pass
        if stack:
            rcs = stack.stop()
            if rcs.get("gwb-server") not in (0, None):
                failed += 1
                print("FAIL test_page: gwb-server exited %s at the end; log: %s" % (
                    rcs.get("gwb-server"), stack.server.log))
    if failed:
        print("    logs and screenshots kept in %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
