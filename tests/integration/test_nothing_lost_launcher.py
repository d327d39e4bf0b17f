# SPDX-License-Identifier: Apache-2.0
"""Every test of test_nothing_lost.py under nemolens-run, which exports for
its program's whole tree: live processes every interval, the dead from their
segments, each under its own resource, with the same exact counts. (A file
of its own: each file of tests has its own time limit.)"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from test_nothing_lost import NothingLost  # noqa: E402


class NothingLostUnderTheLauncher(NothingLost):
    """nemolens-run: the launcher exports for the tree, live and dead."""
    launcher = True
    scale = 5   # fewer short processes and fold children: the same paths, less CI time
    # Inherently the launcher's: run once, in test_nothing_lost.py.
    test_launcher_delivers_its_program_killed_with_sigkill = None


del NothingLost   # run in its own file

if __name__ == "__main__":
    unittest.main(verbosity=2)
