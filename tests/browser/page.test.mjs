// The page in a real browser: Debian's chromium driven by playwright-core, against a live server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const BASE = process.env.POSENC_URL;
const ARTIFACTS = process.env.POSENC_ARTIFACTS ?? "test-artifacts";
const FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const VIEWS = ["view-table", "view-waves", "view-vectors", "view-similarity", "view-decay",
  "view-wavelengths", "view-verify"];

async function redraw(page, values) {
  await page.evaluate(() => { document.body.dataset.ready = "false"; });
  for (const [name, value] of Object.entries(values)) {
    const field = page.locator(`[name=${name}]`);
    if (await field.evaluate((node) => node.tagName) === "SELECT") await field.selectOption(value);
    else await field.fill(String(value));
  }
  await page.click("button[type=submit]");
  await page.waitForSelector("body[data-ready=true]", { timeout: 30000 });
}

const heatmapShape = (page) => page.evaluate(() => {
  const z = document.querySelector("#view-table .plot").data[0].z;
  return [z.length, z[0].length];
});

test("every view draws from the live API, and follows the controls", async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "posenc-")), {
    executablePath: "/usr/bin/chromium", headless: true, args: FLAGS,
    viewport: { width: 1200, height: 900 },
  });
  try {
    const page = await context.newPage();
    const failures = [];
    page.on("pageerror", (error) => failures.push(error.message));
    page.on("requestfailed", (request) => failures.push(`${request.url()} failed`));
    await page.goto(BASE + "/");
    await page.waitForSelector("body[data-ready=true]", { timeout: 30000 });
    for (const view of VIEWS) {
      assert.equal(await page.getAttribute(`#${view}`, "data-state"), "drawn", view);
    }
    assert.deepEqual(await heatmapShape(page), [100, 64]);
    const checks = await page.$$eval("#verify-table tbody tr", (rows) => rows.map((r) => r.dataset.check));
    assert.deepEqual(checks, ["formula_equivalence", "bounded", "unique_positions", "constant_norm",
      "relative_rotation", "offset_invariant_dot", "frequency_range", "float32_rounding"]);
    assert.equal(await page.locator("#verify-table td.fail").count(), 0);
    assert.equal(await page.getAttribute("#view-waves", "data-traces"), "4");
    await page.screenshot({ path: join(ARTIFACTS, "page-sinusoidal.png"), fullPage: true });

    await redraw(page, { d_model: 31, seq_len: 50, layout: "split" });
    assert.deepEqual(await heatmapShape(page), [50, 31]);
    const norm = page.locator("#verify-table tr[data-check=constant_norm] td").nth(1);
    assert.equal(await norm.textContent(), "fail");  // odd d_model: honestly not constant

    await redraw(page, { scheme: "rope", d_model: 32, seq_len: 64 });
    for (const view of VIEWS) {
      assert.equal(await page.getAttribute(`#${view}`, "data-state"), "drawn", view);
    }
    const ropeChecks = await page.$$eval("#verify-table tbody tr", (rows) => rows.map((r) => r.dataset.check));
    assert.ok(ropeChecks.includes("relative_inner_product"));
    await page.screenshot({ path: join(ARTIFACTS, "page-rope.png"), fullPage: true });

    await redraw(page, { scheme: "alibi", seq_len: 40 });
    assert.deepEqual(await heatmapShape(page), [40, 40]);
    assert.equal(await page.getAttribute("#view-similarity", "data-state"), "not-applicable");
    await page.screenshot({ path: join(ARTIFACTS, "page-alibi.png"), fullPage: true });
    assert.deepEqual(failures, []);
  } finally {
    await context.close();
  }
});
