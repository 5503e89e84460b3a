"""The layering of the whole tree, read from the source (no import is run):

* nothing outside motormind/ros/ imports rclpy (or a ROS message package), at any depth;
* the core imports no SDK, simulator, HTTP server, console or ROS module at module level (the
  registry imports what a configuration names, inside its functions);
* brains/ never reaches serve/, console/ or ros/ (the openai brain with an in-process serve-brain
  is assembled by motormind/serve/build.py, named in motormind/registry.py);
* robots/ and sim/ are imported by their installed names, motormind.robots and motormind.sim;
* every path a doc or a comment cites is a file of the repository;
* every import is read, those inside functions too (scripts/house.py, the one measure of the house):
  an import that reaches up a layer, and an import cycle between files, is one of a short list
  below, each saying why.
"""
from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = {"motormind": ROOT / "motormind", "motormind.robots": ROOT / "robots", "motormind.sim": ROOT / "sim"}

# the core: the pure modules of motormind/ (not the command line, the HTTP stack, the registry, which
# assemble) and the packages that hold the episode, the roles and the brains
NOT_CORE = {"cli.py", "argtypes.py", "webserver.py", "registry.py", "__main__.py"}
CORE_PACKAGES = ("episode", "roles", "brains", "prompts")
ROS = ("rclpy", "std_msgs", "sensor_msgs", "geometry_msgs", "std_srvs", "rosidl_runtime_py",
       "ament_index_python")
OUTSIDE_CORE = ("xarm", "libero", "robosuite", "mujoco", "starlette", "uvicorn", "cv2",
                "motormind.ros", "motormind.console", "motormind.serve", "motormind.sim", "motormind.robots",
                "motormind.evaluate", "motormind.diagnose", "motormind.webserver", *ROS)


def modules():
    """(dotted name, path) of every module of the installed package, under the installed names."""
    for pkg, root in PACKAGE.items():
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts or (pkg == "motormind" and path.parts[len(root.parts)] == "configs"):
                continue
            rel = path.relative_to(root).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield ".".join([pkg, *parts]), path


