"""AVX-512 on and off side by side: the bench's ratios kept per instruction set (issue 51)."""

from __future__ import annotations

from typing import Any

from cardrag.evals.report import isa_label

SIDE_BY_SIDE = ("latency", "growth", "lengths")
"""The sections kept per instruction set too, so AVX-512 on and off sit side by side."""


def keep_by_isa(sections: dict[str, Any], name: str, value: Any) -> None:
    """Keep a side-by-side section's figures under this process's instruction set too."""
    if name in SIDE_BY_SIDE:
        sections.setdefault("by_isa", {}).setdefault(isa_label(), {})[name] = value


def ratios(name: str, value: Any) -> dict[str, float]:
    """Ours against the floor, one figure per row of a section (the side-by-side's cells).

    Example:
        >>> ratios("latency", [{"system": "ours (shipped settings)", "ratio": 1.02}])
        {'38 cards': 1.02}
        >>> ratios("growth", [{"cards": 1000, "p50_ms": {"ours": 6.0, "floor": 3.0}}])
        {'growth 1,000 cards': 2.0}
    """
    if name == "latency":
        ours = [r["ratio"] for r in value if r["system"] == "ours (shipped settings)"]
        return {"38 cards": ours[0]} if ours else {}
    label = "lengths {cards:,} x {chars:,} chars" if name == "lengths" else "growth {cards:,} cards"
    return {label.format(**g): round(g["p50_ms"]["ours"] / g["p50_ms"]["floor"], 2) for g in value}


def isa_table(by_isa: dict[str, dict[str, Any]]) -> list[str]:
    """Ours / floor per row, one column per instruction set the bench was run with."""
    if not by_isa:
        return []
    isas = sorted(by_isa)
    cells: dict[str, dict[str, float]] = {}
    for name in SIDE_BY_SIDE:
        for isa in isas:
            for row, ratio in ratios(name, by_isa[isa].get(name, [])).items():
                cells.setdefault(row, {})[isa] = ratio
    lines = [
        "",
        "## Instruction sets side by side (ours / floor p50, each measured in one run; "
        "`make bench-avx2` turns AVX-512 off)",
        "",
        "| measurement | " + " | ".join(isas) + " |",
        "|---|" + "---|" * len(isas),
    ]
    for row, by in cells.items():
        figures = " | ".join(f"{by[i]}x" if i in by else "" for i in isas)
        lines.append(f"| {row} | {figures} |")
    return lines
