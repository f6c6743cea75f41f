// The Sluice operator console. Every request goes through the engine's HTTP API
// with the token given at sign-in (kept in sessionStorage: this tab only), so the
// page can do exactly what the token may do and nothing else.
"use strict";

const TOKEN_KEY = "sluice.token";
const view = document.getElementById("view");
const live = new Map(); // deviceId -> last `values` entry of the stream
const states = new Map(); // deviceId -> last `states` entry of the stream
let admin = false;
let stream = null; // AbortController of the running stream
let streamDevice = null;
let healthTimer = null;
let onAlarmsChanged = null; // what the current view does when alarms change
let flash = null; // {hash, text, cls}: an outcome shown until the page changes
let refocus = null; // {el, start, end}: a field a re-render moved while it had the focus
let trend = null; // {deviceId, series: Map key -> {key, unit, precision, points, drawnAt, box}} of the device page

const SVG_NS = "http://www.w3.org/2000/svg";
const TREND_SPAN = 3600 * 1000; // a chart shows the last hour
const TREND_CAP = 2000; // points kept per tag
const TREND_W = 320;
const TREND_H = 80;
const TREND_PAD = 4;

// ---- small helpers -------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "text") el.textContent = value;
    else el.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/// An SVG element, made as `h()` makes HTML ones (attributes and children only).
function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    el.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) el.append(child);
  }
  return el;
}

function time(ms) {
  if (ms === undefined || ms === null) return "-";
  return new Date(ms).toLocaleString();
}

function age(ms) {
  if (!ms) return "-";
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return `${Math.floor(s / 3600)} h ago`;
}

function stateBadge(state) {
  return h("span", { class: `state ${state || ""}`, text: state || "unknown" });
}

// An alarm whose cause went away: still open until a person closes it.
function recoveredMark(alarm) {
  if (!alarm.clearedAt) return null;
  return h("span", { class: "recovered", text: "recovered", title: `cleared ${time(alarm.clearedAt)}` });
}

function show(value) {
  if (value === null || value === undefined) return "-";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/// A tag's value as shown: a number that is not whole with `precision` decimals
/// (the tag's, 0 to 12) or, without one, with 4 significant digits but every
/// digit of its whole part (21.781456 -> 21.78, 1013.25 -> 1013, 0.0123456 ->
/// 0.01235); a whole number exactly; an array element by element; anything
/// else as `show()` writes it.
function formatValue(value, precision) {
  if (Array.isArray(value)) {
    return `[${value.map((v) => (typeof v === "number" || Array.isArray(v)
      ? formatValue(v, precision) : JSON.stringify(v))).join(", ")}]`;
  }
  if (typeof value !== "number" || !Number.isFinite(value) || Number.isInteger(value)) return show(value);
  if (Number.isInteger(precision) && precision >= 0 && precision <= 12) return value.toFixed(precision);
  if (Math.abs(value) >= 1000) return value.toFixed(0);
  return String(Number(value.toPrecision(4)));
}

/// The unit after a value (" °C"), as nodes; nothing for a tag without one.
function unitText(unit) {
  return unit ? [" ", h("span", { class: "unit", text: unit })] : [];
}

/// `text` followed by the unit, if any, as plain text (titles, labels).
function withUnit(text, unit) {
  return unit ? `${text} ${unit}` : text;
}

/// The mark of a device with open alarms (not cleared, not closed), leading to
/// its alarms; nothing when it has none.
function alarmMark(deviceId, count) {
  if (!count) return null;
  const text = `${count} open alarm${count === 1 ? "" : "s"}`;
  return h("a", { class: "alarm-mark", href: `#alarms?deviceId=${encodeURIComponent(deviceId)}`,
    title: text, "aria-label": text, "data-count": count, text: `⚠ ${count}`,
    onclick: (e) => e.stopPropagation() });
}

/// `el` in a box that scrolls sideways when it is wider than the page.
function scroller(el) {
  return h("div", { class: "table-scroll" }, el);
}

function table(headers, rows, cls) {
  return h("table", { class: cls },
    h("thead", {}, h("tr", {}, headers.map((t) => h("th", { text: t })))),
    h("tbody", {}, rows));
}

/// A list of names and values; a long one (a path, an error) is marked `long`:
/// on a card it takes the card's whole width, under its name.
function fields(pairs) {
  return h("dl", { class: "fields" }, pairs.flatMap(([k, v]) => {
    const text = v instanceof Node ? null : show(v);
    const long = String(k).length > 24 || (text !== null && text.length > 40) ? "long" : undefined;
    return [h("dt", { class: long, text: k }), h("dd", { class: long }, v instanceof Node ? v : text)];
  }));
}

/// The status line of the view, showing the outcome kept for this page, if any.
function flashed(id) {
  const kept = flash && flash.hash === location.hash ? flash : null;
  return h("p", { id, role: "status", class: kept ? kept.cls : undefined, text: kept ? kept.text : undefined });
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

/// One API call; answers {status, body}. A 401 signs out.
async function api(method, path, body, raw) {
  const headers = { Authorization: `Bearer ${token()}` };
  let payload;
  if (raw !== undefined) payload = raw;
  else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const answer = await fetch(path, { method, headers, body: payload });
  let parsed = null;
  const text = await answer.text();
  try { parsed = text ? JSON.parse(text) : null; } catch (_) { parsed = { error: text }; }
  if (answer.status === 401 && token()) {
    signOut(parsed && parsed.error);
  }
  return { status: answer.status, ok: answer.ok, body: parsed };
}

function errorText(answer) {
  const body = answer.body || {};
  let text = body.error || `HTTP ${answer.status}`;
  if (body.allowed) text += ` (allowed: ${body.allowed.join(", ") || "none"})`;
  return text;
}

// ---- sign-in ---------------------------------------------------------------------

async function signIn(given) {
  sessionStorage.setItem(TOKEN_KEY, given);
  const probe = await api("GET", "/devices");
  if (!probe.ok) {
    sessionStorage.removeItem(TOKEN_KEY);
    return errorText(probe);
  }
  admin = (await api("GET", "/components")).ok;
  return null;
}

function signOut(reason) {
  sessionStorage.removeItem(TOKEN_KEY);
  stopStream();
  live.clear();
  states.clear();
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  document.getElementById("who").textContent = "";
  view.replaceChildren();
  document.getElementById("signin").hidden = false;
  document.getElementById("signin-error").textContent = reason || "";
}

async function start() {
  document.getElementById("signin").hidden = true;
  document.getElementById("nav").hidden = false;
  document.getElementById("signout").hidden = false;
  document.getElementById("nav-components").hidden = !admin;
  document.getElementById("nav-health").hidden = !admin;
  document.getElementById("who").textContent = admin ? "admin" : "tenant";
  startStream(null);
  refreshPending();
  await route();
}

document.getElementById("signin-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const refused = await signIn(document.getElementById("token").value.trim());
  document.getElementById("signin-error").textContent = refused || "";
  if (!refused) {
    document.getElementById("token").value = "";
    await start();
  }
});
document.getElementById("signout").addEventListener("click", () => signOut());

// ---- the live stream -----------------------------------------------------------

function stopStream() {
  if (stream) stream.abort();
  stream = null;
  document.getElementById("live-indicator").className = "live off";
}

/// Reads `/console/stream` (server-sent events) with the token; reconnects
/// after a break. `device` narrows the values to one device.
function startStream(device) {
  if (stream && streamDevice === device) return;
  stopStream();
  streamDevice = device;
  const control = new AbortController();
  stream = control;
  const path = device ? `/console/stream?device=${encodeURIComponent(device)}` : "/console/stream";
  (async () => {
    while (!control.signal.aborted) {
      try {
        const answer = await fetch(path, {
          headers: { Authorization: `Bearer ${token()}` }, signal: control.signal,
        });
        if (answer.status === 401) { signOut("the token is no longer accepted"); return; }
        document.getElementById("live-indicator").className = "live on";
        const reader = answer.body.getReader();
        const decoder = new TextDecoder();
        let buffered = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffered += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffered.indexOf("\n\n")) >= 0) {
            dispatch(buffered.slice(0, end));
            buffered = buffered.slice(end + 2);
          }
        }
      } catch (_) {
        if (control.signal.aborted) return;
      }
      document.getElementById("live-indicator").className = "live off";
      await new Promise((r) => setTimeout(r, 2000));
    }
  })();
}

