// The `paths` types of a live posenc, as openapi-typescript 7 writes them, with one change its
// documentation recommends for binary payloads: `format: binary` becomes `Blob` (by default it
// is `string`, and a `.npy` body could not be typed at all).
// Usage: node generate_types.mjs <openapi.json URL or file> <out.ts>
import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import ts from "typescript";
import openapiTS, { astToString } from "openapi-typescript";

const [source, out] = process.argv.slice(2);
const BLOB = ts.factory.createTypeReferenceNode(ts.factory.createIdentifier("Blob"));
const NULL = ts.factory.createLiteralTypeNode(ts.factory.createNull());
const url = /^https?:/.test(source) ? new URL(source) : pathToFileURL(source);
const ast = await openapiTS(url, {
  transform(schemaObject) {
    if (schemaObject.format === "binary") {
      return schemaObject.nullable ? ts.factory.createUnionTypeNode([BLOB, NULL]) : BLOB;
    }
    return undefined;
  },
});
writeFileSync(out, astToString(ast));
