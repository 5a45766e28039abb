// The page in a real browser: Debian's chromium driven by playwright-core, against a live server.
// What issue 16 asks of it: links restore every control and imply the API requests, the rotation
// follows the slider, q·k is the service's /similarity, a dropped faulty cache gets its diagnosis,
// every view is photographed at desktop and phone width, and axe finds nothing serious. Issue 22:
// a pasted config.json shows every rope of the model with its layers, its link (the config in the
// fragment) restores the view in a fresh page, and a refused config names the field. Issue 23: a
// multimodal layout is drawn cell by cell with the service's ids, and dropped ids are diagnosed.
// Issue 33: a GGUF file of 4 GiB is read from its first bytes alone, and checked beside its config;
// a file's ropes say what they turn, beside its MTP layers, its notes and the ropes no call states.
// Issue 40: a kernel's arrays dropped on their view: the verdict beside the angle error heatmap.
// Issue 42: an ONNX model's graph is sent, then only the cache rows the service names.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { deflateRawSync, inflateRawSync } from "node:zlib";
import { chromium } from "playwright-core";

const BASE = process.env.POSENC_URL;
const ARTIFACTS = process.env.POSENC_ARTIFACTS ?? "test-artifacts";
const AXE = join(dirname(fileURLToPath(import.meta.url)), "node_modules/axe-core/axe.min.js");
const FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const ORIGIN = new URL(BASE).origin;

let context;
let schemes;
before(async () => {
  mkdirSync(join(ARTIFACTS, "views"), { recursive: true });
  schemes = (await (await fetch(`${BASE}/v1/schemes`)).json()).schemes;
  context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "posenc-")), {
    executablePath: "/usr/bin/chromium", headless: true, args: FLAGS, viewport: { width: 1200, height: 900 },
  });
});
after(() => context?.close());

/** A page that records its API requests and fails the test on a script error or a foreign request. */
async function open(link, viewport) {
  const page = await context.newPage();
  if (viewport) await page.setViewportSize(viewport);
  const requests = [];
  const problems = [];
  page.on("pageerror", (error) => problems.push(error.message));
  page.on("request", (request) => {
    const url = new URL(request.url());
    if (url.origin !== ORIGIN && url.protocol !== "data:") problems.push(`a request left the service: ${url}`);
    if (url.pathname.startsWith("/v1/")) requests.push(url);
  });
  await page.goto(BASE + link);
  await page.waitForSelector("body[data-ready=true]", { timeout: 30000 });
  return { page, requests, problems };
}

// Where the page must send an operation: the per-scheme path once /v1/schemes lists endpoints.
function route(scheme, operation) {
  const perScheme = schemes.find((s) => s.name === scheme).endpoints !== undefined;
  return perScheme ? { path: `/v1/${scheme}/${operation}`, extra: {} } : { path: `/v1/${operation}`, extra: { scheme } };
}
const queryOf = (url) => Object.fromEntries(url.searchParams);
const ready = (page) => page.waitForSelector("body[data-ready=true]", { timeout: 30000 });

const ROPE = { scheme: "rope", d_model: "32", base: "500000", layout: "interleaved", scaling: "yarn", factor: "4",
  original_max_position_embeddings: "2048", beta_fast: "16", recipe: "framework", seq_len: "64", offset: "3",
  component: "cos", dims: "0,3", positions: "3,20", position: "77" };

test("a link restores every control and implies the API requests the page makes", async () => {
  const { page, requests, problems } = await open(`/?${new URLSearchParams(ROPE)}`);
  for (const [name, value] of Object.entries(ROPE)) {
    assert.equal(await page.locator(`[name=${name}]`).inputValue(), value, name);
  }
  assert.deepEqual(queryOf(new URL(page.url())), ROPE, "the address bar keeps the link");
  const own = ["d_model", "base", "layout", "scaling", "factor", "original_max_position_embeddings", "beta_fast", "recipe"];
  const params = Object.fromEntries(own.map((k) => [k, ROPE[k]]));
  const table = route("rope", "table");
  const heatmap = requests.find((u) => u.pathname === table.path && u.searchParams.get("format") === "plotly");
  assert.deepEqual(queryOf(heatmap), { ...table.extra, ...params, seq_len: "64", offset: "3", component: "cos", format: "plotly" });
  const verify = route("rope", "verify");
  assert.deepEqual(queryOf(requests.find((u) => u.pathname === verify.path)), { ...verify.extra, ...params, seq_len: "64", offset: "3" });
  const rotation = route("rope", "encode");
  const angle = requests.find((u) => u.pathname === rotation.path && u.searchParams.get("component") === "angle");
  assert.deepEqual(queryOf(angle), { ...rotation.extra, ...params, positions: "77", component: "angle", dtype: "float64" });
  // Every request carries the link's encoding; only the views' own comparisons vary one of them.
  for (const url of requests.filter((u) => u.pathname !== "/v1/schemes")) {
    for (const k of ["d_model", "base", "layout"]) assert.equal(url.searchParams.get(k), ROPE[k], `${k} in ${url}`);
  }

  // A change is a new history entry; back restores the controls and redraws from the API.
  const before = requests.length;
  await page.selectOption("[name=layout]", "split");
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get("layout"), null, "split is rope's default: not in the link");
  assert.ok(requests.slice(before).every((u) => u.pathname === "/v1/schemes" || !u.searchParams.has("layout")));
  const drawn = requests.length;
  await page.goBack();
  await page.waitForFunction(() => document.querySelector("[name=layout]").value === "interleaved");
  await ready(page);
  assert.ok(requests.slice(drawn).some((u) => u.searchParams.get("layout") === "interleaved"));
  assert.deepEqual(problems, []);
  await page.close();
});

const points = (page) => page.evaluate(() => {
  const trace = document.querySelector("#view-rotation .plot").data[1];
  return { x: [...trace.x], y: [...trace.y] };
});

test("the rotation view moves with the position slider, by the service's angles", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32&position=10");
  const start = await points(page);
  const slider = page.locator("input[name=position]");
  await slider.focus();
  for (let k = 0; k < 5; k++) await page.keyboard.press("ArrowRight"); // keyboard operable
  await page.waitForSelector("#view-rotation[data-position='15']");
  await page.waitForFunction(() => !document.querySelector("#view-rotation").hasAttribute("aria-busy"));
  const moved = await points(page);
  assert.notDeepEqual(moved, start);
  assert.equal(new URL(page.url()).searchParams.get("position"), "15");
  const { path, extra } = route("rope", "encode");
  const body = await (await fetch(`${BASE}${path}?${new URLSearchParams({ ...extra, d_model: "16", positions: "15", component: "angle", dtype: "float64" })}`)).json();
  const theta = body.data[0];
  theta.forEach((t, i) => {
    const r = Math.hypot(moved.x[i], moved.y[i]);
    assert.ok(Math.abs(moved.x[i] - r * Math.cos(t)) < 1e-12 && Math.abs(moved.y[i] - r * Math.sin(t)) < 1e-12, `pair ${i}`);
  });
  // The fast pair turned by 5 rad, the slowest by almost nothing.
  const angleOf = (p, i) => Math.atan2(p.y[i], p.x[i]);
  assert.ok(Math.abs(angleOf(moved, theta.length - 1) - angleOf(start, theta.length - 1)) < 0.01);
  assert.deepEqual(problems, []);
  await page.close();
});

test("the q·k plot holds the service's /similarity numbers and depends on m − n alone", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=32&seq_len=80&offset=0");
  const traces = await page.evaluate(() => document.querySelector("#view-dot .plot").data.map((t) => ({ x: [...t.x], y: [...t.y] })));
  // The URLs the view shows: a random query and a different random key, the same on every load.
  const shown = await page.evaluate(() => [...document.querySelectorAll("#view-dot .api a")].map((a) => a.href));
  const { path } = route("rope", "similarity");
  assert.equal(shown.length, 2);
  const vectors = shown.map((url) => new URL(url).searchParams);
  assert.equal(vectors[0].get("vector").split(",").length, 32);
  assert.notEqual(vectors[0].get("vector"), vectors[0].get("key"));
  for (const [i, reference] of [0, 40].entries()) {
    const url = new URL(shown[i]);
    assert.equal(url.pathname, path);
    assert.equal(url.searchParams.get("reference"), String(reference));
    assert.equal(url.searchParams.get("vector"), vectors[0].get("vector"));
    const body = await (await fetch(url)).json();
    assert.deepEqual(traces[i].y, body.data, `reference ${reference}`);
    // m is the query's position (the reference), n the key's (the row): x = m − n.
    assert.deepEqual(traces[i].x, body.data.map((_, k) => reference - k));
  }
  // Where the two curves overlap, the same m − n gives the same q·k (float32 values).
  for (let k = 0; k < 40; k++) {
    const a = traces[0].y[k], b = traces[1].y[k + 40];
    assert.ok(Math.abs(a - b) <= 1e-5 * Math.max(1, Math.abs(a)), `m − n = ${k}: ${a} vs ${b}`);
  }
  assert.deepEqual(problems, []);
  await page.close();
});

