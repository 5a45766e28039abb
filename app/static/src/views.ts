// Every view: which schemes it applies to (read from /v1/schemes, never from a scheme's name)
// and how it draws from the API. Each section says what it fetched, with a copyable URL.
import { type Api, ApiError, type Envelope, type Query, type Scheme } from "./api";

declare const Plotly: {
  newPlot(node: HTMLElement, data: object[], layout: object, config: object): Promise<unknown>;
  react(node: HTMLElement, data: object[], layout: object, config: object): Promise<unknown>;
};

export interface Context {
  api: Api;
  scheme: Scheme;
  params: Query; // the scheme's own parameters, as the controls set them
  rows: Query; // seq_len and offset, or nothing for grid schemes
  values: Query; // every control
  signal: AbortSignal;
}

export interface View {
  id: string;
  title: string;
  blurb: string;
  applies(scheme: Scheme): boolean;
  draw(ctx: Context, slot: Slot): Promise<void>;
}

// Okabe–Ito (yellow swapped for grey, which reads on white): distinguishable with every common
// colour-vision deficiency.
const COLOURWAY = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#7f7f7f"];
const CONFIG = { responsive: true, displaylogo: false };
const paramNamed = (scheme: Scheme, name: string) => scheme.parameters.find((p) => p.name === name);
const offers = (scheme: Scheme, endpoint: string) => scheme.endpoints?.includes(endpoint) ?? true;

function layout(title: string, x: string, y: string, extra: object = {}): object {
  return {
    title: { text: title, font: { size: 14 } },
    xaxis: { title: { text: x } },
    yaxis: { title: { text: y } },
    colorway: COLOURWAY,
    margin: { l: 60, r: 20, t: 40, b: 50 },
    legend: { orientation: "h", y: -0.25 },
    ...extra,
  };
}

/** A diagnosis as the page shows it wherever a client's array is checked: each finding's name,
 *  summary and evidence, or why none is listed. */
export interface Finding {
  name: string;
  summary: string;
  evidence: { [key: string]: unknown };
}

export function writeFindings(
  list: HTMLElement,
  diagnosis: readonly Finding[],
  passed: boolean,
  value: (v: unknown) => string,
  title: (name: string) => string,
): void {
  list.className = "report findings";
  for (const finding of diagnosis) {
    const item = document.createElement("li");
    item.dataset.finding = finding.name;
    const evidence = document.createElement("dl");
    for (const [k, v] of Object.entries(finding.evidence)) {
      evidence.append(Object.assign(document.createElement("dt"), { textContent: k.replaceAll("_", " ") }), Object.assign(document.createElement("dd"), { textContent: value(v) }));
    }
    item.append(Object.assign(document.createElement("strong"), { textContent: title(finding.name) }), Object.assign(document.createElement("p"), { textContent: finding.summary }), evidence);
    list.append(item);
  }
  if (!diagnosis.length && !passed) list.append(Object.assign(document.createElement("li"), { textContent: "No known fault explains the differences." }));
}

export class Slot {
  constructor(readonly section: HTMLElement) {}

  private get bar(): HTMLElement {
    return this.section.querySelector(".api") as HTMLElement;
  }

  reset(): void {
    this.bar.replaceChildren();
    this.section.querySelectorAll(".plot, .state, .report").forEach((n) => n.remove());
    this.section.dataset.state = "loading";
    this.section.setAttribute("aria-busy", "true");
  }

  /** Show the API URLs this view fetches, each on one line (cut short, whole in its tooltip),
   *  one click from opening (the link) or copying (its button). */
  urls(...urls: string[]): void {
    for (const url of urls) this.copyable(Object.assign(document.createElement("a"), { href: url, textContent: url, title: url }), "copy URL", `copy the API URL ${url}`);
  }

  /** Show instead of the URLs shown so far: a view that redraws in place (the rotation) fetches anew. */
  replaceUrls(...urls: string[]): void {
    this.bar.replaceChildren();
    this.urls(...urls);
  }

  /** A request a link cannot make (a POST), as the command that makes it. */
  command(text: string): void {
    this.copyable(Object.assign(document.createElement("code"), { textContent: text, title: text }), "copy command", `copy the command ${text}`);
  }

  private copyable(shown: HTMLElement, button: string, label: string): void {
    const row = document.createElement("div");
    const copy = Object.assign(document.createElement("button"), { type: "button", textContent: button });
    copy.setAttribute("aria-label", label);
    copy.addEventListener("click", () => navigator.clipboard?.writeText(shown.textContent ?? ""));
    row.append(copy, shown);
    this.bar.append(row);
  }

