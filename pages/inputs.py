"""Inputs page (/inputs): every number edited cell by cell, beside the outputs (attention/forward/page.py)."""

from attention.forward.page import inputs

inputs()
