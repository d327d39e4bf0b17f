# SPDX-License-Identifier: Apache-2.0
"""Memory profiling: server trees, host memory and gym.servers.active, checked
against /proc read by the test itself.

The tree (tests/programs/mem_tree.c) is a root under the shim with 64 MiB
touched, a forked child (16 MiB), a static binary (32 MiB; it inherits
LD_PRELOAD and even declares another server name, but the shim cannot load
into it, so it belongs to the root's tree), a child that exits at once, and a
child that declares NEMOLENS_SERVER_NAME=other (48 MiB): the root of another
server, reported by itself and left out of the root's tree.

Tolerances. Once the program has printed its pids, every process only sleeps;
the test reads /proc right before and right after a 1.5 s window and
compares every value exported inside that window with that bracket. What can
still move is the shim's own working memory (snapshot and encode buffers,
libcurl) and, for PSS, the share of library pages that other processes on the
host map and unmap: MEM_TOL (4 MiB) covers both, and is small beside the
16 MiB and more that each member adds, so a wrong tree would not pass. Host
memory moves with everything else running on the machine (parallel builds and
tests): it is compared with a bracket widened by HOST_TOL (512 MiB), while its
internal consistency (usage + available == total, total == MemTotal) is exact.
"""
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

PROG = os.path.join(harness.BIN, "mem_tree")
LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
EXPORT_LIBS = ("libcurl", "libssl", "libcrypto", "libnghttp2")
STATIC = os.path.join(harness.BIN, "mem_static")
MIB = 1 << 20
MEM_TOL = 4 * MIB
HOST_TOL = 512 * MIB
PAGE = os.sysconf("SC_PAGE_SIZE")

USAGE = "gym.server.memory.usage"
PEAK = "gym.server.memory.sampled_peak"
PROCS = "gym.server.processes"
HOST = ["gym.host.memory.usage", "gym.host.memory.available", "gym.host.memory.total",
        "gym.host.memory.sampled_peak"]
ACTIVE = "gym.servers.active"
ALL = [USAGE, PEAK, PROCS, ACTIVE] + HOST


