"""The `laredo` argument parser: global options anywhere, addresses from the environment, argument types."""

from __future__ import annotations

import argparse

import pytest

from laredo_cli.commands.common import TableName, seconds, table_name
from laredo_client.credentials import parse_address
from laredo_cli.main import build_parser, query_address
from libs.cli.tests.cli_runner import _run_capturing


def parse(*argv: str, env: dict[str, str] | None = None) -> argparse.Namespace:
    return build_parser(env or {}).parse_args(list(argv))


def test_addresses_default_to_the_oam_port_which_answers_query_too() -> None:
    args = parse("status")
    assert (args.server, query_address(args)) == ("localhost:4001", "localhost:4001")
    assert (args.json, args.timeout) == (False, None)
    assert query_address(parse("--server", "oam:5001", "count", "t")) == "oam:5001"


def test_addresses_come_from_the_environment_and_options_win() -> None:
    env = {"LAREDO_SERVER": "oam:5001", "LAREDO_QUERY_SERVER": "query:5003"}
    assert (parse("count", "t", env=env).server, parse("count", "t", env=env).query_server) == ("oam:5001",
                                                                                                "query:5003")
    args = parse("--server", "a:1", "count", "t", "--query-server", "b:2", env=env)
    assert (args.server, args.query_server) == ("a:1", "b:2")


@pytest.mark.parametrize("argv", [
    ("--json", "--timeout", "5", "status"),
    ("status", "--json", "--timeout", "5"),
    ("--json", "status", "--timeout", "5s"),
])
def test_global_options_before_or_after_the_command(argv: tuple[str, ...]) -> None:
    args = parse(*argv)
    assert (args.json, args.timeout) == (True, 5.0)


def test_an_option_before_the_command_survives_a_command_without_it() -> None:
    args = parse("--server", "x:1", "--json", "snapshots", "list")
    assert (args.server, args.json) == ("x:1", True)


@pytest.mark.parametrize(("text", "expected"), [
    ("users", TableName("public", "users")),
    ("sales.orders", TableName("sales", "orders")),
])
def test_table_names(text: str, expected: TableName) -> None:
    assert table_name(text) == expected
    assert str(table_name(text)) == f"{expected.schema}.{expected.table}"


@pytest.mark.parametrize("text", ["a.b.c", "", ".users", "public.", "my table"])
def test_bad_table_names_are_usage_errors(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="schema.table"):
        table_name(text)


@pytest.mark.parametrize(("text", "expected"), [("30", 30.0), ("2.5", 2.5), ("500ms", 0.5), ("10s", 10.0),
                                                ("5m", 300.0), ("1h", 3600.0)])
def test_durations(text: str, expected: float) -> None:
    assert seconds(text) == expected


@pytest.mark.parametrize("text", ["", "-1", "ten", "5d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        seconds(text)


@pytest.mark.parametrize(("address", "expected"), [("localhost:4001", "localhost:4001"),
                                                   ("http://oam:4001/", "oam:4001"), ("grpc://q:4003", "q:4003")])
def test_addresses_accept_pasted_urls(address: str, expected: str) -> None:
    assert parse_address(address).host_port == expected  # the target the CLI's channels connect to


def test_commands_and_their_arguments() -> None:
    reload = parse("reload", "sales.orders", "--source", "pg")
    assert (reload.table, reload.all, reload.source) == (TableName("sales", "orders"), False, "pg")
    assert parse("reload", "--all").all
    watch = parse("watch", "--table", "a", "--table", "s.b", "--pipeline", "p1", "--count", "3")
    assert (watch.tables, watch.pipelines, watch.count) == ([TableName("public", "a"), TableName("s", "b")],
                                                            ["p1"], 3)
    lookup = parse("lookup", "users", "a", "b", "--index", "by_ab", "--all", "--typed", "--columns", "id,name")
    assert (lookup.values, lookup.index, lookup.all, lookup.typed, lookup.columns) == (
        ["a", "b"], "by_ab", True, True, ["id", "name"])
    assert parse("snapshots", "create", "a", "--meta", "k=v=w", "--meta", "x=").meta == [("k", "v=w"), ("x", "")]
    assert parse("reset", "pg", "--confirm").yes and parse("reset", "pg", "-y").yes
    assert parse("drain", "--deadline", "1m").deadline == 60.0
    drain = parse("drain", "public.users", "--instance", "fanout-a", "--force")
    assert (drain.table, drain.instance, drain.force) == (TableName("public", "users"), "fanout-a", True)
    assert parse("replay", "start", "snap", "--speed", "10x").speed == "10x"
    for command in ("pause", "resume"):  # the source as an argument or an option, like reload's table
        assert (parse(command, "main").source_id, parse(command, "--source", "main").source) == ("main", "main")


@pytest.mark.parametrize("argv", [
    [], ["nope"], ["reload"], ["reload", "t", "--all"], ["get", "t"], ["watch", "--count", "0"],
    ["list", "t", "--page-size", "-1"], ["snapshots"], ["snapshots", "prune"], ["replay", "start", "s", "--speed",
                                                                                 "fast"],
    ["status", "--table", "t", "--pipeline", "p"], ["snapshots", "create", "--meta", "novalue"],
    ["pause", "a", "--source", "b"], ["resume", "a", "b"],
])
def test_usage_errors_exit_with_2(argv: list[str]) -> None:
    result = _run_capturing(argv, {}, False)
    assert result.code == 2, result


def test_help_teaches_addresses_exit_codes_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse("--help")
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for expected in ("LAREDO_SERVER", "LAREDO_QUERY_SERVER", "localhost:4001", "the OAM address", "exit codes:",
                     "130", "examples:", "dead-letters", "snapshots", "subscribe"):
        assert expected in text


@pytest.mark.parametrize("command", [["status"], ["watch"], ["lookup"], ["list"], ["reset"], ["snapshots", "prune"],
                                     ["dead-letters", "purge"], ["replay", "start"]])
def test_every_command_has_help_with_a_description(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(*command, "--help")
    text = capsys.readouterr().out
    assert "--server" in text and "--json" in text  # global options show on every command
    assert "RPC" in text  # names what it calls