  plot(label: string, name = "plot"): HTMLElement {
    const node = Object.assign(document.createElement("div"), { className: "plot" });
    node.dataset.plot = name;
    node.setAttribute("role", "figure"); // not "img": Plotly puts buttons inside
    node.setAttribute("aria-label", label);
    this.section.append(node);
    return node;
  }

  block<K extends keyof HTMLElementTagNameMap>(tag: K): HTMLElementTagNameMap[K] {
    const node = document.createElement(tag);
    node.classList.add("report");
    this.section.append(node);
    return node;
  }

  done(state = "drawn"): void {
    this.section.dataset.state = state;
    this.section.removeAttribute("aria-busy");
  }

  fail(error: unknown): void {
    const message = error instanceof ApiError ? error.message : `The page could not draw this view: ${(error as Error).message}`;
    this.section.querySelectorAll(".plot").forEach((n) => n.remove());
    const p = Object.assign(document.createElement("p"), { className: "state", textContent: message });
    p.setAttribute("role", "status");
    this.section.append(p);
    this.done("error");
  }
}

// A stack (cos and sin, or one array per head) is drawn one slice at a time: the first here.
const first = (body: Envelope): number[][] => (body.shape.length === 3 ? (body.data as number[][][])[0] : (body.data as number[][]));

async function plotly(ctx: Context, slot: Slot, operation: "table" | "similarity", query: Query, label: string): Promise<void> {
  const url = ctx.api.url(ctx.scheme.name, operation, { ...query, format: "plotly" });
  slot.urls(url);
  const figure = await ctx.api.get<{ data: object[]; layout: object }>(ctx.scheme.name, operation, { ...query, format: "plotly" }, ctx.signal);
  const node = slot.plot(label);
  await Plotly.newPlot(node, figure.data, { ...figure.layout, margin: { l: 60, r: 20, t: 40, b: 50 } }, CONFIG);
}

const component = (ctx: Context): Query => (ctx.values.component ? { component: ctx.values.component } : {});
const numbers = (text: string | undefined) => (text ?? "").split(",").map((v) => Number.parseInt(v, 10)).filter(Number.isFinite);

const table: View = {
  id: "view-table",
  title: "The table",
  blurb: "Rows are positions, columns dimensions (for a stack, the first array). Diverging colour map, symmetric limits.",
  applies: (s) => offers(s, "table"),
  draw: (ctx, slot) => plotly(ctx, slot, "table", { ...ctx.params, ...ctx.rows, ...component(ctx) }, `heatmap of the ${ctx.scheme.name} table`),
};

async function tableJson(ctx: Context, slot: Slot, query: Query): Promise<Envelope> {
  slot.urls(ctx.api.url(ctx.scheme.name, "table", query));
  return ctx.api.get(ctx.scheme.name, "table", query, ctx.signal);
}

const waves: View = {
  id: "view-waves",
  title: "Dimensions as waves over positions",
  blurb: "Low dimensions turn fast, high ones slowly.",
  applies: (s) => s.similarity && offers(s, "table"),
  async draw(ctx, slot) {
    const body = await tableJson(ctx, slot, { ...ctx.params, ...ctx.rows, ...component(ctx) });
    const rows = first(body);
    const start = Number(ctx.rows.offset ?? 0);
    const lines = numbers(ctx.values.dims).filter((d) => d < (rows[0]?.length ?? 0)).map((d) => ({
      type: "scatter", mode: "lines", name: `dimension ${d}`, x: rows.map((_, k) => start + k), y: rows.map((row) => row[d]),
    }));
    await Plotly.newPlot(slot.plot("selected dimensions over positions"), lines, layout("selected dimensions over positions", "position", "value"), CONFIG);
    slot.section.dataset.traces = String(lines.length);
  },
};

const vectors: View = {
  id: "view-vectors",
  title: "Positions as vectors over dimensions",
  blurb: "Each position's fingerprint.",
  applies: (s) => s.similarity && offers(s, "table"),
  async draw(ctx, slot) {
    const body = await tableJson(ctx, slot, { ...ctx.params, ...ctx.rows, ...component(ctx) });
    const rows = first(body);
    const start = Number(ctx.rows.offset ?? 0);
    const lines = numbers(ctx.values.positions).filter((p) => p >= start && p - start < rows.length).map((p) => ({
      type: "scatter", mode: "lines+markers", name: `position ${p}`, y: rows[p - start],
    }));
    await Plotly.newPlot(slot.plot("selected positions over dimensions"), lines, layout("selected positions over dimensions", "dimension", "value"), CONFIG);
  },
};

