// A GGUF file's ropes, as llama.cpp applies them layer by layer, read by the gguf operation of the
// scheme that offers one (`/v1/schemes` says which) from the file's first bytes only: the page
// slices the file (File.slice) and never reads the weights, so a file of many GB sends a few MB at
// most. Each rope says what it turns (q and k, DeepSeek's q_pe and k_pe, an indexer's beside them in
// the same layers); the ropes llama.cpp turns that no call states, the multi-token-prediction
// layers it never runs and its source's notes are shown beside them. Beside the model's config.json
// (pasted, or dropped here), the service's verdict: whether the file makes llama.cpp apply the
// model's rope at every layer, and each way it does not.
import { type Api, ApiError, type GgufAnswer, type Scheme } from "./api";
import { acceptDrops, ranges } from "./model";
import { Slot, writeFindings } from "./views";

type Rope = GgufAnswer["ropes"][number];
type Unstated = GgufAnswer["unstated"][number];

// The first slice: a header with a small vocabulary and the rope tensors fit; a larger one gets
// a 422 naming the bytes it needs.
const FIRST_SLICE = 1 << 20;
// A config.json is a few KB: a larger dropped file is taken for a GGUF file, not read as text.
const MAX_CONFIG = 1 << 20;
/** The bytes a refusal asks for, if it is the service saying the prefix stopped too soon: a 422
 * whose needed_bytes says how far to read. */
export function bytesAskedFor(error: unknown): number | null {
  if (!(error instanceof ApiError) || error.status !== 422) return null;
  const asked = error.problem.needed_bytes;
  return typeof asked === "number" && Number.isInteger(asked) ? asked : null;
}

/** The next prefix to send after `sent` bytes drew a request for `asked`: at least that many, and at
 * least twice as many as before — the header reader names only the next item it could not read, so
 * a vocabulary past the first slice would otherwise take a request per token — never past the
 * file. Null when nothing more can be sent. */
export function nextSlice(sent: number, asked: number, size: number): number | null {
  if (asked <= sent || sent >= size) return null;
  return Math.min(size, Math.max(asked, 2 * sent));
}

const isMagic = async (file: File) => new TextDecoder("latin1").decode(await file.slice(0, 4).arrayBuffer()) === "GGUF";

function value(v: unknown): string {
  if (Array.isArray(v)) return v.length > 6 ? `${v.length} numbers` : v.join(",");
  if (typeof v === "object" && v !== null) return Object.entries(v).map(([k, w]) => `${k}=${value(w)}`).join(" ");
  return String(v);
}

