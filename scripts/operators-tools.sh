#!/usr/bin/env bash
# Installs what scripts/interop-operators.sh drives from Debian's packages, if missing:
# Prometheus, and Chromium with its driver and a font for its screenshots; Selenium from PyPI. scripts/test.sh runs this in the
# background early, at low priority, so the downloads overlap with the suite's other stages.
#
#   scripts/operators-tools.sh [prometheus]     (with `prometheus`: Prometheus only)
set -euo pipefail
only=${1:-}
missing=()
command -v prometheus >/dev/null || missing+=(prometheus)
if [ "$only" != prometheus ]; then
  command -v chromium >/dev/null || missing+=(chromium fonts-dejavu-core)
  command -v chromedriver >/dev/null || missing+=(chromium-driver)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing ${missing[*]} (Debian's packages)"
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "$only" != prometheus ] && ! python3 -c 'import selenium' 2>/dev/null; then
  echo "installing Selenium (PyPI)"
  # A Python managed by Debian refuses pip without the flag (PEP 668); others take it plainly.
  python3 -m pip install --quiet --disable-pip-version-check selenium ||
    python3 -m pip install --quiet --disable-pip-version-check --break-system-packages selenium
fi
