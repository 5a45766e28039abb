// A model's ropes from its config.json: pasted or dropped, sent to the config operation of the
// scheme that offers one (`/v1/schemes` says which), every rope drawn by the page's own rope views
// (wavelengths, rotation) for that rope's parameters. The config travels in the link's fragment,
// deflate-raw compressed and base64url-encoded: it never reaches a server log, and a few KB of
// config stay a short link.
import { type Api, ApiError, type ConfigAnswer, type Query, type Scheme } from "./api";
import { toUrl } from "./controls";
import { type Context, rotation, Slot, type View, wavelengths } from "./views";

type Rope = ConfigAnswer["ropes"][number];

// A config.json is a few KB: a link that inflates past this is refused rather than read (a crafted
// fragment could otherwise inflate without end), and text past it is not put in a link.
const MAX_TEXT = 1 << 20;
const DEFAULT_POSITION = "100";
const MAX_POSITION = 2 ** 31 - 1;
const ROPE_VIEWS: View[] = [wavelengths, rotation];

/** `text` deflated (raw) and base64url-encoded, without padding. */
export async function pack(text: string): Promise<string> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("deflate-raw"));
  const bytes = new Uint8Array(await new Response(stream).arrayBuffer());
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/** The text `pack` was given; throws on anything else, and past MAX_TEXT bytes. */
export async function unpack(code: string): Promise<string> {
  if (!/^[A-Za-z0-9_-]+$/.test(code)) throw new Error("it is not base64url");
  const base64 = code.replaceAll("-", "+").replaceAll("_", "/");
  const binary = atob(base64.padEnd(Math.ceil(base64.length / 4) * 4, "="));
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  const reader = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw")).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > MAX_TEXT) {
      await reader.cancel();
      throw new Error(`it inflates past ${MAX_TEXT} bytes`);
    }
    chunks.push(value);
  }
  const whole = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    whole.set(chunk, at);
    at += chunk.length;
  }
  return new TextDecoder("utf-8", { fatal: true }).decode(whole);
}

/** Layers as runs: `0–4, 6–10, 12`. */
// A zone that takes a dropped file: highlighted while a file is over it, the first file given
// to onFile (the page's two drop zones, a config.json's and a GGUF's).
export function acceptDrops(zone: HTMLElement, onFile: (file: File) => void): void {
  const files = (event: DragEvent) => event.dataTransfer?.types.includes("Files") ?? false;
  zone.addEventListener("dragover", (event) => { if (files(event)) { event.preventDefault(); zone.classList.add("over"); } });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    zone.classList.remove("over");
    const dropped = event.dataTransfer?.files?.[0];
    if (!dropped) return;
    event.preventDefault();
    onFile(dropped);
  });
}

export function ranges(layers: readonly number[]): string {
  const sorted = [...layers].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length;) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    parts.push(j - i >= 2 ? `${sorted[i]}–${sorted[j]}` : sorted.slice(i, j + 1).join(", "));
    i = j + 1;
  }
  return parts.join(", ");
}

const text = (value: unknown): string => (Array.isArray(value) ? value.map(String).join(",") : String(value));

function shown(value: unknown): string {
  if (Array.isArray(value)) return value.length > 6 ? `${value.length} numbers: ${value.slice(0, 4).join(", ")}, …, ${value.at(-1)}` : value.join(", ");
  return value === null || value === undefined ? "—" : String(value);
}

function terms(list: HTMLDListElement, entries: [string, unknown][]): void {
  for (const [term, value] of entries) {
    list.append(Object.assign(document.createElement("dt"), { textContent: term }), Object.assign(document.createElement("dd"), { textContent: shown(value) }));
  }
}

async function drawInto(view: View, ctx: Context, slot: Slot): Promise<void> {
  slot.reset();
  try {
    await view.draw(ctx, slot);
    if (!ctx.signal.aborted) slot.done();
  } catch (error) {
    if (!ctx.signal.aborted) slot.fail(error);
  }
}

export class ModelPanel {
  readonly section: HTMLElement;
  private readonly slot: Slot;
  private readonly textarea: HTMLTextAreaElement;
  private readonly slider: HTMLInputElement;
  private code: string | null = null; // the config of the link, as the fragment holds it
  private position = DEFAULT_POSITION;
  private drawing = new AbortController();
  private moving = new AbortController();
  private ropes: { ctx: Context; rotation: Slot | undefined }[] = [];

