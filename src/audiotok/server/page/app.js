// audiotok demo page: upload or record audio, encode it into tokens on the server, decode them
// back (in one request, or streamed over the WebSocket and played as it arrives), and show both
// sounds, their spectrograms and the tokens. Plain JS, no dependencies.
"use strict";

const $ = (id) => document.getElementById(id);
const models = {};
let recorded = null;   // a WAV Blob from the microphone
let recorder = null;   // {ctx, stream, node, chunks, rate} while recording
window.audiotokResult = null;  // what the last run measured (read by the browser test)

function setState(state) { document.body.dataset.state = state; }
function status(text) { $("status").textContent = text; }
function showError(message) {
  $("error").textContent = message;
  $("error").hidden = false;
  status("");
  setState("error");
}
function authHeaders(extra = {}) {
  const key = $("apikey").value.trim();
  return key ? { ...extra, Authorization: "Bearer " + key } : extra;
}

function codebooks(n) {
  return n === 1 ? "1 codebook" : `${n} codebooks`;
}

async function api(path, options = {}) {
  let r;
  try {
    r = await fetch(path, { ...options, headers: authHeaders(options.headers || {}) });
  } catch (e) {
    throw new Error("the server cannot be reached (" + e.message + ")");
  }
  if (!r.ok) {
    let message = r.statusText;
    try { message = (await r.json()).error || message; } catch (e) { /* not JSON */ }
    throw new Error(`${r.status}: ${message}`);
  }
  return r;
}

async function loadModels() {
  try {
    const doc = await (await api("/v1/models")).json();
    const select = $("model");
    select.innerHTML = "";
    for (const m of doc.models) {
      models[m.name] = m;
      const opt = document.createElement("option");
      opt.value = m.name;
      const stereo = m.channels > 1 ? ` ${m.channels === 2 ? "stereo" : m.channels + " channels"}` : "";
      opt.textContent = `${m.name} (${m.model}, ${m.sample_rate} Hz${stereo}, ${codebooks(m.num_codebooks)})`;
      select.appendChild(opt);
    }
    $("go").disabled = doc.models.length === 0;
    setState("idle");
  } catch (e) {
    showError("cannot list the models: " + e.message);
  }
}

// -- recording: raw PCM from the microphone, sent as a WAV file ----------------------------------
async function toggleRecord() {
  if (recorder) {
    const { ctx, stream, node, chunks, rate } = recorder;
    recorder = null;
    node.disconnect();
    stream.getTracks().forEach((t) => t.stop());
    await ctx.close();
    recorded = wavBlob(concat(chunks), rate);
    $("record").textContent = "Record";
    status(`recorded ${(recorded.size / 2 / rate).toFixed(1)} s`);
    return;
  }
  try {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const ctx = new AudioContext();
    const source = ctx.createMediaStreamSource(stream);
    const node = ctx.createScriptProcessor(4096, 1, 1);
    const chunks = [];
    node.onaudioprocess = (ev) => chunks.push(new Float32Array(ev.inputBuffer.getChannelData(0)));
    source.connect(node);
    node.connect(ctx.destination);
    recorder = { ctx, stream, node, chunks, rate: ctx.sampleRate };
    recorded = null;
    $("record").textContent = "Stop";
    status("recording…");
  } catch (e) {
    showError("cannot record: " + e.message);
  }
}

function concat(chunks) {
  const out = new Float32Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) { out.set(c, at); at += c.length; }
  return out;
}

// samples: interleaved when channels > 1
function wavBlob(samples, rate, channels = 1) {
  const buf = new ArrayBuffer(44 + samples.length * 2);
  const v = new DataView(buf);
  const text = (at, s) => { for (let i = 0; i < s.length; i++) v.setUint8(at + i, s.charCodeAt(i)); };
  text(0, "RIFF"); v.setUint32(4, 36 + samples.length * 2, true); text(8, "WAVE");
  text(12, "fmt "); v.setUint32(16, 16, true); v.setUint16(20, 1, true); v.setUint16(22, channels, true);
  v.setUint32(24, rate, true); v.setUint32(28, rate * 2 * channels, true); v.setUint16(32, 2 * channels, true);
  v.setUint16(34, 16, true); text(36, "data"); v.setUint32(40, samples.length * 2, true);
  for (let i = 0; i < samples.length; i++) {
    v.setInt16(44 + 2 * i, Math.max(-1, Math.min(1, samples[i])) * 32767, true);
  }
  return new Blob([buf], { type: "audio/wav" });
}

