// An ONNX Runtime GenAI model's ropes, read by the onnx operation of the scheme that offers one
// (`/v1/schemes` says which) from the model's graph and a few rows of each cache: the page sends
// the graph, then, while the service answers 422 external-data-needed, exactly the byte ranges it
// names, sliced from the chosen data file (File.slice) — never the weights. Beside the model's
// config.json (pasted, or chosen with the rest), the verdict: whether each cache is the model's
// rope for the layers and sequence lengths that read it, and each way it is not.
import { type Api, ApiError, type OnnxAnswer, type Scheme } from "./api";
import { ranges } from "./model";
import { Slot, writeFindings } from "./views";

type Rope = OnnxAnswer["ropes"][number];
type Needed = { tensor: string; location: string; offset: number; length: number };

// The service's problem type for ranges of external data it needs.
const EXTERNAL_DATA_NEEDED = "urn:posenc:problem:external-data-needed";
// A config.json is a few KB: a larger .json is not the model's config.
const MAX_CONFIG = 1 << 20;
// The most a round trip asks twice: every range is named at once.
const ROUNDS = 2;

/** The ranges a refusal names, if it is the service asking for external data. */
export function rangesAskedFor(error: unknown): Needed[] | null {
  if (!(error instanceof ApiError) || error.problem.type !== EXTERNAL_DATA_NEEDED) return null;
  const asked = error.problem.needed;
  return Array.isArray(asked) ? asked : null;
}

/** The chosen files sorted by role: the graph, genai_config.json, a config.json, the rest as the
 * data files a graph's external data names (by their file name). */
export interface Chosen {
  model: File | null;
  genai: File | null;
  config: File | null;
  data: Map<string, File>;
}

export function sortFiles(files: readonly File[]): Chosen {
  const chosen: Chosen = { model: null, genai: null, config: null, data: new Map() };
  for (const file of files) {
    if (/\.onnx$/i.test(file.name)) chosen.model = file;
    else if (file.name === "genai_config.json") chosen.genai = file;
    else if (/\.json$/i.test(file.name) && file.size <= MAX_CONFIG) chosen.config = file;
    else chosen.data.set(file.name, file);
  }
  return chosen;
}

function value(v: unknown): string {
  if (Array.isArray(v)) return v.length > 6 ? `${v.length} numbers` : v.join(",");
  if (typeof v === "object" && v !== null) return Object.entries(v).map(([k, w]) => `${k}=${value(w)}`).join(" ");
  return String(v);
}

const fmt = (v: number) => (Number.isInteger(v) ? String(v) : v.toPrecision(3));

export class OnnxPanel {
  readonly section: HTMLElement;
  private readonly slot: Slot;
  private readonly input: HTMLInputElement;
  private readonly config: HTMLTextAreaElement;
  private chosen: Chosen = { model: null, genai: null, config: null, data: new Map() };
  private reading = new AbortController();

