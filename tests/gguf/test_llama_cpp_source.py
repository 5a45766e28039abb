"""The architecture table held to the llama.cpp source it was read from (the sdist's
``vendor/llama.cpp``), row by row: every architecture ``llama_model_rope_type`` ropes has a
row; a row's rope type is that function's, its files are the ones ``llama_model_mapping``'s
class takes its hparams and graph from, its factor tensors are the ones its ``load_tensors``
creates and its graph passes, its sliding layers, NoPE layers, recurrent layers, YaRN keys and
second ropes are in its ``load_arch_hparams`` and graph. A llama.cpp update that moves any of
them fails here, naming the row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from posenc.schemes.rope.gguf.arches import ARCHES, LLAMA_CPP_VERSION, Arch
from posenc.schemes.rope.gguf.vision import PROJECTORS
from tests.gguf.llama_cpp_source import Source
from tests.gguf.sdist import unpacked

pytestmark = pytest.mark.llama_cpp
ROWS = pytest.mark.parametrize("row", ARCHES.values(), ids=lambda row: row.name)


@pytest.fixture(scope="module")
def source() -> Source:
    return Source(unpacked("vendor/llama.cpp/src"))


def _loader(source: Source, row: Arch) -> str:
    """The text of the row's load_arch_hparams and load_arch_tensors."""
    text = source.text(row.source)
    return "\n".join(
        text[start : text.index("\n}\n", start)]
        for start in (m.start() for m in re.finditer(r"::load_arch_(hparams|tensors)\(", text))
    )


def _graph(source: Source, row: Arch) -> str:
    """The text of the row's graph file less its loader functions."""
    text = re.sub(r"//[^\n]*", "", source.text(row.graph or row.source))
    for match in reversed(list(re.finditer(r"\n\w[^\n]*::load_arch_(hparams|tensors)\(", text))):
        end = text.index("\n}\n", match.start()) + 3
        text = text[: match.start()] + text[end:]
    return text


def test_the_sources_version_is_the_tables() -> None:
    changelog = unpacked("CHANGELOG.md").read_text()
    release = changelog[changelog.index("## [0.3.36]") :]
    release = release[: release.index("\n## ", 1)]
    assert f"llama.cpp@{LLAMA_CPP_VERSION[:9]}" in release


def test_every_architecture_llama_cpp_ropes_has_a_row(source: Source) -> None:
    assert set(ARCHES) == source.roped, (
        f"no row: {sorted(source.roped - set(ARCHES))}; "
        f"not roped: {sorted(set(ARCHES) - source.roped)}"
    )


@ROWS
def test_each_rows_type_and_files_are_llama_cpps(source: Source, row: Arch) -> None:
    enum = source.names[row.name]
    expected = source.rope_types[enum]
    if expected == "depends":
        assert row.sections in ("optional", "any") or row.variant is not None, row.name
    else:
        assert expected == row.rope_type, f"{row.name}: llama.cpp says {expected}"
    cls = source.classes[enum]
    assert row.source == source.hparams_file(cls), row.name
    assert (row.graph or row.source) == source.graph_file(cls), row.name


@ROWS
def test_each_rows_factor_tensors_are_the_ones_llama_cpp_creates_and_passes(
    source: Source, row: Arch
) -> None:
    loader, graph = _loader(source, row), _graph(source, row)
    creates = ("LLM_TENSOR_ROPE_FREQS" in loader, "LLM_TENSOR_ROPE_FACTORS_LONG" in loader)
    wanted = {
        "none": (False, False),
        "freqs": (True, False),
        "long_short": (False, True),
        "by_scaling": (True, True),
    }[row.factors]
    assert creates == wanted, row.name
    if row.factors == "none":
        return
    passes = re.search(r"get_rope_factors|rope_freqs\s*[,;)]", graph) is not None
    assert passes == (row.factor_layers != "none"), row.name
    full_only = re.search(
        r"is_swa\s*\?\s*nullptr|!hparams\.is_swa\(il\)\)\s*\{[^}]*rope_freqs", graph
    )
    assert (full_only is not None) == (row.factor_layers == "full"), row.name
    width = re.search(r"ROPE_(?:FREQS|FACTORS_LONG)[^\n]*\{\s*(\w+)\s*/\s*2\s*\}", loader)
    assert width is not None, row.name
    length = {"n_embd_head": "head", "n_embd_head_k": "head", "n_embd_head_qk_rope": "n_rot"}
    assert length.get(width.group(1), width.group(1)) == row.factor_length, row.name


