"""A job's cost: GPU-seconds from the segment records, and an estimate in dollars."""

from __future__ import annotations

from collections.abc import Iterable

from fusionfleet.messages import JobCost, SegmentRecord

# g5.xlarge On-Demand in us-east-1 (one NVIDIA A10G), dollars per hour: the default GpuInstanceType's price.
DEFAULT_GPU_HOURLY_PRICE = 1.006


def job_cost(records: Iterable[SegmentRecord], gpu_hourly_price: float) -> JobCost:
    """Engine time and billed worker time summed over the segments' records, billed time priced per hour.

    A record holds the attempt that succeeded; its total_s is the worker's whole time on the segment
    (download, decode, engine, encode, upload), which is what a GPU host is paid for while it works.
    """
    if gpu_hourly_price < 0:
        raise ValueError(f"a GPU-hour cannot cost {gpu_hourly_price}")
    listed = list(records)
    engine_s = sum(record.engine_s for record in listed)
    billed_s = sum(record.total_s for record in listed)
    return JobCost(
        engine_gpu_s=round(engine_s, 3),
        billed_gpu_s=round(billed_s, 3),
        gpu_hourly_price=gpu_hourly_price,
        estimated_usd=round(billed_s / 3600 * gpu_hourly_price, 6),
    )
