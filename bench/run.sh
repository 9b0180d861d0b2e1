#!/usr/bin/env bash
# Every benchmark, one after another (they must not share the CPUs): the core against fused attention, AppTest
# reruns and memory, then the real server in Chromium. Each writes its table to bench/<name>.md.
set -euo pipefail
cd "$(dirname "$0")/.."
python bench/core.py
python bench/app.py
python bench/browser.py