const similarity: View = {
  id: "view-similarity",
  title: "Similarity between positions",
  blurb: "Cosine similarity of every pair of positions: near positions look alike.",
  applies: (s) => s.similarity && offers(s, "similarity"),
  draw: (ctx, slot) => plotly(ctx, slot, "similarity", { ...ctx.params, ...ctx.rows }, "heatmap of cosine similarity between positions"),
};

/** ``count`` numbers in [−1, 1) with two decimals, the same for a seed on every load (so a link
 * shows the same curves): a linear congruential generator is enough for an illustration. */
function fixedRandom(count: number, seed: number): string {
  let state = seed >>> 0;
  const values: string[] = [];
  for (let i = 0; i < count; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    values.push(((state / 2 ** 32) * 2 - 1).toFixed(2));
  }
  return values.join(",");
}

// A query and a key travel in the URL: up to this width they keep it short enough for gateways.
const MAX_URL_VECTOR = 512;

const dot: View = {
  id: "view-dot",
  title: "q·k against the distance m − n",
  blurb: "The dot product of the encodings at m and n — for rotary schemes, of a fixed random query q rotated to m and a fixed random key k rotated to n (widths up to 512) — from two reference positions. Where the two curves lie on each other, it depends on the distance alone; its envelope shows the long-distance decay.",
  applies: (s) => s.similarity && offers(s, "similarity"),
  async draw(ctx, slot) {
    const n = Number(ctx.rows.seq_len ?? 1);
    const start = Number(ctx.rows.offset ?? 0);
    const references = [start, start + Math.floor(n / 2)];
    const width = Number(ctx.params.d_model ?? 0);
    const pair: Query = ctx.scheme.rotates && width >= 2 && width <= MAX_URL_VECTOR
      ? { vector: fixedRandom(width, 1), key: fixedRandom(width, 2) } : {};
    const queries = references.map((reference) => ({ ...ctx.params, ...ctx.rows, ...pair, metric: "dot", reference: String(reference) }));
    slot.urls(...queries.map((q) => ctx.api.url(ctx.scheme.name, "similarity", q)));
    const bodies = await Promise.all(queries.map((q) => ctx.api.get(ctx.scheme.name, "similarity", q, ctx.signal)));
    const lines = bodies.map((body, i) => ({
      type: "scatter", mode: "lines", name: `m = ${references[i]}`,
      x: (body.data as number[]).map((_, k) => references[i] - (start + k)), y: body.data as number[],
      line: { dash: i ? "dot" : "solid", width: i ? 3 : 1.5 },
    }));
    await Plotly.newPlot(slot.plot("dot product against distance, from two reference positions"), lines, layout("q·k against m − n", "m − n", "q·k"), CONFIG);
  },
};

const TAU = 2 * Math.PI;

export const wavelengths: View = {
  id: "view-wavelengths",
  title: "Wavelength of every frequency",
  blurb: "2π/ω for each (sin, cos) pair: geometric from 2π up to nearly 2π·base (log scale).",
  applies: (s) => offers(s, "table") && (s.components.includes("inv_freq") || (s.similarity && paramNamed(s, "layout") !== undefined)),
  async draw(ctx, slot) {
    let omega: number[];
    if (ctx.scheme.components.includes("inv_freq")) {
      const body = await tableJson(ctx, slot, { ...ctx.params, ...ctx.rows, component: "inv_freq", dtype: "float64" });
      omega = body.data as number[];
    } else {
      // Two consecutive rows: the angle between their (sin, cos) pairs is ω, whatever the offset.
      const body = await tableJson(ctx, slot, { ...ctx.params, seq_len: "2", offset: "8", dtype: "float64" });
      const [a, b] = body.data as number[][];
      const d = a.length, h = Math.floor(d / 2), split = ctx.params.layout === "split";
      omega = [];
      for (let i = 0; i < h; i++) {
        const [s, c] = split ? [i, Math.ceil(d / 2) + i] : [2 * i, 2 * i + 1];
        omega.push(Math.atan2(b[s] * a[c] - b[c] * a[s], b[c] * a[c] + b[s] * a[s]));
      }
    }
    const trace = { type: "scatter", mode: "markers", name: "wavelength", y: omega.map((w) => TAU / w) };
    await Plotly.newPlot(slot.plot("wavelength per frequency, log scale"), [trace], layout("wavelength per frequency", "frequency index i", "wavelength (positions)", { yaxis: { type: "log", title: { text: "wavelength (positions)" } } }), CONFIG);
  },
};