@ROWS
def test_each_rows_sliding_layers_are_its_load_arch_hparams(source: Source, row: Arch) -> None:
    loader, graph = _loader(source, row), _graph(source, row)
    slides = "load_swa_pattern" in loader or "ATTENTION_SLIDING_WINDOW_PATTERN" in loader
    assert slides == (row.swa is not None), row.name
    if row.swa is None:
        return
    swa = row.swa
    pattern = re.search(r"load_swa_pattern\(ml,\s*(\d+)(?:,\s*(?:/\*[^*]*\*/)?\s*(true))?", loader)
    if swa.pattern is None:
        assert pattern is None, row.name
    else:
        assert pattern is not None, row.name
        assert (int(pattern.group(1)), pattern.group(2) == "true") == (swa.pattern, swa.dense_first)
    copies = re.search(r"rope_freq_base_train_swa\s*=\s*hparams\.rope_freq_base_train;", loader)
    reads = re.search(r"LLM_KV_ROPE_FREQ_BASE_SWA,\s*hparams\.rope_freq_base_train_swa(,?)", loader)
    base = "key" if reads and not reads.group(1) else ("key_or_" if reads else "")
    base += ("base" if copies else "10000") if base != "key" else ""
    assert base == swa.base, row.name
    scale = re.search(r"rope_freq_scale_train_swa\s*=\s*hparams\.rope_freq_scale_train;", loader)
    assert (scale is not None) == (swa.scale == "full"), row.name
    when = "always"
    if re.search(r"n_swa\s*>\s*0", loader):
        when = "window"
    if "n_swa == 0" in loader:
        when = "unless_zero_window"
    layers = re.search(r"n_layer\(\)\s*==\s*(\d+)\)\s*\{[^\n]*\n[^\n]*swa_type", loader)
    if layers:
        when = "layers"
        assert int(layers.group(1)) == swa.when_layers, row.name
    assert when == swa.when, row.name
    own_base = re.search(r"get_rope_freq_base|rope_freq_base_train_swa", graph) is not None
    assert own_base == (row.sliding.base == "swa"), row.name
    own_scale = re.search(r"get_rope_freq_scale|rope_freq_scale_train_swa", graph) is not None
    assert own_scale == (row.sliding.scale == "swa"), row.name


