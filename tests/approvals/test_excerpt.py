"""The display limit of one untrusted value: cut between characters, the cut counted, escaped."""

from typing import Any

import pytest

from approvals import excerpt
from approvals.templatetags.excerpts import excerpt as excerpt_filter


class ExcerptTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, settings: Any) -> None:
        settings.DISPLAY_MAX_VALUE_BYTES = 10
        settings.DISPLAY_MAX_CARD_BYTES = 40

    def test_it_keeps_a_value_that_fits_whole(self) -> None:
        assert excerpt.cut("0123456789") == excerpt.Excerpt("0123456789")
        assert excerpt.cut(None) == excerpt.Excerpt("")
        assert excerpt.cut(12345) == excerpt.Excerpt("12345")

    def test_it_cuts_at_the_limit_in_bytes_and_says_how_many_are_left_out(self) -> None:
        part = excerpt.cut("x" * 1_048_576, url="/api/suspensions/1")
        assert part.text == "x" * 10
        assert part.cut == 1_048_566
        assert part.note == "… 1,048,566 more bytes"
        assert part.url == "/api/suspensions/1"

    def test_it_never_splits_a_character(self) -> None:
        # "é" is 2 bytes and "😀" 4: the 10th byte falls inside a character each time.
        for text in ("é" * 20, "a😀😀😀", "abcdefghi€€"):
            part = excerpt.cut(text)
            assert text.startswith(part.text)
            assert excerpt.size(part.text) <= 10
            assert excerpt.size(part.text) + part.cut == excerpt.size(text)
            assert excerpt.size(text[: len(part.text) + 1]) > 10

    def test_the_card_limit_is_a_limit_of_its_own(self) -> None:
        assert excerpt.cut("y" * 100, excerpt.card_limit()).text == "y" * 40


class ExcerptFilterTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, settings: Any) -> None:
        settings.DISPLAY_MAX_VALUE_BYTES = 12

    def test_a_cut_value_is_escaped_and_links_to_the_whole_of_it(self) -> None:
        html = excerpt_filter("<b>bold</b>\u202e and more", "/api/events/7")
        assert html.startswith("&lt;b&gt;bold&lt;/b")
        assert "<b>" not in html
        assert '… 12 more bytes — <a href="/api/events/7"' in html
        assert "show the whole value</a>" in html

    def test_a_value_that_fits_is_shown_as_visible_text_only(self) -> None:
        assert excerpt_filter("a\u202eb", "/api/events/7") == (
            'a<span class="ctl">[U+202E]</span>b'
        )