export const rotation: View & { move(ctx: Context, slot: Slot): Promise<void> } = {
  id: "view-rotation",
  title: "Rotation: each frequency pair turning with the position",
  blurb: "Each point is one (x₂ᵢ, x₂ᵢ₊₁) pair of a vector rotated to the chosen position: the fast pairs (outside) spin, the slow ones (inside) crawl. Move the slider.",
  applies: (s) => s.components.includes("angle") && offers(s, "encode"),
  draw(ctx, slot) {
    return this.move(ctx, slot);
  },
  async move(ctx, slot) {
    const position = ctx.values.position ?? "0";
    const query = { ...ctx.params, positions: position, component: "angle", dtype: "float64" };
    slot.replaceUrls(ctx.api.url(ctx.scheme.name, "encode", query));
    const body = await ctx.api.get(ctx.scheme.name, "encode", query, ctx.signal);
    const theta = (body.data as number[][])[0];
    const h = theta.length;
    const radius = theta.map((_, i) => 1 - (0.8 * i) / Math.max(h - 1, 1));
    const x = theta.map((t, i) => radius[i] * Math.cos(t));
    const y = theta.map((t, i) => radius[i] * Math.sin(t));
    const hands = { type: "scatter", mode: "lines", hoverinfo: "skip", showlegend: false, line: { color: "#99a", width: 1 },
      x: x.flatMap((v) => [0, v, null]), y: y.flatMap((v) => [0, v, null]) };
    const points = { type: "scatter", mode: "markers", name: "pairs", showlegend: false, x, y,
      text: theta.map((t, i) => `pair ${i}: θ = ${t.toPrecision(6)} rad`), hoverinfo: "text",
      marker: { size: 9, color: theta.map((_, i) => i), colorscale: "Viridis", colorbar: { title: { text: "pair i" } }, line: { width: 1, color: "#222" } } };
    const shapes = radius.map((r) => ({ type: "circle", x0: -r, x1: r, y0: -r, y1: r, line: { color: "#dde", width: 1 } }));
    const figure = layout(`position ${position}`, "", "", {
      shapes, xaxis: { range: [-1.1, 1.1], zeroline: false, showticklabels: false }, yaxis: { range: [-1.1, 1.1], scaleanchor: "x", zeroline: false, showticklabels: false },
    });
    let node = slot.section.querySelector<HTMLElement>(".plot");
    if (!node) node = slot.plot("frequency pairs as points on circles");
    node.setAttribute("aria-label", `frequency pairs as points on circles at position ${position}`);
    await Plotly.react(node, [hands, points], figure, CONFIG);
    slot.section.dataset.position = position;
  },
};

// Each scaling takes its own parameters: the service names those that do not apply
// (urn:posenc:problem:not-applicable), and the comparison asks again without them.
async function applicable(ctx: Context, query: Query): Promise<Envelope> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await ctx.api.get(ctx.scheme.name, "table", query, ctx.signal);
    } catch (error) {
      // The service marks these `not-applicable` for a scheme but `about:blank` for a choice
      // (factor with scaling=none), so the message is what tells them apart.
      const named = error instanceof ApiError && error.status === 422
        ? (error.problem.errors ?? []).filter((e) => /does not apply/.test(e.msg)).map((e) => String(e.loc?.[1]))
        : [];
      // recipe stays: a runtime that refuses a scaling is a note, not the exact table in its place.
      const removable = named.filter((n) => n in query && !["scaling", "recipe", "component", "dtype", "seq_len", "offset"].includes(n));
      if (!removable.length || attempt > 8) throw error;
      for (const n of removable) delete query[n];
    }
  }
}

// What the comparison fills in where the controls leave a scaling's required value blank.
const COMPARISON_FALLBACK: Query = { factor: "8", original_max_position_embeddings: "4096" };

