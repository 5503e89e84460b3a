"""A run's reports, written: report.md (report.py's sections) and report.html (htmlreport.py's
page, with the success and timing plots drawn here)."""
from __future__ import annotations

import base64
import io
from pathlib import Path

from .htmlreport import page
from .provenance import load
from .report import markdown, tables


def _plots(rows: list[dict]) -> list[tuple[str, str]]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out = []
    tab = tables(rows)["by suite"]
    names = [k for k, _ in tab]
    rates = [100 * s["rate"] for _, s in tab]
    err = [[100 * (s["rate"] - s["ci"][0]) for _, s in tab], [100 * (s["ci"][1] - s["rate"]) for _, s in tab]]
    fig, ax = plt.subplots(figsize=(max(4, 0.9 * len(names) + 2), 3.2))
    ax.bar(names, rates, yerr=err, capsize=4, color="#4c78a8")
    ax.set_ylabel("success % (95% Wilson)")
    ax.set_ylim(0, 105)
    ax.tick_params(axis="x", rotation=30, labelsize=8)
    fig.tight_layout()
    out.append(("Success per suite", _png(fig)))
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(max(4, 0.9 * len(names) + 2), 3.2))
    bottom = [0.0] * len(tab)
    for part, color in (("vlm_s", "#f58518"), ("motion_s", "#54a24b"), ("overhead_s", "#b279a2")):
        vals = [s[part] for _, s in tab]
        ax.bar(names, vals, bottom=bottom, label=part.replace("_s", ""), color=color)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("seconds per episode (median)")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", rotation=30, labelsize=8)
    fig.tight_layout()
    out.append(("Timing split", _png(fig)))
    plt.close(fig)
    return out


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return base64.b64encode(buf.getvalue()).decode()


def write_reports(rows: list[dict], out_dir: str | Path, title: str = "MotorMind evaluation",
                  stamp: dict | None = None) -> dict:
    """report.md and report.html; ``stamp``: the run's provenance (evaluate/provenance.py), by
    default what ``motormind eval`` kept in OUT/eval.json."""
    out = Path(out_dir)
    stamp = load(out) if stamp is None else stamp
    md = markdown(rows, title, stamp)
    (out / "report.md").write_text(md)
    (out / "report.html").write_text(page(rows, out, title, _plots(rows) if rows else [], stamp))
    return {"markdown": str(out / "report.md"), "html": str(out / "report.html")}
