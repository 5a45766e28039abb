// The page: controls from /v1/schemes, state in the URL (a model's config in its fragment), every
// view drawn from the API.
import { Api, loadSchemes, type Scheme } from "./api";
import { AppliedPanel } from "./applied";
import { apiParameters, build, fromUrl, read, type State, toUrl } from "./controls";
import { GgufPanel } from "./gguf";
import { OnnxPanel } from "./onnx";
import { LayoutPanel } from "./layout";
import { ModelPanel } from "./model";
import { type Context, drop, rotation, Slot, VIEWS } from "./views";

const slots = new Map<string, Slot>();
let schemes: Scheme[] = [];
let api: Api;
let current: AbortController | undefined;
let generation = 0;
let panel: ModelPanel | undefined;
let layouts: LayoutPanel | undefined;
let drawnSearch = ""; // the query the views were drawn for: a fragment's change redraws none of them

/** The panels' state, as the link's fragment. */
function fragment(): string {
  const parts = [panel?.fragment() ?? "", layouts?.fragment() ?? ""].map((f) => f.replace(/^#/, "")).filter(Boolean);
  return parts.length ? `#${parts.join("&")}` : "";
}

/** Write the address bar: the controls' query (or `url`) and the panels' fragments. */
function address(push: boolean, url = location.pathname + location.search): void {
  const full = url + fragment();
  if (push) history.pushState(null, "", full);
  else history.replaceState(null, "", full);
  drawnSearch = location.search;
}

function sections(): void {
  const main = document.getElementById("views") as HTMLElement;
  const nav = document.getElementById("toc") as HTMLElement;
  for (const view of VIEWS) {
    const section = Object.assign(document.createElement("section"), { id: view.id, className: "view" });
    section.setAttribute("aria-labelledby", `${view.id}-title`);
    const title = Object.assign(document.createElement("h2"), { id: `${view.id}-title`, textContent: view.title });
    const blurb = Object.assign(document.createElement("p"), { textContent: view.blurb });
    const bar = Object.assign(document.createElement("div"), { className: "api" });
    section.append(title, blurb);
    if (view === rotation) section.append(slider());
    if (view === drop) section.append(dropZone());
    section.append(bar);
    main.append(section);
    slots.set(view.id, new Slot(section));
    const item = document.createElement("li");
    item.append(Object.assign(document.createElement("a"), { href: `#${view.id}`, textContent: view.title }));
    nav.append(item);
  }
  // The scheme that reads a model's config, if one does: the panel is the page's, not a scheme view.
  const reader = schemes.find((s) => s.endpoints?.includes("config"));
  if (reader) {
    panel = new ModelPanel(api, reader, (push) => address(push), (href) => {
      // The rope's link holds the model panel's fragment; the layout panel's stays too.
      const url = new URL(href, location.href);
      history.pushState(null, "", url.pathname + url.search + fragment());
      restore();
      document.getElementById("controls")?.scrollIntoView();
    });
    main.append(panel.section);
    const item = document.createElement("li");
    item.append(Object.assign(document.createElement("a"), { href: `#${panel.section.id}`, textContent: ModelPanel.title }));
    nav.append(item);
  }
  // The panels of the operations that read what a runtime was given, each where a scheme
  // offers it: a GGUF file's prefix, a kernel's input and output, an ONNX model's graph.
  const readers = [["gguf", GgufPanel], ["applied", AppliedPanel], ["onnx", OnnxPanel]] as const;
  for (const [endpoint, Reader] of readers) {
    const scheme = schemes.find((s) => s.endpoints?.includes(endpoint));
    if (!scheme) continue;
    const reading = new Reader(api, scheme);
    main.append(reading.section);
    const item = document.createElement("li");
    item.append(Object.assign(document.createElement("a"), { href: `#${reading.section.id}`, textContent: Reader.title }));
    nav.append(item);
  }
  // The scheme that gives a multimodal layout's ids, if one does.
  const positions = schemes.find((s) => s.endpoints?.includes("positions"));
  if (positions) {
    layouts = new LayoutPanel(api, positions, (push) => address(push));
    main.append(layouts.section);
    const item = document.createElement("li");
    item.append(Object.assign(document.createElement("a"), { href: `#${layouts.section.id}`, textContent: LayoutPanel.title }));
    nav.append(item);
  }
}

function slider(): HTMLElement {
  const label = Object.assign(document.createElement("label"), { className: "slider" });
  const input = Object.assign(document.createElement("input"), { type: "range", name: "position", min: "0", max: "2048", step: "1" });
  input.setAttribute("form", "controls"); // a control like any other: it goes into the link
  const output = document.createElement("output");
  output.setAttribute("aria-live", "polite");
  input.addEventListener("input", () => { output.textContent = input.value; });
  label.append(Object.assign(document.createElement("span"), { textContent: "position " }), input, output);
  return label;
}

function dropZone(): HTMLElement {
  const zone = Object.assign(document.createElement("div"), { className: "dropzone", id: "dropzone" });
  const file = Object.assign(document.createElement("input"), { type: "file", id: "cache-file", accept: ".npy,.json,application/json" });
  const fileLabel = Object.assign(document.createElement("label"), { htmlFor: "cache-file", textContent: "Drop a .npy or .json file here, or choose one: " });
  const paste = Object.assign(document.createElement("textarea"), { id: "cache-json", rows: 3, placeholder: '{"data": [[0, 1, …], …]}' });
  const pasteLabel = Object.assign(document.createElement("label"), { htmlFor: "cache-json", textContent: "or paste JSON:" });
  const send = Object.assign(document.createElement("button"), { type: "button", textContent: "verify the pasted JSON" });
  zone.append(fileLabel, file, pasteLabel, paste, send);
  file.addEventListener("change", () => { if (file.files?.[0]) void verifyFile(file.files[0]); });
  send.addEventListener("click", () => void verifyBody(paste.value, "application/json"));
  zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    const dropped = event.dataTransfer?.files?.[0];
    if (dropped) void verifyFile(dropped);
  });
  return zone;
}

