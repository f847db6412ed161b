"""Pull-source benchmark: messages/s from each broker into the store, beside `/wake` over HTTP.

Run from the repository root, with the brokers on their usual loopback ports (Redis 6379,
NATS with JetStream 4222, RabbitMQ 5672 guest/guest; `--brokers ...,sqs` adds SQS against moto
in server mode, which the script starts: that figure is moto's, a Python server on the same
machine that answers a receive and a delete in about half a second here, not AWS's):

    .venv/bin/python bench/sources.py [--burst 5000] [--brokers redis,nats,rabbitmq,sqs]
                                      [--max-in-flight 64] [--connections 32]

For each broker, on a fresh gateway (fresh state dir, default durable SQLite store, one
templated wake rule on path `plain`) and a fresh stream / subject / queue:

1. a burst of `--burst` messages is published before the gateway starts (the backlog a gateway
   finds after an outage, or that a producer's spike leaves);
2. the gateway starts; from the moment its source reports `connected` the script polls
   `GET /api/sources` until every message is acknowledged: the rate is burst / that time, every
   acknowledged message being a committed event (checked against the stored events at the end);
3. the lag the broker reports once the burst has drained (it should be 0) is printed with it.

`/wake` (and `/plain`, the same rule as the sources') is measured over HTTP with wrk as
`bench/ingest.py` does (`--connections`, 2 threads, a 2 s warm-up, then `--http-seconds`), each
on another fresh gateway: the door's figure on the same machine, with the same store. Output: one table and a last line `BENCH_JSON {...}`. Exit 0 done, 1 some messages
were not stored, 2 could not run (a broker is not reachable: it is skipped and said so).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from tests.support.gateway import GatewayProcess, base_config  # noqa: E402

RULES = [{"id": "plain", "match": {"path": "plain"}, "action": "wake", "textTemplate": "{{text}}"}]


def _body(i: int) -> bytes:
    return json.dumps({"text": f"bench message {i}"}).encode()


# --- publishing a burst ---------------------------------------------------------------------------


def publish_redis(name: str, n: int) -> dict[str, Any]:
    import redis

    r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(name, {"body": _body(i), "content-type": "application/json"})
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    r.close()
    return {"redis": {"url": "redis://127.0.0.1:6379/0", "stream": name}}


def publish_nats(name: str, n: int) -> dict[str, Any]:
    import nats

    async def main() -> None:
        nc = await nats.connect("nats://127.0.0.1:4222")
        js = nc.jetstream()
        await js.add_stream(name=name, subjects=[f"{name}.>"])
        pending = []
        for i in range(n):
            pending.append(js.publish(f"{name}.m", _body(i)))
            if len(pending) >= 500:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
        await nc.close()

    asyncio.run(main())
    return {"nats": {"url": "nats://127.0.0.1:4222", "stream": name, "fetchWait": "0.5s"}}


def publish_rabbitmq(name: str, n: int) -> dict[str, Any]:
    import aio_pika

    async def main() -> None:
        conn = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
        ch = await conn.channel()
        await ch.declare_queue(name, durable=True)
        for i in range(n):
            await ch.default_exchange.publish(
                aio_pika.Message(_body(i), content_type="application/json", message_id=str(i)),
                routing_key=name,
            )
        await conn.close()

    asyncio.run(main())
    return {"rabbitmq": {"url": "amqp://guest:guest@127.0.0.1:5672/", "queue": name}}


#: the moto server SQS is measured against (`--brokers ...,sqs`), started on first use
_MOTO: dict[str, Any] = {}
_AWS = {"region_name": "us-east-1", "aws_access_key_id": "bench", "aws_secret_access_key": "bench"}


def _moto_url() -> str:
    if "url" not in _MOTO:
        import socket
        import subprocess

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        _MOTO["proc"] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _MOTO["url"] = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
    return str(_MOTO["url"])


def publish_sqs(name: str, n: int) -> dict[str, Any]:
    import boto3

    url = _moto_url()
    sqs = boto3.client("sqs", endpoint_url=url, **_AWS)
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    for i in range(0, n, 10):
        entries = [{"Id": str(k), "MessageBody": _body(i + k).decode()} for k in range(10)]
        sqs.send_message_batch(QueueUrl=queue, Entries=entries[: n - i])
    return {
        "sqs": {
            "queueUrl": queue,
            "endpointUrl": url,
            "waitTime": 1,
            "accessKeyId": "bench",
            "secretAccessKey": "bench",
        }
    }


def cleanup(kind: str, name: str) -> None:
    try:
        if kind == "redis":
            import redis

            redis.Redis.from_url("redis://127.0.0.1:6379/0").delete(name)
        elif kind == "nats":
            import nats

            async def drop() -> None:
                nc = await nats.connect("nats://127.0.0.1:4222")
                await nc.jetstream().delete_stream(name)
                await nc.close()

            asyncio.run(drop())
        elif kind == "rabbitmq":
            import aio_pika

            async def drop_queue() -> None:
                conn = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
                await (await conn.channel()).queue_delete(name)
                await conn.close()

            asyncio.run(drop_queue())
    except Exception as e:  # a leftover stream is a nuisance, not a failure
        print(f"(could not delete {kind} {name}: {e})", file=sys.stderr)


PUBLISH: dict[str, Callable[[str, int], dict[str, Any]]] = {
    "redis": publish_redis,
    "nats": publish_nats,
    "rabbitmq": publish_rabbitmq,
    "sqs": publish_sqs,
}

# --- measuring ------------------------------------------------------------------------------------


def _events(gw: GatewayProcess) -> int:
    count, cursor = 0, None
    while True:
        page = gw.admin("/api/events", limit=500, **({"cursor": cursor} if cursor else {}))
        count += sum(1 for e in page["items"] if e["source"] == "hook:plain")
        cursor = page.get("nextCursor")
        if not cursor:
            return count


def measure_source(kind: str, burst: int, max_in_flight: int, root: Path) -> dict[str, Any]:
    name = f"bench_{kind}_{uuid.uuid4().hex[:8]}"
    try:
        block = PUBLISH[kind](name, burst)
    except Exception as e:
        return {"kind": kind, "skipped": f"{type(e).__name__}: {e}"}
    config = base_config(mappings=RULES)
    config["sources"] = [{"name": "bench", "path": "plain", "maxInFlight": max_in_flight, **block}]
    gw = GatewayProcess(config, root / kind)
    try:
        gw.start(timeout=60)
        state: dict[str, Any] = {}
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            state = gw.admin("/api/sources")["sources"][0]
            if state["connected"]:
                break
            time.sleep(0.01)
        started = time.monotonic()
        while time.monotonic() < deadline and state["acked"] < burst:
            time.sleep(0.05)
            state = gw.admin("/api/sources")["sources"][0]
        seconds = time.monotonic() - started
        time.sleep(2.5)  # the lag is asked of the broker every 2 s
        state = gw.admin("/api/sources")["sources"][0]
        stored = _events(gw)
        return {
            "kind": kind,
            "messages": burst,
            "seconds": round(seconds, 2),
            "per_second": round(state["acked"] / seconds, 1),
            "acked": state["acked"],
            "stored": stored,
            "lag_after": state["lag"],
            "refused": state["refused"],
        }
    finally:
        gw.stop()
        cleanup(kind, name)


def measure_http(path: str, seconds: int, connections: int, root: Path) -> dict[str, Any]:
    """`POST /hooks/<path>` with wrk for `seconds` (the door's figure, as `bench/ingest.py`)."""
    import ingest

    config = base_config(mappings=RULES)
    config["hooks"]["token"] = ingest.HOOK_TOKEN
    gw = GatewayProcess(config, root / path).start(timeout=60)
    try:
        endpoint = ingest.EndpointSpec(path, f"/hooks/{path}", {"text": "bench http"})
        load = ingest.LoadSpec(duration_s=seconds, connections=connections)
        ingest.run_wrk(gw.url, endpoint, load, 2)  # warm-up
        stats = ingest.run_wrk(gw.url, endpoint, load, seconds)
        return {
            "kind": f"http /hooks/{path}",
            "messages": stats.acknowledged,
            "seconds": seconds,
            "per_second": round(stats.acknowledged / seconds, 1),
            "acked": stats.acknowledged,
            "stored": stats.acknowledged,
            "lag_after": None,
            "refused": stats.non_2xx,
        }
    finally:
        gw.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burst", type=int, default=5000)
    parser.add_argument("--brokers", default="redis,nats,rabbitmq", help="and sqs (moto: slow)")
    parser.add_argument("--max-in-flight", type=int, default=64)
    parser.add_argument("--connections", type=int, default=32, help="wrk's, for /wake")
    parser.add_argument("--http-seconds", type=int, default=10, help="wrk's run (0: no HTTP)")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="hookwise-bench-sources-") as tmp:
        root = Path(tmp)
        if args.http_seconds:
            for path in ("wake", "plain"):
                results.append(measure_http(path, args.http_seconds, args.connections, root))
        for kind in args.brokers.split(","):
            results.append(measure_source(kind.strip(), args.burst, args.max_in_flight, root))
    print(
        f"{'source':<20} {'messages':>8} {'seconds':>8} {'msgs/s':>9} {'stored':>7} {'lag after':>9}"
    )
    bad = False
    for r in results:
        if "skipped" in r:
            print(f"{r['kind']:<20} skipped: {r['skipped']}")
            continue
        lag = "-" if r["lag_after"] is None else str(r["lag_after"])
        print(
            f"{r['kind']:<20} {r['messages']:>8} {r['seconds']:>8} {r['per_second']:>9} "
            f"{r['stored']:>7} {lag:>9}"
        )
        bad |= r["stored"] < r["messages"] or r["refused"] > 0
    print("BENCH_JSON " + json.dumps({"burst": args.burst, "results": results}))
    if "proc" in _MOTO:
        _MOTO["proc"].terminate()
    if any("skipped" in r for r in results):
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
