"""The programs a simulated container can run: what a HAMi user checks from inside, by exec or as its command.

A simulated container has no file system and no processes, so it offers the few commands people run to
see what HAMi gave a container: `nvidia-smi` (the memory limit HAMi-core exposes; also `-L` and
`--query-gpu=… --format=csv`), `env` / `printenv`
(HAMi's `CUDA_DEVICE_*` and `NVIDIA_VISIBLE_DEVICES`), `hostname`, `echo`, `true`, `false`, and
`sh -c` / `bash -c` around them: simple commands joined by `;`, `&&` or `||`, and `exit N`. Through
`kubectl exec` anything else exits 127, as a shell does for a command it cannot find, and says what is
there instead.

A container's own command (`command` and `args` in its spec) runs the same programs when it starts
(`main_command`); a final `sleep N` keeps it running N seconds more, as GPU examples end with
`sleep infinity` or HAMi's with `sleep 86400`. A command the simulation does not know (`python
train.py`) is not refused: that container runs like one without a command.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from tenantgpu.node.execresult import ExecResult
from tenantgpu.node.gpu_runtime import GpuView
from tenantgpu.node.nvidia_smi_options import run_nvidia_smi

COMMAND_NOT_FOUND = 127
SHELLS = ("sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash")
# Characters that would need a real shell (pipes, redirections, expansions); `;`, `&&` and `||` between
# simple commands are understood.
_SHELL_SYNTAX = set("|&;<>()$`*?[]{}~")
_OPERATOR_CHARS = set(";&|")
_SEQUENCE_OPERATORS = (";", "&&", "||")
_SLEEP_OPERAND = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)([smhd]?)$")
_SLEEP_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class ContainerView:
    """What a command inside one container can see."""

    hostname: str
    env: dict[str, str] = field(default_factory=dict)
    gpus: list[GpuView] = field(default_factory=list)
    gpu_memory_used_mib: int = 0


Program = Callable[[list[str], ContainerView], ExecResult]


def _nvidia_smi(args: list[str], view: ContainerView) -> ExecResult:
    if not view.gpus:
        # No GPU was allocated, so the NVIDIA runtime mounted neither the driver nor its tools.
        return _not_found("nvidia-smi", view)
    return run_nvidia_smi(args, view.gpus, used_mib=view.gpu_memory_used_mib)


def _env(args: list[str], view: ContainerView) -> ExecResult:
    if args:
        return ExecResult(stderr="env: the simulated env only prints the environment\n", exit_code=125)
    return ExecResult(stdout="".join(f"{k}={v}\n" for k, v in sorted(view.env.items())))


def _printenv(args: list[str], view: ContainerView) -> ExecResult:
    if not args:
        return _env([], view)
    found = [view.env[name] for name in args if name in view.env]
    # coreutils: the values of the names that are set, exit 1 if any is not
    return ExecResult(stdout="".join(f"{v}\n" for v in found), exit_code=0 if len(found) == len(args) else 1)


def _echo(args: list[str], _: ContainerView) -> ExecResult:
    newline = True
    if args and args[0] == "-n":
        newline, args = False, args[1:]
    return ExecResult(stdout=" ".join(args) + ("\n" if newline else ""))


def _hostname(_: list[str], view: ContainerView) -> ExecResult:
    return ExecResult(stdout=view.hostname + "\n")


PROGRAMS: dict[str, Program] = {
    "nvidia-smi": _nvidia_smi,
    "env": _env,
    "printenv": _printenv,
    "echo": _echo,
    "hostname": _hostname,
    "true": lambda _args, _view: ExecResult(),
    "false": lambda _args, _view: ExecResult(exit_code=1),
}


def run(command: list[str], view: ContainerView) -> ExecResult:
    """Run `command` (argv) in the container `view` describes."""
    if not command:
        return ExecResult(stderr="no command given\n", exit_code=COMMAND_NOT_FOUND)
    name, args = command[0], command[1:]
    if name in SHELLS:
        return _shell(name, args, view)
    program = _program(name)
    if program is None:
        return _not_found(name, view)
    return program(args, view)


def _shell(shell: str, args: list[str], view: ContainerView) -> ExecResult:
    if not args:
        # a shell with nothing on its stdin (exec without -i) reads the end of its input and exits 0;
        # with the client's stdin the API server runs the session line by line (`apiserver/podshell`)
        return ExecResult()
    if len(args) < 2 or args[0] != "-c":
        return ExecResult(
            stderr=f"{shell}: the simulated container has no interactive shell; "
            f"run a command directly or with {shell} -c 'COMMAND'\n",
            exit_code=COMMAND_NOT_FOUND,
        )
    steps = _script_steps(shell, args[1])
    if isinstance(steps, ExecResult):
        return steps
    return _run_steps(shell, steps, view)[0]


Step = tuple[str, list[str]]  # the operator before a simple command (`;` for the first), and its words


def _script_steps(shell: str, script: str) -> list[Step] | ExecResult:
    """A `sh -c` script as simple commands with the operators between them, or why it cannot run."""
    refusal = ExecResult(
        stderr=f"{shell}: the simulated shell runs simple commands joined by ;, && or ||, without pipes, "
        "redirections or expansions\n",
        exit_code=2,
    )
    if (_SHELL_SYNTAX - _OPERATOR_CHARS) & set(script):
        return refusal
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as err:
        return ExecResult(stderr=f"{shell}: {err}\n", exit_code=2)
    steps: list[Step] = []
    operator, words = ";", []
    for token in tokens:
        if token and set(token) <= _OPERATOR_CHARS:
            if token not in _SEQUENCE_OPERATORS:
                return refusal
            if not words:
                return ExecResult(stderr=f'{shell}: 1: Syntax error: "{token}" unexpected\n', exit_code=2)
            steps.append((operator, words))
            operator, words = token, []
        else:
            words.append(token)
    if words:
        steps.append((operator, words))
    elif operator != ";":
        return ExecResult(stderr=f"{shell}: 1: Syntax error: end of file unexpected\n", exit_code=2)
    return steps


def _run_steps(shell: str, steps: list[Step], view: ContainerView) -> tuple[ExecResult, bool]:
    """Run simple commands as a shell does; the result, and whether `exit` ended the script."""
    stdout, stderr, status = "", "", 0
    for operator, words in steps:
        if (operator == "&&" and status != 0) or (operator == "||" and status == 0):
            continue
        if words[0] == "exit":  # the usual way to try an exit code through kubectl exec
            if len(words) == 1:
                return ExecResult(stdout, stderr, status), True
            if len(words) == 2 and words[1].isdigit():
                return ExecResult(stdout, stderr, int(words[1]) % 256), True
            message = f"{shell}: 1: exit: Illegal number: {' '.join(words[1:])}\n"
            return ExecResult(stdout, stderr + message, 2), True
        if words[0] in SHELLS:
            result = _shell(words[0], words[1:], view)
        else:
            result = run(words, view)
            if result.exit_code == COMMAND_NOT_FOUND and _program(words[0]) is None:
                result = ExecResult(
                    stderr=f"{shell}: 1: {words[0]}: not found\n", exit_code=COMMAND_NOT_FOUND
                )
        stdout, stderr, status = stdout + result.stdout, stderr + result.stderr, result.exit_code
    return ExecResult(stdout, stderr, status), False


def _program(name: str) -> Program | None:
    return PROGRAMS.get(name.rpartition("/")[2] if name.startswith("/") else name)


@dataclass(frozen=True)
class MainCommand:
    """What a container's own command does: what it prints when it starts, how long it then runs
    (`math.inf`: until deleted), and the status it exits with."""

    output: ExecResult
    runs_for: float


def main_command(command: list[str], view: ContainerView) -> MainCommand | None:
    """What `command` (a container's `command` + `args`) does here; None when the simulation does not
    know it, and that container runs like one without a command."""
    if not command:
        return None
    if command[0] in SHELLS:
        if len(command) < 3 or command[1] != "-c":
            return None
        shell = command[0]
        steps = _script_steps(shell, command[2])
        if isinstance(steps, ExecResult):
            return None
    else:
        shell, steps = "sh", [(";", list(command))]
    sleeps, sleep_operator = 0.0, ";"
    if steps and steps[-1][1][0] == "sleep":
        seconds = _sleep_seconds(steps[-1][1][1:])
        if seconds is None:
            return None
        sleep_operator, _ = steps.pop()
        sleeps = seconds
    if not all(_known(words, inside_shell=command[0] in SHELLS) for _, words in steps):
        return None
    output, exited = _run_steps(shell, steps, view) if steps else (ExecResult(), False)
    status = output.exit_code
    sleeping = not exited and (sleep_operator == ";" or (sleep_operator == "&&") == (status == 0))
    if sleeps and sleeping:
        return MainCommand(ExecResult(output.stdout, output.stderr, 0), sleeps)
    return MainCommand(output, 0.0)


def _known(words: list[str], *, inside_shell: bool) -> bool:
    return _program(words[0]) is not None or (inside_shell and words[0] == "exit")


def _sleep_seconds(operands: list[str]) -> float | None:
    """GNU sleep's operands (summed; `s`, `m`, `h`, `d` suffixes; `infinity`), or None if it would fail."""
    if not operands:
        return None
    total = 0.0
    for operand in operands:
        if operand in ("infinity", "inf"):
            return math.inf
        match = _SLEEP_OPERAND.match(operand)
        if match is None:
            return None
        total += float(match.group(1)) * _SLEEP_UNITS[match.group(2)]
    return total


def _not_found(name: str, view: ContainerView) -> ExecResult:
    # A container without a GPU has no nvidia-smi (nothing mounted it), so the list must not offer it.
    available = ", ".join(sorted(p for p in PROGRAMS if view.gpus or p != "nvidia-smi"))
    return ExecResult(
        stderr=f'exec: "{name}": executable file not found in $PATH '
        f"(a tenantgpu simulated container runs: {available}, and sh -c around one of them)\n",
        exit_code=COMMAND_NOT_FOUND,
    )
