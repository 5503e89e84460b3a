"""Camera images for LIBERO simulators: one GL context per scene and process, built on first use.

robosuite gives every simulator its own offscreen context (``has_offscreen_renderer=True``) and
builds it again at every hard reset. With LIBERO's scenes (727 k mesh vertices, 189 MB of
textures) a context holds about 0.54 GB and takes about 1.5 s to build on llvmpipe: more memory
than the MuJoCo model itself, and paid even by an episode that never renders
(docs/libero-backend.md, "Memory").

Here a context is built the first time an image is asked for, and shared by every simulator of
the same scene in the process (the episodes of one task in flight at once in an evaluation
worker): what a context holds is the scene's meshes and textures, which are the same for every
simulator built from the same task; what differs between simulators (poses, the fixtures' draw,
materials, lights) is read from each simulator's own model and data at every render. A scene is
identified by its meshes and textures (``scene_key``), so two simulators share a context only if
those are identical. At most ``MAX_CONTEXTS`` contexts are kept per process, the least recently
used freed first (``MOTORMIND_RENDER_CONTEXTS`` overrides).

The image is the one robosuite's ``sim.render`` gives: the same visual options (visual meshes
shown, collision meshes hidden), font scale, scene size and fixed camera
(``tests/sim/test_libero_backend.py`` compares them pixel for pixel). Renders are serialised per
process, as robosuite's are (its ``_MjSim_render_lock``); a context is made current in the
calling thread before each render, so any thread may render.
"""
from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict

import numpy as np


def _max_contexts() -> int:
    raw = os.environ.get("MOTORMIND_RENDER_CONTEXTS", "3")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        from motormind.errors import ConfigError
        raise ConfigError(f"MOTORMIND_RENDER_CONTEXTS: render contexts kept per process, an integer >= 1; got {raw!r}")
    return n


MAX_CONTEXTS = _max_contexts()
MAX_GEOM = 1000                   # robosuite's MjRenderContext scene size
_LOCK = threading.RLock()
_CONTEXTS: "OrderedDict[str, _Context]" = OrderedDict()
_AT_EXIT: list = []               # release_all is registered with atexit (once, with the first context)


def scene_key(model) -> str:
    """What a GL context holds, as a digest: the meshes' and textures' sizes and contents (the
    vertex and face arrays whole, the texture bytes sampled every 251st, ~0.75 MB of 189 MB)."""
    m = getattr(model, "_model", model)
    h = hashlib.blake2b(digest_size=16)
    for name in ("mesh_vertadr", "mesh_vertnum", "mesh_faceadr", "mesh_facenum", "mesh_vert",
                 "mesh_face", "mesh_texcoord", "skin_vertnum", "tex_type", "tex_height", "tex_width", "tex_adr"):
        a = getattr(m, name, None)
        if a is not None:
            a = np.ascontiguousarray(a)
            h.update(name.encode())
            h.update(str(a.shape).encode())
            h.update(a.tobytes())
    tex = np.asarray(m.tex_rgb).reshape(-1)
    h.update(str(tex.size).encode())
    h.update(np.ascontiguousarray(tex[::251]).tobytes())
    return h.hexdigest()