/** A .npy file of the sinusoid with the wrong base: the mistake the service must name. */
function faultyCache(n, d, base) {
  const values = new Float32Array(n * d);
  for (let p = 0; p < n; p++) {
    for (let i = 0; 2 * i < d; i++) {
      const angle = p * base ** (-2 * i / d);
      values[p * d + 2 * i] = Math.sin(angle);
      if (2 * i + 1 < d) values[p * d + 2 * i + 1] = Math.cos(angle);
    }
  }
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${n}, ${d}), }`;
  header = header.padEnd(64 * Math.ceil((header.length + 11) / 64) - 11) + "\n";
  const prefix = Buffer.concat([Buffer.from([0x93]), Buffer.from("NUMPY"), Buffer.from([1, 0, header.length & 255, header.length >> 8]), Buffer.from(header, "latin1")]);
  return Buffer.concat([prefix, Buffer.from(values.buffer)]);
}

// Drops bytes on the page's drop zone as a user drops a file, and waits for the report.
async function dropOn(page, bytes) {
  const transfer = await page.evaluateHandle((data) => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(data)], "cache.npy", { type: "application/octet-stream" }));
    return dt;
  }, [...bytes]);
  await page.dispatchEvent("#dropzone", "drop", { dataTransfer: transfer });
  await page.waitForSelector("#view-drop[data-state=drawn]", { timeout: 30000 });
}

test("dropping a faulty cache shows its diagnosis; a malformed one, the service's message", async () => {
  const { page, requests, problems } = await open("/?scheme=sinusoidal&d_model=16&seq_len=64");
  await dropOn(page, faultyCache(64, 16, 100));
  const findings = (await page.getAttribute("#view-drop", "data-findings")).split(" ");
  assert.ok(findings.includes("base_mismatch"), findings.join(", "));
  const evidence = await page.locator("#view-drop li[data-finding=base_mismatch]").textContent();
  assert.match(evidence, /\b100(\.0+)?\b/, "the fitted base is shown");
  assert.match(await page.locator("#view-drop .verdict").textContent(), /Does not conform/);
  const post = requests.find((u) => u.pathname === route("sinusoidal", "verify").path && !u.searchParams.has("seq_len"));
  assert.equal(post.searchParams.get("d_model"), "16");
  await page.locator("#view-drop").screenshot({ path: join(ARTIFACTS, "views", "1200-sinusoidal-drop-report.png") });

  await page.fill("#cache-json", '{"data": [[0, 1], [0.8');
  await page.click("text=verify the pasted JSON");
  await page.waitForSelector("#view-drop[data-state=error]");
  assert.match(await page.locator("#view-drop .state").textContent(), /The service refused \(4\d\d\): \S/);
  assert.deepEqual(problems, []);
  await page.close();
});

// Issue 32: every runtime's float32 rope against the exact table, and a dropped cache named by
// the runtime whose computation it is.
const recipeChoices = () => schemes.find((s) => s.name === "rope").parameters.find((p) => p.name === "recipe").choices;
const precisionTraces = (page) => page.evaluate(() => document.querySelector("#view-precision .plot").data.map((t) => ({ name: t.name, y: [...t.y] })));
const precisionUrls = (page) => page.evaluate(() => [...document.querySelectorAll("#view-precision .api a")].map((a) => a.href));
/** Rows of positions (a stack's slices side by side), as the view compares them. */
const rowsOf = (body) => (body.shape.length === 2 ? body.data : body.data[0].map((_, p) => body.data.flatMap((slice) => slice[p])));

test("the precision view draws one line per runtime's recipe, with the service's numbers", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=32&scaling=llama3&factor=8&recipe=framework&seq_len=16");
  assert.equal(await page.getAttribute("#view-precision", "data-state"), "drawn");
  const traces = await precisionTraces(page);
  const urls = (await precisionUrls(page)).map((u) => new URL(u));
  const drawn = traces.map((t) => /\(recipe=(\w+)\)$/.exec(t.name)?.[1]).filter(Boolean);
  // Every recipe the parameter offers is drawn, by name (transformers is framework's other name,
  // so "transformers float32 (recipe=framework)" names both); none twice.
  for (const choice of recipeChoices().filter((c) => c !== "exact")) {
    assert.ok(traces.some((t) => t.name.includes(choice)), `no line for recipe=${choice}: ${traces.map((t) => t.name)}`);
  }
  assert.ok(drawn.includes("ggml") && drawn.includes("mlx") && drawn.includes("framework"), drawn.join(", "));
  assert.equal(new Set(drawn).size, drawn.length);
  assert.ok(traces.some((t) => t.name.startsWith("exact float32")));
  assert.equal(await page.getAttribute("#view-precision", "data-traces"), String(drawn.length + 1));
  assert.equal(await page.getAttribute("#view-precision", "data-refused"), "");
  assert.equal(await page.locator("#view-precision .refused").count(), 0);
  // Each line is its recipe's table against the float64 exact one, as the service serves them.
  const reference = urls.find((u) => u.searchParams.get("recipe") === "exact" && u.searchParams.get("dtype") === "float64");
  const ref = rowsOf(await (await fetch(reference)).json());
  for (const recipe of drawn) {
    const url = urls.find((u) => u.searchParams.get("recipe") === recipe);
    assert.equal(url.searchParams.get("dtype"), "float32");
    assert.equal(url.searchParams.get("scaling"), "llama3");
    const rows = rowsOf(await (await fetch(url)).json());
    const errors = rows.map((row, p) => Math.max(...row.map((v, j) => Math.abs(Math.fround(v) - ref[p][j]))));
    const trace = traces.find((t) => t.name.endsWith(`(recipe=${recipe})`));
    assert.deepEqual(trace.y, errors.map((e) => (e > 0 ? e : null)), `recipe=${recipe}`);
  }
  // The runtimes are not one computation: their lines differ somewhere.
  const lines = drawn.map((r) => JSON.stringify(traces.find((t) => t.name.endsWith(`(recipe=${r})`)).y));
  assert.equal(new Set(lines).size, lines.length, "two runtimes drew the same line");
  await page.locator("#view-precision").screenshot({ path: join(ARTIFACTS, "views", "1200-rope-precision-recipes.png") });
  assert.deepEqual(problems, []);
  await page.close();
});

test("a recipe the runtime refuses is left out of the precision view with the service's reason", async () => {
  const link = "/?scheme=rope&d_model=32&scaling=dynamic&factor=4&original_max_position_embeddings=2048&seq_len=16";
  const { page, problems } = await open(link);
  assert.equal(await page.getAttribute("#view-precision", "data-state"), "drawn", "a refusal is not an error of the view");
  const refusedUrl = new URL((await precisionUrls(page)).find((u) => new URL(u).searchParams.get("recipe") === "ggml"));
  const answer = await fetch(refusedUrl);
  assert.equal(answer.status, 422, "the test needs a scaling llama.cpp refuses: choose another if it now serves dynamic");
  const problem = await answer.json();
  assert.equal(problem.errors[0].loc.at(-1), "recipe");
  assert.equal(await page.getAttribute("#view-precision", "data-refused"), "ggml");
  const note = await page.locator("#view-precision .refused").textContent();
  assert.ok(note.includes(`llama.cpp (recipe=ggml): ${problem.detail}`), note);
  const names = (await precisionTraces(page)).map((t) => t.name);
  assert.ok(!names.some((n) => n.includes("recipe=ggml")), names.join(", "));
  assert.ok(names.some((n) => n.includes("recipe=framework")) && names.some((n) => n.includes("recipe=mlx")), names.join(", "));

  // The scalings compared under recipe=ggml: dynamic is noted, not drawn from the exact table.
  await page.goto(`${BASE}/?scheme=rope&d_model=32&recipe=ggml&seq_len=16`);
  await ready(page);
  const scalings = schemes.find((s) => s.name === "rope").parameters.find((p) => p.name === "scaling").choices;
  assert.equal(await page.getAttribute("#view-scalings", "data-traces"), String(scalings.length - 1));
  assert.match(await page.locator("#view-scalings .report").textContent(), /^Not drawn — dynamic: .*recipe=ggml/);

  // rotary_pairs: neither llama.cpp nor MLX serves it; transformers' line and the exact one stay.
  await page.goto(`${BASE}/?scheme=rope&d_model=32&rotary_pairs=4&seq_len=16`);
  await ready(page);
  assert.equal(await page.getAttribute("#view-precision", "data-state"), "drawn");
  assert.equal(await page.getAttribute("#view-precision", "data-refused"), "ggml mlx");
  assert.match(await page.locator("#view-precision .refused").textContent(), /llama\.cpp \(recipe=ggml\): .*rotary_pairs.*; MLX \(recipe=mlx\): .*rotary_pairs/);
  assert.deepEqual((await precisionTraces(page)).map((t) => t.name).filter((n) => n.includes("recipe=")), ["transformers float32 (recipe=framework)"]);
  assert.deepEqual(problems, []);
  await page.close();
});

test("a dropped cache computed as a runtime computes it is named: this is that runtime's rope", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=32&seq_len=64&offset=30000&component=cos");
  const { path } = route("rope", "table");
  const cache = Buffer.from(await (await fetch(`${BASE}${path}?d_model=32&seq_len=64&offset=30000&component=cos&recipe=framework&format=npy`)).arrayBuffer());
  const dropIt = (bytes) => dropOn(page, bytes);
  await dropIt(cache);
  assert.ok((await page.getAttribute("#view-drop", "data-findings")).split(" ").includes("matches_framework_recipe"));
  assert.equal(await page.getAttribute("#view-drop", "data-recipe"), "framework");
  const headline = page.locator("#view-drop .report.recipe");
  assert.match(await headline.textContent(), /^This is transformers' rope \(recipe=framework\): up to \S+ from the exact values\.$/);
  assert.ok(await headline.isVisible());
  // The headline comes first, before the verdict and the findings.
  assert.equal(await page.evaluate(() => document.querySelector("#view-drop .report").classList.contains("recipe")), true);
  await page.locator("#view-drop").screenshot({ path: join(ARTIFACTS, "views", "1200-rope-drop-recipe.png") });

  // llama.cpp's and MLX's caches, as the service serves them, are named by the service
  // (matches_recipe, the recipe in its evidence) and by the page.
  for (const [recipe, runtime] of [["ggml", "llama.cpp"], ["mlx", "MLX"]]) {
    const built = Buffer.from(await (await fetch(`${BASE}${path}?d_model=32&seq_len=64&offset=30000&component=cos&recipe=${recipe}&format=npy`)).arrayBuffer());
    await dropIt(built);
    assert.ok((await page.getAttribute("#view-drop", "data-findings")).split(" ").includes("matches_recipe"));
    assert.equal(await page.getAttribute("#view-drop", "data-recipe"), recipe);
    assert.match(await headline.textContent(), new RegExp(`^This is ${runtime.replace(".", "\\.")}'s rope \\(recipe=${recipe}\\): up to \\S+ from the exact values\\.$`));
  }

  // A cache of none of them: no headline.
  const exact = Buffer.from(await (await fetch(`${BASE}${path}?d_model=32&seq_len=64&offset=30000&component=cos&format=npy`)).arrayBuffer());
  await dropIt(exact);
  assert.match(await page.locator("#view-drop .verdict").textContent(), /^Conforms/);
  assert.equal(await page.locator("#view-drop .report.recipe").count(), 0);
  assert.equal(await page.getAttribute("#view-drop", "data-recipe"), null);
  assert.deepEqual(problems, []);
  await page.close();
});

