// A posenc client with nothing but Node's built-in fetch: a table as raw float32, and a report.
export async function fetchTable(base, params) {
  const query = new URLSearchParams({ ...params, format: "bin" });
  const response = await fetch(`${base}/v1/table?${query}`);
  if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
  const [rows, cols] = response.headers.get("X-Array-Shape").split(",").map(Number);
  if (response.headers.get("X-Array-Dtype") !== "float32") throw new Error("expected float32");
  const values = new Float32Array(await response.arrayBuffer());  // little-endian, C order
  return { rows, cols, at: (row, col) => values[row * cols + col] };
}

export async function fetchReport(base, params) {
  const response = await fetch(`${base}/v1/verify?${new URLSearchParams(params)}`);
  return response.json();
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const base = process.env.POSENC_URL ?? "http://127.0.0.1:8000";
  const table = await fetchTable(base, { d_model: 4, seq_len: 3 });
  console.log(`table ${table.rows}×${table.cols}, PE(1)[0] = ${table.at(1, 0)}`);
  const report = await fetchReport(base, { d_model: 64 });
  console.log(`verify passed: ${report.passed}`);
}
