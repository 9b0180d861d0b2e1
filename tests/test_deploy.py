"""deploy/: bad input to serve.sh and warm.py is one clear line (no traceback), and the nginx config's rules hold."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.cluster import free_ports

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
SERVE, WARM, TEMPLATE = DEPLOY / "serve.sh", DEPLOY / "warm.py", DEPLOY / "nginx.conf.template"


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        ([], {}, "usage: deploy/serve.sh N [PORT]"),
        (["two"], {}, "N must be a whole number from 0 to 32, not 'two'"),
        (["99"], {}, "N must be a whole number from 0 to 32, not '99'"),
        (["2", "80"], {}, "PORT must be a whole number from 1024 to 65533, not '80'"),
        (["2", "8500x"], {}, "not '8500x'"),
        (["0"], {}, "N = 0 starts no replica: set ATTENTION_UPSTREAMS too"),
        (["0"], {"ATTENTION_UPSTREAMS": "10.0.0.2"}, "'10.0.0.2' is not host:port"),
        (["1"], {"ATTENTION_UPSTREAMS": "10.0.0.2:8501"}, "give N = 0"),
        (["1"], {"PYTHON": "/bin/false"}, "cannot import streamlit and torch"),
    ],
)
def test_serve_refuses_bad_input_in_one_line(tmp_path: Path, args: list[str], env: dict, says: str):
    run = subprocess.run(
        ["bash", str(SERVE), *args],
        env=os.environ | {"ATTENTION_RUN": str(tmp_path)} | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert says in run.stderr and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("url", "status", "says"),
    [
        ("ftp://127.0.0.1:1", 2, "is not an http(s)://host:port address"),
        ("127.0.0.1:8501", 2, "is not an http(s)://host:port address"),
        ("http://127.0.0.1:{port}", 1, "ConnectionRefusedError"),  # nothing listens there
    ],
)
def test_warm_says_what_went_wrong_in_one_line(url: str, status: int, says: str):
    run = subprocess.run(
        [sys.executable, str(WARM), url.format(port=free_ports(1))], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == status and says in run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


def test_the_nginx_config_is_sticky_by_cookie_and_upgrades_websockets():
    """The rules the scale-out tests rely on, as written (tests/e2e/test_scale.py runs them)."""
    conf = TEMPLATE.read_text()
    assert "ip_hash" not in conf.replace("ip_hash sends", "")  # stickiness never by the client's address
    assert re.search(r"map \$cookie_attention_sticky \$attention_key \{\s*\"\" \$request_id;", conf)
    assert re.search(r"hash \$attention_key consistent;", conf)
    stream = re.search(r"location /_stcore/stream \{(.*?)\}", conf, re.S).group(1)
    assert "proxy_read_timeout 1d;" in stream
    assert "proxy_set_header Upgrade $http_upgrade;" in conf
    assert "proxy_set_header Connection $connection_upgrade;" in conf
    assert "@SERVERS@" in conf and "@LISTEN@" in conf and "@RUN@" in conf
