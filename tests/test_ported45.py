"""Three PyTorch programs of the kind people write, ported by changing the import (session 45).

Each program is written once, as a function whose first parameter is named `torch` (the code in
it is what a PyTorch user writes; `# port:` marks what the test changed: sizes, data given as
numpy arrays instead of files, random draws made in numpy and passed in where the two runs must
draw the same numbers, dropout 0), and run once with PyTorch (CPU) and once with pyrite, from the
same initial weights (torch's, copied through numpy by `_same_init`) and the same seeded data.

1. A DDPM (denoising-diffusion-pytorch's, class-conditional): a tiny UNet (GroupNorm, SiLU,
   sinusoidal time embedding, FiLM from time and class embeddings, self-attention at the lowest
   resolution, skip connections joined by torch.cat), the noise schedule as register_buffer
   buffers built in float64 and gathered by timestep, classifier-free guidance (a learned null
   class, torch.where on a keep mask, guided and std-rescaled predictions), AdamW with a warmup
   LambdaLR, clip_grad_norm_, an EMA copy (copy.deepcopy, requires_grad_(False), lerp_ and
   mul_/add_ under no_grad), a checkpoint through torch.save/torch.load, ancestral sampling,
   DDIM sampling and seeded torch.Generator draws. Two variants: "classic" (einsum attention,
   strided Conv2d down, ConvTranspose2d up, epsilon prediction) and "lucid" (weight-standardized
   Conv2d subclass, RMSNorm via F.normalize, linear attention, F.scaled_dot_product_attention,
   nn.PixelUnshuffle down, nn.Upsample up, v-prediction, min-SNR loss weights, the middle
   blocks under torch.utils.checkpoint).
2. A conditional WGAN-GP (two common implementations' pieces): a ConvTranspose2d / BatchNorm
   generator and a Conv2d / InstanceNorm / LeakyReLU critic with a SAGAN self-attention block
   (bmm, a zero-initialised gamma), both conditioned through nn.Embedding,
   model.apply(weights_init) by class name, DiffAugment (colour, translation by advanced
   indexing of a padded batch, cutout by index assignment), both gradient penalties through
   torch.autograd.grad(create_graph=True) (legacy Variable / FloatTensor spelling in one),
   n_critic steps with backward(retain_graph=True), Adam betas=(0.0, 0.9) with TTUR, the critic
   frozen by requires_grad_(False) for the generator's step, zero_grad(set_to_none=True), an
   EMA generator (AveragedModel + get_ema_multi_avg_fn, use_buffers=True), a uint8 sample grid.
3. A small ViT (DINO/timm/MAE code): Conv2d patch embedding, class token and position
   embeddings (trunc_normal_), nn.TransformerEncoder(norm_first=True, activation="gelu",
   batch_first=True), timm's mixup / cutmix (in-place flips, numpy's RandomState) with a
   soft-target cross-entropy, AdamW with no-decay groups, warmup-then-cosine SequentialLR,
   a checkpoint after the first epoch resumed into fresh model / optimizer / scheduler, top-k
   accuracy under inference_mode, then fine-tuning at a higher resolution (DINO's bicubic
   F.interpolate of the position embeddings by scale_factor) with MAE's layer-wise lr decay
   (lr_scale param groups set by hand each iteration) and its loss scaler
   (torch.cuda.amp.GradScaler, autocast).

(DCGAN and nn.Transformer translation are ported already in tests/test_hunt_examples36.py.)

Tolerances are float32's over a few optimizer steps; each test says why it needs what it uses.
"""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
import torch

import pyrite as pr
from tests.ported import close as _close
from tests.ported import same_init as _same_init


