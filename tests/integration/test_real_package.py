# SPDX-License-Identifier: Apache-2.0
"""The Debian package, built, checked, installed, used and removed.

`cmake --build BUILD --target package` must write nemolens_<version>_<arch>.deb
holding every installed file under /usr (libraries in the multiarch
directory), with Depends computed from the binaries plus libcurl4 and libunwind8 (opened
with dlopen), and lintian must find no error in it. Installed with dpkg, the
package must work as a user would use it: `man nemolens-run` and `man 7 nemolens`
show the manual pages, /usr/bin/nemolens-run finds the installed shim, and the demo's workload (gym_workload.py) started with it
fills every panel of the installed dashboard in VictoriaMetrics; a C program builds against the installed header and library
with `pkg-config --cflags --libs nemolens` and exports what it records.

The package is purged again whatever happens, so the machine is left as it
was for the tests that run after this one. It needs root (dpkg) and a
machine where nemolens is not installed otherwise; it is a `real` test, not
rerun under sanitizers (a sanitizer build's binaries cannot be packaged for
plain programs).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from gym_workload import GymWorkload  # noqa: E402
from victoria import Victoria  # noqa: E402

sys.path.insert(0, os.path.join(harness.SRC, "scripts", "demo"))
import dashboard  # noqa: E402

BUILD = os.path.dirname(os.path.abspath(harness.BIN))
MULTIARCH = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
LIBDIR = f"/usr/lib/{MULTIARCH}"
PACKAGE = "nemolens"

# Files the package must hold (a prefix of the path, for versioned names).
EXPECTED = [
    "/usr/bin/nemolens-run",
    f"{LIBDIR}/libnemolens_preload.so",
    f"{LIBDIR}/libnemolens_export.so",
    f"{LIBDIR}/libnemolens.so",
    f"{LIBDIR}/libnemolens.so.0",
    f"{LIBDIR}/pkgconfig/nemolens.pc",
    "/usr/include/nemolens.h",
    "/usr/share/nemolens/dashboards/nemolens.json",
    "/usr/share/doc/nemolens/README.md",
    "/usr/share/doc/nemolens/copyright",
    "/usr/share/doc/nemolens/changelog.gz",
    "/usr/share/doc/nemolens/examples/lens_example.c",
    "/usr/share/doc/nemolens/docs/configuration.md",
    "/usr/share/doc/nemolens/docs/metrics.md",
    "/usr/share/man/man1/nemolens-run.1.gz",
    "/usr/share/man/man7/nemolens.7.gz",
]

def installed():
    p = subprocess.run(["dpkg-query", "-W", "-f=${Status}", PACKAGE], capture_output=True, text=True)
    return "install ok installed" in p.stdout


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)


class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise RuntimeError("this test installs a package with dpkg: run it as root")
        if installed():
            raise RuntimeError(f"package {PACKAGE} is already installed here; this test would remove it")
        for old in glob.glob(os.path.join(BUILD, f"{PACKAGE}_*.deb")):
            os.unlink(old)
        p = run(["cmake", "--build", BUILD, "--target", "package"])
        if p.returncode != 0:
            raise RuntimeError(f"cmake --build --target package failed:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
        debs = glob.glob(os.path.join(BUILD, f"{PACKAGE}_*.deb"))
        if len(debs) != 1:
            raise RuntimeError(f"expected one {PACKAGE}_<version>_<arch>.deb in {BUILD}, found {debs}")
        cls.deb = debs[0]

    def field(self, name):
        return run(["dpkg-deb", "-f", self.deb, name]).stdout.strip()

    def test_name_version_and_architecture(self):
        arch = run(["dpkg", "--print-architecture"]).stdout.strip()
        version = self.field("Version")
        self.assertRegex(version, r"^\d+\.\d+\.\d+$")
        self.assertEqual(os.path.basename(self.deb), f"{PACKAGE}_{version}_{arch}.deb")
        self.assertEqual(self.field("Package"), PACKAGE)
        self.assertEqual(self.field("Architecture"), arch)

    def test_contents(self):
        listing = run(["dpkg-deb", "-c", self.deb]).stdout
        paths = [line.split()[5].lstrip(".") for line in listing.splitlines() if len(line.split()) >= 6]
        for want in EXPECTED:
            self.assertTrue(any(p == want or p.startswith(want + ".") for p in paths), f"{want} not in\n{listing}")
        # Exactly what the install rules install under /usr (including those
        # added later, e.g. the Python adapter), no more.
        stage = tempfile.mkdtemp(prefix="nemolens-stage.")
        self.addCleanup(shutil.rmtree, stage, True)
        inst = run(["cmake", "--install", BUILD, "--prefix", "/usr"], env=dict(os.environ, DESTDIR=stage))
        self.assertEqual(inst.returncode, 0, inst.stdout + inst.stderr)
        staged = {"/" + os.path.relpath(os.path.join(d, f), stage) for d, _, fs in os.walk(stage) for f in fs}
        packaged = {line.split()[5].lstrip(".") for line in listing.splitlines()
                    if len(line.split()) >= 6 and not line.startswith("d")}
        self.assertEqual(packaged, staged)
        # Everything under /usr; nothing that would activate the shim.
        self.assertTrue(all(p == "/" or p.startswith("/usr/") for p in paths), listing)
        self.assertFalse([p for p in paths if "ld.so.preload" in p or p.startswith("/etc")], listing)
        control = subprocess.run(["dpkg-deb", "--ctrl-tarfile", self.deb], capture_output=True, timeout=60)
        self.assertNotIn(b"ld.so.preload", control.stdout)

    def test_depends_from_the_binaries_and_libcurl(self):
        depends = {d.strip().split()[0] for d in self.field("Depends").split(",")}
        # libc, protobuf-c and zlib come from dpkg-shlibdeps; libcurl4 and
        # libunwind8 are dlopen'ed.
        self.assertLessEqual({"libc6", "libprotobuf-c1", "zlib1g", "libcurl4", "libunwind8"}, depends)

    def test_copyright_names_the_license(self):
        """Debian's machine-readable format (DEP-5), the Apache License 2.0."""
        tmp = tempfile.mkdtemp(prefix="nemolens-copyright.")
        self.addCleanup(shutil.rmtree, tmp, True)
        p = run(["dpkg-deb", "-x", self.deb, tmp])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(tmp, "usr/share/doc/nemolens/copyright")) as f:
            text = f.read()
        self.assertTrue(text.startswith("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"),
                        text[:200])
        self.assertRegex(text, r"(?m)^Files: \*\nCopyright: .+\nLicense: Apache-2.0$")
        self.assertRegex(text, r"(?m)^License: Apache-2.0\n .*Apache License")
        self.assertIn("/usr/share/common-licenses/Apache-2.0", text)
        self.assertNotIn("unknown", text)

    def test_lintian_finds_no_errors(self):
        p = run(["lintian", "--no-tag-display-limit", self.deb])
        tags = [line for line in p.stdout.splitlines() if re.match(r"^[EW]: ", line)]
        errors = [t for t in tags if t.startswith("E: ")]
        self.assertEqual(errors, [], p.stdout + p.stderr)
        print(f"lintian: {len(tags)} warnings: " + "; ".join(t.split(": ", 2)[2] for t in tags), file=sys.stderr)

    def test_installed_package_works(self):
        try:
            p = run(["dpkg", "-i", self.deb], env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            # The Python adapter, when packaged, is compiled by postinst.
            adapter = f"{LIBDIR}/nemolens-python"
            if os.path.isdir(adapter):
                pyc = [f for _, _, fs in os.walk(adapter) for f in fs if f.endswith(".pyc")]
                self.assertTrue(pyc, f"postinst compiled nothing in {adapter}")
            self.check_manual_pages()
            self.check_nemolens_run()
            self.check_c_api_build()
        finally:
            run(["dpkg", "--purge", PACKAGE])
        self.assertFalse(installed())
        listing = run(["dpkg-deb", "-c", self.deb]).stdout
        for path in [line.split()[5].lstrip(".") for line in listing.splitlines() if len(line.split()) >= 6]:
            # Every file, and every directory of the package's own (none of /usr's).
            if not path.endswith("/") or "nemolens" in path:
                self.assertFalse(os.path.lexists(path.rstrip("/")), f"{path} left behind")

    def check_nemolens_run(self):
        vm = Victoria()
        self.addCleanup(vm.stop)
        env = harness.plain_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=vm.otlp_url)
        env.pop("NEMOLENS_PRELOAD_PATH", None)
        # Which shim it preloads...
        p = run(["/usr/bin/nemolens-run", harness.PYTHON, "-c", "import os; print(os.environ['LD_PRELOAD'])"],
                env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), f"{LIBDIR}/libnemolens_preload.so")
        # ... and that what the demo's workload does under it reaches the
        # backend: every panel of the installed dashboard has data, and the
        # servers counted the requests the client saw answered.
        workload = GymWorkload(vm, launcher="/usr/bin/nemolens-run")
        try:
            workload.run()
        finally:
            workload.stop()
        empty = [p["title"] for p in dashboard.panels("/usr/share/nemolens/dashboards/nemolens.json")
                 if not any(vm.query(q) for q in p["queries"])]
        self.assertEqual(empty, [])
        client = workload.client_result
        answered = sum(client["ok"].values()) + sum(n for errs in client["failed"].values()
                                                    for e, n in errs.items() if e.startswith("http_"))
        q = 'sum({__name__="http.server.request.duration_count", "service.name"="demo-servers"})'
        vec = vm.wait_for(q, lambda v: v and float(v[0]["value"][1]) >= answered)
        self.assertEqual(float(vec[0]["value"][1]), answered)

    def check_manual_pages(self):
        """`man nemolens-run` and `man 7 nemolens` work once installed."""
        env = dict(os.environ, MANWIDTH="80", MANPAGER="cat", PAGER="cat", LC_ALL="C.UTF-8")
        for args, path, title in ((["nemolens-run"], "/usr/share/man/man1/nemolens-run.1.gz", "nemolens-run(1)"),
                                  (["7", "nemolens"], "/usr/share/man/man7/nemolens.7.gz", "nemolens(7)")):
            p = run(["man", "-w"] + args, env=env)
            self.assertEqual((p.returncode, p.stdout.strip()), (0, path), p.stderr)
            p = run(["man"] + args, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            head = p.stdout.splitlines()[:10]
            self.assertTrue(head and head[0].startswith(title), head)
            self.assertIn("NAME", head)
        # The page lists every variable the reference does (it is made from it).
        page = run(["man", "7", "nemolens"], env=env).stdout
        for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "NEMOLENS_DESTINATIONS", "NEMOLENS_LOG_PATH"):
            self.assertIn(var, page)
        # nemolens-run --help points at it.
        p = run(["/usr/bin/nemolens-run", "--help"])
        self.assertIn("nemolens(7)", p.stdout)

    def check_c_api_build(self):
        flags = run(["pkg-config", "--cflags", "--libs", "nemolens"])
        self.assertEqual(flags.returncode, 0, flags.stderr)
        self.assertIn("-lnemolens", flags.stdout.split())
        tmp = tempfile.mkdtemp(prefix="nemolens-pkg.")
        self.addCleanup(shutil.rmtree, tmp, True)
        exe = os.path.join(tmp, "lens_example")
        cc = run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                  "/usr/share/doc/nemolens/examples/lens_example.c", "-o", exe] + flags.stdout.split())
        self.assertEqual(cc.returncode, 0, cc.stderr)
        ldd = run(["ldd", exe]).stdout
        m = re.search(r"libnemolens\.so\.0 => (\S+)", ldd)
        self.assertTrue(m, ldd)
        # /lib may be /usr/lib (merged /usr): the same file either way.
        self.assertEqual(os.path.realpath(m.group(1)), os.path.realpath(f"{LIBDIR}/libnemolens.so.0"))
        out = os.path.join(tmp, "console.jsonl")
        env = harness.plain_env(OTEL_METRICS_EXPORTER="console", NEMOLENS_CONSOLE_PATH=out)
        p = run([exe], env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            exported = f.read()
        for name in ("rl.reward.mean", "gen_ai.server.request.duration", "gym.verify.duration_ms"):
            self.assertIn(f'"{name}"', exported)


if __name__ == "__main__":
    unittest.main(verbosity=2)
