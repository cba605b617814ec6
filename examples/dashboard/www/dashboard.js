// The sensor dashboard: four EventSource streams from ssegate, drawn without any library.
//
//   /events/<tenant>  10 s aggregates of the tenant's devices     → the line chart
//   /alerts           the tenant's readings over 30 °C            → overheating episodes
//   /alert-counts     readings over 30 °C per tenant and window   → "other tenants: N"
//   /devices          latest reading per device, deletes          → the devices table
//
// The gateway filters /events/<tenant> and /alerts by the token's `tenant` claim: the page gets
// its own tenant's messages only. /alert-counts and /devices are the same for every tenant.
//
// Tokens: `./run demo` passes a development signing key in the URL fragment
// (#key=<base64url private JWK>; the fragment never leaves the browser) and this page mints
// short-lived tokens for the chosen tenant with WebCrypto. A real deployment gets its tokens
// from an authorization server; only `mint` would change.
//   #key=...        the private EC P-256 JWK, with its kid
//   &tenant=acme    the tenant to start with
//   &ttl=60         token lifetime in seconds
//   &window=10      the pipeline's window, in seconds (examples/pipeline/sensors.yaml)
//   &watermark=5    the pipeline's watermark, in seconds
//   &day=240        the generator's "day", in seconds
"use strict";

const $ = (id) => document.getElementById(id);
const time = (ms) => (ms == null || Number.isNaN(ms) ? "–"
  : new Date(ms).toLocaleTimeString([], { hour12: false }));
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

const params = new URLSearchParams(location.hash.slice(1));
const TTL = Number(params.get("ttl") || 60);
const WINDOW_MS = 1000 * Number(params.get("window") || 10);
const WATERMARK_MS = 1000 * Number(params.get("watermark") || 5);
const DAY_S = Number(params.get("day") || 240);
const DAY_NOTE = `a “day” lasts ${DAY_S % 60 ? `${DAY_S} s` : plural(DAY_S / 60, "minute")}`;
const ISSUER = "https://auth.example.com";
const AUDIENCE = "https://api.example.com";
const ALERT_OVER = 30;          // °C, as the pipeline's alerts sink
const FULL = 0.7;               // a window whose readings span less of it is partial: not drawn
const SILENT_MS = 3000;         // a device this far behind the newest reading is silent
const EPISODE_GAP_MS = 2 * WINDOW_MS;   // alerts of a device closer than this: one episode
const WINDOWS_SHOWN = 30;
const EPISODES_SHOWN = 20;
const ROOM_COLORS = { "server room": "#cf222e", office: "#0969da", lab: "#8250df",
                      warehouse: "#1a7f37" };
const COLORS = ["#bf8700", "#1b7c83", "#6e7781", "#d1242f"];

// What the page has seen, for people reading the console and for tests.
const dashboard = window.dashboard = {
  tenant: params.get("tenant") || "acme",
  windows: new Map(),   // device → [{end, avg, max}]: the chosen tenant's full windows
  partial: 0,           // windows not drawn: their readings span less than FULL of them
  devices: new Map(),   // device → latest reading, of every tenant
  rooms: new Map(),     // device → room, kept after a delete
  removed: [],          // devices deleted by a tombstone
  episodes: [],         // the chosen tenant's alerts per device and burst, newest first
  alerts: 0,            // the chosen tenant's alerts
  counts: new Map(),    // tenant → Map(window end → readings over 30 °C)
  others: 0,            // readings over 30 °C of the other tenants
  waited: [],           // what the chart said it was waiting for, in order
  firstReading: null,   // ms: the earliest reading seen (or known from a partial window)
  newestReading: null,  // ms: the newest reading seen: the clock silences are measured on
  token: null,          // {tenant, exp} of the token the gateway last accepted
  opens: 0,
  challenges: 0,
  extensions: 0,
  progressOf,
};

const element = (tag, className, text) => {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
};

