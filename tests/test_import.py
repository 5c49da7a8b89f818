"""`import lmcore` is the core only: torch and NumPy, no plotting or widget libraries."""

import json
import subprocess
import sys

import lmcore


def test_import_lmcore_does_not_pull_course_dependencies():
    code = (
        "import sys, json, lmcore; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('matplotlib', 'ipywidgets', 'IPython', 'lmcore'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    heavy = [m for m in loaded if not m.startswith("lmcore")]
    assert heavy == [], f"import lmcore imported {heavy}"
    assert "lmcore.course" not in loaded
    assert "lmcore.loss" in loaded  # the probe itself works


def test_public_names_are_exported():
    expected = {
        "IGNORE_INDEX",
        "shift_for_next_token",
        "labels_from_attention_mask",
        "mask_cross_document_targets",
        "pack_documents",
        "document_causal_mask",
        "causal_lm_loss",
        "chunked_causal_lm_loss",
        "PerplexityMeter",
        "bits_per_byte",
        "handcalc",
    }
    assert expected <= set(lmcore.__all__)
    for name in lmcore.__all__:
        assert hasattr(lmcore, name), name
    assert lmcore.IGNORE_INDEX == -100
    for mod in ("handcalc", "shift", "loss", "perplexity"):
        module = __import__(f"lmcore.{mod}", fromlist=["__all__"])
        for name in module.__all__:
            assert hasattr(module, name), f"lmcore.{mod}.{name}"