# ---- 1. DDPM: a tiny class-conditional UNet, an EMA, ancestral / DDIM / guided sampling --------
def ddpm_program(torch, same_init, data, ckpt_path, variant="classic"):
    nn = torch.nn
    F = torch.nn.functional
    checkpoint = torch.utils.checkpoint.checkpoint
    lucid = variant == "lucid"  # the newer denoising-diffusion-pytorch blocks, v-prediction

    def exists(x):
        return x is not None

    def default(val, d):
        if exists(val):
            return val
        return d() if callable(d) else d

    def prob_mask_like(shape, prob, device, keep_mask=None):
        if prob == 1:
            return torch.ones(shape, device=device, dtype=torch.bool)
        elif prob == 0:
            return torch.zeros(shape, device=device, dtype=torch.bool)
        # port: torch.zeros(shape).float().uniform_(0, 1) < prob, drawn in numpy
        return torch.from_numpy(keep_mask).to(device)

    class SinusoidalPosEmb(nn.Module):
        def __init__(self, dim, theta=10000):
            super().__init__()
            self.dim = dim
            self.theta = theta

        def forward(self, x):
            device = x.device
            half_dim = self.dim // 2
            emb = math.log(self.theta) / (half_dim - 1)
            emb = torch.exp(torch.arange(half_dim, device=device) * -emb)
            emb = x[:, None] * emb[None, :]
            emb = torch.cat((emb.sin(), emb.cos()), dim=-1)
            return emb

    class WeightStandardizedConv2d(nn.Conv2d):
        """https://arxiv.org/abs/1903.10520: weight standardization with group norm"""

        def forward(self, x):
            eps = 1e-5 if x.dtype == torch.float32 else 1e-3
            weight = self.weight
            mean = weight.mean(dim=(1, 2, 3), keepdim=True)
            var = torch.var(weight, dim=(1, 2, 3), keepdim=True, unbiased=False)
            normalized_weight = (weight - mean) * (var + eps).rsqrt()
            return F.conv2d(
                x, normalized_weight, self.bias, self.stride, self.padding, self.dilation,
                self.groups,
            )  # fmt: skip

    class RMSNorm(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.g = nn.Parameter(torch.ones(1, dim, 1, 1))

        def forward(self, x):
            return F.normalize(x, dim=1) * self.g * (x.shape[1] ** 0.5)

    class ResnetBlock(nn.Module):
        def __init__(self, dim, dim_out, *, emb_dim=None, groups=4, dropout=0.0):
            super().__init__()
            Conv = WeightStandardizedConv2d if lucid else nn.Conv2d
            self.mlp = (
                nn.Sequential(nn.SiLU(), nn.Linear(emb_dim, dim_out * 2))
                if exists(emb_dim)
                else None
            )
            self.norm1 = nn.GroupNorm(groups, dim)
            self.conv1 = Conv(dim, dim_out, 3, padding=1)
            self.norm2 = nn.GroupNorm(groups, dim_out)
            self.dropout = nn.Dropout(dropout)
            self.conv2 = nn.Conv2d(dim_out, dim_out, 3, padding=1)
            self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

        def forward(self, x, time_emb=None, class_emb=None):
            h = self.conv1(F.silu(self.norm1(x)))
            if exists(self.mlp) and (exists(time_emb) or exists(class_emb)):
                cond_emb = tuple(filter(exists, (time_emb, class_emb)))
                cond_emb = torch.cat(cond_emb, dim=-1)
                cond_emb = self.mlp(cond_emb)
                scale, shift = cond_emb[:, :, None, None].chunk(2, dim=1)  # FiLM
                h = self.norm2(h) * (scale + 1) + shift
            else:
                h = self.norm2(h)
            h = self.conv2(self.dropout(F.silu(h)))
            return h + self.res_conv(x)

    class LinearAttention(nn.Module):
        def __init__(self, dim, heads=2, dim_head=8):
            super().__init__()
            self.scale = dim_head**-0.5
            self.heads = heads
            hidden_dim = dim_head * heads
            self.norm = RMSNorm(dim)
            self.to_qkv = nn.Conv2d(dim, hidden_dim * 3, 1, bias=False)
            self.to_out = nn.Sequential(nn.Conv2d(hidden_dim, dim, 1), RMSNorm(dim))

        def forward(self, x):
            b, c, h, w = x.shape
            qkv = self.to_qkv(self.norm(x)).chunk(3, dim=1)
            q, k, v = map(lambda t: t.reshape(b, self.heads, -1, h * w), qkv)
            q = q.softmax(dim=-2)
            k = k.softmax(dim=-1)
            q = q * self.scale
            context = torch.einsum("b h d n, b h e n -> b h d e", k, v)
            out = torch.einsum("b h d e, b h d n -> b h e n", context, q)
            out = out.reshape(b, -1, h, w)
            return self.to_out(out) + x

    class Attention(nn.Module):
        def __init__(self, dim, heads=2, dim_head=8):
            super().__init__()
            self.scale = dim_head**-0.5
            self.heads = heads
            hidden_dim = dim_head * heads
            self.norm = nn.GroupNorm(1, dim)
            self.to_qkv = nn.Conv2d(dim, hidden_dim * 3, 1, bias=False)
            self.to_out = nn.Conv2d(hidden_dim, dim, 1)

        def forward(self, x):
            b, c, h, w = x.shape
            qkv = self.to_qkv(self.norm(x)).chunk(3, dim=1)
            q, k, v = (t.reshape(b, self.heads, -1, h * w) for t in qkv)
            if lucid:  # the flash path: (b, heads, tokens, dim_head)
                q, k, v = (t.transpose(-1, -2) for t in (q, k, v))
                out = F.scaled_dot_product_attention(q, k, v).transpose(-1, -2)
            else:
                q = q * self.scale
                sim = torch.einsum("b h d i, b h d j -> b h i j", q, k)
                attn = sim.softmax(dim=-1)
                out = torch.einsum("b h i j, b h d j -> b h i d", attn, v).permute(0, 1, 3, 2)
            return self.to_out(out.reshape(b, -1, h, w)) + x

    def Downsample(dim, dim_out):
        if lucid:  # space to depth, then a 1x1 convolution
            return nn.Sequential(nn.PixelUnshuffle(2), nn.Conv2d(dim * 4, dim_out, 1))
        return nn.Conv2d(dim, dim_out, 4, 2, 1)

    def Upsample(dim, dim_out):
        if lucid:
            return nn.Sequential(
                nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(dim, dim_out, 3, padding=1)
            )
        return nn.ConvTranspose2d(dim, dim_out, 4, 2, 1)

    class Unet(nn.Module):
        def __init__(self, dim=8, num_classes=3, cond_drop_prob=0.5, dim_mults=(1, 2), channels=1):
            super().__init__()
            self.cond_drop_prob = cond_drop_prob
            self.channels = channels
            self.init_conv = nn.Conv2d(channels, dim, 3, padding=1)
            dims = [dim, *map(lambda m: dim * m, dim_mults)]
            in_out = list(zip(dims[:-1], dims[1:]))
            time_dim = dim * 4
            self.time_mlp = nn.Sequential(
                SinusoidalPosEmb(dim), nn.Linear(dim, time_dim), nn.GELU(),
                nn.Linear(time_dim, time_dim),
            )  # fmt: skip
            # class embeddings, and a learned null embedding for classifier-free guidance
            self.classes_emb = nn.Embedding(num_classes, dim)
            self.null_classes_emb = nn.Parameter(torch.randn(dim))
            classes_dim = dim * 4
            self.classes_mlp = nn.Sequential(
                nn.Linear(dim, classes_dim), nn.GELU(), nn.Linear(classes_dim, classes_dim)
            )
            emb_dim = time_dim + classes_dim
            self.downs, self.ups = nn.ModuleList([]), nn.ModuleList([])
            for ind, (dim_in, dim_out) in enumerate(in_out):
                is_last = ind >= len(in_out) - 1
                self.downs.append(nn.ModuleList([
                    ResnetBlock(dim_in, dim_in, emb_dim=emb_dim),
                    LinearAttention(dim_in) if lucid else nn.Identity(),
                    Downsample(dim_in, dim_out) if not is_last
                    else nn.Conv2d(dim_in, dim_out, 3, padding=1),
                ]))  # fmt: skip
            mid_dim = dims[-1]
            self.mid_block1 = ResnetBlock(mid_dim, mid_dim, emb_dim=emb_dim)
            self.mid_attn = Attention(mid_dim)
            self.mid_block2 = ResnetBlock(mid_dim, mid_dim, emb_dim=emb_dim)
            for ind, (dim_in, dim_out) in enumerate(reversed(in_out)):
                is_last = ind == len(in_out) - 1
                self.ups.append(nn.ModuleList([
                    ResnetBlock(dim_out + dim_in, dim_out, emb_dim=emb_dim),
                    LinearAttention(dim_out) if lucid else nn.Identity(),
                    Upsample(dim_out, dim_in) if not is_last
                    else nn.Conv2d(dim_out, dim_in, 3, padding=1),
                ]))  # fmt: skip
            self.final_res_block = ResnetBlock(dim * 2, dim, emb_dim=emb_dim)
            self.final_conv = nn.Conv2d(dim, channels, 1)

        def forward_with_cond_scale(self, *args, cond_scale=1.0, rescaled_phi=0.0, **kwargs):
            logits = self.forward(*args, cond_drop_prob=0.0, **kwargs)
            if cond_scale == 1:
                return logits
            null_logits = self.forward(*args, cond_drop_prob=1.0, **kwargs)
            scaled_logits = null_logits + (logits - null_logits) * cond_scale
            if rescaled_phi == 0.0:
                return scaled_logits
            dims = tuple(range(1, scaled_logits.ndim))
            rescaled_logits = scaled_logits * (
                torch.std(logits, dim=dims, keepdim=True)
                / torch.std(scaled_logits, dim=dims, keepdim=True)
            )
            return rescaled_logits * rescaled_phi + scaled_logits * (1.0 - rescaled_phi)

        def forward(self, x, time, classes, cond_drop_prob=None, keep_mask=None):
            batch, device = x.shape[0], x.device
            cond_drop_prob = default(cond_drop_prob, self.cond_drop_prob)
            classes_emb = self.classes_emb(classes)
            if cond_drop_prob > 0:
                keep_mask = prob_mask_like((batch,), 1 - cond_drop_prob, device, keep_mask)
                null_classes_emb = self.null_classes_emb.unsqueeze(0).expand(batch, -1)
                classes_emb = torch.where(keep_mask[:, None], classes_emb, null_classes_emb)
            c = self.classes_mlp(classes_emb)
            x = self.init_conv(x)
            r = x.clone()
            t = self.time_mlp(time)
            h = []
            for block, attn, downsample in self.downs:
                x = block(x, t, c)
                x = attn(x)
                h.append(x)
                x = downsample(x)
            if lucid and self.training:  # gradient checkpointing of the middle
                x = checkpoint(self.mid_block1, x, t, c, use_reentrant=False)
                x = checkpoint(self.mid_attn, x, use_reentrant=False)
            else:
                x = self.mid_block1(x, t, c)
                x = self.mid_attn(x)
            x = self.mid_block2(x, t, c)
            for block, attn, upsample in self.ups:
                x = torch.cat((x, h.pop()), dim=1)
                x = block(x, t, c)
                x = attn(x)
                x = upsample(x)
            x = torch.cat((x, r), dim=1)
            x = self.final_res_block(x, t, c)
            return self.final_conv(x)

    def extract(a, t, x_shape):
        b, *_ = t.shape
        out = a.gather(-1, t)
        return out.reshape(b, *((1,) * (len(x_shape) - 1)))

    def linear_beta_schedule(timesteps):
        scale = 1000 / timesteps
        beta_start = scale * 0.0001
        beta_end = scale * 0.02
        return torch.linspace(beta_start, beta_end, timesteps, dtype=torch.float64)

    class GaussianDiffusion(nn.Module):
        def __init__(self, model, *, image_size, timesteps=1000, objective="pred_noise",
                     min_snr_loss_weight=False, min_snr_gamma=5):  # fmt: skip
            super().__init__()
            self.model = model
            self.channels = model.channels
            self.image_size = image_size
            self.objective = objective
            betas = linear_beta_schedule(timesteps)
            alphas = 1.0 - betas
            alphas_cumprod = torch.cumprod(alphas, dim=0)
            alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
            (timesteps,) = betas.shape
            self.num_timesteps = int(timesteps)

            def register_buffer(name, val):
                return self.register_buffer(name, val.to(torch.float32))

            register_buffer("betas", betas)
            register_buffer("alphas_cumprod", alphas_cumprod)
            register_buffer("alphas_cumprod_prev", alphas_cumprod_prev)
            register_buffer("sqrt_alphas_cumprod", torch.sqrt(alphas_cumprod))
            register_buffer("sqrt_one_minus_alphas_cumprod", torch.sqrt(1.0 - alphas_cumprod))
            register_buffer("sqrt_recip_alphas_cumprod", torch.sqrt(1.0 / alphas_cumprod))
            register_buffer("sqrt_recipm1_alphas_cumprod", torch.sqrt(1.0 / alphas_cumprod - 1))
            posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
            register_buffer("posterior_variance", posterior_variance)
            register_buffer(
                "posterior_log_variance_clipped", torch.log(posterior_variance.clamp(min=1e-20))
            )
            register_buffer(
                "posterior_mean_coef1",
                betas * torch.sqrt(alphas_cumprod_prev) / (1.0 - alphas_cumprod),
            )
            register_buffer(
                "posterior_mean_coef2",
                (1.0 - alphas_cumprod_prev) * torch.sqrt(alphas) / (1.0 - alphas_cumprod),
            )
            # min-SNR loss weighting: https://arxiv.org/abs/2303.09556
            snr = alphas_cumprod / (1 - alphas_cumprod)
            maybe_clipped_snr = snr.clone()
            if min_snr_loss_weight:
                maybe_clipped_snr.clamp_(max=min_snr_gamma)
            if objective == "pred_noise":
                register_buffer("loss_weight", maybe_clipped_snr / snr)
            elif objective == "pred_v":
                register_buffer("loss_weight", maybe_clipped_snr / (snr + 1))

        def predict_start_from_noise(self, x_t, t, noise):
            return (
                extract(self.sqrt_recip_alphas_cumprod, t, x_t.shape) * x_t
                - extract(self.sqrt_recipm1_alphas_cumprod, t, x_t.shape) * noise
            )

        def predict_noise_from_start(self, x_t, t, x0):
            return (extract(self.sqrt_recip_alphas_cumprod, t, x_t.shape) * x_t - x0) / extract(
                self.sqrt_recipm1_alphas_cumprod, t, x_t.shape
            )

        def predict_v(self, x_start, t, noise):
            return (
                extract(self.sqrt_alphas_cumprod, t, x_start.shape) * noise
                - extract(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * x_start
            )

        def predict_start_from_v(self, x_t, t, v):
            return (
                extract(self.sqrt_alphas_cumprod, t, x_t.shape) * x_t
                - extract(self.sqrt_one_minus_alphas_cumprod, t, x_t.shape) * v
            )

        def q_posterior(self, x_start, x_t, t):
            posterior_mean = (
                extract(self.posterior_mean_coef1, t, x_t.shape) * x_start
                + extract(self.posterior_mean_coef2, t, x_t.shape) * x_t
            )
            posterior_variance = extract(self.posterior_variance, t, x_t.shape)
            posterior_log_variance_clipped = extract(
                self.posterior_log_variance_clipped, t, x_t.shape
            )
            return posterior_mean, posterior_variance, posterior_log_variance_clipped

        def model_predictions(self, x, t, classes, cond_scale=1.0, rescaled_phi=0.0):
            model_output = self.model.forward_with_cond_scale(
                x, t, classes, cond_scale=cond_scale, rescaled_phi=rescaled_phi
            )
            if self.objective == "pred_noise":
                pred_noise = model_output
                x_start = self.predict_start_from_noise(x, t, pred_noise)
            else:
                v = model_output
                x_start = self.predict_start_from_v(x, t, v)
                pred_noise = self.predict_noise_from_start(x, t, x_start)
            return pred_noise, x_start

        def p_mean_variance(self, x, t, classes, cond_scale, rescaled_phi, clip_denoised=True):
            _, x_start = self.model_predictions(x, t, classes, cond_scale, rescaled_phi)
            if clip_denoised:
                x_start.clamp_(-1.0, 1.0)
            return self.q_posterior(x_start=x_start, x_t=x, t=t)

        @torch.no_grad()
        def p_sample(self, x, t: int, classes, cond_scale=1.0, rescaled_phi=0.0, noise=None):
            b, *_, device = *x.shape, x.device
            batched_times = torch.full((b,), t, device=device, dtype=torch.long)
            model_mean, _, model_log_variance = self.p_mean_variance(
                x=x, t=batched_times, classes=classes, cond_scale=cond_scale,
                rescaled_phi=rescaled_phi,
            )  # fmt: skip
            noise = default(noise, lambda: torch.randn_like(x)) if t > 0 else 0.0
            return model_mean + (0.5 * model_log_variance).exp() * noise

        @torch.no_grad()
        def p_sample_loop(self, classes, shape, cond_scale=1.0, rescaled_phi=0.0, img=None,
                          noises=None):  # fmt: skip
            img = default(img, lambda: torch.randn(shape, device=self.betas.device))
            imgs = [img]
            for t in reversed(range(0, self.num_timesteps)):
                z = None if noises is None else noises[t]
                img = self.p_sample(img, t, classes, cond_scale, rescaled_phi, noise=z)
                imgs.append(img)
            return img, torch.stack(imgs, dim=1)

        @torch.no_grad()
        def ddim_sample(self, classes, shape, sampling_timesteps=10, eta=0.0, img=None,
                        generator=None, cond_scale=1.0):  # fmt: skip
            batch, device = shape[0], self.betas.device
            times = torch.linspace(-1, self.num_timesteps - 1, steps=sampling_timesteps + 1)
            times = list(reversed(times.int().tolist()))
            time_pairs = list(zip(times[:-1], times[1:]))  # [(T-1, T-2), ..., (1, 0), (0, -1)]
            img = default(img, lambda: torch.randn(shape, device=device, generator=generator))
            for time, time_next in time_pairs:
                time_cond = torch.full((batch,), time, device=device, dtype=torch.long)
                pred_noise, x_start = self.model_predictions(img, time_cond, classes, cond_scale)
                x_start.clamp_(-1.0, 1.0)
                if time_next < 0:
                    img = x_start
                    continue
                alpha = self.alphas_cumprod[time]
                alpha_next = self.alphas_cumprod[time_next]
                sigma = eta * ((1 - alpha / alpha_next) * (1 - alpha_next) / (1 - alpha)).sqrt()
                c = (1 - alpha_next - sigma**2).sqrt()
                noise = torch.randn(img.shape, device=device, generator=generator)
                img = x_start * alpha_next.sqrt() + c * pred_noise + sigma * noise
            return img

        def q_sample(self, x_start, t, noise=None):
            noise = default(noise, lambda: torch.randn_like(x_start))
            return (
                extract(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start
                + extract(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise
            )

        def p_losses(self, x_start, t, *, classes, noise=None, keep_mask=None):
            noise = default(noise, lambda: torch.randn_like(x_start))
            x = self.q_sample(x_start=x_start, t=t, noise=noise)
            model_out = self.model(x, t, classes, keep_mask=keep_mask)
            target = noise if self.objective == "pred_noise" else self.predict_v(x_start, t, noise)
            loss = F.mse_loss(model_out, target, reduction="none")
            loss = loss.mean(dim=list(range(1, loss.ndim)))
            loss = loss * extract(self.loss_weight, t, loss.shape)
            return loss.mean()

        def forward(self, img, *args, t=None, **kwargs):
            b, _, h, w, device = *img.shape, img.device
            assert h == self.image_size and w == self.image_size
            t = default(t, lambda: torch.randint(0, self.num_timesteps, (b,), device=device))
            img = img * 2 - 1  # [0, 1] -> [-1, 1]
            return self.p_losses(img, t, *args, **kwargs)

    @torch.no_grad()
    def update_ema(ema_model, model, decay):
        for ema_p, p in zip(ema_model.parameters(), model.parameters()):
            ema_p.lerp_(p, 1.0 - decay)
        for ema_b, b in zip(ema_model.buffers(), model.buffers()):
            ema_b.copy_(b)

    # ---- train ----
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    timesteps, image_size, train_lr, warmup_steps, ema_decay = 50, 8, 2e-3, 3, 0.9
    objective = "pred_v" if lucid else "pred_noise"

    def make_diffusion():
        model = Unet(dim=8, num_classes=3, dim_mults=(1, 2), channels=1)
        return GaussianDiffusion(
            model, image_size=image_size, timesteps=timesteps, objective=objective,
            min_snr_loss_weight=lucid,
        )  # fmt: skip

    diffusion = make_diffusion().to(device)
    same_init(diffusion.model)
    model = diffusion.model
    ema = copy.deepcopy(diffusion).eval().requires_grad_(False)
    ema_slow = copy.deepcopy(model).requires_grad_(False)  # a second EMA, the mul_/add_ way
    opt = torch.optim.AdamW(
        diffusion.parameters(), lr=train_lr, betas=(0.9, 0.99), weight_decay=0.0
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup_steps))
    images = torch.from_numpy(data["images"])  # port: numpy arrays instead of an image folder
    labels = torch.from_numpy(data["labels"])
    losses, norms, lrs = [], [], []
    for step, (ix, t, noise, keep) in enumerate(
        zip(data["ix"], data["t"], data["noise"], data["keep"])
    ):
        # port: the batch, timesteps, noise and kept labels drawn in numpy (randint, randn_like)
        ix = torch.from_numpy(ix)
        x, classes = images[ix].to(device), labels[ix].to(device)
        t, noise = torch.from_numpy(t).to(device), torch.from_numpy(noise).to(device)
        loss = diffusion(x, t=t, classes=classes, noise=noise, keep_mask=keep)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(diffusion.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        sched.step()
        update_ema(ema, diffusion, ema_decay)
        with torch.no_grad():
            d = min(0.99, (1 + step) / (10 + step))
            for e, p in zip(ema_slow.parameters(), model.parameters()):
                e.mul_(d).add_(p.detach(), alpha=1 - d)
        losses.append(loss.item())
        norms.append(norm.item())
        lrs.append(sched.get_last_lr()[0])

    torch.save(
        {"step": len(losses), "model": diffusion.state_dict(), "ema": ema.state_dict(),
         "opt": opt.state_dict()},
        ckpt_path,
    )  # fmt: skip
    ckpt = torch.load(ckpt_path, map_location=device, weights_only=True)
    sampler = make_diffusion()
    sampler.load_state_dict(ckpt["ema"])
    sampler.eval()
    shape = (data["x_T"].shape[0], 1, image_size, image_size)
    classes = torch.tensor([0, 1, 2], device=device)
    x_T = torch.from_numpy(data["x_T"])
    final, chain = sampler.p_sample_loop(
        classes,
        shape,
        cond_scale=3.0,
        rescaled_phi=0.7,
        img=x_T,
        noises=torch.from_numpy(data["z"]),
    )  # port: the starting noise and each step's noise drawn in numpy
    drawn, _ = sampler.p_sample_loop(classes[:2], (2, 1, 8, 8))  # the framework's own draws
    samples = (final.clamp(-1, 1) + 1) * 0.5
    ddim = sampler.ddim_sample(classes, shape, img=x_T, cond_scale=2.0)  # eta 0: deterministic
    stochastic = [
        sampler.ddim_sample(classes[:2], (2, 1, 8, 8), eta=1.0, generator=torch.Generator().manual_seed(seed))
        for seed in (42, 42, 7)
    ]  # fmt: skip
    return dict(
        losses=losses, norms=norms, lrs=lrs, samples=samples.numpy(), chain=chain.numpy(),
        ema=ema.model.init_conv.weight.numpy(), ema_slow=ema_slow.final_conv.bias.numpy(),
        buffers={k: v.numpy() for k, v in diffusion.named_buffers()}, step=ckpt["step"],
        drawn=drawn.numpy(), ema_grad=[p.requires_grad for p in ema.parameters()],
        n_buffers=len(list(sampler.buffers())), ddim=ddim.numpy(),
        stochastic=[x.numpy() for x in stochastic],
    )  # fmt: skip


def _ddpm_data(rng, steps=6, batch=4, timesteps=50):
    """Blobs on an 8x8 canvas in [0, 1]: class 0 small, 1 middling, 2 wide."""
    yy, xx = np.mgrid[0:8, 0:8]
    centers = rng.uniform(1.5, 6.5, (24, 2))
    labels = rng.integers(0, 3, 24)
    width = np.array([1.5, 3.0, 6.0])[labels][:, None, None]
    images = np.exp(-((yy - centers[:, :1, None]) ** 2 + (xx - centers[:, 1:, None]) ** 2) / width)
    f32 = np.float32
    return dict(
        images=images[:, None].astype(f32), labels=labels,
        ix=[rng.choice(24, batch, replace=False) for _ in range(steps)],
        t=[rng.integers(0, timesteps, batch) for _ in range(steps)],
        noise=[rng.standard_normal((batch, 1, 8, 8)).astype(f32) for _ in range(steps)],
        keep=[rng.random(batch) < 0.5 for _ in range(steps)],
        x_T=rng.standard_normal((3, 1, 8, 8)).astype(f32),
        z=rng.standard_normal((timesteps, 3, 1, 8, 8)).astype(f32),
    )  # fmt: skip


@pytest.mark.parametrize("variant", ["classic", "lucid"])
def test_ddpm_unet_train_ema_sample(rng, tmp_path, variant):
    data = _ddpm_data(rng)
    same_init = _same_init()
    torch.manual_seed(0)
    rt = ddpm_program(torch, same_init, data, tmp_path / "t.pt", variant)
    rp = ddpm_program(pr, same_init, data, tmp_path / "p.pt", variant)
    _close(rp["lrs"], rt["lrs"], 1e-12, 0, "learning rates")
    # convolutions and GroupNorm over 4 8x8 images sum in other orders; AdamW's first steps are
    # sign-like, so a step's rounding moves the next loss by a few 1e-7 relative (seen: 2.3e-7)
    _close(rp["losses"], rt["losses"], 2e-5, 1e-6, "losses")
    _close(rp["norms"], rt["norms"], 2e-5, 1e-6, "gradient norms (before clipping)")
    # the schedules are built in float64, which pyrite stores as float32 (README): 1 -
    # alphas_cumprod[0] = 0.002 is left with alphas_cumprod[0]'s float32 rounding (3e-8), 1.5e-5
    # of it, and the coefficients divided by it carry that; a 50-factor cumprod, 50 roundings
    for k, v in rt["buffers"].items():
        _close(rp["buffers"][k], v, 3e-5, 1e-6, k)
    _close(rp["ema"], rt["ema"], 1e-4, 1e-6, "EMA (lerp_) weights")
    _close(rp["ema_slow"], rt["ema_slow"], 1e-4, 1e-6, "EMA (mul_/add_) weights")
    # 50 denoising steps, each dividing by sqrt(1 - alphas_cumprod) and clamping x_0: the
    # schedules' float32 roundings above (1.3e-5 in posterior_mean_coef1[0]) and the weights'
    # (1e-6) carried through the chain; seen 1.3e-5, asked 1e-4
    _close(rp["chain"], rt["chain"], 0, 1e-4, "the sampling chain")
    _close(rp["samples"], rt["samples"], 0, 1e-4, "samples")
    _close(rp["ddim"], rt["ddim"], 0, 1e-4, "DDIM (eta 0) samples")
    for r in (rp, rt):  # a seeded Generator draws the same numbers again, another seed others
        a, b, c = r["stochastic"]
        assert a.shape == (2, 1, 8, 8) and (a == b).all() and not (a == c).all()
    assert rp["step"] == rt["step"] == 6 and rp["n_buffers"] == rt["n_buffers"]
    assert not any(rp["ema_grad"]) and not any(rt["ema_grad"])
    assert rp["drawn"].shape == (2, 1, 8, 8) and np.isfinite(rp["drawn"]).all()
    # the last step (t = 0) is the clamped x_0 times posterior_mean_coef1[0] (1, to 3e-5)
    assert np.abs(rp["drawn"]).max() <= 1.0 + 3e-5


# ---- 2. a conditional WGAN-GP: critic steps with a gradient penalty, then the generator's --------
def wgan_gp_program(torch, same_init, data):
    nn = torch.nn
    F = torch.nn.functional
    optim = torch.optim
    autograd = torch.autograd
    Variable = torch.autograd.Variable
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset
    AveragedModel, get_ema_multi_avg_fn = (
        optim.swa_utils.AveragedModel,
        optim.swa_utils.get_ema_multi_avg_fn,
    )
    cuda = torch.cuda.is_available()
    Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
    LongTensor = torch.cuda.LongTensor if cuda else torch.LongTensor
    device = "cuda" if cuda else "cpu"
    # port: the hyperparameters, shrunk (Z_DIM 100, FEATURES 64, 64x64 images)
    LEARNING_RATE, BATCH_SIZE, IMG_SIZE, CHANNELS_IMG, NUM_CLASSES = 1e-3, 8, 8, 1, 4
    GEN_EMBEDDING, Z_DIM, FEATURES_CRITIC, FEATURES_GEN = 4, 6, 4, 4
    CRITIC_ITERATIONS, LAMBDA_GP, POLICY = 2, 10, "color,translation,cutout"
    aug = np.random.default_rng(data["aug_seed"])  # port: DiffAugment's draws made in numpy

    def rand(*size, dtype=None, device=None):  # port: torch.rand(*size, dtype=, device=)
        return torch.from_numpy(aug.random(size).astype(np.float32)).to(device)

    def randint(low, high, size, device=None):  # port: torch.randint(low, high, size=, device=)
        return torch.from_numpy(aug.integers(low, high, size)).to(device)

    # ---- DiffAugment (Zhao et al. 2020, DiffAugment_pytorch.py) ----
    def DiffAugment(x, policy="", channels_first=True):
        if policy:
            if not channels_first:
                x = x.permute(0, 3, 1, 2)
            for p in policy.split(","):
                for f in AUGMENT_FNS[p]:
                    x = f(x)
            if not channels_first:
                x = x.permute(0, 2, 3, 1)
            x = x.contiguous()
        return x

    def rand_brightness(x):
        x = x + (rand(x.size(0), 1, 1, 1, dtype=x.dtype, device=x.device) - 0.5)
        return x

    def rand_saturation(x):
        x_mean = x.mean(dim=1, keepdim=True)
        x = (x - x_mean) * (rand(x.size(0), 1, 1, 1, dtype=x.dtype, device=x.device) * 2) + x_mean
        return x

    def rand_contrast(x):
        x_mean = x.mean(dim=[1, 2, 3], keepdim=True)
        x = (x - x_mean) * (rand(x.size(0), 1, 1, 1, dtype=x.dtype, device=x.device) + 0.5) + x_mean
        return x

    def rand_translation(x, ratio=0.125):
        shift_x, shift_y = int(x.size(2) * ratio + 0.5), int(x.size(3) * ratio + 0.5)
        translation_x = randint(-shift_x, shift_x + 1, size=[x.size(0), 1, 1], device=x.device)
        translation_y = randint(-shift_y, shift_y + 1, size=[x.size(0), 1, 1], device=x.device)
        grid_batch, grid_x, grid_y = torch.meshgrid(
            torch.arange(x.size(0), dtype=torch.long, device=x.device),
            torch.arange(x.size(2), dtype=torch.long, device=x.device),
            torch.arange(x.size(3), dtype=torch.long, device=x.device),
        )
        grid_x = torch.clamp(grid_x + translation_x + 1, 0, x.size(2) + 1)
        grid_y = torch.clamp(grid_y + translation_y + 1, 0, x.size(3) + 1)
        x_pad = F.pad(x, [1, 1, 1, 1, 0, 0, 0, 0])
        x = x_pad.permute(0, 2, 3, 1).contiguous()[grid_batch, grid_x, grid_y].permute(0, 3, 1, 2)
        return x

    def rand_cutout(x, ratio=0.5):
        cutout_size = int(x.size(2) * ratio + 0.5), int(x.size(3) * ratio + 0.5)
        offset_x = randint(
            0, x.size(2) + (1 - cutout_size[0] % 2), size=[x.size(0), 1, 1], device=x.device
        )
        offset_y = randint(
            0, x.size(3) + (1 - cutout_size[1] % 2), size=[x.size(0), 1, 1], device=x.device
        )
        grid_batch, grid_x, grid_y = torch.meshgrid(
            torch.arange(x.size(0), dtype=torch.long, device=x.device),
            torch.arange(cutout_size[0], dtype=torch.long, device=x.device),
            torch.arange(cutout_size[1], dtype=torch.long, device=x.device),
        )
        grid_x = torch.clamp(grid_x + offset_x - cutout_size[0] // 2, min=0, max=x.size(2) - 1)
        grid_y = torch.clamp(grid_y + offset_y - cutout_size[1] // 2, min=0, max=x.size(3) - 1)
        mask = torch.ones(x.size(0), x.size(2), x.size(3), dtype=x.dtype, device=x.device)
        mask[grid_batch, grid_x, grid_y] = 0
        x = x * mask.unsqueeze(1)
        return x

    AUGMENT_FNS = {
        "color": [rand_brightness, rand_saturation, rand_contrast],
        "translation": [rand_translation],
        "cutout": [rand_cutout],
    }

    class Self_Attn(nn.Module):
        """Self attention layer (SAGAN)"""

        def __init__(self, in_dim):
            super(Self_Attn, self).__init__()
            self.chanel_in = in_dim
            self.query_conv = nn.Conv2d(in_channels=in_dim, out_channels=in_dim // 2, kernel_size=1)
            self.key_conv = nn.Conv2d(in_channels=in_dim, out_channels=in_dim // 2, kernel_size=1)
            self.value_conv = nn.Conv2d(in_channels=in_dim, out_channels=in_dim, kernel_size=1)
            self.gamma = nn.Parameter(torch.zeros(1))
            self.softmax = nn.Softmax(dim=-1)

        def forward(self, x):
            m_batchsize, C, width, height = x.size()
            proj_query = self.query_conv(x).view(m_batchsize, -1, width * height).permute(0, 2, 1)
            proj_key = self.key_conv(x).view(m_batchsize, -1, width * height)
            energy = torch.bmm(proj_query, proj_key)  # B x N x N
            attention = self.softmax(energy)
            proj_value = self.value_conv(x).view(m_batchsize, -1, width * height)
            out = torch.bmm(proj_value, attention.permute(0, 2, 1))
            out = out.view(m_batchsize, C, width, height)
            out = self.gamma * out + x
            return out, attention

    class Discriminator(nn.Module):
        def __init__(self, channels_img, features_d, num_classes, img_size):
            super(Discriminator, self).__init__()
            self.img_size = img_size
            self.head = nn.Sequential(
                # input: N x channels_img x 8 x 8 (the class as a second channel)
                nn.Conv2d(channels_img + 1, features_d, kernel_size=4, stride=2, padding=1),
                nn.LeakyReLU(0.2),
            )
            self.attn = Self_Attn(features_d)  # over the 4x4 features
            self.disc = nn.Sequential(
                self._block(features_d, features_d * 2, 4, 2, 1),  # 2x2
                nn.Conv2d(features_d * 2, 1, kernel_size=2, stride=1, padding=0),  # 1x1
            )
            self.embed = nn.Embedding(num_classes, img_size * img_size)

        def _block(self, in_channels, out_channels, kernel_size, stride, padding):
            return nn.Sequential(
                nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, bias=False),
                nn.InstanceNorm2d(out_channels, affine=True),
                nn.LeakyReLU(0.2, inplace=True),
            )

        def forward(self, x, labels):
            embedding = self.embed(labels).view(labels.shape[0], 1, self.img_size, self.img_size)
            x = torch.cat([x, embedding], dim=1)  # N x C x img_size(H) x img_size(W)
            x, self.last_attention = self.attn(self.head(x))
            return self.disc(x)

    class Generator(nn.Module):
        def __init__(
            self, channels_noise, channels_img, features_g, num_classes, img_size, embed_size
        ):
            super(Generator, self).__init__()
            self.img_size = img_size
            self.net = nn.Sequential(
                # Input: N x channels_noise x 1 x 1
                self._block(channels_noise + embed_size, features_g * 4, 4, 1, 0),  # img: 4x4
                self._block(features_g * 4, features_g * 2, 4, 2, 1),  # img: 8x8
                nn.ConvTranspose2d(
                    features_g * 2, channels_img, kernel_size=3, stride=1, padding=1
                ),
                nn.Tanh(),  # Output: N x channels_img x 8 x 8
            )
            self.embed = nn.Embedding(num_classes, embed_size)

        def _block(self, in_channels, out_channels, kernel_size, stride, padding):
            return nn.Sequential(
                nn.ConvTranspose2d(
                    in_channels, out_channels, kernel_size, stride, padding, bias=False
                ),
                nn.BatchNorm2d(out_channels),
                nn.ReLU(),
            )

        def forward(self, x, labels):
            # latent vector z: N x noise_dim x 1 x 1
            embedding = self.embed(labels).unsqueeze(2).unsqueeze(3)
            x = torch.cat([x, embedding], dim=1)
            return self.net(x)

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    def gradient_penalty(critic, labels, real, fake, alpha, device="cpu"):
        BATCH_SIZE, C, H, W = real.shape
        # port: alpha = torch.rand((BATCH_SIZE, 1, 1, 1)), drawn in numpy
        alpha = alpha.repeat(1, C, H, W).to(device)
        interpolated_images = real * alpha + fake * (1 - alpha)
        # Calculate critic scores
        mixed_scores = critic(interpolated_images, labels)
        # Take the gradient of the scores with respect to the images
        gradient = torch.autograd.grad(
            inputs=interpolated_images,
            outputs=mixed_scores,
            grad_outputs=torch.ones_like(mixed_scores),
            create_graph=True,
            retain_graph=True,
        )[0]
        gradient = gradient.view(gradient.shape[0], -1)
        gradient_norm = gradient.norm(2, dim=1)
        return torch.mean((gradient_norm - 1) ** 2)

    def compute_gradient_penalty(D, real_samples, fake_samples, labels, alpha):
        """The other common form (PyTorch-GAN's wgan_gp.py): legacy Variable and FloatTensor."""
        alpha = Tensor(alpha)  # port: Tensor(np.random.random((real_samples.size(0), 1, 1, 1)))
        interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
        d_interpolates = D(interpolates, labels).view(-1, 1)
        fake = Variable(Tensor(real_samples.shape[0], 1).fill_(1.0), requires_grad=False)
        gradients = autograd.grad(
            outputs=d_interpolates, inputs=interpolates, grad_outputs=fake,
            create_graph=True, retain_graph=True, only_inputs=True,
        )[0]  # fmt: skip
        gradients = gradients.view(gradients.size(0), -1)
        return ((gradients.norm(2, dim=1) - 1) ** 2).mean()

    dataset = TensorDataset(torch.from_numpy(data["images"]), torch.from_numpy(data["labels"]))
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False)  # port: shuffle=False
    gen = Generator(Z_DIM, CHANNELS_IMG, FEATURES_GEN, NUM_CLASSES, IMG_SIZE, GEN_EMBEDDING).to(
        device
    )
    critic = Discriminator(CHANNELS_IMG, FEATURES_CRITIC, NUM_CLASSES, IMG_SIZE).to(device)
    gen.apply(weights_init)
    critic.apply(weights_init)
    same_init(gen)  # port: torch's initial weights in both runs
    same_init(critic)
    ema_gen = AveragedModel(gen, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
    opt_gen = optim.Adam(gen.parameters(), lr=LEARNING_RATE, betas=(0.0, 0.9))
    opt_critic = optim.Adam(critic.parameters(), lr=LEARNING_RATE * 2, betas=(0.0, 0.9))  # TTUR
    fixed_noise = torch.from_numpy(data["fixed_noise"]).to(device)
    gen.train()
    critic.train()

    draws = iter(zip(data["noise"], data["alpha"]))
    history = []
    for epoch in range(2):
        for batch_idx, (real, labels) in enumerate(loader):
            real = real.to(device)
            labels = labels.to(device)
            # Train Critic: max E[critic(real)] - E[critic(fake)]
            for it in range(CRITIC_ITERATIONS):
                noise, alpha = next(draws)
                noise = torch.from_numpy(noise).to(device)  # port: torch.randn(N, Z_DIM, 1, 1)
                fake = gen(noise, labels)
                critic_real = critic(DiffAugment(real, policy=POLICY), labels).reshape(-1)
                critic_fake = critic(DiffAugment(fake, policy=POLICY), labels).reshape(-1)
                if it == 0:
                    gp = gradient_penalty(
                        critic, labels, real, fake, torch.from_numpy(alpha), device
                    )
                else:  # port: the two common penalties, one each
                    gp = compute_gradient_penalty(critic, real.data, fake.data, labels, alpha)
                loss_critic = -(torch.mean(critic_real) - torch.mean(critic_fake)) + LAMBDA_GP * gp
                critic.zero_grad()
                loss_critic.backward(retain_graph=True)
                opt_critic.step()
            # Train Generator: max E[critic(gen_fake)] <-> min -E[critic(gen_fake)]
            for p in critic.parameters():
                p.requires_grad_(False)
            gen_fake = critic(DiffAugment(fake, policy=POLICY), labels).reshape(-1)
            loss_gen = -torch.mean(gen_fake)
            gen.zero_grad(set_to_none=True)
            loss_gen.backward()
            opt_gen.step()
            ema_gen.update_parameters(gen)
            for p in critic.parameters():
                p.requires_grad_(True)
            critic_grads_kept = all(p.grad is not None for p in critic.parameters())
            history.append(
                (loss_critic.item(), gp.item(), loss_gen.item(), critic.attn.gamma.item())
            )

    # sample_image: one row per class, in eval mode (BatchNorm's running statistics)
    gen.eval()
    n_row = NUM_CLASSES
    z = Variable(Tensor(data["sample_z"]))  # port: np.random.normal(0, 1, (n_row**2, Z_DIM))
    labels = np.array([num for _ in range(n_row) for num in range(n_row)])
    labels = Variable(LongTensor(labels))
    with torch.no_grad():
        gen_imgs = gen(z.view(*z.shape, 1, 1), labels)
        fixed = ema_gen.module.eval()(fixed_noise, torch.arange(NUM_CLASSES).repeat_interleave(2))
        scores = critic(gen_imgs, labels).flatten()
    grid = gen_imgs.data.view(n_row, n_row, IMG_SIZE, IMG_SIZE).permute(0, 2, 1, 3)
    grid = grid.reshape(n_row * IMG_SIZE, n_row * IMG_SIZE)
    grid = ((grid + 1) / 2 * 255).clamp(0, 255).to(torch.uint8)  # as save_image writes it
    return dict(
        history=np.array(history), grid=grid.numpy(), fixed=fixed.numpy(), scores=scores.numpy(),
        critic_grads=critic_grads_kept, running_var=gen.net[0][1].running_var.numpy(),
        ema_running_var=ema_gen.module.net[0][1].running_var.numpy(),
        gen_grad_none=[p.grad is None for p in gen.parameters()], n_averaged=int(ema_gen.n_averaged),
        dtypes=(z.dtype == torch.float32, labels.dtype == torch.long),
        attention=critic.last_attention.numpy(),
    )  # fmt: skip


def _gan_data(rng, n=16):
    """Class c: a bright bar in row 2c (and 2c + 1) of a dark 8x8 image, in [-1, 1]."""
    labels = rng.integers(0, 4, n)
    images = -np.ones((n, 1, 8, 8)) + 0.1 * rng.standard_normal((n, 1, 8, 8))
    for i, c in enumerate(labels):
        images[i, 0, 2 * c : 2 * c + 2] = 0.9
    f32 = np.float32
    steps = 2 * (n // 8) * 2  # epochs x batches x critic iterations
    return dict(
        images=images.astype(f32), labels=labels,
        noise=[rng.standard_normal((8, 6, 1, 1)).astype(f32) for _ in range(steps)],
        alpha=[rng.random((8, 1, 1, 1)) .astype(f32) for _ in range(steps)],
        fixed_noise=rng.standard_normal((8, 6, 1, 1)).astype(f32),
        sample_z=rng.normal(0, 1, (16, 6)),  # float64, as np.random.normal gives
        aug_seed=int(rng.integers(1 << 31)),
    )  # fmt: skip


def test_conditional_wgan_gp_diffaugment(rng):
    data = _gan_data(rng)
    same_init = _same_init()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.meshgrid without indexing= warns, in both
        rt = wgan_gp_program(torch, same_init, data)
        rp = wgan_gp_program(pr, same_init, data)
    assert rp["history"].shape == rt["history"].shape == (4, 4)
    # 8 critic and 4 generator steps of Adam with beta1 = 0 (each step the gradient over its
    # running RMS), through a double backward and InstanceNorm over 2x2 maps: seen 1.5e-6
    # relative; 1e-4 (atol 1e-5 for gamma, which starts at 0) leaves room for other sum orders
    _close(rp["history"], rt["history"], 1e-4, 1e-5, "critic loss, penalty, generator loss, gamma")
    _close(rp["fixed"], rt["fixed"], 1e-4, 1e-5, "EMA generator's fixed-noise samples")
    _close(rp["scores"], rt["scores"], 1e-4, 1e-5, "critic scores")
    _close(rp["attention"], rt["attention"], 1e-4, 1e-6, "the critic's attention maps")
    _close(rp["running_var"], rt["running_var"], 1e-4, 1e-6, "BatchNorm running_var")
    _close(rp["ema_running_var"], rt["ema_running_var"], 1e-4, 1e-6, "EMA's running_var")
    assert np.abs(rp["grid"].astype(int) - rt["grid"]).max() <= 1  # uint8, rounding at .5
    for key in ("critic_grads", "gen_grad_none", "n_averaged", "dtypes"):
        assert rp[key] == rt[key], key
    assert rp["dtypes"] == (True, True) and rp["n_averaged"] == 4


# ---- 3. a small ViT: mixup / cutmix, warmup + cosine, then fine-tuned at a higher resolution ----
def vit_program(torch, same_init, data, ckpt_path, epochs=2):
    nn = torch.nn
    F = torch.nn.functional
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset
    np_random = np.random.RandomState(data["seed"])  # port: seeded, instead of np.random

    class PatchEmbed(nn.Module):
        """Image to Patch Embedding"""

        def __init__(self, img_size=8, patch_size=2, in_chans=3, embed_dim=16):
            super().__init__()
            self.img_size = img_size
            self.patch_size = patch_size
            self.num_patches = (img_size // patch_size) * (img_size // patch_size)
            self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

        def forward(self, x):
            B, C, H, W = x.shape
            x = self.proj(x).flatten(2).transpose(1, 2)
            return x

    class VisionTransformer(nn.Module):
        def __init__(self, img_size=8, patch_size=2, in_chans=3, num_classes=4, embed_dim=16,
                     depth=2, num_heads=2, mlp_ratio=2.0, drop_rate=0.0):  # fmt: skip
            super().__init__()
            self.num_features = self.embed_dim = embed_dim
            self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
            num_patches = self.patch_embed.num_patches
            self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
            self.pos_drop = nn.Dropout(p=drop_rate)
            encoder_layer = nn.TransformerEncoderLayer(
                d_model=embed_dim, nhead=num_heads, dim_feedforward=int(embed_dim * mlp_ratio),
                dropout=drop_rate, activation="gelu", batch_first=True, norm_first=True,
            )  # fmt: skip
            self.blocks = nn.TransformerEncoder(
                encoder_layer, num_layers=depth, norm=nn.LayerNorm(embed_dim, eps=1e-6),
                enable_nested_tensor=False,
            )  # fmt: skip
            self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
            nn.init.trunc_normal_(self.cls_token, std=0.02)
            self.apply(self._init_weights)

        def _init_weights(self, m):
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.LayerNorm):
                nn.init.constant_(m.bias, 0)
                nn.init.constant_(m.weight, 1.0)

        @torch.jit.ignore
        def no_weight_decay(self):
            return {"pos_embed", "cls_token"}

        def interpolate_pos_encoding(self, x, w, h):
            npatch = x.shape[1] - 1
            N = self.pos_embed.shape[1] - 1
            if npatch == N and w == h:
                return self.pos_embed
            class_pos_embed = self.pos_embed[:, 0]
            patch_pos_embed = self.pos_embed[:, 1:]
            dim = x.shape[-1]
            w0 = w // self.patch_embed.patch_size
            h0 = h // self.patch_embed.patch_size
            # we add a small number to avoid floating point error in the interpolation
            # see discussion at https://github.com/facebookresearch/dino/issues/8
            w0, h0 = w0 + 0.1, h0 + 0.1
            patch_pos_embed = nn.functional.interpolate(
                patch_pos_embed.reshape(1, int(math.sqrt(N)), int(math.sqrt(N)), dim).permute(0, 3, 1, 2),
                scale_factor=(w0 / math.sqrt(N), h0 / math.sqrt(N)),
                mode="bicubic",
            )  # fmt: skip
            assert int(w0) == patch_pos_embed.shape[-2] and int(h0) == patch_pos_embed.shape[-1]
            patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).view(1, -1, dim)
            return torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed), dim=1)

        def prepare_tokens(self, x):
            B, nc, w, h = x.shape
            x = self.patch_embed(x)  # patch linear embedding
            cls_tokens = self.cls_token.expand(B, -1, -1)
            x = torch.cat((cls_tokens, x), dim=1)
            x = x + self.interpolate_pos_encoding(x, w, h)
            return self.pos_drop(x)

        def forward(self, x):
            x = self.prepare_tokens(x)
            x = self.blocks(x)
            return self.head(x[:, 0])

    # timm's mixup / cutmix, batch mode, the pair being the flipped batch
    def one_hot(x, num_classes, on_value=1.0, off_value=0.0):
        x = x.long().view(-1, 1)
        return torch.full((x.size()[0], num_classes), off_value, device=x.device).scatter_(
            1, x, on_value
        )

    def mixup_target(target, num_classes, lam=1.0, smoothing=0.0):
        off_value = smoothing / num_classes
        on_value = 1.0 - smoothing + off_value
        y1 = one_hot(target, num_classes, on_value=on_value, off_value=off_value)
        y2 = one_hot(target.flip(0), num_classes, on_value=on_value, off_value=off_value)
        return y1 * lam + y2 * (1.0 - lam)

    def rand_bbox(img_shape, lam, margin=0.0, count=None):
        ratio = np.sqrt(1 - lam)
        img_h, img_w = img_shape[-2:]
        cut_h, cut_w = int(img_h * ratio), int(img_w * ratio)
        margin_y, margin_x = int(margin * cut_h), int(margin * cut_w)
        cy = np_random.randint(0 + margin_y, img_h - margin_y, size=count)
        cx = np_random.randint(0 + margin_x, img_w - margin_x, size=count)
        yl = np.clip(cy - cut_h // 2, 0, img_h)
        yh = np.clip(cy + cut_h // 2, 0, img_h)
        xl = np.clip(cx - cut_w // 2, 0, img_w)
        xh = np.clip(cx + cut_w // 2, 0, img_w)
        return yl, yh, xl, xh

    class Mixup:
        def __init__(self, mixup_alpha=0.8, cutmix_alpha=1.0, switch_prob=0.5,
                     label_smoothing=0.1, num_classes=4):  # fmt: skip
            self.mixup_alpha, self.cutmix_alpha, self.switch_prob = (
                mixup_alpha,
                cutmix_alpha,
                switch_prob,
            )
            self.label_smoothing, self.num_classes = label_smoothing, num_classes

        def _params_per_batch(self):
            use_cutmix = np_random.rand() < self.switch_prob
            lam_mix = (
                np_random.beta(self.cutmix_alpha, self.cutmix_alpha)
                if use_cutmix
                else np_random.beta(self.mixup_alpha, self.mixup_alpha)
            )
            return float(lam_mix), use_cutmix

        def _mix_batch(self, x):
            lam, use_cutmix = self._params_per_batch()
            if lam == 1.0:
                return 1.0
            if use_cutmix:
                yl, yh, xl, xh = rand_bbox(x.shape, lam)
                x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]
                lam = 1.0 - (yh - yl) * (xh - xl) / float(x.shape[-2] * x.shape[-1])
            else:
                x_flipped = x.flip(0).mul_(1.0 - lam)
                x.mul_(lam).add_(x_flipped)
            return lam

        def __call__(self, x, target):
            assert len(x) % 2 == 0, "Batch size should be even when using this"
            lam = self._mix_batch(x)
            target = mixup_target(target, self.num_classes, lam, self.label_smoothing)
            return x, target

    class SoftTargetCrossEntropy(nn.Module):
        def forward(self, x, target):
            loss = torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1)
            return loss.mean()

    def accuracy(output, target, topk=(1,)):
        maxk = min(max(topk), output.size()[1])
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.reshape(1, -1).expand_as(pred))
        return [
            correct[: min(k, maxk)].reshape(-1).float().sum(0) * 100.0 / batch_size for k in topk
        ]

    def param_groups_weight_decay(model, weight_decay=1e-5, no_weight_decay_list=()):
        no_weight_decay_list = set(no_weight_decay_list)
        decay, no_decay = [], []
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
                no_decay.append(param)
            else:
                decay.append(param)
        return [
            {"params": no_decay, "weight_decay": 0.0},
            {"params": decay, "weight_decay": weight_decay},
        ]

    # MAE's util/lr_decay.py and util/lr_sched.py: layer-wise lr decay for fine-tuning
    def param_groups_lrd(model, weight_decay=0.05, no_weight_decay_list=[], layer_decay=0.75):
        param_group_names = {}
        param_groups = {}
        num_layers = len(model.blocks.layers) + 1
        layer_scales = list(layer_decay ** (num_layers - i) for i in range(num_layers + 1))
        for n, p in model.named_parameters():
            if not p.requires_grad:
                continue
            if p.ndim == 1 or n in no_weight_decay_list:
                g_decay = "no_decay"
                this_decay = 0.0
            else:
                g_decay = "decay"
                this_decay = weight_decay
            layer_id = get_layer_id_for_vit(n, num_layers)
            group_name = "layer_%d_%s" % (layer_id, g_decay)
            if group_name not in param_group_names:
                this_scale = layer_scales[layer_id]
                param_group_names[group_name] = {
                    "lr_scale": this_scale, "weight_decay": this_decay, "params": [],
                }  # fmt: skip
                param_groups[group_name] = {
                    "lr_scale": this_scale, "weight_decay": this_decay, "params": [],
                }  # fmt: skip
            param_group_names[group_name]["params"].append(n)
            param_groups[group_name]["params"].append(p)
        return list(param_groups.values())

    def get_layer_id_for_vit(name, num_layers):
        if name in ["cls_token", "pos_embed"]:
            return 0
        elif name.startswith("patch_embed"):
            return 0
        elif name.startswith("blocks.layers"):
            return int(name.split(".")[2]) + 1
        else:
            return num_layers

    def adjust_learning_rate(optimizer, epoch, lr, min_lr, warmup_epochs, epochs):
        """Decay the learning rate with half-cycle cosine after warmup"""
        if epoch < warmup_epochs:
            lr = lr * epoch / warmup_epochs
        else:
            lr = min_lr + (lr - min_lr) * 0.5 * (
                1.0 + math.cos(math.pi * (epoch - warmup_epochs) / (epochs - warmup_epochs))
            )
        for param_group in optimizer.param_groups:
            if "lr_scale" in param_group:
                param_group["lr"] = lr * param_group["lr_scale"]
            else:
                param_group["lr"] = lr
        return lr

    def get_grad_norm_(parameters, norm_type: float = 2.0):
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        parameters = [p for p in parameters if p.grad is not None]
        norm_type = float(norm_type)
        if len(parameters) == 0:
            return torch.tensor(0.0)
        device = parameters[0].grad.device
        if norm_type == math.inf:
            total_norm = max(p.grad.detach().abs().max().to(device) for p in parameters)
        else:
            total_norm = torch.norm(
                torch.stack(
                    [torch.norm(p.grad.detach(), norm_type).to(device) for p in parameters]
                ),
                norm_type,
            )
        return total_norm

    class NativeScalerWithGradNormCount:
        state_dict_key = "amp_scaler"

        def __init__(self):
            self._scaler = torch.cuda.amp.GradScaler()

        def __call__(self, loss, optimizer, clip_grad=None, parameters=None, create_graph=False,
                     update_grad=True):  # fmt: skip
            self._scaler.scale(loss).backward(create_graph=create_graph)
            if update_grad:
                if clip_grad is not None:
                    assert parameters is not None
                    self._scaler.unscale_(optimizer)  # unscale the gradients in place
                    norm = torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
                else:
                    self._scaler.unscale_(optimizer)
                    norm = get_grad_norm_(parameters)
                self._scaler.step(optimizer)
                self._scaler.update()
            else:
                norm = None
            return norm

        def state_dict(self):
            return self._scaler.state_dict()

        def load_state_dict(self, state_dict):
            self._scaler.load_state_dict(state_dict)

    mean = torch.tensor([0.5, 0.5, 0.5]).view(3, 1, 1)
    std = torch.tensor([0.25, 0.25, 0.25]).view(3, 1, 1)

    def loaders(x, y, shuffle):
        x = (torch.from_numpy(x).float() / 255 - mean) / std
        return DataLoader(TensorDataset(x, torch.from_numpy(y)), batch_size=8, shuffle=shuffle)

    def make_training(model):
        groups = param_groups_weight_decay(model, 0.05, model.no_weight_decay())
        optimizer = torch.optim.AdamW(groups, lr=3e-3)
        steps = epochs * len(train_loader)
        warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=2)
        cosine = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=steps - 2, eta_min=1e-5
        )
        scheduler = torch.optim.lr_scheduler.SequentialLR(
            optimizer, [warmup, cosine], milestones=[2]
        )
        return groups, optimizer, scheduler

    train_loader = loaders(data["x_train"], data["y_train"], False)  # port: shuffle=False
    val_loader = loaders(data["x_val"], data["y_val"], False)
    model = VisionTransformer()
    same_init(model)
    mixup_fn = Mixup(num_classes=4)
    criterion = SoftTargetCrossEntropy()
    groups, optimizer, scheduler = make_training(model)

    def validate(model, loader):
        model.eval()
        top1, top2, n = 0.0, 0.0, 0
        with torch.inference_mode():
            for images, target in loader:
                output = model(images)
                acc1, acc2 = accuracy(output, target, topk=(1, 2))
                top1 += acc1.item() * images.size(0)
                top2 += acc2.item() * images.size(0)
                n += images.size(0)
        return top1 / n, top2 / n, output

    losses, lrs = [], []
    for epoch in range(epochs):
        if epoch == 1:  # save after the first epoch, then resume into fresh objects
            torch.save(
                {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "epoch": epoch},
                ckpt_path,
            )  # fmt: skip
            checkpoint = torch.load(ckpt_path, map_location="cpu")
            model = VisionTransformer()
            model.load_state_dict(checkpoint["model"])
            groups, optimizer, scheduler = make_training(model)
            optimizer.load_state_dict(checkpoint["optimizer"])
            scheduler.load_state_dict(checkpoint["scheduler"])
            start_epoch = checkpoint["epoch"]
        model.train()
        for samples, targets in train_loader:
            samples, targets = mixup_fn(samples, targets)
            outputs = model(samples)
            loss = criterion(outputs, targets)
            if not math.isfinite(loss.item()):
                raise SystemExit(f"Loss is {loss.item()}, stopping training")
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            lrs.append(optimizer.param_groups[0]["lr"])
    top1, top2, last_logits = validate(model, val_loader)

    # fine-tune at 12x12 (the 4x4 grid of position embeddings resized to 6x6 on the fly) with
    # layer-wise lr decay, MAE's per-iteration schedule and its loss scaler
    hi_res = loaders(data["x_hi"], data["y_hi"], False)
    ft_groups = param_groups_lrd(model, 0.05, model.no_weight_decay(), layer_decay=0.75)
    ft_opt = torch.optim.AdamW(ft_groups, lr=1e-3)
    loss_scaler = NativeScalerWithGradNormCount()
    ft_losses, ft_norms, ft_lrs = [], [], []
    ft_epochs = 2
    for epoch in range(ft_epochs):
        model.train()
        for data_iter_step, (images, target) in enumerate(hi_res):
            adjust_learning_rate(
                ft_opt, data_iter_step / len(hi_res) + epoch, 1e-3, 1e-6, 1, ft_epochs
            )
            with torch.cuda.amp.autocast():
                loss = F.cross_entropy(model(images), target, label_smoothing=0.1)
            ft_opt.zero_grad()
            norm = loss_scaler(loss, ft_opt, clip_grad=None, parameters=model.parameters())
            ft_losses.append(loss.item())
            ft_norms.append(float(norm))
            ft_lrs.append([g["lr"] for g in ft_opt.param_groups])
    model.eval()
    with torch.no_grad():
        x = next(iter(hi_res))[0]
        pos = model.interpolate_pos_encoding(model.patch_embed(x), 12, 12)
        hi_logits = model(x)
    return dict(
        losses=losses, lrs=lrs, top1=top1, top2=top2, last_logits=last_logits.numpy(),
        ft_losses=ft_losses, pos=pos.numpy(), hi_logits=hi_logits.numpy(),
        n_groups=[len(g["params"]) for g in groups], start_epoch=start_epoch,
        ft_norms=ft_norms, ft_lrs=np.array(ft_lrs),
        ft_groups=[(g["lr_scale"], g["weight_decay"], len(g["params"])) for g in ft_opt.param_groups],
    )  # fmt: skip


def _vit_data(rng):
    """Class c: a colour (channel c % 3) brighter in one quadrant (c // 3 picks which half)."""

    def make(n, size):
        y = rng.integers(0, 4, n)
        x = rng.integers(60, 140, (n, 3, size, size))
        for i, c in enumerate(y):
            h = size // 2
            x[i, c % 3, (c // 3) * h : (c // 3 + 1) * h] += 100
        return x.astype(np.uint8), y

    (x_train, y_train), (x_val, y_val), (x_hi, y_hi) = make(32, 8), make(16, 8), make(16, 12)
    return dict(
        x_train=x_train, y_train=y_train, x_val=x_val, y_val=y_val, x_hi=x_hi, y_hi=y_hi,
        seed=int(rng.integers(1 << 31)),
    )  # fmt: skip


def test_vit_mixup_cutmix_resume_finetune_higher_resolution(rng, tmp_path):
    data = _vit_data(rng)
    same_init = _same_init()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.cuda.amp's deprecation warnings (and no CUDA)
        rt = vit_program(torch, same_init, data, tmp_path / "t.pt")
        rp = vit_program(pr, same_init, data, tmp_path / "p.pt")
    _close(rp["lrs"], rt["lrs"], 1e-12, 0, "learning rates")  # host arithmetic, both
    # 8 + 4 AdamW steps of a 2-layer encoder on 8 images: seen 1e-7 relative (losses), 2e-5 on
    # logits near 0 (hence atol); 1e-4 leaves room for the attention's other summation orders
    _close(rp["losses"], rt["losses"], 1e-4, 1e-6, "losses")
    _close(rp["last_logits"], rt["last_logits"], 1e-4, 1e-5, "validation logits")
    # exact: topk of logits that agree to ~1e-7 (the last batch's smallest margin is 2e-3)
    assert (rp["top1"], rp["top2"]) == (rt["top1"], rt["top2"])
    _close(rp["pos"], rt["pos"], 1e-5, 1e-6, "bicubic-resized position embeddings")
    _close(rp["ft_lrs"], rt["ft_lrs"], 1e-12, 0, "layer-wise learning rates")
    _close(rp["ft_losses"], rt["ft_losses"], 1e-4, 1e-6, "fine-tuning losses")
    _close(rp["ft_norms"], rt["ft_norms"], 1e-4, 1e-6, "fine-tuning gradient norms")
    _close(rp["hi_logits"], rt["hi_logits"], 1e-4, 1e-5, "logits at 12x12")
    for key in ("n_groups", "start_epoch", "ft_groups"):
        assert rp[key] == rt[key], key


# ---- regressions: what the programs' patterns met ---------------------------------------------
# 1. A product's operand was kept (and version-checked) for a gradient no one needed: with x data
# and w a parameter, `y = x @ w; y.backward(retain_graph=True); opt.step(); y2.backward()` raised
# "one of the variables needed for gradient computation has been modified by an inplace
# operation", where torch, which saves mat2 only when mat1 requires grad, runs. Now
# autograd.record drops such inputs by the rule's `reads_for` (autograd._drop_unread): matmul, mm,
# bmm, linear, addmm, baddbmm, addmv, outer (ops/matmul.py), addcmul, addcdiv, lerp
# (ops/elementwise.py). Inputs that two gradients read stay kept, as torch keeps them.
SAVED_FOR_OTHER = {
    "linear": lambda L, x, w: L.nn.functional.linear(x, w),
    "linear_3d": lambda L, x, w: L.nn.functional.linear(x.expand(2, 4, 4), w, w[0]),
    "matmul": lambda L, x, w: x @ w,
    "matmul_vec": lambda L, x, w: x[0] @ w,
    "mm_left": lambda L, x, w: L.mm(w, x),
    "bmm": lambda L, x, w: L.bmm(x[None], w[None]),
    "addmm": lambda L, x, w: L.addmm(w[0], x, w, beta=0.5, alpha=2.0),
    "baddbmm": lambda L, x, w: L.baddbmm(x[None], x[None], w[None]),
    "addbmm": lambda L, x, w: L.addbmm(x, x[None].expand(3, 4, 4), w[None].expand(3, 4, 4)),
    "addmv": lambda L, x, w: L.addmv(x[0], x, w[0]),
    "outer": lambda L, x, w: L.outer(x[0], w[1]),
    "einsum": lambda L, x, w: L.einsum("ij,jk->ik", x, w),
    "bilinear": lambda L, x, w: L.nn.functional.bilinear(x, x, w[None]),
    "addcmul": lambda L, x, w: L.addcmul(w, x, w, value=0.5),
    "addcdiv_t1": lambda L, x, w: L.addcdiv(x, w, x + 1),
    "lerp_scalar": lambda L, x, w: L.lerp(x, w, 0.3),
    "lerp_start_end": lambda L, x, w: L.lerp(w, x, x * 0.1),
}


@pytest.mark.parametrize("op", sorted(SAVED_FOR_OTHER))
def test_operand_kept_only_for_the_gradient_that_reads_it(rng, op):
    x_, w_ = rng.uniform(0.5, 1.5, (2, 4, 4)).astype(np.float32)
    out = []
    for L in (torch, pr):
        w = L.nn.Parameter(L.tensor(w_))
        x = L.tensor(x_)
        y = SAVED_FOR_OTHER[op](L, x, w)
        y.sum().backward(retain_graph=True)
        first = w.grad.clone()
        with L.no_grad():
            w.mul_(1.5)  # an optimizer step between the two backward passes
        y.sum().backward()  # w's own gradient does not read w
        out.append((first.numpy(), (w.grad - first).numpy()))
    _close(out[1][0], out[0][0], 1e-6, 1e-6, "first gradient")
    _close(out[1][1], out[0][1], 1e-6, 1e-6, "second gradient")


@pytest.mark.parametrize(
    "op",
    ["matmul_both", "mm_data_written", "lerp_weight", "addcdiv_t2", "addcmul_data_written"],
)
def test_operand_needed_by_a_gradient_still_checked(rng, op):
    """Where torch keeps the tensor (another input's gradient reads it, or two gradients do),
    writing it in place before the backward raises, in both."""
    x_, w_ = rng.uniform(0.5, 1.5, (2, 4, 4)).astype(np.float32)
    for L in (torch, pr):
        w = L.nn.Parameter(L.tensor(w_))
        x = L.tensor(x_)
        written = w
        if op == "matmul_both":
            x.requires_grad_()
            y = x @ w
        elif op == "mm_data_written":
            y, written = L.mm(x, w), x
        elif op == "lerp_weight":
            y = L.lerp(x, x * 2, w)
        elif op == "addcdiv_t2":
            y = L.addcdiv(x, x, w)
        else:
            y, written = L.addcmul(x, x, w), x
        with L.no_grad():
            written.mul_(1.5)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_linear_probe_second_loss_after_a_step(rng):
    """The pattern as a script meets it: a linear head on frozen features, a step after the
    main loss, then an auxiliary z-loss backpropagated through the same logits."""
    feats_, y_ = rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8)
    same_init = _same_init()
    result = []
    for L in (torch, pr):
        if L is torch:
            torch.manual_seed(0)
        head = L.nn.Linear(6, 3)
        same_init(head)
        opt = L.optim.SGD(head.parameters(), lr=0.1)
        with L.no_grad():
            features = L.tensor(feats_)  # a frozen backbone's output
        logits = head(features)
        loss = L.nn.functional.cross_entropy(logits, L.tensor(y_))
        loss.backward(retain_graph=True)
        opt.step()
        opt.zero_grad()
        z_loss = 1e-2 * logits.logsumexp(-1).pow(2).mean()
        z_loss.backward()
        opt.step()
        packed = []
        with L.autograd.graph.saved_tensors_hooks(
            lambda t: packed.append(tuple(t.shape)) or t, lambda t: t
        ):
            head(features).sum()
        result.append((head.weight.detach().numpy(), loss.item(), z_loss.item(), packed))
    _close(result[1][0], result[0][0], 1e-6, 1e-7, "weights after the two steps")
    _close(result[1][1:3], result[0][1:3], 1e-6, 1e-7, "losses")
    assert result[1][3] == result[0][3] == [(8, 6)]  # only the features are saved


# 2. torch.meshgrid without indexing= (DiffAugment's, program 2) warned in torch and not in
# pyrite; now ops/combine.py's meshgrid gives torch's warning, once a process as torch's.
def test_meshgrid_without_indexing_warns_once(monkeypatch):
    from pyrite import errors

    monkeypatch.setattr(errors, "WARNED_ONCE", set())
    a, b = pr.arange(2), pr.arange(3)
    with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
        gx, gy = pr.meshgrid(a, b)
    assert tuple(gx.shape) == (2, 3) and gx.numpy().tolist() == [[0, 0, 0], [1, 1, 1]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pr.meshgrid(a, b)  # once
        assert tuple(pr.meshgrid(a, b, indexing="xy")[0].shape) == (3, 2)
