"""Install this checkout into a venv with uv, from the package sources pip is configured with.

    python scripts/uv_install.py UV VENV_PYTHON EXTRAS

scripts/setup.sh uses it: uv installs the same pinned packages as pip in a fraction of the
time (it unpacks wheels on every core and links them from its cache), but it reads neither
pip's configuration files nor its PIP_* variables. A machine whose pip is pointed at a local
mirror, extra indexes, find-links folders, constraints or a certificate bundle must get the
same from uv, or uv would install other files than pip would, or none. This reads pip's own
view of its configuration (`pip config list`) and passes it on:

    index-url        --index-url        extra-index-url  --extra-index-url (each)
    find-links       --find-links (each) no-index        --no-index
    constraint       --constraint (each) cert            SSL_CERT_FILE, unless already set

and `--index-strategy unsafe-best-match`, pip's rule of taking the best version among all
indexes (uv's default stops at the first index that has a package). Other pip options
(timeouts, the version check) change nothing that is installed. Standard library only; exit
status: uv's, or 2 when pip's configuration cannot be read.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Sequence

#: Where pip reads an option, the first that sets it wins (environment, the install
#: command's section, the global section).
_PRECEDENCE = (":env:", "install", "global")
_SINGLE = {"index-url": "--index-url"}
_EACH = {"extra-index-url": "--extra-index-url", "find-links": "--find-links",
         "constraint": "--constraint"}


def pip_options(listing: str) -> dict[str, str]:
    """`pip config list` output -> {option: value}, each option from its winning section."""
    found: dict[str, dict[str, str]] = {}
    for line in listing.splitlines():
        key, sep, raw = line.partition("=")
        section, dot, option = key.strip().rpartition(".")
        if not sep or not dot:
            continue
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            continue
        found.setdefault(option, {})[section] = str(value)
    options = {}
    for option, by_section in found.items():
        for section in _PRECEDENCE:
            if section in by_section:
                options[option] = by_section[section]
                break
    return options


def uv_arguments(options: dict[str, str]) -> list[str]:
    """The uv options that install from the same sources pip would."""
    arguments = ["--index-strategy", "unsafe-best-match"]
    for option, flag in _SINGLE.items():
        if options.get(option):
            arguments += [flag, options[option]]
    for option, flag in _EACH.items():
        for value in options.get(option, "").split():
            arguments += [flag, value]
    if options.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        arguments.append("--no-index")
    return arguments


def uv_environment(options: dict[str, str], environ: dict[str, str]) -> dict[str, str]:
    """The environment uv runs in: pip's certificate bundle, unless one is already named."""
    environment = dict(environ)
    if options.get("cert") and not environment.get("SSL_CERT_FILE"):
        environment["SSL_CERT_FILE"] = options["cert"]
    return environment


def main(argv: Sequence[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    uv, python, extras = argv
    listing = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True,
                             text=True)
    if listing.returncode != 0:
        print(f"uv_install.py: cannot read pip's configuration: {listing.stderr.strip()}",
              file=sys.stderr)
        return 2
    options = pip_options(listing.stdout)
    command = [uv, "pip", "install", "--quiet", "--python", python, *uv_arguments(options),
               "-e", f".[{extras}]" if extras else "."]
    return subprocess.run(command, env=uv_environment(options, dict(os.environ))).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
