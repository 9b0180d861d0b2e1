"""Warms a freshly started replica: its first visitor, so that no real one waits for the imports (warm.py URL).

Streamlit imports an app's modules in the first session's first run, not at start-up, and 1.67 has no start-up hook
for `streamlit run`. So this opens a session the way a browser does (a WebSocket to /_stcore/stream), asks for a run
of the default page, then of every page the app's navigation lists, and waits for each run to finish. Everything a
first run pays is then paid here, in the server process: importing torch, plotly, pandas and pyarrow, compiling the
pages, the first trace and figures, and the pages/ folder's legacy first run (GUIDE.md, "Multipage"). Preloading
modules instead would warm only the imports named in a list. The messages are the installed Streamlit's own
protobuf classes (streamlit.proto), so the client always speaks the server's version; deploy/serve.sh runs it for
each replica before nginx takes visitors. Exits 0 when every page ran without an exception, else 1 with one line.
"""

from __future__ import annotations

import argparse
import sys
import time
from urllib.parse import urlsplit

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

RUN_TIMEOUT = 180  # seconds for one page's run: the first imports torch, perhaps while other replicas do too
DONE = ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY


def run_page(ws, url: str, page_name: str = "", page_script_hash: str = "") -> tuple[list, list[str]]:
    """One full run of a page, as a browser's first rerun request asks for it: (the navigation's pages, exceptions)."""
    msg = BackMsg()
    state = msg.rerun_script
    state.query_string, state.page_name, state.page_script_hash = "", page_name, page_script_hash
    state.context_info.locale, state.context_info.url = "en-US", f"{url}/{page_name}"
    state.context_info.timezone = "UTC"
    ws.send(msg.SerializeToString())
    pages, errors, deadline = [], [], time.monotonic() + RUN_TIMEOUT
    while True:
        reply = ForwardMsg()
        reply.ParseFromString(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        kind = reply.WhichOneof("type")
        if kind == "navigation":
            pages = list(reply.navigation.app_pages)
        elif kind == "delta" and reply.delta.new_element.WhichOneof("type") == "exception":
            e = reply.delta.new_element.exception
            errors.append(f"{e.type}: {e.message}")
        elif kind == "script_finished" and reply.script_finished == DONE:
            return pages, errors  # a run that ends early for a rerun (st.rerun) is followed by that rerun


def warm(url: str) -> tuple[int, list[str]]:
    """Run every page once in one new session: (how many pages ran, the lines of what went wrong: none when warm)."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}[parts.scheme]
    # The subprotocols a browser offers: "streamlit" and an XSRF token; a placeholder, as a first visit has none.
    protocols = ["streamlit", "PLACEHOLDER_AUTH_TOKEN"]
    with connect(f"{scheme}://{parts.netloc}/_stcore/stream", subprotocols=protocols) as ws:
        pages, errors = run_page(ws, url)
        for page in pages:
            _, failed = run_page(ws, url, page.url_pathname, page.page_script_hash)
            errors += [f"/{page.url_pathname or ''}: {e}" for e in failed]
    return 1 + len(pages), errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the replica's own address, e.g. http://127.0.0.1:8501 (not the proxy's)")
    args = parser.parse_args(argv)
    if urlsplit(args.url).scheme not in ("http", "https") or not urlsplit(args.url).netloc:
        print(f"warm.py: {args.url!r} is not an http(s)://host:port address", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        runs, errors = warm(args.url.rstrip("/"))
    except (OSError, TimeoutError, WebSocketException) as e:
        print(f"warm.py: {args.url}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    for line in errors:
        print(f"warm.py: {args.url}: {line}", file=sys.stderr)
    if not errors:
        seconds = time.perf_counter() - started
        print(f"warm.py: {args.url} warm in {seconds:.1f} s ({runs} runs: the default page, then each page)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
