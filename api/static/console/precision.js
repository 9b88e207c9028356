// Field precision per cause over time, from the operators' verdicts (GET /feedback/precision):
// confirmed / (confirmed + false_alarm + wrong_cause) of the incidents that opened each UTC day.
import { getJson } from "./api.js";
import { h, s } from "./dom.js";

const COUNTS = ["confirmed", "false_alarm", "wrong_cause", "duplicate_of"];

export async function renderPrecision(view) {
  const rows = await getJson("feedback/precision");
  const causes = [...new Set(rows.map((r) => r.cause))].sort();
  const days = [...new Set(rows.map((r) => r.day))].sort();
  const pct = (p) => (p == null ? "–" : `${Math.round(p * 100)}%`);
  view.append(h("h1", {}, "Field precision"),
    h("p", { class: "hint" }, "From the latest verdict on each judged incident, by the cause the engine named and the "
      + "UTC day the incident opened: confirmed / (confirmed + false alarm + wrong cause); duplicates count in neither "
      + "part. Record verdicts with fabric-rca feedback add or POST /incidents/{id}/feedback."));
  if (!rows.length) {
    view.append(h("p", { class: "empty", id: "no-verdicts" }, "no verdicts yet"));
    return;
  }
  view.append(h("div", { class: "plots", id: "precision-plots" }, causes.map((cause) =>
    precisionPlot(cause, days, rows.filter((r) => r.cause === cause)))));
  view.append(h("table", { class: "incidents", id: "precision-table" },
    h("thead", {}, h("tr", {}, ["Cause", "Day (UTC)", "Confirmed", "False alarm", "Wrong cause", "Duplicate", "Precision"]
      .map((t) => h("th", {}, t)))),
    h("tbody", {}, rows.map((r) => h("tr", { "data-cause": r.cause, "data-day": r.day },
      h("td", { class: "cause" }, r.cause), h("td", { class: "time" }, r.day),
      COUNTS.map((k) => h("td", { class: "num" }, r[k])), h("td", { class: "num precision" }, pct(r.precision)))))));
}

// One cause: precision (0..1) per day as points joined by a line; days without a judged incident are gaps.
function precisionPlot(cause, days, rows) {
  const W = 330, H = 120, L = 36, R = 10, T = 18, B = 22;
  const x = (i) => L + (days.length > 1 ? (i / (days.length - 1)) * (W - L - R) : (W - L - R) / 2);
  const y = (p) => H - B - p * (H - T - B);
  const byDay = new Map(rows.map((r) => [r.day, r]));
  const svg = s("svg", { class: "plot precision-plot", width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-cause": cause },
    s("text", { x: L, y: 12, class: "plot-title" }, cause),
    s("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }),
    s("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }),
    s("text", { x: L - 4, y: T + 4, "text-anchor": "end", class: "tick" }, "100%"),
    s("text", { x: L - 4, y: H - B, "text-anchor": "end", class: "tick" }, "0"),
    s("text", { x: L, y: H - 6, class: "tick" }, days[0]),
    s("text", { x: W - R, y: H - 6, "text-anchor": "end", class: "tick" }, days[days.length - 1]));
  let path = "";
  days.forEach((day, i) => {
    const r = byDay.get(day);
    if (!r || r.precision == null) { path += " "; return; }
    path += `${path.endsWith(" ") || !path ? "M" : "L"}${x(i)},${y(r.precision)}`;
    svg.append(s("circle", { cx: x(i), cy: y(r.precision), r: 3.5, class: "precision-point", "data-day": day,
      "data-precision": r.precision }, s("title", {}, `${day}: ${Math.round(r.precision * 100)}% (${r.confirmed} confirmed of `
      + `${r.confirmed + r.false_alarm + r.wrong_cause} judged)`)));
  });
  svg.insertBefore(s("path", { d: path.trim().replace(/ +/g, " "), class: "series", stroke: "#2e86ab", fill: "none" }),
    svg.querySelector("circle"));
  return svg;
}
