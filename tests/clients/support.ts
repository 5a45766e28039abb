// What the generated client test checks on the answers of its typed calls. Compiled with the
// generated calls (tsc --strict), run with node. Every check records a failure instead of
// stopping, so one run says everything that is wrong with the document.

declare const process: { exitCode?: number };

/** What every openapi-fetch call returns, whatever the operation's types say about `data`. */
export interface Answer {
  data?: unknown;
  error?: unknown;
  response: Response;
}

type Numbers = Float32Array | Float64Array | Int32Array | Uint16Array;

interface NdArray {
  dtype: string;
  shape: number[];
  values: Numbers;
}

// float16 has no typed array in node 20: its values are compared as bit patterns.
const TYPED: Record<string, (buffer: ArrayBuffer) => Numbers> = {
  float32: (b) => new Float32Array(b),
  float64: (b) => new Float64Array(b),
  int32: (b) => new Int32Array(b),
  float16: (b) => new Uint16Array(b),
};
const DESCR: Record<string, string> = { "<f4": "float32", "<f8": "float64", "<i4": "int32", "<f2": "float16" };

/** A `.npy` file (format 1.0–3.0, little-endian, C order), as NumPy writes it. */
export function readNpy(buffer: ArrayBuffer): NdArray {
  const bytes = new Uint8Array(buffer);
  const magic = String.fromCharCode(...bytes.slice(1, 6));
  if (bytes[0] !== 0x93 || magic !== "NUMPY") throw new Error("not an .npy file");
  const view = new DataView(buffer);
  const long = bytes[6] >= 2;
  const headerLength = long ? view.getUint32(8, true) : view.getUint16(8, true);
  const start = long ? 12 : 10;
  const header = new TextDecoder().decode(bytes.slice(start, start + headerLength));
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1] ?? "";
  if (/'fortran_order':\s*True/.test(header)) throw new Error("Fortran order");
  const shape = (/'shape':\s*\(([^)]*)\)/.exec(header)?.[1] ?? "")
    .split(",")
    .filter((s) => s.trim() !== "")
    .map(Number);
  const dtype = DESCR[descr];
  if (dtype === undefined) throw new Error(`unexpected descr ${descr}`);
  return { dtype, shape, values: TYPED[dtype](buffer.slice(start + headerLength)) };
}

/** `format=bin`: raw values, their dtype and shape in X-Array-Dtype and X-Array-Shape. */
export function readBin(answer: Answer): NdArray {
  const dtype = answer.response.headers.get("X-Array-Dtype") ?? "";
  const shape = (answer.response.headers.get("X-Array-Shape") ?? "")
    .split(",")
    .filter((s) => s !== "")
    .map(Number);
  const read = TYPED[dtype];
  if (read === undefined) throw new Error(`X-Array-Dtype ${dtype}`);
  return { dtype, shape, values: read(answer.data as ArrayBuffer) };
}

function halfToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

/** Whether the JSON number `value` parses, in the served dtype, to exactly `stored`. */
function parsesTo(value: number, stored: number, dtype: string): boolean {
  if (dtype === "float32") return Object.is(Math.fround(value), stored);
  if (dtype !== "float16") return Object.is(value, stored);
  // the nearest float16 to `value` must be `stored`: neither neighbour of it is nearer
  const exact = halfToNumber(stored);
  if (exact === 0) return Object.is(value, exact);
  const magnitude = stored & 0x7fff;
  const neighbours = [stored - 1];
  if (magnitude < 0x7c00) neighbours.push(stored + 1);
  const here = Math.abs(value - exact);
  return neighbours.every((n) => Math.abs(value - halfToNumber(n)) >= here);
}

function flatten(data: unknown): number[] {
  return Array.isArray(data) ? data.flatMap(flatten) : [data as number];
}

type Request = () => Promise<Answer>;

export class Run {
  readonly failures: string[] = [];
  passed = 0;

