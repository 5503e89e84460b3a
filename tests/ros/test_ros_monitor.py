"""The Monitor over ROS 2 (motormind/ros/role_nodes.py MonitorNode): each episode, told by a new task
instruction, gets a fresh Monitor whose prompts state that instruction, as each in-process episode
does (motormind/runner.py); the last episode's closes. The node's episode logic runs here without
DDS: a MonitorNode whose publishing is captured (as tests/ros/test_ros_memory.py does the Memory's)."""
import threading
import types

import pytest

pytest.importorskip("rclpy")

from motormind.brains.scripted import ScriptedBrain  # noqa: E402
from motormind.ros.role_nodes import MonitorNode  # noqa: E402
from rostest_util import bare_node  # noqa: E402
from waiting import wait_for  # noqa: E402

NOMINAL = {"schema_version": 1, "cancel": False, "reason": "nominal"}


def _monitor_node(brain):
    """A MonitorNode as RoleNode builds it, its topics captured: (node, sent [(topic, message)])."""
    return bare_node(MonitorNode, "monitor", cfg=types.SimpleNamespace(monitor=True), brain=brain, instruction="",
                     monitor=None, component=None, plan=[],
                     prompt_ctx=types.SimpleNamespace(facts=types.SimpleNamespace(robot=lambda: "the fake arm")))


def _episode(node, instruction, batch_id):
    """A new task as RoleNode._task takes it, then a batch whose first command ends: the Monitor checks."""
    node.instruction = instruction
    node.on_task({"instruction": instruction})
    node._plan({"decision": "plan", "plan_id": 1,
                "subgoals": [{"id": "s1", "description": f"step of {instruction}", "success_criterion": "done"}]})
    cmd = {"op": "move", "direction": "up", "distance_mm": 10}
    node._commands({"batch_id": batch_id, "subgoal_id": "s1", "commands": [cmd]})
    node._progress({"event": "command_end", "batch_id": batch_id, "index": 0, "status": "done", "command": cmd,
                    "state": {"eef_pos_mm": [400.0, 0.0, 210.0]}})


def test_each_episode_gets_a_fresh_monitor_with_its_instruction():
    brain = ScriptedBrain({"monitor": [NOMINAL]})
    node, sent = _monitor_node(brain)
    _episode(node, "open the drawer", "b1")
    first = node.monitor
    wait_for(lambda: first.checks == 1 and len(brain.requests) == 1, timeout=10, what="the first episode's check")
    first.wait_idle()
    _episode(node, "close the drawer", "b2")
    second = node.monitor
    wait_for(lambda: len(brain.requests) == 2, timeout=10, what="the second episode's check")
    second.wait_idle()
    a, b = [r.user for r in brain.requests if r.role == "monitor"]
    assert 'Task instruction: "open the drawer"' in a, a
    # the second episode's prompt: its own instruction, none of the first's
    assert 'Task instruction: "close the drawer"' in b and "open the drawer" not in b, b
    assert second is not first and not first._thread.is_alive()          # the old one closed, its thread ended
    calls = [m for t, m in sent if t == "events" and m["kind"] == "vlm_call"]
    assert [(m["instruction"], m["call_no"]) for m in calls] == [("open the drawer", 1), ("close the drawer", 1)]
    node.close_role()
    assert not second._thread.is_alive()


def test_a_check_under_way_at_the_new_task_stays_the_old_episodes():
    """A Monitor check that ends after the next task: recorded under its own episode's instruction (the
    Executor and the console count calls per instruction), numbered among that episode's calls."""
    gate, asked = threading.Event(), threading.Event()

    def slow(req):
        if "open the drawer" in req.user:
            asked.set()
            gate.wait(10)
        return NOMINAL
    brain = ScriptedBrain({"monitor": slow})
    node, sent = _monitor_node(brain)
    _episode(node, "open the drawer", "b1")
    assert asked.wait(10)
    old = node.monitor
    threading.Timer(0.3, gate.set).start()                               # answers while the old one closes
    _episode(node, "close the drawer", "b2")
    wait_for(lambda: node.monitor.checks == 1 and len(brain.requests) == 2, timeout=10, what="the second check")
    node.monitor.wait_idle()
    assert old.checks == 1 and not old._thread.is_alive()
    calls = [m for t, m in sent if t == "events" and m["kind"] == "vlm_call"]
    assert sorted((m["instruction"], m["call_no"]) for m in calls) == [("close the drawer", 1),
                                                                        ("open the drawer", 1)]
    node.close_role()
