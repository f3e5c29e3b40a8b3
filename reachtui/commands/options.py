"""Click options that several commands share, written once."""

from __future__ import annotations

import click


def placement_options(command):
    """Where the model runs: --device, --dtype, --device-map, --offload-folder (audit, open, generate)."""
    for option in reversed((
        click.option("--device", default="auto", show_default=True, help="auto|cpu|cuda[:N]"),
        click.option("--dtype", default="auto", show_default=True, help="auto|float32|bfloat16|float16"),
        click.option("--device-map", "device_map", default=None, metavar="MAP",
                     help="Let accelerate place the model (auto|balanced|sequential, or a JSON file of module -> "
                          "device): split over GPUs, offload what does not fit. Needs reachtui[gpu]. Not with "
                          "--device."),
        click.option("--offload-folder", "offload_folder", type=click.Path(file_okay=False), default=None,
                     help="Where a device map offloads weights to disk."),
    )):
        command = option(command)
    return command
