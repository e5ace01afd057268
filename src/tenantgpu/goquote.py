"""How Go quotes a string in the messages the lab copies word for word.

Two quotings meet in Kubernetes' and HAMi's texts:
- `go_quote` is `strconv.Quote`, which `%q` prints: a validation error's value, kube's FormatMap in a
  downward-API file, a klog value, HAMi's refusals, strconv's own `parsing "x": invalid syntax`.
  Printable characters are kept (non-ASCII letters too), the rest escaped the shortest way Go knows.
- `time_quote` is the `time` package's own `quote`, which `time.ParseDuration` puts in its errors: it
  escapes every byte that is not printable ASCII as `\\xNN`, so `"1µs "` and `"5日"` read differently than
  under `%q`.

Python's `isprintable` and Go's `unicode.IsPrint` agree on what is printable: letters, marks, numbers,
punctuation and symbols, and the ASCII space but no other space. Both quotings are pure functions, so the
pure core (`gpushare`) may use them as well.
"""

from __future__ import annotations

# the escapes strconv.Quote writes as a letter rather than in hex
_LETTER_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """`text` as Go's `strconv.Quote` (and `%q`) writes it: printable characters kept, others escaped
    (`\\x00`, `\\u200b`, `\\U000e0001`)."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'  # what almost every name and value is
    out = ['"']
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char in _LETTER_ESCAPES:
            out.append(_LETTER_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def time_quote(text: str) -> str:
    """`text` as Go's `time` package quotes it in a parse error: printable ASCII kept (with `"` and `\\`
    escaped), every other byte of its UTF-8 as `\\xNN`."""
    out = ['"']
    for char in text:
        if " " <= char < "\x80":
            out.append("\\" + char if char in ('"', "\\") else char)
        else:
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
    out.append('"')
    return "".join(out)


__all__ = ["go_quote", "time_quote"]
