"""Benchmark (not a test): a class at once. Sessions acting together on 1 replica and on 2 behind nginx, warm start,
and a lost replica's sessions coming back; writes bench/load.md."""

from __future__ import annotations

import asyncio
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path

from playwright.async_api import async_playwright
from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app is not installed; the e2e helpers live here
from attention import attend
from attention.base.presets import article
from bench.browser import LOADED, MATCH
from tests.e2e.cluster import COOKIE, REPLICA_HEADER, free_ports, serve
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, START_TIMEOUT, VIEWPORT, _healthy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
import warm  # deploy/warm.py: its run_page is the WebSocket client the server-side measure uses

SESSIONS = (1, 10, 30)  # how the figures grow with the class
ROUNDS = {1: 10, 10: 3, 30: 3}  # rounds of everyone acting at once: about 10-90 actions per measure
BATCH = 5  # sessions opened at a time: 30 page loads at once on 2 cores would time out, not measure the app
TIMEOUT_MS = 180_000  # one action under load; past it the action counts as an error
TARGET_FIRST_VIEW = 1.5  # the first view after start, against a later one
TARGET_FAILOVER_S = 2.0  # a lost replica's session shows its view again on the other
RAW = attend(article())["scores_raw"].numpy()  # step 4's scores before the temperature: the shown ones are RAW / t
STEP4 = "[data-testid=stMain] [data-testid=stRadio] label >> text=/^4 /"
TEMPERATURE = "[data-testid=stSidebar] .st-key-temperature input"  # by its widget key, as the e2e tests
NOT_RUNNING = "[data-testid=stApp][data-test-script-state=notRunning]"
NOTE = "[data-testid=stAlert]:has-text('The server changed')"


