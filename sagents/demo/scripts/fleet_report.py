"""A run_script script: query all 500 devices with call_many, print a short summary.

Runs inside run_script (``from agent_tools import ...`` only works there), e.g.
``python examples/fleet/run_fleet_report.py``.
"""

from collections import Counter

from agent_tools import call, call_many, progress

devices = call("fleet__list_devices", {})["devices"]
sns = [device["sn"] for device in devices]
statuses = []
for start in range(0, len(sns), 100):
    chunk = sns[start : start + 100]
    statuses += call_many("fleet__get_device_status", [{"sn": sn} for sn in chunk])
    progress(len(statuses), len(sns), "querying devices")

online = [s for s in statuses if s["online"]]
offline = sorted(s["sn"] for s in statuses if not s["online"])
firmware = Counter(s["firmware"] for s in online)
rank = {"critical": 0, "warning": 1, "info": 2}
alerts = sorted(
    (
        (rank.get(a["severity"], 3), s["sn"], a["severity"], a["message"])
        for s in online
        for a in s["alerts"]
    ),
)
hot = sorted(online, key=lambda s: s["temperature_c"] or 0, reverse=True)[:3]

print(f"{len(statuses)} devices: {len(online)} online, {len(offline)} offline")
print("offline:", ", ".join(offline[:10]) + (" ..." if len(offline) > 10 else ""))
print("firmware:", ", ".join(f"{v} x{n}" for v, n in firmware.most_common()))
print(f"alerts: {len(alerts)} ({sum(1 for a in alerts if a[0] == 0)} critical); worst:")
for _, sn, severity, message in alerts[:5]:
    print(f"  {sn} {severity}: {message}")
print("hottest:", ", ".join(f"{s['sn']} {s['temperature_c']} °C" for s in hot))
