// One incident: ranked causes, evidence plots, symptom timeline, jobs and tenants, and
// the topology around the root cause with the cause, pause tree / moved traffic and
// affected hosts drawn on it. Kept current by the stream (filtered on the cause's entity).
import { follow, getJson, setLive } from "./api.js";
import { h, ms, shortTime, tenants, topCause } from "./dom.js";
import { metricPlot, symptomTimeline } from "./plots.js";
import { drawTopology } from "./topo.js";

const MAX_PLOTS = 8;

export async function renderIncident(view, id) {
  const page = h("div", { class: "incident-page" });
  view.append(h("p", { class: "crumbs" }, h("a", { href: "#/" }, "← incidents")), page);
  const inc = await getJson(`incidents/${encodeURIComponent(id)}`);
  await draw(page, inc);
  const top = topCause(inc);
  // (a name a tenant's view hides, `(hidden)`, matches no filter: follow every change then)
  const filters = top && !top.entity.id.includes("(hidden)") ? { entity: top.entity.id } : {};
  return follow(filters, {
    state: setLive,
    incident: (changed) => { if (changed.id === inc.id) draw(page, changed); },
  });
}

async function draw(page, inc) {
  const [t0, t1] = span(inc);
  let topo = null;
  try {
    topo = await getJson(`incidents/${encodeURIComponent(inc.id)}/topology`);
  } catch (err) {
    topo = err;
  }
  page.replaceChildren(
    h("h1", { id: "incident-title" }, inc.title),
    h("p", { class: "meta" },
      h("span", { class: `badge ${inc.status}` }, inc.status), " ",
      h("span", { class: `badge sev-${inc.severity}` }, inc.severity), " ",
      `opened ${shortTime(inc.opened_at)} · detected ${shortTime(inc.detected_at)} · `,
      inc.resolved_at ? `resolved ${shortTime(inc.resolved_at)}` : "still open", " (UTC) · ",
      h("code", {}, inc.id)),
    ...(inc.maintenance ? [h("p", { class: "maintenance", id: "maintenance" }, h("span", { class: "badge maint" },
      "maintenance"), ` ${inc.maintenance_reason || ""}: kept, not notified. `, h("a", { href: "#/maintenance" }, "windows"))]
      : []), // (replaceChildren would write a null as text)
    h("div", { class: "columns" },
      h("section", {}, h("h2", {}, "Root causes"), causes(inc)),
      h("section", {}, h("h2", {}, "Affected jobs"), jobs(inc))),
    h("section", {}, h("h2", {}, "Evidence"), h("p", { class: "hint" },
      "Each plot is one metric of the top cause's evidence, a line per symptom: the values the engine sampled over the symptom's life (at most 120 points, the peak kept), or a bar at its peak for a symptom stored without samples."),
    h("div", { class: "plots", id: "plots" }, plots(inc, t0, t1))),
    h("section", {}, h("h2", {}, `Symptoms (${inc.symptoms.length})`),
      symptomTimeline([...inc.symptoms].sort((a, b) => ms(a.start) - ms(b.start)), t0, t1)),
    h("section", {}, h("h2", {}, "Topology around the root cause"), legend(),
      h("div", { class: "scroll", id: "incident-topology" }, topology(topo))));
}

function span(inc) {
  const times = inc.symptoms.flatMap((s) => [ms(s.start), ms(s.end || s.last)]);
  times.push(ms(inc.opened_at), ms(inc.resolved_at || inc.updated_at));
  return [Math.min(...times), Math.max(...times)];
}

function causes(inc) {
  return h("table", { class: "causes", id: "causes" },
    h("thead", {}, h("tr", {}, ["#", "Cause", "Entity", "Score"].map((t) => h("th", {}, t)))),
    h("tbody", {}, [...inc.root_causes].sort((a, b) => a.rank - b.rank).map((rc) =>
      h("tr", { "data-rank": rc.rank },
        h("td", {}, rc.rank), h("td", { class: "cause" }, rc.cause),
        h("td", { class: "entity" }, h("a", { href: `#/?entity=${encodeURIComponent(rc.entity.id)}` }, rc.entity.id),
          h("span", { class: "kind" }, ` ${rc.entity.kind}`)),
        h("td", { class: "score" }, h("span", { class: "bar", style: `width:${Math.round(rc.score * 80)}px` }),
          ` ${rc.score.toFixed(2)}`)))));
}

function jobs(inc) {
  if (!inc.affected_jobs.length) return h("p", { class: "empty" }, "no running job touched the root cause");
  return h("div", {},
    h("p", { id: "tenants" }, "Tenants: ", tenants(inc).map((t) => h("span", { class: "tenant" }, t))),
    h("table", { class: "jobs", id: "jobs" },
      h("thead", {}, h("tr", {}, ["Job", "Tenant", "Impact"].map((t) => h("th", {}, t)))),
      h("tbody", {}, inc.affected_jobs.map((j) =>
        h("tr", { "data-job": j.job_id }, h("td", {}, h("a", { href: `#/?job=${encodeURIComponent(j.job_id)}` }, j.job_id)),
          h("td", {}, j.tenant), h("td", {}, j.impact))))));
}

function plots(inc, t0, t1) {
  const top = topCause(inc);
  const metrics = [];
  for (const ev of (top && top.evidence) || []) {
    for (const m of Object.keys(ev.metrics || {})) if (!metrics.includes(m)) metrics.push(m);
  }
  const sampled = (m) => inc.symptoms.some((s) => ((s.samples || {})[m] || []).length);
  metrics.sort((a, b) => sampled(b) - sampled(a)); // (stable: metrics with samples first, else in evidence order)
  const out = metrics.slice(0, MAX_PLOTS).map((metric) => {
    const series = inc.symptoms.filter((s) => typeof s.metrics[metric] === "number")
      .map((s) => ({ label: `${s.kind} · ${s.entity.id}`, key: s.key, start: s.start, end: s.end || s.last,
        value: s.metrics[metric], samples: (s.samples || {})[metric] || [] }));
    return series.length ? metricPlot(metric, series, t0, t1) : null;
  }).filter(Boolean);
  return out.length ? out : [h("p", { class: "empty" }, "no metric in the evidence")];
}

function legend() {
  const item = (cls, text) => h("span", { class: "legend-item" }, h("i", { class: cls }), text);
  return h("p", { class: "legend" }, item("lg-cause", "root cause"), item("lg-candidate", "lower-ranked cause"),
    item("lg-pause", "PFC pause (arrow: pause sent toward)"), item("lg-congested", "congested / moved traffic"),
    item("lg-symptom", "other symptom"), item("lg-affected", "affected host"));
}

function topology(topo) {
  if (topo instanceof Error) return h("p", { class: "error" }, String(topo.message));
  return drawTopology(topo, {
    pauseArrows: true,
    nodeClass: (n) => n.marks.map((m) => "m-" + m).join(" "),
    linkClass: (l) => l.marks.map((m) => "m-" + m).join(" "),
    nodeTitle: (n) => `${n.id} (${n.role})${n.marks.length ? ": " + n.marks.join(", ") : ""}`,
    linkTitle: (l) => `${l.id}${l.marks.length ? ": " + l.marks.join(", ") : ""}` +
      (l.pause_from.length ? ` (pause from ${l.pause_from.join(", ")})` : ""),
    nodeHref: (n) => `#/?entity=${encodeURIComponent(n.id)}`,
  });
}
