// A multimodal layout's position ids: a model's config and a layout of text runs, images and
// videos posted to the positions operation of the scheme that offers one (`/v1/schemes` says
// which), drawn token by token (a text run as a strip of cells, each image and each video frame as
// its merged grid) and coloured by the temporal, height or width id. A client's ids, dropped
// (.npy or JSON) or pasted, go to positions/verify: the verdict and the diagnosis stand beside the
// drawing, and the tokens whose ids differ are marked in it. The layout travels in the link's
// fragment, compressed like the model panel's config.
import { type Api, ApiError, type ClientIds, type IdsReport, type Layout, type PositionsAnswer, type Scheme } from "./api";
import { pack, unpack } from "./model";
import { Slot, writeFindings } from "./views";

type Mrope = PositionsAnswer["mrope"];
type Segment = NonNullable<Layout["segments"]>[number];

const ROWS = ["temporal", "height", "width"] as const;
type Row = (typeof ROWS)[number];

// A few families' model types to start from; the config names any other the service reads.
const MODEL_TYPES = ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "glm4v", "ernie4_5_vl_moe"];
const DEFAULT_LAYOUT: Layout = {
  config: { model_type: "qwen2_vl" },
  // Text on each side of every image and video: the models that find their media by the tokens
  // around them (Qwen2.5-Omni, GLM-Image) need it, and a processor writes it.
  segments: [{ text: 5 }, { image: [1, 8, 12] }, { text: 2 }, { video: [4, 6, 8], second_per_grid_t: 0.5 }, { text: 7 }],
};
// One element per token: past this the page leaves the ids to the API's answer.
const MAX_CELLS = 20000;
// Viridis: dark to light, readable with every common colour-vision deficiency.
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

/** A run of the drawing: text tokens, or one merged grid (an image, or one frame of a video). */
type Piece =
  | { kind: "text"; count: number; where: string }
  | { kind: "image" | "video"; rows: number; columns: number; where: string; caption: string };

/** The pieces a layout is drawn as, counted as the service counts its tokens. */
function piecesOf(segments: readonly Segment[], mrope: Mrope): Piece[] {
  const m = mrope.spatial_merge_size;
  return segments.flatMap((segment, s): Piece[] => {
    if ("text" in segment) return [{ kind: "text", count: segment.text, where: `text (segment ${s})` }];
    const kind = "image" in segment ? "image" : "video";
    const [t, h, w] = "image" in segment ? segment.image : segment.video;
    const grid = (f: number, frames: number): Piece => ({
      kind, rows: h / m, columns: w / m, where: `${kind} (segment ${s})${frames > 1 ? `, frame ${f + 1} of ${frames}` : ""}`,
      caption: `${kind} ${h / m}×${w / m}${frames > 1 ? `, frame ${f + 1}/${frames}` : ""}`,
    });
    if ("image" in segment) return Array.from({ length: t }, (_, f) => grid(f, t));
    if (mrope.video === "per_frame") {
      // Each frame its own grid, between the text tokens the processor writes around it.
      const prefix = segment.frame_prefix ?? 1, suffix = segment.frame_suffix ?? 1;
      const around = (f: number, count: number): Piece => ({ kind: "text", count, where: `text around frame ${f + 1} of the video (segment ${s})` });
      return Array.from({ length: t }, (_, f) => [around(f, prefix), grid(f, t), around(f, suffix)])
        .flat().filter((piece) => piece.kind !== "text" || piece.count > 0);
    }
    const frames = t / (mrope.temporal_merge_size ?? 1);
    return Array.from({ length: frames }, (_, f) => grid(f, frames));
  });
}

const tokensOf = (pieces: Piece[]) => pieces.reduce((n, p) => n + (p.kind === "text" ? p.count : p.rows * p.columns), 0);