const SHOWN = ["/?scheme=sinusoidal&d_model=64&seq_len=100", "/?scheme=rope&d_model=64&scaling=llama3&factor=8&seq_len=128&position=300",
  "/?scheme=alibi&num_heads=8&seq_len=40", "/?scheme=t5&seq_len=160"];

test("every view is drawn and photographed at desktop and at 375 px", async () => {
  for (const width of [1200, 375]) {
    for (const link of SHOWN) {
      const { page, problems } = await open(link, { width, height: 900 });
      const scheme = new URLSearchParams(link.slice(2)).get("scheme");
      for (const section of await page.locator("section.view:not([hidden])").all()) {
        const id = await section.getAttribute("id");
        assert.ok(["drawn", "waiting"].includes(await section.getAttribute("data-state")), `${scheme} ${id}`);
        await section.screenshot({ path: join(ARTIFACTS, "views", `${width}-${scheme}-${id.slice(5)}.png`) });
      }
      if (scheme === "rope") {
        const choices = schemes.find((s) => s.name === "rope").parameters.find((p) => p.name === "scaling").choices;
        assert.equal(await page.getAttribute("#view-scalings", "data-traces"), String(choices.length), "one line per scaling");
        const recipes = new Set(recipeChoices().filter((c) => c !== "exact").map((c) => (c === "transformers" ? "framework" : c)));
        assert.equal(await page.getAttribute("#view-precision", "data-traces"), String(recipes.size + 1), "one line per runtime, and the exact table");
      }
      // Each request a view makes is one line above its plot, whole in its tooltip, one click
      // from opening (the link) or copying (the button beside it).
      const requests = await page.evaluate(() => [...document.querySelectorAll(".api a, .api code")].map((shown) => ({
        text: shown.textContent, lines: shown.getBoundingClientRect().height / parseFloat(getComputedStyle(shown).fontSize),
        whole: shown.title === shown.textContent && (shown.tagName !== "A" || shown.getAttribute("href") === shown.textContent),
        copy: shown.previousElementSibling?.tagName === "BUTTON" })));
      assert.ok(requests.length > 0, `${scheme}: no request shown`);
      for (const { text, lines, whole, copy } of requests) assert.ok(lines < 2 && whole && copy, `${scheme} at ${width} px: ${text}`);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `${scheme} at ${width} px scrolls sideways by ${overflow} px`);
      await page.screenshot({ path: join(ARTIFACTS, `page-${width}-${scheme}.png`), fullPage: true });
      assert.deepEqual(problems, []);
      await page.close();
    }
  }
});

