// The incident list: newest first, filtered like GET /incidents, kept live by the stream.
import { follow, getJson, setLive } from "./api.js";
import { h, newestFirst, shortTime, tenants, topCause } from "./dom.js";

export const FILTERS = ["status", "cause", "entity", "job", "tenant", "since", "until"];
const PAGE = 500;

export async function renderList(view, params) {
  const filters = Object.fromEntries(FILTERS.map((k) => [k, params.get(k) || ""]));
  const causes = await causeNames();
  const form = filterForm(filters, causes);
  const count = h("p", { class: "count", id: "count" }, "loading…");
  const body = h("tbody", { id: "incident-rows" });
  const table = h("table", { class: "incidents", id: "incidents" },
    h("thead", {}, h("tr", {}, ["Opened (UTC)", "Status", "Severity", "Root cause", "Entity", "Score", "Jobs",
      "Tenants", "Title"].map((t) => h("th", {}, t)))),
    body);
  view.append(h("h1", {}, "Incidents"), form, count, table);

  const shown = new Map(); // id -> incident
  const arrived = new Map(); // id -> when the stream last brought it (highlighted for a moment)
  let total = null;
  const draw = () => {
    const items = [...shown.values()].sort(newestFirst);
    body.replaceChildren(...items.map((inc) => row(inc, arrived.get(inc.id))));
    const extra = total != null && total > PAGE ? ` (newest ${PAGE} of ${total})` : "";
    count.textContent = `${items.length} incident${items.length === 1 ? "" : "s"}${extra}`;
    if (!items.length) body.append(h("tr", {}, h("td", { colspan: 9, class: "empty" }, "no incidents match")));
  };
  // The stream first: once it is `ready`, everything written later arrives on it, and the
  // page read after that cannot miss a change; a streamed incident is never replaced by the page's older copy.
  const streamed = new Set();
  const stop = follow(filters, {
    state: setLive,
    ready: async () => {
      try {
        const page = await getJson("incidents", { ...filters, limit: PAGE });
        for (const inc of page) if (!streamed.has(inc.id)) shown.set(inc.id, inc);
        draw();
      } catch (err) {
        count.textContent = String(err.message || err);
        count.classList.add("error");
      }
    },
    incident: (inc) => { streamed.add(inc.id); arrived.set(inc.id, Date.now()); shown.set(inc.id, inc); draw(); },
    gone: (id) => { streamed.add(id); shown.delete(id); draw(); },
  });
  return stop;
}

async function causeNames() {
  try {
    const spec = await getJson("openapi.json");
    const param = spec.paths["/incidents"].get.parameters.find((p) => p.name === "cause");
    const schema = param.schema.anyOf ? param.schema.anyOf.find((x) => x.enum) : param.schema;
    return schema.enum || [];
  } catch {
    return [];
  }
}

function filterForm(filters, causes) {
  const input = (name, placeholder) =>
    h("label", {}, name, h("input", { name, value: filters[name], placeholder, size: 14 }));
  const select = (name, options) =>
    h("label", {}, name, h("select", { name }, h("option", { value: "" }, "any"),
      options.map((o) => h("option", { value: o, selected: filters[name] === o }, o))));
  const form = h("form", { class: "filters", id: "filters" },
    select("status", ["open", "resolved"]), select("cause", causes),
    input("entity", "device or interface"), input("job", "a job id"), input("tenant", "a tenant"),
    input("since", "RFC 3339 or epoch s"), input("until", "RFC 3339 or epoch s"),
    h("button", { type: "submit" }, "Filter"), h("a", { href: "#/" }, "clear"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) q.set(k, v);
    location.hash = "#/?" + q.toString();
  });
  return form;
}

const FRESH_MS = 3000;

function row(inc, arrivedAt) {
  const top = topCause(inc);
  const fresh = arrivedAt && Date.now() - arrivedAt < FRESH_MS;
  const link = (text) => h("a", { href: `#/incident/${encodeURIComponent(inc.id)}` }, text);
  return h("tr", { "data-incident-id": inc.id, "data-streamed": Boolean(arrivedAt), class: [inc.status, fresh ? "fresh" : ""].join(" ") },
    h("td", { class: "time" }, link(shortTime(inc.opened_at))),
    h("td", {}, h("span", { class: `badge ${inc.status}` }, inc.status)),
    h("td", {}, h("span", { class: `badge sev-${inc.severity}` }, inc.severity)),
    h("td", { class: "cause" }, top ? top.cause : "–"),
    h("td", { class: "entity" }, top ? top.entity.id : "–"),
    h("td", { class: "num" }, top ? top.score.toFixed(2) : "–"),
    h("td", { class: "num" }, (inc.affected_jobs || []).length),
    h("td", {}, tenants(inc).join(", ")),
    h("td", { class: "title" }, inc.maintenance ? h("span", { class: "badge maint", title: inc.maintenance_reason || "" },
      "maintenance") : null, inc.maintenance ? " " : null, link(inc.title)));
}