  /** `address(push)` writes the page's URL with `fragment()`; `open(href)` shows a page link. */
  constructor(
    private readonly api: Api,
    private readonly scheme: Scheme,
    private readonly address: (push: boolean) => void,
    private readonly open: (href: string) => void,
  ) {
    this.section = Object.assign(document.createElement("section"), { id: "view-config", className: "view" });
    this.section.setAttribute("aria-labelledby", "view-config-title");
    const title = Object.assign(document.createElement("h2"), { id: "view-config-title", textContent: ModelPanel.title });
    const blurb = Object.assign(document.createElement("p"), {
      textContent: "Paste a model's config.json, or drop the file here: the service reads every rope the model applies, layer type by layer type, and the NoPE layers; each rope is drawn with its wavelengths and its rotation. The link holds the config, so it shows the same model.",
    });
    const zone = Object.assign(document.createElement("div"), { className: "dropzone", id: "config-drop" });
    this.textarea = Object.assign(document.createElement("textarea"), { id: "config-json", rows: 6, spellcheck: false, placeholder: '{"model_type": "llama", "head_dim": 128, "rope_theta": 500000.0, …}' });
    const file = Object.assign(document.createElement("input"), { type: "file", id: "config-file", accept: ".json,application/json" });
    const send = Object.assign(document.createElement("button"), { type: "button", id: "config-send", textContent: "show the model's ropes" });
    zone.append(
      Object.assign(document.createElement("label"), { htmlFor: "config-json", textContent: "config.json (paste it, or drop the file here):" }), this.textarea,
      Object.assign(document.createElement("label"), { htmlFor: "config-file", textContent: "or choose the file:" }), file, send,
    );
    send.addEventListener("click", () => void this.submit(this.textarea.value));
    file.addEventListener("change", () => { if (file.files?.[0]) void this.read(file.files[0]); });
    acceptDrops(zone, (dropped) => void this.read(dropped));

    const label = Object.assign(document.createElement("label"), { className: "slider", hidden: true });
    this.slider = Object.assign(document.createElement("input"), { type: "range", id: "config-position", min: "0", max: String(MAX_POSITION), step: "1" });
    const output = document.createElement("output");
    output.setAttribute("aria-live", "polite");
    this.slider.addEventListener("input", () => {
      output.textContent = this.position = this.slider.value;
      this.address(false);
      this.links();
      void this.move();
    });
    label.append(Object.assign(document.createElement("span"), { textContent: "position of every rope below " }), this.slider, output);
    this.section.append(title, blurb, zone, label, Object.assign(document.createElement("div"), { className: "api" }));
    this.slot = new Slot(this.section);
    this.slot.done("waiting");
  }

  static readonly title = "A model's ropes, from its config.json";

  /** The fragment of a link to what is shown: the config and the position, when not the default. */
  fragment(): string {
    if (this.code === null) return "";
    return `#config=${this.code}${this.position === DEFAULT_POSITION ? "" : `&position=${this.position}`}`;
  }

