#!/usr/bin/env bash
# Builds the container image's filesystem (everything the runtime stage adds to Debian 12 slim)
# into OUT. The Containerfile's build stage runs exactly this; CI runs it on the build machine,
# where no container runtime exists, and starts the result (tests/python/test_deploy.py).
#
#   deploy/container/build-rootfs.sh OUT                  release build, static Swift runtime
#   deploy/container/build-rootfs.sh --from-build DIR OUT package already-built binaries
#                                                         (CI: the debug build of scripts/test)
# OUT gets:
#   usr/local/bin/ubiquityd, usr/local/bin/ubiq, usr/local/bin/ubiq-healthcheck
#   usr/local/lib/ubiquity/*.so   shared libraries not from a Debian package (a dynamically
#                                 linked Swift runtime; none for the release build)
#   etc/ld.so.conf.d/ubiquity.conf
#   etc/ubiquity/ubiquityd.yaml   the image's config (listen on every address, TLS from ENV)
#   usr/share/ubiquity/runtime-packages  the Debian packages the binaries' libraries come from
#   etc/passwd, etc/group entries for the ubiquity user (uid/gid 10001) as passwd.d/group.d
#   var/lib/ubiquity              the data volume's mount point (owned by 10001 in the image)
set -euo pipefail
cd "$(dirname "$0")/../.."

FROM_BUILD=""
if [ "${1:-}" = "--from-build" ]; then FROM_BUILD=$2; shift 2; fi
OUT=${1:?usage: build-rootfs.sh [--from-build DIR] OUT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if [ -z "$FROM_BUILD" ]; then
    # Static Swift runtime: the runtime image needs no Swift toolchain libraries.
    for product in ubiquityd ubiq; do
        swift build -c release --static-swift-stdlib --product "$product"
    done
    FROM_BUILD=$(swift build -c release --show-bin-path)
fi

install -d "$OUT/usr/local/bin" "$OUT/usr/local/lib/ubiquity" "$OUT/etc/ld.so.conf.d" "$OUT/etc/ubiquity" \
    "$OUT/usr/share/ubiquity" "$OUT/var/lib/ubiquity" "$OUT/etc/ubiquity/tls"
install -m 755 "$FROM_BUILD/ubiquityd" "$FROM_BUILD/ubiq" "$OUT/usr/local/bin/"
install -m 755 deploy/container/ubiq-healthcheck "$OUT/usr/local/bin/"
install -m 644 deploy/container/ubiquityd.yaml "$OUT/etc/ubiquity/ubiquityd.yaml"
echo /usr/local/lib/ubiquity > "$OUT/etc/ld.so.conf.d/ubiquity.conf"

# Every shared library the binaries load: from a Debian package (recorded, installed by the
# runtime stage) or copied (anything else, e.g. a dynamically linked Swift runtime).
: > "$OUT/usr/share/ubiquity/runtime-packages.tmp"
for bin in "$OUT/usr/local/bin/ubiquityd" "$OUT/usr/local/bin/ubiq"; do
    ldd "$bin" | awk '/=> \// { print $3 } /^\s*\/lib/ { print $1 }' | while read -r lib; do
        real=$(readlink -f "$lib")
        if pkg=$(dpkg -S "$real" 2>/dev/null || dpkg -S "$lib" 2>/dev/null); then
            echo "${pkg%%:*}" >> "$OUT/usr/share/ubiquity/runtime-packages.tmp"
        else
            cp -L "$lib" "$OUT/usr/local/lib/ubiquity/"
        fi
    done
    if ldd "$bin" | grep -q "not found"; then
        echo "build-rootfs.sh: $bin has unresolved libraries:" >&2; ldd "$bin" | grep "not found" >&2; exit 1
    fi
done
# libc6 is in every Debian image; the rest is what the runtime stage installs.
sort -u "$OUT/usr/share/ubiquity/runtime-packages.tmp" | grep -vx 'libc6' > "$OUT/usr/share/ubiquity/runtime-packages" || true
rm "$OUT/usr/share/ubiquity/runtime-packages.tmp"

# The unprivileged user the image runs as (appended to the base image's files by the runtime stage).
echo 'ubiquity:x:10001:10001:ubiquityd:/var/lib/ubiquity:/usr/sbin/nologin' > "$OUT/usr/share/ubiquity/passwd.d"
echo 'ubiquity:x:10001:' > "$OUT/usr/share/ubiquity/group.d"

# The image's config must be valid (with the TLS paths the image's ENV gives, unset here).
env -u UBIQUITY_TLS_CERT -u UBIQUITY_TLS_KEY UBIQUITY_ALLOW_PLAINTEXT=true \
    LD_LIBRARY_PATH="$OUT/usr/local/lib/ubiquity" "$OUT/usr/local/bin/ubiquityd" \
    --check-config --config "$OUT/etc/ubiquity/ubiquityd.yaml" >/dev/null
echo "build-rootfs.sh: $OUT ready; runtime packages: $(tr '\n' ' ' < "$OUT/usr/share/ubiquity/runtime-packages")"
