"""The GPU path at the references' settings (issue 47): ``gpu_reference_settings.json``
from the phase files of ``bench/engine_limit.py``, one device session at a time.

A *run* is one served phase (``vllm serve``, the raw engine) and one pipeline phase
(``folio ingest`` with the user's defaults) on the same server and pages, in one device
session; an *offline pair* is vLLM's offline engine and a pipeline phase on the same pages.
A session's ``engine_limit.py report`` (its ``engine_limit.json``, whose ``phases`` hold
every run in the order it ran) is added here with the session's name; the runs of a preset
may come from different sessions, and adding the same session again replaces its rows.

    python bench/gpu_reference.py add SESSION_RESULT.json --session 2026-12-06a
    python bench/gpu_reference.py show

Only runs of the user's configuration count toward the targets (variant ``default``,
>= 500 pages of >= 100 documents); a variant's runs (``mnbt16k``, the prepared
``--max-num-batched-tokens 16384``) are kept in ``variants`` beside the default they are
compared with. Targets: median pipeline/served >= 0.95 for each preset, median
pipeline/offline >= 0.85 for olmocr2.

A plan that fits a 30-minute device session (figures from engine_limit_issue29.json:
olmocr2 ~113 s a phase at 1007 pages, Chandra ~345 s; a server start ~130 s; staging
~4 min), with ``PRESETS=olmocr2,chandra2 MIN_PAGES=500 REPEATS=3``:

* session A: ``setup``; ``offline olmocr2`` (three on one engine); then ``plan`` served and
  pipeline of olmocr2 three times on one server (~6 min); ``report``.
* sessions B-D: ``setup``; ``plan`` served and pipeline of chandra2 once on the default
  server and once on the mnbt16k server (~13 min with two starts); ``report``. The mnbt16k
  comparison needs an H200 (``kind: nvidia-h200``): the h100-80gb profile gives 16384
  tokens a step itself, so on an H100 the variant is the default (and is refused).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

RESULT = Path(__file__).resolve().parent / "results" / "gpu_reference_settings.json"
MIN_PAGES, MIN_DOCUMENTS = 500, 100
TARGETS = {"pipeline_over_served": 0.95, "pipeline_over_offline": 0.85}
PRESETS = ("chandra2", "olmocr2")  # the references' presets the issue measures


def _busy(phase: dict[str, Any]) -> float | None:
    return (phase.get("queue") or {}).get("gpu_utilization_mean")


def session_rows(result: dict[str, Any], session: str) -> dict[str, list[dict[str, Any]]]:
    """The runs and offline pairs of one session's engine_limit result: the i-th served
    phase of a preset and variant with its i-th pipeline phase, in the order they ran
    (the phases list is in running order); seeded phases of earlier sessions (with
    ``measured_at``) and phases marked ``invalid`` are not this session's runs."""
    commit = str(result.get("commit") or "")
    own = [p for p in result.get("phases", []) if not p.get("measured_at")
           and not p.get("invalid")]
    by: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for p in own:
        variant = "" if p["phase"] == "offline" else p.get("variant") or "default"
        by.setdefault((p["preset"], variant, p["phase"]), []).append(p)
    runs, offline = [], []
    for (preset, variant, phase), served in sorted(by.items()):
        if phase != "served":
            continue
        for sv, pl in _pairs(served, by.get((preset, variant, "pipeline"), [])):
            runs.append({"preset": preset, "variant": variant, "device_session": session,
                         "documents": pl.get("documents"), "pages": pl["pages"],
                         "served_pages_per_s": sv["pages_per_s"],
                         "pipeline_pages_per_s": pl["pages_per_s"],
                         "gpu_busy_served": _busy(sv), "gpu_busy_pipeline": _busy(pl),
                         "commit": commit})
    for preset in sorted({k[0] for k in by if k[2] == "offline"}):
        for off, pl in zip(by[(preset, "", "offline")], by.get((preset, "default", "pipeline"),
                                                               [])):
            offline.append({"preset": preset, "device_session": session,
                            "pages": min(off["pages"], pl["pages"]),
                            "offline_pages_per_s": off["pages_per_s"],
                            "pipeline_pages_per_s": pl["pages_per_s"], "commit": commit})
    return {"runs": runs, "offline": offline}


