"""``bench/completion_cost.py``'s pure parts: the summary and the sorting of perf's switches."""

from __future__ import annotations

import pytest

from tests.bench_modules import load_bench

cc = load_bench("completion_cost")

K = "\tffffffff82248208 __schedule+0x628 ([kernel.kallsyms])\n"
SYSCALL = K + "\tffffffff81000130 entry_SYSCALL_64_after_hwframe+0x76 ([kernel.kallsyms])\n"
TICK = K + "\tffffffff81000c82 asm_sysvec_apic_timer_interrupt+0x1a ([kernel.kallsyms])\n"
RUST = "\tf2d248 <temporal_sdk_bridge::worker::WorkerRef>::__pymethod_complete_activity_task__+0x1c"
FUTEX = (
    "\t101829 syscall+0x19 (libc.so.6)\n\t17c9f5c tokio::runtime::context::with_scheduler::<(),"
    " <Handle>::schedule_task::{closure#0}>+0x7c (bridge.so)\n" + RUST
)
EVENTFD = "\t1 __GI___libc_write (libc.so.6)\n\t2 <mio::sys::unix::waker::Waker>::wake (x)\n" + RUST


def _switch(tid: int, state: str, next_comm: str, stack: str) -> str:
    head = (
        f"python {tid} [000]  1.0: sched:sched_switch: prev_comm=python prev_pid={tid} "
        f"prev_prio=120 prev_state={state} ==> next_comm={next_comm} next_pid=9 next_prio=120"
    )
    return head + "\n" + stack


def test_switches_are_sorted_by_thread_state_and_where_they_hit() -> None:
    script = "\n\n".join(
        [
            _switch(7, "R", "tokio-rt-worker", SYSCALL + FUTEX),
            _switch(7, "R+", "tokio-rt-worker", SYSCALL + EVENTFD),
            _switch(7, "R", "temporal", TICK + RUST),
            _switch(7, "R", "temporal", SYSCALL + "\t1 epoll_wait (libc.so.6)"),
            _switch(7, "S", "tokio-rt-worker", SYSCALL + FUTEX),  # went to sleep: not counted
            _switch(70, "R", "python", SYSCALL + FUTEX),  # another thread (tid 7 prefix)
        ]
    )
    got = cc.preemptions(script, 7)
    assert got == {
        "total": 4,
        "in_completion": 3,
        "in_completion_futex_unpark": 1,
        "in_completion_eventfd_write": 1,
        "in_completion_timer_tick": 1,
        "took_cpu": {"tokio-rt-worker": 2, "temporal": 1},
    }


def _row(local: bool, cpu_us: float, wall_us: float, nivcsw: int) -> dict[str, float | bool]:
    return {
        "local": local,
        "bytes": 400,
        "result_bytes": 300,
        "ser_cpu_us": 5.0,
        "call_cpu_us": cpu_us,
        "wall_us": wall_us,
        "run_delay_us": wall_us - cpu_us - 5.0,
        "nivcsw": nivcsw,
    }


def test_summary_is_per_kind_of_completion_and_per_call() -> None:
    rows = [_row(False, 30.0, 1035.0, 1), _row(False, 30.0, 35.0, 0), _row(True, 40.0, 45.0, 0)]
    whole = {"wall_us": 4_000_000.0, "cpu_us": 40_000.0, "run_delay_us": 80_000.0, "nivcsw": 100}
    got = cc.summarize(rows, calls=2, heartbeats=1, whole=whole)
    assert got["heartbeats_per_call"] == 0.5
    assert got["loop_thread"] == {
        "cpu_ms_per_call": 20.0,
        "run_delay_ms_per_call": 40.0,
        "nivcsw_per_ms_wall": 0.025,
        "nivcsw_per_ms_cpu": 2.5,
    }
    act, la = got["activity"], got["local_activity"]
    assert (act["per_call"], la["per_call"]) == (1.0, 0.5)
    assert act["preempted_share"] == 0.5 and la["preempted_share"] == 0.0
    assert act["call_cpu_ms_per_call"] == pytest.approx(0.03)
    assert act["wall_ms_per_call"] == pytest.approx(0.535)
    assert act["run_delay_ms_per_call"] == pytest.approx(0.5)
    assert act["median_wall_us"] == 535.0
