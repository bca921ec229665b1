"""Small commands: generate the sample set, upload a spill file a run could not deliver."""

from __future__ import annotations

import click

from .cli_support import CONTEXT, reports_errors


@click.command("sample-data", context_settings=CONTEXT)
@click.option("--output", default=None, help="folder (default: the cache folder dataset=sample uses; "
              "a bigger --train-size there makes dataset=sample bigger)")
@click.option("--train-size", default=240, show_default=True, type=click.IntRange(2))
@click.option("--validation-size", default=48, show_default=True, type=click.IntRange(2))
@click.option("--test-size", default=48, show_default=True, type=click.IntRange(1))
@click.option("--seed", default=0, show_default=True, type=int)
@reports_errors
def sample_data_command(output, train_size, validation_size, test_size, seed):
    """Generate the sample set (New Yorker `matching` schema) in imagefolder layout."""
    from pathlib import Path

    from .data.sample import default_sample_dir, describe_os_error, generate_sample_set
    from .errors import OutputUnwritable

    sizes = {"train": train_size, "validation": validation_size, "test": test_size}
    target = Path(output) if output else default_sample_dir()
    try:
        folder = generate_sample_set(target, sizes, seed)
    except OSError as exc:
        raise OutputUnwritable(f"output: cannot write the sample set into '{target}' ({describe_os_error(exc)}); "
                               "allowed: an absent or empty folder, or a sample set, that this user can "
                               "write") from None
    click.echo(f"sample set: {folder} ({train_size}/{validation_size}/{test_size} rows)")


@click.command("upload-spill", context_settings=CONTEXT)
@click.argument("spill_file", type=click.Path(exists=True, dir_okay=False))
@reports_errors
def upload_spill_command(spill_file):
    """Send metrics a run could not deliver (tracking server away) to MLFLOW_TRACKING_URI."""
    from .tracking.spill import upload_spill

    sent, runs = upload_spill(spill_file)
    click.echo(f"uploaded {sent} metrics to {len(runs)} run(s): {', '.join(sorted(runs))}")
