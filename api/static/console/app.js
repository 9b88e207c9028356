// Hash routes: #/ (incidents, filters in the query), #/incident/<id>, #/fabric, #/maintenance,
// #/precision. Before any page: who is asking (GET /whoami); a server that asks for a token
// gets a sign-in form, and the token is kept for this tab (api.js).
import { getJson, setLive, setToken, token } from "./api.js";
import { renderList } from "./list.js";
import { renderIncident } from "./incident.js";
import { renderFabric } from "./fabric.js";
import { renderMaintenance } from "./maintenance.js";
import { renderPrecision } from "./precision.js";
import { h } from "./dom.js";

let cleanup = () => {};
let current = 0; // the route being shown; a page that finishes loading after the next route began is stopped
let who = null; // GET /whoami: {auth, role, tenant}
const OPERATOR_PAGES = ["fabric", "maintenance", "precision"]; // the whole fabric and what operators record

function route() {
  cleanup();
  cleanup = () => {};
  const token = ++current;
  const view = document.createElement("div"); // a page still loading from the last route fills a detached one
  document.getElementById("view").replaceChildren(view);
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query || "");
  let page = "list";
  let done;
  try {
    if (path.startsWith("/incident/")) {
      page = "incident";
      done = renderIncident(view, decodeURIComponent(path.slice("/incident/".length)));
    } else if (["/fabric", "/maintenance", "/precision"].includes(path)) {
      page = path.slice(1);
      done = { fabric: renderFabric, maintenance: renderMaintenance, precision: renderPrecision }[page](view, who);
    } else {
      done = renderList(view, params);
    }
  } catch (err) {
    view.append(h("p", { class: "error" }, String(err)));
  }
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("current", a.dataset.nav === page));
  Promise.resolve(done).then((stop) => {
    if (typeof stop !== "function") return;
    if (token === current) cleanup = stop;
    else stop();
  })
    .catch((err) => view.append(h("p", { class: "error", "data-error": "" }, String(err.message || err))));
}

function showWho() {
  const el = document.getElementById("who");
  const tenant = who.role === "tenant";
  document.querySelectorAll("[data-nav]").forEach((a) => { a.hidden = tenant && OPERATOR_PAGES.includes(a.dataset.nav); });
  if (who.auth === "none") {
    el.replaceChildren(h("span", { title: "the server runs with --auth none" }, "no sign-in (auth none)"));
    return;
  }
  el.replaceChildren(tenant ? `tenant ${who.tenant}` : who.role, " · ",
    h("a", { href: "#/", id: "sign-out", onclick: (e) => { e.preventDefault(); signOut(); } }, "sign out"));
}

function signOut() {
  setToken("");
  who = null; // (so the hash change below draws no page)
  location.hash = "#/";
  signIn("");
}

function signIn(reason) {
  cleanup();
  cleanup = () => {};
  current++;
  setLive("signed out");
  document.getElementById("who").replaceChildren();
  const input = h("input", { id: "token", type: "password", name: "token", size: 60, autocomplete: "off",
    placeholder: "frca_…" });
  const form = h("form", { class: "filters", id: "sign-in" },
    h("label", {}, "bearer token", input), h("button", { type: "submit" }, "Sign in"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    await start();
  });
  document.getElementById("view").replaceChildren(h("h1", {}, "Sign in"),
    h("p", {}, "This server asks for a token (", h("code", {}, "fabric-rca tokens add"), "). It is kept for this tab only."),
    ...(reason ? [h("p", { class: "error", id: "sign-in-error" }, reason)] : []), form);
  input.focus();
}

async function start() {
  try {
    who = await getJson("whoami");
  } catch (err) {
    if (err.status === 401) return signIn(token() ? "that token was refused: " + err.message : "");
    throw err;
  }
  showWho();
  route();
}

window.addEventListener("hashchange", () => who && route());
window.addEventListener("fabric-rca-unauthorized", () => { if (who && who.auth !== "none") { who = null; setToken(""); signIn("the token was refused (revoked?); sign in again"); } });
start().catch((err) => document.getElementById("view").replaceChildren(h("p", { class: "error" }, String(err.message || err))));
