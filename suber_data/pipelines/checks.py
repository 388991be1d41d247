"""The one place where the library's ``CheckOutcome``s become Dagster ``AssetCheckResult``s.

A check is *blocking* when a table failing it must not feed the next step (wrong ids, a broken schema, bad
vectors): Dagster then fails the check's step and skips everything downstream, in the UI and in the CLI's
run alike. Checks that measure a figure against a target (census fit, TMDB coverage, description quality)
only report: the dataset is still usable and the figure is in the run and the manifest.
"""

from collections.abc import Callable, Iterator

import dagster as dg

from suber_data.artifacts.checks import CheckOutcome


def to_dagster(outcome: CheckOutcome, asset_key: dg.AssetKey | str | None = None) -> dg.AssetCheckResult:
    severity = dg.AssetCheckSeverity.WARN if outcome.severity == "warn" else dg.AssetCheckSeverity.ERROR
    metadata = {k: _value(v) for k, v in outcome.metadata.items()}
    if outcome.description:
        metadata["description"] = outcome.description
    extra = {"asset_key": asset_key, "check_name": outcome.name} if asset_key is not None else {}
    return dg.AssetCheckResult(passed=bool(outcome.passed), severity=severity, metadata=metadata, **extra)


def _value(v):
    """A figure as Dagster shows it: scalars as they are, lists and tables as JSON, anything else as text."""
    if isinstance(v, int | float | str | bool):
        return v
    return dg.MetadataValue.json(v) if isinstance(v, list | dict) else str(v)


def multi_check(
    asset_key: dg.AssetKey | str,
    name: str,
    descriptions: dict[str, str],
    evaluate: Callable[..., list[CheckOutcome]],
    resources: frozenset[str],
    partitions: dg.PartitionsDefinition,
    blocking: frozenset[str] = frozenset(),
) -> dg.AssetChecksDefinition:
    """Checks of one asset evaluated together (one read of the data); ``evaluate(context)`` gives the outcomes
    for the run's release (``partitions``: the asset's). The checks named in ``blocking`` stop the downstream
    assets when they fail."""
    unknown = blocking - descriptions.keys()
    if unknown:
        raise ValueError(f"blocking checks {sorted(unknown)} are not checks of {name}")
    specs = [
        dg.AssetCheckSpec(
            check, asset=asset_key, description=text, blocking=check in blocking, partitions_def=partitions
        )
        for check, text in descriptions.items()
    ]

    @dg.multi_asset_check(specs=specs, name=name, required_resource_keys=set(resources))
    def _checks(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        for outcome in evaluate(context):
            yield to_dagster(outcome, asset_key)

    return _checks
