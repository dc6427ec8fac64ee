"""Fixtures shared by the unit tests."""

import pytest

from graphscope import native


@pytest.fixture()
def ext():
    """graphscope's extension, its node counting stopped and no annotated capture left
    running after the test (test_nodecount.py, test_counted_window.py)."""
    e = native.extension()
    yield e
    if e.counting():
        e.count_stop()
    native.close_session()
