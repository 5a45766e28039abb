// The controls, built from `GET /v1/schemes`, and their round trip through the page's URL:
// every control is a query parameter, so a link restores the view it was copied from.
import type { Parameter, Query, Scheme } from "./api";

// Values for what the contract leaves to the caller (required parameters, the rows, the views).
const PAGE_DEFAULTS: Record<string, string> = {
  d_model: "48", // even, and divisible by 4 and 6: valid for every scheme's d_model rule
  seq_len: "100",
  offset: "0",
  dims: "0,1,8,20",
  positions: "0,10,50",
  position: "10",
};
// Shown inline; the rest of a scheme's parameters fold into "more parameters".
const INLINE = 6;

export interface State {
  scheme: string;
  values: Query; // every control with a value, in form order; blank ones are left out
}

// The service's own default: left out of API requests (a parameter that does not apply to the
// other choices, like fairseq's padding_idx, is refused when given) and out of links.
const serviceDefault = (p: Parameter, value: string) => p.default !== null && p.default !== undefined && String(p.default) === value;

const form = () => document.getElementById("controls") as HTMLFormElement;

function defaultFor(p: Parameter): string {
  if (p.name in PAGE_DEFAULTS) return PAGE_DEFAULTS[p.name];
  const sides = /(\d+) sides/.exec(p.rule); // a grid: its rule says how many sides
  if (p.type === "integer list" && sides) return Array(Number(sides[1])).fill("8").join(",");
  return p.default === null || p.default === undefined ? "" : String(p.default);
}

let hints = 0;
function field(p: Parameter, value: string): HTMLElement {
  const label = document.createElement("label");
  const name = Object.assign(document.createElement("span"), { textContent: p.name });
  let input: HTMLInputElement | HTMLSelectElement;
  const choices = p.choices ?? (p.type === "boolean" ? ["true", "false"] : null);
  if (choices) {
    input = document.createElement("select");
    for (const choice of choices) input.append(new Option(choice, choice));
  } else {
    input = document.createElement("input");
    if (p.type === "integer" || p.type === "number") {
      input.type = "number";
      input.step = p.type === "integer" ? "1" : "any";
      if (p.minimum !== null) input.min = String(p.minimum);
      if (p.maximum !== null) input.max = String(p.maximum);
    } else {
      input.inputMode = "decimal";
      input.pattern = "[-0-9.eE, ]*";
    }
    if (p.default === null && /required/.test(p.rule) && !/\(required\)/.test(p.rule)) input.required = true;
  }
  input.name = p.name;
  input.value = value;
  const hint = Object.assign(document.createElement("small"), { id: `hint-${++hints}`, textContent: p.rule });
  input.setAttribute("aria-describedby", hint.id);
  label.append(name, input, hint);
  return label;
}

function rowParameters(scheme: Scheme): Parameter[] {
  if (scheme.parameters.some((p) => p.type === "integer list" && /sides/.test(p.rule))) return [];
  const integer = (name: string, rule: string, minimum: number): Parameter =>
    ({ name, type: "integer", default: null, rule, minimum, maximum: 2 ** 31 - 1, choices: null });
  return [integer("seq_len", "how many positions", 1), integer("offset", "the first position", 0)];
}

function viewParameters(scheme: Scheme): Parameter[] {
  const list = (name: string, rule: string): Parameter =>
    ({ name, type: "integer list", default: null, rule, minimum: null, maximum: null, choices: null });
  const component: Parameter[] = scheme.components.length
    ? [{ name: "component", type: "string", default: scheme.components[0], rule: "which array the table shows", minimum: null, maximum: null, choices: scheme.components }]
    : [];
  const vectors = scheme.similarity ? [list("dims", "dimensions drawn as waves"), list("positions", "positions drawn as vectors")] : [];
  return [...component, ...vectors];
}

/** Rebuild the form for `scheme`, each control taking its value from `values` or its default. */
export function build(schemes: Scheme[], state: State): void {
  const scheme = schemes.find((s) => s.name === state.scheme) ?? schemes[0];
  const valueOf = (p: Parameter) => state.values[p.name] ?? defaultFor(p);
  const root = form();
  const pick = field({ name: "scheme", type: "string", default: null, rule: scheme.summary, minimum: null, maximum: null, choices: schemes.map((s) => s.name) }, scheme.name);
  const own = scheme.parameters.map((p) => field(p, valueOf(p)));
  const rows = rowParameters(scheme).map((p) => field(p, valueOf(p)));
  const views = viewParameters(scheme).map((p) => field(p, valueOf(p)));
  const more = document.createElement("details");
  more.append(Object.assign(document.createElement("summary"), { textContent: `more ${scheme.name} parameters (${Math.max(own.length - INLINE, 0)})` }), ...own.slice(INLINE));
  more.open = scheme.parameters.slice(INLINE).some((p) => state.values[p.name] !== undefined && state.values[p.name] !== defaultFor(p));
  const group = (legend: string, nodes: Node[]) => {
    const set = document.createElement("fieldset");
    set.append(Object.assign(document.createElement("legend"), { textContent: legend }), ...nodes);
    return set;
  };
  root.replaceChildren(
    group("encoding", [pick, ...own.slice(0, INLINE), ...(own.length > INLINE ? [more] : [])]),
    group("positions and views", [...rows, ...views]),
  );
  const slider = document.querySelector<HTMLInputElement>("input[name=position]");
  if (slider) slider.value = state.values.position ?? PAGE_DEFAULTS.position;
}

/** What the controls say now (form controls and the view controls tied to the form), leaving
 * out a scheme parameter at the service's default: a link and a request say what was chosen. */
export function read(schemes: Scheme[]): State {
  const values: Query = {};
  const chosen = (form().elements.namedItem("scheme") as HTMLSelectElement).value;
  const scheme = schemes.find((s) => s.name === chosen) ?? schemes[0];
  const all = [...scheme.parameters, ...rowParameters(scheme), ...viewParameters(scheme)];
  for (const element of Array.from(form().elements) as HTMLInputElement[]) {
    const value = (element.value ?? "").trim();
    const p = all.find((q) => q.name === element.name);
    if (!element.name || element.name === "scheme" || value === "") continue;
    if (p && p.default !== null && serviceDefault(p, value)) continue;
    values[element.name] = value;
  }
  return { scheme: scheme.name, values };
}

export function fromUrl(): State {
  const query = new URLSearchParams(location.search);
  const values: Query = {};
  query.forEach((value, key) => { if (key !== "scheme") values[key] = value; });
  return { scheme: query.get("scheme") ?? "", values };
}

export function toUrl(state: State): string {
  const query = new URLSearchParams({ scheme: state.scheme, ...state.values });
  return `${location.pathname}?${query.toString().replace(/%2C/gi, ",")}`;
}

/** The parameters an API request takes from the controls: the scheme's own, and the rows. */
export function apiParameters(scheme: Scheme, values: Query): { params: Query; rows: Query } {
  const pick = (names: string[]) => Object.fromEntries(names.filter((n) => values[n] !== undefined).map((n) => [n, values[n]]));
  return {
    params: pick(scheme.parameters.map((p) => p.name)),
    rows: pick(rowParameters(scheme).map((p) => p.name)),
  };
}

export const numbers = (text: string | undefined): number[] =>
  (text ?? "").split(",").map((v) => Number.parseInt(v, 10)).filter(Number.isFinite);
