/*
 * Live job logs: an EventSource on /api/v1/jobs/<id>/logs/stream feeding a capped,
 * batched log view.
 *
 * Log text is untrusted (it is whatever train.sh printed), so it only ever reaches the
 * DOM through textContent. Lines are buffered and appended once per animation frame:
 * a chatty trainer can send thousands of lines a second, and one DOM append per line
 * would freeze the tab.
 */
(function () {
  "use strict";

  // Lines kept in the DOM. Older ones are dropped from view (the API still has them).
  const MAX_DOM_LINES = 20000;
  // How close to the bottom (px) still counts as "following" the output.
  const FOLLOW_SLACK = 8;
  // Backoff when the browser gives up on the stream (a non-200 answer, e.g. a restart
  // mid-deploy): EventSource stops retrying then, so we reopen it ourselves.
  const REOPEN_DELAYS_MS = [2000, 5000, 10000, 30000];

  function cursorKey(line) {
    return [Number(line.attempt) || 0, Number(line.seq) || 0];
  }

  function isAfter(a, b) {
    return a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
  }

  class LogView {
    /** @param {HTMLElement} panel the Logs tab panel */
    constructor(panel) {
      this.view = panel.querySelector("[data-role=logview]");
      this.countEl = panel.querySelector("[data-role=line-count]");
      this.capNote = panel.querySelector("[data-role=cap-note]");
      this.emptyNote = panel.querySelector("[data-role=log-empty]");
      this.jumpButton = panel.querySelector("[data-role=jump]");
      this.wrapToggle = panel.querySelector("[data-role=wrap]");
      this.pending = [];
      this.frame = 0;
      this.total = 0;
      this.dropped = 0;
      this.lastAttempt = null;
      this.follow = true;

      this.view.addEventListener("scroll", () => {
        // Only a visible view has a meaningful scroll position.
        if (this.view.clientHeight === 0) return;
        this.follow = this.atBottom();
        this.jumpButton.hidden = this.follow;
      });
      this.jumpButton.addEventListener("click", () => {
        this.follow = true;
        this.jumpButton.hidden = true;
        this.scrollToEnd();
      });
      this.wrapToggle.addEventListener("change", () => {
        this.view.classList.toggle("wrap", this.wrapToggle.checked);
      });
    }

    atBottom() {
      const v = this.view;
      return v.scrollHeight - v.scrollTop - v.clientHeight <= FOLLOW_SLACK;
    }

    scrollToEnd() {
      this.view.scrollTop = this.view.scrollHeight;
    }

    /** Called when the Logs tab becomes visible: catch up with lines that arrived hidden. */
    shown() {
      if (this.follow) this.scrollToEnd();
    }

    append(line) {
      this.pending.push(line);
      this.total += 1;
      // requestAnimationFrame does not run in a background tab; do not let the buffer
      // grow past what would be kept anyway.
      if (this.pending.length > MAX_DOM_LINES) {
        const excess = this.pending.length - MAX_DOM_LINES;
        this.pending.splice(0, excess);
        this.dropped += excess;
      }
      if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
    }

    flush() {
      this.frame = 0;
      const lines = this.pending;
      this.pending = [];
      if (!lines.length) return;

      const frag = document.createDocumentFragment();
      for (const line of lines) {
        if (line.attempt !== this.lastAttempt && (this.lastAttempt !== null || line.attempt > 1)) {
          const sep = document.createElement("div");
          sep.className = "ln-attempt";
          sep.textContent = `attempt ${line.attempt}`;
          frag.appendChild(sep);
        }
        this.lastAttempt = line.attempt;

        const row = document.createElement("div");
        row.className = line.stream === "stderr" ? "ln err" : "ln";
        const no = document.createElement("span");
        no.className = "ln-no";
        no.textContent = String(line.seq);
        const text = document.createElement("span");
        text.className = "ln-text";
        text.textContent = line.text;
        row.append(no, text);
        frag.appendChild(row);
      }
      this.view.appendChild(frag);
      this.trim();

      this.countEl.textContent = this.total.toLocaleString();
      this.emptyNote.hidden = true;
      if (this.follow) this.scrollToEnd();
    }

    trim() {
      const excess = this.view.childElementCount - MAX_DOM_LINES;
      if (excess <= 0) return;
      // One range deletion instead of thousands of removeChild calls.
      const range = document.createRange();
      range.setStartBefore(this.view.firstElementChild);
      range.setEndAfter(this.view.children[excess - 1]);
      range.deleteContents();
      this.dropped += excess;
      this.capNote.hidden = false;
      this.capNote.textContent =
        `Showing the last ${MAX_DOM_LINES.toLocaleString()} lines; ` +
        `${this.dropped.toLocaleString()} older ones left the view (tp job logs has them all).`;
    }
  }

  class LogStream {
    /**
     * @param {string} url the SSE endpoint
     * @param {{onLine: Function, onState: Function, onEnd: Function, onStatus: Function}} handlers
     */
    constructor(url, handlers) {
      this.url = url;
      this.handlers = handlers;
      this.source = null;
      this.lastId = "";
      this.lastKey = [0, 0];
      this.finished = false;
      this.reopenAttempt = 0;
      this.reopenTimer = 0;
    }

    start() {
      if (this.source || this.finished) return;
      this.open();
    }

    open() {
      this.reopenTimer = 0;
      // The browser resends the last id itself on its automatic reconnects (header
      // Last-Event-ID); when we reopen by hand it goes in the query string instead.
      const url = this.lastId ? `${this.url}?lastEventId=${encodeURIComponent(this.lastId)}` : this.url;
      const source = new EventSource(url);
      this.source = source;
      this.status("connecting");

      source.onopen = () => {
        this.reopenAttempt = 0;
        this.status("live");
      };
      source.addEventListener("log", (event) => {
        let line;
        try {
          line = JSON.parse(event.data);
        } catch (err) {
          return;
        }
        // Resume is exact on the server side; this guard only matters if a hand-made
        // reopen ever overlaps with the browser's own reconnect.
        const key = cursorKey(line);
        if (!isAfter(key, this.lastKey)) return;
        this.lastKey = key;
        this.lastId = event.lastEventId || line.cursor || this.lastId;
        this.handlers.onLine(line);
      });
      source.addEventListener("state", (event) => {
        try {
          this.handlers.onState(JSON.parse(event.data));
        } catch (err) {
          /* a malformed state frame is not worth breaking the stream for */
        }
      });
      source.addEventListener("end", () => {
        // Without close() EventSource would reconnect forever to a finished stream.
        this.finished = true;
        source.close();
        this.source = null;
        this.status("finished");
        this.handlers.onEnd();
      });
      source.onerror = () => {
        if (this.finished) return;
        if (source.readyState === EventSource.CLOSED) {
          // The browser gave up (non-200 answer or wrong content type): retry ourselves.
          this.source = null;
          const delay = REOPEN_DELAYS_MS[Math.min(this.reopenAttempt, REOPEN_DELAYS_MS.length - 1)];
          this.reopenAttempt += 1;
          this.status("reconnecting");
          this.reopenTimer = window.setTimeout(() => this.open(), delay);
        } else {
          this.status("reconnecting");
        }
      };
    }

    stop() {
      if (this.reopenTimer) window.clearTimeout(this.reopenTimer);
      if (this.source) this.source.close();
      this.source = null;
    }

    status(name) {
      this.handlers.onStatus(name);
    }
  }

  window.TunePlane = window.TunePlane || {};
  window.TunePlane.LogView = LogView;
  window.TunePlane.LogStream = LogStream;
})();
