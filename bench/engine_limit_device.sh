#!/usr/bin/env bash
# The GPU machine's side of bench/engine_limit.py, one step per device call (10 minutes
# each at most; the machine stays warm between back-to-back calls). One GPU; the phases
# run one after the other, each with the GPU to itself.
#
#   bash bench/engine_limit_device.sh setup            # after staging: install, model, pages
#   bash bench/engine_limit_device.sh offline [P,..]   # LLM.chat, those presets (default $PRESETS; background;
#                                                      # REPEATS=3: three timed runs on one engine)
#   bash bench/engine_limit_device.sh offline-wait     # until the offline phase is done
#   bash bench/engine_limit_device.sh seed             # the committed result's phases, kept unless re-run
#   bash bench/engine_limit_device.sh served chandra   # folio's shared server, the same pages
#   bash bench/engine_limit_device.sh pipeline chandra # folio ingest --route ocr; then its server stops
#                                                      # (without `served` first: its server is started)
#   bash bench/engine_limit_device.sh served chandra api4 '["--api-server-count","4"]'  # a variant
#   bash bench/engine_limit_device.sh served olmocr2 seqs384 '["--max-num-seqs","384"]' \
#        '["ocr.in_flight=384"]'                       # a variant of the server and the client
#   bash bench/engine_limit_device.sh stop chandra api4       # a variant's server, without its pipeline
#   bash bench/engine_limit_device.sh pipeline olmocr2 x0 '[]' '["limits.ocr_extra_pages=0"]'
#                                                      # a variant of folio's own settings
#   bash bench/engine_limit_device.sh pipeline olmocr2 default '[]' '[]' keep
#                                                      # its server stays for the next
#                                                      # folio-settings variant (no restart)
#                                                      # (a pipeline step run again on one
#                                                      # server is kept beside the first:
#                                                      # run_on_server, files -rN)
#   bash bench/engine_limit_device.sh plan 'served chandra' 'pipeline chandra' \
#        "served chandra api4 '[\"--api-server-count\",\"4\"]'"   # steps in the background,
#   bash bench/engine_limit_device.sh plan-wait        # so no step is cut at a call's end
#   bash bench/engine_limit_device.sh report           # $OUT/engine_limit.json
#
# Carried (git-ignored): .device-stage, .gs-carry, .corpus-carry, .device-carry, as for
# bench/gpu_user_path_device.sh. FOLIO_BENCH_COMMIT names the checkout in the result.
set -uo pipefail
cd "$(dirname "$0")/.."
# folio_prefect/ reaches the card's flows/, tasks/ and deployments/ through symbolic links:
# remade here in case a copy of the checkout did not keep them
for d in flows tasks deployments; do [ -e folio_prefect/$d ] || ln -sfn ../$d folio_prefect/$d; done
W=/tmp/elim
E="python3 bench/engine_limit.py --work $W${FAKE:+ --fake}"  # FAKE=1: the fake server (a dry run here)
[ -f /tmp/site/env.sh ] && . /tmp/site/env.sh
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
. bench/device_tools.sh  # gs on PATH, $SPY: py-spy (when carried once)
export PREFECT_SERVER_ANALYTICS_ENABLED=false PREFECT_HOME=$W/prefect-cli PREFECT_UI_ENABLED=false
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$W/out}
PRESETS=${PRESETS:-chandra,generic,olmocr2}
MIN_PAGES=${MIN_PAGES:-1000}
mkdir -p "$OUT" "$W"
# the commit given once (setup's call) names every later call's phases and report too
if [ -n "${FOLIO_BENCH_COMMIT:-}" ]; then echo "$FOLIO_BENCH_COMMIT" > $W/commit
else FOLIO_BENCH_COMMIT=$(cat $W/commit 2>/dev/null); fi
export FOLIO_BENCH_COMMIT

wait_pid() {  # wait_pid PIDFILE SECONDS LOG: until the background job ends, or SECONDS pass
  local pid; pid=$(cat "$1" 2>/dev/null) || return 0
  local end=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
  kill -0 "$pid" 2>/dev/null && echo "still running: $1" || echo "done: $1"
  grep -h '^{\|^==' "$3"; tail -3 "$3"
}
wait_offline() { wait_pid /tmp/elim-offline.pid "$1" $W/offline.log; }
# where the host's processes run, a variant of its own (tag it: `pin`): SERVER_CPUS (a
# taskset list) for the vLLM server a step starts and the raw client beside it,
# FOLIO_CPUS for folio's pipeline (flow, page workers, validation, Ghostscript); unset:
# anywhere, as a user's host has it. A plan line may begin with them (VAR=VALUE words).
# Why: under the pipeline the engine's steps run slower (olmocr2 at cf5a850, the steady
# middle: GPU 88-92% busy against 95% under the raw client, its engine core 1.84-1.90
# cores against 1.73; bench/engine_limit_middle.py) with most of the host's cores idle.
# Tried at dcdfd12 (2026-12-06d, docs/gpu.md): 1.042 of the default's pipeline, inside the
# spread between servers; not a default
on_cpus() { local cpus=$1; shift; if [ -n "$cpus" ]; then taskset -c "$cpus" "$@"; else "$@"; fi; }

