# SPDX-License-Identifier: Apache-2.0
"""Query the demo's VictoriaMetrics (or Prometheus) and print a summary table.

  /usr/bin/python3 report.py --vm http://127.0.0.1:PORT --accepted '{"policy": 31, ...}' \
      --dests policy,judge,ghost,slow [--timeout 30]
  /usr/bin/python3 report.py --prometheus http://127.0.0.1:PORT ...   (the same tables)

`--accepted` is the server's own count of accepted connections per destination
(ground truth, shown next to the shim's count of connections opened), `--client`
the client's own result (its requests per destination are the truth next to
connect_total); the report first waits (bounded) until VictoriaMetrics shows at
least that many for those destinations.

With --vm the series are the shim's own OTLP names, which VictoriaMetrics
keeps; with --prometheus they are what nemolens-run's Prometheus endpoint
made of them (docs/export.md, "Prometheus"). The queries below name metrics
and attributes as the shim does either way, and the backend classes turn
them into the series and labels of their store.
"""
import argparse
import datetime
import json
import math
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

CONNECT = "gym.http.connection_pool.connect_total"
OPENED = "nemolens.connection.opened"
QUEUE = "gym.http.connection_pool.queue_duration_ms"
DEST = "nemo.gym.http.destination.server.name"
OUTCOME = "nemo.gym.http.connection_pool.queue_outcome"
CONSTRAINT = "nemo.gym.http.connection_pool.queue_constraint"
SERVER = "http.server.request.duration"
CLIENT = "http.client.request.duration"
ROUTE, METHOD, STATUS = "http.route", "http.request.method", "http.response.status_code"
OPERATION, TTFC = "gen_ai.client.operation.duration", "gen_ai.client.operation.time_to_first_chunk"
TOKENS, TTFT = "gen_ai.client.token.usage", "gen_ai.server.time_to_first_token"
MODEL, TOKEN_TYPE = "gen_ai.request.model", "gen_ai.token.type"
GYM_TOKENS, GYM_TOKEN_TYPE = "gym.model_call.tokens", "nemo.gym.model_call.token.type"
ROLLOUT, VERIFY, SUCCESS = "gym.rollout.duration_ms", "gym.verify.duration_ms", "gym.verify.success_rate"


class VM:
    """VictoriaMetrics fed over OTLP: series and labels keep the shim's names."""
    title = "VictoriaMetrics"
    arrived = "ingested"

    def __init__(self, url):
        self.url = url
        self.missing = set()

    def get(self, path, **params):
        q = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}{'?' + q if q else ''}", timeout=10) as r:
            body = r.read()
        return json.loads(body) if body.strip().startswith(b"{") else None

    def query(self, promql):
        body = self.get("/api/v1/query", query=promql)
        if body.get("status") != "success":
            raise RuntimeError(f"{promql}: {body}")
        return body["data"]["result"]

    def by(self, promql, *attrs):
        labels = [self.label(a) for a in attrs]
        return {tuple(r["metric"].get(label) for label in labels) if len(labels) > 1 else r["metric"].get(labels[0]):
                float(r["value"][1]) for r in self.query(promql)}

    def flush(self):
        self.get("/internal/force_flush")

    # The translation: an instrument's name plus a histogram's _bucket, _sum
    # or _count, and an attribute's key, as this store names them.
    def series(self, metric, suffix=""):
        return metric + suffix

    def label(self, attr):
        return attr

    def labels(self, *attrs):
        return ", ".join(self.label(a) for a in attrs)

    def sel(self, metric, suffix="", service=None):
        """The selector of one series name, of one service.name or of all."""
        where = f', {self.label("service.name")}="{service}"' if service else ""
        return f'{{__name__="{self.series(metric, suffix)}"{where}}}'

    def names_under(self, prefix):
        names = self.get("/api/v1/label/__name__/values")["data"]
        return [n for n in names if n.startswith(self.series(prefix))]

    def labels_line(self, services):
        return (f"labels: {DEST}, {OUTCOME}, le; resource: service.name={','.join(sorted(services))}, "
                "service.instance.id, process.pid, ...")


