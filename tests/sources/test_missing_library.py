"""A source whose broker library is not installed is reported as such; a module of hookwise's
own that fails to import is never taken for a missing library (it is raised, not swallowed)."""

from __future__ import annotations

import importlib

import pytest

from hookwise.server.sources.manager import missing_library


def _import_error(statement: str) -> ImportError:
    with pytest.raises(ImportError) as caught:
        exec(statement, {})
    return caught.value


def test_a_broker_library_that_is_not_installed_is_a_missing_library():
    error = _import_error("import hookwise_no_such_broker_client")
    assert isinstance(error, ModuleNotFoundError)
    assert missing_library(error)
    assert missing_library(_import_error("from hookwise_no_such_broker_client.sub import X"))


@pytest.mark.parametrize(
    "statement",
    [
        "from hookwise.server.sources import no_such_module",
        "from hookwise.server.sources.core import NoSuchName",
        "import hookwise.server.sources.no_such_module",
    ],
)
def test_a_module_of_hookwise_s_own_that_fails_to_import_is_not_a_missing_library(statement: str):
    importlib.import_module("hookwise.server.sources.core")
    assert not missing_library(_import_error(statement))