// ---- tokens ------------------------------------------------------------------------------

const b64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes)))
  .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const unb64url = (text) => atob(text.replace(/-/g, "+").replace(/_/g, "/"));
const utf8 = (text) => new TextEncoder().encode(text);
const jwk = JSON.parse(unb64url(params.get("key") || "") || "{}");
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
  return { token: input + "." + b64url(signature), tenant, exp: claims.exp * 1000 };
}

function accepted(token) {
  dashboard.token = { tenant: token.tenant, exp: token.exp };
  showAuth();
}

function showAuth() {
  const { token, extensions } = dashboard;
  const text = token
    ? `token until ${time(token.exp)} · ${plural(extensions, "challenge")} answered`
    : "no token yet";
  $("auth").textContent = text;
  $("auth").title = `${token ? `${token.tenant}'s ` : ""}${text}. The gateway sends a challenge 10 s before the token expires; ` +
    "the page answers it with a fresh token, which extends its streams.";
}

// ---- event ids ---------------------------------------------------------------------------

// An sse-kafka event id, as partitions and the offsets a reconnect resumes from: byte 0x01,
// a zig-zag varint count, then per partition a zig-zag varint id and offset; URL-safe base64.
// An id may end in `/<etag>`, or be the key form `["<base64(key)>","<progress>"]`.
function progressOf(id) {
  const progress = (id.startsWith("[") ? JSON.parse(id)[1] : id).split("/")[0];
  const bytes = Uint8Array.from(unb64url(progress), (c) => c.charCodeAt(0));
  let at = 0;
  const varint = () => {
    let value = 0, scale = 1, byte;
    do {
      if (at >= bytes.length) throw new Error(`truncated id ${id}`);
      byte = bytes[at++];
      value += (byte & 0x7f) * scale;
      scale *= 128;
    } while (byte & 0x80);
    return value % 2 ? -(value + 1) / 2 : value / 2;
  };
  if (bytes[at++] !== 1) throw new Error(`not an sse-kafka id: ${id}`);
  const partitions = [];
  for (let count = varint(); partitions.length < count;) partitions.push([varint(), varint()]);
  return partitions;
}

// ---- streams -----------------------------------------------------------------------------

class Stream {
  constructor(name, path, handlers) {
    this.name = name;
    this.path = path;
    this.handlers = handlers;   // SSE event type → function(MessageEvent)
    this.source = null;
    this.lastId = "";
    this.state = document.querySelector(`[data-stream="${name}"] .state`);
    this.idView = document.querySelector(`[data-stream="${name}"] code`);
  }

