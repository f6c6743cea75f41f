"""A Modbus TCP server built on pymodbus, used as a real peer by the engine's
integration tests (see engine/tests/support/peers.rs).

    python pymodbus_server.py PORT MAPFILE.json

Listens on 127.0.0.1:PORT only and answers every unit id from one data store.
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
from pymodbus.server import ModbusTcpServer
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


def build_device(ranges: dict[str, list[tuple[int, list[int]]]]) -> SimDevice:
    """One SimDevice with separate tables (the tuple form), id 0 so it answers
    every unit id."""

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

    return SimDevice(0, simdata=(blocks("co"), blocks("di"), blocks("hr"), blocks("ir")))


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

    async def async_getValues(self, device_id, func_code, address, count=1):
        if not self.allowed(func_code, address, count):
            return ExcCodes.ILLEGAL_ADDRESS
        return await self.inner.async_getValues(device_id, func_code, address, count)

    async def async_setValues(self, device_id, func_code, address, values):
        if not self.allowed(func_code, address, len(values)):
            return ExcCodes.ILLEGAL_ADDRESS
        result = await self.inner.async_setValues(device_id, func_code, address, values)
        with open(WRITE_JOURNAL, "a", encoding="utf-8") as journal:
            entry = {"fc": func_code, "address": address, "values": [int(v) for v in values]}
            journal.write(json.dumps(entry) + "\n")
        return result


async def serve(port: int, ranges) -> None:
    server = ModbusTcpServer(build_device(ranges), address=("127.0.0.1", port))
    # The server reaches its data only through `context`; put the check there.
    server.context = StrictRanges(server.context, ranges)

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(server.shutdown()))

    print(f"pymodbus_server: serving 127.0.0.1:{port}", file=sys.stderr, flush=True)
    await server.serve_forever()


def main() -> None:
    if len(sys.argv) != 3:
        fail("usage: pymodbus_server.py PORT MAPFILE.json")
    try:
        port = int(sys.argv[1])
    except ValueError:
        fail(f"bad port {sys.argv[1]!r}")
    asyncio.run(serve(port, load_map(sys.argv[2])))


if __name__ == "__main__":
    main()
