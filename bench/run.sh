#!/usr/bin/env bash
# Every benchmark, one after another (they must not share the CPUs): the core against fused attention, AppTest
# reruns and memory, the real server in Chromium, then a class at once on replicas behind nginx (bench/load.py).
# Each writes its table to bench/<name>.md.
set -euo pipefail
cd "$(dirname "$0")/.."
python bench/core.py
python bench/variants.py  # a trace with each of today's options against the plain trace
python bench/backward.py  # the backward trace against autograd's backward
python bench/tiles.py  # attention in tiles against the eight steps at n = 1024: peak memory, time
python bench/decoding.py  # SmolLM2 generating with the app's KV cache, transformers' and none
python bench/models.py  # every family loaded by the app and by transformers; one head's case against their forward
python bench/whole.py  # the whole-model view against a walkthrough step; ranking heads against one pass
python bench/app.py
python bench/threads.py  # torch on one intra-op thread against the default, quiet and busy cores
python bench/browser.py
python bench/scrub.py  # a dragged number computed in the browser: redraws a second, latency, server CPU
python bench/server.py
python bench/load.py
