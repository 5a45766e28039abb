// @ts-check
// A posenc client typed by the service's own OpenAPI document: openapi-fetch, with the `paths`
// types that openapi-typescript wrote into posenc.d.ts (`npm run types` rewrites them from a
// running service). Plain JavaScript, so node runs it as it is; `npm run check` has tsc --strict
// check it and its test against those types: a misspelt path, parameter or choice does not
// compile, and the verify report is typed too.
import createClient from "openapi-fetch";

/** @typedef {import("./posenc.js").paths} paths */
/** @typedef {NonNullable<paths["/v1/sinusoidal/table"]["get"]["parameters"]["query"]>} TableQuery */
/** @typedef {NonNullable<paths["/v1/sinusoidal/verify"]["get"]["parameters"]["query"]>} VerifyQuery */

/**
 * @param {string} baseUrl
 * @returns {import("openapi-fetch").Client<paths>}
 */
export function connect(baseUrl) {
  return createClient({ baseUrl });
}

/**
 * A table as raw float32 (`format=bin`): little-endian, C order, its shape in X-Array-Shape.
 * @param {string} base
 * @param {Omit<TableQuery, "format">} query
 */
export async function fetchTable(base, query) {
  const { data, error, response } = await connect(base).GET("/v1/sinusoidal/table", {
    params: { query: { ...query, format: "bin" } },
    parseAs: "arrayBuffer",
  });
  if (error !== undefined) throw new Error(`${response.status}: ${JSON.stringify(error)}`);
  const [rows, cols] = (response.headers.get("X-Array-Shape") ?? "").split(",").map(Number);
  if (response.headers.get("X-Array-Dtype") !== "float32") throw new Error("expected float32");
  const values = new Float32Array(data);
  return { rows, cols, at: (/** @type {number} */ row, /** @type {number} */ col) => values[row * cols + col] };
}

/**
 * The properties the service measured on the table it serves for `query`.
 * @param {string} base
 * @param {VerifyQuery} query
 */
export async function fetchReport(base, query) {
  const { data, error, response } = await connect(base).GET("/v1/sinusoidal/verify", { params: { query } });
  if (error !== undefined) throw new Error(`${response.status}: ${JSON.stringify(error)}`);
  return data;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const base = process.env.POSENC_URL ?? "http://127.0.0.1:8000";
  const table = await fetchTable(base, { d_model: 4, seq_len: 3 });
  console.log(`table ${table.rows}×${table.cols}, PE(1)[0] = ${table.at(1, 0)}`);
  const report = await fetchReport(base, { d_model: 64 });
  console.log(`verify passed: ${report.passed}`);
}
