// The sensor dashboard: three EventSource streams from ssegate, drawn without any library.
//
//   /events/<tenant>  10 s aggregates of the tenant's devices → the line chart
//   /alerts           readings over 30 °C                     → the alerts list
//   /devices          latest reading per device, deletes      → the devices table
//
// Tokens: `./run demo` passes a development signing key in the URL fragment
// (#key=<base64url private JWK>; the fragment never leaves the browser) and this page mints
// short-lived tokens for the chosen tenant with WebCrypto. A real deployment gets its tokens
// from an authorization server; only `mint` would change.
//   #key=...        the private EC P-256 JWK, with its kid
//   &tenant=acme    the tenant to start with
//   &ttl=60         token lifetime in seconds
"use strict";

const params = new URLSearchParams(location.hash.slice(1));
const TTL = Number(params.get("ttl") || 60);
const ISSUER = "https://auth.example.com";
const AUDIENCE = "https://api.example.com";
const WINDOWS_SHOWN = 30;
const ALERTS_SHOWN = 60;
const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#1b7c83", "#d1242f",
                "#6e7781"];

// What the page has seen, for people reading the console and for tests.
const dashboard = window.dashboard = {
  tenant: params.get("tenant") || "acme",
  windows: new Map(),   // device → [{end, avg}] of the chosen tenant
  devices: new Map(),   // device → latest reading
  removed: [],          // devices deleted by a tombstone
  alerts: 0,
  opens: 0,
  challenges: 0,
  extensions: 0,
};

// ---- tokens ------------------------------------------------------------------------------

const b64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes)))
  .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const utf8 = (text) => new TextEncoder().encode(text);
const jwk = JSON.parse(atob((params.get("key") || "").replace(/-/g, "+").replace(/_/g, "/")) || "{}");
const ES256 = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
const signingKey = jwk.kty === "EC" ? (() => {
  const { kid, alg, use, key_ops, ...material } = jwk;
  return crypto.subtle.importKey("jwk", material, ES256, false, ["sign"]);
})() : null;

async function mint(tenant) {
  const now = Math.floor(Date.now() / 1000);
  const header = { alg: "ES256", typ: "JWT", kid: jwk.kid };
  const claims = { sub: "dashboard", tenant, scope: "read:events", iss: ISSUER, aud: AUDIENCE,
                   iat: now, exp: now + TTL };
  const input = b64url(utf8(JSON.stringify(header))) + "." + b64url(utf8(JSON.stringify(claims)));
  const signature = await crypto.subtle.sign(ES256, await signingKey, utf8(input));
  document.getElementById("auth").textContent =
    `token for ${tenant} until ${new Date(claims.exp * 1000).toLocaleTimeString()}` +
    (dashboard.extensions ? ` · ${dashboard.extensions} challenge(s) answered` : "");
  return input + "." + b64url(signature);
}

// ---- streams -----------------------------------------------------------------------------

class Stream {
  constructor(name, path, handlers) {
    this.name = name;
    this.path = path;
    this.handlers = handlers;   // SSE event type → function(MessageEvent)
    this.source = null;
    this.lastId = "";
    this.status = document.querySelector(`[data-stream="${name}"] b`);
    this.idView = document.querySelector(`[data-stream="${name}"] code`);
  }

  async open({ resume = true } = {}) {
    if (!resume) this.lastId = "";
    const query = new URLSearchParams({ access_token: await mint(dashboard.tenant) });
    if (this.lastId) query.set("lastEventId", this.lastId);
    this.close();
    const source = this.source = new EventSource(this.path() + "?" + query);
    dashboard.opens += 1;
    this.show("connecting");
    source.onopen = () => this.show("open");
    source.onerror = () => {
      if (source !== this.source) return;
      if (source.readyState === EventSource.CLOSED) {
        // Refused (a topic not created yet, an expired token): try again with a fresh token.
        this.show("closed", "error");
        setTimeout(() => { if (source === this.source) this.open(); }, 2000);
      } else {
        this.show("reconnecting", "error");
      }
    };
    for (const [type, handle] of Object.entries(this.handlers)) {
      source.addEventListener(type, (event) => {
        if (event.lastEventId) this.idView.textContent = this.lastId = event.lastEventId;
        try {
          handle(event);
        } catch (error) {   // one message the page cannot read must not stop the stream
          console.warn(`${this.name}: skipped ${JSON.stringify(event.data)}: ${error}`);
        }
      });
    }
    source.addEventListener("challenge", (event) => answerChallenge(this, event));
  }

