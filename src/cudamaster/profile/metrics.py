"""The one metric table: what ncu is asked to collect and what every summary reads.

Ids are Nsight Compute metric names (base name plus rollup/submetric suffix); every base name
except the launch__ attributes is listed in ``ncu --query-metrics`` for Hopper (checked by
tests against tests/fixtures/ncu/hopper_metric_names.txt, an extract of that listing).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    label: str
    id: str
    unit: str
    section: str  # sol | memory | compute | occupancy | launch | stalls

    @property
    def base(self) -> str:
        return self.id.split(".")[0]


def _m(label: str, id: str, unit: str, section: str) -> Metric:
    return Metric(label, id, unit, section)


STALL_REASONS = (
    "long_scoreboard", "short_scoreboard", "mio_throttle", "lg_throttle", "math_pipe_throttle",
    "barrier", "membar", "wait", "not_selected", "no_instruction", "branch_resolving",
    "dispatch_stall", "drain", "imc_miss", "tex_throttle", "sleeping", "gmma", "misc",
)  # fmt: skip

TABLE: tuple[Metric, ...] = (
    # Speed of light
    _m("Duration", "gpu__time_duration.sum", "ns", "sol"),
    _m("SM throughput", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "sol"),
    _m("Memory throughput", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%", "sol"),
    _m("DRAM throughput", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "sol"),
    _m("L1/TEX throughput", "l1tex__throughput.avg.pct_of_peak_sustained_active", "%", "sol"),
    _m("L2 throughput", "lts__throughput.avg.pct_of_peak_sustained_elapsed", "%", "sol"),
    # Memory workload
    _m("L1/TEX hit rate", "l1tex__t_sector_hit_rate.pct", "%", "memory"),
    _m("L2 hit rate", "lts__t_sector_hit_rate.pct", "%", "memory"),
    _m("DRAM bytes read", "dram__bytes_read.sum", "byte", "memory"),
    _m("DRAM bytes written", "dram__bytes_write.sum", "byte", "memory"),
    _m("DRAM bandwidth", "dram__bytes.sum.per_second", "byte/s", "memory"),
    _m("Max bandwidth", "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed", "%", "memory"),
    _m("Memory busy", "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed", "%", "memory"),
    _m("Memory pipes busy", "sm__memory_throughput.avg.pct_of_peak_sustained_active", "%", "memory"),
    _m("Shared bank conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "", "memory"),
    _m("Global load sector use", "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct", "%", "memory"),
    # Compute workload
    _m("Issue slots busy", "smsp__issue_active.avg.pct_of_peak_sustained_active", "%", "compute"),
    _m("Executed IPC active", "sm__inst_executed.avg.per_cycle_active", "inst/cycle", "compute"),
    _m("Executed IPC elapsed", "sm__inst_executed.avg.per_cycle_elapsed", "inst/cycle", "compute"),
    _m("SM busy", "sm__instruction_throughput.avg.pct_of_peak_sustained_active", "%", "compute"),
    _m("FMA pipe", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "%", "compute"),
    _m("ALU pipe", "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active", "%", "compute"),
    _m("FP64 pipe", "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active", "%", "compute"),
    _m("Tensor pipe", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "%", "compute"),
    _m("Shared pipe", "sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active", "%", "compute"),
    _m("LSU instructions", "smsp__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active", "%", "compute"),
    # Occupancy and launch statistics
    _m("Achieved occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active", "%", "occupancy"),
    _m("Theoretical occupancy", "sm__maximum_warps_per_active_cycle_pct", "%", "occupancy"),
    _m("Eligible warps per scheduler", "smsp__warps_eligible.avg.per_cycle_active", "warp", "occupancy"),
    _m("Block size", "launch__block_size", "", "launch"),
    _m("Grid size", "launch__grid_size", "", "launch"),
    _m("Registers per thread", "launch__registers_per_thread", "", "launch"),
    _m("Static shared memory per block", "launch__shared_mem_per_block_static", "byte", "launch"),
    _m("Dynamic shared memory per block", "launch__shared_mem_per_block_dynamic", "byte", "launch"),
    _m("Waves per SM", "launch__waves_per_multiprocessor", "", "launch"),
    # Warp stall reasons: % of active warps stalled for each reason
    *(
        _m(f"Stall {r.replace('_', ' ')}", f"smsp__warp_issue_stalled_{r}_per_warp_active.pct", "%", "stalls")
        for r in STALL_REASONS
    ),
)  # fmt: skip

BY_ID = {m.id: m for m in TABLE}
BY_LABEL = {m.label: m for m in TABLE}


def metric_ids() -> list[str]:
    """The ids to pass to ``ncu --metrics``."""
    return [m.id for m in TABLE]


def section(name: str) -> list[Metric]:
    return [m for m in TABLE if m.section == name]
