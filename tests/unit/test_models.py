"""Kernel short names, model-file loading and config precedence."""

import os
import textwrap

import pytest

from graphscope._errors import ConfigError, ModelFileError
from graphscope.capture.config import CaptureConfig, from_env, load_yaml, merge
from graphscope.capture.loader import load_model_file
from graphscope.model.graph import short_kernel_name


@pytest.mark.parametrize(("name", "short"), [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl("
     "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const>"
     "(int, at::native::GeluCUDAKernelImpl, std::array<char*, 2ul>)",
     "vectorized_elementwise_kernel<GeluCUDAKernelImpl>"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>("
     "cutlass_80_simt_sgemm_64x64_8x5_tn_align1::Params)",
     "Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_execute_kernel__5x_cublas",
     "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_execute_kernel__5x_cublas"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, 4>(float*, int)",
     "softmax_warp_forward"),
    # cuBLAS's GEMV (tests/data/run_decode): a generic name, nothing in its arguments says
    # what it is, the scope it is declared in does
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, "
     "float, float, false, true, true, false, 7, false, cublasGemvParamsEx<int, "
     "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, "
     "float> >(cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float>, float>)", "gemvx::kernel"),
    ("void at::native::elementwise_kernel<128, 2, F>(int, F)", "elementwise_kernel"),
    ("void foo::kernel<int>(int)", "kernel"),  # a library's own namespace: the arguments' job
])
def test_short_kernel_name(name, short):
    assert short_kernel_name(name) == short


def _write(tmp_path, text, name="m.py"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def test_loader_forms(tmp_path):
    p = _write(tmp_path, """
        def graphscope_model():
            return (lambda x: x), (1,)
        def other():
            return {"model": (lambda x: x), "args": 2, "settings": {"mode": "callables"}}
    """)
    spec = load_model_file(p)
    assert spec.args == (1,) and spec.loss is None and len(spec.sha256) == 64
    spec = load_model_file(p, "other")
    assert spec.args == (2,) and spec.settings == {"mode": "callables"}


@pytest.mark.parametrize(("text", "msg"), [
    ("x = 1\n", "defines no function `graphscope_model()`"),
    ("raise ImportError('no module named apex')\n", "importing it raised ImportError"),
    ("def graphscope_model():\n    return 3\n", "must return (model, args)"),
    ("def graphscope_model():\n    return {'model': len}\n", "'model' and 'args'"),
    ("def graphscope_model():\n    return {'model': len, 'args': (), 'lr': 1}\n", "unknown key"),
    ("def graphscope_model():\n    raise ValueError('bad')\n", "graphscope_model() raised"),
])
def test_loader_errors_name_the_file(tmp_path, text, msg):
    p = _write(tmp_path, text)
    with pytest.raises(ModelFileError) as e:
        load_model_file(p)
    assert msg in str(e.value) and p in str(e.value)


def test_loader_missing_file(tmp_path):
    with pytest.raises(ModelFileError, match="no such model file"):
        load_model_file(str(tmp_path / "nope.py"))


def test_yaml_errors_name_file_line_and_key(tmp_path):
    p = _write(tmp_path, "mode: step\nreplays: 5\nwarmpu: 3\n", "gs.yaml")
    with pytest.raises(ConfigError, match=r"gs\.yaml:3: unknown key 'warmpu'"):
        load_yaml(p)
    p = _write(tmp_path, "replays: many\n", "gs2.yaml")
    with pytest.raises(ConfigError, match=r"gs2\.yaml:1: key 'replays' must be int"):
        load_yaml(p)


def test_precedence_cli_over_env_over_yaml_over_defaults(tmp_path):
    p = _write(tmp_path, "mode: callables\nreplays: 5\nwarmup: 7\n", "gs.yaml")
    env = from_env({"GRAPHSCOPE_REPLAYS": "9", "GRAPHSCOPE_WARMUP": "2"})
    cfg = merge(load_yaml(p), env, {"warmup": 11, "depth": None})
    assert (cfg.mode, cfg.replays, cfg.warmup, cfg.depth) == ("callables", 9, 11, None)
    assert merge().replays == CaptureConfig().replays == 20
    with pytest.raises(ConfigError, match="mode must be"):
        merge({"mode": "graph"})


def test_env_int_error():
    with pytest.raises(ConfigError, match="GRAPHSCOPE_REPLAYS"):
        from_env({"GRAPHSCOPE_REPLAYS": "x"})


def test_sample_models_follow_the_convention():
    root = os.path.join(os.path.dirname(__file__), "..", "..", "sample_models")
    for name in ("mlp", "cnn", "gpt", "marked", "sidestream"):
        spec = load_model_file(os.path.join(root, f"{name}.py"))
        out = spec.model(*spec.args)  # runs on CPU too
        assert out.shape[0] == spec.args[0].shape[0]