  /** The answer when the call succeeds with 200; otherwise null, and the failure recorded
   *  (openapi-fetch throws when an answer does not parse as the document says it is). */
  private async attempt(label: string, request: Request): Promise<Answer | null> {
    try {
      const answer = await request();
      if (answer.response.status === 200) return answer;
      const detail = JSON.stringify(answer.error ?? null).slice(0, 400);
      this.failures.push(`${label}: ${answer.response.status} ${detail}`);
    } catch (error) {
      this.failures.push(`${label}: ${String(error).slice(0, 400)}`);
    }
    return null;
  }

  async single(label: string, request: Request): Promise<void> {
    if (await this.attempt(label, request)) this.passed += 1;
  }

  /** A verify of the service's own table: 200, and the report says it conforms. */
  async conforms(label: string, request: Request): Promise<void> {
    const answer = await this.attempt(label, request);
    if (answer === null) return;
    const report = answer.data as { conforms?: unknown };
    if (report.conforms === true) this.passed += 1;
    else this.failures.push(`${label}: conforms is ${String(report.conforms)}`);
  }

  /** The same array as json, npy and bin: equal element for element, in the served dtype. */
  async arrays(label: string, ...requests: [Request, Request, Request]): Promise<void> {
    const answers: (Answer | null)[] = [];
    for (const request of requests) answers.push(await this.attempt(label, request));
    const [json, npy, bin] = answers;
    if (json === null || npy === null || bin === null) return;
    try {
      const fromNpy = readNpy(npy.data as ArrayBuffer);
      const fromBin = readBin(bin);
      const envelope = json.data as { shape: number[]; dtype: string; data: unknown };
      const fromJson = flatten(envelope.data);
      const problems: string[] = [];
      if (fromBin.dtype !== fromNpy.dtype || envelope.dtype !== fromNpy.dtype)
        problems.push(`dtypes bin ${fromBin.dtype}, npy ${fromNpy.dtype}, json ${envelope.dtype}`);
      const shapes = [fromBin.shape, fromNpy.shape, envelope.shape].map((s) => s.join(","));
      if (new Set(shapes).size !== 1) problems.push(`shapes bin (${shapes[0]}), npy (${shapes[1]}), json (${shapes[2]})`);
      if (fromBin.values.length !== fromNpy.values.length || fromJson.length !== fromNpy.values.length)
        problems.push(`lengths bin ${fromBin.values.length}, npy ${fromNpy.values.length}, json ${fromJson.length}`);
      else if (fromNpy.values.length === 0) problems.push("an empty array proves nothing");
      for (let i = 0; problems.length === 0 && i < fromNpy.values.length; i += 1) {
        if (!Object.is(fromBin.values[i], fromNpy.values[i]))
          problems.push(`element ${i}: bin ${fromBin.values[i]} ≠ npy ${fromNpy.values[i]}`);
        else if (!parsesTo(fromJson[i], fromNpy.values[i], fromNpy.dtype))
          problems.push(`element ${i}: json ${fromJson[i]} does not parse to npy's ${fromNpy.values[i]}`);
      }
      if (problems.length === 0) this.passed += 1;
      else this.failures.push(`${label}: ${problems.join("; ")}`);
    } catch (error) {
      this.failures.push(`${label}: ${String(error)}`);
    }
  }

  /** The `.npy` answer of a call, as the body of another; throws (into the other's record)
   *  when there is none. */
  async body(request: Request): Promise<Blob> {
    const answer = await request();
    if (answer.response.status !== 200)
      throw new Error(`its .npy body: ${answer.response.status} ${JSON.stringify(answer.error ?? null).slice(0, 300)}`);
    return new Blob([answer.data as ArrayBuffer], { type: "application/x-npy" });
  }

  finish(): void {
    console.log(JSON.stringify({ passed: this.passed, failures: this.failures }));
    process.exitCode = this.failures.length === 0 ? 0 : 1;
  }
}
