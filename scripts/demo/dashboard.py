"""The queries of dashboards/nemolens.json, as a backend is asked them, and
the same panels as a VictoriaMetrics vmui custom dashboard.

    for panel in panels(): panel["row"], panel["title"], panel["unit"], panel["queries"]
    variables()      # {name: {"query", "regex"}} of the query-type template variables
    write_vmui(dir)  # dir/nemolens.json in vmui's format (-vmui.customDashboardsPath=dir)

  /usr/bin/python3 scripts/demo/dashboard.py --vmui DIR

Grafana's variables are set to match everything and its interval macros to a
fixed window, as the dashboard shows them with every variable on "All". The
Grafana file is the one definition of the queries: the demo's vmui dashboard
and the tests (test_dashboard.py, test_vmui_browser.py) are made from it.
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


# vmui's units are its own: durations in ms/s and bytes are named as such.
VMUI_UNITS = {"ms": "ms", "s": "s", "bytes": "bytes", "percentunit": "", "ops": "/s", "reqps": "req/s", "short": ""}


def vmui(path=DASHBOARD):
    """The dashboard in vmui's format: rows of panels, each with its queries
    (variables on "All") and legends."""
    dash = load(path)
    rows = []
    for p in panels(path):
        if not rows or rows[-1]["title"] != p["row"]:
            rows.append({"title": p["row"], "panels": []})
        rows[-1]["panels"].append({
            "title": p["title"], "description": p["description"], "unit": VMUI_UNITS.get(p["unit"], p["unit"]),
            "expr": p["queries"], "alias": [re.sub(r"\{\{\s*(\w+)\s*\}\}", r"{{\1}}", legend) for legend in p["legends"]],
            "showLegend": True, "width": 12 // min(len([q for q in panels(path) if q["row"] == p["row"]]), 4) or 3})
    return {"title": dash["title"], "filename": "nemolens.json", "rows": rows}


def write_vmui(directory, path=DASHBOARD):
    os.makedirs(directory, exist_ok=True)
    out = os.path.join(directory, "nemolens.json")
    with open(out, "w") as f:
        json.dump(vmui(path), f, indent=1)
    return out


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--vmui", required=True, help="directory to write vmui's nemolens.json into")
    print(write_vmui(ap.parse_args().vmui))
