"""`pods/exec` on the wire: options as kube-apiserver reads them, the channel protocol's messages, SPDY frames.

The whole path (kubectl 1.27-1.33 and the Python client, through the tunnel) is in
tests/e2e/test_running_lab.py; here the pieces a client depends on byte for byte.
"""

from __future__ import annotations

import json
import struct
from typing import Any
from urllib.parse import urlencode

import pytest
from aiohttp.test_utils import make_mocked_request

from spdy_helpers import TransportSink, frames_of
from tenantgpu import spdyframes
from tenantgpu.apiserver import errors, podattach, podexec, spdy
from tenantgpu.node.execresult import ExecResult

POD = {
    "metadata": {"name": "trainer", "namespace": "default"},
    "spec": {"nodeName": "worker-a1", "containers": [{"name": "cuda"}]},
}
TWO = {
    "metadata": {"name": "pair", "namespace": "default"},
    "spec": {
        "nodeName": "worker-a1",
        "containers": [{"name": "cuda"}, {"name": "sidecar"}],
        "initContainers": [{"name": "setup"}],
    },
}


def query(*pairs: tuple[str, str]) -> Any:
    """The query of an exec request as aiohttp hands it to the server (repeated keys kept)."""
    return make_mocked_request("GET", "/api/v1/namespaces/default/pods/p/exec?" + urlencode(pairs)).query


def test_options_default_to_the_only_container_and_keep_every_command_word() -> None:
    options = podexec.ExecOptions.parse(
        query(("command", "sh"), ("command", "-c"), ("command", "echo hi"), ("stdout", "true")), POD
    )
    assert options.container == "cuda"
    assert options.command == ["sh", "-c", "echo hi"]
    assert (options.stdin, options.stdout, options.stderr, options.tty) == (False, True, False, False)


@pytest.mark.parametrize(
    ("pairs", "pod", "message"),
    [
        ((("command", "env"), ("stdout", "true")), TWO,
         "a container name must be specified for pod pair, choose one of: [cuda sidecar] "
         "or one of the init containers: [setup]"),
        ((("container", "gpu"), ("command", "env"), ("stdout", "true")), POD,
         "container gpu is not valid for pod trainer"),
        ((("stdout", "true"),), POD, "you must specify at least 1 command"),
        ((("command", "env"),), POD, "you must specify at least 1 of stdin, stdout, stderr"),
        ((("command", "env"), ("stdout", "true")), {**POD, "spec": {"containers": [{"name": "cuda"}]}},
         "pod trainer does not have a host assigned"),
    ],
)  # fmt: skip
def test_wrong_options_are_a_bad_request_with_kube_apiservers_words(
    pairs: tuple[tuple[str, str], ...], pod: dict, message: str
) -> None:
    with pytest.raises(errors.APIError) as raised:
        podexec.ExecOptions.parse(query(*pairs), pod)
    assert raised.value.code == 400 and raised.value.reason == "BadRequest"
    assert raised.value.message == message


def test_the_error_channel_carries_a_status_from_v4_on_and_text_before() -> None:
    ok, failed = ExecResult("x\n"), ExecResult(exit_code=3)
    assert json.loads(podexec.error_status("v5.channel.k8s.io", ["true"], ok) or b"") == {
        "metadata": {},
        "status": "Success",
    }
    status = json.loads(podexec.error_status("v4.channel.k8s.io", ["sh", "-c", "exit 3"], failed) or b"")
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    # kubectl and the Python client take the exit code from this cause
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert status["message"].startswith("command terminated with non-zero exit code")
    assert podexec.error_status("v3.channel.k8s.io", ["true"], ok) is None
    assert (podexec.error_status("channel.k8s.io", ["false"], failed) or b"").startswith(
        b"command terminated"
    )


def test_output_goes_to_its_channels_and_a_terminal_merges_it_with_crlf() -> None:
    result = ExecResult("a\nb\n", "oops\n", 1)
    plain = podexec.ExecOptions("c", ["x"], False, True, True, False)
    assert podexec.output_frames(plain, result) == [b"\x01a\nb\n", b"\x02oops\n"]
    tty = podexec.ExecOptions("c", ["x"], True, True, False, True)
    assert podexec.output_frames(tty, result) == [b"\x01a\r\nb\r\noops\r\n"]
    only_stderr = podexec.ExecOptions("c", ["x"], False, False, True, False)
    assert podexec.output_frames(only_stderr, result) == [b"\x02oops\n"]


def test_spdy_picks_v4_from_what_kubectl_offers_and_names_streams_in_client_go_order() -> None:
    offered = ["v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io"]
    assert spdy.choose_protocol(offered) == "v4.channel.k8s.io"
    assert spdy.choose_protocol(["channel.k8s.io"]) == "channel.k8s.io"
    with pytest.raises(errors.APIError):
        spdy.choose_protocol(["v9.channel.k8s.io"])
    piped = podexec.ExecOptions("c", ["x"], True, True, True, False)
    assert spdy.stream_roles(piped, "v4.channel.k8s.io") == ["error", "stdin", "stdout", "stderr"]
    tty = podexec.ExecOptions("c", ["x"], True, True, False, True)
    assert spdy.stream_roles(tty, "v4.channel.k8s.io") == ["error", "stdin", "stdout", "resize"]
    assert spdy.stream_roles(tty, "v2.channel.k8s.io") == ["error", "stdin", "stdout"]