test("axe-core finds no serious or critical violation", async () => {
  for (const [link, width] of [[SHOWN[0], 1200], [SHOWN[1], 375], [SHOWN[2], 1200]]) {
    const { page } = await open(link, { width, height: 900 });
    await page.addScriptTag({ path: AXE });
    const result = await page.evaluate(() => globalThis.axe.run(document, { runOnly: ["wcag2a", "wcag2aa", "best-practice"] }));
    const bad = result.violations.filter((v) => ["serious", "critical"].includes(v.impact));
    assert.deepEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.length}) ${v.nodes[0].target}`), [], link);
    await page.close();
  }
});

// A Gemma 3 1B config in transformers 5's per-layer form: every sixth layer global (base 10^6,
// linear 8), the others local (base 10^4). Two ropes.
const GEMMA3 = JSON.stringify({
  architectures: ["Gemma3ForCausalLM"], model_type: "gemma3_text", vocab_size: 262144, hidden_size: 1152,
  intermediate_size: 6912, num_hidden_layers: 26, num_attention_heads: 4, num_key_value_heads: 1, head_dim: 256,
  max_position_embeddings: 32768, sliding_window: 512,
  layer_types: Array.from({ length: 26 }, (_, i) => ((i + 1) % 6 ? "sliding_attention" : "full_attention")),
  rope_parameters: {
    full_attention: { rope_type: "linear", factor: 8.0, rope_theta: 1000000.0 },
    sliding_attention: { rope_type: "default", rope_theta: 10000.0 },
  },
  torch_dtype: "bfloat16",
}, null, 2);
const FULL = [5, 11, 17, 23];
const SLIDING = Array.from({ length: 26 }, (_, i) => i).filter((i) => !FULL.includes(i));
const configState = (page) => page.waitForSelector("#view-config:not([data-state=loading])", { timeout: 30000 })
  .then(() => page.getAttribute("#view-config", "data-state"));

/** What the model view shows: each rope's text, and the numbers of its plots. */
const modelView = (page) => page.evaluate(() => [...document.querySelectorAll("#view-config article.rope")].map((article) => ({
  types: article.dataset.layerTypes,
  layers: article.dataset.layers,
  text: [...article.querySelectorAll("h3, p.layers, dl")].map((n) => n.innerText).join("\n"),
  urls: Object.fromEntries([...article.querySelectorAll(".subview")].map((box) => [box.dataset.view, box.querySelector(".api a").href])),
  plots: Object.fromEntries([...article.querySelectorAll(".subview")].map((box) => [box.dataset.view, box.querySelector(".plot").data.map((t) => [...t.y])])),
  position: article.querySelector(".subview[data-view=rotation]").dataset.position,
})));

test("a pasted config.json shows every rope with its layers, and its link restores the view", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32");
  assert.equal(await page.getAttribute("#view-config", "data-state"), "waiting");
  await page.fill("#config-json", GEMMA3);
  await page.click("text=show the model's ropes");
  assert.equal(await configState(page), "drawn");
  const shown = await modelView(page);
  assert.deepEqual(shown.map((r) => [r.types, r.layers]), [["full_attention", FULL.join(",")], ["sliding_attention", SLIDING.join(",")]]);
  assert.match(shown[0].text, /layers 5, 11, 17, 23 \(4 of 26\)/);
  assert.match(shown[1].text, /layers 0–4, 6–10, 12–16, 18–22, 24, 25 \(22 of 26\)/);
  assert.match(shown[0].text, /base\s+1000000\s/);
  assert.match(shown[0].text, /factor\s+8\s/);
  assert.equal(await page.getAttribute("#view-config p.nope", "data-layers"), "");
  // Each rope is drawn by the page's rope views, with that rope's parameters: 128 pairs, and the
  // wavelengths are the service's 2π/ω.
  const global = new URL(shown[0].urls.wavelengths).searchParams;
  assert.deepEqual([global.get("base"), global.get("scaling"), global.get("factor")], ["1000000", "linear", "8"]);
  assert.equal(new URL(shown[1].urls.wavelengths).searchParams.get("base"), null, "10000 is the default: not sent");
  for (const rope of shown) {
    const omega = (await (await fetch(rope.urls.wavelengths)).json()).data;
    assert.deepEqual(rope.plots.wavelengths[0], omega.map((w) => 2 * Math.PI / w));
    assert.equal(rope.plots.rotation[1].length, 128);
    assert.equal(rope.position, "100");
  }
  // The rotations move together with the panel's slider; the controls above stay as they were.
  await page.focus("#config-position");
  for (let k = 0; k < 3; k++) await page.keyboard.press("ArrowRight");
  await page.waitForFunction(() => [...document.querySelectorAll("#view-config .subview[data-view=rotation]")]
    .every((box) => box.dataset.position === "103" && !box.hasAttribute("aria-busy")));
  // A jump to a view keeps the config in the address bar.
  await page.click("#toc a[href='#view-config']");
  const link = new URL(page.url());
  assert.equal(link.searchParams.get("d_model"), "16");
  const fragment = new URLSearchParams(link.hash.slice(1));
  assert.equal(fragment.get("position"), "103");
  assert.ok(fragment.get("config").length < GEMMA3.length / 2, "the config is compressed in the link");
  const before = await modelView(page);
  await page.close();

  // The link, in a fresh page at phone width: the config is read from the fragment, posted again,
  // and the same ropes are drawn the same way.
  const fresh = await open(link.pathname + link.search + link.hash, { width: 375, height: 900 });
  assert.equal(await configState(fresh.page), "drawn");
  assert.equal(await fresh.page.inputValue("#config-json"), GEMMA3);
  assert.deepEqual(await modelView(fresh.page), before);
  assert.equal(await fresh.page.inputValue("[name=d_model]"), "16");
  assert.ok(fresh.requests.some((u) => u.pathname === "/v1/rope/config"));
  const overflow = await fresh.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the model view at 375 px scrolls sideways by ${overflow} px`);
  await fresh.page.locator("#view-config").screenshot({ path: join(ARTIFACTS, "views", "375-gemma3-config.png") });
  await fresh.page.addScriptTag({ path: AXE });
  const audit = await fresh.page.evaluate(() => globalThis.axe.run("#view-config", { runOnly: ["wcag2a", "wcag2aa", "best-practice"] }));
  const bad = audit.violations.filter((v) => ["serious", "critical"].includes(v.impact));
  assert.deepEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.length}) ${v.nodes[0].target}`), []);
  assert.deepEqual([...problems, ...fresh.problems], []);
  await fresh.page.close();
});

test("a refused config names the field; a failed request, a broken link say so; back returns to the model", async () => {
  // A link made outside the page: deflate-raw, base64url.
  const code = deflateRawSync(Buffer.from(GEMMA3)).toString("base64url");
  const { page, problems } = await open(`/?scheme=rope&d_model=16&seq_len=32#config=${code}`);
  assert.equal(await configState(page), "drawn");
  assert.equal(await page.locator("#view-config article.rope").count(), 2);
  await page.locator("#view-config").screenshot({ path: join(ARTIFACTS, "views", "1200-gemma3-config.png") });

  // The field is the one the service names (["body", "<field>"]); the page must show it.
  const refused = JSON.stringify({ model_type: "ernie4_5_vl_moe_text", head_dim: 64 });
  const answer = await fetch(`${BASE}/v1/rope/config`, { method: "POST", headers: { "Content-Type": "application/json" }, body: refused });
  assert.equal(answer.status, 422, "the test needs a config the service refuses: choose another if it now answers this one");
  const field = (await answer.json()).errors[0].loc.slice(1).join(".");
  await page.fill("#config-json", refused);
  await page.click("text=show the model's ropes");
  assert.equal(await configState(page), "error");
  assert.equal(await page.getAttribute("#view-config", "data-field"), field);
  assert.ok((await page.locator("#view-config .state").textContent()).startsWith(`The service refused (422): ${field}: `));
  assert.ok((await page.locator("#view-config").innerText()).includes(`The field refused: ${field}`));
  assert.equal(await page.locator("#view-config article.rope").count(), 0);

  // Back: the previous link's model again, read from its fragment.
  await page.goBack();
  await page.waitForSelector("#view-config article.rope");
  assert.equal(await configState(page), "drawn");
  assert.equal(await page.inputValue("#config-json"), GEMMA3);

  await page.route("**/v1/rope/config", (route) => route.abort("connectionrefused"));
  await page.click("text=show the model's ropes");
  assert.equal(await configState(page), "error");
  assert.match(await page.locator("#view-config .state").textContent(), /The service could not be reached/);
  await page.unroute("**/v1/rope/config");

  await page.evaluate(() => { location.hash = "#config=AAAA"; });
  await page.waitForSelector("#view-config[data-state=error] .state:has-text('could not be read')");

  // A rope opened in every view above: the controls take its parameters, the config stays.
  await page.goBack();
  assert.equal(await configState(page), "drawn");
  await page.click("#view-config article.rope >> nth=0 >> text=show this rope in every view above");
  await page.waitForFunction(() => new URLSearchParams(location.search).get("d_model") === "256");
  await ready(page);
  assert.equal(await page.inputValue("[name=base]"), "1000000");
  assert.equal(await page.inputValue("[name=scaling]"), "linear");
  const kept = new URLSearchParams(new URL(page.url()).hash.slice(1)).get("config");
  assert.equal(inflateRawSync(Buffer.from(kept, "base64url")).toString(), GEMMA3, "the link keeps the config");
  assert.equal(await page.locator("#view-config article.rope").count(), 2, "the model view is not redrawn");
  assert.deepEqual(problems, []);
  await page.close();
});

// Issue 23: a multimodal layout drawn token by token, and a client's ids diagnosed beside it.
const layoutState = (page, selector = "#view-layout") => page.waitForSelector(`${selector}:not([data-state=loading])`, { timeout: 30000 })
  .then(() => page.getAttribute(selector, "data-state"));
const positions = async (body, verify = false) => (await fetch(`${BASE}/v1/rope/positions${verify ? "/verify" : ""}`, {
  method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
})).json();
/** What the drawing shows: every cell's token, kind, number, title and colour, and each grid's cells. */
const drawing = (page) => page.evaluate(() => ({
  cells: [...document.querySelectorAll("#view-layout .cell")].map((cell) => ({
    token: Number(cell.dataset.token), kind: cell.dataset.kind, text: cell.textContent, title: cell.title,
    background: getComputedStyle(cell).backgroundColor, mismatch: cell.classList.contains("mismatch"),
  })),
  grids: [...document.querySelectorAll("#view-layout .block .grid")].map((grid) => [grid.style.getPropertyValue("--columns"), grid.children.length]),
}));

