"""DL/T 645-2007 meters of the `dlt645` package (MeterServerService), used as a
real peer by the engine's integration tests (see engine/tests/it/support/peers.rs).

    python dlt645_meter.py PORT MAPFILE.json

Listens on 127.0.0.1:PORT. MAPFILE gives the meter's address and values by data
identifier (8 hex digits):

    {"address": "000000000001", "values": {"02010100": 229.7, "00000000": 45678.91}}

The address goes on the wire lowest byte first, as the standard orders it (the
package's own `set_address` of a string would send it the other way round).
Runs until SIGTERM or SIGINT; tests wait for the port to accept connections.
"""

from __future__ import annotations

import json
import signal
import sys
import threading

from dlt645 import MeterServerService


def main() -> None:
    if len(sys.argv) != 3:
        print("usage: dlt645_meter.py PORT MAPFILE.json", file=sys.stderr)
        sys.exit(2)
    port = int(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as file:
        spec = json.load(file)
    service = MeterServerService.new_tcp_server("127.0.0.1", port, 5.0)
    digits = spec["address"]
    service.set_address(bytes(int(digits[i : i + 2], 16) for i in range(10, -1, -2)))
    for identifier, value in spec["values"].items():
        di = int(identifier, 16)
        if di >> 24 == 0x00:
            service.set_00(di, value)
        else:
            service.set_02(di, value)
    service.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()


if __name__ == "__main__":
    main()
