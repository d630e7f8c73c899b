#!/usr/bin/env bash
# The GPU machine's side of bench/gpu_user_path.py, one step per device call (each call
# may run 10 minutes; the machine stays warm between back-to-back calls). Two GPUs: a
# round runs the pipeline on one and the raw engine on the other at once, the next round
# swaps. One GPU: a round runs the pipeline, then the raw engine, on the same server.
#
#   bash bench/gpu_user_path_device.sh setup        # after staging: install, model, copies, servers
#   bash bench/gpu_user_path_device.sh round 1      # pipeline GPU 0 | raw GPU 1 (one GPU: in turn)
#   bash bench/gpu_user_path_device.sh round 2      # raw GPU 0 | pipeline GPU 1 (one GPU: in turn)
#   bash bench/gpu_user_path_device.sh pipeline 2   # one GPU, short of time: round 2 without its raw phase
#   bash bench/gpu_user_path_device.sh deployment   # Prefect deployment GPU 0 | raw GPU 1, report
#   bash bench/gpu_user_path_device.sh profile 1    # round 1's pipeline with host CPU per process and py-spy
#   bash bench/gpu_user_path_device.sh live         # a UI run, a trigger, a sweep batch through the GPU deployments
#   bash bench/gpu_user_path_device.sh multi-setup  # 2 or 4 GPUs: install, model, copies; no servers
#   bash bench/gpu_user_path_device.sh multi 1      # bench/gpu_multi.py on GPU 0, then `multi 2` on 0,1 (report)
#   bash bench/gpu_user_path_device.sh multi 2 dp   # the same 2 GPUs with vLLM's --data-parallel-size 2
#
# FOLIO_BENCH_COMMIT (the checkout's commit; the device copy has no .git) goes in the result.
# Carried (all git-ignored): .device-stage (python3 ../shared/device/stage.py --vllm -r
# requirements-device.txt), .gs-carry (scripts/device/build_gs_carry.sh), .corpus-carry (the
# corpus's non-robustness PDFs: MANIFEST.tsv sets eval and hard-no-gt, 56 files, 16 MiB),
# .device-carry (make_synthetic_vlm.py copied from ../shared/device). About 22 minutes of
# device time on nvidia-h200-x2 for setup + two rounds + deployment at 1800 pages; on one
# H200, --min-pages 1000 (the issue's floor) fits setup, two rounds and the deployment.
set -uo pipefail
cd "$(dirname "$0")/.."
# folio_prefect/ reaches the card's flows/, tasks/ and deployments/ through symbolic links:
# remade here in case a copy of the checkout did not keep them
for d in flows tasks deployments; do [ -e folio_prefect/$d ] || ln -sfn ../$d folio_prefect/$d; done
W=/tmp/gub
B="python3 bench/gpu_user_path.py --work $W"
[ -f /tmp/site/env.sh ] && . /tmp/site/env.sh
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
. bench/device_tools.sh  # gs on PATH, $SPY: py-spy (when carried once)
export PREFECT_SERVER_ANALYTICS_ENABLED=false PREFECT_HOME=$W/prefect-cli
# Prefect 3.9.1's UI needs a newer FastAPI than the one staged with vLLM 0.26: the local
# servers (the CLI's, the deployment phase's) run their API without it
export PREFECT_UI_ENABLED=false
# NVLink multicast stays off on these machines (set there; kept for every child)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$W/out}
MIN_PAGES=${MIN_PAGES:-1000}
mkdir -p "$OUT" "$W"
owner() { cat /tmp/gub-owner.pid; }
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)

