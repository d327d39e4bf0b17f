# SPDX-License-Identifier: Apache-2.0
"""Arithmetic and formatting for scripts/bench (stdlib only).

  stats.py pairs FILE            FILE: lines "A <value>" / "B <value>" in run order.
                                 Prints: median(A) median(B) median of B/A over
                                 adjacent A,B pairs (drift cancels within a pair)
  stats.py diffs FILE            as pairs, but the median of B-A
  stats.py wrk FILE              one wrk --latency output: "rps p99_ms"
  stats.py check VALUE OP LIMIT  prints pass or miss (OP: le, ge, lt, gt)
  stats.py table TSV MD MODE     prints the result table, writes the Markdown report
"""
import datetime
import os
import platform
import re
import statistics
import sys


def read_pairs(path):
    a, b, ratios, diffs = [], [], [], []
    pending = None
    for line in open(path):
        parts = line.split()
        if len(parts) != 2:
            continue
        tag, v = parts[0], float(parts[1])
        if tag == "A":
            a.append(v)
            pending = v
        elif tag == "B":
            b.append(v)
            if pending is not None:
                if pending:
                    ratios.append(v / pending)
                diffs.append(v - pending)
                pending = None
    return a, b, ratios, diffs


def fmt(v):
    return f"{v:.6g}"


def wrk(path):
    text = open(path).read()
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    rps = float(m.group(1)) if m else 0.0
    p99 = 0.0
    m = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
    if m:
        p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    errs = 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        errs += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        errs += sum(int(x) for x in m.groups())
    return rps, p99, errs


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def virt():
    """The hypervisor, when the machine is a virtual one (figures of a virtual
    machine move more: its page faults and interrupts are dearer)."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                if " hypervisor" not in line:
                    return ""
                break
    except OSError:
        return ""
    try:
        vendor = open("/sys/class/dmi/id/sys_vendor").read().strip()
    except OSError:
        vendor = ""
    return f"a virtual machine ({vendor})" if vendor else "a virtual machine"


def table(tsv, md, mode):
    rows = [line.rstrip("\n").split("\t") for line in open(tsv) if line.strip()]
    head = ["#", "figure", "without shim", "with shim", "result", "target", ""]
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    sep = "  "
    out = [sep.join(h.ljust(widths[i]) for i, h in enumerate(head)).rstrip(),
           sep.join("-" * w for w in widths)]
    section = None
    for r in rows:
        if r[0] != section and section is not None:
            out.append("")
        section = r[0]
        out.append(sep.join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())
    print("\n".join(out))
    n_pass = sum(1 for r in rows if r[6] == "pass")
    n_miss = sum(1 for r in rows if r[6] == "miss")
    print(f"\n{len(rows)} figures; targets: {n_pass} pass, {n_miss} miss (misses are findings, not failures)")
    now = datetime.datetime.now(datetime.timezone.utc)
    started = os.environ.get("BENCH_STARTED")
    began = datetime.datetime.fromtimestamp(int(started), datetime.timezone.utc) if started else now
    with open(md, "w") as f:
        f.write(f"# nemolens preload benchmark ({mode})\n\n")
        f.write(f"- date: {began:%Y-%m-%d}, {began:%H:%M} to {now:%H:%M} UTC\n")
        f.write(f"- host: {platform.node()}{', ' + virt() if virt() else ''}\n")
        f.write(f"- CPU: {cpu_model()}, {os.cpu_count()} cores\n")
        f.write(f"- kernel: {platform.system()} {platform.release()} ({platform.machine()})\n")
        f.write(f"- memory: {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB\n")
        if os.environ.get("BENCH_SOURCE"):
            f.write(f"- source: {os.environ['BENCH_SOURCE']}\n")
        f.write("\n")
        f.write("| " + " | ".join(head[:-1] + ["status"]) + " |\n")
        f.write("|" + "---|" * len(head) + "\n")
        for r in rows:
            f.write("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |\n")
        f.write(f"\n{len(rows)} figures; targets: {n_pass} pass, {n_miss} miss.\n")


def main():
    cmd = sys.argv[1]
    if cmd in ("pairs", "diffs"):
        a, b, ratios, diffs = read_pairs(sys.argv[2])
        if not a or not b:
            print("nan nan nan")
            return
        last = statistics.median(ratios if cmd == "pairs" else diffs) if (ratios or diffs) else float("nan")
        print(fmt(statistics.median(a)), fmt(statistics.median(b)), fmt(last))
    elif cmd == "wrk":
        rps, p99, errs = wrk(sys.argv[2])
        print(fmt(rps), fmt(p99), errs)
    elif cmd == "check":
        try:
            v, lim = float(sys.argv[2]), float(sys.argv[4])
        except ValueError:
            print("n/a")
            return
        if v != v:
            print("n/a")
            return
        ok = {"le": v <= lim, "ge": v >= lim, "lt": v < lim, "gt": v > lim}[sys.argv[3]]
        print("pass" if ok else "miss")
    elif cmd == "table":
        table(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(f"stats.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