  constructor(private readonly api: Api, private readonly scheme: Scheme) {
    this.section = Object.assign(document.createElement("section"), { id: "view-onnx", className: "view" });
    this.section.setAttribute("aria-labelledby", "view-onnx-title");
    const title = Object.assign(document.createElement("h2"), { id: "view-onnx-title", textContent: OnnxPanel.title });
    const blurb = Object.assign(document.createElement("p"), {
      textContent: "Choose or drop the GenAI builder's files together — model.onnx, its model.onnx.data, genai_config.json, and the model's config.json if you have it: the page sends the graph, then only the rows of the rope caches the service asks for, sliced from the data file, never the weights. The service says what rope each cache holds and, beside the config, whether it is the model's.",
    });
    const zone = Object.assign(document.createElement("div"), { className: "dropzone", id: "onnx-drop" });
    this.input = Object.assign(document.createElement("input"), { type: "file", id: "onnx-files", multiple: true, accept: ".onnx,.data,.json" });
    this.config = Object.assign(document.createElement("textarea"), { id: "onnx-config", rows: 5, spellcheck: false, placeholder: '{"model_type": "phi3", "rope_scaling": {"type": "longrope", …}, …}' });
    const send = Object.assign(document.createElement("button"), { type: "button", id: "onnx-send", textContent: "check the model against this config" });
    zone.append(
      Object.assign(document.createElement("label"), { htmlFor: "onnx-files", textContent: "The model's files (drop them here, or choose them):" }), this.input,
      Object.assign(document.createElement("label"), { htmlFor: "onnx-config", textContent: "The model's config.json (optional; paste it, or choose it with the files):" }), this.config, send,
    );
    this.input.addEventListener("change", () => void this.choose([...(this.input.files ?? [])]));
    send.addEventListener("click", () => void this.show());
    zone.addEventListener("dragover", (event) => { if (event.dataTransfer?.types.includes("Files")) { event.preventDefault(); zone.classList.add("over"); } });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (event) => {
      zone.classList.remove("over");
      const dropped = [...(event.dataTransfer?.files ?? [])];
      if (!dropped.length) return;
      event.preventDefault();
      void this.choose(dropped);
    });
    this.section.append(title, blurb, zone, Object.assign(document.createElement("div"), { className: "api" }));
    this.slot = new Slot(this.section);
    this.slot.done("waiting");
  }

  static readonly title = "An ONNX Runtime GenAI model's ropes";

  /** New files join the ones chosen before (a data file chosen after its graph, say). */
  private async choose(files: File[]): Promise<void> {
    const added = sortFiles(files);
    this.chosen = {
      model: added.model ?? this.chosen.model,
      genai: added.genai ?? this.chosen.genai,
      config: added.config ?? this.chosen.config,
      data: new Map([...this.chosen.data, ...added.data]),
    };
    if (added.config) this.config.value = await added.config.text();
    await this.show();
  }

  private begin(): AbortSignal {
    this.reading.abort();
    this.reading = new AbortController();
    this.slot.reset();
    for (const key of ["requests", "external", "conforms", "findings", "layers"]) delete this.section.dataset[key];
    return this.reading.signal;
  }

  /** The service's answer for the chosen model, sending the ranges it asks for. */
  private async show(): Promise<void> {
    const signal = this.begin();
    const { model, genai, data } = this.chosen;
    if (!model) {
      this.slot.fail(new ApiError("Choose or drop the model's .onnx file first.", 0));
      return;
    }
    const config = this.config.value.trim() ? this.config.value : null;
    this.slot.replaceUrls();
    this.slot.command(`posenc model ${model.name}${config === null ? "" : " --config config.json"}`);
    let external: [string, Blob][] = [];
    let sent = 0;
    for (let requests = 1; requests <= ROUNDS; requests++) {
      const body = new FormData();
      body.append("model", model, model.name);
      if (genai) body.append("genai_config", genai, genai.name);
      if (config !== null) body.append("config", new Blob([config], { type: "application/json" }), "config.json");
      for (const [name, part] of external) body.append("external", part, name);
      let answer: OnnxAnswer;
      try {
        answer = await this.api.onnx(this.scheme.name, body, signal);
      } catch (error) {
        if (signal.aborted) return;
        const asked = rangesAskedFor(error);
        const missing = asked?.find((need) => !data.has(need.location));
        if (asked && !missing && requests < ROUNDS) {
          external = asked.map((need) => [`${need.location}@${need.offset}`, (data.get(need.location) as File).slice(need.offset, need.offset + need.length)]);
          sent = asked.reduce((total, need) => total + need.length, 0);
          continue;
        }
        this.slot.fail(missing ? new ApiError(`The caches are in ${missing.location}: choose it with the model.`, 422) : error);
        return;
      }
      if (signal.aborted) return;
      this.section.dataset.requests = String(requests);
      this.section.dataset.external = String(sent);
      this.render(answer, model, sent, requests);
      this.slot.done();
      return;
    }
  }

  private render(answer: OnnxAnswer, model: File, sent: number, requests: number): void {
    const read = this.slot.block("p");
    read.className = "report sent";
    read.textContent = `Read the graph of ${model.name} (${model.size.toLocaleString("en")} bytes) and ${sent.toLocaleString("en")} bytes of its external data, in ${requests} request${requests === 1 ? "" : "s"}.`;
    if (answer.conforms !== undefined) {
      const verdict = this.slot.block("p");
      const findings = answer.findings ?? [];
      verdict.className = `report verdict ${answer.conforms ? "pass" : "fail"}`;
      verdict.textContent = answer.conforms
        ? "Conforms: every cache is the model's rope for the layers and lengths that read it."
        : `Does not conform: ${findings.length} finding${findings.length === 1 ? "" : "s"}.`;
      this.section.dataset.conforms = String(answer.conforms);
      this.section.dataset.findings = findings.map((f) => f.kind).join(" ");
      writeFindings(this.slot.block("ul"), findings.map((f) => ({
        name: f.kind,
        summary: `${f.detail} (layers ${ranges(f.layers)})`,
        evidence: f.evidence as Record<string, unknown>,
      })), answer.conforms, value, (kind) => kind.replaceAll("_", " "));
    }
    const summary = this.slot.block("dl");
    summary.className = "report model";
    for (const [term, v] of [
      ["producer", `${answer.producer.name} ${answer.producer.version}`],
      ["layers", answer.num_hidden_layers],
      ["context_length", answer.context_length],
      ["head_size", answer.head_size],
    ] as [string, unknown][]) {
      summary.append(Object.assign(document.createElement("dt"), { textContent: term }), Object.assign(document.createElement("dd"), { textContent: value(v ?? "—") }));
    }
    const nope = this.slot.block("p");
    nope.className = "report nope";
    nope.dataset.layers = answer.nope_layers.join(",");
    nope.textContent = answer.nope_layers.length
      ? `NoPE layers (attention without a rope): ${ranges(answer.nope_layers)}`
      : "NoPE layers: none — every layer's attention turns q and k.";
    this.section.dataset.layers = String(answer.num_hidden_layers ?? "");
    answer.ropes.forEach((rope, k) => this.rope(answer, rope, k));
  }

  private rope(answer: OnnxAnswer, rope: Rope, k: number): void {
    const article = this.slot.block("article");
    article.classList.add("rope");
    article.dataset.layers = rope.layers.join(",");
    article.dataset.recipe = String(rope.recipe);
    const pairs = rope.interleaved ? "interleaved pairs (2i, 2i+1)" : "pairs (i, i + d/2)";
    const heading = Object.assign(document.createElement("h3"), { textContent: `Rope ${k + 1} of ${answer.ropes.length}: ${rope.op}` });
    const layers = Object.assign(document.createElement("p"), { className: "layers", textContent: `Read by layers ${ranges(rope.layers)}, turning ${rope.rotary_dim} dimensions as ${pairs}.` });
    const cos = rope.caches.cos;
    const cache = Object.assign(document.createElement("p"), {
      className: "cache",
      textContent: `${cos.tensor} and ${rope.caches.sin.tensor}: rows ${cos.rows[0]}–${cos.rows[1] - 1} (${rope.cache_length} positions) of ${rope.dtype}, ${cos.location ? `in ${cos.location}` : "in the graph"}${rope.selected_by.length ? `, when ${rope.selected_by.map((c) => `${c.holds ? "" : "not "}${c.test}`).join(" and ")}` : ""}.`,
    });
    const params = Object.assign(document.createElement("p"), { className: "params" });
    params.append(rope.params
      ? Object.assign(document.createElement("code"), { textContent: Object.entries(rope.params as Record<string, unknown>).map(([n, v]) => `${n}=${value(v)}`).join(" ") })
      : "The rows are not one rope's cos and sin.");
    const noise = rope.max_abs_difference;
    const measured = Object.assign(document.createElement("p"), {
      className: "measured",
      textContent: `Attention factor ${fmt(rope.attention_factor)}; ${rope.recipe ? `the ${rope.recipe} float32 recipe's rows, to the ulp` : "no float32 recipe's rows"}${noise ? `; ${noise.exact.toPrecision(2)} from exact at positions ${noise.positions[0]}–${noise.positions[1]}` : ""} (measured on ${rope.positions.length} rows).`,
    });
    article.append(heading, layers, cache, params, measured);
  }
}
