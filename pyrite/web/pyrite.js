// pyrite.js: replays a pyrite web bundle (pyrite.web.export) with WebGPU, in a browser.
//
//   import { load } from "./pyrite.js";
//   const model = await load("./");                    // the folder holding model.json, model.bin
//   const out = await model.run({ input_0: new Float32Array(7 * 13) });   // or run([array, ...])
//   out.output.data;  out.output.shape;                  // a typed array in row-major order
//
// The bundle holds pyrite's own WGSL kernels with every size baked in, their dispatch grids and
// info words, and the weights they read. `run` writes the inputs into their buffers, encodes
// every command in one submission, and reads the outputs back. Inputs take any array-like of
// numbers (BigInt64Array too, for token ids); outputs come as Float32Array for float dtypes,
// Int32Array / Int16Array / Int8Array / Uint8Array for integers, Uint8Array (0 or 1) for bool.
// No dependencies; an ES module.

const FORMAT = "pyrite-web";
const VERSION = 1;

export class PyriteError extends Error {
  constructor(message) {
    super(message);
    this.name = "PyriteError";
  }
}

// ---- element conversions ---------------------------------------------------------------------
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float -> IEEE half bits, rounded to nearest even (as pyrite's .half()). */
export function toHalf(v) {
  f32[0] = v;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  let e = (x >>> 23) & 0xff;
  let m = x & 0x7fffff;
  if (e === 255) return sign | 0x7c00 | (m ? 0x200 : 0);
  e = e - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    m |= 0x800000;
    const shift = 14 - e;
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (m >>> 13);
  const rem = m & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

/** IEEE half bits -> float. */
export function fromHalf(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

function toBf16(v) {
  f32[0] = v;
  const x = u32[0];
  if ((x & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

function fromBf16(h) {
  u32[0] = h << 16;
  return f32[0];
}

const INT_RANGE = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  int64: [-(2 ** 31), 2 ** 31 - 1], // (pyrite stores int64 as int32, after this check)
  int16: [-(2 ** 15), 2 ** 15 - 1],
  int8: [-128, 127],
  uint8: [0, 255],
};

/** Bytes one element takes in a buffer of this storage type. */
function storageBytes(storage) {
  return storage === "float16" || storage === "uint16" ? 2 : 4;
}

/** A spec's values (any array-like) as the words pyrite's kernels read. */
function toStorage(spec, values) {
  const n = values.length;
  const bytes = storageBytes(spec.storage) * n;
  const out = new ArrayBuffer((bytes + 3) & ~3);
  const d = spec.dtype;
  if (spec.storage === "float32") {
    const a = new Float32Array(out, 0, n);
    for (let i = 0; i < n; i++) a[i] = Number(values[i]);
  } else if (spec.storage === "float16") {
    const a = new Uint16Array(out, 0, n);
    for (let i = 0; i < n; i++) a[i] = toHalf(Number(values[i]));
  } else if (spec.storage === "uint16") {
    const a = new Uint16Array(out, 0, n);
    for (let i = 0; i < n; i++) a[i] = toBf16(Number(values[i]));
  } else if (d === "bool") {
    const a = new Uint32Array(out, 0, n);
    for (let i = 0; i < n; i++) a[i] = values[i] ? 1 : 0;
  } else {
    const [lo, hi] = INT_RANGE[d] ?? INT_RANGE.int32;
    const a = new Int32Array(out, 0, n);
    for (let i = 0; i < n; i++) {
      const v = Number(values[i]);
      if (!Number.isInteger(v) || v < lo || v > hi) {
        throw new PyriteError(
          `pyrite: input ${spec.name} (${d}) holds ${values[i]} at element ${i}, outside ${d}'s range`,
        );
      }
      a[i] = v;
    }
  }
  return out;
}

const RESULT_TYPES = {
  float32: Float32Array, float16: Float32Array, bfloat16: Float32Array, float64: Float32Array,
  int32: Int32Array, int64: Int32Array, int16: Int16Array, int8: Int8Array, uint8: Uint8Array,
  bool: Uint8Array,
};

/** The view `spec` of the words in `raw` (which begin at element `first`), row-major. */
function gather(spec, raw, first) {
  const shape = spec.shape;
  const n = shape.reduce((a, b) => a * b, 1);
  const Out = RESULT_TYPES[spec.dtype] ?? Float32Array;
  const out = new Out(n);
  let read;
  if (spec.storage === "float32") {
    const a = new Float32Array(raw);
    read = (i) => a[i];
  } else if (spec.storage === "float16") {
    const a = new Uint16Array(raw);
    read = (i) => fromHalf(a[i]);
  } else if (spec.storage === "uint16") {
    const a = new Uint16Array(raw);
    read = (i) => fromBf16(a[i]);
  } else if (spec.storage === "uint32") {
    const a = new Uint32Array(raw);
    read = (i) => (a[i] ? 1 : 0);
  } else {
    const a = new Int32Array(raw);
    read = (i) => a[i];
  }
  const nd = shape.length;
  const idx = new Array(nd).fill(0);
  let at = spec.offset - first;
  for (let k = 0; k < n; k++) {
    out[k] = read(at);
    for (let d = nd - 1; d >= 0; d--) {
      idx[d]++;
      at += spec.strides[d];
      if (idx[d] < shape[d]) break;
      at -= spec.strides[d] * shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

/** [first element, elements] a view reaches. */
function reach(spec) {
  let lo = spec.offset;
  let hi = spec.offset;
  for (let d = 0; d < spec.shape.length; d++) {
    if (spec.shape[d] === 0) return [spec.offset, 0];
    const span = (spec.shape[d] - 1) * spec.strides[d];
    if (span < 0) lo += span;
    else hi += span;
  }
  return [lo, hi - lo + 1];
}

// ---- loading ----------------------------------------------------------------------------------
async function fetchOk(url) {
  const r = await fetch(url);
  if (!r.ok) throw new PyriteError(`pyrite: could not fetch ${url}: HTTP ${r.status}`);
  return r;
}

/** The limits a bundle's kernels may need beyond WebGPU's defaults: asked at the adapter's own
 * value where it has more (as pyrite asks on its own device). */
const ASKED_LIMITS = [
  "maxComputeWorkgroupStorageSize",
  "maxComputeInvocationsPerWorkgroup",
  "maxComputeWorkgroupSizeX",
  "maxComputeWorkgroupSizeY",
  "maxComputeWorkgroupSizeZ",
];

async function openDevice(needs, options) {
  if (typeof navigator === "undefined" || !navigator.gpu) {
    throw new PyriteError(
      "pyrite: this browser offers no WebGPU (navigator.gpu is missing); use a browser with " +
        "WebGPU on (Chrome or Edge 113+, Safari 26+, Firefox 141+ on Windows)",
    );
  }
  const adapter = await navigator.gpu.requestAdapter({
    powerPreference: options.powerPreference ?? "high-performance",
  });
  if (!adapter) throw new PyriteError("pyrite: the browser found no WebGPU adapter");
  for (const f of needs.features) {
    if (!adapter.features.has(f)) {
      throw new PyriteError(
        `pyrite: the model's kernels need the WebGPU feature '${f}', which this adapter ` +
          "does not offer (export it in float32, with portable=True)",
      );
    }
  }
  const requiredLimits = {};
  for (const k of ["maxStorageBuffersPerShaderStage", "maxStorageBufferBindingSize", "maxBufferSize"]) {
    if (adapter.limits[k] < needs[k]) {
      throw new PyriteError(
        `pyrite: the model needs ${k} of ${needs[k]}; this adapter offers ${adapter.limits[k]}`,
      );
    }
    requiredLimits[k] = needs[k];
  }
  for (const k of ASKED_LIMITS) requiredLimits[k] = adapter.limits[k];
  const device = await adapter.requestDevice({ requiredFeatures: needs.features, requiredLimits });
  return { adapter, device };
}

/**
 * Load the bundle in folder `url` (relative to the page, or absolute) onto a WebGPU device.
 * options: { device } to use a GPUDevice of yours, { powerPreference } for the adapter.
 */
export async function load(url = "./", options = {}) {
  const base = url.endsWith("/") ? url : url + "/";
  const [plan, bin] = await Promise.all([
    fetchOk(base + "model.json").then((r) => r.json()),
    fetchOk(base + "model.bin").then((r) => r.arrayBuffer()),
  ]);
  if (plan.format !== FORMAT || plan.version !== VERSION) {
    throw new PyriteError(
      `pyrite: ${base}model.json is not a pyrite web bundle of version ${VERSION} ` +
        `(format ${plan.format}, version ${plan.version})`,
    );
  }
  const ends = [
    ...plan.buffers.filter((b) => b.init).map((b) => b.init[0] + b.init[1]),
    ...plan.commands.filter((c) => c[0] === "u").map((c) => c[3] + c[4]),
  ];
  const need = Math.max(0, ...ends);
  if (need > bin.byteLength) {
    throw new PyriteError(
      `pyrite: ${base}model.bin has ${bin.byteLength} bytes where the plan reads ${need}: ` +
        "the file is truncated (or not this model's)",
    );
  }
  let adapter = null;
  let device = options.device;
  if (!device) ({ adapter, device } = await openDevice(plan.needs, options));
  const model = new Model(plan, bin, device, adapter);
  await model._build();
  return model;
}

export class Model {
  constructor(plan, bin, device, adapter) {
    this.plan = plan;
    this.bin = bin;
    this.device = device;
    this.adapter = adapter;
    this.inputs = plan.inputs.map(({ name, shape, dtype }) => ({ name, shape, dtype }));
    this.outputs = plan.outputs.map(({ name, shape, dtype }) => ({ name, shape, dtype }));
  }

  async _build() {
    const { plan, bin, device } = this;
    const U = GPUBufferUsage;
    const W = plan.info_words;
    device.pushErrorScope("validation");
    device.pushErrorScope("out-of-memory");
    this.buffers = plan.buffers.map((b) => {
      const buf = device.createBuffer({ size: b.size, usage: U.STORAGE | U.COPY_SRC | U.COPY_DST });
      if (b.init) device.queue.writeBuffer(buf, 0, bin, b.init[0], b.init[1]);
      return buf;
    });
    const dispatches = plan.commands.filter((c) => c[0] === "d").length;
    const info = new Int32Array(Math.max(dispatches, 1) * W);
    let k = 0;
    let constBytes = 0;
    for (const c of plan.commands) {
      if (c[0] === "d") info.set(c[3], W * k++);
      else if (c[0] === "u") constBytes += (c[4] + 3) & ~3;
    }
    this.info = device.createBuffer({ size: info.byteLength, usage: U.STORAGE | U.COPY_DST });
    device.queue.writeBuffer(this.info, 0, info);
    this.consts = null;
    if (constBytes) {
      this.consts = device.createBuffer({ size: constBytes, usage: U.COPY_SRC | U.COPY_DST });
    }
    const layouts = new Map();
    const layout = (modes) => {
      let l = layouts.get(modes);
      if (!l) {
        const entries = [...modes].map((m, i) => ({
          binding: i,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: m === "w" ? "storage" : "read-only-storage" },
        }));
        entries.push({
          binding: modes.length,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: "read-only-storage", hasDynamicOffset: true, minBindingSize: W * 4 },
        });
        const bgl = device.createBindGroupLayout({ entries });
        l = { bgl, pl: device.createPipelineLayout({ bindGroupLayouts: [bgl] }) };
        layouts.set(modes, l);
      }
      return l;
    };
    this.pipelines = await Promise.all(
      plan.pipelines.map(async (p, i) => {
        const module = device.createShaderModule({ code: p.wgsl });
        try {
          return await device.createComputePipelineAsync({
            layout: layout(p.modes).pl,
            compute: { module, entryPoint: "main" },
          });
        } catch (err) {
          const info = await module.getCompilationInfo();
          const lines = info.messages.map((m) => `  ${m.type} at ${m.lineNum}:${m.linePos}: ${m.message}`);
          throw new PyriteError(
            `pyrite: kernel ${i} did not build on this device: ${err.message}\n${lines.join("\n")}`,
          );
        }
      }),
    );
    // the commands as steps: runs of dispatches (one compute pass) between copies
    this.steps = [];
    let pass = null;
    let kk = 0;
    let cpos = 0;
    for (const c of plan.commands) {
      if (c[0] === "d") {
        const [, p, ix, , grid] = c;
        const entries = ix.map((b, i) => ({ binding: i, resource: { buffer: this.buffers[b] } }));
        entries.push({ binding: ix.length, resource: { buffer: this.info, offset: 0, size: W * 4 } });
        const group = device.createBindGroup({ layout: layout(plan.pipelines[p].modes).bgl, entries });
        if (!pass) this.steps.push((pass = { kind: "pass", dispatches: [] }));
        pass.dispatches.push([this.pipelines[p], group, kk++ * W * 4, grid]);
      } else {
        pass = null;
        if (c[0] === "c") {
          const [, s, so, d, doff, n] = c;
          this.steps.push({ kind: "copy", args: [this.buffers[s], so, this.buffers[d], doff, n] });
        } else {
          const [, d, off, at, n] = c;
          const size = (n + 3) & ~3;
          device.queue.writeBuffer(this.consts, cpos, bin, at, size);
          this.steps.push({ kind: "copy", args: [this.consts, cpos, this.buffers[d], off, size] });
          cpos += size;
        }
      }
    }
    this.staging = plan.outputs.map((spec) => {
      const [first, n] = reach(spec);
      const sb = storageBytes(spec.storage);
      const start = (first * sb) & ~3;
      const end = Math.min(((first + n) * sb + 3) & ~3, plan.buffers[spec.buffer].size);
      const size = Math.max(end - start, 4);
      return { start, size, first: start / sb, buffer: device.createBuffer({ size, usage: U.MAP_READ | U.COPY_DST }) };
    });
    const oom = await device.popErrorScope();
    const bad = await device.popErrorScope();
    if (oom) throw new PyriteError(`pyrite: the model's buffers do not fit this device: ${oom.message}`);
    if (bad) throw new PyriteError(`pyrite: the bundle did not load on this device: ${bad.message}`);
  }

  _write(inputs) {
    const list = Array.isArray(inputs) ? inputs : this.plan.inputs.map((s) => inputs?.[s.name]);
    if (list.length !== this.plan.inputs.length) {
      throw new PyriteError(
        `pyrite: the model takes ${this.plan.inputs.length} inputs (` +
          `${this.plan.inputs.map((s) => s.name).join(", ")}), got ${list.length}`,
      );
    }
    this.plan.inputs.forEach((spec, i) => {
      const v = list[i];
      if (v === undefined || v === null) throw new PyriteError(`pyrite: input ${spec.name} is missing`);
      const n = spec.shape.reduce((a, b) => a * b, 1);
      if (v.length !== n) {
        throw new PyriteError(
          `pyrite: input ${spec.name} has shape [${spec.shape}] (${n} elements, baked into ` +
            `the kernels); got ${v.length} elements`,
        );
      }
      const words = toStorage(spec, v);
      this.device.queue.writeBuffer(this.buffers[spec.buffer], spec.offset * storageBytes(spec.storage), words);
    });
  }

  _encode(encoder) {
    for (const step of this.steps) {
      if (step.kind === "copy") {
        encoder.copyBufferToBuffer(...step.args);
        continue;
      }
      const pass = encoder.beginComputePass();
      let last = null;
      for (const [pipeline, group, offset, grid] of step.dispatches) {
        if (pipeline !== last) pass.setPipeline((last = pipeline));
        pass.setBindGroup(0, group, [offset]);
        pass.dispatchWorkgroups(grid[0], grid[1], grid[2]);
      }
      pass.end();
    }
  }

  /** Run the model: inputs as an array in order, or an object by name. Resolves to an object
   * { name: { data, shape, dtype } } of the outputs, in order. Runs called before an earlier
   * one resolved wait for it (they share the buffers). */
  run(inputs) {
    const next = (this._last ?? Promise.resolve()).catch(() => {}).then(() => this._run(inputs));
    this._last = next;
    return next;
  }

  async _run(inputs) {
    const { device } = this;
    this._write(inputs);
    device.pushErrorScope("validation");
    const encoder = device.createCommandEncoder();
    this._encode(encoder);
    this.plan.outputs.forEach((spec, i) => {
      const s = this.staging[i];
      encoder.copyBufferToBuffer(this.buffers[spec.buffer], s.start, s.buffer, 0, s.size);
    });
    device.queue.submit([encoder.finish()]);
    const err = await device.popErrorScope();
    if (err) throw new PyriteError(`pyrite: the model's commands were refused: ${err.message}`);
    await Promise.all(this.staging.map((s) => s.buffer.mapAsync(GPUMapMode.READ)));
    const out = {};
    this.plan.outputs.forEach((spec, i) => {
      const s = this.staging[i];
      const raw = s.buffer.getMappedRange().slice(0);
      s.buffer.unmap();
      out[spec.name] = { data: gather(spec, raw, s.first), shape: spec.shape.slice(), dtype: spec.dtype };
    });
    return out;
  }

  /** Queue `times` runs on the last inputs written, without reading back, and resolve when
   * the GPU has finished them: the device time of a run, for measuring. */
  async repeat(times = 1) {
    const encoder = this.device.createCommandEncoder();
    for (let i = 0; i < times; i++) this._encode(encoder);
    this.device.queue.submit([encoder.finish()]);
    await this.device.queue.onSubmittedWorkDone();
  }

  /** Put every buffer the bundle starts with back as it was loaded (a KV cache, a mask of
   * the keys written): a decoder bundle's state before a new generation. */
  reset() {
    this.plan.buffers.forEach((b, i) => {
      if (b.init) this.device.queue.writeBuffer(this.buffers[i], 0, this.bin, b.init[0], b.init[1]);
    });
  }

  destroy() {
    for (const b of this.buffers) b.destroy();
    for (const s of this.staging) s.buffer.destroy();
    this.info.destroy();
    if (this.consts) this.consts.destroy();
  }
}
