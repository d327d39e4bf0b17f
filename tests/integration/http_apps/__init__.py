# SPDX-License-Identifier: Apache-2.0
"""Test servers, clients and checks for the HTTP layer's integration tests
(tests/integration/test_http_*.py). Nothing here is a test itself."""