class Prometheus(VM):
    """Prometheus scraping nemolens-run's endpoints, whose names follow the
    OpenTelemetry specification's Prometheus compatibility: invalid
    characters as one '_', the unit spelled out and appended, _total after
    a counter's name. Which unit a metric has is the shim's business, so
    the series name is not guessed: it is looked up among the names
    Prometheus holds, as the cleaned name followed by the suffixes the
    translation may add."""
    title = "Prometheus"
    arrived = "scraped"
    # The units nemolens-run spells out (promname.c); "ratio" is a gauge's "1".
    UNITS = ("days|hours|minutes|seconds|milliseconds|microseconds|nanoseconds|bytes|kibibytes|mebibytes|"
             "gibibytes|tebibytes|kilobytes|megabytes|gigabytes|terabytes|meters|volts|amperes|joules|watts|"
             "grams|celsius|hertz|percent|ratio")
    PER = "second|minute|hour|day|week|month|year"
    # Resource attributes are not labels of the samples, except these two,
    # which every sample carries under Prometheus' own names.
    RESOURCE = {"service.name": "job", "service.instance.id": "instance"}

    def __init__(self, url):
        super().__init__(url)
        self.known = []

    def flush(self):
        """What VictoriaMetrics' force_flush is to the report: the values the
        processes hold now become queryable. Here that takes a scrape of
        every target that starts after now (bounded: a target that is never
        scraped again shows what it had)."""
        since = time.time()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            targets = self.get("/api/v1/targets", state="active")["data"]["activeTargets"]
            if all(self.scraped_at(t["lastScrape"]) > since for t in targets):
                return
            time.sleep(0.2)

    @staticmethod
    def scraped_at(stamp):
        """Seconds since the epoch of an RFC 3339 time as Prometheus writes it
        (nanoseconds, 'Z' or an offset); Python reads microseconds at most."""
        m = re.fullmatch(r"([^.]+?)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", stamp)
        if not m:
            return 0.0
        base = datetime.datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
        return base.timestamp() + float("0." + (m.group(2) or "0"))

    @staticmethod
    def clean(name):
        return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", name))

    def series(self, metric, suffix=""):
        stem = self.clean(metric)
        if stem[:1].isdigit():
            stem = "_" + stem
        stem = stem[:-len("_total")] if stem.endswith("_total") else stem
        name = re.compile(re.escape(stem) + rf"(?:_(?:{self.UNITS}))?(?:_per_(?:{self.PER}))?(?:_total)?"
                          + re.escape(suffix))
        hits = [n for n in self.known if name.fullmatch(n)]
        if not hits:
            # A series seen for the first time since the last look.
            self.known = self.get("/api/v1/label/__name__/values")["data"]
            hits = [n for n in self.known if name.fullmatch(n)]
        if len(hits) > 1:
            raise RuntimeError(f"{metric}{suffix} is ambiguous in Prometheus: {', '.join(hits)}")
        if not hits:
            # Not there (yet): a name that matches nothing, and said so at the end.
            self.missing.add(metric + suffix)
            return stem + suffix
        self.missing.discard(metric + suffix)
        return hits[0]

    def label(self, attr):
        if attr in self.RESOURCE:
            return self.RESOURCE[attr]
        key = self.clean(attr)
        return "key_" + key if key[:1].isdigit() else key

    def names_under(self, prefix):
        self.known = self.get("/api/v1/label/__name__/values")["data"]
        return [n for n in self.known if n.startswith(self.clean(prefix))]

    def labels_line(self, services):
        return (f"labels: {self.labels(DEST, OUTCOME)}, le, job={','.join(sorted(services))}, instance; "
                "the rest of the resource (process_pid, ...) only on target_info")


def fmt_n(v):
    return "-" if v is None else str(int(v))


