"""Shared test settings: hypothesis runs few, reproducible examples without a deadline."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "lmcore",
    deadline=None,
    max_examples=25,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("lmcore")

# Tiny tensors run fastest on one thread, and a shared 2-core CI machine makes extra threads
# slower, not faster. Notebook kernels (nbval) are separate processes and keep their defaults.
import torch  # noqa: E402

torch.set_num_threads(1)
