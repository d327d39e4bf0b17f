# SPDX-License-Identifier: Apache-2.0
"""GETs each URL of argv, one connection each, and prints each answer's
status on a line of its own: what the tests would ask of curl, which the
runtime of a sanitizer build cannot start in (test_genai.py says why).

    /usr/bin/python3 fetch.py URL...
"""
import sys
import urllib.error
import urllib.request

for url in sys.argv[1:]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        e.read()
        status = e.code
    print(status, flush=True)
