"""A benchmark variant's own options (bench/engine_limit.py's ``--server-args`` and
``--folio-set``), and ``vllm serve``'s options read as vLLM reads them, so a variant can be
told apart from the default it is measured against."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable


def variant_args(args: argparse.Namespace) -> list[str]:
    """A variant's own ``vllm serve`` options (``--server-args``, a JSON list)."""
    extra = json.loads(getattr(args, "server_args", None) or "[]")
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        raise SystemExit(f"--server-args: a JSON list of strings, not {extra!r}")
    return extra


def server_options(command: list[str]) -> dict[str, str]:
    """``vllm serve``'s options as vLLM reads them: ``--flag value`` or a bare ``--flag``,
    the last of a repeated flag winning."""
    out: dict[str, str] = {}
    for i, word in enumerate(command):
        if word.startswith("--"):
            nxt = command[i + 1] if i + 1 < len(command) else ""
            out[word] = "" if nxt.startswith("--") else nxt
    return out


def refuse_a_variant_that_changes_nothing(
        args: argparse.Namespace, server_command: Callable[[argparse.Namespace], list[str]],
) -> None:
    """A server variant whose options this GPU's profile already sets measures the default
    twice under two names (on an H100, whose profile sets 16384 tokens a step, the
    ``mnbt16k`` variant was run that way once): refused before its server starts.
    ``server_command``: the ``vllm serve`` command folio starts for a step's arguments."""
    if not variant_args(args) or args.fake:  # the fake server takes no vLLM options
        return
    plain = argparse.Namespace(**{**vars(args), "server_args": "[]"})
    if server_options(server_command(plain)) == server_options(server_command(args)):
        raise SystemExit(f"variant {args.tag}: {' '.join(variant_args(args))} is what this "
                         f"GPU's profile already gives vllm serve; the variant would measure "
                         f"the default")


def variant_settings(args: argparse.Namespace) -> list[str]:
    """A variant's own folio settings (``--folio-set``, a JSON list of ``key=value``, as
    the user's ``--set``): ``["limits.ocr_extra_pages=0"]``. The pipeline runs with them,
    and the served client reads its requests in flight from them (``ocr.in_flight``)."""
    sets = json.loads(getattr(args, "folio_set", None) or "[]")
    if not isinstance(sets, list) or not all(isinstance(a, str) and "=" in a for a in sets):
        raise SystemExit(f"--folio-set: a JSON list of key=value strings, not {sets!r}")
    return sets


def cpu_list(cpus: set[int]) -> str:
    """``0-5,8`` for {0, 1, 2, 3, 4, 5, 8}: a CPU set as taskset writes it."""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive CPUs
    for cpu in sorted(cpus):
        if runs and runs[-1][1] == cpu - 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
