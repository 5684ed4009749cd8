"""bench/kernel_settings.py: what a bench run changes in the kernel goes back after it, also
when the harness was killed with SIGKILL (the next run puts it back). Plain files stand in for
/proc/sys and /sys here; the suite must not change the machine's own settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import kernel_settings  # noqa: E402

HOLD = """
import sys, time
from pathlib import Path
import kernel_settings as k
setting = Path(sys.argv[1])
with k._held({setting: "11"}, {setting: "9"}):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # where the module run with TMPDIR=tmp_path keeps it too
    monkeypatch.setattr(kernel_settings, "JOURNAL", tmp_path / kernel_settings.JOURNAL.name)
    path = tmp_path / "page_reporting_order"
    path.write_text("9")
    return path


def test_a_held_setting_goes_back_after_the_block(setting: Path) -> None:
    with kernel_settings._held({setting: "11"}, {setting: "9"}):
        assert setting.read_text() == "11"
        assert json.loads(kernel_settings.JOURNAL.read_text())["restore"] == {str(setting): "9"}
    assert setting.read_text() == "9"
    assert not kernel_settings.JOURNAL.exists()


def test_a_run_killed_with_sigkill_has_its_settings_put_back_by_the_next(
    setting: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(BENCH)}
    held = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(setting)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert held.stdout is not None and held.stdout.readline() == "held\n"
        assert setting.read_text() == "11"
    finally:
        held.send_signal(signal.SIGKILL)
        held.wait(30)
    assert setting.read_text() == "11"  # no `finally` ran
    kernel_settings.restore_left_behind()
    assert setting.read_text() == "9"
    assert not kernel_settings.JOURNAL.exists()
    assert "page_reporting_order=9" in capsys.readouterr().out


def test_a_journal_of_another_boot_is_left_alone(setting: Path) -> None:
    """A reboot resets the settings itself: what a run before it left must not be written now."""
    setting.write_text("7")
    kernel_settings.JOURNAL.write_text(
        json.dumps({"boot": "an-earlier-boot", "restore": {str(setting): "9"}})
    )
    kernel_settings.restore_left_behind()
    assert setting.read_text() == "7"


def test_a_setting_that_cannot_be_written_leaves_no_journal(setting: Path) -> None:
    missing = setting.parent / "no-such-dir" / "dirty_ratio"
    with pytest.raises(OSError), kernel_settings._held({missing: "60"}, {missing: "20"}):
        pass
    assert not kernel_settings.JOURNAL.exists()


def test_free_memory_is_touched_only_while_reporting_is_off(
    setting: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel_settings, "PAGE_REPORTING_ORDER", setting)
    # a little more than what stays untouched: each worker populates a few MiB for real
    monkeypatch.setattr(
        kernel_settings, "free_memory_bytes", lambda: kernel_settings.UNTOUCHED_BYTES + (8 << 20)
    )
    meta: dict = {}
    kernel_settings.fault_in_free_memory(meta)
    assert meta["memory_touched"].startswith("no (free page reporting is on")
    setting.write_text("11")  # above the largest order of /proc/buddyinfo (10)
    kernel_settings.fault_in_free_memory(meta)
    assert meta["memory_touched"].startswith("0.0 GB in ")
    assert "failed" not in meta["memory_touched"]


def test_a_running_kdamond_is_stopped_for_the_run_and_started_after(
    setting: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = tmp_path / "kdamonds"
    for name, state in (("0", "on"), ("1", "off")):
        (admin / name).mkdir(parents=True)
        (admin / name / "state").write_text(f"{state}\n")
    monkeypatch.setattr(kernel_settings, "DAMON_ADMIN", admin)
    meta: dict = {}
    with kernel_settings.damon_held(meta):
        assert (admin / "0" / "state").read_text() == "off"
        assert (admin / "1" / "state").read_text() == "off\n"
    assert (admin / "0" / "state").read_text() == "on"
    assert (admin / "1" / "state").read_text() == "off\n"
    assert meta["damon"] == "stopped for the run (kdamond.0)"
    assert not kernel_settings.JOURNAL.exists()


def test_a_kernel_without_damon_is_said_and_left_alone(
    setting: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel_settings, "DAMON_ADMIN", tmp_path / "no-damon")
    meta: dict = {}
    with kernel_settings.damon_held(meta):
        pass
    assert meta["damon"] == "not in this kernel"
