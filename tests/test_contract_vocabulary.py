"""contract/ against docs/contract.md: the causes it lists are the contract's table, and
the extension causes are the engine's own, beyond it, until the contract takes them."""
from __future__ import annotations

import re
from pathlib import Path

from contract.entities import (
    CAUSE_ENTITY_KIND, CAUSES, CONTRACT_CAUSE_ENTITY_KIND, ENTITY_KINDS, EXTENSION_CAUSE_ENTITY_KIND, EXTENSION_CAUSES,
)

CONTRACT = Path(__file__).parent.parent / "docs" / "contract.md"


def _contract_causes() -> dict[str, str]:
    text = CONTRACT.read_text()
    section = text[text.index("## 5. Root causes"):text.index("## 6.")]
    return dict(re.findall(r"^\| ([a-z_]+) \| ([a-z]+) \|", section, re.M))  # (the header, "entity kind", is not)


def test_the_contract_causes_are_the_contracts_table_in_its_order():
    assert list(CONTRACT_CAUSE_ENTITY_KIND.items()) == list(_contract_causes().items())


def test_extension_causes_are_beyond_the_contract_and_listed_with_it():
    # When docs/contract.md (a copy of shared/contract.md) lists an extension cause, this
    # fails: move it into CONTRACT_CAUSE_ENTITY_KIND and out of docs/design.md's list.
    assert EXTENSION_CAUSES == ("link_miswired",)
    assert not set(EXTENSION_CAUSES) & set(_contract_causes())
    assert CAUSES[-len(EXTENSION_CAUSES):] == EXTENSION_CAUSES and len(set(CAUSES)) == len(CAUSES)
    assert CAUSE_ENTITY_KIND == CONTRACT_CAUSE_ENTITY_KIND | EXTENSION_CAUSE_ENTITY_KIND
    assert set(CAUSE_ENTITY_KIND.values()) <= set(ENTITY_KINDS)
    design = (Path(__file__).parent.parent / "docs" / "design.md").read_text()
    section = design[design.index("## Extension causes"):]
    assert all(f"`{cause}`" in section for cause in EXTENSION_CAUSES)