function dispatch(block) {
  let name = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (!data.length) return;
  const body = JSON.parse(data.join("\n"));
  if (name === "values") {
    for (const device of body.devices) live.set(device.deviceId, device);
    body.devices.forEach(paintDevice);
  } else if (name === "states") {
    for (const device of body.devices) states.set(device.deviceId, device);
    body.devices.forEach(paintDevice);
  } else if (name === "alarms") {
    refreshPending();
    if (onAlarmsChanged) onAlarmsChanged();
  }
}

// ---- devices -------------------------------------------------------------------

/// A tag's value, its unit after it (the value as received in the title).
function valueSpans(device) {
  const entry = live.get(device);
  if (!entry) return [h("span", { class: "muted", text: "no round yet" })];
  return entry.values.map((v) => h("span", {
    class: `value ${v.quality}`, "data-key": v.key,
    title: `${withUnit(show(v.value), v.unit)} (${v.quality}, ${age(v.ts)})`,
  }, h("span", { class: "key", text: `${v.key} = ` }), formatValue(v.value, v.precision), unitText(v.unit)));
}

function stateSince(entry) {
  if (!entry || !entry.state) return "-";
  if (!entry.since) return "unchanged since the engine started";
  return `since ${time(entry.since)} (${age(entry.since)})`;
}

/// Updates whatever shows `device` in place: its row in the list, its detail.
function paintDevice(entry) {
  const id = entry.deviceId;
  const row = view.querySelector(`tr[data-device="${CSS.escape(id)}"]`);
  const values = live.get(id);
  const state = states.get(id);
  if (row) {
    if (state) {
      row.querySelector(".state-cell").replaceChildren(stateBadge(state.state));
      row.querySelector(".since-cell").textContent = stateSince(state);
    }
    if (values) {
      row.querySelector(".connection-cell").replaceChildren(
        ...values.connections.map((c) => stateBadge(c.state)),
        ...(values.lastError ? [h("div", { class: "error last-error", text: values.lastError })] : []));
      row.querySelector(".latency-cell").textContent =
        values.latencyMs === null ? "-" : `${values.latencyMs.toFixed(1)} ms`;
      row.querySelector(".values-cell").replaceChildren(...valueSpans(id));
    }
  }
  const detail = view.querySelector(`#device-live[data-device="${CSS.escape(id)}"]`);
  if (detail) paintDeviceLive(detail, id);
}

/// Reads the devices' open alarms again and marks the rows of the list shown.
async function refreshAlarmMarks() {
  const answer = await api("GET", "/devices");
  const list = document.getElementById("devices-table");
  if (!answer.ok || !list) return;
  for (const d of answer.body.devices) {
    const cell = list.querySelector(`tr[data-device="${CSS.escape(d.deviceId)}"] .device-cell`);
    if (!cell) continue;
    const shown = cell.querySelector(".alarm-mark");
    if (shown) shown.remove();
    const mark = alarmMark(d.deviceId, d.openAlarms);
    if (mark) cell.append(mark);
  }
}