  async open({ resume = true } = {}) {
    if (!resume) this.showId("");
    const token = await mint(dashboard.tenant);
    const query = new URLSearchParams({ access_token: token.token });
    if (this.lastId) query.set("lastEventId", this.lastId);
    this.close();
    const source = this.source = new EventSource(this.path() + "?" + query);
    dashboard.opens += 1;
    this.show("connecting");
    source.onopen = () => { this.show("open"); accepted(token); };
    source.onerror = () => {
      if (source !== this.source) return;
      if (source.readyState === EventSource.CLOSED) {
        // Refused (a topic not created yet, an expired token): try again with a fresh token.
        this.show("closed", "error");
        setTimeout(() => { if (source === this.source) this.open(); }, 2000);
      } else {
        this.show("retrying", "error");
      }
    };
    for (const [type, handle] of Object.entries(this.handlers)) {
      source.addEventListener(type, (event) => {
        if (event.lastEventId) this.showId(event.lastEventId);
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
    this.state.textContent = text;
    this.state.className = `state ${style}`;
  }

  showId(id) {
    this.lastId = id;
    let text = "–", title = "no event yet: a reconnect starts from the stream's default";
    if (id) {
      try {
        const partitions = progressOf(id);
        text = partitions.map(([p, offset]) => `p${p}→${offset}`).join(" ");
        title = "a reconnect resumes at " +
          partitions.map(([p, offset]) => `partition ${p}, offset ${offset}`).join("; ") +
          ` (last event id ${id})`;
      } catch (error) {
        text = "?";
        title = `${error.message}`;
      }
    }
    this.idView.textContent = text;
    this.idView.parentElement.title = `${this.name}: ${title}`;
  }
}

// The streams share a token and a connection, so one answer extends all of them: the
// challenges they get together are answered once.
let answering = null;

function answerChallenge(stream, event) {
  dashboard.challenges += 1;
  if (answering) return;
  const request = JSON.parse(event.data);
  answering = (async () => {
    const token = await mint(dashboard.tenant);
    const response = await fetch(stream.path(), {
      method: request.method,
      headers: { ...request.headers, authorization: "Bearer " + token.token },
    });
    if (response.status === 204) {
      dashboard.extensions += 1;
      accepted(token);
    } else {
      streams.forEach((s) => s.open());   // nothing left to extend: start over
    }
  })().catch(() => streams.forEach((s) => s.open()))
     .finally(() => setTimeout(() => { answering = null; }, 3000));
}

const streams = [
  new Stream("events", () => `/events/${encodeURIComponent(dashboard.tenant)}`,
             { message: (e) => addWindow(JSON.parse(e.data)) }),
  new Stream("alerts", () => "/alerts", { message: (e) => addAlert(JSON.parse(e.data)) }),
  new Stream("counts", () => "/alert-counts", { message: (e) => addCount(JSON.parse(e.data)) }),
  new Stream("devices", () => "/devices", {
    message: (e) => putDevice(JSON.parse(e.data)),
    delete: (e) => removeDevice(unb64url(e.data)),
  }),
];

// ---- the chart ---------------------------------------------------------------------------

const canvas = $("chart");
let drawPending = false;

function addWindow(aggregate) {
  const start = Date.parse(aggregate.window_start), end = Date.parse(aggregate.window_end);
  const first = Date.parse(aggregate.first_reading), last = Date.parse(aggregate.last_reading);
  if (last - first < FULL * (end - start)) {
    // The device started or stopped within it: its average would stand for a moment only.
    dashboard.partial += 1;
    sawReading(first);
    showWaiting();
    return;
  }
  const points = dashboard.windows.get(aggregate.device) || [];
  if (!points.some((p) => p.end === end)) {   // a window written twice is the same window
    points.push({ end, avg: aggregate.avg_temperature, max: aggregate.max_temperature });
    points.sort((a, b) => a.end - b.end);
    if (points.length > WINDOWS_SHOWN) points.splice(0, points.length - WINDOWS_SHOWN);
  }
  dashboard.windows.set(aggregate.device, points);
  $("chart-note").textContent = `last window ends ${time(end)} · ${DAY_NOTE}`;
  showWaiting();
  scheduleDraw();
}

// Until the first full window is drawn, the chart says what it waits for and when it is due:
// windows are aligned on the clock, and Spark writes one once the watermark passes its end.
function showWaiting() {
  const box = $("waiting");
  box.hidden = dashboard.windows.size > 0;
  if (box.hidden) return;
  const [title, detail] = box.children;
  const say = (what, why) => {
    title.textContent = what;
    detail.textContent = why;
    if (!dashboard.waited.includes(what)) dashboard.waited.push(what);
  };
  if (dashboard.firstReading == null) {
    say("Waiting for the first readings", "The devices stream brings each device's latest one.");
    return;
  }
  let from = Math.floor(dashboard.firstReading / WINDOW_MS) * WINDOW_MS;
  if (from + WINDOW_MS - dashboard.firstReading < FULL * WINDOW_MS) from += WINDOW_MS;
  const due = from + WINDOW_MS + WATERMARK_MS;
  const left = Math.round((due - Date.now()) / 1000);
  say(`Waiting for the first full ${WINDOW_MS / 1000}-s window`,
      `Spark writes a window once the ${WATERMARK_MS / 1000}-s watermark has passed its end: ` +
      `${time(from)}–${time(from + WINDOW_MS)} is due at about ${time(due)}` +
      (left > 0 ? ` (in ${left} s).` : " (any moment now)."));
}

function scheduleDraw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => { drawPending = false; draw(); });
}

function colorOf(device) {
  const room = dashboard.rooms.get(device);
  if (ROOM_COLORS[room]) return ROOM_COLORS[room];
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
  const pad = { left: 44, right: 12, top: 10, bottom: 24 };
  const t0 = Math.min(...all.map((p) => p.end)), t1 = Math.max(...all.map((p) => p.end));
  const values = [...all.map((p) => p.avg), ALERT_OVER];
  const lo = Math.floor(Math.min(...values) - 1), hi = Math.ceil(Math.max(...values) + 1);
  const x = (t) => pad.left + (t1 === t0 ? 0.5 : (t - t0) / (t1 - t0)) * (width - pad.left - pad.right);
  const y = (v) => pad.top + (hi - v) / (hi - lo) * (height - pad.top - pad.bottom);

  g.font = "11px system-ui, sans-serif";
  g.fillStyle = "#656d76";
  g.strokeStyle = "#eaeef2";
  g.lineWidth = 1;
  const step = Math.max(1, Math.ceil((hi - lo) / 6));
  for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) {
    g.beginPath(); g.moveTo(pad.left, y(v)); g.lineTo(width - pad.right, y(v)); g.stroke();
    g.fillText(`${v} °C`, 4, y(v) + 4);
  }
  const ticks = t1 === t0 ? [[t0, "center"]] : [[t0, "left"], [(t0 + t1) / 2, "center"], [t1, "right"]];
  for (const [t, align] of ticks) {
    g.textAlign = align;
    g.fillText(time(t), x(t), height - 6);
  }
  // The alert threshold: a line that crosses it is a device whose readings raise alerts.
  g.strokeStyle = g.fillStyle = "#b3261e";
  g.setLineDash([5, 4]);
  g.beginPath(); g.moveTo(pad.left, y(ALERT_OVER)); g.lineTo(width - pad.right, y(ALERT_OVER)); g.stroke();
  g.setLineDash([]);
  const label = `alerts above ${ALERT_OVER} °C`;
  const labelWidth = g.measureText(label).width;
  g.fillStyle = "rgba(255, 255, 255, 0.85)";
  g.fillRect(width - pad.right - labelWidth - 6, y(ALERT_OVER) - 15, labelWidth + 6, 13);
  g.fillStyle = "#b3261e";
  g.textAlign = "right";
  g.fillText(label, width - pad.right - 3, y(ALERT_OVER) - 5);
  g.textAlign = "left";
  g.lineWidth = 2;
  for (const [device, points] of series) {
    g.strokeStyle = g.fillStyle = colorOf(device);
    g.beginPath();
    points.forEach((p, i) => (i ? g.lineTo(x(p.end), y(p.avg)) : g.moveTo(x(p.end), y(p.avg))));
    g.stroke();
    for (const p of points) { g.beginPath(); g.arc(x(p.end), y(p.avg), 2.5, 0, 2 * Math.PI); g.fill(); }
  }
  $("legend").replaceChildren(...series.map(([device, points]) => {
    const item = element("span", "", `${device} ${dashboard.rooms.get(device) || ""} ` +
                         `${points[points.length - 1].avg.toFixed(1)} °C`);
    item.style.setProperty("--color", colorOf(device));
    item.dataset.device = device;
    return item;
  }));
}

