"""Where, in an event's line, the message the catalog matched stands (issue 10, part 5): the span
that the evidence of a finding carries (`Evidence.spans`, kind `message`) so the views can
highlight the message within the line, its log prefix and the rest left plain.

The parser keeps the catalog's `Match` on each event (`Event.msg`); its `span` is in the text
that was matched: the line after its log prefix, the exception's message, or `Type: message`.
That text is found again here from the event alone (the prefixes are the parser's own
patterns, matched without its state), and the span moved onto the line.
"""
from __future__ import annotations

from ..events import Event
from .sglang import OLD_PREFIX, PREFIX, PY_LOGGING, RAY_TAG, TORCH_RANK

KIND = "message"      # the span kind: not sensitive (redaction keeps it, moved onto its output)


def _bodies(ev: Event):
    """The texts the parser may have matched for this event, the likeliest first."""
    data = ev.data if isinstance(ev.data, dict) else {}
    msg = data.get("message")
    if isinstance(msg, str) and msg:
        yield msg
        if data.get("type"):
            yield f"{data['type']}: {msg}"
    text = ev.text or ""
    yield text.strip()
    for pat in (PREFIX, OLD_PREFIX, RAY_TAG, TORCH_RANK, PY_LOGGING):
        m = pat.match(text)
        if m:
            yield text[m.end():].strip()


def _same(m, body: str) -> bool:
    """Whether the catalog gives this match for this text (the text it was made from)."""
    try:
        from ..messages import Catalog
        cat = Catalog.open()
        again = cat.match_cut(body[:4000]) if m.partial else cat.match(body[:4000])
    except Exception:  # no catalog: no span
        return False
    return again is not None and again.id == m.id and tuple(again.span) == tuple(m.span)


def message_span(ev: Event) -> tuple[int, int] | None:
    """(start, end) of the catalog-matched message in `ev.text` (its first line where the
    message goes on over more lines), or None when the event has no match or its text is not in
    the line."""
    m = getattr(ev, "msg", None)
    span = getattr(m, "span", None)
    if m is None or not span or span[1] <= span[0]:
        return None
    a, b = span
    text = ev.text or ""
    for body in _bodies(ev):
        if len(body) < b or not _same(m, body):
            continue
        sub = body[a:b].split("\n", 1)[0].rstrip()
        if len(sub) < 3:
            continue
        # the matched text's own position in the line: where the body stands, then a within it
        at = text.find(body.split("\n", 1)[0])
        if at >= 0 and text.startswith(sub, at + a):
            return at + a, at + a + len(sub)
        at = text.find(sub)
        if at >= 0:
            return at, at + len(sub)
    return None