def fmt_ms(v):
    if v is None or math.isnan(v) or math.isinf(v):
        return "-"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def table(headers, rows, aligns):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    def line(cells):
        return "  " + "  ".join(str(c).ljust(w) if a == "<" else str(c).rjust(w)
                                for c, w, a in zip(cells, widths, aligns)).rstrip()
    out = [line(headers), "  " + "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    store = ap.add_mutually_exclusive_group(required=True)
    store.add_argument("--vm", help="VictoriaMetrics base URL")
    store.add_argument("--prometheus", help="Prometheus base URL")
    ap.add_argument("--accepted", default="{}")
    ap.add_argument("--expected", default="{}", help="known connects per destination without a server count")
    ap.add_argument("--dests", required=True)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--client", help="the client's own result (client.py's JSON): ground truth per route")
    ap.add_argument("--pool-dests", default="", help="name=host:port,...: which destination each of the "
                    "client's pool-wait keys is")
    args = ap.parse_args()
    vm = VM(args.vm) if args.vm else Prometheus(args.prometheus)
    try:
        report(vm, args)
    except (OSError, RuntimeError, ValueError, urllib.error.URLError) as e:
        print(f"report: cannot query {vm.title}: {e}", file=sys.stderr)
        sys.exit(1)


def report(vm, args):
    dests = args.dests.split(",")
    accepted = json.loads(args.accepted)
    expected = dict(json.loads(args.expected), **accepted)

    # The client's acquisitions and connections; the servers' own are shown
    # after the table. The client's adapter counts connect_total as NeMo Gym
    # does, one per request; its connect() calls are nemolens.connection.opened.
    client_result = json.load(open(args.client)) if args.client else {}
    dest_of = dict(d.split("=", 1)[::-1] for d in args.pool_dests.split(",")) if args.pool_dests else {}
    requests = {}
    for hostport, n in client_result.get("requests", {}).items():
        d = dest_of.get(hostport, "external")
        requests[d] = requests.get(d, 0) + n
    client = "demo-client"
    deadline = time.monotonic() + args.timeout
    t0 = time.monotonic()
    while True:
        vm.flush()
        connects = vm.by(f'sum by ({vm.labels(DEST)}) ({vm.sel(CONNECT, "", client)})', DEST)
        opened = vm.by(f'sum by ({vm.labels(DEST)}) ({vm.sel(OPENED, "", client)})', DEST)
        if (all(connects.get(d, 0) >= n for d, n in requests.items()) and
                all(opened.get(d, 0) >= n for d, n in expected.items())) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    waited = time.monotonic() - t0

    dest = vm.labels(DEST)
    queued = vm.by(f'sum by ({vm.labels(DEST, OUTCOME)}) ({vm.sel(QUEUE, "_count", client)})', DEST, OUTCOME)
    wsum = vm.by(f'sum by ({dest}) ({vm.sel(QUEUE, "_sum", client)})', DEST)
    wcount = vm.by(f'sum by ({dest}) ({vm.sel(QUEUE, "_count", client)})', DEST)
    p50 = vm.by(f'histogram_quantile(0.5, sum by (le, {dest}) ({vm.sel(QUEUE, "_bucket", client)}))', DEST)
    p99 = vm.by(f'histogram_quantile(0.99, sum by (le, {dest}) ({vm.sel(QUEUE, "_bucket", client)}))', DEST)
    servers = vm.by(f'sum by ({dest}) ({vm.sel(CONNECT, "", "demo-servers")})', DEST)
    names = vm.names_under("gym.")
    services = vm.by(f'count by ({vm.labels("service.name")}) ({vm.sel(CONNECT)})', "service.name")

    def match(got, truth):
        return "" if truth is None or got is None else ("ok" if int(got) == int(truth) else "MISMATCH")

    others = sorted((set(connects) | set(opened)) - set(dests))
    rows = []
    for d in dests + others:
        c, o = connects.get(d), opened.get(d)
        truth = accepted.get(d, expected.get(d))
        n = wcount.get(d)
        mean = wsum[d] / n if n else None
        share = f"{n / c:.2f}" if n and c else "-"
        rows.append([d, fmt_n(c), fmt_n(requests.get(d)), match(c, requests.get(d)), fmt_n(o), fmt_n(truth),
                     match(o, truth), fmt_n(queued.get((d, "ok"))), fmt_n(queued.get((d, "abandoned"))), share,
                     fmt_ms(p50.get(d)), fmt_ms(p99.get(d)), fmt_ms(mean)])
    print(f"{vm.title} series ({waited:.1f} s until {vm.arrived}): {', '.join(sorted(names))}")
    print("  " + vm.labels_line(services))
    print()
    print(table(["destination", "connect_total", "requests", "", "opened", "truth", "", "queued ok", "abandoned",
                 "share", "wait p50 ms", "p99 ms", "mean ms"], rows, "<>><>><>>>>>>"))
    print()
    print("  connect_total = pool acquisitions the shim counted (one per request, as NeMo Gym counts them);")
    print("  requests = the client's own count; opened = the client's connect() calls the shim counted")
    print("  (nemolens.connection.opened); truth = connections the server accepted (policy, judge) or the")
    print("  client's attempts (ghost, slow); queued = acquisitions that waited (queue_duration_ms);")
    print("  share = queued / connect_total (the dashboard's 'Share of acquisitions that queued', at most 1);")
    print("  p50/p99 = histogram_quantile over the _bucket series (linear within a bucket)")
    if servers:
        print("  the servers' own connections: " + ", ".join(f"{d} {fmt_n(n)}" for d, n in sorted(servers.items())) +
              " (server.py fills the slow listener's accept queue by connecting to it itself;")
        print("  the server has no destination rules, so those count as external)")
    bad = [r for r in rows if "MISMATCH" in (r[3], r[6])]
    if args.client:
        if args.pool_dests:
            bad += pool_report(vm, client_result, dest_of)
        bad += http_report(vm, client_result, args.timeout)
        bad += model_report(vm, client_result, args.timeout)
    if vm.missing:
        # Said, not hidden: the figures of these show as "-" above.
        print()
        print(f"  not in {vm.title}: {', '.join(sorted(vm.missing))}")
    if bad:
        sys.exit(2)


