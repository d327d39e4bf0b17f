# SPDX-License-Identifier: Apache-2.0
"""The queries of dashboards/nemolens.json, as a backend is asked them.

    for panel in panels(): panel["row"], panel["title"], panel["unit"], panel["queries"], panel["legends"]
    variables()      # {name: {"query", "regex"}} of the query-type template variables

Grafana's variables are set to match everything and its interval macros to a
fixed window, as the dashboard shows them with every variable on "All". The
Grafana file is the one definition of the queries: the demo's browser view
(viewer.py) and the tests (test_dashboard.py, test_viewer_browser.py) read it.
"""
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
DASHBOARD = os.path.normpath(os.path.join(HERE, "..", "..", "dashboards", "nemolens.json"))

# "All" of a multi-value variable is its allValue, ".*"; a window of a minute
# holds enough of 1 s exports (and of Prometheus's 15 s scrapes) for rate().
MACROS = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h"}


def load(path=DASHBOARD):
    with open(path) as f:
        return json.load(f)


def substitute(expr, dash):
    for macro, value in MACROS.items():
        expr = expr.replace(macro, value)
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            expr = re.sub(r"\$\{?" + var["name"] + r"\}?\b", var.get("allValue") or ".*", expr)
    return expr


def panels(path=DASHBOARD):
    dash = load(path)
    out, row = [], None
    for p in dash["panels"]:
        if p["type"] == "row":
            row = p["title"]
            continue
        out.append({"row": row, "title": p["title"], "unit": p["fieldConfig"]["defaults"].get("unit", ""),
                    "description": p.get("description", ""),
                    "queries": [substitute(t["expr"], dash) for t in p["targets"]],
                    "legends": [t.get("legendFormat", "") for t in p["targets"]]})
    return out


def variables(path=DASHBOARD):
    dash = load(path)
    out = {}
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            m = re.fullmatch(r"query_result\((.*)\)", q, re.S)
            out[var["name"]] = {"query": substitute(m.group(1) if m else q, dash), "regex": var.get("regex", "")}
    return out

