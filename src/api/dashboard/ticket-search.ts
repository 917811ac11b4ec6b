// The dashboard's ticket search (docs/dashboard.md): type a ticket id, see why it waits. It asks
// GET /admin/v1/queues/{queue_id}/tickets/{ticket_id}:explain of the chosen queue, or of every queue in turn
// until one knows the ticket, and shows the answer (docs/explain-and-statistics.md) as the JSON mapping
// gives it. Plain browser JavaScript in strings, joined into the page by dashboard-page.ts.

export const TICKET_SEARCH_STYLE = `
  #search form { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
  #search input { font: inherit; padding: 4px 8px; width: 330px; border: 1px solid var(--line); border-radius: 6px; }
  #search select, #search button { font: inherit; padding: 4px 10px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
  #explain { margin-top: 10px; }
  #explain .error { color: var(--warn); }
  #explain ul.notes { margin: 6px 0; padding-left: 18px; color: var(--muted); }
  #explain td.fail { color: var(--warn); font-weight: 600; }
`;

export const TICKET_SEARCH_HTML = `
  <section id="search">
    <h2>Why is this ticket waiting?</h2>
    <form id="search-form">
      <input id="search-ticket" name="ticket" placeholder="ticket id (UUID)" autocomplete="off" spellcheck="false">
      <select id="search-queue"><option value="">any queue</option></select>
      <button type="submit">Explain</button>
    </form>
    <div id="explain"></div>
  </section>
`;

export const TICKET_SEARCH_SCRIPT = `
var COUNTS = [["inRuleset", "in ruleset"], ["partyFits", "party fits"], ["skillWithinSpread", "skill within spread"],
  ["attributesCompatible", "attributes compatible"], ["acceptableHost", "acceptable host"], ["all", "all rules"]];

function secs(n) { return fmt(n || 0, 1) + " s"; }
function estimateText(e) {
  if (!e) return "–";
  return e.available ? secs(e.remainingSecs) + " (from " + (e.basedOnTickets || 0) + " tickets)" : "unknown: " + e.reason;
}

function searchQueues(queueIds) {
  var select = document.getElementById("search-queue");
  var known = Array.prototype.map.call(select.options, function (o) { return o.value; });
  queueIds.forEach(function (id) { if (known.indexOf(id) < 0) select.appendChild(el("option", { value: id, text: id })); });
}

function explainIn(queueIds, ticketId) {
  if (queueIds.length === 0) return Promise.resolve({ status: 404, body: { message: "no queue holds ticket " + ticketId } });
  var path = "/admin/v1/queues/" + encodeURIComponent(queueIds[0]) + "/tickets/" + encodeURIComponent(ticketId) + ":explain";
  return api(path).then(function (res) {
    return res.json().then(function (body) {
      if (res.status === 404 && queueIds.length > 1) return explainIn(queueIds.slice(1), ticketId);
      return { status: res.status, body: body };
    });
  });
}

function renderExplanation(x) {
  var box = document.getElementById("explain");
  var refusal = x.lastRefusal ? x.lastRefusal.rule + " (tick at " + new Date(x.lastRefusal.tickAt).toLocaleTimeString() + ")" : "–";
  var rows = (x.rulesets || []).map(function (r) {
    var c = r.candidates || {};
    var b = r.bounds || {};
    var next = r.nextRelaxation ? "at " + secs(r.nextRelaxation.atWaitSecs) + " waited (in " + secs(r.nextRelaxation.inSecs) + ")" + (r.nextRelaxation.continuous ? ", widening" : "") : "no further relaxation";
    return el("tr", { "data-ruleset": r.rulesetId }, [el("td", { text: r.rulesetId }),
      el("td", { text: "spread " + fmt(b.maxSkillSpread || 0) + ", imbalance " + fmt(b.maxTeamImbalance || 0) + ", latency " + (b.maxLatencyMs || 0) + " ms" + (b.hostRequired ? ", common host required" : ", any host") }),
      el("td", { text: next })].concat(COUNTS.map(function (k) {
        var n = c[k[0]] || 0;
        return el("td", { class: "num" + (n === 0 ? " fail" : ""), "data-count": k[0], text: String(n) });
      })).concat([el("td", { class: "num", text: (c.playersAll || 0) + " / " + (c.playersNeeded || 0) }), el("td", { text: estimateText(r.estimatedWait) })]));
  });
  box.replaceChildren(
    el("div", { class: "figures" }, [
      figure(x.state, "state" + (x.matchId ? " (match " + x.matchId.slice(0, 8) + ")" : "")),
      figure(secs(x.waitSecs), "waited"),
      el("div", { class: "figure", "data-field": "last-refusal" }, [el("b", { text: refusal }), el("span", { text: "refused by, last tick" })]),
      el("div", { class: "figure", "data-field": "estimate" }, [el("b", { text: x.estimatedWait && x.estimatedWait.available ? secs(x.estimatedWait.remainingSecs) : "–" }), el("span", { text: "estimated time to match" })]),
      figure(x.scope === "ANSWER_SCOPE_FOLLOWER" ? "follower" : "leader", "answered by"),
    ]),
    el("ul", { class: "notes" }, (x.notes || []).concat(x.estimatedWait && !x.estimatedWait.available ? [x.estimatedWait.reason] : []).map(function (n) { return el("li", { text: n }); })),
    rows.length === 0 ? el("p", { class: "empty", text: x.state === "resolved" ? "matched: no longer waiting" : "no per-ruleset counts" })
      : el("table", { class: "explain-rulesets" }, [el("thead", {}, [el("tr", {}, ["ruleset", "bounds in force", "next relaxation"].concat(COUNTS.map(function (k) { return k[1]; })).concat(["players / needed", "estimate"]).map(function (h) { return el("th", { text: h }); }))]), el("tbody", {}, rows)])
  );
  box.removeAttribute("data-error");
  box.setAttribute("data-ticket", x.ticketId);
  box.setAttribute("data-state", x.state);
}

document.getElementById("search-form").addEventListener("submit", function (event) {
  event.preventDefault();
  var ticketId = document.getElementById("search-ticket").value.trim();
  var chosen = document.getElementById("search-queue").value;
  var box = document.getElementById("explain");
  var queueIds = chosen ? [chosen] : Object.keys(cards);
  box.removeAttribute("data-ticket");
  box.replaceChildren(el("p", { class: "empty", text: "asking…" }));
  explainIn(queueIds, ticketId)
    .then(function (r) {
      if (r.status === 200) return renderExplanation(r.body);
      box.setAttribute("data-error", String(r.status));
      box.replaceChildren(el("p", { class: "error", text: (r.body && r.body.message) || "answered " + r.status }));
    })
    .catch(function (err) { box.replaceChildren(el("p", { class: "error", text: "not reachable: " + err.message })); });
});
`;
