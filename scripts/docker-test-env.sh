#!/usr/bin/env bash
# The Docker side of the system tests, made on this machine from Debian's packages alone:
# a dockerd that keeps to loopback (no bridge, no iptables; containers use the host network)
# and a base image built by debootstrap, since no image registry is reachable here. The base
# trusts the host's CA bundle (for pip behind this machine's proxy) — only this test base; the
# shipped Dockerfile knows nothing of it. Idempotent: a second run reuses both.
set -euo pipefail
BASE_IMAGE=${BASE_IMAGE:-posenc-test-base:bookworm}

command -v dockerd >/dev/null && command -v debootstrap >/dev/null || \
  { apt-get update -qq && apt-get install -y -qq docker.io debootstrap >/dev/null; }

if ! docker info >/dev/null 2>&1; then
  nohup dockerd --bridge=none --iptables=false --ip6tables=false >/tmp/posenc-dockerd.log 2>&1 &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null
fi

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  root=$(mktemp -d)
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null \
    || echo http://deb.debian.org/debian)
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$root" "$mirror" >/tmp/posenc-debootstrap.log 2>&1
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/host-ca.crt"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import \
    --change 'ENV PIP_CERT=/etc/ssl/certs/host-ca.crt' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    - "$BASE_IMAGE" >/dev/null
  rm -rf "$root"
fi
echo "$BASE_IMAGE"
