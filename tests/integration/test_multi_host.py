# SPDX-License-Identifier: Apache-2.0
"""One run over several hosts, as a Slurm job runs.

Three hosts, each a network and UTS namespace of its own (its own
hostname, its own loopback), joined to this test's namespace, the
collector's, by a veth pair. On each host at once, nemolens-run runs a
worker that fetches from an HTTP server in the collector's namespace a
number of times its own (3, 5, 7), exports over OTLP/gRPC to one
receiver and serves its tree's metrics to one Prometheus (Debian's, in the
collector's namespace, honor_labels: true), which scrapes every host.

Over gRPC and in Prometheus alike, every host's series arrive apart (by
host.name and service.instance.id), all carry the job's nemo.run.id, and
each host's totals equal what the server itself counted from that host's
address.

Needs root (namespaces and veth pairs); creates and removes its own."""
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_prometheus  # noqa: E402
from otlp_grpc_sink import GrpcSink  # noqa: E402
from otlp_sink import attrs  # noqa: E402

LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
FETCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "http_apps", "fetch.py")
CONNECT = "gym.http.connection_pool.connect_total"
REQUESTS = "http.client.request.duration"
DEST = "nemo.gym.http.destination.server.name"
FETCHES = {1: 3, 2: 5, 3: 7}     # host number: the worker's fetches
NET = "10.231"                   # host i: 10.231.i.2, its peer here 10.231.i.1
JOB = "770411"
SCRAPE_PORT = 9464               # the default, on every host's own address


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class Pages(http.server.BaseHTTPRequestHandler):
    """Answers every GET and counts it by the client's address."""
    protocol_version = "HTTP/1.1"
    counts = {}
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_GET(self):
        with self.lock:
            self.counts[self.client_address[0]] = self.counts.get(self.client_address[0], 0) + 1
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")


