"""The channel registry: built-ins, the Mattermost plugin through entry points, config errors."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

from hookwise.engine.errors import ConfigError
from hookwise.server.channels import available_channels, canonical_id, load_channels
from hookwise.server.channels.base import Channel
from hookwise.server.channels.registry import BUILTIN

REPO = Path(__file__).resolve().parents[2]

TELEGRAM = {"botToken": "123:abc"}
SLACK = {"botToken": "xoxb-1"}
TEAMS = {"appId": "a", "appPassword": "p", "tenantId": "t"}


def test_eleven_channels_are_known_ten_of_them_built_in():
    specs = available_channels()
    assert sorted(specs) == sorted(
        [
            "whatsapp",
            "telegram",
            "discord",
            "slack",
            "mattermost",
            "signal",
            "imessage",
            "msteams",
            "webhook",
            "github",
            "gitlab",
        ]
    )
    assert {cid for cid, s in specs.items() if s.origin == "builtin"} == set(BUILTIN)
    assert "mattermost" not in BUILTIN


def test_mattermost_comes_from_its_entry_point_in_a_separate_distribution():
    spec = available_channels()["mattermost"]
    assert spec.origin == "plugin"
    assert spec.entry_point == "hookwise_mattermost:MattermostChannel"
    assert spec.distribution == "hookwise-mattermost"
    (ep,) = entry_points(group="hookwise.channels", name="mattermost")
    channel = load_channels({"mattermost": {"botToken": "t", "baseUrl": "http://127.0.0.1:1"}})
    cls = type(channel["mattermost"])
    assert cls is ep.load()
    assert cls.__module__ == "hookwise_mattermost"
    module_file = Path(__import__("hookwise_mattermost").__file__).resolve()
    assert module_file.is_relative_to(REPO / "plugins" / "hookwise-mattermost")
    assert isinstance(channel["mattermost"], Channel)


def test_only_configured_channels_are_built():
    channels = load_channels({"slack": SLACK})
    assert list(channels) == ["slack"]
    assert isinstance(channels["slack"], Channel)
    assert channels["slack"].id == "slack"
    assert load_channels({}) == {}


def test_aliases_resolve_to_canonical_ids():
    imsg = {"password": "pw", "baseUrl": "http://127.0.0.1:1"}
    channels = load_channels({"teams": TEAMS, "imsg": imsg})
    assert sorted(channels) == ["imessage", "msteams"]
    assert channels["msteams"].id == "msteams"
    assert canonical_id("IMSG") == "imessage"
    assert canonical_id("teams") == "msteams"
    assert canonical_id("mattermost") == "mattermost"
    assert canonical_id("last") is None
    assert canonical_id("irc") is None


def test_base_url_loses_its_trailing_slash_and_defaults_to_the_public_api():
    channels = load_channels(
        {"telegram": TELEGRAM, "discord": {"token": "t", "baseUrl": "http://127.0.0.1:9/api/"}}
    )
    assert channels["telegram"].config.base_url == "https://api.telegram.org"
    assert channels["discord"].config.base_url == "http://127.0.0.1:9/api"


def test_default_to_is_exposed():
    channel = load_channels({"telegram": TELEGRAM | {"defaultTo": "-1001234567890"}})["telegram"]
    assert channel.default_to == "-1001234567890"


@pytest.mark.parametrize(
    "config, message",
    [
        ({"telegram": {}}, "channels.telegram.botToken: required key is missing"),
        (
            {"whatsapp": {"accessToken": "x"}},
            "channels.whatsapp.phoneNumberId: required key is missing",
        ),
        ({"discord": {}}, "channels.discord.token: required key is missing"),
        ({"slack": {"token": "x"}}, "channels.slack.token: unknown key"),
        (
            {"telegram": TELEGRAM | {"botTokn": "x"}},
            "channels.telegram.botTokn: unknown key; did you mean 'botToken'?",
        ),
        ({"mattermost": {"botToken": "x"}}, "channels.mattermost.baseUrl: required key is missing"),
        (
            {"signal": {"account": "+15550001111"}},
            "channels.signal.baseUrl: required key is missing",
        ),
        ({"imessage": {"password": "x"}}, "channels.imessage.baseUrl: required key is missing"),
        ({"msteams": {"appId": "a"}}, "channels.msteams.appPassword: required key is missing"),
        (
            {"telegram": {"botToken": 5}},
            "channels.telegram.botToken: must be a string, got a number",
        ),
        ({"telegram": {"botToken": "  "}}, "channels.telegram.botToken: must not be empty"),
        (
            {"telegram": TELEGRAM | {"baseUrl": "api.telegram.org"}},
            "channels.telegram.baseUrl: must be an absolute http:// or https:// URL",
        ),
        (
            {"msteams": TEAMS | {"authUrl": "ftp://x"}},
            "channels.msteams.authUrl: must be an absolute http:// or https:// URL",
        ),
        (
            {"msteams": TEAMS | {"serviceUrl": "http://a", "baseUrl": "http://b"}},
            "channels.msteams.baseUrl: give either serviceUrl or baseUrl",
        ),
        (
            {"signal": {"account": "5550001111", "baseUrl": "http://s"}},
            "channels.signal.account: must be the sending phone number in E.164 form",
        ),
        (
            {"imessage": {"password": "x", "baseUrl": "http://b", "method": "sms"}},
            "channels.imessage.method: must be one of apple-script, private-api",
        ),
        (
            {"discord": {"token": "x", "defaultTo": "#general"}},
            "channels.discord.defaultTo: a Discord recipient is a channel id",
        ),
        ({"telegrm": TELEGRAM}, "channels.telegrm: unknown channel; did you mean 'telegram'?"),
        (
            {"irc": {}},
            "channels.irc: unknown channel; known: discord, github, gitlab, imessage, mattermost, msteams, "
            "signal, slack, telegram, webhook, whatsapp",
        ),
        (
            {"teams": TEAMS, "msteams": TEAMS},
            "channels.msteams: configures the same channel as channels.teams",
        ),
        ({"telegram": "123:abc"}, "channels.telegram: must be a mapping of settings"),
        (
            {"mattermost": {"botToken": "x", "baseUrl": "http://m", "defaultTo": "town-square"}},
            "channels.mattermost.defaultTo: a Mattermost recipient is a channel id",
        ),
    ],
)
def test_config_errors_name_the_key(config, message):
    with pytest.raises(ConfigError) as caught:
        load_channels(config)
    assert any(str(issue).startswith(message) for issue in caught.value.issues), str(caught.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as caught:
        load_channels({"telegram": {}, "slack": {}, "nope": {}})
    assert [str(i) for i in caught.value.issues] == [
        "channels.telegram.botToken: required key is missing",
        "channels.slack.botToken: required key is missing",
        "channels.nope: unknown channel; known: discord, github, gitlab, imessage, mattermost, msteams, signal, "
        "slack, telegram, webhook, whatsapp",
    ]


def _fake_distribution(root: Path, name: str, entry_points_txt: str) -> None:
    dist = root / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(entry_points_txt)


def test_a_plugin_that_fails_to_import_is_a_config_error_only_when_configured(
    tmp_path, monkeypatch
):
    _fake_distribution(
        tmp_path, "broken_plugin", "[hookwise.channels]\nbroken = no_such_module_x:Channel\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert available_channels()["broken"].origin == "plugin"
    assert list(load_channels({"slack": SLACK})) == ["slack"]
    with pytest.raises(ConfigError) as caught:
        load_channels({"broken": {}})
    (issue,) = caught.value.issues
    assert issue.path == "channels.broken"
    assert "the plugin no_such_module_x:Channel (broken_plugin) failed to load" in issue.message
    assert "ModuleNotFoundError" in issue.message


def test_a_plugin_cannot_replace_a_built_in_channel(tmp_path, monkeypatch):
    _fake_distribution(
        tmp_path, "evil_plugin", "[hookwise.channels]\ntelegram = no_such_module_y:Channel\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert available_channels()["telegram"].origin == "builtin"
    assert type(load_channels({"telegram": TELEGRAM})["telegram"]).__module__ == (
        "hookwise.server.channels.telegram"
    )


def test_a_plugin_whose_class_names_another_channel_is_refused(tmp_path, monkeypatch):
    _fake_distribution(
        tmp_path,
        "confused_plugin",
        "[hookwise.channels]\nrocketchat = hookwise_mattermost:MattermostChannel\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        load_channels({"rocketchat": {"botToken": "x", "baseUrl": "http://m"}})
    assert str(caught.value) == (
        "channels.rocketchat: the plugin hookwise_mattermost:MattermostChannel names its channel "
        "'mattermost', not 'rocketchat'"
    )
