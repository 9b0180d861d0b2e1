// The eight steps of attention in the browser, in float32: attention/forward/compute.py's attend, step for step,
// so that a dragged number can be previewed every frame. A preview of the trace, never a second answer: the server's
// trace is the truth, and tests/e2e/test_scrub.py holds these numbers to it within the one tolerance rule.
// A tensor is {shape, data: Float32Array}, row-major, named as the trace names it; with one head no head axis.

// The article rounded one head's softmax for its own numbers: past this distance from the exact softmax it was made
// for other numbers, and the exact one is used (attention/forward/compute.py's ROUNDED_WITHIN, the session's rule).
export const ROUNDED_WITHIN = 0.1;

const DEFAULTS = {
  scale: "none", // "none" (the article), "sqrt_dk" (× 1/√(d_k per head)), or a multiplier
  temperature: 1, // scores are divided by it before the softmax
  mask: null, // null, "causal", or n×n_kv of 0/1 (1: the query may attend to the key)
  heads: 1, // h: head i takes the i-th block of columns of Q, K and V
  kv_heads: null, // g key/value heads, each shared by h/g query heads; null: one per query head
  w_out: null, // (d_v, d_out), applied to the concatenated heads
  weights_override: null, // n×n_kv used as step 5's result (the article's rounded softmax)
  rounded_within: null, // a number: the override is the article's, dropped past this distance (ROUNDED_WITHIN)
  rope_base: null, // RoPE with this base, or null
  positions: null, // each token's position for RoPE; null: 0, 1, …, n − 1
  rope_frequencies: null, // each pair's θ_p (a model's scaled RoPE); null: base^(−2p/d)
  q_norm: null, // Qwen3's q/k norm: γ_Q (d_head numbers), with k_norm γ_K; null: no norm (OLMo 2's over the
  // width: d_k numbers, every head's dims; norm_width needs no flag here, γ's length says it)
  k_norm: null,
  norm_eps: 1e-6, // the norm's ε
  // OLMo 2's head cut from its layer: {q, k, q_width, k_width}, each token's sum of squares of its query (key) in
  // the layer's other heads and the layer's widths; the mean of squares is (Σ own + rest) / width. null: none
  norm_rest: null,
  window: null, // a sliding window: query i sees keys i − window < j ≤ i (causal by itself); null: every key
  softcap: null, // Gemma 2's cap c: scores S → c · tanh(S / c), after the scale and the bias, before the mask
  alibi: null, // ALiBi: one slope m_h per head, scores − m_h (i − j), after the scale and the temperature
  sinks: null, // gpt-oss: one sink logit s_h per head, e^s_h in each softmax's denominator
  rope_fraction: null, // partial rotary: RoPE turns each head's first floor(d_head · fraction) dims; null: all
  relative_bias: null, // T5: each head's learned number per bucket of the distance j − i (heads × buckets)
  relative_max_distance: 128, // T5's: distances from it on share the last bucket
  relative_bidirectional: true, // T5's encoder: keys ahead in the second half of the buckets; false: its decoder's
  w_latent: null, // DeepSeek's multi-head latent attention: W_DKV (d_in, d_c); keys and values then read the latent
  // c = x W_DKV, and w_key, w_value (W_UK, W_UV) have d_c rows
  latent_norm: null, // γ of the latent's first len(γ) columns (DeepSeek's RMSNorm, ε norm_eps); the rest pass
};

/** Run the eight steps on a case ({x, w_query, w_key, w_value, options}, and cross-attention's x_kv: plain arrays)
 *  and return their tensors. */
