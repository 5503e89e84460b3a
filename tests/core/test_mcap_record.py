"""MCAP recording as it goes (motormind/mcap_record.py): a writer killed by SIGKILL loses at most
its open chunk; what it had written reads back (`read_messages`) and `recover` turns it into a
closed, indexed file that the standard MCAP reader opens."""
import json
import signal
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mcap_ros2")

from motormind.mcap_record import McapRecorder, is_complete, read_messages, recover  # noqa: E402
from waiting import wait_for  # noqa: E402

# a writer in its own process: N messages, then (optionally) flush(), then M more, then it waits to be killed
WRITER = textwrap.dedent("""
    import sys, time
    from motormind.mcap_record import McapRecorder
    path, n, m, flush_s, flush = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1"
    rec = McapRecorder(path, flush_s=flush_s)
    for i in range(n):
        rec.json("report", {"i": i})
        rec.state({"eef_pos_mm": [400.0, 0.0, 200.0 + i], "joints_deg": [0.0] * 6, "gripper_width_mm": 80.0})
    if flush:
        rec.flush()
    for i in range(n, n + m):
        rec.json("report", {"i": i})
    print("written", flush=True)
    time.sleep(600)
""")


def _killed_writer(path, n, m, flush_s, flush):
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(n), str(m), str(flush_s), "1" if flush else "0"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "written"
        return p
    except BaseException:
        p.kill()
        raise


def _reports(path):
    return [json.loads(m.data)["i"] for t, _, m, _ in read_messages(path) if t == "/motormind/report"]


def test_a_writer_killed_by_sigkill_loses_only_its_open_chunk(tmp_path):
    path = tmp_path / "killed.mcap"
    p = _killed_writer(path, 40, 7, 0, flush=True)     # chunks by size only: the 7 after flush() stay open
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    assert not is_complete(path)
    assert _reports(path) == list(range(40))
    msgs = list(read_messages(path))
    poses = [m for t, _, m, _ in msgs if t == "/motormind/eef_pose"]
    assert len(poses) == 40 and poses[-1].pose.position.z == pytest.approx(0.239)

    fixed = tmp_path / "recovered.mcap"
    r = recover(path, fixed)
    assert r["messages"] == 40 * 3 and r["chunks"] == 1 and not r["complete"] and r["dropped_bytes"] == 0
    assert is_complete(fixed)
    from mcap.reader import make_reader               # the standard, indexed reader: it needs the footer
    with open(fixed, "rb") as fh:
        summary = make_reader(fh).get_summary()
    assert summary.statistics.message_count == 120
    assert {c.topic for c in summary.channels.values()} == {"/motormind/report", "/motormind/state",
                                                            "/motormind/eef_pose"}
    assert _reports(fixed) == list(range(40))


def test_a_quiet_writer_has_its_messages_on_disk_within_flush_s(tmp_path):
    """No flush() and no close: the background flush writes the open chunk; a SIGKILL after that loses nothing."""
    path = tmp_path / "quiet.mcap"
    p = _killed_writer(path, 10, 0, 0.2, flush=False)
    try:
        wait_for(lambda: len(_reports(path)) == 10, timeout=30, what="the 10 messages on disk")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    assert _reports(path) == list(range(10)) and not is_complete(path)


def test_a_file_cut_inside_a_chunk_reads_to_the_last_whole_chunk(tmp_path):
    path = tmp_path / "whole.mcap"
    with McapRecorder(path, flush_s=0) as rec:
        for i in range(30):
            rec.json("report", {"i": i})
            if i % 10 == 9:
                rec.flush()                                # three chunks of ten
                if i == 19:
                    two_chunks = path.stat().st_size       # on disk after each flush: chunk 3 starts here
    assert is_complete(path) and _reports(path) == list(range(30))
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(path.read_bytes()[:two_chunks + 40])   # a crash while the third chunk was written
    assert not is_complete(cut) and _reports(cut) == list(range(20))
    r = recover(cut, tmp_path / "cut-recovered.mcap")
    assert r == {"messages": 20, "chunks": 2, "complete": False, "dropped_bytes": 40}
    assert _reports(tmp_path / "cut-recovered.mcap") == list(range(20))


def test_recorder_settings_are_checked():
    with pytest.raises(ValueError, match="flush_s: -1 must be >= 0 seconds"):
        McapRecorder("/nonexistent/never-written.mcap", flush_s=-1)


def test_recover_from_the_command_line(tmp_path):
    path = tmp_path / "killed.mcap"
    p = _killed_writer(path, 5, 3, 0, flush=True)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    out = subprocess.run([sys.executable, "-m", "motormind.mcap_record", "recover", str(path),
                          str(tmp_path / "fixed.mcap")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("recover: 15 messages in 1 chunks from ") and "(not closed: the recorder died)" in out.stdout
    assert _reports(tmp_path / "fixed.mcap") == list(range(5))