def rss(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def pss(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Pss line")


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":")
            out[k] = int(v.split()[0]) * 1024
    return out


def truth(trees):
    """{tree: {"rss": bytes, "pss": bytes}} and the host's meminfo, now."""
    out = {name: {"rss": sum(rss(p) for p in pids), "pss": sum(pss(p) for p in pids)}
           for name, pids in trees.items()}
    return out, meminfo()


class Memory(unittest.TestCase):
    launcher = False

    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)

    def setUp(self):
        self.sink.reset()

    def start(self, mb=(64, 16, 32, 48), **env):
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url,
                               NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS=100, OTEL_METRIC_EXPORT_INTERVAL=200,
                               MEM_STATIC=STATIC, **env)
        args = [PROG, "root"] + [str(m) for m in mb]
        if self.launcher:
            # nemolens-run preloads the shim itself (after a sanitizer's runtime).
            env = harness.for_launcher(env)
            args = [LAUNCHER] + args
        p = subprocess.Popen(args, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p.stdout.readline().split()
        if not line or line[0] != "pids":
            p.kill()
            self.fail(f"mem_tree did not start: {p.communicate()}")
        return p, {k: int(v) for k, v in (w.split("=") for w in line[1:])}

    def stop(self, p):
        _, err = p.communicate(input="", timeout=60)   # stdin closes: the tree stops
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(err, "")

    def series(self, name, pid, **want):
        """[(time_ns, value, attributes, metric)] of name from the process pid, by time."""
        out = []
        for res, m, p in self.sink.points(name):
            a = attrs(p)
            if res.get("process.pid") == pid and all(a.get(k) == v for k, v in want.items()):
                self.assertEqual(p.WhichOneof("value"), "as_int", name)
                out.append((p.time_unix_nano, p.as_int, a, m))
        return sorted(out, key=lambda x: x[0])

    def in_window(self, series, t0, t1):
        # An export at T carries the sample taken at most one interval (100 ms)
        # before it: skip the exports of the first 300 ms.
        pts = [s for s in series if t0 + 300_000_000 <= s[0] <= t1]
        self.assertGreaterEqual(len(pts), 3, "too few exports in the window")
        return pts

    def assert_bracketed(self, pts, lo, hi, tol, what):
        for _, v, _, _ in pts:
            self.assertTrue(min(lo, hi) - tol <= v <= max(lo, hi) + tol,
                            f"{what}: {v / MIB:.1f} MiB not within {min(lo, hi) / MIB:.1f}.."
                            f"{max(lo, hi) / MIB:.1f} MiB +- {tol / MIB:.0f} MiB")

    def test_tree(self):
        # A budget of 100 % reads every PSS at every sample: with the default,
        # a read slowed down by a busy machine can stretch a process's period
        # past the window, and a stale PSS cannot be compared with /proc now.
        p, pids = self.start(OTEL_SERVICE_NAME="memroot", NEMOLENS_SERVER_TYPE="resources_server",
                             NEMOLENS_MEMORY_PROFILING="true", NEMOLENS_PSS_BUDGET_PERCENT=100)
        root, other = pids["root"], pids["other"]
        trees = {"root": [root, pids["forked"], pids["static"]], "other": [other]}
        try:
            time.sleep(0.5)
            before, host0 = truth(trees)
            t0 = time.time_ns()
            time.sleep(1.5)
            t1 = time.time_ns()
            after, host1 = truth(trees)
            if self.launcher:
                # The launcher samples: nothing of the shim runs in the servers.
                for pid in (root, other):
                    with open(f"/proc/{pid}/maps") as f:
                        loaded = sorted({lib for lib in EXPORT_LIBS if lib in f.read()})
                    self.assertEqual((len(os.listdir(f"/proc/{pid}/task")), loaded), (1, []), pid)
        finally:
            self.stop(p)

        # ---- the root's tree: root + forked + static, not other
        for mtype in ("rss", "pss"):
            usage = self.series(USAGE, root, **{"memory.type": mtype})
            self.assertTrue(usage, f"no {mtype} usage from the root")
            _, _, a, m = usage[-1]
            self.assertEqual(a, {"nemo.gym.server.name": "memroot", "nemo.gym.server.type": "resources_server",
                                 "process.pid": root, "memory.type": mtype})
            self.assertEqual(m.unit, "By")
            self.assertEqual(m.WhichOneof("data"), "gauge")
            win = self.in_window(usage, t0, t1)
            self.assert_bracketed(win, before["root"][mtype], after["root"][mtype], MEM_TOL, f"root {mtype}")
            # The touched memory is there, and not "other"'s. The forked child
            # shares the root's 64 MiB copy-on-write: RSS counts them twice,
            # PSS splits them between the two.
            low = (64 + 64 + 16 + 32) * MIB if mtype == "rss" else (64 + 16 + 32) * MIB
            self.assertGreater(win[-1][1], low)
            self.assertLess(win[-1][1], low + 48 * MIB)

            # Peaks: never decrease, never below the usage of the same export.
            peaks = self.series(PEAK, root, **{"memory.type": mtype})
            self.assertEqual(peaks[-1][3].unit, "By")
            values = [v for _, v, _, _ in peaks]
            self.assertEqual(values, sorted(values), f"{mtype} peak decreased")
            at = {t: v for t, v, _, _ in usage}
            for t, v, _, _ in peaks:
                if t in at:
                    self.assertGreaterEqual(v, at[t])
            self.assertGreaterEqual(values[-1], max(before["root"][mtype], after["root"][mtype]) - MEM_TOL)

        procs = self.series(PROCS, root)
        self.assertEqual(procs[-1][2], {"nemo.gym.server.name": "memroot",
                                        "nemo.gym.server.type": "resources_server", "process.pid": root})
        self.assertEqual(procs[-1][3].unit, "{process}")
        self.assertEqual({v for _, v, _, _ in self.in_window(procs, t0, t1)}, {3})
        self.assertEqual(procs[0][1], 1, "before the children start, the tree is the root alone")

        # ---- the other server: reported by itself, alone
        for mtype in ("rss", "pss"):
            usage = self.series(USAGE, other, **{"memory.type": mtype})
            self.assertEqual(usage[-1][2]["nemo.gym.server.name"], "other")
            self.assertEqual(usage[-1][2]["process.pid"], other)
            self.assert_bracketed(self.in_window(usage, t0, t1), before["other"][mtype], after["other"][mtype],
                                  MEM_TOL, f"other {mtype}")
        self.assertEqual({v for _, v, _, _ in self.in_window(self.series(PROCS, other), t0, t1)}, {1})
        # Only the outermost process reports the host and the servers.
        for name in HOST + [ACTIVE]:
            self.assertEqual(self.series(name, other), [], name)
        # No one else reports a tree.
        reporters = {res.get("process.pid") for res, _, _ in self.sink.points(USAGE)}
        self.assertEqual(reporters, {root, other})

        # ---- host memory
        total = self.series("gym.host.memory.total", root)
        self.assertEqual({v for _, v, _, _ in total}, {host0["MemTotal"]})
        usage = self.series("gym.host.memory.usage", root)
        avail = {t: v for t, v, _, _ in self.series("gym.host.memory.available", root)}
        for t, v, a, m in usage:
            self.assertEqual(a, {})
            self.assertEqual(m.unit, "By")
            self.assertEqual(v + avail[t], host0["MemTotal"])
        used0 = host0["MemTotal"] - host0["MemAvailable"]
        used1 = host1["MemTotal"] - host1["MemAvailable"]
        self.assert_bracketed(self.in_window(usage, t0, t1), used0, used1, HOST_TOL, "host usage")
        hpeak = self.series("gym.host.memory.sampled_peak", root)
        values = [v for _, v, _, _ in hpeak]
        self.assertEqual(values, sorted(values), "host peak decreased")
        at = {t: v for t, v, _, _ in usage}
        for t, v, _, _ in hpeak:
            self.assertGreaterEqual(v, at[t])

        # ---- gym.servers.active: 0 before "other" starts, 1 while it runs, 0 at shutdown
        active = self.series(ACTIVE, root)
        self.assertEqual(active[-1][3].unit, "")
        values = [v for _, v, _, _ in active]
        self.assertEqual(values[0], 0)
        self.assertIn(1, values)
        self.assertEqual(max(values), 1)
        self.assertEqual(values[-1], 0, "the last export must say 0")
        self.assertEqual({v for _, v, _, _ in self.in_window(active, t0, t1)}, {1})

    def test_gym_variables(self):
        """NeMo Gym's switch turns it on too; its interval in seconds is honoured."""
        p, pids = self.start(mb=(8, 1, 1, 1), NEMO_GYM_OTEL_MEMORY_PROFILING_ENABLED="true",
                             NEMOLENS_SERVER_NAME="gymroot")
        time.sleep(0.6)
        self.stop(p)
        usage = self.series(USAGE, pids["root"], **{"memory.type": "rss"})
        self.assertTrue(usage)
        self.assertEqual(usage[-1][2]["nemo.gym.server.name"], "gymroot")

    def test_off_by_default(self):
        p, _ = self.start(mb=(8, 1, 1, 1))
        time.sleep(0.6)
        self.stop(p)
        for name in ALL:
            self.assertEqual(self.sink.points(name), [], name)
        p, _ = self.start(mb=(8, 1, 1, 1), NEMOLENS_MEMORY_PROFILING="false")
        time.sleep(0.6)
        self.stop(p)
        for name in ALL:
            self.assertEqual(self.sink.points(name), [], name)

    def test_pss_budget(self):
        """A zero budget leaves PSS out (RSS still there); an invalid one warns once and uses the default."""
        p, pids = self.start(mb=(8, 1, 1, 1), NEMOLENS_MEMORY_PROFILING="true", NEMOLENS_PSS_BUDGET_PERCENT=0)
        time.sleep(0.6)
        self.stop(p)
        self.assertTrue(self.series(USAGE, pids["root"], **{"memory.type": "rss"}))
        self.assertEqual(self.series(USAGE, pids["root"], **{"memory.type": "pss"}), [])

        self.sink.reset()
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url, NEMOLENS_MEMORY_PROFILING="true",
                               NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS=100, NEMOLENS_PSS_BUDGET_PERCENT="lots",
                               NEMOLENS_LOG_PATH="stderr")
        r = harness.run(["/bin/sleep", "0.5"], env)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stderr.count("NEMOLENS_PSS_BUDGET_PERCENT"), 1, r.stderr)
        pids_seen = {res.get("process.pid") for res, _, _ in self.sink.points(USAGE)}
        self.assertEqual(len(pids_seen), 1)
        self.assertTrue([p for _, _, p in self.sink.points(USAGE) if attrs(p)["memory.type"] == "pss"])


class MemoryUnderTheLauncher(Memory):
    """nemolens-run samples for the servers of its tree, which start no
    thread: the same series, under the same resources, as when each server
    samples itself."""
    launcher = True
    test_gym_variables = test_off_by_default = test_pss_budget = None


if __name__ == "__main__":
    unittest.main(verbosity=2)