  close() {
    if (this.source) this.source.close();
    this.source = null;
  }

  show(text, style = text) {
    this.status.textContent = text;
    this.status.className = style;
  }
}

// The three streams share a token and a connection, so one answer extends all of them: the
// challenges they get together are answered once.
let answering = null;

function answerChallenge(stream, event) {
  dashboard.challenges += 1;
  if (!answering) {
    const request = JSON.parse(event.data);
    answering = (async () => {
      const response = await fetch(stream.path(), {
        method: request.method,
        headers: { ...request.headers, authorization: "Bearer " + await mint(dashboard.tenant) },
      });
      if (response.status === 204) dashboard.extensions += 1;
      else streams.forEach((s) => s.open());   // nothing left to extend: start over
    })().catch(() => streams.forEach((s) => s.open()))
       .finally(() => setTimeout(() => { answering = null; }, 3000));
  }
}

const streams = [
  new Stream("events", () => `/events/${encodeURIComponent(dashboard.tenant)}`,
             { message: (e) => addWindow(JSON.parse(e.data)) }),
  new Stream("alerts", () => "/alerts", { message: (e) => addAlert(JSON.parse(e.data)) }),
  new Stream("devices", () => "/devices", {
    message: (e) => putDevice(JSON.parse(e.data)),
    delete: (e) => removeDevice(atob(e.data.replace(/-/g, "+").replace(/_/g, "/"))),
  }),
];

// ---- the chart ---------------------------------------------------------------------------

const canvas = document.getElementById("chart");
let drawPending = false;

function addWindow(aggregate) {
  const points = dashboard.windows.get(aggregate.device) || [];
  const end = Date.parse(aggregate.window_end);
  if (!points.some((p) => p.end === end)) {   // a window written twice is the same window
    points.push({ end, avg: aggregate.avg_temperature, max: aggregate.max_temperature });
    points.sort((a, b) => a.end - b.end);
    if (points.length > WINDOWS_SHOWN) points.splice(0, points.length - WINDOWS_SHOWN);
  }
  dashboard.windows.set(aggregate.device, points);
  document.getElementById("chart-note").textContent =
    `${dashboard.tenant} · last window ends ${new Date(end).toLocaleTimeString()}`;
  scheduleDraw();
}

function scheduleDraw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => { drawPending = false; draw(); });
}

function colorOf(device) {
  const names = [...dashboard.windows.keys()].sort();
  return COLORS[names.indexOf(device) % COLORS.length];
}

function draw() {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth, height = canvas.clientHeight;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  g.clearRect(0, 0, width, height);
  const series = [...dashboard.windows.entries()].sort(([a], [b]) => a.localeCompare(b));
  const all = series.flatMap(([, points]) => points);
  if (!all.length) return;
  const pad = { left: 44, right: 12, top: 10, bottom: 26 };
  const t0 = Math.min(...all.map((p) => p.end)), t1 = Math.max(...all.map((p) => p.end));
  let lo = Math.floor(Math.min(...all.map((p) => p.avg)) - 1);
  let hi = Math.ceil(Math.max(...all.map((p) => p.avg)) + 1);
  const x = (t) => pad.left + (t1 === t0 ? 0.5 : (t - t0) / (t1 - t0)) * (width - pad.left - pad.right);
  const y = (v) => pad.top + (hi - v) / (hi - lo) * (height - pad.top - pad.bottom);

  g.font = "11px system-ui, sans-serif";
  g.fillStyle = "#656d76";
  g.strokeStyle = "#eaeef2";
  g.lineWidth = 1;
  const step = Math.max(1, Math.ceil((hi - lo) / 6));
  for (let v = lo; v <= hi; v += step) {
    g.beginPath(); g.moveTo(pad.left, y(v)); g.lineTo(width - pad.right, y(v)); g.stroke();
    g.fillText(`${v} °C`, 4, y(v) + 4);
  }
  const ticks = t1 === t0 ? [[t0, "center"]] : [[t0, "left"], [(t0 + t1) / 2, "center"], [t1, "right"]];
  for (const [t, align] of ticks) {
    g.textAlign = align;
    g.fillText(new Date(t).toLocaleTimeString(), x(t), height - 8);
  }
  g.textAlign = "left";
  g.lineWidth = 2;
  for (const [device, points] of series) {
    g.strokeStyle = g.fillStyle = colorOf(device);
    g.beginPath();
    points.forEach((p, i) => (i ? g.lineTo(x(p.end), y(p.avg)) : g.moveTo(x(p.end), y(p.avg))));
    g.stroke();
    for (const p of points) { g.beginPath(); g.arc(x(p.end), y(p.avg), 2.5, 0, 2 * Math.PI); g.fill(); }
  }
  const legend = document.getElementById("legend");
  legend.replaceChildren(...series.map(([device, points]) => {
    const item = document.createElement("span");
    item.style.setProperty("--color", colorOf(device));
    item.dataset.device = device;
    item.textContent = `${device} ${points[points.length - 1].avg.toFixed(1)} °C`;
    return item;
  }));
}

