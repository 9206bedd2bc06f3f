/*
 * The Charts tab: scalar charts grouped as the spec asks ("Method coverage and Agent
 * observations"), the SDK's transport health, the run's capability snapshot, and the
 * events panel (latest 100 events; histograms and health snapshots, latest per name).
 *
 * Scalars: the server reduces each series to at most `buckets` buckets inside PostgreSQL
 * (min, max, mean, first, last per bucket) and we ask for one bucket per pixel of chart
 * width, so a chart never draws more than it can show. The min-max band keeps a one-step
 * spike visible after the mean has averaged it away. Dragging across a chart asks the
 * server again for just that window, so zooming shows finer detail, not stretched pixels.
 * A run may have thousands of series: cards are cheap, but points are fetched and drawn
 * only for cards that are on (or near) the screen.
 *
 * Units come from the server (`unit` of /series, declared by the key, never guessed from
 * the values): percent is already 0-100 and drawn on a 0-100 axis; ratio is 0-1. Keys
 * outside the known groups stay plain numbers: no unit, no colour judgement.
 *
 * Every text from the API goes into the page through textContent.
 */
(function () {
  "use strict";

  const CHART_HEIGHT = 190;
  const MAX_BUCKETS = 5000; // the API's limit
  const CONCURRENT_FETCHES = 6;
  const MIN_ZOOM_PX = 4; // a drag narrower than this is a click, not a zoom
  const RECENT_EVENTS = 100;

  // One quiet hue per group, so the sections read apart; none of them means good or bad.
  const PALETTE = {
    observation: { line: "#0f766e", edge: "rgba(15, 118, 110, 0.40)", band: "rgba(15, 118, 110, 0.13)" },
    training: { line: "#2563eb", edge: "rgba(37, 99, 235, 0.35)", band: "rgba(37, 99, 235, 0.12)" },
    other: { line: "#4b5563", edge: "rgba(75, 85, 99, 0.35)", band: "rgba(75, 85, 99, 0.12)" },
  };
  const GROUPS = ["observation", "training", "other"];

  // Unit handling. Percent values arrive as 0-100 and are never multiplied.
  const UNITS = {
    percent: { tag: "%", title: "percent, 0–100", lo: 0, hi: 100, suffix: "%" },
    ratio: { tag: "0–1", title: "ratio, 0–1", lo: 0, hi: 1, suffix: "" },
  };

  // Formatting ----------------------------------------------------------------------

  /** Compact numbers for summaries, ticks and the readout: 4 significant digits,
   *  exponent form for the very small and very large (learning rates, token counts). */
  function formatValue(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "—";
    const abs = Math.abs(v);
    if (abs !== 0 && (abs >= 1e6 || abs < 1e-3)) {
      return v.toExponential(3).replace(/\.?0+e/, "e"); // 1.000e-5 -> 1e-5
    }
    return String(Number(v.toPrecision(4)));
  }

  function formatCount(n) {
    return Number(n || 0).toLocaleString("en-US");
  }

  function formatStep(n) {
    return n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US");
  }

  /** The server-rendered shape, "Y-m-d H:i:s" (UTC). Accepts ISO text or Unix seconds. */
  function formatTime(t) {
    if (t === null || t === undefined || t === "") return "—";
    const d = typeof t === "number" ? new Date(t * 1000) : new Date(t);
    if (Number.isNaN(d.getTime())) return "—";
    return d.toISOString().slice(0, 19).replace("T", " ");
  }

  function formatAgo(iso) {
    const d = new Date(iso);
    const s = Math.round((Date.now() - d.getTime()) / 1000);
    if (Number.isNaN(s)) return "";
    if (s < 60) return `${Math.max(0, s)} s ago`;
    if (s < 3600) return `${Math.round(s / 60)} min ago`;
    if (s < 86400) return `${Math.round(s / 360) / 10} h ago`;
    return `${Math.round(s / 8640) / 10} d ago`;
  }

  /** An event field value as text: strings as they are, numbers compact, null as "null". */
  function formatField(v) {
    if (v === null || v === undefined) return "null";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : formatValue(v);
    return String(v);
  }

  /** Room for the widest tick label on the y axis, so 2.5e-6 is not cut off. */
  function axisSize(u, values) {
    const longest = (values || []).reduce((n, v) => Math.max(n, String(v).length), 0);
    return Math.max(40, 14 + longest * 7);
  }

  /** `(-inf,0], (0,1], ..., (8,+inf)`: the API sends these; this is only a fallback. */
  function bucketLabels(bounds) {
    const edges = ["-inf", ...bounds.map(String), "+inf"];
    const labels = [];
    for (let i = 0; i + 1 < edges.length; i++) {
      labels.push(edges[i + 1] === "+inf" ? `(${edges[i]},+inf)` : `(${edges[i]},${edges[i + 1]}]`);
    }
    return labels;
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // Fetching ------------------------------------------------------------------------

  /** Run `worker` over `items`, at most `limit` at a time. */
  async function pool(items, limit, worker) {
    let next = 0;
    const runners = Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next++];
        await worker(item);
      }
    });
    await Promise.all(runners);
  }

  async function getJSON(url) {
    const res = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!res.ok) {
      let detail = `${res.status}`;
      try {
        detail = (await res.json()).detail || detail;
      } catch (err) {
        /* not JSON: keep the status */
      }
      throw new Error(detail);
    }
    return res.json();
  }

  // One chart ------------------------------------------------------------------------

  class ChartCard {
    /**
     * @param {{key: string, group?: string, unit?: string|null}} series
     * @param {{csvUrl: string, onZoom: Function, onReset: Function}} hooks
     */
    constructor(series, hooks) {
      this.key = series.key;
      this.group = GROUPS.includes(series.group) ? series.group : "other";
      // Unknown metrics stay numeric and neutral: a unit only inside the known groups.
      this.unit = this.group !== "other" && UNITS[series.unit] ? series.unit : null;
      this.hooks = hooks;
      this.plot = null;
      this.loading = null;
      this.loadedGeneration = -1;
      this.visible = false;
      this.zoom = null; // {start, end} in steps while zoomed
      this.seq = 0; // the newest request; older answers are dropped
      this.buckets = [];

      this.el = el("figure", "chart-card");
      this.el.dataset.seriesKey = this.key;
      this.el.dataset.group = this.group;
      this.el.dataset.unit = this.unit || "";

      const head = el("figcaption", "chart-head");
      const title = el("span", "chart-title mono", this.key);
      title.title = this.key;
      head.appendChild(title);
      if (this.unit) {
        const tag = el("span", `unit-tag unit-${this.unit}`, UNITS[this.unit].tag);
        tag.title = UNITS[this.unit].title;
        tag.dataset.role = "unit";
        head.appendChild(tag);
      }
      head.appendChild(el("span", "spacer"));
      this.zoomNote = el("span", "zoom-note muted small");
      this.zoomNote.hidden = true;
      this.resetButton = el("button", "button small", "Reset zoom");
      this.resetButton.type = "button";
      this.resetButton.dataset.role = "reset-zoom";
      this.resetButton.hidden = true;
      this.resetButton.addEventListener("click", () => this.hooks.onReset(this));
      const csv = el("a", "csv-link small", "CSV");
      csv.href = `${hooks.csvUrl}?key=${encodeURIComponent(this.key)}`;
      csv.setAttribute("download", "");
      csv.title = `Download every original point of ${this.key} as CSV`;
      csv.dataset.role = "series-csv";
      head.append(this.zoomNote, this.resetButton, csv);

      this.summary = el("dl", "chart-summary");
      this.fields = {};
      for (const [name, label] of [
        ["last", "last"],
        ["min", "min"],
        ["max", "max"],
        ["count", "count"],
        ["invalid_count", "invalid"],
      ]) {
        const dd = el("dd", "mono", "—");
        dd.dataset.field = name;
        this.summary.append(el("dt", "", label), dd);
        this.fields[name] = dd;
      }

      this.plotEl = el("div", "chart-plot");
      this.plotEl.style.minHeight = `${CHART_HEIGHT}px`;
      this.readout = el("p", "chart-readout small");
      this.readout.textContent = "\u00a0";
      this.note = el("p", "chart-note muted small");
      this.note.hidden = true;

      const body = el("div", "chart-body");
      body.append(this.plotEl, this.summary);
      this.el.append(head, body, this.readout, this.note);
    }

    fmt(v) {
      if (v === null || v === undefined) return "—";
      return this.unit ? `${formatValue(v)}${UNITS[this.unit].suffix}` : formatValue(v);
    }

    setSummary(s) {
      this.fields.last.textContent = this.fmt(s.last);
      this.fields.min.textContent = this.fmt(s.min);
      this.fields.max.textContent = this.fmt(s.max);
      this.fields.count.textContent = formatCount(s.count);
      this.fields.invalid_count.textContent = formatCount(s.invalid_count);
      this.fields.invalid_count.classList.toggle("warn-text", Number(s.invalid_count) > 0);
    }

    width() {
      return Math.max(200, Math.floor(this.plotEl.clientWidth));
    }

    draw(buckets) {
      this.buckets = buckets;
      const steps = [];
      const mean = [];
      const min = [];
      const max = [];
      let points = 0;
      let drawnMax = null;
      for (const b of buckets) {
        steps.push(b.step);
        mean.push(b.mean);
        min.push(b.min);
        max.push(b.max);
        points += Number(b.count) || 0;
        if (b.max !== null && (drawnMax === null || b.max > drawnMax)) drawnMax = b.max;
      }
      const data = [steps, mean, min, max];

      if (!this.plot) {
        this.plot = new window.uPlot(this.options(), data, this.plotEl);
        // Double-click goes back to the whole series, like the Reset zoom button.
        this.plot.over.addEventListener("dblclick", () => {
          if (this.zoom) this.hooks.onReset(this);
        });
      } else {
        this.plot.setData(data);
      }
      // Read by tests (and handy in devtools): what the chart actually shows.
      const ds = this.el.dataset;
      ds.pointCount = String(points);
      ds.bucketCount = String(buckets.length);
      ds.drawnMax = drawnMax === null ? "" : String(drawnMax);
      ds.firstStep = buckets.length ? String(buckets[0].step) : "";
      ds.lastStep = buckets.length ? String(buckets[buckets.length - 1].last_step ?? buckets[buckets.length - 1].step) : "";
      ds.zoomed = this.zoom ? "true" : "false";
      this.pendingDraw = true; // data-drawn flips once uPlot has painted it (hooks.draw)
      this.note.hidden = buckets.length > 0;
      this.note.textContent = buckets.length
        ? ""
        : this.zoom
          ? "No finite values in this window."
          : "No finite values yet (NaN and ±Infinity are counted, not drawn).";
      this.showReadout(null);
    }

    /** The line under the chart: the bucket under the cursor, or what the chart shows. */
    showReadout(idx) {
      const b = idx === null || idx === undefined ? null : this.buckets[idx];
      if (!b) {
        const n = this.buckets.length;
        if (!n) {
          this.readout.textContent = "\u00a0";
          return;
        }
        const first = this.buckets[0].step;
        const last = this.buckets[n - 1].last_step ?? this.buckets[n - 1].step;
        const where = this.zoom ? "zoomed to" : "steps";
        this.readout.textContent = `${where} ${formatStep(first)}–${formatStep(last)} · ${formatCount(n)} buckets · drag to zoom`;
        return;
      }
      const span = b.last_step !== undefined && b.last_step !== b.step
        ? `steps ${formatStep(b.step)}–${formatStep(b.last_step)}`
        : `step ${formatStep(b.step)}`;
      const parts = [span, `mean ${this.fmt(b.mean)}`, `min ${this.fmt(b.min)}`, `max ${this.fmt(b.max)}`];
      if (b.first !== undefined) parts.push(`first ${this.fmt(b.first)}`, `last ${this.fmt(b.last)}`);
      parts.push(`n ${formatCount(b.count)}`);
      if (b.invalid_count) parts.push(`${formatCount(b.invalid_count)} invalid`);
      this.readout.textContent = parts.join(" · ");
    }

    setZoom(zoom) {
      this.zoom = zoom;
      this.resetButton.hidden = !zoom;
      this.zoomNote.hidden = !zoom;
      this.zoomNote.textContent = zoom ? `steps ${formatStep(zoom.start)}–${formatStep(zoom.end)}` : "";
      this.el.dataset.zoomStart = zoom ? String(zoom.start) : "";
      this.el.dataset.zoomEnd = zoom ? String(zoom.end) : "";
    }

    options() {
      const colours = PALETTE[this.group];
      const unit = this.unit ? UNITS[this.unit] : null;
      const tick = (u, splits) => splits.map((v) => (unit && unit.suffix ? `${formatValue(v)}${unit.suffix}` : formatValue(v)));
      const y = {};
      if (unit) {
        // The unit's whole range, widened only if a value falls outside it (never clipped).
        y.range = (u, lo, hi) => [
          lo === null || lo === undefined ? unit.lo : Math.min(unit.lo, lo),
          hi === null || hi === undefined ? unit.hi : Math.max(unit.hi, hi),
        ];
      }
      const x = { time: false };
      // While zoomed, the x axis is the window asked for, even where it holds no points.
      x.range = (u, lo, hi) => {
        if (this.zoom) return [this.zoom.start, this.zoom.end];
        if (lo === null || lo === undefined || hi === null || hi === undefined) return [0, 1];
        return lo === hi ? [lo - 1, hi + 1] : [lo, hi];
      };
      return {
        width: this.width(),
        height: CHART_HEIGHT,
        scales: { x, y },
        cursor: { drag: { x: true, y: false, setScale: false } },
        legend: { show: false },
        series: [
          { label: "step" },
          { label: "mean", stroke: colours.line, width: 1.5 },
          { label: "min", stroke: colours.edge, width: 1, points: { show: false } },
          { label: "max", stroke: colours.edge, width: 1, points: { show: false } },
        ],
        // Fill between max (3) and min (2).
        bands: [{ series: [3, 2], fill: colours.band }],
        axes: [
          { stroke: "#5b6473", grid: { stroke: "#eef0f3" }, ticks: { stroke: "#dfe3e8" },
            values: (u, splits) => splits.map((v) => formatStep(v)) },
          { stroke: "#5b6473", size: axisSize, grid: { stroke: "#eef0f3" }, ticks: { stroke: "#dfe3e8" },
            values: tick, label: unit ? unit.title : undefined, labelSize: unit ? 18 : undefined,
            labelFont: "11px system-ui, sans-serif" },
        ],
        hooks: {
          setCursor: [(u) => this.showReadout(u.cursor.idx)],
          setSelect: [(u) => this.onSelect(u)],
          // The y range actually drawn (read by tests): uPlot settles scales after setData.
          draw: [() => {
            if (this.pendingDraw) {
              this.pendingDraw = false;
              this.el.dataset.drawn = "true";
            }
          }],
          setScale: [(u, key) => {
            if (key === "y") {
              this.el.dataset.yMin = String(u.scales.y.min);
              this.el.dataset.yMax = String(u.scales.y.max);
            }
          }],
        },
      };
    }

    /** A drag across the chart: re-query that window at full resolution. */
    onSelect(u) {
      const sel = u.select;
      if (!sel || sel.width < MIN_ZOOM_PX) return;
      const a = u.posToVal(sel.left, "x");
      const b = u.posToVal(sel.left + sel.width, "x");
      u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
      const start = Math.max(0, Math.floor(Math.min(a, b)));
      const end = Math.max(start + 1, Math.ceil(Math.max(a, b)));
      this.hooks.onZoom(this, start, end);
    }

    resize() {
      if (this.plot && this.plotEl.clientWidth > 0) {
        this.plot.setSize({ width: this.width(), height: CHART_HEIGHT });
      }
    }
  }

  // Transport health, capability snapshot, events -------------------------------------

  class ObservationsView {
    constructor(panel) {
      this.transport = panel.querySelector("[data-role=transport]");
      this.snapshot = panel.querySelector("[data-role=snapshot]");
      this.eventsBody = panel.querySelector("[data-role=event-rows]");
      this.eventsTable = panel.querySelector("[data-role=recent-events-table]");
      this.eventsEmpty = panel.querySelector("[data-role=recent-events-empty]");
      this.eventsCount = panel.querySelector("[data-role=recent-events-count]");
      this.histograms = panel.querySelector("[data-role=histograms]");
      this.histogramsEmpty = panel.querySelector("[data-role=histograms-empty]");
      this.healthBody = panel.querySelector("[data-role=health-rows]");
      this.healthTable = panel.querySelector("[data-role=health-table]");
      this.healthEmpty = panel.querySelector("[data-role=health-empty]");
    }

    /** healthy / unknown. Anything but a fresh heartbeat reads "unknown": a missing or
     *  stale heartbeat does not prove that training stopped. */
    renderTransport(t) {
      const root = this.transport;
      if (!root) return;
      t = t || {};
      const healthy = t.state === "healthy";
      const state = healthy ? "healthy" : "unknown";
      root.dataset.state = state;
      const badge = root.querySelector("[data-role=transport-state]");
      badge.textContent = state;
      badge.className = `badge transport-${state}`;
      root.querySelector("[data-role=transport-reason]").textContent = healthy
        ? "heartbeats arriving"
        : t.reason || "no recent heartbeat";
      const counters = t.counters || null;
      const set = (name, text, warn) => {
        const dd = root.querySelector(`[data-field=${name}]`);
        if (!dd) return;
        dd.textContent = text;
        dd.classList.toggle("warn-text", Boolean(warn));
      };
      set("last_heartbeat", t.last_heartbeat_at ? `${formatTime(t.last_heartbeat_at)} UTC (${formatAgo(t.last_heartbeat_at)})` : "never");
      // Without a heartbeat the counters are not known: "—", not a reassuring 0.
      const counter = (name) => (counters && counters[name] !== undefined ? Number(counters[name]) : null);
      for (const name of ["sent", "lost", "rejected", "failed_requests", "events_lost", "events_rejected"]) {
        const n = counter(name);
        set(name, n === null ? "—" : formatCount(n), name !== "sent" && n > 0);
      }
      const occ = t.queue_occupancy;
      set(
        "queue_occupancy",
        occ === null || occ === undefined ? "—" : `${Math.round(Number(occ) * 1000) / 10}%`,
        occ !== null && occ !== undefined && occ >= 0.9,
      );
    }

    renderSnapshot(capabilities, requirements) {
      const root = this.snapshot;
      if (!root) return;
      const present = capabilities !== null && capabilities !== undefined || requirements !== null && requirements !== undefined;
      root.hidden = !present;
      if (!present) return;
      const caps = root.querySelector("[data-role=capabilities]");
      const chips = (capabilities || []).map((c) => el("span", "chip mono", c));
      if (!chips.length) chips.push(el("span", "muted", "none enabled"));
      caps.replaceChildren(...chips);
      const reqs = root.querySelector("[data-role=requirements]");
      const entries = Object.entries(requirements || {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      const items = entries.map(([k, v]) => {
        const item = el("span", "req mono");
        item.append(el("span", "req-key", k), el("span", "", `=${typeof v === "object" && v !== null ? JSON.stringify(v) : formatField(v)}`));
        return item;
      });
      if (!items.length) items.push(el("span", "muted", "none declared"));
      reqs.replaceChildren(...items);
    }

    fieldsCell(fields) {
      const td = el("td", "fields");
      const entries = Object.entries(fields || {});
      if (!entries.length) {
        td.appendChild(el("span", "muted", "—"));
        return td;
      }
      for (const [k, v] of entries) {
        const item = el("span", "field mono");
        item.append(el("span", "field-key", k), el("span", "field-value", `=${formatField(v)}`));
        td.appendChild(item);
      }
      return td;
    }

    eventRow(e) {
      const tr = el("tr");
      tr.dataset.eventId = e.event_id;
      tr.append(
        el("td", "time", formatTime(e.ts)),
        el("td", "mono name", e.name),
        el("td", "num mono", formatStep(e.step)),
        el("td", "num", String(e.attempt ?? "—")),
        this.fieldsCell(e.fields),
      );
      return tr;
    }

    renderEvents(events) {
      if (!this.eventsBody) return;
      const rows = events.slice(0, RECENT_EVENTS).map((e) => this.eventRow(e));
      this.eventsBody.replaceChildren(...rows);
      this.eventsTable.hidden = rows.length === 0;
      this.eventsEmpty.hidden = rows.length !== 0;
      this.eventsCount.textContent = rows.length >= RECENT_EVENTS
        ? `latest ${RECENT_EVENTS}; older events are kept but not shown`
        : `${rows.length} event${rows.length === 1 ? "" : "s"}`;
    }

    renderHealth(snapshots) {
      if (!this.healthBody) return;
      this.healthBody.replaceChildren(...snapshots.map((e) => this.eventRow(e)));
      this.healthTable.hidden = snapshots.length === 0;
      this.healthEmpty.hidden = snapshots.length !== 0;
    }

    /** One histogram: horizontal bars, one per bucket, labelled as the API labels them. */
    histogram(d) {
      const h = d.histogram || { bounds: [], counts: [] };
      const counts = h.counts || [];
      const labels = Array.isArray(h.labels) && h.labels.length === counts.length ? h.labels : bucketLabels(h.bounds || []);
      const total = counts.reduce((a, b) => a + Number(b || 0), 0);
      const peak = counts.reduce((a, b) => Math.max(a, Number(b || 0)), 0);

      const card = el("figure", "histogram");
      card.dataset.name = d.name;
      const head = el("figcaption", "histogram-head");
      head.append(
        el("span", "mono histogram-name", d.name),
        el("span", "muted small", `step ${formatStep(d.step)} · attempt ${d.attempt ?? "—"} · ${formatTime(d.ts)} · ${formatCount(total)} in all`),
      );
      const bars = el("div", "histogram-bars");
      bars.setAttribute("role", "table");
      bars.setAttribute("aria-label", `${d.name} histogram`);
      counts.forEach((count, i) => {
        const row = el("div", "hbar");
        row.setAttribute("role", "row");
        const label = el("span", "hbar-label mono", labels[i]);
        label.setAttribute("role", "rowheader");
        const track = el("span", "hbar-track");
        track.setAttribute("role", "cell");
        const fill = el("span", "hbar-fill");
        const pct = peak ? (Number(count || 0) / peak) * 100 : 0;
        fill.style.width = `${pct}%`;
        if (count > 0) fill.style.minWidth = "2px";
        track.appendChild(fill);
        const value = el("span", "hbar-count mono", formatCount(count));
        value.setAttribute("role", "cell");
        row.dataset.count = String(count);
        row.append(label, track, value);
        bars.appendChild(row);
      });
      card.append(head, bars);
      return card;
    }

    renderDistributions(distributions) {
      if (!this.histograms) return;
      this.histograms.replaceChildren(...distributions.map((d) => this.histogram(d)));
      this.histogramsEmpty.hidden = distributions.length !== 0;
    }
  }

  // The tab ---------------------------------------------------------------------------

  class ChartsPanel {
    /**
     * @param {HTMLElement} panel the Charts tab panel
     * @param {{job?: string, series: string, seriesPoints: string, events?: string,
     *          observations?: string, seriesCsv?: string}} urls
     */
    constructor(panel, urls) {
      const ds = panel.dataset;
      this.urls = {
        ...urls,
        events: ds.eventsUrl || urls.events || `${urls.job}/events`,
        observations: ds.observationsUrl || urls.observations || `${urls.job}/observations`,
        seriesCsv: ds.csvUrl || urls.seriesCsv || `${urls.series}.csv`,
      };
      this.container = panel.querySelector("[data-role=charts]");
      this.emptyEl = panel.querySelector("[data-role=charts-empty]");
      this.statusEl = panel.querySelector("[data-role=charts-status]");
      this.groups = {};
      for (const name of GROUPS) {
        const section = panel.querySelector(`[data-group-section=${name}]`);
        this.groups[name] = section
          ? { section, grid: section.querySelector("[data-role=group-charts]"), count: section.querySelector("[data-role=group-count]") }
          : { section: null, grid: this.container, count: null };
      }
      this.observations = new ObservationsView(panel);
      this.cards = new Map();
      this.generation = 0; // bumps on every series-list refresh; stale cards reload
      this.active = false;
      this.live = false;
      this.timer = 0;
      this.refreshing = null;
      this.cardHooks = {
        csvUrl: this.urls.seriesCsv,
        onZoom: (card, start, end) => this.zoomCard(card, { start, end }),
        onReset: (card) => this.zoomCard(card, null),
      };

      this.observer = new IntersectionObserver((entries) => this.onIntersect(entries), {
        rootMargin: "300px 0px",
      });
      let resizeTimer = 0;
      window.addEventListener("resize", () => {
        window.clearTimeout(resizeTimer);
        resizeTimer = window.setTimeout(() => this.cards.forEach((c) => c.resize()), 150);
      });
    }

    /** The Charts tab was shown. */
    activate() {
      this.active = true;
      this.refresh();
      this.schedule();
    }

    deactivate() {
      this.active = false;
      this.schedule();
    }

    /** While the job runs, charts refresh every ~5 s; a finished job needs one last load. */
    setLive(live) {
      const wasLive = this.live;
      this.live = live;
      this.schedule();
      if (wasLive && !live && this.active) this.refresh();
    }

    schedule() {
      const want = this.active && this.live;
      if (want && !this.timer) {
        this.timer = window.setInterval(() => this.refresh(), 5000);
      } else if (!want && this.timer) {
        window.clearInterval(this.timer);
        this.timer = 0;
      }
    }

    refresh() {
      // One refresh at a time: a slow database must not pile requests up.
      if (!this.refreshing) {
        this.refreshing = Promise.all([this.load(), this.loadObservations(), this.loadEvents()]).finally(() => {
          this.refreshing = null;
        });
      }
      return this.refreshing;
    }

    async loadObservations() {
      const root = this.observations.transport;
      try {
        const body = await getJSON(this.urls.observations);
        this.observations.renderTransport(body.transport);
        this.observations.renderSnapshot(body.capabilities, body.requirements);
        this.observations.renderHealth(body.health || []);
        this.observations.renderDistributions(body.distributions || []);
        if (root) root.dataset.loaded = "true";
      } catch (err) {
        // Not knowing is "unknown", with the reason; never a guess.
        this.observations.renderTransport({ state: "unknown", reason: `could not load transport health: ${err.message}` });
      }
    }

    async loadEvents() {
      try {
        const body = await getJSON(`${this.urls.events}?kind=event&limit=${RECENT_EVENTS}`);
        this.observations.renderEvents(body.results || []);
      } catch (err) {
        if (this.observations.eventsCount) this.observations.eventsCount.textContent = `could not load events: ${err.message}`;
      }
    }

    async load() {
      let body;
      try {
        body = await getJSON(this.urls.series);
      } catch (err) {
        this.statusEl.textContent = `Could not load series: ${err.message}`;
        return;
      }
      const list = Array.isArray(body) ? body : body.results || [];
      this.generation += 1;
      this.emptyEl.hidden = list.length > 0;

      const counts = { observation: 0, training: 0, other: 0 };
      for (const s of list) {
        let card = this.cards.get(s.key);
        if (!card) {
          card = new ChartCard(s, this.cardHooks);
          this.cards.set(s.key, card);
          this.groups[card.group].grid.appendChild(card.el);
          this.observer.observe(card.el);
        }
        counts[card.group] += 1;
        card.setSummary(s);
      }
      for (const name of GROUPS) {
        const g = this.groups[name];
        if (g.section) g.section.hidden = counts[name] === 0;
        if (g.count) g.count.textContent = counts[name] ? `${formatCount(counts[name])} series` : "";
      }
      const due = list.map((s) => this.cards.get(s.key)).filter((c) => c.visible);
      await pool(due, CONCURRENT_FETCHES, (card) => this.loadCard(card));

      const time = new Date().toLocaleTimeString();
      this.statusEl.textContent = list.length
        ? `${list.length} series · updated ${time}${this.live ? " · refreshing every 5 s" : ""}`
        : `No series · checked ${time}`;
      this.container.dataset.seriesCount = String(list.length);
      this.container.dataset.generation = String(this.generation);
    }

    loadCard(card) {
      // The observer and a refresh can both ask for the same card; fetch it once.
      if (!card.loading) {
        card.loading = this.fetchCard(card).finally(() => {
          card.loading = null;
        });
      }
      return card.loading;
    }

    zoomCard(card, zoom) {
      card.setZoom(zoom);
      card.el.dataset.drawn = "false";
      this.fetchCard(card, true);
    }

    async fetchCard(card, force = false) {
      if (!force && card.loadedGeneration === this.generation) return;
      const generation = this.generation;
      if (!card.plotEl.clientWidth) return; // hidden tab: load when shown
      const seq = ++card.seq;
      // One bucket per pixel, for the whole series or for the zoom window.
      const params = new URLSearchParams({ key: card.key, buckets: String(Math.min(MAX_BUCKETS, card.width())) });
      if (card.zoom) {
        params.set("start", String(card.zoom.start));
        params.set("end", String(card.zoom.end));
      }
      try {
        const body = await getJSON(`${this.urls.seriesPoints}?${params}`);
        if (seq !== card.seq) return; // a newer zoom or reset has been asked for
        if (body.summary) card.setSummary(body.summary);
        card.draw(body.buckets || []);
        card.loadedGeneration = generation;
      } catch (err) {
        if (seq !== card.seq) return;
        card.note.hidden = false;
        card.note.textContent = `Could not load points: ${err.message}`;
      }
    }

    onIntersect(entries) {
      const due = [];
      for (const entry of entries) {
        const card = this.cards.get(entry.target.dataset.seriesKey);
        if (!card) continue;
        card.visible = entry.isIntersecting;
        if (card.visible && card.loadedGeneration !== this.generation) due.push(card);
      }
      if (due.length) pool(due, CONCURRENT_FETCHES, (card) => this.loadCard(card));
    }
  }

  window.TunePlane = window.TunePlane || {};
  window.TunePlane.ChartsPanel = ChartsPanel;
  window.TunePlane.formatValue = formatValue;
})();
