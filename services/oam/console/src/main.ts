// Laredo's web console: OAM's status and administration over the Connect protocol, from the browser.
// Built by scripts/build-console (the OAM client generated from proto/ by protoc-gen-es, bundled by esbuild).
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import {
  PipelineState,
  ServiceState,
  TableSyncOAM,
  type GetStatusResponse,
  type InstanceInfo,
  type WatchStatusResponse,
} from "../gen/laredo/v1/oam_pb";

const REFRESH_MS = 2000;
const CHART_POINTS = 150;
const TOKEN_KEY = "laredo-console-token";

let token = sessionStorage.getItem(TOKEN_KEY) ?? "";
const withToken: Interceptor = (next) => async (req) => {
  if (token) req.header.set("Authorization", `Bearer ${token}`);
  return next(req);
};
const oam = createClient(TableSyncOAM, createConnectTransport({
  baseUrl: location.origin, useBinaryFormat: true, interceptors: [withToken],
}));

const $ = <T extends HTMLElement>(selector: string): T => document.querySelector(selector) as T;
const lagHistory: { at: number; bytes: number; seconds: number }[] = [];
let role: string | null = null;
let watching: AbortController | null = null;
let signedIn = false;

function el(tag: string, text = "", className = ""): HTMLElement {
  const node = document.createElement(tag);
  node.textContent = text;
  if (className) node.className = className;
  return node;
}

function row(cells: (string | Node)[]): HTMLTableRowElement {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    const td = document.createElement("td");
    td.append(cell);
    tr.append(td);
  }
  return tr;
}

function badge(state: string): HTMLElement {
  return el("span", state, `state ${state}`);
}

function when(stamp: Timestamp | undefined): string {
  return stamp ? timestampDate(stamp).toLocaleTimeString() : "-";
}

function pipelineState(state: PipelineState): string {
  return (PipelineState[state] ?? "UNSPECIFIED").replace("PIPELINE_STATE_", "").toLowerCase();
}

function showError(error: unknown): void {
  const box = $("#error");
  if (error === null) {
    box.hidden = true;
    return;
  }
  const text = error instanceof ConnectError ? `${Code[error.code]}: ${error.rawMessage}` : String(error);
  box.textContent = text;
  box.hidden = false;
}

function button(label: string, action: () => Promise<unknown>, confirmText = ""): HTMLButtonElement {
  const node = el("button", label) as HTMLButtonElement;
  if (confirmText) node.className = "danger";
  node.addEventListener("click", async () => {
    if (confirmText && !confirm(confirmText)) return;
    node.disabled = true;
    try {
      await action();
      showError(null);
      await refresh();
    } catch (error) {
      showError(error);
    } finally {
      node.disabled = false;
    }
  });
  return node;
}

function adminCell(...buttons: HTMLButtonElement[]): HTMLElement {
  const cell = el("span", "", "admin");
  cell.append(...buttons);
  return cell;
}

function json(value: JsonValue | undefined): JsonObject {
  return value && typeof value === "object" && !Array.isArray(value) ? value : {};
}

