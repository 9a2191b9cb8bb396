"""The assertion every checker test makes: one printed verdict, the checker's return value, and
the words that name the mistake."""

WORDS = ("right", "wrong", "not yet")


def assert_verdict(capsys, ok, word: str, *names: str) -> str:
    out = capsys.readouterr().out
    verdicts = [line.split(":")[0] for line in out.splitlines() if line.split(":")[0] in WORDS]
    assert verdicts == [word], out
    assert ok is (word == "right"), out
    for name in names:
        assert name in out, (name, out)
    return out
