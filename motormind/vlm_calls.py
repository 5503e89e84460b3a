"""The totals of a record's VLM calls, summed in one place (``count_vlm``): calls, latency (per role),
tokens, cost, retries, repairs, fail-safes, quirks; the calls made ahead of their time
(``episode/overlap.py``) also per tag. Live as a record is written (``vlm_totals``), from a finished
``events.jsonl`` (``vlm_totals_of``), or per episode by a reader that splits them (the console's
view, the ROS 2 Executor node)."""
from __future__ import annotations

import json
from pathlib import Path

from .messages import EventKind


def new_vlm_totals() -> dict:
    """Empty VLM call totals (``count_vlm`` adds to them)."""
    return {"calls": 0, "ok": 0, "latency_s": 0.0, "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0,
            "cost_usd": 0.0,
            "retries": 0, "repairs": 0, "failed_safe": 0, "transport_failures": 0, "server_faults": 0,
            "quirks": {}, "server_quirks": 0, "latency_by_role": {}}


def count_vlm(tot: dict, ev: dict) -> None:
    """Add one record event to VLM call totals (cost, retries, repairs, fail-safes): the one place the
    record's VLM calls are summed. A call made ahead of its time (``ahead``: its tag, episode/overlap.py)
    is also totalled under ``by_tag``."""
    k = ev.get("kind")
    if k == EventKind.VLM_CALL:
        meta = ev.get("meta") or {}
        lat = float(ev.get("latency_s", 0.0) or 0.0)
        tot["calls"] += 1
        tot["ok"] += bool(ev.get("ok"))
        tot["latency_s"] = round(tot["latency_s"] + lat, 4)
        tot["input_tokens"] += int(ev.get("input_tokens", 0) or 0)
        tot["output_tokens"] += int(ev.get("output_tokens", 0) or 0)
        tot["cached_tokens"] += int(meta.get("cached_tokens", 0) or 0)   # the server's prefix cache said so
        tot["cost_usd"] = round(tot["cost_usd"] + float(meta.get("cost_usd", 0.0) or 0.0), 8)
        role = str(ev.get("role", "?"))
        tot["latency_by_role"][role] = round(tot["latency_by_role"].get(role, 0.0) + lat, 4)
        if "brain call failed" in (ev.get("error") or ""):
            tot["transport_failures"] += 1
        if ev.get("ahead"):
            t = tot.setdefault("by_tag", {}).setdefault(str(ev["ahead"]), {
                "calls": 0, "latency_s": 0.0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})
            t["calls"] += 1
            t["latency_s"] += lat
            t["input_tokens"] += int(ev.get("input_tokens", 0) or 0)
            t["output_tokens"] += int(ev.get("output_tokens", 0) or 0)
            t["cost_usd"] += float(meta.get("cost_usd", 0.0) or 0.0)
    elif k == EventKind.VLM_RETRY:          # the openai brain's own retries (429, 5xx, timeouts)
        tot["retries"] += 1
    elif k == EventKind.REPAIR_REQUEST:
        tot["repairs"] += 1
    elif k == EventKind.ROLE_FAILED:
        tot["failed_safe"] += 1
    elif k == EventKind.SERVE_FAULT:
        tot["server_faults"] += 1
    elif k == EventKind.VLM_QUIRK:          # what the openai brain handled of a server's ways (brains/openai_brain.py)
        q = str(ev.get("quirk", "?"))
        tot["quirks"][q] = tot["quirks"].get(q, 0) + 1
    elif k == EventKind.SERVE_QUIRK:        # what serve-brain emulated (serve/quirks.py)
        tot["server_quirks"] += 1


def dropped_cost(log: list, by_tag: dict, vlm_s: float) -> dict:
    """What the calls made ahead and dropped cost (``log``: the episode machine's ``overlap_log``;
    ``by_tag``: the totals' ``by_tag``): calls, model seconds, tokens, USD, share of the VLM seconds."""
    dropped = {e["tag"] for e in log if e["outcome"] == "dropped"}
    cost = {"calls": 0, "s": 0.0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    for tag, t in by_tag.items():
        if tag in dropped:
            for k in cost:
                cost[k] += t["latency_s" if k == "s" else k]
    cost["s"] = round(cost["s"], 3)
    cost["cost_usd"] = round(cost["cost_usd"], 8)
    cost["share_of_vlm_s"] = round(cost["s"] / vlm_s, 4) if vlm_s else 0.0
    return cost


def vlm_totals(rec) -> dict:
    """A listener on ``rec`` (``record.Recorder``) that totals its VLM calls as they are recorded."""
    tot = new_vlm_totals()
    rec.listeners.append(lambda ev: count_vlm(tot, ev))
    return tot


def vlm_totals_of(path: str | Path) -> dict:
    """The VLM call totals of a finished record (its ``events.jsonl``; an unreadable line is skipped,
    a missing file gives no calls)."""
    tot = new_vlm_totals()
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return tot
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict):
            count_vlm(tot, ev)
    return tot


def vlm_trouble(tot: dict) -> dict:
    """What went wrong with the VLM, from ``vlm_totals``: calls failed safe (a role gave up), repair
    rounds, truncation retries, answers read from the reasoning field, transport retries and
    failures, server faults. Only the kinds that happened."""
    q = tot.get("quirks") or {}
    out = {"failed_safe": tot.get("failed_safe", 0), "repairs": tot.get("repairs", 0),
           "truncation_retries": q.get("truncated", 0), "answer_in_reasoning": q.get("answer_in_reasoning", 0),
           "retries": tot.get("retries", 0), "transport_failures": tot.get("transport_failures", 0),
           "server_faults": tot.get("server_faults", 0)}
    return {k: v for k, v in out.items() if v}