export function attend(kase) {
  const o = { ...DEFAULTS, ...kase.options };
  const n = kase.x.length, h = o.heads, g = o.kv_heads || h;
  // steps 1-2: inputs and weights
  const x = matrix(kase.x); // (n, d_in)
  const x_kv = kase.x_kv ? matrix(kase.x_kv) : null; // cross-attention's other sentence (n_kv, d_in), or none
  const w_query = matrix(kase.w_query), w_key = matrix(kase.w_key), w_value = matrix(kase.w_value);
  const w_latent = o.w_latent ? matrix(o.w_latent) : null; // (d_in, d_c): multi-head latent attention's W_DKV
  const out = { x, ...(x_kv ? { x_kv } : {}), w_query, ...(w_latent ? { w_latent } : {}), w_key, w_value };
  // step 3: qkv, each head its block of columns; query head i reads key/value head i // (h/g); keys and values
  // read x (cross-attention: x_kv), or the latent c = x W_DKV (n, d_c) made from it, its first len(γ) columns
  // RMS-normed where the case has latent_norm
  let read = x_kv || x;
  if (w_latent) {
    read = matmul(read, w_latent); // (n_kv, d_c): all the KV cache keeps
    if (o.latent_norm) {
      out.latent_unnormed = read;
      read = latentNorm(read, o.latent_norm, o.norm_eps);
    }
    out.latent = read;
  }
  let queries = heads(matmul(x, w_query), h, h); // (h, n, d_k/h)
  let keys = heads(matmul(read, w_key), g, h); // (h, n_kv, d_k/h): n_kv = n but in cross-attention
  const values = heads(matmul(read, w_value), g, h); // (h, n_kv, d_v/h)
  const turned = o.rope_base !== null && o.rope_base !== undefined;
  if (o.q_norm) {
    // step 3a: norm — each head's query (key) over its root mean square, times γ
    Object.assign(out, { queries_unnormed: queries, keys_unnormed: keys });
    const rest = o.norm_rest; // the other heads' share of each token's sum of squares, where the case has it
    queries = rmsNorm(queries, o.q_norm, o.norm_eps, rest && { sums: rest.q, width: rest.q_width });
    keys = rmsNorm(keys, o.k_norm, o.norm_eps, rest && { sums: rest.k, width: rest.k_width });
  }
  if (turned) {
    // step 3b: rope — pair p of token i turned by the angle t_i · θ_p (the first d_rot dims)
    Object.assign(out, { queries_unrotated: queries, keys_unrotated: keys });
    const t = o.positions || Array.from({ length: n }, (_, i) => i);
    const dRot = rotaryDims(queries.shape[2], o.rope_fraction); // the dims turned, in pairs; the rest pass
    const theta = o.rope_frequencies || Array.from({ length: dRot / 2 }, (_, p) => o.rope_base ** (-(2 * p) / dRot));
    queries = rope(queries, t, theta);
    keys = rope(keys, t, theta);
  }
  Object.assign(out, { queries, keys, values });
  // steps 4-5: scores (scaled, biased, capped, masked), then the softmax (with a sink's share)
  const multiplier = scaleFactor(o.scale, kase.w_query[0].length / h) / o.temperature;
  Object.assign(out, scoresOf(queries, keys, multiplier, o));
  const { weights_exact, weights_sink } = softmaxOf(out.scores, o.sinks);
  let weights = weights_exact;
  if (o.weights_override) {
    const override = tensor(weights_exact.shape, Float32Array.from(o.weights_override.flat()));
    out.rounding_gap = maxGap(weights_exact, override);
    out.rounded_stale = o.rounded_within !== null && out.rounding_gap > o.rounded_within;
    if (!out.rounded_stale) weights = override;
  }
  Object.assign(out, { weights_exact }, weights_sink ? { weights_sink } : {}, { weights });
  // step 6: weighted — every product values[k, c] · weights[q, k]: (h, n_k, n_q, d_v/h)
  out.weighted = weightedOf(values, weights);
  // step 7: outputs — summed over the keys, heads side by side, then w_out
  const head_outputs = batched(weights, transpose(values)); // (h, n_q, d_v/h)
  const concat = joined(head_outputs); // (n_q, d_v)
  const outputs = o.w_out ? matmul(concat, matrix(o.w_out)) : concat; // (n_q, d_out)
  if (h > 1) out.head_outputs = head_outputs;
  if (h > 1 || o.w_out) out.concat = concat;
  out.outputs = outputs;
  // one head: no head axis, as the trace records it
  if (h === 1) for (const name of PER_HEAD) if (out[name]) out[name] = squeezed(out[name]);
  return out;
}

