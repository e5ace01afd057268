"""bench/_native.py: perf samples split by process role and library, as `bench/lab` PROFILE=native prints."""

from __future__ import annotations

from bench._native import library, summarise

# `perf script -F pid,ip,dso` lines as perf 6.x prints them.
LINES = [
    "  4242     7f60ef4fb699 (/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0)",
    "  4242     7f60ef4fb6aa (/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0)",
    "  4242 ffffffff81a0c2d5 ([kernel.kallsyms])",
    "  4242     7f60ea4933eb (/work/main/.venv/lib/python3.11/site-packages/uvloop/loop.cpython-311-x86_64-linux-gnu.so)",
    "  4343     7f1c00001234 (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)",
    "  4343     7f1c00005678 (/work/main/.venv/lib/python3.11/site-packages/orjson/orjson.cpython-311-x86_64-linux-gnu.so)",
    "     0 ffffffff81a0c2d5 ([kernel.kallsyms])",
    "  9999     55d0c0de0000 (/usr/bin/perf)",
    "not a sample line",
]


def test_libraries_are_grouped_by_what_they_do() -> None:
    assert library("/usr/lib/x86_64-linux-gnu/libssl.so.3") == "TLS (OpenSSL)"
    assert (
        library("/root/.pyenv/versions/3.11.7/lib/python3.11/lib-dynload/_ssl.cpython-311.so")
        == "TLS (OpenSSL)"
    )
    assert library("/root/.pyenv/versions/3.11.7/lib/python3.11/lib-dynload/_asyncio.cpython-311.so") == (
        "CPython interpreter"
    )
    assert library("/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6") == "SQLite"
    assert library("/usr/lib/x86_64-linux-gnu/libc.so.6") == "libc (malloc, memcpy)"
    assert library("/x/site-packages/grpc/_cython/cygrpc.cpython-311-x86_64-linux-gnu.so") == "grpc"
    assert library("[unknown]") == "other"


def test_samples_are_split_by_role_and_library() -> None:
    result = summarise(LINES, {4242: "lab", 4343: "workers"}, rate_hz=2)
    assert list(result) == ["lab", "workers", "idle", "other"]
    assert result["lab"]["cpu_s"] == 2.0  # 4 samples at 2 Hz
    assert result["lab"]["by_library"] == [("CPython interpreter", 50.0), ("kernel", 25.0), ("uvloop", 25.0)]
    assert dict(result["workers"]["by_library"]) == {"TLS (OpenSSL)": 50.0, "orjson": 50.0}
    assert result["idle"]["by_library"] == [("kernel", 100.0)]
    assert result["other"]["cpu_s"] == 0.5