// -- pictures ------------------------------------------------------------------------------------
function fft(re, im) {  // in place, radix 2; length a power of two
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) { [re[i], re[j]] = [re[j], re[i]]; [im[i], im[j]] = [im[j], im[i]]; }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const ang = -2 * Math.PI / len;
    for (let i = 0; i < n; i += len) {
      for (let k = 0; k < len / 2; k++) {
        const c = Math.cos(ang * k), s = Math.sin(ang * k);
        const a = i + k, b = a + len / 2;
        const xr = re[b] * c - im[b] * s, xi = re[b] * s + im[b] * c;
        re[b] = re[a] - xr; im[b] = im[a] - xi; re[a] += xr; im[a] += xi;
      }
    }
  }
}

function heat(t) {  // 0..1 -> dark blue, purple, orange, pale yellow
  const r = Math.min(255, Math.max(0, 255 * (1.6 * t - 0.1)));
  const g = Math.min(255, Math.max(0, 255 * (1.8 * t - 0.8)));
  const b = Math.min(255, Math.max(0, 255 * (t < 0.5 ? 0.3 + t : 1.3 - 1.3 * t)));
  return [r, g, b];
}

function drawSpectrogram(canvas, samples) {
  const g = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, size = 512;
  const img = g.createImageData(w, h);
  const hop = Math.max(1, Math.floor((samples.length - size) / w));
  const window_ = Float32Array.from({ length: size }, (_, i) => 0.5 - 0.5 * Math.cos(2 * Math.PI * i / size));
  const cols = [];
  let top = -Infinity;
  for (let x = 0; x < w; x++) {
    const re = new Float32Array(size), im = new Float32Array(size);
    const start = x * hop;
    for (let i = 0; i < size && start + i < samples.length; i++) re[i] = samples[start + i] * window_[i];
    fft(re, im);
    const col = new Float32Array(h);
    for (let y = 0; y < h; y++) {
      const bin = Math.floor(y * (size / 2) / h);
      col[y] = Math.log10(re[bin] * re[bin] + im[bin] * im[bin] + 1e-10);
      top = Math.max(top, col[y]);
    }
    cols.push(col);
  }
  for (let x = 0; x < w; x++) {
    for (let y = 0; y < h; y++) {
      const t = Math.max(0, Math.min(1, (cols[x][y] - (top - 8)) / 8));
      const [r, gg, b] = heat(t);
      const at = 4 * ((h - 1 - y) * w + x);
      img.data[at] = r; img.data[at + 1] = gg; img.data[at + 2] = b; img.data[at + 3] = 255;
    }
  }
  g.putImageData(img, 0, 0);
}

function drawTokens(canvas, tokens, sizes) {
  const k = tokens.length, frames = tokens[0].length;
  const small = document.createElement("canvas");
  small.width = frames; small.height = k;
  const g = small.getContext("2d");
  const img = g.createImageData(frames, k);
  for (let c = 0; c < k; c++) {
    for (let f = 0; f < frames; f++) {
      const [r, gg, b] = heat(tokens[c][f] / Math.max(1, sizes[c] - 1));
      const at = 4 * (c * frames + f);
      img.data[at] = r; img.data[at + 1] = gg; img.data[at + 2] = b; img.data[at + 3] = 255;
    }
  }
  g.putImageData(img, 0, 0);
  const out = canvas.getContext("2d");
  out.imageSmoothingEnabled = false;
  out.clearRect(0, 0, canvas.width, canvas.height);
  out.drawImage(small, 0, 0, canvas.width, canvas.height);
}

