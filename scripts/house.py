"""Measure the house: how MotorMind's own modules import each other, read from the source (nothing is run).

    .venv/bin/python scripts/house.py [ROOT] [--look-into brains,sim] [--details]

ROOT is a checkout (default: this one), so an old commit is measured from a worktree:
``git worktree add /tmp/wt 786adb4 && python scripts/house.py /tmp/wt``.

What is counted, and how:

* **files**: every ``.py`` file of the installed package: ``motormind/``, ``robots/`` (installed as
  ``motormind.robots``) and ``sim/`` (``motormind.sim``); tests, scripts and launch files are not.
* **units**: each module directly in ``motormind/`` (``profile.py``, ``registry.py``, ...) is one unit,
  each folder directly in it (``brains/``, ``roles/``, ``serve/``, ...) is one unit, and ``robots/``
  and ``sim/`` are one unit each: folders are counted as units until looked into. ``--look-into
  brains,sim`` looks into those folders: each of their modules and sub-folders becomes a unit.
  ``motormind/__init__.py`` is a unit of its own (``motormind``).
* **import edges**: ordered pairs of distinct units (A, B) where some file of A imports some module
  of B, at any depth: at module level or inside a function. ``from .x import name`` is an import of
  ``x.name`` where that is a module, else of ``x`` (so ``from . import motion`` in a package imports
  ``motion``, not the package's ``__init__``); third-party and standard-library imports are not edges.
* **import layers**: read from module-level imports only (an import in the module body, or in the
  bodies of its ``if``/``try`` blocks): a unit that imports no other unit at module level is in
  layer 0, any other is one layer above the highest unit it imports; units that import each other
  at module level share a layer. The number of layers is printed.
* **upward edges**: import edges (any depth) from a unit to a unit in a higher layer: a dependency
  that the module-level layering does not show, an import hidden in a function that reaches up.
* **cycles between units**: groups of more than one unit that all reach each other through import
  edges (strongly connected components of the unit graph, every import counted).
* **cycles between files**: the same on the graph of files (every import counted), e.g. the 12-file
  cycle of issue 35 (registry -> serve/server -> ... -> profile -> registry). ``--details`` lists them.
* **imports inside functions**: ``import`` / ``from ... import`` statements of the project's own
  modules (``motormind``, relative) that are not at module level, and the files holding them; the
  number with third-party and standard-library imports included is printed beside it.
* **files over 400 lines**, **functions over 50 lines** (``def`` to its last line; methods and nested
  functions each count).
"""
from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

PACKAGES = {"motormind": "motormind", "motormind.robots": "robots", "motormind.sim": "sim"}
BIG_FILE, BIG_FUNCTION = 400, 50


def modules(root: Path) -> dict[str, Path]:
    """dotted name (installed) -> path, for every module of the package."""
    out = {}
    for pkg, folder in PACKAGES.items():
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("")
            if "__pycache__" in path.parts or (pkg == "motormind" and rel.parts[0] in ("robots", "sim")):
                continue
            out[".".join([pkg, *(p for p in rel.parts if p != "__init__")])] = path
    return out


def module_level(tree: ast.Module) -> set[int]:
    """ids of the nodes at module level: the body, and the bodies of its ifs and trys."""
    top, stack = set(), list(tree.body)
    while stack:
        n = stack.pop()
        top.add(id(n))
        if isinstance(n, (ast.If, ast.Try)):
            stack.extend(n.body + n.orelse + n.finalbody if isinstance(n, ast.Try) else n.body + n.orelse)
            stack.extend(x for h in getattr(n, "handlers", []) for x in h.body)
    return top


def imports(name: str, path: Path, tree: ast.Module):
    """(node, [imported dotted names], is it at module level, is it the project's own) per import statement."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    top = module_level(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
            own = any(n == "motormind" or n.startswith("motormind.") for n in names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [f"{mod}.{a.name}" for a in node.names]     # resolved to mod.name, else mod
            own = bool(node.level) or mod == "motormind" or mod.startswith("motormind.")
        else:
            continue
        yield node, names, id(node) in top, own


def resolve(name: str, mods) -> str | None:
    """The module ``name`` imports: itself, or its longest prefix that is a module (x.y.func -> x.y)."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in mods:
            return ".".join(parts)
        parts.pop()
    return None


def unit_of(mod: str, look_into: set[str]) -> str:
    parts = mod.split(".")
    depth = 2                                         # motormind.X: a module or a folder of motormind/
    while len(parts) > depth and ".".join(parts[1:depth]).replace(".", "/") in look_into:
        depth += 1
    return ".".join(parts[:depth])


