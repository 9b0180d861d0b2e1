"""Inputs page (/inputs): every number edited cell by cell, beside the outputs (attention/forward/inputs_page.py)."""

from attention.forward.inputs_page import inputs

inputs()
