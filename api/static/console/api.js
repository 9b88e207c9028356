// The console's one way to the API: JSON reads and the incident stream.
export const BASE = new URL("../", document.baseURI);

export class ApiError extends Error {}

export async function getJson(path, params = {}) {
  const url = new URL(path, BASE);
  for (const [k, v] of Object.entries(params)) if (v !== "" && v != null) url.searchParams.set(k, v);
  const res = await fetch(url, { headers: { Accept: "application/json" } });
  if (!res.ok) {
    let detail = res.statusText;
    try { detail = JSON.stringify((await res.json()).detail); } catch { /* not JSON */ }
    throw new ApiError(`${res.status} from ${url.pathname}: ${detail}`);
  }
  return res.json();
}

// Follow GET /incidents/stream with `filters`; handlers: ready(seq), incident(inc), gone(id), state(text).
// Returns a function that closes the stream.
export function follow(filters, handlers) {
  const url = new URL("incidents/stream", BASE);
  for (const [k, v] of Object.entries(filters)) if (v) url.searchParams.set(k, v);
  const source = new EventSource(url);
  const state = handlers.state || (() => {});
  source.addEventListener("open", () => state("live"));
  source.addEventListener("error", () => state(source.readyState === EventSource.CLOSED ? "closed" : "reconnecting"));
  source.addEventListener("ready", (e) => handlers.ready && handlers.ready(JSON.parse(e.data).seq));
  source.addEventListener("incident", (e) => handlers.incident && handlers.incident(JSON.parse(e.data)));
  source.addEventListener("gone", (e) => handlers.gone && handlers.gone(JSON.parse(e.data).id));
  source.addEventListener("store_error", (e) => state("store error: " + JSON.parse(e.data).detail));
  return () => source.close();
}

export function setLive(text) {
  const el = document.getElementById("live");
  el.textContent = text === "live" ? "● live" : text;
  el.className = "live " + (text === "live" ? "on" : "off");
}
