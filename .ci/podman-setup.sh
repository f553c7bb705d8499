#!/usr/bin/env bash
# podman for the tests, on a machine that can pull no image: Debian's podman (rootful as root), the base image the
# Docker tests build on loaded into it, and a user for rootless podman (`cmx-rootless`, with its own subordinate
# UIDs and GIDs and the same base image in its own storage) where this machine allows user namespaces.
# Idempotent: what is already there is kept. Run after .ci/docker-setup.sh, whose image it copies (or debootstraps
# its own). Prints what it found or made; CMX_PODMAN_ROOTLESS_USER names the user to the tests.
set -euo pipefail
BASE=${CMX_TEST_BASE_IMAGE:-cmx-test/bookworm-minbase:1}
USER_NAME=${CMX_PODMAN_ROOTLESS_USER:-cmx-rootless}
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if ! command -v podman >/dev/null 2>&1 || ! command -v newuidmap >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq podman uidmap >/dev/null
fi
archive=$(mktemp -d)/base.tar
trap 'rm -rf "$(dirname "$archive")"' EXIT
if ! $SUDO podman image exists "$BASE"; then
  if command -v docker >/dev/null 2>&1 && $SUDO docker image inspect "$BASE" >/dev/null 2>&1; then
    $SUDO docker save "$BASE" -o "$archive"
  else
    root=$(mktemp -d)
    $SUDO debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
    $SUDO tar -C "$root" -c . | $SUDO podman import - "$BASE" >/dev/null
    $SUDO rm -rf "$root"
  fi
  [ -s "$archive" ] && $SUDO podman load -q -i "$archive" >/dev/null
fi
# podman gives a container 1048576 open files and 4194304 processes unless told otherwise; a root without
# CAP_SYS_RESOURCE (a CI sandbox) cannot raise its own hard limits that far, and the runtime then refuses to start
# any container ("error setting rlimits"). There, the containers get half this machine's hard limits instead.
if ! out=$($SUDO podman run --rm "$BASE" true 2>&1); then
  if grep -q "rlimit" <<<"$out"; then
    $SUDO mkdir -p /etc/containers/containers.conf.d
    printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' \
      $(( $(ulimit -Hn) / 2 )) $(( $(ulimit -Hn) / 2 )) $(( $(ulimit -Hu) / 2 )) $(( $(ulimit -Hu) / 2 )) |
      $SUDO tee /etc/containers/containers.conf.d/cmx-ci.conf >/dev/null
    $SUDO podman run --rm "$BASE" true
  else
    echo "podman cannot start a container: $out" >&2
    exit 1
  fi
fi
# a rootless container in the host's IPC namespace (the CPU and GPU kinds' --ipc host) gets the host's POSIX
# message queues bound in, which a machine without systemd may not have mounted
if [ ! -d /dev/mqueue ]; then
  $SUDO mkdir -p /dev/mqueue
  $SUDO mount -t mqueue mqueue /dev/mqueue
fi
echo "podman $($SUDO podman version --format '{{.Client.Version}}') works rootful; base image: $BASE"

# rootless: a user of its own, with subordinate IDs, where user namespaces are allowed
if [ "$(cat /proc/sys/user/max_user_namespaces 2>/dev/null || echo 0)" = 0 ]; then
  echo "rootless podman: not on this machine (user namespaces are disabled: /proc/sys/user/max_user_namespaces is 0)"
  exit 0
fi
if ! id "$USER_NAME" >/dev/null 2>&1; then
  $SUDO useradd --create-home --shell /bin/bash "$USER_NAME"
fi
grep -q "^$USER_NAME:" /etc/subuid || echo "$USER_NAME:200000:65536" | $SUDO tee -a /etc/subuid >/dev/null
grep -q "^$USER_NAME:" /etc/subgid || echo "$USER_NAME:200000:65536" | $SUDO tee -a /etc/subgid >/dev/null
user_home=$(getent passwd "$USER_NAME" | cut -d: -f6)
as_user() { $SUDO runuser -u "$USER_NAME" -- env HOME="$user_home" "$@"; }
# Debian's podman 4.3 picks the vfs driver for a user, which stores every layer whole (an image of 4 GB in ten
# layers takes tens of GB); the kernel's own overlay works rootless since Linux 5.13
if [ ! -e "$user_home/.config/containers/storage.conf" ]; then
  as_user mkdir -p "$user_home/.config/containers"
  as_user sh -c "printf '[storage]\ndriver = \"overlay\"\n' > '$user_home/.config/containers/storage.conf'"
  as_user podman system reset --force >/dev/null 2>&1 || true
fi
if ! as_user podman image exists "$BASE"; then
  rm -f "$archive"  # podman save will not write over an archive (the rootful load's, above)
  $SUDO podman save -q --format docker-archive -o "$archive" "$BASE"
  $SUDO chmod 644 "$archive"
  chmod 755 "$(dirname "$archive")"
  as_user podman load -q -i "$archive" >/dev/null
fi
as_user podman run --rm "$BASE" true
echo "podman works rootless as $USER_NAME ($(as_user podman info --format '{{.Store.GraphDriverName}}') storage)"
