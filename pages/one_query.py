"""One query page (/one-query): step 8, steps 4-7 for one query alone (attention/forward/page.py)."""

from attention.forward.page import one_query

one_query()
