"""When a konnectivity server's gRPC writes complete, against when the agent has the bytes.

`python -m bench grpc_writes`. The lab process serves every tenant's proxy server on one busy event loop;
each agent stream takes one write at a time (`konnectivity/sender.py`), so a write whose completion
arrives late holds back every packet queued behind it on that stream. This benchmark isolates that: a
grpc.aio `AgentService` server in this process writes 3 KB DATA packets on STREAMS agent streams while
BUSY_TASKS tasks keep its loop busy (BUSY_MS of work per turn each, as a loaded lab process), and an agent
process reads them. For each write it records how long `context.write()` took and when the agent read
the packet. Modes: a few streams writing at once, and all of them; each with grpc.aio's server and with
the proxy server's own (`konnectivity/h2grpc.py`, gRPC's framing on HTTP/2 with h2), serving the same
servicer.

Environment: STREAMS (20), BUSY_TASKS (2), BUSY_MS (2), SECONDS (4).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "grpc_writes.json"
PAYLOAD_BYTES = 3000
QUEUED_PER_STREAM = 3


def _agent(port: int, streams: int, results: Connection) -> None:
    """The agent side: reads every stream; sends back (write start, read time) per packet."""
    from grpc import aio

    from tenantgpu import eventloop
    from tenantgpu.konnectivity import wire
    from tenantgpu.konnectivity._proto import agent_pb2_grpc

    async def run() -> None:
        channel = aio.insecure_channel(f"127.0.0.1:{port}", options=wire.GRPC_OPTIONS)
        arrivals: list[tuple[float, float]] = []

        async def read(call: Any) -> None:
            while True:
                packet = await call.read()
                if packet is aio.EOF:
                    return
                arrivals.append((float(packet.data.data[:32]), time.perf_counter()))

        calls = [agent_pb2_grpc.AgentServiceStub(channel).Connect() for _ in range(streams)]
        await asyncio.gather(*(read(call) for call in calls), return_exceptions=True)
        results.send(arrivals)

    eventloop.run(run())


async def _measure(
    writers: int, streams: int, busy_tasks: int, busy_ms: float, seconds: float, server_kind: str
) -> dict[str, Any]:
    from grpc import aio

    from tenantgpu.konnectivity import wire
    from tenantgpu.konnectivity._proto import agent_pb2_grpc
    from tenantgpu.konnectivity._proto import client_pb2 as pb
    from tenantgpu.konnectivity.h2grpc import H2GrpcServer, StreamMethod

    queues: list[asyncio.Queue[float]] = []
    writes: list[tuple[float, float]] = []  # (start, duration)
    done = asyncio.Event()

    class Service(agent_pb2_grpc.AgentServiceServicer):
        async def Connect(self, request_iterator: object, context: Any) -> None:
            queue: asyncio.Queue[float] = asyncio.Queue()
            queues.append(queue)
            while not done.is_set():
                try:
                    await asyncio.wait_for(queue.get(), 0.5)
                except TimeoutError:
                    continue
                start = time.perf_counter()
                await context.write(wire.data(1, repr(start).encode().ljust(PAYLOAD_BYTES)))
                writes.append((start, time.perf_counter() - start))

    server: Any
    if server_kind == "grpc.aio":
        server = aio.server(options=wire.GRPC_OPTIONS)
        agent_pb2_grpc.add_AgentServiceServicer_to_server(Service(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
    else:  # the proxy server's own (konnectivity/h2grpc.py), with the same servicer
        method = StreamMethod(lambda context: Service().Connect(None, context), pb.Packet.FromString)
        server = H2GrpcServer({"/AgentService/Connect": method}, max_message_bytes=wire.MAX_MESSAGE_BYTES)
        port = await server.start("127.0.0.1", 0, None)
    receiving, sending = multiprocessing.Pipe(duplex=False)
    agent = multiprocessing.get_context("spawn").Process(target=_agent, args=(port, streams, sending))
    agent.start()

    async def busy() -> None:
        while not done.is_set():
            until = time.perf_counter() + busy_ms / 1000
            while time.perf_counter() < until:
                pass
            await asyncio.sleep(0)

    while len(queues) < streams:
        await asyncio.sleep(0.02)
    loads = [asyncio.create_task(busy()) for _ in range(busy_tasks)]
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for queue in queues[:writers]:
            if queue.qsize() < QUEUED_PER_STREAM:
                queue.put_nowait(time.perf_counter())
        await asyncio.sleep(0.01)
    done.set()
    await asyncio.gather(*loads)
    await server.stop(grace=1)
    arrivals = dict(await asyncio.to_thread(receiving.recv))
    agent.join(10)
    durations = sorted(d for _, d in writes)
    delivered = sorted(arrivals[s] - s for s, _ in writes if s in arrivals)
    return {
        "writing_streams": writers,
        "writes_per_second": round(len(writes) / seconds, 1),
        "write_completes_p50_ms": _ms(durations, 0.5),
        "write_completes_p90_ms": _ms(durations, 0.9),
        "write_completes_p99_ms": _ms(durations, 0.99),
        "agent_has_it_p50_ms": _ms(delivered, 0.5),
        "agent_has_it_p99_ms": _ms(delivered, 0.99),
    }


def _ms(ordered: list[float], q: float) -> float | None:
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else None


def run(streams: int, busy_tasks: int, busy_ms: float, seconds: float) -> dict[str, Any]:
    from tenantgpu import eventloop

    modes = {}
    for kind in ("grpc.aio", "h2grpc"):
        for writers in (min(4, streams), streams):
            modes[f"{kind} {writers}_of_{streams}_writing"] = eventloop.run(
                _measure(writers, streams, busy_tasks, busy_ms, seconds, kind)
            )
    return {"streams": streams, "busy_tasks": busy_tasks, "busy_ms_per_turn_each": busy_ms, "modes": modes}


def main() -> None:
    result = run(
        int(os.environ.get("STREAMS", "20")),
        int(os.environ.get("BUSY_TASKS", "2")),
        float(os.environ.get("BUSY_MS", "2")),
        float(os.environ.get("SECONDS", "4")),
    )
    print(f"{result['busy_tasks']} tasks × {result['busy_ms_per_turn_each']} ms of work per loop turn")
    for mode, figures in result["modes"].items():
        print(
            f"{mode:<26} {figures['writes_per_second']:>7} writes/s  write completes p50/p90/p99 "
            f"{figures['write_completes_p50_ms']}/{figures['write_completes_p90_ms']}/"
            f"{figures['write_completes_p99_ms']} ms  agent has it p50/p99 "
            f"{figures['agent_has_it_p50_ms']}/{figures['agent_has_it_p99_ms']} ms"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