  /** Show what the fragment `hash` says (a link opened, back or forward): only what changed. */
  restore(hash: string): void {
    const given = new URLSearchParams(hash.replace(/^#/, ""));
    const code = given.get("config");
    const asked = given.get("position") ?? "";
    const position = /^\d{1,10}$/.test(asked) && Number(asked) <= MAX_POSITION ? String(Number(asked)) : DEFAULT_POSITION;
    const moved = position !== this.position;
    this.position = position;
    this.syncSlider();
    if (code === this.code) {
      if (moved) void this.move();
      return;
    }
    this.code = code;
    if (code === null) {
      this.begin().abort();
      this.textarea.value = "";
      this.slot.done("waiting");
      return;
    }
    void this.load(code);
  }

  private async load(code: string): Promise<void> {
    const signal = this.begin().signal;
    let config: string;
    try {
      config = await unpack(code);
    } catch (error) {
      if (!signal.aborted) this.slot.fail(new ApiError(`The link's config could not be read (${(error as Error).message}): paste the config.json again.`, 0));
      return;
    }
    if (signal.aborted) return;
    this.textarea.value = config;
    await this.show(config, signal);
  }

  private async read(file: File): Promise<void> {
    if (file.size > MAX_TEXT) {
      this.begin();
      this.slot.fail(new ApiError(`${file.name} holds ${file.size} bytes: a config.json is a few KB, and a link holds up to ${MAX_TEXT}.`, 0));
      return;
    }
    this.textarea.value = await file.text();
    await this.submit(this.textarea.value);
  }

  private async submit(config: string): Promise<void> {
    const signal = this.begin().signal;
    if (!config.trim()) {
      this.slot.fail(new ApiError("Paste a model's config.json first, or drop the file here.", 0));
      return;
    }
    if (new Blob([config]).size > MAX_TEXT) {
      this.slot.fail(new ApiError(`The config holds over ${MAX_TEXT} bytes: a config.json is a few KB, and a link holds up to ${MAX_TEXT}.`, 0));
      return;
    }
    const code = await pack(config);
    if (signal.aborted) return;
    if (code !== this.code) {
      this.code = code;
      this.address(true);
    }
    await this.show(config, signal);
  }

  /** Abandon what is drawing, and empty the view for what comes next. */
  private begin(): AbortController {
    this.drawing.abort();
    this.moving.abort();
    this.drawing = new AbortController();
    this.ropes = [];
    this.slot.reset();
    delete this.section.dataset.field;
    (this.slider.parentElement as HTMLElement).hidden = true;
    return this.drawing;
  }

  private async show(config: string, signal: AbortSignal): Promise<void> {
    this.slot.command(`curl -X POST ${this.api.configUrl(this.scheme.name)} -H 'Content-Type: application/json' -d @config.json`);
    try {
      const answer = await this.api.config(this.scheme.name, config, signal);
      if (signal.aborted) return;
      const drawn = this.render(answer, signal);
      await Promise.all(drawn);
      if (!signal.aborted) this.slot.done();
    } catch (error) {
      if (signal.aborted) return;
      this.slot.fail(error);
      // The service names the refused field (["body", "<field>", …]): say it where it shows.
      const loc = error instanceof ApiError ? error.problem.errors?.[0]?.loc ?? [] : [];
      const field = loc.slice(loc[0] === "body" ? 1 : 0).join(".");
      if (field && field !== "body") {
        this.section.dataset.field = field;
        const named = this.slot.block("p");
        named.append("The field refused: ", Object.assign(document.createElement("code"), { textContent: field }));
      }
    }
  }

  private render(answer: ConfigAnswer, signal: AbortSignal): Promise<void>[] {
    const summary = this.slot.block("dl");
    summary.className = "report model";
    terms(summary, [
      ["model type", answer.model_type],
      ...(answer.text_config ? [["text model read from", answer.text_config] as [string, unknown]] : []),
      ["layers", answer.num_hidden_layers],
      ["head_dim", answer.head_dim],
      ["max_position_embeddings", answer.max_position_embeddings],
    ]);
    const nope = this.slot.block("p");
    nope.className = "report nope";
    nope.dataset.layers = answer.nope_layers.join(",");
    nope.textContent = answer.nope_layers.length
      ? `NoPE layers (no rotary embedding): ${ranges(answer.nope_layers)} (${answer.nope_layers.length} of ${answer.num_hidden_layers ?? "?"})`
      : "NoPE layers: none — every layer rotates.";
    const maxPosition = Math.max(Number(this.position), Math.min((answer.max_position_embeddings ?? 4096) - 1, MAX_POSITION));
    this.slider.max = String(maxPosition);
    this.syncSlider();
    const drawn = answer.ropes.flatMap((rope, k) => this.rope(answer, rope, k, signal));
    (this.slider.parentElement as HTMLElement).hidden = !this.ropes.some((r) => r.rotation);
    this.links();
    return drawn;
  }

  private rope(answer: ConfigAnswer, rope: Rope, k: number, signal: AbortSignal): Promise<void>[] {
    const params = this.query(rope.params as Record<string, unknown>);
    const article = this.slot.block("article");
    article.classList.add("rope");
    article.dataset.layerTypes = rope.layer_types.join(",");
    article.dataset.layers = rope.layers?.join(",") ?? "";
    const types = rope.layer_types.length ? rope.layer_types.join(", ") : "every attention layer";
    const layers = rope.layers === null
      ? "every layer (the config does not say how many)"
      : `layers ${ranges(rope.layers)} (${rope.layers.length} of ${answer.num_hidden_layers ?? "?"})`;
    const heading = Object.assign(document.createElement("h3"), { textContent: `Rope ${k + 1} of ${answer.ropes.length}: ${types}` });
    const applies = Object.assign(document.createElement("p"), { className: "layers", textContent: `Applied by ${layers}.` });
    const list = document.createElement("dl");
    // Where the model turns q/k in other pairs than its cache's layout (read whether or not the
    // document types `apply` yet).
    const apply = (rope as { apply?: unknown }).apply;
    const layout = (rope.params as Record<string, unknown>).layout;
    terms(list, [
      ...Object.entries(rope.params as Record<string, unknown>),
      ...(typeof apply === "string" && apply !== layout ? [["q and k turn in", `${apply} pairs (the cache is ${String(layout)})`] as [string, unknown]] : []),
      ["rotary_dim", rope.rotary_dim === answer.head_dim ? rope.rotary_dim : `${rope.rotary_dim} of head_dim ${answer.head_dim} (partial_rotary_factor ${rope.partial_rotary_factor})`],
      ...Object.entries(rope.query_scaling ?? {}).map(([name, value]) => [`query scaling ${name}`, value] as [string, unknown]),
      ["positions in the links", `table ${rope.seq_len.table}, verify ${rope.seq_len.verify}`],
    ]);
    const link = Object.assign(document.createElement("a"), { className: "rope-link", textContent: "show this rope in every view above" });
    link.dataset.query = JSON.stringify(params);
    link.addEventListener("click", (event) => {
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      event.preventDefault();
      this.open(link.href);
    });
    const api = Object.assign(document.createElement("div"), { className: "api" });
    const views = Object.assign(document.createElement("div"), { className: "pair" });
    article.append(heading, applies, list, Object.assign(document.createElement("p"), { className: "open" }), api, views);
    (article.querySelector(".open") as HTMLElement).append(link);
    new Slot(article).urls(...Object.entries(rope.urls).filter(([name]) => !name.startsWith("alias_")).map(([, url]) => new URL(url, location.origin).href));

    const ctx: Context = { api: this.api, scheme: this.scheme, params, rows: { seq_len: String(answer.max_position_embeddings ?? 4096) }, values: { position: this.position }, signal };
    const entry: { ctx: Context; rotation: Slot | undefined } = { ctx, rotation: undefined };
    this.ropes.push(entry);
    return ROPE_VIEWS.filter((view) => view.applies(this.scheme)).map((view) => {
      const box = Object.assign(document.createElement("div"), { className: "subview" });
      box.dataset.view = view.id.replace(/^view-/, "");
      box.append(Object.assign(document.createElement("h4"), { textContent: view.title }), Object.assign(document.createElement("div"), { className: "api" }));
      views.append(box);
      const slot = new Slot(box);
      if (view === rotation) entry.rotation = slot;
      return drawInto(view, ctx, slot);
    });
  }

  /** A rope's parameters as the controls' query: strings, the service's defaults left out. */
  private query(params: Record<string, unknown>): Query {
    const query: Query = {};
    for (const [name, value] of Object.entries(params)) {
      const p = this.scheme.parameters.find((q) => q.name === name);
      if (!p || value === null || value === undefined) continue;
      if (p.default !== null && p.default !== undefined && text(p.default) === text(value)) continue;
      query[name] = text(value);
    }
    return query;
  }

  private links(): void {
    for (const link of this.section.querySelectorAll<HTMLAnchorElement>("a.rope-link")) {
      link.href = toUrl({ scheme: this.scheme.name, values: JSON.parse(link.dataset.query ?? "{}") as Query }) + this.fragment();
    }
  }

  private syncSlider(): void {
    this.slider.value = this.position;
    const output = this.slider.parentElement?.querySelector("output");
    if (output) output.textContent = this.position;
  }

  private async move(): Promise<void> {
    this.moving.abort();
    this.moving = new AbortController();
    const signal = AbortSignal.any([this.moving.signal, this.drawing.signal]);
    await Promise.all(this.ropes.map(async ({ ctx, rotation: slot }) => {
      if (!slot) return;
      slot.section.setAttribute("aria-busy", "true");
      slot.section.querySelectorAll(".state").forEach((n) => n.remove());
      try {
        await rotation.move({ ...ctx, values: { position: this.position }, signal }, slot);
        if (!signal.aborted) slot.done();
      } catch (error) {
        if (!signal.aborted) slot.fail(error);
      }
    }));
  }
}
