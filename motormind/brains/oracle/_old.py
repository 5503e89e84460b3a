"""The oracle brain: a scripted teleoperator that reads PRIVILEGED simulator state.

It answers every role in the same JSON a VLM would, through the same parse path, from the task's
BDDL goal and the true object poses. It exists to test and measure the stack without a VLM and as
an upper bound; every answer it gives carries ``"source": "oracle"`` and every result it produces
is labelled ``privileged``. It scripts ``On A B`` and ``In A region`` goals (pick and place).

The scene it reads must offer (units: metres, base frame):
    goal_state -> [["on", "a", "b"], ...]        object_names, region_names -> [str]
    object_aabb(name) -> (lo[3], hi[3])          region(name) -> {"lo": [3], "hi": [3], ...}
    predicate(pred) -> bool
(``motormind.sim.libero_pro.scene.Scene`` is one.)
Monitor and Memory answers use only the measured state in their prompts, never the scene, so they
can run on their own threads.
"""
from __future__ import annotations

import json
import math
import time

import numpy as np

from .. import SCHEMA_VERSION
from .base import Brain, BrainReply, BrainRequest

APPROACH_M = 0.05          # pre-grasp height above the grasp point
LIFT_CLEAR_M = 0.06        # carried object's bottom clears the target's top by this much
RELEASE_M = 0.012          # release with the object's bottom this far above the support
FINGER_SPAN_M = 0.070      # widest object the fingers can straddle (78 mm open, some margin)
HOLD_MIN_MM = 2.5          # a closed gripper narrower than this holds nothing


