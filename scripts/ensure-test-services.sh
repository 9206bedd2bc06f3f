#!/usr/bin/env bash
# What the suite needs beyond Python packages: Debian's Chromium for the browser tests
# (Playwright drives it; it never downloads a browser), and the PostgreSQL and Redis that
# this kind of machine runs. Installs Chromium when missing; starts nothing it cannot.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser tests"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi

if ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
  echo "PostgreSQL is not answering on 127.0.0.1:5432; starting the local cluster" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
  echo "Redis is not answering on 127.0.0.1:6379; starting it" >&2
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
fi
