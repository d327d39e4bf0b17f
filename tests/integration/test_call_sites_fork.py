# SPDX-License-Identifier: Apache-2.0
"""Call sites of connections made by vfork children, and by threads while
the program forks children that connect (test_call_sites.py has the rest).
Counts must be exact and nothing may hang (every run has a timeout that
fails the test). Not in the TSan build, whose runtime turns vfork into fork
and can hang a child forked while other threads run."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import test_call_sites as cs  # noqa: E402

N = cs.N


class ForkAndVfork(cs.CallSiteCase):
    def test_vfork_children(self):
        # A vfork child shares its parent's memory: it may not load or look
        # up anything, and counts under the site the parent knows, or unknown.
        self.run_program(["vfork"])
        got = self.sites()
        self.assertEqual(sum(got.values()), N, got)
        self.assertLessEqual({f for f, _ in got}, {"dial_directly", "unknown"}, got)

    def test_threads_while_forking(self):
        did = self.run_program(["fork"], launcher=True)
        self.assertEqual(did["fork_children"], N)
        self.assertEqual(self.sites(), {
            ("thread_dial", "call_sites"): 4 * N,
            ("dial_directly", "call_sites"): N,
        })


if __name__ == "__main__":
    unittest.main(verbosity=2)
