"""Query the demo's VictoriaMetrics and print a summary table.

  /usr/bin/python3 report.py --vm http://127.0.0.1:PORT --accepted '{"policy": 31, ...}' \
      --dests policy,judge,ghost,slow [--timeout 30]

`--accepted` is the server's own count of accepted connections per destination
(ground truth, shown next to the shim's counts); the report first waits (bounded)
until VictoriaMetrics shows at least that many connects for those destinations.
"""
import argparse
import json
import math
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

CONNECT = "gym.http.connection_pool.connect_total"
QUEUE = "gym.http.connection_pool.queue_duration_ms"
DEST = "nemo.gym.http.destination.server.name"
OUTCOME = "nemo.gym.http.connection_pool.queue_outcome"


class VM:
    def __init__(self, url):
        self.url = url

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

    def by(self, promql, *labels):
        return {tuple(r["metric"].get(label) for label in labels) if len(labels) > 1 else r["metric"].get(labels[0]):
                float(r["value"][1]) for r in self.query(promql)}

    def flush(self):
        self.get("/internal/force_flush")


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
    ap.add_argument("--vm", required=True)
    ap.add_argument("--accepted", default="{}")
    ap.add_argument("--expected", default="{}", help="known connects per destination without a server count")
    ap.add_argument("--dests", required=True)
    ap.add_argument("--timeout", type=float, default=30)
    args = ap.parse_args()
    vm = VM(args.vm)
    dests = args.dests.split(",")
    accepted = json.loads(args.accepted)
    expected = dict(json.loads(args.expected), **accepted)

    q_connect = f'sum by ({DEST}) ({{__name__="{CONNECT}"}})'
    deadline = time.monotonic() + args.timeout
    t0 = time.monotonic()
    while True:
        vm.flush()
        connects = vm.by(q_connect, DEST)
        if all(connects.get(d, 0) >= n for d, n in expected.items()) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    waited = time.monotonic() - t0

    queued = vm.by(f'sum by ({DEST}, {OUTCOME}) ({{__name__="{QUEUE}_count"}})', DEST, OUTCOME)
    wsum = vm.by(f'sum by ({DEST}) ({{__name__="{QUEUE}_sum"}})', DEST)
    wcount = vm.by(f'sum by ({DEST}) ({{__name__="{QUEUE}_count"}})', DEST)
    p50 = vm.by(f'histogram_quantile(0.5, sum by (le, {DEST}) ({{__name__="{QUEUE}_bucket"}}))', DEST)
    p99 = vm.by(f'histogram_quantile(0.99, sum by (le, {DEST}) ({{__name__="{QUEUE}_bucket"}}))', DEST)
    names = vm.get("/api/v1/label/__name__/values")["data"]
    names = [n for n in names if n.startswith("gym.")]
    services = vm.by(f'count by (service.name) ({{__name__="{CONNECT}"}})', "service.name")

    others = sorted(set(connects) - set(dests))
    rows = []
    for d in dests + others:
        c = connects.get(d)
        truth = accepted.get(d, expected.get(d))
        match = "" if truth is None or c is None else ("ok" if int(c) == int(truth) else "MISMATCH")
        n = wcount.get(d)
        mean = wsum[d] / n if n else None
        rows.append([d, fmt_n(c), fmt_n(truth), match, fmt_n(queued.get((d, "ok"))),
                     fmt_n(queued.get((d, "abandoned"))), fmt_ms(p50.get(d)), fmt_ms(p99.get(d)), fmt_ms(mean)])
    print(f"VictoriaMetrics series ({waited:.1f} s until ingested): {', '.join(sorted(names))}")
    print(f"  labels: {DEST}, {OUTCOME}, le; resource: service.name={','.join(sorted(services))}, "
          "service.instance.id, process.pid, ...")
    print()
    print(table(["destination", "connects", "truth", "", "queued ok", "abandoned", "wait p50 ms", "p99 ms",
                 "mean ms"], rows, "<>><>>>>>"))
    print()
    print("  connects = shim's connect_total; truth = connections the server accepted (policy, judge)")
    print("  or the client's attempts (ghost, slow); queued = non-blocking connects that had to wait;")
    print("  p50/p99 = histogram_quantile over the _bucket series (linear within a bucket)")
    bad = [r for r in rows if r[3] == "MISMATCH"]
    if bad:
        sys.exit(2)


if __name__ == "__main__":
    try:
        main()
    except (OSError, RuntimeError, ValueError, urllib.error.URLError) as e:
        print(f"report: cannot query VictoriaMetrics: {e}", file=sys.stderr)
        sys.exit(1)
