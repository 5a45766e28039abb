// Which rope a kernel applied, read by the applied operation of the scheme that offers one
// (`/v1/schemes` says which) from what went into the kernel and what came out: drop the two
// arrays (.npy, as `numpy.save` writes q before and after the rope), their positions if any, and
// the model's config.json or the rope's parameters; the service's verdict is drawn beside a
// heatmap of the angle error by position and pair.
import { type Api, ApiError, type AppliedAnswer, type Query, type Scheme } from "./api";
import { acceptDrops } from "./model";
import { Slot, writeFindings } from "./views";

declare const Plotly: {
  newPlot(node: HTMLElement, data: object[], layout: object, config: object): Promise<unknown>;
};

type Measured = AppliedAnswer["measured"];
const PARTS = ["before", "after", "positions"] as const;
type PartName = (typeof PARTS)[number];
// A config.json is a few KB: a larger dropped file is taken for an array.
const MAX_CONFIG = 1 << 20;

function value(v: unknown): string {
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(3);
  if (Array.isArray(v)) return v.length > 8 ? `${v.slice(0, 8).map(value).join(", ")}, … (${v.length})` : v.map(value).join(", ");
  if (typeof v === "object" && v !== null) return Object.entries(v).map(([k, w]) => `${k}=${value(w)}`).join(" ");
  return String(v);
}

/** The query the fields state: the rope's parameters (`d_model=128&base=500000`, as for a table)
 * and the axes, empty ones left out. */
export function queryOf(text: string): Query {
  const query: Query = {};
  for (const [key, v] of new URLSearchParams(text.trim().replace(/^\?/, ""))) if (v !== "") query[key] = v;
  return query;
}

export class AppliedPanel {
  readonly section: HTMLElement;
  private readonly slot: Slot;
  private readonly inputs = new Map<PartName, HTMLInputElement>();
  private readonly files = new Map<PartName, File>();
  private readonly config: HTMLTextAreaElement;
  private readonly query: HTMLInputElement;
  private reading = new AbortController();

  constructor(private readonly api: Api, private readonly scheme: Scheme) {
    this.section = Object.assign(document.createElement("section"), { id: "view-applied", className: "view" });
    this.section.setAttribute("aria-labelledby", "view-applied-title");
    const title = Object.assign(document.createElement("h2"), { id: "view-applied-title", textContent: AppliedPanel.title });
    const blurb = Object.assign(document.createElement("p"), {
      textContent: "Drop what went into a rope kernel and what came out (q or k before and after, as .npy), with their positions if they are not 0, 1, 2, …: the service reads the rotation of every pair and says whether the kernel applied the model's rope — which pairs, which dimensions, which runtime's arithmetic — and otherwise what is wrong. Paste the model's config.json (and the layer), or give the rope's parameters as for a table.",
    });
    const zone = Object.assign(document.createElement("div"), { className: "dropzone", id: "applied-drop" });
    const labels: Record<PartName, string> = {
      before: "before: the kernel's input (.npy)",
      after: "after: what it returned (.npy)",
      positions: "positions (optional .npy of ids: (n,) or M-RoPE's (3, n))",
    };
    for (const name of PARTS) {
      const input = Object.assign(document.createElement("input"), { type: "file", id: `applied-${name}`, accept: ".npy" });
      input.addEventListener("change", () => { if (input.files?.[0]) this.files.set(name, input.files[0]); });
      this.inputs.set(name, input);
      zone.append(Object.assign(document.createElement("label"), { htmlFor: input.id, textContent: labels[name] }), input);
    }
    this.query = Object.assign(document.createElement("input"), { type: "text", id: "applied-query", spellcheck: false, placeholder: "d_model=128&base=500000&token_axis=2 (or layer=3 beside a config)" });
    this.config = Object.assign(document.createElement("textarea"), { id: "applied-config", rows: 4, spellcheck: false, placeholder: '{"model_type": "llama", "rope_theta": 500000.0, …}' });
    const send = Object.assign(document.createElement("button"), { type: "button", id: "applied-send", textContent: "read the rope the kernel applied" });
    zone.append(
      Object.assign(document.createElement("label"), { htmlFor: this.query.id, textContent: "The rope and the axes, as a query (layer, token_axis, head_dim, offset; d_model, base … without a config):" }), this.query,
      Object.assign(document.createElement("label"), { htmlFor: this.config.id, textContent: "The model's config.json (optional; paste it, or drop it here):" }), this.config, send,
    );
    send.addEventListener("click", () => void this.show());
    acceptDrops(zone, (dropped) => void this.dropped(dropped));
    this.section.append(title, blurb, zone, Object.assign(document.createElement("div"), { className: "api" }));
    this.slot = new Slot(this.section);
    this.slot.done("waiting");
  }

  static readonly title = "Which rope a kernel applied";

  /** A dropped config.json goes in the text box; an array fills the first empty part. */
  private async dropped(file: File): Promise<void> {
    if (file.size <= MAX_CONFIG && /\.json$/i.test(file.name)) {
      this.config.value = await file.text();
      return;
    }
    const free = PARTS.find((name) => !this.files.has(name)) ?? "after";
    this.files.set(free, file);
  }

