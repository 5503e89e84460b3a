"""The Memory over ROS 2 (motormind/ros/role_nodes.py MemoryNode): each episode, told by a new task
instruction, gets a fresh Memory with that instruction, as each in-process episode does
(motormind/runner.py); the role nodes read only their episode's summaries. The nodes' episode
logic runs here without DDS: a MemoryNode whose publishing is captured."""
import json
import threading
import types

import pytest

pytest.importorskip("rclpy")

from motormind.brains.scripted import ScriptedBrain  # noqa: E402
from motormind.components import MemoryView  # noqa: E402
from motormind.ros.role_nodes import MemoryNode, RoleNode  # noqa: E402
from rostest_util import bare_node  # noqa: E402
from waiting import wait_for  # noqa: E402


def _summary(req):
    """Memory's answer: notes naming the task its prompt gives."""
    task = json.loads(req.user.split("Task instruction: ", 1)[1].split("\n", 1)[0])
    return {"schema_version": 1, "summary": f"notes on {task}", "facts": [f"fact of {task}"]}


def _memory_node(brain):
    """A MemoryNode as RoleNode builds it, its topics captured: (node, sent [(topic, message)])."""
    return bare_node(MemoryNode, "memory", cfg=types.SimpleNamespace(memory=True), brain=brain, memory=None,
                     instruction="")


def _episode(node, instruction):
    """A new task as RoleNode._task takes it, then two events of its episode for Memory to fold in."""
    node.instruction = instruction
    node.on_task({"instruction": instruction})
    node._add("verdict", {"subgoal_id": "s1", "achieved": False, "evidence": f"not yet ({instruction})"})
    node._add("verdict", {"subgoal_id": "s1", "achieved": True, "evidence": f"done ({instruction})"})


def test_each_episode_gets_a_fresh_memory_with_its_instruction():
    brain = ScriptedBrain({"memory": _summary})
    node, sent = _memory_node(brain)
    _episode(node, "open the drawer")
    first = node.memory
    wait_for(lambda: first.updates == 1, timeout=10, what="the first episode's summary")
    _episode(node, "close the drawer")
    second = node.memory
    wait_for(lambda: sum(t == "memory" for t, _ in sent) == 2, timeout=10, what="the second episode's summary")
    a, b = [r.user for r in brain.requests if r.role == "memory"]
    assert 'Task instruction: "open the drawer"' in a
    # the second episode's prompt: its own instruction, an empty summary, none of the first's notes
    assert 'Task instruction: "close the drawer"' in b and 'Previous summary: "nothing yet"' in b, b
    assert "open the drawer" not in b, b
    assert second is not first and not first._thread.is_alive()          # the old one closed, its thread ended
    calls = [m for t, m in sent if t == "events" and m["kind"] == "vlm_call"]
    assert [m["instruction"] for m in calls] == ["open the drawer", "close the drawer"]
    summaries = [m for t, m in sent if t == "memory"]
    assert [(m["summary"], m["instruction"]) for m in summaries] == [
        ("notes on open the drawer", "open the drawer"), ("notes on close the drawer", "close the drawer")]
    node.close_role()
    assert not second._thread.is_alive()


def test_a_call_under_way_at_the_new_task_stays_the_old_episodes():
    """Memory's call that ends after the next task: recorded under its own episode's instruction (the
    Executor and the console count calls per instruction), its summary goes to no prompt."""
    gate, asked = threading.Event(), threading.Event()

    def slow(req):
        if "open the drawer" in req.user:
            asked.set()
            gate.wait(10)
        return _summary(req)
    brain = ScriptedBrain({"memory": slow})
    node, sent = _memory_node(brain)
    _episode(node, "open the drawer")
    assert asked.wait(10)
    old = node.memory
    threading.Timer(0.3, gate.set).start()                               # answers while the old one closes
    _episode(node, "close the drawer")
    wait_for(lambda: node.memory.updates == 1, timeout=10, what="the second episode's summary")
    assert old.updates == 1 and not old._thread.is_alive()
    calls = [m for t, m in sent if t == "events" and m["kind"] == "vlm_call"]
    assert [m["instruction"] for m in calls] == ["open the drawer", "close the drawer"]
    assert [m["instruction"] for t, m in sent if t == "memory"] == ["close the drawer"]
    node.close_role()


def test_a_role_node_reads_only_its_episodes_memory():
    me = types.SimpleNamespace(instruction="close the drawer", memory_view=MemoryView())
    RoleNode._memory(me, {"summary": "notes on open the drawer", "facts": ["x"], "instruction": "open the drawer"})
    assert me.memory_view.text() == "nothing yet"
    RoleNode._memory(me, {"summary": "notes on close the drawer", "facts": ["y"], "instruction": "close the drawer"})
    assert me.memory_view.text() == "notes on close the drawer\n- y"
    me.memory_view.reset()                                               # a new task (RoleNode._task)
    assert me.memory_view.text() == "nothing yet"
