"""A simulated fleet of 500 devices, as an MCP server on the official SDK
(docs/run_script.md, "The fleet example").

Tools: ``list_devices`` and ``get_device_status(sn)`` (read-only, a few ms of latency, some
devices offline), ``set_device_config`` (write) and ``reboot_device`` (destructive). The data is
generated from a fixed seed, so every run sees the same fleet.

Run it over stdio: ``python -m sagents.demo.fleet_server`` (``sagents demo`` does; so does
``examples/fleet/mcp_servers.json``).
"""

from __future__ import annotations

import random

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel

__all__ = ["build_server"]

DEVICE_COUNT = 500
SEED = 20261129
LATENCY_S = 0.003  # simulated per-call latency of get_device_status
FIRMWARES = ("2.4.1", "2.4.1", "2.4.1", "2.5.0", "2.5.0", "2.3.7", "3.0.0-rc1")
ALERTS = (
    ("critical", "temperature above 85 °C"),
    ("critical", "disk failure predicted"),
    ("warning", "fan speed low"),
    ("warning", "certificate expires in 7 days"),
    ("info", "configuration drift"),
)


class Alert(BaseModel):
    """One alert raised by a device."""

    severity: str
    message: str


class Device(BaseModel):
    """A device of the fleet."""

    sn: str
    model: str
    site: str


class DeviceList(BaseModel):
    """All devices."""

    devices: list[Device]


class DeviceStatus(BaseModel):
    """The live status of one device."""

    sn: str
    online: bool
    firmware: str
    uptime_h: int
    temperature_c: float | None
    alerts: list[Alert]


def fleet_status(seed: int = SEED) -> dict[str, DeviceStatus]:
    """The deterministic statuses of the whole fleet, by serial number."""
    rng = random.Random(seed)
    statuses = {}
    for n in range(DEVICE_COUNT):
        sn = f"SN{n:04d}"
        online = rng.random() > 0.07
        alerts = [Alert(severity=s, message=m) for s, m in ALERTS if rng.random() < 0.04]
        statuses[sn] = DeviceStatus(
            sn=sn,
            online=online,
            firmware=rng.choice(FIRMWARES),
            uptime_h=rng.randint(1, 5000) if online else 0,
            temperature_c=round(rng.uniform(30, 90), 1) if online else None,
            alerts=alerts if online else [],
        )
    return statuses


def build_server() -> MCPServer:
    """The fleet MCP server (in-process for tests, stdio when run as a script)."""
    server = MCPServer(name="fleet", instructions="A simulated fleet of 500 devices.")
    statuses = fleet_status()
    models = ("edge-100", "edge-200", "core-9")
    devices = [
        Device(sn=sn, model=models[i % 3], site=f"site-{i % 12:02d}")
        for i, sn in enumerate(statuses)
    ]
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    def list_devices() -> DeviceList:
        """List every device of the fleet (serial number, model, site)."""
        return DeviceList(devices=devices)

    @server.tool(annotations=read_only)
    async def get_device_status(sn: str) -> DeviceStatus:
        """Get one device's live status: online, firmware, uptime, temperature, alerts."""
        await anyio.sleep(LATENCY_S)
        if sn not in statuses:
            raise ValueError(f"no device {sn!r}")
        return statuses[sn]

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def set_device_config(sn: str, key: str, value: str) -> str:
        """Set one configuration key of a device."""
        if sn not in statuses:
            raise ValueError(f"no device {sn!r}")
        return f"{sn}: {key} set to {value!r}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def reboot_device(sn: str) -> str:
        """Reboot a device (it drops offline for a few minutes)."""
        return f"{sn}: rebooting"

    return server


if __name__ == "__main__":
    build_server().run("stdio")
