#!/usr/bin/env bash
# Docker for the tests, on a machine that has none and can pull no image: the engine from Debian's
# docker.io, started here, and a local base image made with debootstrap (bookworm, minbase).
# Idempotent: what is already there is kept. Prints the image name it made or found.
set -euo pipefail
BASE=${CMX_TEST_BASE_IMAGE:-cmx-test/bookworm-minbase:1}
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq docker.io debootstrap >/dev/null
fi
if ! $SUDO docker info >/dev/null 2>&1; then
  $SUDO sh -c 'nohup dockerd >/tmp/cmx-dockerd.log 2>&1 &'
  for _ in $(seq 60); do $SUDO docker info >/dev/null 2>&1 && break; sleep 1; done
  if ! $SUDO docker info >/dev/null 2>&1; then
    echo "dockerd did not start; its log:" >&2
    tail -20 /tmp/cmx-dockerd.log >&2
    exit 1
  fi
fi
if ! $SUDO docker image inspect "$BASE" >/dev/null 2>&1; then
  root=$(mktemp -d)
  $SUDO debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
  $SUDO tar -C "$root" -c . | $SUDO docker import - "$BASE" >/dev/null
  $SUDO rm -rf "$root"
fi
echo "docker $($SUDO docker version --format '{{.Server.Version}}') is running; base image: $BASE"