const scalings: View = {
  id: "view-scalings",
  title: "Wavelengths under every scaling",
  blurb: "The wavelength 2π/ω of every pair under each long-context scaling, against the trained and the extended context: the pairs whose wavelength a scaling stretches are those it changes.",
  applies: (s) => s.components.includes("inv_freq") && (paramNamed(s, "scaling")?.choices?.length ?? 0) > 1 && offers(s, "table"),
  async draw(ctx, slot) {
    const choices = paramNamed(ctx.scheme, "scaling")?.choices ?? [];
    const filled: Query = { ...COMPARISON_FALLBACK };
    for (const name of Object.keys(filled)) if (ctx.params[name]) filled[name] = ctx.params[name];
    const trained = Number(filled.original_max_position_embeddings), extended = trained * Number(filled.factor);
    const h = Math.floor(Number(ctx.params.d_model ?? 2) / 2);
    const queries = choices.map((scaling) => {
      const q: Query = { ...ctx.params, ...filled, scaling, component: "inv_freq", dtype: "float64", seq_len: String(extended), offset: "0" };
      // Per-pair factors are a model's own; without them the comparison draws an illustrative ramp.
      for (const p of ctx.scheme.parameters) {
        if (p.type === "number list" && !ctx.params[p.name] && p.rule.startsWith(scaling)) {
          q[p.name] = Array.from({ length: h }, (_, i) => (p.name.startsWith("long") ? Number(filled.factor) ** (i / Math.max(h - 1, 1)) : 1).toPrecision(6)).join(",");
        }
      }
      return q;
    });
    const answers = await Promise.allSettled(queries.map((q) => applicable(ctx, q)));
    slot.urls(...queries.map((q) => ctx.api.url(ctx.scheme.name, "table", q)));
    const lines = answers.flatMap((answer, i) => answer.status === "fulfilled"
      ? [{ type: "scatter", mode: "lines+markers", name: choices[i], y: (answer.value.data as number[]).map((w) => TAU / w), marker: { size: 4 } }]
      : []);
    const refused = answers.map((a, i) => (a.status === "rejected" ? `${choices[i]}: ${(a.reason as Error).message}` : "")).filter(Boolean);
    const context = (y: number, text: string) => ({ type: "line", xref: "paper", x0: 0, x1: 1, y0: y, y1: y, line: { dash: "dash", color: "#555", width: 1 }, label: { text, textposition: "start", font: { size: 11 } } });
    await Plotly.newPlot(slot.plot("wavelength per pair under each scaling, log scale"), lines, layout(`factor ${filled.factor}, trained context ${trained}`, "pair i", "wavelength (positions)", {
      yaxis: { type: "log", title: { text: "wavelength (positions)" } },
      shapes: [context(trained, `trained context ${trained}`), context(extended, `extended ${extended}`)],
    }), CONFIG);
    if (refused.length) slot.block("p").textContent = `Not drawn — ${refused.join("; ")}`;
    slot.section.dataset.traces = String(lines.length);
  },
};

// Positions spread over the whole range, so growth with the position shows on a log axis.
const SPREAD = Array.from(new Set(Array.from({ length: 63 }, (_, k) => Math.min(Math.round(2 ** (k / 2)), 2 ** 31 - 1)))).join(",");

// Whose computation each recipe is, as the page names it; a recipe not listed is named by itself,
// and recipes naming one runtime (framework and its alias transformers) are one line.
const RUNTIMES: Record<string, string> = { framework: "transformers", transformers: "transformers", ggml: "llama.cpp", mlx: "MLX" };
const runtimeOf = (recipe: string) => RUNTIMES[recipe] ?? recipe;
const possessive = (name: string) => (name.endsWith("s") ? `${name}'` : `${name}'s`);

/** The recipes of `scheme` the precision view draws against `exact`: one per runtime. */
export function recipes(scheme: Scheme): string[] {
  const offered = (paramNamed(scheme, "recipe")?.choices ?? []).filter((r) => r !== "exact");
  return offered.filter((r, k) => offered.findIndex((o) => runtimeOf(o) === runtimeOf(r)) === k);
}

// A parameter whose rule opens with `recipe=<name>` belongs to that recipe alone (freq_factors
// to ggml, framework_precision to framework): the other recipes are asked without it.
function forRecipe(scheme: Scheme, params: Query, recipe: string): Query {
  const query = { ...params };
  for (const p of scheme.parameters) {
    if (p.rule.startsWith("recipe=") && !p.rule.startsWith(`recipe=${recipe}`)) delete query[p.name];
  }
  return { ...query, recipe };
}

const RUNTIME_DASHES = ["solid", "dash", "dashdot", "longdash"];
const RUNTIME_MARKERS = ["circle-open", "square-open", "diamond-open", "triangle-up-open"];

