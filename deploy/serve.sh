#!/usr/bin/env bash
# Serves the app as N Streamlit replicas behind nginx on this machine: deploy/serve.sh N [PORT] (see deploy/README.md).
# nginx listens on PORT (default 8500), replica i on PORT+i; each replica is warmed (deploy/warm.py) before nginx
# takes visitors. Runs in the foreground; Ctrl-C or SIGTERM stops nginx and every replica it started.
# Environment: ATTENTION_LISTEN (nginx's address, default 127.0.0.1:PORT), ATTENTION_BIND (the replicas' address,
# default 127.0.0.1), ATTENTION_RUN (pid files, logs, the written config; default deploy/run), ATTENTION_UPSTREAMS
# ("host:port host:port": front replicas elsewhere, start none here; N is then 0), ATTENTION_NO_PROXY=1 (replicas
# only, for an app machine behind another machine's nginx), PYTHON (default: python on PATH).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

fail() { echo "serve.sh: $*" >&2; exit 2; }
usage="usage: deploy/serve.sh N [PORT]   (N replicas, 0 to 32; nginx on PORT, default 8500)"
[ $# -ge 1 ] && [ $# -le 2 ] || fail "$usage"
[[ $1 =~ ^[0-9]{1,2}$ ]] && [ "$1" -le 32 ] || fail "N must be a whole number from 0 to 32, not '$1'. $usage"
n=$((10#$1))
port=${2:-8500}
[[ $port =~ ^[0-9]{1,5}$ ]] && [ "$port" -ge 1024 ] && [ $((port + n)) -le 65535 ] ||
  fail "PORT must be a whole number from 1024 to $((65535 - n)), not '$port'. $usage"
upstreams=${ATTENTION_UPSTREAMS:-}
no_proxy=${ATTENTION_NO_PROXY:-}
if [ -n "$upstreams" ] && [ "$n" -ne 0 ]; then fail "ATTENTION_UPSTREAMS fronts replicas elsewhere: give N = 0"; fi
if [ -z "$upstreams" ] && [ "$n" -eq 0 ]; then fail "N = 0 starts no replica: set ATTENTION_UPSTREAMS too"; fi
if [ -n "$no_proxy" ] && [ "$n" -eq 0 ]; then fail "ATTENTION_NO_PROXY=1 with N = 0 would start nothing"; fi
for address in $upstreams; do
  [[ $address =~ ^[A-Za-z0-9.:_\[\]-]+:[0-9]{1,5}$ ]] || fail "ATTENTION_UPSTREAMS: '$address' is not host:port"
done
nginx=$(command -v nginx || echo /usr/sbin/nginx)  # Debian's is in /usr/sbin, not on every user's PATH
if [ -z "$no_proxy" ] && ! [ -x "$nginx" ]; then
  fail "nginx is not installed (Debian: apt-get install nginx)"
fi
python=${PYTHON:-$(command -v python || command -v python3 || true)}
[ -n "$python" ] || fail "no python on PATH: activate the app's virtual environment, or set PYTHON"
if [ "$n" -gt 0 ] && ! "$python" -c "import streamlit, torch" 2>/dev/null; then
  fail "$python cannot import streamlit and torch: activate the app's virtual environment (docs/hosting.md: A plain server)"
fi
listen=${ATTENTION_LISTEN:-127.0.0.1:$port}
bind=${ATTENTION_BIND:-127.0.0.1}
run=${ATTENTION_RUN:-$here/run}

mkdir -p "$run"
run=$(cd "$run" && pwd)
rm -f "$run"/*.pid
: >"$run/warm.log"

pids=()
stopping=""
stop() {
  [ -n "$stopping" ] && return
  stopping=1
  trap - INT TERM
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true  # only the processes this script started, by their ids
    for _ in $(seq 50); do  # up to 10 s for a clean stop, then a hard one
      alive=$(for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && echo "$pid"; done || true)
      [ -z "$alive" ] && break
      sleep 0.2
    done
    [ -n "${alive:-}" ] && kill -KILL $alive 2>/dev/null || true
    wait 2>/dev/null || true
  fi
  rm -f "$run"/*.pid
  echo "serve.sh: stopped" >&2
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap stop EXIT

healthy() { "$python" - "$1" <<'EOF'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1] + "/_stcore/health", timeout=2) as r:
        sys.exit(0 if r.read().strip() == b"ok" else 1)
except OSError:
    sys.exit(1)
EOF
}

# The replicas: each a `streamlit run` of its own, one Python interpreter each (one per core: bench/load.md).
replica_pids=()
for i in $(seq 1 "$n"); do
  p=$((port + i))
  # glibc's mmap threshold fixed: freed n × n tensors go back to the system (docs/hosting.md, "Memory per visitor")
  (cd "$root" && MALLOC_MMAP_THRESHOLD_=131072 exec "$python" -m streamlit run app.py --server.headless true --server.address "$bind" \
    --server.port "$p" --server.fileWatcherType none) >"$run/replica-$p.log" 2>&1 &
  pids+=($!)
  replica_pids+=($!)
  echo $! >"$run/replica-$p.pid"
done
addresses=()
for i in $(seq 1 "$n"); do addresses+=("127.0.0.1:$((port + i))"); done
for address in $upstreams; do addresses+=("$address"); done
# The config's replica lists: the hash pool, and for each replica an upstream of its own with the others as backups.
servers="" replica_map="" replica_upstreams=""
for i in "${!addresses[@]}"; do
  servers+="        server ${addresses[$i]} max_fails=1 fail_timeout=10s;"$'\n'
  replica_map+="        ${addresses[$i]} attention_$i;"$'\n'
  replica_upstreams+="    upstream attention_$i {"$'\n'"        server ${addresses[$i]} max_fails=1 fail_timeout=10s;"$'\n'
  for j in "${!addresses[@]}"; do
    if [ "$j" != "$i" ]; then
      replica_upstreams+="        server ${addresses[$j]} max_fails=1 fail_timeout=10s backup;"$'\n'
    fi
  done
  replica_upstreams+="        keepalive 4;"$'\n'"    }"$'\n'
done

# Healthy, then warm: the warm-up is the first session's run, so no visitor pays for the imports (deploy/warm.py).
for i in $(seq 1 "$n"); do
  p=$((port + i))
  for _ in $(seq 600); do  # 2 minutes: N replicas import torch at once on few cores
    healthy "http://127.0.0.1:$p" && break
    kill -0 "${replica_pids[$((i - 1))]}" 2>/dev/null || { cat "$run/replica-$p.log" >&2; fail "replica $p exited"; }
    sleep 0.2
  done
  healthy "http://127.0.0.1:$p" || fail "replica $p was not healthy after 2 minutes (log: $run/replica-$p.log)"
done
warm_pids=()
for i in $(seq 1 "$n"); do
  "$python" "$here/warm.py" "http://127.0.0.1:$((port + i))" >>"$run/warm.log" 2>&1 &
  warm_pids+=($!)
done
for i in $(seq 1 "$n"); do
  wait "${warm_pids[$((i - 1))]}" || fail "warming replica $((port + i)) failed (log: $run/warm.log)"
done

if [ -z "$no_proxy" ]; then
  sed -e "s|@RUN@|$run|g" -e "s|@LISTEN@|$listen|g" "$here/nginx.conf.template" |
    awk -v servers="$servers" -v map="$replica_map" -v upstreams="$replica_upstreams" '
      /^@SERVERS@$/ { printf "%s", servers; next }
      /^@REPLICA_MAP@$/ { printf "%s", map; next }
      /^@REPLICA_UPSTREAMS@$/ { printf "%s", upstreams; next }
      { print }' >"$run/nginx.conf"
  "$nginx" -t -q -p "$run" -c "$run/nginx.conf" -e "$run/nginx-error.log" || fail "nginx refused $run/nginx.conf"
  "$nginx" -p "$run" -c "$run/nginx.conf" -e "$run/nginx-error.log" -g "daemon off;" &
  nginx_pid=$!
  pids+=($nginx_pid)
  for _ in $(seq 100); do
    healthy "http://$listen" && break
    kill -0 "$nginx_pid" 2>/dev/null || fail "nginx exited (log: $run/nginx-error.log)"
    sleep 0.1
  done
  echo "serve.sh: ready at http://$listen ($n replicas here${upstreams:+, $upstreams elsewhere}; run folder $run)"
else
  echo "serve.sh: ready: $n replicas on $bind, ports $((port + 1))-$((port + n)) (no proxy; run folder $run)"
fi

# Serve until stopped. A replica that exits is reported; its sessions move to the others (attention/app/reconnect.py).
while true; do
  set +e
  wait -n -p done_pid "${pids[@]}"
  status=$?
  set -e
  [ -n "${done_pid:-}" ] || continue
  if [ "${nginx_pid:-}" = "$done_pid" ]; then
    echo "serve.sh: nginx exited with status $status (log: $run/nginx-error.log)" >&2
    exit 1
  fi
  for i in $(seq 1 "$n"); do
    if [ "${replica_pids[$((i - 1))]}" = "$done_pid" ]; then
      echo "serve.sh: replica $((port + i)) exited with status $status; its sessions move to the others" >&2
      rm -f "$run/replica-$((port + i)).pid"
    fi
  done
  remaining=()
  for pid in "${pids[@]}"; do [ "$pid" != "$done_pid" ] && remaining+=("$pid"); done
  pids=("${remaining[@]}")
  live=0
  for pid in "${replica_pids[@]}"; do kill -0 "$pid" 2>/dev/null && live=$((live + 1)); done
  if [ "$n" -gt 0 ] && [ "$live" -eq 0 ] && [ -z "$upstreams" ]; then
    echo "serve.sh: no replica is left" >&2
    exit 1
  fi
  done_pid=""
done