def pool_report(vm, client, dest_of):
    """Pool waits per destination, outcome and constraint, next to what the
    client's own aiohttp trace signals saw."""
    key = vm.labels(DEST, OUTCOME, CONSTRAINT)
    count = vm.by(f'sum by ({key}) ({vm.sel(QUEUE, "_count", "demo-client")})', DEST, OUTCOME, CONSTRAINT)
    total = vm.by(f'sum by ({key}) ({vm.sel(QUEUE, "_sum", "demo-client")})', DEST, OUTCOME, CONSTRAINT)
    truth = {}
    for k, (n, ms) in client.get("pool", {}).items():
        hostport, outcome = k.rsplit(" ", 1)
        t = truth.setdefault((dest_of.get(hostport, "external"), outcome), [0, 0.0])
        t[0] += n
        t[1] += ms
    rows, bad = [], []
    seen = set()
    for (d, o, c) in sorted(count):
        seen.add((d, o))
        t = truth.get((d, o)) if c != "unknown" else None
        match = "" if t is None else ("ok" if int(count[(d, o, c)]) == t[0] else "MISMATCH")
        if match == "MISMATCH":
            bad.append((d, o, c))
        rows.append([d, o, c, fmt_n(count[(d, o, c)]), fmt_n(t[0] if t else None), match,
                     fmt_ms(total.get((d, o, c))), fmt_ms(t[1] if t else None)])
    for (d, o), t in sorted(truth.items()):
        if (d, o) not in seen:
            bad.append((d, o))
            rows.append([d, o, "-", "0", fmt_n(t[0]), "MISMATCH", "-", fmt_ms(t[1])])
    print()
    print("Pool waits of the client (gym.http.connection_pool.queue_duration_ms, from the Python adapter):")
    print()
    print(table(["destination", "outcome", "constraint", "waits", "client saw", "", "total ms", "client ms"],
                rows, "<<<>><>>"))
    print()
    print("  client saw = the client's own aiohttp trace signals (on_connection_queued_start/_end)")
    return bad


