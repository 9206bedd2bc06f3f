/*
 * The job page: tabs (#overview / #logs / #charts), the live state badge, and wiring
 * of the log stream and the charts. Configuration arrives as JSON in
 * <script id="job-page-config">, written by the view.
 */
(function () {
  "use strict";

  const TABS = ["overview", "logs", "charts", "events"];
  const STATE_POLL_MS = 5000;

  const config = JSON.parse(document.getElementById("job-page-config").textContent);
  const terminal = new Set(config.terminalStates);
  let state = config.state;

  const panels = {};
  for (const name of TABS) panels[name] = document.querySelector(`[data-panel=${name}]`);
  const tabLinks = document.querySelectorAll("[data-tab]");

  const logView = new window.TunePlane.LogView(panels.logs);
  const charts = new window.TunePlane.ChartsPanel(panels.charts, config.urls);
  const statusEl = panels.logs.querySelector(".stream-status");
  const statusText = statusEl.querySelector(".stream-status-text");

  const STATUS_TEXT = {
    idle: "not connected",
    connecting: "connecting…",
    live: "live",
    reconnecting: "reconnecting…",
    finished: "finished",
  };

  const stream = new window.TunePlane.LogStream(config.urls.logStream, {
    onLine: (line) => logView.append(line),
    onState: (data) => setState(data.state),
    onEnd: () => {
      // The stream ends once the job is finished and every line was sent; pick up the
      // final exit code, failure reason and attempts for the Overview.
      refreshJob();
    },
    onStatus: (name) => {
      statusEl.dataset.status = name;
      statusText.textContent = name === "finished" ? `finished (${state})` : STATUS_TEXT[name] || name;
    },
  });

  // Formatting ------------------------------------------------------------------------

  function formatTimestamp(iso) {
    if (!iso) return "—";
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return "—";
    // Same shape as the server-rendered "Y-m-d H:i:s" (UTC).
    return d.toISOString().slice(0, 19).replace("T", " ");
  }

  function badge(name) {
    const el = document.createElement("span");
    el.className = `badge state-${name}`;
    el.textContent = name;
    return el;
  }

  function setText(selector, text) {
    const el = document.querySelector(selector);
    if (el) el.textContent = text;
  }

  // State -----------------------------------------------------------------------------

  function setState(next) {
    if (!next) return;
    state = next;
    for (const el of document.querySelectorAll("[data-live=state-badge]")) {
      el.className = `badge state-${next}`;
      el.textContent = next;
    }
    document.body.dataset.jobState = next;
    if (statusEl.dataset.status === "finished") statusText.textContent = `finished (${next})`;
    charts.setLive(!terminal.has(next));
  }

  function renderAttempts(attempts) {
    const body = document.querySelector("[data-live=attempts]");
    if (!body || !attempts.length) return;
    const rows = attempts.map((a) => {
      const tr = document.createElement("tr");
      const cells = [
        [String(a.number), "num"],
        [a.executor, ""],
        [badge(a.state), ""],
        [a.exit_code === null || a.exit_code === undefined ? "—" : String(a.exit_code), "num mono"],
        [formatTimestamp(a.started_at), ""],
        [formatTimestamp(a.finished_at), ""],
        [a.failure_reason || "—", a.failure_reason ? "failure" : ""],
      ];
      for (const [content, cls] of cells) {
        const td = document.createElement("td");
        if (cls) td.className = cls;
        if (typeof content === "string") td.textContent = content;
        else td.appendChild(content);
        tr.appendChild(td);
      }
      return tr;
    });
    body.replaceChildren(...rows);
  }

  let pollTimer = 0;

  async function refreshJob() {
    let job;
    try {
      const res = await fetch(config.urls.job, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!res.ok) return;
      job = await res.json();
    } catch (err) {
      return; // offline for a moment; the next poll tries again
    }
    setState(job.state);
    setText("[data-live=exit_code]", job.exit_code === null || job.exit_code === undefined ? "—" : String(job.exit_code));
    setText("[data-live=failure_reason]", job.failure_reason || "—");
    document.querySelector("[data-live=failure_reason]")?.classList.toggle("failure", Boolean(job.failure_reason));
    setText("[data-live=started_at]", formatTimestamp(job.started_at));
    setText("[data-live=finished_at]", formatTimestamp(job.finished_at));
    renderAttempts(job.attempts || []);
    if (terminal.has(job.state) && pollTimer) {
      window.clearInterval(pollTimer);
      pollTimer = 0;
    }
  }

  // Events ----------------------------------------------------------------------------
  // Pod events copied from the cluster by the state sync, and what TunePlane did (created,
  // deleted, the GPU watchdog). Text only ever goes through textContent.

  const eventsUrl = config.urls.clusterEvents || `${config.urls.job}/cluster-events`;
  const eventsStatus = panels.events.querySelector("[data-role=events-status]");
  const eventsTable = panels.events.querySelector("[data-role=events-table]");
  const eventsBody = panels.events.querySelector("[data-role=events]");
  const eventsEmpty = panels.events.querySelector("[data-role=events-empty]");
  let eventsTimer = 0;

  async function loadEvents() {
    let data;
    try {
      const res = await fetch(eventsUrl, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!res.ok) {
        eventsStatus.textContent = `Could not load events (HTTP ${res.status})`;
        return;
      }
      data = await res.json();
    } catch (err) {
      eventsStatus.textContent = "Could not load events (offline?)";
      return;
    }
    const events = data.results || [];
    const rows = events.map((e) => {
      const tr = document.createElement("tr");
      if (e.type === "Warning") tr.className = "warning";
      const cells = [
        [formatTimestamp(e.last_seen), ""],
        [String(e.attempt), "num"],
        [e.type, ""],
        [e.reason, "mono"],
        [e.involved_object || "—", "mono"],
        [e.message || "", "wrap"],
        [String(e.count), "num"],
      ];
      for (const [text, cls] of cells) {
        const td = document.createElement("td");
        if (cls) td.className = cls;
        td.textContent = text;
        tr.appendChild(td);
      }
      return tr;
    });
    eventsBody.replaceChildren(...rows);
    eventsTable.hidden = events.length === 0;
    eventsEmpty.hidden = events.length !== 0;
    eventsStatus.textContent = `${events.length} event${events.length === 1 ? "" : "s"}`;
  }

  function showEvents(shown) {
    if (eventsTimer) {
      window.clearInterval(eventsTimer);
      eventsTimer = 0;
    }
    if (!shown) return;
    loadEvents();
    if (!terminal.has(state)) eventsTimer = window.setInterval(loadEvents, STATE_POLL_MS);
  }

  // Tabs ------------------------------------------------------------------------------

  function currentTab() {
    const name = window.location.hash.replace("#", "");
    if (TABS.includes(name)) return name;
    // A running job is watched for its output; a finished one is read for its outcome.
    return terminal.has(state) ? "overview" : "logs";
  }

  function showTab(name) {
    for (const tab of TABS) panels[tab].hidden = tab !== name;
    for (const link of tabLinks) {
      const selected = link.dataset.tab === name;
      link.setAttribute("aria-selected", String(selected));
      link.tabIndex = selected ? 0 : -1;
    }
    if (name === "logs") {
      stream.start();
      logView.shown();
    }
    if (name === "charts") charts.activate();
    else charts.deactivate();
    showEvents(name === "events");
  }

  // Arrow keys move between tabs, as the ARIA tabs pattern expects.
  document.querySelector("[role=tablist]").addEventListener("keydown", (event) => {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!step) return;
    const i = TABS.indexOf(currentTab());
    const next = TABS[(i + step + TABS.length) % TABS.length];
    window.location.hash = next;
    document.getElementById(`tab-${next}`).focus();
  });
  window.addEventListener("hashchange", () => showTab(currentTab()));

  // Start -----------------------------------------------------------------------------

  setState(state);
  showTab(currentTab());
  if (!terminal.has(state)) {
    // Follow a live job from any tab so the badge and line count stay current. The
    // stream only reports the final state, so poll the job for the steps before it.
    stream.start();
    pollTimer = window.setInterval(refreshJob, STATE_POLL_MS);
  }
})();