const precision: View = {
  id: "view-precision",
  title: "Precision: every runtime's recipe against the exact table",
  blurb: "Largest error per position against a float64 reference: the float32 computations of transformers, llama.cpp and MLX drift with the position, each its own way; the service's exact float32 table stays within half an ulp. A recipe the runtime does not implement for these parameters is left out, and the note says why.",
  applies: (s) => (paramNamed(s, "recipe")?.choices ?? []).includes("exact") && recipes(s).length > 0 && offers(s, "encode"),
  async draw(ctx, slot) {
    const base = { ...ctx.params, positions: SPREAD };
    const runtimes = recipes(ctx.scheme);
    const exactQuery = (dtype: string) => ({ ...forRecipe(ctx.scheme, base, "exact"), dtype });
    const queries = [exactQuery("float64"), exactQuery("float32"), ...runtimes.map((r) => ({ ...forRecipe(ctx.scheme, base, r), dtype: "float32" }))];
    slot.urls(...queries.map((q) => ctx.api.url(ctx.scheme.name, "encode", q)));
    const answers = await Promise.allSettled(queries.map((q) => ctx.api.get(ctx.scheme.name, "encode", q, ctx.signal)));
    // The exact table is the view; a runtime's refusal (422) of these parameters is a note.
    const refusal = (a: PromiseSettledResult<Envelope>, k: number) => a.status === "rejected" && k >= 2 && a.reason instanceof ApiError && a.reason.status === 422;
    const failed = answers.find((a, k) => a.status === "rejected" && !refusal(a, k));
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const [reference, exact] = answers.map((a) => (a.status === "fulfilled" ? a.value : undefined)) as Envelope[];
    const flat = (body: Envelope): number[][] => {
      // Positions along the first axis of the table, or the second in a stack (cos, sin).
      const data = body.data as number[][] | number[][][];
      if (body.shape.length === 2) return data as number[][];
      const stack = data as number[][][];
      return stack[0].map((_, p) => stack.flatMap((slice) => slice[p]));
    };
    const ref = flat(reference);
    // JSON holds float32 values in their shortest form: Math.fround recovers them exactly.
    const errors = (body: Envelope) => flat(body).map((row, p) => Math.max(...row.map((v, j) => Math.abs(Math.fround(v) - ref[p][j]))));
    const positions = SPREAD.split(",").map(Number);
    const line = (name: string, e: number[], dash = "solid", symbol = "circle") => ({
      type: "scatter", mode: "lines+markers", name, x: positions, y: e.map((v) => (v > 0 ? v : null)), line: { dash }, marker: { size: 5, symbol },
    });
    // Runtimes often agree to within a few ulps: a dash and a marker each keep overlapping lines apart.
    const drawn = runtimes.flatMap((recipe, k) => {
      const answer = answers[k + 2];
      return answer.status === "fulfilled"
        ? [line(`${runtimeOf(recipe)} float32 (recipe=${recipe})`, errors(answer.value), RUNTIME_DASHES[k % RUNTIME_DASHES.length], RUNTIME_MARKERS[k % RUNTIME_MARKERS.length])]
        : [];
    });
    const refused = runtimes.flatMap((recipe, k) => {
      const answer = answers[k + 2];
      if (answer.status === "fulfilled") return [];
      const detail = (answer.reason as ApiError).problem.detail;
      return [{ recipe, why: typeof detail === "string" && detail ? detail : (answer.reason as Error).message }];
    });
    const lines = [
      ...drawn,
      line("exact float32 table (this service)", errors(exact)),
      line("2⁻²⁴ · position (a float32 angle for ω = 1)", positions.map((p) => p * 2 ** -24), "dot"),
    ];
    await Plotly.newPlot(slot.plot("error by position of each runtime's recipe and of the exact table, log scales"), lines, layout("largest error per position", "position", "max |value − exact|", {
      xaxis: { type: "log", title: { text: "position" } }, yaxis: { type: "log", title: { text: "max |value − exact|" }, exponentformat: "power" },
    }), CONFIG);
    if (refused.length) {
      const note = slot.block("p");
      note.classList.add("refused");
      note.textContent = `Not drawn — ${refused.map((r) => `${runtimeOf(r.recipe)} (recipe=${r.recipe}): ${r.why}`).join("; ")}`;
    }
    slot.section.dataset.traces = String(drawn.length + 1);
    slot.section.dataset.refused = refused.map((r) => r.recipe).join(" ");
  },
};

