import pytest

from decider.app.requests import sampling_from
from decider.engine.core.errors import SettingsError
from decider.engine.core.settings import SamplingSettings


@pytest.mark.parametrize(
    "name,value,message",
    [
        ("temperature", -0.1, r"temperature must be a number in \[0.0, 2.0\]"),
        ("temperature", float("nan"), "temperature must be a number"),
        ("top_k", 2.5, "top_k must be an integer"),
        ("top_p", 0.0, r"top_p must be a number in \(0.0, 1.0\]"),
        ("min_p", 1.5, "min_p must be a number"),
        ("repetition_penalty", 0.0, "repetition_penalty must be a number"),
        ("frequency_penalty", 3.0, "frequency_penalty must be a number"),
        ("presence_penalty", -2.5, "presence_penalty must be a number"),
        ("seed", -1, "seed must be an integer"),
        ("top_k", True, "top_k must be an integer"),
    ],
)
def test_out_of_range_settings_name_the_setting_and_range(name, value, message):
    with pytest.raises(SettingsError, match=message):
        SamplingSettings(**{name: value})


def test_model_generation_config_overrides_defaults():
    s = SamplingSettings.for_model({"temperature": 0.6, "top_p": 0.95, "top_k": 20})
    assert (s.temperature, s.top_p, s.top_k) == (0.6, 0.95, 20)
    assert s.presence_penalty == 1.5


def test_outside_values_map_through_one_function():
    base = SamplingSettings()
    s = sampling_from({"temperature": 0, "top_k": 5.0, "seed": None}, base)
    assert s.temperature == 0.0 and s.top_k == 5 and s.greedy
    with pytest.raises(SettingsError, match="top_p must be a number"):
        sampling_from({"top_p": "high"}, base)