async function devicesView() {
  const answer = await api("GET", "/devices");
  if (!answer.ok) return [h("p", { class: "error", text: errorText(answer) })];
  onAlarmsChanged = refreshAlarmMarks;
  const rows = answer.body.devices.map((d) => {
    states.set(d.deviceId, { ...(states.get(d.deviceId) || {}), deviceId: d.deviceId,
      state: d.state, since: d.stateSince, lastHeartbeat: d.lastHeartbeat });
    return h("tr", { class: "clickable", "data-device": d.deviceId,
      onclick: () => { location.hash = `#device/${encodeURIComponent(d.deviceId)}`; } },
    h("td", { class: "device-cell" }, h("a", { href: `#device/${encodeURIComponent(d.deviceId)}`, text: d.deviceId }),
      alarmMark(d.deviceId, d.openAlarms)),
    h("td", { text: `${d.productId} / ${d.deviceNum}` }),
    h("td", { text: d.tenantId }),
    h("td", { class: "state-cell" }, stateBadge(d.state)),
    h("td", { class: "since-cell", text: stateSince(states.get(d.deviceId)) }),
    h("td", { class: "connection-cell", text: "-" }),
    h("td", { class: "latency-cell", text: "-" }),
    h("td", { text: d.owner || "-" }),
    h("td", { class: "values-cell" }, valueSpans(d.deviceId)));
  });
  const list = table(["Device", "Product / number", "Tenant", "State", "Since", "Connection",
    "Round", "Engine", "Last values"], rows, "devices-table");
  list.id = "devices-table";
  setTimeout(() => answer.body.devices.forEach((d) => paintDevice({ deviceId: d.deviceId })), 0);
  return [h("h1", { text: `Devices (${answer.body.devices.length})` }), list];
}

/// The device page's live values (rounded, with their units) and round, and
/// the new samples added to its charts.
function paintDeviceLive(container, id) {
  const entry = live.get(id);
  if (!entry) {
    container.replaceChildren(h("p", { class: "muted", text: "no round yet" }));
    return;
  }
  feedTrends(entry);
  const rows = entry.values.map((v) => h("tr", { "data-key": v.key },
    h("td", { text: v.key }),
    h("td", { class: "value-cell", title: withUnit(show(v.value), v.unit) },
      formatValue(v.value, v.precision), unitText(v.unit)),
    h("td", {}, h("span", { class: `value ${v.quality}`, text: v.quality })),
    h("td", { text: age(v.ts) })));
  container.replaceChildren(
    fields([["Last round", `${time(entry.roundAt)} (${age(entry.roundAt)})`],
      ["Round latency", entry.latencyMs === null ? "-" : `${entry.latencyMs.toFixed(1)} ms`],
      ["Connections", h("span", {}, entry.connections.map((c) =>
        h("span", {}, `${c.channelId} `, stateBadge(c.state), " ")))],
      ["Last error", h("span", { class: entry.lastError ? "error last-error" : "muted",
        text: entry.lastError || "none" })]]),
    table(["Tag", "Value", "Quality", "Age"], rows, "device-values"));
}

function valueInput(tag) {
  if (isArray(tag)) {
    const first = Array.from({ length: Math.min(tag.length, 3) }, (_, i) => i).join(", ");
    return h("input", { id: "command-value", type: "text", required: true,
      placeholder: `${tag.length} values: [${first}${tag.length > 3 ? ", ..." : ""}]` });
  }
  if (tag.dataType === "BOOL") {
    return h("select", { id: "command-value" },
      h("option", { value: "true", text: "true" }), h("option", { value: "false", text: "false" }));
  }
  if (tag.dataType === "STRING") return h("input", { id: "command-value", type: "text" });
  const whole = !tag.dataType.startsWith("FLOAT") && tag.factor === 1 && tag.offset === 0;
  return h("input", { id: "command-value", type: "number", step: whole ? "1" : "any",
    min: tag.min ?? undefined, max: tag.max ?? undefined, required: true });
}

/// Whether `tag` is an array tag: a `length` on a type other than STRING.
function isArray(tag) {
  return Boolean(tag.length) && tag.dataType !== "STRING";
}

function parseValue(tag, text) {
  if (isArray(tag)) {
    // The engine checks the length and each element; text that is not JSON goes as it is.
    try { return JSON.parse(text); } catch { return text; }
  }
  if (tag.dataType === "BOOL") return text === "true";
  if (tag.dataType === "STRING") return text;
  return Number(text);
}

/// Shows `command`'s status in `line`, asking again every half second until it
/// is final, the line left the page, or a minute passed.
async function followCommand(line, command) {
  const deadline = Date.now() + 60000;
  let current = command;
  for (;;) {
    line.replaceChildren("Command ", h("a", { href: `#command/${current.id}`, text: `#${current.id}` }),
      " ", stateBadge(current.status));
    if (FINAL.includes(current.status) || !line.isConnected || Date.now() > deadline) return;
    await new Promise((r) => setTimeout(r, 500));
    const again = await api("GET", `/commands/${current.id}`);
    if (!again.ok) return;
    current = again.body;
  }
}