const pairwise: View = {
  id: "view-pairwise",
  title: "The pairwise array, slice by slice",
  blurb: "A scheme with no vector per position gives one value per pair (i, j): each slice of the stack as a map, and the middle row against the relative position j − i (a step line for integer values).",
  applies: (s) => !s.similarity && offers(s, "table"),
  async draw(ctx, slot) {
    const body = await tableJson(ctx, slot, { ...ctx.params, ...ctx.rows });
    const stack = body.shape.length === 3 ? (body.data as number[][][]) : [body.data as number[][]];
    // A 1-D component as long as the stack labels its slices (one slope per head).
    const labels: string[] = stack.map((_, k) => `${ctx.scheme.components[0] ?? "value"}[${k}]`);
    for (const name of ctx.scheme.components.slice(1)) {
      const other = await tableJson(ctx, slot, { ...ctx.params, ...ctx.rows, component: name });
      if (other.shape.length === 1 && other.shape[0] === stack.length) {
        (other.data as number[]).forEach((v, k) => { labels[k] += `, ${name} ${v.toPrecision(4)}`; });
      }
    }
    const shown = stack.slice(0, 8);
    const columns = Math.min(shown.length, 4), rowsOfPanels = Math.ceil(shown.length / columns);
    // One colour scale for every slice, so that the slices can be compared by eye.
    const all = shown.flat(2);
    const [zmin, zmax] = [all.reduce((a, b) => Math.min(a, b)), all.reduce((a, b) => Math.max(a, b))];
    const maps = shown.map((z, k) => ({ type: "heatmap", z, zmin, zmax, xaxis: `x${k ? k + 1 : ""}`, yaxis: `y${k ? k + 1 : ""}`, colorscale: "Viridis", showscale: k === 0, name: labels[k] }));
    const annotations = shown.map((_, k) => ({ text: labels[k], showarrow: false, font: { size: 10 }, xref: `x${k ? k + 1 : ""} domain`, yref: `y${k ? k + 1 : ""} domain`, x: 0.5, y: 1.12 }));
    const grid = layout("", "", "", { grid: { rows: rowsOfPanels, columns, pattern: "independent" }, annotations, height: 220 * rowsOfPanels + 60 });
    for (let k = 0; k < shown.length; k++) (grid as Record<string, object>)[`yaxis${k ? k + 1 : ""}`] = { autorange: "reversed" };
    const maps_node = slot.plot(`${shown.length} maps of the pairwise array`, "maps");
    maps_node.style.height = `${220 * rowsOfPanels + 60}px`;
    await Plotly.newPlot(maps_node, maps, grid, CONFIG);
    const n = stack[0].length, i = Math.floor(n / 2);
    const integer = body.dtype.startsWith("int");
    const lines = stack.map((z, k) => ({ type: "scatter", mode: "lines", name: labels[k], x: z[i].map((_, j) => j - i), y: z[i], line: { shape: integer ? "hv" : "linear" } }));
    await Plotly.newPlot(slot.plot("the middle row against the relative position", "profile"), lines, layout(`row i = ${i} against j − i`, "relative position j − i", "value"), CONFIG);
  },
};

interface Check { name: string; holds: boolean; value: number | null; tolerance: number; detail: string }
interface Statistic { name: string; value: unknown; detail: string }

const fmt = (v: unknown) => (typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toPrecision(4)) : Array.isArray(v) ? v.join(", ") : String(v ?? "—"));

function tableOf(slot: Slot, caption: string, head: string[], rows: (string | [string, string])[][]): HTMLTableElement {
  const tableNode = slot.block("table");
  tableNode.tabIndex = 0; // scrolls sideways on a phone: reachable by keyboard
  tableNode.createCaption().textContent = caption;
  const tr = tableNode.createTHead().insertRow();
  for (const h of head) tr.append(Object.assign(document.createElement("th"), { textContent: h, scope: "col" }));
  const body = tableNode.createTBody();
  for (const row of rows) {
    const r = body.insertRow();
    for (const cell of row) {
      const td = r.insertCell();
      if (Array.isArray(cell)) [td.textContent, td.className] = cell;
      else td.textContent = cell;
    }
  }
  return tableNode;
}

