#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Keeps the documentation true to the code.

    check_docs.py [--launcher NEMOLENS_RUN] SRC
        check the tree at SRC (with the launcher: its --help against its page)
    check_docs.py [--launcher NEMOLENS_RUN] --self-test SRC
        show that each check fails on a broken copy

The checks read the code's own definitions, not a list kept here, so a new
variable or instrument is caught the day it is added:

  variables    every environment variable the C sources and the Python
               adapter read is in the table of docs/configuration.md, and
               every variable there is read
  instruments  every instrument the code defines (the nl_inst_def tables and
               direct nl_instrument_get calls) has a row in a table of
               docs/metrics.md, or of a docs page it links to, whose unit
               column holds its unit
  commands     the README's two commands are `bash scripts/demo.sh` and the
               command .ci/run runs
  links        every relative link of README.md and docs/*.md names a file
               that exists, and an anchor that one of its headings makes
  manpages     nemolens-run(1) lists exactly the options (and their
               arguments) of nemolens-run --help, and nemolens(7), made from
               docs/configuration.md, names every variable that does
  licenses     every C, Python, shell and CMake source (and the linker
               script, JavaScript, Go) has its SPDX-License-Identifier line
  sources      every C and Python source of the layer folders (preload/,
               hooks/, exporter/) is named, by its path, in the source-file
               tables of docs/internals.md, and every path named there exists
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

CODE_DIRS = ("preload", "hooks", "exporter")
PREFIXED = re.compile(r'''["']((?:NEMOLENS|OTEL|NEMO_GYM)_[A-Z0-9_]*[A-Z0-9])["']''')
# A call of a function whose name says it reads the environment (getenv,
# secure_getenv, nl_env_get, env_get, env_keep, env_ms, nl_environ_get, ...).
ENV_CALL = re.compile(r"\b(\w*env\w*)\s*\(")
CAPS_LITERAL = re.compile(r'"([A-Z][A-Z0-9_]*[A-Z0-9])"')
PY_ENV = re.compile(r'''os\.(?:environ(?:\.get|\.pop|\.setdefault)?|getenv)\s*[\[(]\s*["']([A-Z][A-Z0-9_]*)["']''')
# The OTLP exporter's variables are read in two forms, the signal-specific
# one first (config.c: env_otlp(e, "HEADERS", ...)).
OTLP_SUFFIX = re.compile(r'\benv_otlp\s*\(\s*\w+\s*,\s*"([A-Z_]+)"')
OTLP_FORMS = ("OTEL_EXPORTER_OTLP_METRICS_", "OTEL_EXPORTER_OTLP_")


def source_files(root, exts):
    for d in CODE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith(exts):
                    yield os.path.join(dirpath, f)


def strip_c_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def call_args(text, start, pair="()"):
    """What lies between the bracket at start and the one that closes it
    (string literals skipped: "{token}" is a unit, not a brace)."""
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c == '"':
            m = re.compile(r'"(?:[^"\\\n]|\\.)*"').match(text, i)
            i = m.end() if m else i + 1
            continue
        if c == pair[0]:
            depth += 1
        elif c == pair[1]:
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
        i += 1
    return text[start + 1:]


def variables_read(root):
    names = {}
    for path in source_files(root, (".c", ".h")):
        text = strip_c_comments(open(path, encoding="utf-8").read())
        rel = os.path.relpath(path, root)
        for m in PREFIXED.finditer(text):
            names.setdefault(m.group(1), rel)
        for m in ENV_CALL.finditer(text):
            if m.group(1) == "env_otlp":
                continue   # its argument is a suffix (below)
            args = call_args(text, m.end() - 1)
            for lit in CAPS_LITERAL.finditer(args):
                names.setdefault(lit.group(1), rel)
        for m in OTLP_SUFFIX.finditer(text):
            for form in OTLP_FORMS:
                names.setdefault(form + m.group(1), rel)
    for path in source_files(root, (".py",)):
        text = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, root)
        for rx in (PREFIXED, PY_ENV):
            for m in rx.finditer(text):
                names.setdefault(m.group(1), rel)
    return names


def md_tables(text):
    """(header cells, [row cells]) of every pipe table, code blocks left out."""
    lines = strip_code_blocks(text).split("\n")
    tables = []
    i = 0
    while i + 1 < len(lines):
        if lines[i].startswith("|") and re.match(r"^\|(\s*:?-+:?\s*\|)+\s*$", lines[i + 1]):
            header = split_row(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(split_row(lines[i]))
                i += 1
            tables.append((header, rows))
        else:
            i += 1
    return tables


def split_row(line):
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [c.strip() for c in cells[1:-1]]


def strip_code_blocks(text):
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def documented_variables(root):
    """Variable names in the first column of docs/configuration.md's table."""
    names = set()
    for tok in documented_tokens(root):
        # OTEL_EXPORTER_OTLP_[METRICS_]HEADERS: both forms.
        m = re.match(r"^(.*)\[([A-Z0-9_]+)\](.*)$", tok)
        if m:
            names.add(m.group(1) + m.group(2) + m.group(3))
            names.add(m.group(1) + m.group(3))
        else:
            names.add(tok)
    return names, len(variable_tables(root))


def variable_tables(root):
    text = open(os.path.join(root, "docs", "configuration.md"), encoding="utf-8").read()
    return [t for t in md_tables(text) if t[0] and t[0][0].lower() == "variable"]


def documented_tokens(root):
    """The names in the first column of the variables table, as written
    (OTEL_EXPORTER_OTLP_[METRICS_]HEADERS stands for two)."""
    return [tok for _, rows in variable_tables(root) for row in rows
            for tok in re.findall(r"`([A-Z][A-Z0-9_\[\]]*)`", row[0])]


def check_variables(root):
    errors = []
    read = variables_read(root)
    documented, n_tables = documented_variables(root)
    if n_tables != 1:
        errors.append(f"docs/configuration.md: {n_tables} tables with a 'variable' column; want exactly one")
    for name in sorted(set(read) - documented):
        errors.append(f"{name} is read ({read[name]}) but not in docs/configuration.md's table")
    for name in sorted(documented - set(read)):
        errors.append(f"{name} is in docs/configuration.md's table but no code reads it")
    return errors


DEF_TABLE = re.compile(r"struct\s+nl_inst_def\s+\w+\s*\[[^\]]*\]\s*=\s*\{")
ENTRY = re.compile(r"\[\s*\w+\s*\]\s*=")
STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
INST_GET = re.compile(r"\bnl_instrument_get\s*\(")


def defined_instruments(root):
    """{name: unit} of every instrument the code defines."""
    insts = {}
    for path in source_files(root, (".c",)):
        text = strip_c_comments(open(path, encoding="utf-8").read())
        for m in DEF_TABLE.finditer(text):
            body = call_args(text, m.end() - 1, "{}")
            entries = ENTRY.split(body)[1:]
            for e in entries:
                s = STRING.findall(e)
                if len(s) >= 2:
                    insts[s[0]] = s[1]
        for m in INST_GET.finditer(text):
            s = STRING.findall(call_args(text, m.end() - 1))
            if len(s) >= 2:
                insts[s[0]] = s[1]
    return insts


def linked_pages(root, page):
    """docs pages page links to (page included)."""
    text = strip_code_blocks(open(page, encoding="utf-8").read())
    pages = [page]
    for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        p = os.path.normpath(os.path.join(os.path.dirname(page), target))
        if p.startswith(os.path.join(root, "docs")) and os.path.exists(p) and p not in pages:
            pages.append(p)
    return pages


def documented_units(root):
    """{name: [unit cells]} from every table with a 'unit' column."""
    units = {}
    for page in linked_pages(root, os.path.join(root, "docs", "metrics.md")):
        for header, rows in md_tables(open(page, encoding="utf-8").read()):
            cols = [h.lower() for h in header]
            if "unit" not in cols:
                continue
            u = cols.index("unit")
            for row in rows:
                if len(row) <= u:
                    continue
                for name in re.findall(r"`([a-z][a-z0-9_.]*)`", row[0]):
                    units.setdefault(name, []).append(row[u])
    return units


def unit_matches(cell, unit):
    if unit == "":
        return cell in ("", "(none)", "1")
    return cell == f"`{unit}`"


def check_instruments(root):
    errors = []
    insts = defined_instruments(root)
    if not insts:
        errors.append("no instrument definitions found in the code (the parser lost them)")
    units = documented_units(root)
    for name, unit in sorted(insts.items()):
        cells = units.get(name)
        if not cells:
            errors.append(f"instrument {name} has no row with a unit column in docs/metrics.md or a page it links")
        elif not any(unit_matches(c, unit) for c in cells):
            want = f"`{unit}`" if unit else "an empty cell or (none)"
            errors.append(f"instrument {name}: unit documented as {cells}, the code says {want}")
    return errors


def check_commands(root):
    errors = []
    text = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    m = re.search(r"^## The two commands\n(.*?)^## ", text, flags=re.S | re.M)
    block = re.search(r"^```sh\n(.*?)^```", m.group(1), flags=re.S | re.M) if m else None
    if not block:
        return ["README.md: no '## The two commands' section with a sh block"]
    cmds = [re.sub(r"\s*#.*$", "", l).strip() for l in block.group(1).split("\n")]
    cmds = [c for c in cmds if c]
    ci = open(os.path.join(root, ".ci", "run"), encoding="utf-8").read().split("\n")
    ci_cmds = [l.strip() for l in ci
               if l.strip() and not l.lstrip().startswith(("#", "set ", "cd ")) and not l.startswith("#!")]
    if len(cmds) != 2:
        errors.append(f"README.md: the two commands are {cmds}")
    if not cmds or cmds[0] != "bash scripts/demo.sh":
        errors.append(f"README.md: the first command is {cmds[:1]}, not bash scripts/demo.sh")
    if ci_cmds != cmds[1:2]:
        errors.append(f"README.md's test command {cmds[1:2]} is not what .ci/run runs: {ci_cmds}")
    for c in cmds:
        script = c.split()[1] if len(c.split()) > 1 else ""
        if not os.path.isfile(os.path.join(root, script)):
            errors.append(f"README.md: {c}: no such script")
    return errors


def heading_anchors(path):
    anchors = set()
    for line in strip_code_blocks(open(path, encoding="utf-8").read()).split("\n"):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            # GitHub's rule: lower case, punctuation but - and _ dropped, spaces to -.
            a = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            anchors.add(a)
    return anchors


def check_links(root):
    errors = []
    pages = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    pages += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    for page in pages:
        text = strip_code_blocks(open(page, encoding="utf-8").read())
        text = re.sub(r"`[^`\n]*`", "", text)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            where = os.path.relpath(page, root)
            if not os.path.exists(dest):
                errors.append(f"{where}: link to {target}: no such file")
            elif anchor and dest.endswith(".md") and anchor not in heading_anchors(dest):
                errors.append(f"{where}: link to {target}: no such heading")
    return errors


OPTION = re.compile(r"(?<![\w-])(--?[a-z][a-z-]*)(?:[ =]([A-Z]+))?")


def help_options(launcher):
    """{option: argument name} from nemolens-run --help's option lines."""
    p = subprocess.run([launcher, "--help"], capture_output=True, text=True, timeout=30)
    opts = {}
    for line in p.stdout.split("\n"):
        # "  --endpoint URL        OTEL_...", "  -h, --help            this text"
        m = re.match(r"^  (-[^ ].*?)(?:\s{2,}|$)", line)
        if m:
            for o in OPTION.finditer(m.group(1)):
                opts[o.group(1)] = o.group(2) or ""
    return opts


def man_options(root):
    """{option: argument name} from the OPTIONS section of nemolens-run.1.scd."""
    text = open(os.path.join(root, "docs", "man", "nemolens-run.1.scd"), encoding="utf-8").read()
    m = re.search(r"^# OPTIONS\n(.*?)(?=^# )", text, flags=re.S | re.M)
    opts = {}
    for line in (m.group(1) if m else "").split("\n"):
        # "*--endpoint* _URL_", "*-h*, *--help*"
        if line.startswith("*-"):
            for o in re.finditer(r"\*(--?[a-z][a-z-]*)\*(?: _([A-Z]+)_)?", line):
                opts[o.group(1)] = o.group(2) or ""
    return opts


def check_manpages(root, launcher=None):
    errors = []
    man = man_options(root)
    if not man:
        errors.append("docs/man/nemolens-run.1.scd: no options found in its OPTIONS section")
    if launcher:
        helped = help_options(launcher)
        if not helped:
            errors.append(f"{launcher} --help lists no options")
        for o in sorted(set(helped) | set(man)):
            if o not in man:
                errors.append(f"nemolens-run --help has {o}, nemolens-run(1) does not")
            elif o not in helped:
                errors.append(f"nemolens-run(1) has {o}, nemolens-run --help does not")
            elif man[o] != helped[o]:
                errors.append(f"{o} takes {helped[o] or 'nothing'} in --help, {man[o] or 'nothing'} in nemolens-run(1)")
    # nemolens(7) is made from docs/configuration.md: every variable must
    # come out of the generator.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "nemolens.7.scd")
        man_src = os.path.join(root, "docs", "man")
        p = subprocess.run(["/usr/bin/python3", os.path.join(man_src, "config_to_scd.py"),
                            os.path.join(root, "docs", "configuration.md"),
                            os.path.join(man_src, "nemolens.7.scd.in"), out], capture_output=True, text=True)
        if p.returncode != 0:
            return errors + [f"config_to_scd.py failed: {p.stderr.strip()}"]
        page = open(out, encoding="utf-8").read().replace("\\_", "_")
        for name in documented_tokens(root):
            if name not in page:
                errors.append(f"{name} is in docs/configuration.md but not in nemolens(7)")
    return errors


SPDX = "SPDX-License-Identifier: Apache-2.0"
SOURCE_EXTS = (".c", ".h", ".py", ".sh", ".cmake", ".ld", ".js", ".go")


def check_licenses(root):
    """Every source file says its license in its first three lines."""
    errors = []
    for dirpath, dirs, files in os.walk(root):
        # Build trees, caches and installed packages are not sources.
        dirs[:] = [d for d in dirs if not (d.startswith((".", "build")) or d in ("__pycache__", "node_modules"))]
        for f in files:
            if not (f.endswith(SOURCE_EXTS) or f == "CMakeLists.txt"):
                continue
            path = os.path.join(dirpath, f)
            with open(path, encoding="utf-8", errors="replace") as fh:
                head = [fh.readline() for _ in range(3)]
            if not any(SPDX in line for line in head):
                errors.append(f"{os.path.relpath(path, root)}: no '{SPDX}' line at the top")
    return errors


SOURCE_TABLE_EXTS = (".c", ".h", ".py")
NAMED_PATH = re.compile(r"`((?:preload|hooks|exporter)/[\w./-]+\.(?:c|h|py))`")


def check_sources(root):
    """docs/internals.md names every source file of the layers, each in a
    row of its tables (a file without its line fails), and names none that
    is gone."""
    text = open(os.path.join(root, "docs", "internals.md"), encoding="utf-8").read()
    named = set()
    for _, rows in md_tables(text):
        for row in rows:
            if row:
                named.update(NAMED_PATH.findall(row[0]))
    errors = []
    present = set()
    for path in source_files(root, SOURCE_TABLE_EXTS):
        rel = os.path.relpath(path, root)
        if "__pycache__" in rel:
            continue
        present.add(rel)
        if rel not in named:
            errors.append(f"{rel}: not in the source-file tables of docs/internals.md")
    for rel in sorted(named - present):
        errors.append(f"docs/internals.md names {rel}, which does not exist")
    return errors


LAUNCHER = None

CHECKS = {
    "variables": check_variables,
    "instruments": check_instruments,
    "commands": check_commands,
    "links": check_links,
    "manpages": lambda root: check_manpages(root, LAUNCHER),
    "licenses": check_licenses,
    "sources": check_sources,
}


def run(root, quiet=False):
    failed = {}
    for name, check in CHECKS.items():
        errors = check(root)
        if errors:
            failed[name] = errors
        if not quiet:
            print(f"{name}: {'FAIL' if errors else 'ok'}")
            for e in errors:
                print(f"  {e}")
    return failed


# ---- self-test: each check must catch a deliberate break -------------------


def edit(root, rel, old, new, count=1):
    path = os.path.join(root, rel)
    text = open(path, encoding="utf-8").read()
    if old not in text:
        raise SystemExit(f"self-test: {rel} no longer contains {old!r}; update the break")
    open(path, "w", encoding="utf-8").write(text.replace(old, new, count))


BREAKS = [
    # (check that must fail, what the break is, how to make it)
    ("variables", "a variable the code reads, missing from the table",
     lambda r: edit(r, "docs/configuration.md", "| `NEMOLENS_CARDINALITY_LIMIT` |", "| `NEMOLENS_CARDINALITY_LIMIX` |")),
    ("variables", "a variable in the table that no code reads",
     lambda r: edit(r, "docs/configuration.md", "| `NEMOLENS_CARDINALITY_LIMIT` |",
                    "| `NEMOLENS_STALE_SETTING` | | gone |\n| `NEMOLENS_CARDINALITY_LIMIT` |")),
    ("variables", "a second table of variables",
     lambda r: open(os.path.join(r, "docs", "configuration.md"), "a").write(
         "\n| variable | default | meaning |\n|---|---|---|\n| `NEMOLENS_ADOPT` | | |\n")),
    ("variables", "a variable the code reads, added to the code only",
     lambda r: open(os.path.join(r, "preload", "core", "zz_break.c"), "w").write(
         '/* SPDX-License-Identifier: Apache-2.0 */\n'
         'const char *f(void) { return getenv("NEMOLENS_NOT_DOCUMENTED"); }\n')),
    ("variables", "a variable read by the Python adapter, added to the code only",
     lambda r: open(os.path.join(r, "preload", "python", "zz_break.py"), "w").write(
         '# SPDX-License-Identifier: Apache-2.0\nimport os\nX = os.environ.get("SOME_UNDOCUMENTED_SETTING")\n')),
    ("instruments", "an instrument added to a definition table only",
     lambda r: edit(r, "preload/core/instruments.c", "const struct nl_inst_def nl_inst_defs[NL_N_INST] = {",
                    'const struct nl_inst_def nl_inst_defs[NL_N_INST] = {\n'
                    '\t[NL_I_BREAK] = HIST("gym.not.documented", "ms", "x", nl_gym_ms_bounds),')),
    ("instruments", "an instrument registered directly, not documented",
     lambda r: open(os.path.join(r, "preload", "core", "zz_break.c"), "w").write(
         '/* SPDX-License-Identifier: Apache-2.0 */\n'
         'void g(void) { nl_instrument_get("gym.also.undocumented", "By", "x", NL_GAUGE_INT, NULL, 0); }\n')),
    ("instruments", "an instrument documented with the wrong unit",
     lambda r: edit(r, "docs/metrics.md", "| `http.client.request.duration` | histogram | `s` |",
                    "| `http.client.request.duration` | histogram | `ms` |")),
    ("commands", "the README's test command not the one .ci/run runs",
     lambda r: edit(r, ".ci/run", "bash scripts/test.sh", "bash scripts/test-all.sh")),
    ("commands", "the README's first command changed",
     lambda r: edit(r, "README.md", "bash scripts/demo.sh     #", "bash scripts/demo.sh --keep     #")),
    ("manpages", "an option in nemolens-run(1) that --help does not have",
     lambda r: edit(r, "docs/man/nemolens-run.1.scd", "*--version*\n", "*--version*\n\n*--verbose*\n\tMore.\n")),
    ("manpages", "an option of --help missing from nemolens-run(1)",
     lambda r: edit(r, "docs/man/nemolens-run.1.scd", "*--memory*\n", "*--memory-profile*\n")),
    ("manpages", "an option whose argument differs",
     lambda r: edit(r, "docs/man/nemolens-run.1.scd", "*--endpoint* _URL_", "*--endpoint* _HOST_")),
    ("manpages", "nemolens(7) made without the variables table",
     lambda r: edit(r, "docs/man/nemolens.7.scd.in", "\n@ENVIRONMENT@\n", "\n(none)\n")),
    ("licenses", "a new C file without its SPDX line",
     lambda r: open(os.path.join(r, "hooks", "zz_new.c"), "w").write("/* A new hook. */\nint x;\n")),
    ("licenses", "a Python file whose SPDX line was removed",
     lambda r: edit(r, "preload/python/sitecustomize.py", "# SPDX-License-Identifier: Apache-2.0\n", "")),
    ("sources", "a new source file without its line in docs/internals.md",
     lambda r: open(os.path.join(r, "preload", "follow", "zz_new.c"), "w").write(
         "/* SPDX-License-Identifier: Apache-2.0 */\n/* A new part of the follow layer. */\nint y;\n")),
    ("sources", "a file named in docs/internals.md that is gone",
     lambda r: os.remove(os.path.join(r, "hooks", "dns.c"))),
    ("sources", "a file named only outside the first cell of its row",
     lambda r: edit(r, "docs/internals.md", "| `hooks/dns.c` | The `getaddrinfo` hook:",
                    "| DNS | The `getaddrinfo` hook of `hooks/dns.c`:")),
    ("links", "a link to a page that does not exist",
     lambda r: edit(r, "docs/export.md", "(#however-a-process-ends)", "(missing-page.md)")),
    ("links", "a link to a heading that does not exist",
     lambda r: edit(r, "README.md", "(docs/metrics.md#connections-every-process-on-by-default)",
                    "(docs/metrics.md#no-such-heading)")),
]