def _pairs(served: list[dict[str, Any]], pipelines: list[dict[str, Any]]
           ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each served phase with the next pipeline phase on its own server where the phases
    name it (``server``: a session may start a second server of a preset, whose pipeline
    phase then has no served phase beside it), else the i-th with the i-th."""
    if not all(p.get("server") for p in [*served, *pipelines]):
        return list(zip(served, pipelines))
    left, out = list(pipelines), []
    for sv in served:
        pl = next((p for p in left if p["server"] == sv["server"]), None)
        if pl is not None:
            left.remove(pl)
            out.append((sv, pl))
    return out


def variant_rows(result: dict[str, Any], session: str) -> list[dict[str, Any]]:
    """A server variant against the default in one session, on what a user gets (the
    pipeline phases; a variant's served phase is not needed for that): the median pages/s
    of each, every pipeline phase of the session counted."""
    own = [p for p in result.get("phases", []) if p["phase"] == "pipeline"
           and not p.get("measured_at") and not p.get("invalid")]
    rows = []
    for preset in sorted({p["preset"] for p in own}):
        default = [p["pages_per_s"] for p in own
                   if p["preset"] == preset and (p.get("variant") or "default") == "default"]
        if not default:  # nothing to compare a variant with in this session
            continue
        for variant in sorted({p.get("variant") or "default" for p in own
                               if p["preset"] == preset} - {"default"}):
            mine = [p for p in own if p["preset"] == preset and p.get("variant") == variant]
            rate = statistics.median(p["pages_per_s"] for p in mine)
            rows.append({"preset": preset, "variant": variant, "device_session": session,
                         "server_args": mine[0].get("server_args", []),
                         "pages": min(p["pages"] for p in mine),
                         "default_pipeline_pages_per_s": default,
                         "variant_pipeline_pages_per_s": [p["pages_per_s"] for p in mine],
                         "variant_over_default": round(rate / statistics.median(default), 3),
                         "commit": str(result.get("commit") or "")})
    return rows


def counts(run: dict[str, Any]) -> bool:
    """A run of the user's configuration at the issue's size."""
    return (run.get("variant", "default") == "default" and run["pages"] >= MIN_PAGES
            and (run.get("documents") or 0) >= MIN_DOCUMENTS)


def summary(runs: list[dict[str, Any]], offline: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per preset and whether each target is met (``None``: no run yet)."""
    out: dict[str, Any] = {}
    for preset in sorted({r["preset"] for r in runs} | {o["preset"] for o in offline}):
        mine = [r for r in runs if r["preset"] == preset and counts(r)]
        ratios = [r["pipeline_pages_per_s"] / r["served_pages_per_s"] for r in mine]
        off = [o["pipeline_pages_per_s"] / o["offline_pages_per_s"] for o in offline
               if o["preset"] == preset and o["pages"] >= MIN_PAGES]
        row: dict[str, Any] = {"runs": len(mine), "offline_pairs": len(off)}
        if ratios:
            med = round(statistics.median(ratios), 3)
            row["pipeline_over_served"] = med
            row["meets_pipeline_over_served"] = med >= TARGETS["pipeline_over_served"]
        if off:
            med = round(statistics.median(off), 3)
            row["pipeline_over_offline"] = med
            row["meets_pipeline_over_offline"] = med >= TARGETS["pipeline_over_offline"]
        row["complete"] = len(mine) >= 3 and (preset != "olmocr2" or len(off) >= 3)
        out[preset] = row
    return out


def variant_summary(compared: list[dict[str, Any]]) -> dict[str, Any]:
    """Per variant: its median ratio to the default on each preset, and whether it wins
    on both presets of the issue (the condition for making it the h200 profile's
    default)."""
    out: dict[str, Any] = {}
    for variant in sorted({c["variant"] for c in compared}):
        ratios = {preset: round(statistics.median(c["variant_over_default"] for c in compared
                                                  if c["variant"] == variant
                                                  and c["preset"] == preset), 3)
                  for preset in sorted({c["preset"] for c in compared
                                        if c["variant"] == variant})}
        out[variant] = {"variant_over_default": ratios,
                        "wins_on_both": all(ratios.get(p, 0) > 1 for p in PRESETS)}
    return out


def add(store: dict[str, Any], result: dict[str, Any], session: str,
        note: str | None = None) -> dict[str, Any]:
    """``store`` with ``session``'s rows replaced by those of ``result``; the session's GPU,
    command and ``note`` (where the time went, what was tried: the issue asks the JSON
    itself to say so where a target is missed) are kept under ``sessions``, a note given
    before kept when none is given now."""
    rows = session_rows(result, session)
    sessions = dict(store.get("sessions") or {})
    before = sessions.get(session) or {}
    sessions[session] = {"gpu": result.get("gpu"), "commit": result.get("commit"),
                         "command": result.get("command"),
                         "note": note if note is not None else before.get("note")}
    def kept(*keys: str) -> list[dict[str, Any]]:
        return [r for k in keys for r in store.get(k, []) if r["device_session"] != session]

    runs = kept("runs", "variants") + rows["runs"]
    offline = kept("offline") + rows["offline"]
    compared = kept("variant_comparisons") + variant_rows(result, session)
    settings = dict(store.get("settings") or {})
    settings.update(result.get("settings") or {})
    return {"runs": [r for r in runs if r["variant"] == "default"],
            "variants": [r for r in runs if r["variant"] != "default"],
            "offline": offline, "variant_comparisons": compared,
            "settings": settings, "sessions": sessions,
            "targets": TARGETS, "summary": summary(runs, offline),
            "variant_summary": variant_summary(compared),
            "how": "bench/gpu_reference.py add: each session's engine_limit.json (served and "
                   "pipeline phases paired in running order on one server)"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["add", "show"])
    ap.add_argument("result", nargs="?", help="add: a session's engine_limit.json")
    ap.add_argument("--session", help="add: the device session's name")
    ap.add_argument("--note", help="add: where the time went and what was tried")
    ap.add_argument("--out", default=str(RESULT))
    args = ap.parse_args()
    out = Path(args.out)
    store = json.loads(out.read_text()) if out.is_file() else {}
    if args.step == "add":
        if not args.result or not args.session:
            sys.exit("add needs a result file and --session")
        store = add(store, json.loads(Path(args.result).read_text()), args.session,
                    args.note)
        out.write_text(json.dumps(store, indent=1) + "\n")
    print(json.dumps(store.get("summary", {}), indent=1))


if __name__ == "__main__":
    main()
