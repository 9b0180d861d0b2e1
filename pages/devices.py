"""Devices page (/devices): where attention runs, timed step by step (attention/devices/page.py)."""

from attention.devices.page import devices

devices()
