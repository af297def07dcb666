"""The test groups of ``tests/conftest.py`` reach pytest-xdist's scheduler (``scripts/test.sh`` runs ``-n auto
--dist loadgroup``): every test runs under an id that ends with its group, its module's name here. Were the
groups lost (as with pytest 9 and pytest-xdist 3.8), every worker would build the book at once, in one folder."""
import os

import pytest


def test_the_module_is_one_group(request):
    if "PYTEST_XDIST_WORKER" not in os.environ:
        pytest.skip("runs under pytest-xdist only (scripts/test.sh)")
    assert request.node.nodeid.endswith("@test_xdist_groups"), request.node.nodeid
