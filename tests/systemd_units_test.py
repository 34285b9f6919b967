"""The service files of packaging/systemd, as systemd reads them: each
unit (a template as one of its instances) passes `systemd-analyze verify`
with its ExecStart pointed at the built tool, with nothing said about it.
Run by ctest (systemd.units) with FEDPROF_CLI at the built tool; skipped
where systemd-analyze is missing."""

import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
UNITS = os.path.join(HERE, "..", "packaging", "systemd")
CLI = os.environ.get("FEDPROF_CLI", os.path.join(HERE, "..", "build", "fedprof"))
ANALYZE = shutil.which("systemd-analyze")
INSTANCES = {"fedprof-node@.service": "fedprof-node@3.service", "fedprof-relay@.service": "fedprof-relay@0.service"}


def installed(tmp_path, name, text=None):
    """Unit `name` as verify reads it, its binary the built one."""
    with open(os.path.join(UNITS, name)) as f:
        unit = f.read() if text is None else text
    path = tmp_path / INSTANCES.get(name, name)
    path.write_text(unit.replace("/usr/local/bin/fedprof", os.path.abspath(CLI)))
    return path


def verify(path):
    done = subprocess.run([ANALYZE, "verify", str(path)], capture_output=True, text=True, timeout=60)
    said = [line for line in (done.stdout + done.stderr).splitlines() if path.name in line or "Unknown" in line]
    return done.returncode, said


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("name", ["fedprof-federation.service", "fedprof-node@.service", "fedprof-relay@.service"])
def test_each_unit_passes_systemd_analyze_verify(tmp_path, name):
    code, said = verify(installed(tmp_path, name))
    assert code == 0 and said == [], said
    with open(os.path.join(UNITS, name)) as f:
        unit = f.read()
    # Each runs the tool as its own user, restarts on failure, stops with SIGTERM.
    for line in ("User=fedprof", "Restart=on-failure", "KillSignal=SIGTERM"):
        assert line in unit, line


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
def test_the_check_finds_a_mistyped_key_and_a_missing_binary(tmp_path):
    with open(os.path.join(UNITS, "fedprof-federation.service")) as f:
        unit = f.read()
    _, said = verify(installed(tmp_path, "fedprof-federation.service", unit.replace("Restart=", "Restartt=")))
    assert any("Unknown key 'Restartt'" in line for line in said), said
    path = tmp_path / "fedprof-federation.service"
    path.write_text(unit.replace("/usr/local/bin/fedprof", "/nonexistent/fedprof"))
    code, said = verify(path)
    assert code != 0 and said, said


def test_every_unit_has_its_settings_file():
    for name, settings in (("fedprof-federation.service", "federation.env"), ("fedprof-node@.service", "node.env"),
                           ("fedprof-relay@.service", "relay.env")):
        with open(os.path.join(UNITS, name)) as f:
            assert f"EnvironmentFile=/etc/fedprof/{settings}" in f.read()
        with open(os.path.join(UNITS, settings)) as f:
            names = {line.split("=")[0] for line in f if "=" in line and not line.startswith("#")}
        with open(os.path.join(UNITS, name)) as f:
            used = {word[2:-1] for word in f.read().replace("}", "} ").split() if word.startswith("${")}
        assert used <= names, used - names
