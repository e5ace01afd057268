"""Go's two quotings, as the messages the lab copies word for word print them.

Facts from Go's sources (`strconv/quote.go`, `time/format.go`'s `quote`, used by `time.ParseDuration`):
strconv.Quote keeps what `unicode.IsPrint` calls printable (non-ASCII letters included) and escapes the
rest, `\\a`…`\\v` by letter, other ASCII as `\\xNN`, the BMP as `\\uNNNN`, beyond as `\\UNNNNNNNN`; the time
package escapes every byte outside printable ASCII as `\\xNN`, so `"5日"` reads `"5\\xe6\\x97\\xa5"` there.
"""

from __future__ import annotations

import pytest

from tenantgpu.apiserver.cronschedule import ScheduleError, parse_go_duration
from tenantgpu.apiserver.fielderrors import invalid
from tenantgpu.goquote import go_quote, time_quote
from tenantgpu.klog import Entry


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("web-0", '"web-0"'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("\a\b\f\n\r\t\v", '"\\a\\b\\f\\n\\r\\t\\v"'),
        ("\x00\x1f\x7f", '"\\x00\\x1f\\x7f"'),
        ("é日本 ok", '"é日本 ok"'),  # printable non-ASCII stays as it is
        ("\u00a0\u200b\u2028", '"\\u00a0\\u200b\\u2028"'),  # spaces other than ASCII's, format marks
        ("😀\U000e0001", '"😀\\U000e0001"'),
    ],
)
def test_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("1d", '"1d"'),
        ('x"y\\', '"x\\"y\\\\"'),
        ("5日", '"5\\xe6\\x97\\xa5"'),
        ("a\tb\x7f", '"a\\x09b\x7f"'),  # DEL is below 0x80 and not below space: kept
    ],
)
def test_the_time_packages_quote(text: str, quoted: str) -> None:
    assert time_quote(text) == quoted


def test_each_message_quotes_as_its_go_source_does() -> None:
    # field.Invalid prints a string value with %q: a non-ASCII name stays readable
    assert invalid("metadata.name", "café", "bad").message == 'Invalid value: "café": bad'
    # time.ParseDuration (a CronJob's schedule `@every 5日`) escapes the bytes
    with pytest.raises(ScheduleError) as err:
        parse_go_duration("5日")
    assert str(err.value) == 'time: unknown unit "\\xe6\\x97\\xa5" in duration "5\\xe6\\x97\\xa5"'
    # klog writes a structured value with strconv.Quote
    line = Entry(0.0, "I", "x.go:1", "synced", (("pod", "default/p\x01"),)).render()
    assert line.endswith('"synced" pod="default/p\\x01"')
