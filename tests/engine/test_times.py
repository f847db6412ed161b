"""The one epoch-to-ISO formatter, in the three forms hookwise writes."""

from __future__ import annotations

from hookwise.engine.times import iso_utc

T = 1_795_000_000.987_654  # 2026-11-18T11:06:40.987654Z


def test_the_api_and_log_form_has_milliseconds_truncated_and_z() -> None:
    assert iso_utc(T) == "2026-11-18T11:06:40.987Z"
    assert iso_utc(0) == "1970-01-01T00:00:00.000Z"


def test_the_console_and_prompt_forms() -> None:
    assert iso_utc(T, sep=" ", timespec="seconds") == "2026-11-18 11:06:40Z"
    assert iso_utc(T, sep=" ", timespec="seconds", suffix=" UTC") == "2026-11-18 11:06:40 UTC"
