"""bench/office_structure.py's summary: each reader's scores over all files (shares pooled
by count: a file of 200 rows weighs more than a slide of 5), its CPU seconds, and issue
54's targets met or not."""

from __future__ import annotations

from typing import Any

#: issue 54's targets: the pooled share each score must reach
TARGETS = {"word_recall_min": 1.0, "list_items_as_list_items": 0.95,
           "list_items_level_and_kind": 0.95, "headings_right_level": 0.95,
           "table_cells_in_place": 0.95}
PRESENT = ("sheet_names", "notes", "comments", "footnotes", "link_urls", "chart_values",
           "captions")


def _pooled(rows: list[dict[str, Any]], part: str, share: str, count: str) -> float | None:
    total = sum(row["scores"][part][count] for row in rows)
    if not total:
        return None
    found = sum((row["scores"][part][share] or 0) * row["scores"][part][count] for row in rows)
    return round(found / total, 4)


def reader_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One reader's figures over its rows (one a file)."""
    recalls = [row["scores"]["word_recall"] for row in rows]
    present: dict[str, float | None] = {}
    for kind in PRESENT:
        shares = [row["scores"]["present"][kind] for row in rows
                  if row["scores"]["present"][kind] is not None]
        present[kind] = min(shares) if shares else None
    return {
        "files": len(rows),
        "files_failed": sum(bool(row["error"]) for row in rows),
        "word_recall_min": min(recalls, default=0.0),
        "word_recall_mean": round(sum(recalls) / len(recalls), 4) if recalls else 0.0,
        "list_items_as_list_items": _pooled(rows, "lists", "as_list_items", "items"),
        "list_items_level_and_kind": _pooled(rows, "lists", "level_and_kind", "items"),
        "headings_as_headings": _pooled(rows, "headings", "as_headings", "headings"),
        "headings_right_level": _pooled(rows, "headings", "right_level", "headings"),
        "table_cells_in_place": _pooled(rows, "tables", "cells_in_place", "cells"),
        "present_min": present,
        "private_use_chars": sum(row["scores"]["private_use_chars"] for row in rows),
        "cpu_s_total": round(sum(row["cpu_s"] for row in rows), 2),
        "wall_s_total": round(sum(row["wall_s"] for row in rows), 2),
    }


def targets_met(summary: dict[str, Any], docling_cpu_s: float | None) -> dict[str, bool]:
    met = {name: (summary[name] or 0.0) >= target for name, target in TARGETS.items()}
    met.update({f"present_{kind}": share == 1.0
                for kind, share in summary["present_min"].items() if share is not None})
    met["no_private_use_chars"] = summary["private_use_chars"] == 0
    if docling_cpu_s is not None:
        met["cpu_no_more_than_docling"] = summary["cpu_s_total"] <= docling_cpu_s
    return met


def summarise(files: dict[str, Any], readers: list[str]) -> dict[str, Any]:
    """Per reader: its figures over every file, and the targets it meets."""
    by_reader = {reader: reader_summary([entry["readers"][reader] for entry in files.values()
                                         if reader in entry["readers"]])
                 for reader in readers}
    docling = by_reader.get("docling", {}).get("cpu_s_total")
    for reader, summary in by_reader.items():
        summary["targets_met"] = targets_met(summary, docling)
        if docling and reader != "docling":
            summary["cpu_vs_docling"] = round(summary["cpu_s_total"] / docling, 2)
    return by_reader
