#!/usr/bin/python3
"""The API's OpenAPI document (GET /v1/openapi.json, from docs/openapi.yaml) against a real
gwb-server started here on loopback in a temp folder (its own SQLite file; no cluster, no
Redis) and stopped by PID. Debian's python3-jsonschema checks the schemas and validates the
answers; python3-hypothesis generates the requests.

Cases:
  document_holds_together  every schema passes Draft202012Validator.check_schema, every $ref
                           resolves, every operation has answers and security, and the server
                           answers every method the document lists (and 405 to the others)
  limits_match_the_server  every limit of the request schemas (minimum, maximum, minLength,
                           maxLength, x-gwb-max-bytes, enum, required, unknown fields,
                           defaults) is the one the server enforces, probed at its boundaries
                           and read back from the server's own rule text
  props                    generated requests, valid and broken: every answer is one the
                           document lists, never a 5xx, never a body that breaks its schema;
                           a valid request is never refused for its shape, an invalid one
                           never accepted, and a refused request writes nothing.
                           GWB_PROPS_COUNT requests (default 300; GWB_PROPS_LONG=1: 3000)
  clients_send_what_the_document_allows
                           gwbctl's and gwb-load's requests, seen through a recording proxy
                           in front of the server, held against the request schemas

Usage: test_openapi [FILTER]   (cases whose "test_openapi.NAME" contains FILTER)
GWB_TEST_KEEP=1 keeps every case's folder (the server's log, the props pass's requests.log).
Prints one line per case and `N passed, N failed` last; exits non-zero on a failure.
"""
import http.client
import http.server
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from fractions import Fraction

import jsonschema
from jsonschema import Draft202012Validator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gwb_openapi import Contract  # noqa: E402 (installed beside this file)

ADMIN = "admin-secret-openapi"
ALPHA = "alpha-token-openapi"
BETA = "beta-token-openapi"


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def bin_dir():
    env = os.environ.get("GWB_BIN")
    if env:
        return env
    # Installed as BIN/tests/e2e/test_openapi.
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---- the server ----

