"""torch CUDA's kernels in the bench's BERT-base forward (batch 1 and 32 x 128, 12 layers, f32,
TF32 off), the peer to scripts/profile_models.py's pyrite tables: `python
scripts/torch_bert_profile.py` on the GPU machine (needs torch with CUDA)."""

import numpy as np
import torch

from pyrite.bench.bert import build

torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
with torch.device("cuda"):
    model = build(torch, layers=12)
rng = np.random.default_rng(0)
for batch in (1, 32):
    x = torch.tensor(rng.standard_normal((batch, 128, 768)).astype(np.float32), device="cuda")
    with torch.no_grad():
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            model(x)
            torch.cuda.synchronize()
    print(f"\n== torch bert_b{batch}")
    print(
        prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=70)
    )
