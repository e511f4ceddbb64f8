"""The API's OpenAPI document as the Python tests hold answers and requests to it (the C
harness's check is tests/harness/h_schema.c): Debian's python3-jsonschema, Draft 2020-12, with
the document's own $refs, and x-gwb-max-bytes (a limit in bytes JSON Schema cannot say).
Imported by tests/e2e/test_openapi.py and tests/e2e/test_page.py from the folder they are
installed in."""
import json
import urllib.parse

import jsonschema
from jsonschema import Draft202012Validator


class Contract:
    def __init__(self, doc):
        self.doc = doc
        self.resolver = jsonschema.RefResolver.from_schema(doc)
        self.validators = {}

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            _, node = self.resolver.resolve(node["$ref"])
        return node

    def validator(self, schema):
        key = json.dumps(schema, sort_keys=True)
        v = self.validators.get(key)
        if v is None:
            v = Draft202012Validator(schema, resolver=self.resolver)
            self.validators[key] = v
        return v

    def errors(self, schema, value):
        """Why value breaks schema (a list of texts with the JSON pointer), [] when it does not;
        x-gwb-max-bytes (a limit JSON Schema cannot say) is checked too."""
        out = ["%s: %s" % ("/" + "/".join(str(p) for p in e.absolute_path), e.message)
               for e in self.validator(schema).iter_errors(value)]
        s = self.resolve(schema)
        if isinstance(value, dict) and isinstance(s, dict):
            for k, sub in s.get("properties", {}).items():
                sub = self.resolve(sub)
                if isinstance(value.get(k), str) and "x-gwb-max-bytes" in sub:
                    if len(value[k].encode("utf-8", "surrogatepass")) > sub["x-gwb-max-bytes"]:
                        out.append("/%s: more than %d bytes" % (k, sub["x-gwb-max-bytes"]))
        return out

    def operation(self, method, path):
        """(path template, path item, operation) for a request, or (None, None, None)."""
        segs = [s for s in urllib.parse.unquote(path.split("?")[0]).split("/")[1:]]
        if segs and segs[-1] == "":
            segs = segs[:-1]
        for templ, item in self.doc["paths"].items():
            t = [s for s in templ.split("/")[1:] if s != ""]
            if len(t) != len(segs):
                continue
            if all(a.startswith("{") or a == b for a, b in zip(t, segs)):
                m = "get" if method == "HEAD" else method.lower()
                return templ, item, item.get(m)
        return None, None, None

    def front_door_refusal(self, status, headers, body):
        """Whether the answer is one of the front door's refusals (x-gwb-front-door): they can
        answer any request, before it is routed, and are documented once for every operation."""
        resp = self.doc.get("x-gwb-front-door", {}).get(str(status))
        if resp is None or not body:
            return False
        resp = self.resolve(resp)
        try:
            value = json.loads(body)
        except ValueError:
            return False
        media = resp.get("content", {}).get("application/json")
        if media is None or self.errors(media["schema"], value):
            return False
        return all(headers.get(name.lower()) is not None
                   for name, h in resp.get("headers", {}).items() if self.resolve(h).get("required"))

    def answer_violations(self, method, path, status, headers, body):
        """Every way the answer breaks the document (a list of texts)."""
        if self.front_door_refusal(status, headers, body):
            return []
        templ, item, op = self.operation(method, path)
        where = "%s %s %d" % (method, path, status)
        if op is None:
            if status < 400:
                return ["%s: an answer below 400 to a request the document has no operation for" % where]
            return self.error_body(where, headers, body)
        resp = op["responses"].get(str(status))
        if resp is None:
            if status in (405, 501):
                return self.error_body(where, headers, body)
            return ["%s (%s): a status the document does not list for it" % (where, templ)]
        resp = self.resolve(resp)
        out = []
        for name, h in resp.get("headers", {}).items():
            h = self.resolve(h)
            v = headers.get(name.lower())
            if h.get("required") and v is None:
                out.append("%s: the header %s is missing" % (where, name))
            if v is not None and "schema" in h:
                out += ["%s: header %s%s" % (where, name, e) for e in self.errors(h["schema"], v)]
        media = resp.get("content", {}).get("application/json")
        if media is None or method == "HEAD" or not body:
            if method == "HEAD" and body:
                out.append("%s: a HEAD answer with a body" % where)
            return out
        ct = headers.get("content-type", "")
        if ct.split(";")[0].strip().lower() != "application/json":
            return out + ["%s: Content-Type %r, the document says application/json" % (where, ct)]
        try:
            value = json.loads(body)
        except ValueError:
            return out + ["%s: the body is not JSON" % where]
        return out + ["%s (%s): %s" % (where, templ, e) for e in self.errors(media["schema"], value)]

    def error_body(self, where, headers, body):
        if not body or "json" not in headers.get("content-type", ""):
            return []
        try:
            value = json.loads(body)
        except ValueError:
            return ["%s: the body is not JSON" % where]
        return ["%s: %s" % (where, e) for e in self.errors({"$ref": "#/components/schemas/Error"}, value)]
