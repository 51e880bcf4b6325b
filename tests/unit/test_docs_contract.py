"""The repository's docs are the contracts: nothing cites the design notes outside it.

docs/language.md and docs/backends/protocol.md are the complete contracts; code, configs,
docs and tests cite them by section number. These tests fail when a file cites the design
notes that live outside the repository, when a cited section does not exist, and when the
dummy backend prints a key that docs/backends/protocol.md does not name.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROTOCOL = REPO / "docs" / "backends" / "protocol.md"
DUMMY = REPO / "python" / "dummy_benchmarks" / "benchmarks.py"

# Written in pieces so that this file does not cite what it forbids.
_OUTSIDE = re.compile(
    rb"\b(?:LANGUAGE|BACKENDS)\.md\b"
    rb"|DLBS-" rb"REFERENCE"
    rb"|shared/" rb"design"
    rb"|\.\./shared/"
)
# "docs/language.md section 4", "[protocol.md](protocol.md) sections 4 and 5", ...
_SECTION_CITE = re.compile(
    r"\b(language|protocol)\.md\)?,?\s+(sections?)\s+(\d+(?:(?:,\s+|\s+and\s+|,\s+and\s+)\d+)*)"
)
_DOCS = {"language": REPO / "docs" / "language.md", "protocol": PROTOCOL}
_PROTOCOL_KEY = re.compile(r"^__(?P<key>[A-Za-z0-9_.\-]+?)__=", re.MULTILINE)


def repository_files() -> list[Path]:
    """Every file of the checkout that git tracks or would track (not ignored), as it is now."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO, capture_output=True, check=False, timeout=60,
    )
    assert listed.returncode == 0, f"git ls-files failed: {listed.stderr.decode(errors='replace')}"
    files = []
    for name in listed.stdout.decode().split("\0"):
        path = REPO / name
        # A file deleted or moved in the working tree is still in the index: skip it.
        if name and not name.startswith((".venv/", ".git/")) and path.is_file():
            files.append(path)
    return files


def section_numbers(doc: Path) -> set[int]:
    """The numbers of a doc's `## N. Title` sections."""
    return {int(n) for n in re.findall(r"^## (\d+)\. ", doc.read_text(), re.MULTILINE)}


def test_the_files_are_found() -> None:
    files = {path.relative_to(REPO).as_posix() for path in repository_files()}
    assert {"docs/language.md", "docs/backends/protocol.md", "pyproject.toml",
            "tests/unit/test_docs_contract.py"} <= files


def test_no_file_cites_the_design_notes_outside_the_repository() -> None:
    found = []
    for path in repository_files():
        data = path.read_bytes()
        for match in _OUTSIDE.finditer(data):
            line = data.count(b"\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(REPO)}:{line}: {match.group().decode()}")
    assert not found, (
        "cite docs/language.md or docs/backends/protocol.md (with the section) instead:\n"
        + "\n".join(found))


def test_the_contracts_number_their_sections_in_order() -> None:
    for doc in _DOCS.values():
        numbers = re.findall(r"^## (\d+)\. ", doc.read_text(), re.MULTILINE)
        assert [int(n) for n in numbers] == list(range(1, len(numbers) + 1)), doc
        assert len(numbers) >= 9, doc


def test_every_cited_section_exists() -> None:
    sections = {name: section_numbers(doc) for name, doc in _DOCS.items()}
    cited = 0
    missing = []
    for path in repository_files():
        if path.suffix not in (".py", ".md", ".yaml", ".yml", ".json", ".toml", ".sh"):
            continue
        text = path.read_text(errors="replace")
        for match in _SECTION_CITE.finditer(text):
            doc = match.group(1)
            for number in map(int, re.findall(r"\d+", match.group(3))):
                cited += 1
                if number not in sections[doc]:
                    line = text.count("\n", 0, match.start()) + 1
                    missing.append(f"{path.relative_to(REPO)}:{line}: {doc}.md section {number}")
    assert cited > 10  # the code does cite the contracts by section
    assert not missing, "cited sections that do not exist:\n" + "\n".join(missing)


def _section(doc: Path, number: int) -> str:
    text = doc.read_text()
    start = re.search(rf"^## {number}\. ", text, re.MULTILINE)
    assert start is not None, f"{doc} has no section {number}"
    end = re.search(r"^## \d+\. ", text[start.end():], re.MULTILINE)
    return text[start.start():start.end() + end.start()] if end else text[start.start():]


def dummy_keys(*flags: str) -> tuple[dict[str, str], str]:
    """The keys the dummy backend prints with `flags` (key -> raw value), and its stdout."""
    run = subprocess.run(
        [sys.executable, str(DUMMY), "--model", "resnet50", "--batch_size", "2",
         "--num_batches", "2", "--num_warmup_batches", "1", "--sleep", "0.001", *flags],
        capture_output=True, text=True, timeout=120, check=False,
    )
    keys = {}
    for line in run.stdout.splitlines():
        match = _PROTOCOL_KEY.match(line)
        if match:
            keys[match.group("key")] = line[match.end():]
    return keys, run.stdout


@pytest.mark.parametrize(("flags", "status"), [((), '"ok"'), (("--fail", "exit"), '"failure"')])
def test_protocol_names_every_key_the_dummy_backend_prints(flags: tuple[str, ...],
                                                           status: str) -> None:
    keys, stdout = dummy_keys(*flags)
    assert keys.get("results.status") == status, stdout
    if status == '"ok"':
        assert {"results.time", "results.throughput", "results.time_data"} <= set(keys), stdout
    else:
        assert "results.status_msg" in keys, stdout
    key_table = _section(PROTOCOL, 4)
    unnamed = sorted(key for key in keys if f"`{key}`" not in key_table)
    assert not unnamed, (
        f"docs/backends/protocol.md section 4 does not name {unnamed}; document each key the "
        f"backends print there")
