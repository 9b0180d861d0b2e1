"""A page whose server was lost: it runs again at once on the server it reconnects to, which can tell that it moved.

Behind a load balancer (deploy/), a replica that dies takes its sessions with it. The browser reconnects through the
proxy to another replica within about half a second, but Streamlit 1.67's frontend asks for a run after a reconnect
only when the page has an auto-rerunning fragment or a run was under way (App.handleConnectionStateChanged in its
static JS); otherwise it keeps showing the old page until the next click, and that click's run starts a new session
with the page's widget values but none of its session state. The new server cannot resume the session: it never
had it, and creates a new one for the same WebSocket.

`follow()`, called once in every full run of the app, does three things (deploy/README.md, "A lost replica"):

1. It arms the rerun: a fragment that draws nothing and runs every hour (a no-op) is enough for the frontend to
   request a full run as soon as it is connected again. That run carries the page's URL (query string and page),
   so the app's first run restores the view from its link, as it does for any shared link.
2. It tells a moved session from a new one: a browser that reconnects offers its previous session's id as the third
   entry of its WebSocket subprotocols (`streamlit, <XSRF token>, <session id>`), a new page load offers two; the
   server keeps the handshake's headers (st.context.headers). A session whose first run came over a WebSocket that
   named an earlier session is one whose server no longer knew it: another replica, or the same one restarted.
   (A reconnect to a server that still holds the session resumes it: no first run, so no note.)
3. It tells the user when an upload was lost with its server. The file goes by an HTTP PUT that names its session;
   when that server is gone, the PUT fails (nginx answers 503, see deploy/nginx.conf.template; a lone restarted
   server answers 400) and Streamlit's uploader shows only "AxiosError: Request failed with status code 503". A
   small inline component watches those requests (a PerformanceObserver, read-only: nothing of Streamlit's is
   patched) and shows the caller's line, which says what happened and what to do, where follow() draws.
"""

from __future__ import annotations

import json

import streamlit as st

REARM_SECONDS = 3600  # the no-op fragment's period: any period arms the rerun on reconnect; this one costs nothing
# Statuses of an upload whose session is gone: no answer (0), Streamlit's "Invalid session_id" (400), nginx's
# replacement for it and for a dead upstream (503), or a proxy without that replacement (502, 504).
LOST_STATUSES = (0, 400, 502, 503, 504)

_JS = """
const LOST = new Set(@LOST@);
const page = window.__attentionReconnect ??= { lost: false, line: null, observer: null };

function show() {
  if (page.line) page.line.hidden = !page.lost;
}

// Uploads go by XMLHttpRequest to /_stcore/upload_file/<session>/<file>; a resource entry carries its status.
function watch(list) {
  for (const entry of list.getEntries()) {
    if (!entry.name.includes("/_stcore/upload_file/") || entry.responseStatus === undefined) continue;
    if (LOST.has(entry.responseStatus)) page.lost = true;
    else if (entry.responseStatus >= 200 && entry.responseStatus < 300) page.lost = false;  // a later one arrived
  }
  show();
}

export default function ({ data, parentElement }) {
  page.line = parentElement.querySelector(".attention-upload-lost");
  page.line.textContent = data.upload_lost;  // text, never HTML
  if (!page.observer) {
    page.observer = new PerformanceObserver(watch);
    page.observer.observe({ type: "resource", buffered: true });
  }
  show();
  return () => { page.line = null; };
}
""".replace("@LOST@", json.dumps(LOST_STATUSES))

# Hidden until an upload is lost; then one line in the colours of Streamlit's warning (its theme's variables). Not
# style-isolated, so that it can also hide its own element while the line is hidden (st-key-<key>, the class Streamlit
# gives a keyed element): an empty element would still take a gap at the top of every page.
_CSS = """
.attention-upload-lost { margin: 0; padding: 0.75rem 1rem; border-radius: 0.5rem;
    background: var(--st-warning-background-color, #fffce7); color: var(--st-warning-text-color, #6d3a00); }
.st-key-attention_reconnect:not(:has(.attention-upload-lost:not([hidden]))) { display: none; }
"""

_LINE_HTML = '<p class="attention-upload-lost" role="alert" hidden></p>'
_upload_line = st.components.v2.component(
    "attention_reconnect", html=_LINE_HTML, css=_CSS, js=_JS, isolate_styles=False
)


def follow(upload_lost: str, first_run: bool) -> bool:
    """Keep this page able to move to another server; True in the first run of a session that just moved.

    Call it once in every full run of the app, from its frame, before anything else is drawn (where it draws is
    where the upload line appears), saying whether this is the session's first run. It draws a fragment that shows
    nothing, and an element that stays empty until an upload fails because its server was lost, when it shows
    `upload_lost` (plain text, in the page's language) as one warning line; a later upload that arrives hides it.

    Returns True in the first run of a session opened by a browser page that already had a session on a server
    that no longer knows it (the replica was lost, or the server restarted): the app has restored the view from
    the URL in that run, as for any first run, and should say in one line that the server changed. False in every
    other run, and in every run of a session that began with a page load (or under AppTest, which has no WebSocket).
    """
    st.fragment(_nothing, run_every=REARM_SECONDS)()
    _upload_line(key="attention_reconnect", data={"upload_lost": upload_lost}, height="content")
    return first_run and _offered_previous_session()


def _nothing() -> None:
    """The fragment's body: it only has to exist (see the module's docstring, point 1)."""


def _offered_previous_session() -> bool:
    """Whether this session's WebSocket handshake named an earlier session (the browser's third subprotocol)."""
    entries = [e.strip() for e in (st.context.headers.get("Sec-WebSocket-Protocol") or "").split(",")]
    return len(entries) >= 3 and entries[0] == "streamlit" and bool(entries[2])
