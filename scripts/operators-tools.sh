#!/usr/bin/env bash
# Installs what scripts/interop-operators.sh drives from Debian's packages, if missing:
# Prometheus, and Chromium with its driver and a font for its screenshots; Selenium from PyPI. scripts/test.sh runs this in the
# background early, at low priority, so the downloads overlap with the suite's other stages.
set -euo pipefail
missing=()
command -v prometheus >/dev/null || missing+=(prometheus)
command -v chromium >/dev/null || missing+=(chromium fonts-dejavu-core)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing ${missing[*]} (Debian's packages)"
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! python3 -c 'import selenium' 2>/dev/null; then
  echo "installing Selenium (PyPI)"
  python3 -m pip install --quiet --disable-pip-version-check selenium
fi