const PER_HEAD = ["queries", "keys", "values", "queries_unrotated", "keys_unrotated", "queries_unnormed",
  "keys_unnormed", "scores_raw", "position_bias", "scores_uncapped", "scores", "weights_exact", "weights_sink",
  "weights", "weighted"];

function scoresOf(queries, keys, multiplier, o) {
  // Step 4, as compute.py's steps_4_to_7 records it: scores_raw, position_bias (ALiBi), scores_uncapped (a cap),
  // scores (−inf where the mask or the window hides a key). Each operation rounds to float32, as torch's do.
  const n = queries.shape[1], recorded = {};
  recorded.scores_raw = batched(queries, keys); // (h, n_q, n_k): queries @ keys.T
  let scores = tensor(recorded.scores_raw.shape, recorded.scores_raw.data.map((s) => s * multiplier));
  if (o.alibi || o.relative_bias) {
    // ALiBi: − m_h (i − j), the further back a key the lower its score; T5: the head's number for j − i's bucket
    const bias = tensor(scores.shape), f = Math.fround;
    const table = o.relative_bias, bucket = table && bucketOf(table[0].length, o.relative_max_distance, o.relative_bidirectional);
    forEachCell(bias, (k, i, j, head) => {
      const alibi = o.alibi ? f(f(o.alibi[head]) * (j - i)) : 0;
      bias.data[k] = table ? f(alibi + f(table[head][bucket(j - i)])) : alibi;
    });
    scores = tensor(scores.shape, scores.data.map((s, k) => s + bias.data[k]));
    recorded.position_bias = bias;
  }
  if (o.softcap !== null && o.softcap !== undefined) {
    // Gemma 2: squashed into (−c, c), the same order kept
    recorded.scores_uncapped = scores;
    const c = o.softcap;
    scores = tensor(scores.shape, scores.data.map((s) => c * Math.tanh(s / c)));
  }
  const allowed = allowedOf(o.mask, n, o.window); // (i, j) -> bool, or null
  if (allowed) forEachCell(scores, (k, i, j) => { if (!allowed(i, j)) scores.data[k] = -Infinity; });
  recorded.scores = scores;
  return recorded;
}

function bucketOf(buckets, maxDistance, bidirectional) {
  // T5's bucket of a distance j − i, as compute.py's relative_buckets: its own for a near one, then logarithmically
  // wider ones up to maxDistance (in float32, as T5's), keys ahead in the second half when bidirectional
  const f = Math.fround, half = bidirectional ? Math.floor(buckets / 2) : buckets, exact = Math.floor(half / 2);
  const logMax = f(Math.log(maxDistance / exact));
  return (d) => {
    const ahead = bidirectional && d > 0 ? half : 0, far = bidirectional ? Math.abs(d) : Math.max(-d, 0);
    if (far < exact) return ahead + far;
    const spread = f(f(f(Math.log(f(far / exact))) / logMax) * (half - exact));
    return ahead + Math.min(exact + Math.trunc(spread), half - 1);
  };
}

function scaleFactor(scale, dHead) {
  if (scale === "none") return 1;
  if (scale === "sqrt_dk") return 1 / Math.sqrt(dHead);
  return scale;
}

function allowedOf(mask, n, window) {
  // which keys query i may see: the mask's, and within a sliding window the last `window` keys up to i itself
  let masked = null;
  if (mask === "causal") masked = (i, j) => j <= i; // query i may attend to keys 1..i
  else if (mask) masked = (i, j) => mask[i][j] !== 0;
  if (window === null || window === undefined) return masked;
  const inside = (i, j) => i - window < j && j <= i; // the window ends at the query: causal too
  return masked ? (i, j) => masked(i, j) && inside(i, j) : inside;
}

function rotaryDims(dHead, fraction) {
  // partial rotary's turned dims, as transformers counts them: int(d_head · fraction); all of them for null
  return fraction === null || fraction === undefined ? dHead : Math.floor(dHead * fraction);
}

// Tensors: a shape and float32 numbers. Sums run in JavaScript's float64 and are stored in float32: each number is
// at least as close to the exact one as torch's float32 sum, so the one tolerance rule covers both.

