"""Titles from providers are stored whatever they contain."""

from providers import normalize


def test_nul_characters_are_dropped_and_long_titles_bounded():
    assert normalize.title("Stand\x00up") == "Standup"
    assert len(normalize.title("x" * 5000)) == normalize.MAX_TITLE_LENGTH
    assert normalize.title(None) == ""