  private begin(): AbortSignal {
    this.reading.abort();
    this.reading = new AbortController();
    this.slot.reset();
    for (const key of ["holds", "recipe", "findings", "pairs"]) delete this.section.dataset[key];
    return this.reading.signal;
  }

  private async show(): Promise<void> {
    const signal = this.begin();
    const before = this.files.get("before");
    const after = this.files.get("after");
    if (!before || !after) {
      this.slot.fail(new ApiError("Choose or drop the two arrays first: before and after.", 0));
      return;
    }
    const query = queryOf(this.query.value);
    const form = new FormData();
    for (const name of PARTS) {
      const file = this.files.get(name);
      if (file) form.append(name, file, file.name);
    }
    const config = this.config.value.trim();
    if (config) form.append("config", new Blob([config], { type: "application/json" }), "config.json");
    const parts = PARTS.filter((name) => this.files.has(name)).map((name) => `-F ${name}=@${this.files.get(name)?.name}`);
    this.slot.command(`curl -X POST '${this.api.appliedUrl(this.scheme.name, query)}' ${parts.join(" ")}${config ? " -F config=@config.json" : ""}`);
    try {
      const answer = await this.api.applied(this.scheme.name, form, query, signal);
      if (signal.aborted) return;
      await this.render(answer);
      this.slot.done();
    } catch (error) {
      if (!signal.aborted) this.slot.fail(error);
    }
  }

  private async render(answer: AppliedAnswer): Promise<void> {
    const measured = answer.measured;
    const verdict = this.slot.block("p");
    verdict.className = `report verdict ${answer.holds === true ? "pass" : answer.holds === false ? "fail" : ""}`;
    const recipe = measured.recipe ? ` (recipe ${measured.recipe}${measured.also_within?.length ? `; also within: ${measured.also_within.join(", ")}` : ""})` : "";
    verdict.textContent = answer.holds === true
      ? `Holds: the kernel applied the model's rope${recipe}.`
      : answer.holds === false
        ? `Does not hold: ${answer.diagnosis.length} finding${answer.diagnosis.length === 1 ? "" : "s"}${recipe}.`
        : `Cannot tell: ${answer.reason ?? ""}`;
    this.section.dataset.holds = String(answer.holds);
    this.section.dataset.recipe = measured.recipe ?? "";
    this.section.dataset.pairs = measured.pairs ?? "";
    this.section.dataset.findings = answer.diagnosis.map((f) => f.name).join(" ");
    await this.heatmap(measured);
    writeFindings(this.slot.block("ul"), answer.diagnosis.map((f) => ({
      name: f.name, summary: f.detail, evidence: f.evidence,
    })), answer.holds !== false, value, (name) => name.replaceAll("_", " "));
    const summary = this.slot.block("dl");
    summary.className = "report measured";
    const recipes = Object.entries(measured.recipes)
      .map(([name, fit]) => `${name} ${fit.holds === null ? "n/a" : `${value(fit.max_angle_error)} rad${fit.holds ? " ✓" : ""}`}`).join(", ");
    for (const [term, v] of [
      ["tokens × samples, head", `${measured.tokens} × ${measured.samples}, ${measured.head_dim}`],
      ["dtypes", measured.dtypes],
      ["pairs that keep their length", measured.pairs ?? "none"],
      ["dimensions turned", measured.rotated_dims ? `${measured.rotated_dims[0]} … ${measured.rotated_dims[1] - 1}` : "none"],
      ["magnitude", measured.magnitude],
      ["largest angle error", `${value(measured.max_angle_error)} rad`],
      ["resolution of the dtypes", `${value(measured.resolution)} rad`],
      ["each recipe's largest error", recipes],
      ["rope expected", answer.expected.params ?? "none (a NoPE layer)"],
    ] as [string, unknown][]) {
      summary.append(Object.assign(document.createElement("dt"), { textContent: term }), Object.assign(document.createElement("dd"), { textContent: value(v) }));
    }
  }

  /** log10 of the angle error (rad) by position and pair, against the recipe named (else exact). */
  private async heatmap(measured: Measured): Promise<void> {
    const map = measured.angle_error_map;
    if (!map || !map.values.length) return;
    const z = map.values.map((row) => row.map((e) => (e === null ? null : Math.log10(Math.max(e, 1e-12)))));
    const floor = measured.resolution ? Math.log10(measured.resolution) : undefined;
    const node = this.slot.plot("angle error by position and pair, log10 radians", "applied-heatmap");
    const trace = {
      type: "heatmap", x: map.pairs, y: map.positions.map(String), z, colorscale: "Viridis",
      zmin: floor !== undefined ? Math.min(floor - 1, ...z.flat().filter((v): v is number => v !== null)) : undefined,
      colorbar: { title: { text: "log10 rad" } },
      hovertemplate: "pair %{x}, position %{y}: 10^%{z:.2f} rad<extra></extra>",
    };
    await Plotly.newPlot(node, [trace], {
      title: { text: `angle error by position and pair (resolution ${value(measured.resolution)} rad)`, font: { size: 14 } },
      xaxis: { title: { text: "pair" } },
      yaxis: { title: { text: "position" }, type: "category" },
      margin: { l: 80, r: 20, t: 40, b: 50 },
    }, { responsive: true, displaylogo: false });
  }
}
