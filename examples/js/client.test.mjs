import { test } from "node:test";
import assert from "node:assert/strict";
import { fetchReport, fetchTable } from "./client.mjs";

const BASE = process.env.POSENC_URL ?? "http://127.0.0.1:8000";

test("the binary table holds the float32 values of the paper's formula", async () => {
  const table = await fetchTable(BASE, { d_model: 4, seq_len: 3 });
  assert.deepEqual([table.rows, table.cols], [3, 4]);
  assert.equal(table.at(0, 1), 1);
  assert.equal(table.at(1, 0), Math.fround(Math.sin(1)));      // 0.84147096
  assert.equal(table.at(2, 1), Math.fround(Math.cos(2)));      // -0.41614684
  assert.equal(table.at(1, 2), Math.fround(Math.sin(0.01)));   // 10000^(-2/4) = 0.01
});

test("a far position is still exact in float32", async () => {
  const table = await fetchTable(BASE, { d_model: 2, seq_len: 1, offset: 1000000 });
  assert.equal(table.at(0, 0), Math.fround(Math.sin(1000000)));  // float64 sin is exact enough here
});

test("the verify report passes and says what it measured", async () => {
  const report = await fetchReport(BASE, { d_model: 64 });
  assert.equal(report.passed, true);
  const rounding = report.checks.find((check) => check.name === "float32_rounding");
  const value = rounding?.value;  // typed by the document: a number, or null when not measured
  assert.ok(typeof value === "number" && value <= 0.5 + 2 ** -20 && value > 0);
});