class Session:
    """One browser context (one Streamlit session) at /walkthrough step 4, acting through the sidebar's Temperature."""

    def __init__(self, browser, url: str, index: int, errors: list[str]):
        self.browser, self.url, self.index, self.errors = browser, url, index, errors
        self.replica: int | None = None

    async def open(self, cookie: str | None = None) -> None:
        self.context = await self.browser.new_context(viewport=VIEWPORT, base_url=self.url)
        self.context.set_default_timeout(TIMEOUT_MS)
        if cookie:  # a sticky cookie that picks the replica (else nginx sets one)
            await self.context.add_cookies([{"name": COOKIE, "value": cookie, "url": self.url}])
        self.page = await self.context.new_page()
        self.page.on("pageerror", lambda e: self.errors.append(f"session {self.index}: page error {e}"))
        response = await self.page.goto("/walkthrough")
        header = response.headers.get(REPLICA_HEADER.lower())
        self.replica = int(header.rsplit(":", 1)[1]) if header else None
        await self.page.wait_for_function(LOADED, arg="Step 1 · Prepare inputs", polling=100)
        await self.page.locator(STEP4).click()
        await self.settled()

    async def settled(self) -> None:
        await self.page.wait_for_timeout(250)  # the run an action starts, started
        await self.page.wait_for_selector(NOT_RUNNING)

    async def act(self, temperature: float) -> float | None:
        """Seconds from the Enter that commits a new temperature until the scores heatmap shows RAW / t."""
        want = {"title": "scores", "want": (RAW / temperature).flatten().tolist(), "atol": 1e-3}
        start = time.perf_counter()
        try:
            await self.page.locator(TEMPERATURE).press("Enter")
            await self.page.wait_for_function(MATCH, arg=want, polling=50)
        except Exception as e:  # a timeout or a closed page under load: counted, and the run goes on
            self.errors.append(f"session {self.index}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
            return None
        return time.perf_counter() - start

    async def check(self) -> None:
        if await self.page.locator("[data-testid=stException]").count():
            self.errors.append(f"session {self.index}: an exception on the page")


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def class_at_once(browser, cluster, sessions: int) -> dict:
    """`sessions` sessions opened in batches, then ROUNDS rounds of every one of them acting at once."""
    errors: list[str] = []
    people = [Session(browser, cluster.url, i, errors) for i in range(sessions)]
    for start in range(0, sessions, BATCH):
        await asyncio.gather(*(p.open() for p in people[start : start + BATCH]))
    pids = {port: cluster.pid(port) for port in cluster.ports}
    cpu_before, times, wall = {p: cpu_seconds(pid) for p, pid in pids.items()}, [], time.perf_counter()
    for r in range(ROUNDS[sessions]):
        temperatures = [1.25 + 0.25 * ((r * sessions + i) % 300) for i in range(sessions)]  # each new, exact in binary
        for p, t in zip(people, temperatures, strict=True):
            await p.page.locator(TEMPERATURE).fill(f"{t:g}")
        times += await asyncio.gather(*(p.act(t) for p, t in zip(people, temperatures, strict=True)))  # at once
        await asyncio.gather(*(p.settled() for p in people))
    wall = time.perf_counter() - wall
    cpu = {p: cpu_seconds(pid) - cpu_before[p] for p, pid in pids.items()}
    for p in people:
        await p.check()
    memory = {port: (rss_mib(pid), rss_mib(pid, "VmHWM")) for port, pid in pids.items()}
    spread = {port: sum(p.replica in (port, None) for p in people) for port in cluster.ports}  # None: no proxy
    for p in people:
        await p.context.close()
    done = [t for t in times if t is not None]
    errors += [f"{len(times) - len(done)} actions not redrawn"] * (len(done) < len(times))
    return {"times": done, "actions": len(times), "cpu": cpu, "wall": wall, "memory": memory, "spread": spread,
            "errors": errors}  # fmt: skip


async def first_views(browser, url: str, later: int = 3) -> tuple[float, list[float]]:
    """goto /walkthrough → loaded, each in a fresh context: the server's first view, then `later` more."""
    times = []
    for _ in range(1 + later):
        context = await browser.new_context(viewport=VIEWPORT, base_url=url)
        context.set_default_timeout(TIMEOUT_MS)
        page = await context.new_page()
        start = time.perf_counter()
        await page.goto("/walkthrough")
        await page.wait_for_function(LOADED, arg="Step 1 · Prepare inputs", polling="raf")
        times.append(time.perf_counter() - start)
        await context.close()
    return times[0], times[1:]


@asynccontextmanager
async def plain_server(folder: Path):
    """A plain `streamlit run app.py`, no warm-up: its first visitor pays for the imports (the problem)."""
    port = free_ports(1)
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"]
    command += ["--server.port", str(port), "--server.address", "127.0.0.1", "--server.fileWatcherType", "none"]
    with (folder / f"plain-{port}.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=Path(__file__).resolve().parents[1], stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not _healthy(f"http://127.0.0.1:{port}"):
                if process.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"streamlit did not start:\n{(folder / f'plain-{port}.log').read_text()}")
                await asyncio.sleep(0.25)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()  # only the server started here, by its PID
            process.wait(timeout=30)


def server_runs(url: str, later: int = 3) -> tuple[float, list[float]]:
    """The server's side of a first view, without a browser: a new session over the WebSocket (as deploy/warm.py
    makes one) asks for /walkthrough; seconds until its run finished. The server's first session, then `later`."""
    times = []
    for _ in range(1 + later):
        parts = url.removeprefix("http://")
        with connect(f"ws://{parts}/_stcore/stream", subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"]) as ws:
            start = time.perf_counter()
            _, errors = warm.run_page(ws, url, "walkthrough")
            times.append(time.perf_counter() - start)
        if errors:
            sys.exit(f"server_runs: {errors}")
    return times[0], times[1:]


async def warm_start(browser, folder: Path) -> dict:
    """First view against later ones on a plain server and on a warmed one (deploy/serve.sh), in the browser and
    on the server alone; each measure has a fresh server (only one session can be a server's first)."""
    results = {}
    async with plain_server(folder) as url:
        results["plain", "browser"] = await first_views(browser, url)
    async with plain_server(folder) as url:
        results["plain", "server"] = server_runs(url)
    with serve(1, folder / "warm-browser", proxy=False) as cluster:  # serve.sh says ready once warmed
        results["warmed", "browser"] = await first_views(browser, cluster.url)
    with serve(1, folder / "warm-server", proxy=False) as cluster:
        results["warmed", "server"] = server_runs(cluster.url)
    return results


async def failover(browser, cluster, per_replica: int = 3) -> list[tuple[float, float]]:
    """For each session on a replica that is SIGKILLed: seconds until its page's WebSocket is open again (through
    nginx, to the other replica), and until it shows the note and its step 4 scores again, with no input."""
    errors: list[str] = []
    lost = cluster.ports[0]
    people = [Session(browser, cluster.url, i, errors) for i in range(per_replica)]
    for person, cookie in zip(people, cluster.cookies(per_replica)[lost], strict=True):
        await person.open(cookie)
    want = {"title": "scores", "want": RAW.flatten().tolist(), "atol": 1e-3}
    opened: dict[int, float] = {}
    for person in people:
        person.page.on("websocket", lambda ws, i=person.index: opened.setdefault(i, time.perf_counter()))

    async def back(person) -> tuple[float, float]:
        await person.page.wait_for_selector(NOTE)
        await person.page.wait_for_function(MATCH, arg=want, polling="raf")
        return opened[person.index] - killed, time.perf_counter() - killed

    killed = time.perf_counter()
    os.kill(cluster.pid(lost), signal.SIGKILL)
    times = await asyncio.gather(*(back(p) for p in people))
    for person in people:
        await person.context.close()
    if errors:
        sys.exit(f"failover: {errors}")
    return list(times)


def ms(v: float) -> str:
    return f"{v * 1e3:,.0f} ms"


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


async def main(warm_only: bool = False) -> None:
    load, results = os.getloadavg()[0], {}
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            chromium = browser.version
            results["warm"] = await warm_start(browser, folder)
            results["warm_load"] = os.getloadavg()[0]  # the section says the load it was measured at, not the end's
            if warm_only:
                await browser.close()
                return replace_section("## Warm start", warm_section(results["warm"], results["warm_load"]))
            with serve(2, folder / "failover") as cluster:
                results["failover"] = await failover(browser, cluster)
            print(f"warm start, failover: {results['warm']}, {results['failover']}", file=sys.stderr, flush=True)
            setups = (("1 replica", 1, False, SESSIONS), ("1 replica behind nginx", 1, True, SESSIONS[:1]))
            setups += (("2 replicas behind nginx", 2, True, SESSIONS),)
            for name, replicas, proxy, levels in setups:  # the second: the proxy's own cost, one session alone
                with serve(replicas, folder / name.replace(" ", "-"), proxy=proxy) as cluster:
                    for sessions in levels:
                        started = time.perf_counter()
                        results[name, sessions] = await class_at_once(browser, cluster, sessions)
                        print(f"{name}, {sessions} sessions: {time.perf_counter() - started:.0f} s", file=sys.stderr)
            await browser.close()
    write(results, load, chromium)


def warm_section(results: dict, load: float) -> list[str]:
    """The warm start's lines: first view against later ones, plain server and warmed, browser and server alone."""
    lines = [
        "",
        "## Warm start",
        "",
        f"Load average {load:.2f} when measured. The first view of /walkthrough after a server starts "
        "against the views after it (median of 3), each a new session, on a plain `streamlit run` (no warm-up) and "
        "on a replica started by deploy/serve.sh (warmed by deploy/warm.py: a first session over the WebSocket that "
        "runs every page once). In the browser: `goto` in a fresh context (empty cache) until every chart is drawn. "
        "On the server alone: a WebSocket client asks for the page's run, until the run has finished (no drawing).",
        "",
        "| server | measured | first view | later views (median) | ratio | target | met? |",
        "|---|---|---:|---:|---:|---:|:---:|",
    ]
    for (server, where), (first, later) in results.items():
        ratio = first / statistics.median(later)
        met = ("yes" if ratio <= TARGET_FIRST_VIEW else "**no**") if server == "warmed" else ""
        target = f"≤ {TARGET_FIRST_VIEW:g}×" if server == "warmed" else ""
        name = "deploy/serve.sh (warmed)" if server == "warmed" else "plain streamlit run"
        lines.append(
            f"| {name} | {where} | {ms(first)} | {ms(statistics.median(later))} | {ratio:.2f}× | {target} | {met} |"
        )
    return lines


def write(results: dict, load: float, chromium: str) -> None:
    lines = [
        "# A class at once: sessions acting together, on one replica and on two behind nginx",
        "",
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs; load average {load:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end. The browsers (one Chromium, a context per session) share these CPUs "
        "with the replicas: the times below include drawing every session's charts on the same two cores",
        f"- python {platform.python_version()}, streamlit {version('streamlit')}, playwright {version('playwright')}, "
        f"Chromium {chromium} (headless, the e2e tests' flags), {subprocess.getoutput('nginx -v 2>&1').strip()}",
        "- a session: a fresh browser context at /walkthrough, step 4 (the scores heatmap), opened "
        f"{BATCH} at a time; an action: a new Temperature (sidebar) committed by Enter, until that session's scores "
        "heatmap shows scores_raw / t. Every session acts at once, in rounds; the next round starts when all are done",
        "- server CPU per action: the replicas' user + system CPU time over the rounds, over the actions; memory: "
        "each replica's resident set (RSS) after the rounds, and its peak (VmHWM)",
        "- 1 replica: the browsers connect to it directly; 2 replicas: through nginx (deploy/serve.sh), sticky by "
        "the cookie nginx sets; each replica is warmed by deploy/warm.py before it takes sessions",
        "",
        "| setup | sessions | actions | redraw median | p95 | worst | median vs 1 session | server CPU per action "
        "| replicas: sessions, RSS (peak) | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    rule = {}
    for (name, sessions), r in ((k, v) for k, v in results.items() if isinstance(k, tuple)):
        t = r["times"]
        floor = statistics.median(results[name, SESSIONS[0]]["times"])  # the same setup, one session
        per_action = sum(r["cpu"].values()) / r["actions"]
        rule[name, sessions] = (per_action, p95(t))
        memory = "; ".join(
            f"{r['spread'][port]}, {rss:,.0f} MiB ({peak:,.0f})" for port, (rss, peak) in r["memory"].items()
        )
        lines.append(
            f"| {name} | {sessions} | {r['actions']} | {ms(statistics.median(t))} | {ms(p95(t))} | {ms(max(t))} "
            f"| {statistics.median(t) / floor:.1f}× | {ms(per_action)} | {memory} | {len(r['errors'])} |"
        )
    one, two = results["1 replica", SESSIONS[-1]], results["2 replicas behind nginx", SESSIONS[-1]]
    median_ratio = statistics.median(two["times"]) / statistics.median(one["times"])
    direct, proxied = (
        statistics.median(results[k, SESSIONS[0]]["times"]) for k in ("1 replica", "1 replica behind nginx")
    )
    lines += [
        "",
        f"At {SESSIONS[-1]} sessions, 2 replicas against 1: median {median_ratio:.2f}×, "
        f"p95 {p95(two['times']) / p95(one['times']):.2f}× (the same two cores run both replicas and every browser). "
        f"The proxy alone, one session on one replica: {proxied / direct:.2f}× the direct connection "
        f"({ms(proxied)} against {ms(direct)}).",
    ]
    errors = [e for r in results.values() if isinstance(r, dict) for e in r.get("errors", [])]
    lines += ["", f"Errors: {len(errors)}" + (": " + "; ".join(errors[:10]) if errors else " (none)")]

    cost = statistics.median(c for c, _ in rule.values())
    budget = 2.0  # seconds: a redraw a class waits for without losing the thread
    lines += [
        "",
        "## Sizing rule",
        "",
        f"One replica runs its sessions' Python on one interpreter, so it uses about one core however many it has: "
        f"run one replica per core. Each action costs the server about {ms(cost)} of CPU (median of the rows above); "
        f"when a whole class acts at once, the last of S actions on a replica waits about S × {ms(cost)}. For every "
        f"redraw of a burst within {budget:g} s that is S ≤ {budget / cost:.0f} sessions acting at once per replica "
        f"(per core); sessions that only read cost nothing. Measured here, with the browsers on the same cores, the "
        f"p95 at {SESSIONS[-1]} sessions was {ms(rule['1 replica', SESSIONS[-1]][1])} on one replica and "
        f"{ms(rule['2 replicas behind nginx', SESSIONS[-1]][1])} on two. Memory: a replica with its sessions held "
        f"{max(rss for r in (one, two) for rss, _ in r['memory'].values()):,.0f} MiB at most here (the article's "
        "size; docs/hosting.md for the size limits).",
    ]

    lines += warm_section(results["warm"], results["warm_load"])
    reopened, back = zip(*results["failover"], strict=True)
    lines += [
        "",
        "## A lost replica",
        "",
        f"{len(back)} sessions on one of 2 replicas behind nginx, at step 4; that replica SIGKILLed. Each page's "
        f"WebSocket was open again (through nginx, to the other replica) after {ms(statistics.median(reopened))} "
        f"(median; Streamlit's frontend waits 250–500 ms before its first retry), and the page showed the note and "
        f"its scores again, with no input, after {ms(statistics.median(back))} (median; worst {ms(max(back))}; "
        f"target ≤ {TARGET_FAILOVER_S:g} s: {'met' if max(back) <= TARGET_FAILOVER_S else '**not met**'}). The "
        "rest is each moved session's first run on the replica that is left, one after another, and the browsers "
        "drawing the page again.",
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    (Path(__file__).parent / "load.md").write_text(table)


def replace_section(title: str, section: list[str]) -> None:
    """bench/load.md with one section measured again (--warm-only), the rest as the last full run wrote it."""
    path = Path(__file__).parent / "load.md"
    text = path.read_text()
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    path.write_text(text[:start] + "\n".join(section[1:]) + "\n" + (text[end:] if end >= 0 else ""))
    print("\n".join(section))


if __name__ == "__main__":
    asyncio.run(main(warm_only="--warm-only" in sys.argv[1:]))
