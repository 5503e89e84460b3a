"""The question-set format (versioned): a directory of PNG frames plus JSONL.

    SET_DIR/manifest.json      format, format_version, generator + generator_version, seed, the build
                               spec, simulator versions, rollouts, counts, sha256 of questions.jsonl
    SET_DIR/questions.jsonl    one question per line (keys below)
    SET_DIR/images/*.png       upright camera frames, RGB, one file per camera per moment

A question line (format 2):
    id, skill (action | progress | completion | grounding), suite, task, init_state, rollout, moment, step
    instruction, plan              what the stack's roles would know: the instruction, the plan
    subgoal                        {id, description, success_criterion}, or null (task completion)
    state                          the measured robot state the roles see (mm, degrees)
    images                         camera name -> path relative to SET_DIR
    scene                          the backend's scene facts (Robot.scene_facts: the table's height)
    cameras                        camera name -> its calibration at the frame's size
                                   (CameraCalibration.to_json): the marks and camera facts of the prompt
    question, options              the question text; options [{letter, text, value}], lettered A..
                                   (none for grounding)
    answer                         the correct letter (grounding: camera, object, truth pixel, offset mm)
    meta                           generator notes (subgoal kind, stage, option kinds ...): not for prompts
    privileged                     the privileged snapshot the oracle answers from (truth.py): robot
                                   state, object AABBs, goal regions and predicates, the subgoal asked
                                   about. Handed to privileged brains only; never rendered into a prompt.

Only ``question``, ``options[].letter/text``, ``instruction``, ``plan``, ``subgoal``, ``state``, the
images (marked from ``cameras``) and the camera facts reach a prompt (role.py). A format 1 set (no
grounding, no ``cameras``) still loads.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from . import FORMAT, FORMAT_VERSION
from ..errors import ConfigError


def sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_png(path: Path, img) -> None:
    import cv2
    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), cv2.cvtColor(np.asarray(img, dtype=np.uint8), cv2.COLOR_RGB2BGR)):
        raise OSError(f"could not write {path}")


def read_png(path: Path) -> np.ndarray:
    import cv2
    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if img is None:
        raise ConfigError(f"question set: cannot read image {path}")
    return np.ascontiguousarray(cv2.cvtColor(img, cv2.COLOR_BGR2RGB))


def write_set(out: Path, manifest: dict, questions: list[dict]) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    qp = out / "questions.jsonl"
    tmp = qp.with_suffix(".jsonl.tmp")
    with open(tmp, "w") as fh:
        for q in questions:
            fh.write(json.dumps(q, separators=(",", ":")) + "\n")
    tmp.replace(qp)
    manifest = {**manifest, "files": {"questions.jsonl": {"sha256": sha256_file(qp), "lines": len(questions)},
                                      "images": len(list((out / "images").glob("*.png")))}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out


def load_set(path) -> tuple[dict, list[dict]]:
    """(manifest, questions) of a set directory; refuses unknown formats and corrupt files."""
    d = Path(path)
    mp = d / "manifest.json"
    if d.is_file():                     # a file of a set, or no set at all: its directory is what is asked for
        if (d.parent / "manifest.json").is_file():
            raise ConfigError(f"--set: {d} is a file of a question set; give its directory: --set {d.parent}")
        raise ConfigError(f"--set: {d} is a file, not a question set: give the directory `motormind diagnose "
                          "build` wrote (manifest.json, questions.jsonl and images/ in it; by default "
                          "runs/diagnose/set-v<N>-<Q>q-seed<S>)")
    if not mp.is_file():
        raise ConfigError(f"--set: {d} is not a question set (no manifest.json); "
                          f"build one with `motormind diagnose build --out {d}`")
    man = json.loads(mp.read_text())
    if man.get("format") != FORMAT:
        raise ConfigError(f"--set: {mp} is format {man.get('format')!r}, expected {FORMAT!r}")
    if int(man.get("format_version", -1)) > FORMAT_VERSION:
        raise ConfigError(f"--set: format_version {man.get('format_version')} is newer than this "
                          f"motormind reads ({FORMAT_VERSION})")
    qp = d / "questions.jsonl"
    want = man.get("files", {}).get("questions.jsonl", {}).get("sha256")
    if want and sha256_file(qp) != want:
        raise ConfigError(f"--set: {qp} does not match the sha256 in its manifest (edited or truncated)")
    qs = [json.loads(line) for line in qp.read_text().splitlines() if line.strip()]
    return man, qs


def load_images(set_dir, q: dict) -> dict:
    return {cam: read_png(Path(set_dir) / rel) for cam, rel in q.get("images", {}).items()}