function commandForm(device) {
  const writable = device.channels.flatMap((c) => c.tags).filter((t) => t.access !== "R");
  if (!writable.length) return h("p", { class: "muted", text: "No writable tags." });
  const result = h("p", { id: "command-result", role: "status" });
  const slot = h("span", {});
  const range = h("span", { class: "muted", id: "command-range" });
  const key = h("select", { id: "command-key" },
    writable.map((t) => h("option", { value: t.key, text: `${t.key} (${t.dataType})` })));
  const pick = () => {
    const tag = writable.find((t) => t.key === key.value);
    slot.replaceChildren(h("label", {}, "Value", valueInput(tag)));
    const bounds = [tag.min !== null ? `min ${tag.min}` : null, tag.max !== null ? `max ${tag.max}` : null]
      .filter(Boolean).join(", ");
    range.textContent = bounds ? `range: ${bounds}` : "";
  };
  key.addEventListener("change", pick);
  pick();
  const form = h("form", { class: "inline", id: "command-form", onsubmit: async (e) => {
    e.preventDefault();
    const tag = writable.find((t) => t.key === key.value);
    const input = document.getElementById("command-value");
    if (!input.checkValidity()) { result.className = "error"; result.textContent = input.validationMessage; return; }
    const answer = await api("POST", "/commands", {
      deviceId: device.deviceId, key: tag.key, value: parseValue(tag, input.value),
    });
    if (answer.ok) {
      result.className = "ok";
      followCommand(result, answer.body);
    } else {
      result.className = "error";
      result.textContent = errorText(answer);
    }
  } }, h("label", {}, "Tag", key), slot, range, h("button", { type: "submit", id: "command-send", text: "Send property/set" }));
  return h("div", {}, form, result);
}

/// The open alarms of device `id`, from the device list (0 when not listed).
async function openAlarmsOf(id) {
  const answer = await api("GET", "/devices");
  if (!answer.ok) return 0;
  const d = answer.body.devices.find((x) => x.deviceId === id);
  return d ? d.openAlarms : 0;
}

/// Marks the device page's title again with the open alarms of device `id`.
async function refreshDeviceMark(id) {
  const count = await openAlarmsOf(id);
  const title = document.getElementById("device-title");
  if (!title || title.dataset.device !== id) return;
  const shown = title.querySelector(".alarm-mark");
  if (shown) shown.remove();
  const mark = alarmMark(id, count);
  if (mark) title.append(mark);
}

async function deviceView(id) {
  const path = `/devices/${encodeURIComponent(id)}`;
  const [answer, hour, alarms] = await Promise.all([api("GET", path), api("GET", `${path}/trend`),
    openAlarmsOf(id)]);
  if (!answer.ok) return [h("p", { class: "error", text: errorText(answer) })];
  const d = answer.body;
  const trends = trendsBox(d, hour);
  onAlarmsChanged = () => refreshDeviceMark(id);
  startStream(id);
  const liveBox = h("div", { id: "device-live", "data-device": id });
  paintDeviceLive(liveBox, id);
  const tags = d.channels.flatMap((c) => c.tags.map((t) => h("tr", { "data-key": t.key },
    h("td", { text: t.key }), h("td", { text: c.channelId }), h("td", { text: t.address }),
    h("td", { text: t.dataType }), h("td", { text: t.access }),
    h("td", { text: `${show(t.min)} .. ${show(t.max)}` }), h("td", { class: "unit-cell", text: t.unit || "-" }),
    h("td", { text: show(t.precision) }), h("td", { text: t.periodMs }))));
  return [
    h("h1", { id: "device-title", "data-device": id }, `Device ${id}`, alarmMark(id, alarms)),
    fields([["Product / number", `${d.productId} / ${d.deviceNum}`], ["Tenant", d.tenantId],
      ["Pipeline", d.pipeline], ["Enabled", d.enabled], ["Configuration from", d.configSource.from]]),
    h("h2", { text: "Live" }), liveBox,
    h("h2", { text: "The last hour" }), trends,
    h("h2", { text: "Write a tag" }), commandForm(d),
    h("p", {}, h("a", { href: `#commands?deviceId=${encodeURIComponent(id)}`, text: "Commands of this device" })),
    h("h2", { text: "Tags" }),
    scroller(table(["Tag", "Channel", "Address", "Type", "Access", "Range", "Unit", "Decimals", "Period (ms)"], tags)),
  ];
}

// ---- trends ----------------------------------------------------------------------

/// Whether `tag` holds one number: not an array, not BOOL, not STRING.
function isNumeric(tag) {
  return !isArray(tag) && tag.dataType !== "BOOL" && tag.dataType !== "STRING";
}

/// The device page's charts, one per numeric tag, starting from the hour the
/// server kept (`GET /devices/{id}/trend`); sets `trend` for the live samples.
function trendsBox(device, hour) {
  const kept = new Map((hour.ok && hour.body ? hour.body.tags : []).map((t) => [t.key, t]));
  const numeric = device.channels.flatMap((c) => c.tags).filter(isNumeric);
  const keys = [...new Set([...numeric.map((t) => t.key), ...kept.keys()])];
  trend = { deviceId: device.deviceId, series: new Map() };
  for (const key of keys) {
    const tag = numeric.find((t) => t.key === key) || {};
    const past = kept.get(key) || {};
    const series = { key, unit: past.unit ?? tag.unit ?? null, precision: past.precision ?? tag.precision ?? null,
      points: (past.points || []).filter(([ts, v]) => ts && typeof v === "number" && Number.isFinite(v)),
      drawnAt: 0, box: h("figure", { class: "trend-box", "data-key": key }) };
    thinTrend(series);
    trend.series.set(key, series);
    drawTrend(series);
  }
  const boxes = [...trend.series.values()].map((series) => series.box);
  return h("div", { id: "device-trends", "data-device": device.deviceId },
    hour.ok ? null : h("p", { id: "trend-note", class: "muted",
      text: `The hour before this page opened is not available: ${errorText(hour)}` }),
    boxes.length ? h("div", { class: "trends" }, boxes) : h("p", { class: "muted", text: "No numeric tags." }));
}

