# SPDX-License-Identifier: Apache-2.0
"""Nothing a process recorded is lost, however it ends: exit, _exit, _Exit,
exec, abort, SIGSEGV, SIGTERM, SIGINT, SIGKILL, a fork pool terminated, a
child that outlives its parent, nemolens-run's own program killed. Every
value reaches the collector exactly once per process, under that process's
own resource (one pid per service.instance.id), within one export interval
and a second of the death while a shim process of the tree lives. What
processes leave behind is private (0700 directory, 0600 files, another user
can neither read nor replace them), removed once delivered, and nothing is
left by processes that recorded nothing; leftovers of another boot and
garbage are cleaned up. NEMOLENS_ADOPT=fold folds dead children into the
parent's series: the number of series a backend holds is printed for both
modes. Every test runs twice: here under plain LD_PRELOAD, where each
process exports for itself, and in test_nothing_lost_launcher.py under
nemolens-run, which exports for the tree."""
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

CONNECTS = "gym.http.connection_pool.connect_total"
ENDING = os.path.join(harness.BIN, "ending")
SHORT_LIVED = os.path.join(harness.BIN, "short_lived")
LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
INTERVAL_MS = 1000
PY = os.path.basename(os.path.realpath(harness.PYTHON))   # process.executable.name of Python
SANITIZED = bool(os.environ.get("NL_SANITIZER_RUNTIME"))
# Under TSan a process start costs about 80 ms: the bulk cases run smaller there.
TSAN = "tsan" in os.environ.get("NL_SANITIZER_RUNTIME", "")

CONN = r"""
import os, socket, sys, time
def conn(port, n):
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.close()
"""

# A parent that connects once, then forks one child per way of ending; each
# child connects a distinct number of times first. It prints when it reaped
# each child (CLOCK_MONOTONIC, the sink's clock), then stays alive for three
# intervals and more, and prints when it leaves: deliveries must happen while
# it lives. One interval is what they take; the rest is room for a loaded
# machine or a sanitizer build.
EVERY_WAY = CONN + r"""
import resource, signal
port, short, interval = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
plan = [("exit", 2), ("_exit", 3), ("abort", 4), ("segv", 5), ("term", 6), ("int", 7), ("kill", 8),
        ("exec", 9)]
conn(port, 1)
children = []
for how, n in plan:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        conn(port, n)
        os.write(w, b"x")
        if how == "exit":
            sys.exit(0)
        if how == "_exit":
            os._exit(0)
        if how == "abort":
            os.abort()
        if how == "segv":
            import ctypes
            ctypes.string_at(0)
        if how in ("term", "int"):
            sig = signal.SIGTERM if how == "term" else signal.SIGINT
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        if how == "exec":
            os.execv(short, [short, str(port), "10", "0"])
        time.sleep(60)   # "kill": the parent kills it
        os._exit(1)
    os.close(w)
    os.read(r, 1)
    os.close(r)
    if how == "kill":
        os.kill(pid, signal.SIGKILL)
    children.append((pid, how))
for pid, how in children:
    _, status = os.waitpid(pid, 0)
    # One write a line: the exec'd child writes to the same pipe.
    os.write(1, f"ended {pid} {how} {status} {time.monotonic()}\n".encode())
time.sleep(3 * interval + 3)
os.write(1, f"leaving {time.monotonic()}\n".encode())
"""

POOL = CONN + r"""
import multiprocessing as mp
port, interval = int(sys.argv[1]), float(sys.argv[2])
def work(n):
    conn(port, n)
    return os.getpid()
if __name__ == "__main__":
    conn(port, 1)
    with mp.get_context("fork").Pool(4) as pool:       # leaving the block terminates it: SIGTERM
        workers = pool.map(work, [5] * 8, chunksize=1)
    print("workers", " ".join(map(str, sorted(set(workers)))), time.monotonic(), flush=True)
    time.sleep(interval + 2)
"""

# The parent exits at once; its child connects after that and _exits.
ORPHAN = CONN + r"""
port = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    time.sleep(0.5)
    conn(port, 6)
    open(sys.argv[2], "w").close()
    os._exit(0)
print(pid, flush=True)
"""

