"""torch.version's names: pyrite's version, and no CUDA or HIP toolkit."""

__version__ = "0.1.0"  # pyrite.__version__ is this one (and pyproject.toml's)
cuda = None
hip = None
rocm = None
xpu = None
debug = False
git_version = "unknown"