/** A rope's parameters on one line, as `posenc model` prints them: a factor tensor by its name. */
function paramsLine(rope: Rope): string {
  const ggml = rope.ggml as Record<string, unknown>;
  return Object.entries(rope.params as Record<string, unknown>)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${k}=${Array.isArray(v) && typeof ggml[k] === "string" ? ggml[k] : value(v)}`)
    .join(" ");
}

const turned = (appliesTo: readonly string[]) => appliesTo.join(", ");

/** The other ropes turning some of rope `k`'s layers too (an indexer's beside the attention's). */
function beside(ropes: readonly Rope[], k: number): string {
  const own = new Set(ropes[k].layers);
  return ropes.map((rope, j) => ({ j, rope, shared: rope.layers.filter((il) => own.has(il)) }))
    .filter(({ j, shared }) => j !== k && shared.length)
    .map(({ j, rope, shared }) => ` Rope ${j + 1} turns ${turned(rope.applies_to)} in ${shared.length === own.size ? "the same layers" : `layers ${ranges(shared)}`} too.`)
    .join("");
}
const fmt = (v: unknown) => (typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toPrecision(2)) : value(v));

export class GgufPanel {
  readonly section: HTMLElement;
  private readonly slot: Slot;
  private readonly input: HTMLInputElement;
  private readonly config: HTMLTextAreaElement;
  private file: File | null = null;
  private sent = 0; // the prefix of `file` that sufficed: sent again beside a config
  private reading = new AbortController();

  constructor(private readonly api: Api, private readonly scheme: Scheme) {
    this.section = Object.assign(document.createElement("section"), { id: "view-gguf", className: "view" });
    this.section.setAttribute("aria-labelledby", "view-gguf-title");
    const title = Object.assign(document.createElement("h2"), { id: "view-gguf-title", textContent: GgufPanel.title });
    const blurb = Object.assign(document.createElement("p"), {
      textContent: "Choose or drop a GGUF file of any size: the page sends only its first bytes (the header and the rope tensors, which the converter writes first), never the weights, and the service says which rope llama.cpp applies at each layer. Paste the model's config.json beside it for the verdict: does the file make llama.cpp apply the model's rope at every layer?",
    });
    const zone = Object.assign(document.createElement("div"), { className: "dropzone", id: "gguf-drop" });
    this.input = Object.assign(document.createElement("input"), { type: "file", id: "gguf-file", accept: ".gguf" });
    this.config = Object.assign(document.createElement("textarea"), { id: "gguf-config", rows: 5, spellcheck: false, placeholder: '{"model_type": "llama", "rope_theta": 500000.0, …}' });
    const send = Object.assign(document.createElement("button"), { type: "button", id: "gguf-send", textContent: "check the file against this config" });
    zone.append(
      Object.assign(document.createElement("label"), { htmlFor: "gguf-file", textContent: "The GGUF file (drop it here, or choose it):" }), this.input,
      Object.assign(document.createElement("label"), { htmlFor: "gguf-config", textContent: "The model's config.json (optional; paste it, or drop it here):" }), this.config, send,
    );
    this.input.addEventListener("change", () => { if (this.input.files?.[0]) void this.choose(this.input.files[0]); });
    send.addEventListener("click", () => {
      if (this.file) void this.show(this.file);
      else this.refuse("Choose or drop the GGUF file first.");
    });
    acceptDrops(zone, (dropped) => void this.dropped(dropped));
    this.section.append(title, blurb, zone, Object.assign(document.createElement("div"), { className: "api" }));
    this.slot = new Slot(this.section);
    this.slot.done("waiting");
  }

  static readonly title = "A GGUF file's ropes, as llama.cpp applies them";

  /** A dropped config.json goes beside the file; anything else is the file. */
  private async dropped(file: File): Promise<void> {
    if (file.size <= MAX_CONFIG && !(await isMagic(file)) && /\.json$/i.test(file.name)) {
      this.config.value = await file.text();
      if (this.file) await this.show(this.file);
      return;
    }
    await this.choose(file);
  }

  private async choose(file: File): Promise<void> {
    this.file = file;
    this.sent = 0;
    await this.show(file);
  }

  private begin(): AbortSignal {
    this.reading.abort();
    this.reading = new AbortController();
    this.slot.reset();
    for (const key of ["sent", "requests", "conforms", "findings", "layers"]) delete this.section.dataset[key];
    return this.reading.signal;
  }

  private refuse(message: string): void {
    this.begin();
    this.slot.fail(new ApiError(message, 0));
  }

  /** The service's answer for the shortest prefix of `file` it reads, sliced as it asks. */
  private async show(file: File): Promise<void> {
    const signal = this.begin();
    const config = this.config.value.trim() ? this.config.value : null;
    let size = this.sent || Math.min(file.size, FIRST_SLICE);
    let requests = 0;
    for (;;) {
      this.slot.replaceUrls();
      this.slot.command(config === null
        ? `head -c ${size} ${file.name} | curl -X POST ${this.api.ggufUrl(this.scheme.name)} -H 'Content-Type: application/octet-stream' --data-binary @-`
        : `curl -X POST ${this.api.ggufUrl(this.scheme.name)} -F gguf=@<(head -c ${size} ${file.name}) -F config=@config.json`);
      let answer: GgufAnswer;
      try {
        const bytes = await file.slice(0, size).arrayBuffer();
        let body: ArrayBuffer | FormData = bytes;
        if (config !== null) {
          body = new FormData();
          body.append("gguf", new Blob([bytes], { type: "application/octet-stream" }), file.name);
          body.append("config", new Blob([config], { type: "application/json" }), "config.json");
        }
        requests++;
        answer = await this.api.gguf(this.scheme.name, body, signal);
      } catch (error) {
        if (signal.aborted) return;
        const next = nextSlice(size, bytesAskedFor(error) ?? 0, file.size);
        if (next !== null) {
          size = next;
          continue;
        }
        this.section.dataset.sent = String(size);
        this.section.dataset.requests = String(requests);
        this.slot.fail(error);
        return;
      }
      if (signal.aborted) return;
      this.sent = size;
      this.section.dataset.sent = String(size);
      this.section.dataset.requests = String(requests);
      this.render(answer, file, size, requests);
      this.slot.done();
      return;
    }
  }

  private render(answer: GgufAnswer, file: File, sent: number, requests: number): void {
    const read = this.slot.block("p");
    read.className = "report sent";
    read.textContent = `Read from the first ${sent.toLocaleString("en")} bytes of ${file.name} (${file.size.toLocaleString("en")} bytes), in ${requests} request${requests === 1 ? "" : "s"}.`;
    if (answer.conforms !== undefined) {
      const verdict = this.slot.block("p");
      const findings = answer.findings ?? [];
      verdict.className = `report verdict ${answer.conforms ? "pass" : "fail"}`;
      verdict.textContent = answer.conforms
        ? `Conforms: llama.cpp applies the model's rope at every layer, for n_ctx ${answer.n_ctx}.`
        : `Does not conform: ${findings.length} finding${findings.length === 1 ? "" : "s"}, for n_ctx ${answer.n_ctx}.`;
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
    const rules = answer.llama_cpp_version;
    for (const [term, v] of [
      ["architecture", answer.architecture],
      ["layers", answer.num_hidden_layers],
      // A vision projector's positions are patches: it has no context (0) to name.
      ...(answer.context_length ? [["context_length", answer.context_length], ["n_ctx", answer.n_ctx]] : []),
      ["head_dim", answer.head_dim],
      ["llama.cpp's rules", `${answer.llama_cpp_rules} at ${rules.commit.slice(0, 9)}`],
      ...(answer.mrope ? [["M-RoPE sections", `${answer.mrope.section.join(", ")}${answer.mrope.interleaved ? " (interleaved)" : ""}`]] : []),
    ] as [string, unknown][]) {
      summary.append(Object.assign(document.createElement("dt"), { textContent: term }), Object.assign(document.createElement("dd"), { textContent: value(v) }));
    }
    const nope = this.slot.block("p");
    nope.className = "report nope";
    nope.dataset.layers = answer.nope_layers.join(",");
    nope.textContent = answer.nope_layers.length
      ? `NoPE layers (no rotary embedding): ${ranges(answer.nope_layers)} (${answer.nope_layers.length} of ${answer.num_hidden_layers})`
      : "NoPE layers: none — every layer rotates.";
    this.section.dataset.layers = String(answer.num_hidden_layers);
    this.mtp(answer);
    this.notes(answer.notes);
    answer.ropes.forEach((rope, k) => this.rope(answer, rope, k));
    answer.unstated.forEach((rope, k) => this.unstated(answer, rope, k));
  }

  /** The layers past num_hidden_layers: multi-token-prediction blocks the decoder never runs. */
  private mtp(answer: GgufAnswer): void {
    const layers = answer.mtp_layers;
    if (!layers.length) return;
    const line = this.slot.block("p");
    line.className = "report mtp";
    line.dataset.layers = layers.join(",");
    line.textContent = `Multi-token-prediction layers: ${ranges(layers)} (${layers.length}, held in the file past its ${answer.num_hidden_layers} decoder layers; llama.cpp's decoder never runs them).`;
  }

  /** What llama.cpp's source says beside its calls. */
  private notes(notes: readonly string[]): void {
    if (!notes.length) return;
    const heading = this.slot.block("h3");
    heading.id = "gguf-notes-title";
    heading.textContent = "llama.cpp's notes on this file";
    const list = this.slot.block("ul");
    list.className = "report notes";
    list.setAttribute("aria-labelledby", heading.id);
    list.append(...notes.map((note) => Object.assign(document.createElement("li"), { textContent: note })));
  }

  /** A rope llama.cpp turns that no ggml_rope_ext call of a token's position states, and why. */
  private unstated(answer: GgufAnswer, rope: Unstated, k: number): void {
    const article = this.slot.block("article");
    article.classList.add("rope", "unstated");
    article.dataset.layers = rope.layers.join(",");
    article.dataset.appliesTo = rope.applies_to.join(" ");
    article.append(
      Object.assign(document.createElement("h3"), { textContent: `Unstated rope ${k + 1} of ${answer.unstated.length}: on ${turned(rope.applies_to)}` }),
      Object.assign(document.createElement("p"), { className: "layers", textContent: `Turned in layers ${ranges(rope.layers)} (${rope.layers.length} of ${answer.num_hidden_layers}) by no ggml_rope_ext call of a token's position: not stated here, nor checked.` }),
      Object.assign(document.createElement("p"), { className: "reason", textContent: rope.reason }),
    );
  }

  private rope(answer: GgufAnswer, rope: Rope, k: number): void {
    const article = this.slot.block("article");
    article.classList.add("rope");
    article.dataset.layers = rope.layers.join(",");
    article.dataset.ropeType = rope.rope_type;
    article.dataset.appliesTo = rope.applies_to.join(" ");
    const heading = Object.assign(document.createElement("h3"), { textContent: `Rope ${k + 1} of ${answer.ropes.length}: ${rope.rope_type} on ${turned(rope.applies_to)}` });
    const layers = Object.assign(document.createElement("p"), { className: "layers", textContent: `Applied by layers ${ranges(rope.layers)} (${rope.layers.length} of ${answer.num_hidden_layers}).${beside(answer.ropes, k)}` });
    const params = Object.assign(document.createElement("p"), { className: "params" });
    params.append(Object.assign(document.createElement("code"), { textContent: paramsLine(rope) }));
    const ggml = rope.ggml as Record<string, unknown>;
    const call = Object.assign(document.createElement("p"), { className: "ggml" });
    call.append("llama.cpp's call: ", Object.assign(document.createElement("code"), {
      textContent: `ggml_rope_ext(${Object.entries(ggml).filter(([, v]) => v !== null).map(([name, v]) => `${name}=${value(v)}`).join(", ")})`,
    }));
    const from = Object.assign(document.createElement("p"), {
      className: "read-from",
      textContent: `Read from ${[...rope.read_from.keys, ...rope.read_from.tensors].join(", ")}.`,
    });
    article.append(heading, layers, params, call, from);
    const noise = rope.max_abs_difference;
    if (noise) {
      const line = Object.assign(document.createElement("p"), {
        className: "noise",
        textContent: `llama.cpp's float32 table near n_ctx (positions ${noise.positions[0]}–${noise.positions.at(-1)}): ${fmt(noise.exact)} from exact, ${fmt(noise.transformers)} from transformers' — recipe noise, reported, not a finding.`,
      });
      article.append(line);
    }
  }
}
