#!/usr/bin/env bash
# Install headless Chromium (Debian's package `chromium`) for tests/test_htmlreport.py, which
# opens the HTML report in it and checks that the plots rendered. Nothing happens when
# `chromium` is already on PATH. Needs root (or passwordless sudo) and Debian's mirrors; when it
# cannot install, it says why on stderr and exits 1.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium.sh: no apt-get here (not Debian or Ubuntu): install Chromium yourself" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "install-chromium.sh: installing chromium needs root (or passwordless sudo): run" \
        "'apt-get install -y --no-install-recommends chromium' as root" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${as_root[@]}" apt-get install -y --no-install-recommends chromium; then
    # a fresh machine has no package lists yet: fetch them once and try again
    "${as_root[@]}" apt-get update -q || {
        echo "install-chromium.sh: apt-get update failed (no network to the Debian mirrors?)" >&2
        exit 1
    }
    "${as_root[@]}" apt-get install -y --no-install-recommends chromium || {
        echo "install-chromium.sh: apt-get install chromium failed (see apt's output above)" >&2
        exit 1
    }
fi
command -v chromium >/dev/null 2>&1 || {
    echo "install-chromium.sh: apt-get installed chromium but it is not on PATH" >&2
    exit 1
}