function colour(fraction: number): { background: string; text: string } {
  const x = Math.min(Math.max(fraction, 0), 1) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
  const rgb = VIRIDIS[i].map((c, k) => Math.round(c + (VIRIDIS[i + 1][k] - c) * (x - i)));
  const linear = rgb.map((c) => (c / 255 <= 0.04045 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4));
  const luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2];
  // Black or white, whichever contrasts more: at least 4.5 to 1 on every colour of the map.
  return { background: `rgb(${rgb.join(", ")})`, text: luminance > 0.179 ? "#000" : "#fff" };
}

const NPY_TYPES = { "<i8": BigInt64Array, "<i4": Int32Array, "<i2": Int16Array, "|i1": Int8Array };

/** The integer array of a .npy file (little-endian int64, int32, int16 or int8; one or two axes). */
function readNpy(bytes: ArrayBuffer): number[] | number[][] {
  const view = new DataView(bytes);
  const start = view.getUint8(6) === 1 ? 10 : 12;
  const length = start === 10 ? view.getUint16(8, true) : view.getUint32(8, true);
  const header = new TextDecoder("latin1").decode(new Uint8Array(bytes, start, length));
  const descr = /'descr':\s*'(<i8|<i4|<i2|\|i1)'/.exec(header)?.[1];
  const shape = /'shape':\s*\(([\d,\s]*)\)/.exec(header)?.[1].split(",").filter((v) => v.trim()).map(Number);
  if (!descr || !shape || shape.length < 1 || shape.length > 2) {
    throw new Error(`its header says ${header.trim()}: ids are a (3, n) or (n,) array of little-endian integers`);
  }
  const data = bytes.slice(start + length);
  const typed = NPY_TYPES[descr as keyof typeof NPY_TYPES];
  const size = shape.reduce((a, b) => a * b, 1);
  if (data.byteLength < size * typed.BYTES_PER_ELEMENT) throw new Error(`it holds fewer values than its shape (${shape.join(", ")})`);
  const values = Array.from(new typed(data, 0, size), Number);
  if (!values.every(Number.isSafeInteger)) throw new Error("it holds ids past 2^53, which the page cannot read exactly");
  if (shape.length === 1) return values;
  const [rows, columns] = shape;
  const fortran = /'fortran_order':\s*True/.test(header);
  return Array.from({ length: rows }, (_, r) => Array.from({ length: columns }, (_, c) => values[fortran ? c * rows + r : r * columns + c]));
}

/** Pasted or dropped JSON: the array itself, or an object holding it as position_ids or data. */
function parseIds(text: string): unknown {
  const value: unknown = JSON.parse(text);
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const holder = value as { position_ids?: unknown; data?: unknown };
    return holder.position_ids ?? holder.data;
  }
  return value;
}

/** The client's ids of token k, row by row (one row stands for all three), where it gives them. */
function theirsAt(ids: unknown, k: number): (number | undefined)[] | null {
  if (!Array.isArray(ids)) return null;
  const rows = (Array.isArray(ids[0]) ? ids : [ids]) as unknown[][];
  return ROWS.map((_, r) => {
    const v = (rows.length === 1 ? rows[0] : rows[r])?.[k];
    return typeof v === "number" ? v : undefined;
  });
}

const shown = (value: unknown): string => (typeof value === "object" && value !== null ? JSON.stringify(value) : String(value));
const segmentText = (segments: readonly unknown[]) => `[\n${segments.map((s) => `  ${JSON.stringify(s)}`).join(",\n")}\n]`;

interface Drawn {
  key: string; // the layout drawn, as posted
  ids: number[][];
  cells: HTMLElement[];
  legend: HTMLElement;
  theirs: unknown; // the client's ids last verified for this layout
  first: number | null; // the first token they differ at
}

export class LayoutPanel {
  readonly section: HTMLElement;
  private readonly slot: Slot;
  private readonly checks: Slot;
  private readonly model: HTMLSelectElement;
  private readonly config: HTMLTextAreaElement;
  private readonly segments: HTMLTextAreaElement;
  private readonly figure: HTMLElement;
  private readonly rows: HTMLFieldSetElement;
  private code: string | null = null; // the layout of the link, as the fragment holds it
  private row: Row = "temporal";
  private drawn: Drawn | null = null;
  private drawing = new AbortController();
  private checking = new AbortController();

