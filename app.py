"""Attention, step by step: the entry point. The frame (attention/app/frame.py) draws the shared sidebar and banners
around the chosen page (the registry: attention/app/pages.py)."""

from attention.app import frame

frame.run()