class OracleBrain(Brain):
    name = "oracle"
    privileged = True

    def __init__(self, scene, profile):
        self.scene = scene
        self.profile = profile
        self.specs: dict = {}       # subgoal id -> (kind, A, B, predicate)
        self.plans = 0

    def respond(self, req: BrainRequest) -> BrainReply:
        t0 = time.perf_counter()
        obj = getattr(self, f"_{req.role}")(req.context)
        obj = {"schema_version": SCHEMA_VERSION, "source": "oracle", **obj}
        return BrainReply(json.dumps(obj), "oracle", time.perf_counter() - t0, privileged=True)

    # -- privileged geometry ----------------------------------------------------------------
    def _box(self, name: str):
        if name in self.scene.region_names:
            r = self.scene.region(name)
            return np.asarray(r["lo"], dtype=float), np.asarray(r["hi"], dtype=float)
        lo, hi = self.scene.object_aabb(name)
        return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)

    def _target_box(self, name: str):
        """The support a placed object goes on or in: an object's AABB or a region's box."""
        return self._box(name)

    def _held(self, a: str, eef: np.ndarray, width_mm: float) -> bool:
        lo, hi = self.scene.object_aabb(a)
        lo, hi = np.asarray(lo) - 0.02, np.asarray(hi) + 0.02
        inside = bool(np.all(eef >= lo) and np.all(eef <= hi))
        return inside and HOLD_MIN_MM < width_mm < self.profile.gripper_max_width_mm - 4.0

    def _grasp(self, a: str):
        """(grasp point, yaw in rad about base z relative to the current tool yaw = 0 or 90 deg)."""
        lo, hi = (np.asarray(v) for v in self.scene.object_aabb(a))
        c = (lo + hi) / 2
        size = hi - lo
        if min(size[0], size[1]) > FINGER_SPAN_M:
            # too wide to straddle (a bowl): pinch the rim on the side with the most clearance
            r = size[1] / 2 - 0.007
            best, best_clear = None, -1.0
            for sign in (-1.0, 1.0):
                p = np.array([c[0], c[1] + sign * r, hi[2] - 0.02])
                clear = self._clearance(p, a)
                if clear > best_clear:
                    best, best_clear = p, clear
            return best, 0.0
        z = max(lo[2] + 0.012, hi[2] - 0.03)
        yaw = 0.0 if size[1] <= FINGER_SPAN_M else math.pi / 2
        return np.array([c[0], c[1], z]), yaw

    def _clearance(self, p: np.ndarray, exclude: str) -> float:
        best = 1.0
        for n in self.scene.object_names:
            if n == exclude:
                continue
            try:
                lo, hi = (np.asarray(v) for v in self.scene.object_aabb(n))
            except Exception:  # noqa: BLE001 - fixtures without geometry
                continue
            d = np.maximum(np.maximum(lo[:2] - p[:2], p[:2] - hi[:2]), 0)
            best = min(best, float(np.linalg.norm(d)))
        return best

    def _tallest_between(self, p0, p1, radius: float, skip) -> float:
        """Highest top (m) of the objects whose footprint comes within ``radius`` of the segment p0-p1."""
        top = -1.0
        d = np.asarray(p1) - np.asarray(p0)
        L2 = float(d @ d) or 1e-9
        for n in self.scene.object_names:
            if n in skip:
                continue
            lo, hi = (np.asarray(v) for v in self.scene.object_aabb(n))
            c = (lo[:2] + hi[:2]) / 2
            t = float(np.clip((c - p0) @ d / L2, 0, 1))
            q = p0 + t * d                            # nearest point of the segment to the centre
            gap = np.maximum(np.maximum(lo[:2] - q, q - hi[:2]), 0)
            if float(np.linalg.norm(gap)) < radius:
                top = max(top, float(hi[2]))
        return top

    # -- command helpers (mm on the wire) ---------------------------------------------------
    def _moves(self, delta_m: np.ndarray) -> list[dict]:
        d = np.asarray(delta_m) * 1000.0
        n = float(np.linalg.norm(d))
        if n < max(1.0, self.profile.limits.min_move_mm):
            return []
        k = math.ceil(n / self.profile.limits.max_move_mm)
        seg = round(n / k, 1)
        vec = [round(float(x) / n, 4) for x in d]
        return [{"op": "move", "vector": vec, "distance_mm": seg} for _ in range(k)]

    def _path(self, eef: np.ndarray, target: np.ndarray, safe_z: float) -> list[dict]:
        """To ``target`` without sweeping low through the scene: straight when both ends are at or
        above ``safe_z``, else up to it, across, and down."""
        out, p = [], eef.copy()
        if p[2] >= safe_z - 0.005 and target[2] >= safe_z - 0.005:
            return self._moves(target - p)
        if p[2] < safe_z - 0.005:
            out += self._moves([0, 0, safe_z - p[2]])
            p[2] = safe_z
        out += self._moves(np.array([target[0], target[1], safe_z]) - p)
        p = np.array([target[0], target[1], safe_z])
        out += self._moves([0, 0, target[2] - p[2]])
        return out

    def _rotations(self, yaw_rad: float) -> list[dict]:
        deg = math.degrees(yaw_rad)
        if abs(deg) < 6.0:                 # the fingers tolerate this much misalignment
            return []
        k = math.ceil(abs(deg) / self.profile.limits.max_rotate_deg)
        return [{"op": "rotate", "axis": "yaw", "angle_deg": round(deg / k, 2)} for _ in range(k)]

    def _fit(self, cmds: list[dict], done: bool) -> list[dict]:
        m = self.profile.limits.max_batch
        if done and len(cmds) < m:
            return cmds + [{"op": "done"}]
        return cmds[:m] or [{"op": "wait", "seconds": 0.1}]

    # -- roles ------------------------------------------------------------------------------
    def _planner(self, ctx: dict) -> dict:
        self.plans += 1
        state = json.loads(ctx["state"])
        eef = np.asarray(state["eef_pos_mm"]) / 1000.0
        width = float(state["gripper_width_mm"])
        subgoals = []
        for k, pred in enumerate(self.scene.goal_state):
            if self.scene.predicate(pred):
                continue
            op = pred[0].lower()
            tag = f"p{self.plans}g{k}"
            if op in ("on", "in") and len(pred) == 3:
                a, b = pred[1], pred[2]
                rel = "on" if op == "on" else "into"
                steps = []
                if not self._held(a, eef, width):
                    steps.append(("grasp", f"grasp the {a}", f"the {a} is held between the closed fingers"))
                steps += [("carry", f"lift the {a} and carry it above the {b}",
                           f"the {a} is held clear above the {b}"),
                          ("place", f"lower the {a} {rel} the {b} and release it",
                           f"the {a} rests {rel} the {b} and the gripper is open")]
                for j, (kind, desc, crit) in enumerate(steps):
                    sid = f"{tag}{'abc'[j]}"
                    self.specs[sid] = (kind, a, b, pred)
                    subgoals.append({"id": sid, "description": desc, "success_criterion": crit})
            else:
                sid = f"{tag}x"
                self.specs[sid] = ("unsupported", None, None, pred)
                subgoals.append({"id": sid, "description": f"achieve ({' '.join(pred)})",
                                 "success_criterion": f"({' '.join(pred)}) holds; the oracle has no script for "
                                                      f"'{op}' goals"})
        if not subgoals:
            subgoals = [{"id": f"p{self.plans}done", "description": "confirm the task is complete",
                         "success_criterion": "every goal predicate holds"}]
            self.specs[subgoals[0]["id"]] = ("confirm", None, None, None)
        return {"reasoning": f"BDDL goal {self.scene.goal_state} (privileged)", "subgoals": subgoals}

    def _executor(self, ctx: dict) -> dict:
        kind, a, b, pred = self.specs.get(ctx["subgoal_id"], ("unknown", None, None, None))
        state = json.loads(ctx["state"])
        eef = np.asarray(state["eef_pos_mm"]) / 1000.0
        width = float(state["gripper_width_mm"])
        frac = float(state["gripper_fraction"])
        yaw = math.radians(float(state["eef_yaw_deg"]))
        cmds: list[dict] = []
        done = True
        if kind == "grasp":
            if self._held(a, eef, width):
                cmds = []
            elif frac < 0.5:                      # closed on nothing: open and back off first
                cmds = [{"op": "gripper", "action": "open"}] + self._moves([0, 0, 0.04])
                done = False
            else:
                p, want_yaw = self._grasp(a)
                # rotate by the difference between the wanted finger axis and the current one
                dyaw = _wrap(want_yaw - _finger_yaw(yaw))
                pre = p + [0, 0, APPROACH_M]
                if frac < 0.95:
                    cmds.append({"op": "gripper", "action": "open"})
                cmds += self._rotations(dyaw)
                cmds += self._path(eef, pre, pre[2])
                cmds += self._moves([0, 0, p[2] - pre[2]])
                cmds.append({"op": "gripper", "action": "close"})
                if len(cmds) + 1 > self.profile.limits.max_batch:
                    cmds = cmds[:-2] if len(cmds) > 2 else cmds   # approach first, descend next batch
                    done = False
        elif kind == "carry":
            if not self._held(a, eef, width):
                cmds, done = [{"op": "gripper", "action": "open"}], True   # lost it: claim and let the Verifier say no
            else:
                alo, ahi = (np.asarray(v) for v in self.scene.object_aabb(a))
                blo, bhi = self._target_box(b)
                off = (alo + ahi) / 2 - eef            # object centre relative to the grip point
                bottom_off = alo[2] - eef[2]
                goal_xy = np.array([(blo[0] + bhi[0]) / 2 - off[0], (blo[1] + bhi[1]) / 2 - off[1]])
                top = max(bhi[2], self._tallest_between(eef[:2] + off[:2], goal_xy + off[:2],
                                                        float(max(ahi[:2] - alo[:2])) / 2 + 0.01, (a, b)))
                z = max(eef[2], top + LIFT_CLEAR_M - bottom_off, eef[2] + 0.04)
                tgt = np.array([goal_xy[0], goal_xy[1], z])
                # lift straight up off the support first, then rise and cross in one diagonal
                lift = min(0.04, z - eef[2])
                cmds = self._moves([0, 0, lift]) + self._moves(tgt - (eef + [0, 0, lift]))
        elif kind == "place":
            alo, _ = (np.asarray(v) for v in self.scene.object_aabb(a))
            blo, bhi = self._target_box(b)
            support = bhi[2] if pred[0].lower() == "on" else blo[2] + 0.01
            dz = (support + RELEASE_M) - alo[2]
            if dz < 0:
                cmds += self._moves([0, 0, dz])
            cmds += [{"op": "gripper", "action": "open"}]     # the success check needs no retreat
        else:
            cmds = []
        return {"rationale": f"{kind} {a or ''} -> {b or ''} from privileged object poses",
                "commands": self._fit(cmds, done)}

    def _verifier(self, ctx: dict) -> dict:
        kind, a, b, pred = self.specs.get(ctx["subgoal_id"], ("unknown", None, None, None))
        state = json.loads(ctx["state"])
        eef = np.asarray(state["eef_pos_mm"]) / 1000.0
        width = float(state["gripper_width_mm"])
        if kind == "grasp":
            ok = self._held(a, eef, width)
            ev = f"{a} {'is' if ok else 'is NOT'} between the fingers (gap {width:.1f} mm)"
        elif kind == "carry":
            alo, ahi = (np.asarray(v) for v in self.scene.object_aabb(a))
            blo, bhi = self._target_box(b)
            dxy = float(np.linalg.norm((alo + ahi)[:2] / 2 - (blo + bhi)[:2] / 2))
            ok = self._held(a, eef, width) and dxy < 0.02 and alo[2] > bhi[2] - 0.005
            ev = f"{a} held={self._held(a, eef, width)}, {dxy * 1000:.0f} mm from above {b}'s centre"
        elif kind in ("place", "unsupported"):
            ok = bool(self.scene.predicate(pred))
            ev = f"predicate ({' '.join(pred)}) is {'true' if ok else 'false'}"
        else:
            preds = self.scene.goal_state
            ok = all(self.scene.predicate(p) for p in preds)
            ev = f"goal predicates {'all hold' if ok else 'do not all hold'}"
        return {"achieved": bool(ok), "evidence": ev + " (privileged simulator state)"}

    def _monitor(self, ctx: dict) -> dict:
        st = ctx.get("state", {})
        st = json.loads(st) if isinstance(st, str) else st
        last = ctx.get("last_command", {}).get("command", {})
        width = float(st.get("gripper_width_mm", 99.0))
        kind = self.specs.get(ctx.get("subgoal_id"), ("",))[0]
        if last.get("op") == "gripper" and last.get("action") == "close" and width < HOLD_MIN_MM:
            return {"cancel": True, "reason": f"grasp missed: the fingers closed to {width:.1f} mm"}
        if kind == "carry" and width < HOLD_MIN_MM:
            return {"cancel": True, "reason": f"object dropped: finger gap {width:.1f} mm while carrying"}
        return {"cancel": False, "reason": "nominal"}

    def _memory(self, ctx: dict) -> dict:
        events = ctx.get("event_list", [])
        prev = ctx.get("memory", "")
        facts = []
        for e in events:
            if e["kind"] == "report" and e.get("status") != "done":
                facts.append(f"batch {e.get('batch_id')} on {e.get('subgoal_id')}: {e.get('status')} "
                             f"({(e.get('reason') or '')[:120]})")
            elif e["kind"] == "verdict":
                facts.append(f"{e.get('subgoal_id')}: {'verified' if e.get('achieved') else 'rejected'}")
            elif e["kind"] == "monitor_cancel":
                facts.append(f"monitor cancelled {e.get('batch_id')}: {e.get('reason')}")
        n = sum(1 for e in events if e["kind"] == "report")
        summary = (prev if prev and prev != "nothing yet" else "Episode log.")[:1500]
        summary = f"{summary} +{n} batch(es)."[-1800:]
        return {"summary": summary, "facts": facts[-10:]}


def _wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def _finger_yaw(tool_yaw: float) -> float:
    """0 when the fingers separate along base y (LIBERO's rest pose: grip-site yaw +90 deg), pi/2 along x."""
    return _wrap(tool_yaw - math.pi / 2)