test("a layout is drawn token by token, each image and video frame as its grid, coloured by the service's ids", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32");
  assert.equal(await page.getAttribute("#view-layout", "data-state"), "waiting");
  const layout = { config: { model_type: "qwen3_vl" }, segments: [{ text: 3 }, { image: [1, 4, 6] }, { text: 2 }, { video: [2, 4, 4] }, { text: 2 }] };
  await page.fill("#layout-segments", JSON.stringify(layout.segments));
  await page.selectOption("#layout-model", "qwen3_vl"); // a pick draws at once
  assert.equal(await layoutState(page), "drawn");
  const answer = await positions(layout);
  const ids = answer.position_ids;
  const shown = await drawing(page);
  assert.equal(shown.cells.length, answer.tokens, "one cell per token the service counted");
  assert.equal(await page.getAttribute("#view-layout", "data-tokens"), String(answer.tokens));
  // The image is one 2×3 grid; each of the video's frames a 2×2 grid between its start and end tokens.
  assert.deepEqual(shown.grids, [["3", 6], ["2", 4], ["2", 4]]);
  assert.deepEqual(shown.cells.map((c) => c.kind), [
    ...Array(3).fill("text"), ...Array(6).fill("image"), ...Array(2).fill("text"),
    "text", ...Array(4).fill("video"), "text", "text", ...Array(4).fill("video"), "text", ...Array(2).fill("text"),
  ]);
  shown.cells.forEach((cell, k) => {
    assert.equal(cell.token, k);
    assert.ok(cell.title.startsWith(`token ${k}, `), cell.title);
    assert.ok(cell.title.endsWith(`: temporal ${ids[0][k]}, height ${ids[1][k]}, width ${ids[2][k]}`), cell.title);
    assert.equal(cell.text, String(ids[0][k]), "each cell shows its temporal id");
  });
  assert.match(shown.cells[3].title, /image \(segment 1\), row 0, column 0/);
  // One colour per id, and a different one for each id.
  const colourOf = (cells, row) => new Map(cells.map((c, k) => [ids[row][k], c.background]));
  const temporal = colourOf(shown.cells, 0);
  shown.cells.forEach((c, k) => assert.equal(c.background, temporal.get(ids[0][k]), `token ${k}`));
  assert.equal(new Set(temporal.values()).size, temporal.size);

  // Coloured by the width id instead: the numbers and the colours follow, and the link says so.
  await page.check("#view-layout input[value=width]");
  const wide = await drawing(page);
  wide.cells.forEach((c, k) => assert.equal(c.text, String(ids[2][k])));
  const width = colourOf(wide.cells, 2);
  wide.cells.forEach((c, k) => assert.equal(c.background, width.get(ids[2][k]), `token ${k}`));
  const link = new URL(page.url());
  assert.equal(new URLSearchParams(link.hash.slice(1)).get("colour"), "width");
  assert.equal(link.searchParams.get("d_model"), "16", "the controls stay in the link");
  await page.locator("#view-layout").screenshot({ path: join(ARTIFACTS, "views", "1200-layout.png") });
  await page.close();

  // The link, in a fresh page at phone width, with a model's config beside the layout in the
  // fragment: the same layout drawn the same way, and the model's ropes.
  const config = deflateRawSync(Buffer.from(GEMMA3)).toString("base64url");
  const fresh = await open(`${link.pathname}${link.search}${link.hash}&config=${config}`, { width: 375, height: 900 });
  assert.equal(await layoutState(fresh.page), "drawn");
  assert.deepEqual(await drawing(fresh.page), wide);
  assert.equal(await configState(fresh.page), "drawn");
  assert.deepEqual(JSON.parse(await fresh.page.inputValue("#layout-segments")), layout.segments);
  assert.equal(await fresh.page.inputValue("#layout-model"), "qwen3_vl");
  const overflow = await fresh.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the layout view at 375 px scrolls sideways by ${overflow} px`);
  await fresh.page.locator("#view-layout").screenshot({ path: join(ARTIFACTS, "views", "375-layout.png") });
  await fresh.page.addScriptTag({ path: AXE });
  const audit = await fresh.page.evaluate(() => globalThis.axe.run("#view-layout", { runOnly: ["wcag2a", "wcag2aa", "best-practice"] }));
  const bad = audit.violations.filter((v) => ["serious", "critical"].includes(v.impact));
  assert.deepEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.length}) ${v.nodes[0].target}`), []);

  // A rope of the model opened in the views above keeps the layout in the link and on the page.
  await fresh.page.click("#view-config article.rope >> nth=0 >> text=show this rope in every view above");
  await fresh.page.waitForFunction(() => new URLSearchParams(location.search).get("d_model") === "256");
  await ready(fresh.page);
  const kept = new URLSearchParams(new URL(fresh.page.url()).hash.slice(1));
  assert.deepEqual([kept.get("layout"), kept.get("colour"), kept.get("config")], [new URLSearchParams(link.hash.slice(1)).get("layout"), "width", config]);
  assert.deepEqual(await drawing(fresh.page), wide);

  // A layout the service refuses: its message, as every view shows one.
  await fresh.page.fill("#layout-segments", '[{"text": 1}, {"image": [1, 3, 4]}]');
  await fresh.page.click("#layout-send");
  assert.equal(await layoutState(fresh.page), "error");
  assert.match(await fresh.page.locator("#view-layout > .state").textContent(), /^The service refused \(422\): .*spatial_merge_size 2/);
  assert.equal(await fresh.page.locator("#view-layout .cell").count(), 0);
  assert.deepEqual([...problems, ...fresh.problems], []);
  await fresh.page.close();
});

/** A .npy file of int64 rows. */
function npyInt64(rows) {
  let header = `{'descr': '<i8', 'fortran_order': False, 'shape': (${rows.length}, ${rows[0].length}), }`;
  header = header.padEnd(64 * Math.ceil((header.length + 11) / 64) - 11) + "\n";
  const prefix = Buffer.concat([Buffer.from([0x93]), Buffer.from("NUMPY"), Buffer.from([1, 0, header.length & 255, header.length >> 8]), Buffer.from(header, "latin1")]);
  return Buffer.concat([prefix, Buffer.from(BigInt64Array.from(rows.flat(), BigInt).buffer)]);
}

test("dropped ids that resume text at max + 1 are diagnosed beside the drawing, the token marked", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32");
  const layout = { config: { model_type: "qwen2_5_vl", vision_config: { tokens_per_second: 2 } }, segments: [{ text: 1 }, { video: [4, 2, 2] }, { text: 1 }] };
  const faulty = [[0, 1, 3, 5, 7, 8], [0, 1, 1, 1, 1, 8], [0, 1, 1, 1, 1, 8]];
  await page.fill("#layout-config", JSON.stringify(layout.config));
  await page.fill("#layout-segments", JSON.stringify(layout.segments));
  // Dropped before the layout is drawn: the page draws it, then verifies.
  const transfer = await page.evaluateHandle((data) => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(data)], "position_ids.npy", { type: "application/octet-stream" }));
    return dt;
  }, [...npyInt64(faulty)]);
  await page.dispatchEvent("#layout-drop", "drop", { dataTransfer: transfer });
  assert.equal(await layoutState(page, "#layout-verify"), "drawn");
  assert.equal(await page.getAttribute("#view-layout", "data-state"), "drawn");
  const findings = (await page.getAttribute("#layout-verify", "data-findings")).split(" ");
  assert.deepEqual(findings, ["text_resumes_at_max_plus_one"]);
  const finding = page.locator("#layout-verify li[data-finding=text_resumes_at_max_plus_one]");
  assert.match(await finding.textContent(), /^text_resumes_at_max_plus_one/);
  assert.ok(await finding.isVisible());
  assert.match(await page.locator("#layout-verify .verdict").textContent(), /^Not equal: 1 of 6 tokens differ/);
  const report = await positions({ ...layout, position_ids: faulty }, true);
  const first = report.first_difference;
  assert.match(await page.locator("#layout-verify .first-difference").textContent(),
    new RegExp(`^First at token ${first.token} .*the model gives ${first.expected.join(", ")}, yours ${first.got.join(", ")}\\.`));
  // The drawing marks the one token the ids get wrong, and its title says what they gave.
  const shown = await drawing(page);
  assert.equal(shown.cells.length, 6);
  assert.deepEqual(shown.cells.filter((c) => c.mismatch).map((c) => c.token), [first.token]);
  assert.match(shown.cells[first.token].title, /— yours: 8, 8, 8$/);
  assert.equal(await page.getAttribute(`#view-layout .cell[data-token="${first.token}"]`, "class"), "cell mismatch first");
  await page.locator("#view-layout").screenshot({ path: join(ARTIFACTS, "views", "1200-layout-verify.png") });

  // The model's own ids, pasted: equal, nothing marked.
  const right = (await positions(layout)).position_ids;
  await page.fill("#layout-ids-json", JSON.stringify(right));
  await page.click("#layout-ids-send");
  assert.equal(await layoutState(page, "#layout-verify"), "drawn");
  assert.match(await page.locator("#layout-verify .verdict").textContent(), /^Equal: the ids of all 6 tokens/);
  assert.equal(await page.locator("#view-layout .cell.mismatch").count(), 0);

  // Unreadable ids are the page's to say; ids the service refuses, the service's.
  await page.fill("#layout-ids-json", "[[0, 1,");
  await page.click("#layout-ids-send");
  assert.equal(await layoutState(page, "#layout-verify"), "error");
  assert.match(await page.locator("#layout-verify .state").textContent(), /^Your ids could not be read: /);
  await page.fill("#layout-ids-json", '[["a"]]');
  await page.click("#layout-ids-send");
  assert.equal(await layoutState(page, "#layout-verify"), "error");
  assert.match(await page.locator("#layout-verify .state").textContent(), /^The service refused \(4\d\d\): \S/);
  assert.equal(await page.locator("#view-layout .cell").count(), 6, "the drawing stays");
  assert.deepEqual(problems, []);
  await page.close();
});