/// Adds the samples of a `values` entry newer than each chart's last point, and
/// redraws the charts that changed (or were last drawn 10 s ago: time moves on).
function feedTrends(entry) {
  if (!trend || trend.deviceId !== entry.deviceId) return;
  for (const v of entry.values) {
    const series = trend.series.get(v.key);
    if (!series) continue;
    if (v.unit !== undefined) series.unit = v.unit;
    if (v.precision !== undefined) series.precision = v.precision;
    const last = series.points[series.points.length - 1];
    const fresh = typeof v.value === "number" && Number.isFinite(v.value) && Boolean(v.ts) && (!last || v.ts > last[0]);
    if (fresh) {
      series.points.push([v.ts, v.value]);
      thinTrend(series);
    }
    if (fresh || Date.now() - series.drawnAt > 10000) drawTrend(series);
  }
}

/// Keeps at most TREND_CAP points: past the cap, the hour is thinned to a
/// point every 2 * TREND_SPAN / TREND_CAP (the newest point always stays).
function thinTrend(series) {
  const points = series.points;
  if (points.length <= TREND_CAP) return;
  const gap = (2 * TREND_SPAN) / TREND_CAP;
  const kept = [];
  for (const p of points) {
    if (!kept.length || p[0] - kept[kept.length - 1][0] >= gap) kept.push(p);
  }
  const newest = points[points.length - 1];
  if (kept[kept.length - 1] !== newest) kept.push(newest);
  series.points = kept.slice(-TREND_CAP);
}

/// Draws `series` into its box: its points of the last hour (older ones are
/// dropped) as a line and a dot each, time from an hour ago to now on x, the
/// values scaled to their range (a flat series in the middle) on y; above it,
/// the tag, its last value and the hour's min and max.
function drawTrend(series) {
  const newest = series.points.length ? series.points[series.points.length - 1][0] : 0;
  const end = Math.max(Date.now(), newest);
  const start = end - TREND_SPAN;
  const first = series.points.findIndex((p) => p[0] >= start);
  series.points = first < 0 ? [] : series.points.slice(first);
  series.drawnAt = Date.now();
  const points = series.points;
  const values = points.map((p) => p[1]);
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  const margin = (hi - lo) * 0.1;
  const round = (n) => Math.round(n * 10) / 10;
  const x = (ts) => round(TREND_PAD + Math.min(1, Math.max(0, (ts - start) / TREND_SPAN)) * (TREND_W - 2 * TREND_PAD));
  const y = (v) => (hi === lo ? TREND_H / 2
    : round(TREND_PAD + ((hi + margin - v) / (hi - lo + 2 * margin)) * (TREND_H - 2 * TREND_PAD)));
  const last = points.length ? points[points.length - 1][1] : null;
  const chart = svg("svg", { class: "trend", "data-key": series.key, viewBox: `0 0 ${TREND_W} ${TREND_H}`,
    width: TREND_W, height: TREND_H, preserveAspectRatio: "xMidYMid meet", role: "img",
    "aria-label": `${series.key} over the last hour`, "data-count": points.length,
    "data-last": last ?? undefined, "data-min": points.length ? lo : undefined, "data-max": points.length ? hi : undefined },
  svg("polyline", { class: "trend-line", points: points.map(([ts, v]) => `${x(ts)},${y(v)}`).join(" ") }),
  points.map(([ts, v]) => svg("circle", { class: "trend-point", cx: x(ts), cy: y(v), r: 1.5,
    "data-ts": ts, "data-value": v })));
  const shown = (v) => formatValue(v, series.precision);
  const label = h("figcaption", { class: "trend-label" },
    h("span", { class: "trend-key", text: series.key }),
    points.length
      ? [h("span", { class: "trend-last", title: `${withUnit(show(last), series.unit)} at ${time(newest)}` },
        shown(last), unitText(series.unit)),
      h("span", { class: "trend-range" }, "min ", h("span", { class: "trend-min", title: show(lo), text: shown(lo) }),
        " · max ", h("span", { class: "trend-max", title: show(hi), text: shown(hi) }), unitText(series.unit))]
      : h("span", { class: "trend-last muted", text: "no values in the last hour" }));
  const axis = h("div", { class: "trend-axis" }, h("span", { text: "1 h ago" }), h("span", { text: "now" }));
  series.box.replaceChildren(label, chart, axis);
}

// ---- alarms --------------------------------------------------------------------

const ALARM_STATES = ["NEW", "PUSHED", "DELAYED", "CONFIRMED", "ESCALATED", "HANDLED", "CLOSED",
  "FALSE", "SUPERSEDED"];

async function refreshPending() {
  const answer = await api("GET", "/alarms/stats");
  const badge = document.getElementById("pending-badge");
  if (!answer.ok) { badge.hidden = true; return; }
  badge.textContent = answer.body.pending;
  badge.hidden = answer.body.pending === 0;
  const stats = document.getElementById("alarm-stats");
  if (stats) {
    const today = answer.body.today;
    const rate = today.handlingRate === null ? "-" : `${(today.handlingRate * 100).toFixed(0)}%`;
    stats.textContent = `Pending: ${answer.body.pending} · today raised ${today.raised}, handled ${today.handled} (handling rate ${rate})`;
  }
}

function alarmFilters(params) {
  const get = (k) => params.get(k) || "";
  const state = h("select", { id: "alarm-filter-state" }, h("option", { value: "", text: "any state" }),
    ALARM_STATES.map((s) => h("option", { value: s, text: s, selected: get("state") === s })));
  const device = h("input", { id: "alarm-filter-device", placeholder: "device id", value: get("deviceId") });
  const rule = h("input", { id: "alarm-filter-rule", placeholder: "rule key", value: get("ruleKey") });
  const pending = h("input", { id: "alarm-filter-pending", type: "checkbox", checked: get("pending") === "true" });
  return h("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    const wanted = new URLSearchParams();
    if (state.value) wanted.set("state", state.value);
    if (device.value) wanted.set("deviceId", device.value);
    if (rule.value) wanted.set("ruleKey", rule.value);
    if (pending.checked) wanted.set("pending", "true");
    location.hash = `#alarms?${wanted}`;
  } }, h("label", {}, "State", state), h("label", {}, "Device", device), h("label", {}, "Rule", rule),
  h("label", {}, "Pending only", pending), h("button", { type: "submit", text: "Filter" }));
}

