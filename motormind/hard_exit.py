"""Ending this process at a deadline without the interpreter's help (pure Python, ctypes).

A deadline written in Python (a ``threading.Timer`` that calls ``os._exit``) runs only when its
thread gets the GIL. A native call that holds the GIL and never returns starves it: Fast DDS's
participant teardown (``rclpy`` ``Node.destroy_node``, which keeps the GIL) can spin for as long as
a discovery callback is in flight, and when a whole graph stops at once that callback may wait on
the spinning thread's own mutex for good (eProsima/Fast-DDS#6513; seen here as a node at 100% CPU
in ``DomainParticipant::set_listener``: 2 of about 490 stops of a whole graph, under load).

``exit_after(seconds, code)`` arms a POSIX timer (``timer_create`` with ``SIGEV_THREAD``) whose
expiry calls the C library's ``_exit(code)`` itself, from a thread of the C library's own: no GIL,
no interpreter, no Python code, so nothing of the process is left to go wrong first. The timer's
``union sigval`` argument carries the code; it is passed where ``_exit`` reads its ``int`` (the
first integer register) on the 64-bit Linux ABIs this is armed on (x86-64, aarch64). Anywhere else
it falls back to ``alarm(2)`` with SIGALRM's default action: the process still ends at the
deadline, by SIGALRM rather than with ``code`` (and a process has one alarm: the latest armed
wins). ``Deadline`` pairs it with a Python timer that says why first. Used by
``motormind/ros/base.py`` (``spin``) and ``motormind/lifeline.py``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import platform
import signal
import sys
import threading

BACKSTOP_S = 2.0           # a Deadline's native timer fires this long after its Python one
_SIGEV_THREAD = 2          # asm-generic/siginfo.h
_CLOCK_MONOTONIC = 1


class _Sigval(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]


class _Sigevent(ctypes.Structure):      # glibc and musl, 64-bit: 64 bytes
    _fields_ = [("sigev_value", _Sigval), ("sigev_signo", ctypes.c_int), ("sigev_notify", ctypes.c_int),
                ("sigev_notify_function", ctypes.c_void_p), ("sigev_notify_attributes", ctypes.c_void_p),
                ("_pad", ctypes.c_byte * 32)]


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc():
    """The C library with ``timer_create`` (in libc since glibc 2.34, in librt before), or None
    where this way is not available."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64"):
        return None
    for name in (None, ctypes.util.find_library("rt")):
        try:
            lib = ctypes.CDLL(name, use_errno=True)
            for fn in ("timer_create", "timer_settime", "timer_delete", "_exit"):
                getattr(lib, fn)
            return lib
        except (OSError, AttributeError):
            continue
    return None


class HardExit:
    """A deadline armed by ``exit_after``: ``cancel()`` disarms it (again is harmless).
    ``how``: ``"timer"`` (it ends the process with ``code``) or ``"alarm"`` (by SIGALRM)."""

    def __init__(self, how: str, cancel):
        self.how = how
        self._cancel = cancel
        self._lock = threading.Lock()

    def cancel(self) -> None:
        with self._lock:
            cancel, self._cancel = self._cancel, None
        if cancel is not None:
            cancel()


def exit_after(seconds: float, code: int) -> HardExit:
    """End this process ``seconds`` from now with exit status ``code`` (0-255), whatever its
    threads are doing, unless ``cancel()`` comes first. The process ends as ``os._exit`` ends it:
    no cleanup, no flush of Python's buffers (flush first what must be seen)."""
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"seconds: {seconds!r} must be a finite number > 0")
    if not 0 <= int(code) <= 255:
        raise ValueError(f"code: {code!r} must be an exit status, 0-255")
    lib = _libc()
    if lib is not None:
        ev = _Sigevent()
        ev.sigev_notify = _SIGEV_THREAD
        ev.sigev_value.sival_ptr = int(code)           # the whole register: its low 32 bits are the int
        ev.sigev_notify_function = ctypes.cast(lib._exit, ctypes.c_void_p).value
        timer = ctypes.c_void_p()
        if lib.timer_create(_CLOCK_MONOTONIC, ctypes.byref(ev), ctypes.byref(timer)) == 0:
            whole = math.floor(seconds)
            spec = _Itimerspec(it_value=_Timespec(whole, int((seconds - whole) * 1e9)))
            if lib.timer_settime(timer, 0, ctypes.byref(spec), None) == 0:
                return HardExit("timer", lambda: lib.timer_delete(timer))
            lib.timer_delete(timer)
    # SIGALRM's default action ends the process; its handler can only be set from the main thread
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(max(1, math.ceil(seconds)))
    return HardExit("alarm", lambda: signal.alarm(0))


class Deadline:
    """End this process ``seconds`` from now with exit code 1 unless ``cancel()`` comes first. A
    Python timer prints ``message`` to stderr and exits; a native one (``exit_after``) ends the
    process ``BACKSTOP_S`` later without the GIL, should a native call hold it."""

    def __init__(self, seconds: float, message: str):
        def expire():
            try:
                print(message, file=sys.stderr, flush=True)
            except (OSError, ValueError):
                pass
            os._exit(1)
        self._hard = exit_after(seconds + BACKSTOP_S, 1)
        self._timer = threading.Timer(seconds, expire)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()
        self._hard.cancel()
