"""fedrr.io, the helpers a script shares with a user's own: here the --part switch of a script that
measures one thing several ways (the write helpers run in every script's smoke test)."""

import pytest

from fedrr.io import part_parser, run_part


def test_a_part_gets_the_whole_command_line_and_a_part_is_required(capsys):
    """``fedrr.io.run_part``: the part named by --part runs with every argument (so the command its
    results record names the part); without --part the usage lists the parts and exits 2, unless a
    default part is given."""
    seen = []

    def part(argv):
        args = part_parser("a script", ["one", "two"], default="one").parse_args(argv)
        seen.append((args.part, list(argv)))
        return 0

    assert run_part("a script", {"one": part, "two": part}, ["--part", "two"]) == 0
    assert seen[-1] == ("two", ["--part", "two"])
    assert run_part("a script", {"one": part, "two": part}, [], default="one") == 0 and seen[-1] == ("one", [])
    with pytest.raises(SystemExit) as exc:
        run_part("a script", {"one": part, "two": part}, [])
    assert exc.value.code == 2 and "--part {one,two}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_part("a script", {"one": part}, ["--part", "three"])