// Issue 33: a GGUF file of any size read from its first bytes (File.slice), its ropes layer by
// layer and, beside its model's config.json, the verdict. The files are the Python fixtures' bytes
// at the start of a sparse file of 4 GiB: the page must never read, let alone send, the rest.
const PYTHON = process.env.POSENC_PYTHON ?? ".venv/bin/python";
const GIB4 = 4 * 2 ** 30;
const scratch = mkdtempSync(join(tmpdir(), "posenc-gguf-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** A sparse file of `size` bytes starting with the bytes the Python `script` writes. */
function sparse(name, script, size = GIB4) {
  const path = join(scratch, name);
  writeFileSync(path, execFileSync(PYTHON, ["-c", script], { maxBuffer: 64 * 2 ** 20 }));
  truncateSync(path, size);
  return path;
}
const LLAMA31_PREFIX = "import sys; from tests.gguf.files import llama_31_prefix; sys.stdout.buffer.write(llama_31_prefix())";
// Llama 3.1's prefix with a vocabulary of 200000 tokens before its rope tensor (3.7 MB), as a
// converter writes one: the first slice stops inside it.
const LLAMA31_VOCABULARY = `import sys
from tests.gguf import files
plain = files.gguf
tokens = [f"token{i}" for i in range(200_000)]
files.gguf = lambda values, tensors=(), **kw: plain(values, tensors, raw_kvs=[files.array("tokenizer.ggml.tokens", files.STRING, tokens)], **kw)
sys.stdout.buffer.write(files.llama_31_prefix())`;
// Llama 3.1 8B's config.json, as docs/gguf.md shows it.
const LLAMA31 = JSON.stringify({
  model_type: "llama", hidden_size: 4096, num_attention_heads: 32, num_hidden_layers: 32,
  max_position_embeddings: 131072, rope_theta: 500000.0,
  rope_scaling: { rope_type: "llama3", factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192 },
}, null, 2);
const ggufState = (page) => page.waitForSelector("#view-gguf:not([data-state=loading])", { timeout: 60000 })
  .then(() => page.getAttribute("#view-gguf", "data-state"));

/** The page's requests to the gguf operation: each body's size, and each answer's status and detail. */
function ggufTraffic(page) {
  const sent = [];
  const answers = [];
  // The body's size as chromium sent it (a multipart body of Blob parts has no postData to read).
  page.on("request", (request) => {
    if (new URL(request.url()).pathname !== "/v1/rope/gguf") return;
    const entry = { bytes: null, type: request.headers()["content-type"] };
    sent.push(entry);
    void request.allHeaders().then((headers) => { entry.bytes = Number(headers["content-length"]); });
  });
  page.on("response", async (response) => {
    if (new URL(response.url()).pathname !== "/v1/rope/gguf") return;
    const body = await response.json().catch(() => ({}));
    answers.push({ status: response.status(), detail: body.detail, needed: body.needed_bytes });
  });
  return { sent, answers };
}

test("a GGUF file of 4 GiB is read from its first MiB: llama's 32 layers, one rope, no NoPE layer", async () => {
  const path = sparse("llama-3.1-8b.gguf", LLAMA31_PREFIX);
  assert.equal(statSync(path).size, GIB4);
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32");
  assert.equal(await page.getAttribute("#view-gguf", "data-state"), "waiting");
  const { sent } = ggufTraffic(page);
  await page.setInputFiles("#gguf-file", path);
  assert.equal(await ggufState(page), "drawn");
  assert.deepEqual(sent, [{ bytes: 2 ** 20, type: "application/octet-stream" }], "one request, of the first MiB");
  assert.equal(await page.getAttribute("#view-gguf", "data-sent"), String(2 ** 20));
  assert.equal(await page.getAttribute("#view-gguf", "data-layers"), "32");
  const ropes = page.locator("#view-gguf article.rope");
  assert.equal(await ropes.count(), 1);
  assert.equal(await ropes.getAttribute("data-layers"), Array.from({ length: 32 }, (_, i) => i).join(","));
  assert.equal(await ropes.getAttribute("data-rope-type"), "norm");
  const text = await ropes.innerText();
  assert.match(text, /Applied by layers 0–31 \(32 of 32\)\./);
  assert.match(text, /^d_model=128 base=500000 layout=interleaved scaling=none freq_factors=rope_freqs\.weight$/m);
  assert.equal(await page.getAttribute("#view-gguf p.nope", "data-layers"), "");
  assert.match(await page.locator("#view-gguf p.sent").textContent(), /^Read from the first 1,048,576 bytes of llama-3\.1-8b\.gguf \(4,294,967,296 bytes\), in 1 request\.$/);
  assert.equal(await page.locator("#view-gguf .verdict").count(), 0, "no config, no verdict");
  await page.locator("#view-gguf").screenshot({ path: join(ARTIFACTS, "views", "1200-gguf.png") });

  // Beside Llama 3.1's config: the verdict, and each rope's recipe noise; the same prefix is sent.
  await page.fill("#gguf-config", LLAMA31);
  await page.click("#gguf-send");
  assert.equal(await ggufState(page), "drawn");
  assert.equal(sent.length, 2);
  assert.match(sent[1].type, /^multipart\/form-data; boundary=/);
  assert.ok(sent[1].bytes > 2 ** 20 && sent[1].bytes < 2 ** 20 + 4096, `multipart body of ${sent[1].bytes} bytes`);
  assert.equal(await page.getAttribute("#view-gguf", "data-conforms"), "true");
  assert.match(await page.locator("#view-gguf .verdict").textContent(), /^Conforms: llama\.cpp applies the model's rope at every layer, for n_ctx 131072\.$/);
  assert.match(await ropes.locator("p.noise").textContent(), /^llama\.cpp's float32 table near n_ctx \(positions \d+–131071\): 0\.0\d+ from exact, 0\.0\d+ from transformers' — recipe noise, reported, not a finding\.$/);
  assert.equal(await page.getAttribute("#view-gguf", "data-findings"), "");

  // Another base in the config: a finding naming both, for all 32 layers.
  await page.fill("#gguf-config", LLAMA31.replace("500000", "10000"));
  await page.click("#gguf-send");
  assert.equal(await ggufState(page), "drawn");
  assert.equal(await page.getAttribute("#view-gguf", "data-conforms"), "false");
  assert.match(await page.locator("#view-gguf .verdict").textContent(), /^Does not conform: 1 finding/);
  assert.equal(await page.getAttribute("#view-gguf", "data-findings"), "base");
  const finding = await page.locator("#view-gguf li[data-finding=base]").innerText();
  assert.match(finding, /another base: the model's 10000(\.0)?, the file's 500000(\.0)? \(layers 0–31\)/);
  await page.locator("#view-gguf").screenshot({ path: join(ARTIFACTS, "views", "1200-gguf-finding.png") });
  await page.setViewportSize({ width: 375, height: 900 });
  // The views above were drawn at 1200 px and redraw on their own time: this view alone is measured.
  const wide = await page.evaluate(() => [...document.querySelectorAll("#view-gguf *")]
    .filter((node) => node.getBoundingClientRect().right > window.innerWidth).map((node) => `${node.tagName}.${node.className}`));
  assert.deepEqual(wide, [], "the GGUF view at 375 px is wider than the window");
  await page.locator("#view-gguf").screenshot({ path: join(ARTIFACTS, "views", "375-gguf-finding.png") });
  await page.addScriptTag({ path: AXE });
  const audit = await page.evaluate(() => globalThis.axe.run("#view-gguf", { runOnly: ["wcag2a", "wcag2aa", "best-practice"] }));
  const bad = audit.violations.filter((v) => ["serious", "critical"].includes(v.impact));
  assert.deepEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.length}) ${v.nodes[0].target}`), []);
  assert.ok(sent.every((s) => s.bytes !== null && s.bytes < 4 * 2 ** 20), JSON.stringify(sent));
  assert.deepEqual(problems, []);
  await page.close();
});

test("a GGUF file whose rope tensor lies past the first MiB is sent as far as the service asks, no further", async () => {
  const path = sparse("llama-3.1-vocabulary.gguf", LLAMA31_VOCABULARY);
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32");
  const { sent, answers } = ggufTraffic(page);
  await page.setInputFiles("#gguf-file", path);
  assert.equal(await ggufState(page), "drawn");
  assert.equal(await page.getAttribute("#view-gguf", "data-layers"), "32");
  // Each refusal names the bytes it needs: the next request sends at least those, and at least
  // twice the last (the reader names one token at a time), never the file.
  assert.deepEqual(answers.map((a) => a.status), [422, 422, 200]);
  assert.equal(sent[0].bytes, 2 ** 20);
  for (let k = 1; k < sent.length; k++) {
    const asked = answers[k - 1].needed;
    assert.match(answers[k - 1].detail, new RegExp(`send at least the first ${asked} bytes`));
    assert.equal(sent[k].bytes, Math.max(asked, 2 * sent[k - 1].bytes), `request ${k + 1}`);
  }
  assert.deepEqual(sent.map((s) => s.bytes), [2 ** 20, 2 ** 21, 2 ** 22]);
  assert.equal(await page.getAttribute("#view-gguf", "data-requests"), "3");
  assert.deepEqual(problems, []);
  await page.close();
});

test("a file that is not GGUF, or stops too soon, shows the service's message", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32");
  const { sent } = ggufTraffic(page);
  await page.setInputFiles("#gguf-file", { name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("hello, world") });
  assert.equal(await ggufState(page), "error");
  assert.match(await page.locator("#view-gguf .state").textContent(), /^The service refused \(422\): gguf: the file starts with b'hell', not GGUF's magic b'GGUF'$/);
  assert.equal(await page.locator("#view-gguf article.rope").count(), 0);

  // Llama 3.1's header cut at 300 bytes: the service asks for more than the file holds, and the
  // page says so after sending the whole file once.
  const prefix = execFileSync(PYTHON, ["-c", LLAMA31_PREFIX]);
  await page.setInputFiles("#gguf-file", { name: "cut.gguf", mimeType: "application/octet-stream", buffer: prefix.subarray(0, 300) });
  assert.equal(await ggufState(page), "error");
  assert.match(await page.locator("#view-gguf .state").textContent(), /^The service refused \(422\): gguf: .* send at least the first 304 bytes of the file$/);
  assert.deepEqual(sent.map((s) => s.bytes), [12, 300]);
  assert.deepEqual(problems, []);
  await page.close();
});

test("a GGUF file and its config.json dropped on the GGUF view: the ropes, then the verdict", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32");
  const dropFile = async (bytes, name) => {
    const transfer = await page.evaluateHandle(([data, named]) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(data)], named, { type: "application/octet-stream" }));
      return dt;
    }, [[...bytes], name]);
    await page.dispatchEvent("#gguf-drop", "drop", { dataTransfer: transfer });
  };
  await dropFile(execFileSync(PYTHON, ["-c", LLAMA31_PREFIX]), "model.gguf");
  assert.equal(await ggufState(page), "drawn");
  assert.equal(await page.getAttribute("#view-gguf article.rope", "data-rope-type"), "norm");
  assert.equal(await page.locator("#view-gguf .verdict").count(), 0);
  // The config is read by its name, not sent as a GGUF file: it goes beside the dropped file.
  await dropFile(Buffer.from(LLAMA31), "config.json");
  await page.waitForSelector("#view-gguf .verdict");
  assert.equal(await ggufState(page), "drawn");
  assert.equal(await page.inputValue("#gguf-config"), LLAMA31);
  assert.equal(await page.getAttribute("#view-gguf", "data-conforms"), "true");
  assert.equal(await page.getAttribute("#view-gguf", "data-sent"), "768", "a file smaller than the first slice is sent whole");
  assert.deepEqual(problems, []);
  await page.close();
});

// Headers of two architectures whose layers turn more than q and k, written with the suite's GGUF
// helpers: DeepSeek-V3.2's (three decoder layers and one multi-token-prediction block), whose MLA
// rope turns q_pe and k_pe and whose lightning indexer turns its own q and k in the same layers,
// and DeepSeek-V4's, whose compressed layers (ratios 4, 128, 4) turn ropes no call states.
const MLA_HEADERS = `import sys
from tests.gguf.files import gguf
def header(arch, **keys):
    return gguf({"general.architecture": arch, **{f"{arch}.{k}": v for k, v in keys.items()}})
files = {
    "deepseek32": header("deepseek32", block_count=4, nextn_predict_layers=1, context_length=8192,
                         embedding_length=64, **{"attention.head_count": 4, "rope.dimension_count": 8}),
    "deepseek4": header("deepseek4", block_count=4, context_length=8192, embedding_length=64,
                        **{"attention.head_count": 4, "attention.compress_ratios": [0, 4, 128, 4],
                           "attention.compress_rope_freq_base": 160000.0}),
}
sys.stdout.buffer.write(files[sys.argv[1]])`;

test("a GGUF file says what each rope turns, its MTP layers, llama.cpp's notes and the ropes no call states", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32");
  const choose = async (arch) => {
    const buffer = execFileSync(PYTHON, ["-c", MLA_HEADERS, arch]);
    await page.setInputFiles("#gguf-file", { name: `${arch}.gguf`, mimeType: "application/octet-stream", buffer });
    assert.equal(await ggufState(page), "drawn");
  };
  const audit = async () => {
    const found = await page.evaluate(() => globalThis.axe.run("#view-gguf", { runOnly: ["wcag2a", "wcag2aa", "best-practice"] }));
    const bad = found.violations.filter((v) => ["serious", "critical"].includes(v.impact));
    assert.deepEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.length}) ${v.nodes[0].target}`), []);
  };
  await page.addScriptTag({ path: AXE });

  // Two ropes in every decoder layer, each naming what it turns and the other beside it.
  await choose("deepseek32");
  assert.equal(await page.getAttribute("#view-gguf", "data-layers"), "3");
  const ropes = page.locator("#view-gguf article.rope");
  assert.equal(await ropes.count(), 2);
  const [mla, indexer] = [ropes.nth(0), ropes.nth(1)];
  assert.deepEqual([await mla.getAttribute("data-applies-to"), await mla.getAttribute("data-rope-type"), await mla.getAttribute("data-layers")], ["q_pe k_pe", "norm", "0,1,2"]);
  assert.deepEqual([await indexer.getAttribute("data-applies-to"), await indexer.getAttribute("data-rope-type"), await indexer.getAttribute("data-layers")], ["indexer_q indexer_k", "neox", "0,1,2"]);
  assert.equal(await mla.locator("h3").textContent(), "Rope 1 of 2: norm on q_pe, k_pe");
  assert.equal(await indexer.locator("h3").textContent(), "Rope 2 of 2: neox on indexer_q, indexer_k");
  assert.equal(await mla.locator("p.layers").textContent(), "Applied by layers 0–2 (3 of 3). Rope 2 turns indexer_q, indexer_k in the same layers too.");
  assert.equal(await indexer.locator("p.layers").textContent(), "Applied by layers 0–2 (3 of 3). Rope 1 turns q_pe, k_pe in the same layers too.");
  assert.match(await mla.locator("p.params").textContent(), /^d_model=8 base=10000 layout=interleaved scaling=none$/);
  assert.match(await indexer.locator("p.params").textContent(), /^d_model=8 base=10000 layout=split scaling=none$/);
  // The block past the decoder's layers, and the note saying which context runs it.
  assert.equal(await page.getAttribute("#view-gguf p.mtp", "data-layers"), "3");
  assert.equal(await page.locator("#view-gguf p.mtp").textContent(), "Multi-token-prediction layers: 3 (1, held in the file past its 3 decoder layers; llama.cpp's decoder never runs them).");
  assert.equal(await page.getByRole("list", { name: "llama.cpp's notes on this file" }).count(), 1);
  const notes = await page.locator("#view-gguf ul.notes li").allTextContents();
  assert.equal(notes.length, 1);
  assert.equal(notes[0], "layer 3 (nextn_predict_layers) is a multi-token-prediction block: llama.cpp's decoder never runs it; a draft context (LLAMA_CONTEXT_TYPE_MTP) runs it as a speculative head");
  assert.equal(await page.locator("#view-gguf article.unstated").count(), 0);
  await page.locator("#view-gguf").screenshot({ path: join(ARTIFACTS, "views", "1200-gguf-mla.png") });
  await audit();

  // Stated ropes on every layer, and on the compressed ones a rope no call states, with why; the
  // last file's MTP layer and notes are gone.
  await choose("deepseek4");
  assert.deepEqual(await ropes.evaluateAll((nodes) => nodes.map((n) => [n.className, n.dataset.layers, n.dataset.appliesTo])), [
    ["report rope", "0", "q kv"],
    ["report rope", "1,2,3", "q kv"],
    ["report rope unstated", "1,2,3", "compressed_kv indexer_q output"],
  ]);
  const unstated = page.locator("#view-gguf article.unstated");
  assert.equal(await unstated.locator("h3").textContent(), "Unstated rope 1 of 1: on compressed_kv, indexer_q, output");
  assert.equal(await unstated.locator("p.layers").textContent(), "Turned in layers 1–3 (3 of 4) by no ggml_rope_ext call of a token's position: not stated here, nor checked.");
  assert.match(await unstated.locator("p.reason").textContent(), /^DeepSeek-V4's compressor turns each compressed block's key at the block's position \(comp_pos\).*\(ggml_rope_ext_back\)/);
  assert.equal(await page.locator("#view-gguf p.mtp").count(), 0);
  assert.equal(await page.locator("#view-gguf ul.notes").count(), 0);
  await page.setViewportSize({ width: 375, height: 900 });
  const wide = await page.evaluate(() => [...document.querySelectorAll("#view-gguf *")]
    .filter((node) => node.getBoundingClientRect().right > window.innerWidth).map((node) => `${node.tagName}.${node.className}`));
  assert.deepEqual(wide, [], "the GGUF view at 375 px is wider than the window");
  await page.locator("#view-gguf").screenshot({ path: join(ARTIFACTS, "views", "375-gguf-unstated.png") });
  await audit();
  assert.deepEqual(problems, []);
  await page.close();
});

