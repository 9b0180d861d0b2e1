"""Broadcasting page (/broadcasting): step 6's broadcast, then the sum over the keys (attention/forward/page.py)."""

from attention.forward.page import broadcasting

broadcasting()
