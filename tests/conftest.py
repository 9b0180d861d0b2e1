"""Fixtures shared by the AppTest suites, and the whole run's settings."""

import os

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention.app.process import TORCH_THREADS
from tests.apptest import APP

# Every model a test uses is made in the run or shipped: nothing from a hub (set before transformers is imported)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The app runs torch on TORCH_THREADS intra-op threads; the tests' own computations too, so that a number a page shows
# and a test's computation of it sum in the same order (a thread already started keeps the count it began with)
torch.set_num_threads(TORCH_THREADS)


@pytest.fixture
def at() -> AppTest:
    """The app after its first run, which must not fail."""
    app = AppTest.from_file(APP, default_timeout=60).run()
    assert not app.exception
    return app
