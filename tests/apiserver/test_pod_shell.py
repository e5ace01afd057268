"""`kubectl exec -it POD -- bash`: the terminal's line discipline, piped input, `exit`, and the session's
loop against a stand-in kubelet (real kubectl through a worker: tests/e2e/test_pod_streams_e2e.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tenantgpu.apiserver import podshell
from tenantgpu.node import programs


def test_the_api_server_starts_sessions_for_the_shells_the_runtime_runs() -> None:
    assert podshell.SHELLS == programs.SHELLS
    assert podshell.is_session(["bash"], stdin=True)
    assert podshell.is_session(["/bin/sh"], stdin=True)
    assert not podshell.is_session(["bash"], stdin=False)  # no input: the shell exits at once
    assert not podshell.is_session(["bash", "-c", "env"], stdin=True)
    assert not podshell.is_session(["nvidia-smi"], stdin=True)


def test_prompts_are_bashs_and_dashs_for_root() -> None:
    assert podshell.prompt("bash", "trainer") == "root@trainer:/# "
    assert podshell.prompt("/bin/bash", "trainer") == "root@trainer:/# "
    assert podshell.prompt("sh", "trainer") == "# "


def test_the_line_discipline_echoes_erases_and_ends_lines() -> None:
    terminal = podshell.LineDiscipline()
    assert terminal.feed("envX") == ("envX", [])
    assert terminal.feed("\x7f") == ("\b \b", [])  # backspace erases the X on screen too
    assert terminal.feed("\r") == ("\r\n", ["env"])
    assert terminal.feed("\x1b[Atrue\r") == ("true\r\n", ["true"])  # an arrow key is not typed
    assert terminal.feed("abc\x15") == ("abc" + "\b \b" * 3, [])  # Ctrl-U clears the line
    assert terminal.feed("sleep\x03") == ("sleep^C\r\n", [podshell.INTERRUPT])
    assert terminal.feed("x\x04") == ("x", [])  # Ctrl-D ends the input only at an empty line
    assert terminal.feed("\x7f\x04") == ("\b \b", [podshell.END])


def test_piped_input_is_read_line_by_line_and_its_last_line_needs_no_newline() -> None:
    piped = podshell.PipedLines()
    assert piped.feed("hostname\nprint") == ("", ["hostname"])
    assert piped.feed("env\nexit") == ("", ["printenv"])
    assert piped.end() == ["exit", podshell.END]


@pytest.mark.parametrize(
    ("words", "last", "status"),
    [
        (["exit"], 3, 3),
        (["exit", "5"], 0, 5),
        (["exit", "300"], 0, 44),
        (["exit", "x"], 0, "exit: Illegal number: x"),
    ],
)
def test_exit_ends_with_the_last_status_or_its_operand(
    words: list[str], last: int, status: int | str
) -> None:
    assert podshell.exit_status(words, last) == status


class _Kubelet:
    """Runs `<shell> -c LINE` as the simulated container would, for the few lines the tests type."""

    def __init__(self) -> None:
        self.ran: list[list[str]] = []

    async def __call__(self, words: list[str]) -> podshell.Result:
        self.ran.append(words)
        line = words[2]
        if line == "hostname":
            return podshell.Result("trainer\n")
        if line == "false":
            return podshell.Result(exit_code=1)
        return podshell.Result(stderr=f"{words[0]}: 1: {line}: not found\n", exit_code=127)


async def _keys(*chunks: str | None) -> AsyncIterator[str | None]:
    for chunk in chunks:
        yield chunk


async def _session(shell: str, tty: bool, *chunks: str | None) -> tuple[int, list[tuple[str, str]], _Kubelet]:
    written: list[tuple[str, str]] = []

    async def output(stream: str, text: str) -> None:
        written.append((stream, text))

    kubelet = _Kubelet()
    status = await podshell.run(shell, "trainer", tty, _keys(*chunks), output, kubelet)
    return status, written, kubelet


async def test_a_terminal_session_prompts_echoes_and_ends_with_exits_status() -> None:
    status, written, kubelet = await _session("bash", True, "hostname\r", "foo\r", "exit 4\r", "never\r")
    screen = "".join(text for _, text in written)
    assert {stream for stream, _ in written} == {"stdout"}  # a terminal has one stream
    assert screen == (
        "root@trainer:/# hostname\r\ntrainer\r\nroot@trainer:/# foo\r\nbash: 1: foo: not found\r\n"
        "root@trainer:/# exit 4\r\nexit\r\n"
    )
    assert status == 4
    assert kubelet.ran == [["bash", "-c", "hostname"], ["bash", "-c", "foo"]]  # each line on the kubelet


async def test_ctrl_c_gives_a_new_prompt_and_ctrl_d_ends_with_the_last_status() -> None:
    status, written, _ = await _session("sh", True, "false\r", "sleep 9\x03", "\x04")
    screen = "".join(text for _, text in written)
    assert screen == "# false\r\n# sleep 9^C\r\n# exit\r\n"
    assert status == 130  # the interrupted line's status, as a shell reports it


async def test_piped_input_runs_without_prompt_or_echo_and_keeps_stderr_apart() -> None:
    status, written, _ = await _session("sh", False, "hostname\nfo", "o\n", "false", None)
    assert written == [("stdout", "trainer\n"), ("stderr", "sh: 1: foo: not found\n")]
    assert status == 1  # the last command's


async def test_a_bad_exit_operand_is_dashs_error_and_the_session_goes_on() -> None:
    status, written, _ = await _session("sh", False, "exit x\nhostname\n", None)
    assert written == [("stderr", "sh: 1: exit: Illegal number: x\n"), ("stdout", "trainer\n")]
    assert status == 0