window.addEventListener("resize", scheduleDraw);

// ---- alerts and devices ------------------------------------------------------------------

const time = (text) => (text ? new Date(text).toLocaleTimeString() : "–");
const ownDevice = (device) => dashboard.devices.get(device)?.tenant === dashboard.tenant;

function addAlert(alert) {
  dashboard.alerts += 1;
  const list = document.getElementById("alerts");
  list.querySelector(".empty")?.remove();
  const item = document.createElement("li");
  item.className = ownDevice(alert.device) ? "own" : "";
  for (const [cls, text] of [["at", time(alert.at)], ["device", alert.device],
                             ["temp", `${alert.temperature.toFixed(1)} °C`]]) {
    const part = document.createElement("span");
    part.className = cls;
    part.textContent = text;
    item.appendChild(part);
  }
  item.dataset.at = alert.at;
  // Newest first; readings of one micro-batch arrive in partition order, not time order.
  const older = [...list.children].find((other) => other.dataset.at < alert.at);
  list.insertBefore(item, older || null);
  while (list.children.length > ALERTS_SHOWN) list.lastChild.remove();
}

function putDevice(reading) {
  dashboard.devices.set(reading.device, reading);
  addTenant(reading.tenant);
  const body = document.getElementById("devices");
  let row = body.querySelector(`tr[data-device="${CSS.escape(reading.device)}"]`);
  if (!row) {
    row = document.createElement("tr");
    row.dataset.device = reading.device;
    const after = [...body.children].find((r) => r.dataset.device > reading.device);
    body.insertBefore(row, after || null);
  }
  row.className = reading.tenant === dashboard.tenant ? "own" : "";
  row.replaceChildren(...[reading.device, reading.tenant, reading.temperature.toFixed(1),
                          reading.humidity?.toFixed(0) ?? "–", time(reading.at)].map((text) => {
    const cell = document.createElement("td");
    cell.textContent = text;
    return cell;
  }));
}

function removeDevice(device) {
  dashboard.devices.delete(device);
  dashboard.removed.push(device);
  document.querySelector(`#devices tr[data-device="${CSS.escape(device)}"]`)?.remove();
  document.getElementById("removed").textContent =
    `Went silent, deleted by a tombstone: ${dashboard.removed.join(", ")}`;
}

// ---- the tenant picker -------------------------------------------------------------------

const picker = document.getElementById("tenant");

function addTenant(tenant) {
  if ([...picker.options].some((o) => o.value === tenant)) return;
  picker.add(new Option(tenant, tenant));
  [...picker.options].sort((a, b) => a.value.localeCompare(b.value))
    .forEach((o) => picker.add(o));
  picker.value = dashboard.tenant;
}

picker.addEventListener("change", () => {
  dashboard.tenant = picker.value;
  dashboard.windows.clear();
  document.getElementById("chart-note").textContent = "waiting for windows";
  draw();
  document.getElementById("legend").replaceChildren();
  for (const row of document.querySelectorAll("#devices tr")) {
    row.className = dashboard.devices.get(row.dataset.device)?.tenant === dashboard.tenant ? "own" : "";
  }
  // A new token for the new tenant: every stream opens again with it (the events stream from
  // scratch, the others where they were).
  for (const stream of streams) stream.open({ resume: stream.name !== "events" });
});

["acme", "globex", "initech", dashboard.tenant].forEach(addTenant);

if (signingKey) {
  streams.forEach((stream) => stream.open());
} else {
  document.getElementById("auth").textContent = "no signing key: open the URL ./run demo prints";
}
