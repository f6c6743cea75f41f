"""A Siemens S7 server built on snap7 (the native library shipped with
python-snap7 < 3), used as a real peer by the engine's integration tests (see
engine/tests/support/peers.rs).

    python snap7_server.py PORT MAPFILE.json

Listens on 127.0.0.1:PORT only. MAPFILE gives the memory areas and their initial
bytes; every listed area is registered, nothing else exists (reading an
unregistered DB gives "item not available"):

    {"db": {"1": [0, 1, 2, ...], "7": [...]},   data blocks by number
     "mk": [...],                               merker (flags, M)
     "pe": [...],                               process inputs (I)
     "pa": [...]}                               process outputs (Q)

Writes from clients change the registered buffers in place. The server runs
until SIGTERM or SIGINT. It logs to stderr; tests wait for the port to accept
connections rather than for any output.
"""

from __future__ import annotations

import ctypes
import json
import signal
import sys
import threading

from snap7.server import Server
from snap7.type import SrvArea


def fail(message: str) -> None:
    print(f"snap7_server: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def buffer(values: list[int]) -> ctypes.Array:
    if not isinstance(values, list) or not values:
        fail("an area needs a nonempty list of bytes")
    if any(type(v) is not int or not 0 <= v <= 255 for v in values):
        fail("area values must be bytes (0..255)")
    return (ctypes.c_ubyte * len(values))(*values)


def main() -> None:
    if len(sys.argv) != 3:
        fail("usage: snap7_server.py PORT MAPFILE.json")
    port = int(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as file:
        spec = json.load(file)
    if not isinstance(spec, dict) or set(spec) - {"db", "mk", "pe", "pa"}:
        fail("the map has the keys db, mk, pe, pa only")

    server = Server(log=False)
    # Keep every buffer referenced: snap7 reads and writes them in place.
    areas = []
    for number, values in spec.get("db", {}).items():
        area = buffer(values)
        server.register_area(SrvArea.DB, int(number, 10), area)
        areas.append(area)
    for key, kind in (("mk", SrvArea.MK), ("pe", SrvArea.PE), ("pa", SrvArea.PA)):
        if key in spec:
            area = buffer(spec[key])
            server.register_area(kind, 0, area)
            areas.append(area)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start_to("127.0.0.1", port)
    print(f"snap7_server: listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    stop.wait()
    server.stop()
    server.destroy()


if __name__ == "__main__":
    main()