def copy_tree(src, dst):
    for d in CODE_DIRS + ("docs", ".ci"):
        shutil.copytree(os.path.join(src, d), os.path.join(dst, d),
                        ignore=shutil.ignore_patterns("__pycache__", "build*"))
    for f in ("README.md", "LICENSE"):
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), dst)
    os.makedirs(os.path.join(dst, "scripts"))
    for f in ("demo.sh", "test.sh"):
        shutil.copy(os.path.join(src, "scripts", f), os.path.join(dst, "scripts"))
    # README links there.
    shutil.copytree(os.path.join(src, "examples"), os.path.join(dst, "examples"))


def self_test(src):
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        pristine = os.path.join(tmp, "pristine")
        os.makedirs(pristine)
        copy_tree(src, pristine)
        if run(pristine, quiet=True):
            print("self-test: the unbroken copy fails already; run the checks first")
            return 1
        for i, (check, what, brk) in enumerate(BREAKS):
            root = os.path.join(tmp, f"broken{i}")
            os.makedirs(root)
            copy_tree(src, root)
            brk(root)
            errors = CHECKS[check](root)
            others = {n: e for n, e in run(root, quiet=True).items() if n != check}
            ok = bool(errors)
            print(f"{'caught' if ok else 'MISSED'}: {check}: {what}" + (f": {errors[0]}" if ok else ""))
            if not ok:
                bad += 1
            if others:
                print(f"  (also failed: {sorted(others)})")
    return 1 if bad else 0


def main(argv):
    global LAUNCHER
    if len(argv) >= 3 and argv[1] == "--launcher":
        LAUNCHER = os.path.abspath(argv[2])
        argv = argv[:1] + argv[3:]
    if len(argv) == 3 and argv[1] == "--self-test":
        return self_test(os.path.abspath(argv[2]))
    if len(argv) != 2:
        print(__doc__)
        return 2
    failed = run(os.path.abspath(argv[1]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
