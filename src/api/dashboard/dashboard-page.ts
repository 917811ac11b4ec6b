// The dashboard page: plain HTML, CSS and browser JavaScript, no build step. It polls GET /admin/v1/activity
// every two seconds and draws with uPlot (served next to it, from node_modules). The release button posts
// to the operator route that releases a parked delivery; the ticket search (ticket-search.ts) asks the explain
// route. Kept as a string so that `dist/` carries it.
import { TICKET_SEARCH_HTML, TICKET_SEARCH_SCRIPT, TICKET_SEARCH_STYLE } from './ticket-search.js';

export const DASHBOARD_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Matchmaker dashboard</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/dashboard/uPlot.min.css">
<script src="/dashboard/uPlot.iife.min.js"></script>
<style>
  :root { --fg: #1d2330; --muted: #667085; --line: #e4e7ec; --bg: #f7f8fa; --warn: #b42318; --ok: #067647; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
  header { display: flex; gap: 16px; align-items: baseline; padding: 12px 20px; background: #fff; border-bottom: 1px solid var(--line); }
  header h1 { font-size: 18px; margin: 0; }
  header .status { color: var(--muted); }
  main { padding: 16px 20px; display: grid; gap: 16px; }
  section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; }
  section h2 { font-size: 16px; margin: 0 0 8px; display: flex; gap: 10px; align-items: baseline; flex-wrap: wrap; }
  .badge { font-size: 12px; font-weight: 500; padding: 1px 8px; border-radius: 10px; background: var(--line); color: var(--fg); }
  .badge.ok { background: #dcfae6; color: var(--ok); }
  .badge.warn { background: #fee4e2; color: var(--warn); }
  .figures { display: flex; gap: 28px; margin: 4px 0 10px; }
  .figure b { display: block; font-size: 22px; }
  .figure span { color: var(--muted); font-size: 12px; }
  .charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(380px, 1fr)); gap: 12px; }
  .chart h3, .tables h3 { font-size: 13px; font-weight: 600; margin: 4px 0; color: var(--muted); }
  .tables { display: grid; grid-template-columns: minmax(260px, 1fr) 2fr; gap: 16px; margin-top: 8px; }
  table { width: 100%; border-collapse: collapse; font-size: 13px; }
  th, td { text-align: left; padding: 4px 6px; border-bottom: 1px solid var(--line); vertical-align: top; }
  th { color: var(--muted); font-weight: 500; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .bar { height: 8px; background: #84adff; border-radius: 4px; }
  .empty { color: var(--muted); font-style: italic; }
  #parked.none, #login.none { display: none; }
  #parked { border-color: #fda29b; }
  button.release { font: inherit; padding: 3px 10px; border: 1px solid var(--warn); color: var(--warn); background: #fff; border-radius: 6px; cursor: pointer; }
  button.release:disabled { opacity: 0.5; cursor: default; }
  code { font-size: 12px; }
  table.stats { margin: 4px 0 10px; }
${TICKET_SEARCH_STYLE}
</style>
</head>
<body>
<header><h1>Matchmaker</h1><span class="status" id="status">loading…</span></header>
<main>
  <section id="login" class="none">
    <h2>Sign in</h2>
    <p>This service needs a bearer token with the <code>admin</code> scope. It is kept in this tab's session storage only.</p>
    <form id="login-form"><input id="login-token" type="password" autocomplete="off" placeholder="token" size="48" required> <button type="submit">Sign in</button></form>
  </section>
${TICKET_SEARCH_HTML}
  <section id="parked" class="none">
    <h2>Parked deliveries <span class="badge warn">outcomes held back</span></h2>
    <table><thead><tr><th>queue</th><th>sink</th><th>sequence</th><th>attempts</th><th>last error</th><th>parked</th><th></th></tr></thead>
    <tbody></tbody></table>
  </section>
  <div id="queues"></div>
</main>
<script>
"use strict";
var POLL_MS = 2000;
var cards = {};

function el(tag, attrs, children) {
  var node = document.createElement(tag);
  Object.keys(attrs || {}).forEach(function (k) {
    if (k === "text") node.textContent = attrs[k];
    else if (k === "class") node.className = attrs[k];
    // Through the CSSOM: the page's CSP refuses style attributes.
    else if (k === "style") node.style.cssText = attrs[k];
    else node.setAttribute(k, attrs[k]);
  });
  (children || []).forEach(function (c) { node.appendChild(c); });
  return node;
}
function fmt(n, digits) { return n === null || n === undefined ? "–" : Number(n).toFixed(digits === undefined ? 2 : digits); }
function ago(ms) {
  var s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 90 ? s + " s ago" : Math.round(s / 60) + " min ago";
}
function last(values) {
  for (var i = values.length - 1; i >= 0; i--) if (values[i] !== null) return values[i];
  return null;
}
/** Per-minute rates of 10 s buckets: their mean over the last six is the count of the last minute. */
function lastMinute(values) {
  var recent = values.slice(-6);
  return recent.reduce(function (a, b) { return a + b; }, 0) / recent.length;
}

var CHARTS = [
  { key: "flow", title: "Arrivals and matches per minute", series: [["arrivalsPerMinute", "tickets created", "#2e90fa"], ["matchesPerMinute", "matches", "#12b76a"], ["playersPerMinute", "players matched", "#7a5af8"]] },
  { key: "wait", title: "Wait from creation to match (s)", series: [["waitP50Secs", "p50", "#2e90fa"], ["waitP95Secs", "p95", "#f04438"]] },
  { key: "quality", title: "Match quality (mean, in ruleset units)", series: [["skillSpreadMean", "skill spread", "#f79009"], ["teamImbalanceMean", "team imbalance", "#7a5af8"]] },
  { key: "pool", title: "Pool size", series: [["poolSize", "active tickets", "#475467"]] },
];

function chartData(spec, series) {
  var data = [series.startMs.map(function (ms) { return ms / 1000; })];
  spec.series.forEach(function (s) { data.push(series[s[0]]); });
  return data;
}

function makeCard(q) {
  var title = el("h2", {}, [el("span", { text: q.queueId })]);
  var badges = el("span", { class: "badges" });
  title.appendChild(badges);
  var figures = el("div", { class: "figures" });
  var charts = el("div", { class: "charts" });
  var rules = el("tbody");
  var stats = el("tbody");
  var matches = el("tbody", { class: "recent-matches" });
  var card = el("section", { class: "queue", "data-queue": q.queueId }, [
    title, figures,
    el("h3", { class: "stats-title", text: "Statistics" }),
    el("table", { class: "stats" }, [el("thead", {}, [el("tr", {}, ["ruleset", "tickets waiting", "players waiting", "matches / min", "wait p50", "p95", "p99", "estimated wait, new ticket"].map(function (h) { return el("th", { text: h }); }))]), stats]),
    charts,
    el("div", { class: "tables" }, [
      el("div", {}, [el("h3", { text: "Why candidates failed (last 5 min)" }),
        el("table", { class: "rules" }, [el("thead", {}, [el("tr", {}, [el("th", { text: "ruleset" }), el("th", { text: "rule" }), el("th", { text: "refused" }), el("th", {})])]), rules])]),
      el("div", {}, [el("h3", { text: "Recent matches" }),
        el("table", {}, [el("thead", {}, [el("tr", {}, ["when", "match", "ruleset", "teams", "host", "spread", "imbalance", "longest wait"].map(function (h) { return el("th", { text: h }); }))]), matches])]),
    ]),
  ]);
  document.getElementById("queues").appendChild(card);
  var plots = {};
  CHARTS.forEach(function (spec) {
    var box = el("div", { class: "chart", "data-chart": spec.key }, [el("h3", { text: spec.title })]);
    charts.appendChild(box);
    var opts = {
      width: 400, height: 170,
      scales: { x: { time: true } },
      series: [{}].concat(spec.series.map(function (s) { return { label: s[1], stroke: s[2], width: 2, spanGaps: false, points: { show: true, size: 4 } }; })),
      axes: [{}, { size: 50 }],
      legend: { live: false },
    };
    plots[spec.key] = new uPlot(opts, chartData(spec, q.series), box);
  });
  var card0 = { card: card, badges: badges, figures: figures, rules: rules, stats: stats, matches: matches, plots: plots };
  new ResizeObserver(function () {
    CHARTS.forEach(function (spec) {
      var w = plots[spec.key].root.parentElement.clientWidth;
      if (w > 0) plots[spec.key].setSize({ width: w, height: 170 });
    });
  }).observe(charts);
  return card0;
}

function renderQueue(q) {
  var c = cards[q.queueId] || (cards[q.queueId] = makeCard(q));
  c.badges.replaceChildren(
    el("span", { class: "badge " + (q.state === "running" ? "ok" : "warn"), text: q.state }),
    el("span", { class: "badge " + (q.serving ? "ok" : "warn"), text: q.serving ? "serving" : "not serving" }),
    el("span", { class: "badge", text: q.leading ? "leading here" : "led by another replica" })
  );
  var s = q.series;
  c.figures.replaceChildren(
    figure(q.activeTickets, "tickets in pool"),
    figure(q.backfillRequests, "backfill requests"),
    figure(fmt(lastMinute(s.matchesPerMinute), 0), "matches, last minute"),
    figure(fmt(last(s.waitP50Secs), 1) + " / " + fmt(last(s.waitP95Secs), 1), "wait p50 / p95 (s)")
  );
  CHARTS.forEach(function (spec) { c.plots[spec.key].setData(chartData(spec, s)); });
  renderStatistics(c, q.statistics);
  var max = Math.max.apply(null, [1].concat(q.rules.map(function (r) { return r.count; })));
  c.rules.replaceChildren.apply(c.rules, q.rules.length === 0
    ? [el("tr", {}, [el("td", { colspan: "4", class: "empty", text: q.leading ? "no candidate refused" : "counted by the leading replica" })])]
    : q.rules.map(function (r) {
        return el("tr", { "data-rule": r.rule }, [el("td", { text: r.rulesetId }), el("td", { text: r.rule }), el("td", { class: "num", text: String(r.count) }),
          el("td", {}, [el("div", { class: "bar", style: "width:" + Math.round((100 * r.count) / max) + "px" })])]);
      }));
  c.matches.replaceChildren.apply(c.matches, q.recentMatches.length === 0
    ? [el("tr", {}, [el("td", { colspan: "8", class: "empty", text: "no match yet" })])]
    : q.recentMatches.map(function (m) {
        return el("tr", { "data-match-id": m.matchId }, [
          el("td", { text: ago(m.atMs) }), el("td", {}, [el("code", { text: m.matchId.slice(0, 8) })]), el("td", { text: m.rulesetId }),
          el("td", { text: m.teams.map(function (t) { return t.join(", "); }).join("  vs  ") }), el("td", { text: m.host || "–" }),
          el("td", { class: "num", text: fmt(m.skillSpread) }), el("td", { class: "num", text: fmt(m.teamImbalance) }),
          el("td", { class: "num", text: fmt(m.longestWaitMs / 1000, 1) + " s" }),
        ]);
      }));
}

/** The queue's statistics (GET /admin/v1/queues/{id}/statistics, in the activity): the queue, then each ruleset. */
function renderStatistics(c, st) {
  if (!st) return;
  c.card.querySelector(".stats-title").textContent = "Statistics (last " + fmt((st.windowSecs || 0) / 60, 1) + " min" + (st.scope === "ANSWER_SCOPE_FOLLOWER" ? ", as this follower sees it" : "") + ")";
  c.stats.replaceChildren.apply(c.stats, [st.queue].concat(st.rulesets || []).map(function (w) {
    var matched = (w.matchedTickets || 0) > 0;
    var p = function (v) { return matched ? fmt(v || 0, 1) + " s" : "–"; };
    var e = w.estimatedWaitNewTicket || {};
    return el("tr", { "data-ruleset": w.rulesetId || "(queue)" }, [el("td", { text: w.rulesetId || "whole queue" }),
      el("td", { class: "num", text: String(w.ticketsWaiting || 0) }), el("td", { class: "num", text: String(w.playersWaiting || 0) }),
      el("td", { class: "num", text: fmt(w.matchesPerMinute || 0, 1) }), el("td", { class: "num", text: p(w.waitP50Secs) }),
      el("td", { class: "num", text: p(w.waitP95Secs) }), el("td", { class: "num", text: p(w.waitP99Secs) }),
      el("td", { text: e.available ? fmt(e.remainingSecs || 0, 1) + " s" : "too little history" })]);
  }));
}

function figure(value, label) { return el("div", { class: "figure" }, [el("b", { text: String(value) }), el("span", { text: label })]); }

function renderParked(deliveries) {
  var parked = deliveries.filter(function (d) { return d.parked; });
  var section = document.getElementById("parked");
  section.className = parked.length === 0 ? "none" : "";
  var body = section.querySelector("tbody");
  body.replaceChildren.apply(body, parked.map(function (d) {
    var button = el("button", { class: "release", text: "Release" });
    button.addEventListener("click", function () { release(d.queueId, button); });
    return el("tr", { "data-queue": d.queueId }, [el("td", { text: d.queueId }), el("td", { text: d.sink }), el("td", { class: "num", text: d.parked.sequence }),
      el("td", { class: "num", text: String(d.parked.attempts) }), el("td", {}, [el("code", { text: d.parked.lastError })]), el("td", { text: ago(d.parked.parkedAtMs) }),
      el("td", {}, [button])]);
  }));
}

var TOKEN_KEY = "matchmaker.token";
/** fetch with the signed-in token (no cookie: a foreign page cannot make the browser send it); a 401 or 403 asks for a token. */
function api(path, init) {
  init = init || {};
  var headers = {};
  var token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  if (init.method === "POST") headers["Content-Type"] = "application/json";
  init.headers = headers;
  return fetch(path, init).then(function (res) {
    if (res.status === 401 || res.status === 403) document.getElementById("login").className = "";
    return res;
  });
}
document.getElementById("login-form").addEventListener("submit", function (event) {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, document.getElementById("login-token").value.trim());
  document.getElementById("login-token").value = "";
  document.getElementById("login").className = "none";
  refresh();
});

function release(queueId, button) {
  button.disabled = true;
  api("/admin/v1/queues/" + encodeURIComponent(queueId) + "/deliveries:retry", { method: "POST", body: "{}" })
    .then(function (res) { return res.json().then(function (body) { if (!res.ok) throw new Error(body.message || res.status); }); })
    .then(refresh)
    .catch(function (err) { button.disabled = false; setStatus("release failed: " + err.message); });
}

function setStatus(text) { document.getElementById("status").textContent = text; }

function refresh() {
  return api("/admin/v1/activity")
    .then(function (res) { if (!res.ok) throw new Error("activity answered " + res.status); return res.json(); })
    .then(function (a) {
      a.queues.forEach(renderQueue);
      searchQueues(a.queues.map(function (q) { return q.queueId; }));
      Object.keys(cards).forEach(function (id) {
        if (!a.queues.some(function (q) { return q.queueId === id; })) { cards[id].card.remove(); delete cards[id]; }
      });
      renderParked(a.deliveries);
      setStatus(a.queues.length + " queue(s) · updated " + new Date(a.atMs).toLocaleTimeString());
    })
    .catch(function (err) { setStatus("not reachable: " + err.message); });
}

${TICKET_SEARCH_SCRIPT}
refresh();
setInterval(refresh, POLL_MS);
</script>
</body>
</html>
`;