async function alarmsView(params) {
  const answer = await api("GET", `/alarms?${params}`);
  if (!answer.ok) return [h("p", { class: "error", text: errorText(answer) })];
  const rows = answer.body.alarms.map((a) => h("tr", { class: "clickable", "data-alarm": a.id,
    onclick: () => { location.hash = `#alarm/${a.id}`; } },
  h("td", {}, h("a", { href: `#alarm/${a.id}`, text: `#${a.id}` })), h("td", { text: a.deviceId }),
  h("td", { text: a.ruleKey }), h("td", {}, stateBadge(a.state), recoveredMark(a)), h("td", { text: a.message }),
  h("td", { text: time(a.raisedAt) })));
  onAlarmsChanged = () => route();
  setTimeout(refreshPending, 0);
  const list = table(["Alarm", "Device", "Rule", "State", "Message", "Raised"], rows);
  list.id = "alarms-table";
  return [h("h1", { text: "Alarms" }), h("p", { id: "alarm-stats", class: "muted" }), alarmFilters(params), list];
}

async function alarmView(id) {
  const [answer, chain] = await Promise.all([api("GET", `/alarms/${id}`), api("GET", `/alarms/${id}/chain`)]);
  if (!answer.ok) return [h("p", { class: "error", text: errorText(answer) })];
  const a = answer.body;
  onAlarmsChanged = () => route();
  const result = flashed("alarm-result");
  // A re-render (another change of the alarms) moves the fields being typed in
  // into the new page as they are: what is typed while it renders, and the
  // focus, stay in them.
  const kept = (field) => {
    const el = document.getElementById(field);
    if (!el || el.dataset.alarm !== String(id)) return null;
    if (document.activeElement === el) refocus = { el, start: el.selectionStart, end: el.selectionEnd };
    return el;
  };
  const note = kept("alarm-note") || h("textarea", { id: "alarm-note", rows: 2, cols: 50,
    placeholder: "what was done, and why", "data-alarm": id });
  const by = kept("alarm-by") || h("input", { id: "alarm-by", placeholder: "your name", "data-alarm": id });
  const act = async (action) => {
    const answerAct = await api("POST", `/alarms/${id}/${action}`, {
      by: by.value || undefined, note: note.value || undefined,
    });
    if (answerAct.ok) {
      const shownNote = document.getElementById("alarm-note");
      if (shownNote) shownNote.value = "";
      flash = { hash: location.hash, text: `${action}: now ${answerAct.body.state}`, cls: "ok" };
      await route();
    } else {
      result.className = "error";
      result.textContent = errorText(answerAct);
    }
  };
  const buttons = a.actions.map((action) => h("button", {
    type: "button", "data-action": action, text: action, onclick: () => act(action),
  }));
  const history = a.history.map((r) => h("tr", {},
    h("td", { text: r.seq }), h("td", { text: r.action || r.change }),
    h("td", { text: `${r.from || "-"} → ${r.to}` }), h("td", { class: "actor", text: r.actor }),
    h("td", { text: time(r.at) }), h("td", { text: r.note || "" })));
  const historyTable = table(["#", "Action", "State", "By", "At", "Note"], history);
  historyTable.id = "alarm-history";
  const chainItems = chain.ok ? chain.body.alarms.map((c) => h("li", {},
    h("a", { href: `#alarm/${c.id}`, text: `#${c.id}` }), " ", stateBadge(c.state), ` ${time(c.raisedAt)}`)) : [];
  return [
    h("h1", {}, `Alarm #${a.id} `, h("span", { id: "alarm-state-value", class: `state ${a.state}`, text: a.state })),
    fields([["Device", a.deviceId], ["Rule", a.ruleKey], ["Message", a.message], ["Source", a.source],
      ["Raised", time(a.raisedAt)], ["Cleared", time(a.clearedAt)], ["Confirmed by", a.confirmedBy],
      ["Handled by", a.handledBy], ["Closed by", a.closedBy]]),
    a.note ? h("p", { class: "muted", text: a.note }) : null,
    h("h2", { text: "Act" }),
    a.actions.length
      ? h("div", {}, h("div", { class: "filters" }, h("label", {}, "Note", note), h("label", {}, "By", by)),
        h("div", { class: "actions", id: "alarm-actions" }, buttons))
      : h("p", { class: "muted", id: "alarm-actions", text: "No action is allowed in this state." }),
    result,
    h("h2", { text: "History" }), historyTable,
    h("h2", { text: "Chain" }), h("ol", { id: "alarm-chain" }, chainItems),
  ];
}

// ---- commands ------------------------------------------------------------------

const FINAL = ["ACKED", "FAILED", "TIMEOUT", "CANCELLED"];

async function commandsView(params) {
  const answer = await api("GET", `/commands?${params}`);
  if (!answer.ok) return [h("p", { class: "error", text: errorText(answer) })];
  const rows = answer.body.commands.map((c) => h("tr", { class: "clickable", "data-command": c.id,
    onclick: () => { location.hash = `#command/${c.id}`; } },
  h("td", {}, h("a", { href: `#command/${c.id}`, text: `#${c.id}` })), h("td", { text: c.deviceId }),
  h("td", { text: c.key }), h("td", { text: show(c.value) }), h("td", {}, stateBadge(c.status)),
  h("td", { text: time(c.createdAt) }), h("td", { text: time(c.updatedAt) })));
  const list = table(["Command", "Device", "Tag", "Value", "Status", "Created", "Updated"], rows);
  list.id = "commands-table";
  const device = params.get("deviceId");
  return [h("h1", { text: device ? `Commands of ${device}` : "Commands" }), list];
}