window.addEventListener("resize", scheduleDraw);

// ---- alerts ------------------------------------------------------------------------------

let alertsPending = false;

function addAlert(alert) {
  dashboard.alerts += 1;
  const at = Date.parse(alert.at);
  let episode = dashboard.episodes.find((e) => e.device === alert.device &&
    at >= e.first - EPISODE_GAP_MS && at <= e.last + EPISODE_GAP_MS);
  if (!episode) {
    episode = { device: alert.device, room: alert.room || dashboard.rooms.get(alert.device) || "",
                first: at, last: at, count: 0, peak: -Infinity };
    dashboard.episodes.push(episode);
  }
  episode.first = Math.min(episode.first, at);
  episode.last = Math.max(episode.last, at);
  episode.count += 1;
  episode.peak = Math.max(episode.peak, alert.temperature);
  dashboard.episodes.sort((a, b) => b.last - a.last);
  dashboard.episodes.splice(EPISODES_SHOWN);
  scheduleAlerts();
}

function addCount(count) {
  const windows = dashboard.counts.get(count.tenant) || new Map();
  windows.set(Date.parse(count.window_end), count.alerts);   // a window written twice counts once
  dashboard.counts.set(count.tenant, windows);
  addTenant(count.tenant);
  scheduleAlerts();
}

