"""The evaluator-only channel: a PRIVILEGED simulated scene served over HTTP, and its client.

A simulator in another process (the xArm6 rehearsal cell, ``motormind emulate xarm6 --scene NAME
--privileged-port N``) serves its scene here; ``motormind serve-brain --backend oracle --scene URL``
reads it with ``RemoteScene``, so the oracle can drive the arm's unmodified stack (ROS 2 nodes, the
SDK, the cameras) from true object poses while the roles see only what a VLM would. Nothing of this
reaches a role: the channel is between the simulator and the oracle or the evaluator.

    GET  /privileged/goal         {"goal_state": [[...]], "instruction": str}
    GET  /privileged/world        the oracle's world (Scene.world(): bodies, boxes, finger contacts)
    POST /privileged/predicate    {"predicate": ["on", "a", "b"]} -> {"value": bool}
    GET  /privileged/success      {"success": bool, "placement_error_mm": float | null}

It is served on its own port (not the cameras', not the controller's), loopback by default, with
the project's Host check (motormind/webserver.py). ``RemoteScene`` offers what the oracle brain
reads of a scene (``goal_state``, ``predicate``, ``world``) plus ``success``; every failure is a
``SceneChannelError`` naming the URL.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from motormind.errors import MotorMindError
from motormind.webserver import Disconnected, Guard, HttpError, HttpServer, decode_body, read_body, served_names

PREFIX = "/privileged"
MAX_BODY = 4096


class SceneChannelError(MotorMindError):
    """The privileged scene could not be read (unreachable, refused, malformed)."""


class SceneServer:
    """Serves ``scene`` (goal_state, predicate, world, success; placement_error_mm optional)."""

    def __init__(self, scene, host: str = "127.0.0.1", port: int = 0, allow_hosts=()):
        self.scene = scene
        app = Starlette(routes=[Route(f"{PREFIX}/goal", self._goal), Route(f"{PREFIX}/world", self._world),
                                Route(f"{PREFIX}/predicate", self._predicate, methods=["POST"]),
                                Route(f"{PREFIX}/success", self._success)])
        guard = Guard(app, served_names(host, tuple(allow_hosts)), lambda s, m: {"error": m},
                      {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})
        self.http = HttpServer(guard, host, port, name="motormind-scene-channel")

    @property
    def url(self) -> str:
        return f"http://{self.http.host}:{self.http.port}{PREFIX}"

    def start(self) -> "SceneServer":
        self.http.start()
        return self

    def close(self) -> None:
        self.http.close()

    async def _goal(self, request: Request) -> Response:
        return JSONResponse({"goal_state": self.scene.goal_state,
                             "instruction": getattr(self.scene, "language_instruction", "")})

    async def _world(self, request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(self.scene.world))

    async def _success(self, request: Request) -> Response:
        err = getattr(self.scene, "placement_error_mm", None)
        ok, mm = await run_in_threadpool(lambda: (self.scene.success(), err() if err else None))
        return JSONResponse({"success": bool(ok), "placement_error_mm": mm})

    async def _predicate(self, request: Request) -> Response:
        try:
            body = decode_body(await read_body(request, MAX_BODY, 10.0))
            pred = body.get("predicate") if isinstance(body, dict) else None
            if not (isinstance(pred, list) and pred and all(isinstance(x, str) for x in pred)):
                raise HttpError(400, "predicate: must be a non-empty list of strings, e.g. [\"on\", \"a\", \"b\"]")
            value = await run_in_threadpool(self.scene.predicate, pred)
        except HttpError as e:
            return JSONResponse({"error": str(e)}, e.status)
        except Disconnected:
            return Response(status_code=400)
        except (KeyError, ValueError) as e:
            return JSONResponse({"error": f"predicate: {e}"}, 400)
        return JSONResponse({"value": bool(value)})


class RemoteScene:
    """The scene behind a ``SceneServer`` at ``url`` (``http://HOST:PORT/privileged``). PRIVILEGED."""

    privileged = True

    def __init__(self, url: str, timeout_s: float = 5.0):
        self.url = url.rstrip("/")
        if not self.url.endswith(PREFIX):
            self.url += PREFIX
        self.timeout_s = timeout_s

    def _call(self, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                return json.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            try:
                why = json.loads(e.read().decode()).get("error", "")
            except Exception:  # noqa: BLE001
                why = ""
            raise SceneChannelError(f"the privileged scene at {self.url}{path} answered {e.code}: {why}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise SceneChannelError(f"the privileged scene at {self.url}{path} cannot be read: {e}") from None

    @property
    def goal_state(self) -> list:
        return [list(p) for p in self._call("/goal")["goal_state"]]

    @property
    def language_instruction(self) -> str:
        return str(self._call("/goal").get("instruction", ""))

    def world(self) -> dict:
        return self._call("/world")

    def predicate(self, pred) -> bool:
        return bool(self._call("/predicate", {"predicate": [str(x) for x in pred]})["value"])

    def success(self) -> bool:
        return bool(self._call("/success")["success"])

    def placement_error_mm(self) -> float | None:
        return self._call("/success").get("placement_error_mm")
