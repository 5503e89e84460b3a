"""report.html: the evaluation's tables as HTML tables, a per-task table, and one line per episode
with links to its record (events.jsonl, summary.json) and, when written, its video and contact sheet.

The numbers are ``report.tables`` / ``report.summarize``'s, the same the Markdown report shows;
this module only lays them out. Links are relative to the results directory, so the directory
can be moved or served as it is. Cost per episode (USD) appears where the VLM config gives prices.
"""
from __future__ import annotations

import html
import os
from pathlib import Path
from urllib.parse import quote

from .report import failure_cause, group, summarize, tables

COLUMNS = ("group", "success", "rate [95% Wilson]", "episode s (median)", "VLM / motion / overhead s",
           "steps (median / budget)", "VLM calls/ep", "tokens/ep", "cost/ep USD", "failures by cause")


def _e(x) -> str:
    return html.escape(str(x))


def _cells(name: str, s: dict) -> list[str]:
    from .report import _steps, tokens
    causes = ", ".join(f"{c} {n}" for c, n in sorted(s["causes"].items())) or "-"
    cost = "-" if s.get("cost") is None else f"{s['cost']:.4f}"
    return [name, f"{s['success']}/{s['n']}",
            f"{100 * s['rate']:.0f}% [{100 * s['ci'][0]:.0f}, {100 * s['ci'][1]:.0f}]", f"{s['episode_s']:.1f}",
            f"{s['vlm_s']:.2f} / {s['motion_s']:.1f} / {s['overhead_s']:.1f}", _steps(s), f"{s['vlm_calls']:.1f}",
            tokens(s), cost, causes]


def table(head, body, cls: str = "") -> str:
    """An HTML table from a header and rows of cell texts (escaped here; a cell given as
    ``("html", markup)`` is inserted as it is, for links)."""
    def cell(c, tag):
        if isinstance(c, tuple) and c and c[0] == "html":
            return f"<{tag}>{c[1]}</{tag}>"
        return f"<{tag}>{_e(c)}</{tag}>"
    rows = "".join("<tr>" + "".join(cell(c, "td") for c in r) + "</tr>" for r in body)
    return (f"<table class='{cls}'><thead><tr>" + "".join(cell(h, "th") for h in head) +
            f"</tr></thead><tbody>{rows}</tbody></table>")


def _link(out: Path, run_dir: str, name: str, label: str) -> str:
    """A link to ``run_dir/name``; a name without a suffix is a video (``record.video_file``: .mp4 or .webm)."""
    if not run_dir:
        return ""
    if "." not in name:
        from ..record import video_file
        p = video_file(run_dir, name)
    else:
        p = Path(run_dir) / name
    if p is None or not p.exists():
        return ""
    rel = quote(os.path.relpath(p, out))
    return f"<a href='{_e(rel)}'>{_e(label)}</a>"


def episode_rows(rows: list[dict], out: Path) -> list[list]:
    body = []
    for r in sorted(rows, key=lambda r: r["key"]):
        links = " ".join(x for x in (_link(out, r.get("run_dir", ""), "events.jsonl", "record"),
                                     _link(out, r.get("run_dir", ""), "summary.json", "summary"),
                                     _link(out, r.get("run_dir", ""), "episode.html", "episode"),
                                     _link(out, r.get("run_dir", ""), "rollout", "rollout"),
                                     _link(out, r.get("run_dir", ""), "video", "video"),
                                     _link(out, r.get("run_dir", ""), "contact_sheet.png", "frames")) if x)
        cost = r.get("vlm_cost_usd")
        body.append([r["key"], "yes" if r.get("success") else "no", r.get("outcome", ""),
                     failure_cause(r) or "-", r.get("steps", ""), f"{float(r.get('episode_s', 0)):.1f}",
                     r.get("vlm_calls", ""), sum((r.get("vlm_tokens") or {}).values()),
                     "-" if cost is None else f"{cost:.4f}", ("html", links or "-")])
    return body


