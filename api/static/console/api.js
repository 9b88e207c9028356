// The console's one way to the API: JSON reads and writes, and the incident stream.
// A bearer token, when the server asks for one, is kept in sessionStorage (this tab only,
// gone when it closes) and sent as `Authorization: Bearer` on every request, the stream
// included: the stream is read with fetch, not EventSource (which cannot send a header),
// so a token never sits in a URL, a proxy log or the history.
export const BASE = new URL("../", document.baseURI);
const TOKEN_KEY = "fabric-rca-token";

export class ApiError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

export const token = () => sessionStorage.getItem(TOKEN_KEY) || "";
export const setToken = (value) => (value ? sessionStorage.setItem(TOKEN_KEY, value) : sessionStorage.removeItem(TOKEN_KEY));

function headers(extra = {}) {
  const out = { Accept: "application/json", ...extra };
  if (token()) out.Authorization = `Bearer ${token()}`;
  return out;
}

function urlOf(path, params = {}) {
  const url = new URL(path, BASE);
  for (const [k, v] of Object.entries(params)) if (v !== "" && v != null) url.searchParams.set(k, v);
  return url;
}

// 401: the page asks for a token (app.js listens); any other refusal is an ApiError with the API's words.
async function checked(res, url) {
  if (res.ok) return res;
  let detail = res.statusText;
  try { detail = JSON.stringify((await res.json()).detail); } catch { /* not JSON */ }
  if (res.status === 401) window.dispatchEvent(new CustomEvent("fabric-rca-unauthorized", { detail }));
  throw new ApiError(`${res.status} from ${url.pathname}: ${detail}`, res.status);
}

export async function getJson(path, params = {}) {
  const url = urlOf(path, params);
  const res = await checked(await fetch(url, { headers: headers() }), url);
  return res.json();
}

export async function send(method, path, body) {
  const url = urlOf(path);
  const init = { method, headers: headers(body ? { "Content-Type": "application/json" } : {}) };
  if (body) init.body = JSON.stringify(body);
  const res = await checked(await fetch(url, init), url);
  return res.status === 204 ? null : res.json();
}

// Follow GET /incidents/stream with `filters`; handlers: ready(seq), incident(inc), gone(id), state(text).
// Reconnects by itself (after the server's `retry:`), resuming after the last event id seen.
// Returns a function that closes the stream.
export function follow(filters, handlers) {
  const url = urlOf("incidents/stream", Object.fromEntries(Object.entries(filters).filter(([, v]) => v)));
  const state = handlers.state || (() => {});
  const control = new AbortController();
  let lastId = null;
  let retry = 2000;
  const dispatch = (name, data, id) => {
    if (id !== null) lastId = id;
    const body = JSON.parse(data);
    if (name === "ready") handlers.ready && handlers.ready(body.seq);
    else if (name === "incident") handlers.incident && handlers.incident(body);
    else if (name === "gone") handlers.gone && handlers.gone(body.id);
    else if (name === "store_error") state("store error: " + body.detail);
  };
  const run = async () => {
    while (!control.signal.aborted) {
      try {
        const res = await fetch(url, { headers: headers(lastId !== null ? { "Last-Event-ID": lastId } : {}),
          signal: control.signal, cache: "no-store" });
        if (res.status === 401 || res.status === 403) { await checked(res, url).catch(() => {}); state("refused"); return; }
        if (!res.ok) throw new Error(`${res.status}`);
        state("live");
        await readEvents(res.body, dispatch, (ms) => { retry = ms; });
      } catch (err) {
        if (control.signal.aborted) return;
      }
      state("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, retry));
    }
  };
  run();
  return () => control.abort();
}

// The text/event-stream format: fields up to a blank line make an event; `:` starts a comment.
async function readEvents(body, dispatch, setRetry) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let event = { name: "message", data: [], id: null };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop();
    for (const line of lines) {
      if (line === "") {
        if (event.data.length) dispatch(event.name, event.data.join("\n"), event.id);
        event = { name: "message", data: [], id: null };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event.name = val;
      else if (field === "data") event.data.push(val);
      else if (field === "id") event.id = val;
      else if (field === "retry" && /^\d+$/.test(val)) setRetry(Number(val));
    }
  }
}

export function setLive(text) {
  const el = document.getElementById("live");
  el.textContent = text === "live" ? "● live" : text;
  el.className = "live " + (text === "live" ? "on" : "off");
}
