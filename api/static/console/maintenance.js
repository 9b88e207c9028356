// Maintenance windows (GET/POST/DELETE /maintenance) and the incidents they marked: an
// incident whose root cause lies in a window (or on an admin-down port) is kept, marked,
// and not notified.
import { getJson, send } from "./api.js";
import { h, shortTime, topCause } from "./dom.js";

export async function renderMaintenance(view) {
  const [windows, incidents] = await Promise.all([getJson("maintenance"), getJson("incidents", { limit: 1000 })]);
  const marked = incidents.filter((inc) => inc.maintenance);
  const now = Date.now();
  const state = (w) => (Date.parse(w.until) < now ? "past" : Date.parse(w.from) > now ? "upcoming" : "active");
  const reload = () => { location.hash = "#/maintenance?" + Date.now(); };
  const remove = async (w) => {
    if (!confirm(`Delete maintenance window ${w.id} on ${w.entity}? (the incidents it marked stay marked)`)) return;
    await send("DELETE", `maintenance/${w.id}`);
    reload();
  };
  const table = h("table", { class: "incidents", id: "windows" },
    h("thead", {}, h("tr", {}, ["#", "Entity", "From (UTC)", "Until (UTC)", "", "Note", ""].map((t) => h("th", {}, t)))),
    h("tbody", {}, windows.length ? windows.map((w) => h("tr", { "data-window": w.id },
      h("td", { class: "num" }, w.id), h("td", { class: "entity" }, w.entity),
      h("td", { class: "time" }, shortTime(w.from)), h("td", { class: "time" }, shortTime(w.until)),
      h("td", {}, h("span", { class: `badge win-${state(w)}` }, state(w))), h("td", {}, w.note),
      h("td", {}, h("button", { type: "button", class: "delete", onclick: () => remove(w).catch(shout) }, "delete"))))
      : h("tr", {}, h("td", { colspan: 7, class: "empty" }, "no maintenance windows"))));
  const error = h("p", { id: "window-error" });
  function shout(err) { error.className = "error"; error.textContent = String(err.message || err); }
  const field = (name, placeholder, size = 22) => h("label", {}, name, h("input", { name, placeholder, size }));
  const form = h("form", { class: "filters", id: "add-window" }, field("entity", "leaf03, leaf03:swp1 or a link id"),
    field("from", "RFC 3339 or epoch s"), field("until", "RFC 3339 or epoch s"), field("note", "optics swap", 30),
    h("button", { type: "submit" }, "Add window"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = Object.fromEntries(new FormData(form));
    try { await send("POST", "maintenance", body); reload(); } catch (err) { shout(err); }
  });
  view.append(h("h1", {}, "Maintenance"),
    h("p", { class: "hint" }, "Incidents whose root cause lies on a window's entity (a device, a port of it, a link "
      + "with an end on it) and that open within it are kept, marked and not notified."),
    form, error, table,
    h("h2", {}, `Incidents in maintenance (${marked.length})`),
    h("table", { class: "incidents", id: "in-maintenance" },
      h("thead", {}, h("tr", {}, ["Opened (UTC)", "Root cause", "Entity", "Why", "Title"].map((t) => h("th", {}, t)))),
      h("tbody", {}, marked.length ? marked.map((inc) => h("tr", { "data-incident-id": inc.id },
        h("td", { class: "time" }, shortTime(inc.opened_at)), h("td", { class: "cause" }, (topCause(inc) || {}).cause || "–"),
        h("td", { class: "entity" }, ((topCause(inc) || {}).entity || {}).id || "–"),
        h("td", { class: "reason" }, inc.maintenance_reason || ""),
        h("td", {}, h("a", { href: `#/incident/${encodeURIComponent(inc.id)}` }, inc.title))))
        : h("tr", {}, h("td", { colspan: 5, class: "empty" }, "none of the newest 1000 incidents")))));
}
