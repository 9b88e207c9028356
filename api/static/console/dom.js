// Small DOM and SVG builders, and the formatting every page shares.
const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
export const s = (tag, attrs, ...children) => build(document.createElementNS(SVG_NS, tag), attrs, children);

// "2025-11-29T07:08:10.000Z" -> "2025-11-29 07:08:10" (the column headers say UTC)
export const shortTime = (t) => (t ? t.replace("T", " ").replace(/\.\d+Z$|Z$/, "") : "–");
export const clock = (t) => (t ? shortTime(t).slice(11) : "–");
export const ms = (t) => Date.parse(t);

export function topCause(inc) {
  return [...(inc.root_causes || [])].sort((a, b) => a.rank - b.rank)[0] || null;
}

export function tenants(inc) {
  return [...new Set((inc.affected_jobs || []).map((j) => j.tenant))].sort();
}

// Newest first: opened_at, then id, both descending (the order of GET /incidents).
export function newestFirst(a, b) {
  if (a.opened_at !== b.opened_at) return a.opened_at < b.opened_at ? 1 : -1;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

export const deviceOf = (entityId) => entityId.split(":")[0];

// The devices an entity lies on: a link's two ends, an interface's device, a device itself.
export function entityDevices(entity) {
  if (!entity) return [];
  if (entity.kind === "link") return entity.id.split("--").map(deviceOf);
  if (entity.kind === "interface") return [deviceOf(entity.id)];
  if (entity.kind === "job") return [];
  return [entity.id];
}
