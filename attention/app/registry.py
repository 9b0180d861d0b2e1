"""The capabilities, registered once, in the order the navigation lists their pages (the forward pass and the whole
model, then how attention learns and is run, exercises, devices); a new one is its folder and one line here."""

from __future__ import annotations

from ..backward.link import CAPABILITY as BACKWARD
from ..decoding.link import CAPABILITY as DECODING
from ..devices.link import CAPABILITY as DEVICES
from ..exercise.link import CAPABILITY as EXERCISE
from ..forward.link import CAPABILITY as FORWARD
from ..tiles.link import CAPABILITY as TILES
from ..whole.link import CAPABILITY as WHOLE

CAPABILITIES = (FORWARD, WHOLE, BACKWARD, DECODING, TILES, EXERCISE, DEVICES)
PAGES = tuple(page for capability in CAPABILITIES for page in capability.pages)
BY_NAME = {page.name: page for page in PAGES}
BY_URL = {page.url_path: page for page in PAGES}
