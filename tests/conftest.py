import pytest


@pytest.fixture(scope="session")
def scenario_dir(tmp_path_factory):
    """Generate a scenario once per session: scenario_dir(name) -> folder."""
    import sim

    made: dict[str, object] = {}

    def make(name: str, **kwargs):
        key = name + repr(sorted(kwargs.items()))
        if key not in made:
            out = tmp_path_factory.mktemp(name)
            sim.simulate(out=out, scenario=name, seed=kwargs.pop("seed", 7), **kwargs)
            made[key] = out
        return made[key]

    return make
