"""rope's parameters: one frozen dataclass, its ranges, and which scaling takes which."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from posenc.declare import check_ranges, param
from posenc.errors import InconsistentError

Layout = Literal["interleaved", "split"]
Scaling = Literal["none", "linear", "dynamic", "yarn", "llama3", "longrope"]
Component = Literal["cos_sin", "cos", "sin", "angle", "inv_freq"]
Precision = Literal["float32", "float64"]
# framework and transformers are one recipe, spelled framework once parsed.
Recipe = Literal["exact", "framework", "transformers", "ggml", "mlx"]
Runtime = Literal["ggml", "mlx"]
RUNTIMES: tuple[Runtime, ...] = ("ggml", "mlx")
COMPONENTS: tuple[str, ...] = get_args(Component)

_NEEDS: dict[str, tuple[str, ...]] = {
    "none": (),
    "linear": ("factor",),
    "dynamic": ("factor", "original_max_position_embeddings"),
    "yarn": ("factor", "original_max_position_embeddings"),
    "llama3": ("factor",),
    "longrope": ("short_factor", "long_factor", "original_max_position_embeddings"),
}
_TAKES: dict[str, frozenset[str]] = {
    "none": frozenset(),
    "linear": frozenset({"factor"}),
    "dynamic": frozenset({"factor", "original_max_position_embeddings"}),
    "yarn": frozenset(
        {
            "factor",
            "original_max_position_embeddings",
            "beta_fast",
            "beta_slow",
            "attention_factor",
            "mscale",
            "mscale_all_dim",
            "truncate",
        }
    ),
    "llama3": frozenset(
        {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}
    ),
    "longrope": frozenset(
        {
            "factor",
            "original_max_position_embeddings",
            "attention_factor",
            "short_factor",
            "long_factor",
        }
    ),
}


# The smallest factor a frequency may be divided by. The exact angle reduction takes pos·ω mod
# 2π from ω's turns in double-double (106 bits): at positions near 2^31 that stays correctly
# rounded up to ω ≈ 2^16 radians per position (measured: a factor of 2^-16 exact, 10^-6 within
# an ulp, 10^-9 a hundred ulps off, 10^-300 cosines of 10^270). A faster rope has no use.
SMALLEST_DIVISOR = 2.0**-16


@dataclass(frozen=True)
class RopeParams:
    d_model: int = param(
        doc="the rotated (head) dimension; even, since pairs rotate", ge=2, le=65536, multiple_of=2
    )
    base: float = param(10000.0, doc="rope_theta; 1 < base ≤ 1e12", gt=1, le=1e12)
    layout: Layout = param(
        "split",
        doc="split: pairs (i, i+d/2), transformers' rotate_half; interleaved: pairs (2i, 2i+1), "
        "RoFormer and GPT-J",
    )
    scaling: Scaling = param(
        "none",
        doc="long-context scaling, as transformers computes it; each takes the parameters "
        "whose description names it",
    )
    factor: float | None = param(
        None,
        doc="linear, dynamic, yarn, llama3 (required); longrope. At least 2^-16: it divides "
        "frequencies, and angles are served exactly up to 2^16 radians per position",
        ge=SMALLEST_DIVISOR,
        le=1e6,
    )
    original_max_position_embeddings: int | None = param(
        None,
        doc="the trained context length: dynamic, yarn, longrope (required); llama3 (8192)",
        ge=1,
        le=2**31 - 1,
    )
    low_freq_factor: float | None = param(None, doc="llama3 (default 1)", gt=0, le=1e6)
    high_freq_factor: float | None = param(None, doc="llama3 (default 4)", gt=0, le=1e6)
    beta_fast: float | None = param(None, doc="yarn (default 32)", gt=0, le=1e6)
    beta_slow: float | None = param(None, doc="yarn (default 1)", gt=0, le=1e6)
    attention_factor: float | None = param(
        None, doc="yarn, longrope: overrides the inferred factor", gt=0, le=1e6
    )
    mscale: float | None = param(None, doc="yarn", gt=0, le=1e6)
    mscale_all_dim: float | None = param(None, doc="yarn", gt=0, le=1e6)
    truncate: bool | None = param(None, doc="yarn: round the ramp's ends outwards (default true)")
    short_factor: tuple[float, ...] | None = param(
        None,
        doc="longrope (required): d_model/2 factors, used up to original_max_position_embeddings; "
        "each at least 2^-16",
        ge=SMALLEST_DIVISOR,
        le=1e6,
        min_items=1,
        max_items=32768,
    )
    long_factor: tuple[float, ...] | None = param(
        None,
        doc="longrope (required): d_model/2 factors, used beyond it; each at least 2^-16",
        ge=SMALLEST_DIVISOR,
        le=1e6,
        min_items=1,
        max_items=32768,
    )
    rotary_pairs: int | None = param(
        None,
        doc="the pairs that turn: pair i < rotary_pairs at base^(−2i/d_model), the others at "
        "frequency 0 (cos 1, sin 0), after any scaling: transformers' proportional rope "
        "(Gemma 4, LFM 3), whose exponents divide by the whole head. At most d_model/2 "
        "(default: every pair)",
        ge=1,
        le=32768,
    )
    recipe: Recipe = param(
        "exact",
        doc="exact: correctly rounded; framework (or transformers): transformers' own float32 "
        "computation; ggml: llama.cpp's (ggml-cpu), with the parameters llama.cpp derives from "
        "this rope; mlx: MLX's mx.fast.rope on its CPU backend, with mlx-lm's frequencies",
    )
    freq_factors: tuple[float, ...] | None = param(
        None,
        doc="d_model/2 factors that divide each pair's frequency, as llama.cpp's rope_freqs or "
        "rope_factors_long/short tensor does (a GGUF's own): with recipe=ggml they replace the "
        "factors llama.cpp's converter would compute for llama3 or longrope; with "
        "recipe=exact, the exact rope of a GGUF (scaling none, linear or yarn on top of them)",
        ge=SMALLEST_DIVISOR,
        le=1e6,
        min_items=1,
        max_items=32768,
    )
    n_ctx: int | None = param(
        None,
        doc="recipe=ggml, scaling=longrope: the context llama.cpp runs with, which picks "
        "long_factor when it exceeds original_max_position_embeddings, else short_factor, "
        "after llama.cpp pads it to a multiple of 256 (default: factor × "
        "original_max_position_embeddings, the model's own context)",
        ge=1,
        le=2**31 - 1,
    )
    framework_precision: Precision | None = param(
        None,
        doc="recipe=framework: the precision the framework computes in. float32 (the default): "
        "transformers' rotary modules; float64: RoFormer's NumPy table (base^(2i/d_model), "
        "pos / it, sin and cos in float64, each rounded once to float32), which takes "
        "scaling=none and every pair turning only (checked whatever the recipe). The exact "
        "table's values do not depend on it",
    )

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.framework_precision == "float32":  # the default, spelled out: one spelling
            object.__setattr__(self, "framework_precision", None)
        if self.recipe == "transformers":
            object.__setattr__(self, "recipe", "framework")
        self._check_runtime()
        if self.recipe in ("framework", "mlx") and self.scaling == "dynamic" and self.d_model < 4:
            raise InconsistentError("d_model", "must be ≥ 4 for dynamic scaling: d/(d−2) is used")
        if (
            self.scaling == "longrope"
            and (self.factor or 1.0) > 1
            and self.original_max_position_embeddings == 1
        ):
            raise InconsistentError(
                "original_max_position_embeddings",
                "must be ≥ 2 for longrope with a factor above 1: its attention factor divides "
                "by ln(original_max_position_embeddings)",
            )
        for name in _NEEDS[self.scaling]:
            if getattr(self, name) is None:
                raise InconsistentError(name, f"is required with scaling={self.scaling}")
        for name in _TAKES_ANY - _TAKES[self.scaling]:
            if getattr(self, name) is not None:
                raise InconsistentError(name, f"does not apply to scaling={self.scaling}")
        if self.framework_precision == "float64":
            # RoFormer's table, the one float64 framework, has neither.
            if self.scaling != "none":
                raise InconsistentError(
                    "framework_precision", "float64 takes scaling=none (RoFormer's table)"
                )
            if self.rotary_pairs is not None:
                raise InconsistentError(
                    "framework_precision", "float64 turns every pair (RoFormer's table)"
                )
        if self.rotary_pairs is not None and self.rotary_pairs > self.d_model // 2:
            raise InconsistentError(
                "rotary_pairs",
                f"must be at most d_model/2 = {self.d_model // 2}, got {self.rotary_pairs}",
            )
        for name in ("short_factor", "long_factor", "freq_factors"):
            values = getattr(self, name)
            if values is not None and (
                len(values) != self.d_model // 2 or not all(v > 0 for v in values)
            ):
                raise InconsistentError(
                    name,
                    f"must list d_model/2 = {self.d_model // 2} positive numbers, "
                    f"got {len(values)}",
                )

    def _check_runtime(self) -> None:
        if self.freq_factors is not None and self.recipe not in ("ggml", "exact"):
            raise InconsistentError(
                "freq_factors",
                f"applies to recipe=ggml (llama.cpp's) and recipe=exact, not {self.recipe}: "
                "transformers and MLX take no factor tensor",
            )
        if self.freq_factors is not None and self.recipe == "exact":
            if self.scaling not in _ON_FACTORS:
                raise InconsistentError(
                    "freq_factors",
                    f"with recipe=exact, under scaling none, linear or yarn: {self.scaling}'s "
                    "own factors are what llama.cpp's factor tensor holds; state one or the other",
                )
        if self.n_ctx is not None and (self.recipe != "ggml" or self.scaling != "longrope"):
            raise InconsistentError("n_ctx", "applies to recipe=ggml with scaling=longrope only")
        if self.framework_precision is not None and self.recipe in RUNTIMES:
            raise InconsistentError(
                "framework_precision", f"applies to recipe=framework, not {self.recipe}"
            )


_TAKES_ANY = frozenset().union(*_TAKES.values())
# The scalings llama.cpp applies on top of a factor tensor (freq_scale, YaRN's ramp), which the
# exact rope therefore composes with freq_factors.
_ON_FACTORS = ("none", "linear", "yarn")
