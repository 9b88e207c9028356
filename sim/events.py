"""Event records (link_event, wjh_drop) with each source's timestamp unit:
switches report in ms, hosts (kernel) in ns."""
from __future__ import annotations

PCI_ADDR = "0000:3b:00.0"


def ms(t: float) -> int:
    return int(round(t * 1000))


def ns(t: float) -> int:
    return int(round(t * 1e6)) * 1000


def switch_link_event(device: str, iface: str, t: float, *, up: bool, reason: str) -> dict:
    old, new = ("down", "up") if up else ("up", "down")
    message = f"{iface}: oper state changed {old} -> {new}" + ("" if up else f" ({reason})")
    return {
        "name": "link_event",
        "tags": {"host": device, "interface": iface, "source": "syslog"},
        "fields": {"old_state": old, "new_state": new, "down_reason": "" if up else reason,
                   "message": message},
        "timestamp": ms(t),
    }


def host_link_event(host: str, iface: str, t: float, *, up: bool, speed_mbps: int) -> dict:
    old, new = ("down", "up") if up else ("up", "down")
    text = f"Link up, {speed_mbps} Mbps" if up else "Link down"
    return {
        "name": "link_event",
        "tags": {"host": host, "interface": iface, "source": "kernel"},
        "fields": {"old_state": old, "new_state": new,
                   "down_reason": "" if up else "carrier loss",
                   "message": f"mlx5_core {PCI_ADDR} {iface}: {text}"},
        "timestamp": ns(t),
    }


def wjh_buffer_drop(device: str, *, ingress: str, egress: str, t: float, drops: int,
                    occupancy: int, sip: str, dip: str, sport: int) -> dict:
    """An NVIDIA What Just Happened buffer (tail) drop event, aggregated."""
    return {
        "name": "wjh_drop",
        "tags": {"host": device, "ingress_port": ingress, "drop_type": "Buffer",
                 "reason_id": "503", "severity": "Warning"},
        "fields": {"reason": "Tail drop", "agg_count": drops, "egress_port": egress,
                   "traffic_class": 3, "original_occupancy": occupancy, "sip": sip,
                   "dip": dip, "proto": 17, "sport": sport, "dport": 4791},
        "timestamp": ms(t),
    }
