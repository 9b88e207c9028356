"""Entity kinds, their ids (contract section 4) and the root causes (section 5, plus the
engine's extension causes, marked below)."""
from __future__ import annotations

LINK = "link"
INTERFACE = "interface"
SWITCH = "switch"
HOST = "host"
STORAGE = "storage"
JOB = "job"
ENTITY_KINDS = (INTERFACE, SWITCH, HOST, STORAGE, LINK, JOB)

# cause -> the kind of entity it names: contract section 5's list, in its order
CONTRACT_CAUSE_ENTITY_KIND: dict[str, str] = {
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
# EXTENSION causes: diagnosed by this engine beyond the contract's list, and proposed for
# it (docs/design.md "Extension causes"). Every package treats them as it treats the
# contract's (the API's cause enum, feedback, notifications); once the shared contract
# lists one, it moves to the dict above (tests/test_contract_vocabulary.py says when).
EXTENSION_CAUSE_ENTITY_KIND: dict[str, str] = {
    "link_miswired": LINK,  # a cable LLDP sees elsewhere than the declared topology puts it
}
CAUSE_ENTITY_KIND: dict[str, str] = CONTRACT_CAUSE_ENTITY_KIND | EXTENSION_CAUSE_ENTITY_KIND
CONTRACT_CAUSES: tuple[str, ...] = tuple(CONTRACT_CAUSE_ENTITY_KIND)
EXTENSION_CAUSES: tuple[str, ...] = tuple(EXTENSION_CAUSE_ENTITY_KIND)
CAUSES: tuple[str, ...] = CONTRACT_CAUSES + EXTENSION_CAUSES

def interface_id(host: str, interface: str) -> str:
    return f"{host}:{interface}"


def device_of(interface: str) -> str:
    """The device part of an interface id (`leaf01:swp1` -> `leaf01`)."""
    return interface.split(":", 1)[0]


def link_id(a: str, b: str) -> str:
    """Contract id of the link between two interface ids: sorted, joined by `--`."""
    x, y = sorted((a, b))
    return f"{x}--{y}"
