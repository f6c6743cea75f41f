"""A Modbus server built on pymodbus, used as a real peer by the engine's
integration tests (see engine/tests/support/peers.rs).

    python pymodbus_server.py PORT MAPFILE.json [--rtu] [--serial PATH] [--units 1,2]

Listens on 127.0.0.1:PORT only and answers every unit id from one data store.
`--rtu` frames Modbus RTU (unit, PDU, CRC-16) over the TCP connection instead
of MBAP. `--serial PATH` serves RTU on the serial port PATH (one end of a
pseudo-terminal pair) instead, and listens on PORT only to tell the harness it
is up. `--units 1,2` answers those unit ids only, each with its own copy of
the data, and stays silent to any other (a dead unit on the line).
MAPFILE describes which addresses exist, per table:

    {"hr": {"0": [1, 2, 3], "100": [7]},   holding registers (16-bit values)
     "ir": {"10": [42]},                   input registers (16-bit values)
     "co": {"0": [1, 0, 1]},               coils (0/1)
     "di": {"5": [1]}}                     discrete inputs (0/1)

Keys are 0-based protocol addresses where a range starts; the list gives the
initial values of the consecutive addresses from there. Any table may be left
out. Only the listed addresses exist: a request that touches any other address
(including one straddling the end of a range) is answered with exception 2,
"illegal data address". Writes (FC05/06/15/16) change hr and co values, and
each one that is carried out is appended to `writes.jsonl` in the working
directory as `{"fc": 6, "address": 0, "values": [42]}`, so a test can count
how often the device was written.

Why the extra range check: pymodbus 3.16 keeps its data in the simulator's
SimDevice, which marks unlisted *registers* invalid but stores coils and
discrete inputs in 16-bit words, so an unlisted coil next to (or 16-aligned
before/after) a listed one reads as 0 instead of failing. The wrapper below
checks every request against the listed ranges before pymodbus sees it.

The server logs to stderr; tests wait for the port to accept connections
rather than for any output.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys

WRITE_JOURNAL = "writes.jsonl"

from pymodbus.constants import ExcCodes
from pymodbus.exceptions import NoSuchIdException
from pymodbus import FramerType
from pymodbus.server import ModbusSerialServer, ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

TABLES = ("co", "di", "hr", "ir")
BIT_TABLES = {"co", "di"}

# Which table each function code reads or writes (FC22/23 are the
# mask-write and read/write-multiple register functions).
FUNCTION_TABLE = {1: "co", 5: "co", 15: "co", 2: "di", 3: "hr", 6: "hr", 16: "hr", 22: "hr", 23: "hr", 4: "ir"}


def fail(message: str) -> None:
    print(f"pymodbus_server: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def load_map(path: str) -> dict[str, list[tuple[int, list[int]]]]:
    """Reads MAPFILE into {table: [(start, values), ...]}, sorted by start,
    rejecting malformed, out-of-range or overlapping entries."""
    with open(path, encoding="utf-8") as file:
        raw = json.load(file)
    if not isinstance(raw, dict):
        fail("the map must be a JSON object")
    unknown = set(raw) - set(TABLES)
    if unknown:
        fail(f"unknown tables {sorted(unknown)}; expected some of {list(TABLES)}")

    ranges: dict[str, list[tuple[int, list[int]]]] = {}
    for table in TABLES:
        entries = []
        for key, values in raw.get(table, {}).items():
            try:
                start = int(key)
            except ValueError:
                fail(f"{table}: start address {key!r} is not an integer")
            if not isinstance(values, list) or not values:
                fail(f"{table}[{key}]: values must be a non-empty list")
            limit = 1 if table in BIT_TABLES else 0xFFFF
            for value in values:
                # bool is an int in Python; accept true/false for bit tables too.
                if not isinstance(value, int) or not 0 <= value <= limit:
                    fail(f"{table}[{key}]: value {value!r} is not in 0..{limit}")
            if not 0 <= start or start + len(values) > 0x10000:
                fail(f"{table}[{key}]: range leaves the 0..65535 address space")
            entries.append((start, [int(v) for v in values]))
        entries.sort()
        for (a_start, a_values), (b_start, _) in zip(entries, entries[1:]):
            if a_start + len(a_values) > b_start:
                fail(f"{table}: ranges starting at {a_start} and {b_start} overlap")
        ranges[table] = entries
    return ranges


def build_device(ranges: dict[str, list[tuple[int, list[int]]]], unit: int = 0) -> SimDevice:
    """One SimDevice with separate tables (the tuple form); id 0 answers every
    unit id."""

    def blocks(table: str) -> list[SimData]:
        bits = table in BIT_TABLES
        datatype = DataType.BITS if bits else DataType.REGISTERS
        data = [
            SimData(start, values=[bool(v) for v in values] if bits else values, datatype=datatype)
            for start, values in ranges[table]
        ]
        # SimDevice needs at least one block per table. A table the map left
        # out gets a placeholder that the range check never lets anyone reach.
        return data or [SimData(0, values=[False] if bits else [0], datatype=datatype)]

    return SimDevice(unit, simdata=(blocks("co"), blocks("di"), blocks("hr"), blocks("ir")))


class StrictRanges:
    """Sits between the server and its data store and refuses (exception 2)
    every access that is not wholly inside one listed range."""

    def __init__(self, inner, ranges: dict[str, list[tuple[int, list[int]]]]):
        self.inner = inner
        self.spans = {t: [(s, s + len(v)) for s, v in entries] for t, entries in ranges.items()}

    def allowed(self, func_code: int, address: int, count: int) -> bool:
        table = FUNCTION_TABLE.get(func_code)
        if table is None or count < 1:
            return False
        end = address + count
        return any(start <= address and end <= stop for start, stop in self.spans[table])

    def device_ids(self) -> list[int]:
        return self.inner.device_ids()

    def require(self, device_id: int) -> None:
        """A unit id the server does not have is, as pymodbus says, missing (with
        --units, it then goes unanswered)."""
        ids = self.inner.device_ids()
        if 0 not in ids and device_id not in ids:
            raise NoSuchIdException(f"no unit {device_id}")

    async def async_getValues(self, device_id, func_code, address, count=1):
        self.require(device_id)
        if not self.allowed(func_code, address, count):
            return ExcCodes.ILLEGAL_ADDRESS
        return await self.inner.async_getValues(device_id, func_code, address, count)

    async def async_setValues(self, device_id, func_code, address, values):
        self.require(device_id)
        if not self.allowed(func_code, address, len(values)):
            return ExcCodes.ILLEGAL_ADDRESS
        result = await self.inner.async_setValues(device_id, func_code, address, values)
        with open(WRITE_JOURNAL, "a", encoding="utf-8") as journal:
            entry = {"fc": func_code, "address": address, "values": [int(v) for v in values]}
            journal.write(json.dumps(entry) + "\n")
        return result


async def serve(port: int, ranges, rtu: bool, serial: str | None, units: list[int]) -> None:
    devices = [build_device(ranges, unit) for unit in units] if units else build_device(ranges)
    quiet = bool(units)  # a unit id nobody has goes unanswered, as on a real line
    ready = None
    if serial:
        server = ModbusSerialServer(
            devices, framer=FramerType.RTU, port=serial, baudrate=19200,
            ignore_missing_devices=quiet,
        )
        # Only for the harness: it waits for this port to accept connections.
        ready = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", port)
    else:
        framer = FramerType.RTU if rtu else FramerType.SOCKET
        server = ModbusTcpServer(
            devices, framer=framer, address=("127.0.0.1", port), ignore_missing_devices=quiet,
        )
    # The server reaches its data only through `context`; put the check there.
    server.context = StrictRanges(server.context, ranges)

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(server.shutdown()))

    where = serial or f"127.0.0.1:{port}"
    print(f"pymodbus_server: serving {where}", file=sys.stderr, flush=True)
    await server.serve_forever()
    if ready:
        ready.close()


def main() -> None:
    args = sys.argv[1:]
    if len(args) < 2:
        fail("usage: pymodbus_server.py PORT MAPFILE.json [--rtu] [--serial PATH] [--units 1,2]")
    try:
        port = int(args[0])
    except ValueError:
        fail(f"bad port {args[0]!r}")
    ranges = load_map(args[1])
    rtu, serial, units = False, None, []
    rest = args[2:]
    while rest:
        option = rest.pop(0)
        if option == "--rtu":
            rtu = True
        elif option == "--serial" and rest:
            serial = rest.pop(0)
        elif option == "--units" and rest:
            try:
                units = [int(u) for u in rest.pop(0).split(",")]
            except ValueError:
                fail("--units takes unit ids separated by commas")
        else:
            fail(f"unknown option {option!r}")
    asyncio.run(serve(port, ranges, rtu, serial, units))


if __name__ == "__main__":
    main()
