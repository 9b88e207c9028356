// Hash routes: #/ (incidents, filters in the query), #/incident/<id>, #/fabric.
import { renderList } from "./list.js";
import { renderIncident } from "./incident.js";
import { renderFabric } from "./fabric.js";
import { h } from "./dom.js";

let cleanup = () => {};

function route() {
  cleanup();
  cleanup = () => {};
  const view = document.getElementById("view");
  view.replaceChildren();
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
  Promise.resolve(done).then((stop) => { if (typeof stop === "function") cleanup = stop; })
    .catch((err) => view.append(h("p", { class: "error", "data-error": "" }, String(err.message || err))));
}

window.addEventListener("hashchange", route);
route();
