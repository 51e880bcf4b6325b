"""scripts/uv_install.py: uv gets the package sources pip is configured with, and nothing else."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "uv_install.py"
_spec = importlib.util.spec_from_file_location("uv_install", SCRIPT)
uv_install = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uv_install)

# What `pip config list` printed on the machine the suite is timed on.
LISTING = """\
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/wheels'
"""


def test_the_mirror_indexes_find_links_and_constraints_reach_uv():
    options = uv_install.pip_options(LISTING)
    assert uv_install.uv_arguments(options) == [
        "--index-strategy", "unsafe-best-match",
        "--extra-index-url", "file:///opt/pypi/simple",
        "--extra-index-url", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels",
        "--constraint", "/etc/xdg/pip/constraints.txt"]


def test_the_environment_wins_over_the_install_section_over_the_global_one():
    listing = ("global.index-url='https://a.example/simple'\n"
               "install.index-url='https://b.example/simple'\n"
               "global.find-links='/global'\n"
               ":env:.find-links='/env/one\\n/env/two'\n"
               ":env:.no-index='true'\n")
    arguments = uv_install.uv_arguments(uv_install.pip_options(listing))
    assert arguments == ["--index-strategy", "unsafe-best-match",
                         "--index-url", "https://b.example/simple",
                         "--find-links", "/env/one", "--find-links", "/env/two", "--no-index"]


@pytest.mark.parametrize("line", ["", "no equals sign", "global.index-url=not-a-literal",
                                  "novalue=", "=''"])
def test_lines_pip_did_not_write_are_ignored(line):
    assert uv_install.uv_arguments(uv_install.pip_options(line)) == [
        "--index-strategy", "unsafe-best-match"]


def test_pips_certificate_bundle_is_used_unless_one_is_named_already():
    options = {"cert": "/etc/pip-bundle.pem"}
    assert uv_install.uv_environment(options, {})["SSL_CERT_FILE"] == "/etc/pip-bundle.pem"
    named = {"SSL_CERT_FILE": "/etc/mine.pem"}
    assert uv_install.uv_environment(options, named)["SSL_CERT_FILE"] == "/etc/mine.pem"
    assert "SSL_CERT_FILE" not in uv_install.uv_environment({}, {})


def test_it_runs_uv_with_those_arguments_and_returns_its_status(tmp_path):
    # A stand-in uv that records its command line and fails: the status comes back.
    fake_uv = tmp_path / "uv"
    record = tmp_path / "argv"
    fake_uv.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}\nexit 3\n")
    fake_uv.chmod(0o755)
    done = subprocess.run([sys.executable, str(SCRIPT), str(fake_uv), sys.executable, "test"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    argv = record.read_text().splitlines()
    assert argv[:5] == ["pip", "install", "--quiet", "--python", sys.executable]
    assert argv[-2:] == ["-e", ".[test]"]
    assert "unsafe-best-match" in argv


def test_a_wrong_command_line_is_one_usage_line():
    done = subprocess.run([sys.executable, str(SCRIPT), "uv"], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == "python scripts/uv_install.py UV VENV_PYTHON EXTRAS"
