// edgecnn monitor page: polls /api/stats for the newest frame's numbers and the 50 ms load samples
// taken since the last poll, and draws the load trace on a canvas (a few lines of 2D drawing; no
// charting library to vendor or build).
"use strict";

const HISTORY_S = 30;
const POLL_MS = 250;
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

const state = { since: 0, samples: [], received: 0, cores: 0 };
const $ = (id) => document.getElementById(id);

function color(i) {
  return COLORS[i % COLORS.length];
}

function setText(id, text) {
  $(id).textContent = text;
}

function setStatus(text) {
  const element = $("status");
  element.textContent = text;
  element.className = "status " + text.split(":")[0];
}

function bars(container, values, label, suffix) {
  if (container.children.length !== values.length) {
    container.innerHTML = "";
    values.forEach((_, i) => {
      const row = document.createElement("div");
      row.className = "bar";
      row.innerHTML = `<span>${label}${i}</span><div class="track"><div class="fill"></div></div><span></span>`;
      row.querySelector(".fill").style.background = color(i);
      container.appendChild(row);
    });
  }
  values.forEach((value, i) => {
    const row = container.children[i];
    row.querySelector(".fill").style.width = `${Math.min(100, value)}%`;
    row.lastElementChild.textContent = `${value.toFixed(0)}%` + (suffix ? suffix(i) : "");
  });
}

function showFrame(frame) {
  if (!frame) return;
  setText("inference-ms", `${frame.inference_ms.toFixed(1)} ms`);
  setText("frame-ms", `${frame.frame_ms.toFixed(1)} ms`);
  setText("fps", frame.fps.toFixed(1));
  setText("detections", String(frame.detections));
  setText("frame-index", `${frame.frame} (${frame.seq} shown)`);
  setText("dropped", String(frame.dropped));
  setText("errors", String(frame.errors));
}

function showLoad(sample) {
  bars($("cores"), sample.cpu, "cpu", sample.mhz ? (i) => ` ${sample.mhz[i]} MHz` : null);
  bars($("gpus"), sample.gpu, "gpu", (i) => ` ${sample.gpu_watts[i].toFixed(0)} W`);
  setText("power", sample.watts === null ? "no meter" : `${sample.watts.toFixed(2)} W`);
}

function drawChart() {
  const canvas = $("chart");
  const scale = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  if (canvas.width !== Math.round(width * scale)) canvas.width = Math.round(width * scale);
  if (canvas.height !== Math.round(height * scale)) canvas.height = Math.round(height * scale);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  ctx.clearRect(0, 0, width, height);
  const left = 40, right = 10, top = 10, bottom = 24;
  const plotW = width - left - right, plotH = height - top - bottom;
  const samples = state.samples;
  const end = samples.length ? samples[samples.length - 1].t : 0;
  const x = (t) => left + plotW * (1 - (end - t) / HISTORY_S);
  const y = (percent) => top + plotH * (1 - percent / 100);

  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = "#55606e";
  ctx.strokeStyle = "#e3e6ea";
  ctx.lineWidth = 1;
  for (let p = 0; p <= 100; p += 25) {
    ctx.beginPath();
    ctx.moveTo(left, y(p));
    ctx.lineTo(left + plotW, y(p));
    ctx.stroke();
    ctx.fillText(`${p}%`, 4, y(p) + 4);
  }
  for (let s = 0; s <= HISTORY_S; s += 5) {
    ctx.fillText(s === 0 ? "now" : `-${s} s`, x(end - s) - 12, height - 6);
  }

  const series = samples.length ? samples[0].cpu.length : 0;
  const lines = [];
  for (let i = 0; i < series; i++) lines.push({ name: `cpu${i}`, dash: [], pick: (s) => s.cpu[i] });
  const gpus = samples.length ? samples[0].gpu.length : 0;
  for (let i = 0; i < gpus; i++) lines.push({ name: `gpu${i}`, dash: [5, 3], pick: (s) => s.gpu[i] });
  lines.forEach((line, i) => {
    ctx.strokeStyle = color(i);
    ctx.setLineDash(line.dash);
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    samples.forEach((s, k) => {
      const px = x(s.t), py = y(line.pick(s));
      if (k === 0) ctx.moveTo(px, py);
      else ctx.lineTo(px, py);
    });
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = color(i);
    ctx.fillText(line.name, left + 8 + i * 48, top + 12);
  });
}

function update(data) {
  setStatus(data.status);
  const info = data.info;
  setText("run-info", `${info.model || ""} on ${info.source || ""}`);
  showFrame(data.frame);
  if (data.samples.length) {
    state.samples.push(...data.samples);
    state.received += data.samples.length;
    state.since = data.samples[data.samples.length - 1].seq;
    const end = state.samples[state.samples.length - 1].t;
    while (state.samples.length && state.samples[0].t < end - HISTORY_S) state.samples.shift();
    showLoad(data.samples[data.samples.length - 1]);
  }
  const missed = data.trace.missed ? `, ${data.trace.missed} late` : "";
  const recording = info.trace ? `, recording to ${info.trace}` : "";
  setText("trace-info", `utilisation per core, ${data.trace.period_s * 1000} ms samples${missed}${recording}`);
  $("chart").dataset.samples = String(state.received);
  drawChart();
}

async function poll() {
  try {
    const reply = await fetch(`/api/stats?since=${state.since}`, { cache: "no-store" });
    update(await reply.json());
  } catch (error) {
    setStatus("disconnected");
  }
  setTimeout(poll, POLL_MS);
}

function startStream() {
  const image = $("frame");
  image.onerror = () => setTimeout(() => { image.src = `/stream.mjpg?retry=${Date.now()}`; }, 1000);
  image.src = "/stream.mjpg";
}

window.addEventListener("load", () => {
  startStream();
  poll();
  window.addEventListener("resize", drawChart);
});
