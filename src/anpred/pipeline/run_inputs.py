"""The run's inputs step: gather and preprocess the inputs into the run store."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from anpred.inputs.images import gather_images
from anpred.inputs.preprocess import preprocess
from anpred.inputs.several import several_inputs
from anpred.inputs.tensors import (
    count_npz_inputs,
    image_tensor,
    input_range_of,
    is_image_shape,
    npz_inputs,
    random_tensor,
)
from anpred.interchange.export import AnchoredExport
from anpred.interchange.user_module import example_ranges, is_module_source
from anpred.settings import RunOptions
from anpred.store import RunStore


def count_inputs(options: RunOptions, export: AnchoredExport) -> int:
    """How many inputs the run will have, before they are prepared (for its memory and
    disk estimates): an ``--inputs`` file's count from its headers, else the images and
    synthetic ones asked for.
    """
    if options.inputs_file:
        path = Path(options.inputs_file)
        found = count_npz_inputs(path, export.input_name, export.input_shape)
        if found is not None:
            return found
    return (len(options.image_paths) or options.images) + options.synthetic


def prepare_inputs(
    options: RunOptions,
    run_dir: Path,
    export: AnchoredExport | None,
    preprocessing: str | None,
    size: int | None,
) -> list[str]:
    """Gather and preprocess the inputs into the run store; return input ids in order."""
    store = RunStore(run_dir)
    if store.has_inputs():
        return store.read_input_ids()
    if export is not None and is_module_source(options.model):  # integers: the example's span
        spans = example_ranges(export.folder, options.input_range, options.input_ranges)
        options = replace(options, input_ranges=(*options.input_ranges, *spans))
    if export is not None and store.has_packing():  # a user model with several inputs
        packed, sources = several_inputs(options, store.read_packing())
        store.write_inputs(packed, sources)
        return list(packed)
    if export is not None and options.inputs_file:
        given, sources = npz_inputs(
            Path(options.inputs_file), export.input_name, export.input_shape, export.input_dtype
        )
        store.write_inputs(given, sources)
        return list(given)
    images = gather_images(
        None if options.image_paths else options.images,
        options.image_paths,
        options.synthetic,
        options.seed,
    )
    arrays: dict[str, np.ndarray] = {}
    for image in images:
        if preprocessing is not None and size is not None:
            arrays[image.id] = preprocess(image, preprocessing, size)
        else:
            assert export is not None
            shape, dtype = export.input_shape, export.input_dtype
            if is_image_shape(shape):
                arrays[image.id] = image_tensor(
                    image.pixels,
                    shape,
                    options.preprocess,
                    options.mean,
                    options.std,
                    options.bgr,
                    dtype,
                )
            else:  # not an image: seeded tensors of the input's dtype (the image gives the id)
                span = input_range_of(
                    export.input_name,
                    [export.input_name],
                    options.input_range,
                    options.input_ranges,
                )
                arrays[image.id] = random_tensor(shape, dtype, options.seed, len(arrays), span)
    store.write_inputs(arrays, {i.id: i.source for i in images})
    return list(arrays)
