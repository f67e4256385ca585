"""ModelSpec's split (#10): a count, and a shape whose every field holds a value."""

import pytest

from zeroplan.core.errors import InputError
from zeroplan.core.model.spec import ModelShape, ModelSpec, ParamLayout


def test_left_out_fields_get_their_defaults_and_reports_still_show_them_as_not_given():
    shape = ModelShape.of(layers=4, hidden=512, heads=8, vocab=1000)
    assert (shape.kv_heads, shape.ffn, shape.head_dim, shape.gated_mlp) == (8, 2048, 64, False)
    assert shape.defaulted == {"kv_heads", "ffn", "head_dim", "gated_mlp"}
    spec = ModelSpec(params=10**8, shape=shape)
    assert [spec.reported(name) for name in ("layers", "kv_heads", "ffn", "head_dim", "gated_mlp", "layer_params")] \
        == [4, None, None, None, None, None]


def test_given_fields_are_kept_and_reported():
    shape = ModelShape.of(layers=2, hidden=3072, heads=16, vocab=256, kv_heads=4, ffn=100, head_dim=256,
                          gated_mlp=True, layout=ParamLayout(10, 20, 30))
    assert not shape.defaulted
    spec = ModelSpec(params=10**6, shape=shape)
    assert [spec.reported(name) for name in ("kv_heads", "ffn", "head_dim", "gated_mlp", "output_params")] == \
        [4, 100, 256, True, 30]


def test_a_count_alone_has_no_shape_and_require_shape_raises_the_callers_error():
    spec = ModelSpec(params=13 * 10**9)
    assert spec.shape is None and spec.layout is None and spec.reported("layers") is None
    with pytest.raises(InputError, match="needs the shape") as raised:
        spec.require_shape("--model", "needs the shape", "use --model")
    assert raised.value.input_name == "--model"


@pytest.mark.parametrize(("fields", "flag"), [
    ({"heads": 7}, "heads"),  # 7 heads do not divide 512 (no head_dim given)
    ({"kv_heads": 3}, "kv_heads"),  # 3 does not divide 8
    ({"kv_heads": 16}, "kv_heads"),  # more key/value heads than heads
])
def test_inconsistent_shapes_are_refused(fields, flag):
    with pytest.raises(InputError) as raised:
        ModelShape.of(**{"layers": 2, "hidden": 512, "heads": 8, "vocab": 100, **fields})
    assert raised.value.input_name == flag