async function decodeSamples(blob) {
  const ctx = new OfflineAudioContext(1, 1, 44100);
  const audio = await ctx.decodeAudioData(await blob.arrayBuffer());
  return { samples: audio.getChannelData(0), seconds: audio.duration, channels: audio.numberOfChannels };
}

// -- reconstruct ---------------------------------------------------------------------------------
async function reconstruct() {
  $("error").hidden = true;
  const file = recorded || $("file").files[0];
  if (!file) { showError("choose an audio file or record one first"); return; }
  const name = $("model").value, model = models[name];
  const q = encodeURIComponent(name);
  $("go").disabled = true;
  setState("running");
  try {
    status("encoding…");
    const body = await file.arrayBuffer();
    const t0 = performance.now();
    const enc = await (await api(`/v1/encode?model=${q}&format=json`, { method: "POST", body })).json();
    const encodeSeconds = (performance.now() - t0) / 1000;
    const inputSeconds = enc.num_samples / enc.sample_rate;
    $("results").hidden = false;
    $("a-orig").src = URL.createObjectURL(file);
    try {
      drawSpectrogram($("spec-orig"), (await decodeSamples(file)).samples);
    } catch (e) { /* a format the browser cannot decode: no picture of the original */ }
    drawTokens($("tokens"), enc.tokens, model.codebook_sizes);
    $("f-input").textContent = `${inputSeconds.toFixed(2)} s at ${enc.source_sample_rate} Hz`;
    $("f-tokens").textContent = `${enc.frames} frames x ${codebooks(enc.tokens.length)} ` +
      `(${model.frame_rate.toFixed(2)} frames/s)`;
    $("f-bitrate").textContent = `${(model.bitrate_bps / 1000).toFixed(2)} kbit/s`;
    $("f-encode").textContent = `${enc.encode_seconds.toFixed(2)} s on the server ` +
      `(${encodeSeconds.toFixed(2)} s with the upload)`;
    let result;
    if ($("stream").checked) {
      result = await streamDecode(name, enc, model);
    } else {
      status("decoding…");
      const t1 = performance.now();
      const r = await api(`/v1/decode?model=${q}&format=wav`, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ tokens: enc.tokens, num_samples: [enc.num_samples],
                               ...(enc.scales ? { scales: enc.scales } : {}),
                               ...(enc.globals ? { globals: enc.globals } : {}) }),
      });
      const blob = await r.blob();
      result = { blob, decodeSeconds: parseFloat(r.headers.get("X-Decode-Seconds")),
                 roundTrip: (performance.now() - t1) / 1000 };
    }
    const rec = await decodeSamples(result.blob);
    $("a-rec").src = URL.createObjectURL(result.blob);
    drawSpectrogram($("spec-rec"), rec.samples);
    if (result.roundTrip) {
      $("f-decode").textContent = `${result.decodeSeconds.toFixed(2)} s on the server ` +
        `(${result.roundTrip.toFixed(2)} s with the download)`;
      $("f-rtf").textContent = ((enc.encode_seconds + result.decodeSeconds) / inputSeconds).toFixed(3) +
        " (encode + decode time / audio duration)";
    } else {
      $("f-decode").textContent = `streamed in ${result.decodeSeconds.toFixed(2)} s, tokens sent at real-time pace`;
      $("f-rtf").textContent = (enc.encode_seconds / inputSeconds).toFixed(3) + " (encode only; decoding kept pace)";
    }
    $("f-output").textContent = `${rec.seconds.toFixed(2)} s at ${model.sample_rate} Hz` +
      (rec.channels > 1 ? `, ${rec.channels} channels` : "");
    $("f-output").dataset.seconds = rec.seconds;
    window.audiotokResult = { inputSeconds, outputSeconds: rec.seconds, channels: rec.channels, frames: enc.frames,
                              frameSeconds: 1 / model.frame_rate, ttfa: result.ttfa ?? null,
                              underruns: result.underruns ?? null };
    status("done");
    setState("done");
  } catch (e) {
    showError(e.message);
  } finally {
    $("go").disabled = false;
  }
}