def imports(name: str, path: Path, top_level_only: bool = False):
    """(imported module, line, is it at module level) for each import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    module_level = set()
    for node in tree.body:                        # module level: the body, and the bodies of its ifs / trys
        stack = [node]
        while stack:
            n = stack.pop()
            module_level.add(id(n))
            if isinstance(n, (ast.If, ast.Try)):
                stack.extend(n.body + n.orelse + getattr(n, "finalbody", []) +
                             [x for h in getattr(n, "handlers", []) for x in h.body])
    for node in ast.walk(tree):
        at_top = id(node) in module_level
        if top_level_only and not at_top:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno, at_top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod, node.lineno, at_top
            for a in node.names:                  # from . import graph -> motormind.ros.graph
                yield f"{mod}.{a.name}", node.lineno, at_top


def _under(mod: str, prefixes) -> str:
    return next((p for p in prefixes if mod == p or mod.startswith(p + ".")), "")


def is_core(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != "motormind" or len(parts) == 1:
        return len(parts) == 1
    if len(parts) == 2:
        return f"{parts[1]}.py" not in NOT_CORE and parts[1] not in (
            "ros", "console", "serve", "evaluate", "diagnose", "robots", "sim", "configs")
    return parts[1] in CORE_PACKAGES


ALL = list(modules())


def test_only_motormind_ros_imports_rclpy():
    extra = [ROOT / "launch", ROOT / "scripts"]
    files = [(n, p) for n, p in ALL] + [(f"x.{p.stem}", p) for d in extra for p in d.glob("*.py")]
    bad = [f"{p.relative_to(ROOT)}:{line}: {mod}" for n, p in files if not n.startswith("motormind.ros")
           for mod, line, _ in imports(n, p) if _under(mod, ROS)]
    assert not bad, "rclpy / ROS messages outside motormind/ros/:\n" + "\n".join(bad)


def test_the_core_imports_no_sdk_simulator_server_console_or_ros_module_at_module_level():
    core = [(n, p) for n, p in ALL if is_core(n)]
    assert len(core) > 30 and any(n == "motormind.controller" for n, _ in core)
    bad = [f"{p.relative_to(ROOT)}:{line}: {mod}" for n, p in core
           for mod, line, _ in imports(n, p, top_level_only=True) if _under(mod, OUTSIDE_CORE)]
    assert not bad, "module-level imports that leave the core:\n" + "\n".join(bad)


def test_brains_never_reach_the_server_the_console_or_ros():
    bad = [f"{p.relative_to(ROOT)}:{line}: {mod}" for n, p in ALL if n.startswith("motormind.brains")
           for mod, line, _ in imports(n, p) if _under(mod, ("motormind.serve", "motormind.console", "motormind.ros"))]
    assert not bad, "\n".join(bad)


def test_robots_and_sim_are_imported_by_their_installed_names():
    """robots/ and sim/ are installed as motormind.robots and motormind.sim (pyproject.toml,
    package-dir): code outside them names them so; inside a backend package, its own modules are
    relative (``from .xarm_errors import ...``)."""
    bad = []
    for n, p in ALL:
        src = p.read_text()
        for m in re.finditer(r"^\s*(from|import)\s+(\.+)(robots|sim)\b", src, re.M):
            bad.append(f"{p.relative_to(ROOT)}: {m.group(0).strip()}")
        if not n.startswith(("motormind.robots", "motormind.sim")):
            for m in re.finditer(r"^\s*(from|import)\s+(robots|sim)\b", src, re.M):
                bad.append(f"{p.relative_to(ROOT)}: {m.group(0).strip()}")
    assert not bad, "\n".join(bad)


# -- references -------------------------------------------------------------------------------------------
CITED = re.compile(r"(?<![\w/.$-])((?:motormind|robots|sim|configs|docs|tests|launch|scripts|bench|resource)"
                   r"/[\w./*-]*[\w*])")
TEXT = [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *(p for _, p in ALL),
        *(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").glob("*.py"), *(ROOT / "scripts").glob("*.*"),
        *(ROOT / "launch").glob("*.py"), *(ROOT / "configs").rglob("*.yaml"), ROOT / "pyproject.toml",
        ROOT / "Makefile", ROOT / "setup.py", ROOT / "package.xml"]


def _exists(ref: str) -> bool:
    ref = ref.rstrip(".")
    if any(ch in ref for ch in "*{<"):
        return True                                           # a pattern (configs/vlm/NAME.yaml, tests/brains/test_oracle*.py)
    if re.search(r"(^|/)[A-Z][A-Z_]+(\.|$)", ref):
        return True                                           # a placeholder: configs/robots/NAME.yaml
    p = ROOT / ref
    if p.exists():
        return True
    if ref.startswith("motormind/"):                          # a module cited by its installed path
        inst = ref.removeprefix("motormind/")
        for pkg in ("robots", "sim", "configs"):
            if inst.startswith(pkg + "/") and (ROOT / inst).exists():
                return True
    return False


def test_every_cited_path_is_a_file_of_the_repository():
    missing = []
    for f in TEXT:
        if not f.is_file():
            continue
        for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            for ref in CITED.findall(line):
                if ref.startswith("docs/images") or ref.endswith((".mcap", ".json", ".jsonl")):
                    continue                                  # screenshots are committed; records are outputs
                if not _exists(ref):
                    missing.append(f"{f.relative_to(ROOT)}:{i}: {ref}")
    assert not missing, "references to files that are not in the repository:\n" + "\n".join(missing)


@pytest.mark.parametrize("mod", ["motormind.registry"])
def test_the_registry_imports_no_backend_or_brain_at_module_level(mod):
    path = dict(ALL)[mod]
    bad = [m for m, _, _ in imports(mod, path, top_level_only=True)
           if _under(m, ("motormind.robots", "motormind.sim", "motormind.brains", "motormind.serve",
                         "motormind.console", "motormind.ros"))]
    assert not bad


# -- every import, those inside functions too --------------------------------------------------------------
def _house():
    spec = importlib.util.spec_from_file_location("house", ROOT / "scripts" / "house.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.measure(ROOT, set())


HOUSE = _house()

# (importing file, unit it reaches up to) -> why. Layers are read from module-level imports
# (scripts/house.py), so each of these is an import inside a function.
UPWARD = {
    ("motormind/console/cli.py", "motormind.ros"): "`motormind console --ros` starts the ROS 2 node: rclpy is "
                                                   "imported only then (deferred heavy import); the one upward "
                                                   "import, and with the ROS console node's use of the console's "
                                                   "page and desk the one cycle between units (console <-> ros)",
}

# import cycles between files (every import read) -> why
CYCLES: dict = {}    # none: a new one must be broken, or listed here with why


def test_an_import_reaches_up_a_layer_only_where_it_says_why():
    got = set(HOUSE["upward_files"])
    new = sorted(got - set(UPWARD))
    assert not new, ("imports that reach up a layer (scripts/house.py --details), each must move down or be "
                     "listed in UPWARD with why:\n" + "\n".join(f"{f} -> {u}" for f, u in new))
    stale = sorted(set(UPWARD) - got)
    assert not stale, "UPWARD lists imports that no longer reach up; remove them:\n" + "\n".join(map(str, stale))
    assert all(len(why) > 20 for why in [*UPWARD.values(), *CYCLES.values()])


def test_no_import_cycle_between_files_but_the_listed_ones():
    got = {frozenset(c) for c in HOUSE["file_cycles"]}
    new = [sorted(c) for c in got - set(CYCLES)]
    assert not new, "import cycles between files (scripts/house.py --details):\n" + "\n".join(map(str, new))
    stale = [sorted(c) for c in set(CYCLES) - got]
    assert not stale, "CYCLES lists cycles that are gone; remove them:\n" + "\n".join(map(str, stale))


def test_the_profile_and_the_brains_import_no_registry_and_no_roles():
    """The registry builds brains and servers; the profile sits below it. The brains parse answers
    and render prompts with motormind/answers.py and motormind/prompt_text.py, not the roles'."""
    path = dict(ALL)
    assert not [m for m, _, _ in imports("motormind.profile", path["motormind.profile"])
                if _under(m, ("motormind.registry",))]
    bad = [f"{n}:{line}: {m}" for n in ("motormind.brains.openai_brain", "motormind.brains.probe")
           for m, line, _ in imports(n, path[n]) if _under(m, ("motormind.roles", "motormind.registry"))]
    assert not bad, "\n".join(bad)
