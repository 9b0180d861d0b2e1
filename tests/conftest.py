"""Fixtures shared by the AppTest suites."""

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest import APP


@pytest.fixture
def at() -> AppTest:
    """The app after its first run, which must not fail."""
    app = AppTest.from_file(APP, default_timeout=60).run()
    assert not app.exception
    return app
