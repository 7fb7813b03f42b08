"""Compile WGSL sources with Dawn's shader compiler (Tint) on Dawn's Null backend, which needs no
GPU: `python tests/tint_compile.py SOURCES.json` reads a JSON list of WGSL texts and prints a
JSON list of [index, message] for each one Tint refuses. Run in its own process (the backend is
chosen by WGPU_BACKEND_TYPE when wgpudawn makes its instance). Module creation is where Tint
parses, resolves and checks uniformity; pipelines are not made (the Null adapter's limits are
WebGPU's defaults, below what pyrite's kernels ask of a real device)."""

import json
import os
import sys

os.environ["WGPU_BACKEND_TYPE"] = "Null"

import wgpudawn  # noqa: E402


def main():
    with open(sys.argv[1]) as f:
        sources = json.load(f)
    adapter = wgpudawn.gpu.request_adapter_sync()
    features = [f for f in ("shader-f16", "subgroups") if f in adapter.features]
    device = adapter.request_device_sync(required_features=features)
    failures = []
    for i, src in enumerate(sources):
        if "subgroup" in src and "enable subgroups;" not in src:
            # (wgpu-native's kernels use subgroups with no enable directive, which naga does
            # not take; pyrite writes it into the same kernels for Dawn: kernels/common.SG_ENABLE)
            src = "enable subgroups;\n" + src
        try:
            device.create_shader_module(code=src)
        except Exception as e:  # (wgpudawn raises its own error types)
            failures.append([i, str(e)])
    print(json.dumps({"features": features, "failures": failures}))


if __name__ == "__main__":
    main()