  /** `address(push)` writes the page's URL with every panel's fragment. */
  constructor(private readonly api: Api, private readonly scheme: Scheme, private readonly address: (push: boolean) => void) {
    const make = <K extends keyof HTMLElementTagNameMap>(tag: K, props: object = {}): HTMLElementTagNameMap[K] => Object.assign(document.createElement(tag), props);
    this.section = make("section", { id: "view-layout", className: "view" });
    this.section.setAttribute("aria-labelledby", "view-layout-title");
    const blurb = make("p", {
      textContent: "A multimodal model's (M-RoPE) position ids for a layout of text, images and videos, as its get_rope_index computes them: each token is a cell, each image and video frame its grid after the spatial merge, coloured by one of its three ids. Drop or paste your own ids beside it to have them diagnosed. The link holds the layout.",
    });

    const form = make("div", { className: "layout-form" });
    this.model = make("select", { id: "layout-model" });
    for (const type of MODEL_TYPES) this.model.append(new Option(type, type));
    this.config = make("textarea", { id: "layout-config", rows: 2, spellcheck: false });
    this.segments = make("textarea", { id: "layout-segments", rows: 6, spellcheck: false });
    const send = make("button", { type: "button", id: "layout-send", textContent: "draw the layout's ids" });
    form.append(
      make("label", { htmlFor: "layout-model", textContent: "model_type" }), this.model,
      make("label", { htmlFor: "layout-config", textContent: "config.json (a model_type is enough; vision_config gives the merge sizes and tokens_per_second):" }), this.config,
      make("label", { htmlFor: "layout-segments", textContent: 'segments: {"text": n}, {"image": [t, h, w]}, {"video": [t, h, w], "second_per_grid_t": s} — grids before the spatial merge:' }), this.segments,
      send,
    );
    this.fill(DEFAULT_LAYOUT);
    this.model.addEventListener("change", () => {
      let config: unknown;
      try { config = JSON.parse(this.config.value); } catch { config = null; }
      const object = config !== null && typeof config === "object" && !Array.isArray(config) ? config : {};
      this.config.value = JSON.stringify({ ...object, model_type: this.model.value });
      void this.submit();
    });
    send.addEventListener("click", () => void this.submit());

    this.rows = make("fieldset", { className: "layout-rows", hidden: true });
    this.rows.append(make("legend", { textContent: "colour by" }));
    for (const row of ROWS) {
      const label = make("label");
      const radio = make("input", { type: "radio", name: "layout-row", value: row, checked: row === this.row });
      radio.addEventListener("change", () => {
        this.row = row;
        this.paint();
        this.address(false);
      });
      label.append(radio, `${row} id`);
      this.rows.append(label);
    }
    this.figure = make("div", { className: "layout-figure" });
    this.figure.append(this.rows);

    const verify = make("div", { className: "subview", id: "layout-verify" });
    const zone = make("div", { className: "dropzone", id: "layout-drop" });
    const file = make("input", { type: "file", id: "layout-ids-file", accept: ".npy,.json,application/json" });
    const paste = make("textarea", { id: "layout-ids-json", rows: 3, spellcheck: false, placeholder: "[[0, 1, 2, …], [0, 1, 2, …], [0, 1, 2, …]]" });
    const check = make("button", { type: "button", id: "layout-ids-send", textContent: "verify the pasted ids" });
    zone.append(
      make("label", { htmlFor: "layout-ids-file", textContent: "Drop your (3, n) ids here, a .npy of integers or a JSON file, or choose one:" }), file,
      make("label", { htmlFor: "layout-ids-json", textContent: "or paste them as JSON:" }), paste, check,
    );
    file.addEventListener("change", () => { if (file.files?.[0]) void this.check(() => this.readIds(file.files?.[0] as File)); });
    check.addEventListener("click", () => void this.check(async () => parseIds(paste.value)));
    zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (event) => {
      event.preventDefault();
      zone.classList.remove("over");
      const dropped = event.dataTransfer?.files?.[0];
      if (dropped) void this.check(() => this.readIds(dropped));
    });
    verify.append(make("h3", { textContent: "Your ids, held to the model's" }), zone, make("div", { className: "api" }));

