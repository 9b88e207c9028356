// Draw a layout of /topology/layout or /incidents/{id}/topology as SVG: Clos layers as
// rows (labelled on the left), groups (rails, leaves' hosts) labelled above their devices.
import { s } from "./dom.js";

const GUTTER = 96; // room for the layer names
const LABEL_CHARS = 9; // a longer name is squeezed into LABEL_PX, so it never runs into its neighbour's
const LABEL_PX = 58; // a little under the layout's NODE_GAP (api/console_layout.py)
const LAYER_NAMES = { superspine: "superspine", spine: "spine", leaf: "leaf", host: "hosts", other: "other" };

// opts: nodeClass(node) -> "a b", linkClass(link) -> "a b", nodeTitle(node), linkTitle(link),
//       nodeHref(node) -> "#/..." or null, pauseArrows: bool
export function drawTopology(layout, opts = {}) {
  const at = new Map(layout.nodes.map((n) => [n.id, n]));
  const width = layout.width + GUTTER;
  const height = layout.height + 16;
  const svg = s("svg", { class: "topology", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" },
    s("defs", {}, s("marker", { id: "pause-arrow", viewBox: "0 0 10 10", refX: 5, refY: 5, markerWidth: 11,
      markerHeight: 11, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }))));
  if (width <= 2400) Object.assign(svg.style, { maxWidth: "100%", height: "auto" }); // fit; a big fabric scrolls
  const g = s("g", { transform: `translate(${GUTTER},0)` });
  svg.append(g);
  for (const row of layout.rows) {
    svg.append(s("text", { x: 8, y: row.y + 4, class: "layer-label" }, LAYER_NAMES[row.layer] || row.layer));
    for (const group of row.groups) {
      if (!group.name) continue;
      g.append(s("text", { x: (group.x0 + group.x1) / 2, y: row.y - 24, class: "group-label",
        "text-anchor": "middle" }, group.name));
      g.append(s("line", { x1: group.x0 - 20, x2: group.x1 + 20, y1: row.y - 18, y2: row.y - 18, class: "group-rule" }));
    }
  }
  const links = s("g", { class: "links" });
  g.append(links);
  for (const link of layout.links) {
    const a = at.get(link.a);
    const b = at.get(link.b);
    if (!a || !b) continue;
    const cls = "link " + (opts.linkClass ? opts.linkClass(link) : "");
    const from = link.pause_from && link.pause_from.length === 1 && link.pause_from[0] === link.b ? [b, a] : [a, b];
    const mid = [(a.x + b.x) / 2, (a.y + b.y) / 2];
    const points = `${from[0].x},${from[0].y} ${mid[0]},${mid[1]} ${from[1].x},${from[1].y}`;
    const arrow = opts.pauseArrows && link.pause_from && link.pause_from.length ? "url(#pause-arrow)" : null;
    links.append(s("polyline", { points, class: cls, "data-link": link.id, "marker-mid": arrow },
      s("title", {}, opts.linkTitle ? opts.linkTitle(link) : link.id)));
  }
  const nodes = s("g", { class: "nodes" });
  g.append(nodes);
  for (const node of layout.nodes) nodes.append(drawNode(node, opts));
  return svg;
}

function drawNode(node, opts) {
  const cls = `node role-${node.role} ` + (opts.nodeClass ? opts.nodeClass(node) : "");
  const switchy = ["superspine", "spine", "leaf"].includes(node.role);
  const [w, hgt] = switchy ? [44, 20] : [30, 16];
  const shape = node.role === "storage"
    ? s("ellipse", { cx: node.x, cy: node.y, rx: 17, ry: 9 })
    : s("rect", { x: node.x - w / 2, y: node.y - hgt / 2, width: w, height: hgt, rx: switchy ? 4 : 2 });
  const squeeze = node.id.length > LABEL_CHARS ? { textLength: LABEL_PX, lengthAdjust: "spacingAndGlyphs" } : {};
  const label = s("text", { x: node.x, y: node.y + (switchy ? 25 : 21), "text-anchor": "middle", class: "node-label",
    ...squeeze }, node.id);
  const group = s("g", { class: cls, "data-device": node.id }, shape, label,
    s("title", {}, opts.nodeTitle ? opts.nodeTitle(node) : `${node.id} (${node.role})`));
  const href = opts.nodeHref ? opts.nodeHref(node) : null;
  return href ? s("a", { href }, group) : group;
}