def http_report(vm, client, timeout):
    """Requests per route on the servers, against what the client saw."""
    # client target name -> (route, method) it was sent to
    targets = {"policy": ("/v1/work", "GET"), "judge": ("/v1/work", "GET"), "agent": ("/run", "POST"),
               "resources": ("/verify", "POST"), "model": ("/v1/chat/completions", "POST")}
    truth = {}
    for name, (route, method) in targets.items():
        n_ok = client["ok"].get(name, 0)
        if n_ok:
            truth[(route, method, "200")] = truth.get((route, method, "200"), 0) + n_ok
        for err, n in client["failed"].get(name, {}).items():
            if err.startswith("http_"):
                key = (route, method, err[5:])
                truth[key] = truth.get(key, 0) + n
    sel = "demo-servers"
    deadline = time.monotonic() + timeout
    while True:
        vm.flush()
        counts = vm.by(f'sum by ({vm.labels(ROUTE, METHOD, STATUS)}) ({vm.sel(SERVER, "_count", sel)})',
                       ROUTE, METHOD, STATUS)
        if all(counts.get(k, 0) >= n for k, n in truth.items()) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    # Percentiles per row: route, method and status.
    per = f"le, {vm.labels(ROUTE, METHOD, STATUS)}"
    p50 = vm.by(f'histogram_quantile(0.5, sum by ({per}) ({vm.sel(SERVER, "_bucket", sel)}))', ROUTE, METHOD, STATUS)
    p99 = vm.by(f'histogram_quantile(0.99, sum by ({per}) ({vm.sel(SERVER, "_bucket", sel)}))', ROUTE, METHOD, STATUS)
    rows, bad = [], []
    for key in sorted(set(counts) | set(truth)):
        route, method, status = key
        c, t = counts.get(key), truth.get(key)
        match = "" if t is None else ("ok" if c is not None and int(c) == t else "MISMATCH")
        if match == "MISMATCH":
            bad.append(key)
        rows.append([route, method, status, fmt_n(c), fmt_n(t), match,
                     fmt_ms(p50.get(key, math.nan) * 1000), fmt_ms(p99.get(key, math.nan) * 1000)])
    print()
    print("HTTP requests on the servers (http.server.request.duration, derived from the socket bytes):")
    print()
    print(table(["route", "method", "status", "requests", "client saw", "", "p50 ms", "p99 ms"], rows,
                "<<<>><>>"))
    per_dest = vm.by(f'sum by ({vm.labels(DEST, STATUS)}) ({vm.sel(CLIENT, "_count", "demo-client")})', DEST, STATUS)
    print()
    print("  client side (http.client.request.duration): " +
          ", ".join(f"{d} {s} x{int(n)}" for (d, s), n in sorted(per_dest.items())))
    def scalar(promql):
        r = vm.query(promql)
        return float(r[0]["value"][1]) if r else None
    rollouts = scalar(f'sum({vm.sel(ROLLOUT, "_count", sel)})')
    verifies = scalar(f'sum({vm.sel(VERIFY, "_count", sel)})')
    rate = scalar(f'max({vm.sel(SUCCESS, "", sel)})')
    vmean = scalar(f'sum({vm.sel(VERIFY, "_sum", sel)}) / sum({vm.sel(VERIFY, "_count", sel)})')
    if rate is None:
        print("  Gym endpoints: none seen")
    else:
        print(f"  Gym endpoints: {fmt_n(rollouts)} rollouts (gym.rollout.duration_ms), {fmt_n(verifies)} "
              f"verifications (gym.verify.duration_ms, mean {fmt_ms(vmean)} ms), success rate {rate:.3f}")
    ok = client["ok"].get("resources", 0)
    total = ok + sum(client["failed"].get("resources", {}).values())
    if total:
        print(f"  (the client saw {ok} of {total} verifications succeed: {ok / total:.3f})")
    return bad



