"""The package as a ROS 2 workspace's colcon (ament_python) and pip see it: pyproject.toml,
setup.py, setup.cfg and package.xml describe one package, readable by the setuptools at hand
(colcon runs setup.py with the system's setuptools, 68.1 on ROS 2 Jazzy, not the build requirement)."""
import ast
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from motormind.ros.graph import EXECUTABLES

ROOT = Path(__file__).resolve().parents[2]

# what colcon-python-setup-py runs to read an ament_python package (its package identification)
COLCON_READ = """
import sys
from distutils.core import run_setup
dist = run_setup('setup.py', script_args=('--dry-run',), stop_after='config')
data = {k: v for k, v in dist.__dict__.items()
        if not k.startswith('_') and not callable(v) and k not in ('cmdclass', 'distclass', 'ext_modules', 'metadata')
        and k not in dist.display_option_names}
data['metadata'] = {k: v for k, v in dist.metadata.__dict__.items() if k not in ('license_files', 'provides_extras')}
data['install_scripts'] = dist.get_option_dict('install').get('install_scripts', (None, None))[1]
data['develop_script_dir'] = dist.get_option_dict('develop').get('script_dir', (None, None))[1]
sys.stdout.write(repr(data))
"""


def _package_xml() -> dict:
    root = ET.parse(ROOT / "package.xml").getroot()
    return {k: root.findtext(k) for k in ("name", "version", "license")} | {
        "build_type": root.findtext("export/build_type")}


def test_pyproject_and_package_xml_describe_one_package():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    xml = _package_xml()
    assert (project["name"], project["version"]) == (xml["name"], xml["version"])
    # setuptools 61-76 accept only the table form; a plain SPDX string needs 77 (PEP 639)
    assert project["license"] == {"text": xml["license"]}
    assert xml["build_type"] == "ament_python"


def test_every_python_package_of_the_checkout_is_installed():
    """A wheel (or a colcon build) installs only the packages pyproject.toml lists: a new sub-package
    missing there works in an editable install and is absent from a real one."""
    tomllib = pytest.importorskip("tomllib")
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(tool["packages"])
    found = set()
    for name, folder in tool["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *rel)))
    assert found - listed == set(), "packages missing from pyproject.toml [tool.setuptools] packages"


def test_setup_py_reads_as_colcon_reads_it():
    p = subprocess.run([sys.executable, "-c", COLCON_READ], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    data = ast.literal_eval(p.stdout)              # colcon reads it back this way: plain literals only
    xml = _package_xml()
    meta = data["metadata"]
    assert (meta["name"], meta["version"], meta["license"]) == (xml["name"], xml["version"], xml["license"])
    scripts = {e.split("=")[0].strip() for e in data["entry_points"]["console_scripts"]}
    assert set(EXECUTABLES.values()) <= scripts
    # executables where `ros2 run` / `ros2 launch` look, and the share/ files colcon installs
    assert data["install_scripts"] == data["develop_script_dir"] == "$base/lib/motormind"
    files = {dest: srcs for dest, srcs in data["data_files"]}
    assert files["share/ament_index/resource_index/packages"] == ["resource/motormind"]
    assert files["share/motormind"] == ["package.xml"]
    assert sorted(files["share/motormind/launch"]) == ["launch/sim.launch.py", "launch/xarm6.launch.py"]
    for srcs in files.values():
        assert all((ROOT / s).is_file() for s in srcs), srcs
