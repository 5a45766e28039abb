// The page: every view is one fetch of the public API, drawn with Plotly.
const api = (path, params) => `${path}?${new URLSearchParams(params)}`;

function controls() {
  const form = new FormData(document.getElementById("controls"));
  const get = (name) => form.get(name);
  const scheme = get("scheme");
  const p = { scheme, seq_len: get("seq_len") };
  if (!["alibi", "t5"].includes(scheme)) p.d_model = get("d_model");
  if (["sinusoidal", "rope"].includes(scheme)) { p.base = get("base"); p.layout = get("layout"); }
  const list = (name) => get(name).split(",").map((v) => parseInt(v, 10)).filter(Number.isFinite);
  return { params: p, scheme, dims: list("dims"), positions: list("positions") };
}

function slot(view) {
  const section = document.getElementById(view);
  section.querySelectorAll(".api, .plot, .state").forEach((node) => node.remove());
  const bar = document.createElement("div");
  bar.className = "api";
  const plot = document.createElement("div");
  plot.className = "plot";
  section.append(bar, plot);
  return { section, bar, plot };
}

function showUrl(bar, url) {
  const absolute = new URL(url, location.href).href;
  const link = Object.assign(document.createElement("a"), { href: absolute, textContent: absolute });
  const copy = Object.assign(document.createElement("button"), { type: "button", textContent: "copy the API URL" });
  copy.addEventListener("click", () => navigator.clipboard?.writeText(absolute));
  bar.replaceChildren(copy, link);
}

async function fetchJson(url) {
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.detail || response.statusText);
  return body;
}

async function drawFigure(view, url) {
  const { section, bar, plot } = slot(view);
  showUrl(bar, url);
  try {
    const figure = await fetchJson(url);
    await Plotly.newPlot(plot, figure.data, figure.layout, { responsive: true });
    section.dataset.state = "drawn";
  } catch (error) {
    plot.replaceWith(Object.assign(document.createElement("p"), { className: "state", textContent: error.message }));
    section.dataset.state = "not-applicable";
  }
}

async function drawLines(view, url, traces, layout) {
  const { section, bar, plot } = slot(view);
  showUrl(bar, url);
  try {
    const body = await fetchJson(url);
    const lines = traces(body);
    await Plotly.newPlot(plot, lines, layout, { responsive: true });
    section.dataset.state = "drawn";
    section.dataset.traces = String(lines.length);
  } catch (error) {
    plot.replaceWith(Object.assign(document.createElement("p"), { className: "state", textContent: error.message }));
    section.dataset.state = "not-applicable";
  }
}

function tableOf(body) {
  // rope's default array is (2, n, d): cos then sin; the first is the one to show.
  return body.shape.length === 3 ? body.data[0] : body.data;
}

async function drawVerify(url) {
  const { section, bar, plot } = slot("view-verify");
  plot.remove();
  showUrl(bar, url);
  const rows = document.querySelector("#verify-table tbody");
  rows.replaceChildren();
  const report = await fetchJson(url);
  for (const check of report.checks) {
    const tr = document.createElement("tr");
    tr.dataset.check = check.name;
    const cells = [check.name, check.holds ? "pass" : "fail", check.value === null ? "—" : Number(check.value).toPrecision(4),
                   Number(check.tolerance).toPrecision(4), check.detail];
    cells.forEach((text, i) => {
      const td = Object.assign(document.createElement("td"), { textContent: text });
      if (i === 1) td.className = check.holds ? "pass" : "fail";
      tr.append(td);
    });
    rows.append(tr);
  }
  section.dataset.state = "drawn";
}

async function draw(event) {
  event?.preventDefault();
  const { params, scheme, dims, positions } = controls();
  const json = api("/v1/table", params);
  await Promise.all([
    drawFigure("view-table", api("/v1/table", { ...params, format: "plotly" })),
    drawLines("view-waves", json, (body) => dims.filter((d) => d < body.shape.at(-1)).map((d) => ({
      type: "scatter", mode: "lines", name: `dimension ${d}`, y: tableOf(body).map((row) => row[d]),
    })), { title: { text: "selected dimensions over positions" }, xaxis: { title: { text: "position" } }, yaxis: { title: { text: "value" } } }),
    drawLines("view-vectors", json, (body) => positions.filter((p) => p < tableOf(body).length).map((p) => ({
      type: "scatter", mode: "lines+markers", name: `position ${p}`, y: tableOf(body)[p],
    })), { title: { text: "selected positions over dimensions" }, xaxis: { title: { text: "dimension" } }, yaxis: { title: { text: "value" } } }),
    drawFigure("view-similarity", api("/v1/similarity", { ...params, format: "plotly" })),
    drawFigure("view-decay", api("/v1/similarity", { ...params, reference: 0, metric: scheme === "rope" ? "dot" : "cosine", format: "plotly" })),
    drawLines("view-wavelengths", scheme === "rope" ? api("/v1/table", { ...params, component: "inv_freq", dtype: "float64" }) : api("/v1/table", { ...params, seq_len: 2, dtype: "float64" }),
      (body) => [{ type: "scatter", mode: "markers", name: "wavelength", y: wavelengths(scheme, body, params.layout) }],
      { title: { text: "wavelength per frequency" }, xaxis: { title: { text: "frequency index i" } }, yaxis: { title: { text: "wavelength (positions)" }, type: "log" } }),
    drawVerify(api("/v1/verify", params)).catch(() => {}),
  ]);
  document.body.dataset.ready = "true";
}

function wavelengths(scheme, body, layout) {
  if (scheme === "rope") return body.data.map((w) => 2 * Math.PI / w);
  if (scheme !== "sinusoidal") throw new Error("wavelengths belong to the sinusoidal schemes");
  // Position 1's (sin, cos) pair of frequency i is (sin ω_i, cos ω_i): its angle is ω_i.
  const row = body.data[1], d = row.length, h = Math.floor(d / 2);
  const pairs = [];
  for (let i = 0; i < h; i++) {
    const [s, c] = layout === "split" ? [row[i], row[Math.ceil(d / 2) + i]] : [row[2 * i], row[2 * i + 1]];
    pairs.push(2 * Math.PI / Math.atan2(s, c));
  }
  return pairs;
}

document.getElementById("controls").addEventListener("submit", draw);
draw();
