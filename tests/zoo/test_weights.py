"""Checkpoint round trips per family and clear errors for checkpoints that do not fit."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from anpred.errors import WeightsError  # noqa: E402
from anpred.zoo.weights import load_model  # noqa: E402


@pytest.mark.parametrize("name", ["resnet50", "yolov8n"])
def test_state_dict_round_trip_gives_identical_outputs(name: str, tmp_path) -> None:
    model, weights_id = load_model(name, seed=0)
    assert weights_id == "seed0"
    path = tmp_path / "w.pt"
    torch.save(model.state_dict(), path)
    loaded, loaded_id = load_model(name, weights=str(path))
    assert loaded_id.startswith("sha256:")
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a, b = model(x), loaded(x)
    a = a[0] if isinstance(a, tuple | list) else a
    b = b[0] if isinstance(b, tuple | list) else b
    assert torch.equal(a, b)


def test_ultralytics_checkpoint_loads_with_allowlisted_classes(tmp_path) -> None:
    model, _ = load_model("yolov8n", seed=0)
    path = tmp_path / "yolo.pt"
    torch.save({"model": model, "epoch": 3}, path)  # the ultralytics checkpoint layout
    loaded, _ = load_model("yolov8n", weights=str(path))
    for (ka, va), (kb, vb) in zip(
        model.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert ka == kb and torch.equal(va, vb)


def test_mismatching_checkpoint_is_one_line_error(tmp_path) -> None:
    model, _ = load_model("resnet50", seed=0)
    path = tmp_path / "resnet.pt"
    torch.save(model.state_dict(), path)
    with pytest.raises(WeightsError, match="does not fit mobilenet_v3_large") as info:
        load_model("mobilenet_v3_large", weights=str(path))
    assert "\n" not in str(info.value)


def test_non_checkpoint_file_is_rejected(tmp_path) -> None:
    path = tmp_path / "junk.pt"
    path.write_bytes(b"\x00garbage")
    with pytest.raises(WeightsError):
        load_model("resnet50", weights=str(path))


def test_seeded_weights_are_deterministic_and_batchnorm_calibrated() -> None:
    a, _ = load_model("resnet50", seed=0)
    b, _ = load_model("resnet50", seed=0)
    c, _ = load_model("resnet50", seed=1)
    assert all(
        torch.equal(x, y)
        for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )
    assert not torch.equal(a.conv1.weight, c.conv1.weight)
    # recalibrated: running statistics are not the defaults (0 mean, unit variance)
    assert float(a.bn1.running_var.mean()) != pytest.approx(1.0, abs=1e-3)


def test_convnext_layer_scales_make_residual_branches_count() -> None:
    """torchvision initialises ConvNeXt's layer scales to 1e-6 (every block an identity);
    seeded weights calibrate them so each branch has its block input's RMS."""
    from anpred.zoo.weights import calibration_batch, layer_scale_blocks

    model, weights_id = load_model("convnext_tiny", seed=0)
    assert weights_id == "seed0-ls1"
    blocks = layer_scale_blocks(model)
    assert len(blocks) == 18 and all(float(b.layer_scale.min()) > 1e-3 for b in blocks)
    ratios: list[float] = []
    inputs: dict[int, torch.Tensor] = {}
    for i, block in enumerate(blocks):
        block.register_forward_pre_hook(lambda _m, a, i=i: inputs.__setitem__(i, a[0]))
        block.block.register_forward_hook(
            lambda _m, _a, out, i=i, block=block: ratios.append(
                float((out * block.layer_scale).pow(2).mean().sqrt()
                      / inputs[i].pow(2).mean().sqrt())
            )
        )  # fmt: skip
    batch, _ = calibration_batch("convnext_tiny")
    with torch.no_grad():
        model(batch)
    assert ratios == pytest.approx([1.0] * 18, rel=1e-4)


def test_zero_initialised_layers_are_redrawn() -> None:
    """torchvision's ViT head starts at zero (constant logits); seeded weights redraw it."""
    from anpred.zoo.weights import zero_layers

    model, weights_id = load_model("vit_b_16", seed=0)
    assert weights_id == "seed0-z1" and zero_layers(model) == []
    x = torch.rand(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(x)
    assert float(logits.std()) > 0.1 and not torch.allclose(logits[0], logits[1])
