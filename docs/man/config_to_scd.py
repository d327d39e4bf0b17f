#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes nemolens(7)'s scdoc source: the template with its @ENVIRONMENT@ line
replaced by the variables of docs/configuration.md's table, so the manual
page and the reference cannot list different variables.

    config_to_scd.py CONFIGURATION.md TEMPLATE.scd.in OUT.scd
"""
import re
import sys


def rows(markdown):
    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        if re.match(r"^\|\s*variable\s*\|", line):
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    return
                cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]
                yield cells
            return


def scd(text):
    """Markdown cell text to scdoc: code as bold, links as their text."""
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    out = []
    for i, part in enumerate(re.split(r"`", text)):
        part = part.replace("\\", "\\\\").replace("*", "\\*").replace("_", "\\_")
        out.append(f"*{part}*" if i % 2 and part else part)
    return "".join(out)


def main(config, template, out):
    entries = []
    for cells in rows(open(config, encoding="utf-8").read()):
        name, default, meaning = (cells + ["", "", ""])[:3]
        entries.append(scd(name))
        body = scd(meaning).rstrip()
        if body and not body.endswith("."):
            body += "."
        if default:
            body += f" Default: {scd(default)}."
        entries.append("\t" + body)
        entries.append("")
    if not entries:
        sys.exit(f"{config}: no table with a 'variable' column")
    text = open(template, encoding="utf-8").read()
    if "\n@ENVIRONMENT@\n" not in text:
        sys.exit(f"{template}: no @ENVIRONMENT@ line")
    text = text.replace("\n@ENVIRONMENT@\n", "\n" + "\n".join(entries).rstrip("\n") + "\n")
    open(out, "w", encoding="utf-8").write(text)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