async function verifyFile(file: File): Promise<void> {
  const bytes = await file.arrayBuffer();
  const magic = new Uint8Array(bytes.slice(0, 6));
  const npy = magic[0] === 0x93 && String.fromCharCode(...magic.slice(1)) === "NUMPY";
  await verifyBody(npy ? bytes : new TextDecoder().decode(bytes), npy ? "application/x-npy" : "application/json");
}

async function verifyBody(body: BodyInit, type: string): Promise<void> {
  const ctx = context(read(schemes), new AbortController().signal);
  await drop.send(ctx, slots.get(drop.id) as Slot, body, type);
}

function context(state: State, signal: AbortSignal): Context {
  const scheme = schemes.find((s) => s.name === state.scheme) ?? schemes[0];
  return { api, scheme, ...apiParameters(scheme, state.values), values: state.values, signal };
}

async function draw(state: State): Promise<void> {
  current?.abort();
  current = new AbortController();
  const mine = ++generation;
  document.body.dataset.ready = "false";
  const ctx = context(state, current.signal);
  document.title = `posenc — ${ctx.scheme.name}`;
  const work = VIEWS.map(async (view) => {
    const slot = slots.get(view.id) as Slot;
    const shown = view.applies(ctx.scheme);
    slot.section.hidden = !shown;
    (document.querySelector(`#toc a[href="#${view.id}"]`)?.parentElement as HTMLElement).hidden = !shown;
    if (!shown) return;
    slot.reset();
    try {
      await view.draw(ctx, slot);
      if (!ctx.signal.aborted && slot.section.dataset.state === "loading") slot.done();
    } catch (error) {
      if (!ctx.signal.aborted) slot.fail(error);
    }
  });
  await Promise.all(work);
  if (mine === generation) document.body.dataset.ready = "true";
}

let sliding: AbortController | undefined;
async function slide(): Promise<void> {
  const state = read(schemes);
  address(false, toUrl(state));
  sliding?.abort();
  sliding = new AbortController();
  const slot = slots.get(rotation.id) as Slot;
  slot.section.setAttribute("aria-busy", "true");
  try {
    await rotation.move(context(state, sliding.signal), slot);
    slot.done();
  } catch (error) {
    if (!sliding.signal.aborted) slot.fail(error);
  }
}

function restore(): void {
  panel?.restore(location.hash);
  layouts?.restore(location.hash);
  if (location.search === drawnSearch) return;
  drawnSearch = location.search;
  build(schemes, fromUrl());
  syncOutput();
  void draw(read(schemes));
}

/** An in-page link scrolls to its target and leaves the address bar alone: the fragment holds
 * the model's config, which a jump to a view must not drop. */
function jump(event: MouseEvent): void {
  const link = (event.target as Element | null)?.closest?.("a[href^='#']");
  if (!link || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const target = document.getElementById(decodeURIComponent((link.getAttribute("href") ?? "").slice(1)));
  if (!target) return;
  event.preventDefault();
  if (!target.hasAttribute("tabindex")) target.tabIndex = -1;
  target.focus({ preventScroll: true });
  target.scrollIntoView();
}

function syncOutput(): void {
  const slider = document.querySelector<HTMLInputElement>("input[name=position]");
  const output = slider?.parentElement?.querySelector("output");
  if (slider && output) output.textContent = slider.value;
}

async function start(): Promise<void> {
  try {
    schemes = await loadSchemes();
  } catch (error) {
    document.getElementById("views")?.replaceChildren(Object.assign(document.createElement("p"), { className: "state", textContent: `The list of schemes could not be loaded: ${(error as Error).message}` }));
    document.body.dataset.ready = "true";
    return;
  }
  api = new Api(new Map(schemes.map((s) => [s.name, s])));
  sections();
  const form = document.getElementById("controls") as HTMLFormElement;
  form.addEventListener("submit", (event) => event.preventDefault());
  document.addEventListener("change", (event) => {
    const target = event.target as HTMLInputElement;
    if (target.form !== form || target.name === "position") return;
    let state = read(schemes);
    if (target.name === "scheme") { build(schemes, state); state = read(schemes); }
    address(true, toUrl(state));
    void draw(state);
  });
  document.addEventListener("input", (event) => {
    if ((event.target as HTMLInputElement).name === "position") void slide();
  });
  window.addEventListener("popstate", restore);
  document.addEventListener("click", jump);
  const initial = fromUrl();
  build(schemes, initial);
  const state = read(schemes);
  panel?.restore(location.hash); // reads the link's config, and posts it beside the views' requests
  layouts?.restore(location.hash);
  address(false, toUrl(state));
  syncOutput();
  await draw(state);
}

void start();
