"""The command line's parser and value types: a bad invocation is refused with ONE line on stderr
that names the argument and the limit, exit status 2, before anything is built.

    Parser        argparse.ArgumentParser whose errors are one line (no usage block; --help has it)
    port          0..65535 (0: any free port)
    host_port     "[HOST:]PORT" for --console: its port 0..65535, the host not empty
    seconds       a finite number of seconds > 0 (a budget)
    positive      a finite number > 0 (a rate)
    non_negative  a finite number >= 0 (a rate where 0 means off)
    positive_int  an integer >= 1 (a size, a count)
    rollout_hz    a rollout video's frames per second of a clock, > 0 and at most ROLLOUT_HZ_MAX
    out_dir       a path that is a directory or does not exist yet (not a file)
    interference  WHAT@WHEN (fetched|target|bystander @ reach|carry|between) or off
    shift_mm      LO-HI millimetres within 0..250, returned in metres
    one_line      an error message folded onto one line (a YAML parser's message has several)
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path


_NO_HELP = "\x00"      # an option given no help: its line still shows the default

# actions whose default needs no words: flags, the help and the version
_FLAG_ACTIONS = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction,
                 argparse._HelpAction, argparse._VersionAction, argparse._CountAction, argparse._SubParsersAction)


def _plain(text: str) -> str:
    """Help text as a terminal shows it: no RST literal marks (the modules' docstrings use them)."""
    return text.replace("``", "")


class Formatter(argparse.HelpFormatter):
    """Every option's help ends with its default (unless it states one in words), and no RST."""

    def _get_help_string(self, action) -> str:
        h = (action.help or "").replace(_NO_HELP, "")
        if (not action.option_strings or isinstance(action, _FLAG_ACTIONS) or "default" in h.lower()
                or action.default is argparse.SUPPRESS):
            return h
        d = action.default
        if d is None or d == [] or d == ():
            shown = "none"
        elif isinstance(d, (list, tuple)):
            shown = " ".join(str(x) for x in d)
        else:
            shown = str(d)
        return f"{h} (default: {shown.replace('%', '%%')})".lstrip()

    def _format_text(self, text: str) -> str:
        return super()._format_text(_plain(text))

    def _expand_help(self, action) -> str:
        return _plain(super()._expand_help(action))


class RawFormatter(Formatter):
    """Formatter keeping a description's own line breaks (RawDescriptionHelpFormatter's way)."""

    def _fill_text(self, text, width, indent):
        return "".join(indent + line for line in text.splitlines(keepends=True))


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``motormind console: error: argument --port: 70000 is
    outside 0..65535 (see motormind console --help)``; help with every option's default."""

    def __init__(self, *a, **kw):
        if kw.get("formatter_class") is argparse.RawDescriptionHelpFormatter:
            kw["formatter_class"] = RawFormatter
        kw.setdefault("formatter_class", Formatter)
        super().__init__(*a, **kw)

    def add_argument(self, *a, **kw):
        if a and str(a[0]).startswith("-") and not kw.get("help") and kw.get("help") is not argparse.SUPPRESS:
            kw["help"] = _NO_HELP            # (argparse shows no line for an option without help)
        return super().add_argument(*a, **kw)

    def error(self, message: str):  # noqa: D102 - argparse's
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def one_line(text: str, limit: int = 600) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _number(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return v


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def port(text: str) -> int:
    p = _integer(text)
    if not 0 <= p <= 65535:
        raise argparse.ArgumentTypeError(f"{p} is outside 0..65535 (0: any free port)")
    return p


def host_port(text: str) -> str:
    """``PORT`` or ``HOST:PORT`` (``[::1]:PORT`` for IPv6), checked; returned as given."""
    split_host_port(text, argparse.ArgumentTypeError)
    return text


def split_host_port(text: str, error=ValueError, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """("host", port) of ``[HOST:]PORT``; ``error(message)`` is raised when it is not one."""
    host, sep, p = str(text).rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if sep and not host:
        raise error(f"{text!r}: the host before ':' is empty (PORT or HOST:PORT)")
    try:
        n = int(p)
    except ValueError:
        raise error(f"{text!r} is not PORT or HOST:PORT") from None
    if not 0 <= n <= 65535:
        raise error(f"port {n} is outside 0..65535 (0: any free port)")
    return host or default_host, n


def seconds(text: str) -> float:
    v = _number(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{v:g} s: must be more than 0 s")
    return v


def positive(text: str) -> float:
    v = _number(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{v:g}: must be more than 0")
    return v


def non_negative(text: str) -> float:
    v = _number(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v:g}: must be 0 or more")
    return v


def positive_int(text: str) -> int:
    v = _integer(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v}: must be 1 or more")
    return v


ROLLOUT_HZ_MAX = 30.0     # each frame renders every camera on the episode's machine


def rollout_hz(text: str) -> float:
    v = positive(text)
    if v > ROLLOUT_HZ_MAX:
        raise argparse.ArgumentTypeError(f"{v:g} Hz: at most {ROLLOUT_HZ_MAX:g} Hz (each frame renders every camera)")
    return v


def non_negative_int(text: str) -> int:
    v = _integer(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v}: must be 0 or more")
    return v


def out_dir(text: str) -> str:
    p = Path(text)
    if p.exists() and not p.is_dir():
        raise argparse.ArgumentTypeError(f"{text} exists and is not a directory (give a directory, new or "
                                         "existing)")
    return text



def interference(text: str) -> str:
    """``WHAT@WHEN`` (interference_setting.py), or ``off``: the setting, normalised."""
    from .interference_setting import parse_setting, setting_name
    try:
        got = parse_setting(text, flag="")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(": ")) from None
    return "off" if got is None else setting_name(*got)


def shift_mm(text: str) -> tuple:
    """``LO-HI`` millimetres (or one number) for --interference-mm: 0 < LO <= HI <= the largest
    shift; returned in metres."""
    from .interference_setting import MAX_SHIFT_M
    top = MAX_SHIFT_M * 1000.0
    lo_s, sep, hi_s = str(text).strip().partition("-")
    try:
        lo, hi = _number(lo_s), _number(hi_s if sep else lo_s)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: needs LO-HI millimetres, e.g. 50-100") from None
    if not 0 < lo <= hi <= top:
        raise argparse.ArgumentTypeError(f"{text}: needs 0 < LO <= HI <= {top:g} mm")
    return (lo / 1000.0, hi / 1000.0)
