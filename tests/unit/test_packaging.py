"""The distribution installs `broker/` as odradek.broker, `operator/odradek_operator/` as
odradek.operator and `pipelines/` as odradek.pipelines, and nothing in the repository root
shadows a module of Python's own."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

IMPORT_ALL = """
import importlib, pkgutil, sys
import odradek.broker, odradek.operator
for info in pkgutil.walk_packages(odradek.broker.__path__, 'odradek.broker.'):
    importlib.import_module(info.name)
print(odradek.broker.__file__)
print(odradek.operator.__file__)
"""


def _sub_packages(top: Path) -> set[str]:
    return {str(p.parent.relative_to(top)) for p in top.rglob("__init__.py")}


def test_editable_install_imports_every_module(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == str(ROOT / "broker" / "__init__.py")
    assert out[1] == str(ROOT / "operator" / "odradek_operator" / "__init__.py")


BARE_IMPORTS = """
import sys
if sys.flags.no_site:  # nothing imported yet: the venv's packages come after the current directory
    import site
    site.addsitedir(sys.argv[1])
import operator, confluent_kafka, kopf, odradek.broker.cli, odradek.operator.main
print(operator.__file__)
"""


@pytest.mark.parametrize("flags", [[], ["-S"]], ids=["plain", "no-early-imports"])
def test_bare_interpreter_in_repository_root_imports_clients_and_project(flags: list[str]) -> None:
    """`python -c` (like `python -`, a REPL or a notebook) puts the current directory first on
    sys.path: started in the repository root, it must still find the standard library's
    `operator`, which confluent-kafka and kopf import. With -S the venv's site-packages are
    added only after the current directory is on sys.path, so no early import of the real
    `operator` (the editable install's finder makes one) can hide a shadowing directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    site_packages = next(p for p in sys.path if p.endswith("site-packages"))
    proc = subprocess.run(
        [sys.executable, *flags, "-c", BARE_IMPORTS, site_packages],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert not proc.stdout.strip().startswith(str(ROOT)), proc.stdout  # Python's own operator


def test_wheel_contains_every_package_and_imports(tmp_path: Path) -> None:
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    # `make install` stays quiet: the build itself warns about nothing (license form, ...).
    assert "Warning" not in built.stderr, built.stderr
    wheel = next((tmp_path / "dist").glob("odradek-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        zf.extractall(tmp_path / "site")
    for package in _sub_packages(ROOT / "broker"):
        prefix = "odradek/broker" if package == "." else f"odradek/broker/{package}"
        assert f"{prefix}/__init__.py" in names, f"{package} missing from the wheel"
    assert "odradek/operator/__init__.py" in names
    assert "odradek/pipelines/offline_load.py" in names
    # The API schemas are package data, not modules: every one must be in the wheel.
    schemas = {p.name for p in (ROOT / "broker" / "protocol" / "messages").glob("*.json")}
    assert schemas and {f"odradek/broker/protocol/messages/{n}" for n in schemas} <= names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "odradek = odradek.broker.cli:main" in (tmp_path / "site" / entry_points).read_text()
    # -S keeps the editable install's finder out; the venv's site-packages still gives the deps.
    site_packages = next(p for p in sys.path if p.endswith("site-packages"))
    out = subprocess.run(
        [sys.executable, "-S", "-c", IMPORT_ALL],
        cwd=tmp_path,
        env={"PYTHONPATH": f"{tmp_path / 'site'}:{site_packages}"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0] == str(tmp_path / "site" / "odradek" / "broker" / "__init__.py")
    assert out[1] == str(tmp_path / "site" / "odradek" / "operator" / "__init__.py")