function scheduleAlerts() {
  if (alertsPending) return;
  alertsPending = true;
  requestAnimationFrame(() => { alertsPending = false; showAlerts(); });
}

function showAlerts() {
  const { tenant, episodes } = dashboard;
  const others = [...dashboard.counts.entries()]
    .filter(([name]) => name !== tenant)
    .map(([name, windows]) => [name, [...windows.values()].reduce((a, b) => a + b, 0)])
    .sort(([a], [b]) => a.localeCompare(b));
  dashboard.others = others.reduce((sum, [, n]) => sum + n, 0);
  $("alerts-title").textContent = `Alerts of ${tenant}`;
  const own = element("b", "", episodes.length
    ? `${tenant}: ${plural(dashboard.alerts, "reading")} over ${ALERT_OVER} °C in ` +
      plural(episodes.length, "episode")
    : `${tenant}: no alert yet`);
  const rest = element("span", "others", `other tenants: ${plural(dashboard.others, "alert")}` +
    (others.length ? ` (${others.map(([name, n]) => `${name} ${n}`).join(" · ")})` : "") +
    `, counted per ${WINDOW_MS / 1000}-s window`);
  $("alert-summary").replaceChildren(own, rest);
  const newest = dashboard.newestReading ?? -Infinity;
  $("alerts").replaceChildren(...(episodes.length ? episodes.map((episode) => {
    const ongoing = episode.last >= newest - SILENT_MS;
    const item = element("li", ongoing ? "ongoing" : "");
    item.dataset.device = episode.device;
    const span = ongoing ? `since ${time(episode.first)}`
                         : `${time(episode.first)}–${time(episode.last)}`;
    item.append(
      element("div", "what", `${episode.device} · ${episode.room} overheating`),
      element("div", "when", `${span} · ${plural(episode.count, "reading")} over ` +
              `${ALERT_OVER} °C · peak ${episode.peak.toFixed(1)} °C`),
    );
    return item;
  }) : [element("li", "empty", `No alert for ${tenant} yet: an alert is a reading of one of ` +
                  `its devices over ${ALERT_OVER} °C.`)]));
}

// ---- devices -----------------------------------------------------------------------------

function sawReading(at) {
  if (Number.isNaN(at)) return;
  if (dashboard.firstReading == null || at < dashboard.firstReading) dashboard.firstReading = at;
  if (dashboard.newestReading == null || at > dashboard.newestReading) dashboard.newestReading = at;
}

function rowOf(device) {
  const body = $("devices");
  let row = body.querySelector(`tr[data-device="${CSS.escape(device)}"]`);
  if (!row) {
    row = element("tr");
    row.dataset.device = device;
    const after = [...body.children].find((r) => r.dataset.device > device);
    body.insertBefore(row, after || null);
  }
  return row;
}