async function commandView(id) {
  const answer = await api("GET", `/commands/${id}`);
  if (!answer.ok) return [h("p", { class: "error", text: errorText(answer) })];
  const c = answer.body;
  const result = h("p", { id: "command-cancel-result", role: "status" });
  const history = c.history.map((r) => h("tr", {},
    h("td", { text: r.action || "create" }), h("td", { text: `${r.from || "-"} → ${r.to}` }),
    h("td", { text: r.actor }), h("td", { text: time(r.at) }), h("td", { text: r.note || "" })));
  const historyTable = table(["Action", "Status", "By", "At", "Note"], history);
  historyTable.id = "command-history";
  return [
    h("h1", {}, `Command #${c.id} `, h("span", { id: "command-status", class: `state ${c.status}`, text: c.status })),
    fields([["Device", c.deviceId], ["Tag", c.key], ["Value", show(c.value)], ["Request", c.requestId],
      ["Origin", c.origin], ["Created", time(c.createdAt)], ["Finished", time(c.finishedAt)],
      ["Retries / reclaims", `${c.retryCount} / ${c.reclaimCount}`], ["Node", c.claimedNodeId],
      ["Result", c.result ? `${c.result}${c.resultCode != null ? ` (code ${c.resultCode})` : ""}` : null]]),
    FINAL.includes(c.status) ? null : h("div", { class: "actions" }, h("button", {
      id: "command-cancel", type: "button", text: "Cancel", onclick: async () => {
        const done = await api("POST", `/commands/${c.id}/cancel`);
        if (done.ok) await route();
        else { result.className = "error"; result.textContent = errorText(done); }
      },
    })),
    result,
    h("h2", { text: "Write record" }),
    h("pre", { id: "command-write", text: c.write ? JSON.stringify(c.write, null, 2) : "none" }),
    h("h2", { text: "History" }), historyTable,
  ];
}

// ---- components ------------------------------------------------------------------

async function componentsView() {
  const [list, health] = await Promise.all([api("GET", "/components"), api("GET", "/health")]);
  if (!list.ok) return [h("p", { class: "error", text: errorText(list) })];
  const result = flashed("component-result");
  const say = (answer, done) => {
    flash = { hash: location.hash, cls: answer.ok ? "ok" : "error", text: answer.ok ? done : errorText(answer) };
    result.className = flash.cls;
    result.textContent = flash.text;
  };
  const rows = list.body.components.map((c) => h("tr", { "data-component": `${c.name}@${c.version}` },
    h("td", { text: c.name }), h("td", { text: c.version }), h("td", { text: c.kind }),
    h("td", { text: c.active ? "active" : "" }), h("td", { class: "muted", text: c.hash.slice(0, 16) }),
    h("td", {}, c.active ? null : h("button", { type: "button", class: "secondary", text: "Activate",
      onclick: async () => {
        const answer = await api("POST", `/components/${encodeURIComponent(c.name)}/${encodeURIComponent(c.version)}/activate`);
        say(answer, `${c.name} ${c.version} is active`);
        if (answer.ok) await route();
      } }))));
  const name = h("input", { id: "upload-name", placeholder: "name", required: true });
  const version = h("input", { id: "upload-version", placeholder: "version", required: true });
  const kind = h("select", { id: "upload-kind" }, ["", "codec", "stage", "rules"].map((k) =>
    h("option", { value: k, text: k || "(kind of the existing name)" })));
  const file = h("input", { id: "upload-file", type: "file", accept: ".wasm", required: true });
  const upload = h("form", { class: "inline", id: "upload-form", onsubmit: async (e) => {
    e.preventDefault();
    const bytes = await file.files[0].arrayBuffer();
    const query = kind.value ? `?kind=${kind.value}` : "";
    const answer = await api("PUT",
      `/components/${encodeURIComponent(name.value)}/${encodeURIComponent(version.value)}${query}`,
      undefined, bytes);
    flash = { hash: location.hash, cls: answer.ok ? "ok" : "error",
      text: answer.ok ? `${answer.body.name} ${answer.body.version} uploaded and active` : errorText(answer) };
    if (answer.ok) await route();
    else { result.className = flash.cls; result.textContent = flash.text; }
  } }, h("label", {}, "Name", name), h("label", {}, "Version", version), h("label", {}, "Kind", kind),
  h("label", {}, "Component (.wasm)", file), h("button", { type: "submit", id: "upload-submit", text: "Upload" }));
  const reload = h("button", { type: "button", class: "secondary", id: "reload", text: "Reload files now",
    onclick: async () => say(await api("POST", "/reload"), "reloaded") });
  const table_ = table(["Name", "Version", "Kind", "", "Hash", ""], rows);
  table_.id = "components-table";
  const reloads = health.ok ? [
    h("h2", { text: "Reloads" }),
    fields([["Pipelines", reloadText(health.body.pipelines)], ["Device configuration", reloadText(health.body.config)]]),
  ] : [];
  return [h("h1", { text: "Components" }), table_, h("h2", { text: "Upload a version" }), upload,
    h("div", { class: "actions" }, reload), result, ...reloads];
}

function reloadText(r) {
  const text = `${r.reloads} reloads, ${r.reloadFailures} failed${r.source ? ` (${r.source})` : ""}`;
  return r.lastError ? `${text}; last error: ${r.lastError}` : text;
}

// ---- health ----------------------------------------------------------------------

