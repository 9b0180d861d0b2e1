"""Multi-head page (/multi-head): the heads, their concatenation and w_out (attention/forward/page.py)."""

from attention.forward.page import multi_head

multi_head()