case "${1:-}" in
  setup)
    if [ ! -f /tmp/site/env.sh ]; then bash .device-stage/bin/install.sh || exit 1; . /tmp/site/env.sh; fi
    export PYTHONPATH=$PWD:$PYTHONPATH
    gs --version || exit 1
    [ -d /tmp/synthetic-vlm ] || python3 .device-carry/make_synthetic_vlm.py /tmp/synthetic-vlm || exit 1
    python3 bench/synthetic_text_vocab.py /tmp/synthetic-vlm || exit 1  # answers that read like text
    # the shared servers' owner: alive past this command, so they serve the next ones
    [ -f /tmp/gub-owner.pid ] || { setsid sleep 2400 & echo $! > /tmp/gub-owner.pid; }
    $B corpus --pdfs .corpus-carry --min-pages "$MIN_PAGES" --min-docs 150 || exit 1
    $B serve --gpu 0 --owner-pid "$(owner)" > "$OUT/serve0.log" 2>&1 & a=$!
    [ "$gpus" -ge 2 ] && $B serve --gpu 1 --owner-pid "$(owner)" > "$OUT/serve1.log" 2>&1
    wait $a  # not a bare wait: the owner process is a background job of this shell too
    tail -3 "$OUT"/serve*.log
    nvidia-smi --query-gpu=index,name,memory.used,utilization.gpu --format=csv
    ;;
  round)
    r=$2
    if [ "$gpus" -ge 2 ]; then
      if [ $((r % 2)) -eq 1 ]; then p=0; q=1; else p=1; q=0; fi
      $B pipeline --gpu $p --round "$r" --owner-pid "$(owner)" > "$OUT/pipeline-r$r.log" 2>&1 & a=$!
      $B raw --gpu $q --round "$r" --owner-pid "$(owner)" > "$OUT/raw-r$r.log" 2>&1
      wait $a
    else
      $B pipeline --gpu 0 --round "$r" --owner-pid "$(owner)" > "$OUT/pipeline-r$r.log" 2>&1
      $B raw --gpu 0 --round "$r" --owner-pid "$(owner)" > "$OUT/raw-r$r.log" 2>&1
    fi
    tail -2 "$OUT/pipeline-r$r.log" "$OUT/raw-r$r.log"
    cp $W/phases/*.json $W/cli-r*.log "$OUT/" 2>/dev/null
    ;;
  pipeline)
    r=$2
    $B pipeline --gpu 0 --round "$r" --owner-pid "$(owner)" > "$OUT/pipeline-r$r.log" 2>&1
    tail -2 "$OUT/pipeline-r$r.log"
    cp $W/phases/*.json "$OUT/" 2>/dev/null
    ;;
  profile)
    # round N's pipeline phase only, with the host's CPU per kind of process
    # (bench/host_cpu.py) and py-spy on the CLI's process, when .device-carry/wheels holds
    # py-spy's wheel: where the flow process and the vLLM front end spend the host's cores
    r=$2
    python3 bench/host_cpu.py --out "$OUT/host-cpu-r$r.json" --seconds 540 & s=$!
    $B pipeline --gpu 0 --round "$r" --owner-pid "$(owner)" > "$OUT/pipeline-r$r.log" 2>&1 & a=$!
    spy_on_cli $a "$OUT/pyspy-r$r.txt" "$OUT/pyspy-r$r.log" --threads  # bench/device_tools.sh
    wait $a
    kill $s; wait $s
    tail -2 "$OUT/pipeline-r$r.log"
    cp $W/phases/*.json $W/cli-r*.log "$OUT/" 2>/dev/null
    ;;
  deployment)
    $B deployment --gpu 0 --owner-pid "$(owner)" > "$OUT/deployment.log" 2>&1 & a=$!
    [ "$gpus" -ge 2 ] && $B raw --gpu 1 --round 3 --owner-pid "$(owner)" > "$OUT/raw-r3.log" 2>&1
    wait $a
    tail -3 "$OUT/deployment.log" "$OUT/raw-r3.log" 2>/dev/null
    cp $W/phases/*.json "$OUT/" 2>/dev/null
    $B report --out "$OUT" --command "bash bench/gpu_user_path_device.sh setup; round 1; round 2; deployment (see the script)"
    ;;
  live)
    # prefect deploy of the GPU deployments, one worker on the pool, then a UI run, a
    # trigger and a sweep batch on the GPU through the host's shared server
    $B live --gpu 0 --owner-pid "$(owner)" > "$OUT/live.log" 2>&1
    tail -3 "$OUT/live.log"
    cp $W/phases/live.json "$OUT/gpu_live_runs.json" 2>/dev/null
    ;;
  multi-setup)
    # a multi-GPU machine for bench/gpu_multi.py: what setup does, without its servers
    # (each GPU set's phases start their own, owned by a process of their own)
    if [ ! -f /tmp/site/env.sh ]; then bash .device-stage/bin/install.sh || exit 1; . /tmp/site/env.sh; fi
    export PYTHONPATH=$PWD:$PYTHONPATH
    gs --version || exit 1
    [ -d /tmp/synthetic-vlm ] || python3 .device-carry/make_synthetic_vlm.py /tmp/synthetic-vlm || exit 1
    python3 bench/synthetic_text_vocab.py /tmp/synthetic-vlm || exit 1  # answers that read like text
    $B corpus --pdfs .corpus-carry --min-pages "$MIN_PAGES" --min-docs 150 || exit 1
    ;;
  multi)
    # N=1: the pipeline and the raw engine on GPU 0; N=2 (or 4): on GPUs 0..N-1, then
    # the report (bench/results/gpu_multi.json). Each set's servers stop with its owner.
    # `multi N dp`: vLLM's --data-parallel-size N in one server instead of N servers.
    n=$2 mode=${3:-servers}
    gpus=$(seq -s, 0 $((n - 1)))
    M="python3 bench/gpu_multi.py --work $W"
    setsid sleep 1200 & o=$!
    $M pipeline --gpus "$gpus" --mode "$mode" --owner-pid $o > "$OUT/multi-pipeline-g$n-$mode.log" 2>&1
    $M raw --gpus "$gpus" --mode "$mode" --owner-pid $o > "$OUT/multi-raw-g$n-$mode.log" 2>&1
    kill $o; sleep 15  # the supervisors stop their servers: the GPUs' memory comes free
    tail -2 "$OUT/multi-pipeline-g$n-$mode.log" "$OUT/multi-raw-g$n-$mode.log"
    cp $W/phases/multi-*.json "$OUT/" 2>/dev/null
    if [ "$n" -gt 1 ]; then
      $M report --out "$OUT" --command "bash bench/gpu_user_path_device.sh multi-setup; multi 1; multi $n (see the script)"
    fi
    ;;
  *) echo "usage: $0 setup | round N | pipeline N | deployment | profile N | live | multi-setup | multi N" >&2; exit 2 ;;
esac