@ROWS
def test_each_rows_layers_without_rope_are_its_sources(source: Source, row: Arch) -> None:
    loader, graph = _loader(source, row), _graph(source, row)
    guards = source.guards(graph)
    enum = source.names[row.name]
    # a rope call the graph makes for this architecture (BERT's are for Nomic's and Jina's)
    calls = any(
        "LLM_ARCH_" not in " ".join(g) or re.search(rf"LLM_ARCH_{enum}\b", " ".join(g))
        for g in guards
    )
    assert calls == row.rope_call, row.name
    assert ("n_no_rope_layer_step" in loader + graph) == (row.nope_step > 0), row.name
    assert ("il % hparams.n_no_rope_layer_step" in graph) == row.nope_first, row.name
    steps_all = "n_no_rope_layer_step = hparams.n_layer()" in loader
    assert steps_all == (row.nope_without_swa != "keep"), row.name
    assert ("std::fill(hparams.rope_pattern" in loader) == (row.rope_pattern == "finetuned")
    assert ("LLM_KV_ATTENTION_ROPE_PATTERN" in loader) == (row.rope_pattern == "key"), row.name
    interval = "LLM_KV_ATTENTION_RECURRENT_LAYERS" in loader
    assert interval == (row.recurrent == "interval"), row.name
    if interval:
        default = re.search(r"full_attn_interval\s*=\s*(\d+);", loader)
        assert default is not None and int(default.group(1)) == row.recurrent_interval
    by_heads = re.search(r"is_recr_impl\[\w+\]\s*=\s*hparams\.n_head_kv\(", loader) is not None
    assert by_heads == (row.recurrent == "kv_heads"), row.name
    sliding_only = any(re.search(r"\bis_swa\b|is_swa\(il\)", " ".join(g)) for g in guards)
    negated = any(c.startswith("!") and "is_swa" in c for g in guards for c in g)
    assert (sliding_only and not negated) == (row.rope_on != "all"), row.name
    either = " ".join(c for g in guards for c in g)
    assert ("LLAMA_SWA_TYPE_NONE" in either) == (row.rope_on == "sliding_or_no_swa"), row.name
    lead = re.search(r"is_swa[^!]*n_layer_dense_lead", either) is not None
    assert lead == (row.rope_on == "sliding_or_dense_lead"), row.name
    fixed = re.search(r"n_layer_kv_from_start\s*=\s*(\d+);", loader)
    keyed = "n_layer_kv_from_start = hparams.n_layer_all -" in loader
    kv_shared = "fixed" if fixed else ("key" if keyed else "none")
    assert kv_shared == row.kv_shared, row.name
    if fixed:
        assert int(fixed.group(1)) == row.kv_from_start, row.name
    assert ("has_kv(il)" in graph) == (row.kv_shared != "none"), row.name


@ROWS
def test_each_rows_scalars_are_read_as_llama_cpp_reads_them(source: Source, row: Arch) -> None:
    loader = _loader(source, row)
    yarn = "none"
    if "LLM_KV_ROPE_SCALING_YARN_EXT_FACTOR" in loader:
        yarn = "grok"
    elif "LLM_KV_ROPE_SCALING_YARN_BETA_FAST" in loader:
        yarn = "mistral3"
    assert yarn == row.yarn_keys, row.name
    assert ("rope_yarn_log_mul /= 0.1f" in loader) == row.log_mul_divided, row.name
    context = source.text("llama-context.cpp")
    special = re.findall(r"model\.arch == LLM_ARCH_(\w+) && mscale_all_dims", context)
    assert (source.names[row.name] in special) == row.mscale_is_log_mul, row.name
    checked = re.search(
        r"if \((arch == LLM_ARCH_\w+(?: \|\| )?)+\) \{\s*\n\s*if \(hparams\.n_rot_full",
        source.text("llama-model.cpp"),
    )
    assert checked is not None
    head = re.findall(r"LLM_ARCH_(\w+)", checked.group(0))
    assert (source.names[row.name] in head) == row.n_rot_is_head, row.name
    assert ("n_rot_full = hparams.n_rot_full / 2" in loader) == row.n_rot_full_halved, row.name
    assert ("rope_scaling_alpha" in loader) == row.base_alpha, row.name
    assert ("LLM_KV_NUM_LOOPS" in loader) == row.loops, row.name


@ROWS
def test_each_rows_sections_are_read_as_llama_cpp_reads_them(source: Source, row: Arch) -> None:
    loader, graph = _loader(source, row), _graph(source, row)
    reads = "LLM_KV_ROPE_DIMENSION_SECTIONS" in loader
    multi = "ggml_rope_multi" in graph
    assert reads == (row.sections != "none") or (reads and not multi), row.name
    required = re.search(r"ROPE_DIMENSION_SECTIONS,\s*hparams\.rope_sections,\s*4,\s*true", loader)
    # PaddleOCR reads them as optional but its graph always calls ggml_rope_multi with them.
    always = multi and "use_mrope" not in graph and "GGML_ROPE_TYPE_MROPE" not in graph
    assert (required is not None or always) == (row.sections == "required"), row.name
    assert ("s[0] || s[1] || s[2] || s[3]" in source.text("llama-model.cpp")) == any(
        r.sections == "any" for r in ARCHES.values()
    )


