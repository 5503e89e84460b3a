"""Record a robot's observations and replay them: the Controller's determinism check.

``RecordingRobot`` wraps any backend and logs every observation it returns and every motion it
receives. ``ReplayRobot`` plays the logged observations back in order (no motion happens) and logs
the motions the Controller sends, so a replay can be compared motion for motion and report for
report with the original run."""
from __future__ import annotations

import copy
import threading

from motormind.robot import Motion, MotionResult, Observation, Robot


class RecordingRobot(Robot):
    def __init__(self, inner: Robot):
        self.inner = inner
        self.profile = inner.profile
        self.observations: list[Observation] = []
        self.results: list[MotionResult] = []
        self.motions: list[Motion] = []
        self.calibrations: dict = {}

    def observe(self, images: bool = False, depth: bool = False) -> Observation:
        obs = self.inner.observe(images, depth) if depth else self.inner.observe(images)
        self.observations.append(copy.deepcopy(obs))
        return obs

    def execute(self, motion: Motion, estop: threading.Event) -> MotionResult:
        self.motions.append(motion)
        res = self.inner.execute(motion, estop)
        self.results.append(copy.deepcopy(res))
        return res

    def stop(self) -> None:
        self.inner.stop()

    @property
    def camera_names(self) -> list[str]:
        return self.inner.camera_names

    @property
    def closing_axis_eef(self):
        return self.inner.closing_axis_eef

    def cameras(self) -> dict:
        self.calibrations = dict(self.inner.cameras())
        return self.calibrations

    def close(self) -> None:
        self.inner.close()


class ReplayRobot(Robot):
    def __init__(self, profile, observations: list[Observation], results: list[MotionResult],
                 camera_names: list[str] | None = None, calibrations: dict | None = None):
        self.profile = profile
        self._obs = list(observations)
        self._res = list(results)
        self.motions: list[Motion] = []
        # the recorded backend's cameras (default: those of the first recorded observation with images)
        self._cameras = list(camera_names) if camera_names is not None else \
            next((list(o.images) for o in self._obs if o.images), [])
        self._calibrations = dict(calibrations or {})   # name -> CameraCalibration (RecordingRobot.calibrations)

    @property
    def camera_names(self) -> list[str]:
        return self._cameras

    def cameras(self) -> dict:
        return dict(self._calibrations)

    def observe(self, images: bool = False, depth: bool = False) -> Observation:
        if not self._obs:
            raise RuntimeError("replay: the recorded observation sequence is exhausted")
        return copy.deepcopy(self._obs.pop(0))

    def execute(self, motion: Motion, estop: threading.Event) -> MotionResult:
        self.motions.append(motion)
        return copy.deepcopy(self._res.pop(0))

    def stop(self) -> None:
        pass