const verify: View = {
  id: "view-verify",
  title: "What holds, measured",
  blurb: "The checks of verify on the very table served above; statistics are descriptive.",
  applies: (s) => offers(s, "verify"),
  async draw(ctx, slot) {
    const query = { ...ctx.params, ...ctx.rows };
    slot.urls(ctx.api.url(ctx.scheme.name, "verify", query));
    const report = await ctx.api.get<{ checks: Check[]; statistics: Statistic[] }>(ctx.scheme.name, "verify", query, ctx.signal);
    const checks = tableOf(slot, "checks", ["check", "holds", "measured", "tolerance", "what it means"], report.checks.map((c) => [
      c.name, [c.holds ? "pass" : "fail", c.holds ? "pass" : "fail"], fmt(c.value), fmt(c.tolerance), c.detail,
    ]));
    checks.id = "verify-table";
    checks.querySelectorAll("tbody tr").forEach((tr, k) => { (tr as HTMLElement).dataset.check = report.checks[k].name; });
    tableOf(slot, "statistics", ["statistic", "value", "what it means"], report.statistics.map((s) => [s.name, fmt(s.value), s.detail]));
  },
};

export interface Conformance {
  conforms: boolean;
  max_abs_error: number;
  max_ulp_error: number;
  first_bad_position: number | null;
  error_by_position: number[];
  diagnosis: { name: string; summary: string; evidence: Record<string, unknown> }[];
  params: Query;
}

// The findings that recognise a runtime's own float32 computation in a cache: transformers' by
// its own name, any other by the recipe its evidence names.
function recognised(diagnosis: readonly Finding[]): { name: string; finding: Finding } | undefined {
  for (const finding of diagnosis) {
    const named = finding.evidence.recipe;
    if (finding.name === "matches_recipe" && typeof named === "string") return { name: named, finding };
    if (finding.name === "matches_framework_recipe") return { name: typeof named === "string" ? named : "framework", finding };
  }
  return undefined;
}

export const drop: View & { send(ctx: Context, slot: Slot, body: BodyInit, type: string): Promise<void> } = {
  id: "view-drop",
  title: "Drop your cache here",
  blurb: "Drag a .npy file your own code built (or choose one, or paste JSON {\"data\": [[…]]}): it is checked against the exact table for the parameters above, starting at offset, and the report says what went wrong.",
  applies: (s) => s.conformance && offers(s, "verify"),
  async draw(_ctx, slot) {
    slot.done("waiting");
  },
  async send(ctx, slot, body, type) {
    slot.reset();
    delete slot.section.dataset.recipe;
    const query: Query = { ...ctx.params, ...(ctx.rows.offset ? { offset: ctx.rows.offset } : {}), ...component(ctx) };
    slot.urls(ctx.api.url(ctx.scheme.name, "verify", query));
    try {
      const report = await ctx.api.post<Conformance>(ctx.scheme.name, "verify", query, body, type);
      const verdict = slot.block("p");
      verdict.className = `report verdict ${report.conforms ? "pass" : "fail"}`;
      verdict.textContent = report.conforms
        ? `Conforms: every value within tolerance (largest error ${fmt(report.max_abs_error)}, ${fmt(report.max_ulp_error)} ulp).`
        : `Does not conform: largest error ${fmt(report.max_abs_error)} (${fmt(report.max_ulp_error)} ulp), first bad position ${fmt(report.first_bad_position)}.`;
      const recipe = recognised(report.diagnosis);
      if (recipe) {
        const named = slot.block("p");
        named.className = "report recipe";
        const distance = recipe.finding.evidence.max_abs_error_from_exact;
        named.textContent = `This is ${possessive(runtimeOf(recipe.name))} rope (recipe=${recipe.name})`
          + (typeof distance === "number" ? `: up to ${fmt(distance)} from the exact values.` : ".");
        verdict.before(named); // the headline: what the cache is, then how far it is from exact
        slot.section.dataset.recipe = recipe.name;
      }
      writeFindings(slot.block("ul"), report.diagnosis, report.conforms, fmt, (name) => name.replaceAll("_", " "));
      const start = Number(report.params?.offset ?? 0);
      const trace = { type: "scatter", mode: "lines", name: "error", x: report.error_by_position.map((_, k) => start + k), y: report.error_by_position.map((v) => (v > 0 ? v : null)) };
      await Plotly.newPlot(slot.plot("error of the dropped table by position, log scale"), [trace], layout("largest error per position", "position", "max abs error", { yaxis: { type: "log", exponentformat: "power", title: { text: "max abs error" } } }), CONFIG);
      slot.section.dataset.findings = report.diagnosis.map((f) => f.name).join(" ");
      slot.done();
    } catch (error) {
      slot.fail(error);
    }
  },
};

export const VIEWS: View[] = [table, rotation, dot, scalings, precision, waves, vectors, similarity, wavelengths, pairwise, verify, drop];