class Server:
    """A gwb-server of its own in folder tmp, with teams alpha (a large quota) and beta (a
    small one), each with a token."""

    def __init__(self, tmp, env=None):
        self.tmp = tmp
        self.db = os.path.join(tmp, "gwb.db")
        self.log = os.path.join(tmp, "gwb-server.log")
        e = dict(os.environ)
        e.update({"GWB_DB": self.db, "GWB_ADMIN_TOKEN": ADMIN, "GWB_LISTEN": "127.0.0.1:0",
                  "GWB_HTTP_RATE_LIMIT_PER_S": "0"})
        for k in ("GWB_REDIS", "GWB_KUBE_SERVER", "KUBECONFIG"):
            e.pop(k, None)
        e["KUBECONFIG"] = os.path.join(tmp, "no-kubeconfig")
        e["HOME"] = tmp  # no ~/.kube/config either: no cluster
        e.update(env or {})
        self.f = open(self.log, "ab")
        self.p = subprocess.Popen([os.path.join(bin_dir(), "gwb-server")], env=e, stdout=self.f,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.url = None
        deadline = time.monotonic() + 20
        while self.url is None:
            with open(self.log, "r", errors="replace") as r:
                for line in r:
                    if "gwb-server listening on " in line:
                        self.url = line.split("listening on ", 1)[1].split()[0]
            if self.url is None:
                if self.p.poll() is not None or time.monotonic() > deadline:
                    raise Failure("gwb-server did not start; see %s" % self.log)
                time.sleep(0.05)
        u = urllib.parse.urlparse(self.url)
        self.host, self.port = u.hostname, u.port
        self.conn = None
        for team, token, mem, core in (("alpha", ALPHA, 1 << 30, 1000000), ("beta", BETA, 4096, 100)):
            st, _, body = self.api("PUT", "/v1/teams/" + team, ADMIN,
                                   {"gpu_memory_mib": mem, "gpu_core_percent": core, "token": token})
            check(st in (200, 201), "PUT team %s: %s %s" % (team, st, body))

    def stop(self):
        if self.conn:
            self.conn.close()
        rc = None
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                rc = self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        else:
            rc = self.p.returncode
        self.f.close()
        return rc

    def request(self, method, target, headers=None, body=None, timeout=20):
        """One request on the kept connection: (status, headers dict lower-cased, body bytes).
        body is bytes (sent as they are) or None."""
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            try:
                self.conn.request(method, target, body=body, headers=headers or {})
                r = self.conn.getresponse()
                data = r.read()
                h = {k.lower(): v for k, v in r.getheaders()}
                if h.get("connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, h, data
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise Failure("unreachable")

    def api(self, method, path, token=ADMIN, body=None, headers=None):
        """A JSON request as a client makes it: (status, headers, parsed body or None)."""
        h = {"Authorization": "Bearer " + token} if token else {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        st, hd, raw = self.request(method, path, h, data)
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return st, hd, parsed

    def snapshot(self):
        """What a write would change: the rows of the tables a request writes."""
        db = sqlite3.connect("file:%s?mode=ro" % self.db, uri=True, timeout=5)
        try:
            out = {"teams": db.execute("SELECT * FROM teams ORDER BY name").fetchall()}
            for t in ("tasks", "idempotency_keys", "outbox", "task_events", "team_events"):
                out[t] = db.execute("SELECT count(*) FROM %s" % t).fetchone()[0]
            out["task_states"] = db.execute(
                "SELECT group_concat(id || ':' || state) FROM (SELECT id, state FROM tasks ORDER BY id)").fetchone()[0]
            return out
        finally:
            db.close()


def fetch_contract(srv):
    st, hd, doc = srv.api("GET", "/v1/openapi.json", None)
    check(st == 200 and isinstance(doc, dict), "GET /v1/openapi.json: %s" % st)
    return Contract(doc)


# ---- case: the document holds together ----

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def walk(node, path=""):
    """Every (JSON pointer, value) of a document."""
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, path + "/" + k.replace("~", "~0").replace("/", "~1"))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, "%s/%d" % (path, i))


def case_document_holds_together(tmp):
    srv = Server(tmp)
    try:
        c = fetch_contract(srv)
        doc = c.doc
        check(doc["openapi"].startswith("3.1."), "openapi is %s" % doc["openapi"])
        problems = []
        schemas = 0
        for ptr, node in walk(doc):
            if not isinstance(node, dict):
                continue
            if "$ref" in node and isinstance(node["$ref"], str):
                try:
                    c.resolver.resolve(node["$ref"])
                except jsonschema.exceptions.RefResolutionError as e:
                    problems.append("%s: $ref %s does not resolve: %s" % (ptr, node["$ref"], e))
            # A schema: each of components/schemas, every "schema" of a parameter, header or
            # media type, and every stream event's.
            parent = ptr.rsplit("/", 1)
            is_schema = ((ptr.startswith("/components/schemas/") and ptr.count("/") == 3) or
                         (len(parent) == 2 and parent[1] == "schema") or
                         ("/x-gwb-events/" in ptr and ptr.count("/") == 5))
            if is_schema:
                schemas += 1
                try:
                    Draft202012Validator.check_schema(node)
                except jsonschema.exceptions.SchemaError as e:
                    problems.append("%s: not a JSON Schema 2020-12: %s" % (ptr, e.message))
        ids = {}
        ops = 0
        global_security = doc.get("security")
        for templ, item in doc["paths"].items():
            for m, op in item.items():
                if m not in METHODS:
                    continue
                ops += 1
                where = "%s %s" % (m.upper(), templ)
                if not op.get("responses"):
                    problems.append("%s: no responses" % where)
                for code, resp in op.get("responses", {}).items():
                    if not re.fullmatch(r"[1-5][0-9][0-9]", code):
                        problems.append("%s: response %s is not a status" % (where, code))
                    if "description" not in c.resolve(resp):
                        problems.append("%s %s: no description" % (where, code))
                sec = op.get("security", global_security)
                if sec is None:
                    problems.append("%s: no security" % where)
                for req in sec or []:
                    for name in req:
                        if name not in doc["components"]["securitySchemes"]:
                            problems.append("%s: security scheme %s is not defined" % (where, name))
                if templ.startswith("/v1/") and templ != "/v1/openapi.json" and {"bearer": []} not in (sec or []):
                    problems.append("%s: a /v1 operation without bearer security" % where)
                if op.get("operationId") in ids:
                    problems.append("%s: operationId %s is used twice" % (where, op["operationId"]))
                ids[op.get("operationId")] = where
                declared = {p["name"] for p in map(c.resolve, item.get("parameters", []) + op.get("parameters", []))
                            if p["in"] == "path"}
                for name in re.findall(r"\{([^}]+)\}", templ):
                    if name not in declared:
                        problems.append("%s: path parameter %s is not declared" % (where, name))
        # The server and the document agree on the methods of each path.
        for templ, item in doc["paths"].items():
            path = templ.replace("{id}", "t-none00000000").replace("{team}", "alpha")
            listed = {m for m in item if m in METHODS}
            for m in ("get", "post", "put", "delete", "patch"):
                if templ == "/v1/stream" and m == "get":  # it never ends: its head only
                    st, hd, raw = stream_head(srv, path, {"Authorization": "Bearer " + ADMIN})
                    body = json.loads(raw) if raw else None
                else:
                    st, hd, body = srv.api(m.upper(), path, ADMIN, {} if m in ("post", "put", "patch") else None)
                if m in listed and st == 405:
                    problems.append("%s %s: listed, and the server answers 405" % (m.upper(), templ))
                if m not in listed and st != 405:
                    problems.append("%s %s: not listed, and the server answers %d" % (m.upper(), templ, st))
                problems += c.answer_violations(m.upper(), path, st, hd, json.dumps(body).encode() if body is not None else b"")
            # Its security: an operation that needs no token answers without one, the others 401.
            if "get" in item:
                sec = item["get"].get("security", global_security) or []
                public = sec == [] or {} in sec
                if templ == "/v1/stream":
                    st, hd, raw = stream_head(srv, path, {})
                else:
                    st, hd, raw = srv.request("GET", path)
                if public == (st == 401):
                    problems.append("GET %s: security %s, and without a token the server answers %d" % (templ, sec, st))
                problems += c.answer_violations("GET", path, st, hd, raw)
        check(not problems, "%d problems:\n%s" % (len(problems), "\n".join(problems)))
        print("    # %d operations, %d schemas checked" % (ops, schemas))
    finally:
        srv.stop()


# ---- case: the limits of the request schemas are the server's ----

def invalid_field(st, body, field):
    """The rule when the answer is 400 invalid_field naming field, else None."""
    e = (body or {}).get("error", {}) if isinstance(body, dict) else {}
    if st == 400 and e.get("code") == "invalid_field" and e.get("field") == field:
        return e.get("rule", "")
    return None


def rule_bounds(rule):
    """(min, max) from the server's rule text ("must be from 1 to 8", "length must be from 1
    to 63 bytes", "must be an integer from 1 to 500"), or None."""
    m = re.search(r"from (-?[0-9]+) to (-?[0-9]+)", rule or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


SUFFIX = {"": 1, "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
          "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}


def quantity(text):
    """A Kubernetes quantity's value in its unit (cores, bytes), exact."""
    m = re.fullmatch(r"\+?([0-9]*\.?[0-9]*)([a-zA-Z]*)([eE][+-]?[0-9]+)?", text)
    if not m:
        raise Failure("not a quantity: %r" % text)
    v = Fraction(m.group(1)) * SUFFIX[m.group(2)]
    return v * Fraction(10) ** int(m.group(3)[1:]) if m.group(3) else v


def base_value(c, schema):
    s = c.resolve(schema)
    if "enum" in s:
        return s["enum"][0]
    if s.get("type") == "integer":
        return s.get("minimum", 1)
    if s.get("type") == "string":
        return "a" * max(s.get("minLength", 1), 1)
    raise Failure("no base value for %s" % s)


def probe_object(c, send, schema_ref, base, problems):
    """Probes every limit of the object schema at schema_ref with send(body) -> (status, body),
    starting from the valid body base."""
    s = c.resolve({"$ref": schema_ref})
    props = s["properties"]

    def refused(body, field, why):
        st, ans = send(body)
        rule = invalid_field(st, ans, field)
        if rule is None:
            problems.append("%s: %s: %s should be refused naming %s, got %s %s" % (
                schema_ref, field, why, field, st, ans))
        return rule

    def accepted(body, field, why):
        st, ans = send(body)
        if st in (400, 413, 415) and (invalid_field(st, ans, field) is not None or st != 400):
            problems.append("%s: %s: %s is within the document's limits and was refused: %s %s" % (
                schema_ref, field, why, st, ans))

    for name, sub in props.items():
        p = c.resolve(sub)
        if p.get("type") == "integer":
            lo, hi = p.get("minimum"), p.get("maximum")
            accepted(dict(base, **{name: lo}), name, "the minimum %s" % lo)
            accepted(dict(base, **{name: hi}), name, "the maximum %s" % hi)
            rule = refused(dict(base, **{name: lo - 1}), name, "minimum - 1 = %s" % (lo - 1))
            refused(dict(base, **{name: hi + 1}), name, "maximum + 1 = %s" % (hi + 1))
            if rule is not None and rule_bounds(rule) != (lo, hi):
                problems.append("%s: %s: the document says %s to %s, the server's rule says %r" % (
                    schema_ref, name, lo, hi, rule))
            refused(dict(base, **{name: str(lo)}), name, "a string")
        elif p.get("type") == "string" and "enum" in p:
            for v in p["enum"]:
                accepted(dict(base, **{name: v}), name, "the value %r" % v)
            refused(dict(base, **{name: p["enum"][0] + "x"}), name, "a value not in the enum")
        elif p.get("type") == "string":
            lo = p.get("minLength", 0)
            hi = p.get("x-gwb-max-bytes", p.get("maxLength"))
            ok = base.get(name) if isinstance(base.get(name), str) else "a"
            filler = (ok * hi)[:hi]
            accepted(dict(base, **{name: filler}), name, "%d characters" % hi)
            rule = refused(dict(base, **{name: filler + ok[0]}), name, "%d characters" % (hi + 1))
            if lo > 0:
                accepted(dict(base, **{name: (ok * lo)[:lo]}), name, "%d characters" % lo)
                refused(dict(base, **{name: (ok * lo)[:lo - 1]}), name, "%d characters" % (lo - 1))
            if rule is not None and rule_bounds(rule) not in (None, (max(lo, 1), hi)) and "length" in rule:
                problems.append("%s: %s: the document says %s to %s, the server's rule says %r" % (
                    schema_ref, name, lo, hi, rule))
            if "x-gwb-max-bytes" in p:  # bytes, not characters: 2-byte characters
                accepted(dict(base, **{name: "é" * (hi // 2)}), name, "%d bytes of é" % hi)
                refused(dict(base, **{name: "é" * (hi // 2 + 1)}), name, "%d bytes of é" % (hi + 2))
            if "pattern" in p:
                for bad in ("A", "a b", "\t"):
                    if not re.search(p["pattern"], bad):
                        refused(dict(base, **{name: bad}), name, "%r (not matching %s)" % (bad, p["pattern"]))
            refused(dict(base, **{name: 7}), name, "a number")
        refused(dict(base, **{name: None}), name, "null")
    for name in s.get("required", []):
        body = dict(base)
        body.pop(name, None)
        refused(body, name, "absent (required)")
    for name in props:
        if name not in s.get("required", []):
            body = {k: v for k, v in base.items() if k != name}
            accepted(body, name, "absent (optional)")
    if s.get("additionalProperties") is False:
        refused(dict(base, not_a_field=1), "not_a_field", "an unknown field")


def probe_query(c, srv, path, params, problems, ok=200):
    """Probes the query parameters' limits; ok is the status of a query the operation takes
    (a log's is 409: no Pod without a cluster, and the query is read first)."""
    for p in map(c.resolve, params):
        s = c.resolve(p["schema"])
        name = p["name"]

        def send(v):
            st, _, body = srv.api("GET", "%s?%s=%s" % (path, name, urllib.parse.quote(str(v))))
            return st, body
        if s.get("type") == "integer":
            for v in (s["minimum"], s["maximum"]):
                st, body = send(v)
                if st != ok:
                    problems.append("%s?%s=%s: within the limits, answered %s %s" % (path, name, v, st, body))
            for v in (s["minimum"] - 1, s["maximum"] + 1, "x"):
                st, body = send(v)
                rule = invalid_field(st, body, name)
                if rule is None:
                    problems.append("%s?%s=%s: beyond the limits, answered %s %s" % (path, name, v, st, body))
                elif v != "x" and rule_bounds(rule) != (s["minimum"], s["maximum"]):
                    problems.append("%s?%s: the document says %s to %s, the server's rule says %r" % (
                        path, name, s["minimum"], s["maximum"], rule))
        elif "enum" in s:
            for v in s["enum"]:
                st, body = send(v)
                if st != ok:
                    problems.append("%s?%s=%s: a listed value, answered %s %s" % (path, name, v, st, body))
            st, body = send("not-a-state")
            if invalid_field(st, body, name) is None:
                problems.append("%s?%s=not-a-state: answered %s %s" % (path, name, st, body))
    st, _, body = srv.api("GET", path + "?not_a_parameter=1")
    if invalid_field(st, body, "not_a_parameter") is None:
        problems.append("%s?not_a_parameter=1: answered %s %s" % (path, st, body))


def at_most(rule):
    """N of "... at most N ..." in the server's rule text, or None."""
    m = re.search(r"at most ([^ ]+)", rule or "")
    return m.group(1) if m else None


def probe_workload(c, send, problems):
    """Probes the limits of the Workload schema with send(workload) -> (status, body) (a dry run
    of a team whose policy allows the base image), each compared with the server's rule."""
    w = c.resolve({"$ref": "#/components/schemas/Workload"})
    props = {k: c.resolve(v) for k, v in w["properties"].items()}
    base = {"image": "reg.example.com/probe/app:1"}

    def expect(workload, field, why, refused=True):
        st, ans = send(workload)
        rule = invalid_field(st, ans, field)
        if refused and rule is None:
            problems.append("workload: %s should be refused naming %s, got %s %s" % (why, field, st, ans))
        if not refused and st != 200:
            problems.append("workload: %s is within the document's limits and was refused: %s %s" % (why, st, ans))
        return rule

    def same(what, doc, rule, got):
        if got != doc:
            problems.append("workload: %s: the document says %s, the server's rule says %r" % (what, doc, rule))

    # image: its length, its name's, the pattern against the server's grammar
    img = c.resolve({"$ref": "#/components/schemas/ImageRef"})
    name_max, total = img["x-gwb-name-max-bytes"], img["maxLength"]
    name = "reg.example.com/" + "a" * (name_max - len("reg.example.com/"))
    longest = name + ":" + "t" * 128 + "@sha256:" + "0" * 64
    check(len(longest) == total, "the longest reference is %d, the document's maxLength %d" % (len(longest), total))
    expect(dict(base, image=longest), "workload.image", "an image of %d bytes" % total, refused=False)
    rule = expect(dict(base, image="a" * (total + 1)), "workload.image", "an image of %d bytes" % (total + 1))
    if rule is not None:
        same("image", (1, total), rule, tuple(map(int, re.search(r"of ([0-9]+) to ([0-9]+) bytes", rule).groups())))
    expect(dict(base, image=name + "a"), "workload.image", "a name of %d bytes" % (name_max + 1))
    for ref in ("busybox", "busybox:1.36", "reg.io:5000/a/b:v1", "localhost/x", "Reg.IO/x__y/z", "a_b/c",
                "host:5000", "app@sha256:" + "a" * 64, "UPPER", "a__b.c/x", "a..b", "app:", ":5000/x",
                "a:b:c", "x/y@sha256:" + "A" * 64, "a-/x", "a/-b", "a/b:.t", "a/b:" + "t" * 129):
        ok = re.fullmatch(img["pattern"], ref) is not None
        expect(dict(base, image=ref), "workload.image", "the image %r (%s the pattern)" % (
            ref, "matching" if ok else "not matching"), refused=not ok)
    # command and args: their counts and their strings' bytes
    for key in ("command", "args"):
        p = props[key]
        lo, hi = p.get("minItems", 0), p["maxItems"]
        first = ["/bin/probe"] if key == "command" else []
        item = c.resolve(p["items"])
        expect(dict(base, **{key: first + ["a"] * (hi - len(first))}), "workload." + key,
               "%d %s" % (hi, key), refused=False)
        rule = expect(dict(base, **{key: first + ["a"] * (hi + 1 - len(first))}), "workload." + key,
                      "%d %s" % (hi + 1, key))
        if rule is not None:
            same(key, (lo, hi), rule, tuple(map(int, re.search(r"of ([0-9]+) to ([0-9]+)", rule).groups())))
        if lo:
            expect(dict(base, **{key: []}), "workload." + key, "no %s" % key)
        n = item["x-gwb-max-bytes"]
        at = len(first)
        expect(dict(base, **{key: first + ["é" * (n // 2)]}), "workload.%s[%d]" % (key, at),
               "a string of %d bytes" % n, refused=False)
        rule = expect(dict(base, **{key: first + ["é" * (n // 2) + "a"]}), "workload.%s[%d]" % (key, at),
                      "a string of %d bytes" % (n + 1))
        if rule is not None:
            same(key + " items", n, rule, int(at_most(rule)))
        expect(dict(base, **{key: first + [7]}), "workload.%s[%d]" % (key, at), "a number")
    first = c.resolve(props["command"]["prefixItems"][0])
    expect(dict(base, command=["bin/sh"]), "workload.command[0]", "a relative program (not %s)" % first["pattern"])
    expect(dict(base, command=["/"]), "workload.command[0]", "a program of %d character" % (first["minLength"] - 1))
    # env: its count, its names, its values
    env = props["env"]
    names = c.resolve(env["propertyNames"])
    n = env["maxProperties"]
    expect(dict(base, env={"V%d" % i: "x" for i in range(n)}), "workload.env", "%d variables" % n, refused=False)
    rule = expect(dict(base, env={"V%d" % i: "x" for i in range(n + 1)}), "workload.env", "%d variables" % (n + 1))
    if rule is not None:
        same("env", n, rule, int(at_most(rule)))
    n = names["maxLength"]
    expect(dict(base, env={"A" * n: "x"}), "workload.env." + "A" * n, "a name of %d" % n, refused=False)
    rule = expect(dict(base, env={"A" * (n + 1): "x"}), "workload.env." + "A" * (n + 1), "a name of %d" % (n + 1))
    if rule is not None:
        same("env names", (names["minLength"], n), rule,
             tuple(map(int, re.search(r"([0-9]+) to ([0-9]+)", rule).groups())))
    for bad in ("1A", "A-B", "A B"):
        check(not re.fullmatch(names["pattern"], bad), "the name pattern allows %r" % bad)
        expect(dict(base, env={bad: "x"}), "workload.env." + bad, "the name %r" % bad)
    reserved = names["not"]["anyOf"]
    for r in reserved[0]["enum"]:
        expect(dict(base, env={r: "x"}), "workload.env." + r, "the reserved name %s" % r)
    for prefix in re.fullmatch(r"\^\((.*)\)", reserved[1]["pattern"]).group(1).split("|"):
        expect(dict(base, env={prefix + "X": "x"}), "workload.env.%sX" % prefix, "the reserved prefix %s" % prefix)
        expect(dict(base, env={"X" + prefix: "x"}), "", "the name X%s" % prefix, refused=False)
    n = c.resolve(env["additionalProperties"])["x-gwb-max-bytes"]
    expect(dict(base, env={"V": "é" * (n // 2)}), "workload.env.V", "a value of %d bytes" % n, refused=False)
    rule = expect(dict(base, env={"V": "é" * (n // 2) + "a"}), "workload.env.V", "a value of %d bytes" % (n + 1))
    if rule is not None:
        same("env values", n, rule, int(at_most(rule)))
    # working_dir
    p = props["working_dir"]
    n = p["x-gwb-max-bytes"]
    expect(dict(base, working_dir="/" + "a" * (n - 1)), "", "a working_dir of %d bytes" % n, refused=False)
    rule = expect(dict(base, working_dir="/" + "a" * n), "workload.working_dir", "a working_dir of %d bytes" % (n + 1))
    if rule is not None:
        same("working_dir", n, rule, int(at_most(rule)))
    expect(dict(base, working_dir="work"), "workload.working_dir", "a relative working_dir")
    # cpu and memory: above 0, at most the document's maximum
    for key, over in (("cpu", "m"), ("memory", "")):
        q = props[key]["x-gwb-quantity"]
        top = quantity(q["max"])
        expect(dict(base, **{key: q["max"]}), "", "%s %s" % (key, q["max"]), refused=False)
        past = "%dm" % (top * 1000 + 1) if over == "m" else "%d" % (top + 1)
        rule = expect(dict(base, **{key: past}), "workload." + key, "%s %s" % (key, past))
        if rule is not None:
            same(key, top, rule, quantity(at_most(rule)))
        for bad in ("0", "-1", "1x", "", 1):
            expect(dict(base, **{key: bad}), "workload." + key, "%s %r" % (key, bad))
    # the rest: unknown members, the image required, the whole's bytes
    expect(dict(base, bogus=1), "workload.bogus", "an unknown member")
    expect({}, "workload.image", "no image")
    n = w["x-gwb-max-json-bytes"]

    def sized(total):
        v = dict(base, env={"A": "", "B": "", "C": "", "D": ""})
        room = total - len(json.dumps(v, separators=(",", ":"), sort_keys=True))
        for k in "ABCD":
            v["env"][k] = "x" * min(room, 4096)
            room -= len(v["env"][k])
        return v
    expect(sized(n), "", "a workload of %d bytes" % n, refused=False)
    rule = expect(sized(n + 1), "workload", "a workload of %d bytes" % (n + 1))
    if rule is not None:
        same("the whole", n, rule, int(at_most(rule)))


def probe_policy(c, put, problems):
    """Probes the limits of WorkloadPolicyPut with put(workload_policy) -> (status, body)."""
    pol = c.resolve({"$ref": "#/components/schemas/WorkloadPolicyPut"})
    images = c.resolve(pol["properties"]["allowed_images"])
    prefix = c.resolve(images["items"])

    def expect(policy, field, why, refused=True):
        st, ans = put(policy)
        rule = invalid_field(st, ans, field)
        if refused and rule is None:
            problems.append("workload_policy: %s should be refused naming %s, got %s %s" % (why, field, st, ans))
        if not refused and st not in (200, 201):
            problems.append("workload_policy: %s is within the document's limits and was refused: %s %s" % (why, st, ans))
        return rule
    n = images["maxItems"]
    expect({"allowed_images": ["reg.example.com/%d/" % i for i in range(n)]}, "", "%d prefixes" % n, refused=False)
    expect({"allowed_images": ["reg.example.com/%d/" % i for i in range(n + 1)]},
           "workload_policy.allowed_images[%d]" % n, "%d prefixes" % (n + 1))
    n = prefix["maxLength"]
    expect({"allowed_images": ["a" * n]}, "", "a prefix of %d" % n, refused=False)
    rule = expect({"allowed_images": ["a" * (n + 1)]}, "workload_policy.allowed_images[0]", "a prefix of %d" % (n + 1))
    got = re.search(r"([0-9]+) to ([0-9]+)", rule or "")
    if rule is not None and (not got or tuple(map(int, got.groups())) != (prefix["minLength"], n)):
        problems.append("workload_policy: prefixes: the document says %s to %s, the server's rule says %r" % (
            prefix["minLength"], n, rule))
    for bad in ("", "a b", "reg.io/é", 7):
        ok = isinstance(bad, str) and re.fullmatch(prefix["pattern"], bad)
        check(not ok, "the prefix pattern allows %r" % bad)
        expect({"allowed_images": [bad]}, "workload_policy.allowed_images[0]", "the prefix %r" % bad)
    expect({"allowed_images": None}, "workload_policy.allowed_images", "null allowed_images")
    for key in ("cpu", "memory"):
        q = c.resolve({"$ref": "#/components/schemas/%sQuantity" % key.capitalize()})["x-gwb-quantity"]
        top = quantity(q["max"])
        past = "%dm" % (top * 1000 + 1) if q["unit"] == "millicores" else "%d" % (top + 1)
        expect({key: {"default": q["max"], "max": q["max"]}}, "", "%s at its maximum" % key, refused=False)
        expect({key: None}, "", "%s null" % key, refused=False)
        expect({key: {"default": None, "max": None}}, "", "%s of nulls" % key, refused=False)
        for part in ("default", "max"):
            expect({key: {part: past}}, "workload_policy.%s.%s" % (key, part), "%s.%s %s" % (key, part, past))
            expect({key: {part: "0"}}, "workload_policy.%s.%s" % (key, part), "%s.%s 0" % (key, part))
        expect({key: {"default": "2", "max": "1"}}, "workload_policy.%s.default" % key, "%s: the default above the maximum" % key)
        expect({key: {"bogus": "1"}}, "workload_policy." + key, "%s with an unknown member" % key)
        expect({key: "1"}, "workload_policy." + key, "%s a quantity, not an object" % key)
    expect({"bogus": 1}, "workload_policy.bogus", "an unknown member")


def case_limits_match_the_server(tmp):
    srv = Server(tmp)
    try:
        c = fetch_contract(srv)
        problems = []
        sub_ref = "#/components/schemas/Submission"
        base = {"team": "alpha", "gpu_memory_mib": 1, "gpu_core_percent": 1}

        def dry(body):
            st, _, ans = srv.api("POST", "/v1/tasks?dry_run=true", ADMIN, body)
            return st, ans
        probe_object(c, dry, sub_ref, base, problems)

        def put(body):
            st, _, ans = srv.api("PUT", "/v1/teams/limits-probe", ADMIN, body)
            return st, ans
        team_base = {"gpu_memory_mib": 0, "gpu_core_percent": 0, "token": "probe-token-0"}
        probe_object(c, put, "#/components/schemas/TeamPut", team_base, problems)
        probe_policy(c, lambda pol: put({"gpu_memory_mib": 0, "gpu_core_percent": 0, "workload_policy": pol}),
                     problems)

        # A workload's limits, in dry runs of a team that may run the probe's image.
        st, _, ans = srv.api("PUT", "/v1/teams/wl-probe", ADMIN, {
            "gpu_memory_mib": 1024, "gpu_core_percent": 100,
            "workload_policy": {"allowed_images": ["reg.example.com/", "busybox", "reg.io:5000/", "localhost/",
                                                   "Reg.IO/", "a_b/", "host", "app", "x/", "a/"]}})
        check(st in (200, 201), "PUT wl-probe: %s %s" % (st, ans))
        wl_base = {"team": "wl-probe", "gpu_memory_mib": 1, "gpu_core_percent": 1}
        probe_workload(c, lambda w: dry(dict(wl_base, workload=w)), problems)
        st, ans = dry(dict(wl_base, experiment="normal", workload={"image": "busybox"}))
        if invalid_field(st, ans, "experiment") is None:
            problems.append("a workload with an experiment (the document's dependentSchemas): %s %s" % (st, ans))

        # The Idempotency-Key header's limits.
        key = c.resolve(c.doc["components"]["parameters"]["IdempotencyKey"])["schema"]
        for n, ok in ((key["minLength"], True), (key["maxLength"], True), (key["maxLength"] + 1, False)):
            st, _, ans = srv.api("POST", "/v1/tasks?dry_run=true", ADMIN, base, {"Idempotency-Key": "k" * n})
            got = invalid_field(st, ans, "Idempotency-Key") is None
            if got != ok:
                problems.append("Idempotency-Key of %d characters: answered %s %s" % (n, st, ans))
        # The query parameters of the list.
        list_op = c.doc["paths"]["/v1/tasks"]["get"]
        probe_query(c, srv, "/v1/tasks", list_op["parameters"], problems)
        # A log's: without a cluster a task has no Pod (409), and the query is read first.
        st, _, t = srv.api("POST", "/v1/tasks", ADMIN, base)
        check(st == 201, "a task for the log's query: %s %s" % (st, t))
        logs = "/v1/tasks/%s/logs" % t["id"]
        probe_query(c, srv, logs, c.doc["paths"]["/v1/tasks/{id}/logs"]["get"]["parameters"], problems, ok=409)

        # The defaults the document gives are the ones a submission gets.
        st, _, task = srv.api("POST", "/v1/tasks", ADMIN, base)
        check(st == 201, "a submission with the required fields only: %s %s" % (st, task))
        props = c.resolve({"$ref": sub_ref})["properties"]
        for name, p in props.items():
            p = c.resolve(p)
            if "default" in p:
                got = task["name"] if name == "name" else task["request"].get(name)
                if got != p["default"]:
                    problems.append("%s: the document's default is %r, the server's %r" % (name, p["default"], got))
        lp = {p["name"]: c.resolve(p)["schema"] for p in list_op["parameters"]}
        if "default" in lp["limit"]:
            for i in range(lp["limit"]["default"]):
                srv.api("POST", "/v1/tasks", ADMIN, base)
            st, _, page = srv.api("GET", "/v1/tasks")
            if len(page["tasks"]) != lp["limit"]["default"]:
                problems.append("limit: the document's default is %s, a page without it holds %d" % (
                    lp["limit"]["default"], len(page["tasks"])))
        check(not problems, "%d limits differ:\n%s" % (len(problems), "\n".join(problems)))
    finally:
        srv.stop()


# ---- case: the property-based pass ----

def props_count():
    if os.environ.get("GWB_PROPS_COUNT"):
        return int(os.environ["GWB_PROPS_COUNT"])
    return 3000 if os.environ.get("GWB_PROPS_LONG") == "1" else 300


def no_surrogates(s):
    return not any(0xD800 <= ord(ch) <= 0xDFFF for ch in s)


def image_name_ok(schema, v):
    """An image reference's name (registry and path, before its tag and digest) within the
    schema's x-gwb-name-max-bytes, where it has one."""
    if "x-gwb-name-max-bytes" not in schema:
        return True
    name = v.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name[:name.rindex(":")]
    return len(name.encode()) <= schema["x-gwb-name-max-bytes"]


class Gen:
    """Hypothesis strategies of the document's request values, valid ones."""

    def __init__(self, c):
        from hypothesis import strategies as st
        self.st = st
        self.c = c

    def value(self, schema):
        st = self.st
        s = self.c.resolve(schema)
        for k in ("oneOf", "anyOf"):
            if k in s:
                return st.one_of([self.value(x) for x in s[k]])
        if "enum" in s:
            return st.sampled_from(s["enum"])
        t = s.get("type")
        if t == "null":
            return st.none()
        if "x-gwb-quantity" in s:
            return self.quantity(s["x-gwb-quantity"])
        if t == "array":
            # a few items: a request of many long ones would pass the body's own bounds
            prefix = [self.value(x) for x in s.get("prefixItems", [])]
            hi = max(min(s.get("maxItems", 6), 6) - len(prefix), 0)
            rest = st.lists(self.value(s.get("items", {"type": "string"})),
                            min_size=min(max(s.get("minItems", 0) - len(prefix), 0), hi), max_size=hi)
            return st.tuples(st.tuples(*prefix), rest).map(lambda hr: list(hr[0]) + hr[1])
        if t == "object" and isinstance(s.get("additionalProperties"), dict) and not s.get("properties"):
            return st.dictionaries(self.value(s.get("propertyNames", {"type": "string"})),
                                   self.value(s["additionalProperties"]),
                                   max_size=min(s.get("maxProperties", 6), 6))
        if t == "integer":
            lo, hi = s.get("minimum", -(1 << 40)), s.get("maximum", 1 << 40)
            return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi]))
        if t == "boolean":
            return st.booleans()
        if t == "string":
            lo = s.get("minLength", 0)
            hi = min(s.get("maxLength", 64), s.get("x-gwb-max-bytes", 1 << 30))
            if hi >= 1024:  # a workload's texts: short, so that many fit its 16320 bytes
                hi = 64
            maxb = s.get("x-gwb-max-bytes")
            valid = self.c.validator(schema)
            if "pattern" in s:
                base = st.from_regex(s["pattern"], fullmatch=True)
            else:
                base = st.text(min_size=lo, max_size=hi)
            cap = hi if hi < min(s.get("maxLength", 64), s.get("x-gwb-max-bytes", 1 << 30)) else s.get("maxLength", 1 << 30)
            return base.filter(lambda v: lo <= len(v) <= cap
                               and no_surrogates(v) and (maxb is None or len(v.encode()) <= maxb)
                               and image_name_ok(s, v) and valid.is_valid(v))
        if t == "object":
            props = s.get("properties", {})
            req = s.get("required", [])
            d = st.fixed_dictionaries({k: self.value(props[k]) for k in req},
                                      optional={k: self.value(v) for k, v in props.items() if k not in req})
            deps = s.get("dependentSchemas", {})
            if deps:  # {"workload": {"not": {"required": ["experiment"]}}}: the other one goes
                def drop(v):
                    for k, dep in deps.items():
                        if k in v:
                            for other in dep.get("not", {}).get("required", []):
                                v.pop(other, None)
                    return v
                d = d.map(drop)
            if set(props) == {"default", "max"}:  # a policy's amounts: the default at most the maximum
                def order(v):
                    if v.get("default") is not None and v.get("max") is not None and \
                            quantity(v["default"]) > quantity(v["max"]):
                        v["default"], v["max"] = v["max"], v["default"]
                    return v
                d = d.map(order)
            return d
        raise Failure("no strategy for %s" % s)

    def quantity(self, q):
        """A quantity above 0 and at most q["max"], in one of the forms a client writes."""
        st = self.st
        top = quantity(q["max"])
        if q["unit"] == "millicores":
            return st.one_of(st.integers(1, int(top * 1000)).map(lambda m: "%dm" % m),
                             st.integers(1, int(top)).map(str))
        return st.one_of(st.integers(1, int(top)).map(str),
                         st.integers(1, int(top) >> 20).map(lambda m: "%dMi" % m),
                         st.integers(1, int(top) >> 30).map(lambda g: "%dGi" % g))


def broken_body(draw, st, c, schema, valid):
    """A mutation of the valid body that breaks the document (checked by the caller)."""
    s = c.resolve(schema)
    props = list(s.get("properties", {}))
    kind = draw(st.sampled_from(["drop", "unknown", "type", "range", "null", "long", "enum",
                                 "pattern", "not_object", "not_json", "not_utf8"]))
    body = dict(valid)
    name = draw(st.sampled_from(props))
    p = c.resolve(s["properties"][name])
    if kind == "drop" and s.get("required"):
        body.pop(draw(st.sampled_from(s["required"])), None)
    elif kind == "unknown":
        body[draw(st.from_regex(r"[a-z_]{1,12}", fullmatch=True).filter(lambda k: k not in props))] = 1
    elif kind == "type":
        body[name] = draw(st.sampled_from([[], {}, True, 1.5, "1", 7])) if p.get("type") != "string" \
            else draw(st.sampled_from([[], {}, True, 7]))
    elif kind == "range" and p.get("type") == "integer":
        body[name] = draw(st.sampled_from([p["minimum"] - 1, p["maximum"] + 1, 1 << 63, -(1 << 63)]))
    elif kind == "null":
        body[name] = None
    elif kind == "long" and p.get("type") == "string" and "maxLength" in p:
        body[name] = "a" * (p["maxLength"] + draw(st.integers(1, 300)))
    elif kind == "enum" and "enum" in p:
        body[name] = draw(st.text(max_size=8).filter(lambda v: v not in p["enum"]))
    elif kind == "pattern" and "pattern" in p:
        body[name] = draw(st.sampled_from(["", "UPPER", "-x", "x-", "a b", "\u0001", "é" * 70]))
    elif kind == "not_object":
        return draw(st.sampled_from([b"[]", b"\"x\"", b"1", b"null"])), True
    elif kind == "not_json":
        return json.dumps(body).encode()[:-1], True
    elif kind == "not_utf8":
        return json.dumps(body).encode().replace(b"{", b"{\"name\": \"\xff\xfe\", ", 1), True
    return json.dumps(body).encode(), False


TOKENS = {"admin": ADMIN, "alpha": ALPHA, "beta": BETA, "none": None, "bogus": "bogus-token-x"}
# Every operation is drawn, the ones that write (and so could write when they must not) more often.
WEIGHT = {"submitTask": 8, "putTeam": 4, "cancelTask": 3, "listTasks": 2}


class Req:
    """One generated request; valid: whether the document allows it (its token aside)."""

    def __init__(self, templ, method, op):
        self.templ, self.method, self.op = templ, method, op
        self.path = templ
        self.query, self.headers, self.body = [], {}, None
        self.valid = True
        self.who = None

    @property
    def target(self):
        return self.path + ("?" + urllib.parse.urlencode(self.query) if self.query else "")

    def __repr__(self):
        return "%s %s %s %s" % (self.who, self.method, self.target, self.body)


class Props:
    """The property-based pass: requests drawn from the document, each sent and its answer
    checked; the figures in stats, the failures in violations."""

    def __init__(self, srv, c, log):
        from hypothesis import strategies as st
        self.st, self.srv, self.c, self.g, self.log = st, srv, c, Gen(c), log
        self.ops = [(templ, m, op) for templ, item in c.doc["paths"].items()
                    for m, op in item.items() if m in METHODS
                    for _ in range(WEIGHT.get(op.get("operationId"), 1))]
        self.ids = []  # the tasks made so far, to name in paths
        self.stats = {"requests": 0, "5xx": 0, "no_cluster": 0, "violations": 0, "refused": 0,
                      "refused_writes": 0, "valid": 0, "by_status": {}}
        self.violations = []

    # ---- drawing ----

    def draw(self, draw):
        st = self.st
        templ, m, op = draw(st.sampled_from(self.ops))
        r = Req(templ, m.upper(), op)
        if r.method == "GET" and templ != "/v1/stream" and draw(st.integers(0, 9)) == 0:
            r.method = "HEAD"
        self.draw_path(draw, r)
        self.draw_params(draw, r)
        r.who = draw(st.sampled_from(["admin", "admin", "alpha", "beta", "none", "bogus"]))
        if TOKENS[r.who]:
            r.headers["Authorization"] = "Bearer " + TOKENS[r.who]
        if op.get("requestBody"):
            self.draw_body(draw, r)
        return r

    def draw_path(self, draw, r):
        st, g = self.st, self.g
        if "{id}" in r.templ:
            choice = draw(st.integers(0, 3))
            if choice < 2:
                # ids grows as tasks are made: an index of a fixed range keeps the draws the
                # same shape (hypothesis requires it)
                tid = self.ids[draw(st.integers(0, 1 << 16)) % len(self.ids)]
            elif choice == 2:
                tid = draw(g.value({"$ref": "#/components/schemas/TaskId"}))
            else:
                tid = urllib.parse.quote(draw(st.sampled_from(["T-UPPER", "x" * 40, "a", "é"])))
            r.path = r.path.replace("{id}", tid)
        if "{team}" in r.templ:
            names = g.value({"$ref": "#/components/schemas/TeamName"})
            if r.method == "PUT":  # never alpha's or beta's quota or token
                team = draw(st.one_of(st.sampled_from(["gamma", "delta"]),
                                      names.filter(lambda v: v not in ("alpha", "beta"))))
            else:
                team = draw(st.one_of(st.sampled_from(["alpha", "beta", "nobody"]), names))
            if draw(st.integers(0, 5)) == 0:
                team = draw(st.sampled_from(["UPPER", "-x", "a_b", "x" * 64]))
                r.valid = False
            r.path = r.path.replace("{team}", urllib.parse.quote(team, safe=""))

    def draw_params(self, draw, r):
        st, c = self.st, self.c
        params = [c.resolve(p) for p in r.op.get("parameters", [])]
        for p in params:
            if not draw(st.booleans()):
                continue
            schema = p["schema"]
            if p["in"] == "header" and "pattern" not in c.resolve(schema):
                schema = {"type": "string", "pattern": "^[!-~]{0,20}$"}  # a header's text
            v = draw(self.g.value(schema))
            if p["in"] == "query":
                r.query.append((p["name"], str(v).lower() if isinstance(v, bool) else str(v)))
            elif p["in"] == "header":
                r.headers[p["name"]] = v
        qp = [p for p in params if p["in"] == "query"]
        if draw(st.integers(0, 7)) == 0:
            # An unknown parameter (refused where an operation has query parameters: the
            # document's description), or a declared one with a value drawn to break.
            if not qp or draw(st.booleans()):
                names = [p["name"] for p in params]
                r.query.append((draw(st.from_regex(r"[a-z]{1,8}", fullmatch=True).filter(
                    lambda k: k not in names)), "1"))
                r.valid = r.valid and not qp
            else:
                p = draw(st.sampled_from(qp))
                v = draw(st.sampled_from(["", "-1", "0", "x", "99999999999999999999", "true1", "A"]))
                r.query = [kv for kv in r.query if kv[0] != p["name"]] + [(p["name"], v)]
                s = c.resolve(p["schema"])
                iv = int(v) if s.get("type") == "integer" and re.fullmatch(r"-?[0-9]+", v) else v
                r.valid = r.valid and not c.errors(s, iv)
        if "Idempotency-Key" in [p["name"] for p in params] and draw(st.integers(0, 7)) == 0:
            r.headers["Idempotency-Key"] = draw(st.sampled_from(["", "a b", "k" * 129, "é"]))
            r.valid = False

    def draw_body(self, draw, r):
        st, c = self.st, self.c
        schema = r.op["requestBody"]["content"]["application/json"]["schema"]
        v = draw(self.g.value(schema))
        if r.templ == "/v1/tasks" and draw(st.integers(0, 2)) > 0:
            v["team"] = draw(st.sampled_from(["alpha", "beta", v["team"]]))
        r.body = json.dumps(v).encode()
        if draw(st.integers(0, 2)) == 0:
            r.body, byte_broken = broken_body(draw, st, c, schema, v)
            try:
                broken = byte_broken or bool(c.errors(schema, json.loads(r.body)))
            except ValueError:
                broken = True
            r.valid = r.valid and not broken
        ct = draw(st.sampled_from(["application/json"] * 6 +
                                  ["application/json; charset=utf-8", "text/plain", None]))
        if ct:
            r.headers["Content-Type"] = ct
        r.valid = r.valid and ct not in (None, "text/plain")

    # ---- sending and checking ----

    def send(self, r):
        if r.path == "/v1/stream" and r.method == "GET":
            return stream_head(self.srv, r.target, r.headers)
        return self.srv.request(r.method, r.target, r.headers, r.body)

    def one(self, r):
        before = self.srv.snapshot()
        status, hd, data = self.send(r)
        s = self.stats
        s["requests"] += 1
        s["by_status"][status] = s["by_status"].get(status, 0) + 1
        self.log.write("%r valid=%d -> %d %s\n" % (r, r.valid, status, data[:200]))
        bad = self.c.answer_violations(r.method, r.target, status, hd, data)
        bad += self.stream_event(r, hd)
        no_cluster = b'"no_cluster"' in data or r.method == "HEAD"  # a HEAD has no body to say
        if status == 503 and r.path == "/v1/devices" and no_cluster:
            s["no_cluster"] += 1  # the documented answer of a server without a cluster
        elif status >= 500:
            bad.append("%r: %d, a 5xx: %s" % (r, status, data[:300]))
            s["5xx"] += 1
        bad += self.shape(r, status, data)
        if status >= 400 or r.method in ("GET", "HEAD"):
            after = self.srv.snapshot()
            if after != before:
                bad.append("%r: answered %d and wrote: %s -> %s" % (r, status, before, after))
                s["refused_writes"] += 1
            s["refused"] += status >= 400
        if status == 201 and r.path == "/v1/tasks":
            self.ids.append(json.loads(data)["id"])
        s["violations"] += len(bad)
        self.violations += bad

    def stream_event(self, r, hd):
        """A stream's first event against the schema of its type."""
        if "x-first-event" not in hd:
            return []
        ev = hd["x-first-event"]
        events = self.c.doc["paths"]["/v1/stream"]["get"]["x-gwb-events"]
        if ev is None or ev[0] not in events:
            return ["%r: the stream's first event %r is not one the document names" % (r, ev)]
        return ["%r: event %s%s" % (r, ev[0], e) for e in self.c.errors(events[ev[0]], json.loads(ev[1]))]

    def shape(self, r, status, data):
        """An authorised request (the admin, or a team's own token) valid by the document is
        never refused for its shape; an invalid one is never accepted."""
        if r.who not in ("admin", "alpha", "beta") or not r.path.startswith("/v1/"):
            return []
        self.stats["valid"] += r.valid
        if r.valid and status in (400, 413, 415):
            return ["%r: valid by the document, refused %d: %s" % (r, status, data[:300])]
        if not r.valid and 200 <= status < 300:
            return ["%r: invalid by the document, accepted %d" % (r, status)]
        return []


def case_props(tmp):
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st
    from hypothesis.configuration import set_hypothesis_home_dir
    set_hypothesis_home_dir(os.path.join(tmp, ".hypothesis"))  # not a .hypothesis/ in the cwd
    srv = Server(tmp)
    log = open(os.path.join(tmp, "requests.log"), "w")  # kept when the case fails
    try:
        p = Props(srv, fetch_contract(srv), log)
        code, _, t = srv.api("POST", "/v1/tasks", ALPHA, {"team": "alpha", "gpu_memory_mib": 1, "gpu_core_percent": 1})
        check(code == 201, "the first task: %s" % code)
        p.ids.append(t["id"])
        n = props_count()
        t0 = time.monotonic()

        @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                  phases=[Phase.generate])
        @given(st.composite(p.draw)())
        def run(r):
            try:  # never raise into hypothesis: every request counts once, none is replayed
                p.one(r)
            except Exception:
                p.stats["violations"] += 1
                p.violations.append("%r: %s" % (r, traceback.format_exc()))
        run()
        s = p.stats
        print("    # %d requests in %.1f s: %d 5xx (besides %d documented 503 no_cluster), %d violations, "
              "%d refused, %d refused that wrote, %d valid; by status %s" % (
                  s["requests"], time.monotonic() - t0, s["5xx"], s["no_cluster"], s["violations"],
                  s["refused"], s["refused_writes"], s["valid"], dict(sorted(s["by_status"].items()))))
        check(s["requests"] >= n * 0.9, "only %d of %d requests were sent" % (s["requests"], n))
        check(not p.violations, "%d violations (the first 30):\n%s" % (len(p.violations), "\n".join(p.violations[:30])))
    finally:
        log.close()
        rc = srv.stop()
        check(rc == 0, "gwb-server exited %s; see %s" % (rc, srv.log))


def stream_head(srv, target, headers):
    """GET /v1/stream: the status and headers, and for a 200 the first event's data (the
    stream itself never ends), checked against its event type's schema."""
    s = socket.create_connection((srv.host, srv.port), timeout=10)
    try:
        lines = "".join("%s: %s\r\n" % kv for kv in headers.items())
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (target, lines)).encode("utf-8", "surrogateescape"))
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        status_line, *hlines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        hd = {}
        for line in hlines:
            k, _, v = line.partition(":")
            hd[k.strip().lower()] = v.strip()
        if status != 200:
            length = int(hd.get("content-length", "0"))
            while len(rest) < length:
                chunk = s.recv(65536)
                if not chunk:
                    break
                rest += chunk
            return status, hd, rest[:length]
        while b"data: " not in rest or b"\n\n" not in rest.split(b"data: ", 1)[1]:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        # The first event (chunked framing aside: its lines are whole within one chunk).
        m = re.search(rb"event: ([a-z]+)\ndata: ([^\n]*)\n", rest)
        hd["x-first-event"] = (m.group(1).decode(), m.group(2)) if m else None
        return status, hd, b""
    finally:
        s.close()


# ---- case: gwbctl and gwb-load send what the document allows ----

class Recorder(http.server.ThreadingHTTPServer):
    """A proxy in front of the server that records every request (method, target, headers,
    body) and passes the real answer back."""
    daemon_threads = True

    def __init__(self, upstream):
        self.upstream = upstream
        self.seen = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), RecordingHandler)


class RecordingHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def relay(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "content-length")}
        with self.server.lock:
            self.server.seen.append((self.command, self.path, headers, body))
        u = self.server.upstream
        conn = http.client.HTTPConnection(u.host, u.port, timeout=30)
        try:
            conn.request(self.command, self.path, body=body if n or self.command in ("POST", "PUT") else None, headers=headers)
            r = conn.getresponse()
            data = r.read()
            self.send_response(r.status)
            for k, v in r.getheaders():
                if k.lower() not in ("content-length", "connection", "date", "server", "transfer-encoding"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data) if self.command != "HEAD" else int(r.getheader("Content-Length") or 0)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        finally:
            conn.close()

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = relay


def request_violations(c, method, target, headers, body):
    """Every way a request breaks the document (a list of texts)."""
    path, _, q = target.partition("?")
    templ, item, op = c.operation(method, path)
    where = "%s %s" % (method, target)
    if op is None:
        return ["%s: no such operation in the document" % where]
    out = []
    params = {(p["in"], p["name"]): p for p in map(c.resolve, item.get("parameters", []) + op.get("parameters", []))}
    segs = path.split("/")[1:]
    for a, b in zip(templ.split("/")[1:], segs):
        if a.startswith("{"):
            out += ["%s: path %s%s" % (where, a, e) for e in c.errors(params[("path", a[1:-1])]["schema"], urllib.parse.unquote(b))]
    for name, value in urllib.parse.parse_qsl(q, keep_blank_values=True):
        p = params.get(("query", name))
        if p is None:
            out.append("%s: query parameter %s is not in the document" % (where, name))
            continue
        s = c.resolve(p["schema"])
        v = value
        if s.get("type") == "integer":
            try:
                v = int(value)
            except ValueError:
                pass
        out += ["%s: query %s%s" % (where, name, e) for e in c.errors(s, v)]
    for (where_in, name), p in params.items():
        if where_in == "header":
            v = next((hv for hk, hv in headers.items() if hk.lower() == name.lower()), None)
            if v is not None:
                out += ["%s: header %s%s" % (where, name, e) for e in c.errors(p["schema"], v)]
    rb = op.get("requestBody")
    if rb is None:
        if body:
            out.append("%s: a body on an operation that takes none" % where)
        return out
    ct = next((hv for hk, hv in headers.items() if hk.lower() == "content-type"), "")
    if ct.split(";")[0].strip().lower() != "application/json":
        out.append("%s: Content-Type %r" % (where, ct))
    try:
        value = json.loads(body)
    except ValueError:
        return out + ["%s: the body is not JSON" % where]
    return out + ["%s: body%s" % (where, e) for e in c.errors(rb["content"]["application/json"]["schema"], value)]


def run_tool(argv, env, what):
    r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check(r.returncode == 0, "%s exited %d:\n%s" % (what, r.returncode, r.stdout.decode(errors="replace")[-2000:]))
    return r.stdout.decode(errors="replace")


def case_clients_send_what_the_document_allows(tmp):
    srv = Server(tmp)
    rec = Recorder(srv)
    th = threading.Thread(target=rec.serve_forever, daemon=True)
    th.start()
    try:
        c = fetch_contract(srv)
        url = "http://127.0.0.1:%d" % rec.server_address[1]
        env = dict(os.environ, GWB_URL=url, GWB_TOKEN=ADMIN)
        ctl = os.path.join(bin_dir(), "gwbctl")
        out = run_tool([ctl, "-o", "json", "submit", "--team", "alpha", "--mem", "512", "--core", "5", "--count", "2",
                        "--duration", "120", "--qos", "BE", "--experiment", "overlimit", "--name", "ctl task",
                        "--key", "ctl-key-1"], env, "gwbctl submit")
        tid = json.loads(out)["id"]
        for argv in (["submit", "--team", "alpha", "--mem", "512", "--core", "5", "--dry-run"],
                     ["submit", "--team", "alpha", "--mem", "512", "--core", "5"],
                     ["get", tid], ["events", tid], ["list"], ["list", "--team", "alpha", "--state", "queued", "--limit", "5"],
                     ["list", "--active", "--team", "alpha"], ["teams"], ["teams", "alpha"],
                     ["teams", "set", "gamma", "--mem", "2048", "--core", "50", "--token", "gamma-token-1"],
                     ["teams", "set", "gamma", "--mem", "4096", "--core", "60"],
                     ["cancel", tid], ["cancel", "--all", "--team", "alpha", "--yes"], ["audit"], ["audit", "repair"]):
            run_tool([ctl, "-o", "json"] + argv, env, "gwbctl " + " ".join(argv))
        for argv in (["logs", tid, "--tail", "5"], ["logs", "-f", tid]):  # no Pod without a cluster
            r = subprocess.run([ctl, "-o", "json"] + argv, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60)
            check(r.returncode != 0 and b"no_pod_yet" in r.stdout, "gwbctl %s: exited %d: %s" % (
                " ".join(argv), r.returncode, r.stdout.decode(errors="replace")[-500:]))
        n_ctl = len(rec.seen)
        load = os.path.join(bin_dir(), "gwb-load")
        run_tool([load, "--url", url, "--token", ADMIN, "--connections", "2", "--count", "40", "--teams", "alpha,beta",
                  "--mix", "submit=80,replay=10,cancel=10", "--mem", "16", "--core", "1", "--task-seconds", "1",
                  "--seed", "7", "--json"], env, "gwb-load")
        problems = []
        for method, target, headers, body in rec.seen:
            problems += request_violations(c, method, target, headers, body)
        check(n_ctl >= 15 and len(rec.seen) >= n_ctl + 40, "only %d requests recorded (%d of gwbctl)" % (len(rec.seen), n_ctl))
        check(not problems, "%d requests break the document:\n%s" % (len(problems), "\n".join(problems[:30])))
        bodies = sum(1 for s in rec.seen if s[3])
        print("    # %d requests (%d of gwbctl, %d with a body) held against the document" % (len(rec.seen), n_ctl, bodies))
    finally:
        rec.shutdown()
        rec.server_close()
        srv.stop()


# ---- the runner ----

CASES = [
    ("document_holds_together", case_document_holds_together),
    ("limits_match_the_server", case_limits_match_the_server),
    ("props", case_props),
    ("clients_send_what_the_document_allows", case_clients_send_what_the_document_allows),
]


def main():
    filt = sys.argv[1] if len(sys.argv) > 1 else ""
    chosen = [(n, f) for n, f in CASES if filt in "test_openapi." + n]
    passed = failed = 0
    tmp = tempfile.mkdtemp(prefix="gwb-openapi-")
    for name, fn in chosen:
        folder = os.path.join(tmp, name)
        os.makedirs(folder)
        t0 = time.monotonic()
        try:
            fn(folder)
            ok = True
        except Exception as e:
            ok = False
            why = str(e) if isinstance(e, Failure) else traceback.format_exc()
        ms = int((time.monotonic() - t0) * 1000)
        keep = os.environ.get("GWB_TEST_KEEP") == "1"  # the logs of a passing case too
        if ok:
            passed += 1
            if not keep:
                shutil.rmtree(folder, ignore_errors=True)
            print("ok   test_openapi.%s (%d ms)" % (name, ms))
        else:
            failed += 1
            print("FAIL test_openapi.%s (%d ms)" % (name, ms))
            print("    %s" % why.strip().replace("\n", "\n    "))
            print("    logs: %s" % folder)
        sys.stdout.flush()
    if not failed and os.environ.get("GWB_TEST_KEEP") != "1":
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