// Issue 40: which rope a kernel applied, read from the arrays dropped on its view — here
// llama.cpp's own rope (ggml_rope_ext through ggml-python) on random q, Llama 3.1's rope at
// positions 100000 … 100063, and the same kernel without its factor tensor.
const KERNEL_DUMPS = `import sys
import numpy as np
from posenc.schemes.rope.params import RopeParams
from tests.applied import kernels
out = sys.argv[1]
llama3 = RopeParams(d_model=64, base=500000.0, scaling="llama3", factor=8.0, low_freq_factor=1.0,
                    high_freq_factor=4.0, original_max_position_embeddings=8192)
ids = np.arange(100000, 100064)
x = kernels.vectors((64, 8, 64))
np.save(f"{out}/q.npy", x)
np.save(f"{out}/ids.npy", ids)
np.save(f"{out}/q_rope.npy", kernels.ggml_rope(llama3, x, ids))
np.save(f"{out}/q_no_factors.npy", kernels.ggml_rope(RopeParams(d_model=64, base=500000.0), x, ids))`;
const LLAMA31_SMALL = JSON.stringify({ ...JSON.parse(LLAMA31), hidden_size: 512, num_attention_heads: 8 });
const appliedState = (page) => page.waitForSelector("#view-applied:not([data-state=loading])", { timeout: 60000 })
  .then(() => page.getAttribute("#view-applied", "data-state"));

