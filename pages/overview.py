"""Overview page (/): what the app is, the eight steps, the result at a glance (attention/forward/page.py)."""

from attention.forward.page import overview

overview()