case "${1:-}" in
  setup)
    if [ ! -f /tmp/site/env.sh ]; then bash .device-stage/bin/install.sh || exit 1; . /tmp/site/env.sh; fi
    export PYTHONPATH=$PWD:$PYTHONPATH
    gs --version || exit 1
    lscpu -e=CPU,CORE,SOCKET,NODE 2>/dev/null | head -40  # which CPUs share a core (SERVER_CPUS)
    # whether the scheduler shares CPU by session (folio's children share the flow's: see
    # folio/pdf/zygote.py)
    echo "sched_autogroup_enabled=$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo absent)"
    [ -d /tmp/synthetic-vlm ] || python3 .device-carry/make_synthetic_vlm.py /tmp/synthetic-vlm || exit 1
    python3 bench/synthetic_text_vocab.py /tmp/synthetic-vlm || exit 1  # answers that read like text
    case ",$PRESETS," in *,olmocr2,*)  # olmOCR 2's own shape (Qwen2.5-VL-7B)
      [ -f /tmp/synthetic-qwen25vl/config.json ] || { python3 .device-carry/make_synthetic_vlm.py \
        /tmp/synthetic-qwen25vl && python3 bench/synthetic_qwen25vl.py /tmp/synthetic-qwen25vl; } || exit 1
      python3 bench/synthetic_text_vocab.py /tmp/synthetic-qwen25vl || exit 1 ;;
    esac
    $E pages --pdfs .corpus-carry --min-pages "$MIN_PAGES" --min-documents "${MIN_DOCS:-100}" \
      --presets "$PRESETS" || exit 1
    ;;
  offline)
    # offline [PRESETS]: in the background, so the phase may run past one call's 10 minutes;
    # one model per offline step (olmocr2 has a model of its own)
    setsid nohup $E offline --presets "${2:-$PRESETS}" --repeats "${REPEATS:-1}" > $W/offline.log 2>&1 &
    echo $! > /tmp/elim-offline.pid
    wait_offline "${WAIT:-540}"
    ;;
  offline-wait)
    wait_offline "${WAIT:-540}"
    ;;
  seed)
    # the phases of bench/results/engine_limit.json (same pages, same machine kind), marked
    # with the commit they ran at: a session measures some phases and keeps the others
    $E seed
    ;;
  served)
    # served P [TAG SERVER_ARGS_JSON [FOLIO_SETTINGS_JSON]]: a variant's server is its own;
    # stop it with `stop P TAG`. Folio settings reach the client as a user's `--set` would
    # (`ocr.in_flight=384`: the requests it keeps in flight)
    wait_offline 600
    p=$2 tag=${3:-default} extra=${4:-[]} sets=${5:-[]}
    # a server `served` or a kept `pipeline` left stays (runs again on it: one owner, so
    # the step that stops it stops it); the owner outlives any device session (30 min):
    # at 1500 s it once ended a third Chandra run's server mid-phase
    kill -0 "$(cat /tmp/elim-owner-$p-$tag.pid 2>/dev/null)" 2>/dev/null \
      || { setsid sleep 5400 & echo $! > /tmp/elim-owner-$p-$tag.pid; }
    # the host's CPU beside the raw client too, to set against the pipeline's (its run
    # number on this server names the file, as the pipeline's does)
    # (the owner names the server in the files too: a second server of the same preset
    # and variant in one session keeps the first one's files)
    owner=$(cat /tmp/elim-owner-$p-$tag.pid) n=$(( $(cat /tmp/elim-served-$owner 2>/dev/null || echo 0) + 1 ))
    echo $n > /tmp/elim-served-$owner; r=$p-$tag-s$owner-r$n
    python3 bench/host_cpu.py --out "$OUT/host-cpu-served-$r.json" --seconds 590 & hc=$!
    on_cpus "${SERVER_CPUS:-}" $E served --preset "$p" --tag "$tag" --server-args "$extra" --folio-set "$sets" \
      --owner-pid "$owner" > "$OUT/served-$r.log" 2>&1
    kill $hc; wait $hc
    tail -2 "$OUT/served-$r.log"
    ;;
  pipeline)
    # pipeline P [TAG SERVER_ARGS_JSON [FOLIO_SETTINGS_JSON]]: on the server `served` left
    # (else the run starts one, as a user's first run does); then that server stops
    p=$2 tag=${3:-default} extra=${4:-[]} sets=${5:-[]} keep=${6:-}
    # a variant of folio's own settings alone (no server options) is served by the
    # default's server when a `keep` step left it running: same command, same key
    if [ "$extra" = "[]" ] && [ "$tag" != default ] \
        && ! kill -0 "$(cat /tmp/elim-owner-$p-$tag.pid 2>/dev/null)" 2>/dev/null \
        && kill -0 "$(cat /tmp/elim-owner-$p-default.pid 2>/dev/null)" 2>/dev/null; then
      cp /tmp/elim-owner-$p-default.pid /tmp/elim-owner-$p-$tag.pid
    fi
    if ! kill -0 "$(cat /tmp/elim-owner-$p-$tag.pid 2>/dev/null)" 2>/dev/null; then
      wait_offline 600  # no server from `served`: start it, unmeasured (start-up is not the run's)
      setsid sleep 5400 & echo $! > /tmp/elim-owner-$p-$tag.pid
      owner=$(cat /tmp/elim-owner-$p-$tag.pid)
      on_cpus "${SERVER_CPUS:-}" $E warm --preset "$p" --tag "$tag" --server-args "$extra" \
        --owner-pid "$owner" > "$OUT/warm-$p-$tag-s$owner.log" 2>&1
    fi
    # beside it: the host's CPU per kind of process (bench/host_cpu.py: cores a GPU's pages
    # take, and whether folio crowds the server's front end) and, with py-spy's wheel in
    # .device-carry/wheels (carried once), the flow process's GIL (--gil: samples with the GIL held; over
    # 20 a second of the run, the share of the run it was held)
    # the how-manieth run on this server (the first on a fresh server has measured slower);
    # it names this run's files, so a repeat keeps the earlier run's
    owner=$(cat /tmp/elim-owner-$p-$tag.pid) n=$(( $(cat /tmp/elim-runs-$owner 2>/dev/null || echo 0) + 1 ))
    echo $n > /tmp/elim-runs-$owner; r=$p-$tag-s$owner-r$n
    python3 bench/host_cpu.py --out "$OUT/host-cpu-$r.json" --seconds 590 & hc=$!
    on_cpus "${FOLIO_CPUS:-}" $E pipeline --preset "$p" --tag "$tag" --server-args "$extra" --folio-set "$sets" \
      --owner-pid "$owner" --run-on-server $n > "$OUT/pipeline-$r.log" 2>&1 & run=$!
    spy_on_cli $run "$OUT/gil-$r.txt" "$OUT/pyspy-$r.log" --gil  # bench/device_tools.sh
    wait $run
    kill $hc; wait $hc
    tail -2 "$OUT/pipeline-$r.log"
    # its server stops, the GPU comes free (`keep`: the next folio-settings variant uses it)
    [ "$keep" = keep ] || { kill "$(cat /tmp/elim-owner-$p-$tag.pid)"; sleep 15; }
    ;;
  plan)
    # the steps given (one argument each, split like a shell line) one after the other in
    # the background: a step may run past the 10 minutes of the call that started it
    shift; printf '%s\n' "$@" > $W/plan.txt
    # WAIT= : the steps wait their own default, not the short wait of the call that began them
    OUT=$W/out WAIT= setsid nohup bash bench/engine_limit_device.sh run-plan > $W/plan.log 2>&1 &
    echo $! > /tmp/elim-plan.pid
    wait_pid /tmp/elim-plan.pid "${WAIT:-540}" $W/plan.log
    ;;
  run-plan)
    while IFS= read -r line; do
      [ -n "$line" ] || continue
      echo "== $line (start $(date +%T))"
      eval "set -- $line"
      # leading VAR=VALUE words: that step's environment only (SERVER_CPUS, FOLIO_CPUS)
      ( while [ $# -gt 0 ] && [[ "$1" == [A-Z_]*=* ]]; do export "$1"; shift; done
        bash bench/engine_limit_device.sh "$@" )
    done < $W/plan.txt
    echo "== plan done ($(date +%T))"
    ;;
  plan-wait)
    wait_pid /tmp/elim-plan.pid "${WAIT:-540}" $W/plan.log
    ;;
  stop)
    kill "$(cat /tmp/elim-owner-$2-${3:-default}.pid)"; sleep 15
    ;;
  report)
    # REPORT_COMMAND: the session's own sequence of steps, when it is not the plain one
    $E report --out "$OUT" --command "${REPORT_COMMAND:-bash bench/engine_limit_device.sh setup; offline; served P; pipeline P (each preset); report (see the script)}"
    # beside it one archive of the phases and what ran beside them (host CPU, py-spy,
    # logs): a device call brings back at most 8 files from $OUT
    [ "$OUT" = "$W/out" ] || (cd $W && tar czf "$OUT/elim-run.tgz" phases out \
      $(ls offline.log plan.log 2>/dev/null))
    ;;
  *) echo "usage: $0 setup | offline | offline-wait | seed | plan STEP... | plan-wait | served P [TAG ARGS] | pipeline P [TAG ARGS] | stop P [TAG] | report" >&2; exit 2 ;;
esac
