"""The clock verdict of `time` (workloads/clocks.py) on NVML reads as the H200 gives them, and
what happens where NVML cannot be read."""

from workloads import clocks


def _read(sm, mask=0):
    return {
        "sm_mhz": sm,
        "mem_mhz": 3201,
        "temp_c": 40,
        "power_w": 120.0,
        "reasons": clocks.reason_names(mask),
        "reasons_mask": mask,
    }


def test_steady_clocks_and_idle_or_policy_reasons_are_not_flagged():
    # idle (0x1) before the variant starts, the application-clock policy (0x2) in force
    assert clocks.verdict([_read(1980, 0x1), _read(1980, 0x2), _read(1965, 0x2)]) is None


def test_a_power_cap_is_flagged_by_name():
    v = clocks.verdict([_read(1980), _read(1980, 0x4 | 0x2), _read(1980)])
    assert v == "the GPU throttled (sw_power_cap)"


def test_a_clock_below_90_percent_of_the_start_is_flagged():
    v = clocks.verdict([_read(1980), _read(1700), _read(1900)])
    assert v == "its SM clock fell to 1700 MHz from 1980 MHz at the start"
    assert clocks.verdict([_read(1980), _read(1790)]) is None  # 90.4%: within


def test_thermal_and_clock_drop_together():
    v = clocks.verdict([_read(1980), _read(1500, 0x40)])
    assert v.startswith("the GPU throttled (hw_thermal_slowdown)") and "1500 MHz" in v


def test_reason_names_decode_every_bit():
    assert clocks.reason_names(0x1 | 0x8 | 0x100) == ["gpu_idle", "hw_slowdown", "display_clock_setting"]


def test_no_nvml_here_is_said_not_raised():
    watch, why = clocks.open_watch(0)
    assert watch is None and why.startswith("clocks not read: ")