function tensor(shape, data) {
  return { shape, data: data || new Float32Array(shape.reduce((a, b) => a * b, 1)) };
}

function matrix(rows) {
  return tensor([rows.length, rows[0].length], Float32Array.from(rows.flat()));
}

function squeezed(t) {
  return tensor(t.shape.slice(1), t.data);
}

function matmul(a, b) {
  // (n, m) @ (m, p) -> (n, p)
  const [n, m] = a.shape, p = b.shape[1], c = tensor([n, p]);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < p; j++) {
      let sum = 0;
      for (let k = 0; k < m; k++) sum += a.data[i * m + k] * b.data[k * p + j];
      c.data[i * p + j] = sum;
    }
  return c;
}

function heads(m, groups, h) {
  // (n, groups · w) -> (h, n, w): group i // (h / groups) for head i
  const [n, width] = m.shape, w = width / groups, per = h / groups, t = tensor([h, n, w]);
  for (let head = 0; head < h; head++) {
    const group = Math.floor(head / per);
    for (let i = 0; i < n; i++)
      for (let c = 0; c < w; c++) t.data[(head * n + i) * w + c] = m.data[i * width + group * w + c];
  }
  return t;
}

function transpose(t) {
  // (h, a, b) -> (h, b, a)
  const [h, a, b] = t.shape, out = tensor([h, b, a]);
  for (let head = 0; head < h; head++)
    for (let i = 0; i < a; i++)
      for (let j = 0; j < b; j++) out.data[(head * b + j) * a + i] = t.data[(head * a + i) * b + j];
  return out;
}

function batched(a, b) {
  // (h, n, m) @ (h, p, m).T -> (h, n, p): each row of a against each row of b
  const [h, n, m] = a.shape, p = b.shape[1], c = tensor([h, n, p]);
  for (let head = 0; head < h; head++)
    for (let i = 0; i < n; i++)
      for (let j = 0; j < p; j++) {
        let sum = 0;
        for (let k = 0; k < m; k++) sum += a.data[(head * n + i) * m + k] * b.data[(head * p + j) * m + k];
        c.data[(head * n + i) * p + j] = sum;
      }
  return c;
}

function forEachCell(t, f) {
  // f(flat index, row, column, head) for each cell of (h, n_q, n_k)
  const [h, n, p] = t.shape;
  for (let head = 0; head < h; head++)
    for (let i = 0; i < n; i++) for (let j = 0; j < p; j++) f((head * n + i) * p + j, i, j, head);
}

function softmaxOf(scores, sinks) {
  // Step 5 over the keys: {weights_exact, weights_sink}. With gpt-oss's sinks, e^s_h joins each row's denominator
  // (weights_sink (h, n_q, 1): the weight the sink took), each exponent less max(row's largest, s_h). A fully
  // masked row: zeros, as fused attention gives (with a sink: all the weight the sink's)
  const [h, n, p] = scores.shape, w = tensor(scores.shape), sink = sinks ? tensor([h, n, 1]) : null;
  for (let row = 0; row < h * n; row++) {
    const s = scores.data.subarray(row * p, row * p + p);
    const logit = sinks ? Math.fround(sinks[Math.floor(row / n)]) : -Infinity;
    const top = Math.max(logit, ...s);
    if (top === -Infinity) continue; // every key masked, no sink: a row of zeros
    let sum = sinks ? Math.exp(logit - top) : 0;
    for (let j = 0; j < p; j++) sum += Math.exp(s[j] - top);
    for (let j = 0; j < p; j++) w.data[row * p + j] = Math.exp(s[j] - top) / sum;
    if (sinks) sink.data[row] = Math.exp(logit - top) / sum;
  }
  return { weights_exact: w, weights_sink: sink };
}

function maxGap(a, b) {
  let gap = 0;
  for (let k = 0; k < a.data.length; k++) gap = Math.max(gap, Math.abs(a.data[k] - b.data[k]));
  return gap;
}