class MultiHost(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise RuntimeError("this test makes network namespaces and veth pairs: it runs as root")
        tag = f"{os.getpid() % 100000}"
        cls.hosts = {}
        for i in FETCHES:
            ns, veth = f"nl{tag}h{i}", f"nl{tag}v{i}"
            cls.addClassCleanup(subprocess.run, ["ip", "netns", "delete", ns], capture_output=True)
            ip("netns", "add", ns)
            ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("addr", "add", f"{NET}.{i}.1/24", "dev", veth)
            ip("link", "set", veth, "up")
            for args in (("addr", "add", f"{NET}.{i}.2/24", "dev", "eth0"), ("link", "set", "eth0", "up"),
                         ("link", "set", "lo", "up")):
                ip("netns", "exec", ns, "ip", *args)
            cls.hosts[i] = ns
        cls.pages = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Pages)
        cls.pages.daemon_threads = True
        threading.Thread(target=cls.pages.serve_forever, daemon=True).start()
        cls.addClassCleanup(cls.pages.server_close)
        cls.addClassCleanup(cls.pages.shutdown)
        cls.receiver = GrpcSink(host="0.0.0.0")
        cls.addClassCleanup(cls.receiver.close)
        cls.tmp = tempfile.mkdtemp(prefix="nl-hosts-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.done = os.path.join(cls.tmp, "done")
        targets = ", ".join(f"'{NET}.{i}.2:{SCRAPE_PORT}'" for i in FETCHES)
        with open(os.path.join(cls.tmp, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: hosts\n    honor_labels: true\n"
                    f"    static_configs:\n      - targets: [{targets}]\n")
        prom_port = test_prometheus.free_port()
        cls.prom_url = f"http://127.0.0.1:{prom_port}"
        cls.prom = subprocess.Popen(
            [test_prometheus.PROMETHEUS, "--config.file", os.path.join(cls.tmp, "prometheus.yml"),
             "--storage.tsdb.path", os.path.join(cls.tmp, "data"), "--web.listen-address",
             f"127.0.0.1:{prom_port}", "--log.level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cls.addClassCleanup(cls.prom.wait, 10)
        cls.addClassCleanup(cls.prom.terminate)
        harness.wait_for(cls.prometheus_ready, 60, "Prometheus to be ready", interval=0.1, alive=cls.prom)

    @classmethod
    def prometheus_ready(cls):
        try:
            with urllib.request.urlopen(f"{cls.prom_url}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, expr):
        url = f"{self.prom_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
        self.assertEqual(body["status"], "success", body)
        return body["data"]["result"]

    def worker(self, i):
        """nemolens-run on host i, as a job step starts it there."""
        peer, port = f"{NET}.{i}.1", self.pages.server_address[1]
        env = harness.launcher_env(OTEL_SERVICE_NAME="worker", SLURM_JOB_ID=JOB, OTEL_METRIC_EXPORT_INTERVAL=500,
                                   NEMOLENS_DESTINATIONS=f"pages={NET}.0.0/16")
        # The worker stays until the test has read Prometheus: the
        # endpoint is the launcher's, and ends with it.
        work = (f'for k in $(seq {FETCHES[i]}); do "{harness.PYTHON}" "{FETCH}" "http://{peer}:{port}/work" >/dev/null; done; '
                f'while [ ! -e {self.done} ]; do sleep 0.05; done')
        # ip, unshare and hostname run without a sanitizer build's runtime
        # (it has no business in them): only nemolens-run gets it.
        env["NL_HOST_PRELOAD"] = env.pop("LD_PRELOAD", "")
        host = (f'hostname nl-host-{i} && exec env LD_PRELOAD="$NL_HOST_PRELOAD" "{LAUNCHER}" --protocol grpc '
                f'--endpoint http://{peer}:{self.receiver.port} --prometheus={NET}.{i}.2:{SCRAPE_PORT} '
                f'-- /bin/sh -c \'{work}\'')
        w = subprocess.Popen(["ip", "netns", "exec", self.hosts[i], "unshare", "--uts", "/bin/sh", "-c", host],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        # Whatever happens to the test, nothing of a host outlives it: a
        # process left in a namespace keeps its addresses in use.
        self.addCleanup(self.end_host, w)
        return w

    @staticmethod
    def end_host(w):
        if w.poll() is None:
            os.killpg(w.pid, signal.SIGKILL)
        w.communicate()

    def test_every_host_apart_one_run_id_exact_totals(self):
        workers = {i: self.worker(i) for i in FETCHES}
        truth = {f"nl-host-{i}": n for i, n in FETCHES.items()}
        # Prometheus: the connections per host, joined with each process's
        # target_info (its resource) by job and instance.
        conns = (f'sum by (host_name, nemo_run_id) (gym_http_connection_pool_connect_total{{{DEST.replace(".", "_")}'
                 f'="pages"}} * on (job, instance) group_left (host_name, nemo_run_id) target_info)')
        scraped = {}

        def prometheus_has_all():
            scraped.clear()
            for r in self.query(conns):
                scraped[(r["metric"].get("host_name"), r["metric"].get("nemo_run_id"))] = int(float(r["value"][1]))
            return scraped == {(h, JOB): n for h, n in truth.items()}
        try:
            harness.poll(prometheus_has_all, 60, interval=0.25)
            info = self.query('count by (host_name) (target_info{job="worker"})')
        finally:
            open(self.done, "w").close()
        for i, w in workers.items():
            out, err = w.communicate(timeout=120)
            self.assertEqual(w.returncode, 0, f"host {i}: {err}")
            self.assertEqual(out + err, "", f"host {i}")
        self.assertEqual(scraped, {(h, JOB): n for h, n in truth.items()}, "Prometheus, by host and run")
        # Every fetching process is an instance of its own host (the shells
        # record nothing).
        self.assertEqual({r["metric"]["host_name"]: int(r["value"][1]) for r in info}, truth)
        by_host, instances, run_ids = {}, {}, set()
        for res, _, p in self.receiver.latest_by_instance(CONNECT):
            if attrs(p).get(DEST) != "pages":
                continue
            host = res.get("host.name")
            by_host[host] = by_host.get(host, 0) + p.as_int
            instances.setdefault(host, set()).add(res.get("service.instance.id"))
            run_ids.add(res.get("nemo.run.id"))
        requests = {}
        for res, _, p in self.receiver.latest_by_instance(REQUESTS):
            requests[res.get("host.name")] = requests.get(res.get("host.name"), 0) + p.count
        served = {f"nl-host-{i}": Pages.counts.get(f"{NET}.{i}.2", 0) for i in FETCHES}
        self.assertEqual(served, truth, "the server's own counts")
        self.assertEqual(by_host, truth)
        self.assertEqual(requests, truth)
        # One process per fetch, each its own instance, on its own host only.
        self.assertEqual({h: len(s) for h, s in instances.items()}, truth)
        self.assertEqual(len(set().union(*instances.values())), sum(FETCHES.values()))
        self.assertEqual(run_ids, {JOB})
        every = {res.get("nemo.run.id") for req in self.receiver.requests for rm in req.resource_metrics
                 for res in [{a.key: a.value.string_value for a in rm.resource.attributes}]}
        self.assertEqual(every, {JOB}, "every resource of the run carries its id")


if __name__ == "__main__":
    unittest.main(verbosity=2)