@ROWS
def test_what_each_rows_calls_turn_is_its_graphs(source: Source, row: Arch) -> None:
    graph = _graph(source, row)
    if "q_pe" in row.attention:
        assert re.search(r"q_pe\s*=\s*ggml_rope", graph), row.name
    if row.attention[0] == "q" and row.rope_call:
        assert re.search(r"(Qcur|\bq)\s*=\s*(ggml_rope|build_rope)", graph), row.name
    named = re.search(r"(?:indexer_q|\biq)\s*=\s*(ggml_rope\w*)\(([^;]*)\);", graph)
    labelled = re.search(
        r"(\w+)\s*=\s*(ggml_rope\w*)\(([^;]*)\);(?:\s*\n[^\n]*){0,2}?\s*cb\(\1,\s*\"(?:indexer_q|lid_q_rope)\"",
        graph,
    )  # fmt: skip
    unstated = any("indexer_q" in u.applies_to for u in row.unstated)
    assert (named is not None or labelled is not None) == (bool(row.extras) or unstated), row.name
    for extra in row.extras:
        function, arguments = named.group(1, 2) if named else labelled.group(2, 3)  # type: ignore[union-attr]
        mode = [a.strip() for a in arguments.split(",")][6 if function == "ggml_rope_multi" else 5]
        expected = {"LLAMA_ROPE_TYPE_NEOX": "neox", "LLAMA_ROPE_TYPE_NORM": "norm"}.get(mode)
        assert expected == extra.form.mode, row.name
    mtp = "LLM_GRAPH_TYPE_DECODER_MTP" in source.build_arch_graph(
        source.classes[source.names[row.name]]
    )
    assert mtp == (row.mtp == "draft"), row.name
    assert ("il < n_layer_nextn" in graph) == row.layers_are_nextn, row.name
    assert ("ggml_rope_ext_back" in graph) == bool(row.unstated), row.name
    assert (re.search(r"ggml_rope\(", graph) is not None) == (row.full.base == "10000")
    singled = re.search(rf"LLM_ARCH_{source.names[row.name]}\b", graph) is not None
    singled = singled and "n_embd / hparams.n_head()" in graph
    assert singled == (row.full.dims == "head"), row.name
    per_layer = re.search(r"hparams\.n_rot\(il\)|n_rot_swa", graph) is not None
    assert per_layer == ("layer" in (row.full.dims, row.sliding.dims)), row.name


def test_glm_5_2s_default_indexer_types_are_its_constant(source: Source) -> None:
    text = source.text(ARCHES["glm-dsa"].source)
    constant = text[text.index("GLM_5_2_DEFAULT_INDEXER_TYPES = {") + 33 :]
    flags = tuple(int(v) for v in re.findall(r"\d+", constant[: constant.index("};")]))
    row = ARCHES["glm-dsa"]
    assert flags[: len(row.typed_default)] == row.typed_default and not any(
        flags[len(row.typed_default) :]
    )
    threshold = re.search(r"n_ctx_train < (\d+);", text)
    assert threshold is not None and int(threshold.group(1)) == row.typed_from_context


@pytest.fixture(scope="module")
def mtmd() -> Path:
    return unpacked("vendor/llama.cpp/tools/mtmd")


def _graph_class(clip: str, projector: str) -> str:
    """The clip graph class clip.cpp builds for a projector type (its enum's case)."""
    cases = re.finditer(r"((?:\s*case PROJECTOR_TYPE_\w+:)+)\s*\{?\s*builder = std::make_unique<"
                        r"(clip_graph_\w+)>", clip)  # fmt: skip
    for match in cases:
        if f"PROJECTOR_TYPE_{projector}:" in match.group(1):
            return match.group(2)
    raise LookupError(projector)