def test_spdy_frames_round_trip_through_the_reader_even_when_split() -> None:
    sink = TransportSink()
    writer = spdyframes.FrameWriter(sink)  # type: ignore[arg-type]
    writer.syn_reply(1)
    writer.data(3, b"hello", fin=True)
    writer.data(5, b"x" * 70_000, fin=True)  # more than one frame's worth
    writer.control(spdyframes.PING, 0, struct.pack(">I", 7))
    frames = frames_of(sink.data, chunk=1000)  # as TCP may deliver it
    reply, hello, *big, ping = frames
    assert (reply.control, reply.kind, reply.stream_id) == (True, spdyframes.SYN_REPLY, 1)
    # an empty header block, compressed in the connection's zlib stream against SPDY/3's dictionary
    assert spdyframes.HeaderDecoder().decode(reply.payload[4:]) == {}
    assert (hello.control, hello.stream_id, hello.flags, hello.payload) == (
        False,
        3,
        spdyframes.FLAG_FIN,
        b"hello",
    )
    assert b"".join(f.payload for f in big) == b"x" * 70_000
    assert [f.flags for f in big] == [0, 0, spdyframes.FLAG_FIN]
    assert (ping.kind, ping.payload) == (spdyframes.PING, struct.pack(">I", 7))


async def test_a_terminal_that_sends_its_size_again_gets_its_output_after_that_write() -> None:
    """kubectl with a terminal may send its size twice as it sets up. Output sent between the two made it
    write after closing ("websocket: close sent"): the server waits for the client to go quiet first."""
    import asyncio
    import time
    from dataclasses import dataclass as _dataclass

    from aiohttp import WSMsgType, web
    from aiohttp.test_utils import TestClient, TestServer

    from tenantgpu.apiserver.podexec import CLIENT_QUIET_SECONDS, RESIZE, ExecOptions, stream_result

    @_dataclass
    class Result:
        stdout: str = "done\n"
        stderr: str = ""
        exit_code: int = 0

    options = ExecOptions(
        container="c", command=["nvidia-smi"], stdin=True, stdout=True, stderr=False, tty=True
    )

    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream_result(request, options, Result())

    app = web.Application()
    app.router.add_get("/exec", handler)
    async with TestClient(TestServer(app)) as client:
        ws = await client.ws_connect("/exec", protocols=("v5.channel.k8s.io",))
        first_size_sent = time.monotonic()
        await ws.send_bytes(bytes([RESIZE]) + b'{"Width":80,"Height":24}')
        output = asyncio.create_task(ws.receive(timeout=5))
        await asyncio.sleep(0.02)
        if time.monotonic() - first_size_sent < 0.8 * CLIENT_QUIET_SECONDS:  # this process was not held up
            assert not output.done()  # nothing yet: the client has not been quiet long enough
        await ws.send_bytes(bytes([RESIZE]) + b'{"Width":100,"Height":30}')
        message = await output
        assert message.type == WSMsgType.BINARY and message.data == b"\x01done\r\n"
        await ws.close()


def test_attach_takes_execs_options_without_a_command() -> None:
    attach = podexec.ExecOptions.parse(query(("stdout", "true"), ("stderr", "true")), POD, attach=True)
    assert (attach.container, attach.command, attach.stdout, attach.stderr) == ("cuda", [], True, True)
    with pytest.raises(errors.APIError, match="you must specify at least 1 of stdin, stdout, stderr"):
        podexec.ExecOptions.parse(query(("container", "cuda")), POD, attach=True)
    with pytest.raises(errors.APIError, match="container gpu is not valid for pod trainer"):
        podexec.ExecOptions.parse(query(("container", "gpu"), ("stdout", "true")), POD, attach=True)


def test_attached_output_goes_to_stdout_or_the_only_stream_asked_and_a_terminal_gets_crlf() -> None:
    plain = podexec.ExecOptions("c", [], False, True, True, False)
    assert podattach.output_role(plain) == "stdout"
    assert podattach.shown(plain, b"a\nb\n") == b"a\nb\n"
    only_stderr = podexec.ExecOptions("c", [], False, False, True, False)
    assert podattach.output_role(only_stderr) == "stderr"
    tty = podexec.ExecOptions("c", [], True, True, False, True)
    assert podattach.output_role(tty) == "stdout"
    assert podattach.shown(tty, b"a\nb\r\n") == b"a\r\nb\r\n"
    stdin_only = podexec.ExecOptions("c", [], True, False, False, False)
    assert podattach.output_role(stdin_only) is None