STYLE = ("body{font-family:sans-serif;max-width:1200px;margin:1em auto}table{border-collapse:collapse;"
         "margin:0.5em 0 1.5em;font-size:0.9em}th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}"
         "th{background:#f0f0f0}tbody tr:nth-child(even){background:#fafafa}.note{color:#a00}")


def sections(md_lines: list[str]) -> str:
    """report.md's sections (headings, paragraphs, pipe tables) as HTML: the same lines, so the two
    reports show the same numbers from one definition (report.py builds them)."""
    out, para, tab = [], [], []

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    def flush():
        if para:
            out.append(f"<p>{_e(' '.join(para))}</p>")
            para.clear()
        if tab:
            body = [cells(x) for x in tab[1:] if not set(x.replace("|", "").strip()) <= set("-: ")]
            out.append(table(cells(tab[0]), body))
            tab.clear()
    for line in md_lines:
        if line.startswith("#"):
            flush()
            level = min(4, len(line) - len(line.lstrip("#")))
            out.append(f"<h{level}>{_e(line.lstrip('#').strip())}</h{level}>")
        elif line.startswith("|"):
            if para:
                flush()
            tab.append(line)
        elif not line.strip():
            flush()
        else:
            if tab:
                flush()
            para.append(line.replace("`", ""))
    flush()
    return "\n".join(out)


def provenance_html(rows: list[dict], stamp: dict | None) -> str:
    """The provenance block (evaluate/provenance.py): command, commit, date, versions, brain."""
    from .provenance import lines
    pairs = lines(rows, stamp)
    if not pairs:
        return ""
    return ("<h2>Provenance</h2><table class='provenance'><tbody>" +
            "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in pairs) + "</tbody></table>")


def page(rows: list[dict], out: str | Path, title: str, plots: list[tuple[str, str]],
         stamp: dict | None = None) -> str:
    """The whole report.html."""
    from .report import failing_tasks, interference_tables, noise_section, perturbation_grid, vlm_trouble_section
    from .steps import section
    out = Path(out)
    body = [f"<h1>{_e(title)}</h1>"]
    if not rows:
        body.append("<p>No finished episodes.</p>")
    else:
        brains = sorted({r.get("brain_label") or r["brain"] for r in rows})
        body.append(f"<p>{len(rows)} episodes; brain(s): {_e(', '.join(brains))}.</p>")
        if any(r.get("privileged") for r in rows):
            body.append("<p class='note'><b>Results of the oracle brain read privileged simulator state: an upper "
                        "bound for the stack, not a VLM's score.</b></p>")
        for name, tab in tables(rows).items():
            body.append(f"<h2>{_e(name.capitalize())}</h2>" + table(COLUMNS, [_cells(k, s) for k, s in tab]))
        per_task = []
        for (suite, task), rs in group(rows, lambda r: (r["suite"], r["task"])).items():
            s = summarize(rs)
            instr = next((r.get("instruction") for r in rs if r.get("instruction")), "")
            per_task.append([f"{suite} / {task}", instr, *_cells("", s)[1:]])
        body.append("<h2>By task</h2>" + table(("suite / task", "instruction", *COLUMNS[1:]), per_task))
        body.append(sections(perturbation_grid(rows) + failing_tasks(rows) + interference_tables(rows)
                             + noise_section(rows) + vlm_trouble_section(rows) + section(rows)))
        for name, img in plots:
            body.append(f"<h2>{_e(name)}</h2><img alt='{_e(name)}' src='data:image/png;base64,{img}'>")
        body.append("<h2>Episodes</h2>" + table(("episode", "success", "outcome", "cause", "steps", "episode s",
                                                 "VLM calls", "tokens", "cost USD", "record"), episode_rows(rows, out)))
    body.append(provenance_html(rows, stamp))
    return (f"<!doctype html><meta charset='utf-8'><title>{_e(title)}</title><style>{STYLE}</style><body>"
            + "\n".join(body) + "</body>")