def test_every_projector_whose_graph_turns_a_rope_has_a_row(mtmd: Path) -> None:
    names = dict(re.findall(r'\{ PROJECTOR_TYPE_(\w+),\s*"([^"]+)"\s*\}',
                            (mtmd / "clip-impl.h").read_text()))  # fmt: skip
    clip = (mtmd / "clip.cpp").read_text()
    for enum, name in names.items():
        try:
            cls = _graph_class(clip, enum)
        except LookupError:
            continue  # a projector clip.cpp builds no graph for
        (path,) = [p for p in (mtmd / "models").glob("*.cpp")
                   if f"{cls}::build" in p.read_text()]  # fmt: skip
        turns = re.search(r"ggml_rope|build_rope_2d", path.read_text()) is not None
        row = PROJECTORS.get(name)
        if turns:
            assert row is not None and row.kind != "none", f"{name}: its graph turns a rope"
        if row is not None:
            assert row.source == f"tools/mtmd/models/{path.name}", name
            assert (row.kind != "none") == turns, name


@pytest.mark.parametrize("name", PROJECTORS)
def test_each_projectors_rope_is_its_graphs(mtmd: Path, name: str) -> None:
    row = PROJECTORS[name]
    graph = (mtmd.parents[1] / row.source).read_text()
    if row.kind == "vision":
        found = re.findall(r"ggml_rope_multi\(([^;]*)\);", re.sub(r"\s+", " ", graph))
        # the same call on q and k: ctx, x, positions, factors, n_dims, sections, mode,
        # n_ctx_orig, base, scale, ext, attn, beta_fast, beta_slow
        (rest,) = {tuple(a.strip() for a in call.split(","))[2:] for call in found}
        arguments = ["ctx0", "x", *rest]
        assert (
            arguments[4].replace(" ", "") == "d_head/2" and arguments[6] == "GGML_ROPE_TYPE_VISION"
        )
        assert (arguments[7] == "0") == row.plain and (arguments[12] == "0.0f") == row.plain
        sections = re.search(r"int \w*sections\[4\] = \{([^}]*)\}", graph)
        assert sections is not None
        half = sections.group(1).replace(" ", "") == "d_head/4,d_head/4,0,0"
        assert half == (row.sections == "half"), name
    if row.kind == "2d":
        call = re.search(r"build_rope_2d\(ctx0, cur, (pos_\w), (pos_\w), [^,]+, (true|false)\)",
                         graph)  # fmt: skip
        assert call is not None
        assert ("row" if call.group(1) == "pos_h" else "column") == row.first, name
        assert (call.group(3) == "true") == row.odd, name


def test_each_projectors_base_is_the_one_its_graph_passes(mtmd: Path) -> None:
    clip = (mtmd / "clip.cpp").read_text()
    for name, row in PROJECTORS.items():
        if row.kind not in ("vision", "2d"):
            continue
        graph = (mtmd.parents[1] / row.source).read_text()
        if "hparams.rope_theta" in graph:
            enum = next(e for e, n in re.findall(r'\{ PROJECTOR_TYPE_(\w+),\s*"([^"]+)"\s*\}',
                        (mtmd / "clip-impl.h").read_text()) if n == name)  # fmt: skip
            case = clip[
                clip.index(f"case PROJECTOR_TYPE_{enum}:", clip.index("get_u32(KEY_PATCH_SIZE")) :
            ]
            theta = re.search(
                r"rope_theta\s*(?:<=\s*0\.0f\)\s*\{\s*hparams\.rope_theta\s*)?=\s*([\d.]+)f", case
            )
            assert theta is not None and float(theta.group(1)) == row.base, name
        else:
            assert re.search(r"32768, 10000[,.]|rope_base", graph) and row.base == 10000.0, name