def components(nodes, edges) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative), each a sorted list."""
    succ = defaultdict(set)
    for a, b in edges:
        succ[a].add(b)
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def layers(nodes, edges) -> dict[str, int]:
    """Layer of each node: 0 for one that imports nothing, else 1 + the highest it imports; a
    strongly connected group shares one layer."""
    comps = components(nodes, edges)
    comp_of = {n: i for i, c in enumerate(comps) for n in c}
    below = defaultdict(set)
    for a, b in edges:
        if comp_of[a] != comp_of[b]:
            below[comp_of[a]].add(comp_of[b])
    layer: dict[int, int] = {}
    for i in range(len(comps)):                      # Tarjan emits a component after all it reaches
        layer[i] = 1 + max((layer[j] for j in below[i]), default=-1)
    return {n: layer[comp_of[n]] for n in nodes}


def measure(root: Path, look_into: set[str]) -> dict:
    mods = modules(root)
    unit = {m: unit_of(m, look_into) for m in mods}
    units = set(unit.values())
    unit_edges, top_edges, file_edges, sites = set(), set(), set(), set()
    inside, inside_all, inside_files, big_files, big_functions = 0, 0, set(), [], []
    for name, path in mods.items():
        src = path.read_text()
        tree = ast.parse(src, str(path))
        if len(src.splitlines()) > BIG_FILE:
            big_files.append((len(src.splitlines()), name))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > BIG_FUNCTION:
                    big_functions.append((n, f"{name}:{node.name}"))
        for node, names, at_top, own in imports(name, path, tree):
            if not at_top:
                inside_all += 1
                if own:
                    inside += 1
                    inside_files.add(name)
            for imported in names:
                target = resolve(imported, mods)
                if target is None or target == name:
                    continue
                file_edges.add((name, target))
                a, b = unit[name], unit[target]
                if a != b:
                    unit_edges.add((a, b))
                    sites.add((path.relative_to(root).as_posix(), a, b))
                    if at_top:
                        top_edges.add((a, b))
    layer = layers(units, top_edges)
    upward = sorted((a, b) for a, b in unit_edges if layer[b] > layer[a])
    upward_files = sorted((f, b) for f, a, b in sites if layer[b] > layer[a])   # (importing file, unit above)
    return {
        "units": units, "edges": unit_edges, "layer": layer, "upward": upward, "upward_files": upward_files,
        "unit_cycles": [c for c in components(units, unit_edges) if len(c) > 1],
        "file_cycles": [c for c in components(set(mods), file_edges) if len(c) > 1],
        "inside": inside, "inside_all": inside_all, "inside_files": sorted(inside_files),
        "big_files": sorted(big_files, reverse=True), "big_functions": sorted(big_functions, reverse=True),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parents[1]),
                    help="a checkout of the repository (default: this one)")
    ap.add_argument("--look-into", default="", help="folders to count file by file, comma-separated: brains,sim/xarm_cell")
    ap.add_argument("--details", action="store_true", help="list the upward edges, the cycles and the big files")
    args = ap.parse_args(argv)
    root = Path(args.root)
    if not (root / "motormind").is_dir():
        ap.error(f"root: {root} has no motormind/ folder")
    m = measure(root, {s.strip().strip("/") for s in args.look_into.split(",") if s.strip()})
    rows = [
        ("units", len(m["units"])),
        ("import layers (module-level imports)", 1 + max(m["layer"].values())),
        ("import edges between units (every import)", len(m["edges"])),
        ("edges from a lower layer up to a higher one", len(m["upward"])),
        ("cycles between units", f"{len(m['unit_cycles'])} ({', '.join(str(len(c)) for c in m['unit_cycles']) or '-'} units)"),
        ("cycles between files", f"{len(m['file_cycles'])} ({', '.join(str(len(c)) for c in m['file_cycles']) or '-'} files)"),
        ("project imports inside functions", f"{m['inside']} in {len(m['inside_files'])} files "
                                             f"({m['inside_all']} with third-party ones)"),
        (f"files over {BIG_FILE} lines", len(m["big_files"])),
        (f"functions over {BIG_FUNCTION} lines", len(m["big_functions"])),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"house of {root}" + (f" (looked into: {args.look_into})" if args.look_into else ""))
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")
    if args.details:
        print("\nupward edges (layer -> layer):")
        for a, b in m["upward"]:
            print(f"  {a} ({m['layer'][a]}) -> {b} ({m['layer'][b]})")
        for what in ("unit_cycles", "file_cycles"):
            print(f"\n{what.replace('_', ' ')}:")
            for c in m[what]:
                print(f"  {len(c)}: {', '.join(c)}")
        print("\nlayers:")
        by = defaultdict(list)
        for u, n in m["layer"].items():
            by[n].append(u)
        for n in sorted(by):
            print(f"  {n}: {', '.join(sorted(by[n]))}")
        print(f"\nfiles over {BIG_FILE} lines:", ", ".join(f"{n} ({k})" for k, n in m["big_files"]))
        print(f"functions over {BIG_FUNCTION} lines:", ", ".join(f"{n} ({k})" for k, n in m["big_functions"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
