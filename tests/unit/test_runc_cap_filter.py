"""scripts/runc-cap-filter.py: the runtime wrapper that lets `docker run --privileged` (kind's
nodes) work where the machine's bounding set lacks a capability Docker asks for."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "runc-cap-filter.py"


@pytest.fixture(scope="module")
def wrapper():
    spec = importlib.util.spec_from_file_location("runc_cap_filter", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_capabilities_read_from_the_bounding_set(wrapper, tmp_path):
    status = tmp_path / "status"
    # Every capability up to CAP_CHECKPOINT_RESTORE (40) but CAP_SYS_RESOURCE (24).
    status.write_text("Name:\tx\nCapBnd:\t000001fffeffffff\nCapAmb:\t0\n")
    assert wrapper.missing_capabilities(str(status)) == {"CAP_SYS_RESOURCE"}
    status.write_text("CapBnd:\t000001ffffffffff\n")
    assert wrapper.missing_capabilities(str(status)) == set()


def test_subcommand_found_after_global_options(wrapper):
    argv = ["--root", "/run/runc", "--log", "x.log", "--log-format=json", "--systemd-cgroup",
            "create", "--bundle", "/b", "id"]  # fmt: skip
    index, command = wrapper.split_command(argv)
    assert (index, command) == (6, "create")
    assert wrapper.option_value(argv[index + 1 :], "--bundle", "-b") == "/b"
    assert wrapper.option_value(["-b=/c", "id"], "--bundle", "-b") == "/c"
    assert wrapper.option_value(["id"], "--bundle", "-b") is None


def spec_with(caps):
    kinds = ("bounding", "effective", "permitted", "inheritable", "ambient")
    return {"ociVersion": "1.0.2", "process": {"args": ["sh"], "capabilities": {k: list(caps) for k in kinds}}}  # fmt: skip


def test_create_drops_only_what_the_machine_lacks(wrapper, tmp_path, monkeypatch):
    caps = ["CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"]
    (tmp_path / "config.json").write_text(json.dumps(spec_with(caps)))
    ran = []
    monkeypatch.setattr(wrapper, "missing_capabilities", lambda: {"CAP_SYS_RESOURCE"})
    monkeypatch.setattr(wrapper, "real_runc", lambda: "/usr/sbin/runc")
    monkeypatch.setattr(wrapper.os, "execv", lambda path, args: ran.append(args))
    wrapper.main(["--root", "/r", "create", "--bundle", str(tmp_path), "ctr1"])
    spec = json.loads((tmp_path / "config.json").read_text())
    for names in spec["process"]["capabilities"].values():
        assert names == ["CAP_CHOWN", "CAP_SYS_ADMIN"]
    assert spec["process"]["args"] == ["sh"]
    assert ran == [["/usr/sbin/runc", "--root", "/r", "create", "--bundle", str(tmp_path), "ctr1"]]


def test_exec_filters_the_process_file(wrapper, tmp_path, monkeypatch):
    process = tmp_path / "process.json"
    process.write_text(json.dumps(spec_with(["CAP_SYS_RESOURCE", "CAP_KILL"])["process"]))
    monkeypatch.setattr(wrapper, "missing_capabilities", lambda: {"CAP_SYS_RESOURCE"})
    monkeypatch.setattr(wrapper, "real_runc", lambda: "/usr/sbin/runc")
    monkeypatch.setattr(wrapper.os, "execv", lambda path, args: None)
    wrapper.main(["exec", "--process", str(process), "--detach", "ctr1"])
    assert json.loads(process.read_text())["capabilities"]["effective"] == ["CAP_KILL"]


def test_other_commands_pass_through_untouched(wrapper, tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text(json.dumps(spec_with(["CAP_SYS_RESOURCE"])))
    before = (tmp_path / "config.json").read_text()
    ran = []
    monkeypatch.setattr(wrapper, "missing_capabilities", lambda: {"CAP_SYS_RESOURCE"})
    monkeypatch.setattr(wrapper, "real_runc", lambda: "/usr/sbin/runc")
    monkeypatch.setattr(wrapper.os, "execv", lambda path, args: ran.append(args))
    monkeypatch.chdir(tmp_path)
    wrapper.main(["state", "ctr1"])
    assert (tmp_path / "config.json").read_text() == before
    assert ran == [["/usr/sbin/runc", "state", "ctr1"]]
