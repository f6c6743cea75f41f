"""DL/T 645-2007 meters of the `dlt645` package (MeterServerService), used as a
real peer by the engine's integration tests (see engine/tests/it/support/peers.rs).

    python dlt645_meter.py PORT MAPFILE.json               # one meter on 127.0.0.1:PORT
    python dlt645_meter.py PORT MAPFILE.json --serial TTY  # meters sharing a serial line

MAPFILE gives each meter's address and values by data identifier (8 hex digits),
one meter or a list of them:

    {"address": "000000000001", "values": {"02010100": 229.7, "00000000": 45678.91}}
    {"meters": [{"address": "000000000001", "values": {...}}, {"address": ...}]}

The address goes on the wire lowest byte first, as the standard orders it (the
package's own `set_address` of a string would send it the other way round). On
a serial line (9600 baud, 8 data bits, even parity, 1 stop bit) each request is
answered by the meter it names; a request for no meter on the line gets no
answer, as on a real RS-485 bus; PORT then only tells the harness the line is
open. Runs until SIGTERM or SIGINT; tests wait for PORT to accept connections.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading

import serial
from dlt645 import MeterServerService
from dlt645.transport.server.rtu_server import RtuServer


def wire_address(digits: str) -> bytes:
    return bytes(int(digits[i : i + 2], 16) for i in range(10, -1, -2))


def fill(service: MeterServerService, spec: dict) -> None:
    service.set_address(wire_address(spec["address"]))
    for identifier, value in spec["values"].items():
        di = int(identifier, 16)
        if di >> 24 == 0x00:
            service.set_00(di, value)
        else:
            service.set_02(di, value)


class Line:
    """The meters of one serial line: a request goes to the meter it names."""

    def __init__(self, meters: list[MeterServerService]) -> None:
        self.meters = meters

    def handle_request(self, frame):
        for meter in self.meters:
            if bytes(meter.address) == bytes(frame.addr):
                return meter.handle_request(frame)
        return None


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 4 and args[2] == "--serial":
        tty = args[3]
    elif len(args) == 2:
        tty = None
    else:
        print("usage: dlt645_meter.py PORT MAPFILE.json [--serial TTY]", file=sys.stderr)
        sys.exit(2)
    port = int(args[0])
    with open(args[1], encoding="utf-8") as file:
        spec = json.load(file)
    meters = spec.get("meters", [spec])
    if tty is None:
        service = MeterServerService.new_tcp_server("127.0.0.1", port, 5.0)
        fill(service, meters[0])
        service.start()
    else:
        server = RtuServer(tty, 8, 1, 9600, serial.PARITY_EVEN, 5.0)
        line = []
        for meter in meters:
            service = MeterServerService(server)
            fill(service, meter)
            line.append(service)
        server.service = Line(line)
        if not server.start():
            print(f"cannot open {tty}", file=sys.stderr)
            sys.exit(1)
        # Held open until the end: the harness knows the line is up.
        _ready = socket.create_server(("127.0.0.1", port))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()


if __name__ == "__main__":
    main()