test("a kernel's q before and after its rope, dropped with its ids and config: the verdict beside the angle error", async () => {
  const dumps = join(scratch, "applied");
  mkdirSync(dumps, { recursive: true });
  execFileSync(PYTHON, ["-c", KERNEL_DUMPS, dumps]);
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32");
  assert.equal(await page.getAttribute("#view-applied", "data-state"), "waiting");
  await page.setInputFiles("#applied-before", join(dumps, "q.npy"));
  await page.setInputFiles("#applied-after", join(dumps, "q_rope.npy"));
  await page.setInputFiles("#applied-positions", join(dumps, "ids.npy"));
  await page.fill("#applied-config", LLAMA31_SMALL);
  await page.fill("#applied-query", "layer=5");
  await page.click("#applied-send");
  assert.equal(await appliedState(page), "drawn");
  assert.equal(await page.getAttribute("#view-applied", "data-holds"), "true");
  assert.equal(await page.getAttribute("#view-applied", "data-recipe"), "ggml");
  assert.equal(await page.getAttribute("#view-applied", "data-pairs"), "split");
  assert.match(await page.locator("#view-applied .verdict").textContent(), /^Holds: the kernel applied the model's rope \(recipe ggml\)\.$/);
  assert.equal(await page.locator("#view-applied [data-plot=applied-heatmap] .main-svg").count() > 0, true, "the heatmap is drawn");
  assert.match(await page.locator("#view-applied .api code").textContent(), /^curl -X POST '.*\/v1\/rope\/applied\?layer=5' -F before=@q\.npy -F after=@q_rope\.npy -F positions=@ids\.npy -F config=@config\.json$/);
  await page.locator("#view-applied").screenshot({ path: join(ARTIFACTS, "views", "1200-applied.png") });

  // The same kernel without llama.cpp's factor tensor: Llama 3's scaling missing, named.
  await page.setInputFiles("#applied-after", join(dumps, "q_no_factors.npy"));
  await page.click("#applied-send");
  assert.equal(await appliedState(page), "drawn");
  assert.equal(await page.getAttribute("#view-applied", "data-holds"), "false");
  assert.equal(await page.getAttribute("#view-applied", "data-findings"), "scaling_mismatch");
  assert.match(await page.locator("#view-applied li[data-finding=scaling_mismatch]").innerText(), /the frequencies fit no scaling, not the stated llama3 scaling with factor 8/);
  await page.setViewportSize({ width: 375, height: 900 });
  const wide = await page.evaluate(() => [...document.querySelectorAll("#view-applied *")]
    .filter((node) => node.getBoundingClientRect().right > window.innerWidth + 1 && !node.closest(".plot")).map((node) => `${node.tagName}.${node.className}`));
  assert.deepEqual(wide, [], "the applied view at 375 px is wider than the window");
  await page.locator("#view-applied").screenshot({ path: join(ARTIFACTS, "views", "375-applied.png") });
  await page.addScriptTag({ path: AXE });
  const audit = await page.evaluate(() => globalThis.axe.run("#view-applied", { runOnly: ["wcag2a", "wcag2aa", "best-practice"] }));
  const bad = audit.violations.filter((v) => ["serious", "critical"].includes(v.impact));
  assert.deepEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.length}) ${v.nodes[0].target}`), []);
  assert.deepEqual(problems, []);
  await page.close();
});

// Issue 42: an ONNX Runtime GenAI model's files chosen together: the graph is sent, then only the
// byte ranges of its caches the service names, sliced from the data file (here a sparse file of
// 4 GiB, the weights' place: the page must never read it beyond those ranges).
const SMOLLM2 = `import sys
from pathlib import Path
from tests.onnx.graphs import smollm2_folder
smollm2_folder(Path(sys.argv[1]))`;
// SmolLM2-135M's config.json, as docs/onnx.md shows it.
const SMOLLM2_CONFIG = JSON.stringify({
  model_type: "llama", hidden_size: 576, num_attention_heads: 9, num_key_value_heads: 3,
  num_hidden_layers: 30, max_position_embeddings: 8192, rope_theta: 100000,
}, null, 2);
const onnxState = (page) => page.waitForSelector("#view-onnx:not([data-state=loading])", { timeout: 60000 })
  .then(() => page.getAttribute("#view-onnx", "data-state"));

/** The builder's folder for SmolLM2-135M's graph, its data file grown to 4 GiB (sparse). */
function smollm2() {
  const folder = join(scratch, "onnx-out");
  execFileSync(PYTHON, ["-c", SMOLLM2, folder]);
  truncateSync(join(folder, "model.onnx.data"), GIB4);
  return ["model.onnx", "model.onnx.data", "genai_config.json"].map((name) => join(folder, name));
}

test("an ONNX model's files: the graph, then only the cache rows the service names; the verdict beside its config", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32");
  const answers = [];
  const sent = [];
  page.on("request", (request) => {
    if (new URL(request.url()).pathname !== "/v1/rope/onnx") return;
    const entry = { bytes: null };
    sent.push(entry);
    void request.allHeaders().then((headers) => { entry.bytes = Number(headers["content-length"]); });
  });
  page.on("response", async (response) => {
    if (new URL(response.url()).pathname !== "/v1/rope/onnx") return;
    const body = await response.json().catch(() => ({}));
    answers.push({ status: response.status(), type: body.type, needed: body.needed });
  });
  assert.equal(await page.getAttribute("#view-onnx", "data-state"), "waiting");
  await page.setInputFiles("#onnx-files", smollm2());
  assert.equal(await onnxState(page), "drawn");
  // The refusal names 24 ranges (cos and sin at 17 positions); the second request sends them.
  assert.deepEqual(answers.map((a) => [a.status, a.type ?? null]), [[422, "urn:posenc:problem:external-data-needed"], [200, null]]);
  assert.equal(answers[0].needed.length, 24);
  assert.equal(await page.getAttribute("#view-onnx", "data-requests"), "2");
  assert.equal(await page.getAttribute("#view-onnx", "data-external"), "4352");
  assert.ok(sent.every((s) => s.bytes !== null && s.bytes < 32 * 2 ** 10), JSON.stringify(sent));
  assert.equal(await page.getAttribute("#view-onnx", "data-layers"), "30");
  const rope = page.locator("#view-onnx article.rope");
  assert.equal(await rope.count(), 1);
  assert.equal(await rope.getAttribute("data-layers"), [...Array(30).keys()].join(","));
  assert.equal(await rope.getAttribute("data-recipe"), "framework");
  assert.match(await rope.locator(".params").textContent(), /^d_model=64 base=100000 layout=split scaling=none$/);
  assert.match(await page.locator("#view-onnx p.sent").textContent(), /and 4,352 bytes of its external data, in 2 requests\.$/);
  assert.equal(await page.locator("#view-onnx .verdict").count(), 0, "no config, no verdict");
  await page.locator("#view-onnx").screenshot({ path: join(ARTIFACTS, "views", "1200-onnx.png") });

  // Its config: conforms; the config of another base: the finding, with its layers.
  await page.fill("#onnx-config", SMOLLM2_CONFIG);
  await page.click("#onnx-send");
  assert.equal(await onnxState(page), "drawn");
  assert.equal(await page.getAttribute("#view-onnx", "data-conforms"), "true");
  await page.fill("#onnx-config", SMOLLM2_CONFIG.replace("100000", "10000"));
  await page.click("#onnx-send");
  assert.equal(await onnxState(page), "drawn");
  assert.equal(await page.getAttribute("#view-onnx", "data-conforms"), "false");
  assert.equal(await page.getAttribute("#view-onnx", "data-findings"), "base");
  assert.match(await page.locator("#view-onnx li[data-finding=base]").innerText(), /another base: the model's 10000(\.0)?, the cache's 100000(\.0)? \(layers 0–29\)/);
  await page.setViewportSize({ width: 375, height: 900 });
  const wide = await page.evaluate(() => [...document.querySelectorAll("#view-onnx *")]
    .filter((node) => node.getBoundingClientRect().right > window.innerWidth).map((node) => `${node.tagName}.${node.className}`));
  assert.deepEqual(wide, [], "the ONNX view at 375 px is wider than the window");
  await page.locator("#view-onnx").screenshot({ path: join(ARTIFACTS, "views", "375-onnx-finding.png") });
  await page.addScriptTag({ path: AXE });
  const audit = await page.evaluate(() => globalThis.axe.run("#view-onnx", { runOnly: ["wcag2a", "wcag2aa", "best-practice"] }));
  const bad = audit.violations.filter((v) => ["serious", "critical"].includes(v.impact));
  assert.deepEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.length}) ${v.nodes[0].target}`), []);
  assert.deepEqual(problems, []);
  await page.close();
});

test("an ONNX graph chosen without its data file names the file to choose", async () => {
  const { page, problems } = await open("/?scheme=rope&d_model=16&seq_len=32");
  const [graph, , genai] = smollm2();
  await page.setInputFiles("#onnx-files", [graph, genai]);
  assert.equal(await onnxState(page), "error");
  assert.equal(await page.locator("#view-onnx .state").textContent(), "The caches are in model.onnx.data: choose it with the model.");
  assert.equal(await page.locator("#view-onnx article.rope").count(), 0);
  assert.deepEqual(problems, []);
  await page.close();
});