async function healthView() {
  const [answer, dead] = await Promise.all([api("GET", "/health"), api("GET", "/dead-letters")]);
  if (!answer.ok) return [h("p", { class: "error", text: errorText(answer) })];
  const b = answer.body;
  if (!b.broker) return [h("p", { class: "muted", text: "The engine's health is the admin's to see." })];
  const card = (title, pairs, id) => h("div", { class: "card", id }, h("h2", { text: title }), fields(pairs));
  const failures = Object.entries(b.alarmRuleFailures);
  healthTimer = setTimeout(() => { if (location.hash.startsWith("#health")) route(); }, 2000);
  return [
    h("h1", { text: `Health: engine ${b.engine}, version ${b.version}, up ${b.uptimeSec} s` }),
    h("div", { class: "cards", id: "health-cards" },
      card("Broker", [["Connected", b.broker.connected], ["Connects", b.broker.connects],
        ["Published", b.broker.published], ["Acknowledged", b.broker.acked], ["Backlog", b.broker.backlog],
        ["Last error", b.broker.lastError]], "health-broker"),
      b.deviceBrokers.length ? card("Device brokers", b.deviceBrokers.map((d) => [d.address,
        d.connected ? `connected, ${d.messages} messages` : `down: ${d.lastError || "connecting"}`]),
      "health-device-brokers") : null,
      card("WAL", [["Records waiting", b.wal.records], ["Bytes", b.wal.bytes], ["In memory", b.wal.ring],
        ["Commits", b.wal.commits], ["Commit errors", b.wal.commitErrors],
        ["Dropped (oldest / newest)", `${b.wal.droppedOldest} / ${b.wal.droppedNewest}`],
        ["Dead letters", b.wal.deadLetters]], "health-wal"),
      card("Devices", Object.entries(b.devices), "health-devices"),
      card("Reloads", [["Pipelines", reloadText(b.pipelines)], ["Device configuration", reloadText(b.config)]],
        "health-reloads"),
      card("Failures per tenant", [
        ["Alarm rule failures", failures.length ? failures.map(([t, n]) => `tenant ${t}: ${n}`).join(", ") : "none"],
        ["Quarantined components", b.quarantined.length
          ? b.quarantined.map((q) => `tenant ${q.tenant}: ${q.component}`).join(", ") : "none"],
        ["Audit failures", b.auditFailures]], "health-failures")),
    dead.ok && dead.body.deadLetters.length ? deadLetters(dead.body.deadLetters) : null,
  ];
}

/// Messages the broker can never take, each to send again or remove.
function deadLetters(letters) {
  const act = (method, path) => async () => {
    clearTimeout(healthTimer);
    const answer = await api(method, path);
    if (!answer.ok) alert(errorText(answer));
    await route();
  };
  const rows = letters.map((d) => h("tr", { "data-dead-letter": d.id },
    h("td", { text: time(d.at) }), h("td", { text: d.topic }), h("td", { text: d.seq }),
    h("td", { text: `${d.bytes} B` }), h("td", { class: "muted", text: d.reason }),
    h("td", {},
      h("button", { type: "button", class: "secondary", text: "Send again",
        onclick: act("POST", `/dead-letters/${d.id}/resend`) }),
      h("button", { type: "button", class: "secondary", text: "Remove",
        onclick: act("DELETE", `/dead-letters/${d.id}`) }))));
  return h("section", { id: "dead-letters" },
    h("h2", { text: "Dead letters: messages the broker can never take" }),
    scroller(table(["Set aside", "Topic", "Seq", "Size", "Why", ""], rows)));
}

// ---- routing ---------------------------------------------------------------------

async function route() {
  if (!token()) return;
  clearTimeout(healthTimer);
  onAlarmsChanged = null;
  trend = null;
  if (flash && flash.hash !== location.hash) flash = null;
  const [path, query] = (location.hash.slice(1) || "devices").split("?");
  const params = new URLSearchParams(query || "");
  const [name, arg] = path.split("/");
  const id = arg && decodeURIComponent(arg);
  if (name !== "device") startStream(null);
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("current", link.dataset.view === name || `${link.dataset.view}` === `${name}s`);
  }
  const pages = {
    devices: () => devicesView(), device: () => deviceView(id), alarms: () => alarmsView(params),
    alarm: () => alarmView(id), commands: () => commandsView(params), command: () => commandView(id),
    components: () => componentsView(), health: () => healthView(),
  };
  const page = pages[name] || pages.devices;
  const shown = location.hash;
  const content = await page();
  if (location.hash === shown) {
    view.replaceChildren(...content.filter(Boolean));
    view.dataset.view = name;
  }
  // A field moved into the new page while typed in keeps the focus, in the
  // same task: no keystroke lands elsewhere.
  if (refocus && refocus.el.isConnected) {
    refocus.el.focus();
    refocus.el.setSelectionRange(refocus.start, refocus.end);
  }
  refocus = null;
}

/// The token of a sign-in link (`#token=SECRET`), taken out of the address at
/// once: the entry is replaced by `#devices`, so the token stays in no history
/// entry (a fragment never goes to the server). Null without one.
function tokenFromLink() {
  const match = /^#token=(.+)$/.exec(location.hash);
  if (!match) return null;
  window.history.replaceState(null, "", `${location.pathname}${location.search}#devices`);
  try { return decodeURIComponent(match[1]); } catch (_) { return match[1]; }
}

/// Signs in with the token of a sign-in link, as if it had been typed; a
/// refused one shows the sign-in form with the reason.
async function signInWithLink(given) {
  if (token()) {
    stopStream();
    live.clear();
    states.clear();
  }
  const refused = await signIn(given);
  if (refused) signOut(refused);
  else await start();
}

window.addEventListener("hashchange", () => {
  const linked = tokenFromLink();
  if (linked) signInWithLink(linked);
  else route();
});

(async () => {
  const linked = tokenFromLink();
  if (linked) { await signInWithLink(linked); return; }
  if (token()) {
    const refused = await signIn(token());
    if (!refused) { await start(); return; }
  }
  signOut();
})();
