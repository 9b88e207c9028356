"""Entity kinds, their ids (contract section 4) and the root causes (section 5)."""
from __future__ import annotations

LINK = "link"
INTERFACE = "interface"
SWITCH = "switch"
HOST = "host"
STORAGE = "storage"
JOB = "job"
ENTITY_KINDS = (INTERFACE, SWITCH, HOST, STORAGE, LINK, JOB)

# cause -> the kind of entity it names
CAUSE_ENTITY_KIND: dict[str, str] = {
    "link_flap": LINK,
    "link_degraded": LINK,
    "pfc_storm": INTERFACE,
    "congestion": INTERFACE,
    "microburst": INTERFACE,
    "nic_degraded": INTERFACE,
    "storage_slow": STORAGE,
    "device_down": SWITCH,
    "noisy_neighbor": JOB,
}
CAUSES: tuple[str, ...] = tuple(CAUSE_ENTITY_KIND)


def interface_id(host: str, interface: str) -> str:
    return f"{host}:{interface}"


def device_of(interface: str) -> str:
    """The device part of an interface id (`leaf01:swp1` -> `leaf01`)."""
    return interface.split(":", 1)[0]


def link_id(a: str, b: str) -> str:
    """Contract id of the link between two interface ids: sorted, joined by `--`."""
    x, y = sorted((a, b))
    return f"{x}--{y}"
