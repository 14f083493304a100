// onnx_run.mjs MODEL INPUT EXPECTED DTYPE DIM... - runs an ONNX model in
// onnxruntime-web (WebAssembly, one thread) on one input (raw little-endian
// int64 or float32 of shape DIM...) and prints the largest absolute
// difference from EXPECTED (raw float32) and the output's shape as JSON:
// {"max_abs_diff": x, "n": count, "shape": [...]}. NODE_PATH or the
// working directory must find onnxruntime-web.
import fs from 'fs';
import { createRequire } from 'module';

const require = createRequire(process.cwd() + '/');
const ort = require('onnxruntime-web');
ort.env.wasm.numThreads = 1;
const [model, input, expected, dtype, ...dims] = process.argv.slice(2);
const raw = fs.readFileSync(input);
const data = dtype === 'int64' ? new BigInt64Array(raw.buffer, raw.byteOffset, raw.length / 8)
                               : new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4);
const session = await ort.InferenceSession.create(fs.readFileSync(model));
const out = await session.run({ [session.inputNames[0]]: new ort.Tensor(dtype, data, dims.map(Number)) });
const y = out[session.outputNames[0]];
const e = fs.readFileSync(expected);
const want = new Float32Array(e.buffer, e.byteOffset, e.length / 4);
let m = want.length === y.data.length ? 0 : Infinity;
for (let i = 0; i < want.length && i < y.data.length; i++) m = Math.max(m, Math.abs(want[i] - y.data[i]));
console.log(JSON.stringify({ max_abs_diff: Number.isNaN(m) ? null : m, n: y.data.length, shape: y.dims }));
