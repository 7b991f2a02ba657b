#!/usr/bin/env bash
# Builds the interop guest: a Debian 12 kernel plus one uncompressed initramfs that is the
# whole root file system (no disk, no bootloader, no initramfs-tools). Packages come from
# Debian's mirror through the host's apt: apt resolves the dependencies of guest/packages
# against an empty dpkg status, `apt-get download` fetches them and `dpkg-deb -x` unpacks
# them. No maintainer script runs, which is what keeps a build from scratch near one minute
# (a full mmdebstrap install with the kernel's initramfs hook took six on this machine).
#
# Usage: build_image.sh CACHE_ROOT   -> prints the image directory (CACHE_ROOT/<key>)
# The key is a hash of guest/packages and of this script and guest/init.py, so a change of
# either rebuilds; an unchanged key reuses the cached image.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache_root="$1"
key="$(cat "$here/guest/packages" "$here/build_image.sh" "$here/guest/init.py" | sha256sum | cut -c1-16)"
out="$cache_root/$key"
if [ -f "$out/ready" ]; then
  echo "$out"
  exit 0
fi
log() { echo "build_image: $*" >&2; }
mkdir -p "$cache_root"
work="$(mktemp -d "$cache_root/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mapfile -t pkgs < <(grep -v '^#' "$here/guest/packages" | grep -v '^$')

# Resolve: simulate an install into an empty system (no Recommends) and keep the names.
: >"$work/status"
apt_opts=(-o "Dir::State::Status=$work/status" -o APT::Install-Recommends=0 -o Debug::NoLocking=1)
apt-get -s "${apt_opts[@]}" install "${pkgs[@]}" >"$work/resolve.txt" 2>&1 || {
  cat "$work/resolve.txt" >&2
  log "apt could not resolve the guest packages (run scripts/deps-interop: it runs apt-get update)"
  exit 1
}
# Packages the initramfs-as-root design never runs (boot-time tooling pulled in by the kernel).
awk '/^Inst /{v = $3; sub(/^\(/, "", v); print $2 "=" v}' "$work/resolve.txt" >"$work/all.txt"
grep -Ev "^(initramfs-tools|initramfs-tools-core|klibc-utils|libklibc|udev|linux-base|logsave|dpkg|debconf|adduser|passwd|pci\.ids)=" \
  "$work/all.txt" >"$work/want.txt"
log "$(wc -l <"$work/want.txt") packages"

# Download into a shared .deb cache (kept between image builds).
debs="$cache_root/debs"
mkdir -p "$debs"
(
  cd "$debs"
  need=()
  while IFS= read -r pv; do
    name="${pv%%=*}"
    ver="${pv#*=}"
    ls "${name}_${ver//:/%3a}_"*.deb >/dev/null 2>&1 || need+=("$pv")
  done <"$work/want.txt"
  if [ ${#need[@]} -gt 0 ]; then
    log "downloading ${#need[@]} packages"
    apt-get -q download "${need[@]}" >/dev/null 2>"$work/download.err" || {
      cat "$work/download.err" >&2
      exit 1
    }
  fi
)

root="$work/root"
mkdir -p "$root"
while IFS= read -r pv; do
  name="${pv%%=*}"
  ver="${pv#*=}"
  dpkg-deb -x "$debs/${name}_${ver//:/%3a}_"*.deb "$root"
done <"$work/want.txt"

kver="$(ls "$root/lib/modules")"
# Only the modules the guest loads, in dependency order (modprobe from the guest's own kmod).
# rdma_rxe asks the crypto API for "crc32" at link creation (no module dependency), so
# crc32_generic is named explicitly. rdma_ucm (/dev/infiniband/rdma_cm, with rdma_cm and
# ib_cm under it) is the kernel rdma_cm that rdmacm-utils and perftest -R use.
chroot "$root" /sbin/depmod "$kver"
chroot "$root" /sbin/modprobe -S "$kver" -a --show-depends virtio_pci virtio_net crc32_generic rdma_rxe ib_uverbs \
  rdma_ucm |
  awk '$1=="insmod"{print $2}' | awk '!seen[$0]++' >"$work/modules.txt"
mkdir -p "$work/keep"
while IFS= read -r m; do
  mkdir -p "$work/keep$(dirname "$m")"
  cp "$root$m" "$work/keep$m"
done <"$work/modules.txt"
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
rm -rf "$root/lib/modules/$kver/kernel" "$root/boot" "$root/usr/share" "$root/var/cache" \
  "$root/usr/lib/python3.11/test" "$root/usr/lib/python3.11/ensurepip" \
  "$root/usr/lib/python3.11/idlelib" "$root/usr/lib/python3.11/lib2to3" \
  "$root/usr/lib/python3.11/pydoc_data" "$root/usr/lib/x86_64-linux-gnu/gconv" \
  "$root/usr/lib/x86_64-linux-gnu/perl" "$root/usr/lib/x86_64-linux-gnu/perl-base" \
  "$root/usr/lib/x86_64-linux-gnu/libperl.so"* "$root/usr/bin/perl"*
cp -a "$work/keep/." "$root/"
cp "$work/modules.txt" "$root/etc/uroce-modules"
[ -e "$root/bin/sh" ] || ln -s busybox "$root/bin/sh"
mkdir -p "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/run" "$root/root"
install -m 0755 "$here/guest/init.py" "$root/init.py"
# Python blocks in getrandom() for its hash seed before the early guest has entropy.
printf '#!/bin/sh\nexport PYTHONHASHSEED=0\nexec /usr/bin/python3 /init.py\n' >"$root/init"
chmod 0755 "$root/init"

{
  echo "kernel $kver"
  for p in linux-image-amd64 libibverbs1 ibverbs-providers ibverbs-utils librdmacm1 rdmacm-utils perftest \
    iproute2 python3; do
    grep "^$p=" "$work/all.txt" || true
  done
} >"$work/versions.txt"
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) >"$work/rootfs.cpio"
mkdir -p "$out"
mv "$work/vmlinuz" "$work/rootfs.cpio" "$work/versions.txt" "$work/modules.txt" "$out/"
touch "$out/ready"
# Older images (other keys) are dead weight once a new one is built; the .deb cache stays.
find "$cache_root" -mindepth 1 -maxdepth 1 -type d ! -name debs ! -name "$key" ! -name "build.*" \
  -exec rm -rf {} +
log "image $out ($(du -sh "$out/rootfs.cpio" | cut -f1) root)"
echo "$out"