/** Who the token says the caller is; false when this OAM wants a (valid) token first. */
async function identify(): Promise<boolean> {
  const answer = await fetch("/console/identity", { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  const body = await answer.json();
  role = answer.ok ? body.role : null;
  $("#identity").textContent = answer.ok ? `${body.name} · ${body.role ?? "no role"}` : "not signed in";
  document.body.classList.toggle("admin", role === "admin");
  if (!answer.ok) showError(`${body.error} Enter a read or admin token above.`);
  return answer.ok;
}

function renderStatus(status: GetStatusResponse): void {
  const state = (ServiceState[status.state] ?? "").replace("SERVICE_STATE_", "").toLowerCase();
  const badgeNode = $("#system-state");
  badgeNode.textContent = state;
  badgeNode.className = `state ${state}`;
  const pipelines = $("#pipelines tbody");
  pipelines.replaceChildren(...status.pipelines.map((p) => row([
    p.pipelineId, badge(pipelineState(p.state)), String(p.rowCount),
    `${p.insertsApplied}/${p.updatesApplied}/${p.deletesApplied}`, when(p.lastChangeAt),
    String(p.deadLetterCount), p.lastBaselineReason ? `${p.lastBaselineReason} (${when(p.lastBaselineAt)})` : "-",
    adminCell(button("Reload", () => oam.reloadTable({ sourceId: p.sourceId, schema: p.schema, table: p.table }),
                     `Reload ${p.schema}.${p.table}? Its consumers take a new baseline.`)),
  ])));
  const sources = $("#sources tbody");
  sources.replaceChildren(...status.sources.map((s) => {
    const details = json(s.sourceDetails);
    const baseline = json(details["baseline"]);
    const lagSeconds = Number(s.lagTime?.seconds ?? 0n) + (s.lagTime?.nanos ?? 0) / 1e9;
    return row([
      s.sourceId, badge(String(details["phase"] ?? "unknown")), s.currentPosition || "-",
      `${s.lagBytes} bytes, ${lagSeconds.toFixed(1)} s`, progress(baseline),
      adminCell(button("Pause", () => oam.pauseSync({ sourceId: s.sourceId }),
                       `Pause ${s.sourceId}? WAL accumulates on the primary until it is resumed.`),
                button("Resume", () => oam.resumeSync({ sourceId: s.sourceId }))),
    ]);
  }));
  const first = status.sources[0];
  if (first) {
    const seconds = Number(first.lagTime?.seconds ?? 0n) + (first.lagTime?.nanos ?? 0) / 1e9;
    lagHistory.push({ at: Date.now(), bytes: Number(first.lagBytes), seconds });
    lagHistory.splice(0, Math.max(0, lagHistory.length - CHART_POINTS));
    drawLag();
  }
}

function progress(baseline: JsonObject): Node {
  if (!baseline["running"]) return document.createTextNode("-");
  const rows = Number(baseline["rows"] ?? 0), expected = Number(baseline["expected_rows"] ?? 0);
  const box = el("span");
  const bar = document.createElement("progress");
  if (expected > 0) {
    bar.max = expected;
    bar.value = Math.min(rows, expected);
  }
  box.append(bar, ` ${baseline["table"] ?? ""} ${rows} rows, ${baseline["rows_per_second"] ?? 0} rows/s, ` +
    `ETA ${baseline["eta_seconds"] ?? "?"} s`);
  return box;
}

const PHASES = ["waiting", "loading", "tail", "catching_up", "installing", "done"];

/** Baselines (from the sources' reports), restores and replays by phase, compactions (from the instances'). */
function renderWork(status: GetStatusResponse, instances: InstanceInfo[]): void {
  const items: Node[] = [];
  for (const source of status.sources) {
    const baseline = json(json(source.sourceDetails)["baseline"]);
    if (baseline["running"]) items.push(workItem(`baseline of ${baseline["table"]} (source ${source.sourceId})`,
                                                  progress(baseline)));
  }
  for (const instance of instances) {
    const report = json(instance.status);
    for (const rebuild of Object.values(json(report["replays"])).map(json)) {
      if (rebuild["state"] !== "running") continue;
      const phase = String(rebuild["phase"] ?? "waiting");
      const bar = document.createElement("progress");
      bar.max = PHASES.length - 1;
      bar.value = Math.max(0, PHASES.indexOf(phase));
      const seconds = (Date.now() - Number(rebuild["started_unix_ms"] ?? Date.now())) / 1000;
      const box = el("span");
      box.append(bar, ` ${phase}, ${rebuild["rows_replayed"] ?? 0} rows, for ${seconds.toFixed(0)} s`);
      items.push(workItem(`${rebuild["kind"]} of ${rebuild["table"]} on ${instance.service} ${instance.instanceId}`,
                          box));
    }
    if (report["compacting"]) {
      const since = Number(report["compacting_since_unix_ms"] ?? 0);
      const step = Number(report["compacting_step"] ?? 0), steps = Number(report["compacting_steps"] ?? 0);
      const box = el("span");
      if (step && steps) {
        const bar = document.createElement("progress");
        bar.max = steps;
        bar.value = step - 1;
        box.append(bar, ` ${report["compacting_phase"]} (${step}/${steps}), `);
      }
      box.append(since ? `for ${((Date.now() - since) / 1000).toFixed(0)} s` : "running");
      items.push(workItem(`compaction of ${report["compacting"]} on ${instance.instanceId}`, box));
    }
  }
  $("#work").replaceChildren(...(items.length ? items : [el("li", "nothing long running")]));
}

function workItem(title: string, detail: Node): HTMLElement {
  const item = el("li");
  item.append(el("strong", title), " ", detail);
  return item;
}

function drawLag(): void {
  const canvas = $<HTMLCanvasElement>("#lag-chart");
  const context = canvas.getContext("2d");
  if (!context) return;
  context.clearRect(0, 0, canvas.width, canvas.height);
  const series: [string, string, (p: { bytes: number; seconds: number }) => number][] = [
    ["#3461c1", "bytes", (p) => p.bytes], ["#c2410c", "seconds", (p) => p.seconds]];
  series.forEach(([color, label, value], line) => {
    const most = Math.max(1, ...lagHistory.map(value));
    context.strokeStyle = color;
    context.beginPath();
    lagHistory.forEach((point, i) => {
      const x = (i / (CHART_POINTS - 1)) * canvas.width;
      const y = canvas.height - 10 - (value(point) / most) * (canvas.height - 30);
      if (i === 0) context.moveTo(x, y); else context.lineTo(x, y);
    });
    context.stroke();
    context.fillStyle = color;
    context.fillText(`lag, ${label} (max ${most})`, 8 + line * 220, 12);
  });
}

function renderInstances(instances: InstanceInfo[]): void {
  const box = $("#instances");
  box.replaceChildren(...instances.map((instance) => {
    const node = el("div", "", "instance");
    node.dataset.instance = instance.instanceId;
    const state = instance.draining ? "draining" : instance.ready ? "ready" : "not ready";
    const title = el("div");
    title.append(el("strong", instance.instanceId), " ", badge(state), " ",
      adminCell(button("Drain", () => oam.drainReplication({ instanceId: instance.instanceId, drainDeadlineSeconds: 30n }),
                       `Drain ${instance.instanceId}? Its clients are told to move to another instance.`)));
    node.append(title);
    const tables = json(json(instance.status)["tables"]);
    for (const [name, value] of Object.entries(tables)) {
      const table = json(value);
      node.append(el("div", `${name}: ${table["rows"]} rows, sequence ${table["sequence"]}, ` +
        `${table["clients"]} clients`));
      const clients = (table["client_list"] as JsonValue[] | undefined) ?? [];
      if (clients.length) {
        const list = document.createElement("table");
        list.append(row(["client", "sequence", "behind", "state", "buffer"]));
        for (const client of clients.map(json)) {
          list.append(row([String(client["client_id"]), String(client["sequence"]), String(client["behind"]),
            badge(String(client["state"])), String(client["buffer"])]));
        }
        node.append(list);
      }
    }
    return node;
  }));
  if (!instances.length) box.append(el("p", "no fan-out instance reports to the coordination store"));
}

async function renderTables(): Promise<void> {
  const answer = await oam.listTables({});
  $("#tables tbody").replaceChildren(...answer.tables.map((t) => {
    const name = el("a", `${t.schema}.${t.table}`);
    name.setAttribute("href", "#");
    name.addEventListener("click", async (event) => {
      event.preventDefault();
      const schema = await oam.getTableSchema({ schema: t.schema, table: t.table });
      const list = document.createElement("table");
      list.append(row(["#", "column", "type", "not null", "key"]));
      for (const c of schema.columns) {
        list.append(row([String(c.ordinalPosition), c.columnName, c.dataType, c.notNull ? "yes" : "no",
          c.primaryKeyOrdinal ? String(c.primaryKeyOrdinal) : "-"]));
      }
      $("#schema").replaceChildren(el("h3", `${t.schema}.${t.table}`), list);
    });
    return row([name, t.sourceId, t.targetType, t.primaryKey || "-",
      adminCell(button("Snapshot", () => oam.createSnapshot({ tables: [`${t.schema}.${t.table}`] })))]);
  }));
}

async function renderSnapshots(): Promise<void> {
  const answer = await oam.listSnapshots({ limit: 20 });
  $("#snapshots tbody").replaceChildren(...answer.snapshots.map((s) => row([
    s.snapshotId, when(s.createdAt), s.tables.map((t) => `${t.schema}.${t.table} (${t.rowCount})`).join(", "),
    s.format, `${s.storeType} ${s.storeLocation}`,
    adminCell(button("Restore", () => oam.restoreSnapshot({ snapshotId: s.snapshotId, confirm: true }),
                     `Restore ${s.snapshotId}? Consumers of its tables load it, then replay the stream after it.`)),
  ])));
}

async function renderDeadLetters(status: GetStatusResponse): Promise<void> {
  const pipelines = status.pipelines.filter((p) => p.deadLetterCount > 0n);
  $("#dead-letters tbody").replaceChildren(...pipelines.map((p) => row([
    p.pipelineId, String(p.deadLetterCount),
    adminCell(button("Replay", () => oam.replayDeadLetters({ pipelineId: p.pipelineId }),
                     `Replay the dead letters of ${p.pipelineId}?`)),
  ])));
}

function describe(event: WatchStatusResponse): string {
  const e = event.event;
  switch (e.case) {
    case "pipelineStateChange":
      return `${e.value.pipelineId}: ${pipelineState(e.value.oldState)} → ${pipelineState(e.value.newState)}`;
    case "serviceStateChange":
      return `system: ${ServiceState[e.value.oldState]} → ${ServiceState[e.value.newState]}`;
    case "rowChange":
      return `${e.value.schema}.${e.value.table} ${e.value.action} at ${e.value.position}`;
    case "sourceStateChange":
      return `${e.value.sourceId}: ${e.value.message}`;
    default:
      return "event";
  }
}

async function watch(): Promise<void> {
  watching?.abort();
  const controller = (watching = new AbortController());
  const events = $("#events");
  while (!controller.signal.aborted) {
    try {
      for await (const event of oam.watchStatus({}, { signal: controller.signal })) {
        events.prepend(el("li", `${when(event.timestamp)} ${describe(event)}`));
        while (events.children.length > 200) events.lastElementChild?.remove();
      }
    } catch (error) {
      if (controller.signal.aborted) return;
      events.prepend(el("li", `watch ended (${error instanceof ConnectError ? Code[error.code] : error}); ` +
        "reconnecting"));
    }
    await new Promise((resolve) => setTimeout(resolve, REFRESH_MS));
  }
}

async function refresh(): Promise<void> {
  if (!signedIn) return;
  try {
    const [status, instances] = await Promise.all([oam.getStatus({}), oam.listInstances({})]);
    renderStatus(status);
    renderWork(status, instances.instances);
    renderInstances(instances.instances.filter((i) => i.service === "fanout"));
    await Promise.all([renderSnapshots().catch(() => undefined), renderDeadLetters(status)]);
    document.body.dataset.refreshed = String(Date.now());
  } catch (error) {
    showError(error);
  }
}

async function load(): Promise<void> {
  showError(null);
  signedIn = await identify();
  if (!signedIn) {
    watching?.abort();
    return;
  }
  await Promise.all([refresh(), renderTables().catch(showError)]);
  void watch();
}

async function start(): Promise<void> {
  $("#token").setAttribute("value", token);
  $("#login").addEventListener("submit", async (event) => {
    event.preventDefault();
    token = ($("#token") as HTMLInputElement).value.trim();
    sessionStorage.setItem(TOKEN_KEY, token);
    await load();
  });
  await load();
  setInterval(refresh, REFRESH_MS);
}

void start();
