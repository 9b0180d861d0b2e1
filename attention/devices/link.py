"""The Devices page in the frame."""

from __future__ import annotations

from ..app.capability import Capability, Page

CAPABILITY = Capability("devices", (Page("pages/devices.py", "page.devices", ":material/memory:", "devices"),))
