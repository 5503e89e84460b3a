"""A whole episode over ROS 2 on the physics-backed xArm6 emulator, with the oracle.

`motormind launch xarm6 robot_ip:=... command_port:=... camera:=...` runs unchanged: the Controller
node drives the cell through the unmodified SDK and opens its two cameras by URL (MJPEG over HTTP,
robots/cameras.py); every role node calls the real openai client against `motormind serve-brain
--backend oracle --scene URL`, which reads the cell's PRIVILEGED scene over the evaluator-only
channel (the roles send only their context). The operator console node shows both cameras. What
the arm did is judged from the physics: the block rests on its mark, released."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

pytest.importorskip("xarm")
pytest.importorskip("rclpy")
pytest.importorskip("mujoco")

from motormind.sim.xarm_cell.emulator import CellEmulator  # noqa: E402
from motormind.sim.xarm_emulator import free_loopback_host  # noqa: E402
from rostest_util import free_domain, kill_nodes  # noqa: E402

pytestmark = [pytest.mark.xarm, pytest.mark.sim]

DOMAIN = free_domain("xarm-cell")


def _stop(p: subprocess.Popen, timeout: float = 30) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_an_oracle_episode_over_ros2_on_the_cell_with_its_cameras_on_the_console(tmp_path):
    emu = CellEmulator("placement", free_loopback_host(), 0, camera_port=0, privileged_port=0, report_hz=5,
                       seed=1).start()
    server = launch = None
    lines: list = []
    try:
        _, block, mark = emu.scene.trial.goal[0]
        assert not emu.scene.success()
        server_log, server_err = tmp_path / "serve-brain.jsonl", tmp_path / "serve-brain.err"
        with open(server_err, "w") as err:
            server = subprocess.Popen([sys.executable, "-m", "motormind.cli", "serve-brain", "--backend", "oracle",
                                       "--scene", emu.channel.url, "--profile", "xarm6", "--host", "127.0.0.1",
                                       "--port", "0", "--quiet", "--log", str(server_log)],
                                      stdout=subprocess.PIPE, stderr=err, text=True)
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), server_err.read_text()
        vlm = tmp_path / "cell-oracle.yaml"
        from motormind.paths import config_dir
        vlm.write_text((config_dir() / "vlm" / "cell-oracle.yaml").read_text()
                       .replace("${MOTORMIND_BRAIN_URL:-http://127.0.0.1:8766/v1}", url))
        cams = ",".join(f"{n}={u}" for n, u in emu.camera_urls().items())
        env = {**os.environ, "ROS_HOME": str(tmp_path / "ros")}
        launch = subprocess.Popen(
            [sys.executable, "-m", "motormind.cli", "launch", "xarm6", f"robot_ip:={emu.host}",
             f"command_port:={emu.port}", f"camera:={cams}", f"vlm:={vlm}",
             f"instruction:={emu.scene.language_instruction}", "exit_on_end:=true", "console:=true",
             "console_port:=0", "--domain-id", str(DOMAIN)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        reader = threading.Thread(target=lambda: lines.extend(launch.stdout), daemon=True)
        reader.start()

        # the console node shows the cell's two cameras, live, while the episode runs
        t_end = time.monotonic() + 90
        while not (m := re.search(r"^\[console\] console: (http://\S+/)  token: (\S+)$", "".join(lines), re.M)):
            assert time.monotonic() < t_end and launch.poll() is None, "".join(lines)[-4000:]
            time.sleep(0.2)
        console = m.group(1)
        frames: dict = {}
        while set(frames) != {"front", "wrist"}:
            assert time.monotonic() < t_end, f"no frames on the console: {frames}\n" + "".join(lines)[-3000:]
            with urllib.request.urlopen(console + "api/state", timeout=10) as r:
                frames = json.loads(r.read())["frames"]
            time.sleep(0.3)
        import cv2
        with urllib.request.urlopen(console + "api/frame/front", timeout=10) as r:
            assert r.headers["Content-Type"] == "image/jpeg"
            img = cv2.imdecode(np.frombuffer(r.read(), np.uint8), cv2.IMREAD_COLOR)
        colour = np.array(emu.cell.blocks[block].rgba[:3][::-1]) * 255        # BGR
        near = np.linalg.norm(img.astype(float) - colour, axis=2) < 70
        assert near.sum() > 15, "the block is not in the console's front frame"

        try:
            launch.wait(timeout=240)
        finally:
            _stop(launch)
            reader.join(timeout=10)
            if launch.returncode is None or launch.returncode < 0:
                kill_nodes("".join(lines))
        out = "".join(lines)
        (tmp_path / "launch.log").write_text(out)
        assert launch.returncode == 0, out[-6000:]
        assert "[executor] EPISODE SUCCESS" in out and "NODE DIED" not in out

        # judged from physics: the block rests on its mark, released
        assert emu.scene.success() and emu.scene.predicate(["on", block, mark])
        assert emu.scene.placement_error_mm() < 10.0
        snap = emu.snapshot()
        assert snap["error"] == 0 and snap["gripper_pulses"] > 600
        served = [json.loads(x) for x in server_log.read_text().splitlines()]
        assert served and all(s["status"] == 200 for s in served), served[-3:]
        assert {s["role"] for s in served} >= {"planner", "executor", "verifier"}
        assert "PRIVILEGED" in server_err.read_text()
    finally:
        if launch is not None and launch.poll() is None:
            _stop(launch)
            kill_nodes("".join(lines))
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
        emu.stop()