function rmsNorm(m, gamma, eps, rest) {
  // (h, n, d): each row times 1/√(mean of its squares + ε), then each dim times γ (float32 at each operation); with
  // γ of every head's dims (OLMo 2's norm over the width), a token's rows of every head share one mean, and head i
  // takes γ's block of its key/value head (γ's blocks g ≤ h, each read by h/g query heads); with rest ({sums,
  // width}: a head cut from its layer) the token's sum joins the other heads' and the mean is over the layer's width
  const [h, n, d] = m.shape, out = tensor(m.shape);
  const width = gamma.length !== d, group = width ? h / (gamma.length / d) : 1;
  const rows = (t) => (width ? Array.from({ length: h }, (_, i) => i * n + t) : [t]); // the rows sharing t's mean
  for (let t = 0; t < (width ? n : h * n); t++) {
    let squares = 0;
    for (const row of rows(t))
      for (let c = 0; c < d; c++) squares = Math.fround(squares + Math.fround(m.data[row * d + c] ** 2));
    let mean = Math.fround(squares / (rows(t).length * d));
    if (rest) mean = Math.fround(Math.fround(Math.fround(mean * gamma.length) + rest.sums[t % n]) / rest.width);
    const inverse = Math.fround(1 / Math.sqrt(mean + eps));
    for (const row of rows(t)) {
      const first = width ? Math.floor(Math.floor(row / n) / group) * d : 0; // γ's block of the row's head
      for (let c = 0; c < d; c++) out.data[row * d + c] = Math.fround(m.data[row * d + c] * inverse) * gamma[first + c];
    }
  }
  return out;
}

function latentNorm(m, gamma, eps) {
  // (n, d_c): each row's first len(γ) numbers times 1/√(mean of their squares + ε), then times γ (float32 at each
  // operation, as rmsNorm); the columns after them (the decoupled rotary key) pass as they are
  const [n, dc] = m.shape, d = gamma.length, out = tensor(m.shape, Float32Array.from(m.data));
  for (let i = 0; i < n; i++) {
    let squares = 0;
    for (let c = 0; c < d; c++) squares = Math.fround(squares + Math.fround(m.data[i * dc + c] ** 2));
    const inverse = Math.fround(1 / Math.sqrt(Math.fround(squares / d) + eps));
    for (let c = 0; c < d; c++) out.data[i * dc + c] = Math.fround(m.data[i * dc + c] * inverse) * gamma[c];
  }
  return out;
}

function rope(m, positions, theta) {
  // (h, n, d): dims 2p and 2p+1 of the token at position t turned by t · θ_p, for the pairs θ has (partial
  // rotary: the first d_rot dims; the rest pass unturned); angles in float64
  const [h, n, d] = m.shape, out = tensor(m.shape, Float32Array.from(m.data));
  for (let head = 0; head < h; head++)
    for (let i = 0; i < n; i++)
      for (let p = 0; p < theta.length; p++) {
        const angle = positions[i] * theta[p];
        const cos = Math.fround(Math.cos(angle)), sin = Math.fround(Math.sin(angle));
        const at = (head * n + i) * d + 2 * p, even = m.data[at], odd = m.data[at + 1];
        out.data[at] = even * cos - odd * sin;
        out.data[at + 1] = even * sin + odd * cos;
      }
  return out;
}

function weightedOf(values, weights) {
  // (h, n_k, d) and (h, n_q, n_k) -> (h, n_k, n_q, d): step 6's broadcast, values[k] scaled by each query's weight
  const [h, nk, d] = values.shape, nq = weights.shape[1], out = tensor([h, nk, nq, d]);
  for (let head = 0; head < h; head++)
    for (let k = 0; k < nk; k++)
      for (let q = 0; q < nq; q++) {
        const weight = weights.data[(head * nq + q) * nk + k];
        for (let c = 0; c < d; c++)
          out.data[((head * nk + k) * nq + q) * d + c] = values.data[(head * nk + k) * d + c] * weight;
      }
  return out;
}

function joined(t) {
  // (h, n, w) -> (n, h · w): the heads side by side
  const [h, n, w] = t.shape, out = tensor([n, h * w]);
  for (let head = 0; head < h; head++)
    for (let i = 0; i < n; i++)
      for (let c = 0; c < w; c++) out.data[i * h * w + head * w + c] = t.data[(head * n + i) * w + c];
  return out;
}
