"""The default configs parse to the same value with libyaml's parser as with the pure one.

Every `dlbs` command reads all of them, so they are parsed by ruamel.yaml.clib (a pinned
dependency); the pure-Python parser, which reads every other spec, stays the reference.
"""

from __future__ import annotations

import pytest
import ruamel.yaml.main
from ruamel.yaml import YAML

from dlbs.config.documents import parse_document
from dlbs.config.loader import default_config_files


def test_the_c_parser_is_installed():
    assert ruamel.yaml.main.CParser is not None, "ruamel.yaml.clib is a dependency"


@pytest.mark.parametrize("path", default_config_files(), ids=lambda path: path.name)
def test_each_default_config_parses_as_the_pure_parser_reads_it(path):
    text = path.read_text()
    fast = parse_document(path, path.read_bytes(), default_config=True)
    assert fast == YAML(typ="safe", pure=True).load(text)
    assert repr(fast) == repr(parse_document(path, path.read_bytes()))  # types and order too


def test_an_error_in_a_default_config_is_the_pure_parsers(tmp_path):
    broken = tmp_path / "00-base.yaml"
    broken.write_text("parameters:\n  a: [1, 2\n  b: 3\n")
    with pytest.raises(Exception) as fast:
        parse_document(broken, broken.read_bytes(), default_config=True)
    with pytest.raises(Exception) as pure:
        parse_document(broken, broken.read_bytes())
    assert str(fast.value) == str(pure.value) and type(fast.value) is type(pure.value)