function putDevice(reading) {
  const at = Date.parse(reading.at);
  dashboard.devices.set(reading.device, reading);
  if (dashboard.rooms.get(reading.device) !== reading.room) {
    dashboard.rooms.set(reading.device, reading.room);
    scheduleDraw();   // the chart colours and names its lines by room
  }
  sawReading(at);
  addTenant(reading.tenant);
  const row = rowOf(reading.device);
  row.dataset.at = at;
  row.dataset.tenant = reading.tenant;
  row.className = "";
  delete row.dataset.deleted;
  row.replaceChildren(...[[reading.device], [reading.tenant], [reading.room ?? "–"],
    [reading.temperature.toFixed(1), "num"], [reading.humidity?.toFixed(0) ?? "–", "num"],
    [time(at), "status"]].map(([text, style]) => element("td", style, text)));
  markRow(row);
  showWaiting();
}

function removeDevice(device) {
  const reading = dashboard.devices.get(device);
  dashboard.devices.delete(device);
  dashboard.removed.push(device);
  const row = rowOf(device);
  if (!row.children.length) {   // deleted before this page saw it
    row.replaceChildren(...[device, "", "", "", "", ""].map((text) => element("td", "", text)));
    row.lastChild.className = "status";
  }
  const now = time(Date.now());
  row.className = "deleted fresh";
  row.dataset.deleted = "yes";
  row.lastChild.textContent = `deleted at ${now}`;
  markRow(row);
  $("removed").textContent = reading
    ? `${device} (${reading.tenant}) silent since ${time(Date.parse(reading.at))}, ` +
      `deleted at ${now}`
    : `${device} deleted at ${now}`;
  $("removed").title = `deleted by a tombstone so far: ${dashboard.removed.join(", ")}`;
}

// Rows of the chosen tenant in bold; a live device that fell behind the newest reading shows
// for how long it has been silent (its tombstone follows once the pipeline gives up on it).
function markRow(row) {
  row.classList.toggle("own", row.dataset.tenant === dashboard.tenant);
  if (row.dataset.deleted) return;
  const behind = (dashboard.newestReading ?? 0) - Number(row.dataset.at);
  const silent = behind > SILENT_MS;
  row.classList.toggle("silent", silent);
  row.lastChild.textContent = silent
    ? `silent for ${Math.round(behind / 1000)} s` : time(Number(row.dataset.at));
}

setInterval(() => {
  document.querySelectorAll("#devices tr").forEach(markRow);
  showWaiting();
  scheduleAlerts();
}, 1000);

// ---- the tenant picker -------------------------------------------------------------------

const picker = $("tenant");

function addTenant(tenant) {
  if ([...picker.options].some((o) => o.value === tenant)) return;
  picker.add(new Option(tenant, tenant));
  [...picker.options].sort((a, b) => a.value.localeCompare(b.value))
    .forEach((o) => picker.add(o));
  picker.value = dashboard.tenant;
}

function showTenant() {
  $("chart-title").textContent = `${dashboard.tenant} · average °C per device, ` +
    `${WINDOW_MS / 1000}-s windows`;
  $("chart-note").textContent = DAY_NOTE;
  $("legend").replaceChildren();
  document.querySelectorAll("#devices tr").forEach(markRow);
  showWaiting();
  showAlerts();
  draw();
}

picker.addEventListener("change", () => {
  dashboard.tenant = picker.value;
  dashboard.windows.clear();
  dashboard.episodes = [];
  dashboard.alerts = 0;
  showTenant();
  // A new token for the new tenant: every stream opens again with it (the tenant's own streams
  // from scratch, the others where they were).
  for (const stream of streams) stream.open({ resume: !["events", "alerts"].includes(stream.name) });
});

["acme", "globex", "initech", dashboard.tenant].forEach(addTenant);
showTenant();

if (signingKey) {
  streams.forEach((stream) => stream.open());
} else {
  $("auth").textContent = "no signing key: open the URL ./run demo prints";
}
