"""Scene: privileged LIBERO simulator state, for the oracle brain and the evaluator ONLY.

Never hand a Scene (or anything derived from it) to a VLM agent: it reads the task's BDDL goal,
exact object poses and the success check. Obtain it with ``LiberoRobot.scene()``.

Frames and units: metres, quaternions xyzw, in the robot BASE frame (the frame of Observation and
Motion): ``p_base = R_base^T (p_world - base_pos)``. Every call reads the live simulation (no
cached sim handles: hard resets rebuild ``env.env.sim``), under the robot's lock.
"""
from __future__ import annotations

import itertools

import numpy as np

from motormind.geometry import mat_to_quat, quat_to_mat


def _wxyz_to_xyzw(q) -> np.ndarray:
    q = np.asarray(q, dtype=float)
    return np.array([q[1], q[2], q[3], q[0]])


class Scene:
    """Live, privileged view of one LiberoRobot's task."""

    def __init__(self, robot):
        self._robot = robot

    # ------------------------------------------------------------------ internals
    @property
    def _e(self):
        return self._robot._env.env

    def _lock(self):
        return self._robot._lock

    def _check_name(self, name: str, kinds=("object", "fixture")) -> None:
        e = self._e
        pools = {"object": e.objects_dict, "fixture": e.fixtures_dict, "region": e.object_sites_dict}
        if not any(name in pools[k] for k in kinds):
            known = sorted(itertools.chain.from_iterable(pools[k] for k in kinds))
            raise KeyError(f"unknown {'/'.join(kinds)} {name!r}; known: {', '.join(known)}")

    # ------------------------------------------------------------------ task
    @property
    def goal_state(self) -> list[list[str]]:
        """BDDL goal predicates (conjunction), lower-cased, e.g. [['on', 'akita_black_bowl_1', 'plate_1']]."""
        return [list(map(str, p)) for p in self._e.parsed_problem["goal_state"]]

    @property
    def obj_of_interest(self) -> list[str]:
        return [str(x) for x in self._robot._env.obj_of_interest]

    @property
    def language_instruction(self) -> str:
        return self._robot.language_instruction

    @property
    def task_language(self) -> str:
        return self._robot.task_language

    @property
    def object_names(self) -> list[str]:
        """Movable objects (they also appear in obs as <name>_pos / <name>_quat)."""
        return list(self._e.objects_dict)

    @property
    def fixture_names(self) -> list[str]:
        """Fixtures (cabinets, stoves, racks, the table ...): articulated or static, not in obs."""
        return list(self._e.fixtures_dict)

    @property
    def region_names(self) -> list[str]:
        """Named regions / sites (e.g. 'main_table_plate_region', 'basket_1_contain_region')."""
        return list(self._e.object_sites_dict)

    @property
    def parsed_problem(self) -> dict:
        """The full parsed BDDL problem (fixtures, regions, objects, initial_state, goal_state ...)."""
        return self._e.parsed_problem

    # ------------------------------------------------------------------ geometry
    def object_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(position m, quaternion xyzw) of an object's or fixture's root body, base frame.
        The body origin is often the object's bottom (e.g. the akita bowl), not its centre."""
        with self._lock():
            self._check_name(name)
            e = self._e
            bid = e.obj_body_id[name]
            p_w = e.sim.data.body_xpos[bid].copy()
            r_w = quat_to_mat(_wxyz_to_xyzw(e.sim.data.body_xquat[bid]))
            r = self._robot
            return r.to_base_pos(p_w), mat_to_quat(r.to_base_rot(r_w))

    def object_aabb(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) corners in m, base frame, of the axis-aligned box around the current world pose
        of every collision geom of the object/fixture (model.geom_aabb boxes transformed by
        geom_xpos / geom_xmat; libero-pro.md §5.3)."""
        with self._lock():
            self._check_name(name)
            e = self._e
            model, data = e.sim.model, e.sim.data
            ids = self._geom_ids(name)
            if not ids:
                p, _ = self.object_pose(name)
                return p.copy(), p.copy()
            aabb = np.asarray(model.geom_aabb)   # (ngeom, 6): local centre (3), half sizes (3)
            signs = np.array(list(itertools.product((-1, 1), repeat=3)), dtype=float)
            corners = []
            rb = self._robot.base_rot
            for gid in ids:
                c, h = aabb[gid, :3], aabb[gid, 3:]
                local = c + signs * h                                   # 8 x 3
                world = data.geom_xpos[gid] + local @ data.geom_xmat[gid].reshape(3, 3).T
                corners.append((world - self._robot.base_pos) @ rb)     # into the base frame
            pts = np.vstack(corners)
            return pts.min(axis=0), pts.max(axis=0)

    def object_size(self, name: str) -> np.ndarray:
        """Extent (m) of object_aabb along base x, y, z."""
        lo, hi = self.object_aabb(name)
        return hi - lo

    def _geom_ids(self, name: str) -> list[int]:
        e = self._e
        model = e.sim.model
        obj = e.get_object(name)
        ids = []
        for g in getattr(obj, "contact_geoms", []) or []:
            try:
                ids.append(model.geom_name2id(g))
            except (ValueError, KeyError):
                continue
        if ids:
            return ids
        # Fallback: collision geoms of the body subtree.
        root = e.obj_body_id[name]
        parent = np.asarray(model.body_parentid)
        sub = {root}
        for b in range(root + 1, model.nbody):
            if parent[b] in sub:
                sub.add(b)
        raw = model._model
        return [g for g in range(raw.ngeom)
                if raw.geom_bodyid[g] in sub and (raw.geom_contype[g] or raw.geom_conaffinity[g])]

    def region(self, name: str) -> dict:
        """A region / site, base frame, m: ``centre``, ``half_extents`` (the axis-aligned half sizes
        the 'In' predicate's box test uses: |R_site @ size|), ``lo``/``hi`` (that box; its lower z
        is 1 cm lower, as in LIBERO's in_box), ``quat_xyzw``, ``parent`` (owning object/fixture)
        and ``size`` (the site's own half sizes, site frame). 'On X <region>' uses a different test
        (``under``: X above the site's top face within 10 cm, xy inside the site's half sizes)."""
        with self._lock():
            self._check_name(name, kinds=("region",))
            e = self._e
            site = e.object_sites_dict[name]
            p_w = np.asarray(e.sim.data.get_site_xpos(name), dtype=float).copy()
            r_w = np.asarray(e.sim.data.get_site_xmat(name), dtype=float).reshape(3, 3).copy()
            size = np.asarray(site.size, dtype=float)
            half_w = np.abs(r_w @ size)
            r = self._robot
            centre = r.to_base_pos(p_w)
            half = np.abs(r.base_rot.T @ half_w)
            lo, hi = centre - half, centre + half
            lo = lo.copy()
            lo[2] -= 0.01
            return {"name": name, "centre": centre, "half_extents": half, "lo": lo, "hi": hi,
                    "quat_xyzw": mat_to_quat(r.to_base_rot(r_w)), "size": size,
                    "parent": getattr(site, "parent_name", None)}

    # ------------------------------------------------------------------ predicates
    def contact(self, a: str, b: str) -> bool:
        """Any collision geom of object/fixture ``a`` touches one of ``b`` (env.check_contact)."""
        with self._lock():
            self._check_name(a)
            self._check_name(b)
            e = self._e
            return bool(e.check_contact(e.get_object(a), e.get_object(b)))

    def predicate(self, pred) -> bool:
        """Truth of one BDDL predicate, e.g. ['on', 'akita_black_bowl_1', 'plate_1'] (_eval_predicate)."""
        with self._lock():
            return bool(self._e._eval_predicate([str(x) for x in pred]))

    def goal_status(self) -> list[tuple[list[str], bool]]:
        """Each goal predicate with its current truth."""
        return [(p, self.predicate(p)) for p in self.goal_state]

    def success(self) -> bool:
        return self._robot.success()

    def object_states(self) -> dict:
        """{name: {'pos_m', 'quat_xyzw', 'aabb_lo_m', 'aabb_hi_m'}} for all objects and fixtures."""
        out = {}
        for n in self.object_names + self.fixture_names:
            p, q = self.object_pose(n)
            lo, hi = self.object_aabb(n)
            out[n] = {"pos_m": p, "quat_xyzw": q, "aabb_lo_m": lo, "aabb_hi_m": hi,
                      "kind": "object" if n in self._e.objects_dict else "fixture"}
        return out

    # ------------------------------------------------------------------ the oracle's world
    def world(self) -> dict:
        """Everything the oracle plans with, as plain JSON-able data (base frame, m):

        ``bodies``: per object / fixture: ``kind``, ``pos`` (body origin, the point LIBERO's
        predicates test), ``rot`` (3x3 row-major, body frame -> base), ``local_lo``/``local_hi``
        (the collision geoms' extent in the body frame: an oriented box), ``boxes`` (one
        axis-aligned [lo, hi] per collision geom, base frame), ``obbs`` (the same geoms as oriented
        boxes: centre 3, half sizes 3, rotation 9 row-major), ``lo``/``hi`` (their union).
        ``static`` / ``static_obbs``: the scene's other collision geoms (tables, walls), both ways;
        ``ground_z``: the floor plane's height (None without one).
        ``articulations``: per joint of an articulated fixture: ``fixture``, ``joint``, ``type``
        (slide | hinge), ``q``, ``range``, ``axis`` and ``anchor`` (base frame), ``body`` (the
        moving body), ``parts`` (its collision geoms: name, centre, half sizes, rot), ``regions``
        (the regions it moves) and ``ranges`` (LIBERO's open / close / turn-on / turn-off ranges).
        ``predicates``: the truth of open / close / turnon / turnoff for every articulated fixture
        and region, keyed "op name". ``finger_contacts``: per object or fixture, the fingers
        ("finger1", "finger2") touching it now (both: it is pinched between them)."""
        with self._lock():
            e = self._e
            model, data = e.sim.model, e.sim.data
            raw = model._model
            r = self._robot
            rb, bp = r.base_rot, r.base_pos
            root = np.asarray(raw.body_rootid)
            owner = {int(bid): n for n, bid in e.obj_body_id.items()}
            robot_root = int(root[raw.site_bodyid[r._site_id]])
            aabb = np.asarray(model.geom_aabb)
            signs = np.array(list(itertools.product((-1, 1), repeat=3)), dtype=float)
            bodies: dict = {n: {"kind": "object" if n in e.objects_dict else "fixture", "boxes": [], "obbs": [],
                                "pts": []} for n in e.obj_body_id}
            static, ground_z = [], None
            gids = np.flatnonzero((raw.geom_contype != 0) | (raw.geom_conaffinity != 0))
            gids = gids[root[raw.geom_bodyid[gids]] != robot_root]
            planes = gids[raw.geom_type[gids] == 0]
            for g in planes:                          # a plane: the floor
                z = float(r.to_base_pos(data.geom_xpos[g])[2])
                ground_z = z if ground_z is None else max(ground_z, z)
            gids = gids[raw.geom_type[gids] != 0]
            # every geom's local box corners, to the world, to the base frame: (n, 8, 3)
            local = aabb[gids, None, :3] + signs[None] * aabb[gids, None, 3:]
            xm = np.asarray(data.geom_xmat)[gids].reshape(-1, 3, 3)
            world_pts = np.asarray(data.geom_xpos)[gids, None, :] + np.einsum("nkj,nij->nki", local, xm)
            pts_all = (world_pts - bp) @ rb
            los, his = pts_all.min(axis=1), pts_all.max(axis=1)
            # the same boxes as oriented boxes: centre, half sizes, rotation (base frame, row-major)
            cen = ((np.asarray(data.geom_xpos)[gids] + np.einsum("nij,nj->ni", xm, aabb[gids, :3])) - bp) @ rb
            rots = np.einsum("ji,njk->nik", rb, xm)
            static_obb = []
            for k, g in enumerate(gids):
                b = int(raw.geom_bodyid[g])
                name = owner.get(int(root[b])) or owner.get(b)
                box = [los[k].tolist(), his[k].tolist()]
                obb = cen[k].tolist() + aabb[g, 3:].tolist() + rots[k].ravel().tolist()
                if name is None:
                    static.append(box)
                    static_obb.append(obb)
                else:
                    bodies[name]["boxes"].append(box)
                    bodies[name]["obbs"].append(obb)
                    bodies[name]["pts"].append(pts_all[k])
            for n, bd in bodies.items():
                bid = e.obj_body_id[n]
                p = r.to_base_pos(data.body_xpos[bid])
                rot = r.to_base_rot(quat_to_mat(_wxyz_to_xyzw(data.body_xquat[bid])))
                pts = np.vstack(bd.pop("pts")) if bd["boxes"] else p[None, :]
                loc = (pts - p) @ rot                     # into the body frame
                bd.update(pos=p.tolist(), rot=rot.ravel().tolist(), local_lo=loc.min(axis=0).tolist(),
                          local_hi=loc.max(axis=0).tolist(), lo=pts.min(axis=0).tolist(),
                          hi=pts.max(axis=0).tolist())
            arts, preds = self._articulations(model, data, raw, root, owner, aabb)
            _, fingers = r._robot_contacts()
            touched = {owner[rt]: sorted(fs) for rt, fs in fingers.items() if rt in owner}
            return {"frame": "base", "units": "m", "bodies": bodies, "static": static, "static_obbs": static_obb,
                    "ground_z": ground_z,
                    "articulations": arts, "predicates": preds, "finger_contacts": touched,
                    "regions": {n: {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                                    for k, v in self.region(n).items()} for n in self.region_names}}

    def _articulations(self, model, data, raw, root, owner, aabb):
        e, r = self._e, self._robot
        by_joint: dict = {}
        for rn, site in e.object_sites_dict.items():
            for j in getattr(site, "joints", None) or []:
                by_joint.setdefault(j, []).append(rn)
        arts, preds = [], {}
        for fx in e.fixtures_dict:
            obj = e.get_object(fx)
            props = (getattr(obj, "object_properties", None) or {}).get("articulation") or {}
            for j in getattr(obj, "joints", None) or []:
                try:
                    jid = model.joint_name2id(j)
                except (ValueError, KeyError):
                    continue
                jt = int(raw.jnt_type[jid])
                if jt not in (2, 3):                 # slide, hinge (free joints are objects)
                    continue
                b = int(raw.jnt_bodyid[jid])
                xmat = data.xmat[b].reshape(3, 3)
                axis = r.base_rot.T @ (xmat @ raw.jnt_axis[jid])
                anchor = r.to_base_pos(data.xanchor[jid])
                parts = []
                for g in range(raw.ngeom):
                    if int(raw.geom_bodyid[g]) != b or not (raw.geom_contype[g] or raw.geom_conaffinity[g]):
                        continue
                    gm = r.to_base_rot(data.geom_xmat[g].reshape(3, 3))
                    c = r.to_base_pos(data.geom_xpos[g] + data.geom_xmat[g].reshape(3, 3) @ aabb[g, :3])
                    parts.append({"name": model.geom_id2name(g) or f"geom{g}", "c": c.tolist(),
                                  "half": aabb[g, 3:].tolist(), "rot": gm.ravel().tolist()})
                arts.append({"fixture": fx, "joint": j, "type": "slide" if jt == 2 else "hinge",
                             "q": float(data.qpos[raw.jnt_qposadr[jid]]), "range": raw.jnt_range[jid].tolist(),
                             "axis": axis.tolist(), "anchor": anchor.tolist(), "body": model.body_id2name(b),
                             "parts": parts, "regions": by_joint.get(j, []),
                             "ranges": {k.removeprefix("default_").removesuffix("_ranges"): list(v)
                                        for k, v in props.items() if k.endswith("_ranges") and v}})
            mine = [a for a in arts if a["fixture"] == fx]
            if not mine:
                continue
            for n in [fx] + [rn for a in mine for rn in a["regions"]]:
                for op in ("open", "close", "turnon", "turnoff"):
                    try:
                        preds[f"{op} {n}"] = bool(e._eval_predicate([op, n]))
                    except Exception:  # noqa: BLE001 - not an articulated fixture of that kind
                        pass
        return arts, preds

    # ------------------------------------------------------------------ the outside hand
    def _free_joint(self, name: str):
        """The free joint of object ``name`` (None: a fixture, or an object welded in place)."""
        e = self._e
        raw = e.sim.model._model
        for j in getattr(e.get_object(name), "joints", None) or []:
            try:
                jid = e.sim.model.joint_name2id(j)
            except (ValueError, KeyError):
                continue
            if int(raw.jnt_type[jid]) == 0:
                return j
        return None

    def movable(self) -> list[str]:
        """The objects an outside hand can pick up and put down (those on a free joint)."""
        with self._lock():
            return [n for n in self.object_names if self._free_joint(n) is not None]

    def table_bounds(self, margin_m: float = 0.10) -> tuple:
        """Where an outside hand may put an object down: the area the movable objects stand in,
        grown by ``margin_m``, ((x0, x1), (y0, y1)) m, base frame."""
        w = self.world()
        names = self.movable()
        lo = np.min([w["bodies"][n]["lo"][:2] for n in names], axis=0) - margin_m
        hi = np.max([w["bodies"][n]["hi"][:2] for n in names], axis=0) + margin_m
        return ((float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1])))

    def move_object(self, name: str, x: float, y: float) -> None:
        """Lift object ``name`` and set it down with its origin at (x, y) m (base frame), its
        orientation kept, its bottom 2 mm above the support under the new spot (the table's top,
        or the floor): the free joint's position is set and its velocity zeroed, between two control
        steps; the physics settles it on the steps that follow. PRIVILEGED: the evaluator's hand."""
        with self._lock():
            self._check_name(name, kinds=("object",))
            j = self._free_joint(name)
            if j is None:
                raise ValueError(f"move_object: {name} has no free joint (it cannot be picked up)")
            w = self.world()
            b = w["bodies"][name]
            dx, dy = float(x) - b["pos"][0], float(y) - b["pos"][1]
            nlo = [b["lo"][0] + dx, b["lo"][1] + dy]
            nhi = [b["hi"][0] + dx, b["hi"][1] + dy]
            below = [hi[2] for lo, hi in w["static"] if hi[2] <= b["lo"][2] + 0.015 and
                     lo[0] <= nhi[0] and nlo[0] <= hi[0] and lo[1] <= nhi[1] and nlo[1] <= hi[1]]
            support = max(below) if below else w.get("ground_z")
            dz = (support - b["lo"][2] + 0.002) if support is not None else 0.0
            e = self._e
            data = e.sim.data
            a0, _ = e.sim.model.get_joint_qpos_addr(j)
            v0, v1 = e.sim.model.get_joint_qvel_addr(j)
            data.qpos[a0:a0 + 3] = np.asarray(data.qpos[a0:a0 + 3]) + self._robot.base_rot @ np.array([dx, dy, dz])
            data.qvel[v0:v1] = 0.0
            e.sim.forward()

    def snapshot(self) -> dict:
        """Everything above as plain JSON-able data (lists of floats), for logs and the oracle."""
        def f(a):
            return [round(float(v), 5) for v in np.asarray(a).ravel()]
        objs = {n: {k: (f(v) if k != "kind" else v) for k, v in s.items()}
                for n, s in self.object_states().items()}
        regions = {}
        for n in self.region_names:
            rg = self.region(n)
            regions[n] = {k: (f(v) if isinstance(v, np.ndarray) else v) for k, v in rg.items()}
        return {
            "frame": "base", "units": "m, quat_xyzw",
            "goal_state": self.goal_state, "goal_status": [[p, t] for p, t in self.goal_status()],
            "obj_of_interest": self.obj_of_interest, "success": self.success(),
            "language_instruction": self.language_instruction, "task_language": self.task_language,
            "objects": objs, "regions": regions, "world": self.world(),
        }