# A parent that records nothing forks a child that connects 3 times and is
# killed, then a sibling that connects once and lives for an interval and
# more. The parent counts its threads after each fork: a fork starts none.
QUIET_PARENT = CONN + r"""
import signal
port, interval = int(sys.argv[1]), float(sys.argv[2])
def threads():
    return len(os.listdir("/proc/self/task"))
killed = os.fork()
if killed == 0:
    conn(port, 3)
    os.kill(os.getpid(), signal.SIGKILL)
os.waitpid(killed, 0)
after_first = threads()
sibling = os.fork()
if sibling == 0:
    conn(port, 1)
    time.sleep(interval + 1.5)
    sys.exit(0)
os.waitpid(sibling, 0)
print(killed, sibling, after_first, threads(), flush=True)
"""

FOLD = CONN + r"""
port, n, interval = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
conn(port, 1)
for i in range(n):
    pid = os.fork()
    if pid == 0:
        conn(port, 1)
        if i % 2:
            os._exit(0)
        sys.exit(0)
    os.waitpid(pid, 0)
time.sleep(interval + 1)
"""


def segdir(base):
    return os.path.join(base, "nemolens")


class NothingLost(harness.ShimTestCase):
    """Plain LD_PRELOAD."""
    launcher = False
    # Fewer for the second mode: the same paths, less CI time.
    scale = 1

    def setUp(self):
        super().setUp()
        # A private directory of this test: XDG_RUNTIME_DIR on tmpfs, 0700.
        self.base = tempfile.mkdtemp(prefix="nl-lost-", dir="/dev/shm")
        self.dir = segdir(self.base)

    def tearDown(self):
        shutil.rmtree(self.base, ignore_errors=True)

    def env(self, **extra):
        settings = {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": self.sink.url, "OTEL_METRIC_EXPORT_INTERVAL": INTERVAL_MS,
                    "XDG_RUNTIME_DIR": self.base}
        settings.update(extra)
        return harness.shim_env(**settings)

    def run_prog(self, args, env, timeout=60):
        """args under the shim, in this class's mode."""
        if self.launcher:
            return harness.run([LAUNCHER] + args, harness.for_launcher(env), timeout=timeout)
        return harness.run(args, env, timeout=timeout)

    def popen(self, args, env, **kw):
        if self.launcher:
            return subprocess.Popen([LAUNCHER] + args, env=harness.for_launcher(env), **kw)
        return subprocess.Popen(args, env=env, **kw)

    def program_of(self, p):
        """The pid of the program popen started."""
        if not self.launcher:
            return p.pid
        with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
            return int(f.read().split()[0])

    def files(self):
        return sorted(os.listdir(self.dir)) if os.path.isdir(self.dir) else []

    # ---- what reached the sink -------------------------------------------

    def finals(self):
        """instance id -> (pids seen, executable, last connect_total)."""
        out = {}
        for res, _, p in self.sink.points(CONNECTS):
            iid = res["service.instance.id"]
            pids, exe, _ = out.get(iid, (set(), res["process.executable.name"], 0))
            pids.add(res["process.pid"])
            out[iid] = (pids, exe, p.as_int)
        return out

    def first_arrival(self, iid):
        """CLOCK_MONOTONIC time of the first request carrying instance iid."""
        with self.sink.lock:
            for req, t in zip(self.sink.requests, self.sink.arrivals):
                for rm in req.resource_metrics:
                    if any(a.key == "service.instance.id" and a.value.string_value == iid
                           for a in rm.resource.attributes):
                        return t
        return None

    def assert_one_pid_each(self, finals):
        for iid, (pids, exe, _) in finals.items():
            self.assertEqual(len(pids), 1, f"instance {iid} ({exe}) came with pids {pids}")

    def by_pid(self, finals):
        out = {}
        for iid, (pids, exe, value) in finals.items():
            out.setdefault(next(iter(pids)), []).append((exe, value))
        return out

    # ---- every way a process ends ----------------------------------------

    def test_every_way_a_child_ends(self):
        p = self.run_prog([harness.PYTHON, "-c", EVERY_WAY, str(self.listener.port), SHORT_LIVED,
                      str(INTERVAL_MS / 1000)], self.env(), timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        # Searched for, not split by lines: short_lived, the exec'd child,
        # writes to the same pipe.
        ended = {int(pid): (how, int(status), float(t))
                 for pid, how, status, t in re.findall(r"ended (\d+) (\S+) (-?\d+) ([0-9.]+)\n", p.stdout)}
        self.assertEqual(len(ended), 8, p.stdout)
        leaving = float(re.search(r"leaving ([0-9.]+)\n", p.stdout).group(1))
        finals = self.finals()
        self.assert_one_pid_each(finals)
        pids = self.by_pid(finals)
        made = {"exit": 2, "_exit": 3, "abort": 4, "segv": 5, "term": 6, "int": 7, "kill": 8}
        for pid, (how, status, _) in ended.items():
            if how == "exec":
                # Two images, one pid: the Python one's 9, then short_lived's 10.
                self.assertEqual(sorted(pids.get(pid, [])), [(PY, 9), ("short_lived", 10)],
                                 f"exec child {pid}")
            else:
                self.assertEqual(pids.get(pid), [(PY, made[how])], f"{how} child {pid}")
        self.assertEqual(sum(v for _, _, v in finals.values()), 1 + sum(made.values()) + 9 + 10)
        self.assertEqual(len(finals), 1 + 8 + 1)
        # Delivered while the parent lived, not by its exit.
        iid_of = {next(iter(pids)): iid for iid, (pids, exe, _) in finals.items() if exe == PY}
        for pid, (how, _, t) in ended.items():
            if how in ("exit",) and not self.launcher:
                continue   # it exported itself at exit
            arrival = self.first_arrival(iid_of[pid])
            self.assertIsNotNone(arrival)
            self.assertLess(arrival, leaving, f"{how}: delivered {arrival - t:.2f} s after its death, "
                                              f"{arrival - leaving:.2f} s after the parent left")
        self.assertEqual(self.files(), [], "everything delivered is removed")

    def test_fork_pool_terminated(self):
        p = self.run_prog([harness.PYTHON, "-c", POOL, str(self.listener.port), str(INTERVAL_MS / 1000)], self.env(),
                     timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        words = p.stdout.split()
        workers = {int(w) for w in words[1:-1]}
        finals = self.finals()
        self.assert_one_pid_each(finals)
        pids = self.by_pid(finals)
        self.assertEqual(sum(v for _, _, v in finals.values()), 1 + 8 * 5)
        self.assertTrue(workers <= set(pids), f"workers {workers}, reported {set(pids)}")
        self.assertEqual(sum(v for pid, l in pids.items() if pid in workers for _, v in l), 40)
        self.assertEqual(self.files(), [])

    def test_child_that_outlives_its_parent_is_delivered_by_the_next_process(self):
        done = os.path.join(self.base, "child-done")
        # No periodic export: the child cannot have exported before it died.
        env = self.env(OTEL_METRIC_EXPORT_INTERVAL=60000)
        p = self.run_prog([harness.PYTHON, "-c", ORPHAN, str(self.listener.port), done], env)
        self.assertEqual(p.returncode, 0, p.stderr)
        child = int(p.stdout.split()[0])
        harness.wait_for(lambda: os.path.exists(done) and not os.path.exists(f"/proc/{child}"), 10,
                         f"the child {child} to finish")
        # No shim process of that tree is left: the next one started delivers it.
        self.assertEqual(self.finals(), {})
        q = self.run_prog([SHORT_LIVED, str(self.listener.port), "1", "0"], env)
        self.assertEqual(q.returncode, 3, q.stderr)
        finals = self.finals()
        self.assert_one_pid_each(finals)
        self.assertEqual(self.by_pid(finals).get(child), [(PY, 6)])
        self.assertEqual(sum(v for _, _, v in finals.values()), 6 + 1)
        self.assertEqual(self.files(), [])

    def test_a_parent_that_records_nothing_forks_without_a_thread(self):
        p = self.run_prog([harness.PYTHON, "-c", QUIET_PARENT, str(self.listener.port), str(INTERVAL_MS / 1000)],
                          self.env())
        self.assertEqual(p.returncode, 0, p.stderr)
        killed, sibling, after_first, after_second = map(int, p.stdout.split())
        self.assertEqual((after_first, after_second), (1, 1), "threads of the parent after each fork")
        finals = self.finals()
        self.assert_one_pid_each(finals)
        # The killed child's values come with its sibling's thread (plain
        # LD_PRELOAD) or the launcher's delivery, once; the parent sends nothing.
        self.assertEqual(self.by_pid(finals), {killed: [(PY, 3)], sibling: [(PY, 1)]})
        if not self.launcher:
            iid = next(i for i, (pids, _, _) in finals.items() if killed in pids)
            self.assertEqual(sum(1 for res, _, _ in self.sink.points(CONNECTS)
                                 if res["service.instance.id"] == iid), 1, "delivered exactly once")
        self.assertEqual(self.files(), [])

    # ---- nemolens-run ------------------------------------------------------

    def test_launcher_delivers_its_program_killed_with_sigkill(self):
        env = harness.for_launcher(self.env())
        env["OTEL_METRIC_EXPORT_INTERVAL"] = "60000"   # no periodic export: only the launcher can deliver
        launcher = subprocess.Popen([LAUNCHER, ENDING, str(self.listener.port), "7", "wait"], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertEqual(launcher.stdout.readline(), "ready\n")
            with open(f"/proc/{launcher.pid}/task/{launcher.pid}/children") as f:
                program = int(f.read().split()[0])
            os.kill(program, signal.SIGKILL)
            self.assertEqual(launcher.wait(timeout=30), 128 + signal.SIGKILL)
        finally:
            launcher.kill()
            launcher.wait()
        finals = self.finals()
        self.assertEqual(self.by_pid(finals).get(program), [("ending", 7)])
        self.assertEqual(self.files(), [])

    # ---- what is left behind -----------------------------------------------

    def test_nothing_left_behind_by_many_short_processes(self):
        n = int(os.environ.get("NL_SHORT_PROCESSES", "300" if TSAN else "1000" if SANITIZED else "3000")) // self.scale
        t0 = time.monotonic()
        p = self.run_prog(["bash", "-c", f"for i in $(seq {n}); do /bin/true; done"], self.env(), timeout=600)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""))
        print(f"\n  {n} runs of /bin/true from a shell, both under the shim{' (nemolens-run)' if self.launcher else ''}: "
              f"{time.monotonic() - t0:.1f} s",
              file=sys.stderr)
        self.assertEqual(self.files(), [])
        self.assertEqual(self.sink.raw, [], "processes that record nothing send nothing")

    def test_leftovers_of_a_crashed_tree_are_delivered_or_removed(self):
        env = self.env(OTEL_METRIC_EXPORT_INTERVAL="60000")
        # Two processes killed with no shim process around them.
        a = harness.run([ENDING, str(self.listener.port), "4", "kill"], env)
        b = harness.run([ENDING, str(self.listener.port), "6", "kill"], env)
        self.assertEqual((a.returncode, b.returncode), (-signal.SIGKILL, -signal.SIGKILL))
        left = self.files()
        self.assertEqual(len(left), 2, left)
        key = left[0].split("-")[0]
        # One as if from another boot (its boot id differs).
        other_boot = os.path.join(self.dir, left[1])
        with open(other_boot, "r+b") as f:
            f.seek(56)
            f.write(b"00000000-0000-4000-8000-000000000000")
        dead = 99999
        while os.path.exists(f"/proc/{dead}"):
            dead -= 1
        for name, data in ((f"{key}-{dead}", b"\x00garbage" * 100), ("not-a-segment", b"junk")):
            with open(os.path.join(self.dir, name), "wb") as f:
                f.write(data)
            os.chmod(os.path.join(self.dir, name), 0o600)
        self.assertEqual(self.sink.raw, [])
        # The next process that records delivers what it can and removes the rest.
        q = self.run_prog([SHORT_LIVED, str(self.listener.port), "1", "0"], env)
        self.assertEqual(q.returncode, 3, q.stderr)
        finals = self.finals()
        self.assert_one_pid_each(finals)
        values = sorted((exe, v) for _, exe, v in finals.values())
        self.assertEqual(values, [("ending", 4), ("short_lived", 1)], "the other boot's leftover is not delivered")
        self.assertEqual(self.files(), [])

    def test_a_delivery_whose_answer_was_lost_is_repeated_with_the_same_values(self):
        env = self.env(OTEL_METRIC_EXPORT_INTERVAL="60000", NEMOLENS_EXIT_TIMEOUT_MS="1000")
        a = harness.run([ENDING, str(self.listener.port), "4", "kill"], env)
        self.assertEqual(a.returncode, -signal.SIGKILL)
        self.assertEqual(len(self.files()), 1)
        # The next process's own export is answered; the delivery of the
        # leftover reaches the collector, whose answer comes too late. Under
        # nemolens-run both go in the launcher's one request, and both stay.
        if self.launcher:
            self.sink.script = [(200, {}, b"", 3.0)]
        else:
            self.sink.script = [(200, {}, b""), (200, {}, b"", 3.0)]
        q = self.run_prog([SHORT_LIVED, str(self.listener.port), "1", "0"], env)
        self.assertEqual(q.returncode, 3, q.stderr)
        self.assertEqual(len(self.files()), 2 if self.launcher else 1, "kept: no answer says it was taken")
        q = self.run_prog([SHORT_LIVED, str(self.listener.port), "1", "0"], env)
        self.assertEqual(q.returncode, 3, q.stderr)
        self.assertEqual(self.files(), [])
        sent = [(res["service.instance.id"], res["process.pid"], p.start_time_unix_nano, p.as_int)
                for res, _, p in self.sink.points(CONNECTS) if res["process.executable.name"] == "ending"]
        self.assertEqual(len(sent), 2, sent)
        self.assertEqual(sent[0], sent[1], "the repeat carries the same identity, start time and value")
        self.assertEqual(sent[0][3], 4)
        self.assertEqual(sorted(v for _, _, v in self.finals().values()), [1, 1, 4])

    def test_an_exit_flush_that_failed_is_delivered_by_the_next_process(self):
        env = self.env(OTEL_METRIC_EXPORT_INTERVAL="60000", NEMOLENS_LOG_PATH="stderr")
        # The collector is down while the process exits (a restart, say).
        self.sink.script = [(503, {}, b"")]
        a = self.run_prog([SHORT_LIVED, str(self.listener.port), "5", "0"], env)
        self.assertEqual(a.returncode, 3)
        if self.launcher:
            self.assertEqual(a.stderr, "", "the program has no exit flush")
        else:
            self.assertRegex(a.stderr, r"HTTP 503; they are kept, for the next shim process to deliver\n$")
        self.assertEqual(len(self.files()), 1)
        self.assertEqual(self.finals(), {})
        b = self.run_prog([SHORT_LIVED, str(self.listener.port), "2", "0"], env)
        self.assertEqual((b.returncode, b.stderr), (3, ""))
        finals = self.finals()
        self.assert_one_pid_each(finals)
        self.assertEqual(sorted(v for _, _, v in finals.values()), [2, 5])
        self.assertEqual(self.files(), [])
        # Without segments the same failure loses the values, and says so.
        self.sink.script = [(503, {}, b"")]
        c = self.run_prog([SHORT_LIVED, str(self.listener.port), "1", "0"], self.env(
            OTEL_METRIC_EXPORT_INTERVAL="60000", NEMOLENS_LOG_PATH="stderr", NEMOLENS_ADOPT="off"))
        self.assertRegex(c.stderr, r"HTTP 503; they are lost\n$")
        self.assertEqual(self.files(), [])

    def test_private_to_its_user(self):
        p = self.popen([ENDING, str(self.listener.port), "2", "wait"], self.env(), stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(p.stdout.readline(), "ready\n")
            program = self.program_of(p)
            st = os.lstat(self.dir)
            self.assertTrue(stat.S_ISDIR(st.st_mode))
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (os.geteuid(), 0o700))
            [name] = self.files()
            path = os.path.join(self.dir, name)
            st = os.lstat(path)
            self.assertTrue(stat.S_ISREG(st.st_mode))
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (os.geteuid(), 0o600))
            if os.geteuid() == 0 and shutil.which("setpriv"):
                # Another user can neither read, nor write, nor replace it.
                nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
                for cmd in ([f"cat {path}"], [f"echo x > {path}"], [f"ln -sf /tmp {path}"],
                            [f"mv {path} /tmp/stolen"], [f"ln -s /tmp {self.dir}/planted"]):
                    r = subprocess.run(nobody + ["sh", "-c"] + cmd, capture_output=True, text=True)
                    self.assertNotEqual(r.returncode, 0, f"nobody could: {cmd[0]}")
                self.assertEqual(self.files(), [name])
                self.assertEqual(os.lstat(path).st_ino, st.st_ino)
        finally:
            os.kill(program, signal.SIGKILL)
            p.wait()
            p.kill()
            p.stdout.close()
        # Killed: the next process delivers it (under nemolens-run, the launcher).
        q = self.run_prog([SHORT_LIVED, str(self.listener.port), "1", "0"], self.env())
        self.assertEqual(q.returncode, 3, q.stderr)
        self.assertEqual(sorted(v for _, _, v in self.finals().values()), [1, 2])
        self.assertEqual(self.files(), [])

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"), "needs root to act as two users")
    def test_a_directory_planted_by_another_user_is_refused(self):
        planted = "/dev/shm/nemolens-65534"
        if os.path.lexists(planted):
            self.skipTest(f"{planted} exists")
        target = tempfile.mkdtemp(prefix="nl-planted-", dir="/dev/shm")
        os.chmod(target, 0o777)
        # No segment, so the exit flush is the values' only chance: on a
        # loaded machine its default half second can pass in loading the
        # export libraries alone.
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url, NEMOLENS_EXIT_TIMEOUT_MS="5000")
        nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
        try:
            # root's directory where nobody's would go, world-writable; then a
            # symlink to one: the shim uses neither, and works as before.
            for kind in ("directory", "symlink"):
                if kind == "directory":
                    os.mkdir(planted)
                    os.chmod(planted, 0o777)
                else:
                    os.symlink(target, planted)
                self.sink.reset()
                r = subprocess.run(nobody + ([LAUNCHER] if self.launcher else []) +
                                   [SHORT_LIVED, str(self.listener.port), "3", "0"],
                                   env=harness.for_launcher(env) if self.launcher else env,
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual((r.returncode, r.stderr), (3, ""))
                self.assertEqual(os.listdir(planted), [])
                self.assertEqual(os.listdir(target), [])
                self.assertEqual([v for _, _, v in self.finals().values()], [3], "exported at exit as before")
                if os.path.islink(planted):
                    os.unlink(planted)
                else:
                    os.rmdir(planted)
        finally:
            if os.path.islink(planted):
                os.unlink(planted)
            elif os.path.isdir(planted):
                shutil.rmtree(planted, ignore_errors=True)
            shutil.rmtree(target, ignore_errors=True)

    # ---- NEMOLENS_ADOPT=fold -----------------------------------------------

    def series_at_sink(self):
        """Distinct (resource, metric, attributes): what a backend stores;
        and how many metrics they belong to. The processes' figures from
        /proc (process.*) are left out: they are what the shim read of each
        process that exported, not what the processes recorded, and a
        process's figures are never folded into another's."""
        series = set()
        with self.sink.lock:
            for req in self.sink.requests:
                for rm in req.resource_metrics:
                    res = frozenset((a.key, str(a.value)) for a in rm.resource.attributes)
                    for sm in rm.scope_metrics:
                        for m in sm.metrics:
                            if m.name.startswith("process."):
                                continue
                            for pt in getattr(m, m.WhichOneof("data")).data_points:
                                series.add((res, m.name, frozenset((a.key, str(a.value)) for a in pt.attributes)))
        return len(series), len({name for _, name, _ in series})

    def test_fold_mode_bounds_series_churn(self):
        n = int(os.environ.get("NL_FOLD_CHILDREN", "30" if TSAN else "100" if SANITIZED else "400")) // self.scale
        counts = {}
        for mode in ("own", "fold"):
            self.sink.reset()
            t0 = time.monotonic()
            p = self.run_prog([harness.PYTHON, "-c", FOLD, str(self.listener.port), str(n), str(INTERVAL_MS / 1000)],
                         self.env(NEMOLENS_ADOPT=mode), timeout=600)
            self.assertEqual(p.returncode, 0, p.stderr)
            finals = self.finals()
            self.assert_one_pid_each(finals)
            self.assertEqual(sum(v for _, _, v in finals.values()), n + 1, mode)
            counts[mode], metrics = self.series_at_sink()
            print(f"\n  NEMOLENS_ADOPT={mode}: {n} short-lived children (half exit, half _exit): "
                  f"{counts[mode]} series at the backend, {len(finals)} instances, "
                  f"{time.monotonic() - t0:.1f} s", file=sys.stderr)
            self.assertEqual(self.files(), [])
        self.assertGreaterEqual(counts["own"], n + 1)
        # connect_total and the call site of the children's one connect() line.
        self.assertEqual(metrics, 2)
        self.assertEqual(counts["fold"], metrics, "everything folded into the parent's one series per metric")


if __name__ == "__main__":
    unittest.main(verbosity=2)
