# SPDX-License-Identifier: Apache-2.0
"""Drives model calls through a Gym-shaped model server, as a rollout does.

    /usr/bin/python3 gym_driver.py BASE_URL < plan.json

plan.json is a list of calls: {"path": "/ng-rollout/r1/v1/chat/completions",
"body": {...}, "stream": bool, "abandon": bool}. Each is made in turn with
httpx on its own connection; a stream is read to its end, or, with
"abandon", until its first chunk, and then the connection is closed. Prints
one JSON list: per call its status (0: none), whether its stream broke,
and the time from the request to its first body chunk (null: none).
"""
import json
import sys
import time

import httpx

BASE = sys.argv[1]


def one(call):
    out = {"status": 0, "broke": False, "first_chunk": None}
    t0 = time.monotonic()
    with httpx.Client(timeout=30) as c:
        try:
            with c.stream("POST", BASE + call["path"], json=call["body"]) as r:
                out["status"] = r.status_code
                for chunk in r.iter_raw():
                    if chunk and out["first_chunk"] is None:
                        out["first_chunk"] = time.monotonic() - t0
                        if call.get("abandon"):
                            break
        except httpx.HTTPError:
            out["broke"] = True
    return out


print(json.dumps([one(call) for call in json.load(sys.stdin)]), flush=True)