class _Context:
    """An offscreen GL context with one scene's meshes and textures uploaded."""

    def __init__(self, model, width: int, height: int):
        import mujoco
        from robosuite.utils.binding_utils import GLContext   # the platform's (OSMesa / EGL / GLFW)
        self.gl = GLContext(max_width=width, max_height=height, device_id=-1)
        self.gl.make_current()
        self.width, self.height = width, height
        self.con = None
        self._make(model)
        self.scn = mujoco.MjvScene(model, maxgeom=MAX_GEOM)
        self.cam = mujoco.MjvCamera()
        self.cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self.vopt = mujoco.MjvOption()
        self.vopt.geomgroup[0] = 0            # collision meshes hidden (LIBERO: render_collision_mesh=False)
        self.vopt.geomgroup[1] = 1            # visual meshes shown (render_visual_mesh=True)
        self.pert = mujoco.MjvPerturb()
        self.pert.active = 0
        self.pert.select = 0
        self.pert.skinselect = -1

    def _make(self, model) -> None:
        """(Re)build the MuJoCo render context; its offscreen buffer is the model's offwidth x
        offheight, raised to what is asked (as robosuite's ``update_offscreen_size`` does)."""
        import mujoco
        vis = model.vis.global_
        w, h = max(self.width, vis.offwidth), max(self.height, vis.offheight)
        ow, oh = vis.offwidth, vis.offheight
        vis.offwidth, vis.offheight = w, h
        try:
            if self.con is not None:
                self.con.free()
            self.con = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150)
        finally:
            vis.offwidth, vis.offheight = ow, oh
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self.con)
        self.width, self.height = w, h

    def render(self, model, data, camera_id: int, width: int, height: int, depth: bool = False):
        """RGB (OpenGL row order), or (RGB, the raw depth buffer 0..1) with ``depth``."""
        import mujoco
        self.gl.make_current()
        if width > self.con.offWidth or height > self.con.offHeight:
            self.width, self.height = max(width, self.width), max(height, self.height)
            self._make(model)
        self.cam.fixedcamid = int(camera_id)
        mujoco.mjv_updateScene(model, data, self.vopt, self.pert, self.cam, mujoco.mjtCatBit.mjCAT_ALL, self.scn)
        viewport = mujoco.MjrRect(0, 0, width, height)
        mujoco.mjr_render(viewport, self.scn, self.con)
        rgb = np.empty((height, width, 3), dtype=np.uint8)
        zbuf = np.empty((height, width), dtype=np.float32) if depth else None
        mujoco.mjr_readPixels(rgb, zbuf, viewport, self.con)
        return (rgb, zbuf) if depth else rgb

    def free(self) -> None:
        try:
            self.gl.make_current()
            self.con.free()
        finally:
            self.gl.free()


def render(sim, camera: str, width: int, height: int, key: str, depth: bool = False):
    """``camera``'s image of ``sim`` (robosuite MjSim), HxWx3 uint8 in OpenGL row order (row 0 is
    the bottom, as ``sim.render`` gives it). ``key`` is ``scene_key(sim.model)``, computed once
    per model by the caller. With ``depth``: (image, depth) from the same render, the depth HxW
    float32 metres along the optical axis (the z-buffer linearised with the model's near and far
    planes, ``vis.map.znear`` / ``zfar`` times ``stat.extent``; NaN where nothing was drawn), in
    the same row order."""
    model, data = sim.model._model, sim.data._data
    camera_id = sim.model.camera_name2id(camera)
    with _LOCK:
        ctx = _CONTEXTS.get(key)
        if ctx is None:
            while len(_CONTEXTS) >= MAX_CONTEXTS:
                _, old = _CONTEXTS.popitem(last=False)
                old.free()
            if not _AT_EXIT:
                import atexit
                atexit.register(release_all)
                _AT_EXIT.append(True)
            ctx = _CONTEXTS[key] = _Context(model, width, height)
        _CONTEXTS.move_to_end(key)
        if not depth:
            return ctx.render(model, data, camera_id, width, height)
        rgb, zbuf = ctx.render(model, data, camera_id, width, height, depth=True)
    from motormind.grounding.camera import linearize_depth
    extent = float(model.stat.extent)
    return rgb, linearize_depth(zbuf, float(model.vis.map.znear) * extent, float(model.vis.map.zfar) * extent)


def release_all() -> None:
    """Free every GL context this process holds. Run at exit (registered with the first context):
    a context left to its own ``__del__`` at interpreter teardown calls into an OpenGL binding
    already torn down (``Exception ignored in: GLContext.__del__ ... 'NoneType' object is not
    callable`` at the end of ``motormind launch``)."""
    with _LOCK:
        while _CONTEXTS:
            _, ctx = _CONTEXTS.popitem(last=False)
            try:
                ctx.free()
            except Exception:  # noqa: BLE001 - at exit: the others are still freed
                pass


def contexts() -> int:
    """GL contexts held by this process now."""
    with _LOCK:
        return len(_CONTEXTS)