// The tokens go to the server at real-time pace, a frame per message as a speech LLM would send
// them (several when the frame rate outruns the timer); the audio is played through Web Audio
// as each piece arrives.
function streamDecode(name, enc, model) {
  return new Promise((resolve, reject) => {
    const key = $("apikey").value.trim();
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}` +
      `/v1/stream/decode${key ? "?api_key=" + encodeURIComponent(key) : ""}`;
    const ws = new WebSocket(url);
    ws.binaryType = "arraybuffer";
    const player = new AudioContext({ sampleRate: model.sample_rate });
    const chunks = [];
    let firstPush = null, firstAudio = null, playAt = 0, underruns = 0, timer = null;
    const k = enc.tokens.length, frames = enc.frames, channels = model.channels || 1;
    const started = performance.now();
    const fail = (message) => { clearInterval(timer); ws.close(); player.close(); reject(new Error(message)); };
    // codes with utterance tokens (BiCodec's global tokens): the stream opens with them
    ws.onopen = () => ws.send(JSON.stringify({ type: "start", model: name, sample_format: "f32le",
                                               ...(enc.globals ? { globals: enc.globals } : {}) }));
    ws.onerror = () => fail("the stream's connection failed");
    ws.onmessage = (ev) => {
      if (typeof ev.data !== "string") {
        const pcm = new Float32Array(ev.data);  // channels interleaved
        if (firstAudio === null) {
          firstAudio = performance.now();
          $("row-stream").hidden = false;
        }
        chunks.push(pcm);
        const n = pcm.length / channels;
        const buf = player.createBuffer(channels, n, model.sample_rate);
        for (let c = 0; c < channels; c++) {
          buf.copyToChannel(Float32Array.from({ length: n }, (_, i) => pcm[i * channels + c]), c);
        }
        const src = player.createBufferSource();
        src.buffer = buf;
        src.connect(player.destination);
        if (playAt && player.currentTime > playAt + 0.005) underruns++;
        playAt = Math.max(playAt, player.currentTime + 0.02);
        src.start(playAt);
        playAt += n / model.sample_rate;
        $("f-stream").textContent = `first audio after ${((firstAudio - firstPush) / 1000).toFixed(3)} s, ` +
          `${underruns} underruns, ${(concatLength(chunks) / channels / model.sample_rate).toFixed(2)} s received`;
        return;
      }
      const doc = JSON.parse(ev.data);
      if (doc.type === "ready") {
        let f = 0;
        // codes that carry segment scales (EnCodec 48 kHz): every segment's, before the tokens
        if (doc.segment_scales) ws.send(JSON.stringify({ type: "scales", scales: enc.scales }));
        firstPush = performance.now();
        // every frame due by now (a timer fires every 4 ms at best: at higher frame rates one
        // message carries several frames, frame-major, so the pace stays real time)
        const send = () => {
          const due = Math.min(frames, Math.floor((performance.now() - firstPush) / 1000 * model.frame_rate) + 1);
          if (due <= f) return;
          const data = new Int32Array(k * (due - f));
          for (let i = 0; f < due; f++, i++) for (let c = 0; c < k; c++) data[i * k + c] = enc.tokens[c][f];
          ws.send(data.buffer);
          if (f >= frames) { clearInterval(timer); ws.send(JSON.stringify({ type: "end" })); }
        };
        send();
        timer = setInterval(send, Math.max(4, 1000 / model.frame_rate));
        status("streaming…");
      } else if (doc.type === "error") {
        fail(`stream error ${doc.code}: ${doc.message}`);
      } else if (doc.type === "done") {
        ws.close();
        const audio = concat(chunks).subarray(0, enc.num_samples * channels);
        resolve({ blob: wavBlob(audio, model.sample_rate, channels), ttfa: (firstAudio - firstPush) / 1000,
                  underruns, decodeSeconds: (performance.now() - started) / 1000 });
      }
    };
  });
}

function concatLength(chunks) { return chunks.reduce((n, c) => n + c.length, 0); }

$("go").addEventListener("click", reconstruct);
$("record").addEventListener("click", toggleRecord);
$("file").addEventListener("change", () => { recorded = null; });
loadModels();
