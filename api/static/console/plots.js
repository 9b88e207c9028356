// Small SVG time plots: a metric over each symptom's life (its stored samples, or its
// peak as a bar over its span for a symptom stored without samples), and the timeline of
// an incident's symptoms.
import { clock, ms, s } from "./dom.js";

const COLOURS = ["#d1495b", "#2e86ab", "#edae49", "#66a182", "#8d6a9f", "#00798c", "#c3423f", "#404e7c"];
const FAMILY_COLOURS = { pfc: "#e07a1f", congestion: "#8d6a9f", microburst: "#b56576", errors: "#d1495b",
  link_state: "#c3423f", nic: "#2e86ab", storage: "#66a182", silence: "#555", job_surge: "#404e7c" };

export const familyColour = (family) => FAMILY_COLOURS[family] || "#777";

function fmt(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e3) return (v / 1e3).toFixed(1) + "k";
  return a >= 10 || v === 0 ? v.toFixed(0) : v.toFixed(2);
}

const px = (v) => v.toFixed(1);

// series: [{label, key, start, end, value, samples}] (times RFC 3339; samples [[unix s, value], ...]);
// [t0, t1] the incident's span in ms.
export function metricPlot(metric, series, t0, t1) {
  const W = 330, H = 120, L = 44, R = 8, T = 18, B = 22;
  const x = (t) => L + ((t - t0) / Math.max(1, t1 - t0)) * (W - L - R);
  const values = series.flatMap((p) => [p.value, ...p.samples.map((q) => q[1])]);
  const low = Math.min(0, ...values), high = Math.max(0, ...values);
  const top = high > low ? high : low + 1;
  const y = (v) => H - B - ((v - low) / (top - low)) * (H - T - B);
  const svg = s("svg", { class: "plot", width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-metric": metric },
    s("text", { x: L, y: 12, class: "plot-title" }, metric),
    s("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }),
    s("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }),
    s("text", { x: L - 4, y: T + 4, "text-anchor": "end", class: "tick" }, fmt(top)),
    s("text", { x: L - 4, y: H - B, "text-anchor": "end", class: "tick" }, fmt(low)),
    s("text", { x: L, y: H - 6, class: "tick" }, clock(new Date(t0).toISOString())),
    s("text", { x: W - R, y: H - 6, "text-anchor": "end", class: "tick" }, clock(new Date(t1).toISOString())));
  series.forEach((p, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const title = s("title", {}, `${p.label}: peak ${fmt(p.value)}` +
      (p.samples.length ? ` (${p.samples.length} samples)` : " (peak only: stored without samples)"));
    if (p.samples.length > 1) {
      const points = p.samples.map(([t, v]) => `${px(x(t * 1000))},${px(y(v))}`).join(" ");
      svg.append(s("polyline", { points, class: "samples", stroke: colour, fill: "none", "data-symptom": p.key }, title));
    } else if (p.samples.length === 1) {
      const [t, v] = p.samples[0];
      svg.append(s("circle", { cx: px(x(t * 1000)), cy: px(y(v)), r: 2.5, class: "samples", fill: colour,
        "data-symptom": p.key }, title));
    } else {
      const [xs, xe, yv] = [x(ms(p.start)), Math.max(x(ms(p.end)), x(ms(p.start)) + 2), y(p.value)];
      svg.append(s("path", { d: `M${xs},${H - B} L${xs},${yv} L${xe},${yv} L${xe},${H - B}`, class: "series",
        stroke: colour, fill: colour, "fill-opacity": 0.15, "data-symptom": p.key }, title));
    }
  });
  return svg;
}

// One bar per symptom from its start to its end (or its last sign while it lasts).
export function symptomTimeline(symptoms, t0, t1) {
  const W = 980, L = 300, R = 16, ROW = 16, T = 8;
  const H = T + ROW * symptoms.length + 24;
  const x = (t) => L + ((ms(t) - t0) / Math.max(1, t1 - t0)) * (W - L - R);
  const svg = s("svg", { class: "timeline", width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: "timeline" });
  symptoms.forEach((sym, i) => {
    const yy = T + i * ROW;
    const end = sym.end || sym.last;
    svg.append(
      s("text", { x: L - 6, y: yy + 11, "text-anchor": "end", class: "tl-label" }, `${sym.kind} · ${sym.entity.id}`),
      s("rect", { x: x(sym.start), y: yy + 2, width: Math.max(2, x(end) - x(sym.start)), height: ROW - 5, rx: 2,
        fill: familyColour(sym.family), class: "tl-bar", "data-symptom": sym.key },
      s("title", {}, `${sym.kind} on ${sym.entity.id}: ${clock(sym.start)} – ${clock(end)} (${sym.family})`)));
  });
  const yb = T + ROW * symptoms.length + 4;
  svg.append(s("line", { x1: L, x2: W - R, y1: yb, y2: yb, class: "axis" }),
    s("text", { x: L, y: yb + 14, class: "tick" }, clock(new Date(t0).toISOString())),
    s("text", { x: W - R, y: yb + 14, "text-anchor": "end", class: "tick" }, clock(new Date(t1).toISOString())));
  return svg;
}
