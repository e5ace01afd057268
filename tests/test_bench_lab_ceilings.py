"""bench/lab's ceilings say which limit a burst ran into: the busiest process on its one core, or all of
the processes on the machine's cores."""

from __future__ import annotations

from bench.lab import Ceilings


def test_a_slow_phase_meets_both_ceilings_below_200() -> None:
    # session 45's first run: lab 5.54 + workers 4.17 ms per pod, the bench client 0.89 ms, 2 cores
    ceilings = Ceilings.of([5.54, 4.17], 0.89, 2)
    assert ceilings.one_core == 180.5
    assert ceilings.all_cores == 188.7


def test_the_busiest_process_binds_when_the_others_are_light() -> None:
    ceilings = Ceilings.of([4.0, 1.0], 0.5, 2)
    assert ceilings.one_core == 250.0
    assert ceilings.all_cores == 363.6
    assert min(ceilings.one_core, ceilings.all_cores) == ceilings.one_core


def test_moving_work_between_processes_cannot_lift_the_all_cores_ceiling() -> None:
    before = Ceilings.of([5.5, 4.0], 1.0, 2)
    after = Ceilings.of([4.5, 5.0], 1.0, 2)  # a millisecond moved out of the busiest process
    assert after.one_core > before.one_core
    assert after.all_cores == before.all_cores