    const pair = make("div", { className: "layout-pair" });
    pair.append(this.figure, verify);
    this.section.append(make("h2", { id: "view-layout-title", textContent: LayoutPanel.title }), blurb, form, make("div", { className: "api" }), pair);
    this.slot = new Slot(this.section);
    this.checks = new Slot(verify);
    this.slot.done("waiting");
    this.checks.done("waiting");
  }

  static readonly title = "A multimodal layout's position ids";

  /** This panel's part of the link's fragment (no "#"): the layout and the id row coloured. */
  fragment(): string {
    if (this.code === null) return "";
    return `layout=${this.code}${this.row === "temporal" ? "" : `&colour=${this.row}`}`;
  }

  /** Show what the fragment `hash` says (a link opened, back or forward): only what changed. */
  restore(hash: string): void {
    const given = new URLSearchParams(hash.replace(/^#/, ""));
    const row = ROWS.find((r) => r === given.get("colour")) ?? "temporal";
    if (row !== this.row) {
      this.row = row;
      this.rows.querySelectorAll("input").forEach((radio) => { radio.checked = radio.value === row; });
      this.paint();
    }
    const code = given.get("layout");
    if (code === this.code) return;
    this.code = code;
    if (code === null) {
      this.begin();
      this.fill(DEFAULT_LAYOUT);
      this.slot.done("waiting");
      return;
    }
    void this.load(code);
  }

  private fill(layout: Layout): void {
    this.config.value = JSON.stringify(layout.config);
    this.segments.value = segmentText(layout.segments ?? []);
    this.syncModel(layout.config as Record<string, unknown>);
  }

  private syncModel(config: Record<string, unknown>): void {
    const type = typeof config.model_type === "string" ? config.model_type : "";
    if (type && ![...this.model.options].some((o) => o.value === type)) this.model.append(new Option(type, type));
    if (type) this.model.value = type;
  }

  /** The layout the fields hold, or a message saying what in them is not one. */
  private layout(): Layout {
    const parse = (text: string, what: string): unknown => {
      try {
        return JSON.parse(text);
      } catch (error) {
        throw new ApiError(`The ${what} not JSON: ${(error as Error).message}`, 0);
      }
    };
    const config = parse(this.config.value, "config is");
    if (config === null || typeof config !== "object" || Array.isArray(config)) {
      throw new ApiError('The config must be a JSON object, such as {"model_type": "qwen2_vl"}.', 0);
    }
    const segments = parse(this.segments.value, "segments are");
    if (!Array.isArray(segments)) throw new ApiError('The segments must be a JSON array, such as [{"text": 5}, {"image": [1, 8, 12]}].', 0);
    this.syncModel(config as Record<string, unknown>);
    return { config: config as Layout["config"], segments: segments as Segment[] };
  }

  /** Abandon what is drawing or verifying, and empty the view for what comes next. */
  private begin(): AbortController {
    this.drawing.abort();
    this.checking.abort();
    this.drawing = new AbortController();
    this.drawn = null;
    delete this.section.dataset.tokens;
    delete this.section.dataset.marked;
    this.rows.hidden = true;
    this.slot.reset();
    this.checks.reset();
    this.checks.done("waiting");
    return this.drawing;
  }

  private async load(code: string): Promise<void> {
    const signal = this.begin().signal;
    let layout: Layout;
    try {
      const value = JSON.parse(await unpack(code)) as Layout;
      if (typeof value?.config !== "object" || !Array.isArray(value.segments)) throw new Error("it holds no config and segments");
      layout = value;
    } catch (error) {
      if (!signal.aborted) this.slot.fail(new ApiError(`The link's layout could not be read (${(error as Error).message}): write it again.`, 0));
      return;
    }
    if (signal.aborted) return;
    this.fill(layout);
    await this.show(layout, signal);
  }

  private async submit(): Promise<void> {
    const signal = this.begin().signal;
    let layout: Layout;
    try {
      layout = this.layout();
    } catch (error) {
      this.slot.fail(error);
      return;
    }
    await this.post(layout, signal);
  }

  /** Put `layout` in the link, and draw it. */
  private async post(layout: Layout, signal: AbortSignal): Promise<void> {
    const code = await pack(JSON.stringify(layout));
    if (signal.aborted) return;
    if (code !== this.code) {
      this.code = code;
      this.address(true);
    }
    await this.show(layout, signal);
  }

  private async show(layout: Layout, signal: AbortSignal): Promise<void> {
    const body = JSON.stringify(layout).replaceAll("'", "'\\''");
    this.slot.command(`curl -X POST ${this.api.positionsUrl(this.scheme.name)} -H 'Content-Type: application/json' -d '${body}'`);
    try {
      const answer = await this.api.positions(this.scheme.name, layout, signal);
      if (signal.aborted) return;
      this.render(layout, answer);
      this.slot.done();
    } catch (error) {
      if (!signal.aborted) this.slot.fail(error);
    }
  }

  private render(layout: Layout, answer: PositionsAnswer): void {
    // The page posts one sequence (segments): its ids stand at the top of the answer.
    const ids = answer.position_ids;
    if (ids === undefined) throw new Error("the answer holds no position_ids");
    const tokens = ids[0].length;
    this.section.dataset.tokens = String(tokens);
    if (tokens > MAX_CELLS) {
      throw new ApiError(`The layout holds ${tokens} tokens: the page draws up to ${MAX_CELLS}, one cell each; the command above gives every id.`, 0);
    }
    const pieces = piecesOf(layout.segments ?? [], answer.mrope);
    if (tokensOf(pieces) !== tokens) throw new Error(`it reads the layout as ${tokensOf(pieces)} tokens, the service as ${tokens}`);

    const legend = Object.assign(document.createElement("p"), { className: "report layout-legend" });
    const drawing = Object.assign(document.createElement("div"), { className: "report layout-drawing", tabIndex: 0 });
    drawing.setAttribute("role", "figure");
    drawing.setAttribute("aria-label", `the ${tokens} tokens of the layout, each coloured by one of its ids`);
    const cells: HTMLElement[] = [];
    let run: HTMLElement | null = null;
    const cell = (kind: string, where: string): HTMLElement => {
      const node = Object.assign(document.createElement("span"), { className: "cell" });
      node.dataset.token = String(cells.length);
      node.dataset.kind = kind;
      node.dataset.where = where;
      cells.push(node);
      return node;
    };
    for (const piece of pieces) {
      if (piece.kind === "text") {
        if (!run) drawing.append(run = Object.assign(document.createElement("div"), { className: "run" }));
        for (let i = 0; i < piece.count; i++) run.append(cell("text", piece.where));
        continue;
      }
      run = null;
      const block = Object.assign(document.createElement("div"), { className: "block" });
      const grid = Object.assign(document.createElement("div"), { className: "grid" });
      grid.style.setProperty("--columns", String(piece.columns));
      for (let r = 0; r < piece.rows; r++) {
        for (let c = 0; c < piece.columns; c++) grid.append(cell(piece.kind, `${piece.where}, row ${r}, column ${c}`));
      }
      block.append(Object.assign(document.createElement("small"), { textContent: piece.caption }), grid);
      drawing.append(block);
    }
    this.figure.append(legend, drawing);
    this.rows.hidden = false;
    this.drawn = { key: JSON.stringify(layout), ids, cells, legend, theirs: null, first: null };
    this.paint();
  }

  /** Colour every cell by the chosen row, and mark where the verified ids differ. */
  private paint(): void {
    if (!this.drawn) return;
    const { ids, cells, legend, theirs, first } = this.drawn;
    const values = ids[ROWS.indexOf(this.row)];
    const low = Math.min(...values), high = Math.max(...values);
    let marked = 0;
    cells.forEach((node, k) => {
      const { background, text } = colour((values[k] - low) / (high - low || 1));
      node.style.background = background;
      node.style.color = text;
      node.textContent = String(values[k]);
      const model = ids.map((row) => row[k]);
      const yours = theirs === null ? null : theirsAt(theirs, k);
      const differs = yours !== null && yours.some((v, r) => v !== model[r]);
      node.classList.toggle("mismatch", differs);
      node.classList.toggle("first", differs && k === first);
      if (differs) marked++;
      node.title = `token ${k}, ${node.dataset.where}: temporal ${model[0]}, height ${model[1]}, width ${model[2]}`
        + (differs ? ` — yours: ${(yours ?? []).map((v) => v ?? "none").join(", ")}` : "");
    });
    this.section.dataset.marked = String(marked);
    legend.textContent = `Each cell is a token, showing its ${this.row} id and coloured by it, from ${low} (dark) to ${high} (light); its title holds all three.`
      + (theirs === null ? "" : ` Ringed: the ${marked === 1 ? "token" : `${marked} tokens`} where your ids differ.`);
  }

  private async readIds(file: File): Promise<unknown> {
    const bytes = await file.arrayBuffer();
    const magic = new Uint8Array(bytes.slice(0, 6));
    const npy = magic[0] === 0x93 && String.fromCharCode(...magic.slice(1)) === "NUMPY";
    return npy ? readNpy(bytes) : parseIds(new TextDecoder().decode(bytes));
  }

  /** Post the client's ids (as `read` gives them) for the layout the fields hold, drawn first. */
  private async check(read: () => Promise<unknown>): Promise<void> {
    this.checking.abort();
    const checking = this.checking = new AbortController();
    this.checks.reset(); // busy from the drop or the click on, until the report or the refusal
    let ids: unknown;
    let layout: Layout;
    try {
      ids = await read();
      layout = this.layout();
    } catch (error) {
      if (checking.signal.aborted) return;
      this.checks.fail(error instanceof ApiError ? error : new ApiError(`Your ids could not be read: ${(error as Error).message}`, 0));
      return;
    }
    if (checking.signal.aborted) return;
    if (this.drawn?.key !== JSON.stringify(layout)) {
      const drawing = this.begin().signal;
      this.checks.reset(); // begin() left it waiting: the ids are posted once the layout is drawn
      await this.post(layout, drawing);
      if (drawing.aborted) return;
    }
    this.checking = new AbortController();
    const signal = this.checking.signal;
    this.checks.command(`curl -X POST ${this.api.positionsUrl(this.scheme.name, true)} -H 'Content-Type: application/json' -d @layout-and-ids.json`);
    try {
      const report = await this.api.verifyIds(this.scheme.name, layout, ids as ClientIds, signal);
      if (signal.aborted) return;
      this.report(report);
      if (this.drawn?.key === JSON.stringify(layout)) {
        this.drawn.theirs = ids;
        this.drawn.first = report.first_difference?.token ?? null;
        this.paint();
      }
      this.checks.done();
    } catch (error) {
      if (!signal.aborted) this.checks.fail(error);
    }
  }

  private report(report: IdsReport): void {
    const verdict = this.checks.block("p");
    verdict.className = `report verdict ${report.equal ? "pass" : "fail"}`;
    const differs = report.mismatched_tokens === null ? "they" : `${report.mismatched_tokens} of ${report.tokens} tokens`;
    verdict.textContent = report.equal
      ? `Equal: the ids of all ${report.tokens} tokens are the model's.`
      : `Not equal: ${differs} differ (ringed in the drawing).`;
    const first = report.first_difference;
    if (first) {
      const where = first.segment ? ` (${Object.entries(first.segment).map(([k, v]) => `${k} ${shown(v)}`).join(", ")})` : "";
      const line = this.checks.block("p");
      line.className = "report first-difference";
      line.textContent = `First at token ${first.token}${where}: the model gives ${first.expected.join(", ")}, yours ${first.got.join(", ")}.`;
    }
    writeFindings(this.checks.block("ul"), report.diagnosis, report.equal, shown, (name) => name);
    this.checks.section.dataset.findings = report.diagnosis.map((f) => f.name).join(" ");
  }
}
