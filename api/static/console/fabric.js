// The whole fabric, Clos layers as rows and rails grouped, each device and link coloured
// by the open incidents on it (root cause: by severity; symptom only: amber). Live.
import { follow, getJson, setLive } from "./api.js";
import { entityDevices, h, topCause } from "./dom.js";
import { drawTopology } from "./topo.js";

const SEVERITY = { critical: 3, major: 2, minor: 1 };

export async function renderFabric(view) {
  const layout = await getJson("topology/layout");
  const summary = h("p", { class: "count", id: "fabric-summary" });
  const holder = h("div", { class: "scroll", id: "fabric" });
  view.append(h("h1", {}, "Fabric"), legend(), summary, holder);
  const linkOfEnd = new Map(layout.links.flatMap((l) => l.ends.map((e) => [e, l.id])));
  let pending = null;
  const refresh = async () => {
    const open = await getJson("incidents", { status: "open", limit: 1000 });
    const marks = marksOf(open, linkOfEnd);
    holder.replaceChildren(drawTopology(layout, {
      nodeClass: (n) => classes(marks.nodes.get(n.id)),
      linkClass: (l) => classes(marks.links.get(l.id)),
      nodeTitle: (n) => title(n.id, n.role, marks.nodes.get(n.id)),
      linkTitle: (l) => title(l.id, "link", marks.links.get(l.id)),
      nodeHref: (n) => `#/?entity=${encodeURIComponent(n.id)}`,
    }));
    const devices = layout.nodes.length;
    summary.textContent = `${devices} devices, ${layout.links.length} links · ${open.length} open incident` +
      `${open.length === 1 ? "" : "s"} on ${marks.nodes.size} device${marks.nodes.size === 1 ? "" : "s"}`;
  };
  await refresh();
  const later = () => { clearTimeout(pending); pending = setTimeout(refresh, 300); };
  const stop = follow({}, { state: setLive, incident: later, gone: later });
  return () => { clearTimeout(pending); stop(); };
}

// device / link id -> {severity of the worst incident it is the root cause of, symptom?, titles}
function marksOf(incidents, linkOfEnd) {
  const nodes = new Map();
  const links = new Map();
  const add = (map, id, inc, asCause) => {
    const m = map.get(id) || { cause: 0, symptom: false, titles: [] };
    if (asCause) m.cause = Math.max(m.cause, SEVERITY[inc.severity] || 1);
    else m.symptom = true;
    if (!m.titles.includes(inc.title)) m.titles.push(inc.title);
    map.set(id, m);
  };
  const linkOf = (entity) => (entity.kind === "link" ? entity.id : linkOfEnd.get(entity.id));
  for (const inc of incidents) {
    const top = topCause(inc);
    for (const sym of inc.symptoms) {
      add(nodes, sym.device, inc, false);
      if (linkOf(sym.entity)) add(links, linkOf(sym.entity), inc, false);
    }
    if (top) {
      for (const d of entityDevices(top.entity)) add(nodes, d, inc, true);
      if (linkOf(top.entity)) add(links, linkOf(top.entity), inc, true);
    }
  }
  return { nodes, links };
}

function classes(m) {
  if (!m) return "";
  if (m.cause) return `open-cause sev-${Object.keys(SEVERITY).find((k) => SEVERITY[k] === m.cause)}`;
  return "open-symptom";
}

function title(id, role, m) {
  return `${id} (${role})` + (m ? "\n" + m.titles.map((t) => "• " + t).join("\n") : "");
}

function legend() {
  const item = (cls, text) => h("span", { class: "legend-item" }, h("i", { class: cls }), text);
  return h("p", { class: "legend" }, item("lg-critical", "root cause of an open critical incident"),
    item("lg-major", "… major"), item("lg-minor", "… minor"), item("lg-symptom-open", "symptom of an open incident"),
    item("lg-ok", "no open incident"));
}
