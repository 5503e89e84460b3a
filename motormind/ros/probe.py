"""A small rclpy client of the MotorMind graph, for tests, the bench and consoles: publish batches,
cancels and the e-stop, call the Controller's services, and wait for reports and progress events.

    with Probe(domain_id=42) as pr:
        pr.wait_for_subscribers("commands")
        pr.send("commands", batch)
        rep = pr.wait_for("report", lambda m: m["batch_id"] == "b1", timeout=10)
"""
from __future__ import annotations

import json
import threading
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from .. import SCHEMA_VERSION
from ..errors import CommandError
from ..strict_json import decode_json
from . import graph
from .base import MAX_MESSAGE_CHARS, qos

WATCH = ("report", "progress", "plan", "verdict", "episode", "cancel", "task", "memory", "escalation", "commands")


def _until(count, n: int, timeout: float, what: str) -> None:
    """Poll ``count()`` until it is at least ``n``; TimeoutError (``what``) after ``timeout`` s."""
    t_end = time.monotonic() + timeout
    while count() < n:
        if time.monotonic() > t_end:
            raise TimeoutError(f"{what} after {timeout:g} s")
        time.sleep(0.02)


class Probe:
    def __init__(self, domain_id: int | None = None, name: str = "motormind_probe", watch=WATCH):
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.ctx)
        self._cv = threading.Condition()
        self.msgs: dict[str, list] = {t: [] for t in watch}
        self.arrivals: dict[str, list] = {t: [] for t in watch}
        self._pubs: dict = {}
        self._subs: dict = {}
        for t in watch:
            spec = graph.TOPICS[t]
            self._subs[t] = self.node.create_subscription(String, f"{graph.NAMESPACE}/{t}",
                                                          lambda m, t=t: self._got(t, m), qos(spec))
        self._ex = SingleThreadedExecutor(context=self.ctx)
        self._ex.add_node(self.node)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._spin, daemon=True)
        self._t.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            try:
                self._ex.spin_once(timeout_sec=0.05)
            except Exception:  # noqa: BLE001 - shutting down
                if self._stop.is_set():
                    return
                raise

    def _got(self, topic: str, m) -> None:
        try:
            obj = decode_json(m.data, topic, MAX_MESSAGE_CHARS)   # the nodes' own strict decoder
        except CommandError:
            return
        with self._cv:
            self.msgs[topic].append(obj)
            self.arrivals[topic].append(time.perf_counter())
            self._cv.notify_all()

    def _pub(self, topic: str):
        if topic not in self._pubs:
            spec = graph.TOPICS[topic]
            typ = Bool if spec.type == "std_msgs/msg/Bool" else String
            self._pubs[topic] = self.node.create_publisher(typ, f"{graph.NAMESPACE}/{topic}", qos(spec))
        return self._pubs[topic]

    def send(self, topic: str, obj: dict) -> float:
        """Publish a JSON message; returns the perf_counter time it went out."""
        obj = obj if "schema_version" in obj else {"schema_version": SCHEMA_VERSION, **obj}
        p = self._pub(topic)
        t = time.perf_counter()
        p.publish(String(data=json.dumps(obj)))
        return t

    def estop(self, on: bool = True) -> float:
        p = self._pub("estop")
        t = time.perf_counter()
        p.publish(Bool(data=bool(on)))
        return t

    def wait_for_subscribers(self, topic: str, n: int = 1, timeout: float = 30.0) -> None:
        _until(self._pub(topic).get_subscription_count, n, timeout, f"no subscriber on {topic}")

    def wait_for_publishers(self, topic: str, n: int = 1, timeout: float = 30.0) -> None:
        """Until ``n`` publishers of the watched ``topic`` are matched with this probe: a volatile
        message published before then is not heard."""
        _until(self._subs[topic].get_publisher_count, n, timeout, f"no publisher on {topic}")

    def wait_for(self, topic: str, pred=lambda m: True, timeout: float = 30.0, start: int = 0) -> dict:
        """The first message on ``topic`` (from index ``start``) that satisfies ``pred``."""
        t_end = time.monotonic() + timeout
        with self._cv:
            while True:
                for m in self.msgs[topic][start:]:
                    if pred(m):
                        return m
                left = t_end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no matching message on {topic} within {timeout:g} s; "
                                       f"got {[json.dumps(m)[:160] for m in self.msgs[topic][-5:]]}")
                self._cv.wait(min(left, 0.2))

    def arrival_of(self, topic: str, pred) -> float:
        with self._cv:
            for m, t in zip(self.msgs[topic], self.arrivals[topic]):
                if pred(m):
                    return t
        raise KeyError(topic)

    def call(self, service: str, timeout: float = 10.0) -> tuple[bool, str]:
        cli = self.node.create_client(Trigger, f"{graph.NAMESPACE}/{service}")
        try:
            if not cli.wait_for_service(timeout_sec=timeout):
                raise TimeoutError(f"service {service} not available")
            fut = cli.call_async(Trigger.Request())
            t_end = time.monotonic() + timeout
            while not fut.done():
                if time.monotonic() > t_end:
                    raise TimeoutError(f"service {service} did not answer")
                time.sleep(0.01)
            r = fut.result()
            return bool(r.success), str(r.message)
        finally:
            self.node.destroy_client(cli)

    def close(self) -> None:
        self._stop.set()
        self._t.join(timeout=2)
        try:
            self._ex.shutdown(timeout_sec=1)
            self.node.destroy_node()
        finally:
            rclpy.shutdown(context=self.ctx)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