def model_report(vm, client, timeout):
    """Model calls read from the bytes (gen_ai.*, gym.model_call.*) on both
    sides, against what the client read of each answer: calls and tokens
    exact, time to first chunk next to the client's own."""
    truth = client.get("models", {})
    if not truth:
        return []
    csel, ssel = "demo-client", "demo-servers"

    def per_model(name, suffix, sel, *attrs):
        return vm.by(f'sum by ({vm.labels(*attrs)}) ({vm.sel(name, suffix, sel)})', *attrs)

    deadline = time.monotonic() + timeout
    while True:
        vm.flush()
        calls = per_model(OPERATION, "_count", csel, MODEL)
        if all(calls.get(m, 0) >= t["calls"] for m, t in truth.items()) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    tokens = {side: per_model(TOKENS, "_sum", sel, MODEL, TOKEN_TYPE) for side, sel in (("client", csel),
                                                                                         ("server", ssel))}
    ttfc = per_model(TTFC, "_sum", csel, MODEL)
    ttfc_n = per_model(TTFC, "_count", csel, MODEL)
    ttft = per_model(TTFT, "_sum", ssel, MODEL)
    ttft_n = per_model(TTFT, "_count", ssel, MODEL)
    gym = per_model(GYM_TOKENS, "_sum", ssel, GYM_TOKEN_TYPE)
    rows, bad = [], []

    def check(got, want, what):
        if got is None or int(got) != want:
            bad.append(what)
            return "MISMATCH"
        return "ok"

    def mean_ms(total, n):
        return fmt_ms(total / n * 1000.0) if total is not None and n else "-"

    for m, t in sorted(truth.items()):
        c_in, c_out = tokens["client"].get((m, "input")), tokens["client"].get((m, "output"))
        s_in, s_out = tokens["server"].get((m, "input")), tokens["server"].get((m, "output"))
        verdict = [check(calls.get(m), t["calls"], (m, "calls")), check(c_in, t["input"], (m, "client input")),
                   check(c_out, t["output"], (m, "client output")), check(s_in, t["input"], (m, "server input")),
                   check(s_out, t["output"], (m, "server output"))]
        rows.append([m, fmt_n(calls.get(m)), fmt_n(t["calls"]), f"{fmt_n(c_in)}/{fmt_n(c_out)}",
                     f"{fmt_n(s_in)}/{fmt_n(s_out)}", f"{t['input']}/{t['output']}",
                     "ok" if all(v == "ok" for v in verdict) else "MISMATCH",
                     mean_ms(ttfc.get(m), ttfc_n.get(m)), fmt_ms(t["ttfc_ms"] / t["streams"]) if t["streams"] else "-",
                     mean_ms(ttft.get(m), ttft_n.get(m))])
    print()
    print("Model calls read from the bytes (gen_ai.*, both sides; the client's aiohttp, the servers' uvicorn):")
    print()
    print(table(["model", "calls", "client saw", "tokens in/out client", "server", "client saw", "",
                 "TTFC ms", "client saw", "server TTFT ms"], rows, "<>>>>><>>>"))
    print()
    print("  tokens = gen_ai.client.token.usage sums per gen_ai.token.type, recorded by the client's and the")
    print("  servers' shims; client saw = the usage in the answers it read; TTFC = mean")
    print("  gen_ai.client.operation.time_to_first_chunk of the streams, next to the client's own (request body")
    print("  sent to first content chunk); server TTFT = gen_ai.server.time_to_first_token")
    if gym:
        print("  NeMo Gym's gym.model_call.tokens on the servers: " +
              ", ".join(f"{k} {fmt_n(v)}" for k, v in sorted(gym.items())))
    return bad

if __name__ == "__main__":
    main()
