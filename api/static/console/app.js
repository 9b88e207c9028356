// Hash routes: #/ (incidents, filters in the query), #/incident/<id>, #/fabric.
import { renderList } from "./list.js";
import { renderIncident } from "./incident.js";
import { renderFabric } from "./fabric.js";
import { h } from "./dom.js";

let cleanup = () => {};
let current = 0; // the route being shown; a page that finishes loading after the next route began is stopped

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
    } else if (path === "/fabric") {
      page = "fabric";
      done = renderFabric(view);
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

window.addEventListener("hashchange", route);
route();
