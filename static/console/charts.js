/*
 * Scalar charts: one uPlot chart per series key.
 *
 * The server reduces each series to at most `buckets` buckets (min, max, mean), and we
 * ask for one bucket per pixel of chart width, so a chart never draws more than it can
 * show. The min-max band keeps a one-step spike visible after the mean has averaged it
 * away. A run may have thousands of series: cards are cheap, but points are fetched and
 * drawn only for cards that are on (or near) the screen.
 */
(function () {
  "use strict";

  const CHART_HEIGHT = 190;
  const MAX_BUCKETS = 5000; // the API's limit
  const CONCURRENT_FETCHES = 6;
  const MEAN = "#2563eb";
  const EDGE = "rgba(37, 99, 235, 0.35)";
  const BAND = "rgba(37, 99, 235, 0.12)";

  /** Compact numbers for summaries, ticks and the legend: 4 significant digits,
   *  exponent form for the very small and very large (learning rates, token counts). */
  function formatValue(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "—";
    const abs = Math.abs(v);
    if (abs !== 0 && (abs >= 1e6 || abs < 1e-3)) {
      return v.toExponential(3).replace(/\.?0+e/, "e"); // 1.000e-5 -> 1e-5
    }
    return String(Number(v.toPrecision(4)));
  }

  /** Room for the widest tick label on the y axis, so 2.5e-6 is not cut off. */
  function axisSize(u, values) {
    const longest = (values || []).reduce((n, v) => Math.max(n, String(v).length), 0);
    return Math.max(40, 14 + longest * 7);
  }

  function formatCount(n) {
    return Number(n || 0).toLocaleString();
  }

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

  class ChartCard {
    constructor(key) {
      this.key = key;
      this.plot = null;
      this.loading = null;
      this.loadedGeneration = -1;
      this.visible = false;

      this.el = document.createElement("figure");
      this.el.className = "chart-card";
      this.el.dataset.seriesKey = key;

      const head = document.createElement("figcaption");
      head.className = "chart-head";
      const title = document.createElement("span");
      title.className = "chart-title mono";
      title.textContent = key;
      title.title = key;
      head.appendChild(title);

      this.summary = document.createElement("dl");
      this.summary.className = "chart-summary";
      this.fields = {};
      for (const [name, label] of [
        ["last", "last"],
        ["min", "min"],
        ["max", "max"],
        ["count", "count"],
        ["invalid_count", "invalid"],
      ]) {
        const dt = document.createElement("dt");
        dt.textContent = label;
        const dd = document.createElement("dd");
        dd.className = "mono";
        dd.dataset.field = name;
        dd.textContent = "—";
        this.summary.append(dt, dd);
        this.fields[name] = dd;
      }

      this.plotEl = document.createElement("div");
      this.plotEl.className = "chart-plot";
      this.plotEl.style.minHeight = `${CHART_HEIGHT}px`;
      this.note = document.createElement("p");
      this.note.className = "chart-note muted small";
      this.note.hidden = true;

      const body = document.createElement("div");
      body.className = "chart-body";
      body.append(this.plotEl, this.summary);
      this.el.append(head, body, this.note);
    }

    setSummary(s) {
      this.fields.last.textContent = formatValue(s.last);
      this.fields.min.textContent = formatValue(s.min);
      this.fields.max.textContent = formatValue(s.max);
      this.fields.count.textContent = formatCount(s.count);
      this.fields.invalid_count.textContent = formatCount(s.invalid_count);
      this.fields.invalid_count.classList.toggle("warn-text", Number(s.invalid_count) > 0);
    }

    width() {
      return Math.max(200, Math.floor(this.plotEl.clientWidth));
    }

    draw(buckets) {
      const steps = [];
      const mean = [];
      const min = [];
      const max = [];
      let points = 0;
      for (const b of buckets) {
        steps.push(b.step);
        mean.push(b.mean);
        min.push(b.min);
        max.push(b.max);
        points += Number(b.count) || 0;
      }
      const data = [steps, mean, min, max];

      if (!this.plot) {
        this.plot = new window.uPlot(this.options(), data, this.plotEl);
      } else {
        this.plot.setData(data);
      }
      // Read by tests (and handy in devtools): what the chart actually shows.
      this.el.dataset.pointCount = String(points);
      this.el.dataset.bucketCount = String(buckets.length);
      this.el.dataset.drawn = "true";
      this.note.hidden = buckets.length > 0;
      this.note.textContent = buckets.length ? "" : "No finite values yet (NaN and ±Infinity are counted, not drawn).";
    }

    options() {
      const value = (u, v) => formatValue(v);
      return {
        width: this.width(),
        height: CHART_HEIGHT,
        scales: { x: { time: false } },
        cursor: { drag: { x: true, y: false } },
        legend: { live: true },
        series: [
          { label: "step", value: (u, v) => (v === null || v === undefined ? "—" : String(v)) },
          { label: "mean", stroke: MEAN, width: 1.5, value },
          { label: "min", stroke: EDGE, width: 1, value, points: { show: false } },
          { label: "max", stroke: EDGE, width: 1, value, points: { show: false } },
        ],
        // Fill between max (3) and min (2).
        bands: [{ series: [3, 2], fill: BAND }],
        axes: [
          { stroke: "#5b6473", grid: { stroke: "#eef0f3" }, ticks: { stroke: "#dfe3e8" } },
          { stroke: "#5b6473", size: axisSize, grid: { stroke: "#eef0f3" }, ticks: { stroke: "#dfe3e8" },
            values: (u, splits) => splits.map(formatValue) },
        ],
      };
    }

    resize() {
      if (this.plot && this.plotEl.clientWidth > 0) {
        this.plot.setSize({ width: this.width(), height: CHART_HEIGHT });
      }
    }
  }

  class ChartsPanel {
    /**
     * @param {HTMLElement} panel the Charts tab panel
     * @param {{series: string, seriesPoints: string}} urls
     */
    constructor(panel, urls) {
      this.urls = urls;
      this.container = panel.querySelector("[data-role=charts]");
      this.emptyEl = panel.querySelector("[data-role=charts-empty]");
      this.statusEl = panel.querySelector("[data-role=charts-status]");
      this.cards = new Map();
      this.generation = 0; // bumps on every series-list refresh; stale cards reload
      this.active = false;
      this.live = false;
      this.timer = 0;
      this.refreshing = null;

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
        this.refreshing = this.load().finally(() => {
          this.refreshing = null;
        });
      }
      return this.refreshing;
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

      for (const s of list) {
        let card = this.cards.get(s.key);
        if (!card) {
          card = new ChartCard(s.key);
          this.cards.set(s.key, card);
          this.container.appendChild(card.el);
          this.observer.observe(card.el);
        }
        card.setSummary(s);
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

    async fetchCard(card) {
      if (card.loadedGeneration === this.generation) return;
      const generation = this.generation;
      if (!card.plotEl.clientWidth) return; // hidden tab: load when shown
      const buckets = Math.min(MAX_BUCKETS, card.width());
      const url = `${this.urls.seriesPoints}?key=${encodeURIComponent(card.key)}&buckets=${buckets}`;
      try {
        const body = await getJSON(url);
        if (body.summary) card.setSummary(body.summary);
        card.draw(body.buckets || []);
        card.loadedGeneration = generation;
      } catch (err) {
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
