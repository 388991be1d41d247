"""Progress of a long asset in Dagster's run log: each update is one ``context.log`` line.

The update also travels as data (``extra={PROGRESS: ...}`` on the log record), so a Dagster logger can
draw it: the CLI's bars (``suber_data.cli.progress``) are made from these same records.
"""

import dagster as dg

from suber_data.progress import ProgressReport

PROGRESS = "suber_progress"  # the log record attribute that carries a ProgressUpdate as a dict


def log_progress(context: dg.AssetExecutionContext, unit: str) -> ProgressReport:
    """A ``progress(done, total)`` callback for the asset's library step: throttled updates in the run's log,
    named by the asset key (and the partition, if any)."""
    step = context.asset_key.to_user_string()
    if context.has_partition_key:
        step += f"[{context.partition_key}]"
    return ProgressReport(step, unit, lambda u: context.log.info(u.text(), extra={PROGRESS: u.to_dict()}))
